/*
 * cuda_forest_level.cu - the level ops of breadth-first forest growth on the
 * GPU (contracts in backend/backend.h, gsb__forest_level; the per-node rules
 * in backend/forest_level.h, shared with the CPU twins of
 * cpu/cpu_forest_level.c).  Every tensor stays in device memory: an op is a
 * few kernels and device-wide scans (CUB), and never reads back.
 *
 *  forest_level_feats      one thread per node flags the pass's candidates;
 *                          an exclusive scan numbers them in node order; one
 *                          thread per node writes its map entry, its seg row
 *                          and its draw (Fisher-Yates in a per-thread
 *                          permutation of global scratch, stride-interleaved
 *                          so a warp's entries share lines).
 *  forest_level_decide     one thread per node: its impurity and fate (tree
 *                          heads noted); a scan numbers the splits; one thread
 *                          per node writes its node row, importance term,
 *                          split and children; the last node of each tree
 *                          advances the tree's node count.
 *  forest_level_partition  one thread per sample: left or not (0 outside
 *                          splitting nodes); a scan over all samples ranks the
 *                          left ones of each node (the node's rank = the scan
 *                          minus its value at the node's start); each sample
 *                          goes to its stable place in scratch, with its
 *                          owner the child's place; copies back.
 * The checks are the shapes and residence of the tensors; their contents are
 * the grower's (the CPU twins check them too, and tests run both).
 */
#include <limits.h>
#include <stdint.h>

#include <cub/device/device_scan.cuh>

#include "backend/cuda/cuda_common.h"
#include "backend/forest_level.h"

namespace {

constexpr int THREADS = 256;
constexpr int64_t DRAW_WORDS = (int64_t)1 << 24; /* int32 of permutation scratch, at most */

/* t present, of dtype, rows x cols (-1: any), in this GPU's memory */
int check(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype, int64_t rows,
          int64_t cols, const char *op, const char *name)
{
    return gsb__cuda_check_tensor(be, t, dtype, rows, cols, false, op, name);
}

int check_vec(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype, int64_t n,
              const char *op, const char *name)
{
    int rc = check(be, t, dtype, -1, -1, op, name);
    if (rc == GSB_OK && t->rows * t->cols != n)
        rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has %lld elements, expected %lld", op, name,
                          (long long)(t->rows * t->cols), (long long)n);
    return rc;
}

/* What the kernels read of a level. */
struct Level {
    int64_t n;
    int K, O, V1, R, F;
    const int32_t *front;
    const double *stats;
    const int32_t *map, *map2;   /* map2 NULL: no pass 1 */
    const double *recs, *recs2;
    const int64_t *seeds;
};

