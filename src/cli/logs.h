/*
 * logs.h - `gsb logs [-f] [-n N] [--data-dir DIR | --file FILE]`: the end of
 * gsbd's log (DATA_DIR/gsbd.log), and with -f everything written after it,
 * across rotations (gsbd.log renamed to gsbd.log.1 and a fresh gsbd.log) and
 * truncation, like `tail -F`.
 *
 * Only libc and the public API (the CLI links libgsb, whose internals are
 * hidden); tests/c/test_service.c compiles logs.c in.
 */
#ifndef GSB_CLI_LOGS_H
#define GSB_CLI_LOGS_H

#include <signal.h>

/* argv[0] is the first argument after "logs"; returns the exit status. */
int gsb__cli_logs(int argc, char **argv);

/* The log file of a data directory (data_dir NULL: $GSB_DATA_DIR, else
 * $XDG_DATA_HOME/gsb, else ~/.local/share/gsb, as the model store chooses):
 * writes DIR/gsbd.log into buf; -1 when no directory can be chosen or the
 * path does not fit. */
int gsb__logs_path(const char *data_dir, char *buf, size_t cap);

/*
 * Writes the last n lines of the log at path to fd: when path holds fewer
 * than n lines, the rest comes from the end of path.1 (the previous, rotated
 * file).  A last line without its newline is written as it is.  Returns the
 * number of lines written, or -1 when path does not exist (errno ENOENT) or
 * cannot be read (errno set).
 */
long gsb__logs_tail(const char *path, long n, int fd);

/*
 * Follows path from byte offset `from` (-1: its current end), writing what
 * is appended to fd; after a rotation (path now names another file) it
 * finishes the old file and goes on from the start of the new one; after a
 * truncation it starts over at 0.  A missing file is waited for.  Checks
 * every poll_ms milliseconds and returns 0 when *stop becomes nonzero, or -1
 * when writing to fd fails.
 */
int gsb__logs_follow(const char *path, long long from, int fd, int poll_ms,
                     volatile sig_atomic_t *stop);

#endif
