/*
 * partial_stats.c - the packed partial statistics (see partial_stats.h):
 * their layout and checks, the merge of each kind, and the two statistics
 * several estimators share (column moments, the centred Gram matrix of
 * [X | y]).
 *
 * Each partition's moments are computed two-pass about its own mean (the
 * backend's col_moments), never as raw sums of squares, and partitions are
 * combined with the pairwise update, so no cancellation appears however far
 * the data sit from the origin.  The Gram matrix is accumulated in float64
 * whatever X's dtype.
 */
#include "estimators/common/partial_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "solvers/randomized_svd.h" /* gsb__tensor_from_f64 / _to_f64 */

/* Dimensions beyond this are refused: the products below cannot overflow. */
#define DIM_MAX ((int64_t)1 << 31)

/* ---- layout ------------------------------------------------------------------ */

/* Payload length of a kind for dims a, b, c; -1 for an unknown kind or bad dims. */
static int64_t payload_len(int kind, int64_t a, int64_t b, int64_t c)
{
    if (a < 0 || b < 0 || c < 0 || a > DIM_MAX || b > DIM_MAX || c > DIM_MAX)
        return -1;
    switch (kind) {
    case GSB__STATS_MOMENTS: return 2 + 4 * a;
    case GSB__STATS_GRAM: return b > a ? -1 : 2 + a + a * a;
    case GSB__STATS_LLOYD: return 1 + a + a * b;
    case GSB__STATS_LOSSGRAD: return 2 + a * b;
    case GSB__STATS_COST: return a == 1 ? 1 : -1;
    case GSB__STATS_FAR: return a * (4 + b);
    case GSB__STATS_TOPK: return a * b * (2 + c);
    case GSB__STATS_SAMPLE: return a * b;
    }
    return -1;
}

static const char *kind_name(int kind)
{
    static const char *const names[] = {"?",        "moments", "gram", "lloyd", "lossgrad",
                                        "cost",     "far",     "topk", "sample"};
    return kind >= 1 && kind <= GSB__STATS_SAMPLE ? names[kind] : "?";
}

int gsb__stats_parse(const gsb__tensor *t, int kind, gsb__stats *out)
{
    memset(out, 0, sizeof *out);
    const double *v = t->data;
    int64_t n = gsb__tensor_numel(t);
    if (t->dtype != GSB_F64 || n < GSB__STATS_HEAD || v[0] != GSB__STATS_MAGIC)
        return gsb__err(GSB_EINVAL, "not a gsb partial-statistics array (a stats_* result)");
    for (int i = 1; i < GSB__STATS_HEAD; i++)
        if (v[i] != floor(v[i]) || fabs(v[i]) > (double)DIM_MAX)
            return gsb__err(GSB_EINVAL, "partial statistics: malformed header");
    out->kind = (int)v[1];
    out->a = (int64_t)v[2];
    out->b = (int64_t)v[3];
    out->c = (int64_t)v[4];
    int64_t len = payload_len(out->kind, out->a, out->b, out->c);
    if (len < 0 || len != n - GSB__STATS_HEAD)
        return gsb__err(GSB_EINVAL, "partial statistics: malformed header or truncated array");
    if (kind && out->kind != kind)
        return gsb__err(GSB_EINVAL, "partial statistics of kind '%s' where '%s' are expected",
                        kind_name(out->kind), kind_name(kind));
    out->v = v + GSB__STATS_HEAD;
    out->len = len;
    return GSB_OK;
}

int gsb__stats_alloc(int kind, int64_t a, int64_t b, int64_t c, gsb__tensor *out,
                     double **payload)
{
    int64_t len = payload_len(kind, a, b, c);
    if (len < 0)
        return gsb__err(GSB_EINVAL, "partial statistics: dimensions out of range");
    GSB_TRY(gsb__tensor_zeros(gsb__cpu_backend(), GSB_F64, GSB__STATS_HEAD + len, 1, out));
    out->ndim = 1;
    double *v = out->data;
    v[0] = GSB__STATS_MAGIC;
    v[1] = kind;
    v[2] = (double)a;
    v[3] = (double)b;
    v[4] = (double)c;
    *payload = v + GSB__STATS_HEAD;
    return GSB_OK;
}

