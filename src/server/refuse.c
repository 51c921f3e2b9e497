/*
 * refuse.c - the refuser: one thread that tells the connections turned away
 * when every slot, reserved ones included, is taken (admit.c) why, in their
 * own protocol, then closes them.
 *
 * Closing such a connection at once would reset it: the client would report
 * "connection reset" and tell its user to start a server that is running.
 * Instead the refuser waits (briefly) for the client's first bytes, answers a
 * protocol client with an ERROR frame carrying the reason, and an HTTP client
 * as at a limit (http.c: /health and /metrics as ever, else 503 with the
 * reason), half-closes, and reads what the client still sends until it
 * closes, so that the answer is not lost to a reset either.
 *
 * It never blocks: the sockets are non-blocking and polled together.  It
 * holds at most REFUSE_MAX connections, each for at most FIRST_MS + DRAIN_MS;
 * beyond that a connection is closed at once (gsbd_connections_dropped_total).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"
#include "server/server.h"

#define REFUSE_MAX 64
#define FIRST_MS 1000 /* for the client's first bytes */
#define DRAIN_MS 500  /* for the client to close after the answer */
#define PARTIAL_MS 10 /* first bytes came but not enough: look again this much later */

typedef struct pending {
    int fd;
    int answered;
    uint64_t deadline_us;
    uint64_t again_us;    /* not polled before this (its bytes so far are not enough) */
    char msg[600];
} pending;

struct gsb__refuser {
    gsb_server *srv;
    pthread_t thr;
    int started;
    int wake[2];
    atomic_int stop;
    pthread_mutex_t lock; /* p, n */
    pending p[REFUSE_MAX];
    int n;
};

static void wake(gsb__refuser *r)
{
    ssize_t k;
    do
        k = write(r->wake[1], "w", 1);
    while (k < 0 && errno == EINTR);
}

/* The answer in the client's protocol, from its first bytes (peeked); 0 while
 * an HTTP request line is still coming (late: whatever came is answered). */
static int answer(gsb__refuser *r, pending *e, int late)
{
    char b[1024];
    ssize_t k = recv(e->fd, b, sizeof b - 1, MSG_PEEK | MSG_DONTWAIT);
    if (!late && (k < 0 ? errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                        : k > 0 && k < 4))
        return 0;
    if (k >= 4 && gsb__http_method(b)) {
        /* /health and /metrics answer even now: that is what they are for */
        if (!gsb__http_answer_peeked(r->srv, e->fd, b, (size_t)k,
                                     late || k == (ssize_t)sizeof b - 1, e->msg))
            return 0;
    } else if (k >= 4 && memcmp(b, "GSB1", 4) == 0) {
        gsb__frame_hdr h = {0};
        uint64_t req_id = k >= GSB__WIRE_HDR_SIZE && gsb__hdr_decode((uint8_t *)b, &h) == GSB_OK
                              ? h.req_id
                              : 0;
        gsb__err_clear();
        json_t *head = json_pack("{s:i, s:s, s:s}", "code", GSB_EIO, "status",
                                 gsb_status_name(GSB_EIO), "message", e->msg);
        if (head)
            gsb__wire_send(e->fd, GSB__F_ERROR, req_id, head, NULL, NULL, -1);
        json_decref(head);
        gsb__err_clear();
    }
    shutdown(e->fd, SHUT_WR);
    e->answered = 1;
    e->deadline_us = gsb__now_us() + DRAIN_MS * 1000u;
    return 1;
}

