/*
 * kmeans_stats.c - KMeans across partitions (the distributed fit's engine
 * side; the driver's loop is python/gsb/dask/cluster.py, docs/DASK.md).
 *
 * The driver works as kmeans.c's lloyd() does, in centred coordinates: it
 * takes the data's column mean ("shift", from merged stats_moments) and
 * runs, per iteration,
 *   stats_lloyd on every partition (the E-step against the centres: per-
 *   cluster weighted sums and counts of X - shift and the inertia, the
 *   backend's argmin_sqdist and segment_sum, as lloyd() runs them), merged
 *   by summing;
 *   (option centred: X is already X - shift, as the multi-device driver
 *   keeps its shards for the whole loop, so no centred copy per call);
 *   when a cluster is empty, stats_lloyd with far = n_empty (each
 *   partition's n_empty points farthest from their centre, merged by
 *   distance, ties to the smaller global row) for scikit-learn's relocation;
 *   lloyd_step: relocation, averaging, rounding to X's dtype, the squared
 *   shift, exactly as lloyd() computes them;
 * and stops as lloyd() stops (centres unmoved, or shift <= tol * mean
 * variance).  fit_from_stats stores the final centres.  One difference: a
 * run whose labels repeat across two consecutive relocating iterations
 * (lloyd()'s strict test there) goes on until the centres stop moving.
 *
 * k-means|| initialisation (stats_kmeans_par): phase 'cost' sums w d^2 to
 * the candidate centres; phase 'sample' keeps each row with probability
 * min(1, l w d^2 / phi), drawing one uniform per row from a generator
 * seeded by (seed, round, the partition's first global row), so a retried
 * partition draws the same rows.
 */
#include "estimators/cluster/kmeans_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/warn.h"
#include "estimators/common/partial_stats.h"
#include "solvers/randomized_svd.h" /* gsb__tensor_to_f64 */

void gsb__kmeans_average_centres(const double *sums, const double *counts, int64_t k, int64_t d,
                                 double *out)
{
    /* scikit-learn scales the rows in place in index order, so when the
     * heaviest cluster comes later its row is still the weighted sum, and
     * that is what gets copied; kept for identical results */
    int64_t heavy = 0;
    for (int64_t j = 1; j < k; j++)
        if (counts[j] > counts[heavy])
            heavy = j;
    for (int64_t j = 0; j < k; j++) {
        const double *src = sums + j * d;
        double alpha = 1.0;
        if (counts[j] > 0)
            alpha = 1.0 / counts[j];
        else if (heavy < j)
            src = out + heavy * d;
        else
            src = sums + heavy * d;
        for (int64_t f = 0; f < d; f++)
            out[j * d + f] = src[f] * alpha;
    }
}

static gsb_dtype opt_dtype(gsb__ctx *c)
{
    const char *s = json_string_value(json_object_get(c->options, "dtype"));
    return s && strcmp(s, "float32") == 0 ? GSB_F32 : GSB_F64;
}

