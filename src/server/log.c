/*
 * log.c - gsbd's structured log: one line per event,
 *   2025-06-01T10:00:00.123456Z info connection opened conn=3 transport=unix
 * written to the log file and to stderr.  Each line is formatted into one
 * buffer and written with a single write() per sink, so concurrent threads
 * never interleave inside a line (O_APPEND makes file writes atomic).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "server/server.h"

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int gsb__log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, level_names[i]) == 0)
            return i;
    if (name && strcmp(name, "warning") == 0)
        return GSB__LOG_WARN;
    return -1;
}

int gsb__log_open(gsb__log *lg, const char *path, int level, int to_stderr)
{
    lg->fd = -1;
    lg->level = level;
    lg->to_stderr = to_stderr;
    lg->path = NULL;
    lg->size = 0;
    lg->rotate_bytes = GSB__LOG_ROTATE_BYTES;
    pthread_mutex_init(&lg->lock, NULL);
    lg->lock_init = 1;
    if (path) {
        lg->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (lg->fd < 0)
            return gsb__err(GSB_EIO, "cannot open the log file %s: %s", path, strerror(errno));
        struct stat st;
        if (fstat(lg->fd, &st) == 0)
            lg->size = (long long)st.st_size;
        lg->path = strdup(path);
        if (!lg->path)
            return gsb__err(GSB_ENOMEM, "out of memory");
    }
    return GSB_OK;
}

void gsb__log_close(gsb__log *lg)
{
    if (lg->fd >= 0)
        close(lg->fd);
    lg->fd = -1;
    free(lg->path);
    lg->path = NULL;
    if (lg->lock_init)
        pthread_mutex_destroy(&lg->lock);
    lg->lock_init = 0;
}

/* FILE -> FILE.1 and a fresh FILE (lock held).  On failure logging goes on
 * in the old file. */
static void rotate(gsb__log *lg)
{
    size_t n = strlen(lg->path) + 3;
    char *old = malloc(n);
    if (!old)
        return;
    snprintf(old, n, "%s.1", lg->path);
    if (rename(lg->path, old) == 0) {
        int fd = open(lg->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(lg->fd);
            lg->fd = fd;
            lg->size = 0;
        }
    } else {
        lg->size = 0; /* cannot rename (read-only dir?): do not retry every line */
    }
    free(old);
}

const char *gsb__log_q(char *buf, size_t n, const char *s)
{
    size_t o = 0;
    buf[o++] = '"';
    for (; s && *s && o + 6 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", ch);
        } else {
            buf[o++] = (char)ch;
        }
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

/* write all of buf; a log sink that fails is skipped (logging never stops
 * the server) */
static void write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        n -= (size_t)w;
    }
}

void gsb__logf(gsb__log *lg, int level, const char *msg, const char *kvfmt, ...)
{
    if (!lg || level < lg->level || (lg->fd < 0 && !lg->to_stderr))
        return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int o = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ %s %s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000, level_names[level < 0 ? 0 : level > 3 ? 3 : level],
                     msg);
    if (o < 0)
        return;
    if (kvfmt && *kvfmt && (size_t)o + 2 < sizeof line) {
        line[o++] = ' ';
        va_list ap;
        va_start(ap, kvfmt);
        int k = vsnprintf(line + o, sizeof line - (size_t)o, kvfmt, ap);
        va_end(ap);
        if (k > 0)
            o += k;
    }
    if ((size_t)o >= sizeof line - 1)
        o = (int)sizeof line - 2; /* truncated: still one line */
    line[o++] = '\n';
    if (lg->fd >= 0) {
        pthread_mutex_lock(&lg->lock);
        write_all(lg->fd, line, (size_t)o);
        lg->size += o;
        if (lg->size > lg->rotate_bytes && lg->path)
            rotate(lg);
        pthread_mutex_unlock(&lg->lock);
    }
    if (lg->to_stderr)
        write_all(STDERR_FILENO, line, (size_t)o);
}
