/*
 * logs.c - `gsb logs [-f]`: print the end of gsbd's log and follow it.
 *
 * gsbd appends one line per event to DATA_DIR/gsbd.log (src/server/log.c);
 * a rotation renames it to gsbd.log.1 and starts a new gsbd.log.  So the
 * last lines may straddle the two files, and a follower must notice that the
 * name now points at a new file (inode change), finish the old one and start
 * the new one from its beginning — what `tail -F` does, written here so that
 * `gsb logs` works the same everywhere without depending on tail's flags.
 */
#include "cli/logs.h"
#include "server/cli_args.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOGS_PATH_MAX 4096
#define LOGS_BLOCK 65536

/* DATA_DIR/gsbd.log, with the data directory the server picks (cli_args.h) */
int gsb__logs_path(const char *data_dir, char *buf, size_t cap)
{
    if (gsb_cli_data_dir(data_dir, buf, cap) != 0)
        return -1;
    size_t used = strlen(buf);
    int n = snprintf(buf + used, cap - used, "/gsbd.log");
    return n < 0 || (size_t)n >= cap - used ? -1 : 0;
}

static int logs_write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Copy bytes [from, to) of in to out; returns the offset reached (less than
 * to when the file shrank meanwhile), or -1 when writing fails. */
static off_t copy_range(int in, off_t from, off_t to, int out)
{
    char buf[LOGS_BLOCK];
    while (from < to) {
        size_t want = (size_t)(to - from) < sizeof buf ? (size_t)(to - from) : sizeof buf;
        ssize_t r = pread(in, buf, want, from);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* truncated under us, or a read error: stop here */
        if (logs_write_all(out, buf, (size_t)r) != 0)
            return -1;
        from += r;
    }
    return from;
}

/* Where the last n lines of in[0, end) begin, and how many lines that is
 * (fewer than n when the file is shorter).  A final newline ends the last
 * line; it does not start another.  Returns -1 on a read error. */
