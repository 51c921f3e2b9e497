/*
 * dispatch.c - the one generic call: "method M on model H with inputs".
 *
 * Validates the inputs a method declares, runs it with a gsb__ctx, and for a
 * fit swaps the new fitted attributes in only on success.  Also provides the
 * composite methods scikit-learn derives from others (fit_transform,
 * fit_predict, score) when an estimator does not declare its own.
 * The caller (api.c) holds the model's lock.
 */
#include "core/dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/budget.h"
#include "core/data.h"
#include "core/devarray.h"
#include "core/model.h"
#include "core/profile.h"
#include "core/validate.h"
#include "multidev/devset.h"

/* ---- the context API used by estimators -------------------------------- */

const gsb__tensor *gsb__in(gsb__ctx *c, const char *name)
{
    for (int i = 0; i < GSB__MAX_INPUTS && c->method->inputs[i].name; i++)
        if (strcmp(c->method->inputs[i].name, name) == 0)
            return c->in[i].data || c->in[i].rows ? &c->in[i] : NULL;
    return NULL;
}

const gsb__tensor *gsb__attr(gsb__ctx *c, const char *name)
{
    const gsb__tensor *t = c->fit_attrs ? gsb__nlist_get(c->fit_attrs, name) : NULL;
    return t ? t : gsb__nlist_get(&c->model->attrs, name);
}

int gsb__attr_need(gsb__ctx *c, const char *name, gsb_dtype dtype, int64_t rows, int64_t cols,
                   const gsb__tensor **out)
{
    const gsb__tensor *t = gsb__attr(c, name);
    *out = t;
    if (t && t->data && (dtype == 0 || t->dtype == dtype) && (rows < 0 || t->rows == rows) &&
        (cols < 0 || t->cols == cols))
        return GSB_OK;
    *out = NULL;
    return gsb__err(GSB_ECORRUPT, "%s: fitted attribute '%s' is missing or malformed "
                    "(was the model imported from a damaged blob?)", c->est->name, name);
}

static int put_host(gsb__nlist *l, const char *name, gsb__tensor *t)
{
    if (t->be != gsb__cpu_backend() || !t->owned) {
        gsb__tensor host;
        int rc = gsb__tensor_to_host(t, &host);
        gsb__tensor_free(t);
        if (rc != GSB_OK)
            return rc;
        *t = host;
    }
    return gsb__nlist_put(l, name, t);
}

int gsb__fit_set(gsb__ctx *c, const char *name, gsb__tensor *t)
{
    if (!c->fit_attrs) {
        gsb__tensor_free(t);
        return gsb__err(GSB_EINTERNAL, "%s: attribute set outside fit", name);
    }
    return put_host(c->fit_attrs, name, t);
}

int gsb__out(gsb__ctx *c, const char *name, gsb__tensor *t) { return put_host(c->out, name, t); }

static int scalar(double v, gsb_dtype dtype, gsb__tensor *t)
{
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dtype, 1, 1, t));
    gsb__tensor_set(t, 0, v);
    t->ndim = 0;
    return GSB_OK;
}

int gsb__fit_set_scalar(gsb__ctx *c, const char *name, double v, gsb_dtype dtype)
{
    gsb__tensor t;
    GSB_TRY(scalar(v, dtype, &t));
    return gsb__fit_set(c, name, &t);
}

int gsb__out_scalar(gsb__ctx *c, const char *name, double v, gsb_dtype dtype)
{
    gsb__tensor t;
    GSB_TRY(scalar(v, dtype, &t));
    return gsb__out(c, name, &t);
}

