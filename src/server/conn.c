/*
 * conn.c - one thread per connection: it tells the protocol from HTTP by
 * the first bytes, checks HELLO (version, token, join), then serves REQUEST
 * frames one at a time until the client leaves or the server stops.
 *
 * The request decoder trusts nothing from the wire: the frame layer
 * (net/wire.c) has checked the header, the head's JSON and the inline
 * section's size; here every array descriptor is parsed and bounded, chunked
 * arrays are received only after the request's total size passed
 * max_request_mb, and shm/data references are looked up (and held) in the
 * connection's session.  A failure that leaves the byte stream in an unknown
 * place (a bad frame, a bad descriptor, chunks we will not read) ends in an
 * ERROR and the connection is closed; any other failure is an ERROR and the
 * connection goes on.
 *
 * Memory a request makes the server hold (its frame, its chunked arrays, a
 * data handle, a staging buffer) is taken from the server's budget
 * (budget.c) before it is allocated.  A request the budget cannot take is
 * read to its end without keeping its bytes and answered with ERROR
 * GSB_ENOMEM naming the budget: the connection stays usable.
 *
 * Between requests the connection is idle (admit.c may close it to make
 * room for a new one when its session holds nothing), and after
 * idle_timeout_s with an empty session it closes by itself.
 *
 * During a long model.call the thread is inside the engine; the progress
 * hook (gsb__conn_progress) then sends PROGRESS frames when asked and looks
 * at the socket without blocking for the only bytes a client may send
 * meanwhile: a CANCEL frame, or EOF when the client vanished.  Either stops
 * the call at its next iteration.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/data.h"
#include "core/hostmem.h"
#include "core/error.h"
#include "server/server.h"

#define CLASSIFY_MS 5000  /* first bytes of a connection */
#define HELLO_MS 10000    /* HELLO after the first bytes */
#define RESERVED_MS 2000  /* both, in a reserved slot: it must not be held long */
#define HELLO_MAX 65536   /* bytes of a HELLO frame (a real one is a few hundred) */
#define MAP_FROM 65536    /* received buffers this large are mapped (budget.c says why) */
#define MAX_ARRAYS 64     /* arrays in one request */
#define LINGER_MS 2000    /* discarding a refused request's bytes before closing */
#define RESERVED_LINGER_MS 500 /* the same in a reserved slot (a refused HELLO: nothing follows) */

/* ---- small things ---------------------------------------------------------- */

/* poll fd (and the server's stop pipe when watch_stop): 1 readable, 0 timed
 * out, -1 the server is stopping */
static int wait_readable(gsb__conn *c, int timeout_ms, int watch_stop)
{
    struct pollfd p[2] = {{c->fd, POLLIN, 0}, {c->srv->stop_pipe[0], POLLIN, 0}};
    for (;;) {
        int k = poll(p, watch_stop ? 2 : 1, timeout_ms);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            return 0;
        if (watch_stop && (p[1].revents & POLLIN))
            return -1;
        return 1;
    }
}

/* Length of the valid UTF-8 sequence at u (n bytes left), or 0 (RFC 3629:
 * no overlong forms, no surrogates, nothing above U+10FFFF). */
static int utf8_len(const unsigned char *u, size_t n)
{
    if (u[0] < 0x80)
        return 1;
    int len = u[0] >= 0xC2 && u[0] <= 0xDF ? 2 : u[0] >= 0xE0 && u[0] <= 0xEF ? 3
              : u[0] >= 0xF0 && u[0] <= 0xF4 ? 4 : 0;
    if (len == 0 || (size_t)len > n)
        return 0;
    for (int k = 1; k < len; k++)
        if ((u[k] >> 6) != 2)
            return 0;
    if ((u[0] == 0xE0 && u[1] < 0xA0) || (u[0] == 0xED && u[1] >= 0xA0) ||
        (u[0] == 0xF0 && u[1] < 0x90) || (u[0] == 0xF4 && u[1] >= 0x90))
        return 0;
    return len;
}

/* A valid UTF-8 copy of s (invalid bytes become '?'): jansson refuses
 * invalid strings, and a message may quote a truncated client string. */
static char *utf8_clean(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        int len = utf8_len(u + i, n - i);
        if (len > 0) {
            memcpy(o + i, s + i, (size_t)len);
            i += (size_t)len;
        } else {
            o[i++] = '?';
        }
    }
    o[n] = '\0';
    return o;
}

static int send_error(gsb__conn *c, uint64_t req_id, int code, const char *msg)
{
    char *clean = utf8_clean(msg ? msg : "");
    json_t *h = json_pack("{s:i, s:s, s:s}", "code", code, "status", gsb_status_name(code),
                          "message", clean ? clean : "out of memory");
    free(clean);
    if (!h)
        return GSB_ENOMEM;
    int rc = gsb__wire_send(c->fd, GSB__F_ERROR, req_id, h, NULL, NULL, -1);
    json_decref(h);
    return rc;
}

static const char *transport(const gsb__conn *c) { return c->is_unix ? "unix" : "tcp"; }

