/*
 * gsb_win.c - gsb.exe, the Windows client's command line: talks to a gsbd
 * (on Linux, in WSL2 or on a GPU server) through gsb.dll.
 *   gsb.exe health URL     is the server up? (connects and asks)
 *   gsb.exe info URL       client version and the server's description
 *   gsb.exe selftest URL   fit/predict/save/load round trip (tests/windows)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gsb.h"
#include "selftest.h"

static int usage(FILE *f)
{
    fprintf(f, "usage: gsb.exe health|info|selftest URL\n"
               "  URL is tcp://HOST:PORT of a running gsbd (default tcp://127.0.0.1:7878)\n");
    return f == stdout ? 0 : 2;
}

static int with_session(const char *cmd, const char *url)
{
    gsb_session *s = NULL;
    int rc = gsb_open(url, &s);
    if (rc != GSB_OK) {
        fprintf(stderr, "gsb %s: %s\n", cmd, gsb_errmsg());
        return 1;
    }
    char *info = NULL;
    rc = gsb_session_info(s, &info);
    if (rc != GSB_OK) {
        fprintf(stderr, "gsb %s: %s\n", cmd, gsb_errmsg());
        gsb_close(s);
        return 1;
    }
    if (strcmp(cmd, "health") == 0)
        printf("gsbd at %s is up: %s\n", url, info);
    else
        printf("client: gsb %s (Windows, remote sessions only)\nserver: %s\n", gsb_version(),
               info);
    gsb_free(info);
    gsb_close(s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
        return usage(stdout);
    if (argc < 2 || argc > 3)
        return usage(stderr);
    const char *url = argc == 3 ? argv[2] : "tcp://127.0.0.1:7878";
    if (strcmp(argv[1], "health") == 0 || strcmp(argv[1], "info") == 0)
        return with_session(argv[1], url);
    if (strcmp(argv[1], "selftest") == 0)
        return gsb_selftest(url, stdout);
    return usage(stderr);
}
