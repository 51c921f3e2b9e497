/*
 * validate.h - input checks at the engine boundary (scikit-learn's
 * check_array, in C).  The dispatcher builds a spec from each method's
 * declared inputs.
 */
#ifndef GSB_CORE_VALIDATE_H
#define GSB_CORE_VALIDATE_H

#include "core/tensor.h"

typedef struct gsb__validate_spec {
    const char *name;      /* "X", "y", "sample_weight": used in messages */
    const char *estimator; /* "KMeans": used in messages */
    gsb_dtype dtype;       /* target dtype; 0 keeps float32/float64, ints -> float64 */
    int want_2d;           /* must be 2-D (features) */
    int want_1d;           /* must be 1-D; an (n, 1) column is accepted and raveled */
    int64_t min_rows;      /* 1 for data, 0 for optional extras */
    int non_negative;      /* sample weights */
    int allow_nan;         /* NaN accepted (missing values); infinity is not */
} gsb__validate_spec;

/*
 * Check a caller array against spec and give a contiguous host tensor: a
 * borrowed view when the layout and dtype already fit, else an owned copy.
 * out->ndim is the user-facing ndim.  Free with gsb__tensor_free.
 */
int gsb__validate_array(const gsb_array *a, const gsb__validate_spec *spec, gsb__tensor *out);
/* The same without the values' checks (NaN, infinity, negative weights): the
 * caller checks them later (a streamed fit, batch by batch: core/dispatch.c). */
int gsb__validate_layout(const gsb_array *a, const gsb__validate_spec *spec, gsb__tensor *out);

/* The shape and dtype checks of gsb__validate_array alone (no data read):
 * rows, cols, user-facing ndim and the dtype the data will have. */
typedef struct gsb__validated_shape {
    int64_t rows, cols;
    int ndim;
    gsb_dtype dtype;
} gsb__validated_shape;
int gsb__validate_shape(const gsb_array *a, const gsb__validate_spec *spec,
                        gsb__validated_shape *out);

/* a's bytes are contiguous in C order (strides {0, 0} or equivalent) */
int gsb__array_is_c_contiguous(const gsb_array *a);
/* Gather a (rows x cols, any strides) into host tensor dst (contiguous, dst's
 * dtype; ints and floats convert); every core for large arrays. */
void gsb__array_gather(const gsb_array *a, int64_t rows, int64_t cols, gsb__tensor *dst);

/* 0 when every element of host tensor t is finite, 1 on a NaN, 2 on an infinity */
int gsb__host_nonfinite(const gsb__tensor *t);
/* Whether host tensor t holds an infinity (NaN aside). */
int gsb__host_has_inf(const gsb__tensor *t);
/* scikit-learn's message for gsb__host_nonfinite's answer bad (1 or 2) */
int gsb__nonfinite_error(int bad, const char *name, gsb_dtype dt);

#endif
