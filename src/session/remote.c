/*
 * remote.c - a gsbd as a session (remote.h): the session interface
 * (session.h) carried to the server over the wire protocol (src/net/wire.h,
 * docs/PROTOCOL.md).
 *
 * A session holds a pool of connections joined to one server-side session.
 * A call checks an idle connection out (or opens one with "join"), sends
 * one REQUEST, waits for its REPLY or ERROR (answering PROGRESS frames and
 * sending CANCEL when asked to stop), reads any chunked result arrays
 * straight into the result tensors, and checks the connection back in.  A
 * connection that failed mid-request is closed, never reused: its byte
 * stream can no longer be trusted.
 *
 * Input arrays travel by the cheapest way open to them: a data handle by
 * reference, an array inside the shared arena by (segment, offset), a large
 * contiguous array on a Unix session copied once into a scratch block of
 * the arena by several threads, anything else inline or in chunks.  A
 * caller's device array (gsb_device_array) is first copied to host memory
 * once, through the CUDA backend of this process (core/devarray.h), and
 * then travels as that host array would.
 *
 * Error messages from the server are passed on unchanged (the engine's
 * words); transport failures are GSB_EIO naming the URL and what to check.
 *
 * gsbd closes idle connections of a server-side session that holds nothing
 * (idle_timeout_s, or to make room at its connection limit), and the session
 * goes with its last connection.  A client holding nothing there (no model,
 * data handle or shared-memory segment: `held`) then simply opens a new one.
 */
#include "session/remote.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/data.h"
#include "core/devarray.h"
#include "core/error.h"
#include "core/tensor.h"
#include "core/warn.h"
#include "net/arena.h"
#include "net/wire.h"

#define CLIENT_NAME "libgsb " GSB_VERSION_STRING
#define HELLO_TIMEOUT_MS 10000 /* a peer that is not gsbd never answers HELLO */
#define POLL_MS 50             /* how often a waiting call looks at m->cancel */
#define POOL_MAX 64            /* idle connections kept; more are closed */
#define SHM_COPY_MIN ((size_t)1 << 20) /* below this, the socket is as fast */
#define COPY_PART_MIN ((size_t)4 << 20)
#define COPY_THREADS_MAX 8
#define MAX_SCRATCH 16
#define GSB__MAX_DEV_COPIES 8 /* device inputs of one request (a call has at most 4) */
#define ERRCOPY 1024

typedef struct gsb__remote gsb__remote;

struct gsb__remote {
    char *url;          /* the address without its query: what messages name */
    int is_unix;
    char *token;        /* NULL: none configured */
    char *session;      /* the server-side session every connection joins (pool_lock) */
    atomic_int held;    /* models, data handles and segments on the server */
    pthread_mutex_t reopen_lock; /* one thread at a time replaces a forgotten session */
    uint64_t max_inline;
    int shm;            /* the server maps our memfd segments */
    int copy_threads;   /* threads for the one-copy path */
    pthread_mutex_t pool_lock;
    int idle[POOL_MAX];
    int n_idle;
    atomic_uint_fast64_t next_req;
    gsb__rarena *arena;
    /* how arrays left (gsb__remote_get_stats) */
    atomic_uint_fast64_t st_zero, st_copy, st_chunked, st_copy_bytes, st_chunk_bytes;
};

/* ---- small helpers ------------------------------------------------------- */

/* A remote session's own state (gsb_session.impl). */
static gsb__remote *RS(const gsb_session *s) { return s->impl; }
static gsb__remote *R(const gsb__model *m) { return RS(m->session); }

/* gsb__err formats into the thread's message buffer, so a message built from
 * the current one must copy it first. */
static void errcopy(char buf[ERRCOPY]) { snprintf(buf, ERRCOPY, "%s", gsb_errmsg()); }

static uint64_t next_id(gsb__remote *r) { return atomic_fetch_add(&r->next_req, 1); }

static int protocol_error(const gsb__remote *r, const char *what)
{
    return gsb__err(GSB_EIO, "gsbd at %s sent a malformed answer (%s); is the server the same "
                    "version as this client (%s)?", r->url, what, CLIENT_NAME);
}

static int lost(const gsb__remote *r, const char *op)
{
    char why[ERRCOPY];
    errcopy(why);
    return gsb__err(GSB_EIO, "lost the connection to gsbd at %s during %s: %s — did the server "
                    "stop? (check it with `gsb health %s`)", r->url, op, why, r->url);
}

/* ---- tokens and URLs ----------------------------------------------------- */

static int read_token(const char *path, char **out)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return gsb__err(GSB_EIO, "cannot read the token file %s: %s", path, strerror(errno));
    char buf[4096];
    errno = 0;
    int ok = fgets(buf, sizeof buf, f) != NULL;
    int e = ferror(f) ? errno : 0;
    fclose(f);
    if (!ok && e)
        return gsb__err(GSB_EIO, "cannot read the token file %s: %s", path, strerror(e));
    if (!ok)
        return gsb__err(GSB_EIO, "the token file %s is empty", path);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    if (!n)
        return gsb__err(GSB_EIO, "the token file %s has an empty first line", path);
    *out = strdup(buf);
    return *out ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}

/* url = base[?token_file=PATH]; the token from it, $GSB_TOKEN or $GSB_TOKEN_FILE */
static int parse_url(gsb__remote *r, const char *url)
{
    const char *q = strchr(url, '?');
    r->url = strndup(url, q ? (size_t)(q - url) : strlen(url));
    if (!r->url)
        return gsb__err(GSB_ENOMEM, "out of memory");
    char *token_file = NULL;
    int rc = GSB_OK;
    while (q && *q && rc == GSB_OK) {
        q++; /* past '?' or '&' */
        size_t len = strcspn(q, "&");
        if (len >= 11 && strncmp(q, "token_file=", 11) == 0) {
            free(token_file);
            if (len == 11) {
                token_file = NULL;
                rc = gsb__err(GSB_EINVAL, "empty token_file= in the session URL %s", r->url);
                break;
            }
            token_file = strndup(q + 11, len - 11);
            if (!token_file)
                rc = gsb__err(GSB_ENOMEM, "out of memory");
        } else if (len > 11 && strncmp(q, "max_inline=", 11) == 0) {
            /* arrays above this many bytes stream as CHUNK frames (the
             * server's WELCOME sets the upper bound) */
            char num[32];
            size_t nl = len - 11 < sizeof num - 1 ? len - 11 : sizeof num - 1;
            memcpy(num, q + 11, nl);
            num[nl] = '\0';
            char *end;
            errno = 0;
            unsigned long long v = strtoull(num, &end, 10);
            if (errno || *end || nl != len - 11 || v == 0)
                rc = gsb__err(GSB_EINVAL, "max_inline in the session URL %s must be a positive "
                              "number of bytes", r->url);
            else
                r->max_inline = v; /* the WELCOME's bound caps it later */
        } else if (len > 0) {
            rc = gsb__err(GSB_EINVAL, "unknown option '%.*s' in the session URL %s: a tcp:// or "
                          "unix:// URL takes ?token_file=PATH (and max_inline=BYTES)", (int)len,
                          q, r->url);
        }
        q += len;
    }
    if (rc == GSB_OK) {
        const char *env = getenv("GSB_TOKEN"), *envf = getenv("GSB_TOKEN_FILE");
        if (token_file)
            rc = read_token(token_file, &r->token);
        else if (env && *env)
            rc = (r->token = strdup(env)) ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
        else if (envf && *envf)
            rc = read_token(envf, &r->token);
    }
    free(token_file);
    return rc;
}

