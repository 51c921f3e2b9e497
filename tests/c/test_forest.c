/*
 * test_forest.c - the random forests: the CPU forest ops against naive
 * loops written here (binning, histograms and their subtraction, the split
 * search re-derived from scikit-learn's rules, the stable partition,
 * prediction), then RandomForestClassifier / RandomForestRegressor through
 * the public API: exact fits where the data allow one, determinism,
 * warm start equal to a cold fit, missing values, one class, the leaf rules
 * (max_depth, max_leaf_nodes, min_samples_leaf), OOB, importances,
 * progress and cancellation, blob round trip and damaged blobs, errors.
 * GSB_DEVICE=cuda runs the API part on the GPU backend.
 */
#include "backend/backend.h"
#include "backend/forest_math.h"
#include "core/blob.h"
#include "core/tensor.h"
#include "test_api_helpers.h"

static gsb_session *S;

static double urand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) * 0x1.0p-53;
}

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        abort();
    return p;
}

static gsb__tensor host(gsb_dtype dt, int64_t rows, int64_t cols)
{
    gsb__tensor t;
    if (gsb__tensor_zeros(gsb__cpu_backend(), dt, rows, cols, &t) != GSB_OK)
        abort();
    return t;
}

/* ---- a random problem for the ops ------------------------------------------------- */

typedef struct problem {
    int64_t n, F, S;
    int n_bins, nan_code, K, O, V1;
    gsb__tensor codes, y, rows, w, srows, sw, pool;
    gsb__forest_data d;
    int32_t *nodes;  /* B x 3 */
    int64_t B;
} problem;

/* n rows of F codes < n_bins (nan_code: every ~8th value of feature 0 and 2),
 * classification (K > 0) or regression (O outputs); samples: each row with
 * probability 0.8, weights in [0.5, 3) (or 1 and 2 when integral); B nodes
 * cut the samples in random segments. */
static void problem_make(problem *p, uint64_t seed, int64_t n, int64_t F, int n_bins, int nan,
                         int K, int O, int64_t B, int integral)
{
    memset(p, 0, sizeof *p);
    uint64_t s = seed * 2654435761u + 1;
    p->n = n;
    p->F = F;
    p->n_bins = n_bins;
    p->nan_code = nan ? n_bins - 1 : -1;
    p->K = K;
    p->O = O;
    p->V1 = gsb__forest_nstats(K, O);
    p->codes = host(GSB_I32, n, (F + 3) / 4);
    uint8_t *c = p->codes.data;
    int64_t stride = 4 * p->codes.cols;
    int n_real = nan ? n_bins - 1 : n_bins;
    for (int64_t i = 0; i < n; i++)
        for (int64_t f = 0; f < F; f++) {
            /* feature 1 takes few values, so bins stay empty and runs repeat */
            int v = f == 1 ? (int)(urand(&s) * 3) * (n_real / 3) : (int)(urand(&s) * n_real);
            if (nan && (f == 0 || f == 2) && urand(&s) < 0.125)
                v = p->nan_code;
            c[i * stride + f] = (uint8_t)v;
        }
    if (K > 0) {
        p->y = host(GSB_I32, n, 1);
        for (int64_t i = 0; i < n; i++) /* class follows feature 0 a little */
            ((int32_t *)p->y.data)[i] =
                (int32_t)((urand(&s) < 0.5 ? c[i * stride] * K / n_bins : urand(&s) * K)) % K;
    } else {
        p->y = host(GSB_F64, n, 2 * O);
        double *y = p->y.data;
        for (int64_t i = 0; i < n; i++)
            for (int k = 0; k < O; k++) {
                double v = 0.01 * c[i * stride + k % F] + urand(&s) + k;
                y[i * 2 * O + k] = v;
                y[i * 2 * O + O + k] = v * v;
            }
    }
    int32_t *rows = xmalloc((size_t)n * sizeof *rows);
    float *w = xmalloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < n; i++)
        if (urand(&s) < 0.8) {
            rows[p->S] = (int32_t)i;
            w[p->S++] = integral ? (float)(1 + (urand(&s) < 0.3)) : (float)(0.5 + 2.5 * urand(&s));
        }
    p->rows = host(GSB_I32, p->S, 1);
    p->w = host(GSB_F32, p->S, 1);
    memcpy(p->rows.data, rows, (size_t)p->S * sizeof *rows);
    memcpy(p->w.data, w, (size_t)p->S * sizeof *w);
    free(rows);
    free(w);
    p->srows = host(GSB_I32, p->S, 1);
    p->sw = host(GSB_F32, p->S, 1);
    p->pool = host(GSB_F64, B + 2, F * n_bins * p->V1);
    p->B = B;
    p->nodes = xmalloc((size_t)B * 3 * sizeof *p->nodes);
    int64_t at = 0; /* segments of random lengths, the last to the end, one empty */
    for (int64_t b = 0; b < B; b++) {
        int64_t len = b == B - 1 ? p->S - at : b == 1 ? 0 : (int64_t)(urand(&s) * 2.0 * p->S / B);
        if (at + len > p->S)
            len = p->S - at;
        p->nodes[3 * b] = (int32_t)at;
        p->nodes[3 * b + 1] = (int32_t)(at + len);
        p->nodes[3 * b + 2] = (int32_t)b;
        at += len;
    }
    p->d = (gsb__forest_data){&p->codes, F, n_bins, p->nan_code, K, O, &p->y, &p->rows, &p->w,
                              &p->srows, &p->sw, &p->pool};
}

static void problem_free(problem *p)
{
    gsb__tensor_free(&p->codes);
    gsb__tensor_free(&p->y);
    gsb__tensor_free(&p->rows);
    gsb__tensor_free(&p->w);
    gsb__tensor_free(&p->srows);
    gsb__tensor_free(&p->sw);
    gsb__tensor_free(&p->pool);
    free(p->nodes);
}

static int code_of(const problem *p, int64_t row, int64_t f)
{
    return ((const uint8_t *)p->codes.data)[row * 4 * p->codes.cols + f];
}

/* naive stats of feature f over samples [a, b): n_bins x V1 */
static void naive_hist(const problem *p, int64_t a, int64_t b, int64_t f, double *h)
{
    memset(h, 0, (size_t)p->n_bins * p->V1 * sizeof *h);
    for (int64_t i = a; i < b; i++) {
        int32_t r = ((const int32_t *)p->rows.data)[i];
        double wi = ((const float *)p->w.data)[i];
        double *x = h + code_of(p, r, f) * p->V1;
        x[0] += 1;
        if (p->K > 0) {
            x[1 + ((const int32_t *)p->y.data)[r]] += wi;
        } else {
            x[1] += wi;
            for (int k = 0; k < 2 * p->O; k++)
                x[2 + k] += wi * ((const double *)p->y.data)[(int64_t)r * 2 * p->O + k];
        }
    }
}

static int close_rel(double a, double b, double tol)
{
    return fabs(a - b) <= tol * fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* ---- ops: binning, histograms ----------------------------------------------------- */

static void test_op_bin(void)
{
    const gsb__backend *be = gsb__cpu_backend();
    for (int dt = 0; dt < 2; dt++) {
        int64_t n = 300, d = 5, e = 7;
        gsb__tensor X = host(dt ? GSB_F64 : GSB_F32, n, d), E = host(GSB_F32, d, e);
        gsb__tensor C = host(GSB_I32, n, 2);
        uint64_t s = 11 + dt;
        for (int64_t f = 0; f < d; f++)
            for (int64_t j = 0; j < e; j++) /* feature 4: 3 edges, then +inf */
                ((float *)E.data)[f * e + j] = f == 4 && j >= 3 ? INFINITY : (float)(j - 3);
        for (int64_t i = 0; i < n * d; i++) {
            double v = urand(&s) < 0.1 ? NAN : urand(&s) < 0.2 ? (double)(int)(8 * urand(&s)) - 4
                                                               : 10 * urand(&s) - 5;
            gsb__tensor_set(&X, i, v);
        }
        CHECK_OK(be->ops->forest_bin(be, &X, &E, 9, &C));
        int bad = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t f = 0; f < 8; f++) {
                int got = ((const uint8_t *)C.data)[i * 8 + f];
                int want = 0;
                if (f >= d) {
                    want = 0;
                } else {
                    float x = (float)gsb__tensor_get(&X, i * d + f);
                    if (isnan(x))
                        want = 9;
                    else
                        for (int64_t j = 0; j < e; j++)
                            want += ((float *)E.data)[f * e + j] < x;
                }
                bad += got != want;
            }
        CHECK(bad == 0);
        gsb__tensor_free(&X);
        gsb__tensor_free(&E);
        gsb__tensor_free(&C);
    }
}

