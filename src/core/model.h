/*
 * model.h - the engine's model object and session (local, in-process).
 *
 * A model is parameters (JSON) plus fitted attributes (named host tensors).
 * Everything an estimator learns lives in its attributes, so the blob
 * format, the store and the server need no per-estimator code.
 * Calls on one model are serialised by its lock; different models run in
 * parallel.  cancel is set from any thread without the lock.
 */
#ifndef GSB_CORE_MODEL_H
#define GSB_CORE_MODEL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "core/arena.h"
#include "core/estimator.h"

struct gsb__store;
struct gsb__remote;
struct gsb_data;

enum { GSB__DEVICE_CPU = 0, GSB__DEVICE_CUDA, GSB__DEVICE_AUTO };

struct gsb_session {
    const gsb__backend *be;      /* the CPU backend */
    const gsb__backend *gpu;     /* the CUDA backend, or NULL */
    int device;                  /* GSB__DEVICE_*: where calls run */
    char *data_dir;              /* model store location */
    struct gsb__store *store;    /* opened on first use */
    pthread_mutex_t store_lock;
    struct gsb__remote *remote;  /* non-NULL: a gsbd session (src/net/remote.h) */
    struct gsb_data *data_head;  /* live data handles (core/data.h) */
    pthread_mutex_t data_lock;
    gsb__arena arena;            /* local sessions' gsb_arena_alloc blocks */
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
    uint64_t remote_id;          /* remote session: the server's handle */
};

typedef struct gsb_model gsb__model;

/*
 * The backend a call on s runs on, given the size of its data: device=cpu
 * and cuda are obeyed; auto takes the GPU only for work large enough to
 * gain from it (see dispatch.c for the cost model).
 */
const gsb__backend *gsb__session_backend(const gsb_session *s, int64_t rows, int64_t cols);

/*
 * Sessions are reference-counted: gsb_close drops the caller's reference and
 * the session goes when its last model, data handle and arena block have
 * been freed too.  So freeing those after gsb_close (a garbage collector's
 * order at interpreter exit) is safe, and a model of a remote session can
 * still tell the server it is gone.
 */
void gsb__session_ref(gsb_session *s);
void gsb__session_unref(gsb_session *s);

/* Allocate a model of est with default parameters. */
int gsb__model_new(gsb_session *s, const gsb__estimator_desc *est, gsb__model **out);

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