/* ---- connections --------------------------------------------------------- */

static int json_has_string(const json_t *list, const char *s)
{
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *v = json_string_value(json_array_get(list, i));
        if (v && strcmp(v, s) == 0)
            return 1;
    }
    return 0;
}

/*
 * Open a connection and say HELLO (joining session join, or a new server-side
 * session when join is NULL); *welcome (if asked) gets the WELCOME head.
 */
static int connect_new(gsb__remote *r, const char *join, int *out_fd, json_t **welcome)
{
    *out_fd = -1;
    int fd;
    if (gsb__sock_connect(r->url, &fd) != GSB_OK) {
        /* the socket layer says "cannot connect to URL: why": keep the why */
        char why[ERRCOPY];
        errcopy(why);
        const char *p = strstr(why, r->url);
        p = p ? p + strlen(r->url) : why;
        if (strncmp(p, ": ", 2) == 0)
            p += 2;
        if (strstr(p, "resolve"))
            return gsb__err(GSB_EIO, "cannot reach gsbd at %s: %s — check the host name",
                            r->url, p);
        return gsb__err(GSB_EIO, "cannot reach gsbd at %s: %s — start it with `gsb serve` "
                        "(or check the URL)", r->url, p);
    }
    json_t *head = json_pack("{s:[i,i], s:s, s:[s,s,s]}", "versions", 1, 1, "client",
                             CLIENT_NAME, "features", "chunks", "progress", "shm");
    int rc = head ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
    if (rc == GSB_OK && r->token)
        rc = json_object_set_new(head, "token", json_string(r->token)) == 0
                 ? GSB_OK
                 : gsb__err(GSB_ENOMEM, "out of memory");
    if (rc == GSB_OK && join)
        rc = json_object_set_new(head, "join", json_string(join)) == 0
                 ? GSB_OK
                 : gsb__err(GSB_ENOMEM, "out of memory");
    if (rc == GSB_OK && gsb__wire_send(fd, GSB__F_HELLO, next_id(r), head, NULL, NULL, -1) != 0)
        rc = lost(r, "the handshake");
    json_decref(head);
    gsb__frame f;
    memset(&f, 0, sizeof f);
    f.fd = -1;
    if (rc == GSB_OK) {
        rc = gsb__wire_recv(fd, &f, GSB__WIRE_MAX_INLINE, HELLO_TIMEOUT_MS);
        if (rc == GSB_ECANCELLED)
            rc = gsb__err(GSB_EIO, "no answer from %s within %d s: is the program listening "
                          "there gsbd?", r->url, HELLO_TIMEOUT_MS / 1000);
        else if (rc != GSB_OK)
            rc = lost(r, "the handshake");
    }
    if (rc == GSB_OK && f.hdr.type == GSB__F_ERROR) {
        json_t *code = json_object_get(f.head, "code");
        const char *msg = json_string_value(json_object_get(f.head, "message"));
        int c = json_is_integer(code) ? (int)json_integer_value(code) : GSB_EIO;
        if (c <= GSB_OK || c > GSB_EINTERNAL)
            c = GSB_EIO;
        if (join && c == GSB_ENOTFOUND)
            /* the server forgot our session: it was restarted, or every
             * connection of the session dropped (conn_get may open a new one) */
            rc = gsb__err(GSB_ENOTFOUND, "gsbd at %s no longer has this session (%s); was it "
                          "restarted? open the session again", r->url, msg ? msg : "unknown");
        else if (c == GSB_EIO) /* a connection limit: a ConnectionError in Python */
            rc = gsb__err(c, "gsbd at %s refused the connection: %s", r->url,
                          msg ? msg : "no reason given");
        else
            rc = gsb__err(c, "%s", msg ? msg : "gsbd refused the connection");
    } else if (rc == GSB_OK && f.hdr.type != GSB__F_WELCOME) {
        rc = protocol_error(r, "no WELCOME after HELLO");
    } else if (rc == GSB_OK) {
        json_t *v = json_object_get(f.head, "version");
        if (!json_is_integer(v) || json_integer_value(v) != GSB__WIRE_VERSION)
            rc = gsb__err(GSB_EUNSUPPORTED, "gsbd at %s speaks protocol version %lld; this "
                          "client speaks %d", r->url,
                          json_is_integer(v) ? (long long)json_integer_value(v) : -1LL,
                          GSB__WIRE_VERSION);
        else if (!json_is_string(json_object_get(f.head, "session")))
            rc = protocol_error(r, "WELCOME without a session");
    }
    if (rc == GSB_OK && welcome)
        *welcome = json_incref(f.head);
    gsb__frame_clear(&f);
    if (rc != GSB_OK) {
        gsb__sock_close(fd);
        return rc;
    }
    *out_fd = fd;
    return GSB_OK;
}

/* An idle connection is healthy when nothing is waiting to be read on it:
 * no EOF (the server closed it) and no stray bytes. */
static int idle_healthy(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return gsb__poll(&p, 1, 0) == 0;
}

/* The server-side session's id now (it changes when a forgotten one is replaced). */
static void session_id(gsb__remote *r, char *buf, size_t n)
{
    pthread_mutex_lock(&r->pool_lock);
    snprintf(buf, n, "%s", r->session);
    pthread_mutex_unlock(&r->pool_lock);
}

/*
 * A connection joined to the server-side session `was`, which the server no
 * longer knows.  Holding nothing there, this client loses nothing: a new
 * session replaces it (once, whichever thread comes first); else the loss is
 * reported (GSB_EIO).
 */
static int reopen(gsb__remote *r, const char *was, int *fd)
{
    char why[ERRCOPY];
    errcopy(why);
    if (atomic_load(&r->held) > 0)
        return gsb__err(GSB_EIO, "%s", why);
    pthread_mutex_lock(&r->reopen_lock);
    char now[128];
    session_id(r, now, sizeof now);
    json_t *welcome = NULL;
    int rc;
    if (strcmp(now, was) != 0) { /* another thread replaced it meanwhile */
        rc = connect_new(r, now, fd, NULL);
    } else {
        rc = connect_new(r, NULL, fd, &welcome);
        char *id = rc == GSB_OK ? strdup(json_string_value(json_object_get(welcome, "session")))
                                : NULL;
        if (rc == GSB_OK && !id) {
            gsb__sock_close(*fd);
            *fd = -1;
            rc = gsb__err(GSB_ENOMEM, "out of memory");
        }
        if (id) {
            pthread_mutex_lock(&r->pool_lock);
            free(r->session);
            r->session = id;
            pthread_mutex_unlock(&r->pool_lock);
        }
    }
    json_decref(welcome);
    pthread_mutex_unlock(&r->reopen_lock);
    if (rc == GSB_ENOTFOUND)
        rc = gsb__err(GSB_EIO, "%s", gsb_errmsg());
    return rc;
}

