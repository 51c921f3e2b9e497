/*
 * data.h - data handles (gsb_data_put): arrays copied into the session once
 * and named by reference in later calls.  A reference is a gsb_array whose
 * strides[1] is GSB_DATA_REF_STRIDE and whose data is the gsb_data pointer;
 * it is only ever dereferenced after it is found in its session's live set,
 * so a stale or foreign reference is a clear error, never a crash.
 */
#ifndef GSB_CORE_DATA_H
#define GSB_CORE_DATA_H

#include "core/model.h"

#define GSB__DATA_MAGIC 0x6773622d64617461ull /* "gsb-data" */

struct gsb_data {
    uint64_t magic;
    gsb_session *session;
    gsb_array view;        /* dtype, ndim, shape; data = host copy (local) */
    void *host;            /* local: owned contiguous C-order copy */
    uint64_t remote_id;    /* remote: the server's handle */
    struct gsb_data *prev, *next; /* the session's live set */
};

static inline int gsb__is_data_ref(const gsb_array *a)
{
    return a && a->strides[1] == GSB_DATA_REF_STRIDE;
}

/* Find the gsb_data a reference names in session s (locks s->data_lock);
 * GSB_EINVAL when it is not a live handle of s. */
int gsb__data_resolve(gsb_session *s, const gsb_array *ref, struct gsb_data **out);

#endif
