/*
 * test_devarray.c - device arrays and DLPack in the C API, where no GPU is
 * needed: the checks of a gsb_device_array (struct size, device type,
 * ordinal, null pointers, shapes), the refusal of a device array by a
 * session without a GPU, DLPack tensors of host memory used as inputs (with
 * strides and byte offsets), the DLTensors gsb cannot read, results exported
 * as DLManagedTensors, and a device array sent to a remote session without a
 * CUDA backend in the process.  tests/cuda/test_cuda_devarray.c has the GPU
 * side (memory used in place, wrong ordinals, host memory passed as device).
 */
#include <pthread.h>

#include "backend/backend.h"
#include "gsb_dlpack.h"
#include "test_api_helpers.h"

static gsb_session *S; /* device=cpu: no GPU whatever the machine has */

enum { N = 40, D = 3 };
static double X[N * D];

static void make_data(void)
{
    testing_seed(5);
    testing_fill_normal(X, N * D);
}

static int fit_status(gsb_session *s, const char *est, const gsb_array *x)
{
    gsb_model *m = testing_model(s, est, NULL);
    int rc = testing_fit(m, x, NULL, NULL);
    gsb_model_free(m);
    return rc;
}

static void test_constructors(void)
{
    gsb_device_array d = gsb_device_array_2d((void *)0x1000, GSB_F32, 5, 4, 1, GSB_STREAM_NONE);
    CHECK(d.struct_size == sizeof d && d.device_type == GSB_DEVICE_CUDA && d.device_id == 1);
    CHECK(d.array.ndim == 2 && d.array.shape[0] == 5 && d.array.shape[1] == 4);
    CHECK(d.stream == GSB_STREAM_NONE);
    gsb_array a = gsb_array_on_device(&d);
    CHECK(a.data == &d && a.strides[1] == GSB_DEVICE_REF_STRIDE);
    CHECK(a.dtype == GSB_F32 && a.ndim == 2 && a.shape[0] == 5 && a.shape[1] == 4);
    gsb_array z = gsb_array_on_device(NULL);
    CHECK(z.data == NULL && z.ndim == 0 && z.strides[1] == 0);
}

/* A session without a GPU refuses device memory, after the checks of the struct. */
static void test_validation_without_gpu(void)
{
    gsb_device_array d = gsb_device_array_2d((void *)0x1000, GSB_F64, N, D, 0, NULL);
    gsb_array a = gsb_array_on_device(&d);
    CHECK_ERR(fit_status(S, "KMeans", &a), GSB_EUNSUPPORTED, "Input X is in CUDA device memory");
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EUNSUPPORTED, "device=cpu");

    gsb_device_array bad = d;
    bad.struct_size = 8;
    a = gsb_array_on_device(&bad);
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EINVAL, "struct_size");
    bad = d;
    bad.device_type = 10; /* ROCm */
    a = gsb_array_on_device(&bad);
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EUNSUPPORTED, "device type 10");
    bad = d;
    bad.device_id = -2;
    a = gsb_array_on_device(&bad);
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EINVAL, "ordinal -2 is negative");
    bad.device_id = GSB_DEVICE_ID_OF_MEMORY; /* valid: then refused for want of a GPU */
    a = gsb_array_on_device(&bad);
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EUNSUPPORTED, "CUDA device memory");
    bad = d;
    bad.array.data = NULL;
    a = gsb_array_on_device(&bad);
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EINVAL, "no data pointer");
    bad = d;
    bad.array.dtype = 9;
    a = gsb_array_on_device(&bad);
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EINVAL, "unknown dtype code 9");
    bad = d;
    bad.array = gsb_array_1d((void *)0x1000, GSB_F64, N);
    a = gsb_array_on_device(&bad);
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EINVAL, "Expected 2D array, got 1D array");
    bad = d;
    bad.array.strides[0] = INT64_MAX / 2;
    bad.array.strides[1] = 8;
    a = gsb_array_on_device(&bad);
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EINVAL, "reach outside any memory");
    /* a reference changed after it was made */
    a = gsb_array_on_device(&d);
    a.shape[0] = N + 1;
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EINVAL, "differs from its gsb_device_array");
    a = gsb_array_on_device(NULL);
    a.ndim = 2;
    a.strides[1] = GSB_DEVICE_REF_STRIDE;
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EINVAL, "without its gsb_device_array");
    /* a device y next to a host X */
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D);
    gsb_device_array dy = gsb_device_array_2d((void *)0x1000, GSB_F64, N, 1, 0, NULL);
    gsb_array y = gsb_array_on_device(&dy);
    gsb_model *m = testing_model(S, "LinearRegression", NULL);
    CHECK_ERR(testing_fit(m, &x, &y, NULL), GSB_EUNSUPPORTED, "Input y is in CUDA");
    gsb_model_free(m);
    /* gsb_data_put of a device array */
    gsb_data *h = NULL;
    a = gsb_array_on_device(&d);
    CHECK_ERR(gsb_data_put(S, &a, &h), GSB_EUNSUPPORTED, "CUDA device memory");
    CHECK(h == NULL);
}

