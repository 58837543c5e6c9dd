/* client_start.c - the nvshare client of this process: starting it, and
 * the callbacks it is started with (drain, completed, swaps).
 *
 * The client (src/client) is started lazily, the first time the process
 * creates or retains a context or submits work, never at load: a process
 * that loads libnvshare but never uses CUDA never talks to the scheduler.
 * It is registered with the UUIDs of every device the driver shows this
 * process, in ordinal order, so a device ordinal is the client's GPU index.
 * If the client cannot be started, gating stays off and the application
 * runs unscheduled (the client's own failure policy covers a scheduler that
 * is merely absent). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backlog.h"
#include "client_start.h"
#include "context.h"
#include "driver.h"
#include "swap.h"
#include "nvshare_client.h"
#include "log.h"

_Atomic int hook_gating = HOOK_GATING_UNKNOWN;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the client's callbacks (contracts in nvshare_client.h) ------------ */

static bool synchronize_current(const struct hook_driver *drv, CUcontext ctx,
                                void *arg)
{
    CUresult rc = HOOK_CALL_REAL(cuCtxSynchronize, ());

    (void)drv, (void)ctx, (void)arg;
    if (rc != CUDA_SUCCESS)
        log_warn("drain: cuCtxSynchronize failed (%d)", (int)rc);
    return true;
}

static void drain_gpu(int gpu, void *user)
{
    (void)user;
    hook_busy_released(gpu);
    hook_for_each_context(gpu, synchronize_current, NULL);
}

/* Non-blocking, and deliberately cheap: the legacy default stream of each
 * context is idle. Work left on other streams is still waited for, by the
 * drain that precedes any release; this only decides when to let go. */
static bool legacy_stream_idle(const struct hook_driver *drv, CUcontext ctx,
                               void *arg)
{
    (void)ctx, (void)arg;
    return drv->stream_query == NULL ||
           drv->stream_query(CU_STREAM_LEGACY) != CUDA_ERROR_NOT_READY;
}

static bool gpu_completed(int gpu, void *user)
{
    (void)user;
    return hook_for_each_context(gpu, legacy_stream_idle, NULL);
}

/* ---- starting it ----------------------------------------------------------- */

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it. */
static void format_uuid(const CUuuid *uuid, char out[41])
{
    const unsigned char *b = (const unsigned char *)uuid->bytes;

    snprintf(out, 41,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
}

/* Returns the new state, or HOOK_GATING_UNKNOWN to try again later (the
 * driver is not initialised yet). */
static int start_client_locked(void)
{
    const struct hook_driver *drv = hook_driver();
    static char uuids[NVSHARE_MAX_GPUS][41];
    const char *uuid_list[NVSHARE_MAX_GPUS];
    struct nvshare_client_config config = {
        .gpu_uuids = uuid_list,
        .ops = {.drain = drain_gpu,
                .completed = gpu_completed,
                .swap_out = hook_swap_out,
                .swap_in = hook_swap_in,
                .prepare_swap = hook_prepare_swap},
    };
    int count = 0;
    CUresult rc;

    if (drv == NULL || drv->device_get_count == NULL ||
        drv->device_get_uuid == NULL)
        return HOOK_GATING_OFF;
    rc = drv->device_get_count(&count);
    if (rc == CUDA_ERROR_NOT_INITIALIZED)
        return HOOK_GATING_UNKNOWN;
    if (rc != CUDA_SUCCESS || count < 1) {
        log_debug("no CUDA devices (%d): not gating", (int)rc);
        return HOOK_GATING_OFF;
    }
    if (count > NVSHARE_MAX_GPUS) {
        log_warn("%d GPUs visible, scheduling the first %d", count,
                 NVSHARE_MAX_GPUS);
        count = NVSHARE_MAX_GPUS;
    }
    for (int i = 0; i < count; i++) {
        CUuuid uuid;

        if (drv->device_get_uuid(&uuid, (CUdevice)i) != CUDA_SUCCESS) {
            log_error("cannot read the UUID of GPU %d: not gating", i);
            return HOOK_GATING_OFF;
        }
        format_uuid(&uuid, uuids[i]);
        uuid_list[i] = uuids[i];
        log_debug("gpu %d is %s", i, uuids[i]);
    }
    config.n_gpus = count;
    if (nvshare_client_start(&config) != 0)
        return HOOK_GATING_OFF;
    hook_context_track_gpus(count);
    return HOOK_GATING_ON;
}

int hook_gating_start(void)
{
    int state = atomic_load(&hook_gating);

    if (state != HOOK_GATING_UNKNOWN)
        return state;
    pthread_mutex_lock(&start_lock);
    state = atomic_load(&hook_gating);
    if (state == HOOK_GATING_UNKNOWN) {
        state = start_client_locked();
        atomic_store(&hook_gating, state);
    }
    pthread_mutex_unlock(&start_lock);
    return state;
}

/* The first context starts the client. */
static void context_made(void)
{
    hook_gating_start();
}

__attribute__((constructor)) static void observe_contexts(void)
{
    static const struct hook_context_observer starter = {.made = context_made};

    hook_context_observe(&starter);
}

/* NVML names devices by UUID; a CUDA ordinal is our GPU index. */
int hook_gpu_by_uuid(const char *uuid)
{
    const struct hook_driver *drv = hook_driver();
    char formatted[41];
    int count = 0;

    if (drv == NULL || drv->device_get_count == NULL ||
        drv->device_get_uuid == NULL)
        return -1;
    if (drv->device_get_count(&count) == CUDA_ERROR_NOT_INITIALIZED &&
        drv->init && drv->init(0) == CUDA_SUCCESS)
        drv->device_get_count(&count);
    for (int i = 0; i < count && i < NVSHARE_MAX_GPUS; i++) {
        CUuuid cu_uuid;

        if (drv->device_get_uuid(&cu_uuid, (CUdevice)i) != CUDA_SUCCESS)
            continue;
        format_uuid(&cu_uuid, formatted);
        if (strcmp(formatted, uuid) == 0)
            return i;
    }
    return -1;
}
