/*
 * test_cuda_stream.c - the streaming ops on the GPU against their CPU twins
 * (cpu_stream.c): axpy, row_scale, strided_copy, and the staging ring (fills
 * from pageable and from page-locked memory, buffers reused in rotation while
 * kernels read the previous ones, segments at offsets), plus copy_stats, and
 * nonfinite on the ring's batches (a streamed fit's check of X).
 */
#include "cuda_testing.h"

#include <math.h>

#include "core/validate.h"

static void test_axpy_row_scale(void)
{
    int64_t shapes[][2] = {{1, 1}, {7, 3}, {1000, 37}, {4097, 65}};
    for (int dt_i = 0; dt_i < 2; dt_i++) {
        gsb_dtype dt = dt_i ? GSB_F64 : GSB_F32;
        for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
            int before = case_begin();
            int64_t n = shapes[c][0], d = shapes[c][1];
            gsb__tensor x = host_random(dt, n, d, 2.0), y = host_random(dt, n, d, 1.0);
            gsb__tensor s = host_random(GSB_F64, n, 1, 1.5);
            gsb__tensor gx = to_gpu(&x), gy = to_gpu(&y), gs = to_gpu(&s);
            CHECK_OK(cpu->ops->axpy(cpu, -0.75, &x, &y));
            CHECK_OK(gpu->ops->axpy(gpu, -0.75, &gx, &gy));
            CHECK_MATCH(&gy, &y, dt == GSB_F32 ? 1e-6 : 1e-15);
            CHECK_OK(cpu->ops->row_scale(cpu, &y, &s));
            CHECK_OK(gpu->ops->row_scale(gpu, &gy, &gs));
            CHECK_MATCH(&gy, &y, dt == GSB_F32 ? 1e-6 : 1e-15);
            /* mismatched shapes are the caller's bug */
            gsb__tensor short_s = gsb__tensor_rows(&gs, 0, n > 1 ? n - 1 : 0);
            CHECK(gpu->ops->row_scale(gpu, &gy, &short_s) == GSB_EINTERNAL);
            gsb__tensor *all[] = {&x, &y, &s, &gx, &gy, &gs};
            for (int i = 0; i < 6; i++)
                gsb__tensor_free(all[i]);
            CASE_END(before, "%s %lld x %lld", gsb_dtype_name(dt), (long long)n, (long long)d);
        }
    }
}

/* Every dtype pair, C order, the transpose (F order) and reversed rows. */
static void test_strided_copy(void)
{
    gsb_dtype dts[4] = {GSB_F32, GSB_F64, GSB_I32, GSB_I64};
    const int64_t R = 300, C = 41;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            int before = case_begin();
            gsb__tensor src = host_random(dts[a], R, C, 50.0), gsrc = to_gpu(&src);
            int64_t isz = (int64_t)gsb_dtype_size(dts[a]);
            struct {
                int64_t rows, cols, s0, s1, off;
            } lay[3] = {{R, C, C * isz, isz, 0},
                        {C, R, isz, C * isz, 0},                 /* the transpose */
                        {R, C, -C * isz, isz, (R - 1) * C * isz}}; /* rows reversed */
            for (int l = 0; l < 3; l++) {
                gsb__tensor ref = host_poisoned(dts[b], lay[l].rows, lay[l].cols);
                gsb__tensor out = gpu_poisoned(dts[b], lay[l].rows, lay[l].cols);
                CHECK_OK(cpu->ops->strided_copy(cpu, (char *)src.data + lay[l].off, dts[a],
                                                lay[l].s0, lay[l].s1, &ref));
                CHECK_OK(gpu->ops->strided_copy(gpu, (char *)gsrc.data + lay[l].off, dts[a],
                                                lay[l].s0, lay[l].s1, &out));
                CHECK_MATCH(&out, &ref, 0.0);
                gsb__tensor_free(&ref);
                gsb__tensor_free(&out);
            }
            gsb__tensor_free(&src);
            gsb__tensor_free(&gsrc);
            CASE_END(before, "%s -> %s", gsb_dtype_name(dts[a]), gsb_dtype_name(dts[b]));
        }
}

