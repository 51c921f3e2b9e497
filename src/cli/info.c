/*
 * info.c - `gsb info` (see info.h): the info JSON as text, parameters
 * written with their defaults the way scikit-learn's repr writes them.
 */
#include "cli/info.h"

#include <stdlib.h>
#include <string.h>

#include "gsb.h"

#define INFO_WIDTH 96

void gsb__cli_pyrepr(const json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v)) {
        snprintf(buf, cap, "'%s'", json_string_value(v));
    } else if (json_is_null(v)) {
        snprintf(buf, cap, "None");
    } else if (json_is_boolean(v)) {
        snprintf(buf, cap, "%s", json_is_true(v) ? "True" : "False");
    } else if (json_is_real(v)) {
        /* Python's repr: the shortest digits that read back, positional for
         * exponents in [-4, 16) (with ".0" when integral), else scientific */
        double x = json_real_value(v);
        char e[64];
        int prec = 0;
        while (prec < 17 && (snprintf(e, sizeof e, "%.*e", prec, x), strtod(e, NULL) != x))
            prec++;
        int ex = atoi(strchr(e, 'e') + 1);
        if (ex >= -4 && ex < 16) {
            snprintf(buf, cap, "%.*f", prec - ex > 0 ? prec - ex : 0, x);
            if (!strchr(buf, '.') && strlen(buf) + 2 < cap)
                strcat(buf, ".0");
        } else {
            snprintf(buf, cap, "%.*g", prec + 1, x);
        }
    } else if (json_is_array(v) && json_array_size(v) == 2) { /* a pair: (lo, hi) */
        char a[64], b[64];
        gsb__cli_pyrepr(json_array_get(v, 0), a, sizeof a);
        gsb__cli_pyrepr(json_array_get(v, 1), b, sizeof b);
        snprintf(buf, cap, "(%s, %s)", a, b);
    } else {
        char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(buf, cap, "%s", t ? t : "?");
        free(t);
    }
}

/* Words wrapped at INFO_WIDTH, continuation lines indented to `indent`. */
typedef struct {
    FILE *f;
    int col, indent;
} wrap;

static void wrap_word(wrap *w, const char *word, const char *sep)
{
    int len = (int)strlen(word), sl = w->col > w->indent ? (int)strlen(sep) : 0;
    if (w->col > w->indent && w->col + sl + len > INFO_WIDTH) {
        fprintf(w->f, "%s\n%*s", sep[0] == ',' ? "," : "", w->indent, "");
        w->col = w->indent;
        sl = 0;
    }
    fprintf(w->f, "%s%s", sl ? sep : "", word);
    w->col += sl + len;
}

static void print_list(FILE *f, const char *label, const json_t *arr, const char *key,
                       int with_default)
{
    wrap w = {f, 0, 17};
    w.col = fprintf(f, "    %-12s ", label);
    if (json_array_size(arr) == 0)
        fprintf(f, "(none)");
    size_t i;
    const json_t *e;
    json_array_foreach(arr, i, e) {
        const char *name = key ? json_string_value(json_object_get(e, key))
                               : json_string_value(e);
        char word[512];
        if (with_default) {
            char d[400];
            gsb__cli_pyrepr(json_object_get(e, "default"), d, sizeof d);
            snprintf(word, sizeof word, "%s=%s", name ? name : "?", d);
        } else {
            snprintf(word, sizeof word, "%s", name ? name : "?");
        }
        wrap_word(&w, word, with_default ? ", " : " ");
    }
    fputc('\n', f);
}

