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
#include "solvers/lanczos_state.h"

typedef struct lz {
    const gsb__lanczos_opts *o;
    gsb__lz_state s; /* one block; hist rows: step j's projections at [0, j], its norm at [ncv] */
    gsb__linop_fn op;
    void *data;
    int64_t n, ncv;
    /* on the backend */
    gsb__tensor coef;  /* (ncv + 1) x 1: projections on V [0, ncv), |w|^2 at [ncv] */
    gsb__tensor coef2; /* ncv x 1: the second pass's projections */
    /* on the host */
    double *h;   /* ncv + 1: coef downloaded */
    double beta; /* |r| of the last column */
    int64_t matvecs;
} lz;

/* w := w - V[0..cnt) (V[0..cnt) w), twice; c1 (cnt x 1 on the backend)
 * receives the coefficients */
static int project_out(lz *z, int64_t cnt, gsb__tensor *c1)
{
    const gsb__backend *be = z->s.be;
    if (cnt == 0)
        return GSB_OK;
    gsb__tensor Vc = gsb__tensor_rows(&z->s.V, 0, cnt), c2 = gsb__tensor_rows(&z->coef2, 0, cnt);
    GSB_TRY(be->ops->gemm(be, 0, 0, 1.0, &Vc, &z->s.w, 0.0, c1));
    GSB_TRY(be->ops->gemm(be, 1, 0, -1.0, &Vc, c1, 1.0, &z->s.w));
    GSB_TRY(be->ops->gemm(be, 0, 0, 1.0, &Vc, &z->s.w, 0.0, &c2));
    GSB_TRY(be->ops->gemm(be, 1, 0, -1.0, &Vc, &c2, 1.0, &z->s.w));
    return be->ops->axpy(be, 1.0, &c2, c1);
}

/* project_out with a wait: h[0..cnt) receives the coefficients and *nrm the
 * norm of w after that */
static int orthogonalize(lz *z, int64_t cnt, double *nrm)
{
    const gsb__backend *be = z->s.be;
    gsb__tensor c1 = gsb__tensor_rows(&z->coef, 0, cnt);
    GSB_TRY(project_out(z, cnt, &c1));
    gsb__tensor wr = gsb__lz_shaped(&z->s.w, 1, z->n), sq = gsb__tensor_rows(&z->coef, z->ncv, 1);
    GSB_TRY(be->ops->row_sqnorms(be, &wr, &sq));
    GSB_TRY(be->ops->download(be, &z->coef, z->h));
    *nrm = sqrt(z->h[z->ncv]);
    return GSB_OK;
}

/* V[j] := w / |w|, w orthogonalised against V[0..j) with norm nrm; a random
 * direction instead when w lies (numerically) in their span. */
static int set_next(lz *z, int64_t j, double nrm)
{
    const gsb__backend *be = z->s.be;
    for (uint64_t attempt = 1; nrm <= 1e-10; attempt++) {
        if (attempt > 4)
            return gsb__err(GSB_ENUMERIC, "lanczos: no direction left outside the basis");
        gsb__lz_fixed_random(z->s.xh, z->n, attempt + (uint64_t)j * 131);
        GSB_TRY(be->ops->upload(be, &z->s.w, z->s.xh));
        GSB_TRY(orthogonalize(z, j, &nrm));
        if (nrm / sqrt((double)z->n) <= 1e-10)
            nrm = 0.0; /* the test is relative to a random vector's norm */
    }
    gsb__tensor v = gsb__lz_basis(&z->s, j);
    GSB_TRY(be->ops->fill(be, &v, 0.0));
    return be->ops->axpy(be, 1.0 / nrm, &z->s.w, &v);
}

/* Queue step j: w = A v_j made orthogonal to V[0..j], V[j+1] = w / |w|, the
 * projections and |w| into hist's row j.  No host wait. */
