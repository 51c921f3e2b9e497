/*
 * cpu_forest_predict.c - forest_predict on the CPU (contract in
 * backend/backend.h; the CUDA twin is cuda/cuda_forest_predict.cu): every
 * tree on every row, the mean of the leaves' values, its first largest
 * index, the leaves.
 *
 * OpenMP over blocks of rows.  A block's rows are converted to float32 once
 * (the trees compare float32 values), then each tree walks the whole block
 * before the next tree starts, so the tree stays in cache across the block
 * (a forest is far larger than the caches: walking one row through every
 * tree would miss on nearly every node).  Rows walk
 * PREDICT_LANES at a time in lockstep, so the core has that many
 * independent node loads in flight instead of one dependent chain.  Each
 * row's sums run in tree order whatever the blocking, so results repeat
 * bitwise for any thread count, and the GPU twin adds in the same order.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"

/* Rows per block, at most and at least (fewer rows give every thread blocks),
 * and the bytes of a block's buffers at most.  Large blocks win: each block
 * cycles through every tree, so a tree's nodes are fetched again for every
 * block (a 100k-row, 20-tree predict on 2 cores took 2.3 s with 256-row
 * blocks, 1.1 s with 12.5k). */
#define PREDICT_BLOCK 16384
#define PREDICT_BLOCK_MIN 32
#define PREDICT_BLOCK_BYTES ((int64_t)4 << 20)
/* Rows walked in lockstep. */
#define PREDICT_LANES 8

/* A node packed for the walk: one 16-byte load, never across a cache line. */
typedef struct pnode {
    int32_t split, child;
    float thr;
    int32_t pad;
} pnode;

/* A block's working memory: its rows as float32, sums, each tree's leaves. */
typedef struct block_buf {
    float *x;
    double *acc;
    int64_t *leaf;
} block_buf;

/* The leaves (packed node indices) of the b rows of x (b x d) in the tree at root. */
static void walk_block(const pnode *nodes, int64_t root, const float *x, int64_t d, int64_t b,
                       int64_t *leaf)
{
    for (int64_t a = 0; a < b; a += PREDICT_LANES) {
        int64_t lanes = b - a < PREDICT_LANES ? b - a : PREDICT_LANES;
        int64_t at[PREDICT_LANES];
        for (int64_t q = 0; q < lanes; q++)
            at[q] = root;
        for (int busy = 1; busy;) {
            busy = 0;
            for (int64_t q = 0; q < lanes; q++) {
                const pnode *nd = &nodes[at[q]];
                if (nd->split < 0)
                    continue;
                float v = x[(a + q) * d + (nd->split >> 1)];
                int left = isnan(v) ? (nd->split & 1) : v <= nd->thr;
                at[q] = nd->child + (left ? 0 : 1);
                busy = 1;
            }
        }
        for (int64_t q = 0; q < lanes; q++)
            leaf[a + q] = at[q];
    }
}

/* Rows [i0, i0 + b) of X into buf->x as float32 (the trees' comparison precision). */
static void block_rows(const gsb__tensor *X, int64_t i0, int64_t b, float *x)
{
    int64_t len = b * X->cols;
    if (X->dtype == GSB_F32) {
        memcpy(x, (const float *)X->data + i0 * X->cols, (size_t)len * sizeof(float));
        return;
    }
    const double *src = (const double *)X->data + i0 * X->cols;
    for (int64_t j = 0; j < len; j++)
        x[j] = (float)src[j];
}

/* The outputs of a block's rows from their sums over the T trees. */
static void block_out(const double *acc, int64_t i0, int64_t b, int64_t K, int64_t T,
                      gsb__tensor *mean, gsb__tensor *best)
{
    for (int64_t r = 0; r < b; r++) {
        const double *s = acc + r * K;
        double top = s[0] / (double)T;
        int32_t arg = 0;
        for (int64_t k = 0; k < K; k++) {
            double m = s[k] / (double)T;
            if (mean)
                ((double *)mean->data)[(i0 + r) * K + k] = m;
            if (m > top) {
                top = m;
                arg = (int32_t)k;
            }
        }
        if (best)
            ((int32_t *)best->data)[i0 + r] = arg;
    }
}

/* Every tree on rows [i0, i0 + b). */
static void predict_block(const pnode *nodes, const int32_t *root, int64_t T, const float *val,
                          int64_t K, const gsb__tensor *X, int64_t i0, int64_t b,
                          const block_buf *buf, gsb__tensor *mean, gsb__tensor *best,
                          gsb__tensor *leaves)
{
    const int64_t d = X->cols;
    const int sums = mean || best;
    block_rows(X, i0, b, buf->x);
    if (sums)
        memset(buf->acc, 0, (size_t)(b * K) * sizeof(double));
    for (int64_t t = 0; t < T; t++) {
        walk_block(nodes, root[t], buf->x, d, b, buf->leaf);
        for (int64_t r = 0; r < b; r++) {
            int64_t node = buf->leaf[r];
            if (leaves)
                ((int32_t *)leaves->data)[(i0 + r) * T + t] = (int32_t)(node - root[t]);
            if (sums) {
                const float *v = val + (int64_t)nodes[node].child * K;
                double *o = buf->acc + r * K;
                for (int64_t k = 0; k < K; k++)
                    o[k] += (double)v[k];
            }
        }
    }
    if (sums)
        block_out(buf->acc, i0, b, K, T, mean, best);
}

