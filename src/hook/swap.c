/* swap.c - moving a process's evictable memory off a GPU and back, for the
 * client's swap_out / swap_in callbacks.
 *
 * What is evictable: what the application allocated with
 * cuMemAllocManaged, and, while memory is swappable, what it allocated
 * with cuMemAlloc_v2 / cuMemAllocPitch_v2, which vmm.c made as address
 * ranges with physical memory behind them ("converted"), and the
 * application's own VMM memory behind vmm_app.c's tokens. The allocation
 * map (ledger.c) knows each with its GPU and the context it was made in.
 * Pools, exported memory and arrays stay where they are.
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
 * The host copy is plain memory, made by the first swap-out and kept
 * (MADV_FREE) from its swap-in to the next swap-out, and the copies go
 * through staging.c's pinned ring at link speed. PREPARE_SWAP (policy.h
 * says when the scheduler sends it) makes the ring on a background
 * thread, so that no swap-out pins on its critical path (up to
 * 128 MiB: ~0.1 s), and then the host copies, so that no swap-out writes
 * host memory for the first time (half the link's speed); a swap-out that
 * comes first makes them itself, and one that comes meanwhile stops the
 * preparer and takes what it made.
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

#include "context.h"
#include "driver.h"
#include "ledger.h"
#include "staging.h"
#include "stats.h"
#include "swap.h"
#include "vmm.h"
#include "vmm_app.h"
#include "vmm_async.h"
#include "nvshare_client.h"
#include "log.h"

/* A blank allocation (allocations.c notes its birth): a converted one
 * that nothing can have written. Jobs that start together allocate first
 * and then wait for their turn: their swap-out only releases the physical
 * memory and their swap-in only makes it again, with nothing copied. Such
 * swaps move no bytes, so they do not count as measured swap speed. */
static bool blank(const struct mem_swap_slot *slot, int gpu)
{
    return slot->converted && slot->blank_at_birth &&
           nvshare_lock_grants(gpu) == slot->grants_at_birth;
}

/* Four streams keep both copy engines of a direction busy. */
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
    struct staging_run run; /* this context's copies */
    bool app_moving;        /* vmm_app.c's queued in this context */
    bool app_done;          /* ... in an earlier one */
    uint64_t app_bytes;     /* its bytes, counted once they moved */
    struct batch batch;     /* converted allocations moved in this context */
    uint64_t prefetched;    /* bytes prefetched in this context */
    uint64_t moved;         /* bytes moved and waited for, all contexts */
    uint64_t left_out;      /* swap-in: bytes that found no room on the GPU */
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

/* Swap-out of a converted allocation into its host copy: the one its
 * last swap-in left (its pages written already, unless the kernel took
 * them back), or a new one. */
static void copy_out(struct swap *job, CUdeviceptr ptr, uint64_t bytes,
                     struct mem_swap_slot *slot)
{
    if (slot->backing == NULL)
        slot->backing = staging_host_alloc(bytes);
    if (slot->backing == NULL || !batch_add(&job->batch, ptr, bytes, slot)) {
        failed(job, CUDA_ERROR_OUT_OF_MEMORY);
        return; /* stays resident */
    }
    staging_copy(&job->run, false, ptr, slot->backing, bytes);
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

/* Copies are waited for: the physical memory of what was copied can go.
 * After a failed copy everything stays in, its host copy retired. */
static void release_copied(struct swap *job, bool copied)
{
    struct batch *b = &job->batch;

    for (size_t i = 0; i < b->n; i++) {
        struct mem_swap_slot *slot = b->slots[i];
        CUresult rc = copied
                          ? vmm_unback(b->ptrs[i], b->sizes[i], &slot->physical)
                          : CUDA_ERROR_UNKNOWN;
        if (rc != CUDA_SUCCESS) {
            if (copied)
                failed(job, rc);
            staging_host_retire(slot->backing, b->sizes[i]);
            continue;
        }
        mem_slot_out(job->gpu, b->sizes[i], slot, true);
        if (!blank(slot, job->gpu))
            job->moved += b->sizes[i];
    }
}

/* Physical memory at the same addresses, then the data from the copies;
 * the copies are retired once they are waited for. */
static void copy_back(struct swap *job)
{
    struct batch *b = &job->batch;
    size_t backed = 0;
    CUresult rc;

    for (; backed < b->n; backed++) {
        struct mem_swap_slot *slot = b->slots[backed];
        /* Backed already when an earlier swap-in's copies failed. */
        if (slot->physical != 0)
            rc = CUDA_SUCCESS;
        else
            rc = vmm_back(job->gpu, b->ptrs[backed], b->sizes[backed],
                          &slot->physical);
        if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
            /* What is left stays out, its copy kept, for the next swap-in. */
            for (size_t i = backed; i < b->n; i++)
                job->left_out += b->sizes[i];
            break;
        }
        if (rc != CUDA_SUCCESS) {
            failed(job, rc);
            break;
        }
        if (!blank(slot, job->gpu))
            staging_copy(&job->run, true, b->ptrs[backed], slot->backing,
                         b->sizes[backed]);
    }
    if ((rc = staging_end(&job->run)) != CUDA_SUCCESS) {
        failed(job, rc);
        return; /* the copies stay: freeing them could lose the data */
    }
    for (size_t i = 0; i < backed; i++) {
        struct mem_swap_slot *slot = b->slots[i];
        mem_slot_out(job->gpu, b->sizes[i], slot, false);
        if (!blank(slot, job->gpu))
            job->moved += b->sizes[i];
        staging_host_retire(slot->backing, b->sizes[i]);
    }
}

