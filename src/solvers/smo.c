/*
 * smo.c - libsvm's SMO solver (see smo.h), written against a kernel row
 * callback and an LRU row cache.
 *
 * As libsvm, the solver keeps its variables permuted so that the active
 * (unshrunk) ones come first, swapping array entries when it shrinks:
 * positions run in libsvm's order, so ties in the working-set selection
 * (the last of equal candidates wins) fall as in libsvm and the iterates
 * are the same.  Unlike libsvm, cached kernel rows are whole rows of K in
 * the original order, read through real[] (position -> row): a row stays
 * valid whatever is shrunk, and shrinking never touches the cache.
 */
#include "solvers/smo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define SMO_TAU 1e-12
#define SMO_PROGRESS_EVERY 1000

enum { SMO_LOWER = 0, SMO_UPPER = 1, SMO_FREE = 2 };

/* ---- the kernel row cache ------------------------------------------------ */

/*
 * Up to cap rows of K, each n floats, in slots allocated on first use.  The
 * slots form a doubly linked list in order of use (sentinel cap), least
 * recently used first; a row is recomputed into the slot of the least
 * recently used one when the cache is full.
 */
typedef struct smo_cache {
    int64_t n, cap, used;
    float **data;      /* per slot */
    int64_t *slot_row; /* per slot: the row it holds */
    int64_t *row_slot; /* per row: its slot, or -1 */
    int64_t *prev, *next; /* cap + 1 entries, the last the sentinel */
    gsb__smo_row_fn fill;
    void *fill_data;
} smo_cache;

static void cache_unlink(smo_cache *c, int64_t s)
{
    c->next[c->prev[s]] = c->next[s];
    c->prev[c->next[s]] = c->prev[s];
}

static void cache_push_back(smo_cache *c, int64_t s)
{
    int64_t head = c->cap;
    c->prev[s] = c->prev[head];
    c->next[s] = head;
    c->next[c->prev[head]] = s;
    c->prev[head] = s;
}

static int cache_init(smo_cache *c, int64_t n, double bytes, gsb__smo_row_fn fill, void *data)
{
    memset(c, 0, sizeof *c);
    double rows = floor(bytes / ((double)n * sizeof(float)));
    c->n = n;
    c->cap = rows < 2 ? 2 : rows > (double)n ? n : (int64_t)rows;
    if (c->cap < 2)
        c->cap = 2; /* n == 1: two slots cost nothing and keep the invariant */
    c->fill = fill;
    c->fill_data = data;
    c->data = calloc((size_t)c->cap, sizeof *c->data);
    c->slot_row = malloc((size_t)c->cap * sizeof *c->slot_row);
    c->row_slot = malloc((size_t)n * sizeof *c->row_slot);
    c->prev = malloc((size_t)(c->cap + 1) * sizeof *c->prev);
    c->next = malloc((size_t)(c->cap + 1) * sizeof *c->next);
    if (!c->data || !c->slot_row || !c->row_slot || !c->prev || !c->next)
        return gsb__err(GSB_ENOMEM, "SVM solver: out of memory for the kernel cache of %lld "
                        "rows", (long long)n);
    for (int64_t r = 0; r < n; r++)
        c->row_slot[r] = -1;
    c->prev[c->cap] = c->next[c->cap] = c->cap;
    return GSB_OK;
}

static void cache_free(smo_cache *c)
{
    for (int64_t s = 0; s < c->used; s++)
        free(c->data[s]);
    free(c->data);
    free(c->slot_row);
    free(c->row_slot);
    free(c->prev);
    free(c->next);
}

/*
 * Row r of K, computed on a miss.  The returned pointer stays valid until
 * two other rows have been fetched: the cache holds at least two rows and
 * evicts the least recently used, never the one fetched last.
 */
static int cache_row(smo_cache *c, int64_t r, const float **out)
{
    int64_t s = c->row_slot[r];
    if (s >= 0) {
        cache_unlink(c, s);
        cache_push_back(c, s);
        *out = c->data[s];
        return GSB_OK;
    }
    if (c->used < c->cap) {
        float *buf = malloc((size_t)c->n * sizeof *buf);
        if (buf) {
            s = c->used++;
            c->data[s] = buf;
        } else if (c->used >= 2) {
            c->cap = c->used; /* no more memory: live with the rows we have */
        } else {
            return gsb__err(GSB_ENOMEM, "SVM solver: out of memory for a kernel row of %lld "
                            "values", (long long)c->n);
        }
    }
    if (s < 0) { /* full: recycle the least recently used slot */
        s = c->next[c->cap];
        cache_unlink(c, s);
        c->row_slot[c->slot_row[s]] = -1;
    }
    /* a failure ends the solve: the slot, unlinked, is only freed after it */
    GSB_TRY(c->fill(c->fill_data, r, c->data[s]));
    c->slot_row[s] = r;
    c->row_slot[r] = s;
    cache_push_back(c, s);
    *out = c->data[s];
    return GSB_OK;
}