int level_of(const gsb__backend *be, const gsb__forest_data *d, const gsb__forest_level *lv,
             const char *op, Level *out)
{
    if (!d || !lv || !d->rows || lv->n < 0 || lv->n > INT_MAX / 2 || d->n_features < 1 ||
        d->n_features > INT_MAX || (d->n_classes <= 0 && d->n_outputs <= 0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: bad level", op);
    Level L;
    L.n = lv->n;
    L.K = d->n_classes > 0 ? d->n_classes : 0;
    L.O = L.K ? 0 : d->n_outputs;
    L.V1 = gsb__forest_nstats(L.K, L.O);
    L.R = gsb__forest_rec_len(L.V1);
    L.F = (int)d->n_features;
    int rc = check(be, lv->front, GSB_I32, L.n, GSB__FLV_FRONT, op, "front");
    if (rc == GSB_OK)
        rc = check(be, lv->stats, GSB_F64, L.n, L.V1, op, "stats");
    if (rc == GSB_OK)
        rc = check(be, lv->seeds, GSB_I64, -1, -1, op, "seeds");
    if (rc == GSB_OK)
        rc = check_vec(be, lv->counts, GSB_I32, 2, op, "counts");
    if (rc != GSB_OK)
        return rc;
    L.front = (const int32_t *)lv->front->data;
    L.stats = (const double *)lv->stats->data;
    L.seeds = (const int64_t *)lv->seeds->data;
    L.map = L.map2 = NULL;
    L.recs = L.recs2 = NULL;
    *out = L;
    return GSB_OK;
}

/* The records of a pass (map n entries, recs any rows of R). */
int pass_of(const gsb__backend *be, const gsb__tensor *map, const gsb__tensor *recs, Level *L,
            bool second, const char *op)
{
    int rc = check_vec(be, map, GSB_I32, L->n, op, second ? "map2" : "map");
    if (rc == GSB_OK)
        rc = check(be, recs, GSB_F64, -1, L->R, op, second ? "recs2" : "recs");
    if (rc != GSB_OK)
        return rc;
    (second ? L->map2 : L->map) = (const int32_t *)map->data;
    (second ? L->recs2 : L->recs) = (const double *)recs->data;
    return GSB_OK;
}

unsigned blocks_for(int64_t work)
{
    const int64_t b = (work + THREADS - 1) / THREADS;
    return (unsigned)(b < 1 ? 1 : b);
}

/* An exclusive scan of n int32 (in != out) on the stream, its scratch from the pool. */
int scan(const gsb__backend *be, const int32_t *in, int32_t *out, int64_t n)
{
    if (n > INT_MAX)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "forest level: a scan of %lld entries",
                            (long long)n);
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    size_t bytes = 0;
    CUDA_TRY(cub::DeviceScan::ExclusiveSum(NULL, bytes, in, out, (int)n, s));
    void *tmp = NULL;
    int rc = gsb__cuda_alloc(be, bytes ? bytes : 1, &tmp);
    if (rc != GSB_OK)
        return rc;
    cudaError_t e = cub::DeviceScan::ExclusiveSum(tmp, bytes, in, out, (int)n, s);
    gsb__cuda_free(be, tmp);
    return e == cudaSuccess ? GSB_OK : gsb__cuda_fail_rt(e, "cub::DeviceScan::ExclusiveSum",
                                                         __FILE__, __LINE__);
}

/* ---- a node's candidacy and fate ------------------------------------------------- */

__device__ inline const int32_t *node_at(const Level &L, int64_t i)
{
    return L.front + i * GSB__FLV_FRONT;
}

__device__ inline bool is_candidate(const Level &L, const gsb__forest_grow_rule &rule, int64_t i,
                                    double *imp)
{
    const int32_t *x = node_at(L, i);
    const double *s = L.stats + i * L.V1;
    *imp = gsb__forest_node_impurity(s, L.K, L.O, rule.criterion);
    return !gsb__forest_leaf_before(&rule, x[GSB__FLV_DEPTH], x[GSB__FLV_END] - x[GSB__FLV_START],
                                    gsb__forest_weight(s, L.K), *imp);
}

__device__ inline const double *pass0_rec(const Level &L, int64_t i)
{
    const int32_t k = L.map[i];
    return k < 0 ? NULL : L.recs + (int64_t)k * L.R;
}

/* ---- forest_level_feats ------------------------------------------------------------ */

__global__ void feats_flag(Level L, gsb__forest_grow_rule rule, int pass,
                           int32_t *__restrict__ flag)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= L.n)
        return;
    double imp;
    bool cand = is_candidate(L, rule, i, &imp);
    if (cand && pass) {
        const double *r = pass0_rec(L, i);
        cand = r && r[GSB__FREC_NONCONST] < 0.5;
    }
    flag[i] = cand ? 1 : 0;
}

/* Grid-stride over nodes: each thread keeps its permutation (and swaps) in
 * scratch, entry f of thread t at f * G + t (G: the grid's threads). */
__global__ void feats_draw(Level L, const int32_t *__restrict__ flag,
                           const int32_t *__restrict__ rank, const int32_t *__restrict__ slots,
                           int64_t from, int64_t to, int32_t *__restrict__ perm,
                           int32_t *__restrict__ swaps,
                           int32_t *__restrict__ map, int32_t *__restrict__ seg,
                           int32_t *__restrict__ feats, int32_t *__restrict__ counts)
{
    const int64_t G = (int64_t)gridDim.x * blockDim.x;
    const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    for (int64_t f = 0; f < L.F; f++)
        perm[f * G + t] = (int32_t)f;
    const int64_t w = to - from;
    for (int64_t i = t; i < L.n; i += G) {
        const int32_t k = flag[i] ? rank[i] : -1;
        map[i] = k;
        if (i == L.n - 1)
            counts[0] = rank[i] + flag[i];
        if (k < 0)
            continue;
        const int32_t *x = node_at(L, i);
        seg[3 * (int64_t)k] = x[GSB__FLV_START];
        seg[3 * (int64_t)k + 1] = x[GSB__FLV_END];
        seg[3 * (int64_t)k + 2] = slots ? slots[i] : -1;
        gsb__forest_draw(L.F, (uint64_t)L.seeds[x[GSB__FLV_TREE]], x[GSB__FLV_ID], from, to,
                         perm + t, swaps + t, G, feats + (int64_t)k * w);
    }
}