static int conn_get(gsb__remote *r, int *fd)
{
    for (;;) {
        pthread_mutex_lock(&r->pool_lock);
        int c = r->n_idle ? r->idle[--r->n_idle] : -1;
        pthread_mutex_unlock(&r->pool_lock);
        if (c < 0)
            break;
        if (idle_healthy(c)) {
            *fd = c;
            return GSB_OK;
        }
        gsb__sock_close(c);
    }
    char join[128];
    session_id(r, join, sizeof join);
    int rc = connect_new(r, join, fd, NULL);
    return rc == GSB_ENOTFOUND ? reopen(r, join, fd) : rc;
}

static void conn_put(gsb__remote *r, int fd, int healthy)
{
    if (fd < 0)
        return;
    if (healthy) {
        pthread_mutex_lock(&r->pool_lock);
        if (r->n_idle < POOL_MAX) {
            r->idle[r->n_idle++] = fd;
            fd = -1;
        }
        pthread_mutex_unlock(&r->pool_lock);
    }
    if (fd >= 0)
        gsb__sock_close(fd);
}

/* ---- one request ----------------------------------------------------------- */

typedef struct rpc {
    gsb__remote *r;
    const char *op;
    int fd;                  /* checked out; -1 once given back */
    uint64_t req_id;
    gsb__frame reply;        /* the REPLY */
    int chunks_pending;      /* reply arrays still to read from fd */
    int fitted_seen;         /* the answer (REPLY or ERROR) carried "fitted" */
    void *scratch[MAX_SCRATCH]; /* arena blocks holding copies of inputs */
    int n_scratch;
    gsb__tensor dev_copies[GSB__MAX_DEV_COPIES]; /* host copies of device inputs */
    int n_dev_copies;
} rpc;

static void rpc_init(rpc *c, gsb__remote *r, const char *op)
{
    memset(c, 0, sizeof *c);
    c->r = r;
    c->op = op;
    c->fd = -1;
    c->reply.fd = -1;
}

/* Release everything the request held; the connection goes back to the
 * pool only when its stream is at a frame boundary. */
static void rpc_end(rpc *c, int healthy)
{
    for (int i = 0; i < c->n_scratch; i++)
        gsb__rarena_free(c->r->arena, c->scratch[i]);
    c->n_scratch = 0;
    for (int i = 0; i < c->n_dev_copies; i++)
        gsb__tensor_free(&c->dev_copies[i]);
    c->n_dev_copies = 0;
    gsb__frame_clear(&c->reply);
    conn_put(c->r, c->fd, healthy && !c->chunks_pending);
    c->fd = -1;
}

static int reply_has_chunks(const json_t *head)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(head, "arrays"), i, a)
    {
        const char *at = json_string_value(json_object_get(a, "at"));
        if (at && strcmp(at, "chunks") == 0)
            return 1;
    }
    return 0;
}

static void take_fitted(rpc *c, gsb__model *m, const json_t *head)
{
    const json_t *f = json_object_get(head, "fitted");
    if (m && json_is_boolean(f)) {
        m->fitted = json_is_true(f);
        c->fitted_seen = 1;
    }
}

/*
 * Wait for the answer to c's request; "fitted" in it updates m (if given).
 * A model.call (call != 0) waits in slices so that m->cancel (set by
 * gsb_model_cancel from another thread) sends CANCEL, and PROGRESS frames
 * go to m's callback, whose nonzero answer sends CANCEL too.  After a
 * CANCEL the callback is not called again, as a local call would have
 * stopped there.
 */
static int rpc_wait(rpc *c, gsb__model *m, int call)
{
    gsb__remote *r = c->r;
    if (!m)
        call = 0;
    gsb_progress_fn fn = call ? m->progress : NULL;
    void *fn_data = call ? m->progress_data : NULL;
    int cancel_sent = 0;
    for (;;) {
        gsb__frame f;
        memset(&f, 0, sizeof f);
        f.fd = -1;
        int rc = gsb__wire_recv(c->fd, &f, GSB__WIRE_MAX_INLINE, call ? POLL_MS : -1);
        if (rc == GSB_ECANCELLED && call) {
            if (!cancel_sent && atomic_load(&m->cancel)) {
                if (gsb__wire_send_empty(c->fd, GSB__F_CANCEL, c->req_id) != GSB_OK) {
                    rc = lost(r, c->op);
                    rpc_end(c, 0);
                    return rc;
                }
                cancel_sent = 1;
            }
            continue;
        }
        if (rc != GSB_OK) {
            rc = lost(r, c->op);
            rpc_end(c, 0);
            return rc;
        }
        if (f.hdr.req_id != c->req_id || f.fd >= 0 ||
            (f.hdr.type != GSB__F_REPLY && f.hdr.type != GSB__F_ERROR &&
             f.hdr.type != GSB__F_PROGRESS)) {
            gsb__frame_clear(&f);
            rc = protocol_error(r, "a frame that does not answer the request");
            rpc_end(c, 0);
            return rc;
        }
        if (f.hdr.type == GSB__F_PROGRESS) {
            if (call && !cancel_sent) {
                const char *stage = json_string_value(json_object_get(f.head, "stage"));
                json_t *it = json_object_get(f.head, "iteration"), *loss;
                loss = json_object_get(f.head, "loss"); /* null: not finite */
                int stop = atomic_load(&m->cancel);
                if (!stop && fn)
                    stop = fn(fn_data, stage ? stage : "iteration",
                              json_is_integer(it) ? (int64_t)json_integer_value(it) : 0,
                              json_is_number(loss) ? json_number_value(loss) : NAN);
                if (stop) {
                    if (gsb__wire_send_empty(c->fd, GSB__F_CANCEL, c->req_id) != GSB_OK) {
                        gsb__frame_clear(&f);
                        rc = lost(r, c->op);
                        rpc_end(c, 0);
                        return rc;
                    }
                    cancel_sent = 1;
                }
            }
            gsb__frame_clear(&f);
            continue;
        }
        if (!f.head) {
            gsb__frame_clear(&f);
            rc = protocol_error(r, "an answer without a head");
            rpc_end(c, 0);
            return rc;
        }
        take_fitted(c, m, f.head);
        if (f.hdr.type == GSB__F_ERROR) {
            json_t *code = json_object_get(f.head, "code");
            const char *msg = json_string_value(json_object_get(f.head, "message"));
            int st = json_is_integer(code) ? (int)json_integer_value(code) : -1;
            if (st <= GSB_OK || st > GSB_EINTERNAL || !msg) {
                gsb__frame_clear(&f);
                rc = protocol_error(r, "an ERROR without a valid code and message");
                rpc_end(c, 0);
                return rc;
            }
            rc = gsb__err(st, "%s", msg);
            gsb__frame_clear(&f);
            rpc_end(c, 1);
            return rc;
        }
        c->reply = f;
        c->chunks_pending = reply_has_chunks(f.head);
        return GSB_OK;
    }
}

/*
 * Send one REQUEST (head is consumed; msg's arrays are stored under key) and
 * wait for its answer.  On GSB_OK the reply is in c and the connection still
 * checked out: read what you need, then rpc_end(c, 1).  On failure
 * everything is released already.
 */
