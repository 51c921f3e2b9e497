/*
 * api.c - the public C API (gsb.h) for sessions, models, data handles and
 * the arena, dispatched through the session interface (session.h).  Each
 * entry point clears the thread's error message (gsb_model_call its warnings
 * too), checks its arguments, keeps
 * the bookkeeping every kind of session shares (model and data-handle
 * objects, the session's references) and calls the session's table for the
 * rest.  The URL picks the table at gsb_open: tcp:// and unix:// a gsbd
 * (remote.c), anything else the engine in this process (local.c).
 */
#include <stdlib.h>
#include <string.h>

#include "core/warn.h"
#include "session/remote.h"
#include "session/session.h"
#ifndef GSB_CLIENT_ONLY
#include "session/local.h"
#endif

#define ARG_CHECK(cond, what)                                                  \
    do {                                                                       \
        if (!(cond))                                                           \
            return gsb__err(GSB_EINVAL, "%s: %s must not be NULL", __func__, what); \
    } while (0)

/* ---- sessions ------------------------------------------------------------ */

static int is_remote_url(const char *url)
{
    return url && (strncmp(url, "tcp://", 6) == 0 || strncmp(url, "unix://", 7) == 0);
}

int gsb_open(const char *url, gsb_session **out)
{
    gsb__err_clear();
    ARG_CHECK(out, "out");
    *out = NULL;
    const gsb__session_vtab *vt;
    if (is_remote_url(url)) {
        vt = &gsb__remote_session;
    } else {
#ifdef GSB_CLIENT_ONLY
        /* no engine in this build (src/client/client_only.c) */
        return gsb__err(GSB_EUNSUPPORTED, "cannot open '%s': this is the Windows client build "
                        "of libgsb: open a tcp:// session to a gsbd", url && *url ? url : "local");
#else
        vt = &gsb__local_session;
#endif
    }
    gsb_session *s;
    GSB_TRY(gsb__session_new(&s));
    s->vt = vt;
    int rc = vt->open(s, url);
    if (rc != GSB_OK) {
        gsb__session_unref(s);
        return rc;
    }
    *out = s;
    return GSB_OK;
}

void gsb_close(gsb_session *s)
{
    if (s)
        gsb__session_unref(s);
}

int gsb_session_info(gsb_session *s, char **out_json)
{
    gsb__err_clear();
    ARG_CHECK(s && out_json, "session and out_json");
    *out_json = NULL;
    return s->vt->info(s, out_json);
}

/* ---- models -------------------------------------------------------------- */

int gsb_model_create(gsb_session *s, const char *estimator, const char *params_json,
                     gsb_model **out)
{
    gsb__err_clear();
    ARG_CHECK(s && estimator && out, "session, estimator and out");
    *out = NULL;
    const gsb__estimator_desc *est;
    GSB_TRY(gsb__find_estimator(estimator, &est));
    return s->vt->model_create(s, est, params_json, out);
}

void gsb_model_free(gsb_model *m)
{
    if (!m)
        return;
    if (m->session->vt->model_release)
        m->session->vt->model_release(m);
    gsb__model_destroy(m);
}

int gsb_model_set_params(gsb_model *m, const char *params_json)
{
    gsb__err_clear();
    ARG_CHECK(m, "model");
    return m->session->vt->set_params(m, params_json);
}

int gsb_model_get_params(const gsb_model *m, char **out_json)
{
    gsb__err_clear();
    ARG_CHECK(m && out_json, "model and out_json");
    return m->session->vt->get_params((gsb__model *)m, out_json);
}

#define GSB__META_MAX (1 << 20)

int gsb_model_set_meta(gsb_model *m, const char *json_object)
{
    gsb__err_clear();
    ARG_CHECK(m && json_object, "model and json_object");
    if (strlen(json_object) > GSB__META_MAX)
        return gsb__err(GSB_EINVAL, "model metadata is larger than %d bytes", GSB__META_MAX);
    return m->session->vt->set_meta(m, json_object);
}

int gsb_model_get_meta(const gsb_model *m, char **out_json)
{
    gsb__err_clear();
    ARG_CHECK(m && out_json, "model and out_json");
    return m->session->vt->get_meta((gsb__model *)m, out_json);
}

/* ---- calls and attributes ------------------------------------------------ */

