/*
 * test_cuda_topk_gemm.c - topk's GEMM-tiled path and topk_fast (TF32 GEMM
 * that prunes, exact distances that rank; cuda_topk_gemm.cu) against the CPU
 * twin (topk in cpu_distance.c) on fresh random data: the same neighbours in
 * the same order (ties by index), each distance the metric's value.
 *
 * GSB_TOPK_PATH=gemm sends every dot-product shape through the GEMM path,
 * and small GSB_TOPK_TILE_BYTES / GSB_TOPK_QUERY_CHUNK split small data into
 * many reference tiles (pending candidates carried between them) and query
 * chunks, so the cases stay small.  Float64 and float32 euclidean-family
 * cases run pruned through centred float32 copies and TF32 tiles
 * (cuda_topk_prune.cu, the default) and, where GSB_TOPK_F64=exact, through
 * DGEMM tiles (GSB_TOPK_F32=exact: float32's unpruned dispatch, whose results
 * the pruned ones must equal bit for bit); the near-tie data below defeats
 * any admission margin smaller than TF32's error.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"
#include "distance_reference.h"

static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};
static const gsb__metric metrics[4] = {GSB__METRIC_SQEUCLIDEAN, GSB__METRIC_EUCLIDEAN,
                                       GSB__METRIC_COSINE, GSB__METRIC_MANHATTAN};

/* The op under test: topk (exact GEMM) or topk_fast (TF32 GEMM for float32). */
typedef int (*topk_fn)(const gsb__backend *, const gsb__tensor *, const gsb__tensor *, int64_t,
                       gsb__metric, int, gsb__tensor *, gsb__tensor *);

/* Host data: N(offset, 1) values, or integers in [0, ints) (exact ties and
 * duplicate rows) when ints > 0. */
static gsb__tensor host_data(gsb_dtype dt, int64_t rows, int64_t cols, int ints, double offset)
{
    if (ints)
        return host_ints(dt, rows, cols, ints);
    gsb__tensor t = host_random(dt, rows, cols, 1.0);
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&t, i, gsb__tensor_get(&t, i) + offset);
    return t;
}

/* Count the rows of the GPU's (dh, ih) that differ from the CPU's (dc, ic):
 * an index out of order, or a distance that is not the pair's. */
static void compare_rows(const gsb__tensor *Q, const gsb__tensor *R, gsb__metric m, int self,
                         const gsb__tensor *dh, const gsb__tensor *ih, const gsb__tensor *ic,
                         int64_t *order_diff, int64_t *wrong)
{
    const int64_t nq = dh->rows, k = dh->cols, nr = R->rows;
    const double tol = Q->dtype == GSB_F32 ? 1e-5 : 1e-9;
    for (int64_t i = 0; i < nq; i++)
        for (int64_t j = 0; j < k; j++) {
            int64_t a = (int64_t)gsb__tensor_get(ih, i * k + j);
            *order_diff += a != (int64_t)gsb__tensor_get(ic, i * k + j);
            if (a < 0 || a >= nr || (self && a == i)) {
                (*wrong)++;
                continue;
            }
            double want = ref_dist(Q, i, R, a, m), got = gsb__tensor_get(dh, i * k + j);
            if (!(fabs(got - want) <= tol * fmax(1.0, fabs(want)))) /* NaN fails */
                (*wrong)++;
        }
}

/* R handed to the GPU's op as a host tensor (it uploads R itself, behind
 * the search) instead of a device copy; set by the tests that cover it. */
static int refs_on_host;

/* The GPU's topk (or topk_fast) of host Q against host R (self: Q is R,
 * each row excluded from its own neighbours) against the CPU twin's. */
