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
#include "solvers/lanczos_state.h"

enum { RUNNING = 0, CONVERGED = 1, SPENT = 2, BROKEN = -1 };

typedef struct lzs {
    const gsb__lanczos_seg_opts *o;
    /* K blocks; hist rows (width (2 ncv + 1) K): step j's passes at [0, (j+1) K)
     * and [ncv K, ..), norms at [2 ncv K, + K) */
    gsb__lz_state s;
    gsb__linop_fn op;
    void *data;
    int64_t n, K, ncv;
    /* on the backend */
    gsb__tensor seg; /* K + 1 */
    gsb__tensor nrm; /* K: the start vectors' norms */
    /* on the host */
    double *beta; /* K: |r| of each block's last column */
    double *ritz; /* nev x n: Ritz vectors downloaded */
    int *state;   /* K */
    int *fresh;   /* K: finished this cycle */
    int64_t matvecs;
} lzs;

/* Queue step j: w = A v_j, made orthogonal per block to V[0..j] (two
 * passes), V[j+1] = w / |w| per block; passes and norms into hist's row j. */
static int queue_step(lzs *z, int64_t j)
{
    const gsb__backend *be = z->s.be;
    const int64_t K = z->K;
    gsb__tensor v = gsb__lz_basis(&z->s, j), wr = gsb__lz_shaped(&z->s.w, 1, z->n);
    GSB_TRY(z->op(z->data, &v, &z->s.w));
    z->matvecs++;
    gsb__tensor Vc = gsb__tensor_rows(&z->s.V, 0, j + 1);
    for (int pass = 0; pass < 2; pass++) {
        gsb__tensor c = gsb__lz_hist_at(&z->s, j, pass * z->ncv * K, j + 1, K);
        GSB_TRY(be->ops->seg_dots(be, &Vc, &z->s.w, &z->seg, &c));
        GSB_TRY(be->ops->seg_combine(be, -1.0, &c, &Vc, &z->seg, 1.0, &wr));
    }
    gsb__tensor next = gsb__tensor_rows(&z->s.V, j + 1, 1);
    gsb__tensor nrm = gsb__lz_hist_at(&z->s, j, 2 * z->ncv * K, K, 1);
    return be->ops->seg_normalize(be, &wr, &z->seg, &next, &nrm);
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
    GSB_TRY(z->s.be->ops->download(z->s.be, &z->s.hist, z->s.hh));
    for (int64_t c = 0; c < K; c++) {
        double *H = z->s.H + c * ncv * ncv;
        for (int64_t j = j0; j < ncv && z->state[c] == RUNNING; j++) {
            const double *row = z->s.hh + j * z->s.width;
            for (int64_t i = 0; i <= j; i++)
                H[i * ncv + j] = H[j * ncv + i] = row[i * K + c] + row[(ncv + i) * K + c];
            z->beta[c] = row[2 * ncv * K + c];
            if (z->beta[c] <= 1e-10 && (j + 1 < ncv || z->beta[c] > 0.0))
                z->state[c] = BROKEN;
        }
    }
    return GSB_OK;
}

/* rows [0, cnt) of tmp: the running (and fresh) blocks' Ritz vectors of
 * their cnt largest values; the other blocks' parts zero */
static int ritz_vectors(lzs *z, int64_t cnt)
{
    const gsb__backend *be = z->s.be;
    const int64_t ncv = z->ncv, K = z->K;
    for (int64_t i = 0; i < ncv; i++)
        for (int64_t r = 0; r < cnt; r++)
            for (int64_t c = 0; c < K; c++) {
                int live = z->state[c] == RUNNING || z->fresh[c];
                z->s.sel[(i * cnt + r) * K + c] =
                    live ? z->s.S[c * ncv * ncv + i * ncv + (ncv - 1 - r)] : 0.0;
            }
    gsb__tensor sd = gsb__lz_shaped(&z->s.sel_d, ncv, cnt * K);
    gsb__tensor Vb = gsb__tensor_rows(&z->s.V, 0, ncv), out = gsb__tensor_rows(&z->s.tmp, 0, cnt);
    GSB_TRY(be->ops->upload(be, &sd, z->s.sel));
    return be->ops->seg_combine(be, 1.0, &sd, &Vb, &z->seg, 0.0, &out);
}

