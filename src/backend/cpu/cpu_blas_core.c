/*
 * cpu_blas_core.c - which kernels OpenBLAS runs: its choice corrected, once,
 * when it fell back to its oldest x86-64 kernels on a CPU it does not know.
 *
 * OpenBLAS's dynamic-arch builds pick their kernels at load time from the
 * CPU's family and model.  A release older than the CPU (Debian 12's 0.3.21
 * on this Xeon, family 6 model 207) does not know the model and falls back to
 * "Prescott": SSE3 kernels, no FMA.  Measured on the 2-core VM, one thread:
 * dgemm 1000^3 at 8 G multiply-adds/s against 36 with the SkylakeX kernels
 * the CPU supports (OPENBLAS_CORETYPE=SkylakeX); LinearRegression 200k x 64
 * 1.1-2.0 s against 0.4 s.  scikit-learn's own OpenBLAS (scipy-openblas,
 * 0.3.30) knows the CPU.
 *
 * The fix selects again, by the CPU's features, the way OPENBLAS_CORETYPE
 * would have: OpenBLAS exports gotoblas_dynamic_quit/gotoblas_dynamic_init,
 * which forget the choice and make it anew (reading OPENBLAS_CORETYPE, set
 * for the call and restored after).  It runs from a constructor, so before
 * any BLAS call of the engine, and only where all of these hold:
 *  - x86-64 Linux, an OpenBLAS that exports both functions (dynamic arch);
 *  - the user did not set OPENBLAS_CORETYPE (a choice made is respected);
 *  - OpenBLAS reports "Prescott" (its fallback) while the CPU and the OS
 *    support AVX2 and FMA (libgcc's __builtin_cpu_supports checks both).
 * GSB_OPENBLAS_KEEP_CORE=1 turns it off.  Kernels differ in rounding only:
 * results move by a few ulps, as between any two machines.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"

static int switched;

const char *gsb__cpu_blas_core_choice(const char *current, const char *user_coretype,
                                      const char *keep, const char *cpu_wants)
{
    if ((keep && strcmp(keep, "0") != 0) || user_coretype)
        return NULL;
    if (!current || !cpu_wants || strcmp(current, "Prescott") != 0)
        return NULL;
    return cpu_wants;
}

int gsb__cpu_blas_core_switched(void) { return switched; }

#if defined(__linux__) && defined(__x86_64__) && defined(__GNUC__)
#include <dlfcn.h>

/* The kernel set the CPU's features call for, by OpenBLAS's name for it. */
static const char *cpu_core(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    return NULL;
}

__attribute__((constructor)) static void blas_core_fix(void)
{
    const char *want =
        gsb__cpu_blas_core_choice(openblas_get_corename(), getenv("OPENBLAS_CORETYPE"),
                                  getenv("GSB_OPENBLAS_KEEP_CORE"), cpu_core());
    if (!want)
        return;
    /* the library that defines openblas_get_corename, as linked: a dlsym of
     * RTLD_DEFAULT would miss it when libgsb was loaded RTLD_LOCAL (ctypes) */
    Dl_info info;
    if (!dladdr((void *)openblas_get_corename, &info) || !info.dli_fname)
        return;
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return;
    void (*quit)(void) = (void (*)(void))dlsym(h, "gotoblas_dynamic_quit");
    void (*init)(void) = (void (*)(void))dlsym(h, "gotoblas_dynamic_init");
    if (quit && init && setenv("OPENBLAS_CORETYPE", want, 0) == 0) {
        quit();
        init();
        unsetenv("OPENBLAS_CORETYPE");
        switched = 1;
    }
    dlclose(h);
}
#endif
