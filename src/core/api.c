/*
 * api.c - the public C API (gsb.h): sessions, models, results, parameters,
 * persistence.  Each entry point clears the thread's error message and
 * checks its arguments; on a remote session it hands over to its twin in
 * src/net/client.c (net/remote.h), else takes the model's lock and runs the
 * engine in this process.
 */
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/blob.h"
#include "core/data.h"
#include "core/dispatch.h"
#include "core/model.h"
#include "core/store.h"
#include "net/remote.h"

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

#define ARG_CHECK(cond, what)                                                  \
    do {                                                                       \
        if (!(cond))                                                           \
            return gsb__err(GSB_EINVAL, "%s: %s must not be NULL", __func__, what); \
    } while (0)

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

static int open_remote(const char *url, gsb_session **out)
{
    gsb_session *s = calloc(1, sizeof *s);
    if (!s)
        return gsb__err(GSB_ENOMEM, "out of memory");
    int rc = gsb__remote_open(url, &s->remote);
    if (rc != GSB_OK) {
        free(s);
        return rc;
    }
    s->be = gsb__cpu_backend(); /* results arrive as host tensors */
    s->device = GSB__DEVICE_CPU;
    pthread_mutex_init(&s->store_lock, NULL);
    pthread_mutex_init(&s->data_lock, NULL);
    gsb__arena_init(&s->arena);
    atomic_init(&s->refs, 1);
    *out = s;
    return GSB_OK;
}

int gsb_open(const char *url, gsb_session **out)
{
    gsb__err_clear();
    ARG_CHECK(out, "out");
    *out = NULL;
    /* the URL's device=, else $GSB_DEVICE, else auto */
    const char *device = getenv("GSB_DEVICE");
    if (!device || !*device)
        device = "auto";
    if (url && (strncmp(url, "tcp://", 6) == 0 || strncmp(url, "unix://", 7) == 0))
        return open_remote(url, out);
#ifdef GSB_CLIENT_ONLY
    /* no engine in this build (src/client/client_only.c) */
    return gsb__err(GSB_EUNSUPPORTED, "cannot open '%s': this is the Windows client build of "
                    "libgsb: open a tcp:// session to a gsbd", url && *url ? url : "local");
#endif
    if (url && *url) {
        if (strncmp(url, "local", 5) != 0 || (url[5] != '\0' && url[5] != '?'))
            return gsb__err(GSB_EINVAL,
                            "unknown session URL '%s': expected \"local\", "
                            "\"local?device=cpu|cuda|auto\", \"tcp://host:port\" or "
                            "\"unix:///path\"",
                            url);
        const char *q = strstr(url, "device=");
        if (q)
            device = q + 7;
    }
    int mode = strcmp(device, "cpu") == 0    ? GSB__DEVICE_CPU
               : strcmp(device, "cuda") == 0 ? GSB__DEVICE_CUDA
               : strcmp(device, "auto") == 0 ? GSB__DEVICE_AUTO
                                             : -1;
    if (mode < 0)
        return gsb__err(GSB_EINVAL, "unknown device '%s': expected cpu, cuda or auto", device);
    const gsb__backend *gpu = mode == GSB__DEVICE_CPU ? NULL : gsb__cuda_backend();
    if (mode == GSB__DEVICE_CUDA && !gpu)
        return gsb__err(GSB_EUNSUPPORTED, "device 'cuda' requested but %s; use device=cpu or "
                        "device=auto", gsb__cuda_unavailable_reason());

    gsb_session *s = calloc(1, sizeof *s);
    if (!s)
        return gsb__err(GSB_ENOMEM, "out of memory");
    s->be = gsb__cpu_backend();
    s->gpu = gpu;
    s->device = gpu ? mode : GSB__DEVICE_CPU;
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
    if (s->remote)
        gsb__remote_close(s->remote);
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
    if (s->remote)
        return gsb__remote_info(s->remote, out_json);
    const gsb__backend *gpu = gsb__session_backend(s, INT64_MAX / 4, 1);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s?}", "transport", "local", "version",
                          GSB_VERSION_STRING, "device",
                          s->device == GSB__DEVICE_CPU    ? "cpu"
                          : s->device == GSB__DEVICE_CUDA ? "cuda"
                                                          : "auto",
                          "backend", gpu->name, "gpu", s->gpu ? s->gpu->device : NULL);
    if (!o)
        return gsb__err(GSB_ENOMEM, "out of memory");
    size_t free_b = 0, total_b = 0;
    const gsb__backend *g = s->gpu;
    if (g && g->ops->mem_info && g->ops->mem_info(g, &free_b, &total_b) == GSB_OK)
        json_object_set_new(o, "gpu_memory", json_pack("{s:I, s:I}", "total",
                                                       (json_int_t)total_b, "free",
                                                       (json_int_t)free_b));
    gsb__err_clear();
    int rc = gsb__json_dump(o, out_json);
    json_decref(o);
    return rc;
}