/* ---- merges ------------------------------------------------------------------ */

/* Pairwise update of (w, mean, co-moments) over q columns: o = x merged with y.
 * Co-moments are q x q (gram) or the diagonal only (moments, full = 0). */
static void merge_chan(double wx, const double *mx, const double *cx, double wy,
                       const double *my, const double *cy, int64_t q, int full, double *mo,
                       double *co)
{
    double w = wx + wy;
    if (wy == 0 || wx == 0) { /* a weightless side adds nothing (its mean is meaningless) */
        const double *m = wy == 0 ? mx : my;
        memcpy(mo, m, (size_t)q * sizeof *mo);
        for (int64_t i = 0; i < (full ? q * q : q); i++)
            co[i] = cx[i] + cy[i];
        return;
    }
    double f = wx / w * wy; /* wx wy / w without overflow */
    for (int64_t i = 0; i < q; i++) {
        double di = my[i] - mx[i];
        mo[i] = mx[i] + di * (wy / w);
        if (!full) {
            co[i] = cx[i] + cy[i] + di * di * f;
            continue;
        }
        for (int64_t j = 0; j < q; j++)
            co[i * q + j] = cx[i * q + j] + cy[i * q + j] + di * (my[j] - mx[j]) * f;
    }
}

static void merge_moments(const gsb__stats *x, const gsb__stats *y, double *o)
{
    int64_t d = x->a;
    const double *X = x->v, *Y = y->v;
    o[0] = X[0] + Y[0];
    o[1] = X[1] + Y[1];
    merge_chan(X[0], X + 2, X + 2 + d, Y[0], Y + 2, Y + 2 + d, d, 0, o + 2, o + 2 + d);
    for (int64_t j = 0; j < d; j++) {
        /* min/max of a side with no rows are not data */
        const double *mn = X + 2 + 2 * d, *mx = X + 2 + 3 * d;
        const double *nn = Y + 2 + 2 * d, *nx = Y + 2 + 3 * d;
        o[2 + 2 * d + j] = X[1] == 0 ? nn[j] : Y[1] == 0 ? mn[j] : fmin(mn[j], nn[j]);
        o[2 + 3 * d + j] = X[1] == 0 ? nx[j] : Y[1] == 0 ? mx[j] : fmax(mx[j], nx[j]);
    }
}

static void merge_gram(const gsb__stats *x, const gsb__stats *y, double *o)
{
    int64_t q = x->a;
    const double *X = x->v, *Y = y->v;
    o[0] = X[0] + Y[0];
    o[1] = X[1] + Y[1];
    merge_chan(X[0], X + 2, X + 2 + q, Y[0], Y + 2, Y + 2 + q, q, 1, o + 2, o + 2 + q);
}

/* 1 when record p comes before record q: key ascending (descending when
 * largest), then smaller index; padding (index -1) last. */
static int before(const double *p, const double *q, int64_t key_at, int64_t index_at,
                  int largest)
{
    int pad_p = p[index_at] < 0, pad_q = q[index_at] < 0;
    if (pad_p || pad_q)
        return !pad_p && pad_q;
    if (p[key_at] != q[key_at])
        return largest ? p[key_at] > q[key_at] : p[key_at] < q[key_at];
    return p[index_at] < q[index_at];
}

/* FAR: the a largest-distance records of both sides (each side sorted). */
static void merge_far(const gsb__stats *x, const gsb__stats *y, double *o)
{
    int64_t m = x->a, w = 4 + x->b, i = 0, j = 0;
    for (int64_t r = 0; r < m; r++) {
        const double *p = x->v + i * w, *q = y->v + j * w;
        int from_x = j >= m || (i < m && !before(q, p, 0, 1, 1));
        memcpy(o + r * w, from_x ? p : q, (size_t)w * sizeof *o);
        if (from_x)
            i++;
        else
            j++;
    }
}

