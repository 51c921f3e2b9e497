/*
 * metrics.c - gsbd's counters (lock-free atomics, updated once per request)
 * and their Prometheus text exposition for GET /metrics.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

/* request latency bucket upper bounds, microseconds (then +Inf) */
static const uint64_t lat_bounds_us[GSB__LAT_BUCKETS] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 250000, 1000000, 10000000,
    60000000};

void gsb__metrics_request(gsb__metrics *m, int op, int ok, uint64_t us, uint64_t in,
                          uint64_t out)
{
    if (op < 0 || op >= GSB__N_OPS)
        op = GSB__OP_OTHER;
    atomic_fetch_add_explicit(&m->requests[op], 1, memory_order_relaxed);
    if (!ok)
        atomic_fetch_add_explicit(&m->errors[op], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->bytes_in, in, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->bytes_out, out, memory_order_relaxed);
    int b = 0;
    while (b < GSB__LAT_BUCKETS && us > lat_bounds_us[b])
        b++;
    atomic_fetch_add_explicit(&m->lat_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->lat_sum_us, us, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->lat_count, 1, memory_order_relaxed);
}

/* A growing text buffer; on OOM it stops growing and render returns NULL. */
typedef struct buf {
    char *p;
    size_t n, cap;
    int oom;
} buf;

static void put(buf *b, const char *fmt, ...) GSB__PRINTF(2, 3);
static void put(buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)k + 1;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

#define LOAD(x) ((unsigned long long)atomic_load_explicit(&(x), memory_order_relaxed))

static void counter(buf *b, const char *name, const char *help, unsigned long long v)
{
    put(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, v);
}

