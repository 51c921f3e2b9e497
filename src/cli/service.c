/*
 * service.c - `gsb service install|uninstall|status`: gsbd as a systemd user
 * unit, so the server is simply always there (started at login, or at boot
 * with `loginctl enable-linger`, and restarted when it dies, kill -9 included:
 * Restart=on-failure counts an unclean signal as a failure).
 *
 * Only libc and the public API here (the CLI links libgsb, whose internals
 * are hidden); tests/c/test_service.c compiles this file in.
 */
#include "cli/service.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gsb.h"

extern char **environ;

#define SVC_PATH_MAX 4096

/* ---- the unit text (pure) ------------------------------------------------- */

/* An appender that keeps counting past cap, so callers learn the full size. */
typedef struct {
    char *out;
    size_t cap, len;
} sbuf;

static void put(sbuf *b, char ch)
{
    if (b->len + 1 < b->cap)
        b->out[b->len] = ch;
    b->len++;
}

static void puts_(sbuf *b, const char *s)
{
    for (; *s; s++)
        put(b, *s);
}

static void finish(sbuf *b)
{
    if (b->cap > 0)
        b->out[b->len < b->cap ? b->len : b->cap - 1] = '\0';
}

/* systemd splits ExecStart= on whitespace, unquotes "..." with C escapes,
 * expands %-specifiers everywhere and $VAR / ${VAR} in ExecStart= only, and
 * takes a lone ';' as a command separator (systemd.service(5), "Command
 * lines").  Returns 0, or -1 for a character a unit file cannot carry. */
static int quote_into(sbuf *b, const char *arg, int dollar)
{
    int needs_quotes = arg[0] == '\0';
    for (const char *p = arg; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20 || ch == 0x7f)
            return -1; /* a newline would end the line: no way to write it safely */
        if (ch == ' ' || ch == '"' || ch == '\'' || ch == '\\')
            needs_quotes = 1;
    }
    if (strcmp(arg, ";") == 0) {
        puts_(b, "\\;");
        return 0;
    }
    if (needs_quotes)
        put(b, '"');
    for (const char *p = arg; *p; p++) {
        if (*p == '"' || *p == '\\')
            put(b, '\\');
        if (*p == '%')
            put(b, '%');
        if (*p == '$' && dollar)
            put(b, '$');
        put(b, *p);
    }
    if (needs_quotes)
        put(b, '"');
    return 0;
}

int gsb__service_quote(const char *arg, int dollar, char *out, size_t cap)
{
    sbuf b = {out, cap, 0};
    if (!arg || quote_into(&b, arg, dollar) != 0) {
        b.len = 0;
        finish(&b);
        return -1;
    }
    finish(&b);
    return b.len > INT_MAX ? -1 : (int)b.len;
}

int gsb__service_unit_text(const char *gsbd_path, const char *const *args, int nargs,
                           const char *const *env, int nenv, char *out, size_t cap,
                           const char **why)
{
    static const char *unused;
    if (!why)
        why = &unused;
    *why = NULL;
    sbuf b = {out, cap, 0};
    if (!gsbd_path || gsbd_path[0] != '/') {
        *why = "the path of gsbd must be absolute";
        goto bad;
    }
    if (nargs < 0 || nenv < 0 || (nargs > 0 && !args) || (nenv > 0 && !env)) {
        *why = "bad argument list";
        goto bad;
    }
    puts_(&b, "# gsbd as a systemd user service: written by `gsb service install` (gsb ");
    puts_(&b, gsb_version());
    puts_(&b, ");\n# `gsb service uninstall` stops it and removes this file.\n"
              "[Unit]\n"
              "Description=gsb server (gsbd): scikit-learn-style estimators over TCP, "
              "Unix sockets and shared memory\n"
              "After=network.target\n"
              "\n"
              "[Service]\n"
              "Type=simple\n");
    for (int i = 0; i < nenv; i++) {
        if (!env[i] || !strchr(env[i], '=') || env[i][0] == '=') {
            *why = "an environment entry must be KEY=VALUE";
            goto bad;
        }
        puts_(&b, "Environment=");
        if (quote_into(&b, env[i], 0) != 0) {
            *why = "an environment value holds a control character (a newline?)";
            goto bad;
        }
        put(&b, '\n');
    }
    puts_(&b, "ExecStart=");
    if (quote_into(&b, gsbd_path, 1) != 0) {
        *why = "the path of gsbd holds a control character";
        goto bad;
    }
    for (int i = 0; i < nargs; i++) {
        put(&b, ' ');
        if (!args[i] || quote_into(&b, args[i], 1) != 0) {
            *why = "a gsbd argument holds a control character (a newline?)";
            goto bad;
        }
    }
    puts_(&b, "\n"
              "# restart after a crash or kill -9, not after `systemctl --user stop`\n"
              "Restart=on-failure\n"
              "RestartSec=1\n"
              "# SIGTERM: gsbd finishes in-flight requests, then exits\n"
              "KillSignal=SIGTERM\n"
              "TimeoutStopSec=30\n"
              "\n"
              "[Install]\n"
              "WantedBy=default.target\n");
    finish(&b);
    if (b.len > INT_MAX) {
        *why = "unit text too long";
        goto bad;
    }
    return (int)b.len;
bad:
    b.len = 0;
    finish(&b);
    return -1;
}