static void test_op_hist(void)
{
    const gsb__backend *be = gsb__cpu_backend();
    int shapes[3][3] = {{3, 0, 1}, {0, 2, 0}, {5, 0, 0}}; /* K, O, nan */
    for (int sh = 0; sh < 3; sh++) {
        problem p;
        problem_make(&p, 3 + sh, 500, 6, 16, shapes[sh][2], shapes[sh][0], shapes[sh][1], 5, 0);
        gsb__tensor nodes = gsb__tensor_host_view(p.nodes, GSB_I32, p.B, 3);
        CHECK_OK(be->ops->forest_hist(be, &p.d, &nodes, NULL));
        int64_t per = p.n_bins * p.V1;
        double *h = xmalloc((size_t)per * sizeof *h);
        int bad = 0;
        for (int64_t b = 0; b < p.B; b++)
            for (int64_t f = 0; f < p.F; f++) {
                naive_hist(&p, p.nodes[3 * b], p.nodes[3 * b + 1], f, h);
                const double *got = (const double *)p.pool.data + b * p.pool.cols + f * per;
                for (int64_t k = 0; k < per; k++)
                    bad += !close_rel(got[k], h[k], 1e-12);
            }
        CHECK(bad == 0);
        /* a feature list: only those features of the slot change */
        int32_t feats[5 * 2];
        for (int64_t b = 0; b < p.B; b++) {
            feats[2 * b] = (int32_t)(b % p.F);
            feats[2 * b + 1] = -1;
        }
        double *before = xmalloc((size_t)p.pool.rows * p.pool.cols * sizeof *before);
        memcpy(before, p.pool.data, (size_t)p.pool.rows * p.pool.cols * sizeof *before);
        for (int64_t i = 0; i < p.pool.rows * p.pool.cols; i++)
            ((double *)p.pool.data)[i] = -1.0;
        gsb__tensor ft = gsb__tensor_host_view(feats, GSB_I32, p.B, 2);
        CHECK_OK(be->ops->forest_hist(be, &p.d, &nodes, &ft));
        bad = 0;
        for (int64_t b = 0; b < p.B; b++)
            for (int64_t f = 0; f < p.F; f++)
                for (int64_t k = 0; k < per; k++) {
                    double got = ((const double *)p.pool.data)[b * p.pool.cols + f * per + k];
                    bad += f == b % p.F ? got != before[b * p.pool.cols + f * per + k]
                                        : got != -1.0;
                }
        CHECK(bad == 0);
        free(before);
        /* a feature listed many times (the call large enough to run on every thread):
         * its histogram is the node's, computed once */
        int32_t all[3] = {0, (int32_t)p.S, (int32_t)p.B}, many[120];
        for (int j = 0; j < 120; j++)
            many[j] = j % 3 == 2 ? -1 : (int32_t)(j % 3);
        gsb__tensor an = gsb__tensor_host_view(all, GSB_I32, 1, 3);
        gsb__tensor mt = gsb__tensor_host_view(many, GSB_I32, 1, 120);
        CHECK_OK(be->ops->forest_hist(be, &p.d, &an, &mt));
        bad = 0;
        for (int64_t f = 0; f < 2; f++) {
            naive_hist(&p, 0, p.S, f, h);
            const double *got = (const double *)p.pool.data + p.B * p.pool.cols + f * per;
            for (int64_t k = 0; k < per; k++)
                bad += !close_rel(got[k], h[k], 1e-12);
        }
        CHECK(bad == 0);
        /* subtraction: (all samples) - (the first segments) = the rest, empty bins exactly 0 */
        int32_t whole[3] = {0, (int32_t)p.S, (int32_t)p.B}, part[3] = {0, p.nodes[4],
                                                                        (int32_t)p.B + 1};
        gsb__tensor wn = gsb__tensor_host_view(whole, GSB_I32, 1, 3);
        gsb__tensor pn = gsb__tensor_host_view(part, GSB_I32, 1, 3);
        CHECK_OK(be->ops->forest_hist(be, &p.d, &wn, NULL));
        CHECK_OK(be->ops->forest_hist(be, &p.d, &pn, NULL));
        int32_t pairs[2] = {(int32_t)p.B, (int32_t)p.B + 1};
        gsb__tensor pt = gsb__tensor_host_view(pairs, GSB_I32, 1, 2);
        CHECK_OK(be->ops->forest_hist_sub(be, &p.d, &pt));
        bad = 0;
        for (int64_t f = 0; f < p.F; f++) {
            naive_hist(&p, p.nodes[4], p.S, f, h);
            const double *got = (const double *)p.pool.data + p.B * p.pool.cols + f * per;
            for (int64_t k = 0; k < per; k++)
                bad += !close_rel(got[k], h[k], 1e-9) || (h[k - k % p.V1] == 0 && got[k] != 0);
        }
        CHECK(bad == 0);
        int32_t bad_pair[2] = {0, (int32_t)p.pool.rows};
        gsb__tensor bp = gsb__tensor_host_view(bad_pair, GSB_I32, 1, 2);
        CHECK_ERR(be->ops->forest_hist_sub(be, &p.d, &bp), GSB_EINTERNAL, "out of range");
        free(h);
        problem_free(&p);
    }
}

/* ---- ops: the split search, re-derived -------------------------------------------- */

/* The proxy of left L / right R in textbook form (-(weighted child impurities), up to
 * the node's constant), or -inf when a side breaks min_leaf / min_weight. */
static double naive_proxy(const problem *p, const double *L, const double *R, int crit,
                          double min_leaf, double min_weight)
{
    if (L[0] < min_leaf || R[0] < min_leaf || L[0] < 1 || R[0] < 1)
        return -INFINITY;
    double acc = 0;
    if (p->K > 0) {
        double wl = 0, wr = 0;
        for (int k = 0; k < p->K; k++) {
            wl += L[1 + k];
            wr += R[1 + k];
        }
        if (wl < min_weight || wr < min_weight)
            return -INFINITY;
        for (int k = 0; k < p->K; k++) {
            double a = L[1 + k], b = R[1 + k];
            if (crit == GSB__FOREST_ENTROPY)
                acc += (a > 0 ? a * log(a / wl) : 0) + (b > 0 ? b * log(b / wr) : 0);
            else
                acc -= wl * (a / wl) * (1 - a / wl) + wr * (b / wr) * (1 - b / wr);
        }
        return crit == GSB__FOREST_ENTROPY ? acc : acc + wl + wr;
    }
    double wl = L[1], wr = R[1];
    if (wl < min_weight || wr < min_weight)
        return -INFINITY;
    for (int k = 0; k < p->O; k++) {
        double a = L[2 + k], b = R[2 + k];
        if (crit == GSB__FOREST_POISSON) {
            if (a <= 2.220446049250313e-16 || b <= 2.220446049250313e-16)
                return -INFINITY;
            acc += a * log(a / wl) + b * log(b / wr);
        } else {
            acc += a * a / wl + b * b / wr;
        }
    }
    return acc;
}

typedef struct cand {
    double proxy;
    int lo, hi, missing_left;
    double L[16], R[16];
} cand;

/* Every candidate of feature f in node [a, b), in scikit-learn's order; returns
 * their count (out holds at most cap), *nonconst whether the feature is. */
