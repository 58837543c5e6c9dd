/* swap.c - moving a process's evictable memory off a GPU and back, for the
 * client's swap_out / swap_in callbacks.
 *
 * What is evictable: what the application allocated with
 * cuMemAllocManaged, and, while memory is swappable, what it allocated
 * with cuMemAlloc_v2 / cuMemAllocPitch_v2, which vmm.c made as address
 * ranges with physical memory behind them ("converted"). The allocation
 * map (memory.c) knows each with its GPU and the context it was made in.
 * Pools, the application's own VMM ranges and arrays stay where they are.
 *
 * A swap-out copies each converted allocation in chunks, over several
 * streams, into a host copy, then unmaps and releases its physical memory:
 * the GPU has it back at once. A swap-in maps new physical memory at the
 * same addresses and copies the data back. This is only correct because
 * every copy or kernel that could reach converted memory is gated, so it
 * runs after the swap-in, and the application never reads device memory
 * on the host. The application's own managed memory may be read on the
 * host at any time and is prefetched instead.
 *
 * The host copy is pinned, so that the copy runs at link speed, and made
 * ahead: pinning costs about 1.5 GB/s (cuMemHostAlloc of 6 GiB: 4 s on an
 * H100, the copy into it 0.14 s), so PREPARE_SWAP, sent as soon as a
 * GPU's clients hold more than it admits, starts a background thread per
 * GPU that pins a copy for every converted allocation without one, and
 * for each one allocated afterwards (below, "preparing"). A swap-out never
 * pins: what has no copy yet goes to plain host memory, which the driver
 * copies through its own staging buffers (~13 GB/s), freed at the swap-in.
 *
 * A swap runs on the client's thread (or any thread that is not in a
 * submission), never through the wrappers, so it is never gated: for each
 * context this process has on the GPU, it pushes that context, creates
 * private non-blocking streams there, queues the moves, waits for them,
 * destroys the streams and pops the context again, so the calling thread's
 * current context is what it was. The map stays locked from the first
 * move queued to the last one waited for: an application thread that frees
 * or allocates evictable memory meanwhile waits that long (the swap time),
 * and nothing is freed, reused or released under a transfer. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "hook.h"
#include "log.h"

/* A blank allocation is a converted one that nothing can have written:
 * made while its process could not submit to the GPU (gate closed), and
 * the process has not been granted the GPU since (every copy, memset and
 * kernel that could reach it is gated, and the application never touches
 * converted memory on the host). Jobs that start together allocate first
 * and then wait for their turn: their swap-out only releases the physical
 * memory and their swap-in only makes it again, with nothing copied.
 * Such swaps move no bytes, so they do not count as measured swap speed. */
void swap_note_birth(struct mem_swap_slot *slot, int gpu)
{
    slot->blank_at_birth =
        !atomic_load_explicit(&nvshare_gate_open[gpu], memory_order_acquire);
    slot->grants_at_birth = nvshare_lock_grants(gpu);
}

static bool blank(const struct mem_swap_slot *slot, int gpu)
{
    return slot->converted && slot->blank_at_birth &&
           nvshare_lock_grants(gpu) == slot->grants_at_birth;
}

/* Copies of 64 MiB reach the link's speed; four streams keep both copy
 * engines of a direction busy while the next chunk is queued. */
#define SWAP_CHUNK (64ull << 20)
#define SWAP_STREAMS 4

/* Converted allocations whose physical memory is released on swap-out
 * once the copies of this context are done, or made again on swap-in
 * before they start. */
struct batch {
    CUdeviceptr *ptrs;
    size_t *sizes;
    struct mem_swap_slot **slots;
    size_t n, cap;
};

struct swap {
    int gpu;
    bool to_device;
    CUstream streams[SWAP_STREAMS];
    int n_streams;
    unsigned next_stream;
    struct batch batch;  /* converted allocations copied in this context */
    uint64_t prefetched; /* bytes prefetched in this context */
    uint64_t moved;      /* bytes moved and waited for, all contexts */
    int failures;
    CUresult first_error;
};

static void failed(struct swap *job, CUresult rc)
{
    if (job->failures++ == 0)
        job->first_error = rc;
}

static CUresult prefetch(const struct swap *job, CUdeviceptr ptr, uint64_t bytes)
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
static CUresult copy(struct swap *job, CUdeviceptr ptr, uint64_t bytes, void *host)
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

/* Swap-out of a converted allocation: into its pinned copy, or into plain
 * host memory when it has none yet (the driver stages that copy). */