/* ---- the machine ---------------------------------------------------------- */

static const char *home_dir(void)
{
    const char *h = getenv("HOME");
    if (h && h[0] == '/')
        return h;
    struct passwd *pw = getpwuid(getuid());
    return pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
}

/* $XDG_CONFIG_HOME/systemd/user, else ~/.config/systemd/user (where
 * `systemctl --user` looks for units the user wrote). */
static int default_unit_dir(char *buf, size_t cap)
{
    const char *x = getenv("XDG_CONFIG_HOME");
    int n;
    if (x && x[0] == '/') { /* the XDG spec: relative values are ignored */
        n = snprintf(buf, cap, "%s/systemd/user", x);
    } else {
        const char *h = home_dir();
        if (!h) {
            fprintf(stderr, "gsb service: cannot find your home directory (HOME is not set); "
                            "pass --unit-dir DIR\n");
            return -1;
        }
        n = snprintf(buf, cap, "%s/.config/systemd/user", h);
    }
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "gsb service: the unit directory's path is too long\n");
        return -1;
    }
    return 0;
}

static int is_exec_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* path made absolute against the working directory (symlinks are kept: a
 * link such as /usr/local/bin/gsbd stays valid across upgrades). */
static int absolute(const char *path, char *buf, size_t cap)
{
    int n;
    if (path[0] == '/') {
        n = snprintf(buf, cap, "%s", path);
    } else {
        char cwd[SVC_PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return -1;
        n = snprintf(buf, cap, "%s/%s", cwd, path);
    }
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* gsbd beside the running gsb (a build tree, or an install prefix's bin/),
 * else the first gsbd on PATH. */
static int find_gsbd(char *buf, size_t cap)
{
    char self[SVC_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            int k = snprintf(buf, cap, "%s/gsbd", self);
            if (k > 0 && (size_t)k < cap && is_exec_file(buf))
                return 0;
        }
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        char cand[SVC_PATH_MAX];
        /* an empty PATH entry means the working directory */
        int k = len == 0 ? snprintf(cand, sizeof cand, "gsbd")
                         : snprintf(cand, sizeof cand, "%.*s/gsbd", (int)len, path);
        if (k > 0 && (size_t)k < sizeof cand && is_exec_file(cand) &&
            absolute(cand, buf, cap) == 0)
            return 0;
        path += len;
        if (*path == ':')
            path++;
    }
    return -1;
}

static int is_wsl(void)
{
    return getenv("WSL_DISTRO_NAME") != NULL || access("/proc/sys/fs/binfmt_misc/WSLInterop", F_OK) == 0;
}

/* The systemctl to run, or NULL with why filled: systemd is usable where
 * systemctl exists and the system was booted with it (sd_booted()'s test:
 * /run/systemd/system is a directory). */
static const char *find_systemctl(char *buf, size_t cap, char *why, size_t nwhy)
{
    const char *over = getenv("GSB_SYSTEMCTL");
    if (over && *over)
        return over;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    int found = 0;
    while (*path && !found) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        int k = snprintf(buf, cap, "%.*s/systemctl", (int)len, path);
        found = len > 0 && k > 0 && (size_t)k < cap && is_exec_file(buf);
        path += len;
        if (*path == ':')
            path++;
    }
    if (!found) {
        snprintf(why, nwhy, "systemctl is not installed here");
        return NULL;
    }
    struct stat st;
    if (stat("/run/systemd/system", &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, nwhy, "systemd is not running here: this system was not booted "
                            "with systemd (no /run/systemd/system)");
        return NULL;
    }
    return buf;
}

static void print_wsl_hint(void)
{
    if (is_wsl())
        printf("  WSL2: enable systemd with\n"
               "    printf '[boot]\\nsystemd=true\\n' | sudo tee -a /etc/wsl.conf\n"
               "  then `wsl --shutdown` in Windows, open the distro again and rerun "
               "`gsb service install`\n"
               "  (or start gsbd from Windows at logon: scripts/windows/gsb-wsl.ps1 "
               "install, see docs/INSTALL.md).\n");
}

/* Run argv, its output going to ours; print the command first and its
 * result after.  Returns the exit status (127 when it could not start). */
static int run_cmd(char *const argv[])
{
    printf("$");
    for (int i = 0; argv[i]; i++)
        printf(" %s", argv[i]);
    printf("\n");
    fflush(stdout);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
    if (rc != 0) {
        printf("  -> could not run %s: %s\n", argv[0], strerror(rc));
        return 127;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            printf("  -> waitpid failed: %s\n", strerror(errno));
            return 127;
        }
    }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    if (code == 0)
        printf("  -> ok\n");
    else
        printf("  -> failed (exit status %d)\n", code);
    fflush(stdout);
    return code;
}

