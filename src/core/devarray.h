/*
 * devarray.h - callers' device arrays (gsb.h's gsb_device_array) at the
 * engine boundary.  A device reference is a gsb_array whose strides[1] is
 * GSB_DEVICE_REF_STRIDE and whose data points to the caller's
 * gsb_device_array; its dtype, ndim and shape repeat the described array's,
 * so shape checks work on the reference itself.
 *
 * Local sessions: gsb__device_input makes a method input of it on the
 * session's GPU (the memory itself when it can), the way gsb__validate_array
 * does for host arrays; gsb__device_release orders the caller's stream after
 * the call.  Remote sessions copy it to the host with gsb__device_to_host
 * (through the CUDA backend of this process) and send that.
 */
#ifndef GSB_CORE_DEVARRAY_H
#define GSB_CORE_DEVARRAY_H

#include "core/model.h"
#include "core/validate.h"

static inline int gsb__is_device_ref(const gsb_array *a)
{
    return a && a->strides[1] == GSB_DEVICE_REF_STRIDE;
}

/* The gsb_device_array a reference names, checked: struct size, device
 * type and ordinal, dtype, dimensions, strides and data pointer (GSB_EINVAL
 * with scikit-learn-style wording naming `name`). */
int gsb__device_ref_check(const gsb_array *ref, const char *name,
                          const gsb_device_array **out);

/*
 * The validated tensor for a device reference used as a method input of a
 * call on session s (as gsb__validate_array gives for host arrays): on the
 * session's GPU, borrowing the caller's memory when it is contiguous in the
 * target dtype and device_ok, else a device copy in that layout; with
 * !device_ok a host copy.  NaN/inf are checked on the GPU.  A session
 * without a GPU refuses (GSB_EUNSUPPORTED).
 */
int gsb__device_input(gsb_session *s, const gsb_array *ref, const gsb__validate_spec *spec,
                      int device_ok, gsb__tensor *out);

/* After a call that read ref: the caller's stream waits for the engine's
 * work (no host wait). */
int gsb__device_release(gsb_session *s, const gsb_array *ref);

/* A contiguous C-order host copy of the described array, in its dtype
 * (remote sessions send it; the CUDA backend of this process reads it). */
int gsb__device_to_host(const gsb_array *ref, gsb__tensor *out);

/* A contiguous device copy on s's GPU in the array's dtype (gsb_data_put). */
int gsb__device_to_gpu(gsb_session *s, const gsb_array *ref, gsb__tensor *out);

#endif