int64_t gsb__opt_int(gsb__ctx *c, const char *name, int64_t dflt)
{
    const json_t *v = json_object_get(c->options, name);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

int gsb__opt_bool(gsb__ctx *c, const char *name, int dflt)
{
    const json_t *v = json_object_get(c->options, name);
    if (json_is_boolean(v))
        return json_is_true(v);
    return json_is_integer(v) ? json_integer_value(v) != 0 : dflt;
}

int gsb__progress(gsb__ctx *c, const char *stage, int64_t iteration, double loss)
{
    gsb__model *m = c->model;
    int stop = atomic_load(&m->cancel);
    if (!stop && m->progress)
        stop = m->progress(m->progress_data, stage, iteration, loss);
    else if (!m->progress && gsb__param_int(c->params, "verbose") > 0)
        fprintf(stderr, "%s: %s %lld, loss %.6g\n", c->est->name, stage, (long long)iteration,
                loss);
    if (stop)
        return gsb__err(GSB_ECANCELLED, "%s.%s was cancelled at %s %lld", c->est->name,
                        c->method->name, stage, (long long)iteration);
    return GSB_OK;
}

/* ---- input validation --------------------------------------------------- */

static int find_x(const gsb__method_desc *md)
{
    for (int i = 0; i < GSB__MAX_INPUTS && md->inputs[i].name; i++)
        if ((md->inputs[i].flags & GSB__IN_KIND_MASK) == GSB__IN_X)
            return i;
    return -1;
}

static int given(const gsb_array *const *inputs, int n, int i)
{
    return i < n && inputs[i] && (inputs[i]->data || inputs[i]->ndim > 0);
}

static int n_declared(const gsb__method_desc *md)
{
    int k = 0;
    while (k < GSB__MAX_INPUTS && md->inputs[k].name)
        k++;
    return k;
}

/* One declared input: a data handle (core/data.h), a caller's device array
 * (core/devarray.h) or a caller's host array. */
static int validate_input(gsb__model *m, const gsb__method_desc *md, int i,
                          const gsb_array *a, const gsb__validate_spec *spec, gsb__tensor *out)
{
    unsigned flags = md->inputs[i].flags;
    int device_ok = (flags & GSB__IN_DEVICE_OK) && (flags & GSB__IN_KIND_MASK) == GSB__IN_X;
    if (gsb__is_device_ref(a))
        return gsb__device_input(m->session, a, spec, device_ok, out);
    if (gsb__is_data_ref(a))
        return gsb__data_input(m->session, a, spec, device_ok, out);
    return gsb__validate_array(a, spec, out);
}

/* After a call: the callers' streams of its device arrays wait for the
 * engine's reads.  Keeps the call's own error when it failed. */
static int release_device_inputs(gsb__model *m, const gsb_array *const *inputs, int n, int rc)
{
    for (int i = 0; i < n && i < GSB__MAX_INPUTS; i++)
        if (gsb__is_device_ref(inputs[i])) {
            int r = gsb__device_release(m->session, inputs[i]);
            if (rc == GSB_OK)
                rc = r;
        }
    return rc;
}

void gsb__inputs_free(gsb__tensor *in)
{
    for (int i = 0; i < GSB__MAX_INPUTS; i++)
        gsb__tensor_free(&in[i]);
}

/*
 * A fit that is sure to stream X checks it for NaN and infinity batch by
 * batch as each lands on the backend (estimators/common/stream.c) instead of
 * in a pass of the host's over all of X first: that pass read 1.9 GB at the
 * host's memory bandwidth (~25 ms of a 63 ms out-of-core LinearRegression
 * fit from page-locked memory, whose ring took 38 ms).  Sure to stream: a fit
 * (not partial statistics) whose X may stream and may hold no NaN, a caller's
 * host array on a session of one device, larger than the memory the backend
 * the call will run on may use (every streaming fit's plan holds at least X,
 * so it streams).  Likewise a fit that uploads X whole to a GPU and checks
 * it there (GSB__IN_CHECK_ON_BACKEND, gsb__x_check_on_backend: X fits the
 * GPU's memory, else it is refused before the call, or streamed as above
 * where the fit also has GSB__IN_STREAM).  Every other call
 * checks X here, as before.
 */
static int x_check_deferred(gsb__model *m, const gsb__method_desc *md, int xi,
                            const gsb_array *a, const gsb__validate_spec *spec)
{
    unsigned flags = md->inputs[xi].flags;
    const gsb_session *s = m->session;
    if (md->is_fit != 1 || !(flags & (GSB__IN_STREAM | GSB__IN_CHECK_ON_BACKEND)) ||
        spec->allow_nan || gsb__is_device_ref(a) || gsb__is_data_ref(a) ||
        (s->devset && s->devset->fit))
        return 0;
    gsb__validated_shape sh;
    if (gsb__validate_shape(a, spec, &sh) != GSB_OK || sh.rows <= 1) {
        gsb__err_clear(); /* validation proper says it again */
        return 0;
    }
    const gsb__backend *be = gsb__session_backend_for(s, sh.rows, sh.cols, flags);
    int on_gpu = be != gsb__cpu_backend();
    if (!on_gpu && !s->memory_cap)
        return 0;
    size_t budget;
    if (gsb__memory_budget(s, be, &budget) != GSB_OK) {
        gsb__err_clear(); /* the fit's own plan meets it again */
        return 0;
    }
    double bytes = (double)sh.rows * (double)sh.cols * (double)gsb_dtype_size(sh.dtype);
    if ((flags & GSB__IN_STREAM) && bytes > (double)budget)
        return 1;
    if (!(flags & GSB__IN_CHECK_ON_BACKEND))
        return 0;
    /* GSB__IN_CHECK_ON_BACKEND: an X that fits is uploaded whole and scanned
     * on the GPU (~0.1 ms for 256 MB, against ~5-10 ms for the host's pass) */
    return on_gpu && be->ops->nonfinite && bytes <= (double)budget;
}

int gsb__x_check_on_backend(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *Xb)
{
    const gsb__tensor *u = c->x_unchecked;
    const gsb__backend *be = Xb->be;
    if (!u || u->data != X->data || u->rows != Xb->rows || u->cols != Xb->cols ||
        !be->ops->nonfinite)
        return GSB_OK; /* not deferred here: the dispatcher checks X after the fit */
    int bad = 0;
    GSB_TRY(be->ops->nonfinite(be, Xb, &bad));
    if (bad)
        return gsb__err(GSB_EINVAL, "%s.%s: X holds NaN or infinity", c->est->name,
                        c->method->name); /* replaced by the host check's message */
    c->x_unchecked = NULL;
    return GSB_OK;
}

/* gsb__inputs_validate; may_defer: X's NaN / infinity check may be left to
 * the fit's stream (x_check_deferred), *deferred says whether it was. */
static int inputs_validate(gsb__model *m, const gsb__method_desc *md,
                           const gsb_array *const *inputs, int n_inputs, gsb__tensor *in,
                           int may_defer, int *deferred)
{
    *deferred = 0;
    const char *est = m->est->name;
    int nd = n_declared(md);
    for (int i = 0; i < GSB__MAX_INPUTS; i++)
        in[i] = GSB__TENSOR_NONE;
    if (n_inputs > nd) {
        return gsb__err(GSB_EINVAL, "%s.%s takes %d input(s) but %d were given", est,
                        md->name, nd, n_inputs);
    }
    for (int i = 0; i < nd; i++)
        if (!(md->inputs[i].flags & GSB__IN_OPTIONAL) && !given(inputs, n_inputs, i)) {
            if (strcmp(md->inputs[i].name, "y") == 0)
                return gsb__err(GSB_EINVAL,
                                "%s requires y to be passed, but the target y is None.", est);
            return gsb__err(GSB_EINVAL, "%s.%s: missing required input '%s'", est, md->name,
                            md->inputs[i].name);
        }

    int rc = GSB_OK;
    /* X first: it fixes the dtype and the row count for the others */
    int xi = find_x(md);
    gsb_dtype xdtype = 0;
    int64_t nrows = -1;
    if (xi >= 0 && given(inputs, n_inputs, xi)) {
        gsb__validate_spec spec = {"X", est, 0, 1, 0, 1, 0,
                                   (md->inputs[xi].flags & GSB__IN_ALLOW_NAN) != 0};
        if (may_defer && x_check_deferred(m, md, xi, inputs[xi], &spec)) {
            GSB_CHECK(gsb__validate_layout(inputs[xi], &spec, &in[xi]));
            *deferred = 1;
        } else {
            GSB_CHECK(validate_input(m, md, xi, inputs[xi], &spec, &in[xi]));
        }
        xdtype = in[xi].dtype;
        nrows = in[xi].rows;
        const gsb__tensor *nf = gsb__nlist_get(&m->attrs, "n_features_in_");
        unsigned xflags = md->inputs[xi].flags;
        int check = md->is_fit ? (xflags & GSB__IN_SAME_FEATURES) != 0
                               : !(xflags & GSB__IN_ANY_FEATURES);
        if (check && nf && m->fitted && (int64_t)gsb__tensor_get(nf, 0) != in[xi].cols) {
            rc = gsb__err(GSB_EINVAL, "X has %lld features, but %s is expecting %lld features "
                          "as input.", (long long)in[xi].cols, est,
                          (long long)gsb__tensor_get(nf, 0));
            goto done;
        }
    }
    for (int i = 0; i < nd; i++) {
        if (i == xi || !given(inputs, n_inputs, i))
            continue;
        unsigned kind = md->inputs[i].flags & GSB__IN_KIND_MASK;
        gsb__validate_spec spec = {md->inputs[i].name, est, 0, 0, 0, 1, 0, 0};
        switch (kind) {
        case GSB__IN_Y_LIKE_X: spec.dtype = xdtype; break;
        case GSB__IN_LABELS: spec.dtype = GSB_F64; spec.want_1d = 1; break;
        case GSB__IN_WEIGHTS:
            spec.dtype = GSB_F64;
            spec.want_1d = 1;
            spec.non_negative = !(md->inputs[i].flags & GSB__IN_SIGNED);
            break;
        case GSB__IN_MATRIX: spec.dtype = xdtype; spec.want_2d = 1; break;
        case GSB__IN_STATS: spec.dtype = GSB_F64; spec.want_1d = 1; break;
        default: spec.want_2d = 1; break;
        }
        GSB_CHECK(validate_input(m, md, i, inputs[i], &spec, &in[i]));
        if (kind == GSB__IN_MATRIX || kind == GSB__IN_STATS || nrows < 0)
            continue;
        if (in[i].rows != nrows) {
            if (kind == GSB__IN_WEIGHTS)
                rc = gsb__err(GSB_EINVAL, "sample_weight.shape == (%lld,), expected (%lld,)!",
                              (long long)in[i].rows, (long long)nrows);
            else
                rc = gsb__err(GSB_EINVAL, "Found input variables with inconsistent numbers of "
                              "samples: [%lld, %lld]", (long long)nrows, (long long)in[i].rows);
            goto done;
        }
    }
done:
    if (rc != GSB_OK && *deferred) {
        /* another input was refused: X's own error first, as scikit-learn
         * checks X before y */
        int bad = gsb__host_nonfinite(&in[xi]);
        if (bad)
            rc = gsb__nonfinite_error(bad, "X", in[xi].dtype);
    }
    if (rc != GSB_OK) {
        gsb__inputs_free(in);
        *deferred = 0;
    }
    return rc;
}

int gsb__inputs_validate(gsb__model *m, const gsb__method_desc *md,
                         const gsb_array *const *inputs, int n_inputs, gsb__tensor *in)
{
    int deferred;
    return inputs_validate(m, md, inputs, n_inputs, in, 0, &deferred);
}

/* ---- running methods ----------------------------------------------------- */

static int not_fitted(const gsb__model *m)
{
    return gsb__err(GSB_ENOTFITTED,
                    "This %s instance is not fitted yet. Call 'fit' with appropriate arguments "
                    "before using this estimator.",
                    m->est->name);
}

/*
 * device=auto's cost model: below this many input elements a call stays on
 * the CPU, where it costs no transfer and no kernel launches.  GPU work has a
 * fixed cost of a few launches and two PCIe transfers (~50-100 us) that the
 * CPU beats on small arrays; $GSB_AUTO_MIN_ELEMENTS overrides the default,
 * which tools/gpu-check calibrates (bench/RESULTS.md records it).  A method
 * whose work grows as rows^2 x cols (GSB__IN_QUADRATIC: a kernel SVM's SMO)
 * is weighed by that product instead, against GSB__AUTO_MIN_QUADRATIC
 * ($GSB_AUTO_MIN_QUADRATIC): 5000 x 20 is 10^5 elements but 5 10^8 kernel
 * terms.  Measured on an H200 host against the CPU's libsvm SMO (bench/RESULTS.md,
 * 2026-11-27): the GPU won from 2000 x 20 rows (3000: SVR 455 -> 17 ms, SVC 119 ->
 * 8 ms), so from 2^27 (about 2600 x 20) the fit goes there.
 */
#define GSB__AUTO_MIN_ELEMENTS_DEFAULT (1 << 18)
#define GSB__AUTO_MIN_QUADRATIC_DEFAULT ((int64_t)1 << 27)

static int64_t env_threshold(_Atomic int64_t *cached, const char *name, int64_t fallback)
{
    int64_t v = atomic_load(cached);
    if (v < 0) {
        const char *env = getenv(name);
        v = env && *env ? atoll(env) : fallback;
        atomic_store(cached, v);
    }
    return v;
}

const gsb__backend *gsb__session_backend_for(const gsb_session *s, int64_t rows, int64_t cols,
                                             unsigned x_flags)
{
    static _Atomic int64_t min_elements = -1, min_quadratic = -1;
    if (!s->gpu || s->device == GSB__DEVICE_CPU)
        return s->be;
    if (s->device == GSB__DEVICE_CUDA)
        return s->gpu;
    if (x_flags & GSB__IN_QUADRATIC) /* in double: rows^2 cols may pass 2^63 */
        return (double)rows * (double)rows * (double)cols >=
                       (double)env_threshold(&min_quadratic, "GSB_AUTO_MIN_QUADRATIC",
                                             GSB__AUTO_MIN_QUADRATIC_DEFAULT)
                   ? s->gpu
                   : s->be;
    return rows * cols >= env_threshold(&min_elements, "GSB_AUTO_MIN_ELEMENTS",
                                        GSB__AUTO_MIN_ELEMENTS_DEFAULT)
               ? s->gpu
               : s->be;
}

const gsb__backend *gsb__session_backend(const gsb_session *s, int64_t rows, int64_t cols)
{
    return gsb__session_backend_for(s, rows, cols, 0);
}

static int run_fn(gsb__ctx *cp, const gsb__method_desc *md, gsb__tensor *in);

static _Thread_local double call_start_ms; /* gsb__call_elapsed_ms */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

double gsb__call_elapsed_ms(void) { return now_ms() - call_start_ms; }

/*
 * A host X larger than the memory the chosen backend has for it (core/budget.h:
 * the GPU's free memory, the session's memory cap) is refused here, with a
 * message saying why, unless the method streams its X in batches
 * (GSB__IN_STREAM): uploading it would fail half-way, or on a capped CPU
 * backend exceed what the caller allowed.
 */
static int check_fits(gsb__model *m, const gsb__method_desc *md, int xi, const gsb__tensor *X,
                      const gsb__backend *be)
{
    if (xi < 0 || !X->data || X->be != gsb__cpu_backend() ||
        (md->inputs[xi].flags & GSB__IN_STREAM))
        return GSB_OK;
    size_t need = gsb__tensor_nbytes(X);
    if (be == gsb__cpu_backend() && !m->session->memory_cap)
        return GSB_OK;
    size_t budget;
    GSB_TRY(gsb__memory_budget(m->session, be, &budget));
    if (need <= budget)
        return GSB_OK;
    char nb[32], bb[32];
    return gsb__err(GSB_ENOMEM, "%s.%s: X (%s) does not fit in the %s memory gsb may use (%s%s) "
                    "and %s.%s cannot stream its input from host memory in batches: use a "
                    "smaller X (or batches of it), %s", m->est->name, md->name,
                    gsb__format_bytes(need, nb, sizeof nb), be->name,
                    gsb__format_bytes(budget, bb, sizeof bb),
                    m->session->memory_cap ? ", capped by memory_cap / GSB_GPU_MEMORY_CAP" : "",
                    m->est->name, md->name,
                    be == gsb__cpu_backend() ? "or raise the memory cap"
                                             : "device=cpu, or a larger memory cap");
}

/* Run a declared method on already-validated inputs; x_deferred: X's NaN /
 * infinity check is the fit's to make (x_check_deferred). */
static int run_validated(gsb__model *m, const gsb__method_desc *md, gsb__tensor *in,
                         const json_t *options, gsb__nlist *out, int x_deferred)
{
    gsb__ctx c = {0};
    c.model = m;
    c.est = m->est;
    c.method = md;
    c.params = m->params;
    c.options = options;
    c.out = out;
    memcpy(c.in, in, sizeof c.in);
    int xi_ = find_x(md);
    const gsb__tensor *X = xi_ >= 0 && in[xi_].data ? &in[xi_] : &in[0];
    c.x_unchecked = x_deferred && xi_ >= 0 ? &in[xi_] : NULL;
    /* X already on a device (a data handle, the caller's device array) computes there */
    c.be = X->data && X->be && X->be != gsb__cpu_backend()
               ? X->be
               : gsb__session_backend_for(m->session, X->rows, X->cols,
                                          xi_ >= 0 ? md->inputs[xi_].flags : 0);
    GSB_TRY(check_fits(m, md, xi_, X, c.be));
    /* small work on the CPU: each small BLAS or LAPACK call runs single-threaded
     * by itself (backend/cpu/cpu_threads.c) */
    gsb__profile_begin(c.be, m->est->name, md->name);
    int rc = run_fn(&c, md, in);
    gsb__profile_end();
    return rc;
}

/*
 * The end of a fit whose X check was deferred (x_check_deferred): X is
 * checked on the host when no pass of the fit's stream checked every batch
 * (the fit did not stream X after all, failed part way, or found a bad
 * batch), which also gives scikit-learn's message for X as a whole (NaN
 * before infinity, wherever each is).  A non-finite X is the error, whatever
 * the fit said; *rejected then.
 */
static int deferred_x_check(const gsb__ctx *c, const gsb__tensor *X, int rc, int *rejected)
{
    *rejected = 0;
    if (!c->x_unchecked)
        return rc;
    int bad = gsb__host_nonfinite(X); /* NaN is never allowed here (x_check_deferred) */
    if (!bad)
        return rc;
    *rejected = 1;
    return gsb__nonfinite_error(bad, "X", X->dtype);
}

/* The state a failed or refused fit derived from its attributes. */
static void drop_fit_devstate(gsb__ctx *c)
{
    if (c->devstate && c->devstate_free)
        c->devstate_free(c->devstate);
    c->devstate = NULL;
}

/* Run md on the context; a fit swaps its new attributes (and the state derived
 * from them, c.devstate) in only on success. */
static int run_fn(gsb__ctx *cp, const gsb__method_desc *md, gsb__tensor *in)
{
    gsb__ctx c = *cp;
    gsb__model *m = c.model;
    if (md->is_fit != 1)
        return md->fn(&c);

    gsb__nlist fresh = {0};
    c.fit_attrs = &fresh;
    int rc = md->fn(&c);
    int xi = find_x(md), rejected;
    rc = deferred_x_check(&c, &in[xi >= 0 ? xi : 0], rc, &rejected);
    if (rejected) { /* refused input: the model stays as it was, as when validation refuses */
        gsb__nlist_clear(&fresh);
        drop_fit_devstate(&c);
        return rc;
    }
    if (rc == GSB_OK && xi >= 0 && in[xi].data)
        rc = gsb__fit_set_scalar(&c, "n_features_in_", (double)in[xi].cols, GSB_I64);
    /* A failure inside fit leaves the model unfitted (never half-fitted). */
    gsb__model_drop_devstate(m);
    gsb__nlist_clear(&m->attrs);
    m->fitted = 0;
    if (rc == GSB_OK) {
        m->attrs = fresh;
        m->fitted = 1;
        m->devstate = c.devstate;
        m->devstate_free = c.devstate_free;
    } else {
        gsb__nlist_clear(&fresh);
        drop_fit_devstate(&c);
    }
    return rc;
}

int gsb__dispatch_validated(gsb__model *m, const gsb__method_desc *md, gsb__tensor *in,
                            const json_t *options, gsb__nlist *out)
{
    return run_validated(m, md, in, options, out, 0);
}

static int run_method(gsb__model *m, const gsb__method_desc *md, const gsb_array *const *inputs,
                      int n_inputs, const json_t *options, gsb__nlist *out)
{
    if (!md->is_fit && !m->fitted)
        return not_fitted(m);
    call_start_ms = now_ms();
    gsb__tensor in[GSB__MAX_INPUTS];
    int deferred;
    int rc = inputs_validate(m, md, inputs, n_inputs, in, 1, &deferred);
    if (rc == GSB_OK) {
        /* a multi-device session: the fit across its devices where the
         * estimator has one, else (after a warning) on the first device */
        int handled = 0;
        gsb__devset *ds = m->session->devset;
        if (ds && ds->fit && md->is_fit == 1)
            rc = ds->fit(ds, m, md, in, options, out, &handled);
        if (!handled)
            rc = run_validated(m, md, in, options, out, deferred);
        gsb__inputs_free(in);
    }
    return release_device_inputs(m, inputs, n_inputs, rc);
}

/* fit then transform/predict on the same X (inputs as fit declares them). */
static int fit_then(gsb__model *m, const char *then, const gsb_array *const *inputs,
                    int n_inputs, const json_t *options, gsb__nlist *out)
{
    const gsb__method_desc *fit = gsb__method_find(m->est, "fit");
    const gsb__method_desc *next = gsb__method_find(m->est, then);
    if (!fit || !next)
        return gsb__err(GSB_ENOTFOUND, "%s has no method 'fit_%s'", m->est->name, then);
    gsb__nlist ignored = {0};
    int rc = run_method(m, fit, inputs, n_inputs, options, &ignored);
    gsb__nlist_clear(&ignored);
    if (rc != GSB_OK)
        return rc;
    return run_method(m, next, inputs, n_inputs > 0 ? 1 : 0, options, out);
}

static int default_score(gsb__model *m, const gsb_array *const *inputs, int n_inputs,
                         const json_t *options, gsb__nlist *out)
{
    int kind = m->est->kind;
    const gsb__method_desc *predict = gsb__method_find(m->est, "predict");
    if (!predict || (kind != GSB__KIND_REGRESSOR && kind != GSB__KIND_CLASSIFIER))
        return gsb__err(GSB_ENOTFOUND, "%s has no method 'score'", m->est->name);
    if (!m->fitted)
        return not_fitted(m);
    gsb__method_desc score = {"score", NULL,
                              {{"X", GSB__IN_X},
                               {"y", kind == GSB__KIND_CLASSIFIER ? GSB__IN_LABELS
                                                                  : GSB__IN_Y_LIKE_X},
                               {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
                              0, NULL};
    gsb__tensor in[GSB__MAX_INPUTS];
    int rc = gsb__inputs_validate(m, &score, inputs, n_inputs, in);
    if (rc != GSB_OK)
        return release_device_inputs(m, inputs, n_inputs, rc);
    gsb__nlist pred = {0};
    gsb__tensor pin[GSB__MAX_INPUTS] = {in[0]};
    rc = run_validated(m, predict, pin, options, &pred, 0);
    double value = 0;
    if (rc == GSB_OK) {
        const gsb__tensor *yp = pred.n > 0 ? &pred.items[0] : NULL;
        const gsb__tensor *sw = in[2].data ? &in[2] : NULL;
        if (!yp)
            rc = gsb__err(GSB_EINTERNAL, "%s.predict returned nothing", m->est->name);
        else if (kind == GSB__KIND_CLASSIFIER)
            rc = gsb__score_accuracy(&in[1], yp, sw, &value);
        else
            rc = gsb__score_r2(&in[1], yp, sw, &value);
    }
    if (rc == GSB_OK) {
        gsb__tensor t;
        rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, 1, 1, &t);
        if (rc == GSB_OK) {
            ((double *)t.data)[0] = value;
            t.ndim = 0;
            rc = gsb__nlist_put(out, "score", &t);
        }
    }
    gsb__nlist_clear(&pred);
    gsb__inputs_free(in);
    return release_device_inputs(m, inputs, n_inputs, rc);
}

int gsb__dispatch(gsb__model *m, const char *method, const gsb_array *const *inputs,
                  int n_inputs, const json_t *options, gsb__nlist *out)
{
    if (n_inputs < 0 || (n_inputs > 0 && !inputs))
        return gsb__err(GSB_EINVAL, "invalid input list");
    atomic_store(&m->cancel, 0);
    const gsb__method_desc *md = gsb__method_find(m->est, method);
    if (md)
        return run_method(m, md, inputs, n_inputs, options, out);
    if (strcmp(method, "fit_transform") == 0)
        return fit_then(m, "transform", inputs, n_inputs, options, out);
    if (strcmp(method, "fit_predict") == 0 && m->est->kind == GSB__KIND_CLUSTERER)
        return fit_then(m, "predict", inputs, n_inputs, options, out);
    if (strcmp(method, "score") == 0)
        return default_score(m, inputs, n_inputs, options, out);
    return gsb__err(GSB_ENOTFOUND, "'%s' object has no attribute '%s'", m->est->name, method);
}

int gsb__method_available(const gsb__estimator_desc *est, const char *method)
{
    if (gsb__method_find(est, method))
        return 1;
    int has_fit = gsb__method_find(est, "fit") != NULL;
    if (strcmp(method, "fit_transform") == 0)
        return has_fit && gsb__method_find(est, "transform");
    if (strcmp(method, "fit_predict") == 0) /* scikit-learn's ClusterMixin only */
        return has_fit && est->kind == GSB__KIND_CLUSTERER && gsb__method_find(est, "predict");
    if (strcmp(method, "score") == 0)
        return gsb__method_find(est, "predict") &&
               (est->kind == GSB__KIND_REGRESSOR || est->kind == GSB__KIND_CLASSIFIER);
    return 0;
}
