/*
 * test_service.c - `gsb service` (the systemd unit gsbd runs under) and
 * `gsb logs` (the end of gsbd's log, followed across rotations).
 *
 * The CLI's sources are not part of a library, so this test compiles them
 * in.  systemd cannot be assumed (CI containers do not boot with it), so the
 * unit text is checked directly and install/uninstall/status run against a
 * fake systemctl ($GSB_SYSTEMCTL) that records its arguments.  With
 * GSB_TEST_SYSTEMD=1 on a machine whose user manager runs, test_live_systemd
 * installs a real unit, kill -9s gsbd and checks systemd restarts it.
 */
#include "cli/logs.c"
#include "cli/service.c"

#include <ftw.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>

#include "testing.h"

/* ---- helpers --------------------------------------------------------------- */

static char tmp_root[256];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void make_tmp(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/gsb_test_service_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        exit(1);
    }
}

static void tpath(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tmp_root, name);
}

static void write_text(const char *path, const char *text, int mode)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
    chmod(path, (mode_t)mode);
}

static void append_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "ab");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* The whole file, or "" when absent (static buffer per call site is enough) */
static char *slurp(const char *path)
{
    char *s = read_file(path);
    return s ? s : strdup("");
}

/* Run fn(argc, argv) in a child whose stdout and stderr go to out_path;
 * returns its exit status. */
static int run_captured(int (*fn)(int, char **), int argc, char **argv, const char *out_path)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            _exit(99);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        int rc = fn(argc, argv);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The lines of text starting with key (e.g. "ExecStart="): how many */
static int count_lines_with(const char *text, const char *key)
{
    int n = 0;
    size_t k = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, k) == 0)
            n++;
    return n;
}

/*
 * systemd's reading of an ExecStart= value, written from systemd.service(5)
 * ("Command lines") and systemd.unit(5) (specifiers): words split on
 * whitespace, "..." and '...' group, backslash escapes (\\ \" \' \; and C
 * escapes), "%%" is '%', "$$" is '$', a lone unquoted ';' separates commands.
 * Returns the number of words (-1 for something systemd would not take as
 * one literal command).
 */
static int systemd_split(const char *s, char words[][512], int max)
{
    int n = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            break;
        if (n == max)
            return -1;
        char *w = words[n];
        size_t o = 0;
        char q = 0;
        int was_quoted = 0;
        const char *start = s;
        while (*s && (q || (*s != ' ' && *s != '\t'))) {
            char ch = *s++;
            if (!q && (ch == '"' || ch == '\'')) {
                q = ch;
                was_quoted = 1;
                continue;
            }
            if (q && ch == q) {
                q = 0;
                continue;
            }
            if (ch == '\\') {
                ch = *s++;
                if (ch == 'n')
                    ch = '\n';
                else if (ch == '\0')
                    return -1;
            } else if (ch == '%') {
                if (*s++ != '%')
                    return -1; /* a specifier: would be replaced */
            } else if (ch == '$') {
                if (*s++ != '$')
                    return -1; /* a variable: would be expanded */
            }
            if (o + 1 >= 512)
                return -1;
            w[o++] = ch;
        }
        if (q)
            return -1;
        w[o] = '\0';
        if (!was_quoted && s - start == 1 && start[0] == ';')
            return -1; /* a separator, not an argument */
        n++;
    }
    return n;
}

/* ---- the unit text ---------------------------------------------------------- */

