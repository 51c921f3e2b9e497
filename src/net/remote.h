/*
 * remote.h - the client side of remote sessions (tcp://, unix://): each
 * public API function of gsb.h has a twin here that api.c calls when the
 * session is remote.  Implemented in src/net/client.c over src/net/wire.h.
 *
 * A remote session keeps a pool of connections joined to one server-side
 * session (docs/PROTOCOL.md), so calls from several threads run
 * concurrently; each call checks a connection out for its request.  A model
 * of a remote session is a local gsb_model (est, session) whose remote_id
 * names the server's model; its fitted flag mirrors the server's after
 * every reply.  Errors arrive as the server's status and message unchanged;
 * transport failures are GSB_EIO naming the URL and what to check.
 */
#ifndef GSB_NET_REMOTE_H
#define GSB_NET_REMOTE_H

#include "core/model.h"

struct gsb__remote; /* opaque: connection pool, arena, URL */

/* url is "tcp://..." or "unix://..." with optional "?token_file=PATH".
 * Connects once (HELLO/WELCOME) so a bad URL or token fails here. */
int gsb__remote_open(const char *url, struct gsb__remote **out);
void gsb__remote_close(struct gsb__remote *r);
int gsb__remote_info(struct gsb__remote *r, char **out_json);

int gsb__remote_model_create(gsb_session *s, const gsb__estimator_desc *est,
                             const char *params_json, gsb__model **out);
/* Frees the server's model (best effort: a dead connection frees it anyway). */
void gsb__remote_model_free(gsb__model *m);
int gsb__remote_set_params(gsb__model *m, const char *params_json);
int gsb__remote_get_params(gsb__model *m, char **out_json);
int gsb__remote_set_meta(gsb__model *m, const char *json_object);
int gsb__remote_get_meta(gsb__model *m, char **out_json);
/* progress: m->progress is called for PROGRESS frames; a nonzero return or
 * m->cancel set from another thread sends CANCEL. */
int gsb__remote_call(gsb__model *m, const char *method, const gsb_array *const *inputs,
                     int n_inputs, const char *options_json, gsb_result **out);
int gsb__remote_get_attr(gsb__model *m, const char *name, gsb_result **out);
int gsb__remote_list_attrs(gsb__model *m, char **out_json);
int gsb__remote_export(gsb__model *m, void **out_bytes, size_t *out_len);
int gsb__remote_import(gsb_session *s, const void *bytes, size_t len, gsb__model **out);
int gsb__remote_save(gsb__model *m, const char *name);
int gsb__remote_load(gsb_session *s, const char *name, gsb__model **out);
int gsb__remote_delete(gsb_session *s, const char *name);
int gsb__remote_list(gsb_session *s, char **out_json);

/* d is allocated by data.c (magic, session, view set); fills d->remote_id. */
int gsb__remote_data_put(gsb_session *s, const gsb_array *a, struct gsb_data *d);
void gsb__remote_data_free(gsb_session *s, struct gsb_data *d);

/* Unix sessions: memory in a shared segment the server maps (zero copies);
 * TCP: ordinary aligned memory. */
int gsb__remote_arena_alloc(gsb_session *s, size_t nbytes, void **out);
/* 1 when p was a block of the session's arena (now freed), else 0 */
int gsb__remote_arena_free(gsb_session *s, void *p);

#endif
