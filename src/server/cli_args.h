/*
 * cli_args.h - the command line of `gsb serve` and `gsbd` (one parser for
 * both), turned into the options JSON of gsb_server_start.  Header-only:
 * both programs link libgsb, whose internals are hidden, so this uses only
 * libc and jansson.
 *
 *   --listen URL (repeatable)  --data-dir DIR  --token-file F  --device D
 *   --log-file F  --log-level L  --max-request-mb N  --max-connections N
 *   --reserved-connections N  --max-connections-per-peer N  --idle-timeout S
 *   --memory-budget-mb N  (also --flag=value)
 */
#ifndef GSB_SERVER_CLI_ARGS_H
#define GSB_SERVER_CLI_ARGS_H

#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GSB_CLI_SERVE_FLAGS                                                                  \
    "  --listen URL          tcp://HOST:PORT or unix:///PATH (repeatable; default\n"          \
    "                        tcp://127.0.0.1:19876 and unix://$XDG_RUNTIME_DIR/gsbd.sock)\n"  \
    "  --data-dir DIR        the model store and log (default $GSB_DATA_DIR, else\n"          \
    "                        ~/.local/share/gsb)\n"                                           \
    "  --token-file FILE     clients must send the token in FILE's first line (required\n"    \
    "                        for addresses other than loopback and Unix sockets)\n"           \
    "  --device D            auto (default), cpu or cuda\n"                                   \
    "  --log-file FILE       default DATA_DIR/gsbd.log (also written to stderr)\n"            \
    "  --log-level L         debug, info (default), warn or error\n"                          \
    "  --max-request-mb N    bound on the bytes one request may hold (default 8192)\n"        \
    "  --max-connections N   connections served at once (default 1024)\n"                    \
    "  --reserved-connections N  more slots at the limit, for /health, /metrics and\n"        \
    "                        clients with the token or of the server's user (default 16)\n"  \
    "  --max-connections-per-peer N  connections of one local user or remote address\n"     \
    "                        (default a quarter of --max-connections)\n"                     \
    "  --idle-timeout S      close connections whose session holds nothing after S s\n"      \
    "                        idle (default 300; 0: never)\n"                                 \
    "  --memory-budget-mb N  server-wide bound on request, data-handle and shared memory\n"  \
    "                        (default 3/4 of the machine's memory)\n"

/*
 * Parse argv[0..argc) into *json_out (malloc'd).  Flags in `extra` (a
 * NULL-terminated list, e.g. {"--daemon", NULL}) are accepted as booleans
 * and counted in extra_set[i].  Returns 0, or 2 with a message in err for a
 * usage error, or 1 when --help was asked for.
 */
static inline int gsb_cli_serve_options(int argc, char **argv, const char *const *extra,
                                        int *extra_set, char **json_out, char *err,
                                        size_t errlen)
{
    static const char *const str_flags[] = {"--data-dir", "--token-file", "--device",
                                            "--log-file", "--log-level", NULL};
    static const char *const str_keys[] = {"data_dir", "token_file", "device", "log_file",
                                           "log_level"};
    static const char *const int_flags[] = {"--max-request-mb",
                                            "--max-connections",
                                            "--reserved-connections",
                                            "--max-connections-per-peer",
                                            "--idle-timeout",
                                            "--memory-budget-mb",
                                            NULL};
    static const char *const int_keys[] = {"max_request_mb",           "max_connections",
                                           "reserved_connections",     "max_connections_per_peer",
                                           "idle_timeout_s",           "memory_budget_mb"};
    static const int int_min[] = {1, 1, 0, 1, 0, 1}; /* 0 turns those two off */
    *json_out = NULL;
    json_t *o = json_object(), *listen = json_array();
    int rc = 0;
    if (!o || !listen) {
        snprintf(err, errlen, "out of memory");
        rc = 2;
    }
    for (int i = 0; rc == 0 && i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            rc = 1;
            break;
        }
        int matched = 0;
        for (int k = 0; extra && extra[k]; k++)
            if (strcmp(a, extra[k]) == 0) {
                extra_set[k]++;
                matched = 1;
            }
        if (matched)
            continue;
        /* --flag VALUE or --flag=VALUE */
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        int is_listen = name_len == 8 && strncmp(a, "--listen", 8) == 0;
        int si = -1, ii = -1;
        for (int k = 0; str_flags[k]; k++)
            if (strlen(str_flags[k]) == name_len && strncmp(a, str_flags[k], name_len) == 0)
                si = k;
        for (int k = 0; int_flags[k]; k++)
            if (strlen(int_flags[k]) == name_len && strncmp(a, int_flags[k], name_len) == 0)
                ii = k;
        if (!is_listen && si < 0 && ii < 0) {
            snprintf(err, errlen, "unknown option '%s'", a);
            rc = 2;
            break;
        }
        if (!val) {
            snprintf(err, errlen, "option '%.*s' needs a value", (int)name_len, a);
            rc = 2;
            break;
        }
        if (!eq)
            i++;
        json_t *v;
        if (ii >= 0) {
            char *end;
            long long n = strtoll(val, &end, 10);
            if (*val == '\0' || *end != '\0' || n < int_min[ii]) {
                snprintf(err, errlen, "option '%.*s' needs %s integer, got '%s'", (int)name_len,
                         a, int_min[ii] ? "a positive" : "a non-negative", val);
                rc = 2;
                break;
            }
            v = json_integer(n);
        } else {
            v = json_string(val);
        }
        if (!v) {
            snprintf(err, errlen, "option '%.*s': the value is not valid UTF-8", (int)name_len, a);
            rc = 2;
            break;
        }
        if (is_listen)
            json_array_append_new(listen, v);
        else
            json_object_set_new(o, si >= 0 ? str_keys[si] : int_keys[ii], v);
    }
    if (rc == 0 && json_array_size(listen) > 0)
        json_object_set(o, "listen", listen);
    if (rc == 0) {
        *json_out = json_dumps(o, JSON_COMPACT);
        if (!*json_out) {
            snprintf(err, errlen, "out of memory");
            rc = 2;
        }
    }
    json_decref(listen);
    json_decref(o);
    return rc;
}

/* The data directory the server will use: the one given, else the model
 * store's default ($GSB_DATA_DIR, $XDG_DATA_HOME/gsb, ~/.local/share/gsb).
 * Returns 0, or -1 when none can be chosen or it does not fit. */
static inline int gsb_cli_data_dir(const char *given, char *buf, size_t cap)
{
    int n;
    const char *d;
    if (given && *given) {
        n = snprintf(buf, cap, "%s", given);
    } else if ((d = getenv("GSB_DATA_DIR")) && *d) {
        n = snprintf(buf, cap, "%s", d);
    } else if ((d = getenv("XDG_DATA_HOME")) && d[0] == '/') {
        n = snprintf(buf, cap, "%s/gsb", d);
    } else {
        d = getenv("HOME");
        if (!d || !*d) {
            struct passwd *pw = getpwuid(getuid());
            d = pw ? pw->pw_dir : NULL;
        }
        if (!d || !*d)
            return -1;
        n = snprintf(buf, cap, "%s/.local/share/gsb", d);
    }
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

#endif
