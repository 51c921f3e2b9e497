/*
 * profile.h - GSB_PROFILE=1: where a method call's time goes, on stderr.
 *
 * dispatch.c brackets each outermost estimator method (begin / end); an
 * estimator marks the end of each phase of its work with gsb__profile().
 * Each mark first waits for the work queued on the backend (its sync op),
 * so a phase's time is its own and not the next one's.  That wait changes
 * the timing a little (no overlap across marks): profiling is for finding
 * where the time goes, never on in benchmarks' reported numbers.  Off (the
 * default) every call is a load and a branch.
 *
 *   gsb profile: TSNE.fit [cuda] knn graph 12.41 ms
 *   gsb profile: TSNE.fit [cuda] total 523.10 ms
 */
#ifndef GSB_CORE_PROFILE_H
#define GSB_CORE_PROFILE_H

#include "backend/backend.h"

/* Nonzero when GSB_PROFILE is set to something other than "" or "0". */
int gsb__profile_on(void);
/* Start timing a call of est.method on be (nested calls are part of the outer one). */
void gsb__profile_begin(const gsb__backend *be, const char *est, const char *method);
/* The phase named ends now (after the backend's queued work). */
void gsb__profile_mark(const char *phase);
/* Sub-phases a solver times itself (summed over its loop): the time now in
 * ms after be's queued work (0 when profiling is off), and a line for a
 * sub-phase's total that leaves the phase marks as they are. */
double gsb__profile_clock(const gsb__backend *be);
void gsb__profile_note(const char *phase, double ms);
/* A count worth knowing about the call (iterations, waits), printed at once
 * without waiting on the backend. */
void gsb__profile_count(const char *what, int64_t count);
/* The call ends: its last phase and its total. */
void gsb__profile_end(void);

#endif
