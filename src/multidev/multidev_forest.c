/*
 * multidev_forest.c - RandomForestClassifier / RandomForestRegressor across
 * the devices of a session: the trees shared out, not the rows.
 *
 * Each tree depends only on X, y, the bins (drawn from random_state) and its
 * own seed (the cold fit's seed sequence), so rank r grows trees [t0, t1)
 * of the n_estimators (gsb__multidev_split of the trees) on the whole X, on
 * its own device, through the forest's ordinary fit with the options
 * _tree_start / _tree_stop.  The ranks' forests, packed (forest_merge.h),
 * are concatenated in rank order (merge_trees' gsb__forest_concat, the
 * entry gsb.dask's forests use too), so the trees and their order are the
 * one-device fit's; fit_from_trees then stores them on the model, with the
 * OOB estimates and feature_importances_ computed as the one-device fit
 * computes them.  Nothing moves between devices but the packed trees.
 */
#include <stdlib.h>
#include <string.h>

#include "core/dispatch.h"
#include "core/params.h"
#include "core/tensor.h"
#include "estimators/ensemble/forest_merge.h"
#include "multidev/multidev.h"
#include "multidev/multidev_impl.h"

int gsb__md_forest_estimator(const gsb__model *m)
{
    return strcmp(m->est->name, "RandomForestClassifier") == 0 ||
           strcmp(m->est->name, "RandomForestRegressor") == 0;
}

typedef struct share_args {
    const gsb__method_desc *md;
    gsb__tensor *in;
    gsb__tensor packs[GSB__MAX_DEVICES];
} share_args;

/* Rank r: its trees [r0, r1) grown on its backend, packed into packs[r]. */
static int grow_share(gsb__mdfit *f, int r, void *arg)
{
    share_args *a = arg;
    const gsb__shard *s = &f->sh[r];
    json_t *opts = json_pack("{sIsI}", "_tree_start", (json_int_t)s->r0, "_tree_stop",
                             (json_int_t)s->r1);
    if (!opts)
        return gsb__err(GSB_ENOMEM, "out of memory");
    gsb__nlist fresh = {0}, out = {0};
    gsb__ctx c = {0};
    c.model = f->m; /* its cancel flag and progress; its fitted state is not read */
    c.est = f->m->est;
    c.method = a->md;
    c.params = f->m->params;
    c.options = opts;
    c.be = s->be;
    c.fit_attrs = &fresh;
    c.out = &out;
    memcpy(c.in, a->in, sizeof c.in);
    int rc = a->md->fn(&c);
    if (rc == GSB_OK)
        rc = gsb__forest_pack(&c, &a->packs[r]);
    gsb__nlist_clear(&fresh);
    gsb__nlist_clear(&out);
    json_decref(opts);
    return rc;
}

/* The ranks' packed forests concatenated in rank order into *out. */
static int concat_ranks(gsb__mdfit *f, gsb__tensor *packs, gsb__tensor *out)
{
    gsb__tensor acc = GSB__TENSOR_NONE;
    int rc = GSB_OK;
    for (int r = 0; r < f->ds->n && rc == GSB_OK; r++) {
        if (!packs[r].data)
            continue; /* a rank without trees */
        if (!acc.data) {
            acc = packs[r];
            packs[r] = GSB__TENSOR_NONE;
            continue;
        }
        gsb__tensor merged = GSB__TENSOR_NONE;
        rc = gsb__forest_concat(&acc, &packs[r], &merged);
        gsb__tensor_free(&acc);
        acc = merged;
    }
    if (rc == GSB_OK && !acc.data)
        rc = gsb__err(GSB_EINTERNAL, "multi-device forest: no rank grew trees");
    if (rc != GSB_OK) {
        gsb__tensor_free(&acc);
        return rc;
    }
    *out = acc;
    return GSB_OK;
}

int gsb__md_forest_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                       gsb__tensor *in, int *handled, const char **why)
{
    if (gsb__param_bool(m->params, "warm_start")) {
        *why = "warm_start=True adds its trees on the first device";
        return GSB_OK;
    }
    *handled = 1;
    int64_t T = gsb__param_int(m->params, "n_estimators");
    gsb__mdfit f;
    memset(&f, 0, sizeof f);
    f.ds = ds;
    f.m = m;
    for (int r = 0; r < ds->n; r++) { /* a "shard" here is a range of trees */
        f.sh[r].be = ds->be[r];
        gsb__multidev_split(T, ds->n, r, &f.sh[r].r0, &f.sh[r].r1);
    }
    share_args a = {md, in, {{0}}};
    for (int r = 0; r < GSB__MAX_DEVICES; r++)
        a.packs[r] = GSB__TENSOR_NONE;
    gsb__tensor trees = GSB__TENSOR_NONE;
    int rc = gsb__md_each(&f, grow_share, &a);
    if (rc == GSB_OK)
        rc = concat_ranks(&f, a.packs, &trees);
    if (rc == GSB_OK) {
        /* the fit's inputs are (X, y, sample_weight): fit_from_trees takes the trees first */
        gsb__tensor fin[GSB__MAX_INPUTS] = {trees, in[0], in[1], in[2]};
        for (int i = 1; i < GSB__MAX_INPUTS; i++)
            fin[i].owned = 0;
        gsb__nlist ignored = {0};
        rc = gsb__md_step(&f, "fit_from_trees", fin, NULL, &ignored);
        gsb__nlist_clear(&ignored);
    }
    gsb__tensor_free(&trees);
    for (int r = 0; r < GSB__MAX_DEVICES; r++)
        gsb__tensor_free(&a.packs[r]);
    return rc;
}
