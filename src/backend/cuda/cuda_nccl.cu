/*
 * cuda_nccl.cu - the NCCL communicator (backend/comm.h) over the GPUs of a
 * multi-device session, in one process: ncclCommInitAll over the session's
 * devices, then each collective copies every rank's host buffer into a
 * scratch buffer on its GPU, issues one NCCL call per rank between
 * ncclGroupStart and ncclGroupEnd (one host thread drives every device), and
 * copies the results back, all on the ranks' backend streams, under the
 * ranks' op locks (taken in device order) so that no other op interleaves
 * on those streams.
 *
 * NCCL is loaded at run time, so the plugin builds and runs without it (one
 * GPU): from the path the engine passes ($GSB_NCCL_LIBRARY), else
 * libnccl.so.2 on the loader's search path, beside the CUDA libraries the
 * plugin uses (cuBLAS's folder), and in the pip layout's nvidia/nccl/lib
 * beside a pip cuBLAS (nvidia/cublas/lib).  The few entry points used are
 * declared here with the values of nccl.h (a stable ABI since NCCL 2.0;
 * checked against nccl.h when the build machine has it).
 *
 * NVLink SHARP / multicast stays off: NCCL_NVLS_ENABLE=0 is set (unless the
 * user set it) before NCCL initialises, as every process of this project
 * that starts NCCL does.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/comm.h"
#include "backend/cuda/cuda_common.h"

#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>
#define GSB_CHECK_NCCL_H 1
#endif
#endif

namespace {

typedef struct ncclComm *nccl_comm_t;
typedef int nccl_result_t;
enum { NCCL_OK = 0, NCCL_SUM = 0, NCCL_I32 = 2, NCCL_I64 = 4, NCCL_F32 = 7, NCCL_F64 = 8 };

#ifdef GSB_CHECK_NCCL_H
static_assert((int)ncclSuccess == NCCL_OK && (int)ncclSum == NCCL_SUM &&
                  (int)ncclInt32 == NCCL_I32 && (int)ncclInt64 == NCCL_I64 &&
                  (int)ncclFloat32 == NCCL_F32 && (int)ncclFloat64 == NCCL_F64,
              "nccl.h's values differ from the ones this file declares");
#endif


struct nccl_api {
    void *lib;
    nccl_result_t (*comm_init_all)(nccl_comm_t *, int, const int *);
    nccl_result_t (*comm_destroy)(nccl_comm_t);
    nccl_result_t (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t,
                                cudaStream_t);
    nccl_result_t (*all_gather)(const void *, void *, size_t, int, nccl_comm_t, cudaStream_t);
    nccl_result_t (*broadcast)(const void *, void *, size_t, int, int, nccl_comm_t,
                               cudaStream_t);
    nccl_result_t (*group_start)(void);
    nccl_result_t (*group_end)(void);
    const char *(*error_string)(nccl_result_t);
    nccl_result_t (*get_version)(int *);
};

nccl_api api;
pthread_mutex_t api_mu = PTHREAD_MUTEX_INITIALIZER;

struct nccl_comm {
    gsb__comm base; /* first: the engine holds a gsb__comm * */
    int device[GSB__CUDA_MAX_DEVICES];
    cudaStream_t stream[GSB__CUDA_MAX_DEVICES];
    nccl_comm_t comm[GSB__CUDA_MAX_DEVICES];
    void *scratch[GSB__CUDA_MAX_DEVICES]; /* cudaMalloc'd on device[r] */
    size_t cap;                           /* bytes of each scratch */
};

void say(char *why, size_t len, const char *fmt, const char *a, const char *b)
{
    if (why && len)
        snprintf(why, len, fmt, a, b);
}

/* The folder of the loaded cuBLAS (the CUDA libraries this plugin uses). */
void cuda_lib_folder(char *buf, size_t len)
{
    Dl_info info;
    buf[0] = '\0';
    if (dladdr((void *)cublasCreate_v2, &info) && info.dli_fname) {
        snprintf(buf, len, "%s", info.dli_fname);
        char *slash = strrchr(buf, '/');
        if (slash)
            slash[1] = '\0';
        else
            buf[0] = '\0';
    }
}

void *open_lib(const char *path, char *tried, size_t tried_len, char *err, size_t err_len)
{
    size_t used = strlen(tried);
    snprintf(tried + used, tried_len - used, "%s%s", used ? ", " : "", path);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(err, err_len, "%s", e ? e : "not found");
    }
    return h;
}

template <typename F> bool sym(void *lib, const char *name, F *out)
{
    *(void **)out = dlsym(lib, name);
    return *out != nullptr;
}

