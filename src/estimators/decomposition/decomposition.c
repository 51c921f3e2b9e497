/*
 * decomposition.c - PCA and TruncatedSVD, as scikit-learn 1.9.1's
 * sklearn.decomposition classes of those names.
 *
 * Heavy work (centring, the SVD / eigendecomposition, projections) runs on the
 * session's backend; the spectrum, the component count and the sign choice are
 * small and done on the host.  Solvers:
 *   PCA 'full'            thin SVD of the centred X (svd op)
 *   PCA 'covariance_eigh' X^T X (syrk) centred by a rank-one update, then eigh
 *   PCA 'randomized'      randomized_svd.c on the centred X
 *   PCA 'arpack'          scikit-learn runs ARPACK to tolerance tol; here the exact
 *                         thin SVD stands in (tol = 0 means machine precision there,
 *                         so results agree), with 'arpack''s own bookkeeping
 *                         (n_components < min(n_samples, n_features), noise
 *                         variance from the total variance)
 *   TruncatedSVD          'randomized' as PCA's, 'arpack' the exact SVD likewise.
 * Signs follow svd_flip(u_based_decision=False): the entry of largest magnitude
 * of each component is positive.  Random streams differ from numpy's, so a
 * randomized fit agrees with scikit-learn to the accuracy of the method, not
 * bit for bit.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "estimators/common/partial_stats.h"
#include "estimators/common/stream.h"
#include "estimators/common/pyrepr.h"
#include "solvers/randomized_svd.h"

/* ---- small helpers -------------------------------------------------------- */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* *out = n host doubles (malloc'ed; zeroed when zero is set), never a 0-byte
 * request: n_components may be 0. */
static int host_doubles(int64_t n, int zero, double **out)
{
    size_t m = (size_t)(n > 0 ? n : 1);
    *out = zero ? calloc(m, sizeof **out) : malloc(m * sizeof **out);
    return *out ? GSB_OK : gsb__err(GSB_ENOMEM, "out of host memory");
}

/* numpy's result dtype for X mixed with fitted arrays */
static gsb_dtype promote(gsb_dtype a, gsb_dtype b)
{
    return a == GSB_F32 && b == GSB_F32 ? GSB_F32 : GSB_F64;
}

/* C = op(A) op(B); n_components may be 0, so empty shapes skip BLAS. */
static int matmul(const gsb__backend *be, int ta, int tb, const gsb__tensor *A,
                  const gsb__tensor *B, gsb__tensor *C)
{
    if (gsb__tensor_numel(C) == 0)
        return GSB_OK;
    if ((ta ? A->rows : A->cols) == 0)
        return be->ops->fill(be, C, 0.0);
    return be->ops->gemm(be, ta, tb, 1.0, A, B, 0.0, C);
}

static uint64_t seed_of(const json_t *params)
{
    gsb__rng r;
    gsb__rng_seed_params(&r, params);
    return gsb__rng_next(&r);
}

/* Store host doubles as a 1-D attribute of dtype dt. */
static int set_vec(gsb__ctx *c, const char *name, gsb_dtype dt, const double *v, int64_t n)
{
    gsb__tensor t;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, n, 1, &t));
    for (int64_t i = 0; i < n; i++)
        gsb__tensor_set(&t, i, v[i]);
    gsb__tensor_as_1d(&t);
    return gsb__fit_set(c, name, &t);
}

/*
 * svd_flip(u_based_decision=False) on host components V (k x d): each row is
 * multiplied by np.sign of its largest-magnitude entry (the first on ties);
 * sign[i] records the factor so that U's columns can follow.
 */
static void flip_rows(gsb__tensor *V, double *sign)
{
    for (int64_t i = 0; i < V->rows; i++) {
        int64_t best = 0;
        double bestabs = -1;
        for (int64_t j = 0; j < V->cols; j++) {
            double a = fabs(gsb__tensor_get(V, i * V->cols + j));
            if (a > bestabs) {
                bestabs = a;
                best = j;
            }
        }
        double v = gsb__tensor_get(V, i * V->cols + best);
        double s = v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0;
        for (int64_t j = 0; j < V->cols; j++)
            gsb__tensor_set(V, i * V->cols + j, s * gsb__tensor_get(V, i * V->cols + j));
        sign[i] = s;
    }
}

/* Column means (and population variances when var != NULL) of X on the backend, to host. */
static int col_stats(const gsb__backend *be, const gsb__tensor *X, gsb__tensor *mean_be,
                     double **mean, double **var)
{
    gsb__tensor v = GSB__TENSOR_NONE;
    int rc;
    *mean = NULL;
    if (var)
        *var = NULL;
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, X->cols, 1, mean_be));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, X->cols, 1, &v));
    GSB_CHECK(be->ops->col_moments(be, X, NULL, mean_be, &v));
    GSB_CHECK(gsb__tensor_to_f64(mean_be, mean));
    if (var)
        GSB_CHECK(gsb__tensor_to_f64(&v, var));
done:
    gsb__tensor_free(&v);
    return rc;
}

/* ---- the spectrum of the (centred) data, from one of three sources -------- */

enum { SRC_SVD, SRC_EIGH, SRC_RSVD };

typedef struct spectrum {
    int src;
    int64_t ns;     /* entries of s and ev */
    double *s, *ev; /* singular values and explained variances, descending */
    gsb__tensor vt; /* SRC_SVD: ns x d right vectors (backend); SRC_EIGH: d x d
                       eigenvectors as columns, ascending order (host) */
    gsb__tensor u;  /* SRC_SVD when asked: n x ns left vectors (backend) */
    gsb__rsvd rs;   /* SRC_RSVD */
} spectrum;

static void spectrum_free(spectrum *sp)
{
    free(sp->s);
    free(sp->ev);
    gsb__tensor_free(&sp->vt);
    gsb__tensor_free(&sp->u);
    gsb__rsvd_free(&sp->rs);
    memset(sp, 0, sizeof *sp);
}

/* explained variance of each singular value: s^2 / (n - 1) */
static int ev_from_s(spectrum *sp, int64_t n)
{
    GSB_TRY(host_doubles(sp->ns, 0, &sp->ev));
    for (int64_t j = 0; j < sp->ns; j++)
        sp->ev[j] = sp->s[j] * sp->s[j] / (double)(n - 1);
    return GSB_OK;
}

/* Exact thin SVD of A (n x d) on the backend. */
static int spectrum_svd(const gsb__backend *be, const gsb__tensor *A, int want_u, int64_t n,
                        spectrum *sp)
{
    int64_t r = min64(A->rows, A->cols);
    gsb__tensor S = GSB__TENSOR_NONE;
    int rc;
    sp->src = SRC_SVD;
    sp->ns = r;
    GSB_CHECK(gsb__tensor_alloc(be, A->dtype, r, 1, &S));
    GSB_CHECK(gsb__tensor_alloc(be, A->dtype, r, A->cols, &sp->vt));
    if (want_u)
        GSB_CHECK(gsb__tensor_alloc(be, A->dtype, A->rows, r, &sp->u));
    GSB_CHECK(be->ops->svd(be, A, want_u ? &sp->u : NULL, &S, &sp->vt));
    GSB_CHECK(gsb__tensor_to_f64(&S, &sp->s));
    GSB_CHECK(ev_from_s(sp, n));
done:
    gsb__tensor_free(&S);
    return rc;
}

/*
 * Covariance route, as scikit-learn: C = (X^T X - n mean mean^T) / (n - 1)
 * without centring X, eigh, eigenvalues reversed to descending and clipped at
 * 0; the singular values are sqrt(ev (n - 1)).
 */
static int spectrum_eigh(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *mean,
                         spectrum *sp)
{
    int64_t n = X->rows, d = X->cols;
    gsb__tensor C = GSB__TENSOR_NONE, w = GSB__TENSOR_NONE, V = GSB__TENSOR_NONE;
    double *wh = NULL;
    int rc;
    sp->src = SRC_EIGH;
    sp->ns = d;
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, d, d, &C));
    GSB_CHECK(be->ops->syrk(be, 1.0 / (double)(n - 1), X, 0.0, &C));
    gsb__tensor mrow = *mean; /* the mean as a 1 x d matrix */
    mrow.rows = 1;
    mrow.cols = d;
    mrow.owned = 0;
    GSB_CHECK(be->ops->gemm(be, 1, 0, -(double)n / (double)(n - 1), &mrow, &mrow, 1.0, &C));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, d, 1, &w));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, d, d, &V));
    GSB_CHECK(be->ops->eigh(be, &C, &w, &V));
    GSB_CHECK(gsb__tensor_to_f64(&w, &wh));
    GSB_CHECK(gsb__tensor_to_host(&V, &sp->vt));
    GSB_CHECK(host_doubles(d, 0, &sp->s));
    GSB_CHECK(host_doubles(d, 0, &sp->ev));
    for (int64_t j = 0; j < d; j++) {
        double e = wh[d - 1 - j];
        sp->ev[j] = e < 0.0 ? 0.0 : e;
        sp->s[j] = sqrt(sp->ev[j] * (double)(n - 1));
    }
