/*
 * compat.h - the few socket differences between POSIX and Windows (Winsock),
 * so wire.c, sock.c and session/remote.c stay one code base.  The Windows build is
 * the client-only libgsb (GSB_CLIENT_ONLY, windows/CMakeLists.txt): it
 * connects over TCP only; Unix sockets and shared memory are not offered.
 *
 * Sockets are kept in an int on both sides: Winsock SOCKET values are kernel
 * handles, which Windows guarantees fit in 32 bits.
 */
#ifndef GSB_NET_COMPAT_H
#define GSB_NET_COMPAT_H

#include <stddef.h>

#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>

/* the POSIX scatter/gather element, for wire.h's API (Winsock uses WSABUF) */
struct iovec {
    void *iov_base;
    size_t iov_len;
};

#define gsb__poll WSAPoll
/* the last socket error (a WSAE* code) */
#define gsb__sock_errno() WSAGetLastError()
static inline int gsb__sock_close(int s) { return closesocket((SOCKET)(size_t)s); }
/* WSAStartup once per process; GSB_EIO with a message when Winsock is missing. */
int gsb__net_init(void);
/* the CRT of Windows has no strndup */
#include <stdlib.h>
#include <string.h>
static inline char *gsb__strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}
#define strndup gsb__strndup
/* A message for a WSAE* code, in buf. */
const char *gsb__net_strerror(int err, char *buf, size_t n);
#else
#include <poll.h>
#include <sys/uio.h>
#include <errno.h>
#include <unistd.h>

#define gsb__poll poll
#define gsb__sock_errno() errno
static inline int gsb__sock_close(int s) { return close(s); }
static inline int gsb__net_init(void) { return 0; }
#endif

#endif