static int mkdir_p(const char *dir)
{
    char p[SVC_PATH_MAX];
    int n = snprintf(p, sizeof p, "%s", dir);
    if (n < 0 || (size_t)n >= sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                return -1;
            *s = c;
            if (c == '\0')
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* The whole file, malloc'd (NULL if absent or unreadable). */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    while (s) {
        size_t r = fread(s + len, 1, cap - len - 1, f);
        len += r;
        if (r == 0)
            break;
        if (cap - len - 1 == 0) {
            if (cap > (size_t)16 << 20)
                break; /* not a unit file we wrote */
            char *t = realloc(s, cap * 2);
            if (!t) {
                free(s);
                s = NULL;
                break;
            }
            s = t;
            cap *= 2;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (s && err) {
        free(s);
        return NULL;
    }
    if (s)
        s[len] = '\0';
    return s;
}

/* Write text to path through a temporary file and rename(), so a crash or a
 * full disk never leaves a half-written unit. */
static int write_atomic(const char *path, const char *text)
{
    char tmp[SVC_PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            unlink(tmp);
            errno = e;
            return -1;
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

/* ---- the commands ----------------------------------------------------------- */

typedef struct {
    int dry_run;
    const char *unit_dir;   /* NULL: the default */
    const char *name;       /* unit name without ".service" */
    const char *gsbd;       /* NULL: find it */
    char **args;            /* after "--" */
    int nargs;
} svc_opts;

static int svc_usage(FILE *f)
{
    fprintf(f,
            "usage: gsb service install [--dry-run] [--unit-dir DIR] [--name NAME] [--gsbd PATH]\n"
            "                           [-- gsbd args...]\n"
            "       gsb service uninstall [--dry-run] [--unit-dir DIR] [--name NAME]\n"
            "       gsb service status [--unit-dir DIR] [--name NAME]\n"
            "\n"
            "Runs gsbd as a systemd user service (restarted when it fails): install writes\n"
            "~/.config/systemd/user/gsbd.service and enables it, uninstall disables and\n"
            "removes it.  --dry-run prints the unit and the commands without doing anything;\n"
            "--gsbd picks the executable (default: the gsbd beside this gsb, else on PATH);\n"
            "arguments after -- go to gsbd (e.g. -- --listen tcp://127.0.0.1:19876 --device cuda).\n");
    return f == stderr ? 2 : 0;
}

static int valid_name(const char *s)
{
    if (!*s || strlen(s) > 200)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_' || *s == '.' || *s == '@'))
            return 0;
    return 1;
}

static int parse_opts(int argc, char **argv, svc_opts *o, int allow_args)
{
    memset(o, 0, sizeof *o);
    o->name = "gsbd";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (!allow_args) {
                fprintf(stderr, "gsb service %s: takes no gsbd arguments\n", argv[0]);
                return -1;
            }
            o->args = argv + i + 1;
            o->nargs = argc - i - 1;
            return 0;
        } else if (strcmp(a, "--dry-run") == 0 || strcmp(a, "-n") == 0) {
            o->dry_run = 1;
        } else if ((strcmp(a, "--unit-dir") == 0 || strcmp(a, "--name") == 0 ||
                    strcmp(a, "--gsbd") == 0) && i + 1 < argc) {
            const char *v = argv[++i];
            if (a[2] == 'u')
                o->unit_dir = v;
            else if (a[2] == 'n')
                o->name = v;
            else
                o->gsbd = v;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            svc_usage(stdout);
            return 1;
        } else {
            fprintf(stderr, "gsb service %s: unknown or incomplete option '%s'\n", argv[0], a);
            return -1;
        }
    }
    if (!valid_name(o->name)) {
        fprintf(stderr, "gsb service: --name must be letters, digits and -_.@ (got '%s')\n",
                o->name);
        return -1;
    }
    if (o->unit_dir && !*o->unit_dir) {
        fprintf(stderr, "gsb service: --unit-dir must not be empty\n");
        return -1;
    }
    return 0;
}

/* The unit's path from the options: DIR/NAME.service. */
static int unit_path(const svc_opts *o, char *buf, size_t cap)
{
    char dir[SVC_PATH_MAX];
    if (o->unit_dir) {
        if (absolute(o->unit_dir, dir, sizeof dir) != 0) {
            fprintf(stderr, "gsb service: --unit-dir path too long\n");
            return -1;
        }
    } else if (default_unit_dir(dir, sizeof dir) != 0) {
        return -1;
    }
    int n = snprintf(buf, cap, "%s/%s.service", dir, o->name);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "gsb service: the unit file's path is too long\n");
        return -1;
    }
    return 0;
}