static void check_case(int fast, gsb__metric m, const gsb__tensor *Qp, const gsb__tensor *Rp,
                       int64_t k, int self)
{
    topk_fn op = fast ? gpu->ops->topk_fast : gpu->ops->topk;
    gsb__tensor R = *Rp, Q = *Qp;
    const gsb_dtype dt = R.dtype;
    const int64_t nq = Q.rows;
    gsb__tensor dc = host_poisoned(dt, nq, k), ic = host_poisoned(GSB_I64, nq, k);
    CHECK_OK(cpu->ops->topk(cpu, &Q, &R, k, m, self, &dc, &ic));
    gsb__tensor Rg = to_gpu(&R), Qg = self ? Rg : to_gpu(&Q);
    gsb__tensor dg = gpu_poisoned(dt, nq, k), ig = gpu_poisoned(GSB_I64, nq, k);
    CHECK(op != NULL);
    if (op)
        CHECK_OK(op(gpu, &Qg, refs_on_host ? &R : &Rg, k, m, self, &dg, &ig));
    gsb__tensor ih = from_gpu(&ig), dh = from_gpu(&dg);
    int64_t order_diff = 0, wrong = 0;
    compare_rows(&Q, &R, m, self, &dh, &ih, &ic, &order_diff, &wrong);
    CHECK(wrong == 0);
    CHECK(order_diff == 0);
    CHECK_MATCH(&dg, &dc, tol_for(dt));
    if (wrong || order_diff)
        fprintf(stderr, "    %lld wrong distances, %lld indices out of place\n",
                (long long)wrong, (long long)order_diff);
    gsb__tensor_free(&ih);
    gsb__tensor_free(&dh);
    gsb__tensor_free(&dg);
    gsb__tensor_free(&ig);
    gsb__tensor_free(&dc);
    gsb__tensor_free(&ic);
    if (!self)
        gsb__tensor_free(&Qg);
    gsb__tensor_free(&Rg);
}

/* Bytes of the GPU's dist and idx of host Q against host R (self: Q is R)
 * into dh / ih, downloaded. */
static void gpu_topk(gsb__metric m, const gsb__tensor *Q, const gsb__tensor *R, int64_t k,
                     int self, gsb__tensor *dh, gsb__tensor *ih)
{
    gsb__tensor Rg = to_gpu(R), Qg = self ? Rg : to_gpu(Q);
    gsb__tensor dg = gpu_poisoned(R->dtype, Q->rows, k), ig = gpu_poisoned(GSB_I64, Q->rows, k);
    CHECK_OK(gpu->ops->topk(gpu, &Qg, refs_on_host ? R : &Rg, k, m, self, &dg, &ig));
    *dh = from_gpu(&dg);
    *ih = from_gpu(&ig);
    gsb__tensor_free(&dg);
    gsb__tensor_free(&ig);
    if (!self)
        gsb__tensor_free(&Qg);
    gsb__tensor_free(&Rg);
}

/* The pruned default's results against the exact mode's (GSB_TOPK_F64 /
 * GSB_TOPK_F32 = exact), bit for bit: the same exact distances rank both. */
static void check_same_as_exact(gsb__metric m, const gsb__tensor *Q, const gsb__tensor *R,
                                int64_t k, int self)
{
    const char *env = R->dtype == GSB_F32 ? "GSB_TOPK_F32" : "GSB_TOPK_F64";
    const char *was = getenv(env);
    char *saved = was ? strdup(was) : NULL;
    gsb__tensor d0, i0, d1, i1;
    unsetenv(env);
    gpu_topk(m, Q, R, k, self, &d0, &i0);
    setenv(env, "exact", 1);
    gpu_topk(m, Q, R, k, self, &d1, &i1);
    if (saved)
        setenv(env, saved, 1);
    else
        unsetenv(env);
    free(saved);
    const size_t n = (size_t)(Q->rows * k);
    int same_d = memcmp(d0.data, d1.data, n * gsb_dtype_size(R->dtype)) == 0;
    int same_i = memcmp(i0.data, i1.data, n * sizeof(int64_t)) == 0;
    CHECK(same_d);
    CHECK(same_i);
    if (!same_d || !same_i)
        fprintf(stderr, "    pruned != exact mode (%s distances, %s indices)\n",
                same_d ? "same" : "different", same_i ? "same" : "different");
    gsb__tensor *all[] = {&d0, &i0, &d1, &i1};
    for (size_t i = 0; i < 4; i++)
        gsb__tensor_free(all[i]);
}

