/*
 * admit.c - who gets a connection slot (docs/REMOTE.md, "Limits").
 *
 * Ordinary slots: max_connections in all, max_connections_per_peer for one
 * peer (a local user, counted by uid on Unix sockets and loopback TCP alike,
 * or a remote address; peer.c).  A connection that finds the server or its
 * peer at the limit is not reset: it takes one of reserved_connections
 * reserved slots, where the connection thread learns what it is:
 *
 *   - HTTP: /health and /metrics are answered as usual, anything else gets
 *     503 with the reason (http.c);
 *   - a valid HELLO (right version, right token): an ordinary slot is made
 *     for it by closing the connection idle longest whose session holds
 *     nothing (no model, data or shared memory: its client reconnects
 *     unharmed), of the same peer when the peer is at its limit; when none
 *     is idle, a trusted client (the server's token, or on a server without
 *     one the server's own user) stays in the reserved slot at the server's
 *     cap; anyone else gets an ERROR frame saying which limit and which flag.
 *
 * When the reserved slots are taken too, the refuser (refuse.c) answers with
 * the reason and closes.  Counts live under srv->lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/error.h"
#include "server/server.h"

#define EVICT_MIN_IDLE_S 1.0 /* a client that just logged in is about to send its request */
#define PEER_BUCKETS 256

typedef struct peer_count {
    char key[sizeof ((gsb__peer *)0)->key];
    int n;
    struct peer_count *next;
} peer_count;

struct gsb__peers {
    peer_count *b[PEER_BUCKETS];
};

int gsb__peers_create(gsb__peers **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}

void gsb__peers_free(gsb__peers *p)
{
    if (!p)
        return;
    for (int i = 0; i < PEER_BUCKETS; i++)
        while (p->b[i]) {
            peer_count *e = p->b[i];
            p->b[i] = e->next;
            free(e);
        }
    free(p);
}

static peer_count **slot_of(gsb__peers *p, const char *key)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (const unsigned char *k = (const unsigned char *)key; *k; k++)
        h = (h ^ *k) * 16777619u;
    peer_count **pp = &p->b[h % PEER_BUCKETS];
    while (*pp && strcmp((*pp)->key, key) != 0)
        pp = &(*pp)->next;
    return pp;
}

static int peer_n(gsb__peers *p, const char *key)
{
    peer_count *e = *slot_of(p, key);
    return e ? e->n : 0;
}

/* +1 or -1; GSB_ENOMEM when a new peer's entry cannot be made */
static int peer_add(gsb__peers *p, const char *key, int d)
{
    peer_count **pp = slot_of(p, key);
    if (!*pp) {
        if (d < 0)
            return GSB_OK;
        peer_count *e = calloc(1, sizeof *e);
        if (!e)
            return GSB_ENOMEM;
        snprintf(e->key, sizeof e->key, "%s", key);
        *pp = e;
    }
    (*pp)->n += d;
    if ((*pp)->n <= 0) {
        peer_count *e = *pp;
        *pp = e->next;
        free(e);
    }
    return GSB_OK;
}

int gsb__admit(gsb_server *srv, gsb__conn *c)
{
    const gsb__srv_opts *o = &srv->opt;
    c->limit = GSB__LIMIT_NONE;
    if (peer_n(srv->peers, c->peer.key) >= o->max_per_peer)
        c->limit = GSB__LIMIT_PEER;
    else if (srv->n_normal >= o->max_connections)
        c->limit = GSB__LIMIT_CAP;
    if (c->limit != GSB__LIMIT_NONE && srv->n_reserved >= o->reserved_connections)
        return GSB__ADMIT_REFUSE;
    if (peer_add(srv->peers, c->peer.key, +1) != GSB_OK) {
        c->limit = GSB__LIMIT_MEMORY;
        return GSB__ADMIT_REFUSE;
    }
    c->slot = c->limit == GSB__LIMIT_NONE ? GSB__SLOT_NORMAL : GSB__SLOT_RESERVED;
    if (c->slot == GSB__SLOT_NORMAL)
        srv->n_normal++;
    else
        srv->n_reserved++;
    return c->slot == GSB__SLOT_NORMAL ? GSB__ADMIT_NORMAL : GSB__ADMIT_RESERVED;
}

void gsb__admit_release(gsb_server *srv, gsb__conn *c)
{
    peer_add(srv->peers, c->peer.key, -1);
    if (c->slot == GSB__SLOT_NORMAL)
        srv->n_normal--;
    else
        srv->n_reserved--;
}

