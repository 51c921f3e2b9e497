/*
 * radius_search.h - eps-neighbourhoods of many rows in bounded memory, on
 * any backend: the host side of the radius_neighbors op, shared by DBSCAN
 * and NearestNeighbors.radius_neighbors / radius_neighbors_graph.
 *
 * A search holds the reference rows R on the backend: sorted into a grid of
 * cells for 1-3 columns (every metric but cosine), as they are otherwise
 * (brute force in tiles).  Queries run in chunks of rows: a count pass, then
 * fill passes over pieces of the chunk whose neighbour lists fit the
 * working-memory budget; each piece comes to the host and is handed to a
 * visitor as CSR in the caller's numbering.  No n x n matrix, and nothing
 * of size "all neighbours" unless a visitor keeps it.
 */
#ifndef GSB_RADIUS_SEARCH_H
#define GSB_RADIUS_SEARCH_H

#include <stdint.h>

#include "core/estimator.h"

/* One piece of neighbourhoods, on the host: query rows rows[0..n) (the
 * caller's row numbers), row k's neighbours idx[indptr[k] .. indptr[k+1])
 * (rows of R as the caller numbered them, in no particular order) and their
 * distances dist (the metric's value; NULL when not asked for). */
typedef struct gsb__rpiece {
    int64_t n;
    const int64_t *rows;
    const int64_t *indptr;
    const int64_t *idx;
    const double *dist;
} gsb__rpiece;

typedef int (*gsb__rvisit)(void *data, const gsb__rpiece *piece);

typedef struct gsb__rsearch {
    gsb__ctx *ctx;          /* progress and cancellation (may be NULL) */
    const gsb__backend *be;
    gsb__metric metric;
    double p, eps;
    int64_t n, d;
    gsb_dtype dtype;
    int64_t budget;         /* bytes of neighbour lists per piece */
    gsb__tensor Rh;         /* host: R, sorted by cell when gridded */
    gsb__tensor Rb;         /* Rh on the backend */
    int gridded;
    gsb__radius_grid grid;
    gsb__tensor keys_h;     /* grid keys (host) ... */
    gsb__tensor keys_b;     /* ... and on the backend */
    int64_t *perm;          /* gridded: original row of each sorted row (else NULL) */
} gsb__rsearch;

/*
 * Prepare a search over R (host, float32/float64) on be: metric with
 * minkowski power p, radius eps >= 0, budget_bytes for neighbour lists.
 * Free with gsb__rsearch_close (also after a failed open).
 */
int gsb__rsearch_open(gsb__rsearch *s, gsb__ctx *ctx, const gsb__backend *be,
                      const gsb__tensor *R, gsb__metric metric, double p, double eps,
                      int64_t budget_bytes);
void gsb__rsearch_close(gsb__rsearch *s);

/* counts[i] = how many rows of R lie within eps of row i of R (itself included). */
int gsb__rsearch_self_counts(gsb__rsearch *s, int64_t *counts);

/*
 * The neighbourhoods of R's own rows (row numbers 0..n-1), those with
 * select[i] != 0 (select NULL: all), visited in pieces; counts as
 * gsb__rsearch_self_counts gave them.
 */
int gsb__rsearch_self_visit(gsb__rsearch *s, const int64_t *counts, const unsigned char *select,
                            int want_dist, gsb__rvisit fn, void *data);

/* The neighbourhoods in R of the rows of Q (host, R's dtype and columns),
 * row numbers 0..Q->rows-1, visited in pieces. */
int gsb__rsearch_query_visit(gsb__rsearch *s, const gsb__tensor *Q, int want_dist,
                             gsb__rvisit fn, void *data);

#endif
