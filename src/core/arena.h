/*
 * arena.h - gsb_arena_alloc for local sessions: 64-byte aligned host blocks,
 * page-locked through the GPU backend's host_register when one is loaded
 * and the block has GSB__ARENA_REGISTER_MIN bytes or more (so uploads from
 * them skip staging).  Remote sessions use src/net/arena.c
 * (src/session/remote.c).
 */
#ifndef GSB_CORE_ARENA_H
#define GSB_CORE_ARENA_H

#include <pthread.h>
#include <stddef.h>

struct gsb__backend;

/* Blocks of at least this many bytes are page-locked (smaller ones stay
 * pageable): registering costs a system call and pins pages, only worth it
 * for blocks large enough that their upload time matters. */
#define GSB__ARENA_REGISTER_MIN ((size_t)1 << 20)

typedef struct gsb__arena_block {
    void *p;
    size_t n;
    int registered;
    struct gsb__arena_block *next;
} gsb__arena_block;

typedef struct gsb__arena {
    pthread_mutex_t lock;
    gsb__arena_block *head;
} gsb__arena;

void gsb__arena_init(gsb__arena *a);
int gsb__arena_alloc(const struct gsb__backend *gpu, gsb__arena *a, size_t n, void **out);
/* GSB_EINVAL when p is not a block of a */
int gsb__arena_free(const struct gsb__backend *gpu, gsb__arena *a, void *p);
void gsb__arena_release_all(const struct gsb__backend *gpu, gsb__arena *a);

#endif