static void copy_out(struct swap *job, CUdeviceptr ptr, uint64_t bytes,
                     struct mem_swap_slot *slot)
{
    CUresult rc;

    if (slot->backing == NULL) {
        hook_count(&hook_stat_events[HOOK_EV_SWAP_UNPINNED], 1);
        if ((slot->backing = malloc((size_t)bytes)) == NULL) {
            failed(job, CUDA_ERROR_OUT_OF_MEMORY);
            return; /* stays resident */
        }
        slot->pageable = true;
    }
    if (!batch_add(&job->batch, ptr, bytes, slot)) {
        failed(job, CUDA_ERROR_OUT_OF_MEMORY);
        return;
    }
    if ((rc = copy(job, ptr, bytes, slot->backing)) != CUDA_SUCCESS) {
        failed(job, rc);
        job->batch.n--; /* not released: its physical memory still holds it */
    }
}

static void move_one(CUdeviceptr ptr, uint64_t bytes,
                     struct mem_swap_slot *slot, void *arg)
{
    struct swap *job = arg;
    CUresult rc;

    if (slot->converted) {
        /* Out since an earlier swap-out: only a swap-in touches it; in:
         * only a swap-out. */
        if (slot->out != job->to_device)
            return;
        if (job->to_device || blank(slot, job->gpu)) {
            if (!batch_add(&job->batch, ptr, bytes, slot))
                failed(job, CUDA_ERROR_OUT_OF_MEMORY);
        } else {
            copy_out(job, ptr, bytes, slot);
        }
        return;
    }
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

/* Copies are waited for: the physical memory of what was copied can go. */
static void release_copied(struct swap *job)
{
    struct batch *b = &job->batch;

    for (size_t i = 0; i < b->n; i++) {
        CUresult rc = vmm_unback(b->ptrs[i], b->sizes[i], &b->slots[i]->physical);
        if (rc != CUDA_SUCCESS) {
            failed(job, rc); /* copied but still resident: it stays in */
            continue;
        }
        b->slots[i]->out = true;
        if (!blank(b->slots[i], job->gpu))
            job->moved += b->sizes[i];
    }
}

static void drop_pageable(struct mem_swap_slot *slot)
{
    if (slot->pageable) {
        free(slot->backing);
        slot->backing = NULL;
        slot->pageable = false;
    }
}

/* Physical memory at the same addresses, then the data from the copies. */
static void copy_back(struct swap *job)
{
    struct batch *b = &job->batch;
    size_t backed = 0;
    CUresult rc;

    for (; backed < b->n; backed++) {
        struct mem_swap_slot *slot = b->slots[backed];
        if ((rc = vmm_back(job->gpu, b->ptrs[backed], b->sizes[backed],
                           &slot->physical)) != CUDA_SUCCESS) {
            failed(job, rc);
            break;
        }
        if (!blank(slot, job->gpu) &&
            (rc = copy(job, b->ptrs[backed], b->sizes[backed], slot->backing)) !=
                CUDA_SUCCESS) {
            failed(job, rc);
            break;
        }
    }
    if (!wait_streams(job))
        return;
    for (size_t i = 0; i < backed; i++) {
        b->slots[i]->out = false;
        if (!blank(b->slots[i], job->gpu))
            job->moved += b->sizes[i];
        drop_pageable(b->slots[i]);
    }
}

/* Every move of the context is queued (map still locked): wait for them. */
static void finish_context(void *arg)
{
    struct swap *job = arg;

    if (job->to_device)
        copy_back(job);
    if (!wait_streams(job))
        return;
    job->moved += job->prefetched;
    if (!job->to_device)
        release_copied(job);
}

/* With ctx current: move its managed allocations and wait for them. */
static bool swap_context(const struct hook_driver *drv, CUcontext ctx, void *arg)
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
           HOOK_REAL(cuMemcpyDtoHAsync_v2) && HOOK_REAL(cuMemcpyHtoDAsync_v2);
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
    free(job.batch.ptrs);
    free(job.batch.sizes);
    free(job.batch.slots);
    /* CUDA_ERROR_DEINITIALIZED: the process is exiting and the driver
     * already shut down, which ends its memory anyway; no one to warn. */
    if (job.failures > 0 && job.first_error == CUDA_ERROR_DEINITIALIZED)
        log_debug("swap %s gpu %d: the driver is shutting down (the process "
                  "exits): %d moves not made",
                  to_device ? "in" : "out", gpu, job.failures);
    else if (job.failures > 0)
        log_warn("swap %s gpu %d: %d moves of managed memory failed (first "
                 "error %d)",
                 to_device ? "in" : "out", gpu, job.failures,
                 (int)job.first_error);
    log_debug("swap %s gpu %d: %llu bytes in %llu us", to_device ? "in" : "out",
              gpu, (unsigned long long)job.moved, (unsigned long long)us);
    hook_count(&hook_stat_events[to_device ? HOOK_EV_SWAP_INS : HOOK_EV_SWAP_OUTS],
               1);
    hook_count(&hook_stat_events[to_device ? HOOK_EV_SWAP_IN_BYTES
                                           : HOOK_EV_SWAP_OUT_BYTES],
               job.moved);
    hook_count(&hook_stat_events[to_device ? HOOK_EV_SWAP_IN_US : HOOK_EV_SWAP_OUT_US],
               us);
    return job.moved;
}

