/*
 * data.c - data handles (core/data.h): the handle objects and their
 * session's live set, the engine's own storage for them (a contiguous host
 * copy, or a GPU copy when the data is big enough for the GPU), and their
 * use as method inputs.  gsb_data_put and gsb_data_free run through the
 * session interface (src/session/api.c): a remote session's handles hold
 * the server's id instead of storage.
 */
#include "core/data.h"

#include <stdlib.h>
#include <string.h>

#include "core/budget.h"
#include "core/devarray.h"
#include "core/error.h"
#include "core/hostmem.h"

static int check_array(const gsb_array *a)
{
    if (gsb_dtype_size(a->dtype) == 0)
        return gsb__err(GSB_EINVAL, "gsb_data_put: unknown dtype %d", (int)a->dtype);
    if (a->ndim < 0 || a->ndim > 2)
        return gsb__err(GSB_EINVAL, "gsb_data_put: arrays have 0, 1 or 2 dimensions, got %d",
                        a->ndim);
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] < 0)
            return gsb__err(GSB_EINVAL, "gsb_data_put: negative dimension");
    if (!a->data && (a->ndim == 0 || a->shape[0] * (a->ndim == 2 ? a->shape[1] : 1) > 0))
        return gsb__err(GSB_EINVAL, "gsb_data_put: the array has no data");
    return GSB_OK;
}

static int64_t rows_of(const gsb_array *a) { return a->ndim == 0 ? 1 : a->shape[0]; }
static int64_t cols_of(const gsb_array *a) { return a->ndim == 2 ? a->shape[1] : 1; }

/* A contiguous C-order host copy of any layout, on every core for large
 * arrays (fresh pages then fault in parallel, most of a big copy's cost). */
static int copy_to_host(const gsb_array *a, void **out)
{
    int64_t rows = rows_of(a), cols = cols_of(a);
    size_t isz = gsb_dtype_size(a->dtype);
    if (rows > 0 && cols > (int64_t)(SIZE_MAX / isz) / rows)
        return gsb__err(GSB_EINVAL, "gsb_data_put: array too large");
    size_t nbytes = (size_t)(rows * cols) * isz;
    void *buf = gsb__host_alloc(nbytes);
    if (!buf)
        return gsb__err(GSB_ENOMEM, "cannot allocate %zu bytes for a data handle", nbytes);
    gsb__tensor dst = gsb__tensor_host_view(buf, a->dtype, rows, cols);
    if (gsb__array_is_c_contiguous(a)) {
        const gsb__backend *cpu = gsb__cpu_backend();
        gsb__tensor src = gsb__tensor_host_view(a->data, a->dtype, rows, cols);
        int rc = cpu->ops->copy(cpu, &dst, &src); /* a parallel memcpy */
        if (rc != GSB_OK) {
            gsb__host_free(buf);
            return rc;
        }
    } else {
        gsb__array_gather(a, rows, cols, &dst);
    }
    *out = buf;
    return GSB_OK;
}

/* Local data big enough for the GPU goes there (device=auto's own rule),
 * when it fits the memory the session may use (core/budget.h); else it stays
 * on the host, where streamed fits read it in batches. */
static int wants_device(gsb_session *s, const gsb_array *a)
{
    if (!s->gpu || a->ndim != 2 || (a->dtype != GSB_F32 && a->dtype != GSB_F64) ||
        gsb__session_backend(s, rows_of(a), cols_of(a)) != s->gpu)
        return 0;
    size_t budget;
    if (gsb__memory_budget(s, s->gpu, &budget) != GSB_OK) {
        gsb__err_clear();
        return 0;
    }
    return (double)rows_of(a) * (double)cols_of(a) * (double)gsb_dtype_size(a->dtype) <=
           (double)budget;
}