/*
 * Stream a host matrix through a ring of nbuf buffers in batches, as
 * estimators/common/stream.c does, summing every batch's column moments on
 * the GPU with axpy (so a kernel reads each buffer before the next fill of
 * it): the total equals the CPU's column sums, batch by batch in order.
 * host: pageable (malloc) or page-locked (registered) memory.
 */
static void ring_case(int64_t n, int64_t d, int64_t batch, int nbuf, int pinned)
{
    gsb__tensor X = host_random(GSB_F64, n, d, 1.0);
    if (pinned)
        CHECK_OK(gpu->ops->host_register(gpu, X.data, gsb__tensor_nbytes(&X)));
    size_t row = (size_t)d * sizeof(double), bytes = (size_t)batch * row + 256;
    gsb__stage *st = NULL;
    CHECK_OK(gpu->ops->stage_open(gpu, bytes, nbuf, &st));
    gsb__tensor sum = GSB__TENSOR_NONE, bm = GSB__TENSOR_NONE;
    CHECK_OK(gsb__tensor_zeros(gpu, GSB_F64, d, 1, &sum));
    CHECK_OK(gsb__tensor_alloc(gpu, GSB_F64, d, 1, &bm));
    int64_t nb = (n + batch - 1) / batch;
    double y_marker = 3.25;
    for (int64_t i = 0, filled = 0; i < nb; i++) {
        while (filled < nb && filled < i + nbuf) { /* keep the ring full */
            int64_t r0 = filled * batch, rows = n - r0 < batch ? n - r0 : batch;
            gsb__stage_seg segs[2] = {{(char *)X.data + r0 * row, (size_t)rows * row, 0},
                                      {&y_marker, sizeof y_marker, bytes - 8}};
            CHECK_OK(gpu->ops->stage_fill(gpu, st, (int)(filled % nbuf), segs, 2));
            filled++;
        }
        int64_t rows = n - i * batch < batch ? n - i * batch : batch;
        void *dev = NULL;
        CHECK_OK(gpu->ops->stage_acquire(gpu, st, (int)(i % nbuf), &dev));
        gsb__tensor b = {dev, GSB_F64, rows, d, 2, gpu, 0};
        CHECK_OK(gpu->ops->col_moments(gpu, &b, NULL, &bm, NULL));
        CHECK_OK(gpu->ops->axpy(gpu, (double)rows, &bm, &sum));
        if (i == nb - 1) { /* the marker segment landed at its offset */
            double got = 0;
            gsb__tensor m = {(char *)dev + bytes - 8, GSB_F64, 1, 1, 2, gpu, 0};
            CHECK_OK(gpu->ops->download(gpu, &m, &got));
            CHECK(got == y_marker);
        }
        CHECK_OK(gpu->ops->stage_release(gpu, st, (int)(i % nbuf)));
    }
    gpu->ops->stage_close(gpu, st);
    gsb__tensor ref = host_poisoned(GSB_F64, d, 1);
    for (int64_t j = 0; j < d; j++) {
        double acc = 0;
        for (int64_t i = 0; i < n; i++)
            acc += ((double *)X.data)[i * d + j];
        ((double *)ref.data)[j] = acc;
    }
    CHECK_MATCH(&sum, &ref, 1e-12);
    if (pinned)
        gpu->ops->host_unregister(gpu, X.data);
    gsb__tensor_free(&X);
    gsb__tensor_free(&sum);
    gsb__tensor_free(&bm);
    gsb__tensor_free(&ref);
}