done:
    free(wh);
    gsb__tensor_free(&C);
    gsb__tensor_free(&w);
    gsb__tensor_free(&V);
    return rc;
}

/*
 * A host X larger than the backend's memory (estimators/common/stream.h): one
 * pass for the centred cross-products C = sum (x - mean)(x - mean)^T in
 * float64, then eigh on the host, whatever the solver (the exact spectrum, as
 * 'covariance_eigh' computes it): of C for PCA (ev = l / (n - 1)), of the
 * uncentred C + n mean mean^T for TruncatedSVD.  *mean (d), *var (d: the
 * column variances, ddof 0) and, when Cc is given, C itself (d x d) as host
 * doubles.
 */
static int spectrum_streamed(gsb__ctx *c, const gsb__stream_plan *plan, const gsb__tensor *X,
                             int uncentred, spectrum *sp, double **mean, double **var,
                             double **Cc)
{
    int64_t n = X->rows, d = X->cols;
    gsb__gram g;
    gsb__stream st;
    double *my = NULL, *Cxy = NULL, *C = NULL, *A = NULL;
    gsb__tensor tA = GSB__TENSOR_NONE, w = GSB__TENSOR_NONE;
    int rc;
    *mean = *var = NULL;
    GSB_TRY(gsb__gram_init(c, &g, d, 0, 1));
    rc = gsb__stream_open(c, plan, X, NULL, 0, 1, &st);
    for (int more = 1; rc == GSB_OK && more;) {
        gsb__batch b;
        rc = gsb__stream_next(&st, &b, &more);
        if (rc == GSB_OK && more)
            rc = gsb__gram_add(c, &g, &b.X, NULL, NULL, (double)b.rows);
    }
    gsb__stream_close(&st);
    GSB_CHECK(rc);
    GSB_CHECK(gsb__gram_finish(&g, mean, &my, &C, &Cxy));
    GSB_CHECK(host_doubles(d, 0, var));
    GSB_CHECK(host_doubles(d * d, 0, &A));
    for (int64_t i = 0; i < d; i++) {
        (*var)[i] = C[i * d + i] / (double)n;
        for (int64_t j = 0; j < d; j++)
            A[i * d + j] = uncentred ? C[i * d + j] + (double)n * (*mean)[i] * (*mean)[j]
                                     : C[i * d + j];
    }
    tA = gsb__tensor_host_view(A, GSB_F64, d, d);
    const gsb__backend *cpu = gsb__cpu_backend();
    sp->src = SRC_EIGH;
    sp->ns = d;
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_F64, d, 1, &w));
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_F64, d, d, &sp->vt));
    GSB_CHECK(cpu->ops->eigh(cpu, &tA, &w, &sp->vt));
    GSB_CHECK(host_doubles(d, 0, &sp->s));
    GSB_CHECK(host_doubles(d, 0, &sp->ev));
    for (int64_t j = 0; j < d; j++) {
        double l = fmax(((const double *)w.data)[d - 1 - j], 0.0);
        sp->s[j] = sqrt(l);
        sp->ev[j] = l / (double)(n - 1);
    }
    if (Cc) {
        *Cc = C;
        C = NULL;
    }
done:
    gsb__gram_free(&g);
    gsb__tensor_free(&w);
    free(my);
    free(Cxy);
    free(C);
    free(A);
    if (rc != GSB_OK) {
        free(*mean);
        free(*var);
        *mean = *var = NULL;
    }
    return rc;
}

/* fit_transform's projection of a streamed X, one batch at a time */
typedef struct project_args {
    const gsb__tensor *comp, *mean, *ev;
    int whiten;
} project_args;

static int pca_project(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *comp,
                       const gsb__tensor *mean, const gsb__tensor *ev, int whiten,
                       gsb__tensor *out);

static int project_batch(gsb__ctx *c, const gsb__tensor *Xb, void *arg, gsb__tensor *res)
{
    const project_args *a = arg;
    return pca_project(c, Xb, a->comp, a->mean, a->ev, a->whiten, res);
}

/* power_iteration_normalizer: 'auto' is 'none' up to two iterations, else LU */
static int normalizes(const json_t *params, int64_t n_iter)
{
    if (gsb__param_is(params, "power_iteration_normalizer", "none"))
        return 0;
    if (gsb__param_is(params, "power_iteration_normalizer", "auto"))
        return n_iter > 2;
    return 1;
}

static int spectrum_rsvd(gsb__ctx *c, const gsb__tensor *A, int64_t k, int64_t n_iter,
                         int64_t n, spectrum *sp)
{
    gsb__rsvd_opts o = {k, gsb__param_int(c->params, "n_oversamples"), n_iter,
                        normalizes(c->params, n_iter), seed_of(c->params)};
    sp->src = SRC_RSVD;
    GSB_TRY(gsb__rsvd_compute(c, A, &o, &sp->rs));
    sp->ns = sp->rs.k;
    GSB_TRY(host_doubles(sp->ns, 0, &sp->s));
    memcpy(sp->s, sp->rs.s, (size_t)sp->ns * sizeof *sp->s);
    return ev_from_s(sp, n);
}

/* The first k right singular vectors as a host k x d tensor of dtype dt (unflipped). */
static int spectrum_components(const gsb__backend *be, const spectrum *sp, int64_t k, int64_t d,
                               gsb_dtype dt, gsb__tensor *out)
{
    if (sp->src == SRC_EIGH) {
        GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, k, d, out));
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < d; i++)
                gsb__tensor_set(out, j * d + i, gsb__tensor_get(&sp->vt, i * d + (d - 1 - j)));
        return GSB_OK;
    }
    if (sp->src == SRC_SVD) {
        gsb__tensor top = sp->vt;
        top.rows = k;
        top.owned = 0;
        return gsb__tensor_to_host(&top, out);
    }
    gsb__tensor Vt;
    GSB_TRY(gsb__rsvd_right(be, &sp->rs, &Vt));
    int rc = gsb__tensor_to_host(&Vt, out);
    gsb__tensor_free(&Vt);
    return rc;
}