/* A DLPack CPU tensor with a byte offset and strides: X's transpose. */
static void test_dlpack_host(void)
{
    double XT[D * N + 1];
    XT[0] = 12345.0; /* skipped by the byte offset */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            XT[1 + j * N + i] = X[i * D + j];
    int64_t shape[2] = {N, D}, strides[2] = {1, N};
    DLTensor t = {XT, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, shape, strides, sizeof(double)};
    gsb_array a;
    gsb_device_array storage;
    CHECK_OK(gsb_array_from_dlpack(&t, NULL, &storage, &a));
    CHECK(a.data == XT + 1 && a.strides[0] == 8 && a.strides[1] == 8 * N);
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D);
    gsb_model *m1 = testing_model(S, "StandardScaler", NULL);
    gsb_model *m2 = testing_model(S, "StandardScaler", NULL);
    CHECK_OK(testing_fit(m1, &x, NULL, NULL));
    CHECK_OK(testing_fit(m2, &a, NULL, NULL));
    double v1[D], v2[D];
    CHECK(testing_attr(m1, "mean_", v1, D, NULL) == D);
    CHECK(testing_attr(m2, "mean_", v2, D, NULL) == D);
    CHECK(testing_relerr(v2, v1, D) == 0);
    gsb_model_free(m1);
    gsb_model_free(m2);
    /* compact (NULL strides) and pinned host memory: plain host arrays */
    t.strides = NULL;
    t.byte_offset = 0;
    t.data = X;
    t.device.device_type = kDLCUDAHost;
    CHECK_OK(gsb_array_from_dlpack(&t, NULL, NULL, &a));
    CHECK(a.data == X && a.strides[0] == 0 && a.strides[1] == 0);
    /* 1-D int32 */
    int32_t labels[N];
    for (int i = 0; i < N; i++)
        labels[i] = i % 2;
    int64_t n = N;
    DLTensor tl = {labels, {kDLCPU, 0}, 1, {kDLInt, 32, 1}, &n, NULL, 0};
    CHECK_OK(gsb_array_from_dlpack(&tl, NULL, NULL, &a));
    CHECK(a.ndim == 1 && a.dtype == GSB_I32 && a.shape[0] == N);
}

/* DLTensors gsb cannot read, and a CUDA one on a CPU session. */
static void test_dlpack_refusals(void)
{
    int64_t shape[3] = {N, D, 1}, zero[2] = {0, 0};
    gsb_array a;
    gsb_device_array storage;
    DLTensor t = {X, {kDLCPU, 0}, 2, {kDLFloat, 16, 1}, shape, NULL, 0};
    CHECK_ERR(gsb_array_from_dlpack(&t, NULL, &storage, &a), GSB_EINVAL, "code 2, bits 16");
    t.dtype = (DLDataType){kDLUInt, 32, 1};
    CHECK_ERR(gsb_array_from_dlpack(&t, NULL, &storage, &a), GSB_EINVAL, "is not one gsb reads");
    t.dtype = (DLDataType){kDLFloat, 32, 2};
    CHECK_ERR(gsb_array_from_dlpack(&t, NULL, &storage, &a), GSB_EINVAL, "lanes 2");
    t.dtype = (DLDataType){kDLFloat, 64, 1};
    t.ndim = 3;
    CHECK_ERR(gsb_array_from_dlpack(&t, NULL, &storage, &a), GSB_EINVAL,
              "Found array with dim 3. Expected <= 2.");
    t.ndim = 2;
    t.strides = zero;
    CHECK_ERR(gsb_array_from_dlpack(&t, NULL, &storage, &a), GSB_EINVAL, "broadcast");
    t.strides = NULL;
    t.device.device_type = kDLROCM;
    CHECK_ERR(gsb_array_from_dlpack(&t, NULL, &storage, &a), GSB_EUNSUPPORTED,
              "DLPack device type 10");
    t.device.device_type = kDLCPU;
    t.data = NULL;
    CHECK_ERR(gsb_array_from_dlpack(&t, NULL, &storage, &a), GSB_EINVAL, "has no data");
    CHECK_ERR(gsb_array_from_dlpack(NULL, NULL, &storage, &a), GSB_EINVAL, "must not be NULL");
    /* CUDA memory: a device reference to storage, refused by a CPU session */
    t.data = (void *)0x2000;
    t.device = (DLDevice){kDLCUDA, 0};
    CHECK_ERR(gsb_array_from_dlpack(&t, NULL, NULL, &a), GSB_EINVAL, "needs storage");
    CHECK_OK(gsb_array_from_dlpack(&t, GSB_STREAM_PER_THREAD, &storage, &a));
    CHECK(a.data == &storage && a.strides[1] == GSB_DEVICE_REF_STRIDE);
    CHECK(storage.device_type == GSB_DEVICE_CUDA && storage.stream == GSB_STREAM_PER_THREAD);
    CHECK(storage.array.data == (void *)0x2000 && storage.array.shape[1] == D);
    CHECK_ERR(fit_status(S, "PCA", &a), GSB_EUNSUPPORTED, "CUDA device memory");
    t.device.device_type = kDLCUDAManaged;
    CHECK_OK(gsb_array_from_dlpack(&t, NULL, &storage, &a));
    CHECK(storage.device_type == GSB_DEVICE_CUDA_MANAGED);
}

