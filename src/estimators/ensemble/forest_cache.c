/*
 * forest_cache.c - a fitted forest's state for prediction (see
 * forest_cache.h): the link check done once, the device copies kept.
 */
#include "estimators/ensemble/forest_cache.h"

#include <stdlib.h>
#include <string.h>

#include "core/budget.h"
#include "core/model.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "estimators/ensemble/forest_model.h"

typedef struct forest_state {
    int64_t F, K;           /* the links were checked for F features and K values */
    const gsb__backend *be; /* where dev lives, or NULL */
    gsb__tensor dev[5];     /* split, threshold, child, root, value on be */
} forest_state;

static void free_copies(gsb__tensor *t)
{
    for (int i = 0; i < 5; i++)
        gsb__tensor_free(&t[i]);
}

static void state_free(void *p)
{
    forest_state *st = p;
    free_copies(st->dev);
    free(st);
}

/* The state this call may use: inside a fit the one it is building, else the model's. */
static forest_state *state_of(gsb__ctx *c)
{
    if (c->fit_attrs)
        return c->devstate_free == state_free ? c->devstate : NULL;
    return c->model->devstate_free == state_free ? c->model->devstate : NULL;
}

static void state_set(gsb__ctx *c, forest_state *st)
{
    if (c->fit_attrs) {
        if (c->devstate && c->devstate_free)
            c->devstate_free(c->devstate);
        c->devstate = st;
        c->devstate_free = state_free;
    } else {
        gsb__model_drop_devstate(c->model);
        c->model->devstate = st;
        c->model->devstate_free = state_free;
    }
}

/* The checked trees on the host, and the state (made when missing or built
 * for another shape). */
static int host_trees(gsb__ctx *c, int64_t F, int64_t K, gsb__forest_trees *host, int64_t *T,
                      forest_state **out)
{
    forest_state *st = state_of(c);
    if (st && st->F == F && st->K == K) {
        *out = st;
        return gsb__forest_model_arrays(c, K, host, T);
    }
    GSB_TRY(gsb__forest_model_view(c, F, K, host, T));
    st = calloc(1, sizeof *st);
    if (!st)
        return gsb__err(GSB_ENOMEM, "random forest: out of memory");
    st->F = F;
    st->K = K;
    for (int i = 0; i < 5; i++)
        st->dev[i] = GSB__TENSOR_NONE;
    state_set(c, st);
    *out = st;
    gsb__profile_mark("trees checked");
    return GSB_OK;
}

/* Copies of host's five arrays on be, into dst (all or none). */
static int upload(const gsb__backend *be, const gsb__forest_trees *host, gsb__tensor *dst)
{
    const gsb__tensor *src[5] = {host->split, host->threshold, host->child, host->root,
                                 host->value};
    for (int i = 0; i < 5; i++) {
        int rc = gsb__tensor_to(be, src[i], &dst[i]);
        if (rc != GSB_OK) {
            free_copies(dst);
            return rc;
        }
    }
    gsb__profile_mark("trees to the device");
    return GSB_OK;
}

int gsb__forest_on_open(gsb__ctx *c, const gsb__backend *be, int64_t F, int64_t K,
                        gsb__forest_on *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 5; i++)
        out->tmp[i] = GSB__TENSOR_NONE;
    forest_state *st = NULL;
    gsb__forest_trees host;
    GSB_TRY(host_trees(c, F, K, &host, &out->T, &st));
    if (be == gsb__cpu_backend()) {
        out->trees = host;
        return GSB_OK;
    }
    if (st->be != be) {
        free_copies(st->dev);
        st->be = NULL;
        size_t bytes = 0, budget;
        const gsb__tensor *src[5] = {host.split, host.threshold, host.child, host.root,
                                     host.value};
        for (int i = 0; i < 5; i++)
            bytes += gsb__tensor_nbytes(src[i]);
        GSB_TRY(gsb__memory_budget(c->model->session, be, &budget));
        int keep = bytes <= budget / 4;
        GSB_TRY(upload(be, &host, keep ? st->dev : out->tmp));
        if (keep)
            st->be = be;
    }
    const gsb__tensor *d = st->be == be ? st->dev : out->tmp;
    out->trees = (gsb__forest_trees){&d[0], &d[1], &d[2], &d[3], &d[4]};
    return GSB_OK;
}

void gsb__forest_on_close(gsb__forest_on *on)
{
    free_copies(on->tmp);
}

void gsb__forest_cache_fit(gsb__ctx *c, int64_t F, int64_t K)
{
    gsb__forest_on on;
    if (gsb__forest_on_open(c, c->be, F, K, &on) == GSB_OK)
        gsb__forest_on_close(&on);
    else
        gsb__err_clear(); /* the first predict tries again, and reports */
}