void gsb__limit_message(const gsb_server *srv, const gsb__conn *c, int counted, char *buf,
                        size_t n)
{
    const gsb__srv_opts *o = &srv->opt;
    if (c->limit == GSB__LIMIT_PEER)
        snprintf(buf, n, "gsbd refused the connection: %s already has %d connections open, the "
                 "limit for one peer (--max-connections-per-peer %d)%s. Close idle ones, or "
                 "raise the limit",
                 c->peer.key, peer_n(srv->peers, c->peer.key) - (counted ? 1 : 0),
                 o->max_per_peer,
                 counted ? "" : ", and the reserved slots where an idle one could be closed "
                                "for this one are busy");
    else if (c->limit == GSB__LIMIT_MEMORY)
        snprintf(buf, n, "gsbd refused the connection: out of memory");
    else if (!counted)
        snprintf(buf, n, "gsbd is at its connection limit: %d connections are open "
                 "(--max-connections %d) and its %d reserved slots are busy. Retry later, or "
                 "raise --max-connections",
                 srv->n_normal, o->max_connections, o->reserved_connections);
    else
        snprintf(buf, n, "gsbd is at its connection limit: %d connections are open "
                 "(--max-connections %d) and none is idle with nothing in its session to make "
                 "room; of its %d reserved slots, one is kept for /health and the others admit "
                 "only clients presenting the server's token (on a server without a token: of "
                 "the server's own user). Retry later, or raise --max-connections",
                 srv->n_normal, o->max_connections, o->reserved_connections);
}

/* The connection idle longest (at least EVICT_MIN_IDLE_S) whose session
 * holds nothing, of peer key when key is given, marked evicted and shut
 * down (its thread wakes and closes); NULL when there is none. */
static gsb__conn *evict_one(gsb_server *srv, const char *key)
{
    uint64_t cutoff = gsb__now_us() - (uint64_t)(EVICT_MIN_IDLE_S * 1e6);
    for (;;) {
        gsb__conn *best = NULL;
        uint64_t best_t = cutoff;
        for (gsb__conn *v = srv->conns; v; v = v->next) {
            uint64_t t = atomic_load(&v->idle_since_us);
            if (atomic_load(&v->state) != GSB__CS_IDLE || t > best_t ||
                (key && strcmp(v->peer.key, key) != 0) || !gsb__ssess_empty(v->sess))
                continue;
            best = v;
            best_t = t;
        }
        if (!best)
            return NULL;
        int idle = GSB__CS_IDLE;
        /* the victim may be waking for a request this instant: then it is
         * busy and another is looked for */
        if (atomic_compare_exchange_strong(&best->state, &idle, GSB__CS_EVICTED)) {
            shutdown(best->fd, SHUT_RDWR);
            return best;
        }
    }
}

int gsb__admit_login(gsb_server *srv, gsb__conn *c, int trusted)
{
    const gsb__srv_opts *o = &srv->opt;
    char msg[600];
    pthread_mutex_lock(&srv->lock);
    /* limits as they are now (c itself is counted for its peer) */
    int over_peer = peer_n(srv->peers, c->peer.key) > o->max_per_peer;
    c->limit = over_peer ? GSB__LIMIT_PEER
               : srv->n_normal >= o->max_connections ? GSB__LIMIT_CAP : GSB__LIMIT_NONE;
    gsb__conn *victim = NULL;
    if (c->limit != GSB__LIMIT_NONE)
        victim = evict_one(srv, over_peer ? c->peer.key : NULL);
    /* a trusted login may stay in a reserved slot while one is left for /health */
    int ok = c->limit == GSB__LIMIT_NONE || victim ||
             (c->limit == GSB__LIMIT_CAP && trusted && srv->n_reserved < o->reserved_connections);
    if (ok && (c->limit == GSB__LIMIT_NONE || victim)) {
        c->slot = GSB__SLOT_NORMAL; /* the victim's slot, freed as it closes */
        srv->n_reserved--;
        srv->n_normal++;
    }
    if (!ok)
        gsb__limit_message(srv, c, 1, msg, sizeof msg);
    uint64_t victim_id = victim ? victim->id : 0;
    pthread_mutex_unlock(&srv->lock);
    if (victim_id) {
        atomic_fetch_add(&srv->metrics.conns_evicted, 1);
        gsb__logf(&srv->log, GSB__LOG_INFO, "idle connection closed for a new one",
                  "conn=%llu for=%llu peer=%s", (unsigned long long)victim_id,
                  (unsigned long long)c->id, gsb__log_q((char[80]){0}, 80, c->peer.key));
    }
    if (!ok) {
        atomic_fetch_add(&srv->metrics.conns_refused, 1);
        atomic_fetch_add(&srv->metrics.refused_by[c->limit], 1);
        return gsb__err(GSB_EIO, "%s", msg);
    }
    return GSB_OK;
}