/* Load libnccl once (api_mu held); GSB_EUNSUPPORTED with the places tried. */
int load_nccl(const char *path, char *why, size_t why_len)
{
    if (api.lib)
        return GSB_OK;
    char tried[3 * PATH_MAX] = "", err[1024] = "", dir[PATH_MAX], cand[PATH_MAX + 64];
    void *h = nullptr;
    if (path) {
        h = open_lib(path, tried, sizeof tried, err, sizeof err);
    } else {
        h = open_lib("libnccl.so.2", tried, sizeof tried, err, sizeof err);
        cuda_lib_folder(dir, sizeof dir);
        if (!h && dir[0]) {
            snprintf(cand, sizeof cand, "%slibnccl.so.2", dir);
            h = open_lib(cand, tried, sizeof tried, err, sizeof err);
        }
        if (!h && dir[0]) { /* pip: nvidia/cublas/lib -> nvidia/nccl/lib */
            snprintf(cand, sizeof cand, "%s../../nccl/lib/libnccl.so.2", dir);
            h = open_lib(cand, tried, sizeof tried, err, sizeof err);
        }
    }
    if (!h) {
        char msg[4 * PATH_MAX];
        snprintf(msg, sizeof msg, "several GPUs need NCCL (libnccl.so.2), which could not be "
                 "loaded (tried %s: %s); install it (pip install nvidia-nccl-cu13, or the "
                 "CUDA toolkit's NCCL) and set GSB_NCCL_LIBRARY to the library's path, or "
                 "use one GPU (device=cuda)", tried, err);
        say(why, why_len, "%s%s", msg, "");
        return GSB_EUNSUPPORTED;
    }
    nccl_api a = {};
    a.lib = h;
    if (!sym(h, "ncclCommInitAll", &a.comm_init_all) ||
        !sym(h, "ncclCommDestroy", &a.comm_destroy) || !sym(h, "ncclAllReduce", &a.all_reduce) ||
        !sym(h, "ncclAllGather", &a.all_gather) || !sym(h, "ncclBroadcast", &a.broadcast) ||
        !sym(h, "ncclGroupStart", &a.group_start) || !sym(h, "ncclGroupEnd", &a.group_end) ||
        !sym(h, "ncclGetErrorString", &a.error_string) ||
        !sym(h, "ncclGetVersion", &a.get_version)) {
        say(why, why_len, "%s is not a usable NCCL (an entry point is missing)%s", tried, "");
        dlclose(h);
        return GSB_EUNSUPPORTED;
    }
    api = a;
    return GSB_OK;
}

int nccl_fail(nccl_result_t r, const char *what)
{
    return GSB_CUDA_ERR(GSB_EBACKEND, "NCCL %s failed: %s", what,
                        api.error_string ? api.error_string(r) : "unknown error");
}

#define NCCL_TRY(call, what)                                                        \
    do {                                                                            \
        nccl_result_t r_ = (call);                                                  \
        if (r_ != NCCL_OK)                                                          \
            return nccl_fail(r_, what);                                             \
    } while (0)

#define GSB_PASS(expr)                                                              \
    do {                                                                            \
        int pass_rc_ = (expr);                                                      \
        if (pass_rc_ != GSB_OK)                                                     \
            return pass_rc_;                                                        \
    } while (0)

int nccl_dtype(gsb_dtype dt)
{
    switch (dt) {
    case GSB_F32: return NCCL_F32;
    case GSB_F64: return NCCL_F64;
    case GSB_I32: return NCCL_I32;
    case GSB_I64: return NCCL_I64;
    }
    return -1;
}

/* Every rank's scratch holds at least bytes (lock held; streams idle). */
int ensure_scratch(nccl_comm *c, size_t bytes)
{
    if (bytes <= c->cap)
        return GSB_OK;
    for (int r = 0; r < c->base.nranks; r++) {
        CUDA_TRY(cudaSetDevice(c->device[r]));
        if (c->scratch[r]) {
            CUDA_TRY(cudaStreamSynchronize(c->stream[r]));
            CUDA_TRY(cudaFree(c->scratch[r]));
            c->scratch[r] = nullptr;
        }
    }
    c->cap = 0;
    for (int r = 0; r < c->base.nranks; r++) {
        CUDA_TRY(cudaSetDevice(c->device[r]));
        CUDA_TRY(cudaMalloc(&c->scratch[r], bytes));
    }
    c->cap = bytes;
    return GSB_OK;
}

