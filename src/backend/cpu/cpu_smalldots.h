/*
 * cpu_smalldots.h - dot products of rows with a few centres (AVX2 + FMA);
 * cpu_smalldots.c says why and how.
 *
 *   kp = gsb__cpu_smalldots_kp(k, d, esize): the padded centre count (a
 *        multiple of one register's lanes: AVX-512's where the CPU has it,
 *        else AVX2's), or 0 where the kernel does not apply (no AVX2 + FMA,
 *        or more than 64 centres): then use a GEMM.
 *   gsb__cpu_smalldots_pack_T(C, k, d, kp, ct): C (k x d) transposed into
 *        ct (d x kp), the padding zeroed.
 *   gsb__cpu_smalldots_T(X, rows, d, ct, kp, tile): tile[r * kp + c] =
 *        x_r . c_c in T, accumulated in feature order (columns >= k are 0).
 *   gsb__cpu_smalldots_argmin_T(tile, rows, kp, k, cnp, X, d, Cd, labels, mind):
 *        per tile row r (row r of X), the first j < k with the least
 *        cnp[j] - 2 tile[r][j] in double (cnp: ||c_j||^2, padded to kp with
 *        +inf) and the squared distance to that centre in double (Cd: the
 *        centres, k x d, in double), rounded to T: argmin_sqdist's labels
 *        and mind.
 *   gsb__cpu_smalldots_accum_T(X, rows, d, lab, w, mind, acc, cnt, dist):
 *        acc[lab_r] (d doubles) += w_r x_r, cnt[lab_r] += w_r, *dist +=
 *        w_r mind_r over the rows in order (w NULL: unit weights); each
 *        element's sum as a scalar loop's.  Needs gsb__cpu_have_avx2_fma.
 */
#ifndef GSB_CPU_SMALLDOTS_H
#define GSB_CPU_SMALLDOTS_H

#include <stddef.h>
#include <stdint.h>

/* The CPU runs AVX2 and FMA (x86-64; checked once). */
int gsb__cpu_have_avx2_fma(void);
int64_t gsb__cpu_smalldots_kp(int64_t k, int64_t d, size_t esize);
void gsb__cpu_smalldots_pack_f32(const float *C, int64_t k, int64_t d, int64_t kp, float *ct);
void gsb__cpu_smalldots_pack_f64(const double *C, int64_t k, int64_t d, int64_t kp, double *ct);
void gsb__cpu_smalldots_f32(const float *X, int64_t rows, int64_t d, const float *ct,
                            int64_t kp, float *tile);
void gsb__cpu_smalldots_f64(const double *X, int64_t rows, int64_t d, const double *ct,
                            int64_t kp, double *tile);

void gsb__cpu_smalldots_argmin_f32(const float *tile, int64_t rows, int64_t kp, int64_t k,
                                   const double *cnp, const float *X, int64_t d, const double *Cd,
                                   int32_t *labels, float *mind);
void gsb__cpu_smalldots_argmin_f64(const double *tile, int64_t rows, int64_t kp, int64_t k,
                                   const double *cnp, const double *X, int64_t d,
                                   const double *Cd, int32_t *labels, double *mind);
void gsb__cpu_smalldots_accum_f32(const float *X, int64_t rows, int64_t d, const int32_t *lab,
                                  const double *w, const float *mind, double *acc, double *cnt,
                                  double *dist);
void gsb__cpu_smalldots_accum_f64(const double *X, int64_t rows, int64_t d, const int32_t *lab,
                                  const double *w, const double *mind, double *acc, double *cnt,
                                  double *dist);

#endif
