/*
 * server.h - gsbd's internals, shared by the files of src/server/.
 *
 * Shape (docs/PROTOCOL.md is the contract):
 *   server.c    listeners, the accept thread, connection threads' lifecycle,
 *               gsb_server_start/url/stop and gsb_serve;
 *   conn.c      one thread per connection: protocol detection, HELLO, the
 *               REQUEST loop, the request decoder (arrays inline / chunks /
 *               shm / data), progress and cancellation during a call;
 *   ops.c       one function per REQUEST op, all through the public API on
 *               the server's one local gsb_session;
 *   ssession.c  server-side sessions and their handle tables;
 *   shm.c       shared-memory segments (memfd) mapped and pinned;
 *   http.c      GET /health, /metrics, /v1/models on the same port;
 *   peer.c      who is at the other end (uid or address);
 *   admit.c     connection slots: the limits, reserved slots, eviction;
 *   refuse.c    telling connections turned away why;
 *   budget.c    the server-wide memory budget; heap trimming;
 *   log.c, metrics.c, options.c  what their names say.
 */
#ifndef GSB_SERVER_H
#define GSB_SERVER_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuml_compat.h"
#include "core/model.h"
#include "net/wire.h"

#define GSB__SERVER_NAME "gsbd " GSB_VERSION_STRING
#define GSB__DEFAULT_TCP "tcp://127.0.0.1:19876"

/* ---- log.c: "ts level msg key=value ..." lines to a file and stderr -------- */

enum { GSB__LOG_DEBUG = 0, GSB__LOG_INFO, GSB__LOG_WARN, GSB__LOG_ERROR };

#define GSB__LOG_ROTATE_BYTES ((long long)64 << 20) /* then FILE -> FILE.1, a fresh FILE */

typedef struct gsb__log {
    int fd;          /* log file (O_APPEND), or -1 */
    int to_stderr;
    int level;       /* lines below it are dropped */
    char *path;
    long long size;  /* bytes in the file now (lock) */
    long long rotate_bytes; /* GSB__LOG_ROTATE_BYTES (tests lower it) */
    pthread_mutex_t lock; /* file writes and rotation */
    int lock_init;
} gsb__log;

/* level name -> GSB__LOG_*, or -1 */
int gsb__log_level_parse(const char *name);
/* Opens path for appending (path NULL: no file).  Past GSB__LOG_ROTATE_BYTES
 * the file is renamed to path.1 (replacing an older one) and a fresh path
 * started, so a long-running server never fills the disk (`gsb logs -f`
 * follows across the rename). */
int gsb__log_open(gsb__log *lg, const char *path, int level, int to_stderr);
void gsb__log_close(gsb__log *lg);
static inline int gsb__log_on(const gsb__log *lg, int level) { return level >= lg->level; }
/*
 * One line: the UTC time, the level, msg (no '=' in it), then kvfmt
 * formatted (key=value pairs separated by spaces; values with spaces go
 * through gsb__log_q).  The line is written with one write() per sink, so
 * lines from concurrent threads never interleave.
 */
void gsb__logf(gsb__log *lg, int level, const char *msg, const char *kvfmt, ...)
    GSB__PRINTF(4, 5);
/* s as a double-quoted value with '"', '\\' and control characters escaped,
 * truncated to fit buf (n >= 8). */
const char *gsb__log_q(char *buf, size_t n, const char *s);

/* ---- admit.c's limits, named in metrics and messages ---------------------- */

enum { GSB__LIMIT_NONE = 0, GSB__LIMIT_CAP, GSB__LIMIT_PEER, GSB__LIMIT_MEMORY, GSB__LIMIT_N };

/* ---- metrics.c: counters for /metrics ------------------------------------- */

