/*
 * ops.c - one function per REQUEST op of docs/PROTOCOL.md.  Each is a thin
 * wrapper around the public API (gsb.h) on the server's one local session:
 * read the head (every field checked), look handles up in the connection's
 * server-side session (holding a reference while in use), call the engine,
 * and fill the reply head and arrays.  No engine logic lives here.
 */
#include <stdlib.h>
#include <string.h>

#include "core/data.h"
#include "core/error.h"
#include "server/server.h"

const char *const gsb__op_names[GSB__N_OPS] = {
    "ping",           "info",          "model.create",     "model.free",
    "model.call",     "model.get_attr", "model.list_attrs", "model.set_params",
    "model.get_params", "model.set_meta", "model.get_meta",  "model.export",
    "model.import",   "store.save",    "store.load",       "store.delete",
    "store.list",     "data.put",      "data.free",        "shm.attach",
    "shm.detach",     "other"};

int gsb__op_lookup(const char *name)
{
    for (int i = 0; i < GSB__OP_OTHER; i++)
        if (strcmp(name, gsb__op_names[i]) == 0)
            return i;
    return -1;
}

/* ---- reading the head -------------------------------------------------------- */

static int head_handle(const gsb__req *rq, const char *key, uint64_t *out)
{
    const json_t *v = json_object_get(rq->head, key);
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return gsb__err(GSB_EINVAL, "%s: \"%s\" must be a handle (an integer >= 1)",
                        gsb__op_names[rq->op], key);
    *out = (uint64_t)json_integer_value(v);
    return GSB_OK;
}

static int head_string(const gsb__req *rq, const char *key, const char **out)
{
    *out = json_string_value(json_object_get(rq->head, key));
    if (!*out)
        return gsb__err(GSB_EINVAL, "%s: \"%s\" must be a string", gsb__op_names[rq->op], key);
    return GSB_OK;
}

/* An optional JSON object field as text for the API (NULL when absent). */
static int head_object_text(const gsb__req *rq, const char *key, char **out)
{
    *out = NULL;
    const json_t *v = json_object_get(rq->head, key);
    if (!v || json_is_null(v))
        return GSB_OK;
    if (!json_is_object(v))
        return gsb__err(GSB_EINVAL, "%s: \"%s\" must be a JSON object", gsb__op_names[rq->op], key);
    *out = json_dumps(v, JSON_COMPACT);
    return *out ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}

/* text JSON the API returned (freed here) -> reply[key] */
static int set_json_text(json_t *reply, const char *key, char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    gsb_free(text);
    if (!v)
        return gsb__err(GSB_EINTERNAL, "the engine returned invalid JSON: %s", jerr.text);
    return json_object_set_new(reply, key, v) == 0 ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}

static int set_new(json_t *reply, const char *key, json_t *v)
{
    if (!v || json_object_set_new(reply, key, v) != 0)
        return gsb__err(GSB_ENOMEM, "out of memory");
    return GSB_OK;
}

static int model_handle(gsb__conn *c, const gsb__req *rq, gsb__handle **out)
{
    uint64_t id = 0;
    GSB_TRY(head_handle(rq, "model", &id));
    return gsb__ssess_get(c->sess, GSB__H_MODEL, id, out);
}

/* A new model from the engine into the session's table; reply {model, estimator, fitted}. */
static int adopt_model(gsb__conn *c, gsb_model *m, gsb__reply *rp)
{
    gsb__handle *h = gsb__handle_new(GSB__H_MODEL);
    if (!h) {
        gsb_model_free(m);
        return gsb__err(GSB_ENOMEM, "out of memory");
    }
    h->model = m;
    int rc = gsb__ssess_add(c->sess, h);
    if (rc != GSB_OK) {
        gsb__handle_put(h);
        return rc;
    }
    GSB_TRY(set_new(rp->head, "model", json_integer((json_int_t)h->id)));
    GSB_TRY(set_new(rp->head, "estimator", json_string(gsb_model_estimator(m))));
    return set_new(rp->head, "fitted", json_boolean(gsb_model_is_fitted(m)));
}

/* Result arrays -> reply {names, arrays}; the result stays alive in rp until sent. */
static int reply_result(gsb__reply *rp, gsb_result *res)
{
    rp->res = res;
    json_t *names = json_array();
    GSB_TRY(set_new(rp->head, "names", names));
    for (int i = 0; i < gsb_result_count(res); i++) {
        if (json_array_append_new(names, json_string(gsb_result_name(res, i))) != 0)
            return gsb__err(GSB_ENOMEM, "out of memory");
        GSB_TRY(gsb__outmsg_add(&rp->out, gsb_result_array(res, i)));
    }
    rp->has_out = 1;
    return GSB_OK;
}

