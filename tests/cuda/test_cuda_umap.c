/*
 * test_cuda_umap.c - the CUDA backend's umap_sgd_epoch (cuda_umap.cu)
 * against its CPU twin (cpu_umap.c).
 *
 * Deterministic form: random CSR graphs (fit: tail = head, and transform: a
 * separate tail; dim 1, 2, 3 and 8; up to 200k edges), both backends run
 * one epoch from the same positions and schedules, for several epochs in a
 * row (the GPU restarted from the CPU's state each epoch, so differences do
 * not compound): the schedules must be bitwise equal (the same edges are
 * due and the same negative samples drawn) and the positions within 1e-5 of
 * their scale (float32 steps that differ only in powf's last bits and fused
 * multiply-adds); the GPU's epochs after the first skip the structure check
 * (edges_checked, as a run passes it).  A repeated GPU run is bitwise equal.
 * Hogwild form (steps applied with atomics as they are computed, reading
 * positions other threads may have moved): not comparable bitwise.  A step
 * read from a moved point differs by O(alpha L) relative, L the force's
 * Lipschitz constant, which is large for close pairs near the clip, so a
 * single point may legitimately be off by tens of percent of the largest
 * displacement; in aggregate the difference stays small.  At a small
 * learning rate (3e-4) the RMS of the difference from the CPU's
 * displacements must be within 2e-2 of their RMS, with the same schedules:
 * a CPU simulation of these graphs (edges in random order, each step
 * applied at once, reading moved positions) gives at most 0.006, and
 * kernels that skip or lose 1% of the edges' steps give 0.07-0.10, one
 * that doubles them 1.0.
 * Malformed edges give GSB_EINTERNAL and leave the GPU usable.  Needs a GPU:
 * run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/umap_sgd.h"
#include "cuda_testing.h"

typedef struct graph {
    int64_t n, m, dim, nnz;
    gsb__tensor indptr, indices, eps, head, tail; /* host; tail empty for a fit */
} graph;

static void graph_free(graph *g)
{
    gsb__tensor_free(&g->indptr);
    gsb__tensor_free(&g->indices);
    gsb__tensor_free(&g->eps);
    gsb__tensor_free(&g->head);
    gsb__tensor_free(&g->tail);
}

static gsb__tensor host_alloc(gsb_dtype dt, int64_t rows, int64_t cols)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(cpu, dt, rows, cols, &t) != GSB_OK)
        abort();
    return t;
}

/* n heads with 1..deg edges into m tails (m = n for a fit), positions in [0, 10) */
static graph make_graph(int64_t n, int64_t m, int64_t dim, int64_t deg, int fit)
{
    graph g = {0};
    g.n = n;
    g.m = fit ? n : m;
    g.dim = dim;
    g.indptr = host_alloc(GSB_I64, n + 1, 1);
    int64_t *ptr = g.indptr.data;
    ptr[0] = 0;
    for (int64_t i = 0; i < n; i++)
        ptr[i + 1] = ptr[i] + 1 + (int64_t)(testing_uniform() * (double)deg);
    g.nnz = ptr[n];
    g.indices = host_alloc(GSB_I32, g.nnz, 1);
    g.eps = host_alloc(GSB_F64, g.nnz, 1);
    for (int64_t e = 0; e < g.nnz; e++) {
        ((int32_t *)g.indices.data)[e] = (int32_t)(testing_uniform() * (double)g.m);
        ((double *)g.eps.data)[e] = 1.0 + 7.0 * testing_uniform();
    }
    g.head = host_random(GSB_F32, n, dim, 1.0);
    for (int64_t i = 0; i < n * dim; i++)
        gsb__tensor_set(&g.head, i, 10.0 * testing_uniform());
    if (!fit) {
        g.tail = host_random(GSB_F32, g.m, dim, 1.0);
        for (int64_t i = 0; i < g.m * dim; i++)
            gsb__tensor_set(&g.tail, i, 10.0 * testing_uniform());
    }
    return g;
}

/* the two schedules at their starting points */
static void schedules(const graph *g, double rate, gsb__tensor *ns, gsb__tensor *nn)
{
    *ns = host_alloc(GSB_F64, g->nnz, 1);
    *nn = host_alloc(GSB_F64, g->nnz, 1);
    for (int64_t e = 0; e < g->nnz; e++) {
        double eps = ((const double *)g->eps.data)[e];
        ((double *)ns->data)[e] = eps;
        ((double *)nn->data)[e] = eps / rate;
    }
}