/* ---- forest_level_decide ----------------------------------------------------------- */

struct Decide {
    const double *root_w;
    int32_t *tcount, *nodes, *splits, *kids, *thead;
    double *imp, *kid_stats;
};

__device__ inline const double *final_rec(const Level &L, int64_t i)
{
    const int32_t k = L.map2 ? L.map2[i] : -1;
    return k >= 0 ? L.recs2 + (int64_t)k * L.R : pass0_rec(L, i);
}

__device__ inline bool tree_head(const Level &L, int64_t i)
{
    return i == 0 || node_at(L, i - 1)[GSB__FLV_TREE] != node_at(L, i)[GSB__FLV_TREE];
}

/* flag: whether node i splits; imp: its impurity (for decide_write); thead: each
 * tree's first node in the frontier. */
__global__ void decide_flag(Level L, gsb__forest_grow_rule rule, Decide D,
                            int32_t *__restrict__ flag)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= L.n)
        return;
    const int32_t *x = node_at(L, i);
    double imp, improvement;
    const double *r = final_rec(L, i);
    const bool split = is_candidate(L, rule, i, &imp) && r &&
                       r[GSB__FREC_FEATURE] >= 0 && r[GSB__FREC_FEATURE] < L.F &&
                       gsb__forest_accept(&rule, L.stats + i * L.V1, imp, r,
                                          D.root_w[x[GSB__FLV_TREE]], L.K, L.O, &improvement);
    flag[i] = split ? 1 : 0;
    D.imp[i] = imp;
    if (tree_head(L, i))
        D.thead[x[GSB__FLV_TREE]] = (int32_t)i;
}

__global__ void decide_write(Level L, gsb__forest_grow_rule rule, Decide D,
                             const int32_t *__restrict__ flag, const int32_t *__restrict__ rank)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= L.n)
        return;
    const int32_t *x = node_at(L, i);
    int32_t *nd = D.nodes + i * GSB__FLV_NODE, *sp = D.splits + i * GSB__FLS_COLS;
    for (int c = 0; c < GSB__FLV_FRONT; c++)
        nd[c] = x[c];
    nd[GSB__FLV_FEATURE] = -1;
    nd[GSB__FLV_BIN_LO] = nd[GSB__FLV_BIN_HI] = nd[GSB__FLV_MISSING_LEFT] = 0;
    nd[GSB__FLV_LEFT] = -1;
    for (int c = 0; c < GSB__FLS_COLS; c++)
        sp[c] = 0;
    sp[GSB__FLS_FEATURE] = sp[GSB__FLS_CHILD] = -1;
    const double imp = D.imp[i];
    D.imp[i] = 0.0;
    if (!flag[i])
        return;
    const int32_t t = x[GSB__FLV_TREE], k = rank[i];
    const int32_t id = D.tcount[t] + 2 * (k - rank[D.thead[t]]);
    const double *r = final_rec(L, i), *left = r + GSB__FREC_LEFT, *right = left + L.V1;
    const double *s = L.stats + i * L.V1;
    const int32_t nl = (int32_t)left[0], mid = x[GSB__FLV_START] + nl;
    nd[GSB__FLV_FEATURE] = (int32_t)r[GSB__FREC_FEATURE];
    nd[GSB__FLV_BIN_LO] = (int32_t)r[GSB__FREC_BIN_LO];
    nd[GSB__FLV_BIN_HI] = (int32_t)r[GSB__FREC_BIN_HI];
    nd[GSB__FLV_MISSING_LEFT] = (int32_t)r[GSB__FREC_MISSING_LEFT];
    nd[GSB__FLV_LEFT] = id;
    D.imp[i] = gsb__forest_importance(s, imp, left, right, L.K, L.O, rule.criterion);
    sp[GSB__FLS_FEATURE] = nd[GSB__FLV_FEATURE];
    sp[GSB__FLS_BIN] = nd[GSB__FLV_BIN_LO];
    sp[GSB__FLS_MISSING_LEFT] = nd[GSB__FLV_MISSING_LEFT];
    sp[GSB__FLS_CHILD] = 2 * k;
    sp[GSB__FLS_N_LEFT] = nl;
    for (int c = 0; c < 2; c++) {
        int32_t *kd = D.kids + (2 * (int64_t)k + c) * GSB__FLV_FRONT;
        kd[GSB__FLV_TREE] = t;
        kd[GSB__FLV_ID] = id + c;
        kd[GSB__FLV_START] = c ? mid : x[GSB__FLV_START];
        kd[GSB__FLV_END] = c ? x[GSB__FLV_END] : mid;
        kd[GSB__FLV_DEPTH] = x[GSB__FLV_DEPTH] + 1;
        const double *src = c ? right : left;
        double *dst = D.kid_stats + (2 * (int64_t)k + c) * L.V1;
        for (int v = 0; v < L.V1; v++)
            dst[v] = src[v];
    }
}

