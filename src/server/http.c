/*
 * http.c - HTTP/1.1 on the protocol's port, for people and tools
 * (docs/PROTOCOL.md, last section): one request per connection, answered
 * and closed.
 *   GET /health      JSON: status, version, backend, device, GPU memory, uptime
 *   GET /metrics     Prometheus text (metrics.c)
 *   GET /v1/models   the store's list; "Authorization: Bearer TOKEN" when the
 *                    server has a token
 * HEAD is GET without the body; other methods get 405, unknown paths 404, a
 * request head that does not parse (or exceeds 8 KiB) 400.  At the
 * connection limit (a reserved slot, admit.c, or the refuser, refuse.c)
 * /health and /metrics are still served; /v1/models gets 503 with the reason.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "core/error.h"
#include "server/server.h"

#define HEAD_MAX 8192
#define HEAD_MS 5000

/* GPU memory when the local session reports it ("gpu_memory": {total, free});
 * libgsb cannot reach cudaMemGetInfo itself. */
void gsb__gpu_memory(gsb_server *srv, double *total, double *free_b)
{
    *total = *free_b = -1;
    char *text = NULL;
    if (gsb_session_info(srv->local, &text) != GSB_OK) {
        gsb__err_clear();
        return;
    }
    json_t *info = json_loads(text, 0, NULL);
    gsb_free(text);
    const json_t *mem = json_object_get(info, "gpu_memory");
    if (json_is_number(json_object_get(mem, "total")))
        *total = json_number_value(json_object_get(mem, "total"));
    if (json_is_number(json_object_get(mem, "free")))
        *free_b = json_number_value(json_object_get(mem, "free"));
    json_decref(info);
}

int gsb__http_method(const void *first4)
{
    static const char *const methods[] = {"GET ", "HEAD", "POST", "PUT ", "DELE", "OPTI",
                                          "PATC", "CONN", "TRAC"};
    for (size_t i = 0; i < sizeof methods / sizeof *methods; i++)
        if (memcmp(first4, methods[i], 4) == 0)
            return 1;
    return 0;
}

/* The limits and what the memory budget holds, for /health. */
static json_t *limits_json(gsb_server *srv)
{
    const gsb__srv_opts *o = &srv->opt;
    return json_pack("{s:i, s:i, s:i, s:i, s:I, s:I, s:I}", "max_connections",
                     o->max_connections, "reserved_connections", o->reserved_connections,
                     "max_connections_per_peer", o->max_per_peer, "idle_timeout_s",
                     o->idle_timeout_s, "max_request_bytes", (json_int_t)o->max_request_bytes,
                     "memory_budget_bytes", (json_int_t)srv->budget.limit,
                     "memory_in_use_bytes", (json_int_t)atomic_load(&srv->budget.used));
}

json_t *gsb__health_json(gsb_server *srv)
{
    int n_conns, n_sess;
    pthread_mutex_lock(&srv->lock);
    n_conns = srv->n_conns;
    pthread_mutex_unlock(&srv->lock);
    pthread_mutex_lock(&srv->sess_lock);
    n_sess = srv->n_sessions;
    pthread_mutex_unlock(&srv->sess_lock);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:f, s:s, s:i, s:i}", "status", "ok",
                          "version", gsb_version(), "server", GSB__SERVER_NAME, "backend",
                          srv->backend_name, "device", srv->device_name, "uptime_s",
                          gsb__now_s() - srv->t_start, "cuml_version", GSB__CUML_VERSION,
                          "connections", n_conns, "sessions", n_sess);
    if (o)
        json_object_set_new(o, "limits", limits_json(srv));
    double total, free_b;
    gsb__gpu_memory(srv, &total, &free_b);
    if (o && total >= 0) {
        json_t *mem = json_pack("{s:f}", "total", total);
        if (mem && free_b >= 0)
            json_object_set_new(mem, "free", json_real(free_b));
        if (mem)
            json_object_set_new(o, "gpu_memory", mem);
    }
    return o;
}

/* Read the request head (through the blank line) into buf; its length, or
 * -1 when it does not come whole within the size and time limits. */
