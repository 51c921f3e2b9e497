/*
 * cpu_tsne_bh.c - tsne_repulse_bh: t-SNE's repulsion by Barnes-Hut on a
 * 2^d-tree (quad-tree in 2-D, oct-tree in 3-D), the approximation
 * scikit-learn's method='barnes_hut' makes (its _quad_tree and
 * _barnes_hut_tsne), written for this engine.
 *
 * The tree: the root is the points' bounding box, its top edge padded so no
 * point sits on it; a cell with more than one point splits at its centre
 * into 2^d children (a point on a midplane goes up), stored contiguously,
 * empty ones included.  A cell whose points all lie within 1e-6 of each
 * other in every coordinate (duplicates, as scikit-learn merges them), or
 * that is 64 levels deep, stays a leaf holding several points.  Each cell
 * knows its point count, its centre of mass and its squared widest side.
 *
 * The walk, for each point y_i on its own (an OpenMP loop over points, the
 * tree shared read-only): a cell counts as a whole, its count at its centre
 * of mass, when it is a leaf or when width^2 < angle^2 * dist^2; otherwise
 * its children are visited in order.  A leaf within 1e-6 of y_i in every
 * coordinate is skipped (y_i itself and its duplicates), as scikit-learn
 * does.  Sums are in double; each point's Z share is kept and the shares
 * are added in index order, so results do not depend on the thread count.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_tsne.h"

#define BH_MAX_D 3
#define BH_MAX_DEPTH 64
#define BH_DUP_EPS 1e-6 /* scikit-learn's EPSILON for duplicate points */

typedef struct bh_cell {
    double com[BH_MAX_D]; /* centre of mass */
    double sq_width;      /* squared longest side */
    int64_t count;        /* points inside */
    int64_t child;        /* first of 2^d contiguous children, -1 for a leaf */
} bh_cell;

typedef struct bh_tree {
    int d;
    bh_cell *cells;
    int64_t n_cells, cap;
    const float *y;
    int64_t *tmp; /* partition scratch, n entries */
} bh_tree;

/* index of a fresh block of `count` cells, or -1 when out of memory */
static int64_t bh_new_cells(bh_tree *t, int64_t count)
{
    if (t->n_cells + count > t->cap) {
        int64_t cap = t->cap * 2 > t->n_cells + count ? t->cap * 2 : t->n_cells + count;
        bh_cell *c = realloc(t->cells, (size_t)cap * sizeof *c);
        if (!c)
            return -1;
        t->cells = c;
        t->cap = cap;
    }
    int64_t at = t->n_cells;
    t->n_cells += count;
    return at;
}

