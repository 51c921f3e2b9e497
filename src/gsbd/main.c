/*
 * main.c - `gsbd`, the gsb server: the flags of `gsb serve` (one parser,
 * server/cli_args.h), plus --daemon, which detaches (double fork, setsid),
 * writes DATA_DIR/gsbd.pid and returns once the server listens, or fails
 * with the server's own error message when it cannot start.
 *
 * Links libgsb (public API only) and jansson.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gsb.h"
#include "server/cli_args.h"

static int usage(FILE *f)
{
    fprintf(f, "usage: gsbd [options]\n\n"
               "The gsb server: serves the engine over TCP and a Unix socket until SIGINT or\n"
               "SIGTERM, then finishes the requests in flight and exits.\n\noptions:\n"
               GSB_CLI_SERVE_FLAGS
               "  --daemon              detach; write DATA_DIR/gsbd.pid; return once listening\n"
               "  --version             print the version\n");
    return f == stderr ? 2 : 0;
}

/* ---- --daemon ----------------------------------------------------------------- */

static int mkdir_p(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return -1;
    for (char *q = p + 1;; q++) {
        if (*q != '/' && *q != '\0')
            continue;
        char ch = *q;
        *q = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return -1;
        *q = ch;
        if (ch == '\0')
            return 0;
    }
}

/* cwd + "/" + rel (malloc'd), or a copy of an absolute path */
static char *absolute(const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd))
        return NULL;
    size_t n = strlen(cwd) + strlen(path) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", cwd, path);
    return s;
}

/* The daemon leaves the working directory (chdir "/"), so every relative path
 * in the options becomes absolute first. */
static int absolutize(json_t *o)
{
    const char *keys[] = {"data_dir", "log_file", "token_file"};
    for (int i = 0; i < 3; i++) {
        const char *v = json_string_value(json_object_get(o, keys[i]));
        if (!v || v[0] == '/')
            continue;
        char *a = absolute(v);
        if (!a)
            return -1;
        json_object_set_new(o, keys[i], json_string(a));
        free(a);
    }
    json_t *listen = json_object_get(o, "listen");
    size_t i;
    json_t *u;
    json_array_foreach(listen, i, u) {
        const char *v = json_string_value(u);
        if (!v || strncmp(v, "unix:", 5) != 0 || strncmp(v, "unix://", 7) == 0)
            continue;
        char *a = absolute(v + 5);
        if (!a)
            return -1;
        size_t n = strlen(a) + 8;
        char *url = malloc(n);
        if (!url) {
            free(a);
            return -1;
        }
        snprintf(url, n, "unix://%s", a);
        json_array_set_new(listen, i, json_string(url));
        free(url);
        free(a);
    }
    return 0;
}

