/*
 * info.c - gsb_info_json(): the library's self-description, generated from
 * the estimator descriptors (the one source of truth that the CLI, the
 * Python classes and the docs read).
 */
#include <math.h>
#include <string.h>

#include "core/cuml_compat.h"
#include "core/dispatch.h"
#include "core/estimator.h"

static json_t *param_json(const gsb__param_desc *p)
{
    json_t *o = json_object();
    json_t *types = json_array();
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{GSB__P_INT, "int"},   {GSB__P_FLOAT, "float"}, {GSB__P_BOOL, "bool"},
                 {GSB__P_STR, "str"},   {GSB__P_NONE, "none"},   {GSB__P_PAIR, "pair"},
                 {GSB__P_DICT, "dict"}, {GSB__P_ARRAY, "array"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (p->types & names[i].bit)
            json_array_append_new(types, json_string(names[i].name));
    json_object_set_new(o, "name", json_string(p->name));
    json_object_set_new(o, "types", types);
    json_error_t jerr;
    json_t *dflt = json_loads(p->default_json, JSON_DECODE_ANY, &jerr);
    json_object_set_new(o, "default", dflt ? dflt : json_null());
    if (!(p->lo == 0 && p->hi == 0)) {
        static const char *closed[] = {"both", "left", "right", "neither"};
        json_t *r = json_object();
        json_object_set_new(r, "low", isinf(p->lo) ? json_null() : json_real(p->lo));
        json_object_set_new(r, "high", isinf(p->hi) ? json_null() : json_real(p->hi));
        json_object_set_new(r, "closed", json_string(closed[p->closed & 3]));
        json_object_set_new(o, "range", r);
    }
    if (p->choices) {
        json_t *c = json_array();
        for (const char *const *s = p->choices; *s; s++)
            json_array_append_new(c, json_string((*s)[0] == '~' ? *s + 1 : *s));
        json_object_set_new(o, "choices", c);
    }
    if (p->doc)
        json_object_set_new(o, "doc", json_string(p->doc));
    return o;
}

static json_t *estimator_json(const gsb__estimator_desc *e)
{
    static const char *kinds[] = {"", "transformer", "regressor", "classifier", "clusterer",
                                  "neighbors"};
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(e->name));
    json_object_set_new(o, "module", json_string(e->module));
    json_object_set_new(o, "kind", json_string(e->kind >= 1 && e->kind <= 5 ? kinds[e->kind]
                                                                            : "other"));
    if (e->doc)
        json_object_set_new(o, "doc", json_string(e->doc));
    json_t *params = json_array();
    for (const gsb__param_desc *p = e->params; p->name; p++)
        json_array_append_new(params, param_json(p));
    json_object_set_new(o, "params", params);

    json_t *methods = json_array();
    for (const gsb__method_desc *m = e->methods; m->name; m++) {
        json_t *mo = json_object();
        json_t *inputs = json_array();
        for (int i = 0; i < GSB__MAX_INPUTS && m->inputs[i].name; i++) {
            json_t *in = json_object();
            json_object_set_new(in, "name", json_string(m->inputs[i].name));
            json_object_set_new(in, "optional",
                                json_boolean(m->inputs[i].flags & GSB__IN_OPTIONAL));
            json_array_append_new(inputs, in);
        }
        json_object_set_new(mo, "name", json_string(m->name));
        json_object_set_new(mo, "inputs", inputs);
        if (m->doc)
            json_object_set_new(mo, "doc", json_string(m->doc));
        json_array_append_new(methods, mo);
    }
    /* methods the dispatcher composes from the declared ones */
    static const char *composed[] = {"fit_transform", "fit_predict", "score"};
    for (size_t i = 0; i < 3; i++)
        if (!gsb__method_find(e, composed[i]) && gsb__method_available(e, composed[i])) {
            json_t *mo = json_object();
            json_object_set_new(mo, "name", json_string(composed[i]));
            json_object_set_new(mo, "composed", json_true());
            json_array_append_new(methods, mo);
        }
    json_object_set_new(o, "methods", methods);

    json_t *attrs = json_array();
    int has_nf = 0;
    for (const gsb__attr_desc *a = e->attrs; a->name; a++) {
        if (a->name[0] != '_')
            json_array_append_new(attrs, json_string(a->name));
        has_nf |= strcmp(a->name, "n_features_in_") == 0;
    }
    if (!has_nf) /* every fit sets it (dispatch.c) */
        json_array_append_new(attrs, json_string("n_features_in_"));
    json_object_set_new(o, "attributes", attrs);
    return o;
}

int gsb_info_json(char **out_json)
{
    gsb__err_clear();
    if (!out_json)
        return gsb__err(GSB_EINVAL, "gsb_info_json: out_json must not be NULL");
    json_t *root = json_object();
    json_object_set_new(root, "version", json_string(GSB_VERSION_STRING));
    json_object_set_new(root, "cuml_version", json_string(GSB__CUML_VERSION));
    json_t *compiled = json_array(), *available = json_array();
    json_array_append_new(compiled, json_string("cpu"));
    json_array_append_new(available, json_string("cpu"));
    const gsb__backend *gpu = gsb__cuda_backend();
#ifdef GSB_HAVE_CUDA
    json_array_append_new(compiled, json_string("cuda"));
#endif
    if (gpu) {
        json_array_append_new(available, json_string("cuda"));
        json_object_set_new(root, "cuda_device", json_string(gpu->device ? gpu->device : "?"));
    } else {
        json_object_set_new(root, "cuda_unavailable", json_string(gsb__cuda_unavailable_reason()));
    }
    json_object_set_new(root, "backends_compiled", compiled);
    json_object_set_new(root, "backends_available", available);
    int n;
    const gsb__estimator_desc *const *all = gsb__registry_all(&n);
    json_t *ests = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(ests, estimator_json(all[i]));
    json_object_set_new(root, "estimators", ests);
    *out_json = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return *out_json ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}
