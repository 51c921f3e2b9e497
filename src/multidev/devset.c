/*
 * devset.c - parsing a multi-device string and opening its backends and
 * communicator (devset.h).  "cuda:..." needs the CUDA plugin and NCCL (both
 * loaded at run time, backend/loader.c); a set of GPUs without NCCL is an
 * error naming the library, never a silent fall back to one GPU.
 */
#include "multidev/devset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int gsb__devset_is_set(const char *device) { return device && strchr(device, ':') != NULL; }

/* "0,1,3" -> ordinals; distinct, each below count. */
static int parse_list(const char *list, int count, gsb__devset *ds)
{
    const char *p = list;
    while (*p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || v < 0)
            return gsb__err(GSB_EINVAL, "unknown device 'cuda:%s': expected cuda:all or "
                            "cuda:I,J,... (device numbers)", list);
        if (v >= count)
            return gsb__err(GSB_EINVAL, "device cuda:%ld requested but this machine has %d "
                            "CUDA device(s)", v, count);
        for (int r = 0; r < ds->n; r++)
            if (ds->ordinal[r] == v)
                return gsb__err(GSB_EINVAL, "device 'cuda:%s' names cuda:%ld twice", list, v);
        if (ds->n == GSB__MAX_DEVICES)
            return gsb__err(GSB_EINVAL, "at most %d devices in one session", GSB__MAX_DEVICES);
        ds->ordinal[ds->n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (ds->n == 0)
        return gsb__err(GSB_EINVAL, "device 'cuda:' names no device");
    return GSB_OK;
}

static int open_cpu(const char *spec, gsb__devset *ds)
{
    char *end = NULL;
    long n = strtol(spec, &end, 10);
    if (end == spec || *end != '\0' || n < 1 || n > GSB__MAX_DEVICES)
        return gsb__err(GSB_EINVAL, "unknown device 'cpu:%s': expected cpu:N with N from 1 to "
                        "%d (a test mode: N ranks on the CPU)", spec, GSB__MAX_DEVICES);
    ds->n = (int)n;
    for (int r = 0; r < ds->n; r++) {
        ds->ordinal[r] = -1;
        ds->be[r] = gsb__cpu_backend();
    }
    snprintf(ds->label, sizeof ds->label, "cpu:%d", ds->n);
    return gsb__comm_host_open(ds->n, &ds->comm);
}

static int open_cuda(const char *spec, gsb__devset *ds)
{
    if (!gsb__cuda_backend())
        return gsb__err(GSB_EUNSUPPORTED, "device 'cuda:%s' requested but %s", spec,
                        gsb__cuda_unavailable_reason());
    int count = gsb__cuda_device_count();
    if (strcmp(spec, "all") == 0) {
        for (int r = 0; r < count && r < GSB__MAX_DEVICES; r++)
            ds->ordinal[ds->n++] = r;
        if (ds->n == 0)
            return gsb__err(GSB_EUNSUPPORTED, "device 'cuda:all': no CUDA device");
    } else {
        GSB_TRY(parse_list(spec, count, ds));
    }
    ds->cuda = 1;
    int len = snprintf(ds->label, sizeof ds->label, "cuda:");
    for (int r = 0; r < ds->n; r++) {
        GSB_TRY(gsb__cuda_backend_device(ds->ordinal[r], &ds->be[r]));
        if (len < (int)sizeof ds->label)
            len += snprintf(ds->label + len, sizeof ds->label - (size_t)len, "%s%d", r ? "," : "",
                            ds->ordinal[r]);
    }
    return gsb__nccl_comm_open(ds->be, ds->n, &ds->comm);
}

int gsb__devset_open(const char *device, gsb__devset **out)
{
    *out = NULL;
    gsb__devset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return gsb__err(GSB_ENOMEM, "out of memory");
    pthread_mutex_init(&ds->warn_lock, NULL);
    int rc;
    if (strncmp(device, "cpu:", 4) == 0)
        rc = open_cpu(device + 4, ds);
    else if (strncmp(device, "cuda:", 5) == 0)
        rc = open_cuda(device + 5, ds);
    else
        rc = gsb__err(GSB_EINVAL, "unknown device '%s': expected cpu, cuda, auto, cuda:all, "
                      "cuda:I,J,... or cpu:N", device);
    if (rc != GSB_OK) {
        gsb__devset_free(ds);
        return rc;
    }
    *out = ds;
    return GSB_OK;
}

void gsb__devset_free(void *p)
{
    gsb__devset *ds = p;
    if (!ds)
        return;
    if (ds->comm)
        ds->comm->ops->destroy(ds->comm);
    pthread_mutex_destroy(&ds->warn_lock);
    free(ds);
}

void gsb__devset_count_collective(gsb__devset *ds, int64_t bytes, double seconds)
{
    pthread_mutex_lock(&ds->warn_lock);
    ds->coll_calls++;
    ds->coll_bytes += bytes;
    ds->coll_seconds += seconds;
    pthread_mutex_unlock(&ds->warn_lock);
}