int gsb_model_call(gsb_model *m, const char *method, const gsb_array *const *inputs,
                   int n_inputs, const char *options_json, gsb_result **out)
{
    gsb__err_clear();
    gsb__warn_clear();
    ARG_CHECK(m && method, "model and method");
    if (out)
        *out = NULL;
    if (n_inputs < 0 || (n_inputs > 0 && !inputs))
        return gsb__err(GSB_EINVAL, "invalid input list");
    return m->session->vt->call(m, method, inputs, n_inputs, options_json, out);
}

int gsb_model_fit(gsb_model *m, const gsb_array *X, const gsb_array *y)
{
    const gsb_array *in[2] = {X, y};
    return gsb_model_call(m, "fit", in, y ? 2 : 1, NULL, NULL);
}

int gsb_model_get_attr(const gsb_model *m, const char *name, gsb_result **out)
{
    gsb__err_clear();
    ARG_CHECK(m && name && out, "model, name and out");
    *out = NULL;
    return m->session->vt->get_attr((gsb__model *)m, name, out);
}

int gsb_model_list_attrs(const gsb_model *m, char **out_json)
{
    gsb__err_clear();
    ARG_CHECK(m && out_json, "model and out_json");
    return m->session->vt->list_attrs((gsb__model *)m, out_json);
}

/* ---- persistence --------------------------------------------------------- */

int gsb_model_export(const gsb_model *m, void **out_bytes, size_t *out_len)
{
    gsb__err_clear();
    ARG_CHECK(m && out_bytes && out_len, "model, out_bytes and out_len");
    *out_bytes = NULL;
    *out_len = 0;
    return m->session->vt->export_blob((gsb__model *)m, out_bytes, out_len);
}

int gsb_model_import(gsb_session *s, const void *bytes, size_t len, gsb_model **out)
{
    gsb__err_clear();
    ARG_CHECK(s && bytes && out, "session, bytes and out");
    *out = NULL;
    return s->vt->import_blob(s, bytes, len, out);
}

int gsb_model_save(gsb_model *m, const char *name)
{
    gsb__err_clear();
    ARG_CHECK(m && name, "model and name");
    return m->session->vt->save(m, name);
}

int gsb_model_load(gsb_session *s, const char *name, gsb_model **out)
{
    gsb__err_clear();
    ARG_CHECK(s && name && out, "session, name and out");
    *out = NULL;
    return s->vt->load(s, name, out);
}

int gsb_model_delete(gsb_session *s, const char *name)
{
    gsb__err_clear();
    ARG_CHECK(s && name, "session and name");
    return s->vt->remove(s, name);
}

int gsb_model_list(gsb_session *s, char **out_json)
{
    gsb__err_clear();
    ARG_CHECK(s && out_json, "session and out_json");
    *out_json = NULL;
    return s->vt->list(s, out_json);
}

/* ---- data handles -------------------------------------------------------- */

int gsb_data_put(gsb_session *s, const gsb_array *a, gsb_data **out)
{
    gsb__err_clear();
    if (!s || !a || !out)
        return gsb__err(GSB_EINVAL, "gsb_data_put: session, array and out must not be NULL");
    *out = NULL;
    if (gsb__is_data_ref(a))
        return gsb__err(GSB_EINVAL, "gsb_data_put: the array is already a data handle");
    struct gsb_data *d = NULL;
    GSB_TRY(gsb__data_new(s, a, &d));
    int rc = s->vt->data_put(s, a, d);
    if (rc != GSB_OK) {
        gsb__data_destroy(d); /* frees d and its session reference */
        return rc;
    }
    gsb__data_stream_commit(d);
    *out = d;
    return GSB_OK;
}

void gsb_data_free(gsb_data *d)
{
    if (!d || d->magic != GSB__DATA_MAGIC)
        return;
    gsb_session *s = d->session;
    gsb__data_unlink(d);
    if (s->vt->data_release)
        s->vt->data_release(s, d);
    gsb__data_destroy(d);
}

/* ---- the arena ----------------------------------------------------------- */

int gsb_arena_alloc(gsb_session *s, size_t nbytes, void **out)
{
    gsb__err_clear();
    if (!s || !out)
        return gsb__err(GSB_EINVAL, "gsb_arena_alloc: session and out must not be NULL");
    *out = NULL;
    GSB_TRY(s->vt->arena_alloc(s, nbytes, out));
    gsb__session_ref(s); /* a block keeps its session */
    return GSB_OK;
}

void gsb_arena_free(gsb_session *s, void *p)
{
    if (!s || !p)
        return;
    if (s->vt->arena_free(s, p))
        gsb__session_unref(s);
}
