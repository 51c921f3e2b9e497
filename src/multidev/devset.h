/*
 * devset.h - the devices of a multi-device session ("local?device=cuda:0,1",
 * "cuda:all", "cuda:N", and the test mode "cpu:N") and their communicator.
 *
 * A session URL's device string names either one backend ("cpu", "cuda",
 * "auto": no device set) or a set: rank r computes on be[r], and comm
 * (backend/comm.h) combines the ranks' statistics: NCCL over the GPUs of a
 * cuda set, the host communicator for cpu:N, whose N ranks all run on the
 * CPU backend (one thread each), so the multi-device fits are tested on
 * machines without GPUs.  The first rank is where everything else (predict,
 * transform, estimators without a multi-device fit) runs.
 */
#ifndef GSB_MULTIDEV_DEVSET_H
#define GSB_MULTIDEV_DEVSET_H

#include <jansson.h>
#include <pthread.h>

#include "backend/backend.h"
#include "backend/comm.h"

struct gsb__devset;
struct gsb_model;
struct gsb__method_desc;
struct gsb__nlist;
/* The multi-device fit (multidev.h's gsb__multidev_fit), set by the session
 * that opens the set: the dispatcher calls it for fit methods. */
typedef int (*gsb__devset_fit_fn)(struct gsb__devset *ds, struct gsb_model *m,
                                  const struct gsb__method_desc *md, gsb__tensor *in,
                                  const json_t *options, struct gsb__nlist *out, int *handled);

#define GSB__MAX_DEVICES 16

typedef struct gsb__devset {
    int n;                                /* ranks, >= 1 */
    int cuda;                             /* 1: GPUs (ordinal[r]); 0: cpu:N */
    int ordinal[GSB__MAX_DEVICES];        /* CUDA device numbers, or -1 */
    const gsb__backend *be[GSB__MAX_DEVICES];
    gsb__comm *comm;
    gsb__devset_fit_fn fit;
    char label[96];                       /* "cuda:0,1", "cpu:3": for messages */
    pthread_mutex_t warn_lock;            /* warned: estimators told once that they */
    const void *warned[64];               /* run on the first device only; and the */
    int n_warned;                         /* collective counters below */
    int64_t coll_calls, coll_bytes;       /* the fits' collectives (all-reduce, all-gather): */
    double coll_seconds;                  /* count, bytes per rank, wall time (session info) */
} gsb__devset;

/* 1 when device names a set (contains ':'), else 0 (one backend, as before). */
int gsb__devset_is_set(const char *device);
/* Open the set device names: its backends and its communicator. */
int gsb__devset_open(const char *device, gsb__devset **out);
void gsb__devset_free(void *ds); /* a session's impl_free */
/* Count one collective of `bytes` per rank that took `seconds` (any thread). */
void gsb__devset_count_collective(gsb__devset *ds, int64_t bytes, double seconds);

#endif
