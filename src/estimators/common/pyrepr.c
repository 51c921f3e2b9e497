/*
 * pyrepr.c - Python's repr() of a float, for error messages.  See pyrepr.h.
 */
#include "estimators/common/pyrepr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gsb__py_float_repr(double v, char *buf, size_t n)
{
    /* Python writes integral values below 1e16 positionally with one
     * decimal and the rest as the shortest digits that read back, in
     * exponent form outside [1e-4, 1e16) */
    if (v == trunc(v) && fabs(v) < 1e16) {
        snprintf(buf, n, "%.1f", v);
        return;
    }
    int p = 1;
    for (; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (isfinite(v) && fabs(v) >= 1e16 && !strchr(buf, 'e')) {
        /* %g goes positional for 17 digits below 1e17; Python does not */
        snprintf(buf, n, "%.*e", p - 1, v);
        return;
    }
    if (!strpbrk(buf, ".en")) /* "inf" and "nan" stay as they are */
        strncat(buf, ".0", n - strlen(buf) - 1);
}