static void gauge(buf *b, const char *name, const char *help, double v)
{
    put(b, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

/* The connection limits: refusals by limit, evictions, idle closes, slots in use. */
static void limits(buf *b, gsb_server *srv)
{
    gsb__metrics *m = &srv->metrics;
    static const char *const why[GSB__LIMIT_N] = {NULL, "max_connections", "per_peer",
                                                  "out_of_memory"};
    put(b, "# HELP gsbd_connections_refused_by_limit_total Connections refused with the reason "
           "(an ERROR frame or HTTP 503), by the limit that was reached.\n"
           "# TYPE gsbd_connections_refused_by_limit_total counter\n");
    for (int i = GSB__LIMIT_NONE + 1; i < GSB__LIMIT_N; i++)
        put(b, "gsbd_connections_refused_by_limit_total{limit=\"%s\"} %llu\n", why[i],
            LOAD(m->refused_by[i]));
    counter(b, "gsbd_connections_dropped_total",
            "Connections closed without a word: every slot and the refuser were busy.",
            LOAD(m->conns_dropped));
    counter(b, "gsbd_connections_evicted_total",
            "Idle connections of sessions holding nothing, closed to make room for a new one.",
            LOAD(m->conns_evicted));
    counter(b, "gsbd_connections_idle_closed_total",
            "Connections of sessions holding nothing, closed after idle_timeout_s.",
            LOAD(m->conns_idle_closed));
    pthread_mutex_lock(&srv->lock);
    int reserved = srv->n_reserved;
    pthread_mutex_unlock(&srv->lock);
    gauge(b, "gsbd_connections_reserved", "Connections in reserved slots now.", reserved);
    gauge(b, "gsbd_connections_max", "max_connections.", srv->opt.max_connections);
}

/* The memory budget: its size, what uses it, how often it said no. */
static void budget(buf *b, gsb__budget *bu)
{
    gauge(b, "gsbd_memory_budget_bytes",
          "The server-wide budget for requests, data handles, shared memory and staging "
          "(memory_budget_mb).", (double)bu->limit);
    put(b, "# HELP gsbd_memory_used_bytes Memory taken from the budget now, by use.\n"
           "# TYPE gsbd_memory_used_bytes gauge\n");
    for (int i = 0; i < GSB__MEM_KINDS; i++)
        put(b, "gsbd_memory_used_bytes{use=\"%s\"} %llu\n", gsb__mem_kind_labels[i],
            LOAD(bu->kind[i]));
    counter(b, "gsbd_memory_budget_refusals_total",
            "Requests refused (MemoryError) because the memory budget was used up.",
            LOAD(bu->refusals));
}

char *gsb__metrics_render(gsb_server *srv, double uptime_s, double gpu_total, double gpu_free)
{
    gsb__metrics *m = &srv->metrics;
    buf b = {malloc(4096), 0, 4096, 0};
    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    put(&b, "# HELP gsbd_requests_total Protocol requests served, by operation.\n"
            "# TYPE gsbd_requests_total counter\n");
    for (int i = 0; i < GSB__N_OPS; i++)
        put(&b, "gsbd_requests_total{op=\"%s\"} %llu\n", gsb__op_names[i], LOAD(m->requests[i]));
    put(&b, "# HELP gsbd_request_errors_total Requests answered with ERROR, by operation.\n"
            "# TYPE gsbd_request_errors_total counter\n");
    for (int i = 0; i < GSB__N_OPS; i++)
        put(&b, "gsbd_request_errors_total{op=\"%s\"} %llu\n", gsb__op_names[i],
            LOAD(m->errors[i]));
    counter(&b, "gsbd_received_bytes_total", "Bytes received in requests (frames and chunks).",
            LOAD(m->bytes_in));
    counter(&b, "gsbd_sent_bytes_total", "Bytes sent in replies (header and arrays).",
            LOAD(m->bytes_out));

    put(&b, "# HELP gsbd_request_duration_seconds Time from a request's arrival to its reply.\n"
            "# TYPE gsbd_request_duration_seconds histogram\n");
    unsigned long long cum = 0;
    for (int i = 0; i < GSB__LAT_BUCKETS; i++) {
        cum += LOAD(m->lat_bucket[i]);
        put(&b, "gsbd_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
            (double)lat_bounds_us[i] / 1e6, cum);
    }
    cum += LOAD(m->lat_bucket[GSB__LAT_BUCKETS]);
    put(&b, "gsbd_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    put(&b, "gsbd_request_duration_seconds_sum %.6f\n", (double)LOAD(m->lat_sum_us) / 1e6);
    put(&b, "gsbd_request_duration_seconds_count %llu\n", LOAD(m->lat_count));

    counter(&b, "gsbd_connections_total", "Connections accepted.", LOAD(m->conns_total));
    counter(&b, "gsbd_connections_refused_total",
            "Connections refused at a connection limit (dropped ones included).",
            LOAD(m->conns_refused));
    gauge(&b, "gsbd_connections", "Connections open now.", (double)LOAD(m->conns_open));
    gauge(&b, "gsbd_sessions", "Server-side sessions alive now.", (double)LOAD(m->sessions_open));
    counter(&b, "gsbd_calls_cancelled_total",
            "Calls stopped by a CANCEL frame or because their client vanished.",
            LOAD(m->cancelled));
    counter(&b, "gsbd_bad_frames_total", "Connections closed for a protocol violation.",
            LOAD(m->bad_frames));
    counter(&b, "gsbd_http_requests_total", "HTTP requests answered.", LOAD(m->http_requests));
    limits(&b, srv);
    budget(&b, &srv->budget);
    gauge(&b, "gsbd_uptime_seconds", "Seconds since the server started.", uptime_s);
    if (gpu_total >= 0) {
        put(&b, "# HELP gsbd_gpu_memory_bytes GPU memory of the server's device.\n"
                "# TYPE gsbd_gpu_memory_bytes gauge\n"
                "gsbd_gpu_memory_bytes{kind=\"total\"} %.17g\n",
            gpu_total);
        if (gpu_free >= 0)
            put(&b, "gsbd_gpu_memory_bytes{kind=\"free\"} %.17g\n", gpu_free);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