/* The last node of each tree advances its node count; the last node of all
 * writes the count of splits. */
__global__ void decide_count(Level L, Decide D, const int32_t *__restrict__ flag,
                             const int32_t *__restrict__ rank, int32_t *__restrict__ counts)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= L.n)
        return;
    const int32_t t = node_at(L, i)[GSB__FLV_TREE];
    const bool tail = i == L.n - 1 || node_at(L, i + 1)[GSB__FLV_TREE] != t;
    if (!tail)
        return;
    const int32_t end = rank[i] + flag[i];
    D.tcount[t] += 2 * (end - rank[D.thead[t]]);
    if (i == L.n - 1)
        counts[0] = end;
}

/* ---- forest_level_partition -------------------------------------------------------- */

struct Samples {
    const uint8_t *codes;
    int64_t stride;
    int nan_code;
    int64_t S;
    int32_t *rows, *owner, *srows, *sowner;
    float *w, *sw;
};

/* left[j]: sample j goes left (0 outside the nodes that split); left[S] = 0 */
__global__ void part_flag(Level L, Samples P, const int32_t *__restrict__ splits,
                          int32_t *__restrict__ left)
{
    const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (j > P.S)
        return;
    int32_t v = 0;
    const int32_t o = j < P.S ? P.owner[j] : -1;
    if (o >= 0 && o < L.n) {
        const int32_t *sp = splits + (int64_t)o * GSB__FLS_COLS;
        const int f = sp[GSB__FLS_FEATURE];
        if (f >= 0 && f < L.F) {
            const int c = P.codes[(int64_t)P.rows[j] * P.stride + f];
            v = c == P.nan_code ? sp[GSB__FLS_MISSING_LEFT] != 0 : c <= sp[GSB__FLS_BIN];
        }
    }
    left[j] = v;
}

__global__ void part_scatter(Level L, Samples P, const int32_t *__restrict__ splits,
                             const int32_t *__restrict__ left, const int32_t *__restrict__ rank,
                             int32_t *__restrict__ counts)
{
    const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (j >= P.S)
        return;
    const int32_t o = P.owner[j];
    const int32_t *sp = o >= 0 && o < L.n ? splits + (int64_t)o * GSB__FLS_COLS : NULL;
    if (!sp || sp[GSB__FLS_FEATURE] < 0 || sp[GSB__FLS_FEATURE] >= L.F) {
        P.srows[j] = P.rows[j];
        P.sw[j] = P.w[j];
        P.sowner[j] = -1;
        return;
    }
    const int32_t *x = node_at(L, o);
    const int32_t start = x[GSB__FLV_START], end = x[GSB__FLV_END];
    const int32_t base = rank[start], nl = rank[end] - base, lr = rank[j] - base;
    const bool l = left[j] != 0;
    const int64_t to = l ? start + lr : start + nl + ((int32_t)j - start - lr);
    P.srows[to] = P.rows[j];
    P.sw[to] = P.w[j];
    P.sowner[to] = sp[GSB__FLS_CHILD] + (l ? 0 : 1);
    if (j == start && nl != sp[GSB__FLS_N_LEFT])
        atomicAdd(&counts[1], 1);
}

} // namespace

/* ---- the ops ---------------------------------------------------------------------- */

