/* context.c - context wrappers: which GPU each thread submits to, and which
 * contexts a drain must synchronize.
 *
 * Every thread's current GPU lives in hook_current_gpu, updated here when a
 * context is created, made current, pushed, popped or destroyed, so that
 * the submit path reads a thread-local instead of asking the driver. A
 * CUdevice is the device ordinal, which is also the client's GPU index
 * (client_start.c registers UUIDs in ordinal order). With one GPU nothing needs
 * updating: the index is always 0.
 *
 * The registry lists every context this process created or retained, with
 * its GPU, so that the client's drain can synchronize exactly those. A
 * context leaves the registry under the registry lock, and the real destroy
 * or final release runs under it too, so a drain never touches a dead one. */
#include <pthread.h>

#include "context.h"
#include "driver.h"
#include "stats.h"
#include "log.h"

#define MAX_CONTEXTS 256

struct tracked_context {
    CUcontext ctx;
    int gpu;
    int primary_refs; /* retains of a primary context; 0 for created ones */
};

static struct tracked_context contexts[MAX_CONTEXTS];
static int n_contexts;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

HOOK_TLS int hook_current_gpu;

/* Who hears of contexts: modules above this one register at load. */
#define MAX_OBSERVERS 4
static const struct hook_context_observer *observers[MAX_OBSERVERS];
static int n_observers;
/* GPUs the client tracks (0 until it starts): with one, no thread's
 * current GPU needs following. */
static _Atomic int gpus_tracked;

void hook_context_observe(const struct hook_context_observer *observer)
{
    if (n_observers < MAX_OBSERVERS)
        observers[n_observers++] = observer;
}

void hook_context_track_gpus(int count)
{
    atomic_store_explicit(&gpus_tracked, count, memory_order_release);
}

static bool multi_gpu(void)
{
    return atomic_load_explicit(&gpus_tracked, memory_order_acquire) > 1;
}

static void announce_made(void)
{
    for (int i = 0; i < n_observers; i++)
        if (observers[i]->made)
            observers[i]->made();
}

static void announce_destroying(void)
{
    for (int i = 0; i < n_observers; i++)
        if (observers[i]->destroying)
            observers[i]->destroying();
}

static void announce_destroyed(CUcontext gone)
{
    for (int i = 0; i < n_observers; i++)
        if (observers[i]->destroyed)
            observers[i]->destroyed(gone);
}

static int gpu_of_device(CUdevice dev)
{
    return dev >= 0 && dev < NVSHARE_MAX_GPUS ? (int)dev : 0;
}

static struct tracked_context *find_locked(CUcontext ctx)
{
    for (int i = 0; i < n_contexts; i++)
        if (contexts[i].ctx == ctx)
            return &contexts[i];
    return NULL;
}

static void add_locked(CUcontext ctx, int gpu, int primary_refs)
{
    if (n_contexts == MAX_CONTEXTS) {
        log_warn("more than %d contexts: context %p is not drained on "
                 "preemption",
                 MAX_CONTEXTS, (void *)ctx);
        return;
    }
    contexts[n_contexts++] = (struct tracked_context){ctx, gpu, primary_refs};
}

static void remove_locked(struct tracked_context *entry)
{
    *entry = contexts[--n_contexts];
}

/* The GPU of ctx, which the caller has just made current. Contexts made
 * elsewhere (green contexts) are asked of the driver. */
static int gpu_of_current(CUcontext ctx)
{
    const struct hook_driver *drv = hook_driver();
    struct tracked_context *entry;
    CUdevice dev = 0;
    int gpu = -1;

    pthread_mutex_lock(&registry_lock);
    if ((entry = find_locked(ctx)) != NULL)
        gpu = entry->gpu;
    pthread_mutex_unlock(&registry_lock);
    if (gpu < 0 && drv && drv->ctx_get_device &&
        drv->ctx_get_device(&dev) == CUDA_SUCCESS)
        gpu = gpu_of_device(dev);
    return gpu < 0 ? 0 : gpu;
}

