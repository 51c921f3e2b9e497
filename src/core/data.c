/*
 * data.c - data handles (core/data.h): gsb_data_put copies an array into the
 * session once (a local session keeps a contiguous host copy; a remote one
 * sends it to gsbd) and gsb_data_array names it in later calls.
 */
#include "core/data.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "net/remote.h"

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

/* A contiguous C-order copy of any layout, through the validator's packing
 * (no finiteness check here: the calls that use the data check it). */
static int copy_local(const gsb_array *a, struct gsb_data *d)
{
    int64_t rows = a->ndim == 0 ? 1 : a->shape[0];
    int64_t cols = a->ndim == 2 ? a->shape[1] : 1;
    size_t isz = gsb_dtype_size(a->dtype);
    if (rows > 0 && cols > (int64_t)(SIZE_MAX / isz) / rows)
        return gsb__err(GSB_EINVAL, "gsb_data_put: array too large");
    size_t nbytes = (size_t)(rows * cols) * isz;
    d->host = malloc(nbytes ? nbytes : 1);
    if (!d->host)
        return gsb__err(GSB_ENOMEM, "cannot allocate %zu bytes for a data handle", nbytes);
    int64_t s0 = a->strides[0], s1 = a->strides[1];
    if (a->ndim == 2 && s0 == 0 && s1 == 0) {
        s0 = cols * (int64_t)isz;
        s1 = (int64_t)isz;
    } else if (a->ndim == 1 && s0 == 0) {
        s0 = (int64_t)isz;
    }
    char *dst = d->host;
    const char *src = a->data;
    if (a->ndim == 0 || (a->ndim == 1 && s0 == (int64_t)isz) ||
        (a->ndim == 2 && s1 == (int64_t)isz && s0 == cols * (int64_t)isz)) {
        if (nbytes)
            memcpy(dst, src, nbytes);
    } else {
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                memcpy(dst + (size_t)(i * cols + j) * isz,
                       src + i * s0 + (a->ndim == 2 ? j * s1 : 0), isz);
    }
    d->view = *a;
    d->view.data = d->host;
    d->view.strides[0] = d->view.strides[1] = 0;
    return GSB_OK;
}

int gsb_data_put(gsb_session *s, const gsb_array *a, gsb_data **out)
{
    gsb__err_clear();
    if (!s || !a || !out)
        return gsb__err(GSB_EINVAL, "gsb_data_put: session, array and out must not be NULL");
    *out = NULL;
    if (gsb__is_data_ref(a))
        return gsb__err(GSB_EINVAL, "gsb_data_put: the array is already a data handle");
    GSB_TRY(check_array(a));
    struct gsb_data *d = calloc(1, sizeof *d);
    if (!d)
        return gsb__err(GSB_ENOMEM, "out of memory");
    d->magic = GSB__DATA_MAGIC;
    d->session = s;
    d->view = *a;
    d->view.data = NULL;
    d->view.strides[0] = d->view.strides[1] = 0;
    int rc = s->remote ? gsb__remote_data_put(s, a, d) : copy_local(a, d);
    if (rc != GSB_OK) {
        free(d->host);
        free(d);
        return rc;
    }
    pthread_mutex_lock(&s->data_lock);
    d->next = s->data_head;
    if (s->data_head)
        s->data_head->prev = d;
    s->data_head = d;
    pthread_mutex_unlock(&s->data_lock);
    *out = d;
    return GSB_OK;
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

void gsb_data_free(gsb_data *d)
{
    if (!d || d->magic != GSB__DATA_MAGIC)
        return;
    gsb_session *s = d->session;
    pthread_mutex_lock(&s->data_lock);
    if (d->prev)
        d->prev->next = d->next;
    else
        s->data_head = d->next;
    if (d->next)
        d->next->prev = d->prev;
    pthread_mutex_unlock(&s->data_lock);
    if (s->remote)
        gsb__remote_data_free(s, d);
    d->magic = 0;
    free(d->host);
    free(d);
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
