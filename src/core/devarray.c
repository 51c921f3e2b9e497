/*
 * devarray.c - callers' device arrays (core/devarray.h): the public
 * constructors of gsb.h, the checks of a gsb_device_array, and turning one
 * into a method input (in place on the session's GPU where possible), a
 * device copy (data handles) or a host copy (remote sessions).
 *
 * The checks that need no GPU (the struct, the dtype and shape, strides
 * that stay inside int64, a device type and a non-negative ordinal) run
 * first, so a CPU-only build or session reports those mistakes as such; the
 * GPU's own checks (the memory belongs to its device: device_import) follow.
 */
#include "core/devarray.h"

#include <string.h>

#include "core/error.h"

gsb_device_array gsb_device_array_2d(void *data, gsb_dtype dtype, int64_t rows, int64_t cols,
                                     int device_id, void *stream)
{
    gsb_device_array d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.array = gsb_array_2d(data, dtype, rows, cols);
    d.device_type = GSB_DEVICE_CUDA;
    d.device_id = device_id;
    d.stream = stream;
    return d;
}

gsb_array gsb_array_on_device(const gsb_device_array *d)
{
    gsb_array a;
    memset(&a, 0, sizeof a);
    if (!d)
        return a;
    a.data = (void *)d;
    a.dtype = d->array.dtype;
    a.ndim = d->array.ndim;
    a.shape[0] = d->array.shape[0];
    a.shape[1] = d->array.shape[1];
    a.strides[1] = GSB_DEVICE_REF_STRIDE;
    return a;
}

/* ---- layout --------------------------------------------------------------- */

/* The array as rows x cols with byte strides s0, s1 (1-D: n x 1; 0-d: 1 x 1). */
typedef struct layout {
    int64_t rows, cols, s0, s1;
} layout;

static layout layout_of(const gsb_array *a)
{
    int64_t item = (int64_t)gsb_dtype_size(a->dtype);
    layout l = {1, 1, item, item};
    if (a->ndim >= 1)
        l.rows = a->shape[0];
    if (a->ndim == 2)
        l.cols = a->shape[1];
    if (a->strides[0] == 0 && a->strides[1] == 0) { /* contiguous C order */
        l.s0 = item * l.cols;
        l.s1 = item;
    } else if (a->ndim >= 1) {
        l.s0 = a->strides[0];
        l.s1 = a->ndim == 2 ? a->strides[1] : item;
    }
    return l;
}

static int contiguous(const layout *l, size_t item)
{
    return (l->cols <= 1 || l->s1 == (int64_t)item) &&
           (l->rows <= 1 || l->s0 == (int64_t)item * l->cols);
}

/* |v| <= 2^62: sums of a few of them stay inside int64 */
static int small(int64_t v) { return v > -((int64_t)1 << 62) && v < ((int64_t)1 << 62); }

/* The bytes the elements span: from base + *lo (<= 0) for *span bytes. */
static int span_of(const layout *l, size_t item, const char *name, int64_t *lo, size_t *span)
{
    *lo = 0;
    *span = 0;
    if (l->rows == 0 || l->cols == 0)
        return GSB_OK;
    int64_t r = l->rows - 1, c = l->cols - 1;
    if (!small(l->s0) || !small(l->s1) || (r && (l->s0 > INT64_MAX / 4 / r ||
                                                  l->s0 < -(INT64_MAX / 4) / r)) ||
        (c && (l->s1 > INT64_MAX / 4 / c || l->s1 < -(INT64_MAX / 4) / c)))
        return gsb__err(GSB_EINVAL, "Input %s: its strides (%lld, %lld) reach outside any "
                        "memory", name, (long long)l->s0, (long long)l->s1);
    int64_t a = r * l->s0, b = c * l->s1;
    int64_t low = (a < 0 ? a : 0) + (b < 0 ? b : 0);
    int64_t high = (a > 0 ? a : 0) + (b > 0 ? b : 0) + (int64_t)item;
    *lo = low;
    *span = (size_t)(high - low);
    return GSB_OK;
}

/* ---- checks ------------------------------------------------------------------ */

