/*
 * health.c - `gsb health` (see health.h): the URL forms users paste, a
 * connect with a timeout, and GET /health by hand (no HTTP library: the
 * request is one line and the answer small).
 */
#include "cli/health.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define HEALTH_TIMEOUT_MS 5000

/* connect() with a timeout; returns the socket or -1 with errno set */
static int connect_timed(int family, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, sa, len) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        int k = poll(&p, 1, timeout_ms);
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (k <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            close(fd);
            errno = k == 0 ? ETIMEDOUT : soerr ? soerr : errno;
            return -1;
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* Connect to tcp://HOST:PORT or unix:///PATH (a "?..." suffix is ignored);
 * returns the socket, or -1 with a reason in why. */
static int health_connect(const char *url, char *why, size_t whylen)
{
    size_t ulen = strcspn(url, "?");
    if (strncmp(url, "unix:", 5) == 0) {
        const char *path = url + 5;
        if (strncmp(path, "//", 2) == 0)
            path += 2;
        struct sockaddr_un sa;
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        size_t plen = ulen - (size_t)(path - url);
        if (plen == 0 || plen >= sizeof sa.sun_path) {
            snprintf(why, whylen, "bad Unix socket path in '%.*s'", (int)ulen, url);
            return -1;
        }
        memcpy(sa.sun_path, path, plen);
        int fd = connect_timed(AF_UNIX, (struct sockaddr *)&sa, sizeof sa, HEALTH_TIMEOUT_MS);
        if (fd < 0)
            snprintf(why, whylen, "%s", strerror(errno));
        return fd;
    }
    if (strncmp(url, "tcp://", 6) != 0) {
        snprintf(why, whylen, "expected tcp://HOST:PORT or unix:///PATH");
        return -1;
    }
    char host[256], port[16];
    const char *h = url + 6, *end = url + ulen;
    const char *colon;
    if (*h == '[') { /* [v6]:port */
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (!rb || rb[1] != ':') {
            snprintf(why, whylen, "bad address");
            return -1;
        }
        snprintf(host, sizeof host, "%.*s", (int)(rb - h - 1), h + 1);
        colon = rb + 1;
    } else {
        colon = NULL;
        for (const char *q = h; q < end; q++)
            if (*q == ':')
                colon = q;
        if (!colon || colon == h) {
            snprintf(why, whylen, "expected tcp://HOST:PORT");
            return -1;
        }
        snprintf(host, sizeof host, "%.*s", (int)(colon - h), h);
    }
    snprintf(port, sizeof port, "%.*s", (int)(end - colon - 1), colon + 1);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        snprintf(why, whylen, "cannot resolve '%s': %s", host, gai_strerror(g));
        return -1;
    }
    int fd = -1, e = ECONNREFUSED;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = connect_timed(ai->ai_family, ai->ai_addr, ai->ai_addrlen, HEALTH_TIMEOUT_MS);
        if (fd < 0)
            e = errno;
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(why, whylen, "%s", strerror(e));
    return fd;
}