static int naive_candidates(const problem *p, int64_t a, int64_t b, int64_t f, int crit,
                            double min_leaf, double min_weight, cand *out, int cap,
                            int *nonconst)
{
    int V1 = p->V1, n_real = p->nan_code >= 0 ? p->n_bins - 1 : p->n_bins, nc = 0, k = 0;
    double *h = xmalloc((size_t)p->n_bins * V1 * sizeof *h), tot[16] = {0}, nan[16] = {0};
    int *codes = xmalloc((size_t)p->n_bins * sizeof *codes);
    naive_hist(p, a, b, f, h);
    for (int c = 0; c < n_real; c++)
        if (h[c * V1] > 0)
            codes[nc++] = c;
    int has_nan = p->nan_code >= 0 && h[p->nan_code * V1] > 0;
    for (int s = 0; s < V1; s++) {
        for (int c = 0; c < p->n_bins; c++)
            tot[s] += h[c * V1 + s];
        nan[s] = has_nan ? h[p->nan_code * V1 + s] : 0;
    }
    *nonconst = nc + has_nan >= 2;
    for (int pass = 0; pass < 3 && *nonconst; pass++) {
        if (pass > 0 && !has_nan)
            break;
        int lo_i = pass == 1 ? nc - 1 : 0, hi_i = pass == 1 ? nc : nc - 1;
        for (int i = lo_i; i < hi_i && k < cap; i++) {
            cand *x = &out[k++];
            memset(x, 0, sizeof *x);
            for (int c = 0; c <= codes[i]; c++)
                for (int s = 0; s < V1; s++)
                    x->L[s] += h[c * V1 + s];
            for (int s = 0; s < V1; s++) {
                x->L[s] += pass == 2 ? nan[s] : 0;
                x->R[s] = tot[s] - x->L[s];
            }
            x->lo = codes[i];
            x->hi = pass == 1 ? n_real : codes[i + 1];
            x->missing_left = pass == 2 ? 1 : pass == 1 ? 0 : has_nan ? 0 : x->L[0] > x->R[0];
            x->proxy = naive_proxy(p, x->L, x->R, crit, min_leaf, min_weight);
        }
    }
    free(h);
    free(codes);
    return k;
}

static void check_split_case(problem *p, int crit, int64_t m, int first_only, double min_leaf,
                             double min_weight, int use_pool)
{
    const gsb__backend *be = gsb__cpu_backend();
    uint64_t s = 99 + (uint64_t)m;
    int32_t *feats = xmalloc((size_t)(p->B * m) * sizeof *feats);
    for (int64_t i = 0; i < p->B * m; i++)
        feats[i] = urand(&s) < 0.1 ? -1 : (int32_t)(urand(&s) * p->F);
    int32_t *nodes = xmalloc((size_t)p->B * 3 * sizeof *nodes);
    memcpy(nodes, p->nodes, (size_t)p->B * 3 * sizeof *nodes);
    gsb__tensor nt = gsb__tensor_host_view(nodes, GSB_I32, p->B, 3);
    if (use_pool) {
        CHECK_OK(be->ops->forest_hist(be, &p->d, &nt, NULL));
    } else {
        for (int64_t b = 0; b < p->B; b++)
            nodes[3 * b + 2] = -1;
    }
    int R = gsb__forest_rec_len(p->V1);
    gsb__tensor best = host(GSB_F64, p->B, R);
    gsb__tensor ft = gsb__tensor_host_view(feats, GSB_I32, p->B, m);
    gsb__forest_rule rule = {crit, (int64_t)min_leaf, min_weight, first_only};
    CHECK_OK(be->ops->forest_split(be, &p->d, &nt, &ft, &rule, &best));
    cand *cands = xmalloc(600 * sizeof *cands);
    int bad = 0;
    for (int64_t b = 0; b < p->B; b++) {
        const double *r = (const double *)best.data + b * R;
        double top = -INFINITY, at_op = -INFINITY, second = -INFINITY;
        int nonconst_total = 0, eligible = 1;
        for (int64_t j = 0; j < m; j++) {
            int64_t f = feats[b * m + j];
            if (f < 0)
                continue;
            int nonconst;
            int nc = naive_candidates(p, p->nodes[3 * b], p->nodes[3 * b + 1], f, crit,
                                      min_leaf, min_weight, cands, 600, &nonconst);
            nonconst_total += nonconst;
            if (!nonconst || !eligible)
                continue;
            if (first_only)
                eligible = 0;
            for (int i = 0; i < nc; i++) {
                const cand *x = &cands[i];
                if (x->proxy > top) {
                    second = top;
                    top = x->proxy;
                } else if (x->proxy > second) {
                    second = x->proxy;
                }
                if (f == (int64_t)r[GSB__FREC_FEATURE] && x->lo == (int)r[GSB__FREC_BIN_LO] &&
                    x->missing_left == (int)r[GSB__FREC_MISSING_LEFT] &&
                    x->hi == (int)r[GSB__FREC_BIN_HI]) {
                    at_op = x->proxy;
                    for (int k = 0; k < p->V1; k++)
                        bad += !close_rel(r[GSB__FREC_LEFT + k], x->L[k], 1e-9) ||
                               !close_rel(r[GSB__FREC_LEFT + p->V1 + k], x->R[k], 1e-9);
                }
            }
        }
        bad += (int)r[GSB__FREC_NONCONST] != nonconst_total;
        if (top == -INFINITY) {
            bad += r[GSB__FREC_PROXY] != -INFINITY || r[GSB__FREC_FEATURE] != -1;
            continue;
        }
        /* the op's candidate is a best one (up to rounding when nearly tied) */
        double tol = 1e-9 * fmax(1.0, fabs(top));
        bad += !(at_op >= top - tol);
        if (top - second > tol) /* a clear winner: exactly it */
            bad += !(at_op == top);
    }
    if (bad)
        fprintf(stderr, "  split case: crit %d m %lld first_only %d min_leaf %g pool %d: %d "
                "mismatches\n", crit, (long long)m, first_only, min_leaf, use_pool, bad);
    CHECK(bad == 0);
    free(cands);
    free(feats);
    free(nodes);
    gsb__tensor_free(&best);
}

static void test_op_split(void)
{
    /* K, O, nan, criterion */
    int cases[6][4] = {{2, 0, 0, GSB__FOREST_GINI},   {4, 0, 1, GSB__FOREST_GINI},
                       {3, 0, 1, GSB__FOREST_ENTROPY}, {0, 1, 0, GSB__FOREST_MSE},
                       {0, 2, 1, GSB__FOREST_MSE},    {0, 1, 1, GSB__FOREST_POISSON}};
    for (int c = 0; c < 6; c++) {
        for (int nodes = 0; nodes < 2; nodes++) { /* few nodes, and many (both paths) */
            problem p;
            int64_t B = nodes ? 40 : 3;
            problem_make(&p, 20 + c, nodes ? 1500 : 400, 5, 12, cases[c][2], cases[c][0],
                         cases[c][1], B, c % 2);
            check_split_case(&p, cases[c][3], 3, 0, 1, 0, 0);
            check_split_case(&p, cases[c][3], 3, 0, 1, 0, 1);
            check_split_case(&p, cases[c][3], 5, 1, 1, 0, 0);
            check_split_case(&p, cases[c][3], 2, 0, 7, 0, 0);
            check_split_case(&p, cases[c][3], 4, 0, 1, 30.0, 1);
            problem_free(&p);
        }
    }
}

/* ---- ops: partition, prediction --------------------------------------------------- */