/* host -> scratch + off on every rank (each its own host buffer) */
int put_all(nccl_comm *c, const void *const *host, size_t off, size_t bytes)
{
    for (int r = 0; r < c->base.nranks; r++) {
        CUDA_TRY(cudaSetDevice(c->device[r]));
        CUDA_TRY(cudaMemcpyAsync((char *)c->scratch[r] + (off ? off * (size_t)r : 0), host[r],
                                 bytes, cudaMemcpyHostToDevice, c->stream[r]));
    }
    return GSB_OK;
}

/* scratch -> host on every rank, then wait for every stream */
int get_all(nccl_comm *c, void *const *host, size_t bytes)
{
    for (int r = 0; r < c->base.nranks; r++) {
        CUDA_TRY(cudaSetDevice(c->device[r]));
        CUDA_TRY(cudaMemcpyAsync(host[r], c->scratch[r], bytes, cudaMemcpyDeviceToHost,
                                 c->stream[r]));
    }
    for (int r = 0; r < c->base.nranks; r++) {
        CUDA_TRY(cudaSetDevice(c->device[r]));
        CUDA_TRY(cudaStreamSynchronize(c->stream[r]));
    }
    return GSB_OK;
}

enum op_kind { OP_ALLREDUCE, OP_ALLGATHER, OP_BROADCAST };

/* One collective (lock held). */
int collective(nccl_comm *c, op_kind op, const void *const *send, void *const *recv,
               int64_t count, gsb_dtype dtype, int root)
{
    int n = c->base.nranks, dt = nccl_dtype(dtype);
    if (count < 0 || dt < 0 || (op == OP_BROADCAST && (root < 0 || root >= n)))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "comm nccl: bad count %lld, dtype %d or root %d",
                            (long long)count, (int)dtype, root);
    if (count == 0)
        return GSB_OK;
    size_t bytes = (size_t)count * gsb__comm_dtype_size(dtype);
    size_t total = op == OP_ALLGATHER ? bytes * (size_t)n : bytes;
    GSB_PASS(ensure_scratch(c, total));
    /* all-gather in place: rank r's block at r * bytes */
    GSB_PASS(put_all(c, send, op == OP_ALLGATHER ? bytes : 0, bytes));
    NCCL_TRY(api.group_start(), "ncclGroupStart");
    for (int r = 0; r < n; r++) {
        void *buf = c->scratch[r];
        nccl_result_t res;
        if (op == OP_ALLREDUCE)
            res = api.all_reduce(buf, buf, (size_t)count, dt, NCCL_SUM, c->comm[r], c->stream[r]);
        else if (op == OP_ALLGATHER)
            res = api.all_gather((char *)buf + (size_t)r * bytes, buf, (size_t)count, dt,
                                 c->comm[r], c->stream[r]);
        else
            res = api.broadcast(buf, buf, (size_t)count, dt, root, c->comm[r], c->stream[r]);
        if (res != NCCL_OK) {
            int rc = nccl_fail(res, "collective");
            (void)api.group_end(); /* close the group before reporting */
            return rc;
        }
    }
    NCCL_TRY(api.group_end(), "ncclGroupEnd");
    return get_all(c, recv, total);
}

int locked(gsb__comm *base, op_kind op, const void *const *send, void *const *recv,
           int64_t count, gsb_dtype dtype, int root)
{
    nccl_comm *c = (nccl_comm *)base;
    gsb__cuda_lock_devices(c->device, base->nranks);
    int rc = collective(c, op, send, recv, count, dtype, root);
    gsb__cuda_unlock_devices(c->device, base->nranks);
    return rc;
}

int nccl_allreduce(gsb__comm *c, void *const *bufs, int64_t count, gsb_dtype dtype)
{
    return locked(c, OP_ALLREDUCE, (const void *const *)bufs, bufs, count, dtype, 0);
}

int nccl_allgather(gsb__comm *c, const void *const *send, void *const *recv, int64_t count,
                   gsb_dtype dtype)
{
    return locked(c, OP_ALLGATHER, send, recv, count, dtype, 0);
}

int nccl_broadcast(gsb__comm *c, void *const *bufs, int64_t count, gsb_dtype dtype, int root)
{
    return locked(c, OP_BROADCAST, (const void *const *)bufs, bufs, count, dtype, root);
}

/* count elements all-reduced in place in every rank's scratch, iters times after
 * a warm-up, timed on the host around the whole group (lock held) */