void gsb__cli_info_print(FILE *f, const json_t *info)
{
    fprintf(f, "gsb %s\n", json_string_value(json_object_get(info, "version")));
    const char *keys[] = {"backends_compiled", "backends_available"};
    const char *labels[] = {"backends compiled: ", "backends available:"};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "%s", labels[k]);
        size_t i;
        const json_t *b;
        json_array_foreach(json_object_get(info, keys[k]), i, b)
            fprintf(f, " %s", json_string_value(b));
        fprintf(f, "\n");
    }
    const json_t *why = json_object_get(info, "cuda_unavailable");
    if (json_is_string(why))
        fprintf(f, "cuda: %s\n", json_string_value(why));
    const json_t *ests = json_object_get(info, "estimators");
    fprintf(f, "estimators (%zu; `gsb info NAME` describes one):\n", json_array_size(ests));
    size_t i;
    const json_t *e;
    json_array_foreach(ests, i, e) {
        fprintf(f, "  %s (%s)\n", json_string_value(json_object_get(e, "name")),
                json_string_value(json_object_get(e, "module")));
        print_list(f, "parameters:", json_object_get(e, "params"), "name", 1);
        print_list(f, "methods:", json_object_get(e, "methods"), "name", 0);
        print_list(f, "attributes:", json_object_get(e, "attributes"), NULL, 0);
    }
}

/* text wrapped at INFO_WIDTH on spaces, every line indented */
static void print_text(FILE *f, const char *text, int indent)
{
    wrap w = {f, indent, indent};
    fprintf(f, "%*s", indent, "");
    char word[512];
    while (*text) {
        size_t n = strcspn(text, " ");
        snprintf(word, sizeof word, "%.*s", (int)n, text);
        if (n)
            wrap_word(&w, word, " ");
        text += n;
        text += strspn(text, " ");
    }
    fputc('\n', f);
}

/* "int, in [1, inf)", "str, among {'a', 'b'}", ... from a parameter's JSON. */
static void describe_types(const json_t *p, char *buf, size_t cap)
{
    size_t off = 0, i;
    const json_t *t;
    buf[0] = '\0';
    json_array_foreach(json_object_get(p, "types"), i, t) {
        off += (size_t)snprintf(buf + off, off < cap ? cap - off : 0, "%s%s", i ? " | " : "",
                                json_string_value(t));
    }
    const json_t *r = json_object_get(p, "range"), *c = json_object_get(p, "choices");
    if (json_is_object(r) && off < cap) {
        const char *closed = json_string_value(json_object_get(r, "closed"));
        int left = closed && (!strcmp(closed, "both") || !strcmp(closed, "left"));
        int right = closed && (!strcmp(closed, "both") || !strcmp(closed, "right"));
        char lo[64] = "-inf", hi[64] = "inf";
        /* bounds of an int parameter as ints */
        int as_int = strstr(buf, "float") == NULL;
        const json_t *b[2] = {json_object_get(r, "low"), json_object_get(r, "high")};
        char *out[2] = {lo, hi};
        for (int k = 0; k < 2; k++) {
            if (json_is_null(b[k]))
                continue;
            if (as_int)
                snprintf(out[k], 64, "%.0f", json_number_value(b[k]));
            else
                gsb__cli_pyrepr(b[k], out[k], 64);
        }
        off += (size_t)snprintf(buf + off, cap - off, ", in %s%s, %s%s", left ? "[" : "(",
                                lo, hi, right ? "]" : ")");
    }
    if (json_is_array(c) && off < cap) {
        off += (size_t)snprintf(buf + off, cap - off, ", among {");
        json_array_foreach(c, i, t) {
            if (off < cap)
                off += (size_t)snprintf(buf + off, cap - off, "%s'%s'", i ? ", " : "",
                                        json_string_value(t));
        }
        if (off < cap)
            snprintf(buf + off, cap - off, "}");
    }
}