static int rpc_run(rpc *c, json_t *head, const char *key, const gsb__outmsg *msg, int pass_fd,
                   gsb__model *m, int call)
{
    if (!head) {
        rpc_end(c, 1);
        return gsb__err(GSB_ENOMEM, "out of memory");
    }
    int rc = conn_get(c->r, &c->fd);
    if (rc != GSB_OK) {
        json_decref(head);
        rpc_end(c, 0);
        return rc;
    }
    c->req_id = next_id(c->r);
    rc = gsb__wire_send(c->fd, GSB__F_REQUEST, c->req_id, head, key, msg, pass_fd);
    json_decref(head);
    if (rc != GSB_OK) {
        /* a request the wire layer refused before writing (too large a
         * head) leaves the stream clean, but telling the cases apart is not
         * worth it: a fresh connection is cheap */
        rc = rc == GSB_EIO ? lost(c->r, c->op) : rc;
        rpc_end(c, 0);
        return rc;
    }
    return rpc_wait(c, m, call);
}

/* A request with a head only, answered by a head only. */
static int rpc_simple(gsb__remote *r, const char *op, json_t *head, gsb__model *m)
{
    rpc c;
    rpc_init(&c, r, op);
    GSB_TRY(rpc_run(&c, head, NULL, NULL, -1, m, 0));
    rpc_end(&c, 1);
    return GSB_OK;
}

/* ---- arrays in requests ---------------------------------------------------- */

/* Contiguous bytes in C or Fortran order?  Sets nbytes (0 when not). */
static int contiguous(const gsb_array *a, size_t isz, int *fortran, size_t *nbytes)
{
    *fortran = 0;
    *nbytes = 0;
    if (a->ndim < 0 || a->ndim > 2)
        return 0;
    int64_t rows = a->ndim >= 1 ? a->shape[0] : 1, cols = a->ndim == 2 ? a->shape[1] : 1;
    if (rows < 0 || cols < 0 || (rows && cols > (INT64_MAX / (int64_t)isz) / rows))
        return 0;
    *nbytes = (size_t)(rows * cols) * isz;
    int64_t s0 = a->strides[0], s1 = a->strides[1], is = (int64_t)isz;
    if (a->ndim == 0)
        return 1;
    if (a->ndim == 1)
        return s0 == 0 || s0 == is || rows <= 1;
    if (s0 == 0 && s1 == 0)
        return 1;
    if ((s1 == is || cols <= 1) && (s0 == cols * is || rows <= 1))
        return 1;
    if ((s0 == is || rows <= 1) && (s1 == rows * is || cols <= 1)) {
        *fortran = 1;
        return 1;
    }
    return 0;
}

typedef struct copy_part {
    char *dst;
    const char *src;
    size_t n;
} copy_part;

static void *copy_main(void *p)
{
    copy_part *cp = p;
    memcpy(cp->dst, cp->src, cp->n);
    return NULL;
}

/* memcpy by up to `threads` threads, each moving at least COPY_PART_MIN:
 * one core cannot saturate memory bandwidth. */
static void parallel_copy(int threads, void *dst, const void *src, size_t n)
{
    size_t parts = n / COPY_PART_MIN;
    if (parts > (size_t)threads)
        parts = (size_t)threads;
    if (parts <= 1) {
        memcpy(dst, src, n);
        return;
    }
    size_t each = (n / parts + 63) / 64 * 64;
    pthread_t th[COPY_THREADS_MAX];
    copy_part cp[COPY_THREADS_MAX];
    int started[COPY_THREADS_MAX] = {0};
    for (size_t i = 0; i < parts; i++) {
        size_t off = i * each < n ? i * each : n;
        size_t end = off + each < n && i + 1 < parts ? off + each : n;
        cp[i] = (copy_part){(char *)dst + off, (const char *)src + off, end - off};
    }
    for (size_t i = 1; i < parts; i++)
        started[i] = pthread_create(&th[i], NULL, copy_main, &cp[i]) == 0;
    copy_main(&cp[0]);
    for (size_t i = 1; i < parts; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            copy_main(&cp[i]); /* no thread to be had: do it here */
    }
}

static void describe(gsb__wire_array *w, gsb__at at, const gsb_array *a)
{
    memset(w, 0, sizeof *w);
    w->at = at;
    w->dtype = a->dtype;
    w->ndim = a->ndim;
    w->shape[0] = a->ndim >= 1 ? a->shape[0] : 0;
    w->shape[1] = a->ndim == 2 ? a->shape[1] : 0;
}

static int add_input(rpc *c, gsb_session *s, gsb__outmsg *msg, const gsb_array *a);

/* A device array goes as its host copy, kept until the request ends. */
static int add_device_input(rpc *c, gsb_session *s, gsb__outmsg *msg, const gsb_array *a)
{
    if (c->n_dev_copies >= GSB__MAX_DEV_COPIES)
        return gsb__err(GSB_EINVAL, "too many device arrays in one request");
    gsb__tensor *t = &c->dev_copies[c->n_dev_copies];
    GSB_TRY(gsb__device_to_host(a, t));
    c->n_dev_copies++;
    const gsb_device_array *d = a->data;
    gsb_array h = d->array;
    h.data = t->data;
    h.strides[0] = h.strides[1] = 0; /* the copy is contiguous C order */
    return add_input(c, s, msg, &h);
}

/* Add one input to msg by the cheapest route (see the top of the file). */
static int add_input(rpc *c, gsb_session *s, gsb__outmsg *msg, const gsb_array *a)
{
    gsb__remote *r = c->r;
    if (!a || (!a->data && a->ndim == 0))
        return gsb__outmsg_add(msg, NULL);
    if (gsb__is_device_ref(a))
        return add_device_input(c, s, msg, a);
    gsb__wire_array w;
    if (gsb__is_data_ref(a)) {
        struct gsb_data *d;
        GSB_TRY(gsb__data_resolve(s, a, &d));
        describe(&w, GSB__AT_DATA, &d->view);
        w.handle = d->impl_id;
        return gsb__outmsg_add_placed(msg, &w);
    }
    size_t isz = gsb_dtype_size(a->dtype), nbytes;
    int fortran;
    if (r->shm && a->data && isz && contiguous(a, isz, &fortran, &nbytes) && nbytes > 0) {
        describe(&w, GSB__AT_SHM, a);
        w.fortran = fortran;
        w.nbytes = nbytes;
        /* already in the arena: zero copies */
        if (gsb__rarena_locate(r->arena, a->data, nbytes, &w.segment, &w.offset) &&
            w.offset % GSB__WIRE_ALIGN == 0) {
            atomic_fetch_add(&r->st_zero, 1);
            return gsb__outmsg_add_placed(msg, &w);
        }
        /* large: one copy into shared memory beats pushing it through the socket */
        void *p;
        if (nbytes >= SHM_COPY_MIN && c->n_scratch < MAX_SCRATCH) {
            if (gsb__rarena_alloc(r->arena, nbytes, &p) == GSB_OK) {
                c->scratch[c->n_scratch++] = p;
                parallel_copy(r->copy_threads, p, a->data, nbytes);
                if (gsb__rarena_locate(r->arena, p, nbytes, &w.segment, &w.offset)) {
                    atomic_fetch_add(&r->st_copy, 1);
                    atomic_fetch_add(&r->st_copy_bytes, nbytes);
                    return gsb__outmsg_add_placed(msg, &w);
                }
            }
            gsb__err_clear(); /* no shared memory to be had: the socket works too */
        }
    }
    int n_chunk = msg->n_chunk;
    uint64_t chunk_len = msg->chunk_len;
    GSB_TRY(gsb__outmsg_add(msg, a));
    if (msg->n_chunk > n_chunk) {
        atomic_fetch_add(&r->st_chunked, 1);
        atomic_fetch_add(&r->st_chunk_bytes, msg->chunk_len - chunk_len);
    }
    return GSB_OK;
}

