/*
 * radius_neighbors.c - NearestNeighbors.radius_neighbors: the training rows
 * within a radius of each query row, as CSR (indptr, indices, distances);
 * the Python layer makes scikit-learn's object arrays and the sparse graphs
 * (radius_neighbors_graph) from them.
 *
 * The neighbourhoods come from radius_search.c in pieces (bounded scratch;
 * the result itself is as large as it is).  Each row comes out ascending by
 * index, as scikit-learn's brute force gives them (its trees give them in
 * tree order), or with sort_results ascending by distance, ties by index
 * (scikit-learn's stable sort).  With X absent the queries are the training
 * rows and each row's own index is removed from its list, as scikit-learn
 * does (exact duplicates stay).  Distances are float64, as scikit-learn's.
 * In a multi-device session the search runs on the first device (warned
 * once): the index is not split for it as it is for kneighbors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "estimators/neighbors/neighbors_radius.h"
#include "estimators/neighbors/radius_search.h"
#include "multidev/multidev_knn.h"

typedef struct rn_pair {
    int64_t j;
    double d;
} rn_pair;

/* Neighbour lists as pieces arrive (any row order), then assembled. */
typedef struct rn_collect {
    int64_t nq;
    int exclude_self;
    int64_t *off, *len; /* per query row, into pairs */
    rn_pair *pairs;
    int64_t size, cap;
} rn_collect;

static int rn_visit(void *data, const gsb__rpiece *pc)
{
    rn_collect *c = data;
    int64_t need = c->size + pc->indptr[pc->n];
    if (need > c->cap) {
        int64_t cap = need > 2 * c->cap ? need : 2 * c->cap;
        if (gsb__array_too_big(cap, sizeof(rn_pair)))
            return gsb__err(GSB_ENOMEM, "radius_neighbors: too many neighbours");
        rn_pair *p = realloc(c->pairs, (size_t)cap * sizeof(rn_pair));
        if (!p)
            return gsb__err(GSB_ENOMEM, "radius_neighbors: out of memory for %lld neighbours",
                            (long long)cap);
        c->pairs = p;
        c->cap = cap;
    }
    for (int64_t k = 0; k < pc->n; k++) {
        int64_t row = pc->rows[k], start = c->size;
        for (int64_t t = pc->indptr[k]; t < pc->indptr[k + 1]; t++) {
            if (c->exclude_self && pc->idx[t] == row)
                continue;
            c->pairs[c->size].j = pc->idx[t];
            c->pairs[c->size].d = pc->dist ? pc->dist[t] : 0.0;
            c->size++;
        }
        c->off[row] = start;
        c->len[row] = c->size - start;
    }
    return GSB_OK;
}

static int by_index(const void *a, const void *b)
{
    int64_t x = ((const rn_pair *)a)->j, y = ((const rn_pair *)b)->j;
    return (x > y) - (x < y);
}

static int by_distance(const void *a, const void *b)
{
    const rn_pair *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

/* The collected lists as CSR results, each row sorted. */
static int rn_output(gsb__ctx *c, rn_collect *col, int want_dist, int sort_by_distance)
{
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor ptr = GSB__TENSOR_NONE, ind = GSB__TENSOR_NONE, dst = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_I64, col->nq + 1, 1, &ptr));
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_I64, col->size, 1, &ind));
    if (want_dist)
        GSB_CHECK(gsb__tensor_alloc(cpu, GSB_F64, col->size, 1, &dst));
    int64_t *p = ptr.data, *ix = ind.data, at = 0;
    double *dd = want_dist ? dst.data : NULL;
    p[0] = 0;
    for (int64_t i = 0; i < col->nq; i++) {
        rn_pair *row = col->pairs + col->off[i];
        qsort(row, (size_t)col->len[i], sizeof *row, sort_by_distance ? by_distance : by_index);
        for (int64_t t = 0; t < col->len[i]; t++, at++) {
            ix[at] = row[t].j;
            if (dd)
                dd[at] = row[t].d;
        }
        p[i + 1] = at;
    }
    gsb__tensor_as_1d(&ptr);
    gsb__tensor_as_1d(&ind);
    GSB_CHECK(gsb__out(c, "indptr", &ptr));
    GSB_CHECK(gsb__out(c, "indices", &ind));
    if (want_dist) {
        gsb__tensor_as_1d(&dst);
        GSB_CHECK(gsb__out(c, "distances", &dst));
    }