int gsb__device_ref_check(const gsb_array *ref, const char *name, const gsb_device_array **out)
{
    *out = NULL;
    const gsb_device_array *d = ref->data;
    if (!d)
        return gsb__err(GSB_EINVAL, "Input %s is a device reference without its "
                        "gsb_device_array (gsb_array_on_device(NULL)?)", name);
    if (d->struct_size < sizeof *d)
        return gsb__err(GSB_EINVAL, "Input %s: gsb_device_array.struct_size is %zu, expected "
                        "at least %zu (set it to sizeof(gsb_device_array), or use "
                        "gsb_device_array_2d)", name, d->struct_size, sizeof *d);
    if (d->device_type != GSB_DEVICE_CUDA && d->device_type != GSB_DEVICE_CUDA_MANAGED)
        return gsb__err(GSB_EUNSUPPORTED, "Input %s: device type %d is not one gsb reads "
                        "(GSB_DEVICE_CUDA = 2, GSB_DEVICE_CUDA_MANAGED = 13)", name,
                        d->device_type);
    if (d->device_id < GSB_DEVICE_ID_OF_MEMORY)
        return gsb__err(GSB_EINVAL, "Input %s: CUDA device ordinal %d is negative (and not "
                        "GSB_DEVICE_ID_OF_MEMORY)", name, d->device_id);
    if (d->array.strides[1] == GSB_DEVICE_REF_STRIDE || d->array.strides[1] == GSB_DATA_REF_STRIDE)
        return gsb__err(GSB_EINVAL, "Input %s: a gsb_device_array describes memory, not "
                        "another reference", name);
    if (d->array.dtype != ref->dtype || d->array.ndim != ref->ndim ||
        (ref->ndim >= 1 && d->array.shape[0] != ref->shape[0]) ||
        (ref->ndim == 2 && d->array.shape[1] != ref->shape[1]))
        return gsb__err(GSB_EINVAL, "Input %s: the reference's dtype or shape differs from its "
                        "gsb_device_array's (make the reference with gsb_array_on_device after "
                        "filling the struct)", name);
    *out = d;
    return GSB_OK;
}

/* The array checked against spec, its layout and the range of bytes it spans. */
static int inspect(const gsb_array *ref, const gsb__validate_spec *spec,
                   const gsb_device_array **d, gsb__validated_shape *sh, layout *l,
                   int64_t *lo, size_t *span)
{
    GSB_TRY(gsb__device_ref_check(ref, spec->name, d));
    GSB_TRY(gsb__validate_shape(&(*d)->array, spec, sh));
    *l = layout_of(&(*d)->array);
    return span_of(l, gsb_dtype_size((*d)->array.dtype), spec->name, lo, span);
}

static int no_gpu(const char *name)
{
    return gsb__err(GSB_EUNSUPPORTED, "Input %s is in CUDA device memory, but this session "
                    "computes on the CPU (device=cpu, or no usable GPU: %s): open the session "
                    "with device=cuda or auto where the GPU is, or copy the array to host "
                    "memory", name,
                    gsb__cuda_backend() ? "a GPU is there" : gsb__cuda_unavailable_reason());
}

/* Check the memory on gpu, order the engine after the producer, and make
 * rows x cols of dtype on gpu: the caller's memory when possible, else a copy. */