/* Advance one connection; 1 when it is finished (closed). */
static int step(gsb__refuser *r, pending *e, short revents, uint64_t now)
{
    if (!e->answered) {
        int late = now >= e->deadline_us;
        /* bytes are peeked, not read: until there are enough the socket stays
         * readable, so it is not polled again for a moment */
        if ((revents || late) && !answer(r, e, late))
            e->again_us = now + PARTIAL_MS * 1000u;
        return 0;
    }
    if (revents) {
        static char sink[4096]; /* contents never read */
        ssize_t k;
        while ((k = recv(e->fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) {
        }
        if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            now = e->deadline_us; /* EOF or an error: done */
    }
    if (now < e->deadline_us)
        return 0;
    close(e->fd);
    return 1;
}

static void *refuser_main(void *arg)
{
    gsb__refuser *r = arg;
    struct pollfd pf[REFUSE_MAX + 1];
    while (!atomic_load(&r->stop)) {
        uint64_t now = gsb__now_us(), next = now + 1000000u;
        pthread_mutex_lock(&r->lock);
        int n = r->n;
        for (int i = 0; i < n; i++) {
            const pending *e = &r->p[i];
            int resting = e->again_us > now;
            pf[i + 1] = (struct pollfd){e->fd, resting ? 0 : POLLIN, 0};
            uint64_t when = resting && e->again_us < e->deadline_us ? e->again_us : e->deadline_us;
            if (when < next)
                next = when;
        }
        pthread_mutex_unlock(&r->lock);
        pf[0] = (struct pollfd){r->wake[0], POLLIN, 0};
        int k = poll(pf, (nfds_t)n + 1, next > now ? (int)((next - now) / 1000 + 1) : 0);
        if (k < 0 && errno != EINTR)
            break;
        if (k > 0 && (pf[0].revents & POLLIN)) {
            char sink[64];
            while (read(r->wake[0], sink, sizeof sink) > 0) {
            }
        }
        now = gsb__now_us();
        pthread_mutex_lock(&r->lock);
        /* entries added meanwhile sit after the first n: untouched this round */
        for (int i = n - 1; i >= 0; i--) {
            if (!step(r, &r->p[i], k > 0 ? pf[i + 1].revents : 0, now))
                continue;
            r->p[i] = r->p[--r->n]; /* a new or an already stepped one moves here */
        }
        pthread_mutex_unlock(&r->lock);
    }
    return NULL;
}

int gsb__refuser_start(gsb_server *srv, gsb__refuser **out)
{
    *out = NULL;
    gsb__refuser *r = calloc(1, sizeof *r);
    if (!r)
        return gsb__err(GSB_ENOMEM, "out of memory");
    r->srv = srv;
    r->wake[0] = r->wake[1] = -1;
    pthread_mutex_init(&r->lock, NULL);
    if (pipe2(r->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        gsb__refuser_stop(r);
        return gsb__err(GSB_EIO, "cannot create the refuser's pipe: %s", strerror(errno));
    }
    int e = gsb__spawn(&r->thr, refuser_main, r);
    if (e != 0) {
        gsb__refuser_stop(r);
        return gsb__err(GSB_ENOMEM, "cannot start the refuser thread: %s", strerror(e));
    }
    r->started = 1;
    *out = r;
    return GSB_OK;
}

int gsb__refuser_add(gsb__refuser *r, int fd, const char *msg)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return 0;
    pthread_mutex_lock(&r->lock);
    int ok = r->n < REFUSE_MAX;
    if (ok) {
        pending *e = &r->p[r->n++];
        e->fd = fd;
        e->answered = 0;
        e->deadline_us = gsb__now_us() + FIRST_MS * 1000u;
        e->again_us = 0;
        snprintf(e->msg, sizeof e->msg, "%s", msg);
    }
    pthread_mutex_unlock(&r->lock);
    if (ok)
        wake(r);
    return ok;
}

void gsb__refuser_stop(gsb__refuser *r)
{
    if (!r)
        return;
    if (r->started) {
        atomic_store(&r->stop, 1);
        wake(r);
        pthread_join(r->thr, NULL);
    }
    for (int i = 0; i < r->n; i++)
        close(r->p[i].fd);
    for (int i = 0; i < 2; i++)
        if (r->wake[i] >= 0)
            close(r->wake[i]);
    pthread_mutex_destroy(&r->lock);
    free(r);
}