/* U[:, :k] diag(w) (n x k on the backend) for the SVD sources. */
static int spectrum_left(const gsb__backend *be, const spectrum *sp, int64_t k, const double *w,
                         gsb__tensor *out)
{
    if (sp->src == SRC_RSVD)
        return gsb__rsvd_left_scaled(be, &sp->rs, w, out);
    int64_t r = sp->ns;
    double *D;
    GSB_TRY(host_doubles(r * k, 1, &D));
    for (int64_t j = 0; j < k; j++)
        D[j * k + j] = w[j];
    gsb__tensor Dt = GSB__TENSOR_NONE;
    int rc;
    *out = GSB__TENSOR_NONE;
    GSB_CHECK(gsb__tensor_from_f64(be, sp->u.dtype, D, r, k, &Dt));
    GSB_CHECK(gsb__tensor_alloc(be, sp->u.dtype, sp->u.rows, k, out));
    GSB_CHECK(matmul(be, 0, 0, &sp->u, &Dt, out));
done:
    free(D);
    gsb__tensor_free(&Dt);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

/* ---- PCA: choosing the number of components ------------------------------- */

enum { NC_NONE, NC_INT, NC_FLOAT, NC_MLE };
typedef struct ncomp {
    int kind;
    int64_t k;   /* NC_INT */
    double frac; /* NC_FLOAT, in (0, 1) */
} ncomp;

/* n_components is declared int|float|'mle'|None over [0, inf); the float range
 * (0, 1) is checked here, at fit, where scikit-learn validates too. */
static int pca_ncomp(gsb__ctx *c, ncomp *nc)
{
    const json_t *v = json_object_get(c->params, "n_components");
    memset(nc, 0, sizeof *nc);
    if (json_is_integer(v)) {
        nc->kind = NC_INT;
        nc->k = (int64_t)json_integer_value(v);
    } else if (json_is_real(v)) {
        nc->kind = NC_FLOAT;
        nc->frac = json_real_value(v);
        if (!(nc->frac > 0.0 && nc->frac < 1.0)) {
            char got[40];
            gsb__py_float_repr(nc->frac, got, sizeof got);
            return gsb__err(GSB_EPARAM,
                            "The 'n_components' parameter of PCA must be an int in the range "
                            "[0, inf), a float in the range (0.0, 1.0), a str among {'mle'} or "
                            "None. Got %s instead.",
                            got);
        }
    } else if (json_is_string(v)) {
        nc->kind = NC_MLE;
    }
    return GSB_OK;
}

/* Minka's log-likelihood of a rank-`rank` model (scikit-learn's _assess_dimension). */
static double assess_dimension(const double *sp, int64_t nf, int64_t rank, int64_t n)
{
    const double eps = 1e-15, N = (double)n;
    if (sp[rank - 1] < eps)
        return -INFINITY;
    double pu = -(double)rank * log(2.0);
    for (int64_t i = 1; i <= rank; i++)
        pu += lgamma((double)(nf - i + 1) / 2.0) - log(M_PI) * (double)(nf - i + 1) / 2.0;
    double pl = 0.0;
    for (int64_t i = 0; i < rank; i++)
        pl += log(sp[i]);
    pl = -pl * N / 2.0;
    double tail = 0.0;
    for (int64_t i = rank; i < nf; i++)
        tail += sp[i];
    double v = fmax(eps, tail / (double)(nf - rank));
    double pv = -log(v) * N * (double)(nf - rank) / 2.0;
    double m = (double)(nf * rank) - (double)rank * ((double)rank + 1.0) / 2.0;
    double pp = log(2.0 * M_PI) * (m + (double)rank) / 2.0;
    double pa = 0.0;
    for (int64_t i = 0; i < rank; i++)
        for (int64_t j = i + 1; j < nf; j++) {
            double sj = j < rank ? sp[j] : v; /* the spectrum with its tail set to v */
            pa += log((sp[i] - sp[j]) * (1.0 / sj - 1.0 / sp[i])) + log(N);
        }
    return pu + pl + pv + pp - pa / 2.0 - (double)rank * log(N) / 2.0;
}

/* argmax over ranks 1..nf-1 (rank 0 scores -inf), numpy's argmax: first max, NaN wins */
static int64_t infer_dimension(const double *sp, int64_t nf, int64_t n)
{
    int64_t best = 0;
    double bestll = -INFINITY;
    for (int64_t rank = 1; rank < nf; rank++) {
        double ll = assess_dimension(sp, nf, rank, n);
        if (isnan(ll))
            return rank;
        if (ll > bestll) {
            bestll = ll;
            best = rank;
        }
    }
    return best;
}

/* scikit-learn 1.9.1's svd_solver='auto' policy */
static const char *pca_auto_solver(const ncomp *nc, int64_t n, int64_t d)
{
    if (d <= 1000 && n >= 10 * d)
        return "covariance_eigh";
    if ((n > d ? n : d) <= 500 || nc->kind == NC_MLE)
        return "full";
    double k = nc->kind == NC_NONE ? (double)min64(n, d)
             : nc->kind == NC_INT  ? (double)nc->k
                                   : nc->frac;
    if (1.0 <= k && k < 0.8 * (double)min64(n, d))
        return "randomized";
    return "full";
}

/* The parameter checks of _fit_full / _fit_truncated, in their words. */
static int pca_check(const ncomp *nc, const char *solver, int64_t n, int64_t d, int64_t *kk)
{
    int64_t r = min64(n, d);
    int arpack = strcmp(solver, "arpack") == 0;
    int truncated = arpack || strcmp(solver, "randomized") == 0;
    /* None keeps everything; 'arpack' cannot, so it keeps one less */
    *kk = nc->kind == NC_INT ? nc->k : nc->kind == NC_NONE ? (arpack ? r - 1 : r) : 0;
    if (!truncated) {
        if (nc->kind == NC_MLE && n < d)
            return gsb__err(GSB_EINVAL,
                            "n_components='mle' is only supported if n_samples >= n_features");
        if ((nc->kind == NC_INT || nc->kind == NC_NONE) && *kk > r)
            return gsb__err(GSB_EINVAL,
                            "n_components=%lld must be between 0 and min(n_samples, n_features)="
                            "%lld with svd_solver='%s'",
                            (long long)*kk, (long long)r, solver);
        return GSB_OK;
    }
    if (nc->kind == NC_MLE)
        return gsb__err(GSB_EINVAL, "n_components='mle' cannot be a string with svd_solver='%s'",
                        solver);
    if (nc->kind == NC_FLOAT) {
        char got[40];
        gsb__py_float_repr(nc->frac, got, sizeof got);
        return gsb__err(GSB_EINVAL,
                        "n_components=%s must be between 1 and min(n_samples, n_features)=%lld "
                        "with svd_solver='%s'",
                        got, (long long)r, solver);
    }
    if (*kk < 1 || *kk > r)
        return gsb__err(GSB_EINVAL,
                        "n_components=%lld must be between 1 and min(n_samples, n_features)=%lld "
                        "with svd_solver='%s'",
                        (long long)*kk, (long long)r, solver);
    if (arpack && *kk == r)
        return gsb__err(GSB_EINVAL,
                        "n_components=%lld must be strictly less than min(n_samples, n_features)="
                        "%lld with svd_solver='arpack'",
                        (long long)*kk, (long long)r);
    return GSB_OK;
}

/*
 * How many components to keep, the total variance the ratios divide by, and the
 * noise variance.  'full' / 'covariance_eigh' (scikit-learn's _fit_full) see the
 * whole spectrum; 'arpack' / 'randomized' (_fit_truncated) only the kept part, so
 * they take the total from the data's column variances (var, ddof = 0).
 */
static void pca_keep(const ncomp *nc, int truncated, int64_t kk, int64_t n, int64_t d,
                     const double *var, const spectrum *sp, int64_t *k_out, double *total_out,
                     double *noise_out)
{
    int64_t r = min64(n, d), ns = sp->ns, k = kk;
    double total = 0.0, noise = 0.0;
    if (truncated) {
        for (int64_t j = 0; j < d; j++)
            total += var[j];
        total = total * (double)n / (double)(n - 1);
        double kept = 0.0;
        for (int64_t j = 0; j < k; j++)
            kept += sp->ev[j];
        if (k < r)
            noise = (total - kept) / (double)(r - k);
    } else {
        for (int64_t j = 0; j < ns; j++)
            total += sp->ev[j];
        if (nc->kind == NC_MLE) {
            k = infer_dimension(sp->ev, ns, n);
        } else if (nc->kind == NC_FLOAT) {
            /* searchsorted(cumsum(ratio), frac, side='right') + 1 */
            double cum = 0.0;
            k = 1;
            for (int64_t j = 0; j < ns; j++) {
                cum += sp->ev[j] / total;
                if (cum <= nc->frac)
                    k++;
            }
            if (k > ns) /* rounding can leave the whole cumsum below frac */
                k = ns;
        }
        if (k < r) { /* the mean of the discarded explained variances */
            for (int64_t j = k; j < ns; j++)
                noise += sp->ev[j];
            noise /= (double)(ns - k);
        }
    }
    *k_out = k;
    *total_out = total;
    *noise_out = noise;
}

/* ---- PCA: projections shared by fit_transform and the methods ------------- */

/* X @ components^T - mean @ components^T, divided by sqrt(ev) (clipped at eps) when whitening */
static int pca_project(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *comp,
                       const gsb__tensor *mean, const gsb__tensor *ev, int whiten,
                       gsb__tensor *out)
{
    const gsb__backend *be = c->be;
    int64_t n = X->rows, d = X->cols, k = comp->rows;
    gsb_dtype dt = promote(X->dtype, comp->dtype);
    gsb__tensor Xb = GSB__TENSOR_NONE, Cb = GSB__TENSOR_NONE, sub = GSB__TENSOR_NONE,
                mul = GSB__TENSOR_NONE;
    double *mc = NULL, *inv = NULL;
    int rc;
    *out = GSB__TENSOR_NONE;
    GSB_CHECK(host_doubles(k, 1, &mc));
    GSB_CHECK(host_doubles(k, 1, &inv));
    GSB_CHECK(gsb__tensor_to_dtype(be, X, dt, &Xb));
    GSB_CHECK(gsb__tensor_to_dtype(be, comp, dt, &Cb));
    GSB_CHECK(gsb__tensor_alloc(be, dt, n, k, out));
    GSB_CHECK(matmul(be, 0, 1, &Xb, &Cb, out));
    if (k > 0) {
        /* centre after projecting, as scikit-learn: the caller's X is never copied */
        double eps = comp->dtype == GSB_F32 ? 1.1920928955078125e-07 : 2.220446049250313e-16;
        for (int64_t j = 0; j < k; j++) {
            for (int64_t i = 0; i < d; i++)
                mc[j] += gsb__tensor_get(mean, i) * gsb__tensor_get(comp, j * d + i);
            inv[j] = whiten ? 1.0 / fmax(sqrt(gsb__tensor_get(ev, j)), eps) : 1.0;
        }
        GSB_CHECK(gsb__tensor_from_f64(be, GSB_F64, mc, k, 1, &sub));
        if (whiten)
            GSB_CHECK(gsb__tensor_from_f64(be, GSB_F64, inv, k, 1, &mul));
        GSB_CHECK(be->ops->col_affine(be, out, &sub, whiten ? &mul : NULL, NULL, out));
    }
done:
    free(mc);
    free(inv);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Cb);
    gsb__tensor_free(&sub);
    gsb__tensor_free(&mul);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

/* The fitted state every PCA method reads, checked (a blob may be damaged). */
typedef struct pca_state {
    const gsb__tensor *comp, *mean, *ev;
    int64_t k, d;
    double noise;
} pca_state;

static int pca_state_get(gsb__ctx *c, pca_state *st)
{
    const gsb__tensor *nv;
    GSB_TRY(gsb__attr_need(c, "components_", 0, -1, -1, &st->comp));
    st->k = st->comp->rows;
    st->d = st->comp->cols;
    GSB_TRY(gsb__attr_need(c, "mean_", st->comp->dtype, st->d, 1, &st->mean));
    GSB_TRY(gsb__attr_need(c, "explained_variance_", st->comp->dtype, st->k, 1, &st->ev));
    GSB_TRY(gsb__attr_need(c, "noise_variance_", GSB_F64, 1, 1, &nv));
    st->noise = gsb__tensor_get(nv, 0);
    if (!gsb__is_float(st->comp->dtype))
        return gsb__err(GSB_ECORRUPT, "PCA: fitted attribute 'components_' is malformed");
    return GSB_OK;
}

/* ---- PCA: fit -------------------------------------------------------------- */

static int pca_fit_impl(gsb__ctx *c, int want_out)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X");
    int64_t n = X->rows, d = X->cols, r = min64(n, d), kk;
    gsb_dtype dt = X->dtype;
    int whiten = gsb__param_bool(c->params, "whiten");
    ncomp nc;
    GSB_TRY(pca_ncomp(c, &nc));
    const char *solver = gsb__param_str(c->params, "svd_solver");
    if (strcmp(solver, "auto") == 0)
        solver = pca_auto_solver(&nc, n, d);
    GSB_TRY(pca_check(&nc, solver, n, d, &kk));
    int truncated = strcmp(solver, "arpack") == 0 || strcmp(solver, "randomized") == 0;

    gsb__tensor Xb = GSB__TENSOR_NONE, mean_be = GSB__TENSOR_NONE, Xc = GSB__TENSOR_NONE,
                comp = GSB__TENSOR_NONE, Xnew = GSB__TENSOR_NONE;
    spectrum sp = {0};
    double *mean = NULL, *var = NULL, *ratio = NULL, *sign = NULL, *w = NULL;
    int rc;
    gsb__stream_plan plan;
    /* in memory: X and its centred copy; streamed: the d x d sums and a float64 batch */
    GSB_TRY(gsb__stream_plan_for(c, X, 2.0, (size_t)(3 * d * d) * sizeof(double),
                                 (size_t)d * sizeof(double), &plan));
    if (plan.streamed) {
        GSB_CHECK(spectrum_streamed(c, &plan, X, 0, &sp, &mean, &var, NULL));
    } else {
        GSB_CHECK(gsb__tensor_to(be, X, &Xb));
        GSB_CHECK(col_stats(be, &Xb, &mean_be, &mean, truncated ? &var : NULL));
        if (strcmp(solver, "covariance_eigh") == 0) {
            GSB_CHECK(spectrum_eigh(be, &Xb, &mean_be, &sp));
        } else {
            GSB_CHECK(gsb__tensor_alloc(be, dt, n, d, &Xc));
            GSB_CHECK(be->ops->col_affine(be, &Xb, &mean_be, NULL, NULL, &Xc));
            if (strcmp(solver, "randomized") == 0) {
                json_t *ip = json_object_get(c->params, "iterated_power");
                int64_t n_iter = json_is_integer(ip) ? (int64_t)json_integer_value(ip)
                               : (double)kk < 0.1 * (double)r ? 7 : 4;
                GSB_CHECK(spectrum_rsvd(c, &Xc, kk, n_iter, n, &sp));
            } else {
                GSB_CHECK(spectrum_svd(be, &Xc, want_out, n, &sp));
            }
        }
    }

    int64_t ns = sp.ns, k;
    double total, noise;
    pca_keep(&nc, truncated, kk, n, d, var, &sp, &k, &total, &noise);
    GSB_CHECK(host_doubles(ns, 0, &ratio));
    for (int64_t j = 0; j < ns; j++)
        ratio[j] = sp.ev[j] / total;

    GSB_CHECK(host_doubles(k, 0, &sign));
    GSB_CHECK(spectrum_components(be, &sp, k, d, dt, &comp));
    flip_rows(&comp, sign);

    if (want_out && sp.src != SRC_EIGH) {
        /* scikit-learn returns U * S (whitened: U * sqrt(n - 1)), with U's signs flipped */
        GSB_CHECK(host_doubles(k, 0, &w));
        for (int64_t j = 0; j < k; j++)
            w[j] = sign[j] * (whiten ? sqrt((double)(n - 1)) : sp.s[j]);
        GSB_CHECK(spectrum_left(be, &sp, k, w, &Xnew));
    }

    GSB_CHECK(set_vec(c, "mean_", dt, mean, d));
    GSB_CHECK(set_vec(c, "explained_variance_", dt, sp.ev, k));
    GSB_CHECK(set_vec(c, "explained_variance_ratio_", dt, ratio, k));
    GSB_CHECK(set_vec(c, "singular_values_", dt, sp.s, k));
    GSB_CHECK(gsb__fit_set_scalar(c, "n_components_", (double)k, GSB_I64));
    GSB_CHECK(gsb__fit_set_scalar(c, "n_samples_", (double)n, GSB_I64));
    GSB_CHECK(gsb__fit_set_scalar(c, "noise_variance_", noise, GSB_F64));
    GSB_CHECK(gsb__fit_set(c, "components_", &comp));

    if (want_out && sp.src == SRC_EIGH) {
        /* covariance_eigh never forms U: project X like transform does */
        pca_state st;
        GSB_CHECK(pca_state_get(c, &st));
        if (plan.streamed) {
            project_args pa = {st.comp, st.mean, st.ev, whiten};
            GSB_CHECK(gsb__stream_map(c, &plan, X, project_batch, &pa,
                                      promote(X->dtype, st.comp->dtype), st.k, &Xnew));
        } else {
            GSB_CHECK(pca_project(c, X, st.comp, st.mean, st.ev, whiten, &Xnew));
        }
    }
    if (want_out)
        GSB_CHECK(gsb__out(c, "X_new", &Xnew));
done:
    free(mean);
    free(var);
    free(ratio);
    free(sign);
    free(w);
    spectrum_free(&sp);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&mean_be);
    gsb__tensor_free(&Xc);
    gsb__tensor_free(&comp);
    gsb__tensor_free(&Xnew);
    return rc;
}

