/*
 * estimator.h - what an estimator declares and what its methods receive.
 *
 * One gsb__estimator_desc per estimator (in src/estimators/) declares its
 * parameters, methods (with their inputs) and fitted attributes.  The
 * registry, the info JSON, the Python classes and the server all read it.
 *
 * A method is a function of a gsb__ctx.  The dispatcher (core/dispatch.c)
 * has already validated the inputs the method declares and converted them
 * to contiguous host tensors, so a method starts with clean data:
 *   - GSB__IN_X inputs are 2-D float32/float64 (ints become float64), finite
 *     (or NaN where the input says GSB__IN_ALLOW_NAN), with >= 1 row and
 *     column, and for non-fit methods the feature count seen at fit;
 *   - every other input has as many rows as X (when X is given);
 *   - X may also be a device tensor (GSB__IN_DEVICE_OK: a data handle on the
 *     GPU or the caller's device array), and then c->be is that device's.
 * A fit method writes fitted attributes with gsb__fit_set(); they replace the
 * model's attributes only when the fit succeeds.  Other methods read them
 * with gsb__attr() and append results with gsb__out().
 */
#ifndef GSB_CORE_ESTIMATOR_H
#define GSB_CORE_ESTIMATOR_H

#include <jansson.h>

#include "core/error.h"
#include "core/params.h"
#include "core/tensor.h"

#define GSB__MAX_INPUTS 4

/* input kinds (exactly one) and flags */
enum {
    GSB__IN_X = 1,             /* 2-D features */
    GSB__IN_Y_LIKE_X = 2,      /* regression targets: 1-D or 2-D, cast to X's dtype */
    GSB__IN_LABELS = 3,        /* class labels: 1-D (an (n, 1) column is raveled), float64 */
    GSB__IN_WEIGHTS = 4,       /* 1-D sample weights, float64, >= 0 */
    GSB__IN_MATRIX = 5,        /* any finite 2-D float array cast to X's dtype (KMeans init) */
    GSB__IN_STATS = 6,         /* partial statistics: a 1-D float64 array in the packed form
                                  of estimators/common/partial_stats.h; rows not checked */
    GSB__IN_KIND_MASK = 7,
    GSB__IN_OPTIONAL = 8,      /* may be omitted */
    GSB__IN_ANY_FEATURES = 16, /* X may have any feature count (not checked against fit) */
    GSB__IN_DEVICE_OK = 32,    /* the method reads this input only through ops and
                                  gsb__tensor_to, so a data handle already on the GPU
                                  (core/data.h) or the caller's device array
                                  (core/devarray.h) is passed as a device tensor */
    GSB__IN_SAME_FEATURES = 64, /* a fit method that updates a fitted model (partial_fit):
                                  X must have the feature count seen before, checked
                                  before the method runs, so a mismatch keeps the model */
    GSB__IN_ALLOW_NAN = 128,   /* X may hold NaN (missing values; infinity is still
                                  refused), as scikit-learn's allow_nan estimators */
    GSB__IN_SIGNED = 256,      /* weights: negative values allowed (DBSCAN) */
    GSB__IN_STREAM = 512,      /* the method takes a host X larger than the backend's memory
                                  (reads it in batches, estimators/common/stream.h, or keeps
                                  it on the host); without it such an X is refused before
                                  the method runs */
    GSB__IN_CHECK_ON_BACKEND = 1024, /* a fit that uploads X whole checks it for NaN /
                                  infinity there (gsb__x_check_on_backend) instead of
                                  the host's pass over X before the call, when it runs
                                  on a GPU */
    GSB__IN_QUADRATIC = 2048   /* X: the method's work grows as rows^2 x cols (a kernel
                                  SVM's fit), which device=auto weighs as such */
};

typedef struct gsb__input_desc {
    const char *name; /* "X", "y", "sample_weight", ... */
    unsigned flags;
} gsb__input_desc;

typedef struct gsb__ctx gsb__ctx;
typedef int (*gsb__method_fn)(gsb__ctx *ctx);

typedef struct gsb__method_desc {
    const char *name;                     /* "fit", "predict", ... */
    gsb__method_fn fn;
    gsb__input_desc inputs[GSB__MAX_INPUTS]; /* terminated by name == NULL */
    int is_fit;                           /* 1: a fit (writes attributes); 0: reads the
                                             fitted state; GSB__METHOD_STATELESS: neither
                                             (partial statistics: runs on an unfitted
                                             model and leaves its state alone) */
    const char *doc;
} gsb__method_desc;

#define GSB__METHOD_STATELESS 2

typedef struct gsb__attr_desc {
    const char *name; /* "coef_", ...; a leading '_' marks internal state */
    const char *doc;
} gsb__attr_desc;

/* estimator kinds, for the default score and the Python base classes */
enum { GSB__KIND_TRANSFORMER = 1, GSB__KIND_REGRESSOR, GSB__KIND_CLASSIFIER,
       GSB__KIND_CLUSTERER, GSB__KIND_NEIGHBORS };

