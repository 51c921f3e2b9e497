/*
 * partial_stats.h - partial (per-partition) sufficient statistics, the
 * engine's side of fitting on data split across processes or hosts.
 *
 * A distributed fit (python/gsb/dask, a C client driving several gsbd, the
 * NCCL path of issue 18) runs a "stats_*" method of the estimator on each
 * partition, merges the results pairwise with "merge_stats" in any order and
 * grouping, and fits the model from the merged statistics with
 * "fit_from_stats" (or steps an iteration with them).  The combination is
 * exact: the merged statistics are those of the concatenated data, up to
 * rounding.  Every one of these is an ordinary method of the descriptor,
 * called through gsb_model_call, so local, remote and Python sessions have
 * them with no code of their own.  The stats_* and merge methods are
 * GSB__METHOD_STATELESS (they run on an unfitted model and leave its state
 * alone) and pure: the same inputs and options give bitwise the same
 * statistics, so a retried partition gives the same answer.
 *
 * Packed form: one 1-D float64 array (result "stats", input kind
 * GSB__IN_STATS), so that any transport, numpy and an allreduce can carry it:
 *     [GSB__STATS_MAGIC, kind, a, b, c, payload...]
 * with a, b, c the kind's dimensions:
 *   MOMENTS  a = d       [w_sum, n_rows, mean(d), m2(d), min(d), max(d)]:
 *                        m2 = sum w (x - mean)^2; merged with Chan, Golub and
 *                        LeVeque's pairwise update (weighted); min/max elementwise
 *   GRAM     a = q, b = t [w_sum, n_rows, mean(q), C(q x q)] of z = [X | y]
 *                        (t target columns last, 0 without y):
 *                        C = sum w (z - mean)(z - mean)^T; merged with the
 *                        pairwise update's co-moment form
 *                        C = Ca + Cb + (wa wb / w) (ma - mb)(ma - mb)^T
 *   LLOYD    a = k, b = d [inertia, counts(k), sums(k x d)]: summed
 *   LOSSGRAD a = R, b = p [sum w, sum w loss, grad(R x p)]: summed
 *   COST     a = 1       [sum w d^2]: summed
 *   FAR      a = m, b = d m rows [dist, index, weight, label, x(d)]: the m
 *                        largest dist (ties: smaller index) of both; rows
 *                        with index -1 are padding
 *   TOPK     a = nq, b = k, c = t [dist(nq x k), index(nq x k),
 *                        payload(nq x k x t)]: per query the k smallest
 *                        (dist, index) of both; index -1 is padding
 *   SAMPLE   a = m, b = d [rows(m x d)]: concatenated (a's rows first)
 * Indices are global row numbers (a partition's offset plus its row), exact
 * in float64 below 2^53.
 */
#ifndef GSB_ESTIMATORS_COMMON_PARTIAL_STATS_H
#define GSB_ESTIMATORS_COMMON_PARTIAL_STATS_H

#include <stdint.h>

#include "core/estimator.h"

#define GSB__STATS_MAGIC 4674386.0 /* 'G' 'S' 'B' read as a number: 0x475352 */
#define GSB__STATS_HEAD 5

enum {
    GSB__STATS_MOMENTS = 1,
    GSB__STATS_GRAM,
    GSB__STATS_LLOYD,
    GSB__STATS_LOSSGRAD,
    GSB__STATS_COST,
    GSB__STATS_FAR,
    GSB__STATS_TOPK,
    GSB__STATS_SAMPLE
};

/* A parsed, checked packed array (borrowed: v points into the tensor). */
typedef struct gsb__stats {
    int kind;
    int64_t a, b, c;
    const double *v; /* the payload */
    int64_t len;     /* payload length */
} gsb__stats;

/* Parse and check t (a host float64 vector); kind 0 accepts any kind. */
int gsb__stats_parse(const gsb__tensor *t, int kind, gsb__stats *out);
/* A new packed array of the kind's size for dims a, b, c (zeroed payload);
 * *payload points into it.  A host float64 1-D tensor. */
