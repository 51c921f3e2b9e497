/*
 * server.c - gsbd's lifecycle: listeners, the accept thread, connection
 * threads, and the public gsb_server_start / gsb_server_url /
 * gsb_server_stop / gsb_serve.
 *
 * Threads: one accept thread polls every listener plus a wake pipe; each
 * accepted connection gets its own thread (created per connection, never per
 * request) once admit.c gave it a slot; the refuser thread (refuse.c) answers
 * the ones turned away.  A finishing connection thread puts itself on the done list and
 * wakes the accept thread, which joins it and frees it, so every thread is
 * joined and nothing accumulates.  Every server thread blocks SIGINT, SIGTERM
 * and SIGPIPE: gsb_serve takes the first two with sigwait, and writes use
 * MSG_NOSIGNAL anyway.
 *
 * Stop: close the listeners (no new connections), write the stop pipe (every
 * connection waiting for its next request wakes and closes), and wait for the
 * connections still busy: each finishes its request, sends its reply, then
 * closes.  Sockets carry 30 s send/receive timeouts, so a client stalled in
 * the middle of a frame cannot hold the stop for long.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "server/server.h"

#define IO_TIMEOUT_S 30           /* a stalled peer mid-frame */
#define SOCK_BUF (8 << 20)        /* asked for; the kernel caps it */
#define TRIM_EVERY_S 1.0          /* heap trims after connections ended, at most this often */
#define FD_PAUSE_MS 100           /* out of file descriptors: accepting waits this long */

double gsb__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t gsb__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* mkdir -p with mode 0700 (the store and log are the user's private data) */
static int mkdir_p(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return gsb__err(GSB_ENOMEM, "out of memory");
    int rc = GSB_OK;
    for (char *q = p + 1;; q++) {
        if (*q != '/' && *q != '\0')
            continue;
        char ch = *q;
        *q = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            rc = gsb__err(GSB_EIO, "cannot create the data directory %s: %s", p, strerror(errno));
            break;
        }
        *q = ch;
        if (ch == '\0')
            break;
    }
    free(p);
    return rc;
}

