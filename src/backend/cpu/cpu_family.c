/*
 * cpu_family.c - the CPU backend's family ops: segment_sum (the KMeans
 * centre update) and logistic_loss_grad (LogisticRegression's objective).
 *
 * Both stream over the rows of X once, in parallel, accumulating in double
 * into one partial result per fixed chunk of rows, then add the partials in
 * chunk order: the chunks depend only on the sizes, so results are the same
 * whatever the number of threads.  As in cpu_distance.c, BLAS is called by
 * the threads of an OpenMP region, one serial GEMM per block of rows, with
 * gsb__cpu_blas_serial_begin/end around the region.
 *
 * The file is a template: the first pass holds the dtype-independent code
 * and includes this file again with T = float and T = double.
 */
#ifndef GSB_CPU_FAMILY_BODY

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/logistic_math.h"
#include "core/error.h"

/* Bytes of one block of rows converted to double (logistic): about a
 * core's L2, so both GEMMs of a block find it in cache. */
#define FAM_BLOCK_BYTES ((int64_t)512 << 10)
/* Most bytes of per-chunk partial results an op may take. */
#define FAM_PARTIAL_BYTES ((int64_t)256 << 20)
/* Most chunks (partial results) per call, and the least work per chunk. */
#define FAM_MAX_CHUNKS 64
#define FAM_CHUNK_WORK ((int64_t)1 << 18)

/* out[e] = sum over c of part[c * stride + e] for e < count, in chunk order. */
void gsb__cpu_segment_reduce(const double *part, int64_t nch, int64_t stride, int64_t count,
                             double *out)
{
#pragma omp parallel for if (nch * count > FAM_CHUNK_WORK) schedule(static)
    for (int64_t e = 0; e < count; e++) {
        double s = 0.0;
        for (int64_t c = 0; c < nch; c++)
            s += part[c * stride + e];
        out[e] = s;
    }
}

/*
 * One row's loss (unweighted) and its gradient with respect to z (K entries,
 * overwriting z): binary (K == 1) log(1 + exp(-s z)) with s = 2y - 1, whose
 * derivative sigmoid(z) - y is taken as -sigmoid(-z) for y = 1 so it keeps
 * relative accuracy; multinomial logsumexp(z) - z[y] with softmax(z) - onehot.
 */
static inline double row_loss_grad(double *z, int64_t K, int32_t y)
{
    if (K == 1) {
        double t = z[0];
        z[0] = y ? -gsb__sigmoid(-t) : gsb__sigmoid(t);
        return gsb__log1pexp(y ? -t : t);
    }
    double m = z[0];
    for (int64_t c = 1; c < K; c++)
        m = z[c] > m ? z[c] : m;
    double s = 0.0;
    for (int64_t c = 0; c < K; c++)
        s += exp(z[c] - m);
    double lse = m + log(s), loss = lse - z[y];
    for (int64_t c = 0; c < K; c++)
        z[c] = exp(z[c] - lse) - (c == y ? 1.0 : 0.0);
    return loss;
}

#define GSB_CPU_FAMILY_BODY
int64_t gsb__cpu_segment_chunks(int64_t n, int64_t d, int64_t k)
{
    int64_t stride = k * d + k;
    int64_t nch = cpu_clamp64(n * (d + 1) / FAM_CHUNK_WORK, 1, FAM_MAX_CHUNKS);
    while (nch > 1 && (nch * stride * (int64_t)sizeof(double) > FAM_PARTIAL_BYTES ||
                       nch * stride > 2 * n * (d + 1)))
        nch /= 2;
    return nch;
}

#define T float
#define SFX(name) name##_f32
#define T_IS_F64 0
#include "cpu_family.c"
#undef T
#undef SFX
#undef T_IS_F64

#define T double
#define SFX(name) name##_f64
#define T_IS_F64 1
#include "cpu_family.c"
#undef T
#undef SFX
#undef T_IS_F64
#undef GSB_CPU_FAMILY_BODY

int gsb__cpu_segment_sum(const gsb__backend *be, const gsb__tensor *X,
                         const gsb__tensor *labels, const gsb__tensor *w, gsb__tensor *sums,
                         gsb__tensor *counts)
{
    (void)be;
    const char *op = "segment_sum";
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    GSB_TRY(cpu_check_vec(labels, GSB_I32, X->rows, op, "labels"));
    if (w)
        GSB_TRY(cpu_check_vec(w, 0, X->rows, op, "w"));
    GSB_TRY(cpu_check(sums, GSB_F64, -1, X->cols, op, "sums"));
    GSB_TRY(cpu_check_vec(counts, GSB_F64, sums->rows, op, "counts"));
    const int32_t *lab = labels->data;
    for (int64_t i = 0; i < X->rows; i++)
        if (lab[i] < 0 || lab[i] >= sums->rows)
            return gsb__err(GSB_EINVAL, "%s: label %d of row %lld is outside [0, %lld)", op,
                            (int)lab[i], (long long)i, (long long)sums->rows);
    return X->dtype == GSB_F32 ? segment_sum_f32(X, lab, w, sums->data, counts->data, sums->rows)
                               : segment_sum_f64(X, lab, w, sums->data, counts->data, sums->rows);
}

