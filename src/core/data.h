/*
 * data.h - data handles (gsb_data_put): arrays copied into the session once
 * and named by reference in later calls.  A reference is a gsb_array whose
 * strides[1] is GSB_DATA_REF_STRIDE and whose data is the gsb_data pointer;
 * it is only ever dereferenced after it is found in its session's live set,
 * so a stale or foreign reference is a clear error, never a crash.
 *
 * On a local session with a GPU, data large enough for the GPU (the same
 * rule as device=auto) lives on the GPU only: gsb_data_put uploads it
 * straight from the caller's memory (at full bus speed when that memory is
 * pinned: gsbd's shared-memory segments, gsb_arena_alloc), it is checked for
 * NaN/inf there, and methods whose X input is GSB__IN_DEVICE_OK use it with
 * no transfer.  Any other use downloads a host copy once.
 */
#ifndef GSB_CORE_DATA_H
#define GSB_CORE_DATA_H

#include "core/model.h"
#include "core/validate.h"

#define GSB__DATA_MAGIC 0x6773622d64617461ull /* "gsb-data" */

struct gsb_data {
    uint64_t magic;
    gsb_session *session;
    gsb_array view;        /* dtype, ndim, shape (data: see host) */
    void *host;            /* contiguous C-order host copy, or NULL */
    gsb__tensor dev;       /* the GPU copy (local sessions), or none */
    int nonfinite;         /* dev's check: -1 not yet, else gsb__host_nonfinite's answer */
    uint64_t impl_id;      /* the session implementation's name for it (a gsbd's data
                              handle), or 0 */
    struct gsb_data *prev, *next; /* the session's live set */
};

static inline int gsb__is_data_ref(const gsb_array *a)
{
    return a && a->strides[1] == GSB_DATA_REF_STRIDE;
}

/*
 * The handle's life, for gsb_data_put and gsb_data_free (src/session/api.c):
 * new checks a (dtype, 0-2 dimensions, data present) and makes a handle of s
 * for its dtype and shape, not yet live; the session implementation fills it
 * (the engine's way: fill_local, a host or GPU copy); commit (below) makes it
 * live; unlink takes it out of the live set, so references to it no longer
 * resolve; destroy frees a handle that is not live, storage and all.
 */
int gsb__data_new(gsb_session *s, const gsb_array *a, struct gsb_data **out);
int gsb__data_fill_local(gsb_session *s, const gsb_array *a, struct gsb_data *d);
void gsb__data_unlink(struct gsb_data *d);
void gsb__data_destroy(struct gsb_data *d);

/* Find the gsb_data a reference names in session s (locks s->data_lock);
 * GSB_EINVAL when it is not a live handle of s. */
int gsb__data_resolve(gsb_session *s, const gsb_array *ref, struct gsb_data **out);

/*
 * The validated tensor for a data reference used as a method input, as
 * gsb__validate_array gives for an array: a borrowed device tensor when the
 * data is on the GPU and device_ok, else a host tensor (the host copy is made
 * once and kept).
 */
int gsb__data_input(gsb_session *s, const gsb_array *ref, const gsb__validate_spec *spec,
                    int device_ok, gsb__tensor *out);

/*
 * A data handle filled by its caller in order (gsbd's data.put streamed over
 * TCP): storage for shape's dtype and shape (shape->data unused), on the GPU
 * when put would put it there.  Host storage: *host_dst is the whole array's
 * memory to fill.  GPU storage: *host_dst is NULL and the bytes go up with
 * gsb__data_stream_upload (whole elements, in any order).  commit makes the
 * handle live (a gsb_data of s); abort frees it (gsb__data_destroy).
 */
int gsb__data_stream_open(gsb_session *s, const gsb_array *shape, struct gsb_data **out,
                          void **host_dst);
int gsb__data_stream_upload(struct gsb_data *d, uint64_t offset, const void *src, size_t len);
void gsb__data_stream_commit(struct gsb_data *d);
void gsb__data_stream_abort(struct gsb_data *d);

#endif
