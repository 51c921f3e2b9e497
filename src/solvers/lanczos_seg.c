/*
 * lanczos_seg.c - thick-restart Lanczos on a block-diagonal operator, all
 * blocks in lockstep (see lanczos_seg.h; the method is lanczos.c's).
 *
 * The vectors are n elements holding every block's part: V ((ncv + 1) x
 * n), basis vector j of block c in V[j][seg[c] .. seg[c + 1]).  A step
 * applies the whole operator once (block-diagonal: the blocks do not mix),
 * then per block: two passes of classical Gram-Schmidt against its earlier
 * vectors (seg_dots, seg_combine) and its norm (seg_normalize).  Each pass's
 * projections and the norms go into a row of `hist` on the backend, which a
 * cycle downloads once; the host adds the two passes into each block's
 * projected matrix H_c, solves H_c's eigenproblem and chooses what to keep
 * at a restart, as lanczos.c.  A block that converges (or breaks down) stops
 * being read: its Ritz vectors are taken at that cycle; its part of the
 * vectors keeps being computed until every block is done (the blocks never
 * mix, so that costs only the elements streamed).  No step waits on the
 * host.
 */
#include "solvers/lanczos_seg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/tensor.h"

enum { RUNNING = 0, CONVERGED = 1, SPENT = 2, BROKEN = -1 };

typedef struct lzs {
    const gsb__lanczos_seg_opts *o;
    const gsb__backend *be;
    gsb__linop_fn op;
    void *data;
    int64_t n, K, ncv, width; /* width: a hist row, (2 ncv + 1) K */
    /* on be */
    gsb__tensor seg;   /* K + 1 */
    gsb__tensor V;     /* (ncv + 1) x n */
    gsb__tensor w;     /* 1 x n: the direction being orthogonalised */
    gsb__tensor tmp;   /* ncv x n: Ritz vectors */
    gsb__tensor sel_d; /* ncv x (ncv K): per-block combinations (seg_combine's C) */
    gsb__tensor hist;  /* ncv x width: step j's passes at [0, (j+1) K) and [ncv K, ..), norms at [2 ncv K, + K) */
    gsb__tensor nrm;   /* K: the start vectors' norms */
    /* on the host */
    double *H;     /* K x ncv x ncv */
    double *S;     /* K x ncv x ncv */
    double *theta; /* K x ncv, ascending per block */
    double *beta;  /* K: |r| of each block's last column */
    double *sel;   /* as sel_d */
    double *xh;    /* n: the start vector */
    double *hh;    /* hist downloaded */
    double *ritz;  /* nev x n: Ritz vectors downloaded */
    int *state;    /* K */
    int *fresh;    /* K: finished this cycle */
    int64_t matvecs;
} lzs;

/* rows [r0, r0 + len) of t (a borrowed view) */
static gsb__tensor rows_of(const gsb__tensor *t, int64_t r0, int64_t len)
{
    gsb__tensor v = *t;
    v.data = (char *)t->data + (size_t)(r0 * t->cols) * gsb_dtype_size(t->dtype);
    v.rows = len;
    v.owned = 0;
    return v;
}

/* the first rows x cols elements of t as a view of that shape */
static gsb__tensor shaped(const gsb__tensor *t, int64_t rows, int64_t cols)
{
    gsb__tensor v = *t;
    v.rows = rows;
    v.cols = cols;
    v.owned = 0;
    return v;
}

/* rows x cols elements of hist's row j from element off */
static gsb__tensor hist_at(const lzs *z, int64_t j, int64_t off, int64_t rows, int64_t cols)
{
    gsb__tensor v = rows_of(&z->hist, j, 1);
    v.data = (char *)v.data + (size_t)off * sizeof(double);
    return shaped(&v, rows, cols);
}

/* Queue step j: w = A v_j, made orthogonal per block to V[0..j] (two
 * passes), V[j+1] = w / |w| per block; passes and norms into hist's row j. */