static void test_op_partition(void)
{
    const gsb__backend *be = gsb__cpu_backend();
    problem p;
    problem_make(&p, 5, 2000, 4, 20, 1, 2, 0, 30, 0);
    int32_t *before = xmalloc((size_t)p.S * sizeof *before);
    float *wb = xmalloc((size_t)p.S * sizeof *wb);
    memcpy(before, p.rows.data, (size_t)p.S * sizeof *before);
    memcpy(wb, p.w.data, (size_t)p.S * sizeof *wb);
    int32_t *splits = xmalloc((size_t)p.B * 3 * sizeof *splits), *nl = xmalloc((size_t)p.B * 4);
    uint64_t s = 7;
    for (int64_t b = 0; b < p.B; b++) {
        splits[3 * b] = (int32_t)(urand(&s) * p.F);
        splits[3 * b + 1] = (int32_t)(urand(&s) * 20);
        splits[3 * b + 2] = urand(&s) < 0.5;
    }
    gsb__tensor nt = gsb__tensor_host_view(p.nodes, GSB_I32, p.B, 3);
    gsb__tensor st = gsb__tensor_host_view(splits, GSB_I32, p.B, 3);
    gsb__tensor lt = gsb__tensor_host_view(nl, GSB_I32, p.B, 1);
    CHECK_OK(be->ops->forest_partition(be, &p.d, &nt, &st, &lt));
    int bad = 0;
    const int32_t *rows = p.rows.data;
    const float *w = p.w.data;
    for (int64_t b = 0; b < p.B; b++) {
        int64_t k = p.nodes[3 * b];
        for (int pass = 0; pass < 2; pass++)
            for (int64_t i = p.nodes[3 * b]; i < p.nodes[3 * b + 1]; i++) {
                int c = code_of(&p, before[i], splits[3 * b]);
                int left = c == p.nan_code ? splits[3 * b + 2] : c <= splits[3 * b + 1];
                if (left != (pass == 0))
                    continue;
                bad += rows[k] != before[i] || w[k] != wb[i];
                k++;
            }
        int64_t want_left = 0;
        for (int64_t i = p.nodes[3 * b]; i < p.nodes[3 * b + 1]; i++) {
            int c = code_of(&p, before[i], splits[3 * b]);
            want_left += c == p.nan_code ? splits[3 * b + 2] : c <= splits[3 * b + 1];
        }
        bad += nl[b] != want_left;
    }
    CHECK(bad == 0);
    free(before);
    free(wb);
    free(splits);
    free(nl);
    problem_free(&p);
}

/* A random tree of depth <= 3 in the node arrays from *next, breadth first, each
 * split's children a pair (left, right) after it; returns its root. */
static int32_t random_tree(uint64_t *s, int64_t d, int32_t *split, float *thr, int32_t *child,
                           int64_t *next, int64_t *leaves)
{
    int64_t queue[16], depth[16], head = 0, tail = 0;
    int64_t root = (*next)++;
    queue[tail] = root;
    depth[tail++] = 0;
    while (head < tail) {
        int64_t at = queue[head], dep = depth[head++];
        if (dep >= 3 || urand(s) < 0.25) {
            split[at] = -1;
            thr[at] = 0;
            child[at] = (int32_t)(*leaves)++;
            continue;
        }
        split[at] = (int32_t)(2 * (int64_t)(urand(s) * d) + (urand(s) < 0.5));
        thr[at] = (float)(2 * urand(s) - 1);
        child[at] = (int32_t)*next;
        for (int k = 0; k < 2; k++) {
            queue[tail] = (*next)++;
            depth[tail++] = dep + 1;
        }
    }
    return (int32_t)root;
}

static void test_op_predict(void)
{
    const gsb__backend *be = gsb__cpu_backend();
    uint64_t s = 31;
    int64_t T = 4, d = 3, n = 200, K = 3, cap = 64 * T;
    int32_t *split = xmalloc(cap * 4), *child = xmalloc(cap * 4), *root = xmalloc(T * 4);
    float *thr = xmalloc(cap * 4);
    int64_t next = 0, leaves = 0;
    for (int64_t t = 0; t < T; t++)
        root[t] = random_tree(&s, d, split, thr, child, &next, &leaves);
    float *val = xmalloc((size_t)(leaves * K) * 4);
    for (int64_t i = 0; i < leaves * K; i++)
        val[i] = (float)urand(&s);
    gsb__tensor ts = gsb__tensor_host_view(split, GSB_I32, next, 1);
    gsb__tensor tt = gsb__tensor_host_view(thr, GSB_F32, next, 1);
    gsb__tensor tc = gsb__tensor_host_view(child, GSB_I32, next, 1);
    gsb__tensor tr = gsb__tensor_host_view(root, GSB_I32, T, 1);
    gsb__tensor tv = gsb__tensor_host_view(val, GSB_F32, leaves, K);
    gsb__forest_trees trees = {&ts, &tt, &tc, &tr, &tv};
    for (int dt = 0; dt < 2; dt++) {
        gsb__tensor X = host(dt ? GSB_F64 : GSB_F32, n, d), mean = host(GSB_F64, n, K);
        gsb__tensor lv = host(GSB_I32, n, T), best = host(GSB_I32, n, 1);
        for (int64_t i = 0; i < n * d; i++)
            gsb__tensor_set(&X, i, urand(&s) < 0.1 ? NAN : 2 * urand(&s) - 1);
        CHECK_OK(be->ops->forest_predict(be, &X, &trees, &mean, &best, &lv));
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double want[3] = {0, 0, 0};
            for (int64_t t = 0; t < T; t++) {
                int64_t node = root[t];
                while (split[node] >= 0) {
                    float x = (float)gsb__tensor_get(&X, i * d + split[node] / 2);
                    int go_left = isnan(x) ? split[node] % 2 == 1 : x <= thr[node];
                    node = child[node] + !go_left;
                }
                bad += ((int32_t *)lv.data)[i * T + t] != node - root[t];
                for (int64_t k = 0; k < K; k++)
                    want[k] += val[child[node] * K + k];
            }
            int32_t arg = 0; /* the first largest mean */
            for (int64_t k = 0; k < K; k++) {
                bad += ((double *)mean.data)[i * K + k] != want[k] / (double)T;
                if (want[k] / (double)T > want[arg] / (double)T)
                    arg = (int32_t)k;
            }
            bad += ((int32_t *)best.data)[i] != arg;
        }
        CHECK(bad == 0);
        /* one output alone gives the same */
        gsb__tensor best2 = host(GSB_I32, n, 1);
        CHECK_OK(be->ops->forest_predict(be, &X, &trees, NULL, &best2, NULL));
        CHECK(memcmp(best.data, best2.data, (size_t)n * 4) == 0);
        gsb__tensor_free(&best2);
        gsb__tensor_free(&X);
        gsb__tensor_free(&mean);
        gsb__tensor_free(&lv);
        gsb__tensor_free(&best);
    }
    free(split);
    free(child);
    free(root);
    free(thr);
    free(val);
}

/* ---- the estimators through the public API ---------------------------------------- */

/* fit with y (and sample weights sw, may be NULL), params JSON: the model or NULL */
static gsb_model *fit_model(const char *est, const char *params, const gsb_array *X,
                            const gsb_array *y, const gsb_array *sw)
{
    gsb_model *m = testing_model(S, est, params);
    if (!m)
        return NULL;
    int rc = testing_fit(m, X, y, sw);
    CHECK_OK(rc);
    if (rc != GSB_OK) {
        gsb_model_free(m);
        return NULL;
    }
    return m;
}

/* a method's first result into a malloc'ed array of doubles (*n elements) */
static double *call_values(gsb_model *m, const char *method, const gsb_array *X, int64_t *n)
{
    gsb_result *r = NULL;
    const gsb_array *ins[1] = {X};
    int rc = gsb_model_call(m, method, ins, X ? 1 : 0, NULL, &r);
    CHECK_OK(rc);
    *n = 0;
    if (rc != GSB_OK)
        return xmalloc(8);
    const gsb_array *a = gsb_result_array(r, 0);
    *n = testing_numel(a);
    double *out = xmalloc((size_t)*n * sizeof *out);
    testing_copy(a, out, *n);
    gsb_result_free(r);
    return out;
}

/* XOR of the signs of features 0 and 1, feature 2 noise: n x 3, labels 0/1 */
static void xor_data(int64_t n, uint64_t seed, double *X, double *y)
{
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        for (int j = 0; j < 3; j++) {
            double v = 0.1 + 0.9 * urand(&s);
            X[i * 3 + j] = urand(&s) < 0.5 ? -v : v;
        }
        y[i] = (X[i * 3] > 0) != (X[i * 3 + 1] > 0);
    }
}

