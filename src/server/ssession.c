/*
 * ssession.c - server-side sessions (docs/PROTOCOL.md, "Server-side
 * sessions"): the handles (models, data, shared-memory segments) that a
 * client's connections share.  A session lives while a connection is joined
 * to it; the last one to leave frees everything it holds.
 *
 * Handles are reference counted: the table holds one reference and every
 * request using a handle holds one more, so a model.free or data.free from
 * one connection never frees what a call on another connection is reading;
 * the object goes when the last reference is dropped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/error.h"
#include "server/server.h"

static const char *kind_name(int kind)
{
    return kind == GSB__H_MODEL ? "model" : kind == GSB__H_DATA ? "data" : "shared-memory segment";
}

gsb__handle *gsb__handle_new(int kind)
{
    gsb__handle *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->kind = kind;
    h->refs = 1;
    pthread_mutex_init(&h->call_lock, NULL);
    return h;
}

static void handle_destroy(gsb__handle *h)
{
    if (h->model)
        gsb_model_free(h->model);
    if (h->data)
        gsb_data_free(h->data);
    if (h->shm)
        gsb__shm_unmap(h->shm);
    gsb__budget_give(h->budget, h->charge_kind, h->charge);
    pthread_mutex_destroy(&h->call_lock);
    free(h);
}

/* Handles' reference counts are guarded by one process-wide lock: a
 * put/get is a few instructions, and the handle may outlive its session's
 * table (a request still holding it after the table let go). */
static pthread_mutex_t refs_lock = PTHREAD_MUTEX_INITIALIZER;

void gsb__handle_put(gsb__handle *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&refs_lock);
    int last = --h->refs == 0;
    pthread_mutex_unlock(&refs_lock);
    if (last)
        handle_destroy(h);
}

static int random_id(char out[33])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t k = getrandom(b + got, sizeof b - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return gsb__err(GSB_EIO, "cannot draw a session id: getrandom: %s", strerror(errno));
        got += (size_t)k;
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return GSB_OK;
}

int gsb__ssess_create(struct gsb_server *srv, gsb__ssess **out)
{
    *out = NULL;
    gsb__ssess *s = calloc(1, sizeof *s);
    if (!s)
        return gsb__err(GSB_ENOMEM, "out of memory");
    int rc = random_id(s->id);
    if (rc != GSB_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->next_id = 1;
    s->conns = 1;
    pthread_mutex_lock(&srv->sess_lock);
    s->next = srv->sessions;
    srv->sessions = s;
    srv->n_sessions++;
    pthread_mutex_unlock(&srv->sess_lock);
    atomic_fetch_add(&srv->metrics.sessions_open, 1);
    *out = s;
    return GSB_OK;
}

int gsb__ssess_join(struct gsb_server *srv, const char *id, gsb__ssess **out)
{
    *out = NULL;
    pthread_mutex_lock(&srv->sess_lock);
    gsb__ssess *s = srv->sessions;
    /* ids are secrets (joining grants the session's handles): compare in
     * constant time like tokens */
    while (s && !gsb__ct_equal(id, strlen(id), s->id, strlen(s->id)))
        s = s->next;
    if (s)
        s->conns++;
    pthread_mutex_unlock(&srv->sess_lock);
    if (!s)
        return gsb__err(GSB_ENOTFOUND, "no server-side session '%.64s' to join (a session ends "
                        "when its last connection closes)", id);
    *out = s;
    return GSB_OK;
}

void gsb__ssess_leave(struct gsb_server *srv, gsb__ssess *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&srv->sess_lock);
    int last = --s->conns == 0;
    if (last) {
        gsb__ssess **pp = &srv->sessions;
        while (*pp && *pp != s)
            pp = &(*pp)->next;
        if (*pp)
            *pp = s->next;
        srv->n_sessions--;
    }
    pthread_mutex_unlock(&srv->sess_lock);
    if (!last)
        return;
    atomic_fetch_sub(&srv->metrics.sessions_open, 1);
    /* no connection is joined any more, so nothing else uses the table; shm
     * segments go last so no model or data refers to their pages */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < s->n; i++)
            if (s->h[i] && (s->h[i]->kind == GSB__H_SHM) == pass) {
                gsb__handle_put(s->h[i]);
                s->h[i] = NULL;
            }
    free(s->h);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int gsb__ssess_empty(gsb__ssess *s)
{
    if (!s)
        return 1;
    pthread_mutex_lock(&s->lock);
    int empty = s->n == 0;
    pthread_mutex_unlock(&s->lock);
    return empty;
}

static int find(const gsb__ssess *s, int kind, uint64_t id)
{
    for (int i = 0; i < s->n; i++)
        if (s->h[i]->kind == kind && s->h[i]->id == id)
            return i;
    return -1;
}

int gsb__ssess_add(gsb__ssess *s, gsb__handle *h)
{
    pthread_mutex_lock(&s->lock);
    int rc = GSB_OK;
    if (h->kind == GSB__H_SHM && find(s, h->kind, h->id) >= 0) {
        rc = gsb__err(GSB_EINVAL, "shared-memory segment %llu is already attached in this "
                      "session", (unsigned long long)h->id);
    } else if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        gsb__handle **p = realloc(s->h, (size_t)cap * sizeof *p);
        if (p) {
            s->h = p;
            s->cap = cap;
        } else {
            rc = gsb__err(GSB_ENOMEM, "out of memory");
        }
    }
    if (rc == GSB_OK) {
        if (h->kind != GSB__H_SHM)
            h->id = s->next_id++;
        s->h[s->n++] = h;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int gsb__ssess_get(gsb__ssess *s, int kind, uint64_t id, gsb__handle **out)
{
    pthread_mutex_lock(&s->lock);
    int i = find(s, kind, id);
    gsb__handle *h = i >= 0 ? s->h[i] : NULL;
    if (h) {
        pthread_mutex_lock(&refs_lock);
        h->refs++;
        pthread_mutex_unlock(&refs_lock);
    }
    pthread_mutex_unlock(&s->lock);
    *out = h;
    if (!h)
        return gsb__err(GSB_ENOTFOUND, "no %s with %s %llu in this session", kind_name(kind),
                        kind == GSB__H_SHM ? "id" : "handle", (unsigned long long)id);
    return GSB_OK;
}

int gsb__ssess_remove(gsb__ssess *s, int kind, uint64_t id)
{
    pthread_mutex_lock(&s->lock);
    int i = find(s, kind, id);
    gsb__handle *h = NULL;
    if (i >= 0) {
        h = s->h[i];
        s->h[i] = s->h[--s->n]; /* order does not matter */
    }
    pthread_mutex_unlock(&s->lock);
    if (!h)
        return gsb__err(GSB_ENOTFOUND, "no %s with %s %llu in this session", kind_name(kind),
                        kind == GSB__H_SHM ? "id" : "handle", (unsigned long long)id);
    gsb__handle_put(h);
    return GSB_OK;
}