static void topk_gemm_case(int fast, gsb_dtype dt, gsb__metric m, int64_t nq, int64_t nr,
                           int64_t d, int64_t k, int self, int ints, double offset)
{
    int before = case_begin();
    gsb__tensor R = host_data(dt, nr, d, ints, offset);
    gsb__tensor Q = self ? R : host_data(dt, nq, d, ints, offset);
    if (self)
        nq = nr;
    check_case(fast, m, &Q, &R, k, self);
    if (!fast && dt == GSB_F32 &&
        (m == GSB__METRIC_SQEUCLIDEAN || m == GSB__METRIC_EUCLIDEAN))
        check_same_as_exact(m, &Q, &R, k, self);
    if (!self)
        gsb__tensor_free(&Q);
    gsb__tensor_free(&R);
    CASE_END(before, "%s %s %s nq=%lld nr=%lld d=%lld k=%lld self=%d ints=%d offset=%g",
             fast ? "topk_fast" : "topk", gsb_dtype_name(dt), metric_name(m), (long long)nq,
             (long long)nr, (long long)d, (long long)k, self, ints, offset);
}

/* Shapes through the GEMM path, one tile and many (carried candidates). */
static void shapes(int fast)
{
    /* nq, nr, d, k, self */
    static const int64_t cases[][5] = {
        {300, 3000, 64, 10, 0}, {1, 150, 1, 5, 0},      {77, 1000, 3, 64, 0},
        {130, 2500, 257, 100, 0}, {65, 200, 64, 1, 0}, {33, 40, 7, 40, 0},
        {1500, 1500, 3, 5, 1},  {600, 600, 64, 64, 1}, {90, 90, 5, 89, 1},
        {200, 5000, 16, 300, 0}};
    static const char *const tiles[] = {"33554432", "65536"};
    setenv("GSB_TOPK_PATH", "gemm", 1);
    for (int ti = 0; ti < 2; ti++) {
        setenv("GSB_TOPK_TILE_BYTES", tiles[ti], 1);
        for (int t = 0; t < 2; t++)
            for (int mi = 0; mi < 4; mi++)
                for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
                    topk_gemm_case(fast, dtypes[t], metrics[mi], cases[c][0], cases[c][1],
                                   cases[c][2], cases[c][3], (int)cases[c][4], 0, 0.0);
    }
    unsetenv("GSB_TOPK_TILE_BYTES");
    unsetenv("GSB_TOPK_PATH");
}

static void test_topk_gemm(void) { shapes(0); }
static void test_topk_fast(void) { shapes(1); }

/* Integer data: exact ties and duplicate rows everywhere, broken by index
 * exactly as the CPU; many tiles and query chunks. */
static void ties(int fast)
{
    setenv("GSB_TOPK_PATH", "gemm", 1);
    setenv("GSB_TOPK_TILE_BYTES", "20000", 1);
    setenv("GSB_TOPK_QUERY_CHUNK", "96", 1);
    for (int t = 0; t < 2; t++)
        for (int mi = 0; mi < 3; mi++) {
            topk_gemm_case(fast, dtypes[t], metrics[mi], 200, 2000, 2, 10, 0, 4, 0.0);
            topk_gemm_case(fast, dtypes[t], metrics[mi], 257, 3000, 3, 64, 0, 3, 0.0);
            topk_gemm_case(fast, dtypes[t], metrics[mi], 1000, 1000, 3, 100, 1, 3, 0.0);
            topk_gemm_case(fast, dtypes[t], metrics[mi], 100, 5000, 1, 10, 0, 5, 0.0);
        }
    unsetenv("GSB_TOPK_QUERY_CHUNK");
    unsetenv("GSB_TOPK_TILE_BYTES");
    unsetenv("GSB_TOPK_PATH");
}

static void test_topk_gemm_ties(void) { ties(0); }
static void test_topk_fast_ties(void) { ties(1); }

/* Data far from the origin (norms large against the distances: the
 * admission margin, relative to the norms, is widest) and MNIST-like width;
 * the default dispatch (no GSB_TOPK_PATH) at a shape that takes the GEMM. */