static void test_fits_exactly(void)
{
    enum { N = 120 };
    double X[N * 3], y[N], yr[N], Y2[N * 2];
    xor_data(N, 3, X, y);
    for (int64_t i = 0; i < N; i++) {
        yr[i] = 3 * X[i * 3] - 2 * X[i * 3 + 1];
        Y2[2 * i] = yr[i];
        Y2[2 * i + 1] = X[i * 3 + 2];
    }
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 3), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_array ra = gsb_array_1d(yr, GSB_F64, N), y2 = gsb_array_2d(Y2, GSB_F64, N, 2);
    const char *exact = "{\"n_estimators\": 7, \"bootstrap\": false, \"max_features\": null, "
                        "\"random_state\": 0}";
    gsb_model *m = fit_model("RandomForestClassifier", exact, &xa, &ya, NULL);
    int64_t n;
    double *pred = m ? call_values(m, "predict", &xa, &n) : NULL;
    int wrong = 0;
    for (int64_t i = 0; pred && i < N; i++)
        wrong += pred[i] != y[i];
    CHECK(pred && n == N && wrong == 0);
    free(pred);
    double imp[3];
    CHECK(m && testing_attr(m, "feature_importances_", imp, 3, NULL) == 3);
    CHECK_CLOSE(imp[0] + imp[1] + imp[2], 1.0, 1e-12);
    CHECK(imp[2] < imp[0] && imp[2] < imp[1]);
    gsb_model_free(m);
    /* regression: every leaf one sample (at most n_bins distinct values: exact bins) */
    for (int outputs = 1; outputs <= 2; outputs++) {
        m = fit_model("RandomForestRegressor", exact, &xa, outputs == 1 ? &ra : &y2, NULL);
        gsb_array info;
        pred = m ? call_values(m, "predict", &xa, &n) : NULL;
        int off = 0;
        for (int64_t i = 0; pred && i < N * outputs; i++)
            off += fabs(pred[i] - (outputs == 1 ? yr[i] : Y2[i])) >
                   1e-6 * (1 + fabs(yr[i / outputs]));
        CHECK(pred && n == N * outputs && off == 0);
        free(pred);
        double no;
        CHECK(m && testing_attr(m, "n_outputs_", &no, 1, &info) == 1 && no == outputs);
        gsb_model_free(m);
    }
}

/* Three noisy classes of 600 rows x 6 (feature 0 and 1 informative). */
static void blob_data(double *X, double *y, int64_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        int c = (int)(i % 3);
        y[i] = c;
        for (int j = 0; j < 6; j++)
            X[i * 6 + j] = (j < 2 ? 1.5 * c * (j ? -1 : 1) : 0) + 2 * urand(&s) - 1;
    }
}

static int same_values(gsb_model *a, gsb_model *b, const char *method, const gsb_array *X)
{
    int64_t na, nb;
    double *va = call_values(a, method, X, &na), *vb = call_values(b, method, X, &nb);
    int same = na == nb && na > 0 && memcmp(va, vb, (size_t)na * sizeof *va) == 0;
    free(va);
    free(vb);
    return same;
}

static void test_determinism_warm_start(void)
{
    enum { N = 600 };
    static double X[N * 6], y[N];
    blob_data(X, y, N, 5);
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 6), ya = gsb_array_1d(y, GSB_F64, N);
    const char *p12 = "{\"n_estimators\": 12, \"random_state\": 5}";
    gsb_model *a = fit_model("RandomForestClassifier", p12, &xa, &ya, NULL);
    gsb_model *b = fit_model("RandomForestClassifier", p12, &xa, &ya, NULL);
    gsb_model *c = fit_model("RandomForestClassifier", "{\"n_estimators\": 12, "
                             "\"random_state\": 6}", &xa, &ya, NULL);
    gsb_model *w = fit_model("RandomForestClassifier", "{\"n_estimators\": 5, \"random_state\": "
                             "5, \"warm_start\": true}", &xa, &ya, NULL);
    if (!a || !b || !c || !w)
        return;
    CHECK(same_values(a, b, "predict_proba", &xa));
    CHECK(same_values(a, b, "apply", &xa));
    CHECK(!same_values(a, c, "predict_proba", &xa));
    CHECK_OK(gsb_model_set_params(w, "{\"n_estimators\": 12}"));
    CHECK_OK(testing_fit(w, &xa, &ya, NULL));
    CHECK(same_values(a, w, "predict_proba", &xa)); /* trees 6..12: a cold fit's */
    CHECK(same_values(a, w, "apply", &xa));
    /* fewer trees than fitted: scikit-learn's error; as many: nothing changes */
    CHECK_OK(gsb_model_set_params(w, "{\"n_estimators\": 4}"));
    CHECK_ERR(testing_fit(w, &xa, &ya, NULL), GSB_EINVAL,
              "n_estimators=4 must be larger or equal to len(estimators_)=12 when "
              "warm_start==True");
    CHECK_OK(gsb_model_set_params(w, "{\"n_estimators\": 12}"));
    CHECK_OK(testing_fit(w, &xa, &ya, NULL));
    CHECK(same_values(a, w, "predict_proba", &xa));
    /* other classes: refused */
    for (int64_t i = 0; i < N; i++)
        y[i] += 1;
    CHECK_ERR(testing_fit(w, &xa, &ya, NULL), GSB_EINVAL, "other classes");
    double proba[3];
    int64_t n;
    double *p = call_values(a, "predict_proba", &xa, &n);
    for (int64_t i = 0; i < N && n == 3 * N; i++) {
        proba[0] = p[3 * i] + p[3 * i + 1] + p[3 * i + 2];
        if (fabs(proba[0] - 1) > 1e-12) {
            CHECK(fabs(proba[0] - 1) <= 1e-12);
            break;
        }
    }
    double *lp = call_values(a, "predict_log_proba", &xa, &n);
    for (int64_t i = 0; i < 3 * N && n == 3 * N; i++)
        if (!(lp[i] == log(p[i]))) {
            CHECK(lp[i] == log(p[i]));
            break;
        }
    free(p);
    free(lp);
    gsb_model_free(a);
    gsb_model_free(b);
    gsb_model_free(c);
    gsb_model_free(w);
}

static void test_missing_values(void)
{
    enum { N = 300 };
    static double X[N * 3], y[N];
    uint64_t s = 17;
    for (int64_t i = 0; i < N; i++) {
        int missing = urand(&s) < 0.3;
        X[i * 3] = missing ? NAN : urand(&s);
        X[i * 3 + 1] = urand(&s);
        X[i * 3 + 2] = urand(&s);
        y[i] = missing ? 1 : X[i * 3 + 1] > 0.7 ? 2 : 0;
    }
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 3), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_model *m = fit_model("RandomForestClassifier", "{\"n_estimators\": 5, \"bootstrap\": "
                             "false, \"max_features\": null, \"random_state\": 1}",
                             &xa, &ya, NULL);
    int64_t n;
    double *pred = m ? call_values(m, "predict", &xa, &n) : NULL;
    int wrong = 0;
    for (int64_t i = 0; pred && i < N; i++)
        wrong += pred[i] != y[i];
    CHECK(pred && wrong == 0);
    free(pred);
    /* NaN where fit saw none: the side with more samples; still a prediction */
    double q[6] = {0.5, NAN, 0.5, NAN, NAN, NAN};
    gsb_array qa = gsb_array_2d(q, GSB_F64, 2, 3);
    pred = m ? call_values(m, "predict", &qa, &n) : NULL;
    CHECK(pred && n == 2 && pred[1] == 1);
    free(pred);
    /* infinity is still refused, with scikit-learn's message */
    double inf[3] = {INFINITY, 0, 0};
    gsb_array ia = gsb_array_2d(inf, GSB_F64, 1, 3);
    const gsb_array *in[1] = {&ia};
    gsb_result *r = NULL;
    CHECK_ERR(gsb_model_call(m, "predict", in, 1, NULL, &r), GSB_EINVAL,
              "Input X contains infinity or a value too large for dtype('float64').");
    gsb_model_free(m);
    /* regression with NaN: fits, predicts finite values */
    m = fit_model("RandomForestRegressor", "{\"n_estimators\": 4, \"random_state\": 1}", &xa,
                  &ya, NULL);
    pred = m ? call_values(m, "predict", &qa, &n) : NULL;
    CHECK(pred && isfinite(pred[0]) && isfinite(pred[1]));
    free(pred);
    gsb_model_free(m);
}