/* ---- progress and cancellation during a call ----------------------------- */

int gsb__conn_progress(void *data, const char *stage, int64_t iteration, double loss)
{
    gsb__call_ctx *x = data;
    gsb__conn *c = x->c;
    if (x->cancelled)
        return 1;
    if (x->send_progress) {
        json_t *h = json_pack("{s:s, s:I, s:o}", "stage", stage ? stage : "", "iteration",
                              (json_int_t)iteration, "loss",
                              isfinite(loss) ? json_real(loss) : json_null());
        /* a client that cannot take a PROGRESS frame is gone */
        if (h && gsb__wire_send(c->fd, GSB__F_PROGRESS, x->req_id, h, NULL, NULL, -1) != GSB_OK) {
            c->vanished = 1;
            x->cancelled = 2;
        }
        json_decref(h);
        if (x->cancelled)
            return 1;
    }
    /* a look at the socket costs a system call: at most one per millisecond
     * (a cancel is noticed within an iteration or a millisecond) */
    double now = gsb__now_s();
    if (now - x->last_poll < 1e-3)
        return 0;
    x->last_poll = now;
    struct pollfd p = {c->fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0 || !p.revents)
        return 0;
    uint8_t hdr[GSB__WIRE_HDR_SIZE];
    ssize_t n = recv(c->fd, hdr, sizeof hdr, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n <= 0 || ((size_t)n < sizeof hdr && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))) {
        /* EOF, an error, or a partial frame that will never complete */
        c->vanished = 1;
        x->cancelled = 2;
        return 1;
    }
    if ((size_t)n < sizeof hdr)
        return 0; /* the rest of a CANCEL is on its way: look again next time */
    n = recv(c->fd, hdr, sizeof hdr, MSG_DONTWAIT);
    gsb__frame_hdr fh;
    if (n != (ssize_t)sizeof hdr || gsb__hdr_decode(hdr, &fh) != GSB_OK ||
        fh.type != GSB__F_CANCEL || fh.length != 0) {
        gsb__err_clear();
        c->broken = 1; /* only CANCEL may come now: the stream cannot be trusted */
        x->cancelled = 3;
        return 1;
    }
    if (fh.req_id == x->req_id) {
        x->cancelled = 1;
        return 1;
    }
    return 0; /* a late CANCEL of an earlier request: nothing to stop */
}

/* ---- the request decoder ----------------------------------------------------- */

static void req_clear(gsb__conn *c, gsb__req *rq)
{
    gsb__data_stream_abort(rq->streamed); /* NULL once an op took it */
    gsb__budget_give(&c->srv->budget, GSB__MEM_DATA, rq->data_charge);
    rq->data_charge = 0;
    for (int i = 0; rq->bufs && i < rq->n; i++)
        gsb__host_free(rq->bufs[i]);
    for (int i = 0; i < rq->n_refs; i++)
        gsb__handle_put(rq->refs[i]);
    free(rq->bufs);
    free(rq->refs);
    free(rq->wa);
    free(rq->arr);
    free(rq->ptrs);
}

/* Request bytes (frames, chunk buffers) go to c->charged, given back by
 * uncharge once the request is answered. */
static int charge(gsb__conn *c, uint64_t n, const char *what)
{
    GSB_TRY(gsb__budget_take(&c->srv->budget, GSB__MEM_REQUESTS, n, what));
    c->charged += n;
    return GSB_OK;
}

static void uncharge(gsb__conn *c)
{
    gsb__budget_give(&c->srv->budget, GSB__MEM_REQUESTS, c->charged);
    c->charged = 0;
}

/* The wire layer asks before allocating a frame (gsb__wire_recv_budgeted). */
static int take_frame(void *ctx, uint64_t bytes)
{
    gsb__conn *c = ctx;
    if (!c->sess && bytes > HELLO_MAX)
        return gsb__err(GSB_EINVAL, "bad frame: a HELLO of %llu bytes (at most %d)",
                        (unsigned long long)bytes, HELLO_MAX);
    int rc = charge(c, bytes, "a request frame");
    if (rc != GSB_OK)
        snprintf(c->refusal, sizeof c->refusal, "%s", gsb_errmsg());
    return rc;
}

/* Read and drop the chunked arrays of a request refused before they came,
 * so that the stream is at the next frame; then the refusal (status rc with
 * the message in why) is what the request answers. */
static int drain_chunks(gsb__conn *c, gsb__req *rq, uint64_t total, int rc, const char *why,
                        int *fatal)
{
    char msg[sizeof c->refusal];
    snprintf(msg, sizeof msg, "%s", why);
    gsb__chunk_reader rd;
    gsb__chunk_reader_init(&rd, c->fd, rq->id, total);
    static char sink[1 << 16]; /* contents never read: shared by all threads */
    while (total > 0) {
        size_t k = total < sizeof sink ? (size_t)total : sizeof sink;
        int drc = gsb__chunk_read(&rd, sink, k);
        if (drc != GSB_OK) {
            *fatal = 1;
            return drc;
        }
        total -= k;
    }
    return gsb__err(rc, "%s", msg);
}