/* one epoch on backend be of copies of the host state (head, ns, nn: in and out) */
static int epoch_on(const gsb__backend *be, const graph *g, gsb__tensor *head, gsb__tensor *ns,
                    gsb__tensor *nn, const gsb__umap_sgd *p)
{
    gsb__tensor h, t = GSB__TENSOR_NONE, ip, ix, ep, a, b;
    if (gsb__tensor_to(be, head, &h) || gsb__tensor_to(be, &g->indptr, &ip) ||
        gsb__tensor_to(be, &g->indices, &ix) || gsb__tensor_to(be, &g->eps, &ep) ||
        gsb__tensor_to(be, ns, &a) || gsb__tensor_to(be, nn, &b) ||
        (g->tail.data && gsb__tensor_to(be, &g->tail, &t))) {
        fprintf(stderr, "upload: %s\n", gsb_errmsg());
        abort();
    }
    int rc = be->ops->umap_sgd_epoch(be, &h, g->tail.data ? &t : NULL, &ip, &ix, &ep, &a, &b, p);
    if (rc == GSB_OK && be != cpu) {
        if (be->ops->download(be, &h, head->data) || be->ops->download(be, &a, ns->data) ||
            be->ops->download(be, &b, nn->data))
            rc = GSB_EBACKEND;
    }
    gsb__tensor_free(&h);
    gsb__tensor_free(&t);
    gsb__tensor_free(&ip);
    gsb__tensor_free(&ix);
    gsb__tensor_free(&ep);
    gsb__tensor_free(&a);
    gsb__tensor_free(&b);
    return rc;
}

static gsb__tensor host_copy(const gsb__tensor *t)
{
    gsb__tensor c;
    if (gsb__tensor_to_host(t, &c) != GSB_OK)
        abort();
    return c;
}

/* max |a - b| / max(|b|, 1) over the elements of two float32 host tensors */
static double max_err(const gsb__tensor *a, const gsb__tensor *b)
{
    double num = 0, den = 1.0;
    for (int64_t i = 0; i < gsb__tensor_numel(a); i++) {
        double x = gsb__tensor_get(a, i), y = gsb__tensor_get(b, i);
        if (isnan(x) || isnan(y))
            return INFINITY;
        num = fmax(num, fabs(x - y));
        den = fmax(den, fabs(y));
    }
    return num / den;
}

static int same_bits(const gsb__tensor *a, const gsb__tensor *b)
{
    return memcmp(a->data, b->data, gsb__tensor_nbytes(a)) == 0;
}

static void compare_deterministic(int64_t n, int64_t m, int64_t dim, int64_t deg, int fit)
{
    graph g = make_graph(n, m, dim, deg, fit);
    gsb__umap_sgd p = {0, 1.577, 0.895, 1.0, 1.0, 5.0, fit ? 2.0 : 1.0, 77, 0, 0};
    gsb__tensor ns, nn;
    schedules(&g, p.negative_sample_rate, &ns, &nn);
    for (int64_t epoch = 0; epoch < 6; epoch++) {
        p.epoch = epoch;
        p.alpha = 1.0 - (double)epoch / 6.0;
        p.edges_checked = epoch > 0; /* as a run passes it: the GPU checks in epoch 0 only */
        gsb__tensor gh = host_copy(&g.head), gns = host_copy(&ns), gnn = host_copy(&nn);
        CHECK_OK(epoch_on(cpu, &g, &g.head, &ns, &nn, &p));
        CHECK_OK(epoch_on(gpu, &g, &gh, &gns, &gnn, &p));
        CHECK(same_bits(&gns, &ns));
        CHECK(same_bits(&gnn, &nn));
        double err = max_err(&gh, &g.head);
        if (!(err <= 1e-5))
            fprintf(stderr, "n %lld dim %lld fit %d epoch %lld: positions off by %g\n",
                    (long long)n, (long long)dim, fit, (long long)epoch, err);
        CHECK(err <= 1e-5);
        gsb__tensor_free(&gh);
        gsb__tensor_free(&gns);
        gsb__tensor_free(&gnn);
    }
    gsb__tensor_free(&ns);
    gsb__tensor_free(&nn);
    graph_free(&g);
}

static void test_deterministic_matches_cpu(void)
{
    testing_seed(1);
    compare_deterministic(1, 1, 2, 3, 1);
    compare_deterministic(300, 300, 2, 15, 1);
    compare_deterministic(500, 2000, 2, 15, 0);
    compare_deterministic(257, 257, 1, 8, 1);
    compare_deterministic(1000, 1000, 3, 20, 1);
    compare_deterministic(700, 300, 8, 10, 0);
    compare_deterministic(12000, 12000, 2, 30, 1); /* ~180k edges, many blocks */
}

static void test_deterministic_repeats(void)
{
    testing_seed(2);
    graph g = make_graph(3000, 3000, 2, 20, 1);
    gsb__umap_sgd p = {0, 1.577, 0.895, 1.0, 1.0, 5.0, 2.0, 5, 0, 0};
    gsb__tensor ns, nn;
    schedules(&g, 5.0, &ns, &nn);
    gsb__tensor h1 = host_copy(&g.head), a1 = host_copy(&ns), b1 = host_copy(&nn);
    gsb__tensor h2 = host_copy(&g.head), a2 = host_copy(&ns), b2 = host_copy(&nn);
    for (int64_t epoch = 0; epoch < 5; epoch++) {
        p.epoch = epoch;
        p.edges_checked = epoch > 0;
        CHECK_OK(epoch_on(gpu, &g, &h1, &a1, &b1, &p));
        CHECK_OK(epoch_on(gpu, &g, &h2, &a2, &b2, &p));
    }
    CHECK(same_bits(&h1, &h2) && same_bits(&a1, &a2) && same_bits(&b1, &b2));
    CHECK(!same_bits(&h1, &g.head)); /* and the points moved */
    gsb__tensor_free(&h1), gsb__tensor_free(&a1), gsb__tensor_free(&b1);
    gsb__tensor_free(&h2), gsb__tensor_free(&a2), gsb__tensor_free(&b2);
    gsb__tensor_free(&ns), gsb__tensor_free(&nn);
    graph_free(&g);
}

