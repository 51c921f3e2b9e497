/*
 * kmeans.c - KMeans, as scikit-learn 1.9.1's sklearn.cluster.KMeans.
 *
 * Lloyd's algorithm on the backend's fused ops: argmin_sqdist is the E-step
 * (label and squared distance of each row to its nearest centre, without an
 * n x k matrix) and segment_sum the M-step (weighted per-cluster sums and
 * counts).  The k x d centre update, the relocation of empty clusters and the
 * convergence tests are small and run on the host in double.  The n labels
 * and distances stay on the backend: per iteration only the k x d sums, the
 * k counts and the inertia (a col_moments of the distances) come to the
 * host, in one copy from one buffer (the iteration's only wait besides
 * segment_sum's own label check), and the k x d centres go back, queued
 * without a wait.  The labels come to the host once at
 * the end of a run, and in the rare iterations that relocate empty
 * clusters (which need the distances).  How the strict-convergence test
 * (labels unchanged) gets by without them is explained above lloyd().
 * On the CPU backend an iteration is one call instead,
 * gsb__cpu_lloyd_step (cpu_distance.c): the same labels and distances as
 * argmin_sqdist, with the sums, counts and weighted distance sum taken in
 * the same pass over X (separate ops cost two more passes over X or the
 * labels and three thread wake-ups an iteration).  Its sums and counts are
 * segment_sum's bit for bit (the same chunks), so the centres are those of
 * the separate ops; only the inertia, a plain sum, differs in rounding.
 *
 * Initialisation: greedy k-means++ (D^2 sampling with 2 + int(log(k)) local
 * trials, in the backend's kmeanspp op), 'random' (a
 * weighted draw without replacement) or an explicit array, the optional fit
 * input "init", which overrides the 'init' parameter as an array would in
 * scikit-learn.  Random numbers come from core/rng.h: a given random_state is
 * reproducible within gsb but draws other centres than scikit-learn's.
 *
 * As scikit-learn does, a fit works on X minus its column means (distances
 * computed as |x|^2 - 2 x.c + |c|^2 lose less precision near the origin,
 * notably in float32) and adds the means back to the final centres.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/estimator.h"
#include "core/profile.h"
#include "core/rng.h"
#include "core/warn.h"
#include "estimators/cluster/kmeans_stats.h"
#include "estimators/common/partial_stats.h"
#include "estimators/cluster/kmeans_stream.h"
#include "estimators/common/stream.h"

/* ---- descriptor: parameters -------------------------------------------- */

static const char *const init_choices[] = {"k-means++", "random", NULL};
static const char *const n_init_choices[] = {"auto", NULL};
static const char *const algorithm_choices[] = {"lloyd", "elkan", NULL};

static const gsb__param_desc kmeans_params[] = {
    {"n_clusters", GSB__P_INT, "8", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "The number of clusters to form and of centroids to generate."},
    {"init", GSB__P_STR, "\"k-means++\"", 0, 0, 0, init_choices,
     "'k-means++' (greedy k-means++) or 'random' (n_clusters rows drawn by sample weight); "
     "an explicit (n_clusters, n_features) array is passed as the fit input 'init' and "
     "overrides this parameter. Callables are not supported."},
    {"n_init", GSB__P_STR | GSB__P_INT, "\"auto\"", 1, INFINITY, GSB__CLOSED_LEFT,
     n_init_choices,
     "Runs with different seeds, keeping the lowest inertia; 'auto' is 1 for k-means++ and "
     "10 for 'random'. Always 1 with an explicit init array."},
    {"max_iter", GSB__P_INT, "300", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Maximum number of Lloyd iterations of a single run."},
    {"tol", GSB__P_FLOAT, "0.0001", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Convergence when the squared centre shift is <= tol times the mean feature variance "
     "of X (or when labels stop changing)."},
    {"verbose", GSB__P_INT | GSB__P_BOOL, "0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Print the inertia of each iteration when no progress callback is set."},
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH, NULL,
     "Seed of the centroid initialisation (gsb's own generator: reproducible, but not "
     "scikit-learn's stream)."},
    {"copy_x", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "Accepted for compatibility: the caller's X is never modified (the fit centres a "
     "private copy)."},
    {"algorithm", GSB__P_STR, "\"lloyd\"", 0, 0, 0, algorithm_choices,
     "'lloyd' or 'elkan'. Elkan's algorithm only skips distance computations and converges "
     "to the same result, so both run Lloyd's algorithm here."},
    {0}};

/* ---- numeric helpers --------------------------------------------------- */

static void to_double(const void *src, gsb_dtype dt, int64_t n, double *dst)
{
    if (dt == GSB_F32) {
        const float *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = s[i];
    } else {
        memcpy(dst, src, (size_t)n * sizeof(double));
    }
}

static void from_double(const double *src, gsb_dtype dt, int64_t n, void *dst)
{
    if (dt == GSB_F32) {
        float *o = dst;
        for (int64_t i = 0; i < n; i++)
            o[i] = (float)src[i];
    } else {
        memcpy(dst, src, (size_t)n * sizeof(double));
    }
}

/* Centres are kept in double on the host but must be the values the backend
 * sees, so a float32 fit rounds them to float each time they change. */
static void round_to_dtype(gsb_dtype dt, double *v, int64_t n)
{
    if (dt == GSB_F32)
        for (int64_t i = 0; i < n; i++)
            v[i] = (float)v[i];
}

/* numpy's searchsorted on a nondecreasing array: first i with a[i] >= v
 * (side 'left') or a[i] > v (side 'right'); n when there is none. */