/* TOPK: per query, the k smallest (dist, index) of both sides, payload along. */
static void merge_topk(const gsb__stats *x, const gsb__stats *y, double *o)
{
    int64_t nq = x->a, k = x->b, t = x->c;
    const double *dx = x->v, *ix = x->v + nq * k, *px = x->v + 2 * nq * k;
    const double *dy = y->v, *iy = y->v + nq * k, *py = y->v + 2 * nq * k;
    double *dout = o, *iout = o + nq * k, *pout = o + 2 * nq * k;
    for (int64_t q = 0; q < nq; q++) {
        int64_t i = 0, j = 0;
        for (int64_t r = 0; r < k; r++) {
            int64_t a = q * k + i, b = q * k + j, dst = q * k + r;
            double ra[2] = {dx[a], ix[a]}, rb[2] = {dy[b], iy[b]};
            int from_x = j >= k || (i < k && !before(rb, ra, 0, 1, 0));
            int64_t src = from_x ? a : b;
            dout[dst] = from_x ? dx[src] : dy[src];
            iout[dst] = from_x ? ix[src] : iy[src];
            memcpy(pout + dst * t, (from_x ? px : py) + src * t, (size_t)t * sizeof *o);
            if (from_x)
                i++;
            else
                j++;
        }
    }
}

int gsb__stats_merge(const gsb__stats *x, const gsb__stats *y, gsb__tensor *out)
{
    if (x->kind != y->kind)
        return gsb__err(GSB_EINVAL, "cannot merge partial statistics of kinds '%s' and '%s'",
                        kind_name(x->kind), kind_name(y->kind));
    int sample = x->kind == GSB__STATS_SAMPLE;
    if ((!sample && x->a != y->a) || x->b != y->b || x->c != y->c)
        return gsb__err(GSB_EINVAL, "cannot merge '%s' statistics of different shapes "
                        "(%lld, %lld, %lld) and (%lld, %lld, %lld)", kind_name(x->kind),
                        (long long)x->a, (long long)x->b, (long long)x->c, (long long)y->a,
                        (long long)y->b, (long long)y->c);
    double *o = NULL;
    GSB_TRY(gsb__stats_alloc(x->kind, sample ? x->a + y->a : x->a, x->b, x->c, out, &o));
    switch (x->kind) {
    case GSB__STATS_MOMENTS: merge_moments(x, y, o); break;
    case GSB__STATS_GRAM: merge_gram(x, y, o); break;
    case GSB__STATS_FAR: merge_far(x, y, o); break;
    case GSB__STATS_TOPK: merge_topk(x, y, o); break;
    case GSB__STATS_SAMPLE:
        memcpy(o, x->v, (size_t)x->len * sizeof *o);
        memcpy(o + x->len, y->v, (size_t)y->len * sizeof *o);
        break;
    default: /* the summed kinds */
        for (int64_t i = 0; i < x->len; i++)
            o[i] = x->v[i] + y->v[i];
    }
    return GSB_OK;
}

int gsb__stats_merge_method(gsb__ctx *c)
{
    gsb__stats x, y;
    gsb__tensor out;
    GSB_TRY(gsb__stats_parse(gsb__in(c, "a"), 0, &x));
    GSB_TRY(gsb__stats_parse(gsb__in(c, "b"), 0, &y));
    GSB_TRY(gsb__stats_merge(&x, &y, &out));
    return gsb__out(c, "stats", &out);
}

/* ---- weights ----------------------------------------------------------------- */

int gsb__stats_weights(const gsb__tensor *sw, gsb_dtype xdtype, double **w, double *wsum)
{
    *w = NULL;
    if (!sw)
        return GSB_OK;
    int64_t n = sw->rows;
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v), s = 0;
    if (!v)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    for (int64_t i = 0; i < n; i++) {
        double x = ((const double *)sw->data)[i];
        v[i] = xdtype == GSB_F32 ? (double)(float)x : x;
        s += v[i];
    }
    *w = v;
    *wsum = s;
    return GSB_OK;
}

/* ---- moments ----------------------------------------------------------------- */