static void write_all(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t k = write(fd, s, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

/* The detached server (grandchild): start, report to the parent through
 * fd `report`, serve until SIGINT/SIGTERM. */
static int daemon_main(const char *opts, const char *pid_path, int report)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any server thread exists */
    signal(SIGHUP, SIG_IGN);                /* no terminal any more */
    gsb_server *srv;
    int rc = gsb_server_start(opts, &srv);
    if (rc != GSB_OK) {
        char msg[1200];
        snprintf(msg, sizeof msg, "%s (%s)", gsb_errmsg(), gsb_status_name(rc));
        write_all(report, msg);
        close(report);
        return 1;
    }
    int pf = open(pid_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char line[64];
    snprintf(line, sizeof line, "%d\n", (int)getpid());
    if (pf >= 0) {
        write_all(pf, line);
        close(pf);
    }
    char msg[2048];
    int o = snprintf(msg, sizeof msg, "OK gsbd started (pid %d", (int)getpid());
    if (pf < 0)
        o += snprintf(msg + o, sizeof msg - (size_t)o, "; cannot write %s: %s", pid_path,
                      strerror(errno));
    o += snprintf(msg + o, sizeof msg - (size_t)o, "), listening on");
    for (int i = 0; gsb_server_url(srv, i) && o < (int)sizeof msg - 1; i++)
        o += snprintf(msg + o, sizeof msg - (size_t)o, " %s", gsb_server_url(srv, i));
    /* detach from the terminal: the log file has everything from here on */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
    }
    write_all(report, msg);
    close(report);
    int sig;
    while (sigwait(&set, &sig) != 0) {
    }
    gsb_server_stop(srv);
    unlink(pid_path);
    return 0;
}

static int run_daemon(const char *opts_text)
{
    json_t *o = json_loads(opts_text, 0, NULL);
    if (!o || absolutize(o) != 0) {
        json_decref(o);
        fprintf(stderr, "gsbd: out of memory\n");
        return 1;
    }
    char dir[4096], pid_path[4200];
    if (gsb_cli_data_dir(json_string_value(json_object_get(o, "data_dir")), dir, sizeof dir) != 0) {
        json_decref(o);
        fprintf(stderr, "gsbd: cannot choose the data directory: set GSB_DATA_DIR or HOME, or "
                        "pass --data-dir DIR\n");
        return 1;
    }
    char *abs_dir = absolute(dir);
    if (!abs_dir) {
        json_decref(o);
        fprintf(stderr, "gsbd: out of memory\n");
        return 1;
    }
    /* the store directory the server will use, pinned now that cwd changes */
    json_object_set_new(o, "data_dir", json_string(abs_dir));
    snprintf(pid_path, sizeof pid_path, "%s/gsbd.pid", abs_dir);
    free(abs_dir);
    char *opts = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!opts || mkdir_p(dir) != 0) {
        fprintf(stderr, "gsbd: cannot create the data directory %s: %s\n", dir,
                opts ? strerror(errno) : "out of memory");
        free(opts);
        return 1;
    }
    FILE *pf = fopen(pid_path, "re");
    if (pf) {
        int old = 0;
        int got = fscanf(pf, "%d", &old) == 1;
        fclose(pf);
        if (got && old > 0 && (kill(old, 0) == 0 || errno == EPERM)) {
            fprintf(stderr, "gsbd: already running (pid %d, from %s); stop it with "
                            "`kill %d`, or remove the file if that process is not gsbd\n",
                    old, pid_path, old);
            free(opts);
            return 1;
        }
    }

    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "gsbd: pipe: %s\n", strerror(errno));
        free(opts);
        return 1;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "gsbd: fork: %s\n", strerror(errno));
        free(opts);
        return 1;
    }
    if (child == 0) {
        close(p[0]);
        if (setsid() < 0)
            _exit(1);
        pid_t grand = fork(); /* not a session leader: can never regain a terminal */
        if (grand < 0)
            _exit(1);
        if (grand > 0)
            _exit(0);
        umask(077);
        if (chdir("/") != 0)
            _exit(1);
        int rc = daemon_main(opts, pid_path, p[1]);
        free(opts);
        _exit(rc);
    }
    close(p[1]);
    free(opts);
    int st;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    char msg[2048];
    size_t n = 0;
    for (;;) {
        ssize_t k = read(p[0], msg + n, sizeof msg - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0 || (n += (size_t)k) >= sizeof msg - 1)
            break;
    }
    close(p[0]);
    msg[n] = '\0';
    if (strncmp(msg, "OK ", 3) == 0) {
        printf("%s\n", msg + 3);
        return 0;
    }
    fprintf(stderr, "gsbd: %s\n", n ? msg : "the server exited before it was listening");
    return 1;
}

int main(int argc, char **argv)
{
    static const char *const extra[] = {"--daemon", "--version", NULL};
    int extra_set[2] = {0, 0};
    char *opts, err[512];
    int rc = gsb_cli_serve_options(argc - 1, argv + 1, extra, extra_set, &opts, err, sizeof err);
    if (rc == 1)
        return usage(stdout);
    if (rc != 0) {
        fprintf(stderr, "gsbd: %s\n", err);
        return usage(stderr);
    }
    if (extra_set[1]) {
        printf("gsbd %s\n", gsb_version());
        free(opts);
        return 0;
    }
    if (extra_set[0]) {
        rc = run_daemon(opts);
        free(opts);
        return rc;
    }
    rc = gsb_serve(opts);
    free(opts);
    if (rc != GSB_OK) {
        fprintf(stderr, "gsbd: %s (%s)\n", gsb_errmsg(), gsb_status_name(rc));
        return 1;
    }
    return 0;
}