static int has_arg(const svc_opts *o, const char *flag)
{
    size_t n = strlen(flag);
    for (int i = 0; i < o->nargs; i++)
        if (strncmp(o->args[i], flag, n) == 0 && (o->args[i][n] == '\0' || o->args[i][n] == '='))
            return 1;
    return 0;
}

/* How to run gsbd without systemd, for the user to copy. */
static void print_by_hand(const char *gsbd, const svc_opts *o)
{
    printf("Start gsbd by hand instead (it logs to DATA_DIR/gsbd.log; `gsb logs -f` follows it):\n"
           "  nohup %s", gsbd);
    for (int i = 0; i < o->nargs; i++) {
        /* shell quoting: single quotes, with ' written as '\'' */
        printf(" '");
        for (const char *p = o->args[i]; *p; p++)
            if (*p == '\'')
                printf("'\\''");
            else
                putchar(*p);
        printf("'");
    }
    printf(" >/dev/null 2>&1 &\n");
}

static int cmd_install(const svc_opts *o)
{
    char gsbd[SVC_PATH_MAX], path[SVC_PATH_MAX];
    if (o->gsbd) {
        if (absolute(o->gsbd, gsbd, sizeof gsbd) != 0 || !is_exec_file(gsbd)) {
            fprintf(stderr, "gsb service install: --gsbd %s is not an executable file\n", o->gsbd);
            return 1;
        }
    } else if (find_gsbd(gsbd, sizeof gsbd) != 0) {
        fprintf(stderr, "gsb service install: cannot find gsbd: it is neither beside this gsb "
                        "nor on PATH. Build or install it (it comes with gsb; `pip install gsb` "
                        "also installs a gsbd command), or pass --gsbd PATH.\n");
        return 1;
    }
    if (unit_path(o, path, sizeof path) != 0)
        return 1;

    /* The user manager does not see this shell's environment: carry the data
     * directory over, so the service and this user's embedded sessions share
     * one model store. */
    const char *env[1];
    int nenv = 0;
    char envbuf[SVC_PATH_MAX + 16];
    const char *dd = getenv("GSB_DATA_DIR");
    if (dd && *dd && !has_arg(o, "--data-dir")) {
        char abs[SVC_PATH_MAX];
        int n = absolute(dd, abs, sizeof abs) == 0
                    ? snprintf(envbuf, sizeof envbuf, "GSB_DATA_DIR=%s", abs) : -1;
        if (n < 0 || (size_t)n >= sizeof envbuf) {
            fprintf(stderr, "gsb service install: GSB_DATA_DIR is too long\n");
            return 1;
        }
        env[nenv++] = envbuf;
    }

    const char *why = NULL;
    int len = gsb__service_unit_text(gsbd, (const char *const *)o->args, o->nargs, env, nenv,
                                     NULL, 0, &why);
    if (len < 0) {
        fprintf(stderr, "gsb service install: %s\n", why);
        return 1;
    }
    char *text = malloc((size_t)len + 1);
    if (!text) {
        fprintf(stderr, "gsb service install: out of memory\n");
        return 1;
    }
    gsb__service_unit_text(gsbd, (const char *const *)o->args, o->nargs, env, nenv, text,
                           (size_t)len + 1, &why);

    char sysbuf[SVC_PATH_MAX], why_sd[256];
    const char *systemctl = find_systemctl(sysbuf, sizeof sysbuf, why_sd, sizeof why_sd);
    char unit[256];
    snprintf(unit, sizeof unit, "%s.service", o->name);

    if (o->dry_run) {
        printf("gsb service install --dry-run: would write %s:\n%s", path, text);
        printf("then run:\n  %s --user daemon-reload\n  %s --user enable --now %s\n",
               systemctl ? systemctl : "systemctl", systemctl ? systemctl : "systemctl", unit);
        if (!systemctl)
            printf("(not possible here: %s)\n", why_sd);
        free(text);
        return 0;
    }

    char *old = read_file(path);
    int changed = !old || strcmp(old, text) != 0;
    int status = 0;
    char dir[SVC_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    if (mkdir_p(dir) != 0 || (changed && write_atomic(path, text) != 0)) {
        fprintf(stderr, "gsb service install: cannot write %s: %s\n", path, strerror(errno));
        free(old);
        free(text);
        return 1;
    }
    printf("%s %s (ExecStart=%s", !old ? "wrote" : changed ? "updated" : "unchanged", path, gsbd);
    for (int i = 0; i < o->nargs; i++)
        printf(" %s", o->args[i]);
    printf(")\n");
    if (nenv)
        printf("  with Environment=%s (from this shell)\n", env[0]);

    if (!systemctl) {
        printf("gsbd is NOT started: %s.\n", why_sd);
        print_wsl_hint();
        print_by_hand(gsbd, o);
    } else {
        char *reload[] = {(char *)systemctl, "--user", "daemon-reload", NULL};
        char *enable[] = {(char *)systemctl, "--user", "enable", "--now", unit, NULL};
        char *restart[] = {(char *)systemctl, "--user", "restart", unit, NULL};
        status = run_cmd(reload) != 0;
        if (!status)
            status = run_cmd(enable) != 0;
        /* enable --now leaves a running gsbd on its old command line */
        if (!status && old && changed)
            status = run_cmd(restart) != 0;
        if (status) {
            printf("systemctl failed (is there a user session? `systemctl --user` needs one: "
                   "log in, or `loginctl enable-linger %s` as root).\n",
                   getenv("USER") ? getenv("USER") : "$USER");
            print_by_hand(gsbd, o);
        } else {
            printf("gsbd is enabled: it starts at login and restarts when it fails.\n"
                   "  check:  gsb service status   (or: gsb health)\n"
                   "  logs:   gsb logs -f   (or: journalctl --user -u %s)\n"
                   "  at boot without a login:  loginctl enable-linger %s\n",
                   unit, getenv("USER") ? getenv("USER") : "$USER");
        }
    }
    free(old);
    free(text);
    return status;
}

static int cmd_uninstall(const svc_opts *o)
{
    char path[SVC_PATH_MAX], sysbuf[SVC_PATH_MAX], why_sd[256], unit[256];
    if (unit_path(o, path, sizeof path) != 0)
        return 1;
    snprintf(unit, sizeof unit, "%s.service", o->name);
    const char *systemctl = find_systemctl(sysbuf, sizeof sysbuf, why_sd, sizeof why_sd);
    struct stat st;
    int present = lstat(path, &st) == 0;
    if (o->dry_run) {
        printf("gsb service uninstall --dry-run: would run\n  %s --user disable --now %s\n"
               "then remove %s%s and run\n  %s --user daemon-reload\n",
               systemctl ? systemctl : "systemctl", unit, path,
               present ? "" : " (not there now)", systemctl ? systemctl : "systemctl");
        return 0;
    }
    if (!present) {
        printf("%s is not installed (no %s): nothing to do.\n", unit, path);
        return 0;
    }
    int status = 0;
    if (systemctl) {
        char *disable[] = {(char *)systemctl, "--user", "disable", "--now", unit, NULL};
        /* a failure here (no user session) must not keep the file around */
        if (run_cmd(disable) != 0)
            printf("  (going on: the unit file is removed anyway)\n");
    } else {
        printf("%s: not stopping the service through systemd; stop a gsbd you started by hand "
               "with kill (SIGTERM lets it finish in-flight requests).\n", why_sd);
    }
    if (unlink(path) != 0) {
        fprintf(stderr, "gsb service uninstall: cannot remove %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("removed %s\n", path);
    if (systemctl) {
        char *reload[] = {(char *)systemctl, "--user", "daemon-reload", NULL};
        status = run_cmd(reload) != 0;
    }
    return status;
}

static int cmd_status(const svc_opts *o)
{
    char path[SVC_PATH_MAX], sysbuf[SVC_PATH_MAX], why_sd[256], unit[256];
    if (unit_path(o, path, sizeof path) != 0)
        return 1;
    snprintf(unit, sizeof unit, "%s.service", o->name);
    char *text = read_file(path);
    if (!text) {
        printf("unit file: %s (not installed: `gsb service install` writes it)\n", path);
    } else {
        printf("unit file: %s\n", path);
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
            if (strncmp(line, "ExecStart=", 10) == 0 || strncmp(line, "Environment=", 12) == 0)
                printf("  %s\n", line);
        free(text);
    }
    const char *systemctl = find_systemctl(sysbuf, sizeof sysbuf, why_sd, sizeof why_sd);
    if (!systemctl) {
        printf("%s: cannot ask systemd about %s. `gsb health` tells whether a gsbd answers.\n",
               why_sd, unit);
        print_wsl_hint();
        return text ? 0 : 3;
    }
    char *st[] = {(char *)systemctl, "--user", "status", "--no-pager", unit, NULL};
    /* systemctl's own convention: 0 running, 3 not running, 4 no such unit */
    return run_cmd(st);
}

int gsb__cli_service(int argc, char **argv)
{
    if (argc < 1)
        return svc_usage(stderr);
    const char *sub = argv[0];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "help") == 0)
        return svc_usage(stdout);
    int is_install = strcmp(sub, "install") == 0;
    if (!is_install && strcmp(sub, "uninstall") != 0 && strcmp(sub, "status") != 0) {
        fprintf(stderr, "gsb service: unknown subcommand '%s'\n", sub);
        return svc_usage(stderr);
    }
    svc_opts o;
    int rc = parse_opts(argc, argv, &o, is_install);
    if (rc != 0)
        return rc < 0 ? 2 : 0;
    if (is_install)
        return cmd_install(&o);
    if (sub[0] == 'u')
        return cmd_uninstall(&o);
    if (o.dry_run) {
        fprintf(stderr, "gsb service status: --dry-run does not apply\n");
        return 2;
    }
    return cmd_status(&o);
}