static int tail_start(int in, off_t end, long n, off_t *start, long *lines)
{
    *start = end;
    *lines = 0;
    if (end == 0 || n <= 0)
        return 0;
    char buf[LOGS_BLOCK];
    off_t pos = end;
    int first = 1;
    long newlines = 0; /* newlines seen, not counting a final one */
    while (pos > 0) {
        size_t len = pos < (off_t)sizeof buf ? (size_t)pos : sizeof buf;
        pos -= (off_t)len;
        size_t got = 0;
        while (got < len) {
            /* len <= sizeof buf; saying so again lets gcc 13 see the bound */
            size_t want = len - got <= sizeof buf - got ? len - got : sizeof buf - got;
            ssize_t r = pread(in, buf + got, want, pos + (off_t)got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return -1;
            got += (size_t)r;
        }
        for (size_t i = len; i-- > 0;) {
            if (buf[i] != '\n')
                continue;
            if (first && pos + (off_t)i == end - 1) /* the final newline */
                continue;
            if (++newlines == n) {
                *start = pos + (off_t)i + 1;
                *lines = n;
                return 0;
            }
        }
        first = 0;
    }
    *start = 0;
    *lines = newlines + 1; /* the first line has no newline before it */
    return 0;
}

/* gsb__logs_tail on an open file (up to end), also giving the rotated
 * file's share; lines written or -1. */
static long tail_open(const char *path, int in, off_t end, long n, int out)
{
    off_t start;
    long here;
    if (tail_start(in, end, n, &start, &here) != 0)
        return -1;
    long total = here;
    if (here < n) {
        char prev[LOGS_PATH_MAX];
        int k = snprintf(prev, sizeof prev, "%s.1", path);
        int pin = k > 0 && (size_t)k < sizeof prev ? open(prev, O_RDONLY | O_CLOEXEC) : -1;
        if (pin >= 0) {
            struct stat st;
            off_t pstart;
            long plines;
            if (fstat(pin, &st) == 0 && tail_start(pin, st.st_size, n - here, &pstart,
                                                   &plines) == 0) {
                if (copy_range(pin, pstart, st.st_size, out) < 0) {
                    close(pin);
                    return -1;
                }
                total += plines;
            }
            close(pin);
        }
    }
    if (copy_range(in, start, end, out) < 0)
        return -1;
    return total;
}

long gsb__logs_tail(const char *path, long n, int fd)
{
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    struct stat st;
    long rc = -1;
    if (fstat(in, &st) == 0)
        rc = tail_open(path, in, st.st_size, n, fd);
    int e = errno;
    close(in);
    errno = e;
    return rc;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Follow with an already open file (in >= 0, read from off) or none yet. */
static int follow_open(const char *path, int in, off_t off, int fd, int poll_ms,
                       volatile sig_atomic_t *stop)
{
    struct stat cur;
    if (in >= 0 && fstat(in, &cur) != 0) {
        close(in);
        in = -1;
    }
    int rc = 0;
    while (!*stop) {
        if (in < 0) {
            in = open(path, O_RDONLY | O_CLOEXEC);
            if (in >= 0 && fstat(in, &cur) != 0) {
                close(in);
                in = -1;
            }
            off = 0; /* a file that appeared: all of it is new */
        }
        if (in >= 0) {
            struct stat st, named;
            if (fstat(in, &st) == 0) {
                if (st.st_size < off)
                    off = 0; /* truncated: start over */
                if (st.st_size > off && (off = copy_range(in, off, st.st_size, fd)) < 0) {
                    rc = -1;
                    break;
                }
            }
            if (stat(path, &named) != 0 || named.st_ino != cur.st_ino ||
                named.st_dev != cur.st_dev) {
                /* rotated (or removed): what was appended to the old file
                 * before the switch is still ours to print */
                if (fstat(in, &st) == 0 && st.st_size > off &&
                    copy_range(in, off, st.st_size, fd) < 0) {
                    rc = -1;
                    break;
                }
                close(in);
                in = -1;
                continue; /* open the new file right away */
            }
        }
        sleep_ms(poll_ms);
    }
    if (in >= 0)
        close(in);
    return rc;
}

int gsb__logs_follow(const char *path, long long from, int fd, int poll_ms,
                     volatile sig_atomic_t *stop)
{
    if (poll_ms < 1)
        poll_ms = 1;
    int in = open(path, O_RDONLY | O_CLOEXEC);
    off_t off = 0;
    if (in >= 0) {
        struct stat st;
        if (fstat(in, &st) != 0) {
            close(in);
            in = -1;
        } else {
            off = from < 0 || from > (long long)st.st_size ? st.st_size : (off_t)from;
        }
    }
    return follow_open(path, in, off, fd, poll_ms, stop);
}

/* ---- the command ------------------------------------------------------------- */

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static int logs_usage(FILE *f)
{
    fprintf(f, "usage: gsb logs [-f] [-n N] [--data-dir DIR | --file FILE]\n"
               "\n"
               "Prints the last N (default 50) lines of gsbd's log, DATA_DIR/gsbd.log, where\n"
               "DATA_DIR is --data-dir, else $GSB_DATA_DIR, else ~/.local/share/gsb (the\n"
               "server's default); -f then prints new lines as they come, across log\n"
               "rotations, until Ctrl-C.  --file reads another log (gsbd --log-file FILE).\n"
               "A gsbd run by systemd also logs to the journal: journalctl --user -u gsbd\n");
    return f == stderr ? 2 : 0;
}

int gsb__cli_logs(int argc, char **argv)
{
    int follow = 0;
    long n = 50;
    const char *data_dir = NULL, *file = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-f") == 0 || strcmp(a, "--follow") == 0) {
            follow = 1;
        } else if ((strcmp(a, "-n") == 0 || strcmp(a, "--lines") == 0) && i + 1 < argc) {
            char *end;
            errno = 0;
            n = strtol(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || n < 0) {
                fprintf(stderr, "gsb logs: -n wants a count of lines >= 0, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(a, "--data-dir") == 0 && i + 1 < argc) {
            data_dir = argv[++i];
        } else if (strcmp(a, "--file") == 0 && i + 1 < argc) {
            file = argv[++i];
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            return logs_usage(stdout);
        } else {
            fprintf(stderr, "gsb logs: unknown or incomplete option '%s'\n", a);
            return logs_usage(stderr);
        }
    }
    if (file && data_dir) {
        fprintf(stderr, "gsb logs: give --data-dir or --file, not both\n");
        return 2;
    }
    char path[LOGS_PATH_MAX];
    if (file) {
        int k = snprintf(path, sizeof path, "%s", file);
        if (k < 0 || (size_t)k >= sizeof path) {
            fprintf(stderr, "gsb logs: --file path too long\n");
            return 2;
        }
    } else if (gsb__logs_path(data_dir, path, sizeof path) != 0) {
        fprintf(stderr, "gsb logs: cannot choose the data directory: set GSB_DATA_DIR or HOME, "
                        "or pass --data-dir DIR\n");
        return 2;
    }

    fflush(stdout);
    int in = open(path, O_RDONLY | O_CLOEXEC);
    off_t end = 0;
    if (in < 0) {
        if (errno != ENOENT || !follow) {
            fprintf(stderr, "gsb logs: cannot read %s: %s%s\n", path, strerror(errno),
                    errno == ENOENT ? " (has gsbd run with this data directory? `gsbd "
                                      "--log-file` and `--data-dir` put it elsewhere)" : "");
            return 1;
        }
        fprintf(stderr, "gsb logs: %s does not exist yet; waiting for gsbd to write it "
                        "(Ctrl-C stops)\n", path);
    } else {
        struct stat st;
        if (fstat(in, &st) != 0 || tail_open(path, in, st.st_size, n, STDOUT_FILENO) < 0) {
            fprintf(stderr, "gsb logs: cannot read %s: %s\n", path, strerror(errno));
            close(in);
            return 1;
        }
        end = st.st_size;
    }
    if (!follow) {
        if (in >= 0)
            close(in);
        return 0;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* the same open file continues where the tail ended: no line lost or
     * repeated even if a rotation happens in between */
    return follow_open(path, in, end, STDOUT_FILENO, 200, &stop_flag) == 0 ? 0 : 1;
}