/* The warnings of the call just made on this thread (gsb_warnings()), into
 * the reply head as "warnings" when there are any. */
static int reply_warnings(gsb__reply *rp)
{
    json_t *w = json_loads(gsb_warnings(), 0, NULL);
    if (!json_is_array(w) || json_array_size(w) == 0) {
        json_decref(w);
        return GSB_OK;
    }
    return set_new(rp->head, "warnings", w);
}

/* Engine arrays only: uint8 is for model blobs. */
static int check_engine_arrays(const gsb__req *rq)
{
    for (int i = 0; i < rq->n; i++)
        if (rq->wa[i].at != GSB__AT_NONE && rq->wa[i].at != GSB__AT_DATA &&
            rq->wa[i].dtype == GSB__WIRE_U8)
            return gsb__err(GSB_EINVAL, "%s: array %d is uint8, which only model blobs use; send "
                            "float32, float64, int32 or int64", gsb__op_names[rq->op], i);
    return GSB_OK;
}

/* Exactly one given array, holding bytes (not a data handle). */
static int one_array(const gsb__req *rq)
{
    if (rq->n != 1 || rq->wa[0].at == GSB__AT_NONE)
        return gsb__err(GSB_EINVAL, "%s: \"arrays\" must hold exactly one array",
                        gsb__op_names[rq->op]);
    if (rq->wa[0].at == GSB__AT_DATA)
        return gsb__err(GSB_EINVAL, "%s: the array must be sent (inline, chunks or shm), not "
                        "named by a data handle", gsb__op_names[rq->op]);
    return GSB_OK;
}

/* ---- the ops ------------------------------------------------------------------------- */

static int op_info(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    (void)rq;
    char *info;
    GSB_TRY(gsb_info_json(&info));
    GSB_TRY(set_json_text(rp->head, "info", info));
    return set_new(rp->head, "health", gsb__health_json(c->srv));
}

static int op_model_create(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    const char *est;
    char *params;
    GSB_TRY(head_string(rq, "estimator", &est));
    GSB_TRY(head_object_text(rq, "params", &params));
    gsb_model *m;
    int rc = gsb_model_create(c->srv->local, est, params, &m);
    free(params);
    GSB_TRY(rc);
    return adopt_model(c, m, rp);
}

static int op_model_free(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    (void)rp;
    uint64_t id = 0;
    GSB_TRY(head_handle(rq, "model", &id));
    return gsb__ssess_remove(c->sess, GSB__H_MODEL, id);
}

static int op_model_call(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    const char *method;
    GSB_TRY(head_string(rq, "method", &method));
    GSB_TRY(check_engine_arrays(rq));
    const json_t *pv = json_object_get(rq->head, "progress");
    if (pv && !json_is_boolean(pv))
        return gsb__err(GSB_EINVAL, "model.call: \"progress\" must be true or false");
    char *options;
    GSB_TRY(head_object_text(rq, "options", &options));
    gsb__handle *h;
    int rc = model_handle(c, rq, &h);
    if (rc != GSB_OK) {
        free(options);
        return rc;
    }
    gsb__call_ctx x = {c, rq->id, json_is_true(pv), 0, 0.0};
    gsb_result *res = NULL;
    /* one call per model at a time: the progress hook is per model, and
     * another connection of the session may call the same model */
    pthread_mutex_lock(&h->call_lock);
    gsb_model_set_progress(h->model, gsb__conn_progress, &x);
    rc = gsb_model_call(h->model, method, rq->ptrs, rq->n, options, &res);
    gsb_model_set_progress(h->model, NULL, NULL);
    pthread_mutex_unlock(&h->call_lock);
    free(options);
    if (x.cancelled) {
        /* logged before counted: whoever sees the count (/metrics, tests) finds the line */
        gsb__logf(&c->srv->log, GSB__LOG_INFO, "call cancelled",
                  "conn=%llu req=%llu method=%.64s by=%s", (unsigned long long)c->id,
                  (unsigned long long)rq->id, method,
                  x.cancelled == 1 ? "cancel" : x.cancelled == 2 ? "vanished_client" : "bad_frame");
        atomic_fetch_add(&c->srv->metrics.cancelled, 1);
    }
    if (rc == GSB_OK)
        rc = reply_warnings(rp);
    if (rc == GSB_OK)
        rc = set_new(rp->head, "fitted", json_boolean(gsb_model_is_fitted(h->model)));
    gsb__handle_put(h);
    if (rc != GSB_OK) {
        gsb_result_free(res);
        return rc;
    }
    if (!res) /* the engine gives a result for every successful call; be safe */
        return set_new(rp->head, "names", json_array());
    return reply_result(rp, res);
}

