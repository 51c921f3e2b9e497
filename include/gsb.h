/*
 * gsb.h - the public C API of gsb (gpu-sklearn-bridge).
 *
 * One header, opaque handles, integer status codes plus a message (in the
 * spirit of SQLite).  A session is opened from a URL: "local" (the default,
 * the engine in this process) or, once the server lands, "tcp://" and
 * "unix://".  Everything below works the same whichever session you hold.
 *
 * Errors: every function that can fail returns a gsb_status; GSB_OK is 0.
 * gsb_errmsg() returns the message of the last failing call made by the
 * calling thread (thread-local, so one session can serve many threads).
 *
 * Memory: arrays passed in are borrowed for the duration of the call only;
 * anything the library returns is owned by the caller and released with the
 * matching free function (gsb_result_free, gsb_free).
 */
#ifndef GSB_H
#define GSB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(GSB_BUILDING_DLL)
#define GSB_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(GSB_STATIC)
#define GSB_API __declspec(dllimport)
#else
#define GSB_API __attribute__((visibility("default")))
#endif

#define GSB_VERSION_MAJOR 0
#define GSB_VERSION_MINOR 1
#define GSB_VERSION_PATCH 0
#define GSB_VERSION_STRING "0.1.0"

/* ---- status codes ------------------------------------------------------ */
typedef enum gsb_status {
    GSB_OK = 0,
    GSB_EINVAL = 1,       /* bad argument or input data (scikit-learn: ValueError) */
    GSB_EPARAM = 2,       /* unknown or invalid parameter (InvalidParameterError) */
    GSB_ENOTFITTED = 3,   /* model used before fit (NotFittedError) */
    GSB_ENOMEM = 4,       /* out of host or device memory */
    GSB_ENOTFOUND = 5,    /* no such estimator, method, attribute or saved model */
    GSB_EIO = 6,          /* file or database error */
    GSB_ECORRUPT = 7,     /* a model blob is corrupt, truncated or of another version */
    GSB_ECANCELLED = 8,   /* a long call was cancelled; the model is left unfitted */
    GSB_EBACKEND = 9,     /* a compute backend failed (BLAS, LAPACK, CUDA) */
    GSB_EUNSUPPORTED = 10,/* valid request that this build cannot serve */
    GSB_ENUMERIC = 11,    /* numerical failure (singular matrix, no convergence) */
    GSB_EINTERNAL = 12    /* a bug in gsb: please report it */
} gsb_status;

/* ---- arrays ------------------------------------------------------------ */
typedef enum gsb_dtype {
    GSB_F32 = 1,
    GSB_F64 = 2,
    GSB_I32 = 3,
    GSB_I64 = 4
} gsb_dtype;

/*
 * A view of caller memory: 0-d (scalar), 1-d or 2-d.  strides are in bytes
 * and may be 0 for "contiguous C order", so a plain C array needs only data,
 * dtype, ndim and shape.  Fortran order is strides = {itemsize, itemsize*rows}.
 */
typedef struct gsb_array {
    void *data;
    gsb_dtype dtype;
    int ndim;
    int64_t shape[2];
    int64_t strides[2];
} gsb_array;

/* Convenience constructors for contiguous C-ordered arrays. */
GSB_API gsb_array gsb_array_1d(void *data, gsb_dtype dtype, int64_t n);
GSB_API gsb_array gsb_array_2d(void *data, gsb_dtype dtype, int64_t rows, int64_t cols);
GSB_API size_t gsb_dtype_size(gsb_dtype dtype);
GSB_API const char *gsb_dtype_name(gsb_dtype dtype);

/* ---- device arrays: GPU memory as input -------------------------------- */
/*
 * A gsb_array describes host memory.  Memory of a GPU is described by a
 * gsb_device_array (the array, plus where it lives and the stream its
 * producer wrote it on) and passed as the gsb_array that
 * gsb_array_on_device(&d) returns, anywhere an input array goes
 * (gsb_model_call, gsb_model_fit, gsb_data_put).  d must stay valid for the
 * duration of that call; the returned gsb_array refers to it (its data is
 * &d, strides[1] is GSB_DEVICE_REF_STRIDE: never read through it).
 *
 * Local session on that GPU (device=cuda or auto): methods that read X
 * through the backend's ops (fit, predict, transform of the GPU estimators:
 * docs/CUDA.md) use the memory in place, with no copy to the host; other
 * inputs (y, sample weights) and other methods copy what they need from
 * the device once.  The NaN/inf check runs on the GPU.  A device=cpu
 * session refuses device arrays (GSB_EUNSUPPORTED); an array on another GPU
 * than the session's is GSB_EINVAL.  Remote session: the array is copied to
 * host memory once (device to host at the link's rate) and sent as a host
 * array would be.
 *
 * Ordering: the engine reads the memory after the work already queued on
 * `stream` (a cudaStream_t of the producer, or one of the GSB_STREAM_*
 * values) and, before the call returns, orders that stream after its own
 * reads, so the producer may overwrite the memory with work it queues
 * next.  Neither waits on the host.
 */