/* the ops of docs/PROTOCOL.md, in one table (ops.c) */
enum {
    GSB__OP_PING = 0, GSB__OP_INFO, GSB__OP_MODEL_CREATE, GSB__OP_MODEL_FREE,
    GSB__OP_MODEL_CALL, GSB__OP_MODEL_GET_ATTR, GSB__OP_MODEL_LIST_ATTRS,
    GSB__OP_MODEL_SET_PARAMS, GSB__OP_MODEL_GET_PARAMS, GSB__OP_MODEL_SET_META,
    GSB__OP_MODEL_GET_META, GSB__OP_MODEL_EXPORT, GSB__OP_MODEL_IMPORT,
    GSB__OP_STORE_SAVE, GSB__OP_STORE_LOAD, GSB__OP_STORE_DELETE, GSB__OP_STORE_LIST,
    GSB__OP_DATA_PUT, GSB__OP_DATA_FREE, GSB__OP_SHM_ATTACH, GSB__OP_SHM_DETACH,
    GSB__OP_OTHER, /* unknown or missing op */
    GSB__N_OPS
};
extern const char *const gsb__op_names[GSB__N_OPS];

#define GSB__LAT_BUCKETS 14 /* upper bounds in metrics.c, then +Inf */

typedef struct gsb__metrics {
    atomic_ullong requests[GSB__N_OPS];
    atomic_ullong errors[GSB__N_OPS];
    atomic_ullong bytes_in, bytes_out;
    atomic_ullong lat_bucket[GSB__LAT_BUCKETS + 1]; /* non-cumulative counts */
    atomic_ullong lat_sum_us, lat_count;
    atomic_ullong conns_total, conns_open, conns_refused;
    atomic_ullong refused_by[GSB__LIMIT_N]; /* answered with the reason */
    atomic_ullong conns_dropped;  /* closed without a word: the refuser was full */
    atomic_ullong conns_evicted;  /* idle, session empty, closed for a new connection */
    atomic_ullong conns_idle_closed; /* idle_timeout_s passed, session empty */
    atomic_ullong sessions_open;
    atomic_ullong cancelled;      /* calls stopped by CANCEL or a vanished client */
    atomic_ullong bad_frames;     /* connections closed for a protocol violation */
    atomic_ullong http_requests;
} gsb__metrics;

void gsb__metrics_request(gsb__metrics *m, int op, int ok, uint64_t us, uint64_t in,
                          uint64_t out);
struct gsb_server;
/* Prometheus text exposition; gpu_total/gpu_free < 0 when unknown. */
char *gsb__metrics_render(struct gsb_server *srv, double uptime_s, double gpu_total,
                          double gpu_free);

/* ---- options.c: the options JSON of gsb_server_start ---------------------- */

typedef struct gsb__srv_opts {
    char **listen;
    int n_listen;
    char *data_dir;        /* NULL: the default store directory */
    char *token;           /* NULL: no token required */
    char *device;          /* "cpu" | "cuda" | "auto" */
    char *log_file;        /* NULL: DATA_DIR/gsbd.log */
    int log_level;
    int log_stderr;
    uint64_t max_request_bytes;
    int max_connections;
    int reserved_connections; /* more slots at a limit: /health, /metrics, trusted logins */
    int max_per_peer;         /* connections of one uid (local) or address (remote) */
    int idle_timeout_s;       /* a connection of an empty session idle this long closes; 0 never */
    uint64_t memory_budget_bytes;
} gsb__srv_opts;

int gsb__srv_opts_parse(const char *json, gsb__srv_opts *out);
void gsb__srv_opts_free(gsb__srv_opts *o);
/* The token file's first line without its line ending; GSB_EPARAM when the
 * file cannot be read or that line is empty. */
int gsb__read_token_file(const char *path, char **out);
/* 1 when a (na bytes) equals secret (ns bytes); the time taken depends only
 * on ns, never on where the first difference is. */
int gsb__ct_equal(const void *a, size_t na, const void *secret, size_t ns);

/* ---- budget.c: the server-wide memory budget ------------------------------- */

enum { GSB__MEM_REQUESTS = 0, GSB__MEM_DATA, GSB__MEM_SHM, GSB__MEM_STAGING, GSB__MEM_KINDS };
extern const char *const gsb__mem_kind_labels[GSB__MEM_KINDS]; /* for /metrics */

typedef struct gsb__budget {
    uint64_t limit;
    atomic_ullong used;                  /* the sum of kind[] */
    atomic_ullong kind[GSB__MEM_KINDS];
    atomic_ullong refusals;
} gsb__budget;