int time_allreduce_locked(nccl_comm *c, int64_t count, gsb_dtype dtype, int iters,
                          double *seconds)
{
    int n = c->base.nranks, dt = nccl_dtype(dtype);
    if (count < 1 || dt < 0 || iters < 1)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "comm nccl: bad count %lld, dtype %d or iters %d",
                            (long long)count, (int)dtype, iters);
    size_t bytes = (size_t)count * gsb__comm_dtype_size(dtype);
    GSB_PASS(ensure_scratch(c, bytes));
    for (int r = 0; r < n; r++) { /* defined contents: zeros */
        CUDA_TRY(cudaSetDevice(c->device[r]));
        CUDA_TRY(cudaMemsetAsync(c->scratch[r], 0, bytes, c->stream[r]));
    }
    struct timespec t0 = {0, 0}, t1 = {0, 0};
    for (int it = 0; it <= iters; it++) { /* it 0: the warm-up, untimed */
        NCCL_TRY(api.group_start(), "ncclGroupStart");
        for (int r = 0; r < n; r++) {
            nccl_result_t res = api.all_reduce(c->scratch[r], c->scratch[r], (size_t)count, dt,
                                               NCCL_SUM, c->comm[r], c->stream[r]);
            if (res != NCCL_OK) {
                int rc = nccl_fail(res, "ncclAllReduce");
                (void)api.group_end();
                return rc;
            }
        }
        NCCL_TRY(api.group_end(), "ncclGroupEnd");
        if (it == 0 || it == iters) {
            for (int r = 0; r < n; r++) {
                CUDA_TRY(cudaSetDevice(c->device[r]));
                CUDA_TRY(cudaStreamSynchronize(c->stream[r]));
            }
            clock_gettime(CLOCK_MONOTONIC, it == 0 ? &t0 : &t1);
        }
    }
    *seconds = ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) /
               iters;
    return GSB_OK;
}

int nccl_time_allreduce(gsb__comm *base, int64_t count, gsb_dtype dtype, int iters,
                        double *seconds)
{
    nccl_comm *c = (nccl_comm *)base;
    gsb__cuda_lock_devices(c->device, base->nranks);
    int rc = time_allreduce_locked(c, count, dtype, iters, seconds);
    gsb__cuda_unlock_devices(c->device, base->nranks);
    return rc;
}

void nccl_destroy(gsb__comm *base)
{
    nccl_comm *c = (nccl_comm *)base;
    gsb__cuda_lock_devices(c->device, base->nranks);
    for (int r = 0; r < base->nranks; r++) {
        if (cudaSetDevice(c->device[r]) != cudaSuccess)
            continue;
        if (c->stream[r])
            (void)cudaStreamSynchronize(c->stream[r]);
        if (c->comm[r])
            (void)api.comm_destroy(c->comm[r]);
        if (c->scratch[r])
            (void)cudaFree(c->scratch[r]);
    }
    (void)cudaGetLastError();
    gsb__cuda_unlock_devices(c->device, base->nranks);
    free(c);
}

const gsb__comm_ops nccl_ops = {nccl_allreduce, nccl_allgather, nccl_broadcast, nccl_destroy,
                                nccl_time_allreduce};

} // namespace

extern "C" __attribute__((visibility("default"))) int
gsb_nccl_comm_open(const gsb__backend *const *bes, int n, const char *nccl_path, gsb__comm **out,
                   char *why, size_t why_len)
{
    if (!out || !bes || n < 1 || n > GSB__CUDA_MAX_DEVICES) {
        say(why, why_len, "gsb_nccl_comm_open: bad arguments%s%s", "", "");
        return GSB_EUNSUPPORTED;
    }
    *out = nullptr;
    /* before NCCL reads its environment; a user's own setting is kept */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    pthread_mutex_lock(&api_mu);
    int rc = load_nccl(nccl_path, why, why_len);
    pthread_mutex_unlock(&api_mu);
    if (rc != GSB_OK)
        return rc;
    nccl_comm *c = (nccl_comm *)calloc(1, sizeof *c);
    if (!c) {
        say(why, why_len, "out of host memory%s%s", "", "");
        return GSB_ENOMEM;
    }
    c->base.ops = &nccl_ops;
    c->base.nranks = n;
    c->base.name = "nccl";
    c->base.impl = c;
    for (int r = 0; r < n; r++) {
        c->device[r] = gsb__cuda_ctx_of(bes[r])->device;
        c->stream[r] = gsb__cuda_ctx_of(bes[r])->stream;
    }
    gsb__cuda_lock_devices(c->device, n);
    nccl_result_t res = api.comm_init_all(c->comm, n, c->device);
    gsb__cuda_unlock_devices(c->device, n);
    if (res != NCCL_OK) {
        char num[16];
        snprintf(num, sizeof num, "%d", n);
        say(why, why_len, "NCCL could not start over %s GPU(s): ncclCommInitAll: %s", num,
            api.error_string(res));
        memset(c->comm, 0, sizeof c->comm);
        free(c);
        return GSB_EBACKEND;
    }
    *out = &c->base;
    return GSB_OK;
}