static double opt_float(gsb__ctx *c, const char *name, double dflt)
{
    const json_t *v = json_object_get(c->options, name);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* ---- the partition's E-step ------------------------------------------------------ */

typedef struct km_part {
    gsb__tensor Xc;     /* X - shift on the backend, X's dtype */
    gsb__tensor w;      /* weights on the backend (float64) or NONE */
    gsb__tensor labels; /* (n) int32 */
    gsb__tensor mind;   /* (n) squared distances, X's dtype */
    double *wh;         /* host weights (rounded to X's dtype) or NULL */
    double wsum;
} km_part;

static void part_free(km_part *p)
{
    gsb__tensor_free(&p->Xc);
    gsb__tensor_free(&p->w);
    gsb__tensor_free(&p->labels);
    gsb__tensor_free(&p->mind);
    free(p->wh);
}

/* Centre the partition (unless option centred says X is centred already)
 * and run the E-step against C (centred coordinates). */
static int part_estep(gsb__ctx *c, km_part *p)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X"), *C = gsb__in(c, "centers"), *sh = gsb__in(c, "shift");
    gsb__tensor Xb = GSB__TENSOR_NONE, Cb = GSB__TENSOR_NONE, Sb = GSB__TENSOR_NONE;
    int64_t n = X->rows, d = X->cols;
    int rc;
    memset(p, 0, sizeof *p);
    if (C->cols != d || sh->cols != d || sh->rows != 1)
        return gsb__err(GSB_EINVAL, "KMeans: centers (%lld, %lld) and shift (%lld, %lld) must "
                        "have X's %lld features", (long long)C->rows, (long long)C->cols,
                        (long long)sh->rows, (long long)sh->cols, (long long)d);
    p->wsum = (double)n;
    GSB_CHECK(gsb__stats_weights(gsb__in(c, "sample_weight"), X->dtype, &p->wh, &p->wsum));
    if (p->wh)
        GSB_CHECK(gsb__tensor_from_f64(be, GSB_F64, p->wh, n, 1, &p->w));
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    GSB_CHECK(gsb__tensor_to(be, C, &Cb));
    if (gsb__opt_bool(c, "centred", 0)) {
        p->Xc = Xb; /* X itself (a view) or its copy on be */
        Xb = GSB__TENSOR_NONE;
    } else {
        GSB_CHECK(gsb__tensor_to(be, sh, &Sb));
        Sb.rows = d; /* the 1 x d shift as the d-vector col_affine reads */
        Sb.cols = 1;
        GSB_CHECK(gsb__tensor_alloc(be, X->dtype, n, d, &p->Xc));
        GSB_CHECK(be->ops->col_affine(be, &Xb, &Sb, NULL, NULL, &p->Xc));
    }
    GSB_CHECK(gsb__tensor_alloc(be, GSB_I32, n, 1, &p->labels));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, n, 1, &p->mind));
    if (C->rows > 0)
        GSB_CHECK(be->ops->argmin_sqdist(be, &p->Xc, &Cb, &p->labels, &p->mind));
done:
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Cb);
    gsb__tensor_free(&Sb);
    if (rc != GSB_OK)
        part_free(p);
    return rc;
}

/* LLOYD: [inertia, counts(k), sums(k x d)] of the partition. */
static int lloyd_sums(gsb__ctx *c, km_part *p, int64_t k, int64_t d)
{
    const gsb__backend *be = c->be;
    gsb__tensor sums = GSB__TENSOR_NONE, counts = GSB__TENSOR_NONE, wm = GSB__TENSOR_NONE,
                out = GSB__TENSOR_NONE;
    double *sh = NULL, *ch = NULL, *o = NULL, mean = 0;
    int rc;
    const gsb__tensor *w = p->w.data ? &p->w : NULL;
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, k, d, &sums));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, k, 1, &counts));
    GSB_CHECK(be->ops->segment_sum(be, &p->Xc, &p->labels, w, &sums, &counts));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, 1, 1, &wm));
    if (p->wsum > 0) { /* the inertia as lloyd() forms it: weighted mean times total */
        GSB_CHECK(be->ops->col_moments(be, &p->mind, w, &wm, NULL));
        GSB_CHECK(be->ops->download(be, &wm, &mean));
    }
    GSB_CHECK(gsb__tensor_to_f64(&sums, &sh));
    GSB_CHECK(gsb__tensor_to_f64(&counts, &ch));
    GSB_CHECK(gsb__stats_alloc(GSB__STATS_LLOYD, k, d, 0, &out, &o));
    o[0] = p->wsum > 0 ? mean * p->wsum : 0.0;
    memcpy(o + 1, ch, (size_t)k * sizeof *o);
    memcpy(o + 1 + k, sh, (size_t)(k * d) * sizeof *o);
    rc = gsb__out(c, "stats", &out);
done:
    free(sh);
    free(ch);
    gsb__tensor_free(&sums);
    gsb__tensor_free(&counts);
    gsb__tensor_free(&wm);
    gsb__tensor_free(&out);
    return rc;
}

/* FAR: the m points of the partition farthest from their centre, descending
 * (ties: the smaller row), as [dist, global row, weight, label, x - shift]. */
