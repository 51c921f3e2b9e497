/*
 * hostmem.h - large host buffers (tensors, received arrays, data handles).
 *
 * A fresh 1 GiB buffer costs 262144 page faults with 4 KiB pages, more than
 * the copy into it.  Buffers of GSB__HOSTMEM_BIG bytes or more are therefore
 * mapped directly and advised to use transparent huge pages (512x fewer
 * faults); smaller ones come from malloc.  Every block is 64-byte aligned
 * and carries a small header, so gsb__host_free needs no size.
 */
#ifndef GSB_CORE_HOSTMEM_H
#define GSB_CORE_HOSTMEM_H

#include <stddef.h>

#define GSB__HOSTMEM_BIG ((size_t)4 << 20)

/* NULL when out of memory; n == 0 gives a valid block. */
void *gsb__host_alloc(size_t n);
/* The same, mapped whatever its size: for short-lived buffers whose size a
 * peer chooses (gsbd's received frames), so that freeing one returns its
 * pages at once instead of leaving them with a thread's malloc arena. */
void *gsb__host_alloc_mapped(size_t n);
void gsb__host_free(void *p);

#endif
