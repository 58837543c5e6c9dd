/* swap.c - oversubscription: moving a process's evictable memory off a GPU
 * and back, for the client's swap_out / swap_in callbacks.
 *
 * What is evictable is managed memory: what the application allocated with
 * cuMemAllocManaged, and, while oversubscription is on, what it allocated
 * with cuMemAlloc_v2 / cuMemAllocPitch_v2 (memory_paths.c makes those
 * managed: "converted"). The allocation map (memory.c) knows each managed
 * allocation with its GPU and the context it was made in. Pools, VMM and
 * arrays are device memory and stay where they are.
 *
 * Converted allocations are copied, not migrated. Prefetching managed
 * memory to the host runs at a few GB/s on an H100 because the driver
 * faults in and maps every destination page, while a copy engine writes
 * pinned memory at link speed (~50 GB/s). So a swap-out copies each
 * converted allocation in chunks, over several streams, into a pinned host
 * copy of its own (cuMemHostAlloc at its first swap-out, reused by every
 * later one, freed with the allocation), then discards its device pages
 * (cuMemDiscardBatchAsync): the driver may reuse them without migrating
 * anything. A swap-in makes device pages exist again without migrating
 * (cuMemDiscardAndPrefetchBatchAsync to the GPU) and copies the data back.
 * This is only correct because the application sees converted memory as
 * device memory: it never reads it on the host, and every copy or kernel
 * that could reach it is gated, so it runs after the swap-in. The
 * application's own managed memory may be read on the host at any time and
 * is prefetched as before; so is converted memory when the driver lacks
 * those calls (CUDA < 12.8) or the pinned copy cannot be allocated.
 *
 * A swap runs on the client's thread (or any thread that is not in a
 * submission), never through the wrappers, so it is never gated: for each
 * context this process has on the GPU, it pushes that context, creates
 * private non-blocking streams there, queues the moves, waits for them,
 * destroys the streams and pops the context again, so the calling thread's
 * current context is what it was. The map stays locked from the first
 * move queued to the last one waited for: an application thread that frees
 * or allocates managed memory meanwhile waits that long (the swap time),
 * and nothing is freed, reused or discarded under a transfer. */
#include <stdlib.h>

#include "hook.h"
#include "log.h"

/* Copies of 64 MiB reach the link's speed; four streams keep both copy
 * engines of a direction busy while the next chunk is queued. */
#define SWAP_CHUNK (64ull << 20)
#define SWAP_STREAMS 4

/* A converted allocation whose device pages are discarded on swap-out, or
 * made again on swap-in, once the copies of this context are done. */
struct batch {
    CUdeviceptr *ptrs;
    size_t *sizes;
    struct mem_swap_slot **slots;
    size_t n, cap;
};

struct swap {
    int gpu;
    bool to_device;
    bool copies;          /* the driver has what copying needs */
    CUstream streams[SWAP_STREAMS];
    int n_streams;
    unsigned next_stream;
    struct batch batch;   /* converted allocations copied in this context */
    uint64_t prefetched;  /* bytes prefetched in this context */
    uint64_t moved;       /* bytes moved and waited for, all contexts */
    int failures;
    CUresult first_error;
};

static void failed(struct swap *job, CUresult rc)
{
    if (job->failures++ == 0)
        job->first_error = rc;
}

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
        return v2(ptr, (size_t)bytes, location, 0, job->streams[0]);
    return HOOK_CALL_REAL(cuMemPrefetchAsync,
                          (ptr, (size_t)bytes,
                           job->to_device ? (CUdevice)job->gpu : CU_DEVICE_CPU,
                           job->streams[0]));
}

/* Queues the copies of one allocation, chunk by chunk over the streams. */
static CUresult copy(struct swap *job, CUdeviceptr ptr, uint64_t bytes,
                     void *host)
{
    CUresult rc = CUDA_SUCCESS;

    for (uint64_t at = 0; at < bytes && rc == CUDA_SUCCESS; at += SWAP_CHUNK) {
        size_t len = (size_t)(bytes - at < SWAP_CHUNK ? bytes - at : SWAP_CHUNK);
        CUstream stream = job->streams[job->next_stream++ % job->n_streams];

        rc = job->to_device
                 ? HOOK_CALL_REAL(cuMemcpyHtoDAsync_v2,
                                  (ptr + at, (char *)host + at, len, stream))
                 : HOOK_CALL_REAL(cuMemcpyDtoHAsync_v2,
                                  ((char *)host + at, ptr + at, len, stream));
    }
    return rc;
}