extern "C" int gsb__cuda_forest_level_feats(const gsb__backend *be, const gsb__forest_data *d,
                                            const gsb__forest_level *lv,
                                            const gsb__forest_grow_rule *rule, int pass,
                                            gsb__tensor *map, gsb__tensor *seg,
                                            gsb__tensor *feats)
{
    const char *op = "forest_level_feats";
    Level L;
    void *flag = NULL, *rank = NULL, *perm = NULL;
    int rc;
    GSB_CUDA_CHECK(level_of(be, d, lv, op, &L));
    {
        const int64_t F = L.F, m = rule->max_features < F ? rule->max_features : F;
        const int64_t from = pass ? m : 0, to = pass ? F : m, n = L.n;
        cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
        if (m < 1 || (pass && m >= F)) {
            rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: pass %d with %lld of %lld features", op, pass,
                              (long long)m, (long long)F);
            goto done;
        }
        if (pass)
            GSB_CUDA_CHECK(pass_of(be, lv->map, lv->recs, &L, false, op));
        GSB_CUDA_CHECK(check_vec(be, map, GSB_I32, n, op, "map"));
        GSB_CUDA_CHECK(check(be, seg, GSB_I32, n, 3, op, "seg"));
        GSB_CUDA_CHECK(check(be, feats, GSB_I32, n, to - from, op, "feats"));
        if (lv->slots)
            GSB_CUDA_CHECK(check_vec(be, lv->slots, GSB_I32, n, op, "slots"));
        if (n == 0) {
            CUDA_CHECK(cudaMemsetAsync(lv->counts->data, 0, sizeof(int32_t), s));
            goto done;
        }
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)n * sizeof(int32_t), &flag));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)n * sizeof(int32_t), &rank));
        feats_flag<<<blocks_for(n), THREADS, 0, s>>>(L, *rule, pass, (int32_t *)flag);
        CUDA_CHECK(cudaGetLastError());
        GSB_CUDA_CHECK(scan(be, (const int32_t *)flag, (int32_t *)rank, n));
        /* threads: enough for the nodes, their permutations within DRAW_WORDS */
        int64_t G = (DRAW_WORDS / (2 * F)) / THREADS * THREADS;
        G = G < THREADS ? THREADS : G;
        const int64_t want = (n + THREADS - 1) / THREADS * THREADS;
        G = want < G ? want : G;
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(2 * F * G) * sizeof(int32_t), &perm));
        feats_draw<<<(unsigned)(G / THREADS), THREADS, 0, s>>>(
            L, (const int32_t *)flag, (const int32_t *)rank,
            lv->slots ? (const int32_t *)lv->slots->data : NULL, from, to, (int32_t *)perm,
            (int32_t *)perm + F * G, (int32_t *)map->data, (int32_t *)seg->data,
            (int32_t *)feats->data, (int32_t *)lv->counts->data);
        CUDA_CHECK(cudaGetLastError());
    }
done:
    gsb__cuda_free(be, flag);
    gsb__cuda_free(be, rank);
    gsb__cuda_free(be, perm);
    return rc;
}

extern "C" int gsb__cuda_forest_level_decide(const gsb__backend *be, const gsb__forest_data *d,
                                             const gsb__forest_level *lv,
                                             const gsb__forest_grow_rule *rule)
{
    const char *op = "forest_level_decide";
    Level L;
    void *flag = NULL, *rank = NULL, *thead = NULL;
    int rc;
    GSB_CUDA_CHECK(level_of(be, d, lv, op, &L));
    GSB_CUDA_CHECK(pass_of(be, lv->map, lv->recs, &L, false, op));
    if (lv->map2)
        GSB_CUDA_CHECK(pass_of(be, lv->map2, lv->recs2, &L, true, op));
    {
        const int64_t n = L.n, T = lv->seeds->rows * lv->seeds->cols;
        cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
        GSB_CUDA_CHECK(check_vec(be, lv->root_w, GSB_F64, T, op, "root_w"));
        GSB_CUDA_CHECK(check_vec(be, lv->tcount, GSB_I32, T, op, "tcount"));
        GSB_CUDA_CHECK(check(be, lv->nodes, GSB_I32, n, GSB__FLV_NODE, op, "nodes"));
        GSB_CUDA_CHECK(check_vec(be, lv->imp, GSB_F64, n, op, "imp"));
        GSB_CUDA_CHECK(check(be, lv->splits, GSB_I32, n, GSB__FLS_COLS, op, "splits"));
        GSB_CUDA_CHECK(check(be, lv->kids, GSB_I32, 2 * n, GSB__FLV_FRONT, op, "kids"));
        GSB_CUDA_CHECK(check(be, lv->kid_stats, GSB_F64, 2 * n, L.V1, op, "kid_stats"));
        if (n == 0) {
            CUDA_CHECK(cudaMemsetAsync(lv->counts->data, 0, sizeof(int32_t), s));
            goto done;
        }
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)n * sizeof(int32_t), &flag));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)n * sizeof(int32_t), &rank));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(T > 0 ? T : 1) * sizeof(int32_t), &thead));
        const Decide D = {(const double *)lv->root_w->data, (int32_t *)lv->tcount->data,
                          (int32_t *)lv->nodes->data,       (int32_t *)lv->splits->data,
                          (int32_t *)lv->kids->data,        (int32_t *)thead,
                          (double *)lv->imp->data,          (double *)lv->kid_stats->data};
        decide_flag<<<blocks_for(n), THREADS, 0, s>>>(L, *rule, D, (int32_t *)flag);
        CUDA_CHECK(cudaGetLastError());
        GSB_CUDA_CHECK(scan(be, (const int32_t *)flag, (int32_t *)rank, n));
        decide_write<<<blocks_for(n), THREADS, 0, s>>>(L, *rule, D, (const int32_t *)flag,
                                                       (const int32_t *)rank);
        CUDA_CHECK(cudaGetLastError());
        decide_count<<<blocks_for(n), THREADS, 0, s>>>(L, D, (const int32_t *)flag,
                                                       (const int32_t *)rank,
                                                       (int32_t *)lv->counts->data);
        CUDA_CHECK(cudaGetLastError());
    }