static int lloyd_far(gsb__ctx *c, km_part *p, int64_t m, int64_t offset, int64_t d)
{
    int64_t n = p->Xc.rows, have = 0;
    int32_t *lab = malloc((size_t)n * sizeof *lab);
    int64_t *far = malloc((size_t)(m > 0 ? m : 1) * sizeof *far);
    double *dist = NULL, *o = NULL;
    gsb__tensor out = GSB__TENSOR_NONE;
    int rc;
    if (!lab || !far) {
        rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    GSB_CHECK(c->be->ops->download(c->be, &p->labels, lab));
    GSB_CHECK(gsb__tensor_to_f64(&p->mind, &dist));
    for (int64_t i = 0; i < n; i++) { /* insertion into the m largest, as relocate_empty */
        double v = dist[i];
        if (have == m && !(v > dist[far[have - 1]]))
            continue;
        int64_t pos = have < m ? have++ : have - 1;
        while (pos > 0 && dist[far[pos - 1]] < v) {
            far[pos] = far[pos - 1];
            pos--;
        }
        far[pos] = i;
    }
    GSB_CHECK(gsb__stats_alloc(GSB__STATS_FAR, m, d, 0, &out, &o));
    for (int64_t r = 0; r < m; r++) {
        double *rec = o + r * (4 + d);
        if (r >= have) {
            rec[0] = -1;
            rec[1] = -1; /* padding */
            continue;
        }
        int64_t i = far[r];
        gsb__tensor v = p->Xc;
        v.data = (char *)p->Xc.data + (size_t)(i * d) * gsb_dtype_size(p->Xc.dtype);
        v.rows = 1;
        v.owned = 0;
        double *x;
        GSB_CHECK(gsb__tensor_to_f64(&v, &x));
        rec[0] = dist[i];
        rec[1] = (double)(offset + i);
        rec[2] = p->wh ? p->wh[i] : 1.0;
        rec[3] = lab[i];
        memcpy(rec + 4, x, (size_t)d * sizeof *x);
        free(x);
    }
    rc = gsb__out(c, "stats", &out);
done:
    free(lab);
    free(far);
    free(dist);
    gsb__tensor_free(&out);
    return rc;
}

int gsb__kmeans_stats_lloyd(gsb__ctx *c)
{
    const gsb__tensor *C = gsb__in(c, "centers");
    int64_t m = gsb__opt_int(c, "far", 0), offset = gsb__opt_int(c, "offset", 0);
    if (C->rows < 1 || m < 0 || offset < 0)
        return gsb__err(GSB_EINVAL, "KMeans.stats_lloyd: needs centres, far >= 0, offset >= 0");
    km_part p;
    GSB_TRY(part_estep(c, &p));
    int64_t d = p.Xc.cols;
    int rc = m > 0 ? lloyd_far(c, &p, m, offset, d) : lloyd_sums(c, &p, C->rows, d);
    part_free(&p);
    return rc;
}

/* ---- k-means|| --------------------------------------------------------------------- */

/* COST: sum w d^2 to the nearest candidate. */
static int par_cost(gsb__ctx *c, km_part *p)
{
    gsb__tensor out = GSB__TENSOR_NONE;
    double *dist = NULL, *o = NULL, acc = 0;
    int rc;
    GSB_CHECK(gsb__tensor_to_f64(&p->mind, &dist));
    for (int64_t i = 0; i < p->Xc.rows; i++)
        acc += (p->wh ? p->wh[i] : 1.0) * dist[i];
    GSB_CHECK(gsb__stats_alloc(GSB__STATS_COST, 1, 0, 0, &out, &o));
    o[0] = acc;
    rc = gsb__out(c, "stats", &out);
done:
    free(dist);
    gsb__tensor_free(&out);
    return rc;
}

/* SAMPLE: the rows kept with probability min(1, l w d^2 / phi), centred. */
static int par_sample(gsb__ctx *c, km_part *p)
{
    int64_t n = p->Xc.rows, d = p->Xc.cols, m = 0;
    double phi = opt_float(c, "phi", 0), l = opt_float(c, "l", 0);
    if (!(phi > 0) || !(l > 0))
        return gsb__err(GSB_EINVAL, "KMeans.stats_kmeans_par: phase 'sample' needs phi > 0 "
                        "and l > 0");
    gsb__rng rng;
    uint64_t seed = (uint64_t)gsb__opt_int(c, "seed", 0);
    seed ^= 0x9E3779B97F4A7C15ull * (uint64_t)(gsb__opt_int(c, "round", 0) + 1);
    seed ^= 0xC2B2AE3D27D4EB4Full * (uint64_t)(gsb__opt_int(c, "offset", 0) + 1);
    gsb__rng_seed(&rng, seed);
    double *dist = NULL, *X = NULL, *o = NULL;
    int64_t *keep = malloc((size_t)(n > 0 ? n : 1) * sizeof *keep);
    gsb__tensor out = GSB__TENSOR_NONE;
    int rc;
    if (!keep) {
        rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    GSB_CHECK(gsb__tensor_to_f64(&p->mind, &dist));
    for (int64_t i = 0; i < n; i++) {
        double u = gsb__rng_uniform(&rng); /* one draw per row whatever happens */
        if (u < l * (p->wh ? p->wh[i] : 1.0) * dist[i] / phi)
            keep[m++] = i;
    }
    GSB_CHECK(gsb__tensor_to_f64(&p->Xc, &X));
    GSB_CHECK(gsb__stats_alloc(GSB__STATS_SAMPLE, m, d, 0, &out, &o));
    for (int64_t r = 0; r < m; r++)
        memcpy(o + r * d, X + keep[r] * d, (size_t)d * sizeof *o);
    rc = gsb__out(c, "stats", &out);
done:
    free(keep);
    free(dist);
    free(X);
    gsb__tensor_free(&out);
    return rc;
}

int gsb__kmeans_stats_par(gsb__ctx *c)
{
    const char *phase = json_string_value(json_object_get(c->options, "phase"));
    if (!phase || (strcmp(phase, "cost") != 0 && strcmp(phase, "sample") != 0))
        return gsb__err(GSB_EINVAL, "KMeans.stats_kmeans_par: option phase must be 'cost' or "
                        "'sample'");
    if (gsb__in(c, "centers")->rows < 1)
        return gsb__err(GSB_EINVAL, "KMeans.stats_kmeans_par: needs at least one candidate");
    km_part p;
    GSB_TRY(part_estep(c, &p));
    int rc = strcmp(phase, "cost") == 0 ? par_cost(c, &p) : par_sample(c, &p);
    part_free(&p);
    return rc;
}

/* ---- the driver's steps ---------------------------------------------------------------- */

/* scikit-learn's relocation from the merged farthest points (kmeans.c's relocate_empty). */
static int relocate(const gsb__stats *far, int64_t k, int64_t d, double *sums, double *counts,
                    int64_t n_empty)
{
    if (!far || far->a < n_empty || far->b != d)
        return gsb__err(GSB_EINVAL, "KMeans.lloyd_step: %lld empty cluster(s) need the "
                        "merged 'far' statistics of at least as many points",
                        (long long)n_empty);
    const double *rec0 = far->v;
    if (!(rec0[1] >= 0) || rec0[0] == 0) /* every point on its centre: nothing moves */
        return GSB_OK;
    int64_t *empty = malloc((size_t)n_empty * sizeof *empty);
    if (!empty)
        return gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
    for (int64_t j = 0, e = 0; j < k; j++)
        if (counts[j] == 0)
            empty[e++] = j;
    for (int64_t e = 0; e < n_empty; e++) {
        const double *rec = far->v + e * (4 + d), *x = rec + 4;
        int64_t j = empty[e], old = (int64_t)rec[3];
        if (rec[1] < 0 || old < 0 || old >= k) {
            free(empty);
            return gsb__err(GSB_EINVAL, "KMeans.lloyd_step: malformed 'far' statistics");
        }
        double wi = rec[2];
        for (int64_t f = 0; f < d; f++) {
            sums[old * d + f] -= x[f] * wi;
            sums[j * d + f] = x[f] * wi;
        }
        counts[j] = wi;
        counts[old] -= wi;
    }
    free(empty);
    return GSB_OK;
}

int gsb__kmeans_lloyd_step(gsb__ctx *c)
{
    const gsb__tensor *C = gsb__in(c, "centers"), *ft = gsb__in(c, "far");
    gsb__stats st, far;
    GSB_TRY(gsb__stats_parse(gsb__in(c, "stats"), GSB__STATS_LLOYD, &st));
    if (ft)
        GSB_TRY(gsb__stats_parse(ft, GSB__STATS_FAR, &far));
    int64_t k = st.a, d = st.b;
    if (C->rows != k || C->cols != d)
        return gsb__err(GSB_EINVAL, "KMeans.lloyd_step: centers must be (%lld, %lld)",
                        (long long)k, (long long)d);
    gsb_dtype dt = opt_dtype(c);
    gsb__tensor out = GSB__TENSOR_NONE;
    double *sums = malloc((size_t)(k * d) * sizeof *sums), *counts = malloc((size_t)k * sizeof *counts);
    int rc;
    if (!sums || !counts) {
        rc = gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
        goto done;
    }
    memcpy(counts, st.v + 1, (size_t)k * sizeof *counts);
    memcpy(sums, st.v + 1 + k, (size_t)(k * d) * sizeof *sums);
    int64_t n_empty = 0;
    for (int64_t j = 0; j < k; j++)
        n_empty += counts[j] == 0;
    if (n_empty > 0)
        GSB_CHECK(relocate(ft ? &far : NULL, k, d, sums, counts, n_empty));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, k, d, &out));
    double *fresh = out.data, shift2 = 0;
    int moved = 0;
    gsb__kmeans_average_centres(sums, counts, k, d, fresh);
    for (int64_t q = 0; q < k * d; q++) {
        if (dt == GSB_F32)
            fresh[q] = (float)fresh[q];
        double old = gsb__tensor_get(C, q), diff = fresh[q] - old;
        shift2 += diff * diff;
        moved |= fresh[q] != old;
    }
    GSB_CHECK(gsb__out(c, "centers", &out));
    GSB_CHECK(gsb__out_scalar(c, "shift", shift2, GSB_F64));
    rc = gsb__out_scalar(c, "moved", moved, GSB_I64);
done:
    free(sums);
    free(counts);
    gsb__tensor_free(&out);
    return rc;
}

