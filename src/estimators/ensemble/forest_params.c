/*
 * forest_params.c - a random forest's parameters resolved for a fit, with
 * scikit-learn's InvalidParameterError wording where one value may be an int
 * in one range or a float in another (see forest_params.h).
 */
#include "estimators/ensemble/forest_params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

const char *const gsb__forest_cuml_criteria[] = {"gini", "entropy", "mse", "mae", "poisson",
                                                 "gamma", "inverse_gaussian", NULL};

static int is_int(const json_t *v) { return json_is_integer(v); }
static int is_real(const json_t *v) { return json_is_real(v); }

/* scikit-learn's InvalidParameterError text for value v of parameter name */
static int bad_param(const gsb__ctx *c, const char *name, const char *want, const json_t *v)
{
    char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    int rc = gsb__err(GSB_EPARAM, "The '%s' parameter of %s must be %s. Got %s instead.", name,
                      c->est->name, want,
                      json_is_string(v) ? json_string_value(v)
                      : json_is_true(v) ? "True"
                      : json_is_false(v) ? "False"
                      : json_is_null(v) ? "None" : got ? got : "?");
    free(got);
    return rc;
}

/* An int >= int_lo or a float in (0, hi] (closed_hi) / (0, hi): its count of n. */
static int count_param(const gsb__ctx *c, const char *name, int64_t int_lo, int closed_hi,
                       int64_t n, int64_t *out)
{
    const json_t *v = json_object_get(c->params, name);
    char want[128];
    snprintf(want, sizeof want, "an int in the range [%lld, inf) or a float in the range "
             "(0.0, 1.0%s", (long long)int_lo, closed_hi ? "]" : ")");
    if (is_int(v)) {
        if (json_integer_value(v) < int_lo)
            return bad_param(c, name, want, v);
        *out = (int64_t)json_integer_value(v);
        return GSB_OK;
    }
    double x = json_number_value(v);
    if (!is_real(v) || !(x > 0) || (closed_hi ? x > 1 : x >= 1))
        return bad_param(c, name, want, v);
    *out = (int64_t)ceil(x * (double)n);
    return GSB_OK;
}

/* max_features as scikit-learn's BaseDecisionTree._fit resolves it. */
static int resolve_max_features(const gsb__ctx *c, int64_t F, int64_t *out)
{
    const json_t *v = json_object_get(c->params, "max_features");
    const char *want = "an int in the range [1, inf), a float in the range (0.0, 1.0], a str "
                       "among {'log2', 'sqrt'} or None";
    if (!v || json_is_null(v))
        *out = F;
    else if (json_is_string(v))
        *out = strcmp(json_string_value(v), "sqrt") == 0 ? (int64_t)sqrt((double)F)
                                                         : (int64_t)log2((double)F);
    else if (is_int(v) && json_integer_value(v) >= 1)
        *out = (int64_t)json_integer_value(v);
    else if (is_real(v) && json_real_value(v) > 0 && json_real_value(v) <= 1)
        *out = (int64_t)(json_real_value(v) * (double)F);
    else
        return bad_param(c, "max_features", want, v);
    *out = *out < 1 ? 1 : *out > F ? F : *out;
    return GSB_OK;
}

static int check_max_samples(const gsb__ctx *c)
{
    const json_t *v = json_object_get(c->params, "max_samples");
    if (!v || json_is_null(v) || (is_int(v) && json_integer_value(v) >= 1) ||
        (is_real(v) && json_real_value(v) > 0))
        return GSB_OK;
    return bad_param(c, "max_samples",
                     "None, a float in the range (0.0, inf) or an int in the range [1, inf)", v);
}

