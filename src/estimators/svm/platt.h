/*
 * platt.h - probability estimates of libsvm's C-SVC (as scikit-learn 1.9.1's
 * SVC(probability=True)):
 *   - Platt scaling: P(y = +1 | f) = 1 / (1 + exp(A f + B)), A and B fitted
 *     to cross-validated decision values f by Newton's method with a
 *     backtracking line search (Lin, Lin and Weng's improvement of Platt's
 *     algorithm, with libsvm's targets, tolerances and iteration limits);
 *   - pairwise coupling: class probabilities from the one-vs-one pairwise
 *     ones (Wu, Lin and Weng, JMLR 2004, method 2, as libsvm solves it).
 */
#ifndef GSB_ESTIMATORS_SVM_PLATT_H
#define GSB_ESTIMATORS_SVM_PLATT_H

#include <stdint.h>

/* Fit A and B to decision values dec and labels y (+1 / -1), l of them. */
void gsb__platt_fit(int64_t l, const double *dec, const int8_t *y, double *A, double *B);
/* P(+1) for decision value f (computed without cancellation). */
double gsb__platt_predict(double f, double A, double B);
/*
 * Class probabilities p (k) from pairwise probabilities r (k x k, row-major:
 * r[i*k+j] = P(class i | i or j), r[j*k+i] = 1 - r[i*k+j]); Q (k x k) and
 * Qp (k) are scratch.
 */
void gsb__platt_couple(int k, const double *r, double *p, double *Q, double *Qp);

#endif
