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
    gsb__linop_fn op;
    void *data;
    int64_t n, ncv;
    double *V;     /* (ncv + 1) x n */
    double *H;     /* ncv x ncv, row-major, symmetric */
    double *S;     /* ncv x ncv eigenvectors of H (column j = vector j) */
    double *theta; /* ncv, ascending */
    double *w, *h, *h2;
    double *tmp;   /* ncv x n: Ritz vectors at a restart */
    double *sel;   /* ncv x ncv: the selected columns of S, one per row */
    double beta;   /* |r| of the last column */
    int64_t matvecs;
} lz;

/* C (rows x cols) = alpha * op(A) B + beta C on host doubles, by the CPU backend's gemm */
static int host_gemm(int trans_a, double alpha, double *A, int64_t ar, int64_t ac, double *B,
                     int64_t br, int64_t bc, double beta, double *C, int64_t cr, int64_t cc)
{
    const gsb__backend *be = gsb__cpu_backend();
    gsb__tensor ta = gsb__tensor_host_view(A, GSB_F64, ar, ac);
    gsb__tensor tb = gsb__tensor_host_view(B, GSB_F64, br, bc);
    gsb__tensor tc = gsb__tensor_host_view(C, GSB_F64, cr, cc);
    return be->ops->gemm(be, trans_a, 0, alpha, &ta, &tb, beta, &tc);
}

/* w := w - V[0..cnt) (V[0..cnt) w), twice; h receives the coefficients */
static int orthogonalize(lz *z, int64_t cnt, double *w, double *h)
{
    const int64_t n = z->n;
    memset(h, 0, (size_t)cnt * sizeof *h);
    for (int pass = 0; pass < 2; pass++) {
        GSB_TRY(host_gemm(0, 1.0, z->V, cnt, n, w, n, 1, 0.0, z->h2, cnt, 1));
        GSB_TRY(host_gemm(1, -1.0, z->V, cnt, n, z->h2, cnt, 1, 1.0, w, n, 1));
        for (int64_t i = 0; i < cnt; i++)
            h[i] += z->h2[i];
    }
    return GSB_OK;
}

static double norm(const double *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return sqrt(s);
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

/* V[j] := x / |x| after orthogonalising against V[0..j); a random direction
 * instead when x lies (numerically) in their span. */
static int set_next(lz *z, int64_t j, double *x)
{
    double *v = z->V + j * z->n;
    double nx = norm(x, z->n);
    for (uint64_t attempt = 1; nx <= 1e-10; attempt++) {
        if (attempt > 4)
            return gsb__err(GSB_ENUMERIC, "lanczos: no direction left outside the basis");
        fixed_random(x, z->n, attempt + (uint64_t)j * 131);
        GSB_TRY(orthogonalize(z, j, x, z->h));
        nx = norm(x, z->n) / sqrt((double)z->n);
    }
    nx = norm(x, z->n);
    for (int64_t i = 0; i < z->n; i++)
        v[i] = x[i] / nx;
    return GSB_OK;
}

/* Columns j0 .. ncv-1 of H, V[j0+1 .. ncv] and the residual norm. */
static int extend(lz *z, int64_t j0)
{
    const int64_t n = z->n, ncv = z->ncv;
    for (int64_t j = j0; j < ncv; j++) {
        GSB_TRY(z->op(z->data, z->V + j * n, z->w));
        z->matvecs++;
        GSB_TRY(orthogonalize(z, j + 1, z->w, z->h));
        for (int64_t i = 0; i <= j; i++)
            z->H[i * ncv + j] = z->H[j * ncv + i] = z->h[i];
        z->beta = norm(z->w, n);
        if (j + 1 < ncv || z->beta > 0.0)
            GSB_TRY(set_next(z, j + 1, z->w));
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
    const int64_t n = z->n, ncv = z->ncv;
    select_best(z, l);
    GSB_TRY(host_gemm(0, 1.0, z->sel, l, ncv, z->V, ncv, n, 0.0, z->tmp, l, n));
    memcpy(z->V + l * n, z->V + ncv * n, (size_t)n * sizeof(double));
    memcpy(z->V, z->tmp, (size_t)(l * n) * sizeof(double));
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
    free(z->V);
    free(z->H);
    free(z->S);
    free(z->theta);
    free(z->w);
    free(z->h);
    free(z->h2);
    free(z->tmp);
    free(z->sel);
}

static int lz_alloc(lz *z)
{
    const int64_t n = z->n, ncv = z->ncv;
    z->V = gsb__alloc_array((ncv + 1) * n, sizeof(double));
    z->H = gsb__calloc_array(ncv * ncv, sizeof(double));
    z->S = gsb__alloc_array(ncv * ncv, sizeof(double));
    z->theta = gsb__alloc_array(ncv, sizeof(double));
    z->w = gsb__alloc_array(n, sizeof(double));
    z->h = gsb__alloc_array(ncv, sizeof(double));
    z->h2 = gsb__alloc_array(ncv, sizeof(double));
    z->tmp = gsb__alloc_array(ncv * n, sizeof(double));
    z->sel = gsb__alloc_array(ncv * ncv, sizeof(double));
    if (z->V && z->H && z->S && z->theta && z->w && z->h && z->h2 && z->tmp && z->sel)
        return GSB_OK;
    return gsb__err(GSB_ENOMEM, "lanczos: out of memory for %lld vectors of %lld",
                    (long long)(2 * ncv + 1), (long long)n);
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
    GSB_CHECK(lz_alloc(&z));
    if (o->v0) {
        memcpy(z.w, o->v0, (size_t)z.n * sizeof(double));
    } else { /* ones, slightly perturbed so no eigenvector is missed by symmetry */
        fixed_random(z.w, z.n, 0);
        for (int64_t i = 0; i < z.n; i++)
            z.w[i] = 1.0 + 1e-3 * z.w[i];
    }
    GSB_CHECK(set_next(&z, 0, z.w));

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
    select_best(&z, nev);
    GSB_CHECK(host_gemm(0, 1.0, z.sel, nev, z.ncv, z.V, z.ncv, z.n, 0.0, evecs, nev, z.n));
    for (int64_t r = 0; r < nev; r++)
        evals[r] = z.theta[z.ncv - 1 - r];
done:
    if (matvecs)
        *matvecs = z.matvecs;
    lz_free(&z);
    return rc;
}
