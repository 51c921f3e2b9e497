/*
 * backend.h - the compute backend interface (a vtable of ops).
 *
 * Estimators are host-side orchestration written once against these ops;
 * each backend (cpu/, cuda/) fills a gsb__backend_ops table.  Tensors live
 * in the backend's memory (host memory for the CPU backend, device memory
 * for CUDA); estimators never dereference tensor data of a non-host backend,
 * they download what they need to look at.
 *
 * Conventions for every op:
 *  - tensors are dense, row-major, contiguous: element (i, j) of a rows x cols
 *    tensor is at i * cols + j.  A vector is a rows x 1 tensor.
 *  - float inputs of one op share one dtype (GSB_F32 or GSB_F64) unless the
 *    op says otherwise; small parameter vectors (sub/mul/add, weights) may be
 *    of either float dtype.  Accumulation is in double on the CPU.
 *  - output tensors are allocated by the caller with the documented shape;
 *    an op writes every element of its outputs.
 *  - a row range of a tensor is a valid tensor on every backend: data
 *    advanced by first_row * cols elements, rows set to the range's length
 *    (estimators slice blocks this way; a backend's pointers must allow it).
 *  - ops return GSB_OK or a status set with gsb__err().
 */
#ifndef GSB_BACKEND_H
#define GSB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "gsb.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend's .cu files include this header */
#endif

typedef struct gsb__backend gsb__backend;
struct gsb__umap_sgd; /* umap_sgd_epoch's scalars: backend/umap_sgd.h */

typedef struct gsb__tensor {
    void *data;
    gsb_dtype dtype;
    int64_t rows, cols;
    int ndim;               /* as users see it: 0 scalar (1 x 1), 1 vector
                               (rows x 1), 2 matrix; ops ignore it */
    const gsb__backend *be; /* the backend whose memory holds data */
    int owned;              /* 1: release data with be->ops->release */
} gsb__tensor;

typedef enum gsb__metric {
    GSB__METRIC_SQEUCLIDEAN = 0, /* squared euclidean */
    GSB__METRIC_EUCLIDEAN = 1,
    GSB__METRIC_MANHATTAN = 2,
    GSB__METRIC_COSINE = 3,      /* 1 - cos(x, y); 0-norm rows count as cos = 0 */
    /* radius_neighbors only: */
    GSB__METRIC_MINKOWSKI = 4,   /* (sum |x - y|^p)^(1/p), p > 0 */
    GSB__METRIC_CHEBYSHEV = 5    /* max |x - y| */
} gsb__metric;

/* enet_cd_gram's settings (the solver's, see solvers/coordinate_descent.h) */
typedef struct gsb__enet_cd_params {
    double alpha, beta; /* L1 and L2 strengths of 1/2 ||y - Xw||^2 + alpha |w|_1 + beta/2 |w|^2 */
    double tol;         /* relative: stop at gap <= tol ||y||^2 */
    int64_t max_iter;   /* epochs, >= 1 */
    int positive, random, screening;
    uint64_t seed;
} gsb__enet_cd_params;

/* ---- random forests: what the tree ops share (estimators/ensemble/) ------
 * Statistics of a set of samples ("stats", V1 doubles, gsb__forest_nstats):
 * [0] the number of samples, then the sums of their weights w:
 *   classification: [1 + k] the weight of class k (k < n_classes);
 *   regression:     [1] the weight, [2 + k] sum w y_k, [2 + O + k] sum w q_k
 *                   (q = y^2, or y log y for the Poisson criterion; O outputs).
 * A histogram holds the stats of each (feature, bin): n_features x n_bins x V1
 * doubles; the pool holds one histogram per slot (slots x that, GSB_F64).
 * A node is a segment [start, end) of the sample arrays (rows, weights); the
 * trees of a batch own disjoint segments.  Binned X ("codes") is n rows of
 * n_features bytes, packed into an n x ceil(n_features / 4) GSB_I32 tensor
 * (byte f of row i is code f of row i; padding bytes are 0); codes are
 * < n_bins, and nan_code (the last code, when X had NaN) marks a missing value.
 * The tensors of gsb__forest_data live on the op's backend; the small ones
 * an op call takes (nodes, feats, splits, pairs, best, n_left) may also be
 * host tensors (a GPU backend plans its grid from them and copies them). */
typedef struct gsb__forest_data {
    const gsb__tensor *codes;
    int64_t n_features;
    int n_bins;             /* codes per feature, nan_code included */
    int nan_code;           /* n_bins - 1 (the last code marks missing values), or -1:
                               no missing values */
    int n_classes;          /* > 0: classification, y is (n, GSB_I32) class indices */
    int n_outputs;          /* regression: y is n x 2 * n_outputs GSB_F64, [y_k, q_k] */
    const gsb__tensor *y;
    gsb__tensor *rows;      /* S, GSB_I32: the row of each sample */
    gsb__tensor *weights;   /* S, GSB_F32: its weight (> 0) */
    gsb__tensor *scratch_rows, *scratch_weights; /* S each: forest_partition's */
    gsb__tensor *pool;      /* slots x (n_features * n_bins * V1), GSB_F64, or NULL */
} gsb__forest_data;

/* How forest_split scores a split: scikit-learn's proxy improvement of the
 * criterion, among candidates leaving >= min_samples_leaf samples and
 * >= min_weight_leaf weight on each side. */
enum { GSB__FOREST_GINI = 0, GSB__FOREST_ENTROPY, GSB__FOREST_MSE, GSB__FOREST_POISSON };
typedef struct gsb__forest_rule {
    int criterion;          /* GSB__FOREST_*, of the data's kind */
    int64_t min_samples_leaf;
    double min_weight_leaf;
    int first_only;         /* 1: only the first non-constant feature listed competes */
} gsb__forest_rule;

/* How a tree grows breadth first (scikit-learn's builders' leaf rules; the
 * level ops and the growers share them through backend/forest_level.h). */
