/*
 * lanczos_state.c - the state and steps lanczos.c and lanczos_seg.c share
 * (see lanczos_state.h).
 */
#include "solvers/lanczos_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/tensor.h"

int gsb__lz_opts_ok(int64_t nev, int64_t ncv, int64_t max_matvec, double tol)
{
    return nev >= 1 && ncv >= nev + 2 && max_matvec >= 1 && tol > 0.0;
}

int gsb__lz_state_alloc(gsb__lz_state *s, const gsb__backend *be, int64_t n, int64_t ncv,
                        int64_t K, int64_t width, const char *who)
{
    s->be = be;
    s->n = n;
    s->ncv = ncv;
    s->K = K;
    s->width = width;
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv + 1, n, &s->V));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, n, 1, &s->w));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv, n, &s->tmp));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, ncv, ncv * K, &s->sel_d));
    GSB_TRY(gsb__tensor_zeros(be, GSB_F64, ncv, width, &s->hist));
    s->H = gsb__calloc_array(K * ncv * ncv, sizeof(double));
    s->S = gsb__alloc_array(K * ncv * ncv, sizeof(double));
    s->theta = gsb__alloc_array(K * ncv, sizeof(double));
    s->sel = gsb__alloc_array(ncv * ncv * K, sizeof(double));
    s->xh = gsb__alloc_array(n, sizeof(double));
    s->hh = gsb__alloc_array(ncv * width, sizeof(double));
    if (s->H && s->S && s->theta && s->sel && s->xh && s->hh)
        return GSB_OK;
    return gsb__err(GSB_ENOMEM, "%s: out of memory for the projected problem (%lld x %lld, "
                    "%lld block%s)", who, (long long)ncv, (long long)ncv, (long long)K,
                    K == 1 ? "" : "s");
}

void gsb__lz_state_free(gsb__lz_state *s)
{
    gsb__tensor_free(&s->V);
    gsb__tensor_free(&s->w);
    gsb__tensor_free(&s->tmp);
    gsb__tensor_free(&s->sel_d);
    gsb__tensor_free(&s->hist);
    free(s->H);
    free(s->S);
    free(s->theta);
    free(s->sel);
    free(s->xh);
    free(s->hh);
}

gsb__tensor gsb__lz_shaped(const gsb__tensor *t, int64_t rows, int64_t cols)
{
    gsb__tensor v = *t;
    v.rows = rows;
    v.cols = cols;
    v.owned = 0;
    return v;
}

gsb__tensor gsb__lz_basis(const gsb__lz_state *s, int64_t j)
{
    gsb__tensor v = gsb__tensor_rows(&s->V, j, 1);
    return gsb__lz_shaped(&v, s->n, 1);
}

gsb__tensor gsb__lz_hist_at(const gsb__lz_state *s, int64_t j, int64_t off, int64_t rows,
                            int64_t cols)
{
    gsb__tensor v = gsb__tensor_rows(&s->hist, j, 1);
    v.data = (char *)v.data + (size_t)off * sizeof(double);
    return gsb__lz_shaped(&v, rows, cols);
}

void gsb__lz_fixed_random(double *x, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i + 1;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        x[i] = (double)(z >> 11) * 0x1.0p-52 - 1.0;
    }
}

void gsb__lanczos_default_start(double *x, int64_t n)
{
    gsb__lz_fixed_random(x, n, 0);
    for (int64_t i = 0; i < n; i++)
        x[i] = 1.0 + 1e-3 * x[i];
}

int gsb__lz_ritz(gsb__lz_state *s, int64_t c)
{
    const gsb__backend *cpu = gsb__cpu_backend();
    const int64_t ncv = s->ncv;
    gsb__tensor th = gsb__tensor_host_view(s->H + c * ncv * ncv, GSB_F64, ncv, ncv);
    gsb__tensor tw = gsb__tensor_host_view(s->theta + c * ncv, GSB_F64, ncv, 1);
    gsb__tensor ts = gsb__tensor_host_view(s->S + c * ncv * ncv, GSB_F64, ncv, ncv);
    return cpu->ops->eigh(cpu, &th, &tw, &ts);
}

double gsb__lz_worst_residual(const gsb__lz_state *s, int64_t c, double beta, int64_t nev)
{
    const int64_t ncv = s->ncv, last = ncv - 1;
    const double *S = s->S + c * ncv * ncv;
    double worst = 0.0;
    for (int64_t r = 0; r < nev; r++) {
        double res = fabs(beta * S[last * ncv + (last - r)]);
        worst = res > worst || isnan(res) ? res : worst;
    }
    return worst;
}

int64_t gsb__lz_keep(int64_t nev, int64_t ncv)
{
    int64_t keep = nev + (ncv - nev) / 2;
    return keep > ncv - 2 ? ncv - 2 : keep;
}

int gsb__lz_restart(gsb__lz_state *s, int64_t l)
{
    const gsb__backend *be = s->be;
    const int64_t ncv = s->ncv;
    gsb__tensor next = gsb__tensor_rows(&s->V, l, 1), last = gsb__tensor_rows(&s->V, ncv, 1);
    gsb__tensor head = gsb__tensor_rows(&s->V, 0, l), best = gsb__tensor_rows(&s->tmp, 0, l);
    GSB_TRY(be->ops->copy(be, &next, &last));
    GSB_TRY(be->ops->copy(be, &head, &best));
    for (int64_t c = 0; c < s->K; c++) {
        double *H = s->H + c * ncv * ncv;
        memset(H, 0, (size_t)(ncv * ncv) * sizeof(double));
        for (int64_t r = 0; r < l; r++)
            H[r * ncv + r] = s->theta[c * ncv + ncv - 1 - r];
    }
    return GSB_OK;
}