static int queue_step(lzs *z, int64_t j)
{
    const gsb__backend *be = z->be;
    const int64_t K = z->K;
    gsb__tensor v = rows_of(&z->V, j, 1), wv = shaped(&z->w, z->n, 1);
    v = shaped(&v, z->n, 1);
    GSB_TRY(z->op(z->data, &v, &wv));
    z->matvecs++;
    gsb__tensor Vc = rows_of(&z->V, 0, j + 1);
    for (int pass = 0; pass < 2; pass++) {
        gsb__tensor c = hist_at(z, j, pass * z->ncv * K, j + 1, K);
        GSB_TRY(be->ops->seg_dots(be, &Vc, &wv, &z->seg, &c));
        GSB_TRY(be->ops->seg_combine(be, -1.0, &c, &Vc, &z->seg, 1.0, &z->w));
    }
    gsb__tensor next = rows_of(&z->V, j + 1, 1), nrm = hist_at(z, j, 2 * z->ncv * K, K, 1);
    return be->ops->seg_normalize(be, &z->w, &z->seg, &next, &nrm);
}

/* Steps [j0, ncv) queued, then read back into the running blocks' H and
 * beta; a block whose norm turns (numerically) zero before the last step
 * broke down (lanczos.c would continue from a random direction: the caller
 * solves it alone). */
static int run_steps(lzs *z, int64_t j0)
{
    const int64_t ncv = z->ncv, K = z->K;
    for (int64_t j = j0; j < ncv; j++)
        GSB_TRY(queue_step(z, j));
    GSB_TRY(z->be->ops->download(z->be, &z->hist, z->hh));
    for (int64_t c = 0; c < K; c++) {
        double *H = z->H + c * ncv * ncv;
        for (int64_t j = j0; j < ncv && z->state[c] == RUNNING; j++) {
            const double *row = z->hh + j * z->width;
            for (int64_t i = 0; i <= j; i++)
                H[i * ncv + j] = H[j * ncv + i] = row[i * K + c] + row[(ncv + i) * K + c];
            z->beta[c] = row[2 * ncv * K + c];
            if (z->beta[c] <= 1e-10 && (j + 1 < ncv || z->beta[c] > 0.0))
                z->state[c] = BROKEN;
        }
    }
    return GSB_OK;
}

/* block c's theta and S from its H */
static int ritz(lzs *z, int64_t c)
{
    const gsb__backend *cpu = gsb__cpu_backend();
    const int64_t ncv = z->ncv;
    gsb__tensor th = gsb__tensor_host_view(z->H + c * ncv * ncv, GSB_F64, ncv, ncv);
    gsb__tensor tw = gsb__tensor_host_view(z->theta + c * ncv, GSB_F64, ncv, 1);
    gsb__tensor ts = gsb__tensor_host_view(z->S + c * ncv * ncv, GSB_F64, ncv, ncv);
    return cpu->ops->eigh(cpu, &th, &tw, &ts);
}

/* the largest residual norm of block c's nev best Ritz pairs (NaN: not converged) */
static double worst_residual(const lzs *z, int64_t c)
{
    const int64_t ncv = z->ncv, last = ncv - 1;
    const double *S = z->S + c * ncv * ncv;
    double worst = 0.0;
    for (int64_t r = 0; r < z->o->nev; r++) {
        double res = fabs(z->beta[c] * S[last * ncv + (last - r)]);
        worst = res > worst || isnan(res) ? res : worst;
    }
    return worst;
}

/* rows [0, cnt) of tmp: the running (and fresh) blocks' Ritz vectors of
 * their cnt largest values; the other blocks' parts zero */
static int ritz_vectors(lzs *z, int64_t cnt)
{
    const gsb__backend *be = z->be;
    const int64_t ncv = z->ncv, K = z->K;
    for (int64_t i = 0; i < ncv; i++)
        for (int64_t r = 0; r < cnt; r++)
            for (int64_t c = 0; c < K; c++) {
                int live = z->state[c] == RUNNING || z->fresh[c];
                z->sel[(i * cnt + r) * K + c] =
                    live ? z->S[c * ncv * ncv + i * ncv + (ncv - 1 - r)] : 0.0;
            }
    gsb__tensor sd = shaped(&z->sel_d, ncv, cnt * K), Vb = rows_of(&z->V, 0, ncv);
    gsb__tensor out = rows_of(&z->tmp, 0, cnt);
    GSB_TRY(be->ops->upload(be, &sd, z->sel));
    return be->ops->seg_combine(be, 1.0, &sd, &Vb, &z->seg, 0.0, &out);
}

