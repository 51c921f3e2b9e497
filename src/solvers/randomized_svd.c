/*
 * randomized_svd.c - the randomized truncated SVD shared by PCA and
 * TruncatedSVD (see randomized_svd.h), written against the backend ops.
 *
 * A = M, or M^T when M has fewer rows than columns (as scikit-learn), so A is
 * am x an with am >= an.  The basis has size = min(k + p, an) columns: a
 * Gaussian an x an test matrix already spans all of A's row space, so more
 * columns would add nothing (scikit-learn's economic QR drops them too), and
 * it keeps every matrix handed to the orthonormalize op at least as tall as
 * it is wide.
 *
 * Power iteration normalisers: scikit-learn's 'LU' (its 'auto' above two
 * iterations) and 'QR' only keep the iterates well conditioned; both span the
 * same subspace, so both run as the backend's QR here (no LU op exists).
 * 'none' does no normalisation, exactly as scikit-learn.
 *
 * When the basis is as wide as A (size == an) the sketch and the power
 * iterations are skipped: the basis is then range(A) itself, taken by one QR
 * of A (see gsb__rsvd_compute).
 */
#include "solvers/randomized_svd.h"

#include <stdlib.h>
#include <string.h>

/* ---- host <-> backend helpers -------------------------------------------- */

int gsb__tensor_from_f64(const gsb__backend *be, gsb_dtype dtype, const double *h, int64_t rows,
                         int64_t cols, gsb__tensor *out)
{
    GSB_TRY(gsb__tensor_alloc(be, dtype, rows, cols, out));
    int64_t n = rows * cols;
    if (n == 0)
        return GSB_OK;
    int rc;
    if (dtype == GSB_F64) {
        rc = be->ops->upload(be, out, h);
    } else {
        /* stage a converted host copy: upload takes the tensor's own dtype */
        gsb__tensor tmp;
        rc = gsb__tensor_alloc(gsb__cpu_backend(), dtype, rows, cols, &tmp);
        if (rc == GSB_OK) {
            for (int64_t i = 0; i < n; i++)
                gsb__tensor_set(&tmp, i, h[i]);
            rc = be->ops->upload(be, out, tmp.data);
            gsb__tensor_free(&tmp);
        }
    }
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

int gsb__tensor_to_f64(const gsb__tensor *t, double **out)
{
    int64_t n = gsb__tensor_numel(t);
    *out = malloc((size_t)(n > 0 ? n : 1) * sizeof **out);
    if (!*out)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    if (n == 0)
        return GSB_OK;
    gsb__tensor host;
    int rc = gsb__tensor_to_host(t, &host);
    if (rc != GSB_OK) {
        free(*out);
        *out = NULL;
        return rc;
    }
    for (int64_t i = 0; i < n; i++)
        (*out)[i] = gsb__tensor_get(&host, i);
    gsb__tensor_free(&host);
    return GSB_OK;
}

/* ---- the factorisation ---------------------------------------------------- */

/* A non-owning view of the first rows of a row-major tensor. */
static gsb__tensor first_rows(const gsb__tensor *t, int64_t rows)
{
    gsb__tensor v = *t;
    v.rows = rows;
    v.ndim = 2;
    v.owned = 0;
    return v;
}

void gsb__rsvd_free(gsb__rsvd *r)
{
    free(r->s);
    free(r->uhat);
    gsb__tensor_free(&r->Q);
    gsb__tensor_free(&r->Vb);
    memset(r, 0, sizeof *r);
}

int gsb__rsvd_compute(gsb__ctx *c, const gsb__tensor *M, const gsb__rsvd_opts *o, gsb__rsvd *r)
{
    const gsb__backend *be = c->be;
    const gsb__backend_ops *ops = be->ops;
    memset(r, 0, sizeof *r);
    int tr = M->rows < M->cols;
    int64_t am = tr ? M->cols : M->rows, an = tr ? M->rows : M->cols;
    /* min(k + p, an) without overflowing on absurd oversampling */
    int64_t size = o->n_oversamples >= an - o->n_components ? an
                                                            : o->n_components + o->n_oversamples;
    r->m = M->rows;
    r->n = M->cols;
    r->transposed = tr;
    r->size = size;
    r->k = o->n_components < an ? o->n_components : an;
    if (r->k < 1)
        return gsb__err(GSB_EINTERNAL, "randomized SVD of an empty matrix");

    gsb__tensor Y = GSB__TENSOR_NONE, Z = GSB__TENSOR_NONE, B = GSB__TENSOR_NONE,
                Ub = GSB__TENSOR_NONE, S = GSB__TENSOR_NONE;
    double *ub = NULL;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(be, M->dtype, am, size, &Y));
    if (size == an) {
        /*
         * Full-width sketch (n_components + n_oversamples >= columns of A, as
         * for 5000 x 20 with 16 components): A Z spans all of range(A) for any
         * nonsingular an x an Z, and the power iterations A (A^T A)^q Z span
         * it too, so in exact arithmetic the basis is orth(A) whatever Z and
         * n_iter are, and B = Q^T A has exactly A's SVD.  Taking Z = I gets
         * that basis from one QR of A itself: no 2 n_iter gemms and QRs, and
         * no rounding from an ill-conditioned Gaussian Z or from power
         * iterates that squash A's small directions (the result is A's thin
         * SVD to working precision, which is what scikit-learn's randomized
         * solver approximates here).
         */
        if (!tr) {
            GSB_CHECK(ops->copy(be, &Y, M));
        } else {
            double *eye = calloc((size_t)(an * an), sizeof *eye);
            if (!eye) {
                rc = gsb__err(GSB_ENOMEM, "out of host memory");
                goto done;
            }
            for (int64_t i = 0; i < an; i++)
                eye[i * an + i] = 1.0;
            rc = gsb__tensor_from_f64(be, M->dtype, eye, an, an, &Z);
            free(eye);
            if (rc != GSB_OK)
                goto done;
            GSB_CHECK(ops->gemm(be, 1, 0, 1.0, M, &Z, 0.0, &Y)); /* Y = M^T = A */
        }
    } else {
        GSB_CHECK(gsb__tensor_alloc(be, M->dtype, an, size, &Z));
        GSB_CHECK(ops->rand_normal(be, &Z, o->seed));
        /* A @ Z is gemm(op(M) = M or M^T); A^T @ Y the other way round */
        for (int64_t it = 0; it < o->n_iter; it++) {
            GSB_CHECK(ops->gemm(be, tr, 0, 1.0, M, &Z, 0.0, &Y));
            if (o->normalize)
                GSB_CHECK(ops->orthonormalize(be, &Y));
            GSB_CHECK(ops->gemm(be, !tr, 0, 1.0, M, &Y, 0.0, &Z));
            if (o->normalize)
                GSB_CHECK(ops->orthonormalize(be, &Z));
            GSB_CHECK(gsb__progress(c, "power iteration", it, 0.0));
        }
        GSB_CHECK(ops->gemm(be, tr, 0, 1.0, M, &Z, 0.0, &Y));
    }
    GSB_CHECK(ops->orthonormalize(be, &Y));
    gsb__tensor_free(&Z);

    /* B = Q^T A (size x an), then its exact thin SVD; size <= an so it has size triplets */
    GSB_CHECK(gsb__tensor_alloc(be, M->dtype, size, an, &B));
    GSB_CHECK(ops->gemm(be, 1, tr, 1.0, &Y, M, 0.0, &B));
    GSB_CHECK(gsb__tensor_alloc(be, M->dtype, size, size, &Ub));
    GSB_CHECK(gsb__tensor_alloc(be, M->dtype, size, 1, &S));
    GSB_CHECK(gsb__tensor_alloc(be, M->dtype, size, an, &r->Vb));
    GSB_CHECK(ops->svd(be, &B, &Ub, &S, &r->Vb));
    gsb__tensor_free(&B);

    GSB_CHECK(gsb__tensor_to_f64(&S, &r->s)); /* size values; the first k are used */
    GSB_CHECK(gsb__tensor_to_f64(&Ub, &ub));
    r->uhat = malloc((size_t)(size * r->k) * sizeof *r->uhat);
    if (!r->uhat) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    for (int64_t i = 0; i < size; i++)
        memcpy(r->uhat + i * r->k, ub + i * size, (size_t)r->k * sizeof *ub);
    r->Q = Y;
    Y = GSB__TENSOR_NONE;
done:
    free(ub);
    gsb__tensor_free(&Y);
    gsb__tensor_free(&Z);
    gsb__tensor_free(&B);
    gsb__tensor_free(&Ub);
    gsb__tensor_free(&S);
    if (rc != GSB_OK)
        gsb__rsvd_free(r);
    return rc;
}