typedef enum gsb_device_type {
    GSB_DEVICE_CUDA = 2,         /* cudaMalloc'ed memory (DLPack's kDLCUDA) */
    GSB_DEVICE_CUDA_MANAGED = 13 /* cudaMallocManaged memory (kDLCUDAManaged) */
} gsb_device_type;

#define GSB_STREAM_LEGACY ((void *)1)                 /* the legacy default stream; NULL too */
#define GSB_STREAM_PER_THREAD ((void *)2)             /* the calling thread's default stream */
#define GSB_STREAM_NONE ((void *)(intptr_t)-1)        /* no ordering: the data is ready */
#define GSB_DEVICE_REF_STRIDE (INT64_MIN + 1)         /* strides[1] of a device reference */
#define GSB_DEVICE_ID_OF_MEMORY (-1)                  /* device_id: ask the driver */

typedef struct gsb_device_array {
    size_t struct_size; /* sizeof(gsb_device_array): later versions may grow it */
    gsb_array array;    /* data is a device pointer; dtype, ndim, shape and strides
                           (bytes; {0, 0}: contiguous C order; negative allowed) as for
                           host arrays */
    int device_type;    /* a gsb_device_type */
    int device_id;      /* the CUDA device ordinal (as cudaSetDevice numbers them), or
                           GSB_DEVICE_ID_OF_MEMORY: whichever device the memory is on
                           (CUDA array interface producers do not say) */
    void *stream;       /* see "Ordering" above */
} gsb_device_array;

/* A contiguous C-ordered rows x cols device array on CUDA device device_id. */
GSB_API gsb_device_array gsb_device_array_2d(void *data, gsb_dtype dtype, int64_t rows,
                                             int64_t cols, int device_id, void *stream);
/* The input array standing for *d (see above); all zeros when d is NULL. */
GSB_API gsb_array gsb_array_on_device(const gsb_device_array *d);

/* ---- library ----------------------------------------------------------- */
GSB_API const char *gsb_version(void);
GSB_API const char *gsb_errmsg(void);           /* last error of this thread */
/*
 * Warnings of this thread's last gsb_model_call (gsb_model_fit included),
 * local or remote, as a JSON array of {"category": "...", "message": "..."};
 * "[]" when there were none.  A warning is what scikit-learn would report
 * with warnings.warn while the call goes on: the category is the name of its
 * warning class ("ConvergenceWarning" when a solver stopped at max_iter,
 * "FutureWarning", "RuntimeWarning", "UserWarning") and the message
 * scikit-learn's text.  Valid until this thread's next gsb_model_call.
 */
GSB_API const char *gsb_warnings(void);
GSB_API const char *gsb_status_name(int status);/* "GSB_EINVAL", ... */
GSB_API void gsb_free(void *p);                 /* frees strings/bytes gsb returned */

/*
 * JSON describing the library: version, backends compiled and available, and
 * every registered estimator with its parameters (type, default, range or
 * choices), methods and fitted attributes, and "cuml_version" (the version the
 * cuml shim and gsbd's /health report).  Caller frees with gsb_free.
 */
GSB_API int gsb_info_json(char **out_json);

/* ---- sessions ---------------------------------------------------------- */
typedef struct gsb_session gsb_session;

/*
 * url: NULL or "local" for the in-process engine ("local?device=cpu|cuda|auto"
 * picks the device; without it, $GSB_DEVICE, else auto; "memory_cap=BYTES",
 * joined with '&', or else $GSB_GPU_MEMORY_CAP, caps the device memory the
 * engine plans with, as on a smaller GPU: suffixes K, M, G, T (powers of
 * 1024); a fit whose X does not fit streams X from host memory in batches
 * where the estimator can (docs/CUDA.md), else fails with GSB_ENOMEM.  On the
 * CPU backend the cap applies too, so streaming can be tried without a GPU),
 * or a gsbd server:
 * "tcp://host:port" or "unix:///path/to/socket", optionally with
 * "?token_file=PATH" (else $GSB_TOKEN, else $GSB_TOKEN_FILE) for a server that
 * requires a token, and "max_inline=BYTES" (arrays above it travel in chunks;
 * default 1 MiB, at most 64 MiB), joined with '&'.  Every function below works the same on either kind.
 * The session is thread-safe.
 */