static void test_one_class_and_rules(void)
{
    enum { N = 600 };
    static double X[N * 6], y[N], ones[N];
    blob_data(X, y, N, 9);
    for (int64_t i = 0; i < N; i++)
        ones[i] = 7;
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 6), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_array oa = gsb_array_1d(ones, GSB_F64, N);
    gsb_model *m = fit_model("RandomForestClassifier", "{\"n_estimators\": 3}", &xa, &oa, NULL);
    int64_t n;
    double *v = m ? call_values(m, "predict_proba", &xa, &n) : NULL;
    CHECK(v && n == N && v[0] == 1.0 && v[N - 1] == 1.0);
    free(v);
    v = m ? call_values(m, "predict", &xa, &n) : NULL;
    CHECK(v && v[0] == 7);
    free(v);
    gsb_model_free(m);
    struct {
        const char *params;
        int64_t max_depth, max_leaves, min_leaf;
    } rules[] = {
        {"{\"n_estimators\": 4, \"max_depth\": 3}", 3, 8, 1},
        {"{\"n_estimators\": 4, \"max_leaf_nodes\": 5}", 4, 5, 1},
        {"{\"n_estimators\": 4, \"min_samples_leaf\": 25, \"bootstrap\": false}", 60, 24, 25},
        {"{\"n_estimators\": 2, \"min_impurity_decrease\": 10.0}", 0, 1, 1},
        /* min_samples_split = n: only the root splits */
        {"{\"n_estimators\": 2, \"min_samples_split\": 1.0, \"bootstrap\": false}", 1, 2, 1},
    };
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
        m = fit_model("RandomForestClassifier", rules[k].params, &xa, &ya, NULL);
        if (!m)
            continue;
        gsb_result *r = NULL;
        CHECK_OK(gsb_model_call(m, "tree_info", NULL, 0, NULL, &r));
        const gsb_array *leaves = r ? gsb_result_get(r, "n_leaves") : NULL;
        const gsb_array *depth = r ? gsb_result_get(r, "depth") : NULL;
        int bad = !leaves || !depth;
        for (int64_t t = 0; !bad && t < testing_numel(leaves); t++)
            bad += testing_at(depth, t) > rules[k].max_depth ||
                   testing_at(leaves, t) > rules[k].max_leaves || testing_at(leaves, t) < 1;
        gsb_result_free(r);
        if (bad)
            fprintf(stderr, "  rule case %zu\n", k);
        CHECK(bad == 0);
        if (rules[k].min_leaf > 1) { /* every leaf holds >= min_samples_leaf rows */
            double *lv = call_values(m, "apply", &xa, &n);
            int64_t T = n / N, small = 0;
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < N; i++) {
                    int64_t count = 0;
                    for (int64_t j = 0; j < N; j++)
                        count += lv[j * T + t] == lv[i * T + t];
                    small += count < rules[k].min_leaf;
                }
            CHECK(small == 0);
            free(lv);
        }
        gsb_model_free(m);
    }
}

static void test_oob_weights_importances(void)
{
    enum { N = 600 };
    static double X[N * 6], y[N], sw[N], yr[N];
    blob_data(X, y, N, 13);
    for (int64_t i = 0; i < N; i++) {
        sw[i] = i % 4 == 0 ? 0.0 : 1.0 + (double)(i % 3);
        yr[i] = X[i * 6] + 0.1 * X[i * 6 + 3];
    }
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 6), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_array wa = gsb_array_1d(sw, GSB_F64, N), ra = gsb_array_1d(yr, GSB_F64, N);
    gsb_model *m = fit_model("RandomForestClassifier", "{\"n_estimators\": 30, \"oob_score\": "
                             "true, \"random_state\": 2}", &xa, &ya, NULL);
    double score = 0, dec[3 * N], imp[6];
    gsb_array info;
    CHECK(m && testing_attr(m, "oob_score_", &score, 1, NULL) == 1 && score > 0.8);
    CHECK(m && testing_attr(m, "oob_decision_function_", dec, 3 * N, &info) == 3 * N &&
          info.ndim == 2 && info.shape[1] == 3);
    CHECK_CLOSE(dec[0] + dec[1] + dec[2], 1.0, 1e-6);
    CHECK(m && testing_attr(m, "feature_importances_", imp, 6, NULL) == 6);
    CHECK(imp[0] > imp[2] && imp[0] > imp[3] && imp[1] > imp[4] && imp[1] > imp[5]);
    gsb_model_free(m);
    m = fit_model("RandomForestRegressor", "{\"n_estimators\": 30, \"oob_score\": true, "
                  "\"random_state\": 2}", &xa, &ra, NULL);
    double pred[N];
    CHECK(m && testing_attr(m, "oob_score_", &score, 1, NULL) == 1 && score > 0.8);
    CHECK(m && testing_attr(m, "oob_prediction_", pred, N, &info) == N && info.ndim == 1);
    gsb_model_free(m);
    /* sample weights (zeros among them) and each class_weight form */
    const char *cw[] = {"null", "\"balanced\"", "\"balanced_subsample\"",
                        "{\"0\": 1.0, \"1\": 3.0, \"2\": 0.5}"};
    for (int k = 0; k < 4; k++) {
        char params[160];
        snprintf(params, sizeof params, "{\"n_estimators\": 10, \"class_weight\": %s, "
                 "\"random_state\": 3, \"oob_score\": true}", cw[k]);
        m = fit_model("RandomForestClassifier", params, &xa, &ya, &wa);
        CHECK(m && testing_attr(m, "oob_score_", &score, 1, NULL) == 1 && score > 0.7);
        gsb_model_free(m);
    }
    /* without bootstrap, zero-weight rows are left out: the others are fitted exactly */
    m = fit_model("RandomForestRegressor", "{\"n_estimators\": 3, \"bootstrap\": false, "
                  "\"random_state\": 0}", &xa, &ra, &wa);
    int64_t n;
    double *p = m ? call_values(m, "predict", &xa, &n) : NULL;
    int off = 0;
    for (int64_t i = 0; p && i < N; i++)
        off += sw[i] > 0 && fabs(p[i] - yr[i]) > 1e-5;
    CHECK(p && off == 0);
    free(p);
    gsb_model_free(m);
}

/* Large nodes keep histograms in the pool (all features drawn: the larger child's
 * is the parent's minus the smaller's): fits still exact, and best first too.
 * A wrong histogram would also trip the grower's check of the partition's
 * count against the split's. */
static void test_pool_paths(void)
{
    enum { N = 3000, D = 4 };
    static double X[N * D], y[N], c[N];
    uint64_t s = 41;
    for (int64_t i = 0; i < N; i++) {
        for (int j = 0; j < D; j++)
            X[i * D + j] = urand(&s);
        y[i] = sin(6 * X[i * D]) + X[i * D + 1] * X[i * D + 2] + 0.01 * urand(&s);
        c[i] = (double)((int)(4 * X[i * D]) ^ (X[i * D + 3] > 0.5));
    }
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_array ca = gsb_array_1d(c, GSB_F64, N);
    const char *exact = "{\"n_estimators\": 3, \"bootstrap\": false, \"max_features\": null, "
                        "\"random_state\": 0}";
    for (int k = 0; k < 2; k++) {
        gsb_model *m = fit_model(k ? "RandomForestClassifier" : "RandomForestRegressor", exact,
                                 &xa, k ? &ca : &ya, NULL);
        int64_t n;
        double *p = m ? call_values(m, "predict", &xa, &n) : NULL;
        int off = 0;
        for (int64_t i = 0; p && i < N; i++)
            off += fabs(p[i] - (k ? c[i] : y[i])) > 1e-6;
        CHECK(p && off == 0);
        free(p);
        gsb_model_free(m);
    }
    gsb_model *m = fit_model("RandomForestRegressor", "{\"n_estimators\": 4, \"max_leaf_nodes\": "
                             "40, \"random_state\": 0}", &xa, &ya, NULL);
    gsb_result *r = NULL;
    if (m)
        CHECK_OK(gsb_model_call(m, "tree_info", NULL, 0, NULL, &r));
    const gsb_array *leaves = r ? gsb_result_get(r, "n_leaves") : NULL;
    for (int64_t t = 0; leaves && t < 4; t++)
        CHECK(testing_at(leaves, t) == 40);
    gsb_result_free(r);
    gsb_model_free(m);
    /* OOB after a warm start covers every tree: the cold fit's score */
    gsb_model *a = fit_model("RandomForestClassifier", "{\"n_estimators\": 10, \"oob_score\": "
                             "true, \"random_state\": 4}", &xa, &ca, NULL);
    gsb_model *w = fit_model("RandomForestClassifier", "{\"n_estimators\": 4, \"oob_score\": "
                             "true, \"random_state\": 4, \"warm_start\": true}", &xa, &ca, NULL);
    double sa = -1, sw = -2;
    if (w) {
        CHECK_OK(gsb_model_set_params(w, "{\"n_estimators\": 10}"));
        CHECK_OK(testing_fit(w, &xa, &ca, NULL));
    }
    CHECK(a && w && testing_attr(a, "oob_score_", &sa, 1, NULL) == 1 &&
          testing_attr(w, "oob_score_", &sw, 1, NULL) == 1 && sa == sw && sa > 0.8);
    gsb_model_free(a);
    gsb_model_free(w);
}