static int pca_fit(gsb__ctx *c) { return pca_fit_impl(c, 0); }
static int pca_fit_transform(gsb__ctx *c) { return pca_fit_impl(c, 1); }

/* ---- PCA: methods on a fitted model --------------------------------------- */

static int pca_transform(gsb__ctx *c)
{
    pca_state st;
    GSB_TRY(pca_state_get(c, &st));
    gsb__tensor out;
    GSB_TRY(pca_project(c, gsb__in(c, "X"), st.comp, st.mean, st.ev,
                        gsb__param_bool(c->params, "whiten"), &out));
    return gsb__out(c, "X_new", &out);
}

static int pca_inverse_transform(gsb__ctx *c)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X");
    pca_state st;
    GSB_TRY(pca_state_get(c, &st));
    if (X->cols != st.k)
        return gsb__err(GSB_EINVAL,
                        "matmul: Input operand 1 has a mismatch in its core dimension 0, with "
                        "gufunc signature (n?,k),(k,m?)->(n?,m?) (size %lld is different from "
                        "%lld)",
                        (long long)st.k, (long long)X->cols);
    gsb_dtype dt = promote(X->dtype, st.comp->dtype);
    int whiten = gsb__param_bool(c->params, "whiten");
    gsb__tensor Xb = GSB__TENSOR_NONE, Xs = GSB__TENSOR_NONE, Cb = GSB__TENSOR_NONE,
                scale = GSB__TENSOR_NONE, mean = GSB__TENSOR_NONE, out = GSB__TENSOR_NONE;
    double *sq = NULL;
    int rc;
    GSB_CHECK(gsb__tensor_to_dtype(be, X, dt, &Xb));
    GSB_CHECK(gsb__tensor_to_dtype(be, st.comp, dt, &Cb));
    GSB_CHECK(gsb__tensor_to(be, st.mean, &mean));
    if (whiten) {
        /* X @ (sqrt(ev)[:, None] * components_): scale X's columns instead */
        GSB_CHECK(host_doubles(st.k, 0, &sq));
        for (int64_t j = 0; j < st.k; j++)
            sq[j] = sqrt(gsb__tensor_get(st.ev, j));
        GSB_CHECK(gsb__tensor_from_f64(be, GSB_F64, sq, st.k, 1, &scale));
        GSB_CHECK(gsb__tensor_alloc(be, dt, X->rows, st.k, &Xs));
        GSB_CHECK(be->ops->col_affine(be, &Xb, NULL, &scale, NULL, &Xs));
    }
    GSB_CHECK(gsb__tensor_alloc(be, dt, X->rows, st.d, &out));
    GSB_CHECK(matmul(be, 0, 0, whiten ? &Xs : &Xb, &Cb, &out));
    GSB_CHECK(be->ops->col_affine(be, &out, NULL, NULL, &mean, &out));
    GSB_CHECK(gsb__out(c, "X_original", &out));