static int queue_step(lz *z, int64_t j)
{
    const gsb__backend *be = z->s.be;
    gsb__tensor v = gsb__lz_basis(&z->s, j);
    GSB_TRY(z->op(z->data, &v, &z->s.w));
    z->matvecs++;
    gsb__tensor c = gsb__lz_hist_at(&z->s, j, 0, j + 1, 1);
    gsb__tensor nrm = gsb__lz_hist_at(&z->s, j, z->ncv, 1, 1);
    GSB_TRY(project_out(z, j + 1, &c));
    gsb__tensor next = gsb__lz_basis(&z->s, j + 1);
    return be->ops->vec_normalize(be, &z->s.w, &next, &nrm);
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
    GSB_TRY(z->s.be->ops->download(z->s.be, &z->s.hist, z->s.hh));
    *breakdown = ncv;
    for (int64_t j = j0; j < ncv; j++) {
        const double *row = z->s.hh + j * (ncv + 1);
        for (int64_t i = 0; i <= j; i++)
            z->s.H[i * ncv + j] = z->s.H[j * ncv + i] = row[i];
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

/* rows [0, cnt) of tmp = the Ritz vectors of the cnt largest values */
static int ritz_vectors(lz *z, int64_t cnt)
{
    const gsb__backend *be = z->s.be;
    const int64_t ncv = z->ncv;
    for (int64_t r = 0; r < cnt; r++) /* sel's rows: S's columns, largest value first */
        for (int64_t i = 0; i < ncv; i++)
            z->s.sel[r * ncv + i] = z->s.S[i * ncv + (ncv - 1 - r)];
    gsb__tensor sd = gsb__tensor_rows(&z->s.sel_d, 0, cnt), Vb = gsb__tensor_rows(&z->s.V, 0, ncv);
    gsb__tensor out = gsb__tensor_rows(&z->s.tmp, 0, cnt);
    GSB_TRY(be->ops->upload(be, &sd, z->s.sel));
    return be->ops->gemm(be, 0, 0, 1.0, &sd, &Vb, 0.0, &out);
}

static int check_opts(const gsb__lanczos_opts *o)
{
    if (!o || !gsb__lz_opts_ok(o->nev, o->ncv, o->max_matvec, o->tol) || o->ncv > o->n)
        return gsb__err(GSB_EINTERNAL, "lanczos: bad options (n %lld, nev %lld, ncv %lld)",
                        o ? (long long)o->n : 0LL, o ? (long long)o->nev : 0LL,
                        o ? (long long)o->ncv : 0LL);
    return GSB_OK;
}

static void lz_free(lz *z)
{
    gsb__lz_state_free(&z->s);
    gsb__tensor_free(&z->coef);
    gsb__tensor_free(&z->coef2);
    free(z->h);
}

static int lz_alloc(lz *z, const gsb__backend *be)
{
    GSB_TRY(gsb__lz_state_alloc(&z->s, be, z->n, z->ncv, 1, z->ncv + 1, "lanczos"));
    GSB_TRY(gsb__tensor_zeros(be, GSB_F64, z->ncv + 1, 1, &z->coef));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, z->ncv, 1, &z->coef2));
    z->h = gsb__alloc_array(z->ncv + 1, sizeof(double));
    if (z->h)
        return GSB_OK;
    return gsb__err(GSB_ENOMEM, "lanczos: out of memory for its %lld x %lld problem",
                    (long long)z->ncv, (long long)z->ncv);
}

/* V[0] from o->v0, or gsb__lanczos_default_start */
static int start(lz *z)
{
    if (z->o->v0) {
        memcpy(z->s.xh, z->o->v0, (size_t)z->n * sizeof(double));
    } else {
        gsb__lanczos_default_start(z->s.xh, z->n);
    }
    double nrm;
    GSB_TRY(z->s.be->ops->upload(z->s.be, &z->s.w, z->s.xh));
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
    z.op = op;
    z.data = data;
    z.n = o->n;
    z.ncv = o->ncv;
    int rc;
    GSB_CHECK(lz_alloc(&z, o->be ? o->be : gsb__cpu_backend()));
    GSB_CHECK(start(&z));

    const int64_t nev = o->nev, keep = gsb__lz_keep(nev, z.ncv);
    for (int64_t j0 = 0;; j0 = keep) {
        GSB_CHECK(extend(&z, j0));
        GSB_CHECK(gsb__lz_ritz(&z.s, 0));
        double res = gsb__lz_worst_residual(&z.s, 0, z.beta, nev);
        *conv = res <= o->tol;
        if (o->progress)
            GSB_CHECK(o->progress(o->progress_data, z.matvecs, res));
        if (*conv || z.matvecs + (z.ncv - keep) > o->max_matvec)
            break;
        GSB_CHECK(ritz_vectors(&z, keep));
        GSB_CHECK(gsb__lz_restart(&z.s, keep));
    }
    GSB_CHECK(ritz_vectors(&z, nev));
    gsb__tensor best = gsb__tensor_rows(&z.s.tmp, 0, nev);
    GSB_CHECK(z.s.be->ops->download(z.s.be, &best, evecs));
    for (int64_t r = 0; r < nev; r++)
        evals[r] = z.s.theta[z.ncv - 1 - r];
done:
    if (matvecs)
        *matvecs = z.matvecs;
    lz_free(&z);
    return rc;
}