int gsb__stats_alloc(int kind, int64_t a, int64_t b, int64_t c, gsb__tensor *out,
                     double **payload);
/* The merged statistics of x and y (same kind and dimensions) into out. */
int gsb__stats_merge(const gsb__stats *x, const gsb__stats *y, gsb__tensor *out);

/* Sample weights as the fits see them: rounded to X's dtype (numpy casts
 * them so).  *w NULL without weights; *wsum the total (rows without). */
int gsb__stats_weights(const gsb__tensor *sw, gsb_dtype xdtype, double **w, double *wsum);

/* ---- methods shared by several estimators ---------------------------------- */

/* "merge_stats"(a, b): result "stats". */
int gsb__stats_merge_method(gsb__ctx *c);
/* "stats_moments"(X, sample_weight): MOMENTS of X. */
int gsb__stats_moments_method(gsb__ctx *c);
/* "stats_gram"(X, y, sample_weight): GRAM of [X | y] (y optional). */
int gsb__stats_gram_method(gsb__ctx *c);

#define GSB__STATS_MERGE_ROW                                                             \
    {"merge_stats", gsb__stats_merge_method, {{"a", GSB__IN_STATS}, {"b", GSB__IN_STATS}}, \
     GSB__METHOD_STATELESS,                                                              \
     "merge two partial statistics (docs/DASK.md; result \"stats\")"}
#define GSB__STATS_MOMENTS_ROW                                                           \
    {"stats_moments", gsb__stats_moments_method,                                         \
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}}, \
     GSB__METHOD_STATELESS, "partial column moments of X (result \"stats\")"}
#define GSB__STATS_GRAM_ROW                                                              \
    {"stats_gram", gsb__stats_gram_method,                                               \
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}, {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL},  \
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},                            \
     GSB__METHOD_STATELESS, "partial centred cross-products of [X | y] (result \"stats\")"}

/* ---- fits from statistics, declared by the estimators' files ---------------- */

/* StandardScaler (preprocessing.c) */
int gsb__scaler_fit_from_stats(gsb__ctx *c);
/* LinearRegression, Ridge (linear_model/linear_stats.c) */
int gsb__linreg_fit_from_stats(gsb__ctx *c);
int gsb__ridge_fit_from_stats(gsb__ctx *c);
/* PCA, TruncatedSVD (decomposition.c) */
int gsb__pca_fit_from_stats(gsb__ctx *c);
int gsb__tsvd_fit_from_stats(gsb__ctx *c);

/* LogisticRegression (linear_model/logistic_stats.c) */
int gsb__logistic_stats_lossgrad(gsb__ctx *c);
int gsb__logistic_lbfgs_next(gsb__ctx *c);
int gsb__logistic_fit_from_stats(gsb__ctx *c);

#define GSB__LOGISTIC_STATS_ROWS                                                         \
    {"stats_lossgrad", gsb__logistic_stats_lossgrad,                                     \
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}, {"y", GSB__IN_LABELS},                        \
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}, {"coef", GSB__IN_STATS}},    \
     GSB__METHOD_STATELESS,                                                              \
     "a partition's summed weights, log-loss and gradient at the flat coef (y: class "   \
     "indices; options n_classes, class_weight)"},                                       \
    {"lbfgs_next", gsb__logistic_lbfgs_next, {{"history", GSB__IN_MATRIX}},              \
     GSB__METHOD_STATELESS,                                                              \
     "the engine's L-BFGS replayed over the evaluations so far: the next point 'x' to "  \
     "evaluate, or done"},                                                               \
    {"fit_from_stats", gsb__logistic_fit_from_stats,                                     \
     {{"history", GSB__IN_MATRIX}, {"classes", GSB__IN_LABELS}}, 1,                      \
     "fit from a finished L-BFGS history (docs/DASK.md)"}

#define GSB__FIT_FROM_STATS_ROW(fn, what)                                                \
    {"fit_from_stats", fn, {{"stats", GSB__IN_STATS}}, 1,                                \
     "fit from merged " what " statistics (docs/DASK.md)"}

#endif
