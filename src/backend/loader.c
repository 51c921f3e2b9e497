/*
 * loader.c - finding and opening backend plugins at run time.
 *
 * libgsb links no GPU library: the CUDA backend is its own shared object,
 * opened on first use so that libgsb runs on machines without CUDA.  It is
 * looked for at $GSB_CUDA_BACKEND, next to libgsb itself, then on the
 * loader's search path.  The outcome (backend or reason) is cached.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/comm.h"
#include "core/error.h"

#define PLUGIN_NAME "libgsb-cuda.so"

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const gsb__backend *cuda_backend;
static void *cuda_handle;          /* the plugin, once opened (kept mapped) */
static gsb__host_api cuda_api;     /* lives on: the plugin keeps it */
static char cuda_reason[3 * PATH_MAX] = "not looked for yet";

/* The folder holding libgsb (so a plugin installed beside it is found). */
static void own_folder(char *buf, size_t len)
{
    Dl_info info;
    buf[0] = '\0';
    if (dladdr((void *)own_folder, &info) && info.dli_fname) {
        snprintf(buf, len, "%s", info.dli_fname);
        char *slash = strrchr(buf, '/');
        if (slash)
            slash[1] = '\0';
        else
            buf[0] = '\0';
    }
}

static void *open_plugin(char *tried, size_t tried_len)
{
    char path[PATH_MAX + sizeof PLUGIN_NAME];
    const char *env = getenv("GSB_CUDA_BACKEND");
    if (env && *env) {
        snprintf(tried, tried_len, "%s", env);
        return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    }
    own_folder(path, PATH_MAX);
    if (path[0]) {
        strcat(path, PLUGIN_NAME);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    snprintf(tried, tried_len, "%s%s" PLUGIN_NAME " on the search path", path,
             path[0] ? ", then " : "");
    return dlopen(PLUGIN_NAME, RTLD_NOW | RTLD_LOCAL);
}

static void load_cuda(void)
{
    char tried[PATH_MAX + 64];
    void *h = open_plugin(tried, sizeof tried);
    if (!h) {
        const char *e = dlerror();
        snprintf(cuda_reason, sizeof cuda_reason,
                 "the CUDA backend (%s) could not be loaded: %s", tried, e ? e : "not found");
        return;
    }
    gsb__backend_open_fn open_fn;
    *(void **)&open_fn = dlsym(h, GSB__BACKEND_OPEN_SYMBOL);
    if (!open_fn) {
        snprintf(cuda_reason, sizeof cuda_reason, "%s has no %s symbol", tried,
                 GSB__BACKEND_OPEN_SYMBOL);
        dlclose(h);
        return;
    }
    cuda_handle = h;
    cuda_api = (gsb__host_api){GSB__BACKEND_ABI, gsb__err, gsb__cpu_backend()};
    char why[1024] = "";
    if (open_fn(&cuda_api, &cuda_backend, why, sizeof why) != GSB_OK || !cuda_backend) {
        cuda_backend = NULL;
        snprintf(cuda_reason, sizeof cuda_reason, "%s", why[0] ? why : "no usable GPU");
        /* keep the library mapped: the plugin may have registered exit handlers */
        return;
    }
    cuda_reason[0] = '\0';
}

const gsb__backend *gsb__cuda_backend(void)
{
    pthread_once(&cuda_once, load_cuda);
    return cuda_backend;
}

const char *gsb__cuda_unavailable_reason(void)
{
    pthread_once(&cuda_once, load_cuda);
    return cuda_reason;
}

/* ---- several GPUs ------------------------------------------------------------- */

/* A symbol of the opened plugin, or NULL (no plugin, no GPU, an older plugin). */
static void *plugin_symbol(const char *name)
{
    if (!gsb__cuda_backend() || !cuda_handle)
        return NULL;
    return dlsym(cuda_handle, name);
}

int gsb__cuda_device_count(void)
{
    gsb__device_count_fn fn;
    *(void **)&fn = plugin_symbol(GSB__DEVICE_COUNT_SYMBOL);
    return fn ? fn() : (gsb__cuda_backend() ? 1 : 0);
}

int gsb__cuda_backend_device(int ordinal, const gsb__backend **out)
{
    *out = NULL;
    if (!gsb__cuda_backend())
        return gsb__err(GSB_EUNSUPPORTED, "device cuda:%d requested but %s", ordinal,
                        gsb__cuda_unavailable_reason());
    gsb__backend_open_device_fn fn;
    *(void **)&fn = plugin_symbol(GSB__BACKEND_OPEN_DEVICE_SYMBOL);
    if (!fn)
        return gsb__err(GSB_EUNSUPPORTED, "the CUDA backend plugin has no %s symbol (an older "
                        "libgsb-cuda.so): it offers one GPU only", GSB__BACKEND_OPEN_DEVICE_SYMBOL);
    char why[1024] = "";
    if (fn(&cuda_api, ordinal, out, why, sizeof why) != GSB_OK || !*out) {
        *out = NULL;
        return gsb__err(GSB_EUNSUPPORTED, "device cuda:%d could not be opened: %s", ordinal,
                        why[0] ? why : "unknown reason");
    }
    return GSB_OK;
}

int gsb__nccl_comm_open(const gsb__backend *const *bes, int n, struct gsb__comm **out)
{
    *out = NULL;
    gsb__comm_open_fn fn;
    *(void **)&fn = plugin_symbol(GSB__COMM_OPEN_SYMBOL);
    if (!fn)
        return gsb__err(GSB_EUNSUPPORTED, "several GPUs need NCCL, but the CUDA backend plugin "
                        "has no %s symbol (an older libgsb-cuda.so)", GSB__COMM_OPEN_SYMBOL);
    const char *path = getenv("GSB_NCCL_LIBRARY");
    char why[2048] = "";
    if (fn(bes, n, path && *path ? path : NULL, out, why, sizeof why) != GSB_OK || !*out) {
        *out = NULL;
        return gsb__err(GSB_EUNSUPPORTED, "%s", why[0] ? why : "NCCL could not start");
    }
    return GSB_OK;
}
