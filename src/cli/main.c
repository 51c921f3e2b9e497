/*
 * main.c - the `gsb` command: info, models list|rm, version, and the
 * server's commands: serve (gsbd in the foreground), health (GET /health of
 * a running server), bench-bridge, logs, service.
 *
 * The CLI links libgsb, whose internals are hidden: only the public API,
 * libc and jansson here.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_bridge.h"
#include "cli/logs.h"
#include "cli/service.h"
#include "gsb.h"
#include "server/cli_args.h"

#define HEALTH_DEFAULT_URL "tcp://127.0.0.1:19876"
#define HEALTH_TIMEOUT_MS 5000

static int usage(FILE *f)
{
    fprintf(f, "usage: gsb <command> [options]\n"
               "\n"
               "commands:\n"
               "  info [--json]      version, backends and registered estimators\n"
               "  models list        models saved in the local store (GSB_DATA_DIR)\n"
               "  models rm NAME     delete a saved model\n"
               "  serve [options]    run the server (gsbd) until SIGINT/SIGTERM;\n"
               "                     `gsb serve --help` lists its options\n"
               "  health [URL]       ask a running server whether it is up (GET /health);\n"
               "                     default $GSB_URL, else " HEALTH_DEFAULT_URL "\n"
               "  bench-bridge       the bridge benchmark (`gsb bench-bridge --help`)\n"
               "  logs [-f] [-n N]   the end of the server's log (`gsb logs --help`)\n"
               "  service install|uninstall|status\n"
               "                     gsbd as a systemd user service\n"
               "  version            print the version\n");
    return f == stderr ? 2 : 0;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "gsb: %s: %s (%s)\n", what, gsb_errmsg(), gsb_status_name(rc));
    return 1;
}

static void print_info_text(const json_t *info)
{
    printf("gsb %s\n", json_string_value(json_object_get(info, "version")));
    const char *keys[] = {"backends_compiled", "backends_available"};
    const char *labels[] = {"backends compiled: ", "backends available:"};
    for (int k = 0; k < 2; k++) {
        printf("%s", labels[k]);
        size_t i;
        json_t *b;
        json_array_foreach(json_object_get(info, keys[k]), i, b)
            printf(" %s", json_string_value(b));
        printf("\n");
    }
    json_t *ests = json_object_get(info, "estimators");
    printf("estimators (%zu):\n", json_array_size(ests));
    size_t i;
    json_t *e;
    json_array_foreach(ests, i, e) {
        printf("  %-28s %-14s", json_string_value(json_object_get(e, "name")),
               json_string_value(json_object_get(e, "module")));
        size_t j;
        json_t *m;
        json_array_foreach(json_object_get(e, "methods"), j, m)
            printf(" %s", json_string_value(json_object_get(m, "name")));
        printf("\n");
    }
}

static int cmd_info(int argc, char **argv)
{
    int as_json = argc > 0 && strcmp(argv[0], "--json") == 0;
    char *text;
    int rc = gsb_info_json(&text);
    if (rc != GSB_OK)
        return fail("info", rc);
    if (as_json) {
        printf("%s\n", text);
    } else {
        json_error_t jerr;
        json_t *info = json_loads(text, 0, &jerr);
        if (!info) {
            gsb_free(text);
            fprintf(stderr, "gsb: info: bad JSON from the library: %s\n", jerr.text);
            return 1;
        }
        print_info_text(info);
        json_decref(info);
    }
    gsb_free(text);
    return 0;
}

static int cmd_models(int argc, char **argv)
{
    if (argc < 1)
        return usage(stderr);
    gsb_session *s;
    int rc = gsb_open(NULL, &s);
    if (rc != GSB_OK)
        return fail("open", rc);
    int status = 0;
    if (strcmp(argv[0], "list") == 0) {
        char *list;
        rc = gsb_model_list(s, &list);
        if (rc != GSB_OK) {
            status = fail("models list", rc);
        } else {
            json_error_t jerr;
            json_t *arr = json_loads(list, 0, &jerr);
            size_t i;
            json_t *m;
            json_array_foreach(arr, i, m)
                printf("%-32s %-24s %10lld  %s\n",
                       json_string_value(json_object_get(m, "name")),
                       json_string_value(json_object_get(m, "estimator")),
                       (long long)json_integer_value(json_object_get(m, "size")),
                       json_string_value(json_object_get(m, "saved_at")));
            json_decref(arr);
            gsb_free(list);
        }
    } else if (strcmp(argv[0], "rm") == 0 && argc == 2) {
        rc = gsb_model_delete(s, argv[1]);
        if (rc != GSB_OK)
            status = fail("models rm", rc);
    } else {
        status = usage(stderr);
    }
    gsb_close(s);
    return status;
}

/* ---- serve ------------------------------------------------------------------ */

