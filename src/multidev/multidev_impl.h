/*
 * multidev_impl.h - the multi-device fit's building blocks, shared by
 * multidev.c (the statistics-once fits) and multidev_kmeans.c (Lloyd's
 * loop): a fit's rows split into one shard per rank (placed on the rank's
 * device once, for every pass), methods run on every shard at once (one host
 * thread per rank), and their partial statistics combined through the
 * session's communicator.
 */
#ifndef GSB_MULTIDEV_IMPL_H
#define GSB_MULTIDEV_IMPL_H

#include "core/model.h"
#include "multidev/devset.h"

typedef struct gsb__shard {
    const gsb__backend *be;
    int64_t r0, r1;     /* its rows of X */
    gsb__tensor x;      /* X's rows: a host view (CPU rank) or a copy on be (owned) */
    gsb__tensor y, w;   /* host views of y's and sample_weight's rows, or NONE */
} gsb__shard;

typedef struct gsb__mdfit {
    gsb__devset *ds;
    gsb__model *m;
    gsb__shard sh[GSB__MAX_DEVICES];
    const gsb__tensor *X, *y, *w; /* the fit's inputs (host), y / w NULL when absent */
} gsb__mdfit;

/* An input of a method called on every shard that is not one of the fit's:
 * the same host tensor for every rank (KMeans' centres). */
typedef struct gsb__md_extra {
    const char *name;
    const gsb__tensor *t;
} gsb__md_extra;

/* fn on every rank with rows at once, ranks 1.. on threads of their own
 * (the calling thread is rank 0); the first failure (in rank order) is the
 * result, with its message. */
typedef int (*gsb__md_rank_fn)(gsb__mdfit *f, int r, void *arg);
int gsb__md_each(gsb__mdfit *f, gsb__md_rank_fn fn, void *arg);

/* Split the fit's inputs over ds and place each shard on its device. */
int gsb__md_open(gsb__devset *ds, gsb__model *m, const gsb__tensor *X, const gsb__tensor *y,
                 const gsb__tensor *w, gsb__mdfit *f);
void gsb__md_close(gsb__mdfit *f);

/*
 * Method `method` of the estimator on every shard with rows: its inputs
 * named X, y, sample_weight are the shard's, others come from extra;
 * options as given, plus "offset" (the shard's first global row) when
 * with_offset.  outs[r]: rank r's results (cleared by the caller).
 */
int gsb__md_run(gsb__mdfit *f, const char *method, const gsb__md_extra *extra, int n_extra,
                const json_t *options, int with_offset, gsb__nlist *outs);
/* The ranks' "stats" results combined (multidev.c's comment says how). */
int gsb__md_combine(gsb__mdfit *f, gsb__nlist *outs, gsb__tensor *out);
/* gsb__md_run then gsb__md_combine, the outputs freed. */
int gsb__md_stats(gsb__mdfit *f, const char *method, const gsb__md_extra *extra, int n_extra,
                  const json_t *options, int with_offset, gsb__tensor *out);
/* A method of the estimator run once on the first device (a driver step):
 * inputs in the order the method declares them. */
int gsb__md_step(gsb__mdfit *f, const char *method, gsb__tensor *in, const json_t *options,
                 gsb__nlist *out);

/* KMeans across devices (multidev_kmeans.c): Lloyd's loop from an explicit
 * init; *handled 0 (with *why) for what it does not cover. */
int gsb__md_kmeans_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                       gsb__tensor *in, int *handled, const char **why);

/* Warn once per estimator and session that m.method runs on the first device only. */
void gsb__md_warn_once(gsb__devset *ds, const gsb__model *m, const char *method,
                       const char *why);

/* LogisticRegression across devices (multidev_logistic.c): L-BFGS over the
 * all-reduced loss and gradient; *handled 0 (with *why) for what it does not cover. */
int gsb__md_logistic_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                         gsb__tensor *in, int *handled, const char **why);

/* The neighbours estimators across devices (multidev_knn.c): 1 for
 * NearestNeighbors, KNeighborsClassifier, KNeighborsRegressor.  Their fit is
 * the one-device fit (the training rows kept on the host), then X's rows
 * placed on the devices, one shard each, for every later search. */
int gsb__md_knn_estimator(const gsb__model *m);
int gsb__md_knn_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md, gsb__tensor *in,
                    const json_t *options, gsb__nlist *out, int *handled);

/* The forests across devices (multidev_forest.c): 1 for RandomForestClassifier
 * and RandomForestRegressor, whose fit shares the trees out over the ranks
 * (each on the whole X) and concatenates them in seed order; *handled 0 (with
 * *why) for what it does not cover (warm_start). */
int gsb__md_forest_estimator(const gsb__model *m);
int gsb__md_forest_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                       gsb__tensor *in, int *handled, const char **why);

#endif
