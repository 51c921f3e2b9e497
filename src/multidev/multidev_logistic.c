/*
 * multidev_logistic.c - LogisticRegression across the devices of a session:
 * the engine's L-BFGS on the host (lbfgs_next, which replays the minimiser
 * over the evaluations so far, logistic_stats.c) with each function
 * evaluation's summed weights, log-loss and gradient (stats_lossgrad on every
 * rank's rows, all-reduced), then fit_from_stats, as the Dask driver
 * (python/gsb/dask/linear_model.py) runs them.  The iterates are the
 * one-device fit's up to the summation order of the losses, so it stops at
 * the same iteration with the same coefficients.
 * Covered: the L2 penalty or none, every solver name but liblinear, no warm
 * start (what the distributed steps support); the rest runs on the first
 * device (the caller warns).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "estimators/common/classes.h"
#include "estimators/common/partial_stats.h"
#include "multidev/multidev_impl.h"

/* Why this model's fit is not split, or NULL when it is. */
static const char *unsupported(const json_t *p)
{
    if (gsb__param_is(p, "solver", "liblinear"))
        return "solver='liblinear' is not split across devices";
    if (gsb__param_bool(p, "warm_start"))
        return "warm_start is not split across devices";
    int l2 = gsb__param_is(p, "penalty", "l2") || gsb__param_is_none(p, "penalty");
    if (gsb__param_is(p, "penalty", "deprecated"))
        l2 = gsb__param_is_none(p, "l1_ratio") || gsb__param_float(p, "l1_ratio") == 0;
    return l2 ? NULL : "only the L2 penalty (or none) is split across devices";
}

typedef struct lr_state {
    gsb__mdfit f;
    int64_t n, d, K, P, cols;
    double *classes;
    json_t *eval_opts, *next_opts;
    double *H; /* the history: rows of [x (P), sum s, sum s loss, gradient (P)] */
    int64_t rows;
} lr_state;

/* The class indices of y (as doubles) and the options of every evaluation. */
static int encode(gsb__model *m, const gsb__method_desc *md, const gsb__tensor *y,
                  const gsb__tensor *w, lr_state *s, gsb__tensor *yenc)
{
    gsb__ctx c = {0};
    c.model = m;
    c.est = m->est;
    c.method = md;
    c.params = m->params;
    int32_t *yi = malloc((size_t)s->n * sizeof *yi);
    double *cw = NULL;
    int rc = yi ? gsb__labels_encode(&c, y, &s->classes, &s->K, yi)
                : gsb__err(GSB_ENOMEM, "out of memory");
    if (rc == GSB_OK && s->K < 2)
        rc = gsb__err(GSB_EINVAL, "This solver needs samples of at least 2 classes in the data, "
                      "but the data contains only one class: %g", s->classes[0]);
    for (int64_t i = 0; rc == GSB_OK && w && i < s->n && ((double *)w->data)[i] == 0; i++)
        if (i == s->n - 1)
            rc = gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero "
                          "number.");
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, s->n, 1, yenc);
    for (int64_t i = 0; rc == GSB_OK && i < s->n; i++)
        ((double *)yenc->data)[i] = yi[i];
    if (rc == GSB_OK) {
        yenc->ndim = 1;
        s->eval_opts = json_pack("{s:I}", "n_classes", (json_int_t)s->K);
        if (!s->eval_opts)
            rc = gsb__err(GSB_ENOMEM, "out of memory");
    }
    if (rc == GSB_OK && gsb__class_weight_given(&c)) {
        /* class_weight as one number per class, 'balanced' counted with the weights */
        json_t *list = json_array();
        double *sw = malloc((size_t)s->n * sizeof *sw);
        cw = malloc((size_t)s->K * sizeof *cw);
        if (!list || !sw || !cw)
            rc = gsb__err(GSB_ENOMEM, "out of memory");
        for (int64_t i = 0; rc == GSB_OK && i < s->n; i++)
            sw[i] = w ? ((const double *)w->data)[i] : 1.0;
        if (rc == GSB_OK)
            rc = gsb__class_weights(&c, s->classes, s->K, yi, s->n, sw, cw);
        for (int64_t k = 0; rc == GSB_OK && k < s->K; k++)
            json_array_append_new(list, json_real(cw[k]));
        if (rc == GSB_OK)
            json_object_set(s->eval_opts, "class_weight", list);
        json_decref(list);
        free(sw);
    }
    free(cw);
    free(yi);
    return rc;
}

/* One evaluation at x: its row appended to the history. */
static int evaluate(lr_state *s, const double *x)
{
    gsb__tensor coef = gsb__tensor_host_view((void *)x, GSB_F64, s->P, 1), st = GSB__TENSOR_NONE;
    coef.ndim = 1;
    gsb__md_extra extra[1] = {{"coef", &coef}};
    GSB_TRY(gsb__md_stats(&s->f, "stats_lossgrad", extra, 1, s->eval_opts, 0, &st));
    double *H = realloc(s->H, (size_t)(s->rows + 1) * (size_t)s->cols * sizeof *H);
    if (!H) {
        gsb__tensor_free(&st);
        return gsb__err(GSB_ENOMEM, "out of memory");
    }
    s->H = H;
    double *row = H + s->rows * s->cols;
    memcpy(row, x, (size_t)s->P * sizeof *row);
    memcpy(row + s->P, (double *)st.data + GSB__STATS_HEAD, (size_t)(s->P + 2) * sizeof *row);
    s->rows++;
    gsb__tensor_free(&st);
    return GSB_OK;
}