/* Open the session's store on first use. Returns it locked; unlock after. */
static int store_acquire(gsb_session *s, gsb__store **out)
{
    pthread_mutex_lock(&s->store_lock);
    if (!s->store) {
        int rc = gsb__store_open(s->data_dir, &s->store);
        if (rc != GSB_OK) {
            pthread_mutex_unlock(&s->store_lock);
            return rc;
        }
    }
    *out = s->store;
    return GSB_OK;
}

/* ---- models -------------------------------------------------------------- */

int gsb__model_new(gsb_session *s, const gsb__estimator_desc *est, gsb__model **out)
{
    gsb__model *m = calloc(1, sizeof *m);
    if (!m)
        return gsb__err(GSB_ENOMEM, "out of memory");
    m->session = s;
    m->est = est;
    m->params = gsb__params_defaults(est);
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

/* Names the original project offered that this engine does not implement yet. */
static const char *const planned[] = {"Lasso", "ElasticNet",
                                      "RandomForestClassifier", "RandomForestRegressor",
                                      "TSNE", "UMAP", NULL};

int gsb__find_estimator(const char *name, const gsb__estimator_desc **out)
{
    *out = gsb__registry_find(name);
    if (*out)
        return GSB_OK;
    for (const char *const *p = planned; *p; p++)
        if (strcmp(*p, name) == 0)
            return gsb__err(GSB_EUNSUPPORTED, "estimator '%s' is not implemented in gsb %s yet",
                            name, GSB_VERSION_STRING);
    return gsb__err(GSB_ENOTFOUND, "unknown estimator '%s' (gsb info lists the estimators)",
                    name);
}

int gsb_model_create(gsb_session *s, const char *estimator, const char *params_json,
                     gsb_model **out)
{
    gsb__err_clear();
    ARG_CHECK(s && estimator && out, "session, estimator and out");
    *out = NULL;
    const gsb__estimator_desc *est;
    GSB_TRY(gsb__find_estimator(estimator, &est));
    if (s->remote)
        return gsb__remote_model_create(s, est, params_json, out);
    json_t *update;
    GSB_TRY(gsb__json_parse_object(params_json, &update));
    gsb__model *m = NULL;
    int rc = gsb__model_new(s, est, &m);
    if (rc == GSB_OK) {
        rc = gsb__params_update(est, m->params, update);
        if (rc != GSB_OK)
            gsb_model_free(m);
        else
            *out = m;
    }
    json_decref(update);
    return rc;
}

void gsb_model_free(gsb_model *m)
{
    if (!m)
        return;
    if (m->session->remote)
        gsb__remote_model_free(m);
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

int gsb_model_set_params(gsb_model *m, const char *params_json)
{
    gsb__err_clear();
    ARG_CHECK(m, "model");
    if (m->session->remote)
        return gsb__remote_set_params(m, params_json);
    json_t *update;
    GSB_TRY(gsb__json_parse_object(params_json, &update));
    pthread_mutex_lock(&m->lock);
    int rc = gsb__params_update(m->est, m->params, update);
    pthread_mutex_unlock(&m->lock);
    json_decref(update);
    return rc;
}

int gsb_model_get_params(const gsb_model *m, char **out_json)
{
    gsb__err_clear();
    ARG_CHECK(m && out_json, "model and out_json");
    if (m->session->remote)
        return gsb__remote_get_params((gsb__model *)m, out_json);
    pthread_mutex_lock((pthread_mutex_t *)&m->lock);
    int rc = gsb__json_dump(m->params, out_json);
    pthread_mutex_unlock((pthread_mutex_t *)&m->lock);
    return rc;
}

#define GSB__META_MAX (1 << 20)

int gsb_model_set_meta(gsb_model *m, const char *json_object)
{
    gsb__err_clear();
    ARG_CHECK(m && json_object, "model and json_object");
    if (strlen(json_object) > GSB__META_MAX)
        return gsb__err(GSB_EINVAL, "model metadata is larger than %d bytes", GSB__META_MAX);
    if (m->session->remote)
        return gsb__remote_set_meta(m, json_object);
    json_t *meta;
    GSB_TRY(gsb__json_parse_object(json_object, &meta));
    pthread_mutex_lock(&m->lock);
    json_decref(m->meta);
    m->meta = meta;
    pthread_mutex_unlock(&m->lock);
    return GSB_OK;
}

int gsb_model_get_meta(const gsb_model *m, char **out_json)
{
    gsb__err_clear();
    ARG_CHECK(m && out_json, "model and out_json");
    gsb__model *mm = (gsb__model *)m;
    if (mm->session->remote)
        return gsb__remote_get_meta(mm, out_json);
    pthread_mutex_lock(&mm->lock);
    int rc = mm->meta ? gsb__json_dump(mm->meta, out_json)
                      : ((*out_json = strdup("{}")) ? GSB_OK
                                                     : gsb__err(GSB_ENOMEM, "out of memory"));
    pthread_mutex_unlock(&mm->lock);
    return rc;
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

/* ---- calls --------------------------------------------------------------- */

int gsb_model_call(gsb_model *m, const char *method, const gsb_array *const *inputs,
                   int n_inputs, const char *options_json, gsb_result **out)
{
    gsb__err_clear();
    ARG_CHECK(m && method, "model and method");
    if (out)
        *out = NULL;
    if (n_inputs < 0 || (n_inputs > 0 && !inputs))
        return gsb__err(GSB_EINVAL, "invalid input list");
    if (m->session->remote)
        return gsb__remote_call(m, method, inputs, n_inputs, options_json, out);
    json_t *options;
    GSB_TRY(gsb__json_parse_object(options_json, &options));
    gsb__nlist results = {0};
    pthread_mutex_lock(&m->lock);
    int rc = gsb__dispatch(m, method, inputs, n_inputs, options, &results);
    pthread_mutex_unlock(&m->lock);
    json_decref(options);
    if (rc != GSB_OK || !out) {
        gsb__nlist_clear(&results);
        return rc;
    }
    return gsb__result_from(&results, out);
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
    gsb__model *mm = (gsb__model *)m;
    if (mm->session->remote)
        return gsb__remote_get_attr(mm, name, out);
    pthread_mutex_lock(&mm->lock);
    int rc = GSB_OK;
    gsb__nlist one = {0};
    const gsb__tensor *t = gsb__nlist_get(&mm->attrs, name);
    if (!mm->fitted) {
        rc = gsb__err(GSB_ENOTFITTED,
                      "This %s instance is not fitted yet. Call 'fit' with appropriate "
                      "arguments before using this estimator.",
                      mm->est->name);
    } else if (!t || name[0] == '_') {
        rc = gsb__err(GSB_ENOTFOUND, "'%s' object has no attribute '%s'", mm->est->name, name);
    } else {
        gsb__tensor copy;
        rc = gsb__tensor_to_host(t, &copy);
        if (rc == GSB_OK)
            rc = gsb__nlist_put(&one, name, &copy);
    }
    pthread_mutex_unlock(&mm->lock);
    if (rc != GSB_OK) {
        gsb__nlist_clear(&one);
        return rc;
    }
    return gsb__result_from(&one, out);
}

int gsb_model_list_attrs(const gsb_model *m, char **out_json)
{
    gsb__err_clear();
    ARG_CHECK(m && out_json, "model and out_json");
    gsb__model *mm = (gsb__model *)m;
    if (mm->session->remote)
        return gsb__remote_list_attrs(mm, out_json);
    json_t *arr = json_array();
    if (!arr)
        return gsb__err(GSB_ENOMEM, "out of memory");
    pthread_mutex_lock(&mm->lock);
    for (int i = 0; i < mm->attrs.n; i++)
        if (mm->attrs.names[i][0] != '_')
            json_array_append_new(arr, json_string(mm->attrs.names[i]));
    pthread_mutex_unlock(&mm->lock);
    int rc = gsb__json_dump(arr, out_json);
    json_decref(arr);
    return rc;
}

/* ---- persistence --------------------------------------------------------- */

int gsb_model_export(const gsb_model *m, void **out_bytes, size_t *out_len)
{
    gsb__err_clear();
    ARG_CHECK(m && out_bytes && out_len, "model, out_bytes and out_len");
    gsb__model *mm = (gsb__model *)m;
    if (mm->session->remote)
        return gsb__remote_export(mm, out_bytes, out_len);
    pthread_mutex_lock(&mm->lock);
    int rc = gsb__blob_write_user(mm->est->name, mm->params, mm->meta, &mm->attrs, mm->fitted,
                                  out_bytes, out_len);
    pthread_mutex_unlock(&mm->lock);
    return rc;
}

int gsb_model_import(gsb_session *s, const void *bytes, size_t len, gsb_model **out)
{
    gsb__err_clear();
    ARG_CHECK(s && bytes && out, "session, bytes and out");
    *out = NULL;
    if (s->remote)
        return gsb__remote_import(s, bytes, len, out);
    char *name = NULL;
    json_t *params = NULL, *meta = NULL;
    gsb__nlist attrs = {0};
    int fitted = 0;
    GSB_TRY(gsb__blob_read_user(bytes, len, &name, &params, &meta, &attrs, &fitted));
    const gsb__estimator_desc *est;
    gsb__model *m = NULL;
    int rc = gsb__find_estimator(name, &est);
    if (rc == GSB_OK)
        rc = gsb__model_new(s, est, &m);
    if (rc == GSB_OK) {
        /* stored parameters go through the same validation as user input */
        rc = gsb__params_update(est, m->params, params);
        if (rc != GSB_OK)
            rc = gsb__err(GSB_ECORRUPT, "model blob has invalid parameters: %s", gsb_errmsg());
    }
    if (rc == GSB_OK) {
        m->attrs = attrs;
        memset(&attrs, 0, sizeof attrs);
        m->meta = meta;
        meta = NULL;
        m->fitted = fitted;
        *out = m;
    } else {
        gsb_model_free(m);
    }
    gsb__nlist_clear(&attrs);
    json_decref(params);
    json_decref(meta);
    free(name);
    return rc;
}

int gsb_model_save(gsb_model *m, const char *name)
{
    gsb__err_clear();
    ARG_CHECK(m && name, "model and name");
    if (m->session->remote)
        return gsb__remote_save(m, name);
    void *blob;
    size_t len;
    GSB_TRY(gsb_model_export(m, &blob, &len));
    gsb__store *st;
    int rc = store_acquire(m->session, &st);
    if (rc == GSB_OK) {
        rc = gsb__store_put(st, name, m->est->name, blob, len);
        pthread_mutex_unlock(&m->session->store_lock);
    }
    free(blob);
    return rc;
}

int gsb_model_load(gsb_session *s, const char *name, gsb_model **out)
{
    gsb__err_clear();
    ARG_CHECK(s && name && out, "session, name and out");
    *out = NULL;
    if (s->remote)
        return gsb__remote_load(s, name, out);
    gsb__store *st;
    void *blob = NULL;
    size_t len = 0;
    GSB_TRY(store_acquire(s, &st));
    int rc = gsb__store_get(st, name, &blob, &len);
    pthread_mutex_unlock(&s->store_lock);
    if (rc == GSB_OK)
        rc = gsb_model_import(s, blob, len, out);
    free(blob);
    return rc;
}

int gsb_model_delete(gsb_session *s, const char *name)
{
    gsb__err_clear();
    ARG_CHECK(s && name, "session and name");
    if (s->remote)
        return gsb__remote_delete(s, name);
    gsb__store *st;
    GSB_TRY(store_acquire(s, &st));
    int rc = gsb__store_delete(st, name);
    pthread_mutex_unlock(&s->store_lock);
    return rc;
}

int gsb_model_list(gsb_session *s, char **out_json)
{
    gsb__err_clear();
    ARG_CHECK(s && out_json, "session and out_json");
    if (s->remote)
        return gsb__remote_list(s, out_json);
    gsb__store *st;
    GSB_TRY(store_acquire(s, &st));
    int rc = gsb__store_list(st, out_json);
    pthread_mutex_unlock(&s->store_lock);
    return rc;
}
