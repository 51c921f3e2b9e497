/*
 * gsb_dlpack.h - DLPack tensors in and out of gsb, for C and C++ callers
 * (PyTorch's ATen, CuPy, JAX/XLA, TVM, Arrow and others exchange arrays as
 * DLPack's DLTensor / DLManagedTensor).  Include after gsb.h, or alone (it
 * includes gsb.h); it includes the DLPack header shipped beside it
 * (include/dlpack/dlpack.h, Apache-2.0) unless the program included its own
 * first.
 */
#ifndef GSB_DLPACK_H
#define GSB_DLPACK_H

#include "gsb.h"
#include "dlpack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * An input array for t, a DLTensor of 0 to 2 dimensions of float32/64 or
 * int32/64 (lanes 1), with its byte_offset applied and its strides (in
 * elements, NULL for compact C order) turned into gsb's bytes:
 *   - kDLCPU and kDLCUDAHost (pinned) memory: a host gsb_array (storage is
 *     not touched);
 *   - kDLCUDA and kDLCUDAManaged memory: *storage is filled in as the device
 *     array and *out is gsb_array_on_device(storage), so storage must live as
 *     long as *out is used; stream is the producer's (gsb.h's "Ordering").
 * GSB_EINVAL for a DLTensor gsb cannot read (with the reason), GSB_EUNSUPPORTED
 * for memory of another kind of device.  t stays the caller's: nothing is
 * copied and no deleter is called.
 */
GSB_API int gsb_array_from_dlpack(const DLTensor *t, void *stream, gsb_device_array *storage,
                                  gsb_array *out);

/*
 * Array i of result r (gsb_model_call's results, gsb_model_get_attr's
 * attribute) as a new DLManagedTensor in host memory (kDLCPU, compact C
 * order): a copy, owned by the tensor, released by calling its deleter (once,
 * in any thread; r may be freed before).  GSB_ENOTFOUND when i is out of
 * range.
 */
GSB_API int gsb_result_to_dlpack(const gsb_result *r, int i, DLManagedTensor **out);

#ifdef __cplusplus
}
#endif
#endif /* GSB_DLPACK_H */