done:
    free(sq);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Xs);
    gsb__tensor_free(&Cb);
    gsb__tensor_free(&scale);
    gsb__tensor_free(&mean);
    gsb__tensor_free(&out);
    return rc;
}

/*
 * The probabilistic PCA covariance is C^T diag(a) C + nv I for the orthonormal
 * components C, with a_j = max(ev_j - nv, 0), times ev_j when whitening (as
 * scikit-learn's get_covariance scales the components by sqrt(ev)).
 */
static void ppca_a(const pca_state *st, int whiten, double *a)
{
    for (int64_t j = 0; j < st->k; j++) {
        double ev = gsb__tensor_get(st->ev, j);
        a[j] = ev > st->noise ? ev - st->noise : 0.0;
        if (whiten)
            a[j] *= ev;
    }
}

/* The fitted state and a (malloc'ed, one entry per component) of the
 * probabilistic model, as get_covariance, get_precision and score read it. */
static int ppca_load(gsb__ctx *c, pca_state *st, double **a)
{
    GSB_TRY(pca_state_get(c, st));
    GSB_TRY(host_doubles(st->k, 0, a));
    ppca_a(st, gsb__param_bool(c->params, "whiten"), *a);
    return GSB_OK;
}

/* Out "name": C^T diag(b) C + t I (d x d, the components' dtype). */
static int ct_diag_c(gsb__ctx *c, const pca_state *st, const double *b, double t,
                     const char *name)
{
    const gsb__backend *be = c->be;
    int64_t k = st->k, d = st->d;
    double *W;
    gsb__tensor Cb = GSB__TENSOR_NONE, Wb = GSB__TENSOR_NONE, M = GSB__TENSOR_NONE,
                H = GSB__TENSOR_NONE;
    int rc;
    GSB_TRY(host_doubles(k * d, 0, &W));
    for (int64_t j = 0; j < k; j++)
        for (int64_t i = 0; i < d; i++)
            W[j * d + i] = b[j] * gsb__tensor_get(st->comp, j * d + i);
    GSB_CHECK(gsb__tensor_to(be, st->comp, &Cb));
    GSB_CHECK(gsb__tensor_from_f64(be, st->comp->dtype, W, k, d, &Wb));
    GSB_CHECK(gsb__tensor_alloc(be, st->comp->dtype, d, d, &M));
    GSB_CHECK(matmul(be, 1, 0, &Cb, &Wb, &M));
    GSB_CHECK(gsb__tensor_to_host(&M, &H));
    for (int64_t i = 0; i < d; i++)
        gsb__tensor_set(&H, i * d + i, gsb__tensor_get(&H, i * d + i) + t);
    GSB_CHECK(gsb__out(c, name, &H));
done:
    free(W);
    gsb__tensor_free(&Cb);
    gsb__tensor_free(&Wb);
    gsb__tensor_free(&M);
    gsb__tensor_free(&H);
    return rc;
}

static int pca_get_covariance(gsb__ctx *c)
{
    pca_state st;
    double *a;
    GSB_TRY(ppca_load(c, &st, &a));
    int rc = ct_diag_c(c, &st, a, st.noise, "cov");
    free(a);
    return rc;
}

/* nv == 0 leaves the covariance singular unless C is square and every a_j > 0 */
static int ppca_invertible(const pca_state *st, const double *a)
{
    if (st->noise > 0.0)
        return 1;
    if (st->k < st->d)
        return 0;
    for (int64_t j = 0; j < st->k; j++)
        if (!(a[j] > 0.0))
            return 0;
    return 1;
}

static int pca_get_precision(gsb__ctx *c)
{
    pca_state st;
    double *a;
    GSB_TRY(ppca_load(c, &st, &a));
    int rc;
    if (!ppca_invertible(&st, a)) {
        rc = gsb__err(GSB_ENUMERIC, "singular matrix");
    } else {
        /* (C^T diag(a) C + nv I)^-1 = C^T diag(1/(a+nv) - 1/nv) C + I/nv */
        double t = st.noise > 0.0 ? 1.0 / st.noise : 0.0;
        for (int64_t j = 0; j < st.k; j++)
            a[j] = 1.0 / (a[j] + st.noise) - t;
        rc = ct_diag_c(c, &st, a, t, "precision");
    }
    free(a);
    return rc;
}

/*
 * Gaussian log-likelihood of each row under the fitted probabilistic PCA model:
 *   x^T Cov^-1 x = |x - C^T C x|^2 / nv + sum_j (C x)_j^2 / (a_j + nv)
 *   log det Cov  = (d - k) log nv + sum_j log(a_j + nv)
 * with x = X - mean_; the residual is formed explicitly to avoid cancellation.
 */
static int pca_loglike(gsb__ctx *c, gsb__tensor *out)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X");
    pca_state st;
    double *a, *rr = NULL, *q = NULL;
    *out = GSB__TENSOR_NONE;
    GSB_TRY(ppca_load(c, &st, &a));
    int64_t n = X->rows, k = st.k, d = st.d;
    gsb_dtype dt = promote(X->dtype, st.comp->dtype);
    double nv = st.noise;
    gsb__tensor Xb = GSB__TENSOR_NONE, Xr = GSB__TENSOR_NONE, mean = GSB__TENSOR_NONE,
                Cb = GSB__TENSOR_NONE, P = GSB__TENSOR_NONE, inv = GSB__TENSOR_NONE,
                nr = GSB__TENSOR_NONE, nq = GSB__TENSOR_NONE;
    int rc = GSB_OK;
    if (!ppca_invertible(&st, a)) {
        rc = gsb__err(GSB_ENUMERIC, "singular matrix");
        goto done;
    }
    double logdet = nv > 0.0 ? (double)(d - k) * log(nv) : 0.0;
    for (int64_t j = 0; j < k; j++) {
        logdet += log(a[j] + nv);
        a[j] = 1.0 / sqrt(a[j] + nv);
    }
    GSB_CHECK(gsb__tensor_to_dtype(be, X, dt, &Xb));
    GSB_CHECK(gsb__tensor_to_dtype(be, st.mean, dt, &mean));
    GSB_CHECK(gsb__tensor_to_dtype(be, st.comp, dt, &Cb));
    GSB_CHECK(gsb__tensor_alloc(be, dt, n, d, &Xr));
    GSB_CHECK(be->ops->col_affine(be, &Xb, &mean, NULL, NULL, &Xr));
    if (k > 0) {
        GSB_CHECK(gsb__tensor_alloc(be, dt, n, k, &P));
        GSB_CHECK(be->ops->gemm(be, 0, 1, 1.0, &Xr, &Cb, 0.0, &P));
        if (nv > 0.0) /* Xr becomes the residual off the component span */
            GSB_CHECK(be->ops->gemm(be, 0, 0, -1.0, &P, &Cb, 1.0, &Xr));
        GSB_CHECK(gsb__tensor_from_f64(be, GSB_F64, a, k, 1, &inv));
        GSB_CHECK(be->ops->col_affine(be, &P, NULL, &inv, NULL, &P));
        GSB_CHECK(gsb__tensor_alloc(be, dt, n, 1, &nq));
        GSB_CHECK(be->ops->row_sqnorms(be, &P, &nq));
        GSB_CHECK(gsb__tensor_to_f64(&nq, &q));
    }
    if (nv > 0.0) {
        GSB_CHECK(gsb__tensor_alloc(be, dt, n, 1, &nr));
        GSB_CHECK(be->ops->row_sqnorms(be, &Xr, &nr));
        GSB_CHECK(gsb__tensor_to_f64(&nr, &rr));
    }
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), dt, n, 1, out));
    double cst = -0.5 * ((double)d * log(2.0 * M_PI) + logdet);
    for (int64_t i = 0; i < n; i++)
        gsb__tensor_set(out, i, -0.5 * ((rr ? rr[i] / nv : 0.0) + (q ? q[i] : 0.0)) + cst);
    gsb__tensor_as_1d(out);
