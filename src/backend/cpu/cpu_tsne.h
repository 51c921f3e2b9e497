/*
 * cpu_tsne.h - what the CPU backend's t-SNE op files (cpu_tsne.c,
 * cpu_tsne_bh.c, cpu_tsne_fft.c) share: the Student-t kernel and the checks
 * of the arguments every repulsion op takes.
 */
#ifndef GSB_CPU_TSNE_H
#define GSB_CPU_TSNE_H

#include <math.h>

#include "backend/cpu/cpu_util.h"

/* w = (1 + d2 / dof)^(-(dof + 1) / 2), written as scikit-learn does:
 * (dof / (dof + d2))^((dof + 1) / 2), exactly 1 / (1 + d2) for dof 1.  The
 * exponent is a whole or half number, so products and one sqrt replace pow,
 * which took most of the time of a 3-D fit (dof 2: t * sqrt(t)). */
static inline double cpu_tsne_w(double d2, int dof)
{
    if (dof == 1)
        return 1.0 / (1.0 + d2);
    double t = (double)dof / ((double)dof + d2), w = dof % 2 ? 1.0 : sqrt(t);
    for (int e = 0; e < (dof + 1) / 2; e++)
        w *= t;
    return w;
}

/* Y (n x d float32, n >= 1, d >= 1), R like Y, zsum (1 x 1 float64), dof >= 1. */
static inline int cpu_tsne_check_repulse(const gsb__tensor *Y, int dof, const gsb__tensor *R,
                                         const gsb__tensor *zsum, const char *op)
{
    GSB_TRY(cpu_check(Y, GSB_F32, -1, -1, op, "Y"));
    if (Y->rows < 1 || Y->cols < 1)
        return gsb__err(GSB_EINTERNAL, "%s: Y is empty", op);
    if (dof < 1)
        return gsb__err(GSB_EINTERNAL, "%s: dof %d < 1", op, dof);
    GSB_TRY(cpu_check(R, GSB_F32, Y->rows, Y->cols, op, "R"));
    return cpu_check(zsum, GSB_F64, 1, 1, op, "zsum");
}

/* sum of v[0..n) in index order (results independent of the thread count) */
static inline double cpu_tsne_sum(const double *v, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

#endif
