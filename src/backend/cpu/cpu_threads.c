/*
 * cpu_threads.c - how many threads BLAS and LAPACK use: the one place that
 * knows which OpenBLAS build the engine runs on.
 *
 * OpenBLAS's OpenMP build (what CMake picks where installed:
 * cmake/openblas.cmake) runs on the engine's own OpenMP threads, one pool.  A
 * call made inside an active parallel region runs single-threaded by itself,
 * and a call outside one uses the calling thread's omp_get_max_threads(), a
 * per-thread setting.  Its pthreads build keeps a pool of its own, sized by
 * one process-wide setting, whose threads spin against the engine's when both
 * are busy.
 *
 * Two needs, two pairs of calls:
 *  - gsb__cpu_blas_serial_begin/end, around a parallel region whose threads
 *    each call BLAS on their own tile: nothing to do on the OpenMP build; on
 *    the pthreads build the process-wide setting goes to 1 for the window,
 *    reference counted under a lock so that concurrent ops (several sessions,
 *    several threads) restore the user's setting exactly once, when the last
 *    of them ends.  A BLAS call from another thread during that window runs
 *    single-threaded (slower, same results up to rounding).
 *  - gsb__cpu_blas_call_begin/end, around one BLAS or LAPACK call outside
 *    the engine's parallel regions: below GSB__BLAS_SERIAL_FLOPS it runs
 *    single-threaded, since waking a pool for each of the many tiny calls of
 *    a LAPACK routine or an iterative solver costs more than the arithmetic
 *    (5000 x 20 SVD: several times slower on 16 cores than on one).  A LAPACK
 *    routine is a chain of BLAS calls, each a parallel region on the OpenMP
 *    build, so it stays on one thread up to GSB__LAPACK_SERIAL_FLOPS
 *    (gsb__cpu_lapack_call_begin): on the busy 2-core VM, a 1000 x 256 lstsq
 *    took 0.8-1.3 s on two threads against 19 ms on one.  On the
 *    OpenMP build that is this thread's own setting, which no other thread
 *    sees; OpenBLAS's process-wide count is left alone: changing it while
 *    another thread is inside a threaded call frees that call's buffers.  On
 *    the pthreads build it is the window above.
 */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>

#include "backend/cpu/cpu_ops.h"

/* openblas_get_parallel(): 0 single-threaded build, 1 pthreads, 2 OpenMP */
#define OPENBLAS_SERIAL 0
#define OPENBLAS_PTHREADS 1

static pthread_mutex_t serial_mu = PTHREAD_MUTEX_INITIALIZER;
static int serial_users, serial_saved;

void gsb__cpu_blas_serial_begin(void)
{
    if (openblas_get_parallel() != OPENBLAS_PTHREADS)
        return;
    pthread_mutex_lock(&serial_mu);
    if (serial_users++ == 0) {
        serial_saved = openblas_get_num_threads();
        if (serial_saved > 1)
            openblas_set_num_threads(1);
    }
    pthread_mutex_unlock(&serial_mu);
}

void gsb__cpu_blas_serial_end(void)
{
    if (openblas_get_parallel() != OPENBLAS_PTHREADS)
        return;
    pthread_mutex_lock(&serial_mu);
    if (--serial_users == 0 && serial_saved > 1)
        openblas_set_num_threads(serial_saved);
    pthread_mutex_unlock(&serial_mu);
}

/* The token for gsb__cpu_blas_call_end: 0 nothing changed, -1 a pthreads
 * window opened, n > 0 this thread's OpenMP thread count before the call. */
static int call_begin(double flops, double serial_below)
{
    int build = openblas_get_parallel();
    if (build == OPENBLAS_SERIAL || flops >= serial_below || omp_in_parallel())
        return 0;
    if (build == OPENBLAS_PTHREADS) {
        gsb__cpu_blas_serial_begin();
        return -1;
    }
    int saved = omp_get_max_threads();
    if (saved <= 1)
        return 0;
    omp_set_num_threads(1);
    return saved;
}

int gsb__cpu_blas_call_begin(double flops)
{
    return call_begin(flops, GSB__BLAS_SERIAL_FLOPS);
}

int gsb__cpu_lapack_call_begin(double flops)
{
    return call_begin(flops, GSB__LAPACK_SERIAL_FLOPS);
}

void gsb__cpu_blas_call_end(int token)
{
    if (token < 0)
        gsb__cpu_blas_serial_end();
    else if (token > 0)
        omp_set_num_threads(token);
}
