/*
 * tsne_affinity.c - t-SNE's input affinities: scikit-learn's
 * _binary_search_perplexity per row, then the symmetrised, normalised joint
 * probabilities P (its _joint_probabilities_nn, and _joint_probabilities for
 * method='exact', whose graph holds every other row).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "estimators/manifold/tsne.h"

#define PERPLEXITY_STEPS 100
#define PERPLEXITY_TOL 1e-5
#define SUM_FLOOR 1e-8 /* scikit-learn's EPSILON_DBL */

/*
 * One row: conditional probabilities p (k) over the squared distances d (k,
 * float32 values) with entropy log(perplexity), by scikit-learn's bisection
 * on beta.  Returns the beta found.
 */
static double row_search(const float *d, int64_t k, double log_perp, double *p)
{
    double beta = 1.0, lo = -INFINITY, hi = INFINITY;
    for (int step = 0; step < PERPLEXITY_STEPS; step++) {
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++) {
            p[j] = exp(-(double)d[j] * beta);
            sum += p[j];
        }
        if (sum == 0.0)
            sum = SUM_FLOOR;
        double sum_dp = 0.0;
        for (int64_t j = 0; j < k; j++) {
            p[j] /= sum;
            sum_dp += (double)d[j] * p[j];
        }
        double diff = log(sum) + beta * sum_dp - log_perp;
        if (fabs(diff) <= PERPLEXITY_TOL)
            break;
        if (diff > 0.0) {
            lo = beta;
            beta = hi == INFINITY ? beta * 2.0 : (beta + hi) / 2.0;
        } else {
            hi = beta;
            beta = lo == -INFINITY ? beta / 2.0 : (beta + lo) / 2.0;
        }
    }
    return beta;
}

int gsb__tsne_joint_p(const gsb__knn_graph *sq, double perplexity, int clamp, gsb__csr *P,
                      double *mean_sigma)
{
    int64_t n = sq->n, k = sq->k;
    float *d = gsb__alloc_array(n * k, sizeof *d);
    double *cond = gsb__alloc_array(n * k, sizeof *cond);
    double *beta = gsb__alloc_array(n, sizeof *beta);
    int rc = GSB_OK;
    if (!d || !cond || !beta) {
        rc = gsb__err(GSB_ENOMEM, "TSNE: out of host memory for the affinities");
        goto done;
    }
    for (int64_t e = 0; e < n * k; e++)
        d[e] = (float)sq->dist[e];
    double log_perp = log(perplexity);
#pragma omp parallel for schedule(dynamic, 64) if (n * k > 4096)
    for (int64_t i = 0; i < n; i++)
        beta[i] = row_search(d + i * k, k, log_perp, cond + i * k);
    double beta_sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        beta_sum += beta[i];
    *mean_sigma = sqrt((double)n / beta_sum);

    rc = gsb__knn_symmetrize(sq, cond, GSB__SYM_SUM, P);
    if (rc != GSB_OK)
        goto done;
    double total = 0.0;
    for (int64_t e = 0; e < P->nnz; e++)
        total += P->data[e];
    total = fmax(total, DBL_EPSILON);
    for (int64_t e = 0; e < P->nnz; e++) {
        double v = P->data[e] / total;
        P->data[e] = clamp && v < DBL_EPSILON ? DBL_EPSILON : v;
    }
done:
    free(d);
    free(cond);
    free(beta);
    return rc;
}