/* The fresh blocks' Ritz vectors and values into the caller's arrays. */
static int take_fresh(lzs *z, double *evals, double *evecs)
{
    const int64_t nev = z->o->nev, n = z->n, ncv = z->ncv;
    GSB_TRY(ritz_vectors(z, nev));
    gsb__tensor best = gsb__tensor_rows(&z->s.tmp, 0, nev);
    GSB_TRY(z->s.be->ops->download(z->s.be, &best, z->ritz));
    for (int64_t c = 0; c < z->K; c++) {
        if (!z->fresh[c])
            continue;
        const int64_t lo = z->o->seg[c], len = z->o->seg[c + 1] - lo;
        for (int64_t r = 0; r < nev; r++) {
            memcpy(evecs + r * n + lo, z->ritz + r * n + lo, (size_t)len * sizeof(double));
            evals[c * nev + r] = z->s.theta[c * ncv + ncv - 1 - r];
        }
        z->fresh[c] = 0;
    }
    return GSB_OK;
}

static int check_opts(const gsb__lanczos_seg_opts *o)
{
    int ok = o && o->K >= 1 && o->seg && o->seg[0] == 0 &&
             gsb__lz_opts_ok(o->nev, o->ncv, o->max_matvec, o->tol);
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
    gsb__lz_state_free(&z->s);
    gsb__tensor_free(&z->seg);
    gsb__tensor_free(&z->nrm);
    free(z->beta);
    free(z->ritz);
    free(z->state);
    free(z->fresh);
}

static int lzs_alloc(lzs *z, const gsb__backend *be)
{
    const int64_t n = z->n, K = z->K, ncv = z->ncv;
    GSB_TRY(gsb__lz_state_alloc(&z->s, be, n, ncv, K, (2 * ncv + 1) * K, "lanczos_seg"));
    GSB_TRY(gsb__tensor_alloc(be, GSB_I64, K + 1, 1, &z->seg));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, K, 1, &z->nrm));
    z->beta = gsb__calloc_array(K, sizeof(double));
    z->ritz = gsb__alloc_array(z->o->nev * n, sizeof(double));
    z->state = gsb__calloc_array(K, sizeof(int));
    z->fresh = gsb__calloc_array(K, sizeof(int));
    if (z->beta && z->ritz && z->state && z->fresh)
        return GSB_OK;
    return gsb__err(GSB_ENOMEM, "lanczos_seg: out of memory for %lld blocks of %lld vectors",
                    (long long)K, (long long)ncv);
}

/* V[0]: each block's part of lanczos.c's default start vector, normalised */
static int start(lzs *z)
{
    const gsb__backend *be = z->s.be;
    for (int64_t c = 0; c < z->K; c++)
        gsb__lanczos_default_start(z->s.xh + z->o->seg[c], z->o->seg[c + 1] - z->o->seg[c]);
    GSB_TRY(be->ops->upload(be, &z->seg, z->o->seg));
    GSB_TRY(be->ops->upload(be, &z->s.w, z->s.xh));
    gsb__tensor v0 = gsb__tensor_rows(&z->s.V, 0, 1), wr = gsb__lz_shaped(&z->s.w, 1, z->n);
    return be->ops->seg_normalize(be, &wr, &z->seg, &v0, &z->nrm);
}

/* Eigenproblems of the running blocks after a cycle: the converged ones
 * marked fresh; *worst: the largest residual of those still running. */
static int check_blocks(lzs *z, double *worst)
{
    *worst = 0.0;
    for (int64_t c = 0; c < z->K; c++) {
        if (z->state[c] != RUNNING)
            continue;
        GSB_TRY(gsb__lz_ritz(&z->s, c));
        double res = gsb__lz_worst_residual(&z->s, c, z->beta[c], z->o->nev);
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
    z.op = op;
    z.data = data;
    z.n = o->seg[o->K];
    z.K = o->K;
    z.ncv = o->ncv;
    int rc;
    GSB_CHECK(lzs_alloc(&z, o->be ? o->be : gsb__cpu_backend()));
    GSB_CHECK(start(&z));

    const int64_t keep = gsb__lz_keep(o->nev, z.ncv);
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
        /* each running block keeps its l best Ritz vectors, continues from its residual */
        GSB_CHECK(ritz_vectors(&z, keep));
        GSB_CHECK(gsb__lz_restart(&z.s, keep));
    }
    for (int64_t c = 0; c < z.K; c++)
        status[c] = z.state[c] == CONVERGED ? 1 : (z.state[c] == BROKEN ? -1 : 0);
done:
    if (matvecs)
        *matvecs = z.matvecs;
    lzs_free(&z);
    return rc;
}
