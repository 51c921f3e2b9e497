/*
 * seg_index.h - the segment arithmetic of the seg_* ops (backend.h: seg_dots,
 * seg_combine, seg_normalize), written once for the CPU twin and the GPU so
 * both find the same element ranges: seg holds K + 1 offsets, segment c is
 * elements [seg[c], seg[c + 1]) clipped to [0, n).
 */
#ifndef GSB_BACKEND_SEG_INDEX_H
#define GSB_BACKEND_SEG_INDEX_H

#include <stdint.h>

#ifdef __CUDACC__
#define GSB__SEG_FN static __host__ __device__ inline
#else
#define GSB__SEG_FN static inline
#endif

GSB__SEG_FN int64_t gsb__seg_clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* segment c's element range, clipped to [0, n) */
GSB__SEG_FN void gsb__seg_range(const int64_t *seg, int64_t c, int64_t n, int64_t *lo,
                                int64_t *hi)
{
    *lo = gsb__seg_clamp(seg[c], 0, n);
    *hi = gsb__seg_clamp(seg[c + 1], *lo, n);
}

/* the segment of element v: the last c in [0, K) with seg[c] <= v (0 when none) */
GSB__SEG_FN int64_t gsb__seg_of(const int64_t *seg, int64_t K, int64_t v)
{
    int64_t lo = 0, hi = K - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (seg[mid] <= v)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

#endif
