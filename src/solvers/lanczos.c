/*
 * lanczos.c - thick-restart Lanczos for the largest eigenpairs of a
 * symmetric operator (see lanczos.h).
 *
 * The basis V (ncv + 1 unit vectors of n doubles, one per row) and the
 * projected matrix H = V^T A V (ncv x ncv) are built column by column: each
 * new vector is A v_j made orthogonal to all earlier ones by two passes of
 * classical Gram-Schmidt (so H's column j is v_i^T A v_j, i <= j, whatever
 * the history), and the last residual r relates them:
 *     A V = V H + r e_last^T.
 * With H = S diag(theta) S^T, pair i's residual norm is |r| |S[last, i]|.
 * A restart keeps the l best Ritz vectors V S[:, best] (their block of H is
 * diag(theta)) and continues from r / |r|, whose projections rebuild the
 * coupling column.  Budget exhausted: the best pairs so far are returned
 * with converged = 0.
 *
 * V, the new direction and the products with V live on the solver's
 * backend and go through its ops (gemm, axpy, vec_normalize, copy).  The
 * steps of a cycle queue without a host wait: each writes its projections
 * and norm into a row of `hist` on the backend, and the cycle downloads
 * hist once (on a GPU a wait per step cost more than the step's work).  A
 * step whose norm turns out (numerically) zero is a breakdown: its
 * successors, queued from a meaningless vector, are redone after a random
 * direction replaces it.  H's eigenproblem and the restart's choice of
 * vectors are solved on the host (ncv is a few dozen).
 */
#include "solvers/lanczos.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/tensor.h"

typedef struct lz {
    const gsb__lanczos_opts *o;
    const gsb__backend *be;
    gsb__linop_fn op;
    void *data;
    int64_t n, ncv;
    /* on be */
    gsb__tensor V;     /* (ncv + 1) x n */
    gsb__tensor w;     /* n x 1: the direction being orthogonalised */
    gsb__tensor coef;  /* (ncv + 1) x 1: projections on V [0, ncv), |w|^2 at [ncv] */
    gsb__tensor coef2; /* ncv x 1: the second pass's projections */
    gsb__tensor tmp;   /* ncv x n: Ritz vectors at a restart */
    gsb__tensor sel_d; /* ncv x ncv: sel */
    gsb__tensor hist;  /* ncv x (ncv + 1): step j's projections at [0, j], its norm at [ncv] */
    /* on the host */
    double *H;     /* ncv x ncv, row-major, symmetric */
    double *S;     /* ncv x ncv eigenvectors of H (column j = vector j) */
    double *theta; /* ncv, ascending */
    double *h;     /* ncv + 1: coef downloaded */
    double *sel;   /* ncv x ncv: the selected columns of S, one per row */
    double *xh;    /* n: a start or random vector */
    double *hh;    /* hist downloaded */
    double beta;   /* |r| of the last column */
    int64_t matvecs;
} lz;

/* rows [r0, r0 + len) of t (a borrowed view) */
static gsb__tensor rows_of(const gsb__tensor *t, int64_t r0, int64_t len)
{
    gsb__tensor v = *t;
    v.data = (char *)t->data + (size_t)(r0 * t->cols) * gsb_dtype_size(t->dtype);
    v.rows = len;
    v.owned = 0;
    return v;
}

/* the elements of t as a rows x cols view */
static gsb__tensor shaped(const gsb__tensor *t, int64_t rows, int64_t cols)
{
    gsb__tensor v = *t;
    v.rows = rows;
    v.cols = cols;
    v.owned = 0;
    return v;
}

/* basis vector j as an n x 1 tensor */
static gsb__tensor basis(const lz *z, int64_t j)
{
    gsb__tensor v = rows_of(&z->V, j, 1);
    return shaped(&v, z->n, 1);
}

/* w := w - V[0..cnt) (V[0..cnt) w), twice; c1 (cnt x 1 on the backend)
 * receives the coefficients */