static bool batch_add(struct batch *b, CUdeviceptr ptr, uint64_t bytes,
                      struct mem_swap_slot *slot)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        CUdeviceptr *ptrs = realloc(b->ptrs, cap * sizeof(*ptrs));
        if (ptrs)
            b->ptrs = ptrs;
        size_t *sizes = realloc(b->sizes, cap * sizeof(*sizes));
        if (sizes)
            b->sizes = sizes;
        struct mem_swap_slot **slots = realloc(b->slots, cap * sizeof(*slots));
        if (slots)
            b->slots = slots;
        if (!ptrs || !sizes || !slots)
            return false;
        b->cap = cap;
    }
    b->ptrs[b->n] = ptr;
    b->sizes[b->n] = (size_t)bytes;
    b->slots[b->n++] = slot;
    return true;
}

/* Swap-out of a converted allocation: into its pinned copy, false if it
 * must be prefetched instead. */
static bool copy_out(struct swap *job, const struct hook_driver *drv,
                     CUdeviceptr ptr, uint64_t bytes, struct mem_swap_slot *slot)
{
    CUresult rc;

    if (slot->backing == NULL &&
        (rc = drv->mem_host_alloc(&slot->backing, (size_t)bytes, 0)) !=
            CUDA_SUCCESS) {
        slot->backing = NULL;
        log_debug("swap out: no pinned copy of %llu bytes (%d): prefetching",
                  (unsigned long long)bytes, (int)rc);
        return false;
    }
    if (!batch_add(&job->batch, ptr, bytes, slot))
        return false;
    if ((rc = copy(job, ptr, bytes, slot->backing)) != CUDA_SUCCESS) {
        failed(job, rc);
        job->batch.n--; /* not discarded: its device pages still hold it */
    }
    return true;
}

static void move_one(CUdeviceptr ptr, uint64_t bytes, struct mem_swap_slot *slot,
                     void *arg)
{
    struct swap *job = arg;
    const struct hook_driver *drv = hook_driver();
    CUresult rc;

    if (slot->out) {
        /* Out since an earlier swap-out: only a swap-in touches it. */
        if (job->to_device && !batch_add(&job->batch, ptr, bytes, slot))
            failed(job, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    if (slot->converted && job->copies && !job->to_device &&
        copy_out(job, drv, ptr, bytes, slot))
        return;
    if ((rc = prefetch(job, ptr, bytes)) == CUDA_SUCCESS)
        job->prefetched += bytes;
    else
        failed(job, rc);
}

static bool wait_streams(struct swap *job)
{
    bool ok = true;

    for (int i = 0; i < job->n_streams; i++) {
        CUresult rc = HOOK_CALL_REAL(cuStreamSynchronize, (job->streams[i]));
        if (rc != CUDA_SUCCESS) {
            failed(job, rc);
            ok = false;
        }
    }
    return ok;
}

static uint64_t batch_bytes(const struct batch *b)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < b->n; i++)
        sum += b->sizes[i];
    return sum;
}

/* Copies are waited for: the device pages of what was copied can go. */
static void discard_copied(struct swap *job, const struct hook_driver *drv)
{
    struct batch *b = &job->batch;
    CUresult rc;

    if (b->n == 0)
        return;
    rc = drv->mem_discard_batch(b->ptrs, b->sizes, b->n, 0, job->streams[0]);
    if (rc == CUDA_SUCCESS)
        rc = HOOK_CALL_REAL(cuStreamSynchronize, (job->streams[0]));
    if (rc != CUDA_SUCCESS) {
        /* Copied but still resident: it stays in, and is not counted. */
        failed(job, rc);
        return;
    }
    for (size_t i = 0; i < b->n; i++)
        b->slots[i]->out = true;
    job->moved += batch_bytes(b);
}

