/*
 * stream.h - streamed (out-of-core) fits: reading a host X that does not fit
 * the backend's memory in batches of rows, through the backend's staging
 * ring (backend.h's stage_* ops: pinned, 2 to 4 buffers deep, the copies of
 * batches i + 1 .. overlapping the compute on batch i), and the per-batch sufficient
 * statistics the streamed fits accumulate.
 *
 * An estimator's fit asks gsb__stream_plan_for whether X fits; if not, it
 * opens a stream over X (and the row-aligned inputs that go with it: y,
 * sample weights), reads batch after batch, accumulates statistics on the
 * backend (syrk / gemm with beta = 1, axpy) or merges small ones on the host,
 * and finishes from the statistics.  Passes can repeat (KMeans: one per
 * iteration).  Everything is written against the ops, so the same batches run
 * on the CPU backend when the session has a memory cap: that is how the
 * batching is tested without a GPU.  Method inputs that stream carry
 * GSB__IN_STREAM (core/estimator.h); the dispatcher refuses an X too large
 * for the others.
 *
 * The statistics (stats below) are those of the partial-statistics methods
 * that distributed fits merge (estimators/common/partial_stats.h on the dask
 * branch: column moments merged pairwise, centred cross-products): one
 * accumulation, two transports.
 */
#ifndef GSB_ESTIMATORS_COMMON_STREAM_H
#define GSB_ESTIMATORS_COMMON_STREAM_H

#include "core/estimator.h"

/* ---- planning ------------------------------------------------------------- */

typedef struct gsb__stream_plan {
    int streamed;       /* X does not fit: read it in batches */
    int64_t batch_rows; /* rows per batch when streamed */
    size_t budget;      /* the backend memory the call may use (core/budget.h) */
    size_t ring_bytes;  /* what the staging ring may take when streamed: room for
                           more than the two buffers the batch size assumes */
} gsb__stream_plan;

/*
 * Does X (c's X input) fit c->be?  The in-memory path holds `copies` arrays
 * of X's size on the backend (X itself when it has to be uploaded, centred
 * copies, workspaces); `fixed` is the model's state there (a Gram matrix,
 * centres), `row_bytes` what each streamed row needs besides its X row in the
 * ring (the row-aligned inputs, per-batch temporaries).  A host X that does
 * not fit is streamed; X already on the backend never is.  GSB_ENOMEM when
 * not even `fixed` and one row fit.
 */
int gsb__stream_plan_for(gsb__ctx *c, const gsb__tensor *X, double copies, size_t fixed,
                         size_t row_bytes, gsb__stream_plan *out);

/* ---- the stream ----------------------------------------------------------- */

#define GSB__STREAM_MAX_EXTRA 3

typedef struct gsb__batch {
    int64_t first, rows;                      /* rows [first, first + rows) of X */
    int64_t index;                            /* the batch's number in the pass */
    gsb__tensor X;                            /* rows of X on the backend (borrowed) */
    gsb__tensor extra[GSB__STREAM_MAX_EXTRA]; /* the same rows of each extra input */
} gsb__batch;

typedef struct gsb__stream {
    gsb__ctx *c;
    const gsb__backend *be;
    gsb__stage *ring;
    int nbuf;
    const gsb__tensor *src[1 + GSB__STREAM_MAX_EXTRA]; /* X, then the extras (host) */
    int nsrc;
    size_t row_bytes[1 + GSB__STREAM_MAX_EXTRA], offset[1 + GSB__STREAM_MAX_EXTRA];
    int64_t n, batch_rows, nbatches;
    /* fill numbers, counted on over passes (fill g goes to buffer g % nbuf):
     * the first of the current pass, the next to queue, the next to hand out */
    int64_t pass_start, next_fill, next_out;
    int repeat;                  /* opened for several passes: fills run on into the next */
    int held;                    /* a batch is out (its buffer to release) */
    int registered;              /* X was page-locked for the fit (host_register) */
    int check;                   /* X's values unchecked (gsb__ctx.x_unchecked): each batch
                                    is checked for NaN / infinity when it lands, until a
                                    pass has checked them all */
    /* $GSB_STREAM_TRACE: the host's time from a pass's end to the next pass's
     * first batch (the link runs on only the fills queued across the end) */
    int trace;
    int64_t passes, gaps;
    double pass_end_ms, gap_sum_ms, gap_max_ms; /* pass_end_ms < 0: inside a pass */
    int64_t gap_max_before;                      /* the pass that the largest came before */
} gsb__stream;

/*
 * Open a stream over host tensor X (rows x cols) and n_extra row-aligned host
 * tensors (NULL entries are skipped: their batch tensors stay empty), in
 * batches of plan->batch_rows rows.  passes > 1 (an iterative fit) asks for X
 * to be page-locked for the fit when the backend allows it, so every pass
 * after the first DMAs straight from it, and has the end of each pass queue
 * the next one's first batches.  Close with gsb__stream_close.
 */
int gsb__stream_open(gsb__ctx *c, const gsb__stream_plan *plan, const gsb__tensor *X,
                     const gsb__tensor *const *extra, int n_extra, int passes, gsb__stream *s);