typedef struct gsb__forest_grow_rule {
    int criterion;              /* GSB__FOREST_* */
    int64_t max_depth;          /* INT64_MAX: none */
    int64_t min_samples_split, min_samples_leaf;
    double min_weight_leaf, min_impurity_decrease;
    int64_t max_features;       /* features drawn per node, 1 .. n_features */
} gsb__forest_grow_rule;

/*
 * One level of breadth-first growth of a group of trees, every tensor on the
 * op's backend (column layouts in backend/forest_level.h).  The frontier's n
 * nodes are in tree order, then node order; a node's samples are a segment
 * of the data's sample arrays, and the segments follow the frontier's order.
 *   front    n x GSB__FLV_FRONT GSB_I32: tree, id (its number in its tree),
 *            start, end, depth
 *   stats    n x V1 GSB_F64: the node's stats
 *   map, recs  pass 0 (drawn features, positions [0, m) of the node's
 *            permutation): map (n GSB_I32) each node's row of recs, -1 for
 *            no candidate; recs (rows of forest_split's records, GSB_F64)
 *   map2, recs2  pass 1 (positions [m, n_features), first_only), of the
 *            candidates whose drawn features were all constant; NULL when
 *            m = n_features
 *   seeds    T GSB_I64: each tree's seed; root_w: T GSB_F64 its root's weight
 *   tcount   T GSB_I32: nodes each tree has so far (updated by decide)
 *   nodes    n x GSB__FLV_NODE GSB_I32 (decide writes): each node as it ends
 *            the level: its frontier columns, feature (-1: a leaf), bin_lo,
 *            bin_hi, missing_left, the left child's id
 *   imp      n GSB_F64 (decide writes): the importance term of its split (0)
 *   splits   n x GSB__FLS_COLS GSB_I32 (decide writes, partition reads)
 *   kids, kid_stats: 2n rows (decide writes the first 2 n_split): the next
 *            frontier and its stats
 *   counts   2 GSB_I32: [0] candidates (feats) or n_split (decide), [1] the
 *            nodes whose partition disagreed with the split search
 *            (partition; 0 unless a bug)
 *   owner    S GSB_I32: the frontier node of each sample, -1 once in a leaf
 *   slots    n GSB_I32: each node's histogram slot in the data's pool (-1:
 *            none), forest_level_feats' seg column 2; NULL: no slots
 */
typedef struct gsb__forest_level {
    int64_t n;
    const gsb__tensor *front, *stats, *map, *recs, *map2, *recs2, *seeds, *root_w;
    gsb__tensor *tcount, *nodes, *imp, *splits, *kids, *kid_stats, *counts, *owner;
    const gsb__tensor *slots;
} gsb__forest_level;

/* Fitted trees, all concatenated (node indices are global). */
typedef struct gsb__forest_trees {
    const gsb__tensor *split;     /* N, GSB_I32: 2 * feature + (1 if NaN goes left); -1 leaf */
    const gsb__tensor *threshold; /* N, GSB_F32: float32(x) <= threshold goes left */
    const gsb__tensor *child;     /* N, GSB_I32: the left child (right = left + 1); at a
                                     leaf, its row of value */
    const gsb__tensor *root;      /* T, GSB_I32: each tree's root; a tree's nodes are
                                     root .. the next root - 1 */
    const gsb__tensor *value;     /* L x K, GSB_F32: each leaf's values */
} gsb__forest_trees;
/*
 * A grid of cells over the rows of R for radius_neighbors (1 to 3 columns):
 * the cell of a row x is c_k = floor((x_k - origin[k]) / cell[k]) along each
 * column k, in [0, ncell[k]) for R's rows, and its key sum_k c_k stride[k]
 * with stride[dims - 1] = 1 and stride[k] = stride[k + 1] ncell[k + 1] (so
 * the cells adjacent along the last column have consecutive keys).  R's rows
 * are sorted by key (keys ascending), and every neighbour of a query lies in
 * a cell within +-1 of the query's cell along each column (the caller picks
 * cell[k] > the radius along one column).
 */
typedef struct gsb__radius_grid {
    const gsb__tensor *keys; /* (nr, GSB_I64) on the op's backend, ascending */
    int dims;                /* = the column count of Q and R, 1..3 */
    double origin[3], cell[3];
    int64_t ncell[3], stride[3];
} gsb__radius_grid;
/*
 * The two-level SMO's state (solvers/smo_blocks.h): the dual of an SVM over l
 * variables, variable t on row real[t] of the n x n kernel matrix K, in the
 * scaled gradient f_t = y_t G_t (G = Q alpha + p, Q_st = y_s y_t K[real_s][real_t]).
 * I_up = {t: y_t = +1, alpha_t < C_t, or y_t = -1, alpha_t > 0}, I_low = {t:
 * y_t = +1, alpha_t > 0, or y_t = -1, alpha_t < C_t}; libsvm's maximal violation
 * is max_{I_low} f - min_{I_up} f.  Every tensor is on the op's backend.
 */
typedef struct gsb__svm_state {
    const gsb__tensor *real;  /* l, GSB_I32: each variable's row of K, in [0, n) */
    const gsb__tensor *y;     /* l, GSB_I32: +1 or -1 */
    const gsb__tensor *C;     /* l, GSB_F64: upper bounds (>= 0) */
    const gsb__tensor *QD;    /* l, GSB_F64: K[real_t][real_t] */
    gsb__tensor *f;           /* l, GSB_F64 */
    gsb__tensor *alpha;       /* l, GSB_F64 */
    gsb__tensor *cache;       /* slots x n, GSB_F32: kernel rows, one per slot */
} gsb__svm_state;
/* the staging ring of stage_open (opaque) and one host range a fill copies */
typedef struct gsb__stage gsb__stage;
typedef struct gsb__stage_seg {
    const void *host;
    size_t bytes;
    size_t offset; /* in the buffer */
} gsb__stage_seg;
#define GSB__STAGE_MAX_BUFFERS 4

/* copy_stats: host <-> device traffic */
typedef struct gsb__copy_stats {
    uint64_t h2d_count, h2d_bytes; /* uploads and stage fills */
    uint64_t d2h_count, d2h_bytes; /* downloads */
} gsb__copy_stats;