done:
    gsb__cuda_free(be, flag);
    gsb__cuda_free(be, rank);
    gsb__cuda_free(be, thead);
    return rc;
}

extern "C" int gsb__cuda_forest_level_partition(const gsb__backend *be,
                                                const gsb__forest_data *d,
                                                const gsb__forest_level *lv)
{
    const char *op = "forest_level_partition";
    Level L;
    void *left = NULL, *rank = NULL, *sowner = NULL;
    int rc;
    GSB_CUDA_CHECK(level_of(be, d, lv, op, &L));
    {
        const int64_t n = L.n, S = d->rows->rows * d->rows->cols;
        cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
        GSB_CUDA_CHECK(check(be, lv->splits, GSB_I32, n, GSB__FLS_COLS, op, "splits"));
        GSB_CUDA_CHECK(check_vec(be, lv->owner, GSB_I32, S, op, "owner"));
        GSB_CUDA_CHECK(check_vec(be, d->rows, GSB_I32, S, op, "rows"));
        GSB_CUDA_CHECK(check_vec(be, d->weights, GSB_F32, S, op, "weights"));
        GSB_CUDA_CHECK(check_vec(be, d->scratch_rows, GSB_I32, S, op, "scratch_rows"));
        GSB_CUDA_CHECK(check_vec(be, d->scratch_weights, GSB_F32, S, op, "scratch_weights"));
        if (!d->codes || d->codes->be != be || d->codes->cols != (d->n_features + 3) / 4) {
            rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: codes missing or misshapen", op);
            goto done;
        }
        CUDA_CHECK(cudaMemsetAsync((int32_t *)lv->counts->data + 1, 0, sizeof(int32_t), s));
        if (n == 0 || S == 0)
            goto done;
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(S + 1) * sizeof(int32_t), &left));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(S + 1) * sizeof(int32_t), &rank));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)S * sizeof(int32_t), &sowner));
        const Samples P = {(const uint8_t *)d->codes->data,  4 * d->codes->cols,
                           d->nan_code,                      S,
                           (int32_t *)d->rows->data,         (int32_t *)lv->owner->data,
                           (int32_t *)d->scratch_rows->data, (int32_t *)sowner,
                           (float *)d->weights->data,        (float *)d->scratch_weights->data};
        const int32_t *sp = (const int32_t *)lv->splits->data;
        part_flag<<<blocks_for(S + 1), THREADS, 0, s>>>(L, P, sp, (int32_t *)left);
        CUDA_CHECK(cudaGetLastError());
        GSB_CUDA_CHECK(scan(be, (const int32_t *)left, (int32_t *)rank, S + 1));
        part_scatter<<<blocks_for(S), THREADS, 0, s>>>(L, P, sp, (const int32_t *)left,
                                                       (const int32_t *)rank,
                                                       (int32_t *)lv->counts->data);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(P.rows, P.srows, (size_t)S * sizeof(int32_t),
                                   cudaMemcpyDeviceToDevice, s));
        CUDA_CHECK(cudaMemcpyAsync(P.w, P.sw, (size_t)S * sizeof(float),
                                   cudaMemcpyDeviceToDevice, s));
        CUDA_CHECK(cudaMemcpyAsync(P.owner, P.sowner, (size_t)S * sizeof(int32_t),
                                   cudaMemcpyDeviceToDevice, s));
    }
done:
    gsb__cuda_free(be, left);
    gsb__cuda_free(be, rank);
    gsb__cuda_free(be, sowner);
    return rc;
}