/* ---- solver state -------------------------------------------------------- */

/*
 * Every array is indexed by position, and positions are permuted by the
 * swaps of shrinking, as libsvm's are (so the loops over the active set run
 * over contiguous memory); act[] maps a position back to its variable and
 * real[] to its row of K.
 */
typedef struct smo {
    const gsb__smo_problem *pb;
    int64_t l, active_size;
    int8_t *y;
    char *status;
    double *alpha, *G, *G_bar, *p, *C, *QD;
    int64_t *real, *act;
    int unshrink;
    smo_cache cache;
} smo;

static inline int is_upper(const smo *s, int64_t t) { return s->status[t] == SMO_UPPER; }
static inline int is_lower(const smo *s, int64_t t) { return s->status[t] == SMO_LOWER; }
static inline int is_free(const smo *s, int64_t t) { return s->status[t] == SMO_FREE; }

static void update_status(smo *s, int64_t t)
{
    if (s->alpha[t] >= s->C[t])
        s->status[t] = SMO_UPPER;
    else if (s->alpha[t] <= 0)
        s->status[t] = SMO_LOWER;
    else
        s->status[t] = SMO_FREE;
}

/* Q[i][t] from the cached kernel row of position i: y_i y_t K, exact in
 * float as libsvm's Qfloat since the signs only flip it. */
static inline double q_at(const smo *s, const float *Ki, int64_t i, int64_t t)
{
    double v = (double)Ki[s->real[t]];
    return s->y[i] == s->y[t] ? v : -v;
}

static int q_row(smo *s, int64_t i, const float **Ki)
{
    return cache_row(&s->cache, s->real[i], Ki);
}

#define SMO_SWAP(type, arr, a, b)     \
    do {                              \
        type tmp_ = (arr)[a];         \
        (arr)[a] = (arr)[b];          \
        (arr)[b] = tmp_;              \
    } while (0)

static void swap_positions(smo *s, int64_t a, int64_t b)
{
    SMO_SWAP(int8_t, s->y, a, b);
    SMO_SWAP(char, s->status, a, b);
    SMO_SWAP(double, s->alpha, a, b);
    SMO_SWAP(double, s->G, a, b);
    SMO_SWAP(double, s->G_bar, a, b);
    SMO_SWAP(double, s->p, a, b);
    SMO_SWAP(double, s->C, a, b);
    SMO_SWAP(double, s->QD, a, b);
    SMO_SWAP(int64_t, s->real, a, b);
    SMO_SWAP(int64_t, s->act, a, b);
}

/* ---- libsvm's steps ------------------------------------------------------ */

/* Rebuild G of the inactive positions from G_bar and the free active ones. */
static int reconstruct_gradient(smo *s)
{
    int64_t l = s->l, as = s->active_size, nr_free = 0;
    if (as == l)
        return GSB_OK;
    for (int64_t j = as; j < l; j++)
        s->G[j] = s->G_bar[j] + s->p[j];
    for (int64_t j = 0; j < as; j++)
        nr_free += is_free(s, j);
    /* fetch whichever set of rows is smaller, as libsvm decides it */
    if ((double)nr_free * (double)l > 2.0 * (double)as * (double)(l - as)) {
        for (int64_t i = as; i < l; i++) {
            const float *Ki;
            GSB_TRY(q_row(s, i, &Ki));
            for (int64_t j = 0; j < as; j++)
                if (is_free(s, j))
                    s->G[i] += s->alpha[j] * q_at(s, Ki, i, j);
        }
    } else {
        for (int64_t i = 0; i < as; i++) {
            if (!is_free(s, i))
                continue;
            const float *Ki;
            GSB_TRY(q_row(s, i, &Ki));
            double ai = s->alpha[i];
            for (int64_t j = as; j < l; j++)
                s->G[j] += ai * q_at(s, Ki, i, j);
        }
    }
    return GSB_OK;
}