static int import_on(const gsb__backend *gpu, const gsb_device_array *d, const layout *l,
                     int64_t lo, size_t span, gsb_dtype dtype, int borrow, gsb__tensor *out)
{
    *out = GSB__TENSOR_NONE;
    if (!gpu->ops->device_import || !gpu->ops->strided_copy)
        return gsb__err(GSB_EUNSUPPORTED, "the %s backend cannot read device arrays", gpu->name);
    const char *base = d->array.data;
    GSB_TRY(gpu->ops->device_import(gpu, span ? base + lo : base, span, d->device_id,
                                    d->stream));
    size_t item = gsb_dtype_size(d->array.dtype);
    if (borrow && dtype == d->array.dtype && contiguous(l, item)) {
        gsb__tensor t = {d->array.data, dtype, l->rows, l->cols, 2, gpu, 0};
        *out = t;
        return GSB_OK;
    }
    GSB_TRY(gsb__tensor_alloc(gpu, dtype, l->rows, l->cols, out));
    int rc = gpu->ops->strided_copy(gpu, d->array.data, d->array.dtype, l->s0, l->s1, out);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

/* ---- uses ------------------------------------------------------------------- */

static int check_values(const gsb__backend *gpu, const gsb__tensor *t,
                        const gsb__validate_spec *spec)
{
    int bad = 0;
    if (gsb__is_float(t->dtype)) {
        if (!gpu->ops->nonfinite)
            return gsb__err(GSB_EUNSUPPORTED, "the %s backend cannot check device data",
                            gpu->name);
        GSB_TRY(gpu->ops->nonfinite(gpu, t, &bad));
    }
    return bad ? gsb__nonfinite_error(bad, spec->name, t->dtype) : GSB_OK;
}

int gsb__device_input(gsb_session *s, const gsb_array *ref, const gsb__validate_spec *spec,
                      int device_ok, gsb__tensor *out)
{
    *out = GSB__TENSOR_NONE;
    const gsb_device_array *d;
    gsb__validated_shape sh;
    layout l;
    int64_t lo;
    size_t span;
    GSB_TRY(inspect(ref, spec, &d, &sh, &l, &lo, &span));
    if (!s->gpu)
        return no_gpu(spec->name);
    gsb__tensor t;
    GSB_TRY(import_on(s->gpu, d, &l, lo, span, sh.dtype, 1, &t));
    /* the user's shape (an (n, 1) column raveled for 1-D inputs) */
    t.rows = sh.rows;
    t.cols = sh.cols;
    t.ndim = sh.ndim;
    /* NaN allowed: told from infinity by the host's checks (as data handles do) */
    if (spec->allow_nan)
        device_ok = 0;
    int rc = spec->allow_nan ? GSB_OK : check_values(s->gpu, &t, spec);
    if (rc == GSB_OK && !device_ok) {
        gsb__tensor h;
        rc = gsb__tensor_to_host(&t, &h);
        gsb__tensor_free(&t);
        t = h;
    }
    if (rc == GSB_OK && spec->allow_nan) {
        int bad = gsb__host_nonfinite(&t) ? (gsb__host_has_inf(&t) ? 2 : 0) : 0;
        if (bad)
            rc = gsb__nonfinite_error(bad, spec->name, t.dtype);
    }
    if (rc == GSB_OK && spec->non_negative) {
        for (int64_t i = 0; i < gsb__tensor_numel(&t); i++)
            if (gsb__tensor_get(&t, i) < 0) {
                rc = gsb__err(GSB_EINVAL, "Negative values in data passed to `%s`.",
                              spec->name);
                break;
            }
    }
    if (rc != GSB_OK) {
        gsb__tensor_free(&t);
        return rc;
    }
    *out = t;
    return GSB_OK;
}

int gsb__device_release(gsb_session *s, const gsb_array *ref)
{
    const gsb_device_array *d = ref->data;
    if (!s->gpu || !d || !s->gpu->ops->device_export)
        return GSB_OK; /* it was refused before the engine read it */
    return s->gpu->ops->device_export(s->gpu, d->stream);
}

/* The array as a device tensor in its own dtype (contiguous), on gpu. */
static int device_copy(const gsb__backend *gpu, const gsb_array *ref, gsb__tensor *out,
                       int borrow)
{
    const gsb_device_array *d;
    gsb__validated_shape sh;
    layout l;
    int64_t lo;
    size_t span;
    gsb__validate_spec spec = {"X", "gsb_data_put", 0, 0, 0, 0, 0, 0};
    GSB_TRY(inspect(ref, &spec, &d, &sh, &l, &lo, &span));
    GSB_TRY(import_on(gpu, d, &l, lo, span, d->array.dtype, borrow, out));
    out->ndim = d->array.ndim;
    return GSB_OK;
}

int gsb__device_to_gpu(gsb_session *s, const gsb_array *ref, gsb__tensor *out)
{
    *out = GSB__TENSOR_NONE;
    if (!s->gpu)
        return no_gpu("X");
    GSB_TRY(device_copy(s->gpu, ref, out, 0));
    return s->gpu->ops->device_export(s->gpu, ((const gsb_device_array *)ref->data)->stream);
}

int gsb__device_to_host(const gsb_array *ref, gsb__tensor *out)
{
    *out = GSB__TENSOR_NONE;
    const gsb__backend *gpu = gsb__cuda_backend();
    if (!gpu)
        return gsb__err(GSB_EUNSUPPORTED, "an input is in CUDA device memory, but this process "
                        "cannot read it (%s): copy it to host memory first",
                        gsb__cuda_unavailable_reason());
    gsb__tensor t;
    GSB_TRY(device_copy(gpu, ref, &t, 1));
    int rc = gsb__tensor_to_host(&t, out);
    gsb__tensor_free(&t);
    if (rc == GSB_OK)
        rc = gpu->ops->device_export(gpu, ((const gsb_device_array *)ref->data)->stream);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}