/* Pinned staging for streamed puts: a multiple of the senders' chunk size. */
#define STAGE_BYTES ((size_t)64 << 20)

/*
 * data.put of one chunked array: its bytes go into the handle as they arrive,
 * never into a request buffer.  A handle on the GPU is filled through a
 * pinned staging buffer (DMA from it at bus speed); a host one is received
 * into directly.  Only C-ordered bytes (a Fortran-ordered matrix takes the
 * general path, which transposes).
 */
static int stream_data_put(gsb__conn *c, gsb__req *rq, int *fatal)
{
    const gsb__wire_array *w = &rq->wa[0];
    gsb__budget *budget = &c->srv->budget;
    gsb_array shape = gsb__wire_as_array(w, NULL);
    shape.strides[0] = shape.strides[1] = 0;
    void *host = NULL;
    gsb_data *d = NULL;
    /* taken as if it lived in host memory; given back when it goes to the GPU */
    int rc = gsb__budget_take(budget, GSB__MEM_DATA, w->nbytes, "a data handle");
    if (rc == GSB_OK) {
        rq->data_charge = w->nbytes;
        rc = gsb__data_stream_open(c->srv->local, &shape, &d, &host);
    }
    if (rc == GSB_OK && !host) {
        gsb__budget_give(budget, GSB__MEM_DATA, rq->data_charge);
        rq->data_charge = 0;
        if (!c->stage) {
            rc = gsb__budget_take(budget, GSB__MEM_STAGING, STAGE_BYTES, "a staging buffer");
            if (rc == GSB_OK && (rc = gsb_arena_alloc(c->srv->local, STAGE_BYTES, &c->stage)) !=
                                    GSB_OK)
                gsb__budget_give(budget, GSB__MEM_STAGING, STAGE_BYTES);
        }
    }
    if (rc != GSB_OK) {
        /* nothing of the request read yet: refuse it, the stream intact */
        gsb__data_stream_abort(d);
        return drain_chunks(c, rq, w->nbytes, rc, gsb_errmsg(), fatal);
    }
    *fatal = 1; /* from here a failure leaves the stream mid-request */
    gsb__chunk_reader rd;
    gsb__chunk_reader_init(&rd, c->fd, rq->id, w->nbytes);
    if (host) {
        rc = gsb__chunk_read(&rd, host, (size_t)w->nbytes);
    } else {
        size_t isz = gsb__wire_itemsize(w->dtype);
        size_t piece = STAGE_BYTES / isz * isz;
        for (uint64_t off = 0; rc == GSB_OK && off < w->nbytes; off += piece) {
            size_t len = w->nbytes - off < piece ? (size_t)(w->nbytes - off) : piece;
            rc = gsb__chunk_read(&rd, c->stage, len);
            if (rc == GSB_OK)
                rc = gsb__data_stream_upload(d, off, c->stage, len);
        }
    }
    if (rc != GSB_OK) {
        gsb__data_stream_abort(d);
        return rc;
    }
    *fatal = 0;
    rq->streamed = d;
    return GSB_OK;
}

/*
 * Parse the request's array list ("inputs" or "arrays"), receive its chunked
 * arrays and resolve every array to a view.  *fatal is set when the stream
 * can no longer be trusted (the connection must close after the ERROR).
 */