/*
 * WSS3: i maximises -y_i G_i over I_up, j minimises the second-order
 * decrease over I_low (the last of equal candidates wins, as in libsvm).
 * *optimal when the gap Gmax + Gmax2 is below eps (or no j exists); *gap
 * receives it.
 */
static int select_working_set(smo *s, int64_t *out_i, int64_t *out_j, int *optimal,
                              double *gap)
{
    double Gmax = -INFINITY, Gmax2 = -INFINITY, obj_diff_min = INFINITY;
    int64_t gmax_idx = -1, gmin_idx = -1, as = s->active_size;
    const double *G = s->G, *QD = s->QD;
    const int8_t *y = s->y;
    for (int64_t t = 0; t < as; t++) {
        if (y[t] == 1) {
            if (!is_upper(s, t) && -G[t] >= Gmax) {
                Gmax = -G[t];
                gmax_idx = t;
            }
        } else if (!is_lower(s, t) && G[t] >= Gmax) {
            Gmax = G[t];
            gmax_idx = t;
        }
    }
    int64_t i = gmax_idx;
    const float *Ki = NULL;
    if (i != -1)
        GSB_TRY(q_row(s, i, &Ki));
    for (int64_t j = 0; j < as; j++) {
        double grad_diff;
        if (y[j] == 1) {
            if (is_lower(s, j))
                continue;
            grad_diff = Gmax + G[j];
            if (G[j] >= Gmax2)
                Gmax2 = G[j];
        } else {
            if (is_upper(s, j))
                continue;
            grad_diff = Gmax - G[j];
            if (-G[j] >= Gmax2)
                Gmax2 = -G[j];
        }
        if (!(grad_diff > 0))
            continue;
        /* libsvm's QD_i + QD_j -/+ 2 y_i Q_ij is QD_i + QD_j - 2 K_ij in both
         * cases, bit for bit (the signs are exact) */
        double quad_coef = QD[i] + QD[j] - 2.0 * (double)Ki[s->real[j]];
        double obj_diff = -(grad_diff * grad_diff) / (quad_coef > 0 ? quad_coef : SMO_TAU);
        if (obj_diff <= obj_diff_min) {
            gmin_idx = j;
            obj_diff_min = obj_diff;
        }
    }
    *gap = Gmax + Gmax2;
    *optimal = Gmax + Gmax2 < s->pb->eps || gmin_idx == -1;
    *out_i = gmax_idx;
    *out_j = gmin_idx;
    return GSB_OK;
}

static int be_shrunk(const smo *s, int64_t t, double Gmax1, double Gmax2)
{
    if (is_upper(s, t))
        return s->y[t] == 1 ? -s->G[t] > Gmax1 : -s->G[t] > Gmax2;
    if (is_lower(s, t))
        return s->y[t] == 1 ? s->G[t] > Gmax2 : s->G[t] > Gmax1;
    return 0;
}

static int do_shrinking(smo *s)
{
    double Gmax1 = -INFINITY; /* max { -y_i G_i | i in I_up } */
    double Gmax2 = -INFINITY; /* max { y_i G_i | i in I_low } */
    for (int64_t t = 0; t < s->active_size; t++) {
        double g = s->G[t];
        if (s->y[t] == 1) {
            if (!is_upper(s, t) && -g >= Gmax1)
                Gmax1 = -g;
            if (!is_lower(s, t) && g >= Gmax2)
                Gmax2 = g;
        } else {
            if (!is_upper(s, t) && -g >= Gmax2)
                Gmax2 = -g;
            if (!is_lower(s, t) && g >= Gmax1)
                Gmax1 = g;
        }
    }
    /* near the end, unshrink once so that the final stretch sees everything */
    if (!s->unshrink && Gmax1 + Gmax2 <= s->pb->eps * 10) {
        s->unshrink = 1;
        GSB_TRY(reconstruct_gradient(s));
        s->active_size = s->l;
    }
    for (int64_t t = 0; t < s->active_size; t++) {
        if (!be_shrunk(s, t, Gmax1, Gmax2))
            continue;
        s->active_size--;
        while (s->active_size > t) {
            if (!be_shrunk(s, s->active_size, Gmax1, Gmax2)) {
                swap_positions(s, t, s->active_size);
                break;
            }
            s->active_size--;
        }
    }
    return GSB_OK;
}

