/*
 * peer.c - who is at the other end of an accepted connection, for the
 * per-peer connection limit and the reserved slots (admit.c).
 *
 * A Unix socket names its peer's user through SO_PEERCRED.  A TCP peer on
 * loopback is a process of this machine too: the kernel knows the user that
 * owns the client's socket, and sock_diag (the netlink interface `ss -e`
 * uses) answers for one exact 4-tuple without privileges.  So every local
 * client is counted by its user, whichever transport it takes, and a remote
 * one by its address.  When the lookup fails (no netlink in a sandbox) a
 * loopback client is counted by its address like a remote one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "server/server.h"

#define DIAG_TIMEOUT_MS 200 /* a netlink answer is immediate; never hold accepting up */

static int is_loopback(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
        return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    }
    if (a->ss_family == AF_INET6) {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(v6))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127;
    }
    return 0;
}

/* The uid owning the socket at the other end of a loopback connection whose
 * client end is peer and server end is local; -1 when it cannot be told. */
static long loopback_uid(const struct sockaddr_storage *peer, const struct sockaddr_storage *local)
{
    struct {
        struct nlmsghdr h;
        struct inet_diag_req_v2 r;
    } q;
    memset(&q, 0, sizeof q);
    q.h.nlmsg_len = sizeof q;
    q.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q.h.nlmsg_flags = NLM_F_REQUEST;
    q.r.sdiag_family = (uint8_t)peer->ss_family;
    q.r.sdiag_protocol = IPPROTO_TCP;
    q.r.idiag_states = ~0u;
    q.r.id.idiag_cookie[0] = q.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    /* the client's socket: its source is our peer, its destination us */
    if (peer->ss_family == AF_INET) {
        const struct sockaddr_in *p = (const void *)peer, *l = (const void *)local;
        q.r.id.idiag_sport = p->sin_port;
        q.r.id.idiag_dport = l->sin_port;
        memcpy(q.r.id.idiag_src, &p->sin_addr, 4);
        memcpy(q.r.id.idiag_dst, &l->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *p = (const void *)peer, *l = (const void *)local;
        q.r.id.idiag_sport = p->sin6_port;
        q.r.id.idiag_dport = l->sin6_port;
        memcpy(q.r.id.idiag_src, &p->sin6_addr, 16);
        memcpy(q.r.id.idiag_dst, &l->sin6_addr, 16);
    }
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -1;
    struct timeval tv = {0, DIAG_TIMEOUT_MS * 1000};
    setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    long uid = -1;
    union {
        struct nlmsghdr h;
        char b[1024];
    } ans;
    if (sendto(nl, &q, sizeof q, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)sizeof q) {
        ssize_t n;
        do
            n = recv(nl, &ans, sizeof ans, 0);
        while (n < 0 && errno == EINTR);
        if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) &&
            NLMSG_OK(&ans.h, (size_t)n) && ans.h.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
            const struct inet_diag_msg *m = NLMSG_DATA(&ans.h);
            uid = (long)m->idiag_uid;
        }
    }
    close(nl);
    return uid;
}

static void by_uid(gsb__peer *out, long uid)
{
    out->uid = uid;
    snprintf(out->key, sizeof out->key, "uid %ld", uid);
}

void gsb__peer_identify(int fd, int is_unix, gsb__peer *out)
{
    out->uid = -1;
    snprintf(out->key, sizeof out->key, "an unknown peer");
    if (is_unix) {
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && len == sizeof cr)
            by_uid(out, (long)cr.uid);
        return;
    }
    struct sockaddr_storage peer, local;
    socklen_t pl = sizeof peer, ll = sizeof local;
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 ||
        getsockname(fd, (struct sockaddr *)&local, &ll) != 0 ||
        (peer.ss_family != AF_INET && peer.ss_family != AF_INET6))
        return;
    if (is_loopback(&peer)) {
        long uid = loopback_uid(&peer, &local);
        if (uid >= 0) {
            by_uid(out, uid);
            return;
        }
    }
    char host[INET6_ADDRSTRLEN] = "?";
    const void *addr = peer.ss_family == AF_INET
                           ? (const void *)&((struct sockaddr_in *)&peer)->sin_addr
                           : (const void *)&((struct sockaddr_in6 *)&peer)->sin6_addr;
    inet_ntop(peer.ss_family, addr, host, sizeof host);
    snprintf(out->key, sizeof out->key, "address %s", host);
}
