/*
 * cpu_svm.c - the CPU backend's ops of the two-level SMO (backend.h,
 * gsb__svm_state; solvers/smo_blocks.c drives them): svm_select,
 * svm_kernel_rows, svm_inner, svm_update_f.  Straightforward loops, the twins
 * the CUDA ops (cuda_svm.cu) are tested against; the step arithmetic is
 * backend/svm_smo.h, shared with the device.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/svm_smo.h"
#include "core/error.h"
#include "core/tensor.h"

/* Rows of kernel values computed per call of the kernel op. */
#define SVM_ROWS_ELEMS ((int64_t)1 << 23)

/* ---- argument checks ------------------------------------------------------ */

static int check_state(const gsb__svm_state *s, const char *op, int64_t *l, int64_t *n)
{
    if (!s)
        return gsb__err(GSB_EINTERNAL, "%s: state is missing", op);
    GSB_TRY(cpu_check(s->f, GSB_F64, -1, 1, op, "f"));
    *l = s->f->rows;
    GSB_TRY(cpu_check_vec(s->real, GSB_I32, *l, op, "real"));
    GSB_TRY(cpu_check_vec(s->y, GSB_I32, *l, op, "y"));
    GSB_TRY(cpu_check_vec(s->C, GSB_F64, *l, op, "C"));
    GSB_TRY(cpu_check_vec(s->QD, GSB_F64, *l, op, "QD"));
    GSB_TRY(cpu_check_vec(s->alpha, GSB_F64, *l, op, "alpha"));
    GSB_TRY(cpu_check(s->cache, GSB_F32, -1, -1, op, "cache"));
    *n = s->cache->cols;
    const int32_t *real = s->real->data;
    for (int64_t t = 0; t < *l; t++)
        if (real[t] < 0 || real[t] >= *n)
            return gsb__err(GSB_EINTERNAL, "%s: real[%lld] = %d is outside [0, %lld)", op,
                            (long long)t, (int)real[t], (long long)*n);
    return GSB_OK;
}

/* An index vector of m entries each in [0, bound). */
static int check_index(const gsb__tensor *t, int64_t bound, const char *op, const char *name,
                       int64_t *m)
{
    if (!t || (!t->data && t->rows * t->cols > 0))
        return gsb__err(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (t->dtype != GSB_I32)
        return gsb__err(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                        gsb_dtype_name(t->dtype));
    *m = t->rows * t->cols;
    const int32_t *v = t->data;
    for (int64_t k = 0; k < *m; k++)
        if (v[k] < 0 || v[k] >= bound)
            return gsb__err(GSB_EINTERNAL, "%s: %s[%lld] = %d is outside [0, %lld)", op, name,
                            (long long)k, (int)v[k], (long long)bound);
    return GSB_OK;
}

/* ---- svm_select ------------------------------------------------------------- */

typedef struct svm_cand {
    double key;
    int32_t t;
} svm_cand;

static int cand_cmp(const void *pa, const void *pb)
{
    const svm_cand *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->t > b->t) - (a->t < b->t);
}

/* The first `want` candidates by (key, t) among the variables in the set
 * (up or low) not masked, masked as they are taken; their count. */
static int64_t take_best(const gsb__svm_state *s, int64_t l, int up, char *mask, int64_t want,
                         svm_cand *buf, int32_t *out)
{
    const double *f = s->f->data, *a = s->alpha->data, *C = s->C->data;
    const int32_t *y = s->y->data;
    int64_t m = 0;
    for (int64_t t = 0; t < l; t++) {
        int in = up ? gsb__svm_in_up(y[t], a[t], C[t]) : gsb__svm_in_low(y[t], a[t], C[t]);
        if (!in || mask[t])
            continue;
        buf[m].key = gsb__svm_rank_key(up ? f[t] : -f[t]);
        buf[m++].t = (int32_t)t;
    }
    qsort(buf, (size_t)m, sizeof *buf, cand_cmp);
    int64_t k = m < want ? m : want;
    for (int64_t r = 0; r < k; r++) {
        out[r] = buf[r].t;
        mask[buf[r].t] = 1;
    }
    return k;
}