static int cmd_serve(int argc, char **argv)
{
    char *opts, err[512];
    int rc = gsb_cli_serve_options(argc, argv, NULL, NULL, &opts, err, sizeof err);
    if (rc == 1) {
        printf("usage: gsb serve [options]\n\nServes the engine (the gsbd server) until SIGINT "
               "or SIGTERM, then\nfinishes the requests in flight and exits.\n\noptions:\n"
               GSB_CLI_SERVE_FLAGS);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "gsb serve: %s (see gsb serve --help)\n", err);
        return 2;
    }
    rc = gsb_serve(opts);
    free(opts);
    if (rc != GSB_OK)
        return fail("serve", rc);
    return 0;
}

/* ---- health ------------------------------------------------------------------ */

/* connect() with a timeout; returns the socket or -1 with errno set */
static int connect_timed(int family, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, sa, len) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        int k = poll(&p, 1, timeout_ms);
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (k <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            close(fd);
            errno = k == 0 ? ETIMEDOUT : soerr ? soerr : errno;
            return -1;
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* Connect to tcp://HOST:PORT or unix:///PATH (a "?..." suffix is ignored);
 * returns the socket, or -1 with a reason in why. */
static int health_connect(const char *url, char *why, size_t whylen)
{
    size_t ulen = strcspn(url, "?");
    if (strncmp(url, "unix:", 5) == 0) {
        const char *path = url + 5;
        if (strncmp(path, "//", 2) == 0)
            path += 2;
        struct sockaddr_un sa;
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        size_t plen = ulen - (size_t)(path - url);
        if (plen == 0 || plen >= sizeof sa.sun_path) {
            snprintf(why, whylen, "bad Unix socket path in '%.*s'", (int)ulen, url);
            return -1;
        }
        memcpy(sa.sun_path, path, plen);
        int fd = connect_timed(AF_UNIX, (struct sockaddr *)&sa, sizeof sa, HEALTH_TIMEOUT_MS);
        if (fd < 0)
            snprintf(why, whylen, "%s", strerror(errno));
        return fd;
    }
    if (strncmp(url, "tcp://", 6) != 0) {
        snprintf(why, whylen, "expected tcp://HOST:PORT or unix:///PATH");
        return -1;
    }
    char host[256], port[16];
    const char *h = url + 6, *end = url + ulen;
    const char *colon;
    if (*h == '[') { /* [v6]:port */
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (!rb || rb[1] != ':') {
            snprintf(why, whylen, "bad address");
            return -1;
        }
        snprintf(host, sizeof host, "%.*s", (int)(rb - h - 1), h + 1);
        colon = rb + 1;
    } else {
        colon = NULL;
        for (const char *q = h; q < end; q++)
            if (*q == ':')
                colon = q;
        if (!colon || colon == h) {
            snprintf(why, whylen, "expected tcp://HOST:PORT");
            return -1;
        }
        snprintf(host, sizeof host, "%.*s", (int)(colon - h), h);
    }
    snprintf(port, sizeof port, "%.*s", (int)(end - colon - 1), colon + 1);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        snprintf(why, whylen, "cannot resolve '%s': %s", host, gai_strerror(g));
        return -1;
    }
    int fd = -1, e = ECONNREFUSED;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = connect_timed(ai->ai_family, ai->ai_addr, ai->ai_addrlen, HEALTH_TIMEOUT_MS);
        if (fd < 0)
            e = errno;
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(why, whylen, "%s", strerror(e));
    return fd;
}