static int project_out(lz *z, int64_t cnt, gsb__tensor *c1)
{
    const gsb__backend *be = z->be;
    if (cnt == 0)
        return GSB_OK;
    gsb__tensor Vc = rows_of(&z->V, 0, cnt), c2 = rows_of(&z->coef2, 0, cnt);
    GSB_TRY(be->ops->gemm(be, 0, 0, 1.0, &Vc, &z->w, 0.0, c1));
    GSB_TRY(be->ops->gemm(be, 1, 0, -1.0, &Vc, c1, 1.0, &z->w));
    GSB_TRY(be->ops->gemm(be, 0, 0, 1.0, &Vc, &z->w, 0.0, &c2));
    GSB_TRY(be->ops->gemm(be, 1, 0, -1.0, &Vc, &c2, 1.0, &z->w));
    return be->ops->axpy(be, 1.0, &c2, c1);
}

/* project_out with a wait: h[0..cnt) receives the coefficients and *nrm the
 * norm of w after that */
static int orthogonalize(lz *z, int64_t cnt, double *nrm)
{
    const gsb__backend *be = z->be;
    gsb__tensor c1 = rows_of(&z->coef, 0, cnt);
    GSB_TRY(project_out(z, cnt, &c1));
    gsb__tensor wr = shaped(&z->w, 1, z->n), sq = rows_of(&z->coef, z->ncv, 1);
    GSB_TRY(be->ops->row_sqnorms(be, &wr, &sq));
    GSB_TRY(be->ops->download(be, &z->coef, z->h));
    *nrm = sqrt(z->h[z->ncv]);
    return GSB_OK;
}

/* A fixed pseudo-random vector (splitmix64 of (seed, i)), entries in [-1, 1). */
static void fixed_random(double *x, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i + 1;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        x[i] = (double)(z >> 11) * 0x1.0p-52 - 1.0;
    }
}

/* V[j] := w / |w|, w orthogonalised against V[0..j) with norm nrm; a random
 * direction instead when w lies (numerically) in their span. */
static int set_next(lz *z, int64_t j, double nrm)
{
    const gsb__backend *be = z->be;
    for (uint64_t attempt = 1; nrm <= 1e-10; attempt++) {
        if (attempt > 4)
            return gsb__err(GSB_ENUMERIC, "lanczos: no direction left outside the basis");
        fixed_random(z->xh, z->n, attempt + (uint64_t)j * 131);
        GSB_TRY(be->ops->upload(be, &z->w, z->xh));
        GSB_TRY(orthogonalize(z, j, &nrm));
        if (nrm / sqrt((double)z->n) <= 1e-10)
            nrm = 0.0; /* the test is relative to a random vector's norm */
    }
    gsb__tensor v = basis(z, j);
    GSB_TRY(be->ops->fill(be, &v, 0.0));
    return be->ops->axpy(be, 1.0 / nrm, &z->w, &v);
}

/* elements [off, off + len) of hist's row j as a len x 1 view */
static gsb__tensor hist_at(const lz *z, int64_t j, int64_t off, int64_t len)
{
    gsb__tensor v = rows_of(&z->hist, j, 1);
    v.data = (char *)v.data + (size_t)off * sizeof(double);
    return shaped(&v, len, 1);
}

/* Queue step j: w = A v_j made orthogonal to V[0..j], V[j+1] = w / |w|, the
 * projections and |w| into hist's row j.  No host wait. */
static int queue_step(lz *z, int64_t j)
{
    const gsb__backend *be = z->be;
    gsb__tensor v = basis(z, j);
    GSB_TRY(z->op(z->data, &v, &z->w));
    z->matvecs++;
    gsb__tensor c = hist_at(z, j, 0, j + 1), nrm = hist_at(z, j, z->ncv, 1);
    GSB_TRY(project_out(z, j + 1, &c));
    gsb__tensor next = basis(z, j + 1);
    return be->ops->vec_normalize(be, &z->w, &next, &nrm);
}

/*
 * Steps [j0, ncv) queued, then read back: H's columns and the residual norm.
 * Returns the first breakdown (a norm too small to normalise by, which
 * set_next must replace; the last step's exact zero is none: the residual
 * vanished), or ncv.
 */