/* The criterion, from split_criterion (cuML) when set, else criterion. */
static int resolve_criterion(const gsb__ctx *c, int classify, int *out)
{
    const json_t *sc = json_object_get(c->params, "split_criterion");
    const char *name = NULL;
    if (sc && !json_is_null(sc)) {
        int64_t code = -1;
        if (is_int(sc))
            code = json_integer_value(sc);
        else
            for (int i = 0; gsb__forest_cuml_criteria[i]; i++)
                if (strcmp(json_string_value(sc), gsb__forest_cuml_criteria[i]) == 0)
                    code = i;
        static const int map[] = {GSB__FOREST_GINI, GSB__FOREST_ENTROPY, GSB__FOREST_MSE, -1,
                                  GSB__FOREST_POISSON, -1, -1};
        if (code < 0 || code > 6 || map[code] < 0)
            return gsb__err(GSB_EUNSUPPORTED, "%s: split_criterion=%lld ('%s') is not supported "
                            "by gsb; use 0 ('gini'), 1 ('entropy'), 2 ('mse') or 4 ('poisson')",
                            c->est->name, (long long)code,
                            code >= 0 && code <= 6 ? gsb__forest_cuml_criteria[code] : "?");
        *out = map[code];
        if ((*out <= GSB__FOREST_ENTROPY) != classify)
            return gsb__err(GSB_EINVAL, "%s: split_criterion=%lld ('%s') is a %s criterion",
                            c->est->name, (long long)code, gsb__forest_cuml_criteria[code],
                            classify ? "regression" : "classification");
        return GSB_OK;
    }
    name = gsb__param_str(c->params, "criterion");
    if (!name)
        return gsb__err(GSB_EINTERNAL, "%s: criterion missing", c->est->name);
    if (strcmp(name, "absolute_error") == 0)
        return gsb__err(GSB_EUNSUPPORTED, "%s: criterion='absolute_error' is not supported by "
                        "gsb; use 'squared_error' or 'poisson'", c->est->name);
    *out = strcmp(name, "gini") == 0        ? GSB__FOREST_GINI
           : classify                       ? GSB__FOREST_ENTROPY /* entropy, log_loss */
           : strcmp(name, "poisson") == 0   ? GSB__FOREST_POISSON
                                            : GSB__FOREST_MSE; /* squared_error, friedman_mse */
    return GSB_OK;
}

static int unsupported_params(const gsb__ctx *c)
{
    if (gsb__param_float(c->params, "ccp_alpha") != 0.0)
        return gsb__err(GSB_EUNSUPPORTED, "%s: ccp_alpha=%g is not supported by gsb (no "
                        "pruning); use 0.0", c->est->name,
                        gsb__param_float(c->params, "ccp_alpha"));
    if (!gsb__param_is_none(c->params, "monotonic_cst"))
        return gsb__err(GSB_EUNSUPPORTED, "%s: monotonic_cst is not supported by gsb; use None",
                        c->est->name);
    return GSB_OK;
}

int gsb__forest_read_cfg(gsb__ctx *c, int classify, int64_t n, int64_t F,
                         gsb__forest_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    const json_t *P = c->params;
    cfg->classify = classify;
    GSB_TRY(resolve_criterion(c, classify, &cfg->criterion));
    GSB_TRY(unsupported_params(c));
    int64_t mss = 0, msl = 0;
    GSB_TRY(count_param(c, "min_samples_split", 2, 1, n, &mss));
    GSB_TRY(count_param(c, "min_samples_leaf", 1, 0, n, &msl));
    GSB_TRY(check_max_samples(c));
    GSB_TRY(resolve_max_features(c, F, &cfg->grow.rule.max_features));
    mss = mss < 2 ? 2 : mss;
    cfg->grow.rule.min_samples_leaf = msl;
    cfg->grow.rule.min_samples_split = mss > 2 * msl ? mss : 2 * msl;
    cfg->grow.rule.criterion = cfg->criterion;
    cfg->grow.rule.max_depth = gsb__param_is_none(P, "max_depth") ? INT64_MAX
                                                              : gsb__param_int(P, "max_depth");
    cfg->grow.max_leaf_nodes = gsb__param_is_none(P, "max_leaf_nodes")
                                   ? 0 : gsb__param_int(P, "max_leaf_nodes");
    cfg->grow.rule.min_impurity_decrease = gsb__param_float(P, "min_impurity_decrease");
    cfg->min_weight_fraction = gsb__param_float(P, "min_weight_fraction_leaf");
    cfg->n_estimators = gsb__param_int(P, "n_estimators");
    cfg->bootstrap = gsb__param_bool(P, "bootstrap");
    cfg->oob = gsb__param_bool(P, "oob_score");
    cfg->warm_start = gsb__param_bool(P, "warm_start");
    cfg->n_bins = (int)gsb__param_int(P, "n_bins");
    cfg->max_samples = json_object_get(P, "max_samples");
    if (!cfg->bootstrap && cfg->max_samples && !json_is_null(cfg->max_samples))
        return gsb__err(GSB_EINVAL, "`max_sample` cannot be set if `bootstrap=False`. Either "
                        "switch to `bootstrap=True` or set `max_sample=None`.");
    if (!cfg->bootstrap && cfg->oob)
        return gsb__err(GSB_EINVAL, "Out of bag estimation only available if bootstrap=True");
    cfg->balanced_subsample = classify && cfg->bootstrap &&
                              gsb__param_is(P, "class_weight", "balanced_subsample");
    return GSB_OK;
}