/* 1 when the m points idx[] all lie within BH_DUP_EPS of each other per coordinate */
static int bh_all_close(const bh_tree *t, const int64_t *idx, int64_t m)
{
    for (int a = 0; a < t->d; a++) {
        double lo = t->y[idx[0] * t->d + a], hi = lo;
        for (int64_t k = 1; k < m; k++) {
            double v = t->y[idx[k] * t->d + a];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        if (hi - lo > BH_DUP_EPS)
            return 0;
    }
    return 1;
}

/* Fill cell `at` with the m points idx[] inside the box [lo, hi), splitting
 * as the header says.  GSB_ENOMEM when the cell array cannot grow. */
static int bh_build(bh_tree *t, int64_t at, int64_t *idx, int64_t m, const double *lo,
                    const double *hi, int depth)
{
    int d = t->d, nch = 1 << d;
    bh_cell *cell = &t->cells[at];
    double sq = 0.0;
    for (int a = 0; a < d; a++) {
        double s = 0.0, w = hi[a] - lo[a];
        for (int64_t k = 0; k < m; k++)
            s += t->y[idx[k] * d + a];
        cell->com[a] = m > 0 ? s / (double)m : 0.5 * (lo[a] + hi[a]);
        sq = w * w > sq ? w * w : sq;
    }
    cell->sq_width = sq;
    cell->count = m;
    cell->child = -1;
    if (m <= 1 || depth >= BH_MAX_DEPTH || bh_all_close(t, idx, m))
        return GSB_OK;

    /* counting sort of the points into the children by octant */
    double mid[BH_MAX_D];
    for (int a = 0; a < d; a++)
        mid[a] = 0.5 * (lo[a] + hi[a]);
    int64_t cnt[1 << BH_MAX_D] = {0}, off[(1 << BH_MAX_D) + 1];
    for (int64_t k = 0; k < m; k++) {
        int o = 0;
        for (int a = 0; a < d; a++)
            o |= (t->y[idx[k] * d + a] >= mid[a]) << a;
        cnt[o]++;
    }
    off[0] = 0;
    for (int c = 0; c < nch; c++)
        off[c + 1] = off[c] + cnt[c];
    int64_t fill[1 << BH_MAX_D];
    memcpy(fill, off, sizeof fill);
    for (int64_t k = 0; k < m; k++) {
        int o = 0;
        for (int a = 0; a < d; a++)
            o |= (t->y[idx[k] * d + a] >= mid[a]) << a;
        t->tmp[fill[o]++] = idx[k];
    }
    memcpy(idx, t->tmp, (size_t)m * sizeof *idx);

    int64_t first = bh_new_cells(t, nch); /* may move t->cells: no cell pointer kept */
    if (first < 0)
        return gsb__err(GSB_ENOMEM, "tsne_repulse_bh: out of host memory");
    t->cells[at].child = first;
    for (int c = 0; c < nch; c++) {
        double clo[BH_MAX_D], chi[BH_MAX_D];
        for (int a = 0; a < d; a++) {
            int up = (c >> a) & 1;
            clo[a] = up ? mid[a] : lo[a];
            chi[a] = up ? hi[a] : mid[a];
        }
        GSB_TRY(bh_build(t, first + c, idx + off[c], cnt[c], clo, chi, depth + 1));
    }
    return GSB_OK;
}

/* The root box: the bounding box with its top edge padded so that every
 * point lies strictly below it. */
static void bh_root_box(const float *y, int64_t n, int d, double *lo, double *hi)
{
    for (int a = 0; a < d; a++) {
        lo[a] = hi[a] = y[a];
        for (int64_t i = 1; i < n; i++) {
            double v = y[i * d + a];
            lo[a] = v < lo[a] ? v : lo[a];
            hi[a] = v > hi[a] ? v : hi[a];
        }
        hi[a] += 1e-3 * fmax(1.0, fabs(hi[a]));
    }
}

/* One point's repulsion: F (d doubles) and its share of Z. */
static double bh_walk(const bh_tree *t, const float *yi, int dof, double theta2, int64_t *stack,
                      double *F)
{
    int d = t->d, nch = 1 << d;
    double z = 0.0;
    int64_t top = 0;
    for (int a = 0; a < d; a++)
        F[a] = 0.0;
    stack[top++] = 0;
    while (top > 0) {
        const bh_cell *cell = &t->cells[stack[--top]];
        if (cell->count == 0)
            continue;
        double diff[BH_MAX_D], d2 = 0.0;
        int dup = 1;
        for (int a = 0; a < d; a++) {
            diff[a] = (double)yi[a] - cell->com[a];
            d2 += diff[a] * diff[a];
            dup &= fabs(diff[a]) <= BH_DUP_EPS;
        }
        int leaf = cell->child < 0;
        if (leaf && dup)
            continue;
        if (!leaf && !(cell->sq_width < theta2 * d2)) {
            for (int c = nch - 1; c >= 0; c--) /* popped in order 0, 1, ... */
                stack[top++] = cell->child + c;
            continue;
        }
        double w = cpu_tsne_w(d2, dof), cnt = (double)cell->count;
        z += cnt * w;
        for (int a = 0; a < d; a++)
            F[a] += cnt * w * w * diff[a];
    }
    return z;
}

int gsb__cpu_tsne_repulse_bh(const gsb__backend *be, const gsb__tensor *Y, int dof, double angle,
                             gsb__tensor *R, gsb__tensor *zsum)
{
    (void)be;
    const char *op = "tsne_repulse_bh";
    GSB_TRY(cpu_tsne_check_repulse(Y, dof, R, zsum, op));
    int64_t n = Y->rows;
    int d = (int)Y->cols;
    if (Y->cols > BH_MAX_D)
        return gsb__err(GSB_EINTERNAL, "%s: %lld dimensions (at most %d)", op,
                        (long long)Y->cols, BH_MAX_D);
    if (!(angle >= 0.0))
        return gsb__err(GSB_EINTERNAL, "%s: angle %g < 0", op, angle);
    bh_tree t = {d, NULL, 0, 0, Y->data, NULL};
    int64_t *idx = cpu_alloc(n, sizeof *idx);
    double *zrow = cpu_alloc(n, sizeof *zrow);
    t.tmp = cpu_alloc(n, sizeof *t.tmp);
    int rc = GSB_OK;
    if (!idx || !zrow || !t.tmp || bh_new_cells(&t, 2 * n + 1) < 0) {
        rc = gsb__err(GSB_ENOMEM, "%s: out of host memory", op);
        goto done;
    }
    t.n_cells = 1; /* the root; the rest of the block was reserve */
    for (int64_t i = 0; i < n; i++)
        idx[i] = i;
    double lo[BH_MAX_D], hi[BH_MAX_D];
    bh_root_box(t.y, n, d, lo, hi);
    rc = bh_build(&t, 0, idx, n, lo, hi, 0);
    if (rc != GSB_OK)
        goto done;

    const float *y = Y->data;
    float *out = R->data;
    double theta2 = angle * angle;
    int64_t stack_len = (int64_t)(BH_MAX_DEPTH + 2) << d; /* (levels) x (children) bounds it */
    int failed = 0;
#pragma omp parallel if (n > 2048) /* smaller: less work than a fork and join */
    {
        int64_t *stack = cpu_alloc(stack_len, sizeof *stack);
        if (!stack) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 64)
        for (int64_t i = 0; i < n; i++) {
            if (!stack)
                continue;
            double F[BH_MAX_D];
            zrow[i] = bh_walk(&t, y + i * d, dof, theta2, stack, F);
            for (int a = 0; a < d; a++)
                out[i * d + a] = (float)F[a];
        }
        free(stack);
    }
    if (failed)
        rc = gsb__err(GSB_ENOMEM, "%s: out of host memory", op);
    else
        ((double *)zsum->data)[0] = cpu_tsne_sum(zrow, n);
done:
    free(t.cells);
    free(t.tmp);
    free(idx);
    free(zrow);
    return rc;
}