static int64_t search_sorted(const double *a, int64_t n, double v, int right)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (right ? a[mid] <= v : a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void *alloc_array(size_t count, size_t size)
{
    return malloc(count ? count * size : 1);
}

/* ---- the data of one fit ----------------------------------------------- */

typedef struct km_data {
    const gsb__backend *be;
    gsb_dtype dtype;
    size_t esize;
    int64_t n, d, k;
    gsb__tensor X;        /* X minus its column means, on be */
    gsb__tensor w;        /* sample weights on be (float64); data NULL for unit weights */
    const double *wh;     /* host sample weights (n); NULL for unit weights (never
                             materialised: n doubles written and summed on the host
                             between the streamed fit's passes left the link idle) */
    double *mean;         /* column means removed from X (d) */
    double tol;           /* tol scaled by the mean feature variance */
    double wsum;          /* sum of the sample weights (n for unit weights) */
    gsb__tensor labels;   /* E-step outputs on be: (n) int32 ... */
    gsb__tensor mind;     /* ... and (n) squared distances, X's dtype */
    gsb__tensor wmean;    /* (1) float64: weighted mean of mind (the inertia / wsum) */
    void *stage;          /* host staging for mind (n elements of X's dtype), on demand */
    double *mindh;        /* host copy of mind in double (n), on demand */
    gsb__km_stream *ks;   /* X streamed in batches (kmeans_stream.h): then X, w,
                             labels and mind above are unused, and every pass
                             leaves the labels and mindh on the host */
} km_data;

static void km_free(km_data *km)
{
    gsb__tensor_free(&km->X);
    gsb__tensor_free(&km->w);
    gsb__tensor_free(&km->labels);
    gsb__tensor_free(&km->mind);
    gsb__tensor_free(&km->wmean);
    free(km->mean);
    free(km->stage);
    free(km->mindh);
    gsb__km_stream_close(km->ks);
    memset(km, 0, sizeof *km);
}

/* Row i's sample weight. */
static inline double weight_at(const km_data *km, int64_t i) { return km->wh ? km->wh[i] : 1.0; }

/* Upload host doubles (t's element count) into t, converting to t's dtype. */
static int upload_doubles(const gsb__backend *be, const double *src, gsb__tensor *t)
{
    int64_t n = gsb__tensor_numel(t);
    void *tmp = alloc_array((size_t)n, gsb_dtype_size(t->dtype));
    if (!tmp)
        return gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
    from_double(src, t->dtype, n, tmp);
    int rc = be->ops->upload(be, t, tmp);
    free(tmp);
    return rc;
}

/* Download t (any float dtype) into host doubles. */
static int download_doubles(const gsb__backend *be, const gsb__tensor *t, double *dst)
{
    int64_t n = gsb__tensor_numel(t);
    void *tmp = alloc_array((size_t)n, gsb_dtype_size(t->dtype));
    if (!tmp)
        return gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
    int rc = be->ops->download(be, t, tmp);
    if (rc == GSB_OK)
        to_double(tmp, t->dtype, n, dst);
    free(tmp);
    return rc;
}

/* Elements [off, off + rows * cols) of a contiguous float64 tensor as a
 * borrowed rows x cols tensor. */
static gsb__tensor stats_view(const gsb__tensor *t, int64_t off, int64_t rows, int64_t cols)
{
    gsb__tensor v = *t;
    v.data = (double *)t->data + off;
    v.rows = rows;
    v.cols = cols;
    v.ndim = cols == 1 ? 1 : 2;
    v.owned = 0;
    return v;
}

/* Rows idx[0..m) of the centred X into out (m x d doubles). */
static int fetch_rows(const km_data *km, const int64_t *idx, int64_t m, double *out)
{
    if (km->ks)
        return gsb__km_stream_rows(km->ks, idx, m, out);
    /* gathered on the backend by queued row copies, then one copy back: a
     * download per row was a wait per row (k of them after k-means++) */
    gsb__tensor rows = GSB__TENSOR_NONE;
    int rc = gsb__tensor_alloc(km->be, km->dtype, m, km->d, &rows);
    for (int64_t j = 0; rc == GSB_OK && j < m; j++) {
        gsb__tensor src = gsb__tensor_rows(&km->X, idx[j], 1), dst = gsb__tensor_rows(&rows, j, 1);
        rc = km->be->ops->copy(km->be, &dst, &src);
    }
    if (rc == GSB_OK)
        rc = download_doubles(km->be, &rows, out);
    gsb__tensor_free(&rows);
    return rc;
}

/*
 * Centre X on the backend, scale tol, and set up the weights and the E-step
 * buffers.  Unit weights when sw is NULL.
 */
static int km_setup(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *sw, int64_t k,
                    km_data *km)
{
    memset(km, 0, sizeof *km);
    km->be = c->be;
    km->dtype = X->dtype;
    km->esize = gsb_dtype_size(X->dtype);
    km->n = X->rows;
    km->d = X->cols;
    km->k = k;
    const gsb__backend_ops *ops = km->be->ops;
    int64_t n = km->n, d = km->d;

    gsb__tensor xb = GSB__TENSOR_NONE, mean_t = GSB__TENSOR_NONE, var_t = GSB__TENSOR_NONE;
    double *var = NULL;
    int rc = GSB_OK;
    km->mean = alloc_array((size_t)d, sizeof(double));
    var = alloc_array((size_t)d, sizeof(double));
    if (!km->mean || !var) {
        rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    /* mean and variance in X's dtype, as numpy computes them for scikit-learn;
     * the variance only scales tol, so tol == 0 skips its pass over X */
    double tol = gsb__param_float(c->params, "tol"), mean_var = 0;
    /* an X larger than the backend's memory stays on the host, read in batches */
    GSB_CHECK(gsb__km_stream_open(c, X, sw, k, tol, km->mean, &km->tol, &km->ks));
    if (km->ks)
        goto weights;
    GSB_CHECK(gsb__tensor_to(km->be, X, &xb));
    gsb__profile_mark("setup: X to the backend");
    /* X's NaN / infinity check, when the dispatcher left it to the backend
     * (~0.1 ms on a GPU for 1M x 64 against a host pass of several ms) */
    GSB_CHECK(gsb__x_check_on_backend(c, X, &xb));
    gsb__profile_mark("setup: X checked for NaN / infinity");
    GSB_CHECK(gsb__tensor_alloc(km->be, km->dtype, d, 1, &mean_t));
    if (tol != 0)
        GSB_CHECK(gsb__tensor_alloc(km->be, km->dtype, d, 1, &var_t));
    GSB_CHECK(ops->col_moments(km->be, &xb, NULL, &mean_t, tol != 0 ? &var_t : NULL));
    /* centred in place when xb is our own copy (an upload), sparing a second
     * n x d buffer; the caller's X, when it already was on be, is not ours */
    if (xb.owned) {
        GSB_CHECK(ops->col_affine(km->be, &xb, &mean_t, NULL, NULL, &xb));
        km->X = xb;
        xb = GSB__TENSOR_NONE;
    } else {
        GSB_CHECK(gsb__tensor_alloc(km->be, km->dtype, n, d, &km->X));
        GSB_CHECK(ops->col_affine(km->be, &xb, &mean_t, NULL, NULL, &km->X));
    }
    /* the means (and variances) come back once the centring is queued: the
     * copy's wait covers both passes instead of sitting between them */
    GSB_CHECK(download_doubles(km->be, &mean_t, km->mean));
    if (tol != 0)
        GSB_CHECK(download_doubles(km->be, &var_t, var));

    /* scikit-learn's _tolerance: tol * mean(var(X, axis=0)), exactly 0 for tol == 0 */
    if (tol != 0)
        for (int64_t j = 0; j < d; j++)
            mean_var += var[j];
    km->tol = tol == 0 ? 0 : tol * (mean_var / (double)d);

weights:
    if (sw) {
        if (!km->ks)
            GSB_CHECK(gsb__tensor_to(km->be, sw, &km->w));
        km->wh = sw->data;
    }
    /* n for unit weights, what a sum of n ones gives exactly */
    km->wsum = km->wh ? 0 : (double)n;
    for (int64_t i = 0; km->wh && i < n; i++)
        km->wsum += km->wh[i];
    if (km->ks) { /* each pass leaves the distances on the host */
        if (!(km->mindh = alloc_array((size_t)n, sizeof(double))))
            rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    GSB_CHECK(gsb__tensor_alloc(km->be, GSB_I32, n, 1, &km->labels));
    GSB_CHECK(gsb__tensor_alloc(km->be, km->dtype, n, 1, &km->mind));
    GSB_CHECK(gsb__tensor_alloc(km->be, GSB_F64, 1, 1, &km->wmean));
done:
    gsb__tensor_free(&xb);
    gsb__tensor_free(&mean_t);
    gsb__tensor_free(&var_t);
    free(var);
    if (rc != GSB_OK)
        km_free(km);
    return rc;
}

/*
 * E-step against the centres C (on be): labels and distances into km->labels
 * and km->mind, where they stay, and the weighted inertia: the weighted mean
 * of the distances (col_moments of mind as an n x 1 matrix, accumulated in
 * double; one number crosses) times the weight total.  The weights are
 * non-negative with a positive sum (the dispatcher and check_weights_nonzero
 * see to it), so the mean is defined.  km_estep_queue leaves the mean in
 * wmean on the backend (Lloyd's loop reads it back with the M-step's sums,
 * in one copy); km_estep reads it back at once.
 */
static int km_estep_queue(km_data *km, const gsb__tensor *C, gsb__tensor *wmean)
{
    const gsb__backend *be = km->be;
    GSB_TRY(be->ops->argmin_sqdist(be, &km->X, C, &km->labels, &km->mind));
    return be->ops->col_moments(be, &km->mind, km->w.data ? &km->w : NULL, wmean, NULL);
}

static int km_estep(km_data *km, const gsb__tensor *C, double *inertia)
{
    double mean;
    GSB_TRY(km_estep_queue(km, C, &km->wmean));
    GSB_TRY(km->be->ops->download(km->be, &km->wmean, &mean));
    *inertia = mean * km->wsum;
    return GSB_OK;
}

/* The last E-step's labels (into host labels) and distances (into
 * km->mindh) on the host, for the relocation of empty clusters. */
static int km_fetch_estep(km_data *km, int32_t *labels)
{
    if (!km->stage)
        km->stage = alloc_array((size_t)km->n, km->esize);
    if (!km->mindh)
        km->mindh = alloc_array((size_t)km->n, sizeof(double));
    if (!km->stage || !km->mindh)
        return gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
    GSB_TRY(km->be->ops->download(km->be, &km->labels, labels));
    GSB_TRY(km->be->ops->download(km->be, &km->mind, km->stage));
    to_double(km->stage, km->dtype, km->n, km->mindh);
    return GSB_OK;
}

/* ---- initialisation ---------------------------------------------------- */

/* Most row x column x candidate work per kmeanspp call: between calls the
 * fit reports progress and notices a cancel, and a GPU waits for the host
 * (about 0.1 s of CPU work; on a GPU 2^36 is ~180 steps of 1M x 64 with 6
 * trials, ~40 ms on an H200 at 0.23 ms a step, so k = 100 takes its 99 steps
 * in one call). */
#define KPP_CALL_WORK ((int64_t)1 << 31)
#define KPP_CALL_WORK_DEVICE ((int64_t)1 << 36)

/*
 * The first centre: the first row whose running sum of weights exceeds
 * u * sum(w) (numpy's searchsorted(cumsum(w), u * sum(w), side='right'),
 * which never lands on a zero weight), clamped to n - 1.  With unit weights
 * the running sums are exactly 1 .. n (integers below 2^53), so that row is
 * floor(u n); otherwise two passes of the same sums, no n-long array.
 */
static int64_t kpp_first_row(const km_data *km, double u)
{
    const int64_t n = km->n;
    int64_t row;
    if (!km->wh) {
        row = (int64_t)floor(u * (double)n);
    } else {
        double total = 0, acc = 0;
        for (int64_t i = 0; i < n; i++)
            total += km->wh[i];
        const double v = u * total;
        for (row = 0; row < n; row++) {
            acc += km->wh[row];
            if (acc > v)
                break;
        }
    }
    return row < n ? row : n - 1;
}

/*
 * Greedy k-means++ (scikit-learn's _kmeans_plusplus): the first centre is a
 * row drawn with probability w_i / sum(w); each next one is the best, by the
 * weighted potential sum_i w_i min(D^2_i, d(x_i, cand)^2), of n_local_trials
 * rows drawn with probability proportional to w_i D^2_i.  The steps run in
 * the backend's kmeanspp op, on the centred X where it lives (on the GPU the
 * n distances never come to the host); this draws the random numbers, in
 * the order the steps use them, and reports progress between calls.
 */
static int init_kmeanspp(gsb__ctx *c, km_data *km, gsb__rng *rng, double *C)
{
    /* streamed: every step needs every row, so the steps run on the host's
     * copy (the CPU backend), on X as given: the distances are summed in
     * double either way, so centring changes no draw beyond rounding */
    const gsb__backend *be = km->ks ? gsb__cpu_backend() : km->be;
    const gsb__tensor *Xs = km->ks ? gsb__km_stream_host_X(km->ks) : &km->X;
    int64_t n = km->n, d = km->d, k = km->k;
    int64_t trials = 2 + (int64_t)log((double)k);
    int64_t work = be == gsb__cpu_backend() ? KPP_CALL_WORK : KPP_CALL_WORK_DEVICE;
    int64_t per_call = work / (n * (d > 0 ? d : 1) * trials);
    per_call = per_call < 1 ? 1 : (per_call > k - 1 ? k - 1 : per_call);
    double *u = alloc_array((size_t)(per_call * trials), sizeof(double));
    int64_t *chosen = alloc_array((size_t)k, sizeof(int64_t));
    gsb__tensor closest = GSB__TENSOR_NONE;
    int64_t calls = 1;
    int rc = GSB_OK;
    if (!u || !chosen) {
        rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, n, 1, &closest));

    chosen[0] = kpp_first_row(km, gsb__rng_uniform(rng));
    const gsb__tensor *w = km->ks ? gsb__km_stream_host_w(km->ks) : km->w.data ? &km->w : NULL;
    double pot = 0;
    GSB_CHECK(be->ops->kmeanspp(be, Xs, w, chosen[0], NULL, 0, trials, &closest, &pot, NULL));
    gsb__profile_mark("init: first centre");
    for (int64_t c_id = 1; c_id < k; calls++) {
        GSB_CHECK(gsb__progress(c, "init", c_id, pot));
        int64_t steps = k - c_id < per_call ? k - c_id : per_call;
        for (int64_t q = 0; q < steps * trials; q++)
            u[q] = gsb__rng_uniform(rng);
        GSB_CHECK(be->ops->kmeanspp(be, Xs, w, -1, u, steps, trials, &closest, &pot,
                                    chosen + c_id));
        c_id += steps;
    }
    /* each kmeanspp call ends with one wait for the backend */
    gsb__profile_count("init k-means++ steps", k - 1);
    gsb__profile_count("init waits", calls);
    gsb__profile_mark("init: k-means++ steps");
    GSB_CHECK(fetch_rows(km, chosen, k, C));
done:
    gsb__tensor_free(&closest);
    free(u);
    free(chosen);
    return rc;
}

/*
 * 'random': k distinct rows drawn with probability proportional to their
 * weight, in rounds as numpy's choice(replace=False, p=w/sum(w)) does: draw
 * the missing count, keep the new distinct rows, zero their weight, repeat.
 */
static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int contains(const int64_t *v, int64_t m, int64_t x)
{
    for (int64_t j = 0; j < m; j++)
        if (v[j] == x)
            return 1;
    return 0;
}

/*
 * init_random's rounds for unit weights, without their n-long arrays (an
 * O(n) host pass between a streamed fit's passes leaves the link idle).
 * In a round whose earlier picks T have weight 0 the cumulative weights are
 * exact integers, cum[i] = i + 1 - |{t in T : t <= i}|, and acc = n - |T|:
 * the first i with cum[i] > v (side 'right') is the row outside T of rank
 * floor(v), and none is when v >= acc (then the last row outside T, as
 * last_positive).  So the same rows as the weighted rounds with every
 * weight 1 (test_kmeans_stream.py compares them), in O(k^2).  sorted: k
 * int64 of scratch.
 */
static void random_rows_unit(int64_t n, int64_t k, gsb__rng *rng, int64_t *chosen,
                             int64_t *sorted)
{
    int64_t found = 0;
    while (found < k) {
        int64_t before = found; /* T = chosen[0, before) */
        memcpy(sorted, chosen, (size_t)before * sizeof *sorted);
        qsort(sorted, (size_t)before, sizeof *sorted, cmp_i64);
        double acc = (double)(n - before);
        int64_t last = n - 1;
        for (int64_t j = before - 1; j >= 0 && sorted[j] == last; j--)
            last--;
        for (int64_t t = 0, draws = k - before; t < draws; t++) {
            double v = gsb__rng_uniform(rng) * acc;
            int64_t id = last; /* u * acc rounded up to acc */
            if (v < acc) {
                id = (int64_t)v;
                for (int64_t j = 0; j < before && sorted[j] <= id; j++)
                    id++;
            }
            if (!contains(chosen, found, id))
                chosen[found++] = id;
        }
    }
}

static int init_random(km_data *km, gsb__rng *rng, double *C)
{
    if (!km->wh) {
        int64_t *chosen = alloc_array((size_t)km->k, sizeof(int64_t));
        int64_t *sorted = alloc_array((size_t)km->k, sizeof(int64_t));
        int rc = chosen && sorted ? GSB_OK : gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        if (rc == GSB_OK) {
            random_rows_unit(km->n, km->k, rng, chosen, sorted);
            rc = fetch_rows(km, chosen, km->k, C);
        }
        free(chosen);
        free(sorted);
        return rc;
    }
    int64_t n = km->n, k = km->k, positive = 0;
    for (int64_t i = 0; i < n; i++)
        positive += km->wh[i] > 0;
    if (positive < k)
        return gsb__err(GSB_EINVAL, "Fewer non-zero entries in p than size");
    double *p = alloc_array((size_t)n, sizeof(double));
    double *cum = alloc_array((size_t)n, sizeof(double));
    unsigned char *taken = calloc((size_t)n, 1);
    int64_t *chosen = alloc_array((size_t)k, sizeof(int64_t));
    int rc = GSB_OK;
    if (!p || !cum || !taken || !chosen) {
        rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    memcpy(p, km->wh, (size_t)n * sizeof(double));
    int64_t found = 0, last_positive = 0;
    while (found < k) {
        double acc = 0;
        for (int64_t i = 0; i < n; i++) {
            cum[i] = acc += p[i];
            if (p[i] > 0)
                last_positive = i;
        }
        int64_t draws = k - found;
        for (int64_t t = 0; t < draws; t++) {
            int64_t id = search_sorted(cum, n, gsb__rng_uniform(rng) * acc, 1);
            if (id >= n) /* u * acc rounded up to acc */
                id = last_positive;
            if (!taken[id]) {
                taken[id] = 1;
                chosen[found++] = id;
            }
        }
        for (int64_t j = 0; j < found; j++)
            p[chosen[j]] = 0;
    }
    rc = fetch_rows(km, chosen, k, C);
done:
    free(p);
    free(cum);
    free(taken);
    free(chosen);
    return rc;
}

/* ---- Lloyd's algorithm ------------------------------------------------- */

/*
 * scikit-learn's empty-cluster relocation: each empty cluster takes one of
 * the points farthest from their centre (the farthest to the first empty
 * cluster), its weighted row moving from its old cluster's sum to the empty
 * one's.  Labels stay as they are until the next E-step.  labels and
 * km->mindh are the last E-step's (km_fetch_estep); n_empty counts the zero
 * counts.
 */
static int relocate_empty(const km_data *km, const int32_t *labels, int64_t n_empty,
                          double *sums, double *counts)
{
    int64_t k = km->k, d = km->d;
    if (n_empty == 0)
        return GSB_OK;
    /* every point on its centre (more clusters than distinct points): nothing
     * to move, as scikit-learn decides */
    double max_dist = 0;
    for (int64_t i = 0; i < km->n; i++)
        if (km->mindh[i] > max_dist)
            max_dist = km->mindh[i];
    if (max_dist == 0)
        return GSB_OK;
    /* listed before any count changes: a donor cluster may drop to 0 below */
    int64_t *empty = alloc_array((size_t)n_empty, sizeof(int64_t));
    int64_t *far = alloc_array((size_t)n_empty, sizeof(int64_t));
    double *rows = alloc_array((size_t)(n_empty * d), sizeof(double));
    int rc = GSB_OK;
    if (!empty || !far || !rows) {
        rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    /* the n_empty largest distances, descending; ties keep the smaller index */
    int64_t have = 0;
    for (int64_t i = 0; i < km->n; i++) {
        double v = km->mindh[i];
        if (have == n_empty && !(v > km->mindh[far[have - 1]]))
            continue;
        int64_t pos = have < n_empty ? have++ : have - 1;
        while (pos > 0 && km->mindh[far[pos - 1]] < v) {
            far[pos] = far[pos - 1];
            pos--;
        }
        far[pos] = i;
    }
    GSB_CHECK(fetch_rows(km, far, n_empty, rows));
    for (int64_t j = 0, e = 0; j < k; j++)
        if (counts[j] == 0)
            empty[e++] = j;
    for (int64_t e = 0; e < n_empty; e++) {
        int64_t i = far[e], j = empty[e];
        const double *x = rows + e * d;
        double wi = weight_at(km, i);
        int32_t old = labels[i];
        for (int64_t f = 0; f < d; f++) {
            sums[old * d + f] -= x[f] * wi;
            sums[j * d + f] = x[f] * wi;
        }
        counts[j] = wi;
        counts[old] -= wi;
    }
done:
    free(empty);
    free(far);
    free(rows);
    return rc;
}

typedef struct km_run {
    double *centres;  /* k x d, centred coordinates */
    gsb__tensor lab;  /* n labels (a host tensor: the best run's becomes labels_ as it is) */
    int32_t *labels;  /* lab's data */
    double inertia;
    int64_t n_iter;
} km_run;

/*
 * One run from the centres in run->centres, as scikit-learn's
 * _kmeans_single_lloyd: E-step, M-step (with relocation), stop when labels
 * repeat ("strict convergence") or the squared centre shift is <= tol.  The
 * final labels and inertia are those of the final centres: a last E-step
 * runs whenever the centres moved since the last one.  (scikit-learn skips
 * it on strict convergence, where the centres normally did not move; they
 * can only have moved there through a relocation, and then its labels_ are
 * those of the previous centres while ours match cluster_centers_.)
 *
 * The labels stay on the backend, so "labels repeat" is decided without
 * comparing them, except around relocations:
 *  - segment_sum is a deterministic function of (X, labels, weights) on
 *    every backend (fixed summation order), and so are the counts, the
 *    averaging and the rounding to X's dtype.  When no cluster is empty in
 *    this iteration, labels equal to the previous iteration's give bit for
 *    bit the sums and counts of the previous M-step, which did not relocate
 *    either (its counts, a function of the same labels, had no empty
 *    cluster), so the new centres are bit for bit the current ones.  The
 *    shift is then exactly 0 <= tol and the loop ends in the same iteration,
 *    with unmoved centres (no final E-step), as the strict test would end
 *    it.
 *  - When a cluster is empty, the relocation needs the labels and
 *    distances on the host anyway, and the centres may move even with
 *    repeated labels (the farthest points depend on the distances): the
 *    labels are compared there.  Equal labels give equal counts, so the
 *    previous iteration had empty clusters too and its labels are on the
 *    host; if it had none, the labels differ.
 */
static int lloyd(gsb__ctx *c, km_data *km, km_run *run)
{
    const gsb__backend *be = km->be;
    int64_t n = km->n, d = km->d, k = km->k;
    int64_t max_iter = gsb__param_int(c->params, "max_iter");
    gsb__tensor ct = GSB__TENSOR_NONE, stats_t = GSB__TENSOR_NONE;
    /* one iteration's statistics, on be and on the host: sums (k x d), counts
     * (k) and the mean distance (1), so a single copy brings them back */
    const int64_t n_stats = k * d + k + 1;
    double *stats = alloc_array((size_t)n_stats, sizeof(double));
    double *sums = stats, *counts = stats ? stats + k * d : NULL;
    double *fresh = alloc_array((size_t)(k * d), sizeof(double));
    int32_t *labels_old = NULL; /* the previous relocating iteration's labels */
    int64_t n_waits = 0;        /* waits for the backend, for the profile */
    /* GSB_PROFILE: the loop's time per part (each clock waits for the backend) */
    double ms_estep = 0, ms_mstep = 0, ms_stats = 0;
    int rc = GSB_OK;
    if (!stats || !fresh) {
        rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    GSB_CHECK(gsb__tensor_alloc(be, km->dtype, k, d, &ct));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, n_stats, 1, &stats_t));
    gsb__tensor sums_t = stats_view(&stats_t, 0, k, d);
    gsb__tensor counts_t = stats_view(&stats_t, k * d, k, 1);
    gsb__tensor wmean_t = stats_view(&stats_t, k * d + k, 1, 1);
    GSB_CHECK(upload_doubles(be, run->centres, &ct));

    int current = 0;    /* km->labels are the E-step of the centres now in ct */
    int prev_empty = 0; /* the previous iteration had empty clusters (labels_old holds its labels) */
    int64_t it;
    for (it = 0; it < max_iter; it++) {
        double inertia;
        if (km->ks) { /* E- and M-step in one pass over the batches */
            GSB_CHECK(gsb__km_stream_pass(km->ks, &ct, &inertia, sums, counts, run->labels,
                                          km->mindh));
        } else if (be == gsb__cpu_backend()) {
            /* the CPU backend: E- and M-step in one pass over X, labels and
             * distances as argmin_sqdist gives them */
            double t0 = gsb__profile_clock(be);
            GSB_CHECK(gsb__cpu_lloyd_step(&km->X, &ct, km->w.data ? &km->w : NULL, &km->labels,
                                          &km->mind, &sums_t, &counts_t, &inertia));
            memcpy(stats, stats_t.data, (size_t)n_stats * sizeof(double));
            ms_estep += gsb__profile_clock(be) - t0;
        } else {
            /* E- and M-step queued back to back; one copy (a wait) brings
             * the sums, the counts and the inertia's mean */
            double t0 = gsb__profile_clock(be);
            GSB_CHECK(km_estep_queue(km, &ct, &wmean_t));
            double t1 = gsb__profile_clock(be);
            GSB_CHECK(be->ops->segment_sum(be, &km->X, &km->labels,
                                           km->w.data ? &km->w : NULL, &sums_t, &counts_t));
            double t2 = gsb__profile_clock(be);
            GSB_CHECK(be->ops->download(be, &stats_t, stats));
            inertia = stats[k * d + k] * km->wsum;
            n_waits += 2; /* segment_sum's label check, the copy */
            ms_estep += t1 - t0;
            ms_mstep += t2 - t1;
            ms_stats += gsb__profile_clock(be) - t2;
        }
        run->inertia = inertia;
        GSB_CHECK(gsb__progress(c, "iteration", it, inertia));
        int64_t n_empty = 0;
        for (int64_t j = 0; j < k; j++)
            n_empty += counts[j] == 0;
        int strict = 0;
        if (n_empty > 0) {
            if (!km->ks)
                GSB_CHECK(km_fetch_estep(km, run->labels));
            if (!labels_old && !(labels_old = alloc_array((size_t)n, sizeof(int32_t)))) {
                rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
                goto done;
            }
            strict = prev_empty && memcmp(run->labels, labels_old, (size_t)n * sizeof(int32_t)) == 0;
            memcpy(labels_old, run->labels, (size_t)n * sizeof(int32_t));
            GSB_CHECK(relocate_empty(km, run->labels, n_empty, sums, counts));
        }
        prev_empty = n_empty > 0;

        gsb__kmeans_average_centres(sums, counts, k, d, fresh);
        round_to_dtype(km->dtype, fresh, k * d);
        double shift2 = 0;
        int moved = 0;
        for (int64_t q = 0; q < k * d; q++) {
            double diff = fresh[q] - run->centres[q];
            shift2 += diff * diff;
            moved |= fresh[q] != run->centres[q];
        }
        memcpy(run->centres, fresh, (size_t)(k * d) * sizeof(double));
        /* queued behind the copy: no wait (the staged upload returns once
         * the bytes are in pinned staging) */
        if (moved)
            GSB_CHECK(upload_doubles(be, run->centres, &ct));
        current = !moved;

        if (strict)
            break; /* strict convergence */
        /* unmoved centres are strict convergence without empty clusters (above);
         * tested apart from the shift, as tol is NaN when X's variance overflows */
        if (!moved || shift2 <= km->tol)
            break;
    }
    run->n_iter = it < max_iter ? it + 1 : max_iter;
    gsb__profile_count("lloyd iterations", run->n_iter);
    gsb__profile_count("lloyd waits", n_waits);
    if (!km->ks) {
        gsb__profile_note(be == gsb__cpu_backend()
                              ? "  lloyd: E- and M-step (gsb__cpu_lloyd_step)"
                              : "  lloyd: E-step (argmin_sqdist, col_moments of the distances)",
                          ms_estep);
        gsb__profile_note("  lloyd: M-step (segment_sum, its label check)", ms_mstep);
        gsb__profile_note("  lloyd: sums, counts, inertia to the host", ms_stats);
    }
    gsb__profile_mark("lloyd iterations");
    if (km->ks) { /* the last pass left the labels on the host */
        if (!current)
            GSB_CHECK(gsb__km_stream_pass(km->ks, &ct, &run->inertia, sums, counts,
                                          run->labels, km->mindh));
        goto done;
    }
    if (!current)
        GSB_CHECK(km_estep(km, &ct, &run->inertia));
    gsb__profile_mark("lloyd final E-step");
    /* the labels of the final centres, once per run */
    GSB_CHECK(be->ops->download(be, &km->labels, run->labels));
done:
    gsb__tensor_free(&ct);
    gsb__tensor_free(&stats_t);
    free(stats);
    free(fresh);
    free(labels_old);
    return rc;
}

/* scikit-learn's _is_same_clustering: labels a map onto labels b one-to-one
 * in the direction a -> b (a relabelling of the same partition). */
static int same_clustering(const int32_t *a, const int32_t *b, int64_t n, int64_t k,
                           int32_t *map)
{
    for (int64_t j = 0; j < k; j++)
        map[j] = -1;
    for (int64_t i = 0; i < n; i++) {
        if (map[a[i]] == -1)
            map[a[i]] = b[i];
        else if (map[a[i]] != b[i])
            return 0;
    }
    return 1;
}

/* ---- methods ----------------------------------------------------------- */

static int check_weights_nonzero(const gsb__tensor *sw)
{
    if (!sw)
        return GSB_OK;
    const double *w = sw->data;
    for (int64_t i = 0; i < sw->rows; i++)
        if (w[i] != 0)
            return GSB_OK;
    return gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero number.");
}

/* Runs for the n_init parameter: 'auto' is 1 for k-means++ and 10 for
 * 'random'; an explicit init array always gives one run. */
static int64_t resolve_n_init(const gsb__ctx *c, int explicit_init)
{
    if (explicit_init)
        return 1;
    if (gsb__param_is(c->params, "n_init", "auto"))
        return gsb__param_is(c->params, "init", "random") ? 10 : 1;
    return gsb__param_int(c->params, "n_init");
}

/* scikit-learn's warnings about a fit: an explicit init runs once whatever
 * n_init says, and fewer distinct clusters than asked (duplicate points). */
static void warn_explicit_init(const gsb__ctx *c)
{
    if (!gsb__param_is(c->params, "n_init", "auto") && gsb__param_int(c->params, "n_init") != 1)
        gsb__warn("RuntimeWarning", "Explicit initial center position passed: performing only "
                  "one init in KMeans instead of n_init=%lld.",
                  (long long)gsb__param_int(c->params, "n_init"));
}

static void warn_distinct(const int32_t *labels, int64_t n, int64_t k, char *seen)
{
    memset(seen, 0, (size_t)k);
    int64_t distinct = 0;
    /* stops once all k are seen: a pass over a million labels otherwise */
    for (int64_t i = 0; i < n && distinct < k; i++)
        if (labels[i] >= 0 && labels[i] < k && !seen[labels[i]]) {
            seen[labels[i]] = 1;
            distinct++;
        }
    if (distinct < k)
        gsb__warn(GSB__CONVERGENCE_WARNING, "Number of distinct clusters (%lld) found smaller "
                  "than n_clusters (%lld). Possibly due to duplicate points in X.",
                  (long long)distinct, (long long)k);
}

static int set_fitted(gsb__ctx *c, const km_data *km, km_run *best)
{
    int64_t d = km->d, k = km->k;
    gsb__tensor centres;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), km->dtype, k, d, &centres));
    double *row = alloc_array((size_t)d, sizeof(double));
    if (!row) {
        gsb__tensor_free(&centres);
        return gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
    }
    for (int64_t j = 0; j < k; j++) {
        for (int64_t f = 0; f < d; f++)
            row[f] = best->centres[j * d + f] + km->mean[f];
        from_double(row, km->dtype, d, (char *)centres.data + (size_t)(j * d) * km->esize);
    }
    free(row);
    GSB_TRY(gsb__fit_set(c, "cluster_centers_", &centres));
    /* the run's own labels, moved (a copy of 4 MB per million rows, into
     * fresh pages, cost ~1 ms) */
    gsb__tensor_as_1d(&best->lab);
    best->labels = NULL;
    GSB_TRY(gsb__fit_set(c, "labels_", &best->lab));
    GSB_TRY(gsb__fit_set_scalar(c, "inertia_", best->inertia, GSB_F64));
    return gsb__fit_set_scalar(c, "n_iter_", (double)best->n_iter, GSB_I64);
}