typedef struct gsb__estimator_desc {
    const char *name;   /* scikit-learn's class name, "KMeans" */
    const char *module; /* "cluster", "linear_model", ... (cuML's module) */
    int kind;
    const gsb__param_desc *params;   /* terminated by name == NULL */
    const gsb__method_desc *methods; /* terminated by name == NULL */
    const gsb__attr_desc *attrs;     /* terminated by name == NULL */
    const char *doc;
} gsb__estimator_desc;

/* A list of named host tensors: fitted attributes and call results. */
typedef struct gsb__nlist {
    int n, cap;
    char **names;
    gsb__tensor *items;
} gsb__nlist;

void gsb__nlist_clear(gsb__nlist *l);
/* takes ownership of t (replacing an entry of the same name) */
int gsb__nlist_put(gsb__nlist *l, const char *name, gsb__tensor *t);
const gsb__tensor *gsb__nlist_get(const gsb__nlist *l, const char *name);

struct gsb_model;

struct gsb__ctx {
    struct gsb_model *model;
    const gsb__estimator_desc *est;
    const gsb__method_desc *method;
    const json_t *params;     /* the model's parameters */
    const json_t *options;    /* keyword options of this call (an object, maybe empty) */
    const gsb__backend *be;   /* the backend to compute on */
    gsb__tensor in[GSB__MAX_INPUTS]; /* validated host tensors; data NULL if absent */
    gsb__nlist *fit_attrs;    /* fit methods: the attributes being built */
    gsb__nlist *out;          /* results */
    const gsb__tensor *x_unchecked; /* X while its NaN / infinity check is deferred to the
                                       fit's stream (core/dispatch.c), until a pass over X
                                       has checked every batch (estimators/common/stream.c)
                                       or the uploaded X was checked
                                       (gsb__x_check_on_backend); else NULL */
    void *devstate;           /* fit methods: state derived from the new attributes (a
                                 forest's trees on the GPU) that the model keeps as its
                                 devstate (core/model.h) once the fit succeeds; freed with
                                 devstate_free otherwise.  NULL: none */
    void (*devstate_free)(void *devstate);
};

/*
 * X (the fit's host input) was uploaded whole as Xb on c->be: when its NaN /
 * infinity check was left to the fit (GSB__IN_CHECK_ON_BACKEND), scan Xb
 * there.  A bad X fails the fit (the dispatcher then gives scikit-learn's
 * message from the host's check); otherwise a no-op.
 */
int gsb__x_check_on_backend(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *Xb);

/* The validated input named as the method declared it, or NULL if absent. */
const gsb__tensor *gsb__in(gsb__ctx *c, const char *name);
/* A fitted attribute of the model, or NULL; inside fit, the new ones first. */
const gsb__tensor *gsb__attr(gsb__ctx *c, const char *name);
/*
 * A fitted attribute that must exist with dtype (0: any) and shape (-1: any
 * size): an imported blob can hold anything, so methods read their state
 * through this and never trust it blindly.  GSB_ECORRUPT otherwise.
 */
int gsb__attr_need(gsb__ctx *c, const char *name, gsb_dtype dtype, int64_t rows, int64_t cols,
                   const gsb__tensor **out);
/* Store a fitted attribute (host copy made when t is not on the host; t freed). */
int gsb__fit_set(gsb__ctx *c, const char *name, gsb__tensor *t);
/* Append a result (host copy made when t is not on the host; t freed). */
int gsb__out(gsb__ctx *c, const char *name, gsb__tensor *t);
/* Store a scalar as a 0-d-like (1 x 1) float64 / int64 attribute or result. */
int gsb__fit_set_scalar(gsb__ctx *c, const char *name, double v, gsb_dtype dtype);
int gsb__out_scalar(gsb__ctx *c, const char *name, double v, gsb_dtype dtype);

/* Options of the call (keyword arguments): typed reads with defaults. */
int64_t gsb__opt_int(gsb__ctx *c, const char *name, int64_t dflt);
int gsb__opt_bool(gsb__ctx *c, const char *name, int dflt);

/*
 * Report progress of a long fit; returns GSB_ECANCELLED (with the message
 * set) when the user cancelled, so loops do GSB_TRY(gsb__progress(...)).
 */
int gsb__progress(gsb__ctx *c, const char *stage, int64_t iteration, double loss);
/* verbose parameter > 0 and progress printing requested */

/* The registry: every estimator compiled in. */
const gsb__estimator_desc *gsb__registry_find(const char *name);
const gsb__estimator_desc *const *gsb__registry_all(int *count);
const gsb__method_desc *gsb__method_find(const gsb__estimator_desc *est, const char *name);

/* Shared scoring used by several estimators (core/metrics.c). */
/* R^2 averaged uniformly over outputs (y n x t); weights may be NULL */
int gsb__score_r2(const gsb__tensor *y_true, const gsb__tensor *y_pred,
                  const gsb__tensor *sample_weight, double *out);
int gsb__score_accuracy(const gsb__tensor *y_true, const gsb__tensor *y_pred,
                        const gsb__tensor *sample_weight, double *out);

#endif