int gsb__cpu_svm_select(const gsb__backend *be, const gsb__svm_state *s,
                        const gsb__tensor *exclude, int64_t k_up, int64_t k_total, int32_t *sel,
                        int64_t *n_up, int64_t *n_low, double *gap)
{
    (void)be;
    const char *op = "svm_select";
    int64_t l, n, m = 0;
    GSB_TRY(check_state(s, op, &l, &n));
    if (exclude)
        GSB_TRY(check_index(exclude, l, op, "exclude", &m));
    if (k_up < 0 || k_total < k_up || (k_total > 0 && !sel) || !n_up || !n_low || !gap)
        return gsb__err(GSB_EINTERNAL, "%s: bad counts or outputs", op);
    const double *f = s->f->data, *a = s->alpha->data, *C = s->C->data;
    const int32_t *y = s->y->data;
    double fmin = INFINITY, fmax = -INFINITY;
    for (int64_t t = 0; t < l; t++) {
        if (gsb__svm_in_up(y[t], a[t], C[t]) && f[t] < fmin)
            fmin = f[t];
        if (gsb__svm_in_low(y[t], a[t], C[t]) && f[t] > fmax)
            fmax = f[t];
    }
    *gap = isinf(fmin) || isinf(fmax) ? -INFINITY : fmax - fmin;
    char *mask = calloc((size_t)(l > 0 ? l : 1), 1);
    svm_cand *buf = cpu_alloc(l > 0 ? l : 1, sizeof *buf);
    if (!mask || !buf) {
        free(mask);
        free(buf);
        return gsb__err(GSB_ENOMEM, "%s: out of memory for %lld variables", op, (long long)l);
    }
    for (int64_t k = 0; k < m; k++)
        mask[((const int32_t *)exclude->data)[k]] = 1;
    *n_up = take_best(s, l, 1, mask, k_up, buf, sel);
    *n_low = take_best(s, l, 0, mask, k_total - *n_up, buf, sel + *n_up);
    free(mask);
    free(buf);
    return GSB_OK;
}

/* ---- svm_kernel_rows ------------------------------------------------------- */

int gsb__cpu_svm_kernel_rows(const gsb__backend *be, const gsb__tensor *X,
                             const gsb__tensor *rows, const gsb__tensor *slots, int kind,
                             double gamma, double coef0, int degree, gsb__tensor *cache)
{
    const char *op = "svm_kernel_rows";
    int64_t m, m2;
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    GSB_TRY(cpu_check(cache, GSB_F32, -1, X->rows, op, "cache"));
    GSB_TRY(check_index(rows, X->rows, op, "rows", &m));
    GSB_TRY(check_index(slots, cache->rows, op, "slots", &m2));
    if (m != m2)
        return gsb__err(GSB_EINTERNAL, "%s: %lld rows but %lld slots", op, (long long)m,
                        (long long)m2);
    int64_t n = X->rows, d = X->cols, esz = (int64_t)gsb_dtype_size(X->dtype);
    if (m == 0 || n == 0)
        return GSB_OK;
    int64_t chunk = cpu_clamp64(SVM_ROWS_ELEMS / n, 1, m);
    gsb__tensor G = GSB__TENSOR_NONE, K = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, chunk, d, &G));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, chunk, n, &K));
    const int32_t *r = rows->data, *sl = slots->data;
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
        int64_t c = cpu_min64(chunk, m - i0);
        for (int64_t i = 0; i < c; i++)
            memcpy((char *)G.data + i * d * esz, (const char *)X->data + r[i0 + i] * d * esz,
                   (size_t)(d * esz));
        gsb__tensor gv = G, kv = K;
        gv.rows = kv.rows = c;
        gv.owned = kv.owned = 0;
        GSB_CHECK(gsb__cpu_kernel(be, &gv, X, kind, gamma, coef0, degree, &kv));
        for (int64_t i = 0; i < c; i++) {
            float *dst = (float *)cache->data + (int64_t)sl[i0 + i] * n;
            for (int64_t j = 0; j < n; j++)
                dst[j] = (float)gsb__tensor_get(&K, i * n + j);
        }
    }
done:
    gsb__tensor_free(&G);
    gsb__tensor_free(&K);
    return rc;
}

/* ---- svm_inner ------------------------------------------------------------- */

/* The working set's state, by position. */
typedef struct svm_ws {
    int64_t q;
    const float **row; /* kernel row of each position (the cache's) */
    const int32_t *col; /* each position's column in those rows: real[ws_k] */
    int *y;
    double *a, *a0, *f, *C, *kd;
} svm_ws;

static float ws_k(const svm_ws *w, int64_t i, int64_t k) { return w->row[i][w->col[k]]; }

/* SMO on the working set (see backend.h); returns the steps taken. */
static int64_t inner_solve(svm_ws *w, double eps, int64_t max_steps, double *first_gap)
{
    int64_t q = w->q, steps = 0;
    double local_eps = eps;
    for (int round = 0;; round++) {
        int64_t i = -1;
        double fi = INFINITY, fmax = -INFINITY;
        for (int64_t k = 0; k < q; k++) {
            if (gsb__svm_in_up(w->y[k], w->a[k], w->C[k]) && w->f[k] < fi) {
                fi = w->f[k];
                i = k;
            }
            if (gsb__svm_in_low(w->y[k], w->a[k], w->C[k]) && w->f[k] > fmax)
                fmax = w->f[k];
        }
        double gap = i < 0 || isinf(fmax) ? -INFINITY : fmax - fi;
        if (round == 0) {
            *first_gap = gap;
            double r = GSB__SVM_INNER_RATIO * gap;
            local_eps = r > eps ? r : eps;
        }
        if (i < 0 || !(gap >= local_eps) || steps >= max_steps)
            break;
        int64_t j = -1;
        double best = INFINITY;
        for (int64_t k = 0; k < q; k++) {
            if (!gsb__svm_in_low(w->y[k], w->a[k], w->C[k]) || !(w->f[k] > fi))
                continue;
            double key = gsb__svm_j_key(fi, w->kd[i], w->f[k], w->kd[k], ws_k(w, i, k));
            if (key < best) {
                best = key;
                j = k;
            }
        }
        if (j < 0)
            break;
        double room_i = gsb__svm_room_up(w->y[i], w->a[i], w->C[i]);
        double room_j = gsb__svm_room_low(w->y[j], w->a[j], w->C[j]);
        double step = gsb__svm_j_step(fi, w->kd[i], w->f[j], w->kd[j], ws_k(w, i, j), room_j);
        double l = step < room_i ? step : room_i;
        w->a[i] = gsb__svm_new_alpha_i(w->y[i], w->a[i], w->C[i], l, room_i);
        w->a[j] = gsb__svm_new_alpha_j(w->y[j], w->a[j], w->C[j], l, room_j);
        for (int64_t k = 0; k < q; k++)
            w->f[k] = gsb__svm_new_f(w->f[k], l, ws_k(w, i, k), ws_k(w, j, k));
        steps++;
    }
    return steps;
}