GSB_API int gsb_open(const char *url, gsb_session **out);
/*
 * Drops the caller's reference.  Models, data handles and arena blocks of the
 * session keep it alive until they are freed too (in any order, before or
 * after gsb_close); the session, its store and its connections go with the
 * last of them.
 */
GSB_API void gsb_close(gsb_session *s);
/*
 * JSON about the session: for "local", the engine (version, backends, device,
 * "memory_cap" when set, and with a GPU its memory and "copies": the counts
 * and bytes of host-to-device and device-to-host copies since it opened);
 * for a remote session, the server's /health document plus the transport in use
 * ("transport": "tcp"|"unix", "shm": true when the shared-memory arena is on).
 */
GSB_API int gsb_session_info(gsb_session *s, char **out_json);

/* ---- models ------------------------------------------------------------ */
typedef struct gsb_model gsb_model;

/*
 * Create a model of a registered estimator ("KMeans", ...).  params_json is
 * NULL or a JSON object of parameters; unknown names and invalid values are
 * GSB_EPARAM with scikit-learn's wording.
 */
GSB_API int gsb_model_create(gsb_session *s, const char *estimator,
                             const char *params_json, gsb_model **out);
GSB_API void gsb_model_free(gsb_model *m);
GSB_API const char *gsb_model_estimator(const gsb_model *m);
GSB_API int gsb_model_is_fitted(const gsb_model *m);

GSB_API int gsb_model_set_params(gsb_model *m, const char *params_json);
GSB_API int gsb_model_get_params(const gsb_model *m, char **out_json);

/*
 * Results of a call: named arrays (owned by the result) and a small JSON
 * object for anything that is not an array.  Scalars are 0-d arrays.
 */
typedef struct gsb_result gsb_result;
GSB_API int gsb_result_count(const gsb_result *r);
GSB_API const char *gsb_result_name(const gsb_result *r, int i);
GSB_API const gsb_array *gsb_result_array(const gsb_result *r, int i);
GSB_API const gsb_array *gsb_result_get(const gsb_result *r, const char *name);
GSB_API void gsb_result_free(gsb_result *r);

/*
 * fit(X, y): y may be NULL for unsupervised estimators.  Extra inputs that a
 * method declares (sample_weight, init, ...) go through gsb_model_call.
 */
GSB_API int gsb_model_fit(gsb_model *m, const gsb_array *X, const gsb_array *y);

/*
 * The one generic call: method M ("fit", "predict", "transform", "score",
 * "predict_proba", "kneighbors", ...) with positional inputs in the order
 * the method declares (a NULL entry or data == NULL means "not given") and
 * keyword options as JSON ("{\"n_neighbors\": 3}" or NULL).  *out may be
 * NULL when the caller wants no result.
 */
GSB_API int gsb_model_call(gsb_model *m, const char *method,
                           const gsb_array *const *inputs, int n_inputs,
                           const char *options_json, gsb_result **out);

/* A fitted attribute ("coef_", "cluster_centers_", ...) as a result of one array. */
GSB_API int gsb_model_get_attr(const gsb_model *m, const char *name, gsb_result **out);
/* JSON list of the fitted attributes this model has now. */
GSB_API int gsb_model_list_attrs(const gsb_model *m, char **out_json);

/* ---- long work: progress and cancellation ------------------------------ */
/*
 * Called between iterations of long fits with the iteration number and the
 * current loss (inertia, objective).  Return nonzero to cancel: the call
 * then fails with GSB_ECANCELLED and the model is left unfitted.
 */
typedef int (*gsb_progress_fn)(void *data, const char *stage, int64_t iteration,
                               double loss);
GSB_API void gsb_model_set_progress(gsb_model *m, gsb_progress_fn fn, void *data);
/* Ask a running call on m (from another thread) to stop at the next iteration. */
GSB_API void gsb_model_cancel(gsb_model *m);

/*
 * The caller's own metadata: a small JSON object (at most 1 MiB) kept with
 * the model, in its blob and in the store.  gsb never interprets it; the
 * Python layer keeps label names and feature names there.  "{}" when unset.
 */
GSB_API int gsb_model_set_meta(gsb_model *m, const char *json_object);
GSB_API int gsb_model_get_meta(const gsb_model *m, char **out_json);

