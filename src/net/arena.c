/*
 * arena.c - the client's arena for remote sessions (see arena.h): memfd
 * segments shared with gsbd on Unix sockets, ordinary memory on TCP.
 *
 * Bookkeeping lives here, never inside the segments: the server maps the
 * same pages, and a block header it (or a buggy caller) could overwrite must
 * not be able to corrupt the allocator.  Live blocks are kept sorted by
 * address so a free or a lookup is a binary search.
 */
#include "net/arena.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "core/error.h"

typedef struct span {
    size_t off, len;
} span;

typedef struct segment {
    uint64_t id;
    char *base;
    size_t size;
    span *free_list; /* sorted by offset, no two adjacent */
    int n_free, cap_free;
} segment;

typedef struct block {
    char *ptr;
    size_t len; /* rounded length */
    int seg;    /* index into segs, -1 for private memory */
} block;

struct gsb__rarena {
    pthread_mutex_t lock;
    int shared;
    gsb__rarena_attach_fn attach;
    gsb__rarena_detach_fn detach;
    void *ctx;
    segment *segs;
    int n_segs, cap_segs;
    uint64_t next_id;
    block *blocks; /* sorted by ptr */
    int n_blocks, cap_blocks;
};

/* private (unshared) blocks: the CRT of Windows has no aligned_alloc */
#ifdef _WIN32
#define priv_alloc(align, n) _aligned_malloc((n), (align))
#define priv_free _aligned_free
#else
#define priv_alloc aligned_alloc
#define priv_free free
#endif

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return GSB_OK;
    int ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return gsb__err(GSB_ENOMEM, "out of memory");
    *arr = p;
    *cap = ncap;
    return GSB_OK;
}

int gsb__rarena_create(int shared, gsb__rarena_attach_fn attach, gsb__rarena_detach_fn detach,
                      void *ctx, gsb__rarena **out)
{
    *out = NULL;
    gsb__rarena *a = calloc(1, sizeof *a);
    if (!a)
        return gsb__err(GSB_ENOMEM, "out of memory");
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        return gsb__err(GSB_ENOMEM, "cannot create the arena's lock");
    }
    a->shared = shared != 0;
    a->attach = attach;
    a->detach = detach;
    a->ctx = ctx;
    a->next_id = 1;
    *out = a;
    return GSB_OK;
}

int gsb__rarena_is_shared(const gsb__rarena *a) { return a && a->shared; }