/*
 * The next batch of the pass: *more = 1 and *b filled, or *more = 0 at the
 * end of the pass.  The batch's tensors are valid until the next call; the
 * compute queued on them before then is what the next fill of their buffer
 * waits for.  Also the place where a cancel is noticed (GSB_ECANCELLED), and
 * where a batch of an X whose check the dispatcher deferred to the stream is
 * checked for NaN and infinity on the backend before the caller sees it
 * (GSB_EINVAL, scikit-learn's message; the dispatcher words it for X as a
 * whole and keeps the model as it was).
 */
int gsb__stream_next(gsb__stream *s, gsb__batch *b, int *more);
/* Start the next pass (after the end of one, or in the middle; at the start
 * of one it changes nothing). */
int gsb__stream_rewind(gsb__stream *s);
void gsb__stream_close(gsb__stream *s);

/* ---- statistics accumulated over batches ----------------------------------- */

/*
 * Column moments of streamed rows (StandardScaler, the KMeans tolerance):
 * per column the weighted mean and M2 = sum w (x - mean)^2 in double, merged
 * batch by batch with Chan, Golub and LeVeque's pairwise update; min and max.
 */
typedef struct gsb__moments {
    int64_t d;
    double wsum;       /* total weight (rows without weights) */
    int64_t rows;
    double *mean, *m2; /* d each */
    double *min, *max; /* d each, when asked for */
} gsb__moments;

int gsb__moments_init(gsb__moments *m, int64_t d, int want_minmax);
/* Merge batch X (rows on c->be) with weights w (float64 on the backend, may be
 * NULL) whose total is wsum (the row count without weights). */
int gsb__moments_add(gsb__ctx *c, gsb__moments *m, const gsb__tensor *X, const gsb__tensor *w,
                     double wsum);
void gsb__moments_free(gsb__moments *m);

/* The total of host float64 weights w over rows [first, first + rows) (rows
 * when w is NULL): a batch's weight. */
double gsb__stream_wsum(const gsb__tensor *w, int64_t first, int64_t rows);

/*
 * X's column moments (with min and max when asked) streamed when X does not
 * fit c->be: *streamed = 1 and m filled (free it).  Otherwise *streamed = 0
 * and m is untouched: the caller's in-memory path runs.  w: host float64
 * sample weights (n) or NULL.
 */
int gsb__stream_col_moments(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *w,
                            int want_minmax, gsb__moments *m, int *streamed);

/*
 * out (a new host tensor, X's rows x out_cols of dtype) = fn applied to each
 * batch of X: fn(c, the batch's rows on c->be, arg, &result) makes a tensor
 * of the batch's rows x out_cols (on any backend; freed here), which lands in
 * out's rows.  Transforms and projections of an X larger than the backend.
 */
typedef int (*gsb__batch_fn)(gsb__ctx *c, const gsb__tensor *Xb, void *arg, gsb__tensor *res);
int gsb__stream_map(gsb__ctx *c, const gsb__stream_plan *plan, const gsb__tensor *X,
                    gsb__batch_fn fn, void *arg, gsb_dtype dtype, int64_t out_cols,
                    gsb__tensor *out);

/*
 * Centred cross-products of streamed rows (LinearRegression, Ridge, PCA,
 * TruncatedSVD): with z = [x | y] and weights w, shifted by s (the first
 * batch's mean) for precision,
 *   G = sum w (x - s)(x - s)^T,  B = sum w (x - s)(y - t)^T,  u = sum w (x - s),
 *   v = sum w (y - t),  W = sum w,
 * accumulated in float64 on the backend; gsb__gram_finish turns them into
 * the means and the co-moments about them: C_xx = G - u u^T / W (p x p),
 * C_xy = B - u v^T / W (p x k), as host doubles.  centre = 0 keeps s = t = 0
 * and gives the uncentred sums (no intercept, TruncatedSVD; u and v are
 * then not formed).
 */
typedef struct gsb__gram {
    int64_t p, k;
    int centre;
    double *shift_x, *shift_y; /* s (p), t (k) on the host; NULL until the first batch */
    gsb__tensor S, T;          /* the same on the backend (float64) */
    gsb__tensor G, B, U, V;    /* p x p, p x k, p, k float64 sums on the backend */
    double wsum;
    int64_t rows;
} gsb__gram;

int gsb__gram_init(gsb__ctx *c, gsb__gram *g, int64_t p, int64_t k, int centre);
/* Add batch X (n x p), Y (n x k, or NULL when k == 0) with sw the square roots
 * of the sample weights (n, float64 on the backend, or NULL for unit weights)
 * and wsum their total (the row count without) to the sums.  No host wait. */
int gsb__gram_add(gsb__ctx *c, gsb__gram *g, const gsb__tensor *X, const gsb__tensor *Y,
                  const gsb__tensor *sw, double wsum);
/* Means (p and k host doubles, zeros without centring) and co-moments
 * Cxx (p x p) and Cxy (p x k) as malloc'ed host doubles. */
int gsb__gram_finish(gsb__gram *g, double **mean_x, double **mean_y, double **Cxx, double **Cxy);
void gsb__gram_free(gsb__gram *g);

#endif