/* The level grower (the GPU's; GSB_FOREST_GROWER=level runs it here) grows the
 * host grower's trees: both criteria kinds, both search passes, missing values,
 * and (16 bins: nodes of 128 samples are large) histograms kept in slots and
 * derived by subtraction. */
static void test_level_grower(void)
{
    enum { N = 2500, D = 9 };
    static double X[N * D], y[N], c[N];
    uint64_t s = 77;
    for (int64_t i = 0; i < N; i++) {
        for (int j = 0; j < D; j++)
            X[i * D + j] = j >= 6                         ? 1.0
                           : j == 2 && urand(&s) < 0.05 ? NAN
                                                        : floor(40 * urand(&s));
        y[i] = round(10 * sin(X[i * D] / 6) + X[i * D + 1] / 4);
        c[i] = (double)(((int)X[i * D] / 10) ^ (X[i * D + 3] > 20));
    }
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_array ca = gsb_array_1d(c, GSB_F64, N);
    const char *params[6] = {
        "{\"n_estimators\": 4, \"random_state\": 2, \"max_features\": 0.4}",
        "{\"n_estimators\": 4, \"random_state\": 2, \"max_features\": 0.4}",
        "{\"n_estimators\": 3, \"random_state\": 1, \"min_samples_leaf\": 2}",
        "{\"n_estimators\": 3, \"random_state\": 1, \"criterion\": \"entropy\", "
        "\"max_features\": null}",
        "{\"n_estimators\": 3, \"random_state\": 3, \"n_bins\": 16}",
        "{\"n_estimators\": 3, \"random_state\": 3, \"n_bins\": 16, \"max_features\": 0.6}"};
    for (int k = 0; k < 6; k++) {
        const char *est = k % 2 ? "RandomForestClassifier" : "RandomForestRegressor";
        double *p[2] = {NULL, NULL};
        int64_t n[2] = {0, 0};
        for (int g = 0; g < 2; g++) {
            setenv("GSB_FOREST_GROWER", g ? "level" : "host", 1);
            gsb_model *m = fit_model(est, params[k], &xa, k % 2 ? &ca : &ya, NULL);
            p[g] = m ? call_values(m, "predict", &xa, &n[g]) : NULL;
            gsb_model_free(m);
        }
        unsetenv("GSB_FOREST_GROWER");
        CHECK(p[0] && p[1] && n[0] == N && n[1] == N &&
              memcmp(p[0], p[1], N * sizeof(double)) == 0);
        free(p[0]);
        free(p[1]);
    }
}

/*
 * The trees' samples packed one group at a time (forest_fit.c's draw_samples:
 * each tree counted, then drawn into its place): trees 4..9 grown as a group
 * of their own (warm_start) are a cold 9-tree group's, leaf for leaf, through
 * both growers, for bootstraps of every kind: plain, max_samples, weights
 * (some zero), class weights per bootstrap, none.
 */
static void test_group_packing(void)
{
    enum { N = 700 };
    static double X[N * 6], y[N], w[N];
    blob_data(X, y, N, 9);
    uint64_t s = 4;
    for (int64_t i = 0; i < N; i++)
        w[i] = i % 11 == 0 ? 0.0 : 0.5 + 2 * urand(&s);
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 6), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_array wa = gsb_array_1d(w, GSB_F64, N);
    const char *params[5] = {"",
                             "\"max_samples\": 333, ",
                             "\"max_samples\": 0.4, ",
                             "\"class_weight\": \"balanced_subsample\", ",
                             "\"bootstrap\": false, \"max_features\": 2, "};
    for (int k = 0; k < 10; k++) {
        char cold[200], warm[200];
        snprintf(cold, sizeof cold, "{%s\"n_estimators\": 9, \"random_state\": 3}",
                 params[k % 5]);
        snprintf(warm, sizeof warm, "{%s\"n_estimators\": 4, \"random_state\": 3, "
                 "\"warm_start\": true}", params[k % 5]);
        const gsb_array *sw = k % 5 == 2 || k % 5 == 4 ? &wa : NULL;
        setenv("GSB_FOREST_GROWER", k < 5 ? "host" : "level", 1);
        gsb_model *a = fit_model("RandomForestClassifier", cold, &xa, &ya, sw);
        gsb_model *b = fit_model("RandomForestClassifier", warm, &xa, &ya, sw);
        if (a && b) {
            CHECK_OK(gsb_model_set_params(b, "{\"n_estimators\": 9}"));
            CHECK_OK(testing_fit(b, &xa, &ya, sw));
            CHECK(same_values(a, b, "apply", &xa));
            CHECK(same_values(a, b, "predict_proba", &xa));
        }
        gsb_model_free(a);
        gsb_model_free(b);
    }
    unsetenv("GSB_FOREST_GROWER");
}

static int progress_trees, progress_levels;
static int on_progress(void *data, const char *stage, int64_t it, double loss)
{
    (void)loss;
    if (strcmp(stage, "trees") == 0)
        progress_trees = (int)it;
    else
        progress_levels++;
    return data != NULL && progress_levels >= 3; /* cancel when asked to */
}

static void test_progress_cancel(void)
{
    enum { N = 600 };
    static double X[N * 6], y[N];
    blob_data(X, y, N, 21);
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 6), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_model *m = testing_model(S, "RandomForestClassifier", "{\"n_estimators\": 9}");
    if (!m)
        return;
    gsb_model_set_progress(m, on_progress, NULL);
    progress_trees = progress_levels = 0;
    CHECK_OK(testing_fit(m, &xa, &ya, NULL));
    CHECK(progress_trees == 9 && progress_levels > 3);
    int flag = 1;
    progress_levels = 0;
    gsb_model_set_progress(m, on_progress, &flag);
    CHECK_ERR(testing_fit(m, &xa, &ya, NULL), GSB_ECANCELLED, "cancelled");
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_free(m);
}

/* ---- persistence ------------------------------------------------------------------ */

/* Export m, let edit change its attributes, and import the result. */
static gsb_model *reimport(gsb_model *m, void (*edit)(gsb__nlist *))
{
    void *blob = NULL;
    size_t len = 0;
    CHECK_OK(gsb_model_export(m, &blob, &len));
    if (!blob)
        return NULL;
    char *est = NULL;
    json_t *params = NULL;
    gsb__nlist attrs = {0};
    int fitted = 0;
    gsb_model *back = NULL;
    CHECK_OK(gsb__blob_read(blob, len, &est, &params, &attrs, &fitted));
    gsb_free(blob);
    blob = NULL;
    if (est) {
        if (edit)
            edit(&attrs);
        CHECK_OK(gsb__blob_write(est, params, &attrs, fitted, &blob, &len));
    }
    if (blob)
        CHECK_OK(gsb_model_import(S, blob, len, &back));
    free(blob);
    free(est);
    json_decref(params);
    gsb__nlist_clear(&attrs);
    return back;
}

static void edit_child_backwards(gsb__nlist *l)
{
    gsb__tensor *t = (gsb__tensor *)gsb__nlist_get(l, "_node_child");
    int32_t *split = (int32_t *)gsb__nlist_get(l, "_node_split")->data;
    for (int64_t i = 0; t && i < t->rows; i++)
        if (split[i] >= 0) { /* a loop: the first split's left child is itself */
            ((int32_t *)t->data)[i] = (int32_t)i;
            break;
        }
}