/* Every move of the context is queued (map still locked): wait for them. */
static void finish_context(void *arg)
{
    struct swap *job = arg;
    int failures = job->failures;
    CUresult rc;

    if (job->to_device) {
        copy_back(job);
        job->moved += job->prefetched;
    } else {
        rc = staging_end(&job->run);
        if (rc != CUDA_SUCCESS)
            failed(job, rc);
        job->moved += job->prefetched;
        release_copied(job, rc == CUDA_SUCCESS);
    }
    if (job->app_moving) {
        bool copied = job->failures == failures;
        vmm_app_swap_end(job->gpu, job->to_device, copied);
        job->moved += copied ? job->app_bytes : 0;
    }
}

/* With ctx current: move its evictable allocations and wait for them. */
static bool swap_context(const struct hook_driver *drv, CUcontext ctx, void *arg)
{
    struct swap *job = arg;

    job->n_streams = 0;
    while (drv->stream_create && job->n_streams < SWAP_STREAMS &&
           drv->stream_create(&job->streams[job->n_streams],
                              CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS)
        job->n_streams++;
    if (job->n_streams == 0) {
        log_warn("swap: cannot create a stream in context %p: its evictable "
                 "memory stays where it is",
                 (void *)ctx);
        return true;
    }
    /* The ring is made by the first copy, if PREPARE_SWAP did not make it
     * before: a swap of blank allocations copies nothing. */
    staging_begin(&job->run, drv, ctx, job->streams, job->n_streams);
    job->batch.n = 0;
    job->prefetched = 0;
    /* The application's own VMM belongs to the GPU, not to a context: it
     * moves with the first one. */
    job->app_moving = !job->app_done;
    if (job->app_moving) {
        job->app_done = true;
        vmm_app_swap_begin();
        job->app_bytes = vmm_app_queue(job->gpu, job->to_device, &job->run);
    }
    mem_for_each_managed(job->gpu, ctx, move_one, finish_context, job);
    for (int i = 0; drv->stream_destroy && i < job->n_streams; i++)
        drv->stream_destroy(job->streams[i]);
    return true;
}

/* ---- the preparer's state: a swap waits for it ------------------------- */

/* Pinning 128 MiB takes about 0.1 s: made by the first swap-out, it would
 * be on the critical path of the job that waits for the room. A thread
 * makes it on PREPARE_SWAP instead. */
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set at exit, under pin_lock: the runtime and the driver tear down after
 * it, so no pin may start any more. */
static atomic_bool stopping;
/* A PREPARE_SWAP's thread runs (the ring, then the host copies); under
 * prepare_lock where it ends, for those that wait for it. */
static atomic_bool preparing;
static pthread_mutex_t prepare_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t prepare_done = PTHREAD_COND_INITIALIZER;
/* Swaps in progress. Host copies made ahead give way to them: a swap-out
 * makes its own copy of an allocation whose copy is not made yet, and
 * copies made ahead meanwhile are then wasted, both faulting in host
 * memory against each other (a 20 GiB swap-out on an H200's host ran at
 * 2.7 GB/s beside them, 24 GB/s without). */
static atomic_int swaps_running;

static void preparing_ended(void)
{
    pthread_mutex_lock(&prepare_lock);
    atomic_store(&preparing, false);
    pthread_cond_broadcast(&prepare_done);
    pthread_mutex_unlock(&prepare_lock);
}

static void wait_preparer(void)
{
    pthread_mutex_lock(&prepare_lock);
    while (atomic_load(&preparing))
        pthread_cond_wait(&prepare_done, &prepare_lock);
    pthread_mutex_unlock(&prepare_lock);
}

static bool make_ahead_gives_way(void)
{
    return atomic_load(&swaps_running) > 0 || vmm_room_awaited();
}

/* ---- one swap ------------------------------------------------------------ */

/* Moves gpu's evictable memory; returns the bytes moved, and for a
 * swap-in sets *left_out to those that stay out (no room). */
static uint64_t swap(int gpu, bool to_device, uint64_t *left_out)
{
    struct swap job = {.gpu = gpu, .to_device = to_device};
    uint64_t start, us;

    if (left_out)
        *left_out = 0;
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return 0;
    /* Freed memory kept for reuse is released, not copied. */
    if (!to_device)
        vmm_async_drain(gpu);
    if (mem_managed_bytes(gpu) == 0)
        return 0;
    start = hook_now_ns();
    /* What is made ahead so far goes to the allocations first: one step
     * per thread (64 MiB), or the ring's pin, which the swap needs. */
    atomic_fetch_add(&swaps_running, 1);
    wait_preparer();
    hook_for_each_context(gpu, swap_context, &job);
    atomic_fetch_sub(&swaps_running, 1);
    us = (hook_now_ns() - start) / 1000;
    free(job.batch.ptrs);
    free(job.batch.sizes);
    free(job.batch.slots);
    uint64_t app_out = vmm_app_out_bytes(gpu);
    mem_app_out(gpu, app_out);
    if (left_out)
        *left_out = job.left_out + app_out;
    /* CUDA_ERROR_DEINITIALIZED: the process is exiting and the driver
     * already shut down, which ends its memory anyway; no one to warn. */
    if (job.failures > 0 && job.first_error == CUDA_ERROR_DEINITIALIZED)
        log_debug("swap %s gpu %d: the driver is shutting down (the process "
                  "exits): %d moves not made",
                  to_device ? "in" : "out", gpu, job.failures);
    else if (job.failures > 0)
        log_warn("swap %s gpu %d: %d moves failed (first error %d)%s",
                 to_device ? "in" : "out", gpu, job.failures,
                 (int)job.first_error,
                 to_device ? "" : ": what did not move stays on the GPU");
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

/* ---- making the ring ahead of a swap-out ---------------------------------- */

/* The host copies a swap-out of gpu would write and that do not exist
 * yet, made now (staging.c): those of resident converted allocations that
 * hold data, and of the application's own mapped memory. */
struct host_copies {
    int gpu;
    struct staging_host_copy *v;
    size_t n, cap;
};

static void add_copy(struct staging_host_copy copy, void *arg)
{
    struct host_copies *c = arg;

    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        struct staging_host_copy *v = realloc(c->v, cap * sizeof(*v));
        if (v == NULL)
            return; /* the swap-out makes it */
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = copy;
}

static bool take_copy(CUcontext ctx, struct mem_swap_slot *slot, void *host)
{
    (void)ctx;
    if (slot->backing != NULL || slot->out)
        return false;
    slot->backing = host;
    return true;
}

static bool install_slot_copy(const struct staging_host_copy *copy, void *host)
{
    return mem_with_managed(copy->gpu, (CUdeviceptr)copy->key, copy->bytes,
                            take_copy, host);
}

static void add_slot(CUdeviceptr ptr, uint64_t bytes, CUcontext ctx,
                     struct mem_swap_slot *slot, void *arg)
{
    struct host_copies *c = arg;

    (void)ctx;
    if (!slot->converted || slot->out || slot->backing || blank(slot, c->gpu))
        return;
    add_copy((struct staging_host_copy){.key = ptr,
                                        .gpu = c->gpu,
                                        .bytes = bytes,
                                        .install = install_slot_copy},
             c);
}

static void make_host_copies(int gpu)
{
    struct host_copies copies = {.gpu = gpu};
    uint64_t start = hook_now_ns(), made;

    mem_for_each_managed_on_gpu(gpu, add_slot, &copies);
    vmm_app_host_copies(gpu, add_copy, &copies);
    made = staging_host_make_ahead(copies.v, copies.n, make_ahead_gives_way,
                                   atomic_load_explicit(&nvshare_gate_open[gpu],
                                                        memory_order_relaxed));
    hook_count(&hook_stat_events[HOOK_EV_HOST_MADE_AHEAD], made);
    if (made)
        log_debug("gpu %d: %.1f MiB of host copies made ahead in %.3f s", gpu,
                  (double)made / (1 << 20),
                  (double)(hook_now_ns() - start) / 1e9);
    free(copies.v);
}

/* Pins in one of gpu's contexts, outside the context registry's lock (a
 * drain or a swap takes it meanwhile); pin_lock keeps the context alive.
 * Then the host copies. */
static void *preparer_main(void *arg)
{
    int gpu = (int)(intptr_t)arg;
    CUcontext ctx, popped;
    bool go_on;

    hook_thread_relax_capture();
    pthread_mutex_lock(&pin_lock);
    if (!atomic_load(&stopping) && (ctx = hook_first_context(gpu)) != NULL &&
        HOOK_CALL_REAL(cuCtxPushCurrent_v2, (ctx)) == CUDA_SUCCESS) {
        staging_make(ctx);
        HOOK_CALL_REAL(cuCtxPopCurrent_v2, (&popped));
    }
    go_on = !atomic_load(&stopping);
    pthread_mutex_unlock(&pin_lock);
    if (go_on)
        make_host_copies(gpu);
    preparing_ended();
    return NULL;
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

void hook_prepare_swap(int gpu, void *user)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, old;

    (void)user;
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS || atomic_exchange(&preparing, true))
        return;
    pthread_once(&once, register_stop);
    /* Signals stay the application's threads' business. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attr, preparer_main, (void *)(intptr_t)gpu) != 0)
        preparing_ended(); /* the swap-out makes the ring */
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void swap_pins_pause(void)
{
    pthread_mutex_lock(&pin_lock);
}

void swap_pins_resume(void)
{
    pthread_mutex_unlock(&pin_lock);
}

/* A context's destruction waits for a pin in progress (the ring may be
 * being made in it), and takes the ring with it if it was made there. */
static void context_destroyed(CUcontext gone)
{
    swap_pins_resume();
    if (gone)
        staging_context_destroyed(gone);
}

__attribute__((constructor)) static void observe_contexts(void)
{
    static const struct hook_context_observer pins = {.destroying =
                                                          swap_pins_pause,
                                                      .destroyed =
                                                          context_destroyed};

    hook_context_observe(&pins);
}

/* The child has no preparer thread nor swap, and the locks may have been
 * held by the parent's threads. */
static void forget_preparer_in_child(void)
{
    pthread_mutex_init(&pin_lock, NULL);
    pthread_mutex_init(&prepare_lock, NULL);
    pthread_cond_init(&prepare_done, NULL);
    atomic_store(&preparing, false);
    atomic_store(&swaps_running, 0);
}

__attribute__((constructor)) static void register_swap_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_preparer_in_child);
}

