/* tensor.c - allocation and movement of gsb__tensor between backends. */
#include "tensor.h"

#include <stdio.h>
#include <string.h>

#include "error.h"
#include "profile.h"

size_t gsb_dtype_size(gsb_dtype dtype)
{
    switch (dtype) {
    case GSB_F32: return 4;
    case GSB_F64: return 8;
    case GSB_I32: return 4;
    case GSB_I64: return 8;
    }
    return 0;
}

const char *gsb_dtype_name(gsb_dtype dtype)
{
    switch (dtype) {
    case GSB_F32: return "float32";
    case GSB_F64: return "float64";
    case GSB_I32: return "int32";
    case GSB_I64: return "int64";
    }
    return "unknown";
}

int gsb__tensor_alloc(const gsb__backend *be, gsb_dtype dtype, int64_t rows, int64_t cols,
                      gsb__tensor *out)
{
    *out = GSB__TENSOR_NONE;
    if (rows < 0 || cols < 0 || gsb_dtype_size(dtype) == 0)
        return gsb__err(GSB_EINTERNAL, "invalid tensor shape (%lld, %lld)", (long long)rows,
                        (long long)cols);
    out->dtype = dtype;
    out->rows = rows;
    out->cols = cols;
    out->ndim = 2;
    return be->ops->alloc(be, out);
}