int gsb__cpu_logistic_loss_grad(const gsb__backend *be, const gsb__tensor *X,
                                const gsb__tensor *y, const gsb__tensor *w,
                                const gsb__tensor *coef, int fit_intercept, double *loss,
                                gsb__tensor *grad)
{
    (void)be;
    const char *op = "logistic_loss_grad";
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    GSB_TRY(cpu_check_vec(y, GSB_I32, X->rows, op, "y"));
    if (w)
        GSB_TRY(cpu_check_vec(w, 0, X->rows, op, "w"));
    int64_t p = X->cols + (fit_intercept ? 1 : 0);
    GSB_TRY(cpu_check(coef, GSB_F64, -1, p, op, "coef"));
    GSB_TRY(cpu_check(grad, GSB_F64, coef->rows, p, op, "grad"));
    if (!loss)
        return gsb__err(GSB_EINTERNAL, "%s: loss is missing", op);
    if (coef->rows < 1)
        return gsb__err(GSB_EINTERNAL, "%s: coef has no rows", op);
    GSB_TRY(cpu_blas_dims(p, coef->rows, op));
    return X->dtype == GSB_F32 ? logistic_f32(X, y->data, w, coef, fit_intercept, loss, grad)
                               : logistic_f64(X, y->data, w, coef, fit_intercept, loss, grad);
}

#else /* GSB_CPU_FAMILY_BODY: generic over T, SFX, T_IS_F64 */

/* ---- segment_sum -------------------------------------------------------- */

/* acc (k x d) += w_i x_i and cnt (k) += w_i over rows [i0, i1). */
void SFX(gsb__cpu_segment_rows)(const T *X, int64_t d, const int32_t *lab, const gsb__tensor *w,
                                int64_t i0, int64_t i1, double *acc, double *cnt)
{
    for (int64_t i = i0; i < i1; i++) {
        double wi = cpu_weight(w, i);
        double *dst = acc + (int64_t)lab[i] * d;
        const T *x = X + i * d;
#pragma omp simd
        for (int64_t j = 0; j < d; j++)
            dst[j] += wi * (double)x[j];
        cnt[lab[i]] += wi;
    }
}

/*
 * Chunks of rows summed into their own k x d partials, then added in order.
 * Partials pay off while zeroing and adding them costs less than the rows
 * themselves (k much smaller than n, the KMeans case); otherwise wide data
 * is split into column stripes, each summed by one thread over all rows,
 * and narrow data is summed in one pass.
 */
static int SFX(segment_sum)(const gsb__tensor *Xt, const int32_t *lab, const gsb__tensor *w,
                            double *sums, double *counts, int64_t k)
{
    const T *X = Xt->data;
    int64_t n = Xt->rows, d = Xt->cols, kd = k * d, stride = kd + k;
    const int64_t stripe = 64;
    int64_t nch = gsb__cpu_segment_chunks(n, d, k);
    if (nch > 1) {
        double *part = cpu_alloc(nch * stride, sizeof(double));
        if (!part)
            return gsb__err(GSB_ENOMEM, "segment_sum: out of memory for %lld partial sums",
                            (long long)nch);
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t c = 0; c < nch; c++) {
            double *acc = part + c * stride;
            memset(acc, 0, (size_t)stride * sizeof(double));
            SFX(gsb__cpu_segment_rows)(X, d, lab, w, n * c / nch, n * (c + 1) / nch, acc, acc + kd);
        }
        gsb__cpu_segment_reduce(part, nch, stride, kd, sums);
        gsb__cpu_segment_reduce(part + kd, nch, stride, k, counts);
        free(part);
        return GSB_OK;
    }
    memset(sums, 0, (size_t)kd * sizeof(double));
    memset(counts, 0, (size_t)k * sizeof(double));
    if (d < 2 * stripe || n * d < FAM_CHUNK_WORK) {
        SFX(gsb__cpu_segment_rows)(X, d, lab, w, 0, n, sums, counts);
        return GSB_OK;
    }
    int64_t nstripes = (d + stripe - 1) / stripe;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t s = 0; s < nstripes; s++) {
        int64_t c0 = s * stripe, c1 = cpu_min64(d, c0 + stripe);
        for (int64_t i = 0; i < n; i++) {
            double wi = cpu_weight(w, i);
            double *dst = sums + (int64_t)lab[i] * d;
            const T *x = X + i * d;
#pragma omp simd
            for (int64_t j = c0; j < c1; j++)
                dst[j] += wi * (double)x[j];
        }
    }
    for (int64_t i = 0; i < n; i++)
        counts[lab[i]] += cpu_weight(w, i);
    return GSB_OK;
}

/* ---- logistic_loss_grad ------------------------------------------------- */

/*
 * One block of rows [i0, i0 + rows): Z = X_b coef^T (+ intercept) by GEMM,
 * per row the loss and w_i dloss/dz (overwriting Z), then G += Z^T X_b by
 * GEMM and G's intercept column += the column sums of Z.  Returns the
 * block's weighted loss, summed in row order, or NAN after a bad label
 * (*bad then holds its row).
 */
