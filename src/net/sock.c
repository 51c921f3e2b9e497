/*
 * sock.c - URLs and sockets for the bridge: "tcp://host:port" and
 * "unix:///path" (or "unix:relative/path").
 *
 * Connecting sets what a request/reply protocol with large arrays wants:
 * TCP_NODELAY (a small request leaves at once) and large send/receive
 * buffers, on TCP only where the kernel grants them whole (else its
 * autotuning does better: set_tcp_buffers).  Errors name the URL and say what to check, because they end
 * up in front of a person who typed that URL.  Every socket is close-on-exec
 * (a server that spawns helpers must not leak its connections into them).
 */
#include "net/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifndef _WIN32
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <unistd.h>
#endif

#include "core/error.h"

#define SOCK_BUF_BYTES (8 << 20)
#define SOCK_BACKLOG 512
#define CONNECT_TIMEOUT_MS 10000

/* ---- URLs ------------------------------------------------------------------- */

static int url_err(const char *url, size_t len, const char *why)
{
    return gsb__err(GSB_EINVAL, "bad URL '%.*s': %s", (int)(len > 300 ? 300 : len), url, why);
}

static int parse_port(const char *url, size_t ulen, const char *p, size_t n, int *out)
{
    if (n == 0)
        return url_err(url, ulen, "missing port (tcp://host:port)");
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return url_err(url, ulen, "the port must be a decimal number (tcp://host:port)");
    int v = 0;
    for (size_t i = 0; i < n && v <= 65535; i++)
        v = v * 10 + (p[i] - '0');
    if (v > 65535)
        return url_err(url, ulen, "port out of range (0 to 65535)");
    *out = v;
    return GSB_OK;
}

int gsb__url_parse(const char *url, gsb__sockaddr_url *out)
{
    memset(out, 0, sizeof *out);
    if (!url)
        return gsb__err(GSB_EINVAL, "no URL given");
    /* a query ("?token_file=...") belongs to the caller */
    size_t len = strcspn(url, "?");
    if (len >= 6 && strncasecmp(url, "tcp://", 6) == 0) {
        const char *h = url + 6;
        size_t rest = len - 6, hlen;
        const char *port;
        if (rest > 0 && h[0] == '[') {
            const char *close = memchr(h, ']', rest);
            if (!close)
                return url_err(url, len, "missing ']' after an IPv6 address");
            hlen = (size_t)(close - h - 1);
            if (close + 1 >= url + len || close[1] != ':')
                return url_err(url, len, "missing port (tcp://[address]:port)");
            port = close + 2;
            if (hlen == 0 || hlen >= sizeof out->host)
                return url_err(url, len, "bad IPv6 address in brackets");
            memcpy(out->host, h + 1, hlen);
            out->host[hlen] = '\0';
            /* brackets hold an IPv6 literal, possibly with a %scope */
            char addr[sizeof out->host];
            memcpy(addr, out->host, hlen + 1);
            addr[strcspn(addr, "%")] = '\0';
            struct in6_addr a6;
            if (inet_pton(AF_INET6, addr, &a6) != 1)
                return url_err(url, len, "the address in brackets is not an IPv6 address");
        } else {
            const char *colon = memchr(h, ':', rest);
            if (!colon)
                return url_err(url, len, "missing port (tcp://host:port)");
            hlen = (size_t)(colon - h);
            port = colon + 1;
            if (memchr(port, ':', (size_t)(url + len - port)))
                return url_err(url, len, "an IPv6 address needs brackets: tcp://[::1]:port");
            if (hlen == 0)
                return url_err(url, len, "missing host (tcp://host:port)");
            if (hlen >= sizeof out->host)
                return url_err(url, len, "host name too long");
            for (size_t i = 0; i < hlen; i++)
                if (h[i] == '/' || h[i] == '@' || h[i] == ' ' || (unsigned char)h[i] < 0x20)
                    return url_err(url, len, "bad character in the host name");
            memcpy(out->host, h, hlen);
            out->host[hlen] = '\0';
        }
        return parse_port(url, len, port, (size_t)(url + len - port), &out->port);
    }
    const char *path;
    if (len >= 7 && strncasecmp(url, "unix://", 7) == 0) {
        path = url + 7;
        if (path[0] != '/')
            return url_err(url, len, "a unix URL needs an absolute path (unix:///path) or "
                           "the form unix:relative/path");
    } else if (len >= 5 && strncasecmp(url, "unix:", 5) == 0) {
        path = url + 5;
    } else {
        return url_err(url, len, "unknown scheme (use tcp://host:port or unix:///path)");
    }
    size_t plen = (size_t)(url + len - path);
    if (plen == 0)
        return url_err(url, len, "missing socket path");
    if (plen >= sizeof out->path)
        return gsb__err(GSB_EINVAL, "bad URL '%.*s': the socket path has %zu bytes (at most "
                        "%zu)", (int)(len > 300 ? 300 : len), url, plen, sizeof out->path - 1);
    out->is_unix = 1;
    memcpy(out->path, path, plen);
    out->path[plen] = '\0';
    return GSB_OK;
}