/* After a call that may have changed the current context to ctx. */
static void follow_current(CUcontext ctx)
{
    if (multi_gpu() && ctx != NULL)
        hook_current_gpu = gpu_of_current(ctx);
}

/* After a call that changed the current context to one we do not know. */
static void follow_driver_current(void)
{
    const struct hook_driver *drv = hook_driver();
    CUcontext ctx = NULL;

    if (multi_gpu() && drv && drv->ctx_get_current &&
        drv->ctx_get_current(&ctx) == CUDA_SUCCESS)
        follow_current(ctx);
}

/* First context of the process: time to start the client (client_start.c
 * hears of it). */
static void context_made(CUcontext ctx, CUdevice dev, bool primary)
{
    struct tracked_context *entry;

    pthread_mutex_lock(&registry_lock);
    if (primary && (entry = find_locked(ctx)) != NULL)
        entry->primary_refs++;
    else
        add_locked(ctx, gpu_of_device(dev), primary ? 1 : 0);
    pthread_mutex_unlock(&registry_lock);
    log_debug("context %p on gpu %d %s", (void *)ctx, gpu_of_device(dev),
              primary ? "retained" : "created");
    announce_made();
}

static CUresult created(CUresult rc, CUcontext *pctx, CUdevice dev)
{
    if (rc == CUDA_SUCCESS) {
        context_made(*pctx, dev, false);
        hook_current_gpu = gpu_of_device(dev);
    }
    return rc;
}

HOOK_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags,
                                    CUdevice dev)
{
    hook_count(&hook_stat_calls[NVSHARE_ID_cuCtxCreate_v2], 1);
    return created(HOOK_CALL_REAL(cuCtxCreate_v2, (pctx, flags, dev)), pctx, dev);
}

HOOK_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx,
                                    CUexecAffinityParam *paramsArray,
                                    int numParams, unsigned int flags,
                                    CUdevice dev)
{
    hook_count(&hook_stat_calls[NVSHARE_ID_cuCtxCreate_v3], 1);
    return created(HOOK_CALL_REAL(cuCtxCreate_v3,
                                  (pctx, paramsArray, numParams, flags, dev)),
                   pctx, dev);
}

HOOK_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx,
                                    CUctxCreateParams *ctxCreateParams,
                                    unsigned int flags, CUdevice dev)
{
    hook_count(&hook_stat_calls[NVSHARE_ID_cuCtxCreate_v4], 1);
    return created(HOOK_CALL_REAL(cuCtxCreate_v4,
                                  (pctx, ctxCreateParams, flags, dev)),
                   pctx, dev);
}

HOOK_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc;

    hook_count(&hook_stat_calls[NVSHARE_ID_cuDevicePrimaryCtxRetain], 1);
    rc = HOOK_CALL_REAL(cuDevicePrimaryCtxRetain, (pctx, dev));
    if (rc == CUDA_SUCCESS)
        context_made(*pctx, dev, true);
    return rc;
}

HOOK_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    struct tracked_context *entry = NULL;
    CUcontext gone = NULL;
    CUresult rc;

    hook_count(&hook_stat_calls[NVSHARE_ID_cuDevicePrimaryCtxRelease_v2], 1);
    announce_destroying();
    pthread_mutex_lock(&registry_lock);
    rc = HOOK_CALL_REAL(cuDevicePrimaryCtxRelease_v2, (dev));
    for (int i = 0; i < n_contexts && entry == NULL; i++)
        if (contexts[i].primary_refs > 0 && contexts[i].gpu == gpu_of_device(dev))
            entry = &contexts[i];
    if (rc == CUDA_SUCCESS && entry != NULL && --entry->primary_refs == 0) {
        gone = entry->ctx;
        remove_locked(entry);
    }
    pthread_mutex_unlock(&registry_lock);
    announce_destroyed(gone);
    return rc;
}