int gsb__tensor_zeros(const gsb__backend *be, gsb_dtype dtype, int64_t rows, int64_t cols,
                      gsb__tensor *out)
{
    GSB_TRY(gsb__tensor_alloc(be, dtype, rows, cols, out));
    int rc = be->ops->fill(be, out, 0.0);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

void gsb__tensor_free(gsb__tensor *t)
{
    if (t->owned && t->be && t->data)
        t->be->ops->release(t->be, t);
    *t = GSB__TENSOR_NONE;
}

gsb__tensor gsb__tensor_host_view(void *data, gsb_dtype dtype, int64_t rows, int64_t cols)
{
    gsb__tensor t = {data, dtype, rows, cols, 2, gsb__cpu_backend(), 0};
    return t;
}

/*
 * GSB_PROFILE: a move of 1 MiB or more between backends prints its
 * destination's allocation and its copy as lines of their own inside the
 * caller's phase ("X to the backend" = what came before + these two); the
 * CUDA backend adds a line on the copy's inside (cuda_copy.cu).  The clock
 * waits for the backend that does the work.
 */
enum { MOVE_TRACE_MIN = 1 << 20 };

static const gsb__backend *move_tracer(const gsb__backend *be, const gsb__tensor *src,
                                       gsb_dtype dtype)
{
    if (src->be == be || !gsb__profile_on() ||
        (size_t)src->rows * (size_t)src->cols * gsb_dtype_size(dtype) < MOVE_TRACE_MIN)
        return NULL;
    return be == gsb__cpu_backend() ? src->be : be;
}

static void move_note(const gsb__backend *dev, const gsb__tensor *src, gsb_dtype dtype,
                      const char *what, double ms)
{
    char line[128];
    snprintf(line, sizeof line, "  %s %s (%.1f MiB): %s", src->be == dev ? "from" : "to",
             dev->name, (double)src->rows * (double)src->cols * gsb_dtype_size(dtype) / 1048576.0,
             what);
    gsb__profile_note(line, ms);
}

/* A traced move's two lines: allocation from t0 to t1, copy from t1 to now. */
static void move_notes(const gsb__backend *traced, const gsb__tensor *src, gsb_dtype dtype,
                       double t0, double t1)
{
    double t2 = gsb__profile_clock(traced);
    move_note(traced, src, dtype, "allocation", t1 - t0);
    move_note(traced, src, dtype, "copy", t2 - t1);
}

int gsb__tensor_to_dtype(const gsb__backend *be, const gsb__tensor *src, gsb_dtype dtype,
                         gsb__tensor *out)
{
    if (src->be == be && src->dtype == dtype) {
        *out = *src;
        out->owned = 0;
        return GSB_OK;
    }
    const gsb__backend *traced = move_tracer(be, src, dtype);
    double t0 = traced ? gsb__profile_clock(traced) : 0;
    GSB_TRY(gsb__tensor_alloc(be, dtype, src->rows, src->cols, out));
    out->ndim = src->ndim;
    double t1 = traced ? gsb__profile_clock(traced) : 0;
    int rc;
    if (src->be == be)
        rc = be->ops->copy(be, out, src);
    else if (src->be == gsb__cpu_backend() && src->dtype == dtype)
        rc = be->ops->upload(be, out, src->data);
    else if (be == gsb__cpu_backend() && src->dtype == dtype)
        rc = src->be->ops->download(src->be, src, out->data);
    else {
        /* move first, convert where the data ends up: a GPU converts at
         * memory speed, and the host never holds a widened copy */
        gsb__tensor tmp;
        rc = gsb__tensor_to_dtype(be, src, src->dtype, &tmp);
        if (rc == GSB_OK) {
            rc = be->ops->copy(be, out, &tmp);
            gsb__tensor_free(&tmp);
        }
    }
    if (rc != GSB_OK) {
        gsb__tensor_free(out);
    } else if (traced) {
        move_notes(traced, src, dtype, t0, t1);
    }
    return rc;
}

int gsb__tensor_to(const gsb__backend *be, const gsb__tensor *src, gsb__tensor *out)
{
    return gsb__tensor_to_dtype(be, src, src->dtype, out);
}

int gsb__tensor_to_host(const gsb__tensor *src, gsb__tensor *out)
{
    const gsb__backend *cpu = gsb__cpu_backend();
    const gsb__backend *traced = move_tracer(cpu, src, src->dtype);
    double t0 = traced ? gsb__profile_clock(traced) : 0;
    GSB_TRY(gsb__tensor_alloc(cpu, src->dtype, src->rows, src->cols, out));
    out->ndim = src->ndim;
    double t1 = traced ? gsb__profile_clock(traced) : 0;
    int rc = src->be == cpu ? cpu->ops->copy(cpu, out, src)
                            : src->be->ops->download(src->be, src, out->data);
    if (rc != GSB_OK) {
        gsb__tensor_free(out);
    } else if (traced) {
        move_notes(traced, src, src->dtype, t0, t1);
    }
    return rc;
}

double gsb__tensor_get(const gsb__tensor *t, int64_t i)
{
    switch (t->dtype) {
    case GSB_F32: return ((const float *)t->data)[i];
    case GSB_F64: return ((const double *)t->data)[i];
    case GSB_I32: return ((const int32_t *)t->data)[i];
    case GSB_I64: return (double)((const int64_t *)t->data)[i];
    }
    return 0.0;
}

void gsb__tensor_set(gsb__tensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case GSB_F32: ((float *)t->data)[i] = (float)v; break;
    case GSB_F64: ((double *)t->data)[i] = v; break;
    case GSB_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case GSB_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    }
}

/* One element of a caller's array, which may sit at any byte offset (memcpy:
 * the same load where it is aligned, no undefined behaviour where not). */
static double read_elem(const char *p, gsb_dtype dt)
{
    switch (dt) {
    case GSB_F32: { float v; memcpy(&v, p, sizeof v); return v; }
    case GSB_F64: { double v; memcpy(&v, p, sizeof v); return v; }
    case GSB_I32: { int32_t v; memcpy(&v, p, sizeof v); return v; }
    case GSB_I64: { int64_t v; memcpy(&v, p, sizeof v); return (double)v; }
    }
    return 0;
}

void gsb__tensor_gather_strided(gsb__tensor *dst, int64_t rows, int64_t cols, const void *base,
                                gsb_dtype dtype, int64_t s0, int64_t s1)
{
    const char *b = base;
#pragma omp parallel for if (rows * cols > (1 << 18)) schedule(static)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            gsb__tensor_set(dst, i * cols + j, read_elem(b + i * s0 + j * s1, dtype));
}
