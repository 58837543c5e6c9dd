/* staging.h - the pinned ring and the host copies of swaps. */
#ifndef NVSHARE_HOOK_STAGING_H
#define NVSHARE_HOOK_STAGING_H

#include "hook.h"
#include "driver.h"

/* One swap's copies in one context, through the ring when there is one. */
struct staging_run {
    const struct hook_driver *drv;
    CUstream *streams;
    int n_streams;
    unsigned next_stream;
    CUcontext ctx;       /* current, where the ring is made if need be */
    bool tried;          /* the ring was asked for (at the first copy) */
    bool ring;           /* false: plain copies, staged by the driver */
    CUevent events[32];  /* one per slot */
    unsigned generation; /* tells the ring's runs apart */
    int failures;
    CUresult first_error;
};
/* Makes the process's ring in ctx (current), once; whether there is one. */
bool staging_make(CUcontext ctx);
/* ctx is gone, and with it the ring if it was made there. */
void staging_context_destroyed(CUcontext ctx);
/* Begins a run on streams of ctx, the current context (one run uses the
 * ring at a time; its copy threads make ctx current to them). */
void staging_begin(struct staging_run *r, const struct hook_driver *drv,
                   CUcontext ctx, CUstream *streams, int n_streams);
/* Queues the copy of bytes between device memory and a host copy. */
void staging_copy(struct staging_run *r, bool to_device, CUdeviceptr dev,
                  void *host, uint64_t bytes);
/* Waits for every copy of the run and ends it: the first error, if any. */
CUresult staging_end(struct staging_run *r);
/* Host copies: plain memory, huge pages where the kernel has them;
 * retired while their allocation is on the GPU, freed with it. */
void *staging_host_alloc(uint64_t bytes);
void staging_host_retire(void *p, uint64_t bytes);
void staging_host_free(void *p, uint64_t bytes);
/* Host copies for allocations that have none, made now (their pages, as
 * far as the host's free memory above its margin and the memory cgroup's
 * free memory above CGROUP_SWAP_MARGIN allow, and until stop()
 * says so) and lazily free, ahead of a swap-out that would otherwise fault
 * them in: each one made is offered to install(), which says whether its
 * allocation (key, on gpu, bytes long) took it. Beside work (the process
 * runs on the GPU), on a quarter of the threads, leaving the application
 * most of the CPU. The bytes made. */
struct staging_host_copy {
    uint64_t key;
    int gpu;
    uint64_t bytes;
    bool (*install)(const struct staging_host_copy *copy, void *host);
};
uint64_t staging_host_make_ahead(const struct staging_host_copy *copies,
                                 size_t n, bool (*stop)(void), bool beside_work);

#endif
