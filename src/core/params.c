/* params.c - parameter defaults, validation (scikit-learn's wording) and typed reads. */
#include "core/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static const gsb__param_desc *find_param(const gsb__param_desc *list, const char *name)
{
    for (const gsb__param_desc *p = list; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

json_t *gsb__params_defaults(const gsb__param_desc *list)
{
    json_t *obj = json_object();
    if (!obj)
        return NULL;
    for (const gsb__param_desc *p = list; p->name; p++) {
        json_error_t jerr;
        json_t *v = json_loads(p->default_json, JSON_DECODE_ANY, &jerr);
        if (!v || json_object_set_new(obj, p->name, v) != 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

static int in_range(const gsb__param_desc *p, double x)
{
    int lo_ok = (p->closed == GSB__CLOSED_BOTH || p->closed == GSB__CLOSED_LEFT) ? x >= p->lo
                                                                                  : x > p->lo;
    int hi_ok = (p->closed == GSB__CLOSED_BOTH || p->closed == GSB__CLOSED_RIGHT) ? x <= p->hi
                                                                                   : x < p->hi;
    return lo_ok && hi_ok;
}

/* A bound as Python prints it: ints plain, floats by repr ("0.0", "0.0001"). */
static void fmt_bound(char *buf, size_t n, double v, int as_float)
{
    if (isinf(v)) {
        snprintf(buf, n, "%sinf", v < 0 ? "-" : "");
        return;
    }
    if (v == floor(v) && fabs(v) < 1e16) {
        snprintf(buf, n, as_float ? "%.1f" : "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) { /* shortest text that reads back exactly */
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* A choice written "~name" is accepted but not advertised (deprecated values). */
static const char *choice_name(const char *c) { return c[0] == '~' ? c + 1 : c; }

static int has_range(const gsb__param_desc *p) { return !(p->lo == 0 && p->hi == 0); }

/* "an int in the range [1, inf), a str among {'auto'} or None" */
static void fmt_range(const gsb__param_desc *p, int as_float, char *buf, size_t n)
{
    char lo[40], hi[40];
    buf[0] = '\0';
    if (!has_range(p))
        return;
    fmt_bound(lo, sizeof lo, p->lo, as_float);
    fmt_bound(hi, sizeof hi, p->hi, as_float);
    int left = p->closed == GSB__CLOSED_BOTH || p->closed == GSB__CLOSED_LEFT;
    int right = p->closed == GSB__CLOSED_BOTH || p->closed == GSB__CLOSED_RIGHT;
    snprintf(buf, n, " in the range %s%s, %s%s", left ? "[" : "(", lo, hi, right ? "]" : ")");
}

static void describe(const gsb__param_desc *p, char *buf, size_t n)
{
    char irange[128], frange[128];
    fmt_range(p, 0, irange, sizeof irange);
    fmt_range(p, 1, frange, sizeof frange);
    const char *parts[8];
    char tmp[8][768]; /* "a str among {...}" of the 30 distance metrics is over 300 bytes */
    int k = 0;
    if (p->types & GSB__P_INT)
        snprintf(tmp[k], sizeof tmp[k], "an int%s", irange), parts[k] = tmp[k], k++;
    if (p->types & GSB__P_FLOAT)
        snprintf(tmp[k], sizeof tmp[k], "a float%s", frange), parts[k] = tmp[k], k++;
    if (p->types & GSB__P_BOOL)
        parts[k++] = "an instance of 'bool'";
    if (p->types & GSB__P_STR) {
        size_t off = (size_t)snprintf(tmp[k], sizeof tmp[k], "a str among {");
        int first = 1;
        for (const char *const *c = p->choices; c && *c && off < sizeof tmp[k]; c++) {
            if ((*c)[0] == '~')
                continue;
            off += (size_t)snprintf(tmp[k] + off, sizeof tmp[k] - off, "%s'%s'",
                                    first ? "" : ", ", *c);
            first = 0;
        }
        if (off < sizeof tmp[k])
            snprintf(tmp[k] + off, sizeof tmp[k] - off, "}");
        parts[k] = tmp[k];
        k++;
    }
    if (p->types & GSB__P_PAIR)
        parts[k++] = "a tuple of two floats (min, max)";
    if (p->types & GSB__P_DICT)
        parts[k++] = "an instance of 'dict'";
    if (p->types & GSB__P_ARRAY)
        parts[k++] = "an array-like";
    if (p->types & GSB__P_NONE)
        parts[k++] = "None";
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < k && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s",
                                i == 0 ? "" : (i == k - 1 ? " or " : ", "), parts[i]);
}

/*
 * A Python callable as the Python package sends it: {"__callable__": repr}.
 * No parameter accepts one (the engine cannot call back into Python), but
 * the error can then show it the way scikit-learn shows a bad value.
 */
static const char *callable_repr(const json_t *v)
{
    return json_is_object(v) && json_object_size(v) == 1
               ? json_string_value(json_object_get(v, "__callable__"))
               : NULL;
}

/* "kernel='precomputed'" style advice for a callable, where there is one. */
static const char *callable_advice(const gsb__param_desc *p)
{
    for (const char *const *c = p->choices; c && *c; c++)
        if (strcmp(choice_name(*c), "precomputed") == 0)
            return "; compute the matrix in Python and pass it with 'precomputed' instead";
    return "";
}

static int value_ok(const gsb__param_desc *p, const json_t *v)
{
    if (callable_repr(v))
        return 0;
    if (json_is_null(v))
        return (p->types & GSB__P_NONE) != 0;
    if (json_is_boolean(v))
        return (p->types & GSB__P_BOOL) != 0;
    if (json_is_integer(v)) {
        /* bool is an int in Python, but scikit-learn rejects it for Integral params;
         * JSON keeps them apart.  An int is also a valid float. */
        double x = (double)json_integer_value(v);
        if (p->types & (GSB__P_INT | GSB__P_FLOAT))
            return !has_range(p) || in_range(p, x);
        return 0;
    }
    if (json_is_real(v)) {
        double x = json_real_value(v);
        if (!(p->types & GSB__P_FLOAT) || isnan(x))
            return 0;
        return !has_range(p) || in_range(p, x);
    }
    if (json_is_string(v)) {
        if (!(p->types & GSB__P_STR))
            return 0;
        for (const char *const *c = p->choices; c && *c; c++)
            if (strcmp(choice_name(*c), json_string_value(v)) == 0)
                return 1;
        return 0;
    }
    if (json_is_array(v)) {
        if (p->types & GSB__P_PAIR && json_array_size(v) == 2 &&
            json_is_number(json_array_get(v, 0)) && json_is_number(json_array_get(v, 1)))
            return 1;
        if (p->types & GSB__P_ARRAY) {
            size_t i;
            const json_t *e;
            json_array_foreach(v, i, e) if (!json_is_number(e)) return 0;
            return json_array_size(v) > 0;
        }
        return 0;
    }
    if (json_is_object(v))
        return (p->types & GSB__P_DICT) != 0;
    return 0;
}

int gsb__param_check(const char *owner, const gsb__param_desc *p, const json_t *value)
{
    if (value_ok(p, value))
        return GSB_OK;
    char want[1024];
    describe(p, want, sizeof want);
    char *got = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
    /* Show strings the Python way ('x'), other values as JSON. */
    int rc;
    if (callable_repr(value))
        rc = gsb__err(GSB_EPARAM, "The '%s' parameter of %s must be %s. Got %s instead. "
                      "Callables are not supported by gsb: its estimators run in C, possibly "
                      "on a server, and cannot call back into Python%s.",
                      p->name, owner, want, callable_repr(value), callable_advice(p));
    else if (json_is_string(value))
        rc = gsb__err(GSB_EPARAM, "The '%s' parameter of %s must be %s. Got '%s' instead.",
                      p->name, owner, want, json_string_value(value));
    else
        rc = gsb__err(GSB_EPARAM, "The '%s' parameter of %s must be %s. Got %s instead.",
                      p->name, owner, want,
                      json_is_null(value) ? "None"
                      : json_is_true(value) ? "True"
                      : json_is_false(value) ? "False"
                      : got ? got : "?");
    free(got);
    return rc;
}

int gsb__params_update(const char *owner, const gsb__param_desc *list, json_t *params,
                       const json_t *update)
{
    if (!json_is_object(update))
        return gsb__err(GSB_EPARAM, "parameters must be a JSON object");
    const char *key;
    json_t *val;
    /* validate everything first so a failure leaves params unchanged */
    json_object_foreach((json_t *)update, key, val) {
        const gsb__param_desc *p = find_param(list, key);
        if (!p) {
            char valid[1024];
            size_t off = 0;
            valid[0] = '\0';
            for (const gsb__param_desc *q = list; q->name && off < sizeof valid; q++)
                off += (size_t)snprintf(valid + off, sizeof valid - off, "%s'%s'",
                                        q == list ? "" : ", ", q->name);
            return gsb__err(GSB_EPARAM,
                            "Invalid parameter '%s' for estimator %s(). Valid parameters "
                            "are: [%s].",
                            key, owner, valid);
        }
        GSB_TRY(gsb__param_check(owner, p, val));
    }
    json_object_foreach((json_t *)update, key, val) {
        if (json_object_set(params, key, val) != 0)
            return gsb__err(GSB_ENOMEM, "out of memory setting parameter '%s'", key);
    }
    return GSB_OK;
}

int64_t gsb__param_int(const json_t *params, const char *name)
{
    const json_t *v = json_object_get(params, name);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_real(v))
        return (int64_t)json_real_value(v);
    if (json_is_boolean(v))
        return json_is_true(v);
    return 0;
}

double gsb__param_float(const json_t *params, const char *name)
{
    const json_t *v = json_object_get(params, name);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

int gsb__param_bool(const json_t *params, const char *name)
{
    const json_t *v = json_object_get(params, name);
    if (json_is_integer(v))
        return json_integer_value(v) != 0;
    return json_is_true(v);
}

const char *gsb__param_str(const json_t *params, const char *name)
{
    return json_string_value(json_object_get(params, name));
}

int gsb__param_is_none(const json_t *params, const char *name)
{
    const json_t *v = json_object_get(params, name);
    return !v || json_is_null(v);
}

int gsb__param_is(const json_t *params, const char *name, const char *str)
{
    const char *s = gsb__param_str(params, name);
    return s && strcmp(s, str) == 0;
}
