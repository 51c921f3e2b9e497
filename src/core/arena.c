/*
 * arena.c - local sessions' arena (see arena.h): what gsb_arena_alloc and
 * gsb_arena_free do on a session of the engine in this process
 * (src/session/local.c).
 */
#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"

void gsb__arena_init(gsb__arena *a)
{
    pthread_mutex_init(&a->lock, NULL);
    a->head = NULL;
}

int gsb__arena_alloc(const gsb__backend *gpu, gsb__arena *a, size_t n, void **out)
{
    *out = NULL;
    gsb__arena_block *b = calloc(1, sizeof *b);
    void *p = NULL;
    /* whole pages: the driver refuses to register a range that shares a page
     * with another registered one */
    size_t rounded = (n + 4095) & ~(size_t)4095;
#ifdef _WIN32
    if (b && rounded >= n)
        p = _aligned_malloc(rounded ? rounded : 4096, 4096);
    if (!p) {
#else
    if (!b || rounded < n || posix_memalign(&p, 4096, rounded ? rounded : 4096) != 0) {
#endif
        free(b);
        return gsb__err(GSB_ENOMEM, "cannot allocate %zu bytes of arena memory", n);
    }
    b->p = p;
    b->n = rounded;
    /* best effort: pageable memory still works, only slower to upload */
    if (gpu && gpu->ops->host_register && rounded >= GSB__ARENA_REGISTER_MIN)
        b->registered = gpu->ops->host_register(gpu, p, rounded) == GSB_OK;
    gsb__err_clear();
    pthread_mutex_lock(&a->lock);
    b->next = a->head;
    a->head = b;
    pthread_mutex_unlock(&a->lock);
    *out = p;
    return GSB_OK;
}

static void block_release(const gsb__backend *gpu, gsb__arena_block *b)
{
    if (b->registered && gpu && gpu->ops->host_unregister)
        gpu->ops->host_unregister(gpu, b->p);
#ifdef _WIN32
    _aligned_free(b->p);
#else
    free(b->p);
#endif
    free(b);
}

int gsb__arena_free(const gsb__backend *gpu, gsb__arena *a, void *p)
{
    pthread_mutex_lock(&a->lock);
    gsb__arena_block **pp = &a->head;
    while (*pp && (*pp)->p != p)
        pp = &(*pp)->next;
    gsb__arena_block *b = *pp;
    if (b)
        *pp = b->next;
    pthread_mutex_unlock(&a->lock);
    if (!b)
        return gsb__err(GSB_EINVAL, "gsb_arena_free: %p is not arena memory of this session", p);
    block_release(gpu, b);
    return GSB_OK;
}

void gsb__arena_release_all(const gsb__backend *gpu, gsb__arena *a)
{
    while (a->head) {
        gsb__arena_block *b = a->head;
        a->head = b->next;
        block_release(gpu, b);
    }
    pthread_mutex_destroy(&a->lock);
}