static int run_steps(lz *z, int64_t j0, int64_t *breakdown)
{
    const int64_t ncv = z->ncv;
    for (int64_t j = j0; j < ncv; j++)
        GSB_TRY(queue_step(z, j));
    GSB_TRY(z->be->ops->download(z->be, &z->hist, z->hh));
    *breakdown = ncv;
    for (int64_t j = j0; j < ncv; j++) {
        const double *row = z->hh + j * (ncv + 1);
        for (int64_t i = 0; i <= j; i++)
            z->H[i * ncv + j] = z->H[j * ncv + i] = row[i];
        z->beta = row[ncv];
        if (z->beta <= 1e-10 && (j + 1 < ncv || z->beta > 0.0)) {
            *breakdown = j;
            break;
        }
    }
    return GSB_OK;
}

/* Columns j0 .. ncv-1 of H, V[j0+1 .. ncv] and the residual norm. */
static int extend(lz *z, int64_t j0)
{
    for (int64_t j = j0; j < z->ncv;) {
        int64_t bad;
        GSB_TRY(run_steps(z, j, &bad));
        if (bad == z->ncv)
            break;
        GSB_TRY(set_next(z, bad + 1, z->beta)); /* a random direction */
        j = bad + 1;
    }
    return GSB_OK;
}

/* theta and S from H */
static int ritz(lz *z)
{
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor th = gsb__tensor_host_view(z->H, GSB_F64, z->ncv, z->ncv);
    gsb__tensor tw = gsb__tensor_host_view(z->theta, GSB_F64, z->ncv, 1);
    gsb__tensor ts = gsb__tensor_host_view(z->S, GSB_F64, z->ncv, z->ncv);
    return cpu->ops->eigh(cpu, &th, &tw, &ts);
}

/* rows of sel: the columns of S of the cnt largest Ritz values, descending */
static void select_best(lz *z, int64_t cnt)
{
    const int64_t ncv = z->ncv;
    for (int64_t r = 0; r < cnt; r++)
        for (int64_t i = 0; i < ncv; i++)
            z->sel[r * ncv + i] = z->S[i * ncv + (ncv - 1 - r)];
}

/* rows [0, cnt) of tmp = the Ritz vectors of the cnt largest values */
static int ritz_vectors(lz *z, int64_t cnt)
{
    const gsb__backend *be = z->be;
    select_best(z, cnt);
    gsb__tensor sd = rows_of(&z->sel_d, 0, cnt), Vb = rows_of(&z->V, 0, z->ncv);
    gsb__tensor out = rows_of(&z->tmp, 0, cnt);
    GSB_TRY(be->ops->upload(be, &sd, z->sel));
    return be->ops->gemm(be, 0, 0, 1.0, &sd, &Vb, 0.0, &out);
}

/* the largest residual norm of the nev best Ritz pairs (NaN compares as not converged) */
static double worst_residual(const lz *z, int64_t nev)
{
    const int64_t last = z->ncv - 1;
    double worst = 0.0;
    for (int64_t r = 0; r < nev; r++) {
        double res = fabs(z->beta * z->S[last * z->ncv + (last - r)]);
        worst = res > worst || isnan(res) ? res : worst;
    }
    return worst;
}

/* Keep the l best Ritz vectors and continue from the residual. */
static int restart(lz *z, int64_t l)
{
    const gsb__backend *be = z->be;
    const int64_t ncv = z->ncv;
    GSB_TRY(ritz_vectors(z, l));
    gsb__tensor next = rows_of(&z->V, l, 1), last = rows_of(&z->V, ncv, 1);
    gsb__tensor head = rows_of(&z->V, 0, l), best = rows_of(&z->tmp, 0, l);
    GSB_TRY(be->ops->copy(be, &next, &last));
    GSB_TRY(be->ops->copy(be, &head, &best));
    memset(z->H, 0, (size_t)(ncv * ncv) * sizeof(double));
    for (int64_t r = 0; r < l; r++)
        z->H[r * ncv + r] = z->theta[ncv - 1 - r];
    return GSB_OK;
}

static int check_opts(const gsb__lanczos_opts *o)
{
    if (!o || o->nev < 1 || o->ncv < o->nev + 2 || o->ncv > o->n || o->max_matvec < 1 ||
        !(o->tol > 0.0))
        return gsb__err(GSB_EINTERNAL, "lanczos: bad options (n %lld, nev %lld, ncv %lld)",
                        o ? (long long)o->n : 0LL, o ? (long long)o->nev : 0LL,
                        o ? (long long)o->ncv : 0LL);
    return GSB_OK;
}