int gsb__cli_info_print_one(FILE *f, const json_t *info, const char *name)
{
    size_t i;
    const json_t *e, *found = NULL;
    json_array_foreach(json_object_get(info, "estimators"), i, e)
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            found = e;
    if (!found)
        return -1;
    const json_t *doc = json_object_get(found, "doc");
    fprintf(f, "%s (%s, %s)\n", name, json_string_value(json_object_get(found, "module")),
            json_string_value(json_object_get(found, "kind")));
    if (json_is_string(doc))
        print_text(f, json_string_value(doc), 2);
    fprintf(f, "\nparameters:\n");
    if (json_array_size(json_object_get(found, "params")) == 0)
        fprintf(f, "  (none)\n");
    const json_t *p;
    json_array_foreach(json_object_get(found, "params"), i, p) {
        char d[400], types[1024];
        gsb__cli_pyrepr(json_object_get(p, "default"), d, sizeof d);
        describe_types(p, types, sizeof types);
        fprintf(f, "  %s=%s  (%s)\n", json_string_value(json_object_get(p, "name")), d, types);
        if (json_is_string(json_object_get(p, "doc")))
            print_text(f, json_string_value(json_object_get(p, "doc")), 6);
    }
    fprintf(f, "\nmethods:\n");
    json_array_foreach(json_object_get(found, "methods"), i, p) {
        if (json_is_true(json_object_get(p, "composed"))) {
            fprintf(f, "  %s: composed from the methods above\n",
                    json_string_value(json_object_get(p, "name")));
            continue;
        }
        fprintf(f, "  %s(", json_string_value(json_object_get(p, "name")));
        size_t j;
        const json_t *in;
        json_array_foreach(json_object_get(p, "inputs"), j, in)
            fprintf(f, "%s%s%s", j ? ", " : "", json_string_value(json_object_get(in, "name")),
                    json_is_true(json_object_get(in, "optional")) ? "=None" : "");
        fprintf(f, ")\n");
        if (json_is_string(json_object_get(p, "doc")))
            print_text(f, json_string_value(json_object_get(p, "doc")), 6);
    }
    fprintf(f, "\nattributes (after fit):\n");
    json_array_foreach(json_object_get(found, "attributes"), i, p)
        fprintf(f, "  %s\n", json_string_value(p));
    return 0;
}

int gsb__cli_info(int argc, char **argv)
{
    int as_json = 0;
    const char *name = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            as_json = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: gsb info [--json] [ESTIMATOR]\n\nThe version, the backends and every "
                   "estimator with its parameters (defaults as\nin scikit-learn), methods and "
                   "fitted attributes; ESTIMATOR: one of them in\ndetail.  --json: the "
                   "library's JSON (gsb_info_json).\n");
            return 0;
        } else if (argv[i][0] != '-' && !name) {
            name = argv[i];
        } else {
            fprintf(stderr, "usage: gsb info [--json] [ESTIMATOR]\n");
            return 2;
        }
    }
    char *text;
    int rc = gsb_info_json(&text);
    if (rc != GSB_OK) {
        fprintf(stderr, "gsb: info: %s (%s)\n", gsb_errmsg(), gsb_status_name(rc));
        return 1;
    }
    json_error_t jerr;
    json_t *info = json_loads(text, 0, &jerr);
    int status = 0;
    if (!info) {
        fprintf(stderr, "gsb: info: bad JSON from the library: %s\n", jerr.text);
        status = 1;
    } else if (as_json && !name) {
        printf("%s\n", text);
    } else if (!name) {
        gsb__cli_info_print(stdout, info);
    } else if (as_json) {
        size_t i;
        json_t *e;
        status = 1;
        json_array_foreach(json_object_get(info, "estimators"), i, e)
            if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0) {
                char *one = json_dumps(e, JSON_COMPACT);
                printf("%s\n", one ? one : "{}");
                free(one);
                status = 0;
            }
    } else {
        status = gsb__cli_info_print_one(stdout, info, name) == 0 ? 0 : 1;
    }
    if (status == 1 && name)
        fprintf(stderr, "gsb info: no estimator '%s' (gsb info lists them)\n", name);
    json_decref(info);
    gsb_free(text);
    return status;
}