static void test_quote_known(void)
{
    char out[256];
    struct {
        const char *in;
        int dollar;
        const char *want;
    } cases[] = {
        {"plain", 1, "plain"},
        {"tcp://127.0.0.1:19876", 1, "tcp://127.0.0.1:19876"},
        {"a b", 1, "\"a b\""},
        {"a\"b", 1, "\"a\\\"b\""},
        {"C:\\x", 1, "\"C:\\\\x\""},
        {"it's", 1, "\"it's\""},
        {"50%", 1, "50%%"},
        {"$HOME", 1, "$$HOME"},
        {"$HOME", 0, "$HOME"},
        {"", 1, "\"\""},
        {";", 1, "\\;"},
        {"a;b", 1, "a;b"},
        {"\xc3\xa9t\xc3\xa9", 1, "\xc3\xa9t\xc3\xa9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = gsb__service_quote(cases[i].in, cases[i].dollar, out, sizeof out);
        CHECK(n == (int)strlen(cases[i].want));
        CHECK(strcmp(out, cases[i].want) == 0);
        if (strcmp(out, cases[i].want) != 0)
            fprintf(stderr, "  quote(%s) = %s, want %s\n", cases[i].in, out, cases[i].want);
    }
    CHECK(gsb__service_quote("a\nb", 1, out, sizeof out) == -1);
    CHECK(gsb__service_quote("tab\there", 1, out, sizeof out) == -1);
    CHECK(gsb__service_quote("del\x7f", 0, out, sizeof out) == -1);
    CHECK(gsb__service_quote(NULL, 0, out, sizeof out) == -1);
    /* snprintf convention: the full length, a truncated NUL-terminated text */
    char small[4];
    CHECK(gsb__service_quote("a b c", 1, small, sizeof small) == 7);
    CHECK(strcmp(small, "\"a ") == 0);
    CHECK(gsb__service_quote("abc", 1, NULL, 0) == 3);
}

static void test_unit_text_known(void)
{
    const char *args[] = {"--listen", "tcp://127.0.0.1:19876", "--data-dir", "/data dir/x",
                          "--device", "cuda"};
    const char *env[] = {"GSB_DATA_DIR=/srv/gsb data"};
    const char *why = "x";
    int need = gsb__service_unit_text("/opt/gsb/bin/gsbd", args, 6, env, 1, NULL, 0, &why);
    CHECK(need > 0 && why == NULL);
    char *text = malloc((size_t)need + 1);
    CHECK(text != NULL);
    if (!text)
        return;
    CHECK(gsb__service_unit_text("/opt/gsb/bin/gsbd", args, 6, env, 1, text, (size_t)need + 1,
                                 &why) == need);
    CHECK((int)strlen(text) == need);
    CHECK(strstr(text, "\nExecStart=/opt/gsb/bin/gsbd --listen tcp://127.0.0.1:19876 "
                       "--data-dir \"/data dir/x\" --device cuda\n") != NULL);
    CHECK(strstr(text, "\nEnvironment=\"GSB_DATA_DIR=/srv/gsb data\"\n") != NULL);
    CHECK(strstr(text, "\nRestart=on-failure\n") != NULL);
    CHECK(strstr(text, "\nRestartSec=1\n") != NULL);
    CHECK(strstr(text, "\nType=simple\n") != NULL);
    CHECK(strstr(text, "\nWantedBy=default.target\n") != NULL);
    CHECK(count_lines_with(text, "ExecStart=") == 1);
    CHECK(count_lines_with(text, "Restart=") == 1);
    char *u = strstr(text, "\n[Unit]\n"), *s = strstr(text, "\n[Service]\n"),
         *in = strstr(text, "\n[Install]\n");
    CHECK(u && s && in && u < s && s < in);
    CHECK(strstr(text, gsb_version()) != NULL);
    /* every line is a comment, a section, a Key=value or empty */
    for (char *p = text; *p;) {
        char *e = strchr(p, '\n');
        CHECK(e != NULL);
        if (!e)
            break;
        CHECK(e == p || *p == '#' || *p == '[' || (memchr(p, '=', (size_t)(e - p)) && *p != ' '));
        p = e + 1;
    }
    CHECK(text[need - 1] == '\n');

    /* no args, no env */
    char buf[2048];
    int n = gsb__service_unit_text("/usr/bin/gsbd", NULL, 0, NULL, 0, buf, sizeof buf, &why);
    CHECK(n > 0 && n < (int)sizeof buf);
    CHECK(strstr(buf, "\nExecStart=/usr/bin/gsbd\n") != NULL);
    CHECK(count_lines_with(buf, "Environment=") == 0);
    /* truncation keeps the snprintf contract */
    char tiny[16];
    CHECK(gsb__service_unit_text("/usr/bin/gsbd", NULL, 0, NULL, 0, tiny, sizeof tiny, &why) == n);
    CHECK(strlen(tiny) == sizeof tiny - 1 && strncmp(tiny, buf, sizeof tiny - 1) == 0);
    free(text);
}

static void test_unit_text_rejects(void)
{
    char buf[2048];
    const char *why = NULL;
    const char *nl[] = {"--listen", "tcp://x\n[Service]\nExecStartPre=/bin/rm"};
    CHECK(gsb__service_unit_text("gsbd", NULL, 0, NULL, 0, buf, sizeof buf, &why) == -1);
    CHECK(why && strstr(why, "absolute"));
    CHECK(buf[0] == '\0');
    CHECK(gsb__service_unit_text(NULL, NULL, 0, NULL, 0, buf, sizeof buf, &why) == -1);
    CHECK(gsb__service_unit_text("/bin/gsbd", nl, 2, NULL, 0, buf, sizeof buf, &why) == -1);
    CHECK(why && strstr(why, "control character"));
    const char *bad_env[] = {"NOEQUALS"};
    CHECK(gsb__service_unit_text("/bin/gsbd", NULL, 0, bad_env, 1, buf, sizeof buf, &why) == -1);
    CHECK(why && strstr(why, "KEY=VALUE"));
    const char *nl_env[] = {"A=b\nExecStart=/bin/sh"};
    CHECK(gsb__service_unit_text("/bin/gsbd", NULL, 0, nl_env, 1, buf, sizeof buf, &why) == -1);
    CHECK(gsb__service_unit_text("/bin/gs\nbd", NULL, 0, NULL, 0, buf, sizeof buf, &why) == -1);
    CHECK(gsb__service_unit_text("/bin/gsbd", NULL, -1, NULL, 0, buf, sizeof buf, &why) == -1);
}

/* Random arguments over the characters systemd treats specially come back
 * unchanged through systemd's reading of the ExecStart= line. */
static void test_unit_text_roundtrip_random(void)
{
    static const char alphabet[] = "ab /\\\"'%$;:=-_.,";
    testing_seed(42);
    static char words[16][512];
    for (int trial = 0; trial < 300; trial++) {
        char argbuf[8][40];
        const char *args[8];
        int nargs = (int)(testing_uniform() * 8);
        for (int a = 0; a < nargs; a++) {
            int len = (int)(testing_uniform() * 12);
            int o = 0;
            for (int k = 0; k < len; k++) {
                argbuf[a][o++] = alphabet[(int)(testing_uniform() * (sizeof alphabet - 1))];
            }
            argbuf[a][o] = '\0';
            args[a] = argbuf[a];
        }
        const char *gsbd = trial % 2 ? "/opt/my gsb/bin/gsbd" : "/usr/local/bin/gsbd";
        char text[4096];
        const char *why = NULL;
        int n = gsb__service_unit_text(gsbd, args, nargs, NULL, 0, text, sizeof text, &why);
        CHECK(n > 0 && n < (int)sizeof text);
        char *line = strstr(text, "\nExecStart=");
        CHECK(line != NULL);
        if (!line)
            return;
        line += strlen("\nExecStart=");
        char *end = strchr(line, '\n');
        *end = '\0';
        int got = systemd_split(line, words, 16);
        CHECK(got == nargs + 1);
        if (got != nargs + 1) {
            fprintf(stderr, "  line: %s\n", line);
            return;
        }
        CHECK(strcmp(words[0], gsbd) == 0);
        for (int a = 0; a < nargs; a++) {
            CHECK(strcmp(words[a + 1], args[a]) == 0);
            if (strcmp(words[a + 1], args[a]) != 0)
                fprintf(stderr, "  arg [%s] read back as [%s] from %s\n", args[a],
                        words[a + 1], line);
        }
    }
}

/* ---- the command, against a fake systemctl ----------------------------------- */

static char fake_gsbd[512], unit_dir[512], calls_log[512], out_path[512], unit_file[1024];

static void setup_fake(int systemctl_status_for_enable)
{
    tpath(fake_gsbd, sizeof fake_gsbd, "bin dir");
    mkdir(fake_gsbd, 0755);
    tpath(fake_gsbd, sizeof fake_gsbd, "bin dir/gsbd");
    write_text(fake_gsbd, "#!/bin/sh\nexit 0\n", 0755);
    tpath(unit_dir, sizeof unit_dir, "units/systemd/user");
    tpath(calls_log, sizeof calls_log, "calls.log");
    tpath(out_path, sizeof out_path, "out.txt");
    snprintf(unit_file, sizeof unit_file, "%s/gsbd.service", unit_dir);
    char fake[512], script[2048];
    tpath(fake, sizeof fake, "systemctl");
    /* records its arguments; "status" answers 3 (not running), "enable"
     * answers what the test asks */
    snprintf(script, sizeof script,
             "#!/bin/sh\necho \"$*\" >> '%s'\n"
             "case \"$2\" in status) echo 'fake: inactive'; exit 3;; enable) exit %d;; esac\n"
             "exit 0\n", calls_log, systemctl_status_for_enable);
    write_text(fake, script, 0755);
    setenv("GSB_SYSTEMCTL", fake, 1);
    unlink(calls_log);
}

/* gsb__cli_service(argv...) with output captured; arguments end at NULL */
static int svc(const char *a0, ...)
{
    char *argv[16];
    int argc = 0;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && argc < 15; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    return run_captured(gsb__cli_service, argc, argv, out_path);
}

static void test_install_dry_run(void)
{
    setup_fake(0);
    unsetenv("GSB_DATA_DIR");
    int rc = svc("install", "--dry-run", "--unit-dir", unit_dir, "--gsbd", fake_gsbd, "--",
                 "--listen", "unix:///tmp/a b.sock", NULL);
    CHECK(rc == 0);
    char *out = slurp(out_path);
    char want[1200];
    snprintf(want, sizeof want, "would write %s:", unit_file);
    CHECK(strstr(out, want) != NULL);
    snprintf(want, sizeof want, "\nExecStart=\"%s\" --listen \"unix:///tmp/a b.sock\"\n",
             fake_gsbd);
    CHECK(strstr(out, want) != NULL);
    CHECK(strstr(out, "--user daemon-reload") != NULL);
    CHECK(strstr(out, "--user enable --now gsbd.service") != NULL);
    struct stat st;
    CHECK(stat(unit_file, &st) != 0); /* nothing written */
    CHECK(access(calls_log, F_OK) != 0); /* nothing run */
    free(out);
}

static void test_install_cycle(void)
{
    setup_fake(0);
    unsetenv("GSB_DATA_DIR");
    /* install: writes the unit, reloads, enables */
    int rc = svc("install", "--unit-dir", unit_dir, "--gsbd", fake_gsbd, "--", "--device", "cpu",
                 NULL);
    char *out = slurp(out_path);
    CHECK(rc == 0);
    CHECK(strstr(out, "wrote ") != NULL);
    CHECK(strstr(out, "-> ok") != NULL);
    char *unit = slurp(unit_file);
    const char *args[] = {"--device", "cpu"};
    char want[4096];
    gsb__service_unit_text(fake_gsbd, args, 2, NULL, 0, want, sizeof want, NULL);
    CHECK(strcmp(unit, want) == 0);
    char *calls = slurp(calls_log);
    CHECK(strcmp(calls, "--user daemon-reload\n--user enable --now gsbd.service\n") == 0);
    free(out);
    free(unit);
    free(calls);

    /* the same again: unchanged, no restart */
    unlink(calls_log);
    rc = svc("install", "--unit-dir", unit_dir, "--gsbd", fake_gsbd, "--", "--device", "cpu",
             NULL);
    out = slurp(out_path);
    calls = slurp(calls_log);
    CHECK(rc == 0 && strstr(out, "unchanged ") != NULL);
    CHECK(strstr(calls, "restart") == NULL);
    free(out);
    free(calls);

    /* new arguments: updated, and the running gsbd restarted onto them */
    unlink(calls_log);
    rc = svc("install", "--unit-dir", unit_dir, "--gsbd", fake_gsbd, "--", "--device", "cuda",
             NULL);
    out = slurp(out_path);
    calls = slurp(calls_log);
    unit = slurp(unit_file);
    CHECK(rc == 0 && strstr(out, "updated ") != NULL);
    CHECK(strstr(calls, "--user restart gsbd.service\n") != NULL);
    CHECK(strstr(unit, "--device cuda\n") != NULL);
    free(out);
    free(calls);
    free(unit);

    /* status: shows the unit's command line, passes systemctl's status on */
    unlink(calls_log);
    rc = svc("status", "--unit-dir", unit_dir, NULL, NULL, NULL, NULL, NULL, NULL);
    out = slurp(out_path);
    calls = slurp(calls_log);
    CHECK(rc == 3);
    CHECK(strstr(out, "ExecStart=") != NULL && strstr(out, "fake: inactive") != NULL);
    CHECK(strcmp(calls, "--user status --no-pager gsbd.service\n") == 0);
    free(out);
    free(calls);

    /* uninstall: disable --now, file gone, reload; twice is fine */
    unlink(calls_log);
    rc = svc("uninstall", "--unit-dir", unit_dir, NULL, NULL, NULL, NULL, NULL, NULL);
    calls = slurp(calls_log);
    CHECK(rc == 0);
    CHECK(strcmp(calls, "--user disable --now gsbd.service\n--user daemon-reload\n") == 0);
    CHECK(access(unit_file, F_OK) != 0);
    free(calls);
    rc = svc("uninstall", "--unit-dir", unit_dir, NULL, NULL, NULL, NULL, NULL, NULL);
    out = slurp(out_path);
    CHECK(rc == 0 && strstr(out, "not installed") != NULL);
    free(out);
    rc = svc("status", "--unit-dir", unit_dir, NULL, NULL, NULL, NULL, NULL, NULL);
    out = slurp(out_path);
    CHECK(strstr(out, "not installed") != NULL);
    free(out);
}

static void test_install_named_and_data_dir(void)
{
    setup_fake(0);
    char dd[512];
    tpath(dd, sizeof dd, "data");
    setenv("GSB_DATA_DIR", dd, 1);
    int rc = svc("install", "--unit-dir", unit_dir, "--name", "gsbd-gpu1", "--gsbd", fake_gsbd,
                 NULL, NULL, NULL);
    CHECK(rc == 0);
    char path[1024], want[1024];
    snprintf(path, sizeof path, "%s/gsbd-gpu1.service", unit_dir);
    char *unit = slurp(path), *calls = slurp(calls_log);
    snprintf(want, sizeof want, "\nEnvironment=GSB_DATA_DIR=%s\n", dd);
    CHECK(strstr(unit, want) != NULL);
    CHECK(strstr(calls, "enable --now gsbd-gpu1.service") != NULL);
    free(unit);
    free(calls);
    /* an explicit --data-dir wins: no Environment= line */
    rc = svc("install", "--unit-dir", unit_dir, "--name", "gsbd-gpu1", "--gsbd", fake_gsbd, "--",
             "--data-dir=/elsewhere", NULL);
    unit = slurp(path);
    CHECK(rc == 0 && strstr(unit, "Environment=") == NULL);
    free(unit);
    unsetenv("GSB_DATA_DIR");
    svc("uninstall", "--unit-dir", unit_dir, "--name", "gsbd-gpu1", NULL, NULL, NULL, NULL);
    CHECK(access(path, F_OK) != 0);
}

static void test_install_systemctl_fails(void)
{
    setup_fake(1);
    int rc = svc("install", "--unit-dir", unit_dir, "--gsbd", fake_gsbd, NULL, NULL, NULL, NULL);
    char *out = slurp(out_path);
    CHECK(rc == 1);
    CHECK(strstr(out, "failed (exit status 1)") != NULL);
    CHECK(strstr(out, "nohup ") != NULL); /* how to start it by hand */
    CHECK(access(unit_file, F_OK) == 0);
    free(out);
    unlink(unit_file);
}

static void test_install_without_systemd(void)
{
    setup_fake(0);
    unsetenv("GSB_SYSTEMCTL");
    char *old_path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    char empty[512];
    tpath(empty, sizeof empty, "emptybin");
    mkdir(empty, 0755);
    setenv("PATH", empty, 1); /* no systemctl to be found */
    int rc = svc("install", "--unit-dir", unit_dir, "--gsbd", fake_gsbd, "--", "--listen",
                 "tcp://127.0.0.1:19876", NULL);
    char *out = slurp(out_path);
    CHECK(rc == 0);
    CHECK(strstr(out, "NOT started") != NULL);
    CHECK(strstr(out, "systemctl is not installed") != NULL);
    CHECK(strstr(out, "nohup ") != NULL && strstr(out, "'tcp://127.0.0.1:19876'") != NULL);
    CHECK(access(unit_file, F_OK) == 0); /* written for later */
    free(out);
    rc = svc("status", "--unit-dir", unit_dir, NULL, NULL, NULL, NULL, NULL, NULL);
    out = slurp(out_path);
    CHECK(rc == 0 && strstr(out, "cannot ask systemd") != NULL);
    free(out);
    rc = svc("uninstall", "--unit-dir", unit_dir, NULL, NULL, NULL, NULL, NULL, NULL);
    CHECK(rc == 0 && access(unit_file, F_OK) != 0);
    setenv("PATH", old_path, 1);
    free(old_path);
}

/* Without --gsbd: the gsbd beside this executable (the build tree holds both
 * gsb and gsbd once the server is built), else the first one on PATH. */
static void test_find_gsbd(void)
{
    setup_fake(0);
    char self[SVC_PATH_MAX], beside[SVC_PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    if (n <= 0)
        return;
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(beside, sizeof beside, "%s/gsbd", self);
    int have_beside = is_exec_file(beside);

    char *old_path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    char bin[512], path_env[1200];
    snprintf(bin, sizeof bin, "%s", fake_gsbd);
    *strrchr(bin, '/') = '\0';
    snprintf(path_env, sizeof path_env, "/nonexistent:%s:/usr/bin:/bin", bin);
    setenv("PATH", path_env, 1);
    int rc = svc("install", "--dry-run", "--unit-dir", unit_dir, NULL, NULL, NULL, NULL, NULL);
    char *out = slurp(out_path);
    char want[SVC_PATH_MAX + 32];
    snprintf(want, sizeof want, "\nExecStart=%s%s%s\n", have_beside ? "" : "\"",
             have_beside ? beside : fake_gsbd, have_beside ? "" : "\"");
    CHECK(rc == 0 && strstr(out, want) != NULL);
    free(out);
    if (!have_beside) {
        setenv("PATH", "/nonexistent", 1);
        rc = svc("install", "--dry-run", "--unit-dir", unit_dir, NULL, NULL, NULL, NULL, NULL);
        out = slurp(out_path);
        CHECK(rc == 1 && strstr(out, "cannot find gsbd") != NULL);
        free(out);
    }
    setenv("PATH", old_path, 1);
    free(old_path);
    /* --gsbd that is not an executable */
    rc = svc("install", "--unit-dir", unit_dir, "--gsbd", calls_log, NULL, NULL, NULL, NULL);
    out = slurp(out_path);
    CHECK(rc == 1 && strstr(out, "not an executable") != NULL);
    free(out);
}

static void test_bad_usage(void)
{
    setup_fake(0);
    CHECK(svc("frobnicate", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == 2);
    CHECK(svc("install", "--name", "../evil", "--unit-dir", unit_dir, NULL, NULL, NULL,
              NULL) == 2);
    CHECK(svc("install", "--bogus", NULL, NULL, NULL, NULL, NULL, NULL, NULL) == 2);
    CHECK(svc("install", "--unit-dir", NULL, NULL, NULL, NULL, NULL, NULL, NULL) == 2);
    CHECK(svc("uninstall", "--unit-dir", unit_dir, "--", "x", NULL, NULL, NULL, NULL) == 2);
    CHECK(svc("status", "--dry-run", NULL, NULL, NULL, NULL, NULL, NULL, NULL) == 2);
    CHECK(svc("install", "--unit-dir", unit_dir, "--gsbd", fake_gsbd, "--", "a\nb", NULL,
              NULL) == 1);
    CHECK(access(unit_file, F_OK) != 0);
    CHECK(svc("--help", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == 0);
    char *argv[] = {NULL};
    CHECK(run_captured(gsb__cli_service, 0, argv, out_path) == 2);
}

/* ---- logs ------------------------------------------------------------------- */

static void test_logs_path(void)
{
    char buf[1024];
    CHECK(gsb__logs_path("/x/y", buf, sizeof buf) == 0 && strcmp(buf, "/x/y/gsbd.log") == 0);
    setenv("GSB_DATA_DIR", "/d", 1);
    CHECK(gsb__logs_path(NULL, buf, sizeof buf) == 0 && strcmp(buf, "/d/gsbd.log") == 0);
    unsetenv("GSB_DATA_DIR");
    setenv("XDG_DATA_HOME", "/xdg", 1);
    CHECK(gsb__logs_path(NULL, buf, sizeof buf) == 0 && strcmp(buf, "/xdg/gsb/gsbd.log") == 0);
    setenv("XDG_DATA_HOME", "relative", 1); /* ignored, as the XDG spec says */
    setenv("HOME", "/home/u", 1);
    CHECK(gsb__logs_path(NULL, buf, sizeof buf) == 0 &&
          strcmp(buf, "/home/u/.local/share/gsb/gsbd.log") == 0);
    unsetenv("XDG_DATA_HOME");
    char small[8];
    CHECK(gsb__logs_path("/a/long/dir", small, sizeof small) == -1);
}

/* the output of gsb__logs_tail on path, through a file */
static char *tail_of(const char *path, long n, long *lines)
{
    char out[512];
    tpath(out, sizeof out, "tail.out");
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    *lines = gsb__logs_tail(path, n, fd);
    close(fd);
    return slurp(out);
}

static void test_logs_tail(void)
{
    char log[512], prev[512];
    tpath(log, sizeof log, "t.log");
    tpath(prev, sizeof prev, "t.log.1");
    unlink(prev);
    long lines;
    char *s;
    /* missing file */
    unlink(log);
    s = tail_of(log, 5, &lines);
    CHECK(lines == -1 && errno == ENOENT);
    free(s);
    /* empty file */
    write_text(log, "", 0644);
    s = tail_of(log, 5, &lines);
    CHECK(lines == 0 && s[0] == '\0');
    free(s);
    /* random files against a naive split, lines of random lengths, some
     * longer than the 64 KiB read block */
    testing_seed(7);
    for (int trial = 0; trial < 40; trial++) {
        int nl = (int)(testing_uniform() * 30);
        int trailing = testing_uniform() < 0.8;
        size_t cap = (size_t)6 << 20, len = 0;
        char *text = malloc(cap);
        size_t starts[64];
        for (int i = 0; i < nl; i++) {
            starts[i] = len;
            size_t ll = testing_uniform() < 0.05 ? 70000 + (size_t)(testing_uniform() * 9000)
                                                 : (size_t)(testing_uniform() * 40);
            for (size_t k = 0; k < ll; k++)
                text[len++] = (char)('a' + (k + (size_t)i) % 26);
            if (i == nl - 1 && !trailing && ll == 0)
                text[len++] = 'z'; /* "a\n" plus an empty unterminated line is just "a\n" */
            if (i < nl - 1 || trailing)
                text[len++] = '\n';
        }
        text[len] = '\0';
        write_text(log, text, 0644);
        long n = (long)(testing_uniform() * 35);
        s = tail_of(log, n, &lines);
        /* naive: the last min(n, nl) lines; a file ending without a newline
         * still has nl lines; an empty last "line" (text ends in \n) is none */
        long want_lines = n < nl ? n : nl;
        const char *want = want_lines == 0 ? text + len : text + starts[nl - want_lines];
        CHECK(lines == want_lines);
        CHECK(strcmp(s, want) == 0);
        free(s);
        free(text);
    }
    /* rotation: fewer lines than asked come from the end of .1 first */
    write_text(prev, "p1\np2\np3\n", 0644);
    write_text(log, "c1\nc2\n", 0644);
    s = tail_of(log, 4, &lines);
    CHECK(lines == 4 && strcmp(s, "p2\np3\nc1\nc2\n") == 0);
    free(s);
    s = tail_of(log, 2, &lines);
    CHECK(lines == 2 && strcmp(s, "c1\nc2\n") == 0);
    free(s);
    s = tail_of(log, 100, &lines);
    CHECK(lines == 5 && strcmp(s, "p1\np2\np3\nc1\nc2\n") == 0);
    free(s);
    unlink(prev);
}

typedef struct {
    const char *path;
    long long from;
    int fd;
    volatile sig_atomic_t stop;
    int rc;
} follow_arg;

static void *follow_thread(void *p)
{
    follow_arg *a = p;
    a->rc = gsb__logs_follow(a->path, a->from, a->fd, 5, &a->stop);
    return NULL;
}

/* read from fd until acc holds want (or 5 s pass); returns 1 when it does */
static int read_until(int fd, char *acc, size_t cap, size_t *len, const char *want)
{
    for (int waited = 0; waited < 5000 && !strstr(acc, want); waited += 20) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 20) > 0) {
            ssize_t r = read(fd, acc + *len, cap - *len - 1);
            if (r > 0) {
                *len += (size_t)r;
                acc[*len] = '\0';
            }
        }
    }
    return strstr(acc, want) != NULL;
}

static void test_logs_follow(void)
{
    char log[512], prev[512];
    tpath(log, sizeof log, "f.log");
    tpath(prev, sizeof prev, "f.log.1");
    write_text(log, "old line, not followed\n", 0644);
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    /* from the end of what is there (given, not -1: no race with the thread) */
    follow_arg a = {log, (long long)strlen("old line, not followed\n"), pfd[1], 0, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, follow_thread, &a) == 0);
    char acc[4096] = "";
    size_t len = 0;
    append_text(log, "one\n");
    CHECK(read_until(pfd[0], acc, sizeof acc, &len, "one\n"));
    /* rotation: what reached the old file is printed, then the new file
     * from its start (whether or not the follower looks in between) */
    append_text(log, "two\n");
    CHECK(rename(log, prev) == 0);
    usleep(20000);
    write_text(log, "three\n", 0644);
    CHECK(read_until(pfd[0], acc, sizeof acc, &len, "three\n"));
    /* truncation: starts over */
    write_text(log, "four\n", 0644);
    CHECK(read_until(pfd[0], acc, sizeof acc, &len, "four\n"));
    a.stop = 1;
    pthread_join(th, NULL);
    CHECK(a.rc == 0);
    CHECK(strcmp(acc, "one\ntwo\nthree\nfour\n") == 0);
    if (strcmp(acc, "one\ntwo\nthree\nfour\n") != 0)
        fprintf(stderr, "  followed: [%s]\n", acc);
    close(pfd[0]);
    close(pfd[1]);

    /* a file that does not exist yet is waited for and read from its start */
    unlink(log);
    CHECK(pipe(pfd) == 0);
    follow_arg b = {log, -1, pfd[1], 0, 0};
    CHECK(pthread_create(&th, NULL, follow_thread, &b) == 0);
    usleep(20000);
    write_text(log, "born\n", 0644);
    acc[0] = '\0';
    len = 0;
    CHECK(read_until(pfd[0], acc, sizeof acc, &len, "born\n"));
    b.stop = 1;
    pthread_join(th, NULL);
    CHECK(strcmp(acc, "born\n") == 0);
    close(pfd[0]);
    close(pfd[1]);
    unlink(prev);
}

