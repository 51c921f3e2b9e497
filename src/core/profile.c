/*
 * profile.c - phase times of a method call on stderr when GSB_PROFILE is set
 * (see profile.h).  The state is per thread: a call runs on one thread.
 */
#include "core/profile.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local struct {
    int depth;
    const gsb__backend *be;
    const char *est, *method;
    double start, last;
} prof;

int gsb__profile_on(void)
{
    static atomic_int on = -1; /* read the environment once */
    int v = atomic_load(&on);
    if (v < 0) {
        const char *e = getenv("GSB_PROFILE");
        v = e && *e && strcmp(e, "0") != 0;
        atomic_store(&on, v);
    }
    return v;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* the backend's queued work done (a failed wait is reported, not hidden) */
static double synced_now(void)
{
    if (prof.be && prof.be->ops->sync && prof.be->ops->sync(prof.be) != 0)
        fprintf(stderr, "gsb profile: waiting for the %s backend failed\n", prof.be->name);
    return now_ms();
}

void gsb__profile_begin(const gsb__backend *be, const char *est, const char *method)
{
    if (!gsb__profile_on() || prof.depth++ > 0)
        return;
    prof.be = be;
    prof.est = est;
    prof.method = method;
    prof.start = prof.last = synced_now();
}

static void print_phase(const char *phase, double ms)
{
    fprintf(stderr, "gsb profile: %s.%s [%s] %s %.2f ms\n", prof.est, prof.method,
            prof.be ? prof.be->name : "?", phase, ms);
}

void gsb__profile_mark(const char *phase)
{
    if (!gsb__profile_on() || prof.depth != 1)
        return;
    double t = synced_now();
    print_phase(phase, t - prof.last);
    prof.last = t;
}

double gsb__profile_clock(const gsb__backend *be)
{
    if (!gsb__profile_on() || prof.depth == 0)
        return 0;
    if (be && be->ops->sync && be->ops->sync(be) != 0)
        fprintf(stderr, "gsb profile: waiting for the %s backend failed\n", be->name);
    return now_ms();
}

void gsb__profile_note(const char *phase, double ms)
{
    if (gsb__profile_on() && prof.depth == 1)
        print_phase(phase, ms);
}

void gsb__profile_count(const char *what, int64_t count)
{
    if (!gsb__profile_on() || prof.depth != 1)
        return;
    fprintf(stderr, "gsb profile: %s.%s [%s] %s: %lld\n", prof.est, prof.method,
            prof.be ? prof.be->name : "?", what, (long long)count);
}

void gsb__profile_end(void)
{
    if (!gsb__profile_on() || prof.depth == 0 || --prof.depth > 0)
        return;
    double t = synced_now();
    print_phase("(rest)", t - prof.last);
    print_phase("total", t - prof.start);
    prof.be = NULL;
}
