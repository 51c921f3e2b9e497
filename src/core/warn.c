/*
 * warn.c - the calling thread's warnings (see warn.h), kept as the JSON text
 * gsb_warnings() returns: "[" entries "]", each entry
 * {"category": "...", "message": "..."}.  A fixed thread-local buffer, as for
 * the error message, so warning never fails; entries that no longer fit are
 * dropped (the list then says so in its last entry).
 */
#include "core/warn.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define WARN_BUF 16384
#define WARN_MSG 2048

static _Thread_local char warn_buf[WARN_BUF] = "[]";
static _Thread_local size_t warn_len = 2; /* strlen(warn_buf) */
static _Thread_local int warn_full;

void gsb__warn_clear(void)
{
    memcpy(warn_buf, "[]", 3);
    warn_len = 2;
    warn_full = 0;
}

static const char more_entry[] = "{\"category\":\"UserWarning\",\"message\":\"gsb: more "
                                 "warnings than fit in the list were dropped\"}";

/* Append one encoded entry before the closing ']' if it fits with room left
 * for more_entry (reserve); 0 otherwise. */
static int append_entry(const char *entry, size_t elen, size_t reserve)
{
    size_t sep = warn_len > 2 ? 1 : 0;
    if (warn_len + sep + elen + reserve + 1 >= WARN_BUF)
        return 0;
    char *at = warn_buf + warn_len - 1; /* the ']' */
    if (sep)
        *at++ = ',';
    memcpy(at, entry, elen);
    at += elen;
    memcpy(at, "]", 2);
    warn_len = (size_t)(at - warn_buf) + 1;
    return 1;
}

void gsb__warn(const char *category, const char *fmt, ...)
{
    char msg[WARN_MSG], entry[3 * WARN_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (warn_full)
        return;
    json_t *o = json_pack("{s:s, s:s}", "category", category ? category : "UserWarning",
                          "message", msg);
    size_t elen = o ? json_dumpb(o, entry, sizeof entry, JSON_COMPACT) : 0;
    json_decref(o);
    if (elen == 0 || elen >= sizeof entry)
        return;
    entry[elen] = '\0';
    if (strstr(warn_buf, entry)) /* shown once, as Python's default filter does */
        return;
    if (!append_entry(entry, elen, sizeof more_entry)) {
        warn_full = 1;
        append_entry(more_entry, sizeof more_entry - 1, 0);
    }
}

const char *gsb_warnings(void) { return warn_buf; }