/* Three quarters of the machine's memory, or of its cgroup's limit. */
uint64_t gsb__budget_default_bytes(void);
/* Take n bytes of kind for `what` ("a data handle of 1.0 GiB"); GSB_ENOMEM
 * with a message naming the budget and its flag when they do not fit. */
int gsb__budget_take(gsb__budget *b, int kind, uint64_t n, const char *what);
void gsb__budget_give(gsb__budget *b, int kind, uint64_t n); /* b NULL: nothing */
/* glibc's malloc: fixed thresholds for a process that only serves (gsb_serve);
 * a trim of every arena (throttled by the caller). */
void gsb__heap_fix_thresholds(void);
void gsb__heap_trim(void);

/* ---- peer.c: who is at the other end -------------------------------------- */

typedef struct gsb__peer {
    long uid;      /* the peer's user: Unix socket or loopback TCP; -1 unknown */
    char key[64];  /* what the per-peer limit counts: "uid 1000", "address 10.0.0.7" */
} gsb__peer;

void gsb__peer_identify(int fd, int is_unix, gsb__peer *out);

/* ---- shm.c: shared-memory segments --------------------------------------- */

typedef struct gsb__shm {
    void *base;
    size_t size;
    int pinned;                 /* registered with gpu */
    const gsb__backend *gpu;
} gsb__shm;

/* Map size bytes of the memfd fd (not consumed); seals it against shrinking
 * so a client can never make the server's pages vanish (SIGBUS). */
int gsb__shm_map(int fd, uint64_t size, gsb__shm **out);
/* Page-lock with the GPU backend (best effort); returns the backend's status. */
int gsb__shm_pin(gsb__shm *seg, const gsb__backend *gpu);
void gsb__shm_unmap(gsb__shm *seg);

/* ---- ssession.c: server-side sessions and handles ------------------------- */

enum { GSB__H_MODEL = 1, GSB__H_DATA, GSB__H_SHM };

typedef struct gsb__handle {
    uint64_t id;             /* model/data: chosen by the server; shm: by the client */
    int kind;
    int refs;                /* the table's + one per request using it */
    gsb__budget *budget;     /* given charge bytes of charge_kind back when destroyed */
    uint64_t charge;
    int charge_kind;
    gsb_model *model;
    pthread_mutex_t call_lock; /* model: one call (with its progress hook) at a time */
    gsb_data *data;
    gsb__shm *shm;
} gsb__handle;

typedef struct gsb__ssess {
    char id[33];             /* 128 random bits in hex: joining needs it */
    int conns;               /* connections joined (server's sess_lock) */
    pthread_mutex_t lock;    /* the table */
    gsb__handle **h;
    int n, cap;
    uint64_t next_id;
    struct gsb__ssess *next;
} gsb__ssess;

struct gsb_server;
int gsb__ssess_create(struct gsb_server *srv, gsb__ssess **out);
/* GSB_ENOTFOUND when no live session has that id. */
int gsb__ssess_join(struct gsb_server *srv, const char *id, gsb__ssess **out);
/* Drop a connection's hold; the last one frees every handle. */
void gsb__ssess_leave(struct gsb_server *srv, gsb__ssess *s);
/* 1 when the session holds no model, data or shared memory (NULL: 1). */
int gsb__ssess_empty(gsb__ssess *s);

/* Adds a handle (the table holds one reference); sets h->id for models and
 * data.  On failure frees nothing: the caller still owns the object. */
int gsb__ssess_add(gsb__ssess *s, gsb__handle *h);
/* The handle (kind, id) with a reference taken, or GSB_ENOTFOUND with a
 * message naming it. */
int gsb__ssess_get(gsb__ssess *s, int kind, uint64_t id, gsb__handle **out);
/* Remove from the table (no new lookups find it) and drop the table's
 * reference; GSB_ENOTFOUND when absent. */
int gsb__ssess_remove(gsb__ssess *s, int kind, uint64_t id);
void gsb__handle_put(gsb__handle *h);
gsb__handle *gsb__handle_new(int kind);

/* ---- the server ------------------------------------------------------------ */

