/*
 * main.c - the `gsb` command: info, models list|rm, version, and the
 * server's commands: serve (gsbd in the foreground), health (GET /health of
 * a running server), bench-bridge, logs, service.
 *
 * The CLI links libgsb, whose internals are hidden: only the public API,
 * libc and jansson here.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_bridge.h"
#include "cli/health.h"
#include "cli/info.h"
#include "cli/logs.h"
#include "cli/service.h"
#include "gsb.h"
#include "server/cli_args.h"

static int usage(FILE *f)
{
    fprintf(f, "usage: gsb <command> [options]\n"
               "\n"
               "commands:\n"
               "  info [--json] [ESTIMATOR]\n"
               "                     version, backends, and the estimators with their\n"
               "                     parameters, methods and attributes\n"
               "  models list        the saved models: the server's at $GSB_URL, else the\n"
               "                     local store ($GSB_DATA_DIR)\n"
               "  models rm NAME     delete a saved model (there too)\n"
               "  serve [options]    run the server (gsbd) until SIGINT/SIGTERM;\n"
               "                     `gsb serve --help` lists its options\n"
               "  health [URL]       ask a running server whether it is up (GET /health);\n"
               "                     default $GSB_URL, else " GSB_CLI_HEALTH_DEFAULT_URL "\n"
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

/* The session `gsb models` works on: the server at $GSB_URL (with its token
 * from $GSB_TOKEN / $GSB_TOKEN_FILE, as every client), else the local store. */
static int models_session(gsb_session **s, const char **where)
{
    const char *url = getenv("GSB_URL");
    if (!url || !*url)
        url = NULL;
    *where = url ? url : "the local store";
    int rc = gsb_open(url, s);
    if (rc != GSB_OK) {
        fprintf(stderr, "gsb models: cannot open %s: %s (%s)\n", *where, gsb_errmsg(),
                gsb_status_name(rc));
        return 1;
    }
    return 0;
}

static int models_list(gsb_session *s)
{
    char *list;
    int rc = gsb_model_list(s, &list);
    if (rc != GSB_OK)
        return fail("models list", rc);
    json_error_t jerr;
    json_t *arr = json_loads(list, 0, &jerr);
    size_t i;
    json_t *m;
    json_array_foreach(arr, i, m)
        printf("%-32s %-24s %10lld  %s\n", json_string_value(json_object_get(m, "name")),
               json_string_value(json_object_get(m, "estimator")),
               (long long)json_integer_value(json_object_get(m, "size")),
               json_string_value(json_object_get(m, "saved_at")));
    json_decref(arr);
    gsb_free(list);
    return 0;
}

static int cmd_models(int argc, char **argv)
{
    int list = argc == 1 && strcmp(argv[0], "list") == 0;
    int rm = argc == 2 && strcmp(argv[0], "rm") == 0;
    if (!list && !rm)
        return usage(stderr);
    gsb_session *s;
    const char *where;
    if (models_session(&s, &where) != 0)
        return 1;
    int status = 0;
    if (list) {
        status = models_list(s);
    } else {
        int rc = gsb_model_delete(s, argv[1]);
        if (rc != GSB_OK)
            status = fail("models rm", rc);
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

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr);
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0)
        return gsb__cli_info(argc - 2, argv + 2);
    if (strcmp(cmd, "models") == 0)
        return cmd_models(argc - 2, argv + 2);
    if (strcmp(cmd, "serve") == 0)
        return cmd_serve(argc - 2, argv + 2);
    if (strcmp(cmd, "health") == 0)
        return gsb__cli_health(argc - 2, argv + 2);
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