static void test_logs_command(void)
{
    char dir[512], log[1024];
    tpath(dir, sizeof dir, "logdata");
    mkdir(dir, 0700);
    snprintf(log, sizeof log, "%s/gsbd.log", dir);
    write_text(log, "l1\nl2\nl3\nl4\n", 0644);
    char *argv[] = {"-n", "2", "--data-dir", dir, NULL};
    CHECK(run_captured(gsb__cli_logs, 4, argv, out_path) == 0);
    char *out = slurp(out_path);
    CHECK(strcmp(out, "l3\nl4\n") == 0);
    free(out);
    setenv("GSB_DATA_DIR", dir, 1);
    char *argv2[] = {NULL};
    CHECK(run_captured(gsb__cli_logs, 0, argv2, out_path) == 0);
    out = slurp(out_path);
    CHECK(strcmp(out, "l1\nl2\nl3\nl4\n") == 0); /* default 50 lines */
    free(out);
    unsetenv("GSB_DATA_DIR");
    char nothere[512];
    tpath(nothere, sizeof nothere, "nothere");
    char *argv3[] = {"--data-dir", nothere, NULL};
    CHECK(run_captured(gsb__cli_logs, 2, argv3, out_path) == 1);
    out = slurp(out_path);
    CHECK(strstr(out, "has gsbd run") != NULL);
    free(out);
    char *argv4[] = {"-n", "-3", NULL};
    CHECK(run_captured(gsb__cli_logs, 2, argv4, out_path) == 2);
    char *argv5[] = {"--file", log, "--data-dir", dir, NULL};
    CHECK(run_captured(gsb__cli_logs, 4, argv5, out_path) == 2);
    char *argv6[] = {"--file", log, "-n", "1", NULL};
    CHECK(run_captured(gsb__cli_logs, 4, argv6, out_path) == 0);
    out = slurp(out_path);
    CHECK(strcmp(out, "l4\n") == 0);
    free(out);
}