typedef struct gsb__conn gsb__conn;
typedef struct gsb__peers gsb__peers;       /* admit.c */
typedef struct gsb__refuser gsb__refuser;   /* refuse.c */

struct gsb_server {
    gsb__srv_opts opt;
    gsb__log log;
    gsb__metrics metrics;
    gsb_session *local;        /* the engine: every op runs here */
    char *backend_name;        /* "cuda" | "cpu" */
    char *device_name;

    int n_listen;
    int *lfd;
    int *l_unix;
    char **urls;               /* bound addresses */
    char **unix_paths;         /* socket files to remove at stop (NULL for TCP) */

    int wake[2];               /* accept thread: reap finished connections / stop */
    int stop_pipe[2];          /* written once at stop: wakes every idle connection */
    pthread_t accept_thr;
    int accept_started;
    atomic_int stopping;

    pthread_mutex_t lock;      /* conns, done, n_conns, n_normal, n_reserved, peers */
    pthread_cond_t cond;
    gsb__conn *conns;          /* live */
    gsb__conn *done;           /* finished, waiting for pthread_join */
    int n_conns;               /* threads alive */
    int n_normal, n_reserved;  /* slots taken (admit.c) */
    gsb__peers *peers;         /* connections per peer */
    gsb__refuser *refuser;
    uint64_t next_conn_id;
    double last_trim;          /* when the heap was last trimmed (accept thread) */
    double last_accept_warn;   /* accept failures are logged at most every 10 s */
    int reaped_since_trim;

    gsb__budget budget;

    pthread_mutex_t sess_lock; /* sessions */
    gsb__ssess *sessions;
    int n_sessions;

    double t_start;            /* monotonic seconds */
};

double gsb__now_s(void);       /* CLOCK_MONOTONIC */
uint64_t gsb__now_us(void);
/* pthread_create with SIGINT, SIGTERM and SIGPIPE blocked in the thread */
int gsb__spawn(pthread_t *t, void *(*fn)(void *), void *arg);

/* ---- admit.c: connection slots ------------------------------------------------ */

enum { GSB__SLOT_NORMAL = 0, GSB__SLOT_RESERVED };
enum { GSB__ADMIT_NORMAL = 0, GSB__ADMIT_RESERVED, GSB__ADMIT_REFUSE };

int gsb__peers_create(gsb__peers **out);
void gsb__peers_free(gsb__peers *p);
/* For a new connection c (c->peer set), under srv->lock: GSB__ADMIT_NORMAL,
 * GSB__ADMIT_RESERVED (c->limit: the limit reached) or GSB__ADMIT_REFUSE
 * (c->limit: why).  Admitted connections are counted until
 * gsb__admit_release (under srv->lock). */
int gsb__admit(struct gsb_server *srv, gsb__conn *c);
void gsb__admit_release(struct gsb_server *srv, gsb__conn *c);
/* A connection in a reserved slot sent a valid HELLO: GSB_OK when it may stay
 * (an ordinary slot, freed or made by closing an idle connection, or the
 * reserved one when trusted at the server's cap), else GSB_EIO with the
 * refusal's message.  Takes srv->lock. */
int gsb__admit_login(struct gsb_server *srv, gsb__conn *c, int trusted);
/* The refusal's words for c->limit; counted: c holds a (reserved) slot.
 * Under srv->lock. */
void gsb__limit_message(const struct gsb_server *srv, const gsb__conn *c, int counted,
                        char *buf, size_t n);

/* ---- refuse.c: connections turned away ------------------------------------------- */

int gsb__refuser_start(struct gsb_server *srv, gsb__refuser **out);
/* Hands fd over (the refuser answers with msg and closes it); 0 when the
 * refuser is full: the caller closes fd. */
int gsb__refuser_add(gsb__refuser *r, int fd, const char *msg);
void gsb__refuser_stop(gsb__refuser *r);

/* ---- conn.c ---------------------------------------------------------------- */

enum { GSB__CS_BUSY = 0, GSB__CS_IDLE, GSB__CS_EVICTED };