static int op_model_get_attr(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    const char *name;
    GSB_TRY(head_string(rq, "name", &name));
    gsb__handle *h;
    GSB_TRY(model_handle(c, rq, &h));
    gsb_result *res = NULL;
    int rc = gsb_model_get_attr(h->model, name, &res);
    if (rc == GSB_OK)
        rc = set_new(rp->head, "fitted", json_boolean(gsb_model_is_fitted(h->model)));
    gsb__handle_put(h);
    if (rc != GSB_OK) {
        gsb_result_free(res);
        return rc;
    }
    return reply_result(rp, res);
}

/* ops of the form "text JSON from the API on a model -> reply[key]" */
typedef int (*model_json_fn)(const gsb_model *m, char **out);

/* The reply of an op on h's model whose last API call returned rc and text
 * (the API's allocation, or NULL): reply[key] = text and reply.fitted; h is
 * released and text consumed either way. */
static int reply_model_text(gsb__reply *rp, gsb__handle *h, int rc, const char *key, char *text)
{
    if (rc == GSB_OK)
        rc = set_new(rp->head, "fitted", json_boolean(gsb_model_is_fitted(h->model)));
    gsb__handle_put(h);
    if (rc != GSB_OK) {
        gsb_free(text);
        return rc;
    }
    return set_json_text(rp->head, key, text);
}

static int model_json(gsb__conn *c, gsb__req *rq, gsb__reply *rp, model_json_fn fn,
                      const char *key)
{
    gsb__handle *h;
    GSB_TRY(model_handle(c, rq, &h));
    char *text = NULL;
    int rc = fn(h->model, &text);
    return reply_model_text(rp, h, rc, key, text);
}

static int op_model_list_attrs(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    return model_json(c, rq, rp, gsb_model_list_attrs, "attrs");
}

static int op_model_get_params(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    return model_json(c, rq, rp, gsb_model_get_params, "params");
}

static int op_model_get_meta(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    return model_json(c, rq, rp, gsb_model_get_meta, "meta");
}

/* set_params / set_meta: an object field -> the API, then reply what it reads back */
static int model_set(gsb__conn *c, gsb__req *rq, gsb__reply *rp, const char *key,
                     int (*set)(gsb_model *, const char *), model_json_fn get)
{
    if (!json_is_object(json_object_get(rq->head, key)))
        return gsb__err(GSB_EINVAL, "%s: \"%s\" must be a JSON object", gsb__op_names[rq->op], key);
    char *text;
    GSB_TRY(head_object_text(rq, key, &text));
    gsb__handle *h;
    int rc = model_handle(c, rq, &h);
    if (rc != GSB_OK) {
        free(text);
        return rc;
    }
    rc = set(h->model, text);
    free(text);
    char *back = NULL;
    if (rc == GSB_OK)
        rc = get(h->model, &back);
    return reply_model_text(rp, h, rc, key, back);
}

static int op_model_set_params(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    return model_set(c, rq, rp, "params", gsb_model_set_params, gsb_model_get_params);
}

static int op_model_set_meta(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    return model_set(c, rq, rp, "meta", gsb_model_set_meta, gsb_model_get_meta);
}

static int op_model_export(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    gsb__handle *h;
    GSB_TRY(model_handle(c, rq, &h));
    void *bytes = NULL;
    size_t len = 0;
    int rc = gsb_model_export(h->model, &bytes, &len);
    if (rc == GSB_OK)
        rc = set_new(rp->head, "fitted", json_boolean(gsb_model_is_fitted(h->model)));
    gsb__handle_put(h);
    rp->blob = bytes; /* freed after the reply is sent */
    GSB_TRY(rc);
    GSB_TRY(gsb__outmsg_add_bytes(&rp->out, bytes, len));
    rp->has_out = 1;
    return GSB_OK;
}