/* lbfgs_next over the history: *done, or the next point into x. */
static int next_point(lr_state *s, double *x, int *done)
{
    gsb__tensor in[GSB__MAX_INPUTS] = {gsb__tensor_host_view(s->H, GSB_F64, s->rows, s->cols)};
    gsb__nlist out = {0};
    int rc = gsb__md_step(&s->f, "lbfgs_next", in, s->next_opts, &out);
    const gsb__tensor *dn = gsb__nlist_get(&out, "done"), *nx = gsb__nlist_get(&out, "x");
    if (rc == GSB_OK && (!dn || !nx || gsb__tensor_numel(nx) != s->P))
        rc = gsb__err(GSB_EINTERNAL, "LogisticRegression.lbfgs_next returned no point");
    if (rc == GSB_OK) {
        *done = gsb__tensor_get(dn, 0) != 0;
        for (int64_t q = 0; q < s->P; q++)
            x[q] = gsb__tensor_get(nx, q);
    }
    gsb__nlist_clear(&out);
    return rc;
}

static int run(lr_state *s, gsb__model *m, gsb_dtype dt)
{
    double *x = calloc((size_t)s->P, sizeof *x);
    if (!x)
        return gsb__err(GSB_ENOMEM, "out of memory");
    int rc = GSB_OK, done = 0;
    /* lbfgs_next stops the minimiser at max_iter; this bounds a runaway history */
    int64_t cap = 100 * (gsb__param_int(m->params, "max_iter") + 10);
    while (rc == GSB_OK && !done) {
        if (atomic_load(&m->cancel) || s->rows >= cap) {
            rc = gsb__err(s->rows >= cap ? GSB_EINTERNAL : GSB_ECANCELLED,
                          "LogisticRegression.fit %s after %lld evaluations",
                          s->rows >= cap ? "did not stop" : "was cancelled", (long long)s->rows);
            break;
        }
        rc = evaluate(s, x);
        if (rc == GSB_OK)
            rc = next_point(s, x, &done);
    }
    free(x);
    json_t *o = rc == GSB_OK ? json_deep_copy(s->next_opts) : NULL;
    if (rc == GSB_OK && (!o || json_object_set_new(o, "dtype", json_string(dt == GSB_F32 ?
                                                   "float32" : "float64")) != 0))
        rc = gsb__err(GSB_ENOMEM, "out of memory");
    if (rc == GSB_OK) {
        gsb__tensor in[GSB__MAX_INPUTS] = {
            gsb__tensor_host_view(s->H, GSB_F64, s->rows, s->cols),
            gsb__tensor_host_view(s->classes, GSB_F64, s->K, 1)};
        in[1].ndim = 1;
        gsb__nlist ignored = {0};
        rc = gsb__md_step(&s->f, "fit_from_stats", in, o, &ignored);
        gsb__nlist_clear(&ignored);
    }
    json_decref(o);
    return rc;
}

int gsb__md_logistic_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                         gsb__tensor *in, int *handled, const char **why)
{
    const gsb__tensor *X = NULL, *y = NULL, *w = NULL;
    for (int i = 0; i < GSB__MAX_INPUTS && md->inputs[i].name; i++) {
        const gsb__tensor *t = in[i].data ? &in[i] : NULL;
        if (strcmp(md->inputs[i].name, "X") == 0)
            X = t;
        else if (strcmp(md->inputs[i].name, "y") == 0)
            y = t;
        else if (strcmp(md->inputs[i].name, "sample_weight") == 0)
            w = t;
    }
    *handled = 0;
    if ((*why = unsupported(m->params)) != NULL || !X || !y)
        return GSB_OK;
    *handled = 1;
    lr_state s;
    memset(&s, 0, sizeof s);
    s.n = X->rows;
    s.d = X->cols;
    gsb__tensor yenc = GSB__TENSOR_NONE;
    int rc = encode(m, md, y, w, &s, &yenc);
    if (rc == GSB_OK) {
        int64_t R = s.K == 2 ? 1 : s.K;
        s.P = R * (s.d + (gsb__param_bool(m->params, "fit_intercept") ? 1 : 0));
        s.cols = 2 * s.P + 2;
        s.next_opts = json_pack("{s:I}", "n_features", (json_int_t)s.d);
        rc = s.next_opts ? gsb__md_open(ds, m, X, &yenc, w, &s.f)
                         : gsb__err(GSB_ENOMEM, "out of memory");
        if (rc == GSB_OK) {
            rc = run(&s, m, X->dtype);
            gsb__md_close(&s.f);
        }
    }
    gsb__tensor_free(&yenc);
    free(s.classes);
    free(s.H);
    json_decref(s.eval_opts);
    json_decref(s.next_opts);
    return rc;
}