static int decode_arrays(gsb__conn *c, gsb__req *rq, int *fatal)
{
    gsb_server *srv = c->srv;
    *fatal = 0;
    json_t *list = json_object_get(rq->head, "inputs");
    if (!list)
        list = json_object_get(rq->head, "arrays");
    if (!list || json_is_null(list))
        return rq->frame->refused ? gsb__err(GSB_ENOMEM, "%s", c->refusal) : GSB_OK;
    if (!json_is_array(list) || json_array_size(list) > MAX_ARRAYS) {
        *fatal = 1;
        return gsb__err(GSB_EINVAL, "a request's \"inputs\"/\"arrays\" must be a list of at "
                        "most %d arrays", MAX_ARRAYS);
    }
    int n = (int)json_array_size(list);
    rq->n = n;
    rq->wa = calloc((size_t)n + 1, sizeof *rq->wa);
    rq->arr = calloc((size_t)n + 1, sizeof *rq->arr);
    rq->ptrs = calloc((size_t)n + 1, sizeof *rq->ptrs);
    rq->bufs = calloc((size_t)n + 1, sizeof *rq->bufs);
    rq->refs = calloc((size_t)n + 1, sizeof *rq->refs);
    if (!rq->wa || !rq->arr || !rq->ptrs || !rq->bufs || !rq->refs) {
        *fatal = 1;
        return gsb__err(GSB_ENOMEM, "out of memory");
    }

    /* 1. every descriptor, and the request's size before any chunk is read */
    uint64_t chunk_total = 0, limit = srv->opt.max_request_bytes;
    int n_chunked = 0;
    for (int i = 0; i < n; i++) {
        int rc = gsb__wire_array_parse(json_array_get(list, (size_t)i), &rq->wa[i]);
        if (rc != GSB_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", gsb_errmsg());
            *fatal = 1;
            return gsb__err(rc, "array %d of the request: %s", i, why);
        }
        if (rq->wa[i].at == GSB__AT_CHUNKS) {
            n_chunked++;
            /* nbytes < 2^62 each and at most 64 of them: stop adding once past
             * the limit so the sum cannot wrap */
            if (chunk_total <= limit)
                chunk_total += rq->wa[i].nbytes;
        }
    }
    uint64_t total = chunk_total + rq->frame->hdr.length - rq->frame->hdr.head_len;
    if (total > limit) {
        *fatal = 1;
        return gsb__err(GSB_ENOMEM, "request of %llu MiB exceeds the server's per-connection "
                        "limit of %llu MiB (max_request_mb)",
                        (unsigned long long)((total + (1u << 20) - 1) >> 20),
                        (unsigned long long)(limit >> 20));
    }
    if (rq->frame->refused) /* the budget had no room for its inline section */
        return drain_chunks(c, rq, chunk_total, GSB_ENOMEM, c->refusal, fatal);

    /* 2. the chunks, straight into their arrays' buffers (data.put: into the
     * data handle itself, through pinned staging when it lives on the GPU) */
    const gsb__wire_array *w0 = &rq->wa[0];
    if (rq->op == GSB__OP_DATA_PUT && n == 1 && w0->at == GSB__AT_CHUNKS &&
        w0->dtype != GSB__WIRE_U8 &&
        !(w0->fortran && w0->ndim == 2 && w0->shape[0] > 1 && w0->shape[1] > 1)) {
        int rc = stream_data_put(c, rq, fatal);
        if (rc != GSB_OK)
            return rc;
        rq->bytes_in += chunk_total;
        return GSB_OK;
    }
    if (n_chunked > 0 && charge(c, chunk_total, "a request's arrays") != GSB_OK)
        return drain_chunks(c, rq, chunk_total, GSB_ENOMEM, gsb_errmsg(), fatal);
    if (n_chunked > 0) {
        struct iovec *iov = calloc((size_t)n_chunked, sizeof *iov);
        if (!iov) {
            *fatal = 1;
            return gsb__err(GSB_ENOMEM, "out of memory");
        }
        int k = 0, rc = GSB_OK;
        for (int i = 0; i < n && rc == GSB_OK; i++) {
            if (rq->wa[i].at != GSB__AT_CHUNKS)
                continue;
            size_t nb = (size_t)rq->wa[i].nbytes;
            /* huge pages when large: few faults; mapped: freed, the pages go back */
            rq->bufs[i] = nb >= MAP_FROM ? gsb__host_alloc_mapped(nb) : gsb__host_alloc(nb);
            if (!rq->bufs[i]) {
                rc = gsb__err(GSB_ENOMEM, "cannot allocate %zu bytes for array %d of the request",
                              nb, i);
                break;
            }
            iov[k].iov_base = rq->bufs[i];
            iov[k].iov_len = nb;
            k++;
        }
        if (rc == GSB_OK)
            rc = gsb__wire_recv_chunks(c->fd, rq->id, iov, k);
        free(iov);
        if (rc != GSB_OK) {
            *fatal = 1;
            return rc;
        }
        rq->bytes_in += chunk_total;
    }

    /* 3. views; from here a failure is an ordinary ERROR */
    for (int i = 0; i < n; i++) {
        gsb__wire_array *w = &rq->wa[i];
        void *p = NULL;
        switch (w->at) {
        case GSB__AT_NONE:
            continue;
        case GSB__AT_INLINE: {
            const void *q;
            GSB_TRY(gsb__wire_inline_ptr(rq->frame, w, &q));
            p = (void *)q; /* the engine only reads its inputs */
            break;
        }
        case GSB__AT_CHUNKS:
            p = rq->bufs[i];
            break;
        case GSB__AT_SHM: {
            gsb__handle *h;
            GSB_TRY(gsb__ssess_get(c->sess, GSB__H_SHM, w->segment, &h));
            rq->refs[rq->n_refs++] = h;
            if (w->offset > h->shm->size || w->nbytes > h->shm->size - w->offset)
                return gsb__err(GSB_EINVAL, "array %d of the request: bytes %llu..%llu lie outside "
                                "shared-memory segment %llu of %zu bytes",
                                i, (unsigned long long)w->offset,
                                (unsigned long long)(w->offset + w->nbytes),
                                (unsigned long long)w->segment, h->shm->size);
            p = (char *)h->shm->base + w->offset;
            break;
        }
        case GSB__AT_DATA: {
            gsb__handle *h;
            GSB_TRY(gsb__ssess_get(c->sess, GSB__H_DATA, w->handle, &h));
            rq->refs[rq->n_refs++] = h;
            rq->arr[i] = gsb_data_array(h->data);
            rq->ptrs[i] = &rq->arr[i];
            continue;
        }
        }
        if (w->dtype == GSB__WIRE_U8) {
            /* raw bytes (model blobs): ops that take them read wa[i].nbytes */
            rq->arr[i] = (gsb_array){p, 0, 1, {(int64_t)w->nbytes, 0}, {0, 0}};
        } else {
            rq->arr[i] = gsb__wire_as_array(w, p);
        }
        rq->ptrs[i] = &rq->arr[i];
    }
    return GSB_OK;
}

