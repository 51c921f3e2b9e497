/*
 * budget.c - the memory a call may plan with (core/budget.h).
 */
#include "core/budget.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

int gsb__parse_bytes(const char *text, const char *what, size_t *out)
{
    *out = 0;
    const char *p = text ? text : "";
    char *end = NULL;
    double v = strtod(p, &end);
    if (end == p || !isfinite(v) || v <= 0)
        goto bad;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1024.0; end++; break;
    case 'M': mult = 1048576.0; end++; break;
    case 'G': mult = 1073741824.0; end++; break;
    case 'T': mult = 1099511627776.0; end++; break;
    default: break;
    }
    if (strcasecmp(end, "ib") == 0 || strcasecmp(end, "b") == 0)
        end += strlen(end);
    if (*end != '\0')
        goto bad;
    v *= mult;
    if (v < 1 || v >= 1.8e19)
        goto bad;
    *out = (size_t)v;
    return GSB_OK;
bad:
    return gsb__err(GSB_EINVAL, "%s: '%s' is not a size in bytes (examples: 1073741824, 512M, "
                    "1.5G)", what, p);
}

int gsb__memory_budget(const gsb_session *s, const gsb__backend *be, size_t *out)
{
    size_t cap = s->memory_cap ? s->memory_cap : GSB__BUDGET_UNLIMITED;
    *out = cap;
    if (be == gsb__cpu_backend() || !be->ops->mem_info)
        return GSB_OK;
    size_t free_b = 0, total_b = 0;
    GSB_TRY(be->ops->mem_info(be, &free_b, &total_b));
    *out = free_b < cap ? free_b : cap;
    return GSB_OK;
}

const char *gsb__format_bytes(size_t n, char *buf, size_t len)
{
    const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu bytes", n);
    else
        snprintf(buf, len, "%.2f %s", v, unit[u]);
    return buf;
}