done:
    free(a);
    free(rr);
    free(q);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Xr);
    gsb__tensor_free(&mean);
    gsb__tensor_free(&Cb);
    gsb__tensor_free(&P);
    gsb__tensor_free(&inv);
    gsb__tensor_free(&nr);
    gsb__tensor_free(&nq);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

static int pca_score_samples(gsb__ctx *c)
{
    gsb__tensor ll;
    GSB_TRY(pca_loglike(c, &ll));
    return gsb__out(c, "ll", &ll);
}

static int pca_score(gsb__ctx *c)
{
    gsb__tensor ll;
    GSB_TRY(pca_loglike(c, &ll));
    double sum = 0.0;
    for (int64_t i = 0; i < ll.rows; i++)
        sum += gsb__tensor_get(&ll, i);
    int64_t n = ll.rows;
    gsb__tensor_free(&ll);
    return gsb__out_scalar(c, "score", sum / (double)n, GSB_F64);
}

/* ---- TruncatedSVD ---------------------------------------------------------- */

static int tsvd_project_batch(gsb__ctx *c, const gsb__tensor *Xb, void *arg, gsb__tensor *res)
{
    const gsb__tensor *comp = arg;
    gsb__tensor Cb = GSB__TENSOR_NONE;
    int rc = gsb__tensor_to(c->be, comp, &Cb);
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(c->be, Xb->dtype, Xb->rows, comp->rows, res);
    if (rc == GSB_OK)
        rc = matmul(c->be, 0, 1, Xb, &Cb, res);
    gsb__tensor_free(&Cb);
    return rc;
}

/*
 * The fit of an X larger than the backend's memory: the exact top-k right
 * singular vectors from the eigendecomposition of X^T X (spectrum_streamed),
 * explained_variance_ = v^T C v / n (the variance of X v, C the centred
 * cross-products), the ratios over the total variance trace(C) / n.
 */
static int tsvd_fit_streamed(gsb__ctx *c, const gsb__stream_plan *plan, int64_t k, int want_out)
{
    const gsb__tensor *X = gsb__in(c, "X");
    int64_t n = X->rows, d = X->cols;
    gsb_dtype dt = X->dtype;
    spectrum sp = {0};
    gsb__tensor comp = GSB__TENSOR_NONE, T = GSB__TENSOR_NONE;
    double *mean = NULL, *var = NULL, *C = NULL, *sign = NULL, *ev = NULL, *ratio = NULL;
    int rc;
    GSB_CHECK(spectrum_streamed(c, plan, X, 1, &sp, &mean, &var, &C));
    k = min64(k, sp.ns);
    GSB_CHECK(host_doubles(k, 0, &sign));
    GSB_CHECK(host_doubles(k, 0, &ev));
    GSB_CHECK(host_doubles(k, 0, &ratio));
    GSB_CHECK(spectrum_components(c->be, &sp, k, d, dt, &comp));
    flip_rows(&comp, sign);
    double full_var = 0.0;
    for (int64_t j = 0; j < d; j++)
        full_var += var[j];
    for (int64_t j = 0; j < k; j++) {
        double q = 0.0;
        for (int64_t a = 0; a < d; a++) {
            double va = gsb__tensor_get(&comp, j * d + a), row = 0.0;
            for (int64_t b = 0; b < d; b++)
                row += C[a * d + b] * gsb__tensor_get(&comp, j * d + b);
            q += va * row;
        }
        ev[j] = q / (double)n;
        ratio[j] = ev[j] / full_var;
    }
    if (want_out)
        GSB_CHECK(gsb__stream_map(c, plan, X, tsvd_project_batch, &comp, dt, k, &T));
    GSB_CHECK(set_vec(c, "explained_variance_", dt, ev, k));
    GSB_CHECK(set_vec(c, "explained_variance_ratio_", dt, ratio, k));
    GSB_CHECK(set_vec(c, "singular_values_", dt, sp.s, k));
    GSB_CHECK(gsb__fit_set(c, "components_", &comp));
    if (want_out)
        GSB_CHECK(gsb__out(c, "X_new", &T));
done:
    free(mean);
    free(var);
    free(C);
    free(sign);
    free(ev);
    free(ratio);
    spectrum_free(&sp);
    gsb__tensor_free(&comp);
    gsb__tensor_free(&T);
    return rc;
}

/* scikit-learn's checks of TruncatedSVD's n_components against X's shape */
static int tsvd_check_shape(int64_t n, int64_t d, int64_t k, int arpack)
{
    if (d < 2)
        return gsb__err(GSB_EINVAL,
                        "Found array with %lld feature(s) (shape=(%lld, %lld)) while a minimum "
                        "of 2 is required by TruncatedSVD.",
                        (long long)d, (long long)n, (long long)d);
    if (arpack && !(k > 0 && k < min64(n, d)))
        return gsb__err(GSB_EINVAL, "`k` must be an integer satisfying `0 < k < min(A.shape)`.");
    if (!arpack && k > d)
        return gsb__err(GSB_EINVAL, "n_components(%lld) must be <= n_features(%lld).",
                        (long long)k, (long long)d);
    return GSB_OK;
}

static int tsvd_fit_impl(gsb__ctx *c, int want_out)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X");
    int64_t n = X->rows, d = X->cols, k = gsb__param_int(c->params, "n_components");
    gsb_dtype dt = X->dtype;
    int arpack = gsb__param_is(c->params, "algorithm", "arpack");
    GSB_TRY(tsvd_check_shape(n, d, k, arpack));

    gsb__stream_plan plan;
    /* in memory: X and the randomized SVD's workspace; streamed: the d x d sums */
    GSB_TRY(gsb__stream_plan_for(c, X, 2.0, (size_t)(3 * d * d) * sizeof(double),
                                 (size_t)d * sizeof(double), &plan));
    if (plan.streamed)
        return tsvd_fit_streamed(c, &plan, k, want_out);

    gsb__tensor Xb = GSB__TENSOR_NONE, comp = GSB__TENSOR_NONE, Cb = GSB__TENSOR_NONE,
                T = GSB__TENSOR_NONE, mt = GSB__TENSOR_NONE;
    spectrum sp = {0};
    double *sign = NULL, *ev = NULL, *mx = NULL, *vx = NULL, *ratio = NULL;
    int rc;
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    if (arpack)
        GSB_CHECK(spectrum_svd(be, &Xb, 0, n, &sp));
    else
        GSB_CHECK(spectrum_rsvd(c, &Xb, k, gsb__param_int(c->params, "n_iter"), n, &sp));
    k = min64(k, sp.ns); /* randomized finds at most min(n_samples, n_features) */
    GSB_CHECK(host_doubles(k, 0, &sign));
    GSB_CHECK(host_doubles(k, 0, &ratio));
    GSB_CHECK(spectrum_components(be, &sp, k, d, dt, &comp));
    flip_rows(&comp, sign);

    /* X_transformed = X V (not U S: the two differ by the approximation error) */
    GSB_CHECK(gsb__tensor_to(be, &comp, &Cb));
    GSB_CHECK(gsb__tensor_alloc(be, dt, n, k, &T));
    GSB_CHECK(matmul(be, 0, 1, &Xb, &Cb, &T));
    GSB_CHECK(col_stats(be, &T, &mt, &mx, &ev));
    gsb__tensor_free(&mt);
    free(mx);
    mx = NULL;
    GSB_CHECK(col_stats(be, &Xb, &mt, &mx, &vx));
    double full_var = 0.0;
    for (int64_t j = 0; j < d; j++)
        full_var += vx[j];
    for (int64_t j = 0; j < k; j++)
        ratio[j] = ev[j] / full_var;

    GSB_CHECK(set_vec(c, "explained_variance_", dt, ev, k));
    GSB_CHECK(set_vec(c, "explained_variance_ratio_", dt, ratio, k));
    GSB_CHECK(set_vec(c, "singular_values_", dt, sp.s, k));
    GSB_CHECK(gsb__fit_set(c, "components_", &comp));
    if (want_out)
        GSB_CHECK(gsb__out(c, "X_new", &T));