static void block_signals(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

int gsb__spawn(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t old;
    block_signals(&old);
    int e = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return e;
}

static void wake_accept(gsb_server *srv)
{
    ssize_t k;
    do
        k = write(srv->wake[1], "w", 1);
    while (k < 0 && errno == EINTR);
    /* EAGAIN: the pipe is full of wake-ups already, which is as good */
}

void gsb__server_conn_done(gsb_server *srv, gsb__conn *c)
{
    pthread_mutex_lock(&srv->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = NULL;
    c->next = srv->done;
    srv->done = c;
    srv->n_conns--;
    gsb__admit_release(srv, c);
    atomic_fetch_sub(&srv->metrics.conns_open, 1);
    pthread_cond_broadcast(&srv->cond);
    wake_accept(srv);
    pthread_mutex_unlock(&srv->lock);
}

/* Join and free finished connection threads; now and then hand the heap
 * they freed back to the system (budget.c says why). */
static void reap(gsb_server *srv)
{
    pthread_mutex_lock(&srv->lock);
    gsb__conn *d = srv->done;
    srv->done = NULL;
    pthread_mutex_unlock(&srv->lock);
    while (d) {
        gsb__conn *next = d->next;
        pthread_join(d->thr, NULL);
        free(d);
        d = next;
        srv->reaped_since_trim++;
    }
    double now = gsb__now_s();
    if (srv->reaped_since_trim > 0 && now - srv->last_trim >= TRIM_EVERY_S) {
        gsb__heap_trim();
        srv->reaped_since_trim = 0;
        srv->last_trim = now;
    }
}

static void tune_socket(int fd, int is_unix)
{
    int one = 1, buf = SOCK_BUF;
    if (!is_unix) {
        /* buffers come from the listener (net/sock.c, set_tcp_buffers) */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    }
    struct timeval tv = {IO_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Turned away at a limit: the refuser tells the client why, or (when it is
 * full too) the connection is closed at once. */
static void refuse(gsb_server *srv, gsb__conn *c, int fd)
{
    char msg[600];
    pthread_mutex_lock(&srv->lock);
    gsb__limit_message(srv, c, 0, msg, sizeof msg);
    pthread_mutex_unlock(&srv->lock);
    atomic_fetch_add(&srv->metrics.conns_refused, 1);
    /* counted before the refuser may answer: whoever reads the answer then
     * finds it counted */
    atomic_fetch_add(&srv->metrics.refused_by[c->limit], 1);
    if (!gsb__refuser_add(srv->refuser, fd, msg)) {
        atomic_fetch_sub(&srv->metrics.refused_by[c->limit], 1);
        atomic_fetch_add(&srv->metrics.conns_dropped, 1);
        close(fd);
    }
    gsb__logf(&srv->log, GSB__LOG_WARN, "connection refused", "limit=%s peer=%s reserved=%d",
              c->limit == GSB__LIMIT_PEER ? "per_peer"
              : c->limit == GSB__LIMIT_CAP ? "max_connections" : "out_of_memory",
              gsb__log_q((char[80]){0}, 80, c->peer.key), srv->opt.reserved_connections);
}

/* Accept what listener li has waiting; 1 when the process ran out of file
 * descriptors (the caller stops accepting for a moment instead of spinning
 * on a listener that stays readable). */
static int accept_one(gsb_server *srv, int li)
{
    for (;;) {
        int fd = accept4(srv->lfd[li], NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            int out_of_fds = errno == EMFILE || errno == ENFILE;
            double now = gsb__now_s();
            if (errno != EAGAIN && errno != EWOULDBLOCK && now - srv->last_accept_warn > 10) {
                srv->last_accept_warn = now;
                gsb__logf(&srv->log, GSB__LOG_WARN, "accept failed", "listen=%s errno=%d%s",
                          srv->urls[li], errno,
                          out_of_fds ? " reason=\"out of file descriptors: raise ulimit -n or "
                                       "lower --max-connections\"" : "");
            }
            return out_of_fds;
        }
        atomic_fetch_add(&srv->metrics.conns_total, 1);
        gsb__conn *c = calloc(1, sizeof *c);
        if (!c) {
            atomic_fetch_add(&srv->metrics.conns_refused, 1);
            atomic_fetch_add(&srv->metrics.conns_dropped, 1);
            gsb__logf(&srv->log, GSB__LOG_WARN, "connection refused", "reason=out_of_memory");
            close(fd);
            continue;
        }
        c->srv = srv;
        c->fd = fd;
        c->is_unix = srv->l_unix[li];
        gsb__peer_identify(fd, c->is_unix, &c->peer);
        pthread_mutex_lock(&srv->lock);
        int verdict = gsb__admit(srv, c);
        pthread_mutex_unlock(&srv->lock);
        if (verdict == GSB__ADMIT_REFUSE) {
            refuse(srv, c, fd);
            free(c);
            continue;
        }
        tune_socket(fd, c->is_unix);
        pthread_mutex_lock(&srv->lock);
        c->id = ++srv->next_conn_id;
        c->next = srv->conns;
        if (srv->conns)
            srv->conns->prev = c;
        srv->conns = c;
        srv->n_conns++;
        atomic_fetch_add(&srv->metrics.conns_open, 1);
        /* created under the lock so a fast connection cannot finish (and
         * unlink itself) before it is linked */
        int e = pthread_create(&c->thr, NULL, gsb__conn_main, c);
        if (e != 0) {
            srv->conns = c->next;
            if (c->next)
                c->next->prev = NULL;
            srv->n_conns--;
            gsb__admit_release(srv, c);
            atomic_fetch_sub(&srv->metrics.conns_open, 1);
        }
        pthread_mutex_unlock(&srv->lock);
        if (e != 0) {
            gsb__logf(&srv->log, GSB__LOG_WARN, "connection refused",
                      "reason=thread_create errno=%d", e);
            atomic_fetch_add(&srv->metrics.conns_refused, 1);
            atomic_fetch_add(&srv->metrics.conns_dropped, 1);
            close(fd);
            free(c);
        }
    }
}

/*
 * Every slot, reserved and refused ones included, holds a file descriptor:
 * raise the soft limit on open files to what the limits need (within the
 * hard limit), or say that it cannot be.  Past it accept fails (EMFILE) with
 * connections below max_connections.
 */
static void fit_fd_limit(gsb_server *srv)
{
    const gsb__srv_opts *o = &srv->opt;
    rlim_t need = (rlim_t)o->max_connections + (rlim_t)o->reserved_connections + 256;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > was)
        gsb__logf(&srv->log, GSB__LOG_INFO, "raised the open-file limit", "from=%llu to=%llu",
                  (unsigned long long)was, (unsigned long long)rl.rlim_cur);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need)
        gsb__logf(&srv->log, GSB__LOG_WARN, "too few file descriptors for the connection limits",
                  "open_files=%llu needed=%llu reason=\"raise ulimit -n (LimitNOFILE= under "
                  "systemd) or lower --max-connections\"",
                  (unsigned long long)rl.rlim_cur, (unsigned long long)need);
}

static void *accept_main(void *arg)
{
    gsb_server *srv = arg;
    struct pollfd *p = calloc((size_t)srv->n_listen + 1, sizeof *p);
    if (!p) {
        gsb__logf(&srv->log, GSB__LOG_ERROR, "accept thread out of memory", "listeners=%d",
                  srv->n_listen);
        return NULL;
    }
    p[0].fd = srv->wake[0];
    p[0].events = POLLIN;
    for (int i = 0; i < srv->n_listen; i++) {
        p[i + 1].fd = srv->lfd[i];
        p[i + 1].events = POLLIN;
    }
    double paused_until = 0; /* out of file descriptors: listeners not polled */
    while (!atomic_load(&srv->stopping)) {
        /* a heap trim put off by its throttle is done when the time comes */
        int timeout = -1;
        if (srv->reaped_since_trim > 0) {
            double wait = srv->last_trim + TRIM_EVERY_S - gsb__now_s();
            timeout = wait > 0 ? (int)(wait * 1000) + 1 : 0;
        }
        int paused = gsb__now_s() < paused_until;
        if (paused && (timeout < 0 || timeout > FD_PAUSE_MS))
            timeout = FD_PAUSE_MS;
        int k = poll(p, paused ? 1 : (nfds_t)srv->n_listen + 1, timeout);
        if (k < 0 && errno != EINTR) {
            gsb__logf(&srv->log, GSB__LOG_ERROR, "poll failed", "errno=%d", errno);
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (k == 0)
            reap(srv);
        if (k <= 0)
            continue;
        if (p[0].revents & POLLIN) {
            char sink[64];
            while (read(srv->wake[0], sink, sizeof sink) > 0) {
            }
            reap(srv);
        }
        if (atomic_load(&srv->stopping))
            break;
        for (int i = 0; !paused && i < srv->n_listen; i++)
            if ((p[i + 1].revents & POLLIN) && accept_one(srv, i))
                paused_until = gsb__now_s() + FD_PAUSE_MS / 1000.0;
    }
    free(p);
    return NULL;
}

/* Names for /health and WELCOME from what the local session reports. */
static int describe_device(gsb_server *srv)
{
    char *text = NULL;
    json_t *info = NULL;
    if (gsb_session_info(srv->local, &text) == GSB_OK) {
        info = json_loads(text, 0, NULL);
        gsb_free(text);
    }
    gsb__err_clear();
    const char *backend = json_string_value(json_object_get(info, "backend"));
    const char *gpu = json_string_value(json_object_get(info, "gpu"));
    const gsb__backend *g = srv->local->gpu;
    if (!backend)
        backend = g && srv->local->device != GSB__DEVICE_CPU ? g->name : "cpu";
    if (!gpu && g && g->device)
        gpu = g->device;
    srv->backend_name = strdup(backend);
    srv->device_name = strdup(strcmp(backend, "cpu") == 0 || !gpu ? "cpu" : gpu);
    json_decref(info);
    return srv->backend_name && srv->device_name ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}

static int open_listeners(gsb_server *srv)
{
    int n = srv->opt.n_listen;
    srv->lfd = malloc((size_t)n * sizeof *srv->lfd);
    srv->l_unix = calloc((size_t)n, sizeof *srv->l_unix);
    srv->urls = calloc((size_t)n + 1, sizeof *srv->urls);
    srv->unix_paths = calloc((size_t)n, sizeof *srv->unix_paths);
    if (!srv->lfd || !srv->l_unix || !srv->urls || !srv->unix_paths)
        return gsb__err(GSB_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        gsb__sockaddr_url u;
        GSB_TRY(gsb__url_parse(srv->opt.listen[i], &u));
        int fd;
        char *bound = NULL;
        GSB_TRY(gsb__sock_listen(srv->opt.listen[i], &fd, &bound));
        srv->lfd[i] = fd;
        srv->urls[i] = bound;
        srv->l_unix[i] = u.is_unix;
        srv->n_listen = i + 1;
        if (u.is_unix && !(srv->unix_paths[i] = strdup(u.path)))
            return gsb__err(GSB_ENOMEM, "out of memory");
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
            fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
            return gsb__err(GSB_EIO, "cannot configure the listener on %s: %s", bound,
                            strerror(errno));
    }
    return GSB_OK;
}

/* Free everything start may have set up (listeners closed, socket files removed). */
/* Close the listeners and remove the Unix socket files (idempotent). */
static void close_listeners(gsb_server *srv)
{
    for (int i = 0; i < srv->n_listen; i++) {
        if (srv->lfd[i] >= 0)
            close(srv->lfd[i]);
        srv->lfd[i] = -1;
        if (srv->unix_paths[i])
            unlink(srv->unix_paths[i]);
        free(srv->unix_paths[i]);
        srv->unix_paths[i] = NULL;
    }
}

static void destroy(gsb_server *srv)
{
    gsb__refuser_stop(srv->refuser); /* first: it answers /health from srv's state */
    close_listeners(srv);
    for (int i = 0; srv->urls && i < srv->n_listen; i++)
        free(srv->urls[i]);
    free(srv->lfd);
    free(srv->l_unix);
    free(srv->urls);
    free(srv->unix_paths);
    for (int i = 0; i < 2; i++) {
        if (srv->wake[i] >= 0)
            close(srv->wake[i]);
        if (srv->stop_pipe[i] >= 0)
            close(srv->stop_pipe[i]);
    }
    gsb__peers_free(srv->peers);
    gsb_close(srv->local);
    free(srv->backend_name);
    free(srv->device_name);
    gsb__log_close(&srv->log);
    gsb__srv_opts_free(&srv->opt);
    pthread_mutex_destroy(&srv->lock);
    pthread_cond_destroy(&srv->cond);
    pthread_mutex_destroy(&srv->sess_lock);
    free(srv);
}

static int start(gsb_server *srv, const char *options_json)
{
    GSB_TRY(gsb__srv_opts_parse(options_json, &srv->opt));
    gsb__srv_opts *o = &srv->opt;
    /* refuse before binding anything: a non-local address needs a token */
    for (int i = 0; i < o->n_listen; i++) {
        gsb__sockaddr_url u;
        GSB_TRY(gsb__url_parse(o->listen[i], &u));
        if (!gsb__url_is_local(&u) && !o->token)
            return gsb__err(GSB_EPARAM, "refusing to listen on %s without a token: addresses other "
                            "than loopback and Unix sockets need token_file (--token-file FILE)",
                            o->listen[i]);
    }
    GSB_TRY(mkdir_p(o->data_dir));
    GSB_TRY(gsb__log_open(&srv->log, o->log_file, o->log_level, o->log_stderr));
    srv->budget.limit = o->memory_budget_bytes;
    GSB_TRY(gsb__peers_create(&srv->peers));
    fit_fd_limit(srv);

    char url[64];
    snprintf(url, sizeof url, "local?device=%s", o->device);
    GSB_TRY(gsb_open(url, &srv->local));
    free(srv->local->data_dir);
    if (!(srv->local->data_dir = strdup(o->data_dir)))
        return gsb__err(GSB_ENOMEM, "out of memory");
    GSB_TRY(describe_device(srv));

    if (pipe2(srv->wake, O_CLOEXEC | O_NONBLOCK) != 0 ||
        pipe2(srv->stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return gsb__err(GSB_EIO, "cannot create the server's pipes: %s", strerror(errno));
    GSB_TRY(open_listeners(srv));
    GSB_TRY(gsb__refuser_start(srv, &srv->refuser));
    srv->t_start = gsb__now_s();
    int e = gsb__spawn(&srv->accept_thr, accept_main, srv);
    if (e != 0)
        return gsb__err(GSB_ENOMEM, "cannot start the accept thread: %s", strerror(e));
    srv->accept_started = 1;
    for (int i = 0; i < srv->n_listen; i++)
        gsb__logf(&srv->log, GSB__LOG_INFO, "listening", "url=%s auth=%s", srv->urls[i],
                  o->token ? "token" : "none");
    gsb__logf(&srv->log, GSB__LOG_INFO, "server started",
              "version=%s backend=%s device=%s data_dir=%s max_request_mb=%llu "
              "max_connections=%d reserved_connections=%d max_connections_per_peer=%d "
              "idle_timeout_s=%d memory_budget_mb=%llu pid=%d",
              GSB_VERSION_STRING, srv->backend_name,
              gsb__log_q((char[200]){0}, 200, srv->device_name),
              gsb__log_q((char[600]){0}, 600, o->data_dir),
              (unsigned long long)(o->max_request_bytes >> 20), o->max_connections,
              o->reserved_connections, o->max_per_peer, o->idle_timeout_s,
              (unsigned long long)(o->memory_budget_bytes >> 20), (int)getpid());
    return GSB_OK;
}

int gsb_server_start(const char *options_json, gsb_server **out)
{
    gsb__err_clear();
    if (!out)
        return gsb__err(GSB_EINVAL, "gsb_server_start: out must not be NULL");
    *out = NULL;
    gsb_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return gsb__err(GSB_ENOMEM, "out of memory");
    srv->wake[0] = srv->wake[1] = srv->stop_pipe[0] = srv->stop_pipe[1] = -1;
    srv->log.fd = -1;
    pthread_mutex_init(&srv->lock, NULL);
    pthread_cond_init(&srv->cond, NULL);
    pthread_mutex_init(&srv->sess_lock, NULL);
    int rc = start(srv, options_json);
    if (rc != GSB_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", gsb_errmsg());
        /* the file only: the caller gets the message itself (and prints it) */
        srv->log.to_stderr = 0;
        if (srv->log.fd >= 0)
            gsb__logf(&srv->log, GSB__LOG_ERROR, "server failed to start", "error=%s",
                      gsb__log_q((char[1100]){0}, 1100, msg));
        destroy(srv);
        return gsb__err(rc, "%s", msg);
    }
    *out = srv;
    return GSB_OK;
}

const char *gsb_server_url(const gsb_server *srv, int i)
{
    if (!srv || i < 0 || i >= srv->n_listen)
        return NULL;
    return srv->urls[i];
}

void gsb_server_stop(gsb_server *srv)
{
    if (!srv)
        return;
    pthread_mutex_lock(&srv->lock);
    int busy = srv->n_conns;
    pthread_mutex_unlock(&srv->lock);
    gsb__logf(&srv->log, GSB__LOG_INFO, "server stopping", "connections=%d", busy);
    atomic_store(&srv->stopping, 1);
    /* 1. no new connections */
    wake_accept(srv);
    if (srv->accept_started)
        pthread_join(srv->accept_thr, NULL);
    close_listeners(srv);
    /* 2. idle connections close now; busy ones after their reply */
    ssize_t k;
    do
        k = write(srv->stop_pipe[1], "s", 1);
    while (k < 0 && errno == EINTR);
    pthread_mutex_lock(&srv->lock);
    while (srv->n_conns > 0)
        pthread_cond_wait(&srv->cond, &srv->lock);
    pthread_mutex_unlock(&srv->lock);
    reap(srv);
    gsb__logf(&srv->log, GSB__LOG_INFO, "server stopped", "uptime_s=%.1f",
              gsb__now_s() - srv->t_start);
    destroy(srv);
}

int gsb_serve(const char *options_json)
{
    gsb__err_clear();
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    /* blocked before any thread exists, so only sigwait below takes them */
    pthread_sigmask(SIG_BLOCK, &set, &old);
    gsb__heap_fix_thresholds(); /* this process only serves */
    gsb_server *srv;
    int rc = gsb_server_start(options_json, &srv);
    if (rc != GSB_OK) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return rc;
    }
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    gsb__logf(&srv->log, GSB__LOG_INFO, "signal received", "signal=%s",
              sig == SIGTERM ? "SIGTERM" : "SIGINT");
    gsb_server_stop(srv);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return GSB_OK;
}
