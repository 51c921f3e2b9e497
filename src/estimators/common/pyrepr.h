/*
 * pyrepr.h - values written as Python writes them, for error messages that
 * repeat scikit-learn's word for word ("... Got 1.5 instead.", "class 2.0").
 */
#ifndef GSB_ESTIMATORS_COMMON_PYREPR_H
#define GSB_ESTIMATORS_COMMON_PYREPR_H

#include <stddef.h>

/* Python's repr() of a float into buf (n bytes): "1.0", "0.5", "1e-05",
 * "1e+16", "inf", "nan". */
void gsb__py_float_repr(double v, char *buf, size_t n);

#endif