/* GET /health at url: prints the body; 0 when it answered 200 */
static int health_one(const char *url, int *answered)
{
    char why[300];
    *answered = 0;
    int fd = health_connect(url, why, sizeof why);
    if (fd < 0) {
        fprintf(stderr, "gsb health: nothing answers at %.*s (%s)\n", (int)strcspn(url, "?"), url,
                why);
        return 1;
    }
    const char *req = "GET /health HTTP/1.1\r\nHost: gsbd\r\nAccept: application/json\r\n"
                      "Connection: close\r\n\r\n";
    size_t off = 0, n = strlen(req);
    while (off < n) {
        ssize_t k = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (k <= 0 && errno != EINTR)
            break;
        if (k > 0)
            off += (size_t)k;
    }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (buf && len < cap) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = HEALTH_TIMEOUT_MS - ((t.tv_sec - t0.tv_sec) * 1000 +
                                         (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t k = recv(fd, buf + len, cap - len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    if (!buf) {
        fprintf(stderr, "gsb health: out of memory\n");
        return 1;
    }
    buf[len] = '\0';
    int code = 0;
    char *body = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1 || !body) {
        fprintf(stderr, "gsb health: %.*s answered, but not with HTTP: is that a gsbd?\n",
                (int)strcspn(url, "?"), url);
        free(buf);
        return 1;
    }
    *answered = 1;
    body += 4;
    fputs(body, stdout);
    if (len > 0 && body[strlen(body) - 1] != '\n')
        putchar('\n');
    free(buf);
    if (code != 200) {
        fprintf(stderr, "gsb health: %.*s answered HTTP %d\n", (int)strcspn(url, "?"), url, code);
        return 1;
    }
    return 0;
}

/* The length of in's "scheme://" prefix ("http://": 7), 0 when it has none. */
static size_t scheme_len(const char *in)
{
    const char *p = strstr(in, "://");
    if (!p || (size_t)(p - in) != strspn(in, "abcdefghijklmnopqrstuvwxyz+"))
        return 0;
    return (size_t)(p - in) + 3;
}

int gsb__cli_health_url(const char *in, char *out, size_t cap, char *why, size_t whylen)
{
    size_t sl = scheme_len(in);
    const char *rest = in + sl;
    if (strncmp(in, "unix://", 7) == 0) {
        size_t n = strcspn(in, "?");
        if ((size_t)snprintf(out, cap, "%.*s", (int)n, in) >= cap) {
            snprintf(why, whylen, "the path is too long");
            return -1;
        }
        return 0;
    }
    if (sl && strncmp(in, "tcp://", 6) != 0 && strncmp(in, "http://", 7) != 0) {
        snprintf(why, whylen, "%s", strncmp(in, "https://", 8) == 0
                                        ? "gsbd answers plain HTTP: use http:// or tcp://"
                                        : "expected tcp://HOST:PORT, unix:///PATH, HOST:PORT "
                                          "or http://HOST:PORT[/health]");
        return -1;
    }
    /* HOST:PORT, up to a path or query ([v6]:port keeps its colons) */
    size_t n = strcspn(rest, "/?#");
    const char *colon = NULL;
    for (const char *q = rest; q < rest + n; q++)
        if (*q == ':')
            colon = q;
    if (rest[0] == '[' && colon && colon[-1] != ']')
        colon = NULL;
    if (!colon || colon == rest || colon + 1 == rest + n ||
        strspn(colon + 1, "0123456789") != (size_t)(rest + n - colon - 1)) {
        snprintf(why, whylen, "expected HOST:PORT in '%s'", in);
        return -1;
    }
    if ((size_t)snprintf(out, cap, "tcp://%.*s", (int)n, rest) >= cap) {
        snprintf(why, whylen, "the address is too long");
        return -1;
    }
    return 0;
}

int gsb__cli_health(int argc, char **argv)
{
    if (argc > 1 || (argc == 1 && argv[0][0] == '-')) {
        if (argc == 1 && (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0)) {
            printf("usage: gsb health [URL]\n\nGET /health from a running gsbd and print it "
                   "(exit 0 when it is up).\nURL: tcp://HOST:PORT, unix:///PATH, HOST:PORT or "
                   "http://HOST:PORT[/health];\ndefault $GSB_URL, else "
                   GSB_CLI_HEALTH_DEFAULT_URL ".\n");
            return 0;
        }
        fprintf(stderr, "usage: gsb health [URL]\n");
        return 2;
    }
    const char *given = argc == 1 ? argv[0] : getenv("GSB_URL");
    /* GSB_URL=local (the embedded engine) names no server: ask the default one */
    if (!given || !*given ||
        (strncmp(given, "local", 5) == 0 && (given[5] == '\0' || given[5] == '?')))
        given = GSB_CLI_HEALTH_DEFAULT_URL;
    char url[1024], why[300];
    if (gsb__cli_health_url(given, url, sizeof url, why, sizeof why) != 0) {
        fprintf(stderr, "gsb health: not a gsbd address: %s (%s)\n", given, why);
        return 2;
    }
    int answered;
    int rc = health_one(url, &answered);
    if (rc != 0 && !answered)
        fprintf(stderr, "gsb health: is gsbd running? Start it with `gsbd` (or `gsb serve`), "
                        "or give the URL it listens on: gsb health tcp://HOST:PORT | "
                        "unix:///PATH\n");
    return rc;
}
