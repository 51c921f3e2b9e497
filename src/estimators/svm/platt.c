/*
 * platt.c - libsvm's sigmoid fit and pairwise coupling (see platt.h).  The
 * constants are libsvm's, so the fitted A and B are scikit-learn's probA_ and
 * probB_ given the same decision values.
 */
#include "estimators/svm/platt.h"

#include <math.h>

/* The cross-entropy of Platt's targets (hi for y = +1, lo otherwise) under
 * the sigmoid of A f + B, written to avoid overflow as libsvm writes it. */
static double objective(int64_t l, const double *dec, const int8_t *y, double hi, double lo,
                        double A, double B)
{
    double f = 0;
    for (int64_t i = 0; i < l; i++) {
        double t = y[i] > 0 ? hi : lo, z = dec[i] * A + B;
        f += z >= 0 ? t * z + log(1 + exp(-z)) : (t - 1) * z + log(1 + exp(z));
    }
    return f;
}

void gsb__platt_fit(int64_t l, const double *dec, const int8_t *y, double *A, double *B)
{
    const int max_iter = 100;
    const double min_step = 1e-10, sigma = 1e-12, eps = 1e-5;
    double prior1 = 0, prior0 = 0;
    for (int64_t i = 0; i < l; i++) {
        if (y[i] > 0)
            prior1 += 1;
        else
            prior0 += 1;
    }
    /* Platt's targets: (N+ + 1) / (N+ + 2) and 1 / (N- + 2), not 1 and 0 */
    double hi = (prior1 + 1.0) / (prior1 + 2.0), lo = 1 / (prior0 + 2.0);
    double a = 0.0, b = log((prior0 + 1.0) / (prior1 + 1.0));
    double fval = objective(l, dec, y, hi, lo, a, b);
    for (int iter = 0; iter < max_iter; iter++) {
        /* gradient and Hessian (+ sigma I, numerically positive definite) */
        double h11 = sigma, h22 = sigma, h21 = 0, g1 = 0, g2 = 0;
        for (int64_t i = 0; i < l; i++) {
            double z = dec[i] * a + b, p, q;
            if (z >= 0) {
                p = exp(-z) / (1.0 + exp(-z));
                q = 1.0 / (1.0 + exp(-z));
            } else {
                p = 1.0 / (1.0 + exp(z));
                q = exp(z) / (1.0 + exp(z));
            }
            double d2 = p * q, d1 = (y[i] > 0 ? hi : lo) - p;
            h11 += dec[i] * dec[i] * d2;
            h22 += d2;
            h21 += dec[i] * d2;
            g1 += dec[i] * d1;
            g2 += d1;
        }
        if (fabs(g1) < eps && fabs(g2) < eps)
            break;
        /* Newton direction -H^-1 g, then halve the step until f decreases enough */
        double det = h11 * h22 - h21 * h21;
        double dA = -(h22 * g1 - h21 * g2) / det, dB = -(-h21 * g1 + h11 * g2) / det;
        double gd = g1 * dA + g2 * dB, step = 1;
        while (step >= min_step) {
            double na = a + step * dA, nb = b + step * dB;
            double nf = objective(l, dec, y, hi, lo, na, nb);
            if (nf < fval + 0.0001 * step * gd) {
                a = na;
                b = nb;
                fval = nf;
                break;
            }
            step /= 2.0;
        }
        if (step < min_step)
            break; /* libsvm: "line search fails"; keep the last point */
    }
    *A = a;
    *B = b;
}

double gsb__platt_predict(double f, double A, double B)
{
    double z = f * A + B;
    return z >= 0 ? exp(-z) / (1.0 + exp(-z)) : 1.0 / (1 + exp(z));
}

void gsb__platt_couple(int k, const double *r, double *p, double *Q, double *Qp)
{
    int max_iter = k > 100 ? k : 100;
    double eps = 0.005 / k;
    for (int t = 0; t < k; t++) {
        p[t] = 1.0 / k;
        Q[t * k + t] = 0;
        for (int j = 0; j < t; j++) {
            Q[t * k + t] += r[j * k + t] * r[j * k + t];
            Q[t * k + j] = Q[j * k + t];
        }
        for (int j = t + 1; j < k; j++) {
            Q[t * k + t] += r[j * k + t] * r[j * k + t];
            Q[t * k + j] = -r[j * k + t] * r[t * k + j];
        }
    }
    for (int iter = 0; iter < max_iter; iter++) {
        /* stop when every (Qp)_t is within eps of p'Qp (recomputed for accuracy) */
        double pQp = 0, max_error = 0;
        for (int t = 0; t < k; t++) {
            Qp[t] = 0;
            for (int j = 0; j < k; j++)
                Qp[t] += Q[t * k + j] * p[j];
            pQp += p[t] * Qp[t];
        }
        for (int t = 0; t < k; t++) {
            double e = fabs(Qp[t] - pQp);
            max_error = e > max_error ? e : max_error;
        }
        if (max_error < eps)
            break;
        for (int t = 0; t < k; t++) {
            double diff = (-Qp[t] + pQp) / Q[t * k + t];
            p[t] += diff;
            pQp = (pQp + diff * (diff * Q[t * k + t] + 2 * Qp[t])) / (1 + diff) / (1 + diff);
            for (int j = 0; j < k; j++) {
                Qp[j] = (Qp[j] + diff * Q[t * k + j]) / (1 + diff);
                p[j] /= (1 + diff);
            }
        }
    }
}