static int read_head(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    double deadline = gsb__now_s() + HEAD_MS / 1000.0;
    while (n + 1 < cap) {
        int left = (int)((deadline - gsb__now_s()) * 1000);
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -1;
        ssize_t k = recv(fd, buf + n, cap - 1 - n, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (k <= 0)
            return -1;
        n += (size_t)k;
        buf[n] = '\0';
        if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
            return (int)n;
    }
    return -1;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

static void respond(int fd, int code, const char *type, const char *body, int head_only,
                    const char *extra)
{
    const char *reason = code == 200 ? "OK" : code == 400 ? "Bad Request"
                         : code == 401 ? "Unauthorized" : code == 404 ? "Not Found"
                         : code == 405 ? "Method Not Allowed"
                         : code == 503 ? "Service Unavailable" : "Internal Server Error";
    size_t len = body ? strlen(body) : 0;
    char hdr[512];
    int k = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nConnection: close\r\nServer: %s\r\n%s\r\n",
                     code, reason, type, len, GSB__SERVER_NAME, extra ? extra : "");
    if (k < 0 || (size_t)k >= sizeof hdr)
        return;
    send_all(fd, hdr, (size_t)k);
    if (!head_only && len)
        send_all(fd, body, len);
}

static void respond_json(int fd, int code, json_t *v, int head_only, const char *extra)
{
    char *body = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (!body) {
        respond(fd, 500, "application/json", "{\"error\":\"out of memory\"}\n", head_only, NULL);
        return;
    }
    size_t n = strlen(body);
    char *nl = realloc(body, n + 2); /* a trailing newline for curl users */
    if (nl) {
        body = nl;
        body[n] = '\n';
        body[n + 1] = '\0';
    }
    respond(fd, code, "application/json", body, head_only, extra);
    free(body);
}

static json_t *error_json(const char *msg) { return json_pack("{s:s}", "error", msg); }

void gsb__http_refuse(int fd, const char *msg)
{
    respond_json(fd, 503, json_pack("{s:s, s:s}", "status", "busy", "error", msg), 0,
                 "Retry-After: 1\r\n");
}

/* The Authorization header's bearer token, or NULL (points into head). */
static const char *bearer(char *head, size_t *len)
{
    for (char *line = strchr(head, '\n'); line; line = strchr(line, '\n')) {
        line++;
        if (strncasecmp(line, "Authorization:", 14) != 0)
            continue;
        char *v = line + 14;
        while (*v == ' ' || *v == '\t')
            v++;
        if (strncasecmp(v, "Bearer ", 7) != 0)
            return NULL;
        v += 7;
        while (*v == ' ')
            v++;
        size_t n = strcspn(v, "\r\n");
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        *len = n;
        return v;
    }
    return NULL;
}

/* Answer the request whose head (the request line at least) is in head;
 * method and path are filled for the log.  Returns the status code. */
static int route(gsb_server *srv, int fd, char *head, const char *busy, char method[16],
                 char path[256])
{
    /* request line: METHOD SP target SP HTTP/x.y */
    size_t line_len = strcspn(head, "\r\n");
    char *sp1 = memchr(head, ' ', line_len);
    char *sp2 = sp1 ? memchr(sp1 + 1, ' ', line_len - (size_t)(sp1 + 1 - head)) : NULL;
    if (!sp1 || !sp2 || (size_t)(sp1 - head) >= 16 || (size_t)(sp2 - sp1 - 1) >= 256 ||
        strncmp(sp2 + 1, "HTTP/1.", 7) != 0) {
        respond_json(fd, 400, error_json("unparseable request line"), 0, NULL);
        return 400;
    }
    memcpy(method, head, (size_t)(sp1 - head));
    method[sp1 - head] = '\0';
    memcpy(path, sp1 + 1, (size_t)(sp2 - sp1 - 1));
    path[sp2 - sp1 - 1] = '\0';
    path[strcspn(path, "?#")] = '\0'; /* the query does not select anything here */
    int head_only = strcmp(method, "HEAD") == 0;

    int known = strcmp(path, "/health") == 0 || strcmp(path, "/metrics") == 0 ||
                strcmp(path, "/v1/models") == 0;
    if (!known) {
        respond_json(fd, 404, error_json("unknown path: try /health, /metrics or /v1/models"),
                     head_only, NULL);
        return 404;
    }
    if (busy && strcmp(path, "/v1/models") == 0) {
        gsb__http_refuse(fd, busy);
        return 503;
    }
    if (strcmp(method, "GET") != 0 && !head_only) {
        respond_json(fd, 405, error_json("only GET and HEAD are served"), 0,
                     "Allow: GET, HEAD\r\n");
        return 405;
    }
    if (strcmp(path, "/health") == 0) {
        respond_json(fd, 200, gsb__health_json(srv), head_only, NULL);
        return 200;
    }
    if (strcmp(path, "/metrics") == 0) {
        double total, free_b;
        gsb__gpu_memory(srv, &total, &free_b);
        char *text = gsb__metrics_render(srv, gsb__now_s() - srv->t_start, total, free_b);
        int code = text ? 200 : 500;
        respond(fd, code, "text/plain; version=0.0.4; charset=utf-8",
                text ? text : "out of memory\n", head_only, NULL);
        free(text);
        return code;
    }
    /* /v1/models */
    size_t tlen = 0;
    const char *tok = srv->opt.token ? bearer(head, &tlen) : NULL;
    if (srv->opt.token &&
        !(tok && gsb__ct_equal(tok, tlen, srv->opt.token, strlen(srv->opt.token)))) {
        respond_json(fd, 401, error_json("this server requires a token: send "
                                         "\"Authorization: Bearer TOKEN\""),
                     head_only, "WWW-Authenticate: Bearer realm=\"gsbd\"\r\n");
        return 401;
    }
    char *list = NULL;
    int rc = gsb_model_list(srv->local, &list);
    json_t *v = rc == GSB_OK ? json_loads(list, JSON_DECODE_ANY, NULL) : NULL;
    gsb_free(list);
    if (!v) {
        respond_json(fd, 500, error_json(rc != GSB_OK ? gsb_errmsg() : "bad store list"),
                     head_only, NULL);
        return 500;
    }
    respond_json(fd, 200, v, head_only, NULL);
    return 200;
}

static void log_request(gsb_server *srv, uint64_t conn_id, const char *method, const char *path,
                        int code)
{
    atomic_fetch_add(&srv->metrics.http_requests, 1);
    gsb__logf(&srv->log, code == 200 ? GSB__LOG_DEBUG : GSB__LOG_INFO, "http",
              "conn=%llu method=%s path=%s code=%d", (unsigned long long)conn_id,
              method[0] ? method : "-", path[0] ? gsb__log_q((char[300]){0}, 300, path) : "-",
              code);
}

int gsb__http_answer_peeked(gsb_server *srv, int fd, char *buf, size_t n, int complete,
                            const char *busy)
{
    buf[n] = '\0';
    if (!complete && !memchr(buf, '\n', n))
        return 0; /* the request line is still on its way */
    char method[16] = "", path[256] = "";
    int code = route(srv, fd, buf, busy, method, path);
    log_request(srv, 0, method, path, code);
    return 1;
}

void gsb__http_serve(gsb_server *srv, int fd, uint64_t conn_id, const char *busy)
{
    char *head = malloc(HEAD_MAX + 1);
    if (!head)
        return;
    int code;
    char method[16] = "", path[256] = "";
    if (read_head(fd, head, HEAD_MAX + 1) < 0) {
        code = 400;
        respond_json(fd, code, error_json("the request head did not arrive whole within 8 KiB "
                                          "and 5 s"), 0, NULL);
    } else {
        code = route(srv, fd, head, busy, method, path);
    }
    log_request(srv, conn_id, method, path, code);
    free(head);
    /* half-close and give the client a moment to read, so closing with
     * unread bytes cannot turn into a reset that loses the answer */
    shutdown(fd, SHUT_WR);
    struct pollfd p = {fd, POLLIN, 0};
    char sink[512];
    for (int i = 0; i < 8 && poll(&p, 1, 100) > 0; i++)
        if (recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0)
            break;
}