typedef struct gsb__backend_ops {
    /* ---- memory ------------------------------------------------------- */
    /* t->dtype, rows, cols set by the caller; sets data, be, owned. */
    int (*alloc)(const gsb__backend *be, gsb__tensor *t);
    void (*release)(const gsb__backend *be, gsb__tensor *t);
    /* host is contiguous row-major of dst->dtype with rows*cols elements */
    int (*upload)(const gsb__backend *be, gsb__tensor *dst, const void *host);
    int (*download)(const gsb__backend *be, const gsb__tensor *src, void *host);
    /* same element count; converts dtype when dst and src differ */
    int (*copy)(const gsb__backend *be, gsb__tensor *dst, const gsb__tensor *src);
    int (*fill)(const gsb__backend *be, gsb__tensor *t, double value);

    /* ---- dense linear algebra (float dtypes) --------------------------- */
    /* C = alpha * op(A) @ op(B) + beta * C; op transposes when trans != 0 */
    int (*gemm)(const gsb__backend *be, int trans_a, int trans_b, double alpha,
                const gsb__tensor *A, const gsb__tensor *B, double beta, gsb__tensor *C);
    /* C (n x n) = alpha * A^T A + beta * C for A (m x n); both triangles written;
     * with beta != 0 only C's upper triangle is read (C must be symmetric) */
    int (*syrk)(const gsb__backend *be, double alpha, const gsb__tensor *A, double beta,
                gsb__tensor *C);
    /* symmetric A (n x n, unchanged): eigenvalues w (n) ascending and
     * eigenvectors as the columns of V (n x n): V[i*n + j] is entry i of vector j */
    int (*eigh)(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *w, gsb__tensor *V);
    /* solve A X = B for symmetric positive definite A (n x n, unchanged);
     * B (n x k) is overwritten with X.  GSB_ENUMERIC when A is not SPD. */
    int (*posv)(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *B);
    /* thin SVD of A (m x n, unchanged), r = min(m, n): U (m x r, may be NULL),
     * S (r) descending, Vt (r x n, may be NULL) */
    int (*svd)(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *U, gsb__tensor *S,
               gsb__tensor *Vt);
    /* minimum-norm least squares min ||A X - B|| for A (m x n), B (m x k), both
     * unchanged: X (n x k), S (min(m,n)) singular values of A, *rank the count
     * of singular values > rcond * max(S); S and rank may be NULL */
    int (*lstsq)(const gsb__backend *be, const gsb__tensor *A, const gsb__tensor *B,
                 double rcond, gsb__tensor *X, gsb__tensor *S, int64_t *rank);
    /* A (m x n, m >= n) replaced by the Q of its thin QR factorisation */
    int (*orthonormalize)(const gsb__backend *be, gsb__tensor *A);

    /* ---- reductions ---------------------------------------------------- */
    /* per column of X (n x d): weighted mean and population variance
     * (sum w (x - mean)^2 / sum w); w (n) may be NULL for unit weights, var may
     * be NULL; mean/var may be float64 for float32 X (accumulation in double);
     * no rows or zero total weight gives NaN, as numpy */
    int (*col_moments)(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *w,
                       gsb__tensor *mean, gsb__tensor *var);
    int (*col_minmax)(const gsb__backend *be, const gsb__tensor *X, gsb__tensor *min,
                      gsb__tensor *max);
    /* out (n) = squared L2 norm of each row of X */
    int (*row_sqnorms)(const gsb__backend *be, const gsb__tensor *X, gsb__tensor *out);

    /* ---- elementwise --------------------------------------------------- */
    /* out[i,j] = (X[i,j] - sub[j]) * mul[j] + add[j]; a NULL vector is skipped;
     * out (same shape and dtype as X) may be X itself */
    int (*col_affine)(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *sub,
                      const gsb__tensor *mul, const gsb__tensor *add, gsb__tensor *out);
    /* X = min(max(X, lo), hi) in place */
    int (*clip)(const gsb__backend *be, gsb__tensor *X, double lo, double hi);

    /* ---- distances ----------------------------------------------------- */
    /* D (n x m) = metric(X[i], Y[j]) for X (n x d), Y (m x d) */
    int (*pairwise)(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y,
                    gsb__metric metric, gsb__tensor *D);
    /* fused: for each row of X (n x d) the nearest row of C (k x d) by squared
     * euclidean distance: labels (n, GSB_I32) and that distance mind (n, X's
     * dtype).  Ties go to the smaller index; a row equal to its centre has
     * distance exactly 0.  Never materialises n x k. */
    int (*argmin_sqdist)(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *C,
                         gsb__tensor *labels, gsb__tensor *mind);
    /* fused: for each query row of Q (nq x d) the k nearest rows of R (nr x d):
     * dist (nq x k, Q's dtype, the metric's value, ascending) and idx (nq x k,
     * GSB_I64).  Ties go to the smaller index.  exclude_self: Q is R and row i
     * must not be its own neighbour.  R may also be a host tensor (the CPU
     * backend's): the backend moves it itself (CUDA: behind the search). */
    int (*topk)(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R, int64_t k,
                gsb__metric metric, int exclude_self, gsb__tensor *dist, gsb__tensor *idx);

    /* ---- family ops ---------------------------------------------------- */
    /* KMeans centre update: sums (k x d, GSB_F64) and counts (k, GSB_F64) of
     * the rows of X per label (n, GSB_I32), each row weighted by w (n, may
     * be NULL); deterministic: the same inputs give bitwise the same sums and
     * counts (KMeans's convergence test relies on it) */
    int (*segment_sum)(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *labels,
                       const gsb__tensor *w, gsb__tensor *sums, gsb__tensor *counts);
    /* Greedy k-means++ (scikit-learn's _kmeans_plusplus), `steps` centres a
     * call, so the caller can report progress and cancel between calls.
     *   X (n x d, n >= 1), w (n, GSB_F64, may be NULL: all ones);
     *   closest (n, GSB_F64): each row's squared distance to its nearest
     *   centre chosen so far, and *pot the potential as tracked.
     *   first >= 0: start afresh with row `first` as the only centre
     *   (closest = its distances, *pot = sum_i w_i closest_i: outputs only);
     *   first < 0: continue from closest and *pot.
     * Step s draws `trials` (>= 1) candidates: candidate t is the first row i
     * with cumsum(w * closest)[i] >= u[s * trials + t] * *pot, clamped to
     * n - 1 (u: steps * trials numbers in [0, 1), host); its potential is
     * sum_i w_i min(closest_i, D_i), D_i = sum_j (x_ij - c_j)^2 in double.
     * The first of the lowest potentials wins: chosen[s] (host) = its row,
     * closest = min(closest, D), *pot = its potential.  The sums may
     * associate differently per backend (so a draw within rounding of a
     * boundary may pick a neighbouring row) but repeat bitwise on each. */
    int (*kmeanspp)(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *w,
                    int64_t first, const double *u, int64_t steps, int64_t trials,
                    gsb__tensor *closest, double *pot, int64_t *chosen);
    /* LogisticRegression objective without the penalty: multinomial (K >= 3)
     * or binary (K == 1 column, sigmoid) log-loss.
     *   X (n x d), y (n, GSB_I32 class index; binary: 0/1), w (n, may be NULL),
     *   coef (K x (d + fit_intercept), GSB_F64, intercept last),
     *   *loss = sum_i w_i loss_i, grad (same shape as coef, GSB_F64). */
    int (*logistic_loss_grad)(const gsb__backend *be, const gsb__tensor *X,
                              const gsb__tensor *y, const gsb__tensor *w,
                              const gsb__tensor *coef, int fit_intercept, double *loss,
                              gsb__tensor *grad);
    /* K (n x m) = kernel(X[i], Y[j]): kind 0 linear (x.y), 1 poly ((gamma x.y + coef0)^degree),
     * 2 rbf (exp(-gamma ||x-y||^2)), 3 sigmoid (tanh(gamma x.y + coef0)); X, Y, K one float dtype */
    int (*kernel)(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y, int kind,
                  double gamma, double coef0, int degree, gsb__tensor *K);
    /* Elastic-net coordinate descent in the Gram form for k targets sharing one
     * Gram matrix: scikit-learn's enet_coordinate_descent_gram step for step
     * (solvers/coordinate_descent.h; the per-coordinate arithmetic is
     * solvers/cd_rule.h, so the backends agree up to the rounding of sums).
     *   Q (p x p, GSB_F64, symmetric positive semi-definite: X^T X),
     *   q (k x p, GSB_F64: row t is X^T y_t), y_norm2 (k, host: ||y_t||^2),
     *   W (k x p, GSB_F64): the start in, the solution out;
     *   gap and n_iter (k each, host): the last duality gap and the epochs
     *   as scikit-learn counts them; target t draws random coordinates from
     *   seed + t.  One kernel on the GPU, one wait for the results. */
    int (*enet_cd_gram)(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *q,
                        const double *y_norm2, const gsb__enet_cd_params *cd, gsb__tensor *W,
                        double *gap, int64_t *n_iter);
    /* out (n x m) = the columns idx[0..m) (host, each in [0, p)) of X (n x p);
     * out has X's dtype */
    int (*gather_cols)(const gsb__backend *be, const gsb__tensor *X, const int64_t *idx,
                       int64_t m, gsb__tensor *out);
    /* t-SNE's gradient, in three parts (estimators/manifold/tsne.c runs the
     * descent).  Y (n x d, GSB_F32) is the embedding; with dof >= 1 degrees of
     * freedom w_ij = (1 + |y_i - y_j|^2 / dof)^(-(dof + 1) / 2).  zsum
     * (1 x 1, GSB_F64, on the backend) carries Z = sum_{i != j} w_ij from a
     * repulsion op to tsne_attract and tsne_update without a host round trip.
     * Repulsion: R (n x d, GSB_F32), R[i] = sum_j w_ij^2 (y_i - y_j), and zsum;
     *   _exact sums over every pair (j = i adds nothing);
     *   _bh     Barnes-Hut on a 2^d-tree (d <= 3), scikit-learn's: a cell whose
     *           squared max width over its squared distance to y_i is below
     *           angle^2, or a leaf, counts as its size at its centre of mass;
     *           a leaf within 1e-6 of y_i in every coordinate (y_i itself, its
     *           duplicates) is skipped.  NULL on backends without it (CUDA);
     *   _fft    FIt-SNE (Linderman et al. 2019), d 1 or 2, dof 1: Lagrange
     *           interpolation on n_interp equispaced nodes per box of the grid
     *           that backend/tsne_grid.h lays over Y's bounding box (at least
     *           min_boxes boxes a side), the kernels w^2 (charges 1 and y) and
     *           w (charge 1, for Z) convolved with the nodes by FFT. */
    int (*tsne_repulse_exact)(const gsb__backend *be, const gsb__tensor *Y, int dof,
                              gsb__tensor *R, gsb__tensor *zsum);
    int (*tsne_repulse_bh)(const gsb__backend *be, const gsb__tensor *Y, int dof, double angle,
                           gsb__tensor *R, gsb__tensor *zsum);
    int (*tsne_repulse_fft)(const gsb__backend *be, const gsb__tensor *Y, int n_interp,
                            int min_boxes, gsb__tensor *R, gsb__tensor *zsum);
    /* Attraction over the sparse P in CSR form: indptr (n + 1, GSB_I64), indices
     * (nnz, GSB_I32), val (nnz, GSB_F32), p = scale * val:
     * A (n x d, GSB_F32), A[i] = sum_{k in row i} p_k w_ij (y_i - y_j), j = indices[k].
     * kl (host, may be NULL: not computed) = sum_k p_k log(max(p_k, floor) /
     * max(w_ij / Z, floor)), Z from zsum (scikit-learn's KL divergence over P's
     * entries: floor is its clamp, float32's tiny for Barnes-Hut, float64's eps
     * for exact); summed in double. */
    int (*tsne_attract)(const gsb__backend *be, const gsb__tensor *Y, const gsb__tensor *indptr,
                        const gsb__tensor *indices, const gsb__tensor *val, double scale,
                        int dof, const gsb__tensor *zsum, double floor, gsb__tensor *A,
                        double *kl);
    /* One step of scikit-learn's _gradient_descent on the gradient
     * g = c (A - R / max(Z, eps64)), elementwise over Y, update, gains (n x d,
     * GSB_F32, updated in place): gains += 0.2 where update * g < 0, else
     * gains *= 0.8, then clipped below at min_gain; g *= gains; update =
     * momentum * update - learning_rate * g; Y += update.  grad_norm (host,
     * may be NULL: not computed) = ||g|| after the gains, summed in double. */
    int (*tsne_update)(const gsb__backend *be, gsb__tensor *Y, const gsb__tensor *A,
                       const gsb__tensor *R, const gsb__tensor *zsum, double c, double momentum,
                       double learning_rate, double min_gain, gsb__tensor *update,
                       gsb__tensor *gains, double *grad_norm);
    /* eps-neighbourhoods (DBSCAN, radius_neighbors) as CSR, in two passes:
     * the neighbours of row i of Q (nq x d) are the rows j of R (nr x d) with
     * metric(Q[i], R[j]) <= eps, decided on the value computed in double
     * straight from the inputs (expansions only pick candidates): for
     * euclidean sum (q - r)^2 <= eps^2, for minkowski sum |q - r|^p <= eps^p;
     * cosine 1 - q.r / (||q|| ||r||) clipped to [0, 2].  metric: any of
     * gsb__metric; p is minkowski's power (> 0), else unused.  grid (NULL:
     * brute force over all of R): R sorted into cells, see gsb__radius_grid.
     *   count pass (offsets NULL): counts (nq, GSB_I64) = neighbours per row;
     *   fill pass: offsets (nq, GSB_I64) = where row i's neighbours start in
     *   idx (nnz, GSB_I64: row numbers of R) and dist (nnz, GSB_F64, may be
     *   NULL: the metric's value); a row's neighbours in any order (callers
     *   sort where order matters); writes past idx's end are dropped. */
    int (*radius_neighbors)(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R,
                            const gsb__radius_grid *grid, gsb__metric metric, double p,
                            double eps, gsb__tensor *counts, const gsb__tensor *offsets,
                            gsb__tensor *idx, gsb__tensor *dist);
    /* The two-level SMO of SVC/SVR (solvers/smo_blocks.c; gsb__svm_state above;
     * the per-step arithmetic is backend/svm_smo.h, shared by both backends).
     * svm_select: the next working set.  sel (host, k_total) receives first
     * the up to k_up variables of I_up not in exclude (m, GSB_I32, may be NULL)
     * with the smallest (f_t, t), then, up to k_total in all, the variables
     * of I_low not in exclude nor chosen with the largest f_t (ties: smaller
     * t); *n_up and *n_low count them.  *gap = libsvm's maximal violation
     * over all variables (-inf when I_up or I_low is empty).  A -0.0 in f
     * ranks as +0.0.  Waits for the result (host scalars). */
    int (*svm_select)(const gsb__backend *be, const gsb__svm_state *s,
                      const gsb__tensor *exclude, int64_t k_up, int64_t k_total, int32_t *sel,
                      int64_t *n_up, int64_t *n_low, double *gap);
    /* cache[slots[i]][j] = (float) kernel(X[rows[i]], X[j]) for the m entries
     * of rows and slots (GSB_I32, distinct slots); X n x d, kernel as the
     * kernel op (computed in X's dtype, the products summed in any order) */
    int (*svm_kernel_rows)(const gsb__backend *be, const gsb__tensor *X,
                           const gsb__tensor *rows, const gsb__tensor *slots, int kind,
                           double gamma, double coef0, int degree, gsb__tensor *cache);
    /* SMO on the working set ws (q distinct variables, GSB_I32; their rows in
     * cache slots `slots`, q GSB_I32), the others fixed: from k = 0, i = the
     * first position of the smallest f in I_up, gap = max_{I_low} f - f_i; stop
     * when gap < max(eps, GSB__SVM_INNER_RATIO * the first gap) or after
     * max_steps steps; else j = the first position minimising
     * gsb__svm_j_key over I_low with f_j > f_i, the pair moves by
     * gsb__svm_step and f of the working set by step (K_ik - K_jk).
     * alpha is updated at ws; coef (q, GSB_F64) = (new - old alpha) y per
     * position; stats (2, GSB_F64): [0] = the first gap, [1] += the steps. */
    int (*svm_inner)(const gsb__backend *be, const gsb__svm_state *s, const gsb__tensor *ws,
                     const gsb__tensor *slots, double eps, int64_t max_steps,
                     gsb__tensor *coef, gsb__tensor *stats);
    /* f_t += sum_k coef_k cache[slots[k]][real[t]] over every variable t, k
     * ascending, terms with coef_k = 0 skipped (each product and sum rounded
     * once, in double: the backends agree bitwise) */
    int (*svm_update_f)(const gsb__backend *be, const gsb__svm_state *s,
                        const gsb__tensor *slots, const gsb__tensor *coef);

    /* ---- random forests (histogram trees; the types above) ------------- */
    /* codes (see gsb__forest_data) of X (n x d, float32 or float64, rounded to
     * float32 first as scikit-learn's trees see X): code = the number of
     * edges[f][j] < x (edges: d x e GSB_F32, rows ascending, padded with
     * +inf); NaN -> nan_code */
    int (*forest_bin)(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *edges,
                      int nan_code, gsb__tensor *codes);
    /* Histograms: for node b of nodes (B x 3 GSB_I32: start, end, slot >= 0),
     * pool[slot] of the features in row b of feats (B x m GSB_I32, -1 entries
     * skipped, a feature listed twice set once; NULL: every feature) is set to
     * the node's stats (others kept) */
    int (*forest_hist)(const gsb__backend *be, const gsb__forest_data *d,
                       const gsb__tensor *nodes, const gsb__tensor *feats);
    /* pool[dst] -= pool[src] for each row of pairs (P x 2 GSB_I32: dst, src),
     * every feature; then a bin with no sample is all 0 and a class weight
     * below 1e-9 of its bin's weight is 0 (rounding left by the subtraction) */
    int (*forest_hist_sub)(const gsb__backend *be, const gsb__forest_data *d,
                           const gsb__tensor *pairs);
    /* The best split of each node b of nodes (B x 3 GSB_I32: start, end, slot;
     * slot -1: stats from the samples, else pool[slot]) over the features in
     * row b of feats (B x m GSB_I32, -1 entries skipped), as scikit-learn's
     * best splitter: candidates are the thresholds between non-empty bins,
     * missing values right, then (with missing values) all values left and
     * missing right, then missing left; the highest proxy wins, ties to the
     * earlier feature of the row, then the earlier candidate.  best (B x
     * gsb__forest_rec_len(V1) GSB_F64): proxy (-inf: no valid split), feature
     * (-1), bin_lo (last bin left), bin_hi (first non-empty bin right, or
     * n_bins real: missing only right), missing_left, the number of non-constant
     * features seen (>= 2 non-empty bins, the missing-value bin included), the
     * left then the right stats. */
    int (*forest_split)(const gsb__backend *be, const gsb__forest_data *d,
                        const gsb__tensor *nodes, const gsb__tensor *feats,
                        const gsb__forest_rule *rule, gsb__tensor *best);
    /* Stable partition of each node's samples (nodes B x 3 GSB_I32) by its
     * split (splits B x 3 GSB_I32: feature, bin, missing_left): left when
     * code <= bin and not missing, or missing and missing_left; n_left (B,
     * GSB_I32) the count going left */
    int (*forest_partition)(const gsb__backend *be, const gsb__forest_data *d,
                            const gsb__tensor *nodes, const gsb__tensor *splits,
                            gsb__tensor *n_left);
    /* All trees on each row of X (n x d, float32 or float64; each value
     * rounded to float32 and compared with the float32 thresholds, NaN sent
     * to the split's missing-value side).  Outputs, each may be NULL:
     *   mean (n x K GSB_F64): the leaves' float32 values added as float64 in
     *   tree order (tree 0 first), the sum then divided by T;
     *   best (n GSB_I32): the first index of the largest value of the row's
     *   mean (the classifier's predict, without the n x K download);
     *   leaves (n x T GSB_I32): each tree's leaf minus its root. */
    int (*forest_predict)(const gsb__backend *be, const gsb__tensor *X,
                          const gsb__forest_trees *trees, gsb__tensor *mean,
                          gsb__tensor *best, gsb__tensor *leaves);
    /* One epoch of UMAP's layout SGD with negative sampling (umap-learn's
     * optimize_layout_euclidean) in its deterministic form, as
     * backend/umap_sgd.h specifies it: every gradient of the epoch is taken
     * at the positions the epoch starts from, and each head row moves once,
     * at the end, by the sum of its edges' steps in edge order.
     *   head (n x dim, GSB_F32): the moving points, updated;
     *   tail (m x dim, GSB_F32): the points edges and negative samples pull
     *   towards and push from; NULL: head itself (fit);
     *   indptr (n + 1, GSB_I64) and indices (nnz, GSB_I32, into tail's rows):
     *   the edges as CSR rows of head;
     *   epochs_per_sample (nnz, GSB_F64); next_sample and next_negative
     *   (nnz, GSB_F64): each edge's schedule, advanced by the call.
     * With p->hogwild a backend may instead apply steps as they are computed
     * (cuML's lock-free scheme: faster, not reproducible); the CPU backend
     * always runs the deterministic form.  With p->edges_checked a backend
     * may skip re-checking the structure an earlier epoch checked. */
    int (*umap_sgd_epoch)(const gsb__backend *be, gsb__tensor *head, const gsb__tensor *tail,
                          const gsb__tensor *indptr, const gsb__tensor *indices,
                          const gsb__tensor *epochs_per_sample, gsb__tensor *next_sample,
                          gsb__tensor *next_negative, const struct gsb__umap_sgd *p);
    /* y += alpha * x for float tensors of one shape and dtype: per-batch
     * statistics summed where they are computed (estimators/common/stream.h) */
    int (*axpy)(const gsb__backend *be, double alpha, const gsb__tensor *x, gsb__tensor *y);
    /* X[i, j] *= s[i] in place: X (n x d, float), s (n, GSB_F64): the
     * sqrt(sample_weight) scaling of weighted cross-products */
    int (*row_scale)(const gsb__backend *be, gsb__tensor *X, const gsb__tensor *s);
    /*
     * The staging ring of streamed fits (estimators/common/stream.h): nbuf
     * (1..GSB__STAGE_MAX_BUFFERS) buffers of `bytes` each in the backend's
     * memory, filled from host memory while the compute runs.  Buffer k
     * cycles through:
     *   fill     queue the copy of segs (host bytes, each to its offset in
     *            the buffer).  The copy starts once the compute queued before
     *            k's last release has run; on the GPU it runs on a second
     *            stream (pageable host memory through pinned staging of the
     *            stage's own, pinned memory straight from where it is).  Returns
     *            without waiting for the copy; the host bytes must stay as
     *            they are until k is acquired.
     *   acquire  compute queued from now on sees the copied bytes; *dev is
     *            the buffer (this backend's memory, 256-byte aligned).
     *   release  after queuing the compute that reads k: the next fill of k
     *            waits for that compute (on the GPU without a host wait).
     * close waits for every queued copy and frees the ring.  The CPU twin
     * copies at fill (memcpy) and has nothing to wait for.
     */
    int (*stage_open)(const gsb__backend *be, size_t bytes, int nbuf, gsb__stage **out);
    int (*stage_fill)(const gsb__backend *be, gsb__stage *st, int k, const gsb__stage_seg *segs,
                      int nseg);
    int (*stage_acquire)(const gsb__backend *be, gsb__stage *st, int k, void **dev);
    int (*stage_release)(const gsb__backend *be, gsb__stage *st, int k);
    void (*stage_close)(const gsb__backend *be, gsb__stage *st);
    /* dst (contiguous, dst's dtype, rows x cols) = the array at src in this
     * backend's memory, of dtype, element (i, j) at src + i * s0 + j * s1
     * bytes (strides may be negative or 0); values convert as copy does:
     * callers' strided or non-float device arrays made into tensors */
    int (*strided_copy)(const gsb__backend *be, const void *src, gsb_dtype dtype, int64_t s0,
                        int64_t s1, gsb__tensor *dst);
    /* Breadth-first growth of random forests with the frontier on the backend
     * (gsb__forest_level above; the per-node rules of backend/forest_level.h).
     * forest_level_feats: the candidates of a pass, in node order: pass 0
     * the nodes the leaf rules do not stop, pass 1 those of them whose pass-0
     * record (lv->map, lv->recs) has no non-constant feature.  map (n GSB_I32)
     * each node's candidate row or -1; the first counts[0] rows of seg (n x 3
     * GSB_I32: start, end, its slot of lv->slots or -1: forest_split's nodes)
     * and feats (n x (to - from) GSB_I32: positions [from, to) of the node's
     * permutation; pass 0: [0, m), pass 1: [m, n_features)) describe the
     * candidates. */
    int (*forest_level_feats)(const gsb__backend *be, const gsb__forest_data *d,
                              const gsb__forest_level *lv, const gsb__forest_grow_rule *rule,
                              int pass, gsb__tensor *map, gsb__tensor *seg, gsb__tensor *feats);
    int (*forest_level_decide)(const gsb__backend *be, const gsb__forest_data *d,
                               const gsb__forest_level *lv, const gsb__forest_grow_rule *rule);
    /* forest_level_partition: the stable partition of each splitting node's
     * samples (left ones first, as forest_partition), owner set to the
     * children's places (-1 for the samples of a node that did not split),
     * counts[1] */
    int (*forest_level_partition)(const gsb__backend *be, const gsb__forest_data *d,
                                  const gsb__forest_level *lv);
    /* Y (m x k) = A X for the sparse A (m x n) in CSR form: indptr (m + 1,
     * GSB_I64), indices (nnz, GSB_I32), val (nnz), X (n x k); val, X and Y of
     * one float dtype, each element summed in double (backends add a row's
     * terms in different orders: results agree to rounding).  Row i's
     * entries are [indptr[i], indptr[i + 1]) clipped to [0, nnz); an index
     * outside [0, n) makes its row of Y NaN (no backend stops to check the
     * structure, which callers build).  UMAP's spectral initialisation
     * applies its normalised graph with it (solvers/lanczos.c). */
    int (*csr_spmm)(const gsb__backend *be, const gsb__tensor *indptr,
                    const gsb__tensor *indices, const gsb__tensor *val, const gsb__tensor *X,
                    gsb__tensor *Y);
    /* y = x / |x| (x and y: the same number of elements of one float dtype,
     * any shape; y may be x) and nrm (one GSB_F64 element) = |x|, the
     * 2-norm summed in double; |x| = 0: y = 0.  Each element is x[i] *
     * (1 / |x|).  Lanczos normalises its next basis vector with it without
     * a host round trip (solvers/lanczos.c). */
    int (*vec_normalize)(const gsb__backend *be, const gsb__tensor *x, gsb__tensor *y,
                         gsb__tensor *nrm);
    /* topk's contract and result, where the backend may rank candidates with
     * a faster, less precise approximation first (CUDA: a TF32 GEMM for
     * float32, whose error bound widens the admission margin; exact
     * distances rank what it admits).  The CPU backend's is topk itself.
     * UMAP's kNN graph opts in (solvers/knn_graph_umap.c); the kNN
     * estimators keep topk. */
    int (*topk_fast)(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R,
                     int64_t k, gsb__metric metric, int exclude_self, gsb__tensor *dist,
                     gsb__tensor *idx);
    /*
     * Segmented (block-diagonal) vector ops, all GSB_F64: the n elements of
     * a vector (and the n columns of V, Y) split into K segments, segment c
     * = [seg[c], seg[c + 1]) with seg (K + 1, GSB_I64) ascending from 0 to
     * n (callers build it; no backend stops to check it: an element outside
     * [seg[0], seg[K]) counts to the nearest segment, never outside memory).
     * Lanczos on the connected components of a graph advances every
     * component's recurrence with one call each (solvers/lanczos_seg.c).
     * seg_dots: C (m x K) = the per-segment dot products of V's rows (V: m
     * x n) with x (n elements): C[i][c] = sum over segment c of V[i][v] x[v],
     * summed in double (backends in different orders: results agree to
     * rounding).  seg_combine: Y (l x n) = beta Y + alpha * (each column v
     * of Y: the combination of V's column v with segment c(v)'s
     * coefficients), Y[r][v] = beta Y[r][v] + alpha sum_i C[i][r K + c(v)]
     * V[i][v], C (m x l K); beta 0 ignores Y's old values (NaN included).
     * seg_normalize: y = x with each segment divided by its 2-norm and nrm
     * (K elements) = the norms (a zero segment: y = 0 there, norm 0); y may
     * be x.
     */
    int (*seg_dots)(const gsb__backend *be, const gsb__tensor *V, const gsb__tensor *x,
                    const gsb__tensor *seg, gsb__tensor *C);
    int (*seg_combine)(const gsb__backend *be, double alpha, const gsb__tensor *C,
                       const gsb__tensor *V, const gsb__tensor *seg, double beta,
                       gsb__tensor *Y);
    int (*seg_normalize)(const gsb__backend *be, const gsb__tensor *x, const gsb__tensor *seg,
                         gsb__tensor *y, gsb__tensor *nrm);

    /* ---- random -------------------------------------------------------- */
    /* fill with N(0, 1) from a counter-based generator: element i depends only
     * on (seed, i), so every backend produces the same numbers */
    int (*rand_normal)(const gsb__backend *be, gsb__tensor *t, uint64_t seed);

    /* ---- optional (NULL where meaningless) ------------------------------ */
    /* Page-lock n bytes of host memory at p for the device's DMA, so upload
     * and download from inside it skip staging; GSB_EBACKEND/GSB_ENOMEM when
     * the system refuses (callers then go on with pageable memory). */
    int (*host_register)(const gsb__backend *be, void *p, size_t n);
    void (*host_unregister)(const gsb__backend *be, void *p);
    /* *out = 0 when every element of float tensor t is finite, 1 when one is
     * NaN, else 2 (an infinity): validation of data already on the device */
    int (*nonfinite)(const gsb__backend *be, const gsb__tensor *t, int *out);
    /* the device's free and total memory in bytes */
    int (*mem_info)(const gsb__backend *be, size_t *free_bytes, size_t *total_bytes);
    /*
     * Callers' device memory (gsb.h's gsb_device_array).  device_import
     * checks that [ptr, ptr + bytes) is memory of CUDA device device_id (< 0:
     * of whichever device holds it) that this backend's device reads (GSB_EINVAL with the reason: another
     * device, host memory, not CUDA memory) and orders the backend's later
     * work after what is queued on the caller's `stream` (gsb.h's values);
     * device_export orders `stream` after the backend's work queued so far.
     * Neither waits on the host.
     */
    int (*device_import)(const gsb__backend *be, const void *ptr, size_t bytes, int device_id,
                         void *stream);
    int (*device_export)(const gsb__backend *be, void *stream);
    /* counters of host <-> device copies since the backend opened (uploads,
     * downloads and stage fills; the CPU backend counts its ring's copies):
     * tests check that a device input was not copied and that a fit
     * streamed, benchmarks the streaming rate */
    int (*copy_stats)(const gsb__backend *be, gsb__copy_stats *out);
    /* wait on the host for the work queued so far (GSB_PROFILE's phase marks,
     * core/profile.h); NULL on the CPU backend, whose ops return when done */
    int (*sync)(const gsb__backend *be);
} gsb__backend_ops;