struct deleter_args {
    DLManagedTensor *t;
};

static void *delete_elsewhere(void *p)
{
    struct deleter_args *a = p;
    a->t->deleter(a->t);
    return NULL;
}

/* Results and attributes exported as DLManagedTensors (freed by their deleter,
 * after the result, in another thread). */
static void test_dlpack_export(void)
{
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D);
    gsb_model *m = testing_model(S, "KMeans", "{\"n_clusters\": 2, \"random_state\": 0}");
    CHECK_OK(testing_fit(m, &x, NULL, NULL));
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_get_attr(m, "cluster_centers_", &r));
    DLManagedTensor *t = NULL;
    CHECK_ERR(gsb_result_to_dlpack(r, 1, &t), GSB_ENOTFOUND, "no array 1");
    CHECK_OK(gsb_result_to_dlpack(r, 0, &t));
    const gsb_array *a = gsb_result_array(r, 0);
    CHECK(t && t->dl_tensor.ndim == 2 && t->dl_tensor.shape[0] == 2 &&
          t->dl_tensor.shape[1] == D && t->dl_tensor.strides == NULL);
    CHECK(t->dl_tensor.device.device_type == kDLCPU && t->dl_tensor.dtype.code == kDLFloat &&
          t->dl_tensor.dtype.bits == 64 && t->dl_tensor.dtype.lanes == 1);
    CHECK(((uintptr_t)t->dl_tensor.data % 256) == 0);
    CHECK(memcmp(t->dl_tensor.data, a->data, 2 * D * sizeof(double)) == 0);
    gsb_result_free(r);
    struct deleter_args da = {t};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, delete_elsewhere, &da) == 0);
    pthread_join(th, NULL);
    /* a scalar: 0-d, int64 */
    CHECK_OK(gsb_model_get_attr(m, "n_iter_", &r));
    CHECK_OK(gsb_result_to_dlpack(r, 0, &t));
    CHECK(t->dl_tensor.ndim == 0 && t->dl_tensor.dtype.code == kDLInt &&
          t->dl_tensor.dtype.bits == 64);
    CHECK(*(int64_t *)t->dl_tensor.data == testing_at(gsb_result_array(r, 0), 0));
    t->deleter(t);
    gsb_result_free(r);
    /* a round trip: the exported centres as the input of predict */
    CHECK_OK(gsb_model_get_attr(m, "cluster_centers_", &r));
    CHECK_OK(gsb_result_to_dlpack(r, 0, &t));
    gsb_result_free(r);
    gsb_array in;
    CHECK_OK(gsb_array_from_dlpack(&t->dl_tensor, NULL, NULL, &in));
    double labels[2];
    CHECK(testing_call(m, "predict", &in, "labels", labels, 2, NULL) == 2);
    CHECK(labels[0] == 0 && labels[1] == 1);
    t->deleter(t);
    gsb_model_free(m);
}

/* A remote session copies a device array to the host through this process's
 * CUDA backend: without one (CI) the call fails cleanly, naming why; with a
 * GPU the fake pointer fails the driver's check. */
static void test_remote_copy(void)
{
    const char *dir = getenv("GSB_DATA_DIR");
    char opts[1024];
    snprintf(opts, sizeof opts, "{\"listen\": [\"tcp://127.0.0.1:0\"], \"data_dir\": \"%s\", "
             "\"device\": \"cpu\", \"log_stderr\": false, \"log_file\": \"%s/gsbd.log\"}",
             dir ? dir : "/tmp", dir ? dir : "/tmp");
    gsb_server *srv = NULL;
    CHECK_OK(gsb_server_start(opts, &srv));
    if (!srv)
        return;
    gsb_session *r = NULL;
    CHECK_OK(gsb_open(gsb_server_url(srv, 0), &r));
    gsb_device_array d = gsb_device_array_2d((void *)0x1000, GSB_F64, N, D, 0, NULL);
    gsb_array a = gsb_array_on_device(&d);
    if (gsb__cuda_backend())
        CHECK_ERR(fit_status(r, "PCA", &a), GSB_EINVAL, "the device array's first byte");
    else
        CHECK_ERR(fit_status(r, "PCA", &a), GSB_EUNSUPPORTED, "cannot read it");
    /* the host path of the same session still works */
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D);
    CHECK_OK(fit_status(r, "PCA", &x));
    gsb_close(r);
    gsb_server_stop(srv);
}

int main(void)
{
    make_data();
    if (gsb_open("local?device=cpu", &S) != GSB_OK) {
        fprintf(stderr, "gsb_open: %s\n", gsb_errmsg());
        return 1;
    }
    RUN(test_constructors);
    RUN(test_validation_without_gpu);
    RUN(test_dlpack_host);
    RUN(test_dlpack_refusals);
    RUN(test_dlpack_export);
    RUN(test_remote_copy);
    return testing_close(S);
}