/* ---- arrays in replies ----------------------------------------------------- */

/* Fortran-ordered rows x cols (column j contiguous) into C order. */
static void f_to_c(void *dst, const void *src, int64_t rows, int64_t cols, size_t isz)
{
    char *d = dst;
    const char *s = src;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            memcpy(d + (size_t)(i * cols + j) * isz, s + (size_t)(j * rows + i) * isz, isz);
}

/*
 * Read the reply's arrays (descriptors in list, n of them) into dst[i]
 * (nbytes each): inline ones from the REPLY, chunked ones straight from the
 * socket.  Fortran-ordered 2-D arrays go through a temporary and land in C
 * order.
 */
static int fetch_arrays(rpc *c, const gsb__wire_array *wa, void *const *dst, int n)
{
    struct iovec *iov = calloc((size_t)(n ? n : 1), sizeof *iov);
    void **tmp = calloc((size_t)(n ? n : 1), sizeof *tmp);
    int rc = iov && tmp ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
    int n_iov = 0;
    for (int i = 0; i < n && rc == GSB_OK; i++) {
        void *into = dst[i];
        if (wa[i].fortran && wa[i].ndim == 2 && wa[i].nbytes) {
            tmp[i] = malloc(wa[i].nbytes);
            if (!tmp[i]) {
                rc = gsb__err(GSB_ENOMEM, "out of memory receiving a %llu-byte array",
                              (unsigned long long)wa[i].nbytes);
                break;
            }
            into = tmp[i];
        }
        if (wa[i].at == GSB__AT_INLINE) {
            const void *src;
            if (gsb__wire_inline_ptr(&c->reply, &wa[i], &src) != GSB_OK)
                rc = protocol_error(c->r, "an inline array outside the frame");
            else if (wa[i].nbytes)
                memcpy(into, src, wa[i].nbytes);
        } else if (wa[i].nbytes) {
            iov[n_iov].iov_base = into;
            iov[n_iov].iov_len = wa[i].nbytes;
            n_iov++;
        }
    }
    if (rc == GSB_OK && c->chunks_pending) {
        rc = gsb__wire_recv_chunks(c->fd, c->req_id, iov, n_iov);
        if (rc == GSB_OK)
            c->chunks_pending = 0;
        else
            rc = rc == GSB_EIO ? lost(c->r, c->op) : protocol_error(c->r, "bad result chunks");
    }
    for (int i = 0; i < n && rc == GSB_OK; i++)
        if (tmp[i])
            f_to_c(dst[i], tmp[i], wa[i].shape[0], wa[i].shape[1],
                   gsb__wire_itemsize(wa[i].dtype));
    for (int i = 0; tmp && i < n; i++)
        free(tmp[i]);
    free(tmp);
    free(iov);
    return rc;
}

/* Parse the reply's "arrays" list; only inline and chunks are valid here. */
static int parse_reply_arrays(rpc *c, gsb__wire_array **out, int *n)
{
    *out = NULL;
    *n = 0;
    const json_t *list = json_object_get(c->reply.head, "arrays");
    if (!json_is_array(list))
        return protocol_error(c->r, "no arrays in the reply");
    size_t k = json_array_size(list);
    gsb__wire_array *wa = calloc(k ? k : 1, sizeof *wa);
    if (!wa)
        return gsb__err(GSB_ENOMEM, "out of memory");
    for (size_t i = 0; i < k; i++) {
        if (gsb__wire_array_parse(json_array_get(list, i), &wa[i]) != GSB_OK ||
            (wa[i].at != GSB__AT_INLINE && wa[i].at != GSB__AT_CHUNKS)) {
            free(wa);
            return protocol_error(c->r, "an invalid result array");
        }
    }
    *out = wa;
    *n = (int)k;
    return GSB_OK;
}

/* The reply's named arrays as owned host tensors. */
static int reply_tensors(rpc *c, gsb__nlist *out)
{
    const json_t *names = json_object_get(c->reply.head, "names");
    gsb__wire_array *wa;
    int n;
    GSB_TRY(parse_reply_arrays(c, &wa, &n));
    if (!json_is_array(names) || json_array_size(names) != (size_t)n) {
        free(wa);
        return protocol_error(c->r, "result names do not match the arrays");
    }
    gsb__tensor *t = calloc((size_t)(n ? n : 1), sizeof *t);
    void **dst = calloc((size_t)(n ? n : 1), sizeof *dst);
    int rc = t && dst ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
    for (int i = 0; i < n && rc == GSB_OK; i++) {
        if (wa[i].dtype < GSB_F32 || wa[i].dtype > GSB_I64 ||
            !json_is_string(json_array_get(names, (size_t)i))) {
            rc = protocol_error(c->r, "a result array of an unknown dtype");
            break;
        }
        int64_t rows = wa[i].ndim >= 1 ? wa[i].shape[0] : 1;
        int64_t cols = wa[i].ndim == 2 ? wa[i].shape[1] : 1;
        rc = gsb__tensor_alloc(gsb__cpu_backend(), (gsb_dtype)wa[i].dtype, rows, cols, &t[i]);
        if (rc == GSB_OK) {
            t[i].ndim = wa[i].ndim;
            dst[i] = t[i].data;
        }
    }
    if (rc == GSB_OK)
        rc = fetch_arrays(c, wa, dst, n);
    for (int i = 0; i < n && rc == GSB_OK; i++)
        rc = gsb__nlist_put(out, json_string_value(json_array_get(names, (size_t)i)), &t[i]);
    for (int i = 0; t && i < n; i++) /* what the list did not take */
        gsb__tensor_free(&t[i]);
    free(dst);
    free(t);
    free(wa);
    if (rc != GSB_OK)
        gsb__nlist_clear(out);
    return rc;
}

/* The reply's only array, a uint8 blob, as malloc'd bytes. */
static int reply_blob(rpc *c, void **bytes, size_t *len)
{
    gsb__wire_array *wa;
    int n;
    GSB_TRY(parse_reply_arrays(c, &wa, &n));
    if (n != 1 || wa[0].dtype != GSB__WIRE_U8 || wa[0].ndim != 1) {
        free(wa);
        return protocol_error(c->r, "the reply is not one uint8 blob");
    }
    void *buf = malloc(wa[0].nbytes ? wa[0].nbytes : 1);
    int rc = buf ? fetch_arrays(c, wa, &buf, 1)
                 : gsb__err(GSB_ENOMEM, "cannot allocate %llu bytes for a model blob",
                            (unsigned long long)wa[0].nbytes);
    if (rc == GSB_OK) {
        *bytes = buf;
        *len = wa[0].nbytes;
    } else {
        free(buf);
    }
    free(wa);
    return rc;
}

