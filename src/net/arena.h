/*
 * arena.h - a remote session's arena (gsb_arena_alloc on tcp:// and unix://).
 *
 * Shared mode (a Unix socket whose server offers "shm"): memory comes from
 * memfd segments mapped MAP_SHARED here and, after one shm.attach, in gsbd
 * too, so an array placed inside a segment travels as (segment, offset) with
 * no copy.  Segments are max(64 MiB, request rounded up to 2 MiB); a
 * first-fit allocator with a coalescing free list per segment hands out
 * 64-byte aligned blocks.  Segments live until the arena is destroyed: the
 * server registered them with the GPU, which is expensive to redo, and a
 * caller that moved a large array once will likely move one again.
 *
 * Private mode (TCP, or a server without "shm"): ordinary 64-byte aligned
 * memory, tracked so that gsb__rarena_free can tell its blocks from others.
 *
 * All functions are thread-safe.
 */
#ifndef GSB_NET_RARENA_H
#define GSB_NET_RARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct gsb__rarena gsb__rarena;

/* Hands a new segment's memfd to the server (shm.attach); a gsb_status.
 * Called with the arena's lock held: it must not call back into the arena. */
typedef int (*gsb__rarena_attach_fn)(void *ctx, uint64_t segment, int fd, size_t size);
/* Tells the server a segment is going away (shm.detach), best effort. */
typedef void (*gsb__rarena_detach_fn)(void *ctx, uint64_t segment);

#define GSB__RARENA_ALIGN 64
#define GSB__RARENA_MIN_SEGMENT ((size_t)64 << 20)
#define GSB__RARENA_SEGMENT_ROUND ((size_t)2 << 20)

/* shared != 0: memfd segments handed over with attach; else private memory. */
int gsb__rarena_create(int shared, gsb__rarena_attach_fn attach, gsb__rarena_detach_fn detach,
                      void *ctx, gsb__rarena **out);
/* Detaches and unmaps every segment and frees every private block. */
void gsb__rarena_destroy(gsb__rarena *a);
int gsb__rarena_is_shared(const gsb__rarena *a);

/* nbytes (0 allowed) of 64-byte aligned memory; GSB_ENOMEM or the attach
 * callback's status on failure. */
int gsb__rarena_alloc(gsb__rarena *a, size_t nbytes, void **out);
/* Frees a block of this arena: 1 when p was one (NULL counts), 0 when not. */
int gsb__rarena_free(gsb__rarena *a, void *p);
/* 1 when [p, p + nbytes) lies inside one shared segment: its id and the
 * offset of p in it; 0 otherwise (private memory included). */
int gsb__rarena_locate(gsb__rarena *a, const void *p, size_t nbytes, uint64_t *segment,
                      uint64_t *offset);

#endif
