/*
 * hostmem.c - see hostmem.h.
 */
#include "core/hostmem.h"

#include <stdint.h>
#include <stdlib.h>
#ifdef _WIN32
#include <malloc.h>
#include <windows.h>
#else
#include <sys/mman.h>
#endif

#define HDR 64 /* keeps the data 64-byte aligned */
#define MAGIC_HEAP 0x67736268656170ull /* "gsbheap" */
#define MAGIC_MAP 0x6773626d6170ull    /* "gsbmap" */

typedef struct block_hdr {
    uint64_t magic;
    size_t map_len; /* MAGIC_MAP: the mapping's length */
} block_hdr;

static void *alloc_block(size_t n, int map)
{
    if (n > SIZE_MAX - HDR - 64)
        return NULL;
    size_t total = (n + HDR + 63) & ~(size_t)63;
    char *base;
    block_hdr h;
    if (map || total >= GSB__HOSTMEM_BIG) {
#ifdef _WIN32
        base = VirtualAlloc(NULL, total, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
        if (!base)
            return NULL;
#else
        base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            return NULL;
#endif
#ifdef MADV_HUGEPAGE
        (void)madvise(base, total, MADV_HUGEPAGE); /* advice: fine to be refused */
#endif
        h.magic = MAGIC_MAP;
        h.map_len = total;
    } else {
#ifdef _WIN32
        base = _aligned_malloc(total, 64);
#else
        base = aligned_alloc(64, total);
#endif
        if (!base)
            return NULL;
        h.magic = MAGIC_HEAP;
        h.map_len = 0;
    }
    *(block_hdr *)base = h;
    return base + HDR;
}

void *gsb__host_alloc(size_t n) { return alloc_block(n, 0); }

void *gsb__host_alloc_mapped(size_t n) { return alloc_block(n, 1); }

void gsb__host_free(void *p)
{
    if (!p)
        return;
    char *base = (char *)p - HDR;
    block_hdr *h = (block_hdr *)base;
    if (h->magic == MAGIC_MAP) {
        size_t len = h->map_len;
        h->magic = 0;
#ifdef _WIN32
        (void)len;
        VirtualFree(base, 0, MEM_RELEASE);
#else
        munmap(base, len);
#endif
    } else if (h->magic == MAGIC_HEAP) {
        h->magic = 0;
#ifdef _WIN32
        _aligned_free(base);
#else
        free(base);
#endif
    } else {
        abort(); /* not a gsb__host_alloc block: a bug that must not go unnoticed */
    }
}
