/*
 * budget.c - gsbd's memory: the server-wide budget for what clients make it
 * hold, and handing freed heap back to the system.
 *
 * The budget counts the host memory clients decide the size of: requests
 * being received (frame heads, inline sections, chunked arrays), data
 * handles kept in host memory, shared-memory segments mapped for a session,
 * and the pinned staging buffers that stream uploads to the GPU.  Memory is
 * taken from the budget before it is allocated and given back when freed; a
 * take that would pass the limit fails with GSB_ENOMEM (MemoryError in
 * Python) and a message naming the budget, what is using it and the flag
 * that sets it.  Models' fitted state and reply arrays are not counted: the
 * engine sizes them, not the client's bytes.
 *
 * The default is three quarters of the machine's memory (or of the cgroup's
 * limit when that is lower), leaving the rest to the engine and the system.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/error.h"
#include "server/server.h"

const char *const gsb__mem_kind_labels[GSB__MEM_KINDS] = {"requests", "data", "shm", "staging"};

/* cgroup v2's memory.max (v1's limit_in_bytes), or 0 when unlimited/unknown */
static uint64_t cgroup_limit(void)
{
    static const char *const files[] = {"/sys/fs/cgroup/memory.max",
                                        "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "re");
        if (!f)
            continue;
        char line[64] = "";
        int got = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        char *end;
        unsigned long long v = got ? strtoull(line, &end, 10) : 0;
        if (got && end != line && v > 0 && v < (1ull << 62))
            return v;
    }
    return 0;
}

uint64_t gsb__budget_default_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)8 << 30;
    uint64_t cg = cgroup_limit();
    if (cg && cg < ram)
        ram = cg;
    return ram / 4 * 3;
}

static double mib(uint64_t b) { return (double)b / (1 << 20); }

int gsb__budget_take(gsb__budget *b, int kind, uint64_t n, const char *what)
{
    if (n == 0)
        return GSB_OK;
    unsigned long long used = atomic_load(&b->used);
    do {
        if (n > b->limit || used > b->limit - n) {
            atomic_fetch_add(&b->refusals, 1);
            return gsb__err(GSB_ENOMEM,
                            "gsbd's memory budget cannot take %s (%.1f MiB): %.1f of its %.1f "
                            "MiB are in use (requests %.1f, data handles %.1f, shared memory "
                            "%.1f, staging %.1f MiB). Free data handles or wait for other "
                            "uploads to finish, or start gsbd with a larger --memory-budget-mb",
                            what, mib(n), mib(used), mib(b->limit),
                            mib(atomic_load(&b->kind[GSB__MEM_REQUESTS])),
                            mib(atomic_load(&b->kind[GSB__MEM_DATA])),
                            mib(atomic_load(&b->kind[GSB__MEM_SHM])),
                            mib(atomic_load(&b->kind[GSB__MEM_STAGING])));
        }
    } while (!atomic_compare_exchange_weak(&b->used, &used, used + n));
    atomic_fetch_add(&b->kind[kind], n);
    return GSB_OK;
}

void gsb__budget_give(gsb__budget *b, int kind, uint64_t n)
{
    if (!b || n == 0)
        return;
    atomic_fetch_sub(&b->kind[kind], n);
    atomic_fetch_sub(&b->used, n);
}

/*
 * glibc gives each thread its own malloc arena, and once a buffer of up to
 * 32 MiB came from mmap and was freed, it raises its mmap threshold to that
 * size and its trim threshold to twice that: from then on such buffers come
 * from the arenas and what they held stays with the process.  One thread per
 * connection meets every arena, so a few thousand connections that sent
 * large frame heads or inline sections left about 4 MiB resident in each
 * arena (66 MB on the 2-core VM, more where there are more arenas).  A
 * process that is nothing but a server fixes both thresholds (gsb_serve);
 * a server inside a program leaves that program's malloc alone and only
 * trims the heap, at most once a second, after connections ended.
 */
void gsb__heap_fix_thresholds(void)
{
#ifdef __GLIBC__
    /* our own large buffers (core/hostmem.c) are mapped from 4 MiB up:
     * malloc does the same for its own, and setting it stops the moving
     * thresholds (the trim threshold keeps its 128 KiB default) */
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
#endif
}

void gsb__heap_trim(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
