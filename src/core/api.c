/*
 * api.c - the engine's session and model objects (model.h) and the parts of
 * the public C API (gsb.h) that are the same on every session: version,
 * arrays, results, a model's name, fitted flag, progress and cancel.  What
 * differs between a session in this process and one in a gsbd goes through
 * the session interface (src/session/): sessions, models' parameters, calls,
 * attributes and persistence, data handles, the arena.
 */
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "core/params.h"
#include "core/store.h"

/* ---- small things -------------------------------------------------------- */

const char *gsb_version(void) { return GSB_VERSION_STRING; }
void gsb_free(void *p) { free(p); }

gsb_array gsb_array_1d(void *data, gsb_dtype dtype, int64_t n)
{
    gsb_array a = {data, dtype, 1, {n, 0}, {0, 0}};
    return a;
}

gsb_array gsb_array_2d(void *data, gsb_dtype dtype, int64_t rows, int64_t cols)
{
    gsb_array a = {data, dtype, 2, {rows, cols}, {0, 0}};
    return a;
}

int gsb__json_parse_object(const char *text, json_t **out)
{
    *out = NULL;
    if (!text || !*text) {
        *out = json_object();
        return *out ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
    }
    json_error_t jerr;
    json_t *v = json_loads(text, 0, &jerr);
    if (!v)
        return gsb__err(GSB_EINVAL, "invalid JSON at line %d column %d: %s", jerr.line,
                        jerr.column, jerr.text);
    if (!json_is_object(v)) {
        json_decref(v);
        return gsb__err(GSB_EINVAL, "expected a JSON object");
    }
    *out = v;
    return GSB_OK;
}

int gsb__json_dump(const json_t *v, char **out)
{
    *out = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    return *out ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}

/* ---- sessions ------------------------------------------------------------ */

int gsb__session_new(gsb_session **out)
{
    *out = NULL;
    gsb_session *s = calloc(1, sizeof *s);
    if (!s)
        return gsb__err(GSB_ENOMEM, "out of memory");
    s->be = gsb__cpu_backend();
    s->device = GSB__DEVICE_CPU;
    pthread_mutex_init(&s->store_lock, NULL);
    pthread_mutex_init(&s->data_lock, NULL);
    gsb__arena_init(&s->arena);
    atomic_init(&s->refs, 1);
    *out = s;
    return GSB_OK;
}

void gsb__session_ref(gsb_session *s) { atomic_fetch_add(&s->refs, 1); }

static void session_destroy(gsb_session *s)
{
    if (s->impl_free)
        s->impl_free(s->impl);
    gsb__arena_release_all(s->gpu, &s->arena);
    if (s->store)
        gsb__store_close(s->store);
    pthread_mutex_destroy(&s->store_lock);
    pthread_mutex_destroy(&s->data_lock);
    free(s->data_dir);
    free(s);
}

void gsb__session_unref(gsb_session *s)
{
    if (atomic_fetch_sub(&s->refs, 1) == 1)
        session_destroy(s);
}

/* ---- models -------------------------------------------------------------- */

int gsb__model_new(gsb_session *s, const gsb__estimator_desc *est, gsb__model **out)
{
    gsb__model *m = calloc(1, sizeof *m);
    if (!m)
        return gsb__err(GSB_ENOMEM, "out of memory");
    m->session = s;
    m->est = est;
    m->params = gsb__params_defaults(est->params);
    if (!m->params) {
        free(m);
        return gsb__err(GSB_EINTERNAL, "bad default parameters for %s", est->name);
    }
    pthread_mutex_init(&m->lock, NULL);
    atomic_init(&m->cancel, 0);
    gsb__session_ref(s);
    *out = m;
    return GSB_OK;
}

int gsb__find_estimator(const char *name, const gsb__estimator_desc **out)
{
    *out = gsb__registry_find(name);
    if (*out)
        return GSB_OK;
    return gsb__err(GSB_ENOTFOUND, "unknown estimator '%s' (gsb info lists the estimators)",
                    name);
}

void gsb__model_drop_devstate(gsb__model *m)
{
    if (m->devstate && m->devstate_free)
        m->devstate_free(m->devstate);
    m->devstate = NULL;
    m->devstate_free = NULL;
}

void gsb__model_destroy(gsb__model *m)
{
    gsb__model_drop_devstate(m);
    gsb__nlist_clear(&m->attrs);
    json_decref(m->params);
    json_decref(m->meta);
    pthread_mutex_destroy(&m->lock);
    gsb_session *s = m->session;
    free(m);
    gsb__session_unref(s);
}

const char *gsb_model_estimator(const gsb_model *m) { return m ? m->est->name : NULL; }

int gsb_model_is_fitted(const gsb_model *m)
{
    if (!m)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&m->lock);
    int f = m->fitted;
    pthread_mutex_unlock((pthread_mutex_t *)&m->lock);
    return f;
}

void gsb_model_set_progress(gsb_model *m, gsb_progress_fn fn, void *data)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->progress = fn;
    m->progress_data = data;
    pthread_mutex_unlock(&m->lock);
}

void gsb_model_cancel(gsb_model *m)
{
    if (m)
        atomic_store(&m->cancel, 1);
}

/* ---- results ------------------------------------------------------------- */

struct gsb_result {
    gsb__nlist list;
    gsb_array *views;
};

int gsb__result_from(gsb__nlist *list, gsb_result **out)
{
    gsb_result *r = calloc(1, sizeof *r);
    gsb_array *views = r ? calloc((size_t)(list->n ? list->n : 1), sizeof *views) : NULL;
    if (!views) {
        free(r);
        gsb__nlist_clear(list);
        return gsb__err(GSB_ENOMEM, "out of memory");
    }
    for (int i = 0; i < list->n; i++) {
        const gsb__tensor *t = &list->items[i];
        gsb_array *a = &views[i];
        a->data = t->data;
        a->dtype = t->dtype;
        a->ndim = t->ndim;
        a->shape[0] = t->ndim >= 1 ? t->rows : 0;
        a->shape[1] = t->ndim == 2 ? t->cols : 0;
        if (t->ndim == 1)
            a->shape[0] = t->rows * t->cols;
    }
    r->list = *list;
    memset(list, 0, sizeof *list);
    r->views = views;
    *out = r;
    return GSB_OK;
}

int gsb_result_count(const gsb_result *r) { return r ? r->list.n : 0; }

const char *gsb_result_name(const gsb_result *r, int i)
{
    return r && i >= 0 && i < r->list.n ? r->list.names[i] : NULL;
}

const gsb_array *gsb_result_array(const gsb_result *r, int i)
{
    return r && i >= 0 && i < r->list.n ? &r->views[i] : NULL;
}

const gsb_array *gsb_result_get(const gsb_result *r, const char *name)
{
    for (int i = 0; r && name && i < r->list.n; i++)
        if (strcmp(r->list.names[i], name) == 0)
            return &r->views[i];
    return NULL;
}

void gsb_result_free(gsb_result *r)
{
    if (!r)
        return;
    gsb__nlist_clear(&r->list);
    free(r->views);
    free(r);
}