/* The fresh blocks' Ritz vectors and values into the caller's arrays. */
static int take_fresh(lzs *z, double *evals, double *evecs)
{
    const int64_t nev = z->o->nev, n = z->n, ncv = z->ncv;
    GSB_TRY(ritz_vectors(z, nev));
    gsb__tensor best = rows_of(&z->tmp, 0, nev);
    GSB_TRY(z->be->ops->download(z->be, &best, z->ritz));
    for (int64_t c = 0; c < z->K; c++) {
        if (!z->fresh[c])
            continue;
        const int64_t lo = z->o->seg[c], len = z->o->seg[c + 1] - lo;
        for (int64_t r = 0; r < nev; r++) {
            memcpy(evecs + r * n + lo, z->ritz + r * n + lo, (size_t)len * sizeof(double));
            evals[c * nev + r] = z->theta[c * ncv + ncv - 1 - r];
        }
        z->fresh[c] = 0;
    }
    return GSB_OK;
}

/* Keep each running block's l best Ritz vectors and continue from its residual. */
static int restart(lzs *z, int64_t l)
{
    const gsb__backend *be = z->be;
    const int64_t ncv = z->ncv;
    GSB_TRY(ritz_vectors(z, l));
    gsb__tensor next = rows_of(&z->V, l, 1), last = rows_of(&z->V, ncv, 1);
    gsb__tensor head = rows_of(&z->V, 0, l), best = rows_of(&z->tmp, 0, l);
    GSB_TRY(be->ops->copy(be, &next, &last));
    GSB_TRY(be->ops->copy(be, &head, &best));
    for (int64_t c = 0; c < z->K; c++) {
        double *H = z->H + c * ncv * ncv;
        memset(H, 0, (size_t)(ncv * ncv) * sizeof(double));
        for (int64_t r = 0; r < l; r++)
            H[r * ncv + r] = z->theta[c * ncv + ncv - 1 - r];
    }
    return GSB_OK;
}

static int check_opts(const gsb__lanczos_seg_opts *o)
{
    int ok = o && o->K >= 1 && o->seg && o->seg[0] == 0 && o->nev >= 1 &&
             o->ncv >= o->nev + 2 && o->max_matvec >= 1 && o->tol > 0.0;
    for (int64_t c = 0; ok && c < o->K; c++)
        ok = o->seg[c + 1] - o->seg[c] >= o->ncv;
    if (!ok)
        return gsb__err(GSB_EINTERNAL, "lanczos_seg: bad options (%lld blocks, nev %lld, "
                        "ncv %lld)", o ? (long long)o->K : 0LL, o ? (long long)o->nev : 0LL,
                        o ? (long long)o->ncv : 0LL);
    return GSB_OK;
}

static void lzs_free(lzs *z)
{
    gsb__tensor_free(&z->seg);
    gsb__tensor_free(&z->V);
    gsb__tensor_free(&z->w);
    gsb__tensor_free(&z->tmp);
    gsb__tensor_free(&z->sel_d);
    gsb__tensor_free(&z->hist);
    gsb__tensor_free(&z->nrm);
    free(z->H);
    free(z->S);
    free(z->theta);
    free(z->beta);
    free(z->sel);
    free(z->xh);
    free(z->hh);
    free(z->ritz);
    free(z->state);
    free(z->fresh);
}