static double calculate_rho(const smo *s)
{
    int64_t nr_free = 0;
    double ub = INFINITY, lb = -INFINITY, sum_free = 0;
    for (int64_t t = 0; t < s->active_size; t++) {
        double yG = s->y[t] * s->G[t];
        if (is_upper(s, t)) {
            if (s->y[t] == -1)
                ub = fmin(ub, yG);
            else
                lb = fmax(lb, yG);
        } else if (is_lower(s, t)) {
            if (s->y[t] == 1)
                ub = fmin(ub, yG);
            else
                lb = fmax(lb, yG);
        } else {
            nr_free++;
            sum_free += yG;
        }
    }
    return nr_free > 0 ? sum_free / (double)nr_free : (ub + lb) / 2;
}

/* The analytic solution of the two-variable subproblem, clipped to the box. */
static void update_pair(smo *s, int64_t i, int64_t j, double Qij)
{
    double *a = s->alpha, Ci = s->C[i], Cj = s->C[j];
    if (s->y[i] != s->y[j]) {
        double quad_coef = s->QD[i] + s->QD[j] + 2 * Qij;
        if (quad_coef <= 0)
            quad_coef = SMO_TAU;
        double delta = (-s->G[i] - s->G[j]) / quad_coef;
        double diff = a[i] - a[j];
        a[i] += delta;
        a[j] += delta;
        if (diff > 0) {
            if (a[j] < 0) {
                a[j] = 0;
                a[i] = diff;
            }
        } else if (a[i] < 0) {
            a[i] = 0;
            a[j] = -diff;
        }
        if (diff > Ci - Cj) {
            if (a[i] > Ci) {
                a[i] = Ci;
                a[j] = Ci - diff;
            }
        } else if (a[j] > Cj) {
            a[j] = Cj;
            a[i] = Cj + diff;
        }
    } else {
        double quad_coef = s->QD[i] + s->QD[j] - 2 * Qij;
        if (quad_coef <= 0)
            quad_coef = SMO_TAU;
        double delta = (s->G[i] - s->G[j]) / quad_coef;
        double sum = a[i] + a[j];
        a[i] -= delta;
        a[j] += delta;
        if (sum > Ci) {
            if (a[i] > Ci) {
                a[i] = Ci;
                a[j] = sum - Ci;
            }
        } else if (a[j] < 0) {
            a[j] = 0;
            a[i] = sum;
        }
        if (sum > Cj) {
            if (a[j] > Cj) {
                a[j] = Cj;
                a[i] = sum - Cj;
            }
        } else if (a[i] < 0) {
            a[i] = 0;
            a[j] = sum;
        }
    }
}

/* G_bar += sign * C_t Q[t][.] over all positions, when t enters (sign 1)
 * or leaves (sign -1) its upper bound. */
static int update_G_bar(smo *s, int64_t t, double sign)
{
    const float *Kt;
    GSB_TRY(q_row(s, t, &Kt));
    double ct = sign * s->C[t];
    for (int64_t k = 0; k < s->l; k++)
        s->G_bar[k] += ct * q_at(s, Kt, t, k);
    return GSB_OK;
}

/* One SMO step on the pair (i, j): new alphas, gradient, bounds. */
static int take_step(smo *s, int64_t i, int64_t j)
{
    const float *Ki, *Kj;
    GSB_TRY(q_row(s, i, &Ki));
    GSB_TRY(q_row(s, j, &Kj)); /* Ki stays valid: see cache_row */
    double old_ai = s->alpha[i], old_aj = s->alpha[j];
    update_pair(s, i, j, q_at(s, Ki, i, j));
    double dai = s->alpha[i] - old_ai, daj = s->alpha[j] - old_aj;
    /* Q_it dai + Q_jt daj = y_t (K_it y_i dai + K_jt y_j daj), bit for bit:
     * sign flips are exact and commute with rounding */
    double a = s->y[i] * dai, b = s->y[j] * daj;
    const int64_t *real = s->real;
    const int8_t *y = s->y;
    double *G = s->G;
    for (int64_t t = 0; t < s->active_size; t++) {
        double v = (double)Ki[real[t]] * a + (double)Kj[real[t]] * b;
        G[t] += y[t] == 1 ? v : -v;
    }
    int ui = is_upper(s, i), uj = is_upper(s, j);
    update_status(s, i);
    update_status(s, j);
    if (ui != is_upper(s, i))
        GSB_TRY(update_G_bar(s, i, ui ? -1.0 : 1.0));
    if (uj != is_upper(s, j))
        GSB_TRY(update_G_bar(s, j, uj ? -1.0 : 1.0));
    return GSB_OK;
}