done:
    free(sign);
    free(ev);
    free(mx);
    free(vx);
    free(ratio);
    spectrum_free(&sp);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&comp);
    gsb__tensor_free(&Cb);
    gsb__tensor_free(&T);
    gsb__tensor_free(&mt);
    return rc;
}

static int tsvd_fit(gsb__ctx *c) { return tsvd_fit_impl(c, 0); }
static int tsvd_fit_transform(gsb__ctx *c) { return tsvd_fit_impl(c, 1); }

/* X @ components_^T (transform) or X @ components_ (inverse_transform) */
static int tsvd_apply(gsb__ctx *c, int inverse)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X"), *comp;
    GSB_TRY(gsb__attr_need(c, "components_", 0, -1, -1, &comp));
    if (!gsb__is_float(comp->dtype))
        return gsb__err(GSB_ECORRUPT, "TruncatedSVD: fitted attribute 'components_' is malformed");
    if (inverse && X->cols != comp->rows)
        return gsb__err(GSB_EINVAL, "shapes (%lld,%lld) and (%lld,%lld) not aligned: %lld (dim 1) "
                        "!= %lld (dim 0)",
                        (long long)X->rows, (long long)X->cols, (long long)comp->rows,
                        (long long)comp->cols, (long long)X->cols, (long long)comp->rows);
    gsb_dtype dt = promote(X->dtype, comp->dtype);
    gsb__tensor Xb = GSB__TENSOR_NONE, Cb = GSB__TENSOR_NONE, out = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_to_dtype(be, X, dt, &Xb));
    GSB_CHECK(gsb__tensor_to_dtype(be, comp, dt, &Cb));
    GSB_CHECK(gsb__tensor_alloc(be, dt, X->rows, inverse ? comp->cols : comp->rows, &out));
    GSB_CHECK(matmul(be, 0, !inverse, &Xb, &Cb, &out));
    GSB_CHECK(gsb__out(c, inverse ? "X_original" : "X_new", &out));
done:
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Cb);
    gsb__tensor_free(&out);
    return rc;
}

static int tsvd_transform(gsb__ctx *c) { return tsvd_apply(c, 0); }
static int tsvd_inverse_transform(gsb__ctx *c) { return tsvd_apply(c, 1); }

/* ---- fits from merged GRAM statistics (partial_stats.h) ------------------- */

/*
 * The distributed fits: the statistics hold n, the column means and the
 * centred scatter C = Xc^T Xc, so both estimators work from the eigen-
 * decomposition of a d x d matrix, as the 'covariance_eigh' solver does:
 * PCA from C / (n - 1), TruncatedSVD from the uncentred X^T X = C + n m m^T.
 * Every svd_solver / algorithm gets these exact eigenvectors (the
 * randomized ones agree with them to the accuracy of the method).  Option
 * "dtype" ("float32" | "float64") is X's, for the fitted arrays.
 */
typedef struct dstats {
    int64_t n, d;
    const double *mean, *C;
    gsb_dtype dt;
} dstats;

static int dstats_get(gsb__ctx *c, dstats *ds)
{
    gsb__stats st;
    GSB_TRY(gsb__stats_parse(gsb__in(c, "stats"), GSB__STATS_GRAM, &st));
    if (st.b != 0)
        return gsb__err(GSB_EINVAL, "%s: statistics with targets (stats_gram without y "
                        "expected)", c->est->name);
    ds->n = (int64_t)st.v[1];
    ds->d = st.a;
    ds->mean = st.v + 2;
    ds->C = st.v + 2 + st.a;
    const char *dt = json_string_value(json_object_get(c->options, "dtype"));
    ds->dt = dt && strcmp(dt, "float32") == 0 ? GSB_F32 : GSB_F64;
    if (ds->n < 1 || st.v[0] != (double)ds->n)
        return gsb__err(GSB_EINVAL, "%s: statistics of weighted or empty data", c->est->name);
    return GSB_OK;
}

/* eigh of the d x d host matrix A * scale + shift * m m^T: ascending w, V as columns (host). */
static int dstats_eigh(const dstats *ds, double scale, double shift, double **w, gsb__tensor *V)
{
    int64_t d = ds->d;
    double *A;
    *w = NULL;
    *V = GSB__TENSOR_NONE;
    GSB_TRY(host_doubles(d * d, 0, &A));
    for (int64_t i = 0; i < d; i++)
        for (int64_t j = 0; j < d; j++)
            A[i * d + j] = ds->C[i * d + j] * scale + shift * ds->mean[i] * ds->mean[j];
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor At = gsb__tensor_host_view(A, GSB_F64, d, d), wt = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_F64, d, 1, &wt));
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_F64, d, d, V));
    GSB_CHECK(cpu->ops->eigh(cpu, &At, &wt, V));
    GSB_CHECK(gsb__tensor_to_f64(&wt, w));
done:
    free(A);
    gsb__tensor_free(&wt);
    if (rc != GSB_OK)
        gsb__tensor_free(V);
    return rc;
}

int gsb__pca_fit_from_stats(gsb__ctx *c)
{
    dstats ds;
    GSB_TRY(dstats_get(c, &ds));
    int64_t n = ds.n, d = ds.d, kk, k;
    if (n < 2)
        return gsb__err(GSB_EINVAL, "PCA: fit_from_stats needs at least 2 samples");
    ncomp nc;
    GSB_TRY(pca_ncomp(c, &nc));
    const char *solver = gsb__param_str(c->params, "svd_solver");
    if (strcmp(solver, "auto") == 0)
        solver = pca_auto_solver(&nc, n, d);
    GSB_TRY(pca_check(&nc, solver, n, d, &kk));
    int truncated = strcmp(solver, "arpack") == 0 || strcmp(solver, "randomized") == 0;
    spectrum sp = {0};
    gsb__tensor comp = GSB__TENSOR_NONE;
    double *wh = NULL, *var = NULL, *ratio = NULL, *sign = NULL, total, noise;
    int rc;
    GSB_CHECK(dstats_eigh(&ds, 1.0 / (double)(n - 1), 0.0, &wh, &sp.vt));
    sp.src = SRC_EIGH;
    /* the SVD solvers see min(n, d) singular values; the covariance route d */
    sp.ns = strcmp(solver, "covariance_eigh") == 0 ? d : min64(n, d);
    GSB_CHECK(host_doubles(d, 0, &sp.s));
    GSB_CHECK(host_doubles(d, 0, &sp.ev));
    GSB_CHECK(host_doubles(d, 0, &var));
    for (int64_t j = 0; j < d; j++) {
        sp.ev[j] = fmax(wh[d - 1 - j], 0.0);
        sp.s[j] = sqrt(sp.ev[j] * (double)(n - 1));
        var[j] = ds.C[j * d + j] / (double)n;
    }
    pca_keep(&nc, truncated, kk, n, d, var, &sp, &k, &total, &noise);
    GSB_CHECK(host_doubles(sp.ns, 0, &ratio));
    for (int64_t j = 0; j < sp.ns; j++)
        ratio[j] = sp.ev[j] / total;
    GSB_CHECK(host_doubles(k, 0, &sign));
    GSB_CHECK(spectrum_components(gsb__cpu_backend(), &sp, k, d, ds.dt, &comp));
    flip_rows(&comp, sign);
    GSB_CHECK(set_vec(c, "mean_", ds.dt, ds.mean, d));
    GSB_CHECK(set_vec(c, "explained_variance_", ds.dt, sp.ev, k));
    GSB_CHECK(set_vec(c, "explained_variance_ratio_", ds.dt, ratio, k));
    GSB_CHECK(set_vec(c, "singular_values_", ds.dt, sp.s, k));
    GSB_CHECK(gsb__fit_set_scalar(c, "n_components_", (double)k, GSB_I64));
    GSB_CHECK(gsb__fit_set_scalar(c, "n_samples_", (double)n, GSB_I64));
    GSB_CHECK(gsb__fit_set_scalar(c, "noise_variance_", noise, GSB_F64));
    GSB_CHECK(gsb__fit_set_scalar(c, "n_features_in_", (double)d, GSB_I64));
    rc = gsb__fit_set(c, "components_", &comp);
done:
    free(wh);
    free(var);
    free(ratio);
    free(sign);
    spectrum_free(&sp);
    gsb__tensor_free(&comp);
    return rc;
}