/*
 * Weighted mean and m2 = w_sum * variance per column (col_moments, two-pass,
 * in double), min and max.  A partition whose weights are all zero has no
 * mean: it is stored as w_sum 0, mean 0, m2 0, which every merge skips.
 */
int gsb__stats_moments_method(gsb__ctx *c)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X");
    int64_t n = X->rows, d = X->cols;
    gsb__tensor Xb = GSB__TENSOR_NONE, wb = GSB__TENSOR_NONE, mb = GSB__TENSOR_NONE,
                vb = GSB__TENSOR_NONE, lo = GSB__TENSOR_NONE, hi = GSB__TENSOR_NONE,
                out = GSB__TENSOR_NONE;
    double *w = NULL, *mean = NULL, *var = NULL, *mn = NULL, *mx = NULL, *o = NULL;
    double wsum = (double)n;
    int rc;
    GSB_CHECK(gsb__stats_weights(gsb__in(c, "sample_weight"), X->dtype, &w, &wsum));
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    if (w)
        GSB_CHECK(gsb__tensor_from_f64(be, GSB_F64, w, n, 1, &wb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, d, 1, &mb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, d, 1, &vb));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, d, 1, &lo));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, d, 1, &hi));
    if (wsum > 0)
        GSB_CHECK(be->ops->col_moments(be, &Xb, w ? &wb : NULL, &mb, &vb));
    GSB_CHECK(be->ops->col_minmax(be, &Xb, &lo, &hi));
    GSB_CHECK(gsb__stats_alloc(GSB__STATS_MOMENTS, d, 0, 0, &out, &o));
    o[0] = wsum;
    o[1] = (double)n;
    if (wsum > 0) {
        GSB_CHECK(gsb__tensor_to_f64(&mb, &mean));
        GSB_CHECK(gsb__tensor_to_f64(&vb, &var));
        for (int64_t j = 0; j < d; j++) {
            o[2 + j] = mean[j];
            o[2 + d + j] = var[j] * wsum;
        }
    }
    GSB_CHECK(gsb__tensor_to_f64(&lo, &mn));
    GSB_CHECK(gsb__tensor_to_f64(&hi, &mx));
    memcpy(o + 2 + 2 * d, mn, (size_t)d * sizeof *o);
    memcpy(o + 2 + 3 * d, mx, (size_t)d * sizeof *o);
    rc = gsb__out(c, "stats", &out);
done:
    free(w);
    free(mean);
    free(var);
    free(mn);
    free(mx);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&wb);
    gsb__tensor_free(&mb);
    gsb__tensor_free(&vb);
    gsb__tensor_free(&lo);
    gsb__tensor_free(&hi);
    gsb__tensor_free(&out);
    return rc;
}

/* ---- the centred Gram matrix of [X | y] ---------------------------------------- */

/*
 * T (on be, float64) = sqrt(w) (S - mean) for S = X or y: the centred,
 * weighted block, and its weighted column means into host m.  Rows are
 * scaled on the host (there is no row-scaling op), as linear.c does.
 */
static int centred_block(const gsb__backend *be, const gsb__tensor *S, const gsb__tensor *wb,
                         const double *sqw, double *m, gsb__tensor *T)
{
    gsb__tensor S64 = GSB__TENSOR_NONE, mean = GSB__TENSOR_NONE, h = GSB__TENSOR_NONE;
    double *mh = NULL;
    int rc;
    *T = GSB__TENSOR_NONE;
    GSB_CHECK(gsb__tensor_to_dtype(be, S, GSB_F64, &S64));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, S->cols, 1, &mean));
    GSB_CHECK(be->ops->col_moments(be, &S64, wb, &mean, NULL));
    GSB_CHECK(gsb__tensor_to_f64(&mean, &mh));
    memcpy(m, mh, (size_t)S->cols * sizeof *m);
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, S->rows, S->cols, T));
    GSB_CHECK(be->ops->col_affine(be, &S64, &mean, NULL, NULL, T));
    if (sqw) {
        GSB_CHECK(gsb__tensor_to_host(T, &h));
        double *v = h.data;
        for (int64_t i = 0; i < S->rows; i++)
            for (int64_t j = 0; j < S->cols; j++)
                v[i * S->cols + j] *= sqw[i];
        GSB_CHECK(be->ops->upload(be, T, h.data));
    }
