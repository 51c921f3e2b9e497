/*
 * cuda_topk_screen.h - the pruned topk's screen (cuda_topk_screen.cu): TF32
 * tensor-core dot products of centred float32 query and reference copies
 * with the admission test in the tile's epilogue, so only the admitted
 * candidates leave the registers (cuda_topk_gemm.cu ranks them exactly).
 */
#ifndef GSB_CUDA_TOPK_SCREEN_H
#define GSB_CUDA_TOPK_SCREEN_H

#include <stdint.h>

#include <cuda_runtime.h>

#include "backend/backend.h"

/* Places per query for one screen's admitted candidates; a query that
 * admits more is counted past it (its rank step screens that slice again
 * itself). */
constexpr int GSB_TOPK_SCREEN_CAP = 128;

/* The widest rows the screen takes: its query block stays in shared
 * memory up to here; wider rows go to cuBLAS tiles (from d ~ 256 on, the
 * GEMM's arithmetic, not its output's round trip, sets their time). */
constexpr int64_t GSB_TOPK_SCREEN_MAX_D = 128;

/* One screen: queries [q_begin, q_begin + nqc) of Q against references
 * [j0, j1) of R (both n x d, the centred float32 copies). */
struct gsb__topk_screen {
    const float *Q, *R;
    const float *rb; /* per reference: (1 - 1.5 s) ||r||^2 (cuda_topk_prune.h) */
    const float *tq; /* per query of the chunk: its admission threshold */
    int64_t d, q_begin, nqc, j0, j1;
    int exclude_self;
    const int *abort; /* set: the copies are out of range, skip the work */
    int *cnt;         /* per query of the chunk: admitted so far (may pass the cap) */
    int2 *cand;       /* per query of the chunk: GSB_TOPK_SCREEN_CAP (index, approx bits) */
};

/* Whether the device has what the screen needs (TF32 mma.sync: sm_80). */
int gsb__cuda_topk_screen_supported(const gsb__backend *be);

/* Launch one screen on stream st (every candidate j with fl((1 - 1.5 s)
 * ||r||^2 - 2 (q.r)~) not above tq joins its query's places). */
int gsb__cuda_topk_screen(const gsb__backend *be, const gsb__topk_screen &s, cudaStream_t st);

#endif