int gsb__tsvd_fit_from_stats(gsb__ctx *c)
{
    dstats ds;
    GSB_TRY(dstats_get(c, &ds));
    int64_t n = ds.n, d = ds.d, k = gsb__param_int(c->params, "n_components");
    int arpack = gsb__param_is(c->params, "algorithm", "arpack");
    GSB_TRY(tsvd_check_shape(n, d, k, arpack));
    k = min64(k, min64(n, d));
    gsb__tensor V = GSB__TENSOR_NONE, comp = GSB__TENSOR_NONE;
    double *wh = NULL, *s = NULL, *ev = NULL, *ratio = NULL, *sign = NULL, full = 0;
    int rc;
    GSB_CHECK(dstats_eigh(&ds, 1.0, (double)n, &wh, &V));
    GSB_CHECK(host_doubles(k, 0, &s));
    GSB_CHECK(host_doubles(k, 0, &ev));
    GSB_CHECK(host_doubles(k, 0, &ratio));
    GSB_CHECK(host_doubles(k, 0, &sign));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), ds.dt, k, d, &comp));
    for (int64_t j = 0; j < k; j++) {
        s[j] = sqrt(fmax(wh[d - 1 - j], 0.0));
        for (int64_t i = 0; i < d; i++)
            gsb__tensor_set(&comp, j * d + i, gsb__tensor_get(&V, i * d + (d - 1 - j)));
    }
    flip_rows(&comp, sign);
    /* variance of X v_j (np.var, ddof 0): v_j^T C v_j / n, with v_j as stored */
    for (int64_t j = 0; j < k; j++) {
        double acc = 0;
        for (int64_t a = 0; a < d; a++)
            for (int64_t b = 0; b < d; b++)
                acc += gsb__tensor_get(&comp, j * d + a) * ds.C[a * d + b] *
                       gsb__tensor_get(&comp, j * d + b);
        ev[j] = acc / (double)n;
    }
    for (int64_t i = 0; i < d; i++)
        full += ds.C[i * d + i] / (double)n;
    for (int64_t j = 0; j < k; j++)
        ratio[j] = ev[j] / full;
    GSB_CHECK(set_vec(c, "explained_variance_", ds.dt, ev, k));
    GSB_CHECK(set_vec(c, "explained_variance_ratio_", ds.dt, ratio, k));
    GSB_CHECK(set_vec(c, "singular_values_", ds.dt, s, k));
    GSB_CHECK(gsb__fit_set_scalar(c, "n_features_in_", (double)d, GSB_I64));
    rc = gsb__fit_set(c, "components_", &comp);
done:
    free(wh);
    free(s);
    free(ev);
    free(ratio);
    free(sign);
    gsb__tensor_free(&V);
    gsb__tensor_free(&comp);
    return rc;
}

/* ---- descriptors ------------------------------------------------------------ */

/* choices in the order scikit-learn prints its StrOptions */
static const char *const mle_choices[] = {"mle", NULL};
static const char *const auto_choices[] = {"auto", NULL};
static const char *const pca_solvers[] = {"auto", "covariance_eigh", "full", "randomized",
                                          "arpack", NULL};
static const char *const normalizers[] = {"QR", "LU", "auto", "none", NULL};
static const char *const tsvd_algorithms[] = {"randomized", "arpack", NULL};

/* rows PCA and TruncatedSVD share (the same randomized solver and stand-in for ARPACK) */
#define P_TOL                                                                               \
    {"tol", GSB__P_FLOAT, "0.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,                       \
     "ARPACK tolerance; 'arpack' is solved exactly here, which meets any tolerance"}
#define P_RANDOMIZED                                                                        \
    {"n_oversamples", GSB__P_INT, "10", 1, INFINITY, GSB__CLOSED_LEFT, NULL,                \
     "extra random vectors of the randomized solver"},                                      \
    {"power_iteration_normalizer", GSB__P_STR, "\"auto\"", 0, 0, 0, normalizers,            \
     "randomized solver: 'QR' and 'LU' both re-orthonormalise by QR here (same subspace); " \
     "'none' does not; 'auto' is 'none' for <= 2 iterations"},                              \
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH,   \
     NULL, "seed of the randomized solver (gsb's own stream, not numpy's)"}
#define FIT_METHOD(fn)                                                                      \
    {"fit", fn, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}, {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL}}, 1,          \
     "fit the model (y is ignored)"}

static const gsb__param_desc pca_params[] = {
    {"n_components", GSB__P_INT | GSB__P_FLOAT | GSB__P_STR | GSB__P_NONE, "null", 0, INFINITY,
     GSB__CLOSED_LEFT, mle_choices,
     "components to keep: an int, a float in (0, 1) (explained variance to reach), 'mle' "
     "(Minka) or None (all)"},
    {"copy", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "accepted for compatibility: the caller's X is never modified"},
    {"whiten", GSB__P_BOOL, "false", 0, 0, 0, NULL,
     "scale the projections to unit variance"},
    {"svd_solver", GSB__P_STR, "\"auto\"", 0, 0, 0, pca_solvers,
     "'full' (SVD), 'covariance_eigh', 'randomized', 'arpack' (solved exactly here) or 'auto' "
     "(scikit-learn's policy)"},
    P_TOL,
    {"iterated_power", GSB__P_INT | GSB__P_STR, "\"auto\"", 0, INFINITY, GSB__CLOSED_LEFT,
     auto_choices, "power iterations of the randomized solver ('auto': 7, or 4 when "
     "n_components >= 0.1 * min(X.shape))"},
    P_RANDOMIZED,
    {0}};

static const gsb__method_desc pca_methods[] = {
    FIT_METHOD(pca_fit),
    {"fit_transform", pca_fit_transform,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}, {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL}}, 1,
     "fit, then return the projection X_new (U * S, or U * sqrt(n_samples - 1) whitened)"},
    {"transform", pca_transform, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0, "project X: X_new"},
    {"inverse_transform", pca_inverse_transform, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_ANY_FEATURES}}, 0,
     "map projections back to feature space: X_original"},
    {"score_samples", pca_score_samples, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0,
     "log-likelihood of each sample under the probabilistic PCA model: ll"},
    {"score", pca_score, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}, {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL}}, 0,
     "mean log-likelihood of the samples: score"},
    {"get_covariance", pca_get_covariance, {{0}}, 0, "the model's data covariance: cov"},
    {"get_precision", pca_get_precision, {{0}}, 0,
     "the inverse of the model's covariance: precision"},
    GSB__STATS_GRAM_ROW, GSB__STATS_MERGE_ROW,
    GSB__FIT_FROM_STATS_ROW(gsb__pca_fit_from_stats, "gram"),
    {0}};

static const gsb__attr_desc pca_attrs[] = {
    {"components_", "principal axes (n_components_ x n_features), largest |entry| positive"},
    {"explained_variance_", "variance explained by each component (ddof = 1)"},
    {"explained_variance_ratio_", "fraction of the total variance per component"},
    {"singular_values_", "singular values of the centred X for the kept components"},
    {"mean_", "per-feature mean of the training X"},
    {"n_components_", "number of components kept"},
    {"n_samples_", "number of training samples"},
    {"noise_variance_", "probabilistic PCA noise variance"},
    {0}};

const gsb__estimator_desc gsb__est_PCA = {
    "PCA", "decomposition", GSB__KIND_TRANSFORMER, pca_params, pca_methods, pca_attrs,
    "Principal component analysis (scikit-learn's PCA)"};

static const gsb__param_desc tsvd_params[] = {
    {"n_components", GSB__P_INT, "2", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "components to keep"},
    {"algorithm", GSB__P_STR, "\"randomized\"", 0, 0, 0, tsvd_algorithms,
     "'randomized' or 'arpack' (solved exactly here)"},
    {"n_iter", GSB__P_INT, "5", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "power iterations of the randomized solver"},
    P_RANDOMIZED,
    P_TOL,
    {0}};

static const gsb__method_desc tsvd_methods[] = {
    FIT_METHOD(tsvd_fit),
    {"fit_transform", tsvd_fit_transform,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}, {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL}}, 1,
     "fit, then return X_new = X @ components_.T"},
    {"transform", tsvd_transform, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0, "X_new = X @ components_.T"},
    {"inverse_transform", tsvd_inverse_transform, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_ANY_FEATURES}}, 0,
     "X_original = X @ components_"},
    GSB__STATS_GRAM_ROW, GSB__STATS_MERGE_ROW,
    GSB__FIT_FROM_STATS_ROW(gsb__tsvd_fit_from_stats, "gram"),
    {0}};

static const gsb__attr_desc tsvd_attrs[] = {
    {"components_", "right singular vectors (n_components x n_features), largest |entry| "
                    "positive"},
    {"explained_variance_", "variance of each column of the transformed training X"},
    {"explained_variance_ratio_", "explained_variance_ over the total variance of X"},
    {"singular_values_", "singular values of X"},
    {0}};

const gsb__estimator_desc gsb__est_TruncatedSVD = {
    "TruncatedSVD", "decomposition", GSB__KIND_TRANSFORMER, tsvd_params, tsvd_methods,
    tsvd_attrs, "Dimensionality reduction by truncated SVD, without centring (LSA)"};
