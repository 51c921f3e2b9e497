/*
 * dlpack.c - gsb_dlpack.h: DLPack tensors as gsb inputs, and results as
 * DLPack tensors.  Pure descriptions and one copy: no device work here (a
 * device DLTensor becomes a gsb_device_array that the call itself imports,
 * core/devarray.c), so the client-only build has these too.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gsb_dlpack.h"

/* ---- DLTensor -> gsb_array -------------------------------------------------- */

static int dtype_of(DLDataType t, gsb_dtype *out)
{
    if (t.lanes == 1 && t.code == kDLFloat && (t.bits == 32 || t.bits == 64))
        *out = t.bits == 32 ? GSB_F32 : GSB_F64;
    else if (t.lanes == 1 && t.code == kDLInt && (t.bits == 32 || t.bits == 64))
        *out = t.bits == 32 ? GSB_I32 : GSB_I64;
    else
        return gsb__err(GSB_EINVAL, "gsb_array_from_dlpack: DLPack dtype (code %u, bits %u, "
                        "lanes %u) is not one gsb reads: float32, float64, int32 or int64",
                        (unsigned)t.code, (unsigned)t.bits, (unsigned)t.lanes);
    return GSB_OK;
}

/* a's shape and byte strides from t (checked); strides stay {0, 0} when compact */
static int describe(const DLTensor *t, gsb_dtype dt, gsb_array *a)
{
    memset(a, 0, sizeof *a);
    if (t->ndim < 0 || t->ndim > 2)
        return gsb__err(GSB_EINVAL, "Found array with dim %d. Expected <= 2.", (int)t->ndim);
    if (t->ndim > 0 && !t->shape)
        return gsb__err(GSB_EINVAL, "gsb_array_from_dlpack: the DLTensor has no shape");
    size_t item = gsb_dtype_size(dt);
    int64_t numel = 1;
    a->dtype = dt;
    a->ndim = t->ndim;
    for (int k = 0; k < t->ndim; k++) {
        if (t->shape[k] < 0)
            return gsb__err(GSB_EINVAL, "gsb_array_from_dlpack: negative dimension %lld",
                            (long long)t->shape[k]);
        a->shape[k] = t->shape[k];
        numel *= t->shape[k];
    }
    if (t->strides && t->ndim > 0) {
        const int64_t lim = INT64_MAX / 16;
        for (int k = 0; k < t->ndim; k++) {
            if (t->strides[k] > lim || t->strides[k] < -lim)
                return gsb__err(GSB_EINVAL, "gsb_array_from_dlpack: stride %lld is too large",
                                (long long)t->strides[k]);
            a->strides[k] = t->strides[k] * (int64_t)item;
        }
        if (t->ndim == 1)
            a->strides[1] = 0;
        /* {0, 0} means "compact" to gsb: a broadcast array must not look like one */
        if (a->strides[0] == 0 && a->strides[1] == 0 && numel > 1)
            return gsb__err(GSB_EINVAL, "gsb_array_from_dlpack: a broadcast array (all strides "
                            "0) is not supported: make it contiguous first");
    }
    a->data = t->data ? (char *)t->data + t->byte_offset : NULL;
    if (!a->data && numel > 0)
        return gsb__err(GSB_EINVAL, "gsb_array_from_dlpack: the DLTensor has no data");
    return GSB_OK;
}

int gsb_array_from_dlpack(const DLTensor *t, void *stream, gsb_device_array *storage,
                          gsb_array *out)
{
    gsb__err_clear();
    if (!t || !out)
        return gsb__err(GSB_EINVAL, "gsb_array_from_dlpack: t and out must not be NULL");
    memset(out, 0, sizeof *out);
    gsb_dtype dt = GSB_F64;
    GSB_TRY(dtype_of(t->dtype, &dt));
    gsb_array a;
    GSB_TRY(describe(t, dt, &a));
    switch (t->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: /* page-locked host memory: a host array (uploads go at full speed) */
        *out = a;
        return GSB_OK;
    case kDLCUDA:
    case kDLCUDAManaged:
        if (!storage)
            return gsb__err(GSB_EINVAL, "gsb_array_from_dlpack: a CUDA DLTensor needs storage "
                            "for its gsb_device_array");
        memset(storage, 0, sizeof *storage);
        storage->struct_size = sizeof *storage;
        storage->array = a;
        storage->device_type = t->device.device_type == kDLCUDA ? GSB_DEVICE_CUDA
                                                                : GSB_DEVICE_CUDA_MANAGED;
        storage->device_id = t->device.device_id;
        storage->stream = stream;
        *out = gsb_array_on_device(storage);
        return GSB_OK;
    default:
        return gsb__err(GSB_EUNSUPPORTED, "gsb_array_from_dlpack: memory of DLPack device type "
                        "%d is not one gsb reads (CPU, CUDA, CUDA host, CUDA managed)",
                        (int)t->device.device_type);
    }
}

/* ---- result -> DLManagedTensor ------------------------------------------- */

typedef struct owned_tensor {
    DLManagedTensor m;
    int64_t shape[2];
    void *block; /* malloc'ed; the data is its first 256-byte aligned address */
} owned_tensor;

static void owned_delete(DLManagedTensor *self)
{
    if (!self)
        return;
    owned_tensor *o = self->manager_ctx;
    free(o->block);
    free(o);
}

static DLDataType dl_dtype(gsb_dtype dt)
{
    DLDataType t = {dt == GSB_F32 || dt == GSB_F64 ? kDLFloat : kDLInt,
                    (uint8_t)(8 * gsb_dtype_size(dt)), 1};
    return t;
}

int gsb_result_to_dlpack(const gsb_result *r, int i, DLManagedTensor **out)
{
    gsb__err_clear();
    if (!r || !out)
        return gsb__err(GSB_EINVAL, "gsb_result_to_dlpack: r and out must not be NULL");
    *out = NULL;
    const gsb_array *a = gsb_result_array(r, i);
    if (!a)
        return gsb__err(GSB_ENOTFOUND, "gsb_result_to_dlpack: the result has no array %d", i);
    int64_t numel = 1;
    for (int k = 0; k < a->ndim; k++)
        numel *= a->shape[k];
    size_t bytes = (size_t)numel * gsb_dtype_size(a->dtype);
    owned_tensor *o = calloc(1, sizeof *o);
    void *block = o ? malloc(bytes + 256) : NULL;
    if (!block) {
        free(o);
        return gsb__err(GSB_ENOMEM, "out of memory for a %zu-byte DLPack tensor", bytes);
    }
    char *data = (char *)(((uintptr_t)block + 255) & ~(uintptr_t)255);
    if (bytes)
        memcpy(data, a->data, bytes);
    o->block = block;
    for (int k = 0; k < a->ndim; k++)
        o->shape[k] = a->shape[k];
    DLTensor *t = &o->m.dl_tensor;
    t->data = data;
    t->device.device_type = kDLCPU;
    t->device.device_id = 0;
    t->ndim = a->ndim;
    t->dtype = dl_dtype(a->dtype);
    t->shape = o->shape;
    t->strides = NULL; /* compact, row-major */
    t->byte_offset = 0;
    o->m.manager_ctx = o;
    o->m.deleter = owned_delete;
    *out = &o->m;
    return GSB_OK;
}
