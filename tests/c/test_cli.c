/*
 * test_cli.c - the `gsb` command's own logic (src/cli/health.c, info.c,
 * compiled in): the URL forms `gsb health` accepts, scikit-learn's repr of
 * parameter defaults, the text of `gsb info`, and `gsb health` against an
 * in-process gsbd in each URL form.  tools/test-wheel.sh runs the installed
 * command itself, as the README shows it.
 */
#include "cli/health.c"
#include "cli/info.c"

#include "testing.h"

static void url_is(const char *in, const char *want)
{
    char out[256], why[256] = "";
    int rc = gsb__cli_health_url(in, out, sizeof out, why, sizeof why);
    CHECK(rc == 0);
    if (rc == 0 && strcmp(out, want) != 0) {
        fprintf(stderr, "  %s -> %s, expected %s\n", in, out, want);
        CHECK(0);
    }
}

static void url_bad(const char *in, const char *why_part)
{
    char out[256], why[256] = "";
    CHECK(gsb__cli_health_url(in, out, sizeof out, why, sizeof why) == -1);
    CHECK(strstr(why, why_part) != NULL);
}

static void test_health_urls(void)
{
    url_is("tcp://127.0.0.1:19876", "tcp://127.0.0.1:19876");
    url_is("tcp://gpu-box:19876?token_file=/x", "tcp://gpu-box:19876");
    url_is("http://127.0.0.1:19876/health", "tcp://127.0.0.1:19876");
    url_is("http://127.0.0.1:19876", "tcp://127.0.0.1:19876");
    url_is("http://127.0.0.1:19876/", "tcp://127.0.0.1:19876");
    url_is("127.0.0.1:19876", "tcp://127.0.0.1:19876");
    url_is("localhost:8080", "tcp://localhost:8080");
    url_is("[::1]:19876", "tcp://[::1]:19876");
    url_is("http://[::1]:19876/health", "tcp://[::1]:19876");
    url_is("unix:///run/user/1000/gsbd.sock", "unix:///run/user/1000/gsbd.sock");
    url_is("unix:///tmp/s.sock?token_file=t", "unix:///tmp/s.sock");
    url_bad("https://gpu-box:19876/health", "plain HTTP");
    url_bad("ftp://x:1", "expected tcp://HOST:PORT");
    url_bad("gpu-box", "expected HOST:PORT");
    url_bad("gpu-box:", "expected HOST:PORT");
    url_bad("gpu-box:port", "expected HOST:PORT");
    url_bad("[::1]", "expected HOST:PORT");
}

static void repr_is(const char *json, const char *want)
{
    json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
    char buf[128];
    gsb__cli_pyrepr(v, buf, sizeof buf);
    CHECK(strcmp(buf, want) == 0);
    json_decref(v);
}

static void test_pyrepr(void)
{
    repr_is("\"k-means++\"", "'k-means++'");
    repr_is("null", "None");
    repr_is("true", "True");
    repr_is("false", "False");
    repr_is("8", "8");
    repr_is("1.0", "1.0");
    repr_is("0.0001", "0.0001");
    repr_is("1e-06", "1e-06");
    repr_is("200.0", "200.0");
    repr_is("1e16", "1e+16");
    repr_is("123456.5", "123456.5");
    repr_is("4294967295.0", "4294967295.0");
    repr_is("-0.5", "-0.5");
    repr_is("[0, 1]", "(0, 1)");
}

/* The overview lists parameters with defaults, methods and attributes; a page
 * describes one estimator. */
static void test_info_text(void)
{
    char *text = NULL, *page = NULL;
    size_t len = 0, plen = 0;
    char *js;
    CHECK_OK(gsb_info_json(&js));
    json_t *info = json_loads(js, 0, NULL);
    gsb_free(js);
    FILE *f = open_memstream(&text, &len);
    gsb__cli_info_print(f, info);
    fclose(f);
    CHECK(strstr(text, "  KMeans (cluster)\n    parameters:  n_clusters=8, init='k-means++', "
                       "n_init='auto', max_iter=300, tol=0.0001,") != NULL);
    CHECK(strstr(text, "    attributes:  cluster_centers_ labels_ inertia_ n_iter_ "
                       "n_features_in_\n") != NULL);
    CHECK(strstr(text, "    methods:     fit partial_fit transform") != NULL);
    f = open_memstream(&page, &plen);
    CHECK(gsb__cli_info_print_one(f, info, "SVC") == 0);
    CHECK(gsb__cli_info_print_one(f, info, "Nope") == -1);
    fclose(f);
    CHECK(strstr(page, "  kernel='rbf'  (str, among {'linear', 'poly', 'rbf', 'sigmoid', "
                       "'precomputed'})\n") != NULL);
    CHECK(strstr(page, "  degree=3  (int, in [0, inf))\n") != NULL);
    CHECK(strstr(page, "  predict_proba(X)\n") != NULL);
    /* no line past the width */
    for (char *line = page; line && *line;) {
        char *nl = strchr(line, '\n');
        CHECK((nl ? nl - line : (long)strlen(line)) <= INFO_WIDTH);
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    free(page);
    json_decref(info);
}

/* `gsb health` in each URL form reaches an in-process gsbd; exit 1 where
 * nothing answers, 2 for an address it cannot read. */
static void test_health_live(void)
{
    char dir[] = "/tmp/gsb-test-cli-XXXXXX", opts[512];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(opts, sizeof opts, "{\"listen\": [\"tcp://127.0.0.1:0\", \"unix://%s/s.sock\"], "
             "\"data_dir\": \"%s\", \"log_stderr\": false}", dir, dir);
    gsb_server *srv = NULL;
    CHECK_OK(gsb_server_start(opts, &srv));
    if (!srv)
        return;
    char tcp[300], unx[300];
    snprintf(tcp, sizeof tcp, "%s", gsb_server_url(srv, 0));
    snprintf(unx, sizeof unx, "%s", gsb_server_url(srv, 1));
    const char *hostport = tcp + 6;
    char forms[4][400];
    snprintf(forms[0], sizeof forms[0], "http://%s/health", hostport);
    snprintf(forms[1], sizeof forms[1], "http://%s", hostport);
    snprintf(forms[2], sizeof forms[2], "%s", hostport);
    snprintf(forms[3], sizeof forms[3], "%s", unx);
    for (int i = 0; i < 4; i++) {
        char *argv[1] = {forms[i]};
        CHECK(gsb__cli_health(1, argv) == 0);
    }
    char *argv[1] = {tcp};
    CHECK(gsb__cli_health(1, argv) == 0);
    gsb_server_stop(srv);
    CHECK(gsb__cli_health(1, argv) == 1);
    char bad[] = "https://127.0.0.1:1/health";
    char *bargv[1] = {bad};
    CHECK(gsb__cli_health(1, bargv) == 2);
    char path[600];
    snprintf(path, sizeof path, "%s/gsbd.log", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/models.db", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    RUN(test_health_urls);
    RUN(test_pyrepr);
    RUN(test_info_text);
    RUN(test_health_live);
    return testing_done();
}