int gsb__url_is_local(const gsb__sockaddr_url *u)
{
    if (u->is_unix)
        return 1;
    if (strcasecmp(u->host, "localhost") == 0)
        return 1;
    struct in_addr a4;
    if (inet_pton(AF_INET, u->host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    struct in6_addr a6;
    if (inet_pton(AF_INET6, u->host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
    }
    return 0;
}

/* ---- connecting ------------------------------------------------------------- */

#ifndef _WIN32

static int unix_addr(const gsb__sockaddr_url *u, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    /* url_parse bounds the path below sizeof sun_path */
    memcpy(sa->sun_path, u->path, strlen(u->path) + 1);
    return GSB_OK;
}

static int set_int_opt(int fd, int level, int opt, int v, const char *name)
{
    if (setsockopt(fd, level, opt, &v, sizeof v) != 0)
        return gsb__err(GSB_EIO, "setsockopt(%s) failed: %s", name, strerror(errno));
    return GSB_OK;
}

/* Unix sockets have no autotuning: their buffers are sized (the kernel clamps
 * them to net.core.[rw]mem_max, fine). */
static int set_buffers(int fd)
{
    GSB_TRY(set_int_opt(fd, SOL_SOCKET, SO_SNDBUF, SOCK_BUF_BYTES, "SO_SNDBUF"));
    return set_int_opt(fd, SOL_SOCKET, SO_RCVBUF, SOCK_BUF_BYTES, "SO_RCVBUF");
}

/* A sysctl's integer from /proc/sys (path), or 0 when it cannot be read. */
static long sysctl_long(const char *path)
{
    FILE *f = fopen(path, "re");
    long v = 0;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

/*
 * TCP buffers: sized like a Unix socket's only where the kernel grants the
 * whole size, else left to autotuning.  Setting SO_SNDBUF/SO_RCVBUF turns
 * the kernel's autotuning off for the socket and caps the size at twice
 * net.core.[rw]mem_max: 416 KiB at the default 212992, where autotuning
 * would grow them to net.ipv4.tcp_[rw]mem's maximum (4-6 MiB by default).
 * With 416 KiB a 1 GiB put over loopback woke the receiver ~9x as often
 * (sender and receiver taking turns on a ~200 KiB window) and took ~20% more
 * CPU per byte than with 8 MiB or autotuned buffers.
 */
static int set_tcp_buffers(int fd)
{
    if (sysctl_long("/proc/sys/net/core/wmem_max") >= SOCK_BUF_BYTES / 2)
        GSB_TRY(set_int_opt(fd, SOL_SOCKET, SO_SNDBUF, SOCK_BUF_BYTES, "SO_SNDBUF"));
    if (sysctl_long("/proc/sys/net/core/rmem_max") >= SOCK_BUF_BYTES / 2)
        GSB_TRY(set_int_opt(fd, SOL_SOCKET, SO_RCVBUF, SOCK_BUF_BYTES, "SO_RCVBUF"));
    return GSB_OK;
}

static const char *connect_hint(int err)
{
    switch (err) {
    case ECONNREFUSED: return "is gsbd running? (connection refused)";
    case ENOENT: return "is gsbd running? (no socket file at that path)";
    case EACCES:
    case EPERM: return "permission denied (the socket belongs to another user?)";
    case ETIMEDOUT: return "timed out (is the host reachable and gsbd running? a firewall?)";
    case EHOSTUNREACH:
    case ENETUNREACH: return "the host is unreachable";
    default: return NULL;
    }
}

static int connect_err(const char *url, int err)
{
    const char *hint = connect_hint(err);
    size_t len = strcspn(url, "?");
    if (hint)
        return gsb__err(GSB_EIO, "cannot connect to %.*s: %s", (int)len, url, hint);
    return gsb__err(GSB_EIO, "cannot connect to %.*s: %s", (int)len, url, strerror(err));
}

/* connect() with a timeout: non-blocking connect, poll, then back to blocking.
 * Returns 0 or an errno value. */
static int connect_timed(int fd, const struct sockaddr *sa, socklen_t salen, int timeout_ms)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return errno;
    int err = 0;
    if (connect(fd, sa, salen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            struct pollfd p = {fd, POLLOUT, 0};
            int r;
            do
                r = poll(&p, 1, timeout_ms);
            while (r < 0 && errno == EINTR); /* a signal restarts the wait: rare, harmless */
            if (r < 0) {
                err = errno;
            } else if (r == 0) {
                err = ETIMEDOUT;
            } else {
                socklen_t l = sizeof err;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
                    err = errno;
            }
        }
    }
    if (err == 0 && fcntl(fd, F_SETFL, fl) != 0)
        err = errno;
    return err;
}

/* A blocking connect to a Unix socket path (a full backlog makes it wait, not
 * fail): 0 and the descriptor, or the errno (-1 when no socket was made). */
static int unix_connect(const struct sockaddr_un *sa, int *out_fd)
{
    *out_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*out_fd < 0)
        return -1;
    int r;
    do
        r = connect(*out_fd, (const struct sockaddr *)sa, sizeof *sa);
    while (r != 0 && errno == EINTR);
    if (r == 0)
        return 0;
    int err = errno;
    close(*out_fd);
    *out_fd = -1;
    return err;
}

int gsb__sock_connect(const char *url, int *out_fd)
{
    *out_fd = -1;
    gsb__sockaddr_url u;
    GSB_TRY(gsb__url_parse(url, &u));
    if (u.is_unix) {
        struct sockaddr_un sa;
        unix_addr(&u, &sa);
        int fd, err = unix_connect(&sa, &fd);
        if (err < 0)
            return gsb__err(GSB_EIO, "cannot create a socket: %s", strerror(errno));
        if (err > 0)
            return connect_err(url, err);
        int rc = set_buffers(fd);
        if (rc != GSB_OK) {
            close(fd);
            return rc;
        }
        *out_fd = fd;
        return GSB_OK;
    }

    char port[8];
    snprintf(port, sizeof port, "%d", u.port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int g = getaddrinfo(u.host, port, &hints, &res);
    if (g != 0)
        return gsb__err(GSB_EIO, "cannot connect to %.*s: cannot resolve host '%s': %s",
                        (int)strcspn(url, "?"), url, u.host,
                        g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
    int last_err = ECONNREFUSED, fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last_err = errno;
            continue;
        }
        int err = connect_timed(fd, ai->ai_addr, ai->ai_addrlen, CONNECT_TIMEOUT_MS);
        if (err == 0)
            break;
        last_err = err;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return connect_err(url, last_err);
    int rc = set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
    if (rc == GSB_OK)
        rc = set_tcp_buffers(fd);
    if (rc != GSB_OK) {
        close(fd);
        return rc;
    }
    *out_fd = fd;
    return GSB_OK;
}

/* ---- listening -------------------------------------------------------------- */

static int listen_err(const char *url, const char *what, int err)
{
    const char *hint = err == EADDRINUSE ? "address already in use (another gsbd?)"
                       : err == EACCES   ? "permission denied"
                       : err == EADDRNOTAVAIL ? "no such local address"
                                              : strerror(err);
    return gsb__err(GSB_EIO, "cannot listen on %.*s: %s: %s", (int)strcspn(url, "?"), url,
                    what, hint);
}

static int listen_unix(const char *url, const gsb__sockaddr_url *u, int *out_fd,
                       char **bound_url)
{
    struct sockaddr_un sa;
    unix_addr(u, &sa);
    struct stat st;
    if (lstat(u->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return gsb__err(GSB_EIO, "cannot listen on %.*s: %s exists and is not a socket "
                            "(not replaced)", (int)strcspn(url, "?"), url, u->path);
        /* a socket file: live if someone answers on it, stale (left by a
         * server that died) if the connection is refused */
        int probe, err = unix_connect(&sa, &probe);
        if (err < 0)
            return gsb__err(GSB_EIO, "cannot create a socket: %s", strerror(errno));
        if (probe >= 0)
            close(probe);
        if (err == 0)
            return gsb__err(GSB_EIO, "cannot listen on %.*s: already in use (a server answers "
                            "on %s)", (int)strcspn(url, "?"), url, u->path);
        if (err != ECONNREFUSED)
            return listen_err(url, "probing the existing socket file", err);
        if (unlink(u->path) != 0 && errno != ENOENT)
            return listen_err(url, "removing the stale socket file", errno);
    } else if (errno != ENOENT) {
        return listen_err(url, "checking the socket path", errno);
    }

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return gsb__err(GSB_EIO, "cannot create a socket: %s", strerror(errno));
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int err = errno;
        close(fd);
        return listen_err(url, err == ENOENT ? "its directory does not exist" : "bind", err);
    }
    /* private before listen(): until then nobody can connect, so there is no
     * window in which other users could */
    if (chmod(u->path, 0600) != 0 || listen(fd, SOCK_BACKLOG) != 0) {
        int err = errno;
        close(fd);
        unlink(u->path);
        return listen_err(url, "chmod/listen", err);
    }
    if (bound_url) {
        size_t n = strlen(u->path) + 8;
        char *s = malloc(n);
        if (!s) {
            close(fd);
            unlink(u->path);
            return gsb__err(GSB_ENOMEM, "out of memory");
        }
        snprintf(s, n, "%s%s", u->path[0] == '/' ? "unix://" : "unix:", u->path);
        *bound_url = s;
    }
    *out_fd = fd;
    return GSB_OK;
}

/* "tcp://addr:port" of a bound socket (IPv6 in brackets) */
static int tcp_bound_url(int fd, char **out)
{
    struct sockaddr_storage ss;
    socklen_t l = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &l) != 0)
        return gsb__err(GSB_EIO, "getsockname failed: %s", strerror(errno));
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    int g = getnameinfo((struct sockaddr *)&ss, l, host, sizeof host, serv, sizeof serv,
                        NI_NUMERICHOST | NI_NUMERICSERV);
    if (g != 0)
        return gsb__err(GSB_EIO, "getnameinfo failed: %s", gai_strerror(g));
    int v6 = strchr(host, ':') != NULL;
    size_t n = strlen(host) + strlen(serv) + 16;
    char *s = malloc(n);
    if (!s)
        return gsb__err(GSB_ENOMEM, "out of memory");
    snprintf(s, n, v6 ? "tcp://[%s]:%s" : "tcp://%s:%s", host, serv);
    *out = s;
    return GSB_OK;
}

int gsb__sock_listen(const char *url, int *out_fd, char **bound_url)
{
    *out_fd = -1;
    if (bound_url)
        *bound_url = NULL;
    gsb__sockaddr_url u;
    GSB_TRY(gsb__url_parse(url, &u));
    if (u.is_unix)
        return listen_unix(url, &u, out_fd, bound_url);

    char port[8];
    snprintf(port, sizeof port, "%d", u.port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int g = getaddrinfo(u.host, port, &hints, &res);
    if (g != 0)
        return gsb__err(GSB_EIO, "cannot listen on %.*s: cannot resolve host '%s': %s",
                        (int)strcspn(url, "?"), url, u.host,
                        g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
    int fd = -1, last_err = EADDRNOTAVAIL;
    const char *last_what = "bind";
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last_err = errno;
            last_what = "socket";
            continue;
        }
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
            last_what = "SO_REUSEADDR";
        } else if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            last_what = "bind";
        } else if (listen(fd, SOCK_BACKLOG) != 0) {
            last_what = "listen";
        } else {
            break;
        }
        last_err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return listen_err(url, last_what, last_err);
    /* accepted sockets inherit the listener's buffer sizes and (on Linux)
     * TCP_NODELAY */
    int rc = set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
    if (rc == GSB_OK)
        rc = set_tcp_buffers(fd);
    if (rc == GSB_OK && bound_url)
        rc = tcp_bound_url(fd, bound_url);
    if (rc != GSB_OK) {
        close(fd);
        return rc;
    }
    *out_fd = fd;
    return GSB_OK;
}
#else /* _WIN32: the client-only build connects over TCP; it never listens */