int gsb__rsvd_right(const gsb__backend *be, const gsb__rsvd *r, gsb__tensor *Vt)
{
    GSB_TRY(gsb__tensor_alloc(be, r->Q.dtype, r->k, r->n, Vt));
    int rc;
    if (!r->transposed) {
        /* M = Q (Uhat S Vb): M's right vectors are B's */
        gsb__tensor top = first_rows(&r->Vb, r->k);
        rc = be->ops->copy(be, Vt, &top);
    } else {
        /* M^T = Q Uhat S Vb, so M's right vectors are the columns of Q Uhat: Vt = Uhat^T Q^T */
        gsb__tensor W;
        rc = gsb__tensor_from_f64(be, r->Q.dtype, r->uhat, r->size, r->k, &W);
        if (rc == GSB_OK) {
            rc = be->ops->gemm(be, 1, 1, 1.0, &W, &r->Q, 0.0, Vt);
            gsb__tensor_free(&W);
        }
    }
    if (rc != GSB_OK)
        gsb__tensor_free(Vt);
    return rc;
}

int gsb__rsvd_left_scaled(const gsb__backend *be, const gsb__rsvd *r, const double *w,
                          gsb__tensor *out)
{
    int64_t k = r->k, rows = r->transposed ? r->k : r->size;
    /* not transposed: U diag(w) = Q (Uhat diag(w)); transposed: U = Vb^T, so Vb^T diag(w) */
    double *h = calloc((size_t)(rows * k), sizeof *h);
    if (!h)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < k; j++)
            if (!r->transposed)
                h[i * k + j] = r->uhat[i * k + j] * w[j];
            else if (i == j)
                h[i * k + j] = w[j];
    gsb__tensor W = GSB__TENSOR_NONE;
    *out = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_from_f64(be, r->Q.dtype, h, rows, k, &W));
    GSB_CHECK(gsb__tensor_alloc(be, r->Q.dtype, r->m, k, out));
    if (!r->transposed) {
        GSB_CHECK(be->ops->gemm(be, 0, 0, 1.0, &r->Q, &W, 0.0, out));
    } else {
        gsb__tensor top = first_rows(&r->Vb, k);
        GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &top, &W, 0.0, out));
    }
done:
    free(h);
    gsb__tensor_free(&W);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}
