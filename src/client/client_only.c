/*
 * client_only.c - what the engine provides to core/api.c, core/data.c,
 * core/tensor.c and session/remote.c, in the client-only build of libgsb
 * (GSB_CLIENT_ONLY: the Windows gsb.dll, windows/CMakeLists.txt).  That build
 * talks to a gsbd and runs no estimator itself, so:
 *   - the "CPU backend" is host memory only (alloc/release/upload/download/
 *     copy/fill): results from the server arrive in it; every compute op is
 *     absent (NULL) because nothing here computes;
 *   - estimators are known by name only: the server is the authority on
 *     names, parameters and methods, so a lookup never fails here and gives
 *     a descriptor that carries just the name (interned, one per name);
 *   - nothing is profiled here (GSB_PROFILE is the server's): core/tensor.c's
 *     notes of large moves see profiling off;
 *   - local sessions do not exist: gsb_open refuses them (session/api.c) and
 *     session/local.c, the only caller of the engine's calls, parameter
 *     checks, blobs and store, is not built, so none of those is needed.
 */
#ifndef GSB_CLIENT_ONLY
#error "client_only.c belongs to the client-only build (GSB_CLIENT_ONLY)"
#endif

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hostmem.h"
#include "core/model.h"
#include "core/params.h"
#include "core/profile.h"
#include "core/store.h"
#include "core/tensor.h"

#define NO_ENGINE                                                                         \
    "this is the Windows client build of libgsb: open a tcp:// session to a gsbd"

/* ---- the host-memory backend ------------------------------------------------ */

static size_t t_bytes(const gsb__tensor *t)
{
    return (size_t)(t->rows * t->cols) * gsb_dtype_size(t->dtype);
}

static int h_alloc(const gsb__backend *be, gsb__tensor *t)
{
    if (t->rows < 0 || t->cols < 0 || gsb_dtype_size(t->dtype) == 0 ||
        (t->rows > 0 && t->cols > (int64_t)(SIZE_MAX / 16) / t->rows))
        return gsb__err(GSB_EINVAL, "bad tensor shape or dtype");
    t->data = gsb__host_alloc(t_bytes(t));
    if (!t->data)
        return gsb__err(GSB_ENOMEM, "out of host memory (%lld x %lld)", (long long)t->rows,
                        (long long)t->cols);
    t->be = be;
    t->owned = 1;
    return GSB_OK;
}

static void h_release(const gsb__backend *be, gsb__tensor *t)
{
    (void)be;
    gsb__host_free(t->data);
    t->data = NULL;
}

static int h_upload(const gsb__backend *be, gsb__tensor *dst, const void *host)
{
    (void)be;
    memcpy(dst->data, host, t_bytes(dst));
    return GSB_OK;
}

static int h_download(const gsb__backend *be, const gsb__tensor *src, void *host)
{
    (void)be;
    memcpy(host, src->data, t_bytes(src));
    return GSB_OK;
}

static double get_as_double(const void *p, gsb_dtype dt, int64_t i)
{
    switch (dt) {
    case GSB_F32: return ((const float *)p)[i];
    case GSB_F64: return ((const double *)p)[i];
    case GSB_I32: return ((const int32_t *)p)[i];
    default: return (double)((const int64_t *)p)[i];
    }
}

static void set_from_double(void *p, gsb_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case GSB_F32: ((float *)p)[i] = (float)v; break;
    case GSB_F64: ((double *)p)[i] = v; break;
    case GSB_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((int64_t *)p)[i] = (int64_t)v; break;
    }
}

static int h_copy(const gsb__backend *be, gsb__tensor *dst, const gsb__tensor *src)
{
    (void)be;
    int64_t n = src->rows * src->cols;
    if (n != dst->rows * dst->cols)
        return gsb__err(GSB_EINTERNAL, "copy between tensors of different sizes");
    if (dst->dtype == src->dtype) {
        memmove(dst->data, src->data, t_bytes(src));
        return GSB_OK;
    }
    if (src->dtype == GSB_I64 && dst->dtype == GSB_I64)
        return GSB_OK;
    for (int64_t i = 0; i < n; i++) {
        if (src->dtype == GSB_I64 && dst->dtype == GSB_I32)
            ((int32_t *)dst->data)[i] = (int32_t)((const int64_t *)src->data)[i];
        else if (src->dtype == GSB_I32 && dst->dtype == GSB_I64)
            ((int64_t *)dst->data)[i] = ((const int32_t *)src->data)[i];
        else
            set_from_double(dst->data, dst->dtype, i, get_as_double(src->data, src->dtype, i));
    }
    return GSB_OK;
}

static int h_fill(const gsb__backend *be, gsb__tensor *t, double value)
{
    (void)be;
    for (int64_t i = 0, n = t->rows * t->cols; i < n; i++)
        set_from_double(t->data, t->dtype, i, value);
    return GSB_OK;
}

static const gsb__backend_ops host_ops = {
    .alloc = h_alloc,
    .release = h_release,
    .upload = h_upload,
    .download = h_download,
    .copy = h_copy,
    .fill = h_fill,
};

static const gsb__backend host_backend = {.name = "cpu", .ops = &host_ops};

const gsb__backend *gsb__cpu_backend(void) { return &host_backend; }
const gsb__backend *gsb__cuda_backend(void) { return NULL; }
const char *gsb__cuda_unavailable_reason(void) { return NO_ENGINE; }

const gsb__backend *gsb__session_backend(const gsb_session *s, int64_t rows, int64_t cols)
{
    (void)s;
    (void)rows;
    (void)cols;
    return &host_backend;
}

/* ---- estimators by name --------------------------------------------------- */

typedef struct named_est {
    struct named_est *next;
    gsb__estimator_desc desc;
    char name[];
} named_est;

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static named_est *names; /* lives as long as the process: models point into it */

/* core/api.c's gsb__find_estimator asks this; NULL only when out of memory */
const gsb__estimator_desc *gsb__registry_find(const char *name)
{
    pthread_mutex_lock(&names_lock);
    named_est *e = names;
    while (e && strcmp(e->name, name) != 0)
        e = e->next;
    if (!e) {
        size_t len = strlen(name);
        e = calloc(1, sizeof *e + len + 1);
        if (e) {
            memcpy(e->name, name, len + 1);
            e->desc.name = e->name;
            e->next = names;
            names = e;
        }
    }
    pthread_mutex_unlock(&names_lock);
    return e ? &e->desc : NULL;
}

/* no method is known here: session/remote.c then goes by the usual names */
const gsb__method_desc *gsb__method_find(const gsb__estimator_desc *est, const char *name)
{
    (void)est;
    (void)name;
    return NULL;
}

/* parameters live on the server; the local copy stays empty */
json_t *gsb__params_defaults(const gsb__param_desc *list)
{
    (void)list;
    return json_object();
}

/* a session's store is opened by local sessions only: none here */
void gsb__store_close(gsb__store *st) { (void)st; }

/* ---- profiling ------------------------------------------------------------ */

/* core/tensor.c notes large moves between backends when GSB_PROFILE is on;
 * nothing here computes or profiles (the server profiles its own calls) */
int gsb__profile_on(void) { return 0; }

double gsb__profile_clock(const gsb__backend *be)
{
    (void)be;
    return 0;
}

void gsb__profile_note(const char *phase, double ms)
{
    (void)phase;
    (void)ms;
}