/* ---- shared-memory segments (the arena's callbacks) ------------------------ */

static int attach_segment(void *ctx, uint64_t segment, int fd, size_t size)
{
    gsb__remote *r = ctx;
    rpc c;
    rpc_init(&c, r, "shm.attach");
    json_t *head = json_pack("{s:s, s:I, s:I}", "op", "shm.attach", "segment", (json_int_t)segment,
                             "size", (json_int_t)size);
    GSB_TRY(rpc_run(&c, head, NULL, NULL, fd, NULL, 0));
    rpc_end(&c, 1);
    atomic_fetch_add(&r->held, 1);
    return GSB_OK;
}

static void detach_segment(void *ctx, uint64_t segment)
{
    gsb__remote *r = ctx;
    atomic_fetch_sub(&r->held, 1);
    rpc_simple(r, "shm.detach",
               json_pack("{s:s, s:I}", "op", "shm.detach", "segment", (json_int_t)segment), NULL);
}

/* ---- sessions -------------------------------------------------------------- */

static void remote_free(gsb__remote *r)
{
    if (!r)
        return;
    gsb__rarena_destroy(r->arena);
    for (int i = 0; i < r->n_idle; i++)
        gsb__sock_close(r->idle[i]);
    pthread_mutex_destroy(&r->pool_lock);
    pthread_mutex_destroy(&r->reopen_lock);
    free(r->url);
    free(r->token);
    free(r->session);
    free(r);
}

/* the session's impl_free: keeps the caller's last error message (it runs
 * inside void API functions: gsb_close, gsb_model_free ...) */
static void remote_close(void *impl)
{
    char keep[ERRCOPY];
    errcopy(keep);
    remote_free(impl);
    gsb__err(GSB_OK, "%s", keep);
}

/* url is "tcp://..." or "unix://..." with optional "?token_file=PATH" (and
 * max_inline=BYTES).  Connects once (HELLO/WELCOME) so a bad URL or token
 * fails here. */
static int remote_open(gsb_session *s, const char *url)
{
    gsb__remote *r = calloc(1, sizeof *r);
    if (!r)
        return gsb__err(GSB_ENOMEM, "out of memory");
    if (pthread_mutex_init(&r->pool_lock, NULL) != 0) {
        free(r);
        return gsb__err(GSB_ENOMEM, "cannot create a lock");
    }
    if (pthread_mutex_init(&r->reopen_lock, NULL) != 0) {
        pthread_mutex_destroy(&r->pool_lock);
        free(r);
        return gsb__err(GSB_ENOMEM, "cannot create a lock");
    }
    atomic_init(&r->next_req, 1);
    r->max_inline = GSB__WIRE_INLINE_PREFERRED;
#ifdef _WIN32
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    long ncpu = (long)si.dwNumberOfProcessors;
#else
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    r->copy_threads = ncpu < 1 ? 1 : ncpu > COPY_THREADS_MAX ? COPY_THREADS_MAX : (int)ncpu;

    int rc = parse_url(r, url);
    gsb__sockaddr_url addr;
    if (rc == GSB_OK)
        rc = gsb__url_parse(r->url, &addr);
    json_t *welcome = NULL;
    int fd = -1;
    if (rc == GSB_OK) {
        r->is_unix = addr.is_unix;
        rc = connect_new(r, NULL, &fd, &welcome);
    }
    if (rc == GSB_OK) {
        r->session = strdup(json_string_value(json_object_get(welcome, "session")));
        json_t *mi = json_object_get(welcome, "max_inline");
        /* the server's limit caps ours (URL max_inline may lower it) */
        if (json_is_integer(mi) && json_integer_value(mi) > 0 &&
            (uint64_t)json_integer_value(mi) < r->max_inline)
            r->max_inline = (uint64_t)json_integer_value(mi);
        r->shm = r->is_unix && json_has_string(json_object_get(welcome, "features"), "shm");
        if (!r->session)
            rc = gsb__err(GSB_ENOMEM, "out of memory");
    }
    if (rc == GSB_OK) {
        r->idle[r->n_idle++] = fd;
        fd = -1;
        rc = gsb__rarena_create(r->shm, attach_segment, detach_segment, r, &r->arena);
    }
    json_decref(welcome);
    if (fd >= 0)
        gsb__sock_close(fd);
    if (rc != GSB_OK) {
        remote_free(r);
        return rc;
    }
    s->impl = r; /* results arrive as host tensors: s keeps its CPU backend */
    s->impl_free = remote_close;
    return GSB_OK;
}

static int remote_info(gsb_session *s, char **out_json)
{
    gsb__remote *r = RS(s);
    rpc c;
    rpc_init(&c, r, "info");
    GSB_TRY(rpc_run(&c, json_pack("{s:s}", "op", "info"), NULL, NULL, -1, NULL, 0));
    json_t *health = json_object_get(c.reply.head, "health");
    json_t *o = json_is_object(health) ? json_deep_copy(health) : json_object();
    int rc = o ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
    if (rc == GSB_OK &&
        (json_object_set_new(o, "transport", json_string(r->is_unix ? "unix" : "tcp")) ||
         json_object_set_new(o, "shm", json_boolean(r->shm)) ||
         json_object_set_new(o, "url", json_string(r->url))))
        rc = gsb__err(GSB_ENOMEM, "out of memory");
    if (rc == GSB_OK)
        rc = gsb__json_dump(o, out_json);
    json_decref(o);
    rpc_end(&c, 1);
    return rc;
}

/* ---- models ---------------------------------------------------------------- */

/* A local model for a server handle from a reply with model/estimator/fitted. */
static int model_from_reply(gsb_session *s, rpc *c, gsb__model **out)
{
    *out = NULL;
    json_t *h = json_object_get(c->reply.head, "model");
    const char *name = json_string_value(json_object_get(c->reply.head, "estimator"));
    if (!json_is_integer(h) || json_integer_value(h) < 1 || !name)
        return protocol_error(c->r, "no model handle in the reply");
    uint64_t id = (uint64_t)json_integer_value(h);
    const gsb__estimator_desc *est;
    int rc = gsb__find_estimator(name, &est);
    gsb__model *m = NULL;
    if (rc == GSB_OK)
        rc = gsb__model_new(s, est, &m);
    if (rc != GSB_OK) {
        /* this client cannot represent it: do not leave it on the server */
        char keep[ERRCOPY];
        errcopy(keep);
        rpc_end(c, 1);
        rpc_simple(c->r, "model.free",
                   json_pack("{s:s, s:I}", "op", "model.free", "model", (json_int_t)id), NULL);
        return gsb__err(rc, "%s", keep);
    }
    m->impl_id = id;
    atomic_fetch_add(&c->r->held, 1);
    take_fitted(c, m, c->reply.head);
    *out = m;
    return GSB_OK;
}