/* ---- requests ----------------------------------------------------------------- */

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Serve one REQUEST frame.  Returns 0 to go on, 1 to close the connection. */
static int handle_request(gsb__conn *c, gsb__frame *f)
{
    gsb_server *srv = c->srv;
    uint64_t t0 = now_us();
    gsb__req rq = {0};
    gsb__reply rp = {0};
    gsb__outmsg_init(&rp.out, GSB__WIRE_INLINE_PREFERRED);
    rq.id = f->hdr.req_id;
    rq.head = f->head;
    rq.frame = f;
    rq.bytes_in = GSB__WIRE_HDR_SIZE + f->hdr.length;
    rq.op = GSB__OP_OTHER;
    int fatal = 0, rc;
    const char *opname = json_string_value(json_object_get(f->head, "op"));

    if (rq.id == 0) {
        fatal = 1;
        rc = gsb__err(GSB_EINVAL, "a REQUEST's req_id must be nonzero");
    } else if (!f->head) {
        fatal = 1;
        rc = gsb__err(GSB_EINVAL, "a REQUEST needs a JSON head with \"op\"");
    } else {
        /* the op first: the decoder streams a data.put's bytes straight into
         * its handle, which it can only do knowing the op */
        int op = opname ? gsb__op_lookup(opname) : -1;
        if (op >= 0)
            rq.op = op;
        rc = decode_arrays(c, &rq, &fatal);
        if (rc == GSB_OK) {
            if (op < 0)
                rc = opname ? gsb__err(GSB_ENOTFOUND, "unknown op '%.64s'", opname)
                            : gsb__err(GSB_EINVAL, "the REQUEST head has no \"op\" string");
            else
                rc = gsb__op_run(c, &rq, &rp);
        }
    }

    uint64_t out_bytes = 0;
    int send_rc = GSB_OK;
    char msg[1024];
    msg[0] = '\0';
    if (rc != GSB_OK)
        snprintf(msg, sizeof msg, "%s", gsb_errmsg());
    if (c->vanished) {
        send_rc = GSB_EIO; /* nobody to answer */
    } else if (rc == GSB_OK) {
        if (!rp.head)
            rp.head = json_object();
        send_rc = rp.head ? gsb__wire_send(c->fd, GSB__F_REPLY, rq.id, rp.head, "arrays",
                                           rp.has_out ? &rp.out : NULL, -1)
                          : GSB_ENOMEM;
        if (send_rc == GSB_ENOMEM) /* nothing went out yet: say so */
            send_rc = send_error(c, rq.id, GSB_ENOMEM, "out of memory building the reply");
        out_bytes = GSB__WIRE_HDR_SIZE + (rp.has_out ? rp.out.inline_len + rp.out.chunk_len : 0);
    } else {
        send_rc = send_error(c, rq.id, rc, msg);
        out_bytes = GSB__WIRE_HDR_SIZE + strlen(msg);
    }

    uint64_t us = now_us() - t0;
    gsb__metrics_request(&srv->metrics, rq.op, rc == GSB_OK, us, rq.bytes_in, out_bytes);
    if (rc != GSB_OK && rc != GSB_ECANCELLED && gsb__log_on(&srv->log, GSB__LOG_WARN)) {
        char q[600];
        gsb__logf(&srv->log, GSB__LOG_WARN, "request failed",
                  "conn=%llu req=%llu op=%s status=%s bytes_in=%llu us=%llu error=%s",
                  (unsigned long long)c->id, (unsigned long long)rq.id,
                  gsb__op_names[rq.op], gsb_status_name(rc), (unsigned long long)rq.bytes_in,
                  (unsigned long long)us, gsb__log_q(q, sizeof q, msg));
    } else if (gsb__log_on(&srv->log, GSB__LOG_DEBUG)) {
        gsb__logf(&srv->log, GSB__LOG_DEBUG, "request",
                  "conn=%llu req=%llu op=%s status=%s bytes_in=%llu bytes_out=%llu us=%llu",
                  (unsigned long long)c->id, (unsigned long long)rq.id,
                  gsb__op_names[rq.op], gsb_status_name(rc), (unsigned long long)rq.bytes_in,
                  (unsigned long long)out_bytes, (unsigned long long)us);
    }
    if (fatal)
        atomic_fetch_add(&srv->metrics.bad_frames, 1);
    if (c->broken) {
        atomic_fetch_add(&srv->metrics.bad_frames, 1);
        gsb__logf(&srv->log, GSB__LOG_WARN, "protocol violation",
                  "conn=%llu req=%llu reason=\"a frame other than CANCEL arrived during a call\"",
                  (unsigned long long)c->id, (unsigned long long)rq.id);
    }

    gsb__outmsg_clear(&rp.out);
    json_decref(rp.head);
    gsb_result_free(rp.res);
    gsb_free(rp.blob);
    req_clear(c, &rq);
    if (fatal || c->broken)
        c->linger = 1; /* the client may still be sending what we will not read */
    return fatal || c->broken || c->vanished || send_rc != GSB_OK;
}