static void test_topk_fast_margin(void)
{
    setenv("GSB_TOPK_PATH", "gemm", 1);
    for (int mi = 0; mi < 3; mi++) {
        topk_gemm_case(1, GSB_F32, metrics[mi], 500, 4000, 64, 15, 0, 0, 10.0);
        topk_gemm_case(1, GSB_F32, metrics[mi], 300, 3000, 784, 15, 0, 0, 3.0);
    }
    topk_gemm_case(1, GSB_F32, GSB__METRIC_EUCLIDEAN, 2000, 2000, 100, 15, 1, 0, 1.0);
    unsetenv("GSB_TOPK_PATH");
    topk_gemm_case(0, GSB_F64, GSB__METRIC_EUCLIDEAN, 1100, 5000, 200, 10, 0, 0, 0.0);
    topk_gemm_case(1, GSB_F32, GSB__METRIC_EUCLIDEAN, 1100, 5000, 200, 10, 0, 0, 0.0);
}

/* Float64 cases through both modes: the pruned default, then GSB_TOPK_F64=exact. */
static const char *const f64_modes[] = {NULL, "exact"};
static void set_f64_mode(const char *mode)
{
    if (mode)
        setenv("GSB_TOPK_F64", mode, 1);
    else
        unsetenv("GSB_TOPK_F64");
}

/* Rows i % 16 < 8 of X: a + noise of 1e-6 per coordinate; rows i + 8 their
 * negatives (the column mean is then 0: exactly, per lane, on the GPU). */
static void plus_minus_rows(gsb__tensor *X, double a)
{
    const int64_t d = X->cols;
    for (int64_t i = 0; i < X->rows; i++)
        for (int64_t c = 0; c < d; c++)
            gsb__tensor_set(X, i * d + c,
                            i % 16 < 8 ? a + 1e-6 * testing_normal()
                                       : -gsb__tensor_get(X, (i - 8) * d + c));
}

/*
 * Near ties that TF32 cannot see: every coordinate of the queries and
 * references is +-a, a = 1 + 2^-11 - 2^-23, plus noise of 1e-6 (TF32 keeps 10
 * mantissa bits, so each loses ~2^-11 whether it truncates or rounds: the
 * approximate distance of every same-sign row is too large by ~d 2^-10
 * against true distances of ~1e-10).  Queries and references come in +-
 * pairs, so the queries' mean, the centre, is ~0 and centring keeps the
 * values.  An admission margin below TF32's error would keep the first k
 * same-sign rows it met (a host emulation of the admission test missed every
 * true neighbour without the TF32 term, none with it); the right answer needs
 * each of the nr / 2 same-sign rows ranked exactly.
 */
static void near_tie_data(gsb_dtype dt, int64_t nq, int64_t nr, int64_t d, gsb__tensor *Q,
                          gsb__tensor *R)
{
    const double a = 1.0 + 0x1p-11 - 0x1p-23; /* a float32 too */
    *R = host_random(dt, nr, d, 1.0);
    *Q = host_random(dt, nq, d, 1.0);
    plus_minus_rows(R, a);
    plus_minus_rows(Q, a);
}

static void near_tie_case_dt(gsb_dtype dt, int64_t nq, int64_t nr, int64_t d, int64_t k,
                             gsb__metric m)
{
    int before = case_begin();
    gsb__tensor Q, R;
    near_tie_data(dt, nq, nr, d, &Q, &R);
    check_case(0, m, &Q, &R, k, 0);
    if (dt == GSB_F32)
        check_same_as_exact(m, &Q, &R, k, 0);
    gsb__tensor_free(&Q);
    gsb__tensor_free(&R);
    CASE_END(before, "near ties %s %s nq=%lld nr=%lld d=%lld k=%lld", gsb_dtype_name(dt),
             metric_name(m), (long long)nq, (long long)nr, (long long)d, (long long)k);
}

static void near_tie_case(int64_t nq, int64_t nr, int64_t d, int64_t k, gsb__metric m)
{
    near_tie_case_dt(GSB_F64, nq, nr, d, k, m);
}

/* Data the copies' range check sends to the exact mode (centred norms below
 * 2^-40 or above 2^100), data far from the origin (centring takes the offset
 * away) and constant columns (centred values of ~1e-17 kept); float32 cases
 * also against the exact mode bit for bit.  huge: the factor of one huge row
 * near the end (0: none): the check fails only there (the tiles before it
 * were searched, the ones after skip; the exact rerun). */