static int remote_model_create(gsb_session *s, const gsb__estimator_desc *est,
                               const char *params_json, gsb__model **out)
{
    json_t *params;
    GSB_TRY(gsb__json_parse_object(params_json, &params));
    gsb__model *m;
    int rc = gsb__model_new(s, est, &m);
    if (rc != GSB_OK) {
        json_decref(params);
        return rc;
    }
    rpc c;
    rpc_init(&c, RS(s), "model.create");
    rc = rpc_run(&c, json_pack("{s:s, s:s, s:o}", "op", "model.create", "estimator", est->name,
                               "params", params),
                 NULL, NULL, -1, m, 0);
    if (rc == GSB_OK) {
        json_t *h = json_object_get(c.reply.head, "model");
        if (json_is_integer(h) && json_integer_value(h) >= 1) {
            m->impl_id = (uint64_t)json_integer_value(h);
            atomic_fetch_add(&RS(s)->held, 1);
        } else {
            rc = protocol_error(RS(s), "no model handle in the reply");
        }
        rpc_end(&c, 1);
    }
    if (rc != GSB_OK) {
        gsb__model_destroy(m); /* impl_id 0: nothing on the server to free */
        return rc;
    }
    *out = m;
    return GSB_OK;
}

static void remote_model_release(gsb__model *m)
{
    if (!m->impl_id)
        return;
    char keep[ERRCOPY];
    errcopy(keep);
    /* best effort: when the connection is gone, so is the server's model */
    atomic_fetch_sub(&R(m)->held, 1);
    rpc_simple(R(m), "model.free",
               json_pack("{s:s, s:I}", "op", "model.free", "model", (json_int_t)m->impl_id),
               NULL);
    m->impl_id = 0;
    gsb__err(GSB_OK, "%s", keep);
}

/* A model request answered by one JSON value under key, dumped to *out
 * (or ignored when out is NULL); head is consumed. */