/* GET /health at url: prints the body; 0 when it answered 200 */
static int health_one(const char *url, int *answered)
{
    char why[300];
    *answered = 0;
    int fd = health_connect(url, why, sizeof why);
    if (fd < 0) {
        fprintf(stderr, "gsb health: nothing answers at %.*s (%s)\n", (int)strcspn(url, "?"), url,
                why);
        return 1;
    }
    const char *req = "GET /health HTTP/1.1\r\nHost: gsbd\r\nAccept: application/json\r\n"
                      "Connection: close\r\n\r\n";
    size_t off = 0, n = strlen(req);
    while (off < n) {
        ssize_t k = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (k <= 0 && errno != EINTR)
            break;
        if (k > 0)
            off += (size_t)k;
    }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (buf && len < cap) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = HEALTH_TIMEOUT_MS - ((t.tv_sec - t0.tv_sec) * 1000 +
                                         (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t k = recv(fd, buf + len, cap - len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    if (!buf) {
        fprintf(stderr, "gsb health: out of memory\n");
        return 1;
    }
    buf[len] = '\0';
    int code = 0;
    char *body = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1 || !body) {
        fprintf(stderr, "gsb health: %.*s answered, but not with HTTP: is that a gsbd?\n",
                (int)strcspn(url, "?"), url);
        free(buf);
        return 1;
    }
    *answered = 1;
    body += 4;
    fputs(body, stdout);
    if (len > 0 && body[strlen(body) - 1] != '\n')
        putchar('\n');
    free(buf);
    if (code != 200) {
        fprintf(stderr, "gsb health: %.*s answered HTTP %d\n", (int)strcspn(url, "?"), url, code);
        return 1;
    }
    return 0;
}

static int cmd_health(int argc, char **argv)
{
    if (argc > 1 || (argc == 1 && argv[0][0] == '-')) {
        if (argc == 1 && (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0)) {
            printf("usage: gsb health [URL]\n\nGET /health from a running gsbd and print it "
                   "(exit 0 when it is up).\nURL: tcp://HOST:PORT or unix:///PATH; default "
                   "$GSB_URL, else " HEALTH_DEFAULT_URL ".\n");
            return 0;
        }
        fprintf(stderr, "usage: gsb health [URL]\n");
        return 2;
    }
    const char *url = argc == 1 ? argv[0] : getenv("GSB_URL");
    if (!url || !*url || strncmp(url, "local", 5) == 0)
        url = HEALTH_DEFAULT_URL;
    int answered;
    int rc = health_one(url, &answered);
    if (rc != 0 && !answered)
        fprintf(stderr, "gsb health: is gsbd running? Start it with `gsbd` (or `gsb serve`), "
                        "or give the URL it listens on: gsb health tcp://HOST:PORT | "
                        "unix:///PATH\n");
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr);
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc - 2, argv + 2);
    if (strcmp(cmd, "models") == 0)
        return cmd_models(argc - 2, argv + 2);
    if (strcmp(cmd, "serve") == 0)
        return cmd_serve(argc - 2, argv + 2);
    if (strcmp(cmd, "health") == 0)
        return cmd_health(argc - 2, argv + 2);
    if (strcmp(cmd, "bench-bridge") == 0)
        return gsb__cli_bench_bridge(argc - 1, argv + 1);
    if (strcmp(cmd, "logs") == 0)
        return gsb__cli_logs(argc - 2, argv + 2);
    if (strcmp(cmd, "service") == 0)
        return gsb__cli_service(argc - 2, argv + 2);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("gsb %s\n", gsb_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        return usage(stdout);
    fprintf(stderr, "gsb: unknown command '%s'\n", cmd);
    return usage(stderr);
}