static void range_case_dt(gsb_dtype dt, const char *what, double scale, double offset,
                          int constant_cols, double huge)
{
    int before = case_begin();
    gsb__tensor R = host_random(dt, 3000, 40, scale);
    gsb__tensor Q = host_random(dt, 200, 40, scale);
    gsb__tensor *both[2] = {&Q, &R};
    for (int t = 0; t < 2; t++)
        for (int64_t i = 0; i < both[t]->rows * 40; i++)
            gsb__tensor_set(both[t], i,
                            i % 40 < constant_cols ? 0.1 : gsb__tensor_get(both[t], i) + offset);
    for (int64_t c = 0; huge != 0.0 && c < 40; c++) {
        const int64_t at = (R.rows - 5) * 40 + c;
        gsb__tensor_set(&R, at, gsb__tensor_get(&R, at) * huge);
    }
    for (int mi = 0; mi < 2; mi++)
        check_case(0, metrics[mi], &Q, &R, 12, 0);
    check_case(0, GSB__METRIC_EUCLIDEAN, &R, &R, 7, 1);
    if (dt == GSB_F32) {
        check_same_as_exact(GSB__METRIC_SQEUCLIDEAN, &Q, &R, 12, 0);
        check_same_as_exact(GSB__METRIC_EUCLIDEAN, &R, &R, 7, 1);
    }
    gsb__tensor_free(&Q);
    gsb__tensor_free(&R);
    CASE_END(before, "%s range: %s", gsb_dtype_name(dt), what);
}

static void range_case(const char *what, double scale, double offset, int constant_cols)
{
    const int late = scale == 1.0 && offset == 0.0 && constant_cols == 0;
    range_case_dt(GSB_F64, what, scale, offset, constant_cols, late ? 1e40 : 0.0);
}

static void test_topk_f64_prune(void)
{
    setenv("GSB_TOPK_PATH", "gemm", 1);
    for (int mo = 0; mo < 2; mo++) {
        set_f64_mode(f64_modes[mo]);
        for (int mi = 0; mi < 2; mi++) {
            near_tie_case(64, 4096, 64, 10, metrics[mi]);
            near_tie_case(48, 1600, 7, 25, metrics[mi]);
        }
        setenv("GSB_TOPK_TILE_BYTES", "65536", 1);
        near_tie_case(96, 2048, 64, 10, GSB__METRIC_EUCLIDEAN);
        unsetenv("GSB_TOPK_TILE_BYTES");
        range_case("tiny (1e-25)", 1e-25, 0.0, 0);
        range_case("huge (1e60)", 1e60, 0.0, 0);
        range_case("offset 1e6", 1.0, 1e6, 0);
        range_case("constant columns", 1.0, 0.0, 5);
        range_case("scale 1e-9", 1e-9, 0.0, 0);
        range_case("one huge row late", 1.0, 0.0, 0);
    }
    set_f64_mode(NULL);
    unsetenv("GSB_TOPK_PATH");
}

/* The ties cases (integer data) for float64 through the exact mode too. */
static void test_topk_f64_exact_ties(void)
{
    setenv("GSB_TOPK_F64", "exact", 1);
    setenv("GSB_TOPK_PATH", "gemm", 1);
    setenv("GSB_TOPK_TILE_BYTES", "20000", 1);
    for (int mi = 0; mi < 2; mi++) {
        topk_gemm_case(0, GSB_F64, metrics[mi], 257, 3000, 3, 64, 0, 3, 0.0);
        topk_gemm_case(0, GSB_F64, metrics[mi], 1000, 1000, 3, 100, 1, 3, 0.0);
    }
    unsetenv("GSB_TOPK_TILE_BYTES");
    unsetenv("GSB_TOPK_PATH");
    unsetenv("GSB_TOPK_F64");
}

/* Duplicated references of non-integer data: every fifth row a copy of one
 * of the first 100, the queries those 100 plus noise of 0.01 (so a query's
 * k nearest are exact ties, ranked by index); float32 also against the
 * exact mode bit for bit. */
