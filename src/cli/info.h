/*
 * info.h - `gsb info [--json] [ESTIMATOR]`: the library's self-description
 * (gsb_info_json) as text: version, backends, and every estimator with its
 * parameters (scikit-learn's defaults), methods and fitted attributes; with
 * an estimator name, each parameter's type, range or choices and meaning.
 *
 * Only libc, jansson and the public API; tests/c/test_cli.c compiles info.c in.
 */
#ifndef GSB_CLI_INFO_H
#define GSB_CLI_INFO_H

#include <jansson.h>
#include <stdio.h>

/* argv[0] is the first argument after "info"; returns the exit status. */
int gsb__cli_info(int argc, char **argv);

/* A parameter default as Python writes it: 'str', None, True, 1.0, [0, 1] -> (0, 1). */
void gsb__cli_pyrepr(const json_t *v, char *buf, size_t cap);

/* The overview (every estimator) or one estimator's page, from the info JSON. */
void gsb__cli_info_print(FILE *f, const json_t *info);
int gsb__cli_info_print_one(FILE *f, const json_t *info, const char *name);

#endif
