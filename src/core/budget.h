/*
 * budget.h - how much backend memory a call may plan with: the device's
 * free memory, capped by the session's memory cap (a local session's
 * "memory_cap=" URL parameter or $GSB_GPU_MEMORY_CAP), which makes the
 * engine behave as on a smaller GPU.  The cap applies on the CPU backend
 * too (there it is the only limit), so the streamed fits of
 * estimators/common/stream.h can be exercised without a GPU.
 */
#ifndef GSB_CORE_BUDGET_H
#define GSB_CORE_BUDGET_H

#include <stddef.h>

#include "core/model.h"

#define GSB__BUDGET_UNLIMITED SIZE_MAX

/* "1073741824", "512M", "1.5G", "2T" (powers of 1024; K, M, G, T, an optional
 * B or iB after) as bytes, > 0.  GSB_EINVAL naming `what` otherwise. */
int gsb__parse_bytes(const char *text, const char *what, size_t *out);

/* Bytes of be's memory a call on s may use now: min(cap, free) on a GPU,
 * the cap (or GSB__BUDGET_UNLIMITED) on the CPU backend. */
int gsb__memory_budget(const gsb_session *s, const gsb__backend *be, size_t *out);

/* "1.50 GiB": n bytes for messages, into buf */
const char *gsb__format_bytes(size_t n, char *buf, size_t len);

#endif
