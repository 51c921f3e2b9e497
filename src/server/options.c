/*
 * options.c - the options JSON of gsb_server_start (documented in gsb.h),
 * the token file, and the constant-time token comparison.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/store.h"
#include "server/server.h"

#define DEFAULT_MAX_REQUEST_MB 8192
#define DEFAULT_MAX_CONNECTIONS 1024
#define DEFAULT_RESERVED_CONNECTIONS 16
#define DEFAULT_IDLE_TIMEOUT_S 300

static const char *const known_keys[] = {
    "listen",           "data_dir",        "token_file",           "device",
    "log_file",         "log_level",       "log_stderr",           "max_request_mb",
    "max_connections",  "reserved_connections", "max_connections_per_peer",
    "idle_timeout_s",   "memory_budget_mb", NULL};

int gsb__ct_equal(const void *a, size_t na, const void *secret, size_t ns)
{
    const unsigned char *x = a, *y = secret;
    /* walk the whole secret whatever a is; a shorter a reads 0s (after its
     * end) and the length difference alone already makes the result 0 */
    unsigned diff = (unsigned)(na != ns);
    for (size_t i = 0; i < ns; i++) {
        unsigned char cx = i < na ? x[i] : 0;
        diff |= (unsigned)(cx ^ y[i]);
    }
    return diff == 0;
}

int gsb__read_token_file(const char *path, char **out)
{
    *out = NULL;
    FILE *f = fopen(path, "re");
    if (!f)
        return gsb__err(GSB_EPARAM, "cannot read the token file %s: %s", path, strerror(errno));
    char line[4096];
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    size_t n = got ? strlen(line) : 0;
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (n == 0)
        return gsb__err(GSB_EPARAM, "the token file %s is empty: its first line is the token", path);
    *out = strdup(line);
    explicit_bzero(line, sizeof line);
    return *out ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}

static int dup_str(const json_t *v, const char *key, char **out)
{
    if (!json_is_string(v))
        return gsb__err(GSB_EPARAM, "server option '%s' must be a string", key);
    *out = strdup(json_string_value(v));
    return *out ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}

/* tcp://127.0.0.1:19876 and a Unix socket in $XDG_RUNTIME_DIR (else /tmp) */
static int default_listen(gsb__srv_opts *o)
{
    o->listen = calloc(2, sizeof *o->listen);
    if (!o->listen)
        return gsb__err(GSB_ENOMEM, "out of memory");
    char path[200];
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (rt && rt[0] == '/' && strlen(rt) < 100)
        snprintf(path, sizeof path, "unix://%s/gsbd.sock", rt);
    else
        snprintf(path, sizeof path, "unix:///tmp/gsbd-%u.sock", (unsigned)getuid());
    o->listen[0] = strdup(GSB__DEFAULT_TCP);
    o->listen[1] = strdup(path);
    o->n_listen = 2;
    if (!o->listen[0] || !o->listen[1])
        return gsb__err(GSB_ENOMEM, "out of memory");
    return GSB_OK;
}

static int parse_listen(const json_t *v, gsb__srv_opts *o)
{
    if (json_is_string(v)) { /* one address: accept it as a list of one */
        o->listen = calloc(1, sizeof *o->listen);
        if (!o->listen)
            return gsb__err(GSB_ENOMEM, "out of memory");
        o->n_listen = 1;
        o->listen[0] = strdup(json_string_value(v));
        return o->listen[0] ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
    }
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 64)
        return gsb__err(GSB_EPARAM, "server option 'listen' must be a list of 1 to 64 URLs "
                        "(\"tcp://HOST:PORT\", \"unix:///PATH\")");
    o->listen = calloc(json_array_size(v), sizeof *o->listen);
    if (!o->listen)
        return gsb__err(GSB_ENOMEM, "out of memory");
    size_t i;
    json_t *u;
    json_array_foreach(v, i, u) {
        GSB_TRY(dup_str(u, "listen", &o->listen[i]));
        o->n_listen = (int)i + 1;
    }
    return GSB_OK;
}

static int parse_int(const json_t *v, const char *key, int64_t min, int64_t max, int64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return gsb__err(GSB_EPARAM, "server option '%s' must be an integer in [%lld, %lld]", key,
                        (long long)min, (long long)max);
    *out = json_integer_value(v);
    return GSB_OK;
}

/* The connection limits and the memory budget (docs/REMOTE.md, "Limits"). */
static int parse_limits(const json_t *root, gsb__srv_opts *o)
{
    json_t *v;
    int64_t x = 0;
    if ((v = json_object_get(root, "max_request_mb"))) {
        GSB_TRY(parse_int(v, "max_request_mb", 1, (int64_t)1 << 30, &x));
        o->max_request_bytes = (uint64_t)x << 20;
    }
    if ((v = json_object_get(root, "max_connections"))) {
        GSB_TRY(parse_int(v, "max_connections", 1, 100000, &x));
        o->max_connections = (int)x;
    }
    if ((v = json_object_get(root, "reserved_connections"))) {
        GSB_TRY(parse_int(v, "reserved_connections", 0, 10000, &x));
        o->reserved_connections = (int)x;
    }
    /* a quarter of the connections unless told (one user or address cannot
     * take them all), but not below 16 */
    int quarter = o->max_connections / 4;
    o->max_per_peer = quarter > 16 ? quarter : 16;
    if ((v = json_object_get(root, "max_connections_per_peer"))) {
        GSB_TRY(parse_int(v, "max_connections_per_peer", 1, 100000, &x));
        o->max_per_peer = (int)x;
    }
    if ((v = json_object_get(root, "idle_timeout_s"))) {
        GSB_TRY(parse_int(v, "idle_timeout_s", 0, 7 * 86400, &x)); /* ms fit an int */
        o->idle_timeout_s = (int)x;
    }
    o->memory_budget_bytes = gsb__budget_default_bytes();
    if ((v = json_object_get(root, "memory_budget_mb"))) {
        GSB_TRY(parse_int(v, "memory_budget_mb", 1, (int64_t)1 << 40, &x));
        o->memory_budget_bytes = (uint64_t)x << 20;
    }
    return GSB_OK;
}