/* ---- HELLO ------------------------------------------------------------------------ */

/* Answer HELLO with WELCOME (returns 0) or ERROR (returns 1: close). */
static int handshake(gsb__conn *c, const gsb__frame *f)
{
    gsb_server *srv = c->srv;
    const json_t *h = f->head;
    if (f->hdr.type != GSB__F_HELLO || !h) {
        send_error(c, f->hdr.req_id, GSB_EINVAL, "the first frame of a connection must be HELLO");
        return 1;
    }
    const json_t *v = json_object_get(h, "versions");
    json_int_t lo = json_integer_value(json_array_get(v, 0));
    json_int_t hi = json_integer_value(json_array_get(v, 1));
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(json_array_get(v, 0)) ||
        !json_is_integer(json_array_get(v, 1))) {
        send_error(c, f->hdr.req_id, GSB_EINVAL,
                   "HELLO needs \"versions\": [lowest, highest] protocol versions");
        return 1;
    }
    if (lo > GSB__WIRE_VERSION || hi < GSB__WIRE_VERSION) {
        char m[200];
        snprintf(m, sizeof m, "no common protocol version: the client speaks %lld..%lld, this "
                 "server speaks %d..%d", (long long)lo, (long long)hi, GSB__WIRE_VERSION,
                 GSB__WIRE_VERSION);
        send_error(c, f->hdr.req_id, GSB_EUNSUPPORTED, m);
        return 1;
    }
    if (srv->opt.token) {
        const char *tok = json_string_value(json_object_get(h, "token"));
        const char *t = srv->opt.token;
        int ok = tok && gsb__ct_equal(tok, strlen(tok), t, strlen(t));
        if (!ok) {
            gsb__logf(&srv->log, GSB__LOG_WARN, "authentication failed", "conn=%llu reason=%s",
                      (unsigned long long)c->id, tok ? "wrong_token" : "no_token");
            send_error(c, f->hdr.req_id, GSB_EPARAM,
                       tok ? "this server requires a token and the one given does not match: "
                             "check the token file (?token_file=PATH in the URL, or $GSB_TOKEN / "
                             "$GSB_TOKEN_FILE)"
                           : "this server requires a token: pass ?token_file=PATH in the URL, or "
                             "set $GSB_TOKEN or $GSB_TOKEN_FILE");
            return 1;
        }
    }
    if (c->slot == GSB__SLOT_RESERVED) {
        /* a valid login at a limit: a slot is made for it, or it is told why
         * not (with a token, reaching here means it presented it) */
        int trusted = srv->opt.token || (c->peer.uid >= 0 && c->peer.uid == (long)geteuid());
        if (gsb__admit_login(srv, c, trusted) != GSB_OK) {
            char msg[sizeof c->refusal];
            snprintf(msg, sizeof msg, "%s", gsb_errmsg());
            gsb__logf(&srv->log, GSB__LOG_WARN, "connection refused",
                      "conn=%llu limit=%s peer=%s", (unsigned long long)c->id,
                      c->limit == GSB__LIMIT_PEER ? "per_peer" : "max_connections",
                      gsb__log_q((char[80]){0}, 80, c->peer.key));
            send_error(c, f->hdr.req_id, GSB_EIO, msg);
            return 1;
        }
    }
    const json_t *join = json_object_get(h, "join");
    int rc;
    if (join && !json_is_null(join)) {
        if (!json_is_string(join)) {
            send_error(c, f->hdr.req_id, GSB_EINVAL, "HELLO's \"join\" must be a session id string");
            return 1;
        }
        rc = gsb__ssess_join(srv, json_string_value(join), &c->sess);
    } else {
        rc = gsb__ssess_create(srv, &c->sess);
    }
    if (rc != GSB_OK) {
        send_error(c, f->hdr.req_id, rc, gsb_errmsg());
        return 1;
    }
    /* the features both sides have; shm only where a memfd can travel */
    json_t *feats = json_array();
    const json_t *want = json_object_get(h, "features");
    const char *mine[] = {"chunks", "progress", "shm"};
    for (int i = 0; feats && i < 3; i++) {
        if (i == 2 && !c->is_unix)
            continue;
        size_t j;
        json_t *w;
        json_array_foreach(want, j, w)
            if (json_is_string(w) && strcmp(json_string_value(w), mine[i]) == 0) {
                json_array_append_new(feats, json_string(mine[i]));
                break;
            }
    }
    json_t *wel = json_pack("{s:i, s:s, s:s, s:o, s:s, s:s, s:I}", "version", GSB__WIRE_VERSION,
                            "server", GSB__SERVER_NAME, "session", c->sess->id, "features",
                            feats ? feats : json_array(), "backend", srv->backend_name, "device",
                            srv->device_name, "max_inline", (json_int_t)GSB__WIRE_MAX_INLINE);
    if (!wel) {
        send_error(c, f->hdr.req_id, GSB_ENOMEM, "out of memory");
        return 1;
    }
    rc = gsb__wire_send(c->fd, GSB__F_WELCOME, f->hdr.req_id, wel, NULL, NULL, -1);
    json_decref(wel);
    if (rc == GSB_OK)
        gsb__logf(&srv->log, GSB__LOG_INFO, "session attached", "conn=%llu session=%.8s joined=%d",
                  (unsigned long long)c->id, c->sess->id, join && !json_is_null(join));
    return rc != GSB_OK;
}