/* cluster_centers_ = centres + shift in X's dtype, inertia_ and n_iter_ (option n_iter). */
int gsb__kmeans_fit_from_stats(gsb__ctx *c)
{
    const gsb__tensor *C = gsb__in(c, "centers"), *sh = gsb__in(c, "shift");
    gsb__stats st;
    GSB_TRY(gsb__stats_parse(gsb__in(c, "stats"), GSB__STATS_LLOYD, &st));
    int64_t k = st.a, d = st.b;
    if (C->rows != k || C->cols != d || sh->rows != 1 || sh->cols != d)
        return gsb__err(GSB_EINVAL, "KMeans.fit_from_stats: centers (%lld, %lld) and shift "
                        "(1, %lld) expected", (long long)k, (long long)d, (long long)d);
    if (k != gsb__param_int(c->params, "n_clusters"))
        return gsb__err(GSB_EINVAL, "KMeans.fit_from_stats: %lld centres for n_clusters=%lld",
                        (long long)k, (long long)gsb__param_int(c->params, "n_clusters"));
    gsb_dtype dt = opt_dtype(c);
    gsb__tensor centres;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, k, d, &centres));
    for (int64_t j = 0; j < k; j++)
        for (int64_t f = 0; f < d; f++)
            gsb__tensor_set(&centres, j * d + f,
                            gsb__tensor_get(C, j * d + f) + gsb__tensor_get(sh, f));
    GSB_TRY(gsb__fit_set(c, "cluster_centers_", &centres));
    int64_t distinct = 0;
    for (int64_t j = 0; j < k; j++)
        distinct += st.v[1 + j] > 0;
    if (distinct < k)
        gsb__warn(GSB__CONVERGENCE_WARNING, "Number of distinct clusters (%lld) found smaller "
                  "than n_clusters (%lld). Possibly due to duplicate points in X.",
                  (long long)distinct, (long long)k);
    GSB_TRY(gsb__fit_set_scalar(c, "inertia_", st.v[0], GSB_F64));
    GSB_TRY(gsb__fit_set_scalar(c, "n_features_in_", (double)d, GSB_I64));
    return gsb__fit_set_scalar(c, "n_iter_", (double)gsb__opt_int(c, "n_iter", 1), GSB_I64);
}