static int parse_into(const json_t *root, gsb__srv_opts *o)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        int known = 0;
        for (int i = 0; known_keys[i]; i++)
            known |= strcmp(key, known_keys[i]) == 0;
        if (!known)
            return gsb__err(GSB_EPARAM, "unknown server option '%s': expected listen, data_dir, "
                            "token_file, device, log_file, log_level, log_stderr, "
                            "max_request_mb, max_connections, reserved_connections, "
                            "max_connections_per_peer, idle_timeout_s or memory_budget_mb", key);
    }
    if ((v = json_object_get(root, "listen")))
        GSB_TRY(parse_listen(v, o));
    if ((v = json_object_get(root, "data_dir")) && !json_is_null(v))
        GSB_TRY(dup_str(v, "data_dir", &o->data_dir));
    if ((v = json_object_get(root, "token_file")) && !json_is_null(v)) {
        char *path;
        GSB_TRY(dup_str(v, "token_file", &path));
        int rc = gsb__read_token_file(path, &o->token);
        free(path);
        GSB_TRY(rc);
    }
    if ((v = json_object_get(root, "device"))) {
        GSB_TRY(dup_str(v, "device", &o->device));
        if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda") && strcmp(o->device, "auto"))
            return gsb__err(GSB_EPARAM, "server option 'device' must be \"cpu\", \"cuda\" or "
                            "\"auto\", got \"%s\"", o->device);
    }
    if ((v = json_object_get(root, "log_file")) && !json_is_null(v))
        GSB_TRY(dup_str(v, "log_file", &o->log_file));
    if ((v = json_object_get(root, "log_level"))) {
        o->log_level = json_is_string(v) ? gsb__log_level_parse(json_string_value(v)) : -1;
        if (o->log_level < 0)
            return gsb__err(GSB_EPARAM, "server option 'log_level' must be \"debug\", \"info\", "
                            "\"warn\" or \"error\"");
    }
    if ((v = json_object_get(root, "log_stderr"))) {
        if (!json_is_boolean(v))
            return gsb__err(GSB_EPARAM, "server option 'log_stderr' must be true or false");
        o->log_stderr = json_is_true(v);
    }
    GSB_TRY(parse_limits(root, o));
    if (!o->listen)
        GSB_TRY(default_listen(o));
    if (!o->device && !(o->device = strdup("auto")))
        return gsb__err(GSB_ENOMEM, "out of memory");
    if (!o->data_dir)
        GSB_TRY(gsb__store_default_dir(&o->data_dir));
    if (!o->log_file) {
        size_t n = strlen(o->data_dir) + sizeof "/gsbd.log";
        o->log_file = malloc(n);
        if (!o->log_file)
            return gsb__err(GSB_ENOMEM, "out of memory");
        snprintf(o->log_file, n, "%s/gsbd.log", o->data_dir);
    }
    return GSB_OK;
}

int gsb__srv_opts_parse(const char *text, gsb__srv_opts *o)
{
    memset(o, 0, sizeof *o);
    o->log_level = GSB__LOG_INFO;
    o->log_stderr = 1;
    o->max_request_bytes = (uint64_t)DEFAULT_MAX_REQUEST_MB << 20;
    o->max_connections = DEFAULT_MAX_CONNECTIONS;
    o->reserved_connections = DEFAULT_RESERVED_CONNECTIONS;
    o->idle_timeout_s = DEFAULT_IDLE_TIMEOUT_S;
    json_t *root;
    if (text && *text) {
        json_error_t jerr;
        root = json_loads(text, 0, &jerr);
        if (!root)
            return gsb__err(GSB_EPARAM, "server options: invalid JSON at line %d column %d: %s",
                            jerr.line, jerr.column, jerr.text);
        if (!json_is_object(root)) {
            json_decref(root);
            return gsb__err(GSB_EPARAM, "server options must be a JSON object");
        }
    } else {
        root = json_object();
        if (!root)
            return gsb__err(GSB_ENOMEM, "out of memory");
    }
    int rc = parse_into(root, o);
    json_decref(root);
    if (rc != GSB_OK)
        gsb__srv_opts_free(o);
    return rc;
}

void gsb__srv_opts_free(gsb__srv_opts *o)
{
    for (int i = 0; o->listen && i < o->n_listen; i++)
        free(o->listen[i]);
    free(o->listen);
    free(o->data_dir);
    if (o->token) {
        explicit_bzero(o->token, strlen(o->token));
        free(o->token);
    }
    free(o->device);
    free(o->log_file);
    memset(o, 0, sizeof *o);
}
