/* dispatch.h - the generic method call on a local model (see dispatch.c). */
#ifndef GSB_CORE_DISPATCH_H
#define GSB_CORE_DISPATCH_H

#include "core/model.h"

/* Run method on m with caller arrays; results appended to out.  Caller holds m->lock. */
int gsb__dispatch(gsb__model *m, const char *method, const gsb_array *const *inputs,
                  int n_inputs, const json_t *options, gsb__nlist *out);
/* 1 when est declares method or the dispatcher composes it. */
int gsb__method_available(const gsb__estimator_desc *est, const char *method);

/* Validate caller arrays for a method's declared inputs (exposed for tests). */
int gsb__inputs_validate(gsb__model *m, const gsb__method_desc *md,
                         const gsb_array *const *inputs, int n_inputs, gsb__tensor *in);
void gsb__inputs_free(gsb__tensor *in);

/* Run md on inputs already validated (in: as md declares them), on the
 * backend of X (a device tensor's, else the session's); a fit swaps its
 * attributes in on success.  The multi-device fits' building block: each
 * rank's stats method, then fit_from_stats (multidev/multidev.c). */
int gsb__dispatch_validated(gsb__model *m, const gsb__method_desc *md, gsb__tensor *in,
                            const json_t *options, gsb__nlist *out);

/* Milliseconds since the current thread's latest method call entered the
 * dispatcher, validation included ($GSB_STREAM_TRACE's "call start to ring open"). */
double gsb__call_elapsed_ms(void);

#endif
