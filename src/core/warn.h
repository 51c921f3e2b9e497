/*
 * warn.h - warnings a call produces beside its result (scikit-learn's
 * warnings.warn: a ConvergenceWarning when a solver stops at max_iter, a
 * FutureWarning for a deprecated parameter, ...).
 *
 * Like the error message, the list is per thread: gsb_model_call clears it
 * when it starts, estimators and solvers add to it with gsb__warn(), and
 * gsb_warnings() gives it to the caller as JSON.  A remote session's server
 * sends its list in the reply head ("warnings") and the client adds those
 * entries to its own thread's list, so both kinds of session warn alike.
 * The category is the name of the Python warning class (scikit-learn's
 * "ConvergenceWarning", or a builtin such as "FutureWarning"); the Python
 * package raises it with warnings.warn.
 */
#ifndef GSB_CORE_WARN_H
#define GSB_CORE_WARN_H

#include "core/error.h"

#define GSB__CONVERGENCE_WARNING "ConvergenceWarning"

/* Add a warning (a repeat of one already listed is dropped, as Python's
 * default filter shows it once). */
void gsb__warn(const char *category, const char *fmt, ...) GSB__PRINTF(2, 3);
/* Forget this thread's warnings (at the start of a call). */
void gsb__warn_clear(void);

#endif