static int init_gradient(smo *s)
{
    for (int64_t t = 0; t < s->l; t++) {
        s->G[t] = s->p[t];
        s->G_bar[t] = 0;
    }
    for (int64_t i = 0; i < s->l; i++) {
        if (is_lower(s, i))
            continue;
        const float *Ki;
        GSB_TRY(q_row(s, i, &Ki));
        double ai = s->alpha[i];
        for (int64_t t = 0; t < s->l; t++)
            s->G[t] += ai * q_at(s, Ki, i, t);
        if (is_upper(s, i))
            for (int64_t t = 0; t < s->l; t++)
                s->G_bar[t] += s->C[i] * q_at(s, Ki, i, t);
    }
    return GSB_OK;
}

static int optimise(smo *s, gsb__smo_result *res)
{
    const gsb__smo_problem *pb = s->pb;
    int64_t iter = 0, every = s->l < 1000 ? s->l : 1000, counter = every + 1;
    double gap = INFINITY;
    for (;;) {
        if (pb->max_iter != -1 && iter >= pb->max_iter) {
            res->timed_out = 1;
            break;
        }
        if (--counter == 0) {
            counter = every;
            if (pb->shrinking)
                GSB_TRY(do_shrinking(s));
        }
        int64_t i, j;
        int optimal;
        GSB_TRY(select_working_set(s, &i, &j, &optimal, &gap));
        if (optimal) {
            /* optimal on the active set: check again on all variables */
            GSB_TRY(reconstruct_gradient(s));
            s->active_size = s->l;
            GSB_TRY(select_working_set(s, &i, &j, &optimal, &gap));
            if (optimal)
                break;
            counter = 1; /* shrink at the next iteration */
        }
        ++iter;
        GSB_TRY(take_step(s, i, j));
        if (pb->progress && iter % SMO_PROGRESS_EVERY == 0)
            GSB_TRY(pb->progress(pb->progress_data, iter, gap));
    }
    res->n_iter = iter;
    res->rho = calculate_rho(s);
    double v = 0;
    for (int64_t t = 0; t < s->l; t++)
        v += s->alpha[t] * (s->G[t] + s->p[t]);
    res->obj = v / 2;
    return GSB_OK;
}

static void smo_free(smo *s)
{
    cache_free(&s->cache);
    free(s->y);
    free(s->status);
    free(s->alpha);
    free(s->G);
    free(s->G_bar);
    free(s->p);
    free(s->C);
    free(s->QD);
    free(s->real);
    free(s->act);
}

int gsb__smo_solve(const gsb__smo_problem *pb, double *alpha, gsb__smo_result *res)
{
    smo s = {.pb = pb, .l = pb->l, .active_size = pb->l};
    int rc;
    memset(res, 0, sizeof *res);
    if (pb->l <= 0 || pb->n <= 0)
        return gsb__err(GSB_EINTERNAL, "SVM solver: empty problem");
    size_t l = (size_t)pb->l, d8 = l * sizeof(double);
    s.y = malloc(l);
    s.status = malloc(l);
    s.alpha = malloc(d8);
    s.G = malloc(d8);
    s.G_bar = malloc(d8);
    s.p = malloc(d8);
    s.C = malloc(d8);
    s.QD = malloc(d8);
    s.real = malloc(l * sizeof *s.real);
    s.act = malloc(l * sizeof *s.act);
    GSB_CHECK(cache_init(&s.cache, pb->n, pb->cache_bytes, pb->row, pb->row_data));
    if (!s.y || !s.status || !s.alpha || !s.G || !s.G_bar || !s.p || !s.C || !s.QD ||
        !s.real || !s.act) {
        rc = gsb__err(GSB_ENOMEM, "SVM solver: out of memory for %lld variables",
                      (long long)pb->l);
        goto done;
    }
    memcpy(s.y, pb->y, l);
    memcpy(s.alpha, alpha, d8);
    memcpy(s.p, pb->p, d8);
    memcpy(s.C, pb->C, d8);
    memcpy(s.QD, pb->QD, d8);
    memcpy(s.real, pb->real, l * sizeof *s.real);
    for (int64_t t = 0; t < pb->l; t++) {
        update_status(&s, t);
        s.act[t] = t;
    }
    GSB_CHECK(init_gradient(&s));
    GSB_CHECK(optimise(&s, res));
    for (int64_t t = 0; t < pb->l; t++)
        alpha[s.act[t]] = s.alpha[t];
done:
    smo_free(&s);
    return rc;
}