static double SFX(logistic_block)(const T *X, const int32_t *y, const gsb__tensor *w,
                                  const double *coef, int64_t d, int64_t K, int64_t p, int fi,
                                  int64_t i0, int64_t rows, double *xs, double *Z, double *G,
                                  int64_t *bad)
{
    int64_t ncls = K == 1 ? 2 : K;
    /* float32 upcast: scikit-learn too computes X @ coef in float64 */
    const double *xb = SFX(cpu_block_f64)(X + i0 * d, rows * d, xs);
    if (d > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)K, (int)d, 1.0, xb,
                    (int)d, coef, (int)p, 0.0, Z, (int)K);
    else
        memset(Z, 0, (size_t)(rows * K) * sizeof(double));
    double loss = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double *z = Z + r * K;
        int32_t yi = y[i0 + r];
        if (yi < 0 || yi >= ncls) {
            *bad = i0 + r;
            return NAN;
        }
        if (fi)
            for (int64_t c = 0; c < K; c++)
                z[c] += coef[c * p + d];
        double wi = cpu_weight(w, i0 + r);
        loss += wi * row_loss_grad(z, K, yi);
        for (int64_t c = 0; c < K; c++) {
            z[c] *= wi;
            if (fi)
                G[c * p + d] += z[c];
        }
    }
    if (d > 0)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)d, (int)rows, 1.0, Z,
                    (int)K, xb, (int)d, 1.0, G, (int)p);
    return loss;
}

/*
 * Blocks of rows sized for cache, grouped into fixed chunks; each chunk owns
 * a gradient partial and a loss, both added in chunk order at the end.
 */
static int SFX(logistic)(const gsb__tensor *Xt, const int32_t *y, const gsb__tensor *w,
                         const gsb__tensor *coef_t, int fit_intercept, double *loss_out,
                         gsb__tensor *grad_t)
{
    const T *X = Xt->data;
    const double *coef = coef_t->data;
    int64_t n = Xt->rows, d = Xt->cols, K = coef_t->rows, p = coef_t->cols, kp = K * p;
    int64_t bl = cpu_clamp64(FAM_BLOCK_BYTES / (cpu_max64(d, K) * 8), 16, 4096);
    bl = cpu_min64(bl, cpu_max64(n, 1));
    int64_t nb = (n + bl - 1) / bl;
    int64_t nch = cpu_clamp64(n * K * (d + 1) / FAM_CHUNK_WORK, 1, FAM_MAX_CHUNKS);
    nch = cpu_min64(nch, cpu_max64(nb, 1));
    nch = cpu_max64(1, cpu_min64(nch, FAM_PARTIAL_BYTES / (cpu_max64(kp, 1) * 8)));
    double *part = cpu_alloc(nch * kp, sizeof(double));
    double *closs = cpu_alloc(nch, sizeof(double));
    if (!part || !closs) {
        free(part);
        free(closs);
        return gsb__err(GSB_ENOMEM, "logistic_loss_grad: out of memory for %lld partials",
                        (long long)nch);
    }
    memset(part, 0, (size_t)(nch * kp) * sizeof(double));
    int64_t bad = -1;
    int oom = 0;
    gsb__cpu_blas_serial_begin();
#pragma omp parallel if (nch > 1)
    {
        double *xs = T_IS_F64 ? NULL : cpu_alloc(bl * d, sizeof(double));
        double *Z = cpu_alloc(bl * K, sizeof(double));
        int ok = Z && (T_IS_F64 || xs);
        if (!ok) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < nch; c++) {
            closs[c] = 0.0;
            if (!ok)
                continue;
            int64_t mybad = -1;
            for (int64_t b = nb * c / nch; b < nb * (c + 1) / nch && mybad < 0; b++) {
                int64_t i0 = b * bl;
                closs[c] += SFX(logistic_block)(X, y, w, coef, d, K, p, fit_intercept, i0,
                                                cpu_min64(bl, n - i0), xs, Z, part + c * kp,
                                                &mybad);
            }
            if (mybad >= 0) {
#pragma omp critical(gsb_logistic_bad)
                if (bad < 0 || mybad < bad)
                    bad = mybad;
            }
        }
        free(xs);
        free(Z);
    }
    gsb__cpu_blas_serial_end();
    int rc = GSB_OK;
    if (oom)
        rc = gsb__err(GSB_ENOMEM, "logistic_loss_grad: out of memory for a block of %lld rows",
                      (long long)bl);
    else if (bad >= 0)
        rc = gsb__err(GSB_EINVAL, "logistic_loss_grad: class index %d of row %lld is outside "
                      "[0, %lld)", (int)y[bad], (long long)bad, (long long)(K == 1 ? 2 : K));
    else {
        gsb__cpu_segment_reduce(part, nch, kp, kp, grad_t->data);
        double total = 0.0;
        for (int64_t c = 0; c < nch; c++)
            total += closs[c];
        *loss_out = total;
    }
    free(part);
    free(closs);
    return rc;
}

#endif /* GSB_CPU_FAMILY_BODY */