static int lzs_alloc(lzs *z)
{
    const gsb__backend *be = z->be;
    const int64_t n = z->n, K = z->K, ncv = z->ncv;
    GSB_TRY(gsb__tensor_alloc(be, GSB_I64, K + 1, 1, &z->seg));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv + 1, n, &z->V));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, 1, n, &z->w));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv, n, &z->tmp));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv, ncv * K, &z->sel_d));
    GSB_TRY(gsb__tensor_zeros(be, GSB_F64, ncv, z->width, &z->hist));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, K, 1, &z->nrm));
    z->H = gsb__calloc_array(K * ncv * ncv, sizeof(double));
    z->S = gsb__alloc_array(K * ncv * ncv, sizeof(double));
    z->theta = gsb__alloc_array(K * ncv, sizeof(double));
    z->beta = gsb__calloc_array(K, sizeof(double));
    z->sel = gsb__alloc_array(ncv * ncv * K, sizeof(double));
    z->xh = gsb__alloc_array(n, sizeof(double));
    z->hh = gsb__alloc_array(ncv * z->width, sizeof(double));
    z->ritz = gsb__alloc_array(z->o->nev * n, sizeof(double));
    z->state = gsb__calloc_array(K, sizeof(int));
    z->fresh = gsb__calloc_array(K, sizeof(int));
    if (z->H && z->S && z->theta && z->beta && z->sel && z->xh && z->hh && z->ritz &&
        z->state && z->fresh)
        return GSB_OK;
    return gsb__err(GSB_ENOMEM, "lanczos_seg: out of memory for %lld blocks of %lld vectors",
                    (long long)K, (long long)ncv);
}

/* V[0]: each block's part of lanczos.c's default start vector, normalised */
static int start(lzs *z)
{
    const gsb__backend *be = z->be;
    for (int64_t c = 0; c < z->K; c++)
        gsb__lanczos_default_start(z->xh + z->o->seg[c], z->o->seg[c + 1] - z->o->seg[c]);
    GSB_TRY(be->ops->upload(be, &z->seg, z->o->seg));
    GSB_TRY(be->ops->upload(be, &z->w, z->xh));
    gsb__tensor v0 = rows_of(&z->V, 0, 1);
    return be->ops->seg_normalize(be, &z->w, &z->seg, &v0, &z->nrm);
}

/* Eigenproblems of the running blocks after a cycle: the converged ones
 * marked fresh; *worst: the largest residual of those still running. */
static int check_blocks(lzs *z, double *worst)
{
    *worst = 0.0;
    for (int64_t c = 0; c < z->K; c++) {
        if (z->state[c] != RUNNING)
            continue;
        GSB_TRY(ritz(z, c));
        double res = worst_residual(z, c);
        if (res <= z->o->tol) {
            z->state[c] = CONVERGED;
            z->fresh[c] = 1;
        } else if (res > *worst || isnan(res)) {
            *worst = res;
        }
    }
    return GSB_OK;
}

int gsb__lanczos_seg_largest(gsb__linop_fn op, void *data, const gsb__lanczos_seg_opts *o,
                             double *evals, double *evecs, int *status, int64_t *matvecs)
{
    GSB_TRY(check_opts(o));
    lzs z = {0};
    z.o = o;
    z.be = o->be ? o->be : gsb__cpu_backend();
    z.op = op;
    z.data = data;
    z.n = o->seg[o->K];
    z.K = o->K;
    z.ncv = o->ncv;
    z.width = (2 * o->ncv + 1) * o->K;
    int rc;
    GSB_CHECK(lzs_alloc(&z));
    GSB_CHECK(start(&z));

    const int64_t nev = o->nev;
    int64_t keep = nev + (z.ncv - nev) / 2;
    keep = keep > z.ncv - 2 ? z.ncv - 2 : keep;
    for (int64_t j0 = 0;; j0 = keep) {
        GSB_CHECK(run_steps(&z, j0));
        double worst;
        GSB_CHECK(check_blocks(&z, &worst));
        if (o->progress)
            GSB_CHECK(o->progress(o->progress_data, z.matvecs, worst));
        int running = 0, fresh = 0;
        const int spent = z.matvecs + (z.ncv - keep) > o->max_matvec;
        for (int64_t c = 0; c < z.K; c++) {
            if (spent && z.state[c] == RUNNING) {
                z.state[c] = SPENT; /* its best pairs */
                z.fresh[c] = 1;
            }
            running += z.state[c] == RUNNING;
            fresh += z.fresh[c];
        }
        if (fresh)
            GSB_CHECK(take_fresh(&z, evals, evecs));
        if (!running)
            break;
        GSB_CHECK(restart(&z, keep));
    }
    for (int64_t c = 0; c < z.K; c++)
        status[c] = z.state[c] == CONVERGED ? 1 : (z.state[c] == BROKEN ? -1 : 0);
done:
    if (matvecs)
        *matvecs = z.matvecs;
    lzs_free(&z);
    return rc;
}