/* displacements of the hogwild GPU epoch against the CPU's deterministic one */
static void compare_hogwild(int64_t n, int64_t dim, int fit)
{
    graph g = make_graph(n, fit ? n : n / 2, dim, 15, fit);
    gsb__umap_sgd p = {3, 1.577, 0.895, 1.0, 3e-4, 5.0, fit ? 2.0 : 1.0, 11, 0, 0};
    gsb__tensor ns, nn;
    schedules(&g, 5.0, &ns, &nn);
    gsb__tensor start = host_copy(&g.head), gh = host_copy(&g.head);
    gsb__tensor gns = host_copy(&ns), gnn = host_copy(&nn);
    CHECK_OK(epoch_on(cpu, &g, &g.head, &ns, &nn, &p));
    p.hogwild = 1;
    CHECK_OK(epoch_on(gpu, &g, &gh, &gns, &gnn, &p));
    CHECK(same_bits(&gns, &ns) && same_bits(&gnn, &nn));
    /* sums of squares of the difference and of the CPU's displacements */
    double num = 0, den = 0;
    for (int64_t i = 0; i < n * dim; i++) {
        double dc = gsb__tensor_get(&g.head, i) - gsb__tensor_get(&start, i);
        double dg = gsb__tensor_get(&gh, i) - gsb__tensor_get(&start, i);
        num += (dg - dc) * (dg - dc);
        den += dc * dc;
        if (isnan(dg))
            num = INFINITY;
    }
    if (!(den > 0 && num <= 4e-4 * den))
        fprintf(stderr, "n %lld dim %lld fit %d: rms difference %g of the displacements' rms\n",
                (long long)n, (long long)dim, fit, den > 0 ? sqrt(num / den) : INFINITY);
    CHECK(den > 0 && num <= 4e-4 * den); /* rms ratio <= 2e-2 */
    gsb__tensor_free(&start), gsb__tensor_free(&gh);
    gsb__tensor_free(&gns), gsb__tensor_free(&gnn);
    gsb__tensor_free(&ns), gsb__tensor_free(&nn);
    graph_free(&g);
}

static void test_hogwild_close_to_cpu(void)
{
    testing_seed(3);
    compare_hogwild(2000, 2, 1);
    compare_hogwild(5000, 3, 0);
    compare_hogwild(20000, 2, 1); /* hubs: heads shared by many concurrent edges */
}

static void test_bad_arguments(void)
{
    testing_seed(4);
    graph g = make_graph(100, 100, 2, 5, 1);
    gsb__umap_sgd p = {0, 1.577, 0.895, 1.0, 1.0, 5.0, 2.0, 1, 0, 0};
    gsb__tensor ns, nn;
    schedules(&g, 5.0, &ns, &nn);
    ((int32_t *)g.indices.data)[7] = 100; /* outside the tail */
    CHECK_ERR(epoch_on(gpu, &g, &g.head, &ns, &nn, &p), GSB_EINTERNAL, "malformed edges");
    ((int32_t *)g.indices.data)[7] = 0;
    ((int64_t *)g.indptr.data)[100] += 1; /* indptr past nnz */
    CHECK_ERR(epoch_on(gpu, &g, &g.head, &ns, &nn, &p), GSB_EINTERNAL, "malformed edges");
    ((int64_t *)g.indptr.data)[100] -= 1;
    CHECK_OK(epoch_on(gpu, &g, &g.head, &ns, &nn, &p)); /* the GPU is still usable */
    /* a float64 head is a caller's bug */
    gsb__tensor h64 = host_random(GSB_F64, 100, 2, 1.0), hg = to_gpu(&h64), ip = to_gpu(&g.indptr);
    gsb__tensor ix = to_gpu(&g.indices), ep = to_gpu(&g.eps), a = to_gpu(&ns), b = to_gpu(&nn);
    CHECK_ERR(gpu->ops->umap_sgd_epoch(gpu, &hg, NULL, &ip, &ix, &ep, &a, &b, &p), GSB_EINTERNAL,
              "head has dtype float64");
    gsb__tensor_free(&h64), gsb__tensor_free(&hg), gsb__tensor_free(&ip);
    gsb__tensor_free(&ix), gsb__tensor_free(&ep), gsb__tensor_free(&a), gsb__tensor_free(&b);
    gsb__tensor_free(&ns), gsb__tensor_free(&nn);
    graph_free(&g);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_deterministic_matches_cpu);
    RUN(test_deterministic_repeats);
    RUN(test_hogwild_close_to_cpu);
    RUN(test_bad_arguments);
    return testing_done();
}