/* ---- data handles: upload once, use in many calls --------------------- */
/*
 * gsb_data_put copies a (any layout) into the session: into the engine for a
 * local session, to the server for a remote one.  gsb_data_array(d) is a
 * gsb_array that stands for that data: pass it as an input of any call on a
 * model of the same session (cross-validation, fit then predict on the same
 * X) and nothing is sent again.  Its data field is a reference, not memory:
 * never read through it.  Free the handle when no call needs it any more.
 */
typedef struct gsb_data gsb_data;
#define GSB_DATA_REF_STRIDE INT64_MIN /* strides[1] of a data reference */
GSB_API int gsb_data_put(gsb_session *s, const gsb_array *a, gsb_data **out);
GSB_API gsb_array gsb_data_array(const gsb_data *d);
GSB_API void gsb_data_free(gsb_data *d);

/* ---- the session's arena: memory that crosses to the engine with no copy -- */
/*
 * Memory for arrays the caller fills itself.  Local session with a GPU: page-
 * locked (pinned) host memory for blocks of 1 MiB or more, so uploads run at
 * full bus speed (smaller blocks are ordinary memory: pinning costs more
 * than it saves there).  Unix-socket
 * session: shared memory that gsbd maps (and pins), so the array's bytes are
 * never copied or sent over the socket.  TCP session: ordinary memory.
 * 64-byte aligned; free with gsb_arena_free before closing the session.
 */
GSB_API int gsb_arena_alloc(gsb_session *s, size_t nbytes, void **out);
GSB_API void gsb_arena_free(gsb_session *s, void *p);

/* ---- persistence ------------------------------------------------------- */
/* A versioned, checksummed blob; importing never executes anything. */
GSB_API int gsb_model_export(const gsb_model *m, void **out_bytes, size_t *out_len);
GSB_API int gsb_model_import(gsb_session *s, const void *bytes, size_t len,
                             gsb_model **out);

/* The session's model store (SQLite in the data directory). */
GSB_API int gsb_model_save(gsb_model *m, const char *name);
GSB_API int gsb_model_load(gsb_session *s, const char *name, gsb_model **out);
GSB_API int gsb_model_delete(gsb_session *s, const char *name);
/* JSON list of {"name", "estimator", "size", "saved_at"} objects. */
GSB_API int gsb_model_list(gsb_session *s, char **out_json);

/* ---- the server (gsbd) --------------------------------------------------- */
/*
 * options_json (NULL for defaults):
 *   "listen":     ["tcp://127.0.0.1:19876", "unix:///run/user/UID/gsbd.sock"]
 *                 (default: both of these; "tcp://0.0.0.0:PORT" and other non-loopback
 *                 addresses are refused unless a token is configured)
 *   "data_dir":   model store directory (default: as local sessions)
 *   "token_file": file whose first line is the auth token (required for
 *                 non-loopback addresses; when set, every client must present it)
 *   "device":     "cpu" | "cuda" | "auto" (default auto)
 *   "log_file":   path (default: DATA_DIR/gsbd.log), "log_level": "debug|info|warn|error"
 *   "log_stderr": also log to stderr (default true)
 *   "max_request_mb": bound on the bytes one connection may hold for a request
 *                 (default 8192); "max_connections" (default 1024)
 *   "reserved_connections": more slots at the limit for /health, /metrics and
 *                 trusted logins (default 16); "max_connections_per_peer": of one
 *                 local user or remote address (default max_connections / 4);
 *   "idle_timeout_s": close connections of sessions holding nothing after this
 *                 long idle (default 300, 0 never); "memory_budget_mb": the
 *                 server-wide bound on request, data-handle and shared memory
 *                 (default 3/4 of the machine's)  (docs/REMOTE.md, "Limits")
 * gsb_server_start listens and serves on background threads and returns;
 * gsb_server_url(srv, i) is the i-th address it listens on (NULL past the
 * last; a port of 0 in "listen" is replaced by the one the system chose).
 * gsb_server_stop stops accepting, lets in-flight requests finish, closes
 * every connection and frees the server.  gsb_serve does start, waits for
 * SIGINT or SIGTERM, then stop: the body of `gsbd`; a process that calls it
 * only serves, so it also fixes glibc malloc's thresholds (no memory kept
 * after bursts of connections).
 */
typedef struct gsb_server gsb_server;
GSB_API int gsb_server_start(const char *options_json, gsb_server **out);
GSB_API const char *gsb_server_url(const gsb_server *srv, int i);
GSB_API void gsb_server_stop(gsb_server *srv);
GSB_API int gsb_serve(const char *options_json);

#ifdef __cplusplus
}
#endif
#endif /* GSB_H */
