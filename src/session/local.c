/*
 * local.c - the engine in this process as a session (local.h): each entry
 * of the session interface takes the model's lock and runs the engine
 * (core/dispatch.c for calls, core/params.c for parameters, core/blob.c and
 * core/store.c for persistence, core/data.c and core/arena.c for data
 * handles and the arena).
 */
#include "session/local.h"

#include <stdlib.h>
#include <string.h>

#include "core/blob.h"
#include "core/budget.h"
#include "core/dispatch.h"
#include "core/store.h"
#include "multidev/devset.h"
#include "multidev/multidev.h"

/* ---- the session ------------------------------------------------------------ */

/* The value of `key` in the URL's query ("local?device=cuda&memory_cap=1G")
 * into buf; 0 when absent (or too long for buf). */
static int query_value(const char *url, const char *key, char *buf, size_t len)
{
    const char *q = url ? strchr(url, '?') : NULL;
    size_t klen = strlen(key);
    while (q && *q) {
        q++; /* past '?' or '&' */
        const char *end = strchr(q, '&');
        size_t n = end ? (size_t)(end - q) : strlen(q);
        if (n > klen && strncmp(q, key, klen) == 0 && q[klen] == '=') {
            if (n - klen - 1 >= len)
                return 0;
            memcpy(buf, q + klen + 1, n - klen - 1);
            buf[n - klen - 1] = '\0';
            return 1;
        }
        q = end;
    }
    return 0;
}

/* The URL's memory_cap=, else $GSB_GPU_MEMORY_CAP, else none. */
static int open_memory_cap(gsb_session *s, const char *url)
{
    char buf[64];
    if (query_value(url, "memory_cap", buf, sizeof buf))
        return gsb__parse_bytes(buf, "memory_cap", &s->memory_cap);
    const char *env = getenv("GSB_GPU_MEMORY_CAP");
    if (env && *env)
        return gsb__parse_bytes(env, "GSB_GPU_MEMORY_CAP", &s->memory_cap);
    return GSB_OK;
}

/* Several devices (multidev/devset.h): the session computes on the first
 * (the GPU for a cuda set); fits with a multi-device form use them all. */
static int open_devset(gsb_session *s, const char *device)
{
    gsb__devset *ds;
    GSB_TRY(gsb__devset_open(device, &ds));
    ds->fit = gsb__multidev_fit;
    s->devset = ds;
    s->impl = ds;
    s->impl_free = gsb__devset_free;
    s->gpu = ds->cuda ? ds->be[0] : NULL;
    s->device = ds->cuda ? GSB__DEVICE_CUDA : GSB__DEVICE_CPU;
    return GSB_OK;
}

/* The URL's device=, else $GSB_DEVICE, else auto; the memory cap. */
static int local_open(gsb_session *s, const char *url)
{
    const char *device = getenv("GSB_DEVICE");
    char dbuf[96];
    if (!device || !*device)
        device = "auto";
    if (url && *url) {
        if (strncmp(url, "local", 5) != 0 || (url[5] != '\0' && url[5] != '?'))
            return gsb__err(GSB_EINVAL,
                            "unknown session URL '%s': expected \"local\", "
                            "\"local?device=cpu|cuda|auto\", \"tcp://host:port\" or "
                            "\"unix:///path\"",
                            url);
        if (query_value(url, "device", dbuf, sizeof dbuf))
            device = dbuf;
        else if (strstr(url, "device="))
            device = strstr(url, "device=") + 7; /* too long: named in the error below */
    }
    GSB_TRY(open_memory_cap(s, url));
    if (gsb__devset_is_set(device))
        return open_devset(s, device);
    int mode = strcmp(device, "cpu") == 0    ? GSB__DEVICE_CPU
               : strcmp(device, "cuda") == 0 ? GSB__DEVICE_CUDA
               : strcmp(device, "auto") == 0 ? GSB__DEVICE_AUTO
                                             : -1;
    if (mode < 0)
        return gsb__err(GSB_EINVAL, "unknown device '%s': expected cpu, cuda, auto, cuda:all, "
                        "cuda:I,J,... or cpu:N", device);
    const gsb__backend *gpu = mode == GSB__DEVICE_CPU ? NULL : gsb__cuda_backend();
    if (mode == GSB__DEVICE_CUDA && !gpu)
        return gsb__err(GSB_EUNSUPPORTED, "device 'cuda' requested but %s; use device=cpu or "
                        "device=auto", gsb__cuda_unavailable_reason());
    s->gpu = gpu;
    s->device = gpu ? mode : GSB__DEVICE_CPU;
    return GSB_OK;
}