void gsb__rarena_destroy(gsb__rarena *a)
{
    if (!a)
        return;
    for (int i = 0; i < a->n_blocks; i++)
        if (a->blocks[i].seg < 0)
            priv_free(a->blocks[i].ptr);
    for (int i = 0; i < a->n_segs; i++) {
        if (a->detach)
            a->detach(a->ctx, a->segs[i].id);
#ifndef _WIN32
        munmap(a->segs[i].base, a->segs[i].size);
#endif
        free(a->segs[i].free_list);
    }
    free(a->segs);
    free(a->blocks);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* Index of the first block whose ptr is > p (so p's block, if any, is before it). */
static int block_upper(const gsb__rarena *a, const char *p)
{
    int lo = 0, hi = a->n_blocks;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (a->blocks[mid].ptr <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int block_insert(gsb__rarena *a, char *ptr, size_t len, int seg)
{
    GSB_TRY(grow((void **)&a->blocks, &a->cap_blocks, a->n_blocks + 1, sizeof(block)));
    int at = block_upper(a, ptr);
    memmove(&a->blocks[at + 1], &a->blocks[at], (size_t)(a->n_blocks - at) * sizeof(block));
    a->blocks[at] = (block){ptr, len, seg};
    a->n_blocks++;
    return GSB_OK;
}

/* Take len bytes (a multiple of the alignment) from segment s, first fit. */
static char *seg_take(segment *s, size_t len)
{
    for (int i = 0; i < s->n_free; i++) {
        span *f = &s->free_list[i];
        if (f->len < len)
            continue;
        char *p = s->base + f->off;
        f->off += len;
        f->len -= len;
        if (f->len == 0) {
            memmove(f, f + 1, (size_t)(s->n_free - i - 1) * sizeof(span));
            s->n_free--;
        }
        return p;
    }
    return NULL;
}

/* Return [off, off+len) to s's free list, merging with its neighbours.
 * Needs at most one more slot, reserved by the caller. */
static void seg_give(segment *s, size_t off, size_t len)
{
    int i = 0;
    while (i < s->n_free && s->free_list[i].off < off)
        i++;
    int merge_prev = i > 0 && s->free_list[i - 1].off + s->free_list[i - 1].len == off;
    int merge_next = i < s->n_free && off + len == s->free_list[i].off;
    if (merge_prev && merge_next) {
        s->free_list[i - 1].len += len + s->free_list[i].len;
        memmove(&s->free_list[i], &s->free_list[i + 1],
                (size_t)(s->n_free - i - 1) * sizeof(span));
        s->n_free--;
    } else if (merge_prev) {
        s->free_list[i - 1].len += len;
    } else if (merge_next) {
        s->free_list[i].off = off;
        s->free_list[i].len += len;
    } else {
        memmove(&s->free_list[i + 1], &s->free_list[i], (size_t)(s->n_free - i) * sizeof(span));
        s->free_list[i] = (span){off, len};
        s->n_free++;
    }
}

/* Create, map and attach a segment of at least len bytes; lock held. */
static int seg_new(gsb__rarena *a, size_t len, int *out_index)
{
    size_t size = round_up(len, GSB__RARENA_SEGMENT_ROUND);
    if (size < GSB__RARENA_MIN_SEGMENT)
        size = GSB__RARENA_MIN_SEGMENT;
    GSB_TRY(grow((void **)&a->segs, &a->cap_segs, a->n_segs + 1, sizeof(segment)));
#ifdef _WIN32
    (void)out_index;
    return gsb__err(GSB_EUNSUPPORTED, "shared-memory segments are not offered by the Windows "
                    "client");
#else
    /* sealable: gsbd seals the segment against shrinking, so no one can make
     * its mapped pages vanish under it (SIGBUS) */
    int fd = memfd_create("gsb-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return gsb__err(GSB_ENOMEM, "cannot create a shared-memory segment (memfd_create): %s",
                        strerror(errno));
    if (ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        return gsb__err(GSB_ENOMEM, "cannot size a shared-memory segment to %zu bytes: %s", size,
                        strerror(e));
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        return gsb__err(GSB_ENOMEM, "cannot map a shared-memory segment of %zu bytes: %s", size,
                        strerror(e));
    }
    segment s = {a->next_id, base, size, NULL, 0, 0};
    if (grow((void **)&s.free_list, &s.cap_free, 4, sizeof(span)) != GSB_OK) {
        munmap(base, size);
        close(fd);
        return GSB_ENOMEM;
    }
    int rc = a->attach ? a->attach(a->ctx, s.id, fd, size) : GSB_OK;
    /* the mapping (here) and the server's own mapping keep the memory alive */
    close(fd);
    if (rc != GSB_OK) {
        munmap(base, size);
        free(s.free_list);
        return rc;
    }
    a->next_id++;
    s.free_list[0] = (span){0, size};
    s.n_free = 1;
    a->segs[a->n_segs] = s;
    *out_index = a->n_segs++;
    return GSB_OK;
#endif
}

int gsb__rarena_alloc(gsb__rarena *a, size_t nbytes, void **out)
{
    *out = NULL;
    if (nbytes > SIZE_MAX / 2)
        return gsb__err(GSB_ENOMEM, "cannot allocate %zu bytes", nbytes);
    size_t len = round_up(nbytes ? nbytes : 1, GSB__RARENA_ALIGN);
    pthread_mutex_lock(&a->lock);
    int rc = GSB_OK;
    if (!a->shared) {
        char *p = priv_alloc(GSB__RARENA_ALIGN, len);
        if (!p) {
            rc = gsb__err(GSB_ENOMEM, "out of host memory allocating %zu bytes", nbytes);
        } else if ((rc = block_insert(a, p, len, -1)) != GSB_OK) {
            priv_free(p);
        } else {
            *out = p;
        }
        pthread_mutex_unlock(&a->lock);
        return rc;
    }
    /* room in the block table first, so a taken span is never lost */
    rc = grow((void **)&a->blocks, &a->cap_blocks, a->n_blocks + 1, sizeof(block));
    char *p = NULL;
    int seg = -1;
    for (int i = 0; rc == GSB_OK && i < a->n_segs && !p; i++)
        if ((p = seg_take(&a->segs[i], len)) != NULL)
            seg = i;
    if (rc == GSB_OK && !p) {
        rc = seg_new(a, len, &seg);
        if (rc == GSB_OK)
            p = seg_take(&a->segs[seg], len);
    }
    if (rc == GSB_OK) {
        block_insert(a, p, len, seg); /* cannot fail: room reserved */
        *out = p;
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

int gsb__rarena_free(gsb__rarena *a, void *p)
{
    if (!p)
        return 1;
    pthread_mutex_lock(&a->lock);
    int at = block_upper(a, p) - 1;
    if (at < 0 || a->blocks[at].ptr != (char *)p) {
        pthread_mutex_unlock(&a->lock);
        return 0;
    }
    block b = a->blocks[at];
    int ok = 1;
    if (b.seg >= 0) {
        segment *s = &a->segs[b.seg];
        /* a free may split nothing but add one span: make room first */
        if (grow((void **)&s->free_list, &s->cap_free, s->n_free + 1, sizeof(span)) != GSB_OK)
            ok = 0; /* keep the block allocated rather than corrupt the list */
        else
            seg_give(s, (size_t)(b.ptr - s->base), b.len);
    } else {
        priv_free(b.ptr);
    }
    if (ok) {
        memmove(&a->blocks[at], &a->blocks[at + 1], (size_t)(a->n_blocks - at - 1) * sizeof(block));
        a->n_blocks--;
    }
    pthread_mutex_unlock(&a->lock);
    return 1;
}

int gsb__rarena_locate(gsb__rarena *a, const void *p, size_t nbytes, uint64_t *segment_id,
                      uint64_t *offset)
{
    if (!a || !a->shared || !p)
        return 0;
    const char *c = p;
    int found = 0;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < a->n_segs && !found; i++) {
        const segment *s = &a->segs[i];
        if (c >= s->base && c < s->base + s->size &&
            nbytes <= (size_t)(s->base + s->size - c)) {
            *segment_id = s->id;
            *offset = (uint64_t)(c - s->base);
            found = 1;
        }
    }
    pthread_mutex_unlock(&a->lock);
    return found;
}