static int kmeans_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X");
    const gsb__tensor *sw = gsb__in(c, "sample_weight");
    const gsb__tensor *init = gsb__in(c, "init");
    int64_t n = X->rows, d = X->cols, k = gsb__param_int(c->params, "n_clusters");
    if (n < k)
        return gsb__err(GSB_EINVAL, "n_samples=%lld should be >= n_clusters=%lld.",
                        (long long)n, (long long)k);
    GSB_TRY(check_weights_nonzero(sw));
    if (init && init->rows != k)
        return gsb__err(GSB_EINVAL,
                        "The shape of the initial centers (%lld, %lld) does not match the "
                        "number of clusters %lld.",
                        (long long)init->rows, (long long)init->cols, (long long)k);
    if (init && init->cols != d)
        return gsb__err(GSB_EINVAL,
                        "The shape of the initial centers (%lld, %lld) does not match the "
                        "number of features of the data %lld.",
                        (long long)init->rows, (long long)init->cols, (long long)d);

    if (init)
        warn_explicit_init(c);
    km_data km;
    GSB_TRY(km_setup(c, X, sw, k, &km));
    gsb__profile_mark("setup: centre X");
    int64_t n_init = resolve_n_init(c, init != NULL);
    int random_init = gsb__param_is(c->params, "init", "random");
    gsb__rng rng;
    gsb__rng_seed_params(&rng, c->params);

    km_run run = {0}, best = {0};
    int32_t *map = NULL;
    int have_best = 0, rc = GSB_OK;
    run.centres = alloc_array((size_t)(k * d), sizeof(double));
    best.centres = alloc_array((size_t)(k * d), sizeof(double));
    map = alloc_array((size_t)k, sizeof(int32_t));
    if (!run.centres || !best.centres || !map) {
        rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_I32, n, 1, &run.lab));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_I32, n, 1, &best.lab));
    run.labels = run.lab.data;
    best.labels = best.lab.data;
    for (int64_t r = 0; r < n_init; r++) {
        if (init) {
            /* the given centres, moved like X */
            for (int64_t q = 0; q < k * d; q++)
                run.centres[q] = gsb__tensor_get(init, q) - km.mean[q % d];
            round_to_dtype(km.dtype, run.centres, k * d);
        } else if (random_init) {
            GSB_CHECK(init_random(&km, &rng, run.centres));
        } else {
            GSB_CHECK(init_kmeanspp(c, &km, &rng, run.centres));
        }
        gsb__profile_mark("init");
        GSB_CHECK(lloyd(c, &km, &run));
        gsb__profile_mark("labels to the host");
        /* a lower inertia wins unless it is the same partition relabelled
         * (rounding can make a relabelling look better) */
        if (!have_best ||
            (run.inertia < best.inertia && !same_clustering(run.labels, best.labels, n, k, map))) {
            km_run tmp = best;
            best = run;
            run = tmp;
            have_best = 1;
        }
    }
    /* map is free now: k bytes of scratch for counting the clusters */
    warn_distinct(best.labels, n, k, (char *)map);
    rc = set_fitted(c, &km, &best);
    gsb__profile_mark("fitted attributes");