/* ---- systemd for real (opt-in) -------------------------------------------- */

static int read_main_pid(const char *unit)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "systemctl --user show -p MainPID --value %s", unit);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int pid = -1;
    if (fscanf(p, "%d", &pid) != 1)
        pid = -1;
    pclose(p);
    return pid;
}

/* GSB_TEST_SYSTEMD=1 and a running user manager: install a real unit (its
 * own name and socket, so a user's gsbd is untouched), kill -9 its gsbd and
 * wait for systemd to start a new one, then uninstall. */
static void test_live_systemd(void)
{
    const char *on = getenv("GSB_TEST_SYSTEMD");
    char sysbuf[SVC_PATH_MAX], why[256], gsbd[SVC_PATH_MAX];
    unsetenv("GSB_SYSTEMCTL");
    if (!on || strcmp(on, "1") != 0 || !find_systemctl(sysbuf, sizeof sysbuf, why, sizeof why) ||
        system("systemctl --user is-system-running >/dev/null 2>&1 || "
               "systemctl --user show-environment >/dev/null 2>&1") != 0 ||
        find_gsbd(gsbd, sizeof gsbd) != 0) {
        printf("skip test_live_systemd (set GSB_TEST_SYSTEMD=1 on a machine with a systemd "
               "user manager and gsbd built)\n");
        return;
    }
    char name[64], sock[600], unit[80];
    snprintf(name, sizeof name, "gsbd-test-%ld", (long)getpid());
    snprintf(unit, sizeof unit, "%s.service", name);
    snprintf(sock, sizeof sock, "unix://%s/live.sock", tmp_root);
    char *argv[] = {"install", "--name", name, "--", "--listen", sock, NULL};
    CHECK(run_captured(gsb__cli_service, 6, argv, out_path) == 0);
    int pid1 = -1;
    for (int i = 0; i < 100 && pid1 <= 0; i++, usleep(100000))
        pid1 = read_main_pid(unit);
    CHECK(pid1 > 0);
    if (pid1 > 0) {
        CHECK(kill(pid1, SIGKILL) == 0);
        int pid2 = -1;
        for (int i = 0; i < 100 && (pid2 <= 0 || pid2 == pid1); i++, usleep(100000))
            pid2 = read_main_pid(unit);
        CHECK(pid2 > 0 && pid2 != pid1);
        printf("live systemd: %s ran gsbd as pid %d; after kill -9 systemd restarted it as "
               "pid %d\n", unit, pid1, pid2);
    }
    char *argv2[] = {"uninstall", "--name", name, NULL};
    CHECK(run_captured(gsb__cli_service, 3, argv2, out_path) == 0);
}

int main(void)
{
    make_tmp();
    char home[512];
    tpath(home, sizeof home, "home");
    mkdir(home, 0700);
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", home, 1); /* whatever a test forgets, ~/.config stays untouched */
    RUN(test_quote_known);
    RUN(test_unit_text_known);
    RUN(test_unit_text_rejects);
    RUN(test_unit_text_roundtrip_random);
    RUN(test_install_dry_run);
    RUN(test_install_cycle);
    RUN(test_install_named_and_data_dir);
    RUN(test_install_systemctl_fails);
    RUN(test_install_without_systemd);
    RUN(test_find_gsbd);
    RUN(test_bad_usage);
    RUN(test_logs_path);
    RUN(test_logs_tail);
    RUN(test_logs_follow);
    RUN(test_logs_command);
    if (old_home)
        setenv("HOME", old_home, 1);
    free(old_home);
    RUN(test_live_systemd);
    unsetenv("GSB_SYSTEMCTL");
    nftw(tmp_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return testing_done();
}