/* The op's arguments checked; *nodes the trees packed (caller frees). */
static int prepare(const gsb__tensor *X, const gsb__forest_trees *t, const gsb__tensor *mean,
                   const gsb__tensor *best, const gsb__tensor *leaves, pnode **nodes)
{
    const char *op = "forest_predict";
    *nodes = NULL;
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    int64_t N = t->split ? t->split->rows * t->split->cols : 0;
    GSB_TRY(cpu_check_vec(t->split, GSB_I32, N, op, "split"));
    GSB_TRY(cpu_check_vec(t->threshold, GSB_F32, N, op, "threshold"));
    GSB_TRY(cpu_check_vec(t->child, GSB_I32, N, op, "child"));
    int64_t T = t->root ? t->root->rows * t->root->cols : 0;
    GSB_TRY(cpu_check_vec(t->root, GSB_I32, T, op, "root"));
    GSB_TRY(cpu_check(t->value, GSB_F32, -1, -1, op, "value"));
    int64_t n = X->rows, K = t->value->cols;
    if (T < 1 || K < 1)
        return gsb__err(GSB_EINTERNAL, "%s: no trees or no values", op);
    if (mean)
        GSB_TRY(cpu_check(mean, GSB_F64, n, K, op, "mean"));
    if (best)
        GSB_TRY(cpu_check_vec(best, GSB_I32, n, op, "best"));
    if (leaves)
        GSB_TRY(cpu_check(leaves, GSB_I32, n, T, op, "leaves"));
    /* the walk trusts the links: the estimator checked them (forest_model.c);
     * this guards the op's own contract */
    const int32_t *root = t->root->data;
    for (int64_t i = 0; i < T; i++)
        if (root[i] < 0 || root[i] >= N)
            return gsb__err(GSB_EINTERNAL, "%s: root %d out of range", op, root[i]);
    pnode *p = cpu_alloc(N, sizeof *p);
    if (!p)
        return gsb__err(GSB_ENOMEM, "%s: out of memory for %lld nodes", op, (long long)N);
    const int32_t *split = t->split->data, *child = t->child->data;
    const float *thr = t->threshold->data;
#pragma omp parallel for schedule(static) if (N > 65536)
    for (int64_t i = 0; i < N; i++)
        p[i] = (pnode){split[i], child[i], thr[i], 0};
    *nodes = p;
    return GSB_OK;
}

int gsb__cpu_forest_predict(const gsb__backend *be, const gsb__tensor *X,
                            const gsb__forest_trees *t, gsb__tensor *mean, gsb__tensor *best,
                            gsb__tensor *leaves)
{
    (void)be;
    pnode *nodes;
    GSB_TRY(prepare(X, t, mean, best, leaves, &nodes));
    const int64_t n = X->rows, d = X->cols, K = t->value->cols;
    const int64_t T = t->root->rows * t->root->cols;
    const int32_t *root = t->root->data;
    const float *val = t->value->data;
    const int64_t row_bytes = d * (int64_t)sizeof(float) + K * (int64_t)sizeof(double) + 8;
    int64_t block = cpu_clamp64(n / (2 * (int64_t)omp_get_max_threads()), PREDICT_BLOCK_MIN,
                                cpu_clamp64(PREDICT_BLOCK_BYTES / row_bytes, PREDICT_BLOCK_MIN,
                                            PREDICT_BLOCK));
    int failed = 0;
#pragma omp parallel reduction(| : failed) if (n * T > 4096)
    {
        block_buf buf = {cpu_alloc(block * d, sizeof(float)),
                         cpu_alloc(block * K, sizeof(double)), cpu_alloc(block, sizeof(int64_t))};
        failed = !buf.x || !buf.acc || !buf.leaf;
#pragma omp for schedule(dynamic, 1)
        for (int64_t i0 = 0; i0 < n; i0 += block)
            if (!failed)
                predict_block(nodes, root, T, val, K, X, i0, n - i0 < block ? n - i0 : block,
                              &buf, mean, best, leaves);
        free(buf.x);
        free(buf.acc);
        free(buf.leaf);
    }
    free(nodes);
    if (failed)
        return gsb__err(GSB_ENOMEM, "forest_predict: out of memory for the walk");
    return GSB_OK;
}