/* Device pages for what was discarded, without migrating anything, then
 * the data from the pinned copies. */
static void copy_back(struct swap *job)
{
    __typeof__(&cuMemDiscardAndPrefetchBatchAsync) populate =
        HOOK_REAL(cuMemDiscardAndPrefetchBatchAsync);
    struct batch *b = &job->batch;
    CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = job->gpu};
    size_t first = 0;
    CUresult rc = CUDA_ERROR_NOT_FOUND;

    if (b->n == 0)
        return;
    if (populate)
        rc = populate(b->ptrs, b->sizes, b->n, &gpu, &first, 1, 0,
                      job->streams[0]);
    for (size_t i = 0; i < b->n && rc != CUDA_SUCCESS; i++)
        rc = prefetch(job, b->ptrs[i], b->sizes[i]);
    /* The copies would fault the pages in otherwise: slower, as correct. */
    if (rc != CUDA_SUCCESS ||
        HOOK_CALL_REAL(cuStreamSynchronize, (job->streams[0])) != CUDA_SUCCESS)
        log_debug("swap in gpu %d: device pages not made ahead (%d)", job->gpu,
                  (int)rc);
    for (size_t i = 0; i < b->n; i++)
        if ((rc = copy(job, b->ptrs[i], b->sizes[i], b->slots[i]->backing)) !=
            CUDA_SUCCESS) {
            failed(job, rc);
            return;
        }
    if (!wait_streams(job))
        return;
    for (size_t i = 0; i < b->n; i++)
        b->slots[i]->out = false;
    job->moved += batch_bytes(b);
}

/* Every move of the context is queued (map still locked): wait for them. */
static void finish_context(void *arg)
{
    struct swap *job = arg;
    const struct hook_driver *drv = hook_driver();

    if (job->to_device) {
        copy_back(job);
        if (wait_streams(job))
            job->moved += job->prefetched;
        return;
    }
    if (!wait_streams(job))
        return;
    job->moved += job->prefetched;
    discard_copied(job, drv);
}

/* With ctx current: move its managed allocations and wait for them. */
static bool swap_context(const struct hook_driver *drv, CUcontext ctx,
                         void *arg)
{
    struct swap *job = arg;

    job->n_streams = 0;
    while (drv->stream_create && job->n_streams < SWAP_STREAMS &&
           drv->stream_create(&job->streams[job->n_streams],
                              CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS)
        job->n_streams++;
    if (job->n_streams == 0) {
        log_warn("swap: cannot create a stream in context %p: its managed "
                 "memory stays where it is",
                 (void *)ctx);
        return true;
    }
    job->batch.n = 0;
    job->prefetched = 0;
    mem_for_each_managed(job->gpu, ctx, move_one, finish_context, job);
    for (int i = 0; drv->stream_destroy && i < job->n_streams; i++)
        drv->stream_destroy(job->streams[i]);
    return true;
}

static bool driver_copies(void)
{
    const struct hook_driver *drv = hook_driver();

    return drv && drv->mem_host_alloc && drv->mem_free_host &&
           drv->mem_discard_batch && HOOK_REAL(cuMemcpyDtoHAsync_v2) &&
           HOOK_REAL(cuMemcpyHtoDAsync_v2);
}

static uint64_t swap(int gpu, bool to_device)
{
    struct swap job = {.gpu = gpu, .to_device = to_device};
    uint64_t start, us;

    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS || mem_managed_bytes(gpu) == 0)
        return 0;
    job.copies = driver_copies();
    start = hook_now_ns();
    hook_for_each_context(gpu, swap_context, &job);
    us = (hook_now_ns() - start) / 1000;
    free(job.batch.ptrs);
    free(job.batch.sizes);
    free(job.batch.slots);
    if (job.failures > 0)
        log_warn("swap %s gpu %d: %d moves of managed memory failed (first "
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

void swap_forget(struct mem_swap_slot *slot)
{
    const struct hook_driver *drv;

    if (slot->backing && (drv = hook_driver()) && drv->mem_free_host)
        drv->mem_free_host(slot->backing);
    slot->backing = NULL;
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