done:
    free(run.centres);
    gsb__tensor_free(&run.lab);
    free(best.centres);
    gsb__tensor_free(&best.lab);
    free(map);
    km_free(&km);
    return rc;
}

/*
 * Nearest fitted centre of each row of X: labels (n, int32) and squared
 * distances (n, X's dtype), both on the context's backend.
 */
static int nearest_centres(gsb__ctx *c, gsb__tensor *labels, gsb__tensor *mind)
{
    const gsb__tensor *X = gsb__in(c, "X");
    const gsb__tensor *C = gsb__attr(c, "cluster_centers_");
    if (!C)
        return gsb__err(GSB_ENOTFITTED, "KMeans: cluster_centers_ is missing");
    gsb__tensor xb = GSB__TENSOR_NONE, cb = GSB__TENSOR_NONE;
    *labels = GSB__TENSOR_NONE;
    *mind = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_to(c->be, X, &xb));
    gsb__profile_mark("X to the backend");
    /* the centres take X's dtype: a float64 model can label float32 data */
    GSB_CHECK(gsb__tensor_to_dtype(c->be, C, X->dtype, &cb));
    GSB_CHECK(gsb__tensor_alloc(c->be, GSB_I32, X->rows, 1, labels));
    GSB_CHECK(gsb__tensor_alloc(c->be, X->dtype, X->rows, 1, mind));
    GSB_CHECK(c->be->ops->argmin_sqdist(c->be, &xb, &cb, labels, mind));
    gsb__profile_mark("nearest centres");
