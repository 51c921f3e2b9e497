/*
 * bench_rawtcp.c - the machine's own TCP loopback rate, for `gsb
 * bench-bridge`'s reference row: one plain connection on 127.0.0.1, no gsb
 * protocol, the sender writing 8 MiB at a time (as the client's CHUNK frames)
 * and the receiver reading into a 64 MiB buffer (as gsbd's staging), both
 * with TCP_NODELAY and the kernel's autotuned buffers (what the bridge's
 * sockets get unless the kernel grants 8 MiB: net/sock.c).  The bridge's "tcp loopback" row is judged against this: a gap
 * between the two is ours, the rest is the kernel's copies.
 */
#include "cli/bench_bridge.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SEND_PIECE ((size_t)8 << 20)
#define RECV_PIECE ((size_t)64 << 20)

typedef struct {
    int fd;
    const char *src;
    size_t bytes;
    int reps;
    int failed;
} raw_sender;

static double raw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *send_reps(void *arg)
{
    raw_sender *s = arg;
    for (int r = 0; r < s->reps && !s->failed; r++)
        for (size_t off = 0; off < s->bytes;) {
            size_t n = s->bytes - off < SEND_PIECE ? s->bytes - off : SEND_PIECE;
            ssize_t w = send(s->fd, s->src + off, n, MSG_NOSIGNAL);
            if (w <= 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                s->failed = 1;
                break;
            }
            off += (size_t)w;
        }
    return NULL;
}

/* One rep's bytes into dst (reused): 0, or -1 when the connection failed. */
static int recv_rep(int fd, char *dst, size_t bytes)
{
    for (size_t left = bytes; left > 0;) {
        size_t n = left < RECV_PIECE ? left : RECV_PIECE;
        ssize_t k = recv(fd, dst, n, MSG_WAITALL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        left -= (size_t)k;
    }
    return 0;
}

/* A connected pair on 127.0.0.1: *rx accepted, *tx connected; 0 or -1. */
static int loopback_pair(int *rx, int *tx)
{
    int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *rx = *tx = -1;
    if (l < 0)
        return -1;
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 1) == 0 &&
        getsockname(l, (struct sockaddr *)&sa, &sl) == 0 &&
        (*tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
        connect(*tx, (struct sockaddr *)&sa, sizeof sa) == 0)
        *rx = accept(l, NULL, NULL);
    close(l);
    if (*rx < 0 || setsockopt(*tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        setsockopt(*rx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        if (*tx >= 0)
            close(*tx);
        if (*rx >= 0)
            close(*rx);
        return -1;
    }
    return 0;
}

int gsb__cli_raw_tcp_gbs(const void *src, size_t bytes, int reps, double *best_gbs)
{
    *best_gbs = 0;
    int rx, tx;
    if (loopback_pair(&rx, &tx) != 0) {
        fprintf(stderr, "gsb bench-bridge: raw tcp loopback: %s\n", strerror(errno));
        return -1;
    }
    char *dst = malloc(bytes < RECV_PIECE ? bytes : RECV_PIECE);
    raw_sender s = {tx, src, bytes, reps, 0};
    pthread_t thr;
    int rc = dst && pthread_create(&thr, NULL, send_reps, &s) == 0 ? 0 : -1;
    if (rc == 0) {
        memset(dst, 0, bytes < RECV_PIECE ? bytes : RECV_PIECE); /* faults not timed */
        for (int r = 0; r < reps && rc == 0; r++) {
            double t0 = raw_now();
            rc = recv_rep(rx, dst, bytes);
            double gbs = (double)bytes / (raw_now() - t0) / 1e9;
            if (rc == 0 && gbs > *best_gbs)
                *best_gbs = gbs;
        }
        shutdown(rx, SHUT_RDWR); /* a sender stuck on a failed receiver wakes up */
        pthread_join(thr, NULL);
    }
    if (rc != 0 || s.failed)
        fprintf(stderr, "gsb bench-bridge: raw tcp loopback failed\n");
    free(dst);
    close(rx);
    close(tx);
    return rc != 0 || s.failed ? -1 : 0;
}
