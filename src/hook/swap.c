/* swap.c - oversubscription: moving a process's evictable memory off a GPU
 * and back, for the client's swap_out / swap_in callbacks.
 *
 * What is evictable is managed memory: what the application allocated with
 * cuMemAllocManaged, and, while oversubscription is on, what it allocated
 * with cuMemAlloc_v2 / cuMemAllocPitch_v2 (memory_paths.c makes those
 * managed). The allocation map (memory.c) knows each managed allocation
 * with its GPU and the context it was made in. Pools, VMM and arrays are
 * device memory and stay where they are.
 *
 * A swap runs on the client's thread (or any thread that is not in a
 * submission), never through the wrappers, so it is never gated: for each
 * context this process has on the GPU, it pushes that context, creates a
 * private non-blocking stream there, prefetches every managed allocation of
 * the context (cuMemPrefetchAsync_v2 to the host or to the device; the
 * older cuMemPrefetchAsync with CU_DEVICE_CPU where the driver lacks _v2),
 * waits for that stream, destroys it and pops the context again, so the
 * calling thread's current context is what it was. The map is locked while
 * the prefetches are queued: an application thread freeing one of them
 * meanwhile waits that long (microseconds per allocation), and a freed one
 * is never prefetched. */
#include "hook.h"
#include "log.h"

struct swap {
    int gpu;
    bool to_device;
    CUstream stream;      /* the private stream of the current context */
    uint64_t moved;       /* bytes prefetched and waited for */
    int failures;
    CUresult first_error;
};

static CUresult prefetch(const struct swap *job, CUdeviceptr ptr,
                         uint64_t bytes)
{
    __typeof__(&cuMemPrefetchAsync_v2) v2 = HOOK_REAL(cuMemPrefetchAsync_v2);
    CUmemLocation location = {
        .type = job->to_device ? CU_MEM_LOCATION_TYPE_DEVICE
                               : CU_MEM_LOCATION_TYPE_HOST,
        .id = job->to_device ? job->gpu : 0,
    };

    if (v2 != NULL)
        return v2(ptr, (size_t)bytes, location, 0, job->stream);
    return HOOK_CALL_REAL(cuMemPrefetchAsync,
                          (ptr, (size_t)bytes,
                           job->to_device ? (CUdevice)job->gpu : CU_DEVICE_CPU,
                           job->stream));
}

static bool prefetch_one(CUdeviceptr ptr, uint64_t bytes, void *arg)
{
    struct swap *job = arg;
    CUresult rc = prefetch(job, ptr, bytes);

    if (rc == CUDA_SUCCESS)
        return true;
    if (job->failures++ == 0)
        job->first_error = rc;
    return false;
}

/* With ctx current: prefetch its managed allocations and wait for them. */
static bool swap_context(const struct hook_driver *drv, CUcontext ctx,
                         void *arg)
{
    struct swap *job = arg;
    uint64_t queued;
    CUresult rc;

    if (drv->stream_create == NULL ||
        (rc = drv->stream_create(&job->stream, CU_STREAM_NON_BLOCKING)) !=
            CUDA_SUCCESS) {
        log_warn("swap: cannot create a stream in context %p: its managed "
                 "memory stays where it is",
                 (void *)ctx);
        return true;
    }
    queued = mem_for_each_managed(job->gpu, ctx, prefetch_one, job);
    rc = HOOK_CALL_REAL(cuStreamSynchronize, (job->stream));
    if (rc != CUDA_SUCCESS) {
        log_warn("swap: waiting for the prefetches of context %p failed (%d)",
                 (void *)ctx, (int)rc);
        queued = 0;
    }
    if (drv->stream_destroy)
        drv->stream_destroy(job->stream);
    job->moved += queued;
    return true;
}

static uint64_t swap(int gpu, bool to_device)
{
    struct swap job = {.gpu = gpu, .to_device = to_device};
    uint64_t start, us;

    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS || mem_managed_bytes(gpu) == 0)
        return 0;
    start = hook_now_ns();
    hook_for_each_context(gpu, swap_context, &job);
    us = (hook_now_ns() - start) / 1000;
    if (job.failures > 0)
        log_warn("swap %s gpu %d: %d managed allocations not moved (first "
                 "error %d)",
                 to_device ? "in" : "out", gpu, job.failures,
                 (int)job.first_error);
    log_debug("swap %s gpu %d: %llu bytes in %llu us",
              to_device ? "in" : "out", gpu, (unsigned long long)job.moved,
              (unsigned long long)us);
    hook_count(&hook_stat_events[to_device ? HOOK_EV_SWAP_INS
                                           : HOOK_EV_SWAP_OUTS],
               1);
    hook_count(&hook_stat_events[to_device ? HOOK_EV_SWAP_IN_BYTES
                                           : HOOK_EV_SWAP_OUT_BYTES],
               job.moved);
    hook_count(&hook_stat_events[to_device ? HOOK_EV_SWAP_IN_US
                                           : HOOK_EV_SWAP_OUT_US],
               us);
    return job.moved;
}

uint64_t hook_swap_out(int gpu, void *user)
{
    (void)user;
    return swap(gpu, false);
}

uint64_t hook_swap_in(int gpu, void *user)
{
    (void)user;
    return swap(gpu, true);
}

/* Test introspection: the client's callbacks, called directly. */
HOOK_EXPORT uint64_t nvshare_hook_swap_out(int gpu)
{
    return hook_swap_out(gpu, NULL);
}

HOOK_EXPORT uint64_t nvshare_hook_swap_in(int gpu)
{
    return hook_swap_in(gpu, NULL);
}

/* Test introspection: bytes of live managed allocations on gpu. */
HOOK_EXPORT uint64_t nvshare_hook_managed_bytes(int gpu)
{
    return mem_managed_bytes(gpu);
}