/* ---- preparing the pinned copies ahead of a swap-out ------------------- */

/* Pinning host memory costs about 1.5 GB/s (the kernel locks every page),
 * thirty times slower than the copy into it: made by the swap-out, the
 * pinned copies would double or triple its time on the critical path of
 * the job that waits for the room. PREPARE_SWAP comes as soon as the GPU's
 * clients hold more than it admits, typically when the jobs allocate, and
 * one background thread per GPU makes them then. */
struct preparer {
    bool asked;   /* PREPARE_SWAP came: later allocations are prepared too */
    bool running; /* its thread works (or is about to) */
    bool again;   /* something to prepare came since the thread last looked */
};

static struct preparer preparers[NVSHARE_MAX_GPUS];
static pthread_mutex_t preparers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t preparer_done = PTHREAD_COND_INITIALIZER;


/* Held while one pinned copy is made (seconds), and around the destruction
 * of a context, so that no context dies under a pin. A swap-out does not
 * take it: it holds the allocation map, under which a finished copy is
 * attached, so it sees each allocation with its copy or without. */
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set at exit, under pin_lock: the runtime and the driver tear down
 * after it, so no pin may start any more. */
static atomic_bool stopping;

struct unprepared {
    CUdeviceptr ptr;
    uint64_t bytes;
};

struct unprepared_list {
    struct unprepared *items;
    size_t n, cap;
};

static void collect_unprepared(CUdeviceptr ptr, uint64_t bytes, CUcontext ctx,
                               struct mem_swap_slot *slot, void *arg)
{
    struct unprepared_list *list = arg;

    (void)ctx;
    if (!slot->converted || slot->backing != NULL)
        return;
    if (list->n == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 64;
        struct unprepared *items = realloc(list->items, cap * sizeof(*items));
        if (items == NULL)
            return; /* the swap-out pins the rest */
        list->items = items;
        list->cap = cap;
    }
    list->items[list->n++] = (struct unprepared){ptr, bytes};
}

/* The allocation still needs a copy: in which context to make it. */
static bool still_unprepared(CUcontext ctx, struct mem_swap_slot *slot, void *arg)
{
    *(CUcontext *)arg = ctx;
    return slot->converted && slot->backing == NULL && ctx != NULL;
}

/* Gives the copy to the allocation it was made for, if the map still holds
 * it (same pointer and size) without one. */
static bool attach_copy(CUcontext ctx, struct mem_swap_slot *slot, void *arg)
{
    (void)ctx;
    if (!slot->converted || slot->backing != NULL)
        return false;
    slot->backing = arg;
    return true;
}

/* Makes one pinned copy with the map unlocked: application threads keep
 * allocating and freeing meanwhile; the allocation is looked up again
 * before the copy is attached. */
static void prepare_one(int gpu, const struct hook_driver *drv,
                        const struct unprepared *u)
{
    CUcontext ctx = NULL, popped;
    void *host = NULL;

    pthread_mutex_lock(&pin_lock);
    if (!atomic_load(&stopping) &&
        mem_with_managed(gpu, u->ptr, u->bytes, still_unprepared, &ctx) &&
        hook_context_live(ctx) &&
        HOOK_CALL_REAL(cuCtxPushCurrent_v2, (ctx)) == CUDA_SUCCESS) {
        CUresult rc = drv->mem_host_alloc(&host, (size_t)u->bytes, 0);
        if (rc != CUDA_SUCCESS)
            log_debug("prepare swap gpu %d: no pinned copy of %llu bytes (%d)",
                      gpu, (unsigned long long)u->bytes, (int)rc);
        else if (mem_with_managed(gpu, u->ptr, u->bytes, attach_copy, host))
            hook_count(&hook_stat_events[HOOK_EV_SWAP_PINNED_AHEAD], 1);
        else
            drv->mem_free_host(host); /* freed meanwhile, or copied out */
        HOOK_CALL_REAL(cuCtxPopCurrent_v2, (&popped));
    }
    pthread_mutex_unlock(&pin_lock);
}