static void lz_free(lz *z)
{
    gsb__tensor_free(&z->V);
    gsb__tensor_free(&z->w);
    gsb__tensor_free(&z->coef);
    gsb__tensor_free(&z->coef2);
    gsb__tensor_free(&z->tmp);
    gsb__tensor_free(&z->sel_d);
    gsb__tensor_free(&z->hist);
    free(z->H);
    free(z->S);
    free(z->theta);
    free(z->h);
    free(z->sel);
    free(z->xh);
    free(z->hh);
}

static int lz_alloc(lz *z)
{
    const gsb__backend *be = z->be;
    const int64_t n = z->n, ncv = z->ncv;
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv + 1, n, &z->V));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, n, 1, &z->w));
    GSB_TRY(gsb__tensor_zeros(be, GSB_F64, ncv + 1, 1, &z->coef));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv, 1, &z->coef2));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv, n, &z->tmp));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv, ncv, &z->sel_d));
    GSB_TRY(gsb__tensor_zeros(be, GSB_F64, ncv, ncv + 1, &z->hist));
    z->H = gsb__calloc_array(ncv * ncv, sizeof(double));
    z->S = gsb__alloc_array(ncv * ncv, sizeof(double));
    z->theta = gsb__alloc_array(ncv, sizeof(double));
    z->h = gsb__alloc_array(ncv + 1, sizeof(double));
    z->sel = gsb__alloc_array(ncv * ncv, sizeof(double));
    z->xh = gsb__alloc_array(n, sizeof(double));
    z->hh = gsb__alloc_array(ncv * (ncv + 1), sizeof(double));
    if (z->H && z->S && z->theta && z->h && z->sel && z->xh && z->hh)
        return GSB_OK;
    return gsb__err(GSB_ENOMEM, "lanczos: out of memory for its %lld x %lld problem",
                    (long long)ncv, (long long)ncv);
}

void gsb__lanczos_default_start(double *x, int64_t n)
{
    fixed_random(x, n, 0);
    for (int64_t i = 0; i < n; i++)
        x[i] = 1.0 + 1e-3 * x[i];
}

/* V[0] from o->v0, or gsb__lanczos_default_start */
static int start(lz *z)
{
    if (z->o->v0) {
        memcpy(z->xh, z->o->v0, (size_t)z->n * sizeof(double));
    } else {
        gsb__lanczos_default_start(z->xh, z->n);
    }
    double nrm;
    GSB_TRY(z->be->ops->upload(z->be, &z->w, z->xh));
    GSB_TRY(orthogonalize(z, 0, &nrm));
    return set_next(z, 0, nrm);
}

int gsb__lanczos_largest(gsb__linop_fn op, void *data, const gsb__lanczos_opts *o,
                         double *evals, double *evecs, int *conv, int64_t *matvecs)
{
    *conv = 0;
    GSB_TRY(check_opts(o));
    lz z = {0};
    z.o = o;
    z.be = o->be ? o->be : gsb__cpu_backend();
    z.op = op;
    z.data = data;
    z.n = o->n;
    z.ncv = o->ncv;
    int rc;
    GSB_CHECK(lz_alloc(&z));
    GSB_CHECK(start(&z));

    const int64_t nev = o->nev;
    int64_t keep = nev + (z.ncv - nev) / 2;
    keep = keep > z.ncv - 2 ? z.ncv - 2 : keep;
    for (int64_t j0 = 0;; j0 = keep) {
        GSB_CHECK(extend(&z, j0));
        GSB_CHECK(ritz(&z));
        double res = worst_residual(&z, nev);
        *conv = res <= o->tol;
        if (o->progress)
            GSB_CHECK(o->progress(o->progress_data, z.matvecs, res));
        if (*conv || z.matvecs + (z.ncv - keep) > o->max_matvec)
            break;
        GSB_CHECK(restart(&z, keep));
    }
    GSB_CHECK(ritz_vectors(&z, nev));
    gsb__tensor best = rows_of(&z.tmp, 0, nev);
    GSB_CHECK(z.be->ops->download(z.be, &best, evecs));
    for (int64_t r = 0; r < nev; r++)
        evals[r] = z.theta[z.ncv - 1 - r];
done:
    if (matvecs)
        *matvecs = z.matvecs;
    lz_free(&z);
    return rc;
}
