/*
 * model.h - the engine's session, model and result objects.
 *
 * A model is parameters (JSON) plus fitted attributes (named host tensors).
 * Everything an estimator learns lives in its attributes, so the blob
 * format, the store and the server need no per-estimator code.
 * Calls on one model are serialised by its lock; different models run in
 * parallel.  cancel is set from any thread without the lock.
 *
 * Sessions, models and data handles (core/data.h) are the same objects
 * whichever implementation of the session interface made them: the engine
 * in this process or a gsbd (src/session/).  The engine does not know which:
 * vt and impl belong to that interface and nothing here looks at them.
 */
#ifndef GSB_CORE_MODEL_H
#define GSB_CORE_MODEL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "core/arena.h"
#include "core/estimator.h"

struct gsb__store;
struct gsb__session_vtab;
struct gsb_data;

enum { GSB__DEVICE_CPU = 0, GSB__DEVICE_CUDA, GSB__DEVICE_AUTO };

struct gsb_session {
    const struct gsb__session_vtab *vt; /* how gsb.h's calls run here (src/session/session.h) */
    void *impl;                  /* that implementation's own state, or NULL */
    void (*impl_free)(void *impl); /* frees impl when the session goes (NULL: nothing to free) */
    const gsb__backend *be;      /* the CPU backend */
    const gsb__backend *gpu;     /* the CUDA backend, or NULL */
    int device;                  /* GSB__DEVICE_*: where calls run */
    size_t memory_cap;           /* bytes of backend memory calls plan with, 0: no cap
                                    (core/budget.h) */
    char *data_dir;              /* model store location */
    struct gsb__store *store;    /* opened on first use */
    pthread_mutex_t store_lock;
    struct gsb_data *data_head;  /* live data handles (core/data.h) */
    pthread_mutex_t data_lock;
    gsb__arena arena;            /* local sessions' gsb_arena_alloc blocks */
    struct gsb__devset *devset;  /* a multi-device session's devices (multidev/devset.h;
                                    owned by the session implementation), or NULL */
    atomic_int refs;             /* the caller's + one per model, data handle, arena block */
};

struct gsb_model {
    gsb_session *session;
    const gsb__estimator_desc *est;
    json_t *params;
    json_t *meta;                /* the caller's own metadata (object), or NULL */
    gsb__nlist attrs;            /* empty when unfitted */
    int fitted;
    pthread_mutex_t lock;
    atomic_int cancel;
    gsb_progress_fn progress;
    void *progress_data;
    uint64_t impl_id;            /* the session implementation's name for it (a gsbd's
                                    model handle), or 0 */
    void *devstate;              /* what a multi-device session keeps on its devices for
                                    this model's fitted attributes (multidev/multidev_knn.c:
                                    the index shards), or NULL; dropped whenever the
                                    attributes change (gsb__model_drop_devstate) */
    void (*devstate_free)(void *devstate);
};

typedef struct gsb_model gsb__model;

/*
 * The backend a call on s runs on, given the size of its data: device=cpu
 * and cuda are obeyed; auto takes the GPU only for work large enough to
 * gain from it (see dispatch.c for the cost model).
 */
const gsb__backend *gsb__session_backend(const gsb_session *s, int64_t rows, int64_t cols);
/* The same for a method's X of these input flags (GSB__IN_QUADRATIC weighs rows^2 x cols). */
const gsb__backend *gsb__session_backend_for(const gsb_session *s, int64_t rows, int64_t cols,
                                             unsigned x_flags);

/*
 * A new session holding the caller's reference: CPU backend, device=cpu,
 * nothing else set.  The session interface fills in the rest (vt, impl, the
 * GPU for a local one).
 */
int gsb__session_new(gsb_session **out);

/*
 * Sessions are reference-counted: gsb_close drops the caller's reference and
 * the session goes when its last model, data handle and arena block have
 * been freed too.  So freeing those after gsb_close (a garbage collector's
 * order at interpreter exit) is safe, and a model of a remote session can
 * still tell the server it is gone.  The last unref frees impl (impl_free),
 * then the engine's state.
 */
void gsb__session_ref(gsb_session *s);
void gsb__session_unref(gsb_session *s);

/* Allocate a model of est with default parameters (it holds a reference to s). */
int gsb__model_new(gsb_session *s, const gsb__estimator_desc *est, gsb__model **out);
/* Free m (attributes, parameters, metadata) and drop its session reference. */
void gsb__model_destroy(gsb__model *m);
/* Free m's devstate (its fitted attributes are about to change, or it goes). */
void gsb__model_drop_devstate(gsb__model *m);

/* A result that takes over list's tensors (host, owned); list is left empty. */
int gsb__result_from(gsb__nlist *list, gsb_result **out);

/* JSON text -> a new object ("" or NULL: {}), with the API's messages for bad
 * text; and an object -> compact text (caller frees).  Local and remote
 * sessions parse and print the same way. */
int gsb__json_parse_object(const char *text, json_t **out);
int gsb__json_dump(const json_t *v, char **out);

/* Look up a registered estimator; clear errors for unknown or planned names. */
int gsb__find_estimator(const char *name, const gsb__estimator_desc **out);

#endif