static void duplicates_case(gsb_dtype dt, int64_t nq, int64_t nr, int64_t d, int64_t k)
{
    int before = case_begin();
    gsb__tensor R = host_random(dt, nr, d, 1.0), Q = host_random(dt, nq, d, 0.01);
    for (int64_t i = 100; i < nr; i++)
        for (int64_t c = 0; i % 5 == 0 && c < d; c++)
            gsb__tensor_set(&R, i * d + c, gsb__tensor_get(&R, (i * 7 % 100) * d + c));
    for (int64_t i = 0; i < nq * d; i++)
        gsb__tensor_set(&Q, i, gsb__tensor_get(&Q, i) + gsb__tensor_get(&R, i % (100 * d)));
    for (int mi = 0; mi < 2; mi++) {
        check_case(0, metrics[mi], &Q, &R, k, 0);
        if (dt == GSB_F32)
            check_same_as_exact(metrics[mi], &Q, &R, k, 0);
    }
    gsb__tensor_free(&Q);
    gsb__tensor_free(&R);
    CASE_END(before, "duplicated %s references nq=%lld nr=%lld d=%lld k=%lld",
             gsb_dtype_name(dt), (long long)nq, (long long)nr, (long long)d, (long long)k);
}

/*
 * Float32 pruned through TF32 against the CPU twin and, bit for bit, against
 * GSB_TOPK_F32=exact: shapes the default dispatch sends to the GEMM tiles
 * (the exact mode there is the fused kernel), with data far from the
 * origin, k = 1, k above the 32 pending places, query counts that are no
 * multiple of a selection block, d no multiple of 8, duplicated references
 * (integers and copied rows: exact ties), queries equal to references (with and without
 * exclude_self) and near ties; then the range check's cases through the GEMM
 * tiles (the exact mode there: FP32 SGEMM tiles).  Small tile budgets make
 * the pruned runs screen (cuda_topk_screen.cu) after their first GEMM tile;
 * the near ties overflow every query's places there (the rank step screens
 * again in FP32).  Magnitudes stay where
 * float32 products neither underflow (the CPU twin's bound is relative) nor
 * the distances overflow.
 */
static void test_topk_f32_prune(void)
{
    /* the default tile budget (one GEMM tile: no screen at these sizes), then
     * 4 MiB: a first GEMM tile of ~900 references, then screens */
    static const char *const budgets[] = {NULL, "4194304"};
    for (int bi = 0; bi < 2; bi++) {
        if (budgets[bi])
            setenv("GSB_TOPK_TILE_BYTES", budgets[bi], 1);
        for (int mi = 0; mi < 2; mi++) {
            topk_gemm_case(0, GSB_F32, metrics[mi], 1100, 8000, 128, 10, 0, 0, 0.0);
            topk_gemm_case(0, GSB_F32, metrics[mi], 1027, 16400, 61, 1, 0, 0, 100.0);
            topk_gemm_case(0, GSB_F32, metrics[mi], 1100, 10000, 96, 40, 0, 3, 0.0);
            topk_gemm_case(0, GSB_F32, metrics[mi], 1100, 10000, 96, 32, 0, 3, 0.0);
            topk_gemm_case(0, GSB_F32, metrics[mi], 4100, 4100, 64, 15, 1, 0, 0.0);
        }
        {
            /* queries equal to references, not excluded: each is its own nearest */
            int before = case_begin();
            gsb__tensor R = host_data(GSB_F32, 4100, 64, 0, 1.0);
            check_case(0, GSB__METRIC_EUCLIDEAN, &R, &R, 5, 0);
            check_same_as_exact(GSB__METRIC_EUCLIDEAN, &R, &R, 5, 0);
            gsb__tensor_free(&R);
            CASE_END(before, "float32 queries equal to the references");
        }
        near_tie_case_dt(GSB_F32, 1100, 8192, 128, 10, GSB__METRIC_EUCLIDEAN);
        duplicates_case(GSB_F32, 1100, 16000, 64, 10);
        duplicates_case(GSB_F32, 1100, 5000, 300, 25);
        unsetenv("GSB_TOPK_TILE_BYTES");
    }
    setenv("GSB_TOPK_PATH", "gemm", 1);
    duplicates_case(GSB_F32, 300, 4000, 37, 20);
    duplicates_case(GSB_F64, 300, 4000, 37, 20);
    for (int mi = 0; mi < 2; mi++) {
        near_tie_case_dt(GSB_F32, 64, 4096, 64, 10, metrics[mi]);
        near_tie_case_dt(GSB_F32, 48, 1600, 7, 25, metrics[mi]);
    }
    range_case_dt(GSB_F32, "tiny (1e-12)", 1e-12, 0.0, 0, 0.0);
    range_case_dt(GSB_F32, "tiny (1e-5)", 1e-5, 0.0, 0, 0.0);
    range_case_dt(GSB_F32, "huge (1e15)", 1e15, 0.0, 0, 0.0);
    range_case_dt(GSB_F32, "large (1e12)", 1e12, 0.0, 0, 0.0);
    range_case_dt(GSB_F32, "offset 1e4", 1.0, 1e4, 0, 0.0);
    range_case_dt(GSB_F32, "constant columns", 1.0, 0.0, 5, 0.0);
    range_case_dt(GSB_F32, "one huge row late", 1.0, 0.0, 0, 1e17);
    setenv("GSB_TOPK_TILE_BYTES", "65536", 1); /* screened */
    range_case_dt(GSB_F32, "one huge row late, screened", 1.0, 0.0, 0, 1e17);
    range_case_dt(GSB_F32, "offset 1e4, screened", 1.0, 1e4, 0, 0.0);
    unsetenv("GSB_TOPK_TILE_BYTES");
    unsetenv("GSB_TOPK_PATH");
}

