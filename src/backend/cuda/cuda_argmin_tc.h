/*
 * cuda_argmin_tc.h - argmin_sqdist ranked on tensor cores (TF32 mma.sync
 * tiles) with a proven error bound, results bit-identical to the exact
 * kernel of cuda_distance.cu (cuda_argmin_tc.cu says why they are).
 */
#ifndef GSB_CUDA_ARGMIN_TC_H
#define GSB_CUDA_ARGMIN_TC_H

#include "backend/backend.h"

/* How argmin_sqdist ranks n rows against k centres of dtype dt
 * (GSB_ARGMIN): 0 the exact kernel ("exact"), 1 one TF32 product per term
 * ("tf32"), 3 three TF32 products per term, the split hi/lo scheme
 * ("3xtf32"; the default, but for float32 with k <= 32 or n < 2^18). */
int gsb__cuda_argmin_tc_mode(gsb_dtype dt, int64_t n, int64_t k);

/*
 * labels and mind of X (n x d) against C (k x d), both float32 or float64 on
 * the device, through tensor-core tiles with `mode` (1 or 3) products per
 * term; rows the bound cannot decide go through the exact arithmetic.  Sets
 * *done to 0 and does nothing where the shapes do not suit the tiles (the
 * caller then runs the exact kernel).  Arguments are checked by the caller.
 * The host never waits, but with GSB_ARGMIN_STATS (diagnostics): then each
 * call counts the rows that took the exact path into GSB_ARGMIN_EXACT_ROWS
 * in the environment and, unless it is "quiet", prints the count on stderr.
 */
int gsb__cuda_argmin_tc(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *C,
                        gsb__tensor *labels, gsb__tensor *mind, int mode, int *done);

/* The exact kernel (cuda_distance.cu) alone, arguments checked. */
int gsb__cuda_argmin_exact(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *C,
                           gsb__tensor *labels, gsb__tensor *mind);

/* The exact kernel on the rows rows[0 .. *count - 1] of X, in place (on
 * all of X where *count > n / 2), with cn = row_norms<T, T> of C; the count
 * is read on the device, so nothing waits for it. */
int gsb__cuda_argmin_listed(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *C,
                            const void *cn, const int32_t *rows, const int *count,
                            gsb__tensor *labels, gsb__tensor *mind);

/* Resident blocks per SM of kern with threads and smem bytes of dynamic
 * shared memory on device, asked of the runtime once per process and shape
 * (driver calls that each launch would otherwise wait behind); with
 * smem_max > 0 the kernel's dynamic shared memory limit is first set to it,
 * the same value for every shape, so a cached answer never outruns it. */
int gsb__cuda_resident_per_sm(const void *kern, int device, int threads, size_t smem,
                              int smem_max, int *per_sm);

#endif