done:
    gsb__tensor_free(&xb);
    gsb__tensor_free(&cb);
    if (rc != GSB_OK) {
        gsb__tensor_free(labels);
        gsb__tensor_free(mind);
    }
    return rc;
}

/* What a method computes of each row against the fitted centres. */
enum { ROW_LABEL, ROW_DIST2, ROW_DISTANCES };

/* One batch's rows (Xb on c->be) against the centres (arg): the label, the
 * squared distance to the nearest centre, or the distance to each. */
static int centres_batch(gsb__ctx *c, const gsb__tensor *Xb, void *arg, gsb__tensor *res)
{
    const int *what = arg;
    const gsb__tensor *C = gsb__attr(c, "cluster_centers_");
    gsb__tensor cb = GSB__TENSOR_NONE, other = GSB__TENSOR_NONE;
    int rc;
    *res = GSB__TENSOR_NONE;
    GSB_CHECK(gsb__tensor_to_dtype(c->be, C, Xb->dtype, &cb));
    if (*what == ROW_DISTANCES) {
        GSB_CHECK(gsb__tensor_alloc(c->be, Xb->dtype, Xb->rows, C->rows, res));
        GSB_CHECK(c->be->ops->pairwise(c->be, Xb, &cb, GSB__METRIC_EUCLIDEAN, res));
    } else {
        gsb__tensor *lab = *what == ROW_LABEL ? res : &other;
        gsb__tensor *md = *what == ROW_LABEL ? &other : res;
        GSB_CHECK(gsb__tensor_alloc(c->be, GSB_I32, Xb->rows, 1, lab));
        GSB_CHECK(gsb__tensor_alloc(c->be, Xb->dtype, Xb->rows, 1, md));
        GSB_CHECK(c->be->ops->argmin_sqdist(c->be, Xb, &cb, lab, md));
    }
done:
    gsb__tensor_free(&cb);
    gsb__tensor_free(&other);
    if (rc != GSB_OK)
        gsb__tensor_free(res);
    return rc;
}

