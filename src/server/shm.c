/*
 * shm.c - shared-memory segments (docs/PROTOCOL.md, "Shared memory"): a
 * client's memfd mapped MAP_SHARED, then page-locked with the GPU backend so
 * arrays placed in it upload by DMA with no copy on the server.
 *
 * Safety: the client keeps its own descriptor and could ftruncate the memfd
 * smaller after attaching; touching the vanished pages would kill the server
 * with SIGBUS.  So the server seals the memfd against shrinking
 * (F_SEAL_SHRINK) before mapping it, and refuses a segment it cannot seal.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "server/server.h"

int gsb__shm_map(int fd, uint64_t size, gsb__shm **out)
{
    *out = NULL;
    if (fd < 0)
        return gsb__err(GSB_EINVAL, "shm.attach: no file descriptor came with the request (the "
                        "memfd travels as SCM_RIGHTS ancillary data on a Unix socket)");
    if (size == 0 || size > (uint64_t)SIZE_MAX / 2)
        return gsb__err(GSB_EINVAL, "shm.attach: size must be at least 1 byte, got %llu",
                        (unsigned long long)size);
    struct stat st;
    if (fstat(fd, &st) != 0)
        return gsb__err(GSB_EIO, "shm.attach: fstat failed: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return gsb__err(GSB_EINVAL, "shm.attach: the descriptor is not a memfd (not a regular "
                        "file)");
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return gsb__err(GSB_EINVAL, "shm.attach: the descriptor is not a memfd (it cannot be "
                        "sealed): create it with memfd_create(name, MFD_ALLOW_SEALING)");
    if (!(seals & F_SEAL_SHRINK) && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
        return gsb__err(GSB_EINVAL, "shm.attach: cannot seal the memfd against shrinking (%s): "
                        "create it with memfd_create(name, MFD_ALLOW_SEALING) and do not add "
                        "F_SEAL_SEAL",
                        strerror(errno));
    /* sealed now: the size cannot go below what fstat says from here on */
    if (fstat(fd, &st) != 0)
        return gsb__err(GSB_EIO, "shm.attach: fstat failed: %s", strerror(errno));
    if ((uint64_t)st.st_size < size)
        return gsb__err(GSB_EINVAL, "shm.attach: the segment declares %llu bytes but the memfd "
                        "holds %lld", (unsigned long long)size, (long long)st.st_size);
    gsb__shm *seg = calloc(1, sizeof *seg);
    if (!seg)
        return gsb__err(GSB_ENOMEM, "out of memory");
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        free(seg);
        return gsb__err(e == ENOMEM ? GSB_ENOMEM : GSB_EIO, "shm.attach: cannot map %llu bytes: %s",
                        (unsigned long long)size, strerror(e));
    }
    seg->base = p;
    seg->size = (size_t)size;
    *out = seg;
    return GSB_OK;
}

int gsb__shm_pin(gsb__shm *seg, const gsb__backend *gpu)
{
    if (!gpu || !gpu->ops->host_register)
        return gsb__err(GSB_EUNSUPPORTED, "no GPU backend to register the segment with");
    int rc = gpu->ops->host_register(gpu, seg->base, seg->size);
    if (rc == GSB_OK) {
        seg->pinned = 1;
        seg->gpu = gpu;
    }
    return rc;
}

void gsb__shm_unmap(gsb__shm *seg)
{
    if (!seg)
        return;
    if (seg->pinned && seg->gpu->ops->host_unregister)
        seg->gpu->ops->host_unregister(seg->gpu, seg->base);
    munmap(seg->base, seg->size);
    free(seg);
}