uint64_t hook_swap_out(int gpu, void *user)
{
    (void)user;
    return swap(gpu, false, NULL);
}

/* Per GPU: a swap-in left memory out, and said so once. */
static atomic_bool told_left_out[NVSHARE_MAX_GPUS];

bool hook_swap_in(int gpu, void *user, uint64_t *bytes)
{
    uint64_t left_out;

    (void)user;
    *bytes = swap(gpu, true, &left_out);
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return true;
    if (left_out == 0) {
        if (atomic_exchange(&told_left_out[gpu], false))
            log_info("gpu %d: all of this process's memory is back", gpu);
        return true;
    }
    if (!atomic_exchange(&told_left_out[gpu], true))
        log_warn("gpu %d: %.1f MiB of this process's memory found no room on "
                 "the GPU and stays in host memory: its GPU work waits until "
                 "it is back",
                 gpu, (double)left_out / (1 << 20));
    return false;
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

/* Test introspection: returns once the ring asked for is made (or could
 * not be). */
HOOK_EXPORT void nvshare_hook_wait_prepared(int gpu)
{
    (void)gpu;
    wait_preparer();
}

HOOK_EXPORT uint64_t nvshare_hook_swap_in(int gpu)
{
    uint64_t bytes;

    hook_swap_in(gpu, NULL, &bytes);
    return bytes;
}

/* Test introspection: bytes of live evictable allocations on gpu. */
HOOK_EXPORT uint64_t nvshare_hook_managed_bytes(int gpu)
{
    return mem_managed_bytes(gpu);
}