/*
 * The method's per-row result for an X larger than the backend's memory, in
 * batches (estimators/common/stream.h): *out a host tensor, *streamed = 1.
 * Otherwise *streamed = 0 and the in-memory path runs.
 */
static int centres_streamed(gsb__ctx *c, int what, gsb__tensor *out, int *streamed)
{
    const gsb__tensor *X = gsb__in(c, "X");
    const gsb__tensor *C = gsb__attr(c, "cluster_centers_");
    *streamed = 0;
    if (!C)
        return gsb__err(GSB_ENOTFITTED, "KMeans: cluster_centers_ is missing");
    int64_t cols = what == ROW_DISTANCES ? C->rows : 1;
    size_t esize = gsb_dtype_size(X->dtype);
    gsb__stream_plan plan;
    GSB_TRY(gsb__stream_plan_for(c, X, 1.0, (size_t)gsb__tensor_numel(C) * esize,
                                 (size_t)cols * esize + 4 + esize, &plan));
    if (!plan.streamed)
        return GSB_OK;
    *streamed = 1;
    return gsb__stream_map(c, &plan, X, centres_batch, &what,
                           what == ROW_LABEL ? GSB_I32 : X->dtype, cols, out);
}

static int kmeans_predict(gsb__ctx *c)
{
    gsb__tensor labels, mind;
    int streamed;
    GSB_TRY(centres_streamed(c, ROW_LABEL, &labels, &streamed));
    if (!streamed) {
        GSB_TRY(nearest_centres(c, &labels, &mind));
        gsb__tensor_free(&mind);
    }
    gsb__tensor_as_1d(&labels);
    return gsb__out(c, "labels", &labels);
}