int gsb__cpu_svm_inner(const gsb__backend *be, const gsb__svm_state *s, const gsb__tensor *ws,
                       const gsb__tensor *slots, double eps, int64_t max_steps,
                       gsb__tensor *coef, gsb__tensor *stats)
{
    (void)be;
    const char *op = "svm_inner";
    int64_t l, n, q, q2;
    GSB_TRY(check_state(s, op, &l, &n));
    GSB_TRY(check_index(ws, l, op, "ws", &q));
    GSB_TRY(check_index(slots, s->cache->rows, op, "slots", &q2));
    if (q != q2)
        return gsb__err(GSB_EINTERNAL, "%s: %lld variables but %lld slots", op, (long long)q,
                        (long long)q2);
    GSB_TRY(cpu_check_vec(coef, GSB_F64, q, op, "coef"));
    GSB_TRY(cpu_check_vec(stats, GSB_F64, 2, op, "stats"));
    if (max_steps < 0)
        return gsb__err(GSB_EINTERNAL, "%s: max_steps < 0", op);
    svm_ws w = {.q = q};
    int64_t qa = q > 0 ? q : 1;
    w.row = cpu_alloc(qa, sizeof *w.row);
    int32_t *col = cpu_alloc(qa, sizeof *col);
    w.y = cpu_alloc(qa, sizeof *w.y);
    double *buf = cpu_alloc(5 * qa, sizeof *buf);
    int rc = GSB_OK;
    if (!w.row || !col || !w.y || !buf) {
        rc = gsb__err(GSB_ENOMEM, "%s: out of memory for a working set of %lld", op,
                      (long long)q);
        goto done;
    }
    w.col = col;
    w.a = buf;
    w.a0 = buf + qa;
    w.f = buf + 2 * qa;
    w.C = buf + 3 * qa;
    w.kd = buf + 4 * qa;
    const int32_t *wv = ws->data, *sv = slots->data, *real = s->real->data, *y = s->y->data;
    double *alpha = s->alpha->data;
    for (int64_t k = 0; k < q; k++) {
        int32_t t = wv[k];
        w.row[k] = (const float *)s->cache->data + (int64_t)sv[k] * n;
        col[k] = real[t];
        w.y[k] = y[t] > 0 ? 1 : -1;
        w.a[k] = w.a0[k] = alpha[t];
        w.f[k] = ((const double *)s->f->data)[t];
        w.C[k] = ((const double *)s->C->data)[t];
        w.kd[k] = ((const double *)s->QD->data)[t];
    }
    double first_gap;
    int64_t steps = inner_solve(&w, eps, max_steps, &first_gap);
    double *cv = coef->data, *st = stats->data;
    for (int64_t k = 0; k < q; k++) {
        alpha[wv[k]] = w.a[k];
        cv[k] = GSB__SVM_MUL(GSB__SVM_SUB(w.a[k], w.a0[k]), (double)w.y[k]);
    }
    st[0] = first_gap;
    st[1] += (double)steps;
done:
    free(w.row);
    free(col);
    free(w.y);
    free(buf);
    return rc;
}

/* ---- svm_update_f ------------------------------------------------------------ */

int gsb__cpu_svm_update_f(const gsb__backend *be, const gsb__svm_state *s,
                          const gsb__tensor *slots, const gsb__tensor *coef)
{
    (void)be;
    const char *op = "svm_update_f";
    int64_t l, n, q;
    GSB_TRY(check_state(s, op, &l, &n));
    GSB_TRY(check_index(slots, s->cache->rows, op, "slots", &q));
    GSB_TRY(cpu_check_vec(coef, GSB_F64, q, op, "coef"));
    const int32_t *sv = slots->data, *real = s->real->data;
    const double *cv = coef->data;
    const float *cache = s->cache->data;
    double *f = s->f->data;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < l; t++) {
        double v = f[t];
        for (int64_t k = 0; k < q; k++)
            if (cv[k] != 0)
                v = gsb__svm_muladd(v, cv[k], cache[(int64_t)sv[k] * n + real[t]]);
        f[t] = v;
    }
    return GSB_OK;
}