/* R on the host: the op uploads it piece by piece (small pieces here: many)
 * behind the GEMM tiles, in every mode, and whole for the fused kernel. */
static void test_topk_refs_on_host(void)
{
    refs_on_host = 1;
    setenv("GSB_TOPK_PATH", "gemm", 1);
    setenv("GSB_TOPK_TILE_BYTES", "65536", 1);
    setenv("GSB_TOPK_PIECE_BYTES", "20000", 1);
    for (int mo = 0; mo < 2; mo++) {
        set_f64_mode(f64_modes[mo]);
        for (int mi = 0; mi < 3; mi++)
            topk_gemm_case(0, GSB_F64, metrics[mi], 300, 3000, 64, 10, 0, 0, 0.0);
        near_tie_case(64, 4096, 64, 10, GSB__METRIC_EUCLIDEAN);
        range_case("one huge row late, R on the host", 1.0, 0.0, 0);
        range_case("tiny (1e-25), R on the host", 1e-25, 0.0, 0);
    }
    set_f64_mode(NULL);
    for (int mi = 0; mi < 3; mi++) {
        topk_gemm_case(0, GSB_F32, metrics[mi], 300, 3000, 64, 10, 0, 0, 0.0);
        topk_gemm_case(1, GSB_F32, metrics[mi], 300, 3000, 64, 10, 0, 0, 0.0);
    }
    topk_gemm_case(0, GSB_F64, GSB__METRIC_EUCLIDEAN, 200, 2000, 2, 10, 0, 4, 0.0);
    unsetenv("GSB_TOPK_PIECE_BYTES");
    unsetenv("GSB_TOPK_TILE_BYTES");
    setenv("GSB_TOPK_PATH", "fused", 1);
    for (int t = 0; t < 2; t++)
        topk_gemm_case(0, dtypes[t], GSB__METRIC_MANHATTAN, 100, 1000, 16, 5, 0, 0, 0.0);
    topk_gemm_case(0, GSB_F64, GSB__METRIC_EUCLIDEAN, 100, 1000, 16, 5, 0, 0, 0.0);
    unsetenv("GSB_TOPK_PATH");
    refs_on_host = 0;
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20261126);
    RUN(test_topk_gemm);
    RUN(test_topk_fast);
    RUN(test_topk_gemm_ties);
    RUN(test_topk_fast_ties);
    RUN(test_topk_fast_margin);
    RUN(test_topk_f64_prune);
    RUN(test_topk_f64_exact_ties);
    RUN(test_topk_f32_prune);
    RUN(test_topk_refs_on_host);
    return testing_done();
}