static int model_json(gsb__model *m, const char *op, json_t *head, const char *key, char **out)
{
    if (out)
        *out = NULL;
    rpc c;
    rpc_init(&c, R(m), op);
    pthread_mutex_lock(&m->lock);
    int rc = rpc_run(&c, head, NULL, NULL, -1, m, 0);
    if (rc == GSB_OK) {
        if (out) {
            json_t *v = json_object_get(c.reply.head, key);
            rc = v ? gsb__json_dump(v, out) : protocol_error(R(m), key);
        }
        rpc_end(&c, 1);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static json_t *model_head(const gsb__model *m, const char *op)
{
    return json_pack("{s:s, s:I}", "op", op, "model", (json_int_t)m->impl_id);
}

static int model_head_with(const gsb__model *m, const char *op, const char *key,
                           const char *json_text, json_t **out)
{
    json_t *v;
    GSB_TRY(gsb__json_parse_object(json_text, &v));
    *out = model_head(m, op);
    if (!*out || json_object_set_new(*out, key, v) != 0) {
        json_decref(*out);
        *out = NULL;
        return gsb__err(GSB_ENOMEM, "out of memory");
    }
    return GSB_OK;
}

static int remote_set_params(gsb__model *m, const char *params_json)
{
    json_t *head;
    GSB_TRY(model_head_with(m, "model.set_params", "params", params_json, &head));
    return model_json(m, "model.set_params", head, "params", NULL);
}

static int remote_get_params(gsb__model *m, char **out_json)
{
    return model_json(m, "model.get_params", model_head(m, "model.get_params"), "params",
                      out_json);
}

static int remote_set_meta(gsb__model *m, const char *json_object)
{
    json_t *head;
    GSB_TRY(model_head_with(m, "model.set_meta", "meta", json_object, &head));
    return model_json(m, "model.set_meta", head, "meta", NULL);
}

static int remote_get_meta(gsb__model *m, char **out_json)
{
    return model_json(m, "model.get_meta", model_head(m, "model.get_meta"), "meta", out_json);
}

static int remote_list_attrs(gsb__model *m, char **out_json)
{
    return model_json(m, "model.list_attrs", model_head(m, "model.list_attrs"), "attrs",
                      out_json);
}

/* The server's warnings of a call ("warnings" in the reply head) become this
 * thread's, as if the engine had run here; malformed entries are skipped. */
static void take_warnings(const json_t *head)
{
    size_t i;
    const json_t *w;
    json_array_foreach(json_object_get(head, "warnings"), i, w) {
        const char *cat = json_string_value(json_object_get(w, "category"));
        const char *msg = json_string_value(json_object_get(w, "message"));
        if (cat && msg)
            gsb__warn(cat, "%s", msg);
    }
}

/* Could `method` change the fitted state?  Then a failure may have unfitted it. */
static int may_fit(const gsb__model *m, const char *method)
{
    const gsb__method_desc *md = gsb__method_find(m->est, method);
    if (md)
        return md->is_fit == 1;
    /* an estimator known by name only (the client-only build): the usual names */
    return strcmp(method, "fit") == 0 || strcmp(method, "partial_fit") == 0 ||
           strcmp(method, "fit_transform") == 0 || strcmp(method, "fit_predict") == 0;
}

static int remote_call(gsb__model *m, const char *method, const gsb_array *const *inputs,
                       int n_inputs, const char *options_json, gsb_result **out)
{
    gsb__remote *r = R(m);
    json_t *options;
    GSB_TRY(gsb__json_parse_object(options_json, &options));
    rpc c;
    rpc_init(&c, r, "model.call");
    gsb__outmsg msg;
    gsb__outmsg_init(&msg, r->max_inline);
    gsb__nlist results = {0};
    pthread_mutex_lock(&m->lock);
    /* as the local engine: a cancel asked before this call does not stop it */
    atomic_store(&m->cancel, 0);
    int rc = GSB_OK;
    for (int i = 0; i < n_inputs && rc == GSB_OK; i++)
        rc = add_input(&c, m->session, &msg, inputs[i]);
    if (rc == GSB_OK) {
        int progress = m->progress != NULL;
        json_t *head = json_pack("{s:s, s:I, s:s, s:O, s:b}", "op", "model.call", "model",
                                 (json_int_t)m->impl_id, "method", method, "options", options,
                                 "progress", progress);
        rc = rpc_run(&c, head, "inputs", &msg, -1, m, 1);
        if (rc == GSB_OK) {
            rc = reply_tensors(&c, &results);
            if (rc == GSB_OK)
                take_warnings(c.reply.head);
            rpc_end(&c, rc == GSB_OK);
        } else if (rc != GSB_EIO && !c.fitted_seen && may_fit(m, method)) {
            /* the ERROR did not say whether the failed fit unfitted the
             * model: ask, keeping the call's own error */
            char keep[ERRCOPY];
            errcopy(keep);
            rpc_simple(r, "model.list_attrs", model_head(m, "model.list_attrs"), m);
            gsb__err(rc, "%s", keep);
        }
    } else {
        rpc_end(&c, 1); /* frees scratch copies made before the failure */
    }
    pthread_mutex_unlock(&m->lock);
    gsb__outmsg_clear(&msg);
    json_decref(options);
    if (rc != GSB_OK || !out) {
        gsb__nlist_clear(&results);
        return rc;
    }
    return gsb__result_from(&results, out);
}

static int remote_get_attr(gsb__model *m, const char *name, gsb_result **out)
{
    *out = NULL;
    rpc c;
    rpc_init(&c, R(m), "model.get_attr");
    gsb__nlist one = {0};
    json_t *head = model_head(m, "model.get_attr");
    if (head && json_object_set_new(head, "name", json_string(name)) != 0) {
        json_decref(head);
        head = NULL;
    }
    pthread_mutex_lock(&m->lock);
    int rc = rpc_run(&c, head, NULL, NULL, -1, m, 0);
    if (rc == GSB_OK) {
        rc = reply_tensors(&c, &one);
        rpc_end(&c, rc == GSB_OK);
    }
    pthread_mutex_unlock(&m->lock);
    if (rc != GSB_OK)
        return rc;
    return gsb__result_from(&one, out);
}

static int remote_export(gsb__model *m, void **out_bytes, size_t *out_len)
{
    *out_bytes = NULL;
    *out_len = 0;
    rpc c;
    rpc_init(&c, R(m), "model.export");
    pthread_mutex_lock(&m->lock);
    int rc = rpc_run(&c, model_head(m, "model.export"), NULL, NULL, -1, m, 0);
    if (rc == GSB_OK) {
        rc = reply_blob(&c, out_bytes, out_len);
        rpc_end(&c, rc == GSB_OK);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int remote_import(gsb_session *s, const void *bytes, size_t len, gsb__model **out)
{
    *out = NULL;
    gsb__outmsg msg;
    gsb__outmsg_init(&msg, RS(s)->max_inline);
    int rc = gsb__outmsg_add_bytes(&msg, bytes, len);
    if (rc == GSB_OK && msg.n_chunk) {
        atomic_fetch_add(&RS(s)->st_chunked, 1);
        atomic_fetch_add(&RS(s)->st_chunk_bytes, msg.chunk_len);
    }
    rpc c;
    rpc_init(&c, RS(s), "model.import");
    if (rc == GSB_OK)
        rc = rpc_run(&c, json_pack("{s:s}", "op", "model.import"), "arrays", &msg, -1, NULL, 0);
    if (rc == GSB_OK) {
        rc = model_from_reply(s, &c, out);
        rpc_end(&c, 1);
    }
    gsb__outmsg_clear(&msg);
    return rc;
}

static int remote_save(gsb__model *m, const char *name)
{
    json_t *head = model_head(m, "store.save");
    if (head && json_object_set_new(head, "name", json_string(name)) != 0) {
        json_decref(head);
        head = NULL;
    }
    pthread_mutex_lock(&m->lock);
    int rc = rpc_simple(R(m), "store.save", head, m);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int remote_load(gsb_session *s, const char *name, gsb__model **out)
{
    *out = NULL;
    rpc c;
    rpc_init(&c, RS(s), "store.load");
    GSB_TRY(rpc_run(&c, json_pack("{s:s, s:s}", "op", "store.load", "name", name), NULL, NULL,
                    -1, NULL, 0));
    int rc = model_from_reply(s, &c, out);
    rpc_end(&c, 1);
    return rc;
}

static int remote_remove(gsb_session *s, const char *name)
{
    return rpc_simple(RS(s), "store.delete",
                      json_pack("{s:s, s:s}", "op", "store.delete", "name", name), NULL);
}

static int remote_list(gsb_session *s, char **out_json)
{
    *out_json = NULL;
    rpc c;
    rpc_init(&c, RS(s), "store.list");
    GSB_TRY(rpc_run(&c, json_pack("{s:s}", "op", "store.list"), NULL, NULL, -1, NULL, 0));
    json_t *v = json_object_get(c.reply.head, "models");
    int rc = json_is_array(v) ? gsb__json_dump(v, out_json) : protocol_error(RS(s), "no models list");
    rpc_end(&c, 1);
    return rc;
}

/* ---- data handles and the arena -------------------------------------------- */

static int remote_data_put(gsb_session *s, const gsb_array *a, struct gsb_data *d)
{
    gsb__remote *r = RS(s);
    rpc c;
    rpc_init(&c, r, "data.put");
    gsb__outmsg msg;
    gsb__outmsg_init(&msg, r->max_inline);
    int rc = add_input(&c, s, &msg, a);
    if (rc == GSB_OK) {
        rc = rpc_run(&c, json_pack("{s:s}", "op", "data.put"), "arrays", &msg, -1, NULL, 0);
        if (rc == GSB_OK) {
            json_t *h = json_object_get(c.reply.head, "data");
            if (json_is_integer(h) && json_integer_value(h) >= 1) {
                d->impl_id = (uint64_t)json_integer_value(h);
                atomic_fetch_add(&r->held, 1);
            } else {
                rc = protocol_error(r, "no data handle in the reply");
            }
            rpc_end(&c, 1);
        }
    } else {
        rpc_end(&c, 1);
    }
    gsb__outmsg_clear(&msg);
    return rc;
}

static void remote_data_release(gsb_session *s, struct gsb_data *d)
{
    if (!d->impl_id)
        return;
    char keep[ERRCOPY];
    errcopy(keep);
    atomic_fetch_sub(&RS(s)->held, 1);
    rpc_simple(RS(s), "data.free",
               json_pack("{s:s, s:I}", "op", "data.free", "data", (json_int_t)d->impl_id),
               NULL);
    d->impl_id = 0;
    gsb__err(GSB_OK, "%s", keep);
}

static int remote_arena_alloc(gsb_session *s, size_t nbytes, void **out)
{
    return gsb__rarena_alloc(RS(s)->arena, nbytes, out);
}

static int remote_arena_free(gsb_session *s, void *p)
{
    return gsb__rarena_free(RS(s)->arena, p) == 1;
}

const gsb__session_vtab gsb__remote_session = {
    .open = remote_open,
    .info = remote_info,
    .model_create = remote_model_create,
    .model_release = remote_model_release,
    .set_params = remote_set_params,
    .get_params = remote_get_params,
    .set_meta = remote_set_meta,
    .get_meta = remote_get_meta,
    .call = remote_call,
    .get_attr = remote_get_attr,
    .list_attrs = remote_list_attrs,
    .export_blob = remote_export,
    .import_blob = remote_import,
    .save = remote_save,
    .load = remote_load,
    .remove = remote_remove,
    .list = remote_list,
    .data_put = remote_data_put,
    .data_release = remote_data_release,
    .arena_alloc = remote_arena_alloc,
    .arena_free = remote_arena_free,
};

/* ---- for tests and benchmarks ---------------------------------------------- */

struct gsb__remote *gsb__remote_of(const gsb_session *s)
{
    return s && s->vt == &gsb__remote_session ? RS(s) : NULL;
}

void gsb__remote_get_stats(const struct gsb__remote *r, gsb__remote_stats *out)
{
    gsb__remote *rr = (gsb__remote *)r; /* atomics are read, not changed */
    out->shm_zero_copy = atomic_load(&rr->st_zero);
    out->shm_one_copy = atomic_load(&rr->st_copy);
    out->shm_one_copy_bytes = atomic_load(&rr->st_copy_bytes);
    out->chunked = atomic_load(&rr->st_chunked);
    out->chunked_bytes = atomic_load(&rr->st_chunk_bytes);
    out->max_inline = r->max_inline;
    out->shm = r->shm;
}

int gsb__remote_ping(struct gsb__remote *r)
{
    return rpc_simple(r, "ping", json_pack("{s:s}", "op", "ping"), NULL);
}
