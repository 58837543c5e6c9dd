/* context.c - contexts: created, primary (one per device, retained), and
 * the per-thread stack of current contexts. */
#include <stdlib.h>

#include "fake.h"

#define STACK_DEPTH 16

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread struct fake_ctx *stack[STACK_DEPTH];
static __thread int depth;

static struct fake_ctx *primary[FAKE_MAX_DEVICES];
static int primary_refs[FAKE_MAX_DEVICES];

struct fake_ctx *fake_current(void)
{
    return depth > 0 ? stack[depth - 1] : NULL;
}

uint64_t fake_ctx_busy_until_locked(struct fake_ctx *ctx)
{
    uint64_t until;

    if (!fake_stream_settle_locked(&ctx->legacy))
        return FAKE_UNRESOLVED;
    until = ctx->legacy.busy_until_ns;
    for (struct fake_stream *s = ctx->streams; s; s = s->next) {
        if (!fake_stream_settle_locked(s))
            return FAKE_UNRESOLVED;
        if (s->busy_until_ns > until)
            until = s->busy_until_ns;
    }
    return until;
}

static struct fake_ctx *new_context(CUdevice dev)
{
    struct fake_ctx *ctx = calloc(1, sizeof(*ctx));

    if (ctx != NULL) {
        ctx->dev = dev;
        ctx->legacy.ctx = ctx;
        fake_shared_gpu_join(dev); /* the fake NVML lists it */
    }
    return ctx;
}

static CUresult push(struct fake_ctx *ctx)
{
    if (depth == STACK_DEPTH)
        return CUDA_ERROR_INVALID_VALUE;
    stack[depth++] = ctx;
    return CUDA_SUCCESS;
}

static CUresult create(CUcontext *pctx, CUdevice dev)
{
    struct fake_ctx *ctx;

    if (!fake_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    if ((ctx = new_context(dev)) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pctx = (CUcontext)ctx;
    return push(ctx);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    return create(pctx, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                        int numParams, unsigned int flags, CUdevice dev)
{
    (void)paramsArray, (void)numParams, (void)flags;
    return create(pctx, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                        unsigned int flags, CUdevice dev)
{
    (void)ctxCreateParams, (void)flags;
    return create(pctx, dev);
}

static CUresult synchronize(struct fake_ctx *ctx)
{
    uint64_t until;
    unsigned round = 0;

    if (ctx == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    for (;;) {
        pthread_mutex_lock(&fake_lock);
        until = fake_ctx_busy_until_locked(ctx);
        pthread_mutex_unlock(&fake_lock);
        if (until != FAKE_UNRESOLVED)
            break;
        fake_collective_pause(&round); /* a collective waits for its peers */
    }
    fake_wait_until(until);
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    /* Only this thread's stack is cleaned: enough for the tests. */
    for (int i = 0; i < depth; i++)
        if (stack[i] == (struct fake_ctx *)ctx) {
            for (int j = i; j + 1 < depth; j++)
                stack[j] = stack[j + 1];
            depth--;
            i--;
        }
    synchronize((struct fake_ctx *)ctx);
    free(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (ctx == NULL) {
        if (depth > 0)
            depth--;
        return CUDA_SUCCESS;
    }
    if (depth == 0)
        return push((struct fake_ctx *)ctx);
    stack[depth - 1] = (struct fake_ctx *)ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    *pctx = (CUcontext)fake_current();
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    return ctx ? push((struct fake_ctx *)ctx) : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    if (depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    depth--;
    if (pctx)
        *pctx = (CUcontext)stack[depth];
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    struct fake_ctx *ctx = fake_current();

    if (ctx == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = ctx->dev;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = CUDA_SUCCESS;

    if (!fake_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fake_lock);
    if (primary[dev] == NULL)
        primary[dev] = new_context(dev);
    if (primary[dev] == NULL)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        primary_refs[dev]++;
        *pctx = (CUcontext)primary[dev];
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

/* The primary context outlives its last release here (a real driver
 * destroys it): handles stay valid, which no test relies on either way. */
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult rc = CUDA_SUCCESS;

    if (dev < 0 || dev >= fake_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fake_lock);
    if (primary_refs[dev] == 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else
        primary_refs[dev]--;
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

CUresult cuCtxSynchronize(void)
{
    if (fake_unsafe_call_refused())
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    return synchronize(fake_current());
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    if (fake_unsafe_call_refused())
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    return synchronize(ctx ? (struct fake_ctx *)ctx : fake_current());
}