done:
    free(mh);
    gsb__tensor_free(&S64);
    gsb__tensor_free(&mean);
    gsb__tensor_free(&h);
    if (rc != GSB_OK)
        gsb__tensor_free(T);
    return rc;
}

/* C (q x q host, row-major) blocks from the centred blocks A (n x d), B (n x t). */
static int gram_blocks(const gsb__backend *be, const gsb__tensor *A, const gsb__tensor *B,
                       int64_t q, double *C)
{
    int64_t d = A->cols, t = B ? B->cols : 0;
    gsb__tensor G = GSB__TENSOR_NONE, R = GSB__TENSOR_NONE, S = GSB__TENSOR_NONE;
    double *g = NULL, *r = NULL, *s = NULL;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, d, d, &G));
    GSB_CHECK(be->ops->syrk(be, 1.0, A, 0.0, &G));
    GSB_CHECK(gsb__tensor_to_f64(&G, &g));
    for (int64_t i = 0; i < d; i++)
        memcpy(C + i * q, g + i * d, (size_t)d * sizeof *C);
    if (t > 0) {
        GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, d, t, &R));
        GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, A, B, 0.0, &R));
        GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, t, t, &S));
        GSB_CHECK(be->ops->syrk(be, 1.0, B, 0.0, &S));
        GSB_CHECK(gsb__tensor_to_f64(&R, &r));
        GSB_CHECK(gsb__tensor_to_f64(&S, &s));
        for (int64_t i = 0; i < d; i++)
            for (int64_t j = 0; j < t; j++)
                C[i * q + d + j] = C[(d + j) * q + i] = r[i * t + j];
        for (int64_t i = 0; i < t; i++)
            memcpy(C + (d + i) * q + d, s + i * t, (size_t)t * sizeof *C);
    }
done:
    free(g);
    free(r);
    free(s);
    gsb__tensor_free(&G);
    gsb__tensor_free(&R);
    gsb__tensor_free(&S);
    return rc;
}

int gsb__stats_gram_method(gsb__ctx *c)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X"), *Y = gsb__in(c, "y");
    int64_t n = X->rows, d = X->cols, t = Y ? Y->cols : 0, q = d + t;
    gsb__tensor wb = GSB__TENSOR_NONE, A = GSB__TENSOR_NONE, B = GSB__TENSOR_NONE,
                out = GSB__TENSOR_NONE;
    double *w = NULL, *sqw = NULL, *o = NULL, wsum = (double)n;
    int rc;
    GSB_CHECK(gsb__stats_weights(gsb__in(c, "sample_weight"), X->dtype, &w, &wsum));
    GSB_CHECK(gsb__stats_alloc(GSB__STATS_GRAM, q, t, 0, &out, &o));
    o[0] = wsum;
    o[1] = (double)n;
    if (wsum > 0) {
        if (w) {
            GSB_CHECK(gsb__tensor_from_f64(be, GSB_F64, w, n, 1, &wb));
            if (!(sqw = malloc((size_t)n * sizeof *sqw))) {
                rc = gsb__err(GSB_ENOMEM, "out of host memory");
                goto done;
            }
            for (int64_t i = 0; i < n; i++)
                sqw[i] = sqrt(w[i]);
        }
        GSB_CHECK(centred_block(be, X, w ? &wb : NULL, sqw, o + 2, &A));
        if (Y)
            GSB_CHECK(centred_block(be, Y, w ? &wb : NULL, sqw, o + 2 + d, &B));
        GSB_CHECK(gram_blocks(be, &A, Y ? &B : NULL, q, o + 2 + q));
    }
    rc = gsb__out(c, "stats", &out);
done:
    free(w);
    free(sqw);
    gsb__tensor_free(&wb);
    gsb__tensor_free(&A);
    gsb__tensor_free(&B);
    gsb__tensor_free(&out);
    return rc;
}