static int op_model_import(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    GSB_TRY(one_array(rq));
    gsb_model *m;
    GSB_TRY(gsb_model_import(c->srv->local, rq->arr[0].data, (size_t)rq->wa[0].nbytes, &m));
    return adopt_model(c, m, rp);
}

static int op_store_save(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    (void)rp;
    const char *name;
    GSB_TRY(head_string(rq, "name", &name));
    gsb__handle *h;
    GSB_TRY(model_handle(c, rq, &h));
    int rc = gsb_model_save(h->model, name);
    gsb__handle_put(h);
    if (rc == GSB_OK)
        gsb__logf(&c->srv->log, GSB__LOG_INFO, "model saved", "conn=%llu name=%s",
                  (unsigned long long)c->id, gsb__log_q((char[300]){0}, 300, name));
    return rc;
}

static int op_store_load(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    const char *name;
    GSB_TRY(head_string(rq, "name", &name));
    gsb_model *m;
    GSB_TRY(gsb_model_load(c->srv->local, name, &m));
    return adopt_model(c, m, rp);
}

static int op_store_delete(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    (void)rp;
    const char *name;
    GSB_TRY(head_string(rq, "name", &name));
    return gsb_model_delete(c->srv->local, name);
}

static int op_store_list(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    (void)rq;
    char *text;
    GSB_TRY(gsb_model_list(c->srv->local, &text));
    return set_json_text(rp->head, "models", text);
}

/* A data handle made from the request's arrays (inline, shared memory, or a
 * Fortran-ordered matrix): its host copy is taken from the budget first,
 * and given back when the engine put it on the GPU instead. */
static int put_from_arrays(gsb__conn *c, gsb__req *rq, gsb_data **out, uint64_t *charge)
{
    GSB_TRY(one_array(rq));
    GSB_TRY(check_engine_arrays(rq));
    uint64_t n = rq->wa[0].nbytes;
    GSB_TRY(gsb__budget_take(&c->srv->budget, GSB__MEM_DATA, n, "a data handle"));
    int rc = gsb_data_put(c->srv->local, &rq->arr[0], out);
    if (rc != GSB_OK || !(*out)->host) {
        gsb__budget_give(&c->srv->budget, GSB__MEM_DATA, n);
        n = 0;
    }
    *charge = n;
    return rc;
}

static int op_data_put(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    gsb_data *d = rq->streamed; /* streamed in by the decoder (conn.c) */
    uint64_t charge = 0;
    if (d) {
        rq->streamed = NULL;
        charge = rq->data_charge; /* the handle's now */
        rq->data_charge = 0;
        gsb__data_stream_commit(d);
    } else {
        GSB_TRY(put_from_arrays(c, rq, &d, &charge));
    }
    gsb__handle *h = gsb__handle_new(GSB__H_DATA);
    if (!h) {
        gsb_data_free(d);
        gsb__budget_give(&c->srv->budget, GSB__MEM_DATA, charge);
        return gsb__err(GSB_ENOMEM, "out of memory");
    }
    h->data = d;
    h->budget = &c->srv->budget;
    h->charge = charge;
    h->charge_kind = GSB__MEM_DATA;
    int rc = gsb__ssess_add(c->sess, h);
    if (rc != GSB_OK) {
        gsb__handle_put(h);
        return rc;
    }
    return set_new(rp->head, "data", json_integer((json_int_t)h->id));
}

static int op_data_free(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    (void)rp;
    uint64_t id = 0;
    GSB_TRY(head_handle(rq, "data", &id));
    return gsb__ssess_remove(c->sess, GSB__H_DATA, id);
}

static int segment_id(const gsb__req *rq, uint64_t *out)
{
    const json_t *v = json_object_get(rq->head, "segment");
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return gsb__err(GSB_EINVAL, "%s: \"segment\" must be an integer >= 0",
                        gsb__op_names[rq->op]);
    *out = (uint64_t)json_integer_value(v);
    return GSB_OK;
}