int gsb__data_fill_local(gsb_session *s, const gsb_array *a, struct gsb_data *d)
{
    if (gsb__is_device_ref(a)) /* the caller's GPU memory: a device copy, or refused */
        return gsb__device_to_gpu(s, a, &d->dev);
    if (!wants_device(s, a))
        return copy_to_host(a, &d->host);
    void *packed = NULL;
    if (!gsb__array_is_c_contiguous(a))
        GSB_TRY(copy_to_host(a, &packed));
    gsb__tensor hv = gsb__tensor_host_view(packed ? packed : a->data, a->dtype, rows_of(a),
                                           cols_of(a));
    int rc = gsb__tensor_to(s->gpu, &hv, &d->dev);
    gsb__host_free(packed);
    return rc;
}

int gsb__data_new(gsb_session *s, const gsb_array *a, struct gsb_data **out)
{
    *out = NULL;
    GSB_TRY(check_array(a));
    struct gsb_data *d = calloc(1, sizeof *d);
    if (!d)
        return gsb__err(GSB_ENOMEM, "out of memory");
    d->magic = GSB__DATA_MAGIC;
    d->session = s;
    d->nonfinite = -1;
    d->view = *a;
    d->view.data = NULL;
    d->view.strides[0] = d->view.strides[1] = 0;
    gsb__session_ref(s);
    *out = d;
    return GSB_OK;
}

void gsb__data_stream_commit(struct gsb_data *d)
{
    gsb_session *s = d->session;
    pthread_mutex_lock(&s->data_lock);
    d->next = s->data_head;
    if (s->data_head)
        s->data_head->prev = d;
    s->data_head = d;
    pthread_mutex_unlock(&s->data_lock);
}

void gsb__data_unlink(struct gsb_data *d)
{
    gsb_session *s = d->session;
    pthread_mutex_lock(&s->data_lock);
    if (d->prev)
        d->prev->next = d->next;
    else
        s->data_head = d->next;
    if (d->next)
        d->next->prev = d->prev;
    pthread_mutex_unlock(&s->data_lock);
}

void gsb__data_destroy(struct gsb_data *d)
{
    if (!d)
        return;
    d->magic = 0;
    gsb__tensor_free(&d->dev);
    gsb__host_free(d->host);
    gsb_session *s = d->session;
    free(d);
    gsb__session_unref(s);
}

void gsb__data_stream_abort(struct gsb_data *d) { gsb__data_destroy(d); }

int gsb__data_stream_open(gsb_session *s, const gsb_array *shape, struct gsb_data **out,
                          void **host_dst)
{
    *out = NULL;
    *host_dst = NULL;
    gsb_array a = *shape;
    a.data = (void *)1; /* shape only: never read */
    struct gsb_data *d = NULL;
    GSB_TRY(gsb__data_new(s, &a, &d));
    int64_t rows = rows_of(&a), cols = cols_of(&a);
    size_t isz = gsb_dtype_size(a.dtype);
    int rc = GSB_OK;
    if (rows > 0 && cols > (int64_t)(SIZE_MAX / isz) / rows)
        rc = gsb__err(GSB_EINVAL, "data handle too large");
    else if (wants_device(s, &a))
        rc = gsb__tensor_alloc(s->gpu, a.dtype, rows, cols, &d->dev);
    else if (!(d->host = gsb__host_alloc((size_t)(rows * cols) * isz)))
        rc = gsb__err(GSB_ENOMEM, "cannot allocate %zu bytes for a data handle",
                      (size_t)(rows * cols) * isz);
    if (rc != GSB_OK) {
        gsb__data_stream_abort(d);
        return rc;
    }
    *host_dst = d->host;
    *out = d;
    return GSB_OK;
}

int gsb__data_stream_upload(struct gsb_data *d, uint64_t offset, const void *src, size_t len)
{
    size_t isz = gsb_dtype_size(d->dev.dtype);
    uint64_t total = gsb__tensor_nbytes(&d->dev);
    if (!d->dev.data || offset % isz || len % isz || offset > total || len > total - offset)
        return gsb__err(GSB_EINTERNAL, "data stream: bytes %llu..%llu do not fit the handle",
                        (unsigned long long)offset, (unsigned long long)(offset + len));
    if (len == 0)
        return GSB_OK;
    gsb__tensor v = d->dev; /* a 1 x count view of the bytes' elements */
    v.data = (char *)d->dev.data + offset;
    v.rows = 1;
    v.cols = (int64_t)(len / isz);
    v.owned = 0;
    return v.be->ops->upload(v.be, &v, src);
}