/* Euclidean distance of each row of X to each fitted centre (n x k). */
static int kmeans_transform(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X");
    const gsb__tensor *C = gsb__attr(c, "cluster_centers_");
    if (!C)
        return gsb__err(GSB_ENOTFITTED, "KMeans: cluster_centers_ is missing");
    gsb__tensor xb = GSB__TENSOR_NONE, cb = GSB__TENSOR_NONE, D = GSB__TENSOR_NONE;
    int rc, streamed;
    GSB_CHECK(centres_streamed(c, ROW_DISTANCES, &D, &streamed));
    if (streamed) {
        rc = gsb__out(c, "X", &D);
        goto done;
    }
    GSB_CHECK(gsb__tensor_to(c->be, X, &xb));
    GSB_CHECK(gsb__tensor_to_dtype(c->be, C, X->dtype, &cb));
    GSB_CHECK(gsb__tensor_alloc(c->be, X->dtype, X->rows, C->rows, &D));
    GSB_CHECK(c->be->ops->pairwise(c->be, &xb, &cb, GSB__METRIC_EUCLIDEAN, &D));
    rc = gsb__out(c, "X", &D);
done:
    gsb__tensor_free(&xb);
    gsb__tensor_free(&cb);
    gsb__tensor_free(&D);
    return rc;
}