done:
    gsb__tensor_free(&ptr);
    gsb__tensor_free(&ind);
    gsb__tensor_free(&dst);
    return rc;
}

/* The radius option (absent or None: the parameter), and the budget in bytes. */
static double rn_radius(gsb__ctx *c)
{
    const json_t *v = json_object_get(c->options, "radius");
    if (json_is_number(v))
        return json_number_value(v);
    return gsb__param_float(c->params, "radius");
}

static int64_t rn_budget(gsb__ctx *c)
{
    const json_t *v = json_object_get(c->options, "working_memory");
    double mib = json_is_number(v) ? json_number_value(v) : 1024.0;
    return (int64_t)(mib > 0 && mib < 1e12 ? mib * 1048576.0 : 1024.0 * 1048576.0);
}

int gsb__neighbors_radius(gsb__ctx *c)
{
    int want_dist = gsb__opt_bool(c, "return_distance", 1);
    int sort_results = gsb__opt_bool(c, "sort_results", 0);
    if (sort_results && !want_dist)
        return gsb__err(GSB_EINVAL, "return_distance must be True if sort_results is True.");
    gsb__metric metric;
    GSB_TRY(gsb__neighbors_metric(c, &metric));
    const gsb__tensor *fit_X = gsb__attr(c, "_fit_X"), *X = gsb__in(c, "X");
    if (!fit_X)
        return gsb__err(GSB_ENOTFITTED, "This %s instance is not fitted yet.", c->est->name);
    gsb__md_knn_unsplit(c, "its search is not split across devices (kneighbors is): the "
                        "whole index is searched there");
    double radius = rn_radius(c);
    if (!isfinite(radius))
        return gsb__err(GSB_EINVAL, "radius must be a finite number, got %g", radius);
    int64_t nq = X ? X->rows : fit_X->rows;
    rn_collect col = {nq, X == NULL, NULL, NULL, NULL, 0, 0};
    gsb__tensor R = GSB__TENSOR_NONE, Q = GSB__TENSOR_NONE;
    gsb__rsearch s = {0};
    int rc = GSB_OK;
    col.off = gsb__calloc_array(nq, sizeof(int64_t));
    col.len = gsb__calloc_array(nq, sizeof(int64_t));
    if (!col.off || !col.len) {
        rc = gsb__err(GSB_ENOMEM, "radius_neighbors: out of memory for %lld rows",
                      (long long)nq);
        goto done;
    }
    if (radius >= 0) { /* a negative radius holds nothing */
        gsb_dtype dt = !X || X->dtype == fit_X->dtype ? fit_X->dtype : GSB_F64;
        GSB_CHECK(gsb__tensor_to_dtype(gsb__cpu_backend(), fit_X, dt, &R));
        GSB_CHECK(gsb__rsearch_open(&s, c, c->be, &R, metric, 2.0, radius, rn_budget(c)));
        if (X) {
            GSB_CHECK(gsb__tensor_to_dtype(gsb__cpu_backend(), X, dt, &Q));
            GSB_CHECK(gsb__rsearch_query_visit(&s, &Q, want_dist, rn_visit, &col));
        } else {
            int64_t *counts = gsb__alloc_array(fit_X->rows, sizeof(int64_t));
            if (!counts) {
                rc = gsb__err(GSB_ENOMEM, "radius_neighbors: out of memory for counts");
                goto done;
            }
            rc = gsb__rsearch_self_counts(&s, counts);
            if (rc == GSB_OK)
                rc = gsb__rsearch_self_visit(&s, counts, NULL, want_dist, rn_visit, &col);
            free(counts);
            if (rc != GSB_OK)
                goto done;
        }
    }
    rc = rn_output(c, &col, want_dist, sort_results);
done:
    gsb__rsearch_close(&s);
    gsb__tensor_free(&R);
    gsb__tensor_free(&Q);
    free(col.off);
    free(col.len);
    free(col.pairs);
    return rc;
}