#include <pthread.h>

static pthread_once_t wsa_once = PTHREAD_ONCE_INIT;
static int wsa_status = -1;

static void wsa_start(void)
{
    WSADATA wd;
    wsa_status = WSAStartup(MAKEWORD(2, 2), &wd);
}

int gsb__net_init(void)
{
    pthread_once(&wsa_once, wsa_start);
    if (wsa_status != 0)
        return gsb__err(GSB_EIO, "cannot start Winsock 2.2 (WSAStartup error %d)", wsa_status);
    return GSB_OK;
}

const char *gsb__net_strerror(int err, char *buf, size_t n)
{
    DWORD len = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
                               (DWORD)err, 0, buf, (DWORD)n, NULL);
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    if (len == 0)
        snprintf(buf, n, "Winsock error %d", err);
    return buf;
}

static int connect_err(const char *url, int err)
{
    size_t len = strcspn(url, "?");
    const char *hint = err == WSAECONNREFUSED ? "is gsbd running? (connection refused)"
                       : err == WSAETIMEDOUT  ? "timed out (is the host reachable and gsbd "
                                                "running? a firewall?)"
                       : err == WSAEHOSTUNREACH || err == WSAENETUNREACH
                           ? "the host is unreachable"
                           : NULL;
    char buf[256];
    return gsb__err(GSB_EIO, "cannot connect to %.*s: %s", (int)len, url,
                    hint ? hint : gsb__net_strerror(err, buf, sizeof buf));
}

