/*
 * session.h - the session interface: what the public API (gsb.h) does on a
 * session, as a table of functions with one implementation per kind of
 * session, the way SQLite's VFS and ggml's RPC backend sit beside their
 * local twins:
 *   local.c   the engine in this process ("local", "local?device=...");
 *   remote.c  a gsbd over its wire protocol (tcp://, unix://; src/net/).
 *
 * src/session/api.c implements gsb.h's session, model, data-handle and arena
 * functions on top of it: it clears the thread's error message, checks the
 * arguments, keeps the bookkeeping every kind shares (the session, model and
 * data-handle objects of core/model.h and core/data.h, and their references)
 * and calls the session's table for the rest.  The engine (src/core) includes
 * nothing from here and never calls through the table: it does not know how
 * the API reaches it, nor that a network exists.
 *
 * Contract: errors are a gsb_status with the thread's message (gsb__err);
 * arguments arrive checked as gsb.h promises (non-NULL where required, *out
 * already NULL).  A model is a gsb__model made with gsb__model_new, whatever
 * the kind; impl_id is the implementation's to use.  Calls on one model are
 * serialised by the implementation (m->lock), as a local call is.
 */
#ifndef GSB_SESSION_SESSION_H
#define GSB_SESSION_SESSION_H

#include "core/data.h"
#include "core/model.h"

typedef struct gsb__session_vtab {
    /* Set up s (from gsb__session_new; vt already set) for url; on failure
     * gsb_open drops s.  State of its own goes in s->impl, with s->impl_free
     * to free it when the session's last reference goes: that is the close,
     * and it may come long after gsb_close (a model freed later). */
    int (*open)(gsb_session *s, const char *url);
    int (*info)(gsb_session *s, char **out_json);

    /* ---- models: est was looked up by gsb__find_estimator */
    int (*model_create)(gsb_session *s, const gsb__estimator_desc *est, const char *params_json,
                        gsb__model **out);
    /* What the implementation holds for m besides the object (a gsbd's
     * model), released just before gsb__model_destroy; best effort, keeping
     * the thread's message.  NULL: nothing to release. */
    void (*model_release)(gsb__model *m);
    int (*set_params)(gsb__model *m, const char *params_json);
    int (*get_params)(gsb__model *m, char **out_json);
    int (*set_meta)(gsb__model *m, const char *json_object); /* size already checked */
    int (*get_meta)(gsb__model *m, char **out_json);
    /* progress: m->progress for each step; m->cancel (set from another
     * thread) or a nonzero progress return stops the call */
    int (*call)(gsb__model *m, const char *method, const gsb_array *const *inputs, int n_inputs,
                const char *options_json, gsb_result **out /* may be NULL */);
    int (*get_attr)(gsb__model *m, const char *name, gsb_result **out);
    int (*list_attrs)(gsb__model *m, char **out_json);
    int (*export_blob)(gsb__model *m, void **out_bytes, size_t *out_len);
    int (*import_blob)(gsb_session *s, const void *bytes, size_t len, gsb__model **out);

    /* ---- the session's model store */
    int (*save)(gsb__model *m, const char *name);
    int (*load)(gsb_session *s, const char *name, gsb__model **out);
    int (*remove)(gsb_session *s, const char *name);
    int (*list)(gsb_session *s, char **out_json);

    /* ---- data handles: d comes from gsb__data_new (session, dtype, shape);
     * put fills it with a's contents (a is no handle); release is
     * model_release's twin for a handle leaving the live set. */
    int (*data_put)(gsb_session *s, const gsb_array *a, struct gsb_data *d);
    void (*data_release)(gsb_session *s, struct gsb_data *d);

    /* ---- the arena (gsb_arena_alloc): free answers 1 when p was a block
     * of s's arena (now freed), else 0 */
    int (*arena_alloc)(gsb_session *s, size_t nbytes, void **out);
    int (*arena_free)(gsb_session *s, void *p);
} gsb__session_vtab;

#endif