static int local_info(gsb_session *s, char **out_json)
{
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
    if (s->memory_cap)
        json_object_set_new(o, "memory_cap", json_integer((json_int_t)s->memory_cap));
    if (s->devset) { /* several devices: which, how their statistics travel, and the
                      * fits' collectives so far (count, bytes per rank, wall seconds) */
        gsb__devset *ds = s->devset;
        pthread_mutex_lock(&ds->warn_lock);
        json_t *coll = json_pack("{s:I, s:I, s:f}", "calls", (json_int_t)ds->coll_calls,
                                 "bytes", (json_int_t)ds->coll_bytes, "seconds",
                                 ds->coll_seconds);
        pthread_mutex_unlock(&ds->warn_lock);
        json_object_set_new(o, "devices", json_pack("{s:s, s:i, s:s, s:o*}", "set", ds->label,
                                                    "ranks", ds->n, "comm", ds->comm->name,
                                                    "collectives", coll));
    }
    gsb__copy_stats cs;
    if (g && g->ops->copy_stats && g->ops->copy_stats(g, &cs) == GSB_OK)
        json_object_set_new(o, "copies",
                            json_pack("{s:I, s:I, s:I, s:I}", "h2d_count",
                                      (json_int_t)cs.h2d_count, "h2d_bytes",
                                      (json_int_t)cs.h2d_bytes, "d2h_count",
                                      (json_int_t)cs.d2h_count, "d2h_bytes",
                                      (json_int_t)cs.d2h_bytes));
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

/* ---- models ------------------------------------------------------------------ */

static int local_model_create(gsb_session *s, const gsb__estimator_desc *est,
                              const char *params_json, gsb__model **out)
{
    json_t *update;
    GSB_TRY(gsb__json_parse_object(params_json, &update));
    gsb__model *m = NULL;
    int rc = gsb__model_new(s, est, &m);
    if (rc == GSB_OK) {
        rc = gsb__params_update(est->name, est->params, m->params, update);
        if (rc != GSB_OK)
            gsb__model_destroy(m);
        else
            *out = m;
    }
    json_decref(update);
    return rc;
}

static int local_set_params(gsb__model *m, const char *params_json)
{
    json_t *update;
    GSB_TRY(gsb__json_parse_object(params_json, &update));
    pthread_mutex_lock(&m->lock);
    int rc = gsb__params_update(m->est->name, m->est->params, m->params, update);
    pthread_mutex_unlock(&m->lock);
    json_decref(update);
    return rc;
}

static int local_get_params(gsb__model *m, char **out_json)
{
    pthread_mutex_lock(&m->lock);
    int rc = gsb__json_dump(m->params, out_json);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int local_set_meta(gsb__model *m, const char *json_object)
{
    json_t *meta;
    GSB_TRY(gsb__json_parse_object(json_object, &meta));
    pthread_mutex_lock(&m->lock);
    json_decref(m->meta);
    m->meta = meta;
    pthread_mutex_unlock(&m->lock);
    return GSB_OK;
}

static int local_get_meta(gsb__model *m, char **out_json)
{
    pthread_mutex_lock(&m->lock);
    int rc = m->meta ? gsb__json_dump(m->meta, out_json)
                     : ((*out_json = strdup("{}")) ? GSB_OK
                                                    : gsb__err(GSB_ENOMEM, "out of memory"));
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int local_call(gsb__model *m, const char *method, const gsb_array *const *inputs,
                      int n_inputs, const char *options_json, gsb_result **out)
{
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

static int local_get_attr(gsb__model *m, const char *name, gsb_result **out)
{
    pthread_mutex_lock(&m->lock);
    int rc = GSB_OK;
    gsb__nlist one = {0};
    const gsb__tensor *t = gsb__nlist_get(&m->attrs, name);
    if (!m->fitted) {
        rc = gsb__err(GSB_ENOTFITTED,
                      "This %s instance is not fitted yet. Call 'fit' with appropriate "
                      "arguments before using this estimator.",
                      m->est->name);
    } else if (!t || name[0] == '_') {
        rc = gsb__err(GSB_ENOTFOUND, "'%s' object has no attribute '%s'", m->est->name, name);
    } else {
        gsb__tensor copy;
        rc = gsb__tensor_to_host(t, &copy);
        if (rc == GSB_OK)
            rc = gsb__nlist_put(&one, name, &copy);
    }
    pthread_mutex_unlock(&m->lock);
    if (rc != GSB_OK) {
        gsb__nlist_clear(&one);
        return rc;
    }
    return gsb__result_from(&one, out);
}

static int local_list_attrs(gsb__model *m, char **out_json)
{
    json_t *arr = json_array();
    if (!arr)
        return gsb__err(GSB_ENOMEM, "out of memory");
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < m->attrs.n; i++)
        if (m->attrs.names[i][0] != '_')
            json_array_append_new(arr, json_string(m->attrs.names[i]));
    pthread_mutex_unlock(&m->lock);
    int rc = gsb__json_dump(arr, out_json);
    json_decref(arr);
    return rc;
}

/* ---- persistence ------------------------------------------------------------- */

static int local_export(gsb__model *m, void **out_bytes, size_t *out_len)
{
    pthread_mutex_lock(&m->lock);
    int rc = gsb__blob_write_user(m->est->name, m->params, m->meta, &m->attrs, m->fitted,
                                  out_bytes, out_len);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int local_import(gsb_session *s, const void *bytes, size_t len, gsb__model **out)
{
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
        rc = gsb__params_update(est->name, est->params, m->params, params);
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
    } else if (m) {
        gsb__model_destroy(m);
    }
    gsb__nlist_clear(&attrs);
    json_decref(params);
    json_decref(meta);
    free(name);
    return rc;
}

static int local_save(gsb__model *m, const char *name)
{
    void *blob;
    size_t len;
    GSB_TRY(local_export(m, &blob, &len));
    gsb__store *st;
    int rc = store_acquire(m->session, &st);
    if (rc == GSB_OK) {
        rc = gsb__store_put(st, name, m->est->name, blob, len);
        pthread_mutex_unlock(&m->session->store_lock);
    }
    free(blob);
    return rc;
}

static int local_load(gsb_session *s, const char *name, gsb__model **out)
{
    gsb__store *st;
    void *blob = NULL;
    size_t len = 0;
    GSB_TRY(store_acquire(s, &st));
    int rc = gsb__store_get(st, name, &blob, &len);
    pthread_mutex_unlock(&s->store_lock);
    if (rc == GSB_OK)
        rc = local_import(s, blob, len, out);
    free(blob);
    return rc;
}

static int local_remove(gsb_session *s, const char *name)
{
    gsb__store *st;
    GSB_TRY(store_acquire(s, &st));
    int rc = gsb__store_delete(st, name);
    pthread_mutex_unlock(&s->store_lock);
    return rc;
}

static int local_list(gsb_session *s, char **out_json)
{
    gsb__store *st;
    GSB_TRY(store_acquire(s, &st));
    int rc = gsb__store_list(st, out_json);
    pthread_mutex_unlock(&s->store_lock);
    return rc;
}

/* ---- the arena --------------------------------------------------------------- */

static int local_arena_alloc(gsb_session *s, size_t nbytes, void **out)
{
    return gsb__arena_alloc(s->gpu, &s->arena, nbytes, out);
}

static int local_arena_free(gsb_session *s, void *p)
{
    return gsb__arena_free(s->gpu, &s->arena, p) == GSB_OK;
}

const gsb__session_vtab gsb__local_session = {
    .open = local_open,
    .info = local_info,
    .model_create = local_model_create,
    .model_release = NULL, /* the model object is all there is */
    .set_params = local_set_params,
    .get_params = local_get_params,
    .set_meta = local_set_meta,
    .get_meta = local_get_meta,
    .call = local_call,
    .get_attr = local_get_attr,
    .list_attrs = local_list_attrs,
    .export_blob = local_export,
    .import_blob = local_import,
    .save = local_save,
    .load = local_load,
    .remove = local_remove,
    .list = local_list,
    .data_put = gsb__data_fill_local,
    .data_release = NULL, /* the handle's storage is all there is */
    .arena_alloc = local_arena_alloc,
    .arena_free = local_arena_free,
};