gsb_array gsb_data_array(const gsb_data *d)
{
    gsb_array a = {0};
    if (!d)
        return a;
    a = d->view;
    a.data = (void *)d;
    a.strides[0] = 0;
    a.strides[1] = GSB_DATA_REF_STRIDE;
    return a;
}

int gsb__data_resolve(gsb_session *s, const gsb_array *ref, struct gsb_data **out)
{
    *out = NULL;
    pthread_mutex_lock(&s->data_lock);
    struct gsb_data *d = s->data_head;
    while (d && d != ref->data)
        d = d->next;
    pthread_mutex_unlock(&s->data_lock);
    if (!d)
        return gsb__err(GSB_EINVAL, "a data handle given as input was freed or belongs to "
                        "another session");
    *out = d;
    return GSB_OK;
}

/* The host copy of GPU-resident data, made on first need (under the lock,
 * since calls on several models may share one handle). */
static int ensure_host(gsb_session *s, struct gsb_data *d)
{
    int rc = GSB_OK;
    pthread_mutex_lock(&s->data_lock);
    if (!d->host) {
        size_t n = gsb__tensor_nbytes(&d->dev);
        void *h = gsb__host_alloc(n);
        rc = !h ? gsb__err(GSB_ENOMEM, "cannot allocate %zu bytes for a data handle", n)
                : d->dev.be->ops->download(d->dev.be, &d->dev, h);
        if (rc == GSB_OK)
            d->host = h;
        else
            gsb__host_free(h);
    }
    pthread_mutex_unlock(&s->data_lock);
    return rc;
}

/* NaN/inf check of GPU-resident data, once. */
static int device_nonfinite(gsb_session *s, struct gsb_data *d, int *bad)
{
    pthread_mutex_lock(&s->data_lock);
    int known = d->nonfinite;
    pthread_mutex_unlock(&s->data_lock);
    if (known < 0) {
        const gsb__backend *be = d->dev.be;
        if (be->ops->nonfinite) {
            GSB_TRY(be->ops->nonfinite(be, &d->dev, &known));
        } else {
            GSB_TRY(ensure_host(s, d));
            gsb__tensor hv = gsb__tensor_host_view(d->host, d->dev.dtype, d->dev.rows,
                                                   d->dev.cols);
            known = gsb__host_nonfinite(&hv);
        }
        pthread_mutex_lock(&s->data_lock);
        d->nonfinite = known;
        pthread_mutex_unlock(&s->data_lock);
    }
    *bad = known;
    return GSB_OK;
}

int gsb__data_input(gsb_session *s, const gsb_array *ref, const gsb__validate_spec *spec,
                    int device_ok, gsb__tensor *out)
{
    *out = GSB__TENSOR_NONE;
    struct gsb_data *d = NULL;
    GSB_TRY(gsb__data_resolve(s, ref, &d));
    gsb_array host = d->view;
    if (d->dev.data) {
        gsb__validated_shape sh;
        host.data = d->dev.data; /* shape checks only: never read on the host */
        GSB_TRY(gsb__validate_shape(&host, spec, &sh));
        /* allow_nan needs the infinity check of the host path */
        if (device_ok && sh.dtype == d->dev.dtype && !spec->non_negative && !spec->allow_nan) {
            int bad;
            GSB_TRY(device_nonfinite(s, d, &bad));
            if (bad)
                return gsb__nonfinite_error(bad, spec->name, sh.dtype);
            *out = d->dev;
            out->owned = 0;
            out->rows = sh.rows;
            out->cols = sh.cols;
            out->ndim = sh.ndim;
            return GSB_OK;
        }
        GSB_TRY(ensure_host(s, d));
    }
    host.data = d->host;
    return gsb__validate_array(&host, spec, out);
}
