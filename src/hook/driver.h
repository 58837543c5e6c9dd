/* driver.h - the real libcuda: its entry points and the helpers libnvshare calls. */
#ifndef NVSHARE_HOOK_DRIVER_H
#define NVSHARE_HOOK_DRIVER_H

#include "hook.h"

/* The real dlsym of libc (never our own), and a call to it. */
void *(*hook_real_dlsym_fn(void))(void *, const char *);
void *hook_real_dlsym(void *handle, const char *name);

extern _Atomic(void *) hook_real[NVSHARE_SYMBOL_COUNT];
/* Loads the driver once and returns hook_real[id] (NULL if it lacks it). */
void *hook_real_slow(int id);

static inline void *hook_real_fn(int id)
{
    void *fn = atomic_load_explicit(&hook_real[id], memory_order_relaxed);

    return hook_unlikely(fn == NULL) ? hook_real_slow(id) : fn;
}

/* The real entry point behind wrapper e, typed; NULL if the driver lacks it. */
#define HOOK_REAL(e) ((__typeof__(&e))hook_real_fn(NVSHARE_ID_##e))
/* Calls the real e, or fails like a driver that does not have it. */
#define HOOK_CALL_REAL(e, args)                                                \
    ({                                                                         \
        __typeof__(&e) real_ = HOOK_REAL(e);                                   \
        real_ ? real_ args : CUDA_ERROR_NOT_FOUND;                             \
    })

/* Index of the wrapped symbol whose real address is fn, or -1. */
int hook_symbol_by_real(const void *fn);

/* Driver functions libnvshare calls for itself (never wrapped), resolved
 * from the real libcuda at load. Any may be NULL with an old driver. */
struct hook_driver {
    __typeof__(&cuDeviceGetCount) device_get_count;
    __typeof__(&cuDeviceGetUuid) device_get_uuid;
    __typeof__(&cuCtxGetCurrent) ctx_get_current;
    __typeof__(&cuCtxGetDevice) ctx_get_device;
    __typeof__(&cuEventCreate) event_create;
    __typeof__(&cuEventRecord) event_record;
    __typeof__(&cuEventQuery) event_query;
    __typeof__(&cuEventSynchronize) event_synchronize;
    __typeof__(&cuEventElapsedTime) event_elapsed;
    __typeof__(&cuEventDestroy) event_destroy;
    __typeof__(&cuStreamIsCapturing) stream_is_capturing;
    __typeof__(&cuStreamQuery) stream_query;
    __typeof__(&cuThreadExchangeStreamCaptureMode) exchange_capture_mode;
    __typeof__(&cuInit) init;
    __typeof__(&cuMemGetAddressRange_v2) mem_get_address_range;
    __typeof__(&cuArrayGetMemoryRequirements) array_requirements;
    __typeof__(&cuMipmappedArrayGetMemoryRequirements) mipmap_requirements;
    __typeof__(&cuDeviceGetMemPool) device_get_mem_pool;
    __typeof__(&cuDeviceGetDefaultMemPool) device_get_default_mem_pool;
    __typeof__(&cuMemPoolGetAttribute) mem_pool_get_attribute;
    __typeof__(&cuDeviceGetGraphMemAttribute) graph_mem_attribute;
    __typeof__(&cuDeviceGetAttribute) device_get_attribute;
    __typeof__(&cuStreamCreate) stream_create;
    __typeof__(&cuStreamDestroy_v2) stream_destroy;
    /* staging.c: the pinned ring (the driver frees it with its context) */
    __typeof__(&cuMemHostAlloc) mem_host_alloc;
    /* vmm.c: address ranges and the physical memory behind them */
    __typeof__(&cuMemAddressReserve) mem_address_reserve;
    __typeof__(&cuMemAddressFree) mem_address_free;
    __typeof__(&cuMemMap) mem_map;
    __typeof__(&cuMemUnmap) mem_unmap;
    __typeof__(&cuMemSetAccess) mem_set_access;
    __typeof__(&cuMemGetAllocationGranularity) mem_get_granularity;
    __typeof__(&cuDeviceCanAccessPeer) device_can_access_peer;
    /* collectives.c: kernel names (CUDA 12.3+; declared here, as older
     * headers lack them) */
    CUresult (*func_get_name)(const char **name, CUfunction f);
    CUresult (*kernel_get_name)(const char **name, void *kernel);
};
/* Loads the driver once; NULL if libcuda.so.1 cannot be loaded. */
const struct hook_driver *hook_driver(void);
/* For a thread of libnvshare's own, at its start: its CUDA calls may
 * neither fail nor invalidate a graph capture that the application makes
 * meanwhile in the default (global) mode, as pinning memory or waiting
 * for an event would. */
void hook_thread_relax_capture(void);

#endif