static int op_shm_attach(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    if (!c->is_unix)
        return gsb__err(GSB_EUNSUPPORTED, "shm.attach: shared memory needs a Unix socket "
                        "connection (the memfd travels as SCM_RIGHTS)");
    uint64_t seg_id = 0;
    GSB_TRY(segment_id(rq, &seg_id));
    const json_t *sz = json_object_get(rq->head, "size");
    if (!json_is_integer(sz) || json_integer_value(sz) < 1)
        return gsb__err(GSB_EINVAL, "shm.attach: \"size\" must be an integer >= 1");
    uint64_t size = (uint64_t)json_integer_value(sz);
    gsb__budget *budget = &c->srv->budget;
    GSB_TRY(gsb__budget_take(budget, GSB__MEM_SHM, size, "a shared-memory segment"));
    gsb__shm *seg;
    int mrc = gsb__shm_map(rq->frame->fd, size, &seg);
    if (mrc != GSB_OK) {
        gsb__budget_give(budget, GSB__MEM_SHM, size);
        return mrc;
    }
    const gsb__backend *gpu = c->srv->local->gpu;
    if (gpu && gpu->ops->host_register) {
        int prc = gsb__shm_pin(seg, gpu);
        if (prc != GSB_OK) {
            char q[300];
            gsb__logf(&c->srv->log, GSB__LOG_WARN, "shared memory not pinned",
                      "conn=%llu segment=%llu bytes=%zu error=%s", (unsigned long long)c->id,
                      (unsigned long long)seg_id, seg->size, gsb__log_q(q, sizeof q, gsb_errmsg()));
            gsb__err_clear();
        }
    }
    gsb__handle *h = gsb__handle_new(GSB__H_SHM);
    if (!h) {
        gsb__shm_unmap(seg);
        gsb__budget_give(budget, GSB__MEM_SHM, size);
        return gsb__err(GSB_ENOMEM, "out of memory");
    }
    h->shm = seg;
    h->id = seg_id;
    h->budget = budget; /* given back when the segment is unmapped */
    h->charge = size;
    h->charge_kind = GSB__MEM_SHM;
    int rc = gsb__ssess_add(c->sess, h);
    if (rc != GSB_OK) {
        gsb__handle_put(h);
        return rc;
    }
    gsb__logf(&c->srv->log, GSB__LOG_INFO, "shared memory attached",
              "conn=%llu segment=%llu bytes=%zu pinned=%d", (unsigned long long)c->id,
              (unsigned long long)seg_id, seg->size, seg->pinned);
    return set_new(rp->head, "pinned", json_boolean(seg->pinned));
}

static int op_shm_detach(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    (void)rp;
    uint64_t seg_id = 0;
    GSB_TRY(segment_id(rq, &seg_id));
    return gsb__ssess_remove(c->sess, GSB__H_SHM, seg_id);
}

static int op_ping(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    (void)c;
    (void)rq;
    (void)rp;
    return GSB_OK;
}

typedef int (*op_fn)(gsb__conn *c, gsb__req *rq, gsb__reply *rp);

static const op_fn op_table[GSB__OP_OTHER] = {
    [GSB__OP_PING] = op_ping,
    [GSB__OP_INFO] = op_info,
    [GSB__OP_MODEL_CREATE] = op_model_create,
    [GSB__OP_MODEL_FREE] = op_model_free,
    [GSB__OP_MODEL_CALL] = op_model_call,
    [GSB__OP_MODEL_GET_ATTR] = op_model_get_attr,
    [GSB__OP_MODEL_LIST_ATTRS] = op_model_list_attrs,
    [GSB__OP_MODEL_SET_PARAMS] = op_model_set_params,
    [GSB__OP_MODEL_GET_PARAMS] = op_model_get_params,
    [GSB__OP_MODEL_SET_META] = op_model_set_meta,
    [GSB__OP_MODEL_GET_META] = op_model_get_meta,
    [GSB__OP_MODEL_EXPORT] = op_model_export,
    [GSB__OP_MODEL_IMPORT] = op_model_import,
    [GSB__OP_STORE_SAVE] = op_store_save,
    [GSB__OP_STORE_LOAD] = op_store_load,
    [GSB__OP_STORE_DELETE] = op_store_delete,
    [GSB__OP_STORE_LIST] = op_store_list,
    [GSB__OP_DATA_PUT] = op_data_put,
    [GSB__OP_DATA_FREE] = op_data_free,
    [GSB__OP_SHM_ATTACH] = op_shm_attach,
    [GSB__OP_SHM_DETACH] = op_shm_detach,
};

int gsb__op_run(gsb__conn *c, gsb__req *rq, gsb__reply *rp)
{
    if (rq->op < 0 || rq->op >= GSB__OP_OTHER || !op_table[rq->op])
        return gsb__err(GSB_EINTERNAL, "no handler for op %d", rq->op);
    if (!rp->head && !(rp->head = json_object()))
        return gsb__err(GSB_ENOMEM, "out of memory");
    return op_table[rq->op](c, rq, rp);
}