static int set_opt(SOCKET fd, int level, int opt, int v, const char *name)
{
    if (setsockopt(fd, level, opt, (const char *)&v, sizeof v) != 0) {
        char buf[256];
        return gsb__err(GSB_EIO, "setsockopt(%s) failed: %s", name,
                        gsb__net_strerror(WSAGetLastError(), buf, sizeof buf));
    }
    return GSB_OK;
}

int gsb__sock_connect(const char *url, int *out_fd)
{
    *out_fd = -1;
    GSB_TRY(gsb__net_init());
    gsb__sockaddr_url u;
    GSB_TRY(gsb__url_parse(url, &u));
    if (u.is_unix)
        return gsb__err(GSB_EUNSUPPORTED, "cannot connect to %.*s: the Windows client of gsb "
                        "speaks TCP only; use tcp://host:port (e.g. tcp://127.0.0.1:7878 for "
                        "a gsbd in WSL2)", (int)strcspn(url, "?"), url);
    char port[8];
    snprintf(port, sizeof port, "%d", u.port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int g = getaddrinfo(u.host, port, &hints, &res);
    if (g != 0) {
        char buf[256];
        return gsb__err(GSB_EIO, "cannot connect to %.*s: cannot resolve host '%s': %s",
                        (int)strcspn(url, "?"), url, u.host,
                        gsb__net_strerror(g, buf, sizeof buf));
    }
    int last_err = WSAECONNREFUSED;
    SOCKET fd = INVALID_SOCKET;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd == INVALID_SOCKET) {
            last_err = WSAGetLastError();
            continue;
        }
        if (connect(fd, ai->ai_addr, (int)ai->ai_addrlen) == 0)
            break;
        last_err = WSAGetLastError();
        closesocket(fd);
        fd = INVALID_SOCKET;
    }
    freeaddrinfo(res);
    if (fd == INVALID_SOCKET)
        return connect_err(url, last_err);
    int rc = set_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
    if (rc == GSB_OK)
        rc = set_opt(fd, SOL_SOCKET, SO_SNDBUF, SOCK_BUF_BYTES, "SO_SNDBUF");
    if (rc == GSB_OK)
        rc = set_opt(fd, SOL_SOCKET, SO_RCVBUF, SOCK_BUF_BYTES, "SO_RCVBUF");
    if (rc != GSB_OK) {
        closesocket(fd);
        return rc;
    }
    *out_fd = (int)fd; /* kernel handles fit in 32 bits (see compat.h) */
    return GSB_OK;
}

int gsb__sock_listen(const char *url, int *out_fd, char **bound_url)
{
    *out_fd = -1;
    *bound_url = NULL;
    return gsb__err(GSB_EUNSUPPORTED, "cannot listen on %s: this is the Windows client build of "
                    "libgsb: run gsbd on Linux or in WSL2", url);
}
#endif
