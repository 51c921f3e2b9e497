/*
 * health.h - `gsb health [URL]`: GET /health from a running gsbd and print it
 * (exit 0 when it answers 200).
 *
 * URL is what users paste: tcp://HOST:PORT, unix:///PATH, HOST:PORT, or an
 * http:// address such as http://HOST:PORT/health (gsbd answers HTTP on its
 * TCP port, whatever the path); default $GSB_URL, else tcp://127.0.0.1:19876.
 *
 * Only libc and the public API; tests/c/test_cli.c compiles health.c in.
 */
#ifndef GSB_CLI_HEALTH_H
#define GSB_CLI_HEALTH_H

#include <stddef.h>

#define GSB_CLI_HEALTH_DEFAULT_URL "tcp://127.0.0.1:19876"

/* argv[0] is the first argument after "health"; returns the exit status. */
int gsb__cli_health(int argc, char **argv);

/*
 * The gsbd URL (tcp://HOST:PORT or unix:///PATH, no query) of a URL in any
 * form above, into out; -1 with the reason in why when it is none of them.
 */
int gsb__cli_health_url(const char *in, char *out, size_t cap, char *why, size_t whylen);

#endif