static void prepare_gpu(int gpu)
{
    const struct hook_driver *drv = hook_driver();
    struct unprepared_list list = {0};

    if (drv == NULL || !driver_copies())
        return;
    mem_for_each_managed_on_gpu(gpu, collect_unprepared, &list);
    for (size_t i = 0; i < list.n && !atomic_load(&stopping); i++)
        prepare_one(gpu, drv, &list.items[i]);
    free(list.items);
}

static void *preparer_main(void *arg)
{
    int gpu = (int)(intptr_t)arg;
    struct preparer *p = &preparers[gpu];

    for (;;) {
        pthread_mutex_lock(&preparers_lock);
        if (!p->again || atomic_load(&stopping)) {
            p->running = false;
            pthread_cond_broadcast(&preparer_done);
            pthread_mutex_unlock(&preparers_lock);
            return NULL;
        }
        p->again = false;
        pthread_mutex_unlock(&preparers_lock);
        prepare_gpu(gpu);
    }
}

/* atexit handlers run before the runtime's (registered earlier) and
 * before the driver's destructors: a pin in progress ends first. */
static void stop_preparing(void)
{
    pthread_mutex_lock(&pin_lock);
    atomic_store(&stopping, true);
    pthread_mutex_unlock(&pin_lock);
}

static void register_stop(void)
{
    atexit(stop_preparing);
}

/* Wakes gpu's preparer, or starts it. preparers_lock held. */
static void kick_locked(int gpu)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    struct preparer *p = &preparers[gpu];
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, old;
    int rc;

    p->again = true;
    if (p->running)
        return;
    pthread_once(&once, register_stop);
    /* Signals stay the application's threads' business. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&thread, &attr, preparer_main, (void *)(intptr_t)gpu);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    p->running = rc == 0;
    if (rc != 0)
        log_debug("prepare swap gpu %d: no thread (%d): the swap-out pins", gpu,
                  rc);
}

void hook_prepare_swap(int gpu, void *user)
{
    (void)user;
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&preparers_lock);
    preparers[gpu].asked = true;
    kick_locked(gpu);
    pthread_mutex_unlock(&preparers_lock);
}

void swap_prepare_if_asked(int gpu)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&preparers_lock);
    if (preparers[gpu].asked)
        kick_locked(gpu);
    pthread_mutex_unlock(&preparers_lock);
}

void swap_pins_pause(void)
{
    pthread_mutex_lock(&pin_lock);
}

void swap_pins_resume(void)
{
    pthread_mutex_unlock(&pin_lock);
}

/* The child has no preparer threads, and a lock may have been held by one
 * of the parent's. */
static void forget_preparers_in_child(void)
{
    pthread_mutex_init(&preparers_lock, NULL);
    pthread_cond_init(&preparer_done, NULL);
    pthread_mutex_init(&pin_lock, NULL);
    for (int gpu = 0; gpu < NVSHARE_MAX_GPUS; gpu++)
        preparers[gpu] = (struct preparer){0};
}

__attribute__((constructor)) static void register_swap_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_preparers_in_child);
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

    drop_pageable(slot);
    if (slot->backing && (drv = hook_driver()) && drv->mem_free_host)
        drv->mem_free_host(slot->backing);
    slot->backing = NULL;
}

/* Test introspection: the client's callbacks, called directly. */
HOOK_EXPORT uint64_t nvshare_hook_swap_out(int gpu)
{
    return hook_swap_out(gpu, NULL);
}

HOOK_EXPORT void nvshare_hook_prepare_swap(int gpu)
{
    hook_prepare_swap(gpu, NULL);
}

/* Test introspection: returns once gpu's preparer has nothing left to do. */
HOOK_EXPORT void nvshare_hook_wait_prepared(int gpu)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&preparers_lock);
    while (preparers[gpu].running)
        pthread_cond_wait(&preparer_done, &preparers_lock);
    pthread_mutex_unlock(&preparers_lock);
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
