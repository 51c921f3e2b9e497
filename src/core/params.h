/*
 * params.h - estimator parameter descriptors and validation.
 *
 * Each estimator declares its parameters once (type, scikit-learn's default,
 * allowed range or choices).  Values are held as JSON (jansson) so they pass
 * unchanged to Python, the wire and the model blob.  Validation errors use
 * scikit-learn's wording:
 *   The 'n_clusters' parameter of KMeans must be an int in the range
 *   [1, inf). Got 0 instead.
 */
#ifndef GSB_CORE_PARAMS_H
#define GSB_CORE_PARAMS_H

#include <jansson.h>
#include <stdint.h>

/* accepted JSON types, a bitmask */
enum {
    GSB__P_INT = 1,    /* integer (a JSON real with an integral value is not an int) */
    GSB__P_FLOAT = 2,  /* real number; ints are accepted as floats */
    GSB__P_BOOL = 4,
    GSB__P_STR = 8,    /* one of choices */
    GSB__P_NONE = 16,  /* JSON null (Python None) */
    GSB__P_PAIR = 32,  /* two floats, e.g. feature_range=(0, 1); lo < hi */
    GSB__P_DICT = 64,  /* JSON object (class_weight={label: weight}) */
    GSB__P_ARRAY = 128 /* list of floats (per-target alpha) */
};

/* interval closure, as scikit-learn's Interval(closed=...) */
enum { GSB__CLOSED_BOTH = 0, GSB__CLOSED_LEFT, GSB__CLOSED_RIGHT, GSB__CLOSED_NEITHER };

typedef struct gsb__param_desc {
    const char *name;
    unsigned types;             /* GSB__P_* mask */
    const char *default_json;   /* scikit-learn's default as JSON text */
    double lo, hi;              /* range for INT and FLOAT; use -INFINITY/INFINITY */
    int closed;                 /* GSB__CLOSED_* */
    const char *const *choices; /* NULL-terminated strings for GSB__P_STR; "~name" is
                                   accepted but not advertised (deprecated values) */
    const char *doc;            /* one line */
} gsb__param_desc;

/*
 * The functions below take an estimator's parameter list (est->params, ended
 * by name == NULL) and its name for the messages, not the estimator: the
 * estimator descriptor (core/estimator.h) is built on this header, so this
 * module stays below it.
 */

/* A JSON object holding every declared parameter at its default. */
json_t *gsb__params_defaults(const gsb__param_desc *list);
/*
 * Validate each key of update against list and merge into params.  Unknown
 * names and bad values fail with GSB_EPARAM and leave params unchanged.
 */
int gsb__params_update(const char *owner, const gsb__param_desc *list, json_t *params,
                       const json_t *update);
/* Validate one value against its descriptor (GSB_EPARAM with the message). */
int gsb__param_check(const char *owner, const gsb__param_desc *p, const json_t *value);

/* Typed reads of validated parameters (the estimator declared the name). */
int64_t gsb__param_int(const json_t *params, const char *name);
double gsb__param_float(const json_t *params, const char *name);
int gsb__param_bool(const json_t *params, const char *name);
/* The string value, or NULL when the value is not a string. */
const char *gsb__param_str(const json_t *params, const char *name);
int gsb__param_is_none(const json_t *params, const char *name);
int gsb__param_is(const json_t *params, const char *name, const char *str);

#endif