static void test_stage_ring(void)
{
    int64_t cases[][3] = {{1, 3, 1}, {1000, 7, 64}, {100003, 33, 4096}, {300000, 64, 100000}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int nbuf = 1; nbuf <= GSB__STAGE_MAX_BUFFERS; nbuf++)
            for (int pinned = 0; pinned < 2; pinned++) {
                int before = case_begin();
                ring_case(cases[c][0], cases[c][1], cases[c][2], nbuf, pinned);
                CASE_END(before, "n %lld d %lld batch %lld nbuf %d pinned %d",
                         (long long)cases[c][0], (long long)cases[c][1],
                         (long long)cases[c][2], nbuf, pinned);
            }
    /* traced rings (GSB_STREAM_TRACE: events on both streams, a line at close)
     * give the same sums */
    setenv("GSB_STREAM_TRACE", "1", 1);
    for (int pinned = 0; pinned < 2; pinned++) {
        int before = case_begin();
        ring_case(100003, 33, 4096, GSB__STAGE_MAX_BUFFERS, pinned);
        CASE_END(before, "traced, pinned %d", pinned);
    }
    unsetenv("GSB_STREAM_TRACE");
    gsb__stage *st = NULL;
    CHECK(gpu->ops->stage_open(gpu, 64, GSB__STAGE_MAX_BUFFERS + 1, &st) == GSB_EINTERNAL);
    CHECK_OK(gpu->ops->stage_open(gpu, 64, 2, &st));
    double v[16] = {0};
    gsb__stage_seg over = {v, sizeof v, 0};
    CHECK(gpu->ops->stage_fill(gpu, st, 0, &over, 1) == GSB_EINTERNAL);
    void *dev;
    CHECK(gpu->ops->stage_acquire(gpu, st, 2, &dev) == GSB_EINTERNAL);
    gpu->ops->stage_close(gpu, st);
}

/*
 * nonfinite on the ring's batches (how a streamed fit checks an X whose
 * check the dispatcher deferred: estimators/common/stream.c) against its CPU
 * twin gsb__host_nonfinite on the same host rows: fresh random X with NaN in
 * one batch, an infinity in another, both in a third, a bad value in the row
 * just past a clean batch (the op reads its batch and no further).
 */
static void nonfinite_ring_case(gsb_dtype dt, int pinned)
{
    const int64_t n = 50000, d = 33, batch = 6000, nb = (n + batch - 1) / batch;
    const int nbuf = 3;
    gsb__tensor X = host_random(dt, n, d, 1.0);
    const double nan_ = NAN, inf_ = INFINITY;
    /* batch 1: NaN; batch 2: -inf; batch 4: inf then NaN; batch 5: NaN in its last row;
     * the first row of batch 7 (the row after batch 6) inf; batches 0, 3, 6 clean */
    const int64_t at[][2] = {{1 * batch + 17, 0}, {2 * batch + 5, 1}, {4 * batch, 2},
                             {4 * batch + 999, 0}, {6 * batch - 1, 0}, {7 * batch, 2}};
    for (size_t k = 0; k < sizeof at / sizeof *at; k++)
        gsb__tensor_set(&X, at[k][0] * d + (at[k][0] % d),
                        at[k][1] == 0 ? nan_ : at[k][1] == 1 ? -inf_ : inf_);
    if (pinned)
        CHECK_OK(gpu->ops->host_register(gpu, X.data, gsb__tensor_nbytes(&X)));
    size_t row = (size_t)d * gsb_dtype_size(dt), bytes = (size_t)batch * row;
    gsb__stage *st = NULL;
    CHECK_OK(gpu->ops->stage_open(gpu, bytes, nbuf, &st));
    int seen[3] = {0, 0, 0};
    for (int64_t i = 0, filled = 0; i < nb; i++) {
        while (filled < nb && filled < i + nbuf) {
            int64_t r0 = filled * batch, rows = n - r0 < batch ? n - r0 : batch;
            gsb__stage_seg seg = {(char *)X.data + r0 * row, (size_t)rows * row, 0};
            CHECK_OK(gpu->ops->stage_fill(gpu, st, (int)(filled % nbuf), &seg, 1));
            filled++;
        }
        int64_t rows = n - i * batch < batch ? n - i * batch : batch;
        void *dev = NULL;
        CHECK_OK(gpu->ops->stage_acquire(gpu, st, (int)(i % nbuf), &dev));
        gsb__tensor b = {dev, dt, rows, d, 2, gpu, 0};
        gsb__tensor h = {(char *)X.data + i * batch * row, dt, rows, d, 2, cpu, 0};
        int got = -1, want = gsb__host_nonfinite(&h);
        CHECK_OK(gpu->ops->nonfinite(gpu, &b, &got));
        if (got != want)
            fprintf(stderr, "  batch %lld: nonfinite %d, host twin %d\n", (long long)i, got,
                    want);
        CHECK(got == want);
        seen[want]++;
        CHECK_OK(gpu->ops->stage_release(gpu, st, (int)(i % nbuf)));
    }
    gpu->ops->stage_close(gpu, st);
    CHECK(seen[0] >= 3 && seen[1] == 3 && seen[2] == 2); /* the case is what it says */
    if (pinned)
        gpu->ops->host_unregister(gpu, X.data);
    gsb__tensor_free(&X);
}