struct gsb__backend {
    const char *name; /* "cpu", "cuda" */
    const gsb__backend_ops *ops;
    void *ctx;        /* backend state (handles, pools) */
    const char *device; /* human-readable device ("NVIDIA H200, 139 GiB"), or NULL */
};

/* The CPU backend: always present. */
const gsb__backend *gsb__cpu_backend(void);

/* ---- backend plugins (shared objects loaded at run time) ------------------ */

#define GSB__BACKEND_ABI 20 /* 2: kmeanspp; 3: enet_cd_gram, gather_cols; 4: the t-SNE ops;
                              5: the forest ops; 6: radius_neighbors; 7: umap_sgd_epoch;
                              8: axpy, row_scale, stage_*, strided_copy, device_import/export,
                              copy_stats; 9: sync; 10: forest_level_*; 11: csr_spmm;
                              12: gsb__forest_level's slots; 13: vec_normalize,
                              gsb__umap_sgd's edges_checked; 14: svm_select,
                              svm_kernel_rows, svm_inner, svm_update_f; 15: forest_predict's
                              mean and best; 16: topk_fast; 17: seg_dots, seg_combine,
                              seg_normalize; 18: kmeans_step; 19: topk takes R on
                              the host; 20: kmeans_step taken out again */

/*
 * What libgsb hands a plugin when it loads it.  libgsb's own symbols are
 * hidden, so a plugin reaches the engine only through this table: err sets
 * the calling thread's message (as gsb__err does), cpu is the host backend
 * (host tensors' be).
 */
