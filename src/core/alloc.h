/*
 * alloc.h - checked array allocation: count * size overflow-checked against
 * PTRDIFF_MAX (the largest object C allows), never a 0-byte request.
 * NULL on failure, like malloc; callers turn that into GSB_ENOMEM.
 */
#ifndef GSB_CORE_ALLOC_H
#define GSB_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline int gsb__array_too_big(int64_t count, size_t size)
{
    return count < 0 || (count > 0 && (uint64_t)count > (uint64_t)PTRDIFF_MAX / size);
}

static inline void *gsb__alloc_array(int64_t count, size_t size)
{
    /* one overflow-checked product that bounds what malloc sees (gcc 13's
     * -Walloc-size-larger-than loses a bound checked apart from it) */
    size_t bytes = 0;
    if (count < 0 || __builtin_mul_overflow((size_t)count, size, &bytes) ||
        bytes > (size_t)PTRDIFF_MAX)
        return NULL;
    return malloc(bytes > 0 ? bytes : 1);
}

static inline void *gsb__calloc_array(int64_t count, size_t size)
{
    if (gsb__array_too_big(count, size))
        return NULL;
    return calloc(count > 0 ? (size_t)count : 1, size);
}

#endif