/* Opposite of the (weighted) inertia of X under the fitted centres. */
static int kmeans_score(gsb__ctx *c)
{
    const gsb__tensor *sw = gsb__in(c, "sample_weight");
    GSB_TRY(check_weights_nonzero(sw));
    gsb__tensor labels = GSB__TENSOR_NONE, mind, host = GSB__TENSOR_NONE;
    int rc, streamed;
    GSB_TRY(centres_streamed(c, ROW_DIST2, &mind, &streamed));
    if (!streamed)
        GSB_TRY(nearest_centres(c, &labels, &mind));
    GSB_CHECK(gsb__tensor_to_dtype(gsb__cpu_backend(), &mind, GSB_F64, &host));
    double inertia = 0;
    const double *v = host.data;
    for (int64_t i = 0; i < host.rows; i++)
        inertia += (sw ? ((const double *)sw->data)[i] : 1.0) * v[i];
    rc = gsb__out_scalar(c, "score", -inertia, GSB_F64);
done:
    gsb__tensor_free(&labels);
    gsb__tensor_free(&mind);
    gsb__tensor_free(&host);
    return rc;
}

/* scikit-learn's fit_predict returns labels_ (the fit's own E-step). */
static int kmeans_fit_predict(gsb__ctx *c)
{
    GSB_TRY(kmeans_fit(c));
    const gsb__tensor *labels = gsb__attr(c, "labels_");
    gsb__tensor copy;
    GSB_TRY(gsb__tensor_to_host(labels, &copy));
    return gsb__out(c, "labels", &copy);
}

static int kmeans_fit_transform(gsb__ctx *c)
{
    GSB_TRY(kmeans_fit(c));
    return kmeans_transform(c);
}

/* ---- descriptor -------------------------------------------------------- */

#define KMEANS_FIT_INPUTS                                                               \
    {                                                                                   \
        {"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM | GSB__IN_CHECK_ON_BACKEND}, \
            {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL},                                 \
            {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL},                      \
            {"init", GSB__IN_MATRIX | GSB__IN_OPTIONAL},                                \
    }

static const gsb__method_desc kmeans_methods[] = {
    {"fit", kmeans_fit, KMEANS_FIT_INPUTS, 1,
     "Compute k-means clustering (y is ignored; init: optional initial centres)."},
    {"fit_predict", kmeans_fit_predict, KMEANS_FIT_INPUTS, 1,
     "Fit, then return labels_ as 'labels'."},
    {"fit_transform", kmeans_fit_transform, KMEANS_FIT_INPUTS, 1,
     "Fit, then return the distances of X to the centres as 'X'."},
    {"predict", kmeans_predict, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}}, 0,
     "Index of the closest centre of each sample, as 'labels' (int32)."},
    {"transform", kmeans_transform, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}}, 0,
     "Euclidean distance of each sample to each centre, as 'X' (n_samples, n_clusters)."},
    {"score", kmeans_score,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM},
      {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     0, "Opposite of the (weighted) inertia of X under the centres, as 'score'."},
    GSB__STATS_MOMENTS_ROW, GSB__STATS_MERGE_ROW, GSB__KMEANS_STATS_ROWS,
    {0}};

static const gsb__attr_desc kmeans_attrs[] = {
    {"cluster_centers_", "Coordinates of the cluster centres (n_clusters, n_features), X's dtype."},
    {"labels_", "Label of each training sample (int32), for the final centres."},
    {"inertia_", "Sum of (weighted) squared distances of the samples to their closest centre."},
    {"n_iter_", "Number of iterations of the best run."},
    {0}};

const gsb__estimator_desc gsb__est_KMeans = {
    "KMeans", "cluster", GSB__KIND_CLUSTERER, kmeans_params, kmeans_methods, kmeans_attrs,
    "K-Means clustering (Lloyd's algorithm), as scikit-learn's KMeans."};
