/* driver.c - the real CUDA driver behind the wrappers.
 *
 * The driver is found with dlopen("libcuda.so.1"): first RTLD_NOLOAD (the
 * runtime has usually loaded it already, RTLD_LOCAL, which is why RTLD_NEXT
 * cannot find it), else a plain load. It is loaded lazily, the first time a
 * wrapper runs, so a process that never calls the driver never loads it.
 * Every wrapped symbol's real address is resolved once with libc's dlsym on
 * that handle; the same addresses map cuGetProcAddress answers back to the
 * exported variant they are. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "driver.h"
#include "symbols.h"
#include "log.h"

_Atomic(void *) hook_real[NVSHARE_SYMBOL_COUNT];
static struct hook_driver driver;
static bool driver_loaded;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) real_dlsym;

void *(*hook_real_dlsym_fn(void))(void *, const char *)
{
    dlsym_fn fn = atomic_load_explicit(&real_dlsym, memory_order_acquire);

    if (hook_unlikely(fn == NULL)) {
        /* Idempotent, so racing threads may both look it up. */
        fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (fn == NULL)
            fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        atomic_store_explicit(&real_dlsym, fn, memory_order_release);
    }
    return fn;
}

void *hook_real_dlsym(void *handle, const char *name)
{
    dlsym_fn fn = hook_real_dlsym_fn();

    return fn ? fn(handle, name) : NULL;
}

/* Names of struct hook_driver's slots, in order, with the older name to fall
 * back on where the driver renamed the function. */
static const struct {
    size_t offset;
    const char *name, *fallback;
} helper_names[] = {
    {offsetof(struct hook_driver, device_get_count), "cuDeviceGetCount", NULL},
    {offsetof(struct hook_driver, device_get_uuid), "cuDeviceGetUuid_v2",
     "cuDeviceGetUuid"},
    {offsetof(struct hook_driver, ctx_get_current), "cuCtxGetCurrent", NULL},
    {offsetof(struct hook_driver, ctx_get_device), "cuCtxGetDevice", NULL},
    {offsetof(struct hook_driver, event_create), "cuEventCreate", NULL},
    {offsetof(struct hook_driver, event_record), "cuEventRecord", NULL},
    {offsetof(struct hook_driver, event_query), "cuEventQuery", NULL},
    {offsetof(struct hook_driver, event_synchronize), "cuEventSynchronize", NULL},
    {offsetof(struct hook_driver, event_elapsed), "cuEventElapsedTime_v2",
     "cuEventElapsedTime"},
    {offsetof(struct hook_driver, event_destroy), "cuEventDestroy_v2", NULL},
    {offsetof(struct hook_driver, stream_is_capturing), "cuStreamIsCapturing",
     NULL},
    {offsetof(struct hook_driver, stream_query), "cuStreamQuery", NULL},
    {offsetof(struct hook_driver, exchange_capture_mode),
     "cuThreadExchangeStreamCaptureMode", NULL},
    {offsetof(struct hook_driver, init), "cuInit", NULL},
    {offsetof(struct hook_driver, mem_get_address_range),
     "cuMemGetAddressRange_v2", NULL},
    {offsetof(struct hook_driver, array_requirements),
     "cuArrayGetMemoryRequirements", NULL},
    {offsetof(struct hook_driver, mipmap_requirements),
     "cuMipmappedArrayGetMemoryRequirements", NULL},
    {offsetof(struct hook_driver, device_get_mem_pool), "cuDeviceGetMemPool",
     NULL},
    {offsetof(struct hook_driver, device_get_default_mem_pool),
     "cuDeviceGetDefaultMemPool", NULL},
    {offsetof(struct hook_driver, mem_pool_get_attribute),
     "cuMemPoolGetAttribute", NULL},
    {offsetof(struct hook_driver, graph_mem_attribute),
     "cuDeviceGetGraphMemAttribute", NULL},
    {offsetof(struct hook_driver, device_get_attribute), "cuDeviceGetAttribute",
     NULL},
    {offsetof(struct hook_driver, stream_create), "cuStreamCreate", NULL},
    {offsetof(struct hook_driver, stream_destroy), "cuStreamDestroy_v2",
     "cuStreamDestroy"},
    {offsetof(struct hook_driver, mem_host_alloc), "cuMemHostAlloc", NULL},
    {offsetof(struct hook_driver, mem_address_reserve), "cuMemAddressReserve",
     NULL},
    {offsetof(struct hook_driver, mem_address_free), "cuMemAddressFree", NULL},
    {offsetof(struct hook_driver, mem_map), "cuMemMap", NULL},
    {offsetof(struct hook_driver, mem_unmap), "cuMemUnmap", NULL},
    {offsetof(struct hook_driver, mem_set_access), "cuMemSetAccess", NULL},
    {offsetof(struct hook_driver, mem_get_granularity),
     "cuMemGetAllocationGranularity", NULL},
    {offsetof(struct hook_driver, device_can_access_peer),
     "cuDeviceCanAccessPeer", NULL},
    {offsetof(struct hook_driver, func_get_name), "cuFuncGetName", NULL},
    {offsetof(struct hook_driver, kernel_get_name), "cuKernelGetName", NULL},
};
_Static_assert(sizeof(helper_names) / sizeof(helper_names[0]) ==
                   sizeof(struct hook_driver) / sizeof(void *),
               "every struct hook_driver slot has a name");

static void load_driver(void)
{
    void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    if (handle == NULL)
        handle = dlopen("libcuda.so.1", RTLD_NOW);
    if (handle == NULL) {
        log_error("cannot load libcuda.so.1: %s", dlerror());
        return;
    }
    for (int i = 0; i < NVSHARE_SYMBOL_COUNT; i++) {
        void *fn = hook_real_dlsym(handle, hook_symbols[i].name);

        if (fn == NULL)
            log_debug("driver does not export %s", hook_symbols[i].name);
        atomic_store_explicit(&hook_real[i], fn, memory_order_relaxed);
    }
    for (size_t i = 0; i < sizeof(helper_names) / sizeof(helper_names[0]); i++) {
        void *fn = hook_real_dlsym(handle, helper_names[i].name);

        if (fn == NULL && helper_names[i].fallback)
            fn = hook_real_dlsym(handle, helper_names[i].fallback);
        *(void **)((char *)&driver + helper_names[i].offset) = fn;
    }
    driver_loaded = true;
}

const struct hook_driver *hook_driver(void)
{
    pthread_once(&load_once, load_driver);
    return driver_loaded ? &driver : NULL;
}

void hook_thread_relax_capture(void)
{
    const struct hook_driver *drv = hook_driver();
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;

    if (drv && drv->exchange_capture_mode)
        drv->exchange_capture_mode(&mode);
}

void *hook_real_slow(int id)
{
    pthread_once(&load_once, load_driver);
    return atomic_load_explicit(&hook_real[id], memory_order_relaxed);
}

int hook_symbol_by_real(const void *fn)
{
    pthread_once(&load_once, load_driver);
    for (int i = 0; i < NVSHARE_SYMBOL_COUNT; i++)
        if (atomic_load_explicit(&hook_real[i], memory_order_relaxed) == fn)
            return i;
    return -1;
}