/* ---- the protocol loop --------------------------------------------------------------- */

static const char *frame_name(int type)
{
    static const char *const names[] = {"?",     "HELLO",    "WELCOME", "REQUEST", "REPLY",
                                        "ERROR", "PROGRESS", "CANCEL",  "CHUNK"};
    return type >= 1 && type <= 8 ? names[type] : "?";
}

/* A frame could not be received: tell the client why (unless it left). */
static void recv_failed(gsb__conn *c, int rc)
{
    gsb_server *srv = c->srv;
    if (rc == GSB_EIO) { /* closed, reset or timed out: nobody to tell */
        gsb__logf(&srv->log, GSB__LOG_DEBUG, "connection ended", "conn=%llu reason=%s",
                  (unsigned long long)c->id, gsb__log_q((char[160]){0}, 160, gsb_errmsg()));
        return;
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s", gsb_errmsg());
    atomic_fetch_add(&srv->metrics.bad_frames, 1);
    char q[560];
    gsb__logf(&srv->log, GSB__LOG_WARN, "bad frame", "conn=%llu status=%s error=%s",
              (unsigned long long)c->id, gsb_status_name(rc), gsb__log_q(q, sizeof q, msg));
    send_error(c, 0, rc, msg);
    c->linger = 1;
}

/*
 * Wait for the next request while idle: admit.c may evict the connection
 * meanwhile (state IDLE -> EVICTED, socket shut down) when its session holds
 * nothing; idle_timeout_s with an empty session closes it here.  1: a frame
 * is coming (state BUSY); 0: close.
 */
static int await_request(gsb__conn *c)
{
    gsb_server *srv = c->srv;
    int timeout_ms = srv->opt.idle_timeout_s > 0 ? srv->opt.idle_timeout_s * 1000 : -1;
    atomic_store(&c->idle_since_us, gsb__now_us());
    for (;;) {
        atomic_store(&c->state, GSB__CS_IDLE);
        int w = wait_readable(c, timeout_ms, 1);
        int idle = GSB__CS_IDLE;
        if (!atomic_compare_exchange_strong(&c->state, &idle, GSB__CS_BUSY)) {
            gsb__logf(&srv->log, GSB__LOG_INFO, "idle connection evicted",
                      "conn=%llu reason=\"room for a new connection\"", (unsigned long long)c->id);
            return 0;
        }
        if (w < 0)
            return 0; /* the server is stopping */
        if (w > 0)
            return 1;
        if (gsb__ssess_empty(c->sess)) {
            atomic_fetch_add(&srv->metrics.conns_idle_closed, 1);
            gsb__logf(&srv->log, GSB__LOG_INFO, "idle connection closed",
                      "conn=%llu idle_timeout_s=%d", (unsigned long long)c->id,
                      srv->opt.idle_timeout_s);
            return 0;
        }
        /* the session holds models, data or shared memory: never timed out */
    }
}

static void serve_protocol(gsb__conn *c)
{
    gsb_server *srv = c->srv;
    uint64_t max_inline = GSB__WIRE_MAX_INLINE;
    if (srv->opt.max_request_bytes < max_inline)
        max_inline = srv->opt.max_request_bytes;
    gsb__frame f = {.fd = -1};
    gsb__wire_budget budget = {take_frame, c, MAP_FROM};

    int w = wait_readable(c, c->slot == GSB__SLOT_RESERVED ? RESERVED_MS : HELLO_MS, 1);
    if (w <= 0)
        return;
    int rc = gsb__wire_recv_budgeted(c->fd, &f, 0, -1, &budget);
    int close_now = 1;
    if (rc != GSB_OK)
        recv_failed(c, rc);
    else if (f.refused)
        send_error(c, f.hdr.req_id, GSB_ENOMEM, c->refusal);
    else
        close_now = handshake(c, &f);
    gsb__frame_clear(&f);
    uncharge(c);
    if (close_now) {
        if (rc == GSB_OK)
            c->linger = 1; /* after an ERROR (recv_failed decides for itself) */
        return;
    }

    while (!atomic_load(&srv->stopping) && await_request(c)) {
        rc = gsb__wire_recv_budgeted(c->fd, &f, max_inline, -1, &budget);
        if (rc != GSB_OK) {
            uncharge(c);
            recv_failed(c, rc);
            break;
        }
        int type = f.hdr.type;
        if (type == GSB__F_REQUEST) {
            close_now = handle_request(c, &f);
        } else if (type == GSB__F_CANCEL) {
            close_now = 0; /* a CANCEL that arrived after its request ended */
        } else {
            char m[120];
            snprintf(m, sizeof m, "unexpected %s frame: a client sends REQUEST (or CANCEL "
                     "during a request)", frame_name(type));
            atomic_fetch_add(&srv->metrics.bad_frames, 1);
            gsb__logf(&srv->log, GSB__LOG_WARN, "bad frame", "conn=%llu type=%s",
                      (unsigned long long)c->id, frame_name(type));
            send_error(c, f.hdr.req_id, GSB_EINVAL, m);
            c->linger = 1;
            close_now = 1;
        }
        gsb__frame_clear(&f);
        uncharge(c);
        if (close_now)
            break;
    }
}

/* ---- the thread ------------------------------------------------------------------------ */

/*
 * Closing after an ERROR while the client may still be sending (chunks we
 * refused, the rest of a bad frame): a close() with unread bytes makes the
 * kernel send a reset, which can destroy the ERROR before the client reads
 * it.  So half-close and discard what still comes, for a bounded time.
 */
static void linger_close(int fd, int ms)
{
    shutdown(fd, SHUT_WR);
    double deadline = gsb__now_s() + ms / 1000.0;
    static char sink[65536]; /* contents never read: shared by all threads */
    for (;;) {
        int left = (int)((deadline - gsb__now_s()) * 1000);
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return;
        ssize_t k = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
            return;
    }
}

/* What the connection speaks, from its first 4 bytes (peeked, not consumed):
 * 1 the protocol, 2 HTTP, 0 neither (or nothing came). */
static int classify(gsb__conn *c)
{
    int ms = c->slot == GSB__SLOT_RESERVED ? RESERVED_MS : CLASSIFY_MS;
    double deadline = gsb__now_s() + ms / 1000.0;
    char b[4];
    for (;;) {
        int left = (int)((deadline - gsb__now_s()) * 1000);
        if (left <= 0 || wait_readable(c, left, 1) <= 0)
            return 0;
        ssize_t n = recv(c->fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            return 0;
        if (n == (ssize_t)sizeof b)
            break;
        struct timespec ts = {0, 1000000}; /* a partial first packet: rare */
        nanosleep(&ts, NULL);
    }
    static const uint8_t magic[4] = {'G', 'S', 'B', '1'};
    if (memcmp(b, magic, 4) == 0)
        return 1;
    return gsb__http_method(b) ? 2 : 0;
}

void *gsb__conn_main(void *arg)
{
    gsb__conn *c = arg;
    gsb_server *srv = c->srv;
    double t0 = gsb__now_s();
    gsb__logf(&srv->log, GSB__LOG_INFO, "connection opened", "conn=%llu transport=%s",
              (unsigned long long)c->id, transport(c));
    int kind = classify(c);
    if (kind == 1) {
        serve_protocol(c);
    } else if (kind == 2 && c->slot == GSB__SLOT_RESERVED) {
        char busy[sizeof c->refusal];
        pthread_mutex_lock(&srv->lock);
        gsb__limit_message(srv, c, 1, busy, sizeof busy);
        pthread_mutex_unlock(&srv->lock);
        gsb__http_serve(srv, c->fd, c->id, busy);
    } else if (kind == 2) {
        gsb__http_serve(srv, c->fd, c->id, NULL);
    } else
        gsb__logf(&srv->log, GSB__LOG_INFO, "unknown protocol",
                  "conn=%llu reason=\"no protocol magic or HTTP request line in the first bytes\"",
                  (unsigned long long)c->id);
    if (c->linger && !atomic_load(&srv->stopping))
        linger_close(c->fd, c->slot == GSB__SLOT_RESERVED ? RESERVED_LINGER_MS : LINGER_MS);
    /* admit.c looks at idle connections' sockets and sessions under srv->lock
     * and may have just shut this one down: wait until it is done */
    pthread_mutex_lock(&srv->lock);
    pthread_mutex_unlock(&srv->lock);
    close(c->fd); /* the client sees EOF now, before the session is torn down */
    c->fd = -1;
    gsb__ssess_leave(srv, c->sess);
    c->sess = NULL;
    gsb__logf(&srv->log, GSB__LOG_INFO, "connection closed",
              "conn=%llu kind=%s vanished=%d seconds=%.3f", (unsigned long long)c->id,
              kind == 1 ? "protocol" : kind == 2 ? "http" : "none", c->vanished,
              gsb__now_s() - t0);
    if (c->stage) {
        gsb_arena_free(srv->local, c->stage);
        gsb__budget_give(&srv->budget, GSB__MEM_STAGING, STAGE_BYTES);
    }
    c->stage = NULL;
    gsb__server_conn_done(srv, c);
    return NULL;
}