typedef struct gsb__host_api {
    int abi;                                  /* GSB__BACKEND_ABI */
    int (*err)(int status, const char *fmt, ...);
    const gsb__backend *cpu;
} gsb__host_api;

/*
 * The one symbol a plugin exports, named GSB__BACKEND_OPEN_SYMBOL.  It returns
 * GSB_OK and the backend, or a status with a reason in why (no GPU, no
 * driver, ...).  Called once per process; the backend lives until exit.
 */
typedef int (*gsb__backend_open_fn)(const gsb__host_api *host, const gsb__backend **out,
                                    char *why, size_t why_len);
#define GSB__BACKEND_OPEN_SYMBOL "gsb_backend_open"

/*
 * The CUDA backend: loads libgsb-cuda.so on first use (next to libgsb, or
 * $GSB_CUDA_BACKEND).  NULL when it is not built or no GPU is usable; then
 * gsb__cuda_unavailable_reason() says why.
 */
const gsb__backend *gsb__cuda_backend(void);
const char *gsb__cuda_unavailable_reason(void);

/*
 * Several GPUs (multi-device sessions, multidev/devset.h), through optional
 * symbols of the plugin (a plugin without them offers one GPU):
 * the number of CUDA devices (0 without the plugin); the backend of device
 * `ordinal` (one per device, living until exit; GSB_EUNSUPPORTED with the
 * reason); the NCCL communicator over bes (backend/comm.h; NCCL is dlopened
 * from $GSB_NCCL_LIBRARY, else libnccl.so.2 on the search path and in the CUDA
 * library folder; GSB_EUNSUPPORTED naming the library when it cannot be).
 */
int gsb__cuda_device_count(void);
int gsb__cuda_backend_device(int ordinal, const gsb__backend **out);
struct gsb__comm;
int gsb__nccl_comm_open(const gsb__backend *const *bes, int n, struct gsb__comm **out);
typedef int (*gsb__backend_open_device_fn)(const gsb__host_api *host, int ordinal,
                                           const gsb__backend **out, char *why,
                                           size_t why_len);
#define GSB__BACKEND_OPEN_DEVICE_SYMBOL "gsb_backend_open_device"
typedef int (*gsb__device_count_fn)(void);
#define GSB__DEVICE_COUNT_SYMBOL "gsb_cuda_device_count"

#ifdef __cplusplus
}
#endif

#endif