HOOK_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    struct tracked_context *entry;
    CUresult rc;

    hook_count(&hook_stat_calls[NVSHARE_ID_cuCtxDestroy_v2], 1);
    announce_destroying();
    pthread_mutex_lock(&registry_lock);
    rc = HOOK_CALL_REAL(cuCtxDestroy_v2, (ctx));
    if (rc == CUDA_SUCCESS && (entry = find_locked(ctx)) != NULL)
        remove_locked(entry);
    pthread_mutex_unlock(&registry_lock);
    announce_destroyed(rc == CUDA_SUCCESS ? ctx : NULL);
    if (rc == CUDA_SUCCESS)
        follow_driver_current();
    return rc;
}

/* What cuCtxSetCurrent and cuCtxPushCurrent_v2 do once the driver has
 * answered rc: ctx is the thread's current context when it succeeded. */
static CUresult made_current(CUresult rc, CUcontext ctx)
{
    if (rc == CUDA_SUCCESS)
        follow_current(ctx);
    return rc;
}

HOOK_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    hook_count(&hook_stat_calls[NVSHARE_ID_cuCtxSetCurrent], 1);
    return made_current(HOOK_CALL_REAL(cuCtxSetCurrent, (ctx)), ctx);
}

HOOK_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    hook_count(&hook_stat_calls[NVSHARE_ID_cuCtxPushCurrent_v2], 1);
    return made_current(HOOK_CALL_REAL(cuCtxPushCurrent_v2, (ctx)), ctx);
}

HOOK_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult rc;

    hook_count(&hook_stat_calls[NVSHARE_ID_cuCtxPopCurrent_v2], 1);
    rc = HOOK_CALL_REAL(cuCtxPopCurrent_v2, (pctx));
    if (rc == CUDA_SUCCESS)
        follow_driver_current();
    return rc;
}

/* Runs fn on every registered context of gpu, with the context pushed on
 * the calling thread and stream capture relaxed: a drain must neither fail
 * nor invalidate an application's graph capture in progress. Stops early
 * when fn returns false; returns false then. */
bool hook_for_each_context(int gpu,
                           bool (*fn)(const struct hook_driver *drv,
                                      CUcontext ctx, void *arg),
                           void *arg)
{
    const struct hook_driver *drv = hook_driver();
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    bool all = true;
    CUcontext popped;

    if (drv == NULL)
        return true;
    if (drv->exchange_capture_mode)
        drv->exchange_capture_mode(&mode);
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < n_contexts && all; i++) {
        if (contexts[i].gpu != gpu ||
            HOOK_CALL_REAL(cuCtxPushCurrent_v2, (contexts[i].ctx)) != CUDA_SUCCESS)
            continue;
        all = fn(drv, contexts[i].ctx, arg);
        HOOK_CALL_REAL(cuCtxPopCurrent_v2, (&popped));
    }
    pthread_mutex_unlock(&registry_lock);
    if (drv->exchange_capture_mode)
        drv->exchange_capture_mode(&mode);
    return all;
}

CUcontext hook_first_context(int gpu)
{
    CUcontext ctx = NULL;

    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < n_contexts && ctx == NULL; i++)
        if (contexts[i].gpu == gpu)
            ctx = contexts[i].ctx;
    pthread_mutex_unlock(&registry_lock);
    return ctx;
}

bool hook_context_live(CUcontext ctx)
{
    bool live;

    pthread_mutex_lock(&registry_lock);
    live = find_locked(ctx) != NULL;
    pthread_mutex_unlock(&registry_lock);
    return live;
}

/* In a forked child the parent's contexts are unusable and the registry
 * lock may have been held by a thread that does not exist there. */
static void forget_contexts_in_child(void)
{
    pthread_mutex_init(&registry_lock, NULL);
    n_contexts = 0;
}

__attribute__((constructor)) static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_contexts_in_child);
}