struct gsb__conn {
    struct gsb_server *srv;
    int fd;
    int is_unix;
    uint64_t id;
    pthread_t thr;
    gsb__peer peer;
    int slot;                  /* GSB__SLOT_*, under srv->lock */
    int limit;                 /* the limit that put it in a reserved slot */
    atomic_int state;          /* GSB__CS_*: IDLE while waiting for a request */
    atomic_ullong idle_since_us;
    uint64_t charged;          /* request bytes taken from the budget now */
    char refusal[600];         /* why the budget refused the frame being received */
    gsb__ssess *sess;
    int broken;                /* a protocol violation seen during a call: close after */
    int vanished;              /* EOF or error seen during a call */
    int linger;                /* closing after an ERROR: drain what the client still sends */
    void *stage;               /* pinned staging for data.put streamed to the GPU, or NULL */
    gsb__conn *next, *prev;
};

/* The connection thread's body (server.c creates the thread). */
void *gsb__conn_main(void *arg);
/* Called by a connection thread as its last act: hands it to the accept
 * thread to join and free (server.c). */
void gsb__server_conn_done(struct gsb_server *srv, gsb__conn *c);

/* ---- ops.c ------------------------------------------------------------------ */

/* A decoded REQUEST: its head, and its arrays ("inputs" or "arrays") resolved
 * to views the engine can read. */
typedef struct gsb__req {
    uint64_t id;
    int op;
    json_t *head;
    const gsb__frame *frame;
    int n;                     /* arrays */
    gsb__wire_array *wa;
    gsb_array *arr;            /* views (data == NULL for "not given") */
    const gsb_array **ptrs;    /* &arr[i], or NULL for "not given" */
    void **bufs;               /* chunked arrays' buffers (owned) */
    gsb__handle **refs;        /* data/shm handles held for this request */
    int n_refs;
    gsb_data *streamed;        /* data.put: the handle its chunks were streamed into */
    uint64_t data_charge;      /* streamed's bytes taken from the budget (GSB__MEM_DATA) */
    uint64_t bytes_in;
} gsb__req;

/* What an op answers: head plus arrays; res/blob keep the arrays' memory
 * alive until the reply is sent. */
typedef struct gsb__reply {
    json_t *head;
    gsb__outmsg out;
    int has_out;
    gsb_result *res;
    void *blob;
} gsb__reply;

/* progress/cancel during a model.call: set by conn.c */
int gsb__conn_progress(void *data, const char *stage, int64_t iteration, double loss);
typedef struct gsb__call_ctx {
    gsb__conn *c;
    uint64_t req_id;
    int send_progress;
    int cancelled;             /* 1 by CANCEL, 2 by a vanished client, 3 by a bad frame */
    double last_poll;          /* when the socket was last looked at */
} gsb__call_ctx;

int gsb__op_lookup(const char *name);
/* Run op; on failure the thread's gsb_errmsg() says why. */
int gsb__op_run(gsb__conn *c, gsb__req *rq, gsb__reply *rp);

/* ---- http.c ----------------------------------------------------------------- */

/* Serve one HTTP request on fd (its first bytes already peeked) and return;
 * the caller closes fd.  busy (at a limit): /v1/models gets 503 with busy as
 * the reason; /health and /metrics are served as ever. */
void gsb__http_serve(struct gsb_server *srv, int fd, uint64_t conn_id, const char *busy);
/* 1 when the 4 bytes start an HTTP request line */
int gsb__http_method(const void *first4);
/* 503 with msg as the reason (a small, non-blocking write) */
void gsb__http_refuse(int fd, const char *msg);
/* The refuser's HTTP: the n bytes in buf (n + 1 writable) were peeked from
 * fd; answers as at a limit (busy) once the request line is whole or
 * complete says no more will come, and returns 1; 0: wait for more. */
int gsb__http_answer_peeked(struct gsb_server *srv, int fd, char *buf, size_t n, int complete,
                            const char *busy);
/* The /health document (new reference), or NULL on OOM. */
json_t *gsb__health_json(struct gsb_server *srv);
/* GPU memory from the local session's info, when it reports it (else -1). */
void gsb__gpu_memory(struct gsb_server *srv, double *total, double *free_b);

#endif