static void test_nonfinite_on_ring_batches(void)
{
    for (int dt_i = 0; dt_i < 2; dt_i++)
        for (int pinned = 0; pinned < 2; pinned++) {
            int before = case_begin();
            gsb_dtype dt = dt_i ? GSB_F64 : GSB_F32;
            nonfinite_ring_case(dt, pinned);
            CASE_END(before, "%s pinned %d", gsb_dtype_name(dt), pinned);
        }
}

/* Uploads, downloads and fills are counted; a fill when it is acquired, once. */
static void test_copy_stats(void)
{
    gsb__copy_stats a, b;
    CHECK_OK(gpu->ops->copy_stats(gpu, &a));
    gsb__tensor h = host_random(GSB_F32, 1000, 10, 1.0), g = to_gpu(&h), back = from_gpu(&g);
    CHECK_OK(gpu->ops->copy_stats(gpu, &b));
    CHECK(b.h2d_count >= a.h2d_count + 1 && b.h2d_bytes >= a.h2d_bytes + 40000);
    CHECK(b.d2h_count >= a.d2h_count + 1 && b.d2h_bytes >= a.d2h_bytes + 40000);
    gsb__stage *st = NULL;
    CHECK_OK(gpu->ops->stage_open(gpu, 40000, 2, &st));
    gsb__stage_seg seg = {h.data, 40000, 0};
    gsb__copy_stats f0, f1, f2, f3;
    void *dev = NULL;
    CHECK_OK(gpu->ops->copy_stats(gpu, &f0));
    CHECK_OK(gpu->ops->stage_fill(gpu, st, 1, &seg, 1));
    CHECK_OK(gpu->ops->copy_stats(gpu, &f1));
    CHECK_OK(gpu->ops->stage_acquire(gpu, st, 1, &dev));
    CHECK_OK(gpu->ops->copy_stats(gpu, &f2));
    CHECK_OK(gpu->ops->stage_acquire(gpu, st, 1, &dev));
    CHECK_OK(gpu->ops->copy_stats(gpu, &f3));
    CHECK_OK(gpu->ops->stage_release(gpu, st, 1));
    CHECK_OK(gpu->ops->stage_fill(gpu, st, 0, &seg, 1)); /* never acquired: not counted */
    gpu->ops->stage_close(gpu, st);
    CHECK(f1.h2d_count == f0.h2d_count && f1.h2d_bytes == f0.h2d_bytes);
    CHECK(f2.h2d_count == f0.h2d_count + 1 && f2.h2d_bytes == f0.h2d_bytes + 40000);
    CHECK(f3.h2d_count == f2.h2d_count && f3.h2d_bytes == f2.h2d_bytes);
    gsb__tensor_free(&h);
    gsb__tensor_free(&g);
    gsb__tensor_free(&back);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(11);
    RUN(test_axpy_row_scale);
    RUN(test_strided_copy);
    RUN(test_stage_ring);
    RUN(test_nonfinite_on_ring_batches);
    RUN(test_copy_stats);
    return testing_done();
}