static void edit_feature(gsb__nlist *l)
{
    gsb__tensor *t = (gsb__tensor *)gsb__nlist_get(l, "_node_split");
    ((int32_t *)t->data)[0] = 2 * 50;
}

static void edit_roots(gsb__nlist *l)
{
    gsb__tensor *t = (gsb__tensor *)gsb__nlist_get(l, "_tree_root");
    ((int32_t *)t->data)[t->rows - 1] = 1 << 30;
}

static void edit_values(gsb__nlist *l)
{
    gsb__tensor v;
    if (gsb__tensor_zeros(gsb__cpu_backend(), GSB_F32, 3, 2, &v) == GSB_OK)
        gsb__nlist_put(l, "_leaf_value", &v);
}

static void test_blob(void)
{
    enum { N = 600 };
    static double X[N * 6], y[N];
    blob_data(X, y, N, 25);
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 6), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_model *m = fit_model("RandomForestClassifier", "{\"n_estimators\": 6, \"random_state\": "
                             "4}", &xa, &ya, NULL);
    if (!m)
        return;
    gsb_model *back = reimport(m, NULL);
    CHECK(back && same_values(m, back, "predict_proba", &xa));
    gsb_model_free(back);
    void (*edits[])(gsb__nlist *) = {edit_child_backwards, edit_feature, edit_roots,
                                     edit_values};
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        back = reimport(m, edits[k]);
        const gsb_array *in[1] = {&xa};
        gsb_result *r = NULL;
        if (back)
            CHECK_ERR(gsb_model_call(back, "predict", in, 1, NULL, &r), GSB_ECORRUPT,
                      "RandomForestClassifier");
        gsb_model_free(back);
    }
    gsb_model_free(m);
}

/* ---- errors ----------------------------------------------------------------------- */

static void test_errors(void)
{
    enum { N = 60 };
    static double X[N * 6], y[N], sw[N];
    blob_data(X, y, N, 29);
    for (int64_t i = 0; i < N; i++)
        sw[i] = i == 3 ? -1.0 : 1.0;
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 6), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_array wa = gsb_array_1d(sw, GSB_F64, N), empty = gsb_array_2d(X, GSB_F64, 0, 6);
    gsb_array ye = gsb_array_1d(y, GSB_F64, 0);
    struct {
        const char *est, *params;
        int use_w, status;
        const char *msg;
    } cases[] = {
        {"RandomForestClassifier", "{\"min_samples_split\": 1}", 0, GSB_EPARAM,
         "The 'min_samples_split' parameter of RandomForestClassifier must be an int in the "
         "range [2, inf) or a float in the range (0.0, 1.0]. Got 1 instead."},
        {"RandomForestClassifier", "{\"min_samples_leaf\": 1.0}", 0, GSB_EPARAM,
         "must be an int in the range [1, inf) or a float in the range (0.0, 1.0). Got 1.0"},
        {"RandomForestRegressor", "{\"max_features\": 1.5}", 0, GSB_EPARAM,
         "The 'max_features' parameter of RandomForestRegressor must be an int in the range "
         "[1, inf), a float in the range (0.0, 1.0], a str among {'log2', 'sqrt'} or None. "
         "Got 1.5 instead."},
        {"RandomForestClassifier", "{\"max_samples\": 0}", 0, GSB_EPARAM,
         "must be None, a float in the range (0.0, inf) or an int in the range [1, inf)"},
        {"RandomForestClassifier", "{\"bootstrap\": false, \"oob_score\": true}", 0,
         GSB_EINVAL, "Out of bag estimation only available if bootstrap=True"},
        {"RandomForestClassifier", "{\"bootstrap\": false, \"max_samples\": 10}", 0,
         GSB_EINVAL, "`max_sample` cannot be set if `bootstrap=False`."},
        {"RandomForestRegressor", "{\"criterion\": \"absolute_error\"}", 0, GSB_EUNSUPPORTED,
         "criterion='absolute_error' is not supported"},
        {"RandomForestClassifier", "{\"split_criterion\": 3}", 0, GSB_EUNSUPPORTED,
         "split_criterion=3 ('mae') is not supported"},
        {"RandomForestClassifier", "{\"split_criterion\": \"mse\"}", 0, GSB_EINVAL,
         "is a regression criterion"},
        {"RandomForestClassifier", "{\"ccp_alpha\": 0.1}", 0, GSB_EUNSUPPORTED, "ccp_alpha"},
        {"RandomForestClassifier", "{\"monotonic_cst\": [1, 0, 0, 0, 0, 0]}", 0,
         GSB_EUNSUPPORTED, "monotonic_cst"},
        {"RandomForestClassifier", "{\"class_weight\": {\"5\": 2.0}}", 0, GSB_EINVAL,
         "The classes, [0, 1, 2], are not in class_weight"},
        {"RandomForestClassifier", "{}", 1, GSB_EINVAL,
         "Negative values in data passed to `sample_weight`."},
        {"RandomForestRegressor", "{\"criterion\": \"poisson\"}", 0, GSB_EINVAL,
         "Some value(s) of y are negative which is not allowed for Poisson regression."},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gsb_model *m = NULL;
        int rc = gsb_model_create(S, cases[k].est, cases[k].params, &m);
        if (rc == GSB_OK) {
            double yneg[N];
            for (int64_t i = 0; i < N; i++)
                yneg[i] = y[i] - 1;
            gsb_array yn = gsb_array_1d(yneg, GSB_F64, N);
            int poisson = strstr(cases[k].params, "poisson") != NULL;
            rc = testing_fit(m, &xa, poisson ? &yn : &ya, cases[k].use_w ? &wa : NULL);
        }
        CHECK_ERR(rc, cases[k].status, cases[k].msg);
        gsb_model_free(m);
    }
    gsb_model *m = testing_model(S, "RandomForestClassifier", NULL);
    CHECK_ERR(testing_fit(m, &empty, &ye, NULL), GSB_EINVAL,
              "Found array with 0 sample(s) (shape=(0, 6)) while a minimum of 1 is required by "
              "RandomForestClassifier.");
    for (int64_t i = 0; i < N; i++)
        sw[i] = 0;
    CHECK_ERR(testing_fit(m, &xa, &ya, &wa), GSB_EINVAL,
              "Sample weights must contain at least one non-zero number.");
    gsb_model_free(m);
}

static void test_cuml_names(void)
{
    enum { N = 600 };
    static double X[N * 6], y[N];
    blob_data(X, y, N, 33);
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, 6), ya = gsb_array_1d(y, GSB_F64, N);
    const char *params[] = {"{\"n_bins\": 4, \"n_estimators\": 5, \"random_state\": 0}",
                            "{\"split_criterion\": \"entropy\", \"n_estimators\": 5}",
                            "{\"split_criterion\": 0, \"n_bins\": 256, \"n_estimators\": 5}"};
    for (int k = 0; k < 3; k++) {
        gsb_model *m = fit_model("RandomForestClassifier", params[k], &xa, &ya, NULL);
        int64_t n;
        double *p = m ? call_values(m, "predict", &xa, &n) : NULL;
        int right = 0;
        for (int64_t i = 0; p && i < N; i++)
            right += p[i] == y[i];
        CHECK(right > N * 8 / 10);
        free(p);
        gsb_model_free(m);
    }
    gsb_model *m = NULL;
    CHECK_ERR(gsb_model_create(S, "RandomForestRegressor", "{\"n_bins\": 300}", &m), GSB_EPARAM,
              "The 'n_bins' parameter of RandomForestRegressor must be an int in the range [2, "
              "256]. Got 300 instead.");
}

int main(void)
{
    RUN(test_op_bin);
    RUN(test_op_hist);
    RUN(test_op_split);
    RUN(test_op_partition);
    RUN(test_op_predict);
    if (testing_open(&S))
        return 1;
    RUN(test_fits_exactly);
    RUN(test_determinism_warm_start);
    RUN(test_missing_values);
    RUN(test_one_class_and_rules);
    RUN(test_oob_weights_importances);
    RUN(test_pool_paths);
    RUN(test_level_grower);
    RUN(test_group_packing);
    RUN(test_progress_cancel);
    RUN(test_blob);
    RUN(test_errors);
    RUN(test_cuml_names);
    return testing_close(S);
}
