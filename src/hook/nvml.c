/* nvml.c - NVML's memory queries under the quota.
 *
 * nvidia-smi and PyTorch dlopen libnvidia-ml.so.1 and dlsym the names, so
 * the dlsym hook (dlsym.c) hands out these wrappers for the two memory
 * queries; they are also exported for programs linked to NVML. Each calls
 * the real function (libnvidia-ml.so.1, found loaded or loaded here), then,
 * if the device is one of this process's CUDA GPUs (matched by UUID) and has
 * a quota (the scheduler's answer awaited, as for an allocation), reports
 * total = the quota, used = the pod's usage and free = total - used (v2:
 * reserved = 0, so that total = reserved + used + free).
 *
 * No nvml.h on build machines: the few types are declared here, with the
 * layouts of the NVML ABI. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "client_start.h"
#include "driver.h"
#include "memory_pools.h"
#include "nvml_wrappers.h"
#include "log.h"
#include "nvml_abi.h"
#include "nvshare_memory.h"

#define NVML_UUID_LENGTH NVML_DEVICE_UUID_V2_BUFFER_SIZE
#define MAX_NVML_DEVICES 64

static struct {
    nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*get_memory_v2)(nvmlDevice_t, nvmlMemory_v2_t *);
    nvmlReturn_t (*get_uuid)(nvmlDevice_t, char *, unsigned int);
} real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

/* device -> GPU index, cached: the UUID never changes. */
static struct {
    nvmlDevice_t device;
    int gpu;
} known[MAX_NVML_DEVICES];
static int n_known;
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_real(void)
{
    void *handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);

    if (handle == NULL)
        handle = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (handle == NULL) {
        log_error("cannot load libnvidia-ml.so.1: %s", dlerror());
        return;
    }
    real.get_memory =
        (__typeof__(real.get_memory))hook_real_dlsym(handle,
                                                     "nvmlDeviceGetMemoryInfo");
    real.get_memory_v2 = (__typeof__(real.get_memory_v2))
        hook_real_dlsym(handle, "nvmlDeviceGetMemoryInfo_v2");
    real.get_uuid =
        (__typeof__(real.get_uuid))hook_real_dlsym(handle, "nvmlDeviceGetUUID");
}

static int gpu_of(nvmlDevice_t device)
{
    char uuid[NVML_UUID_LENGTH];
    int gpu = -1;

    pthread_mutex_lock(&known_lock);
    for (int i = 0; i < n_known; i++)
        if (known[i].device == device)
            gpu = known[i].gpu;
    pthread_mutex_unlock(&known_lock);
    if (gpu >= 0 || real.get_uuid == NULL ||
        real.get_uuid(device, uuid, sizeof(uuid)) != NVML_SUCCESS)
        return gpu;
    gpu = hook_gpu_by_uuid(uuid);
    pthread_mutex_lock(&known_lock);
    if (gpu >= 0 && n_known < MAX_NVML_DEVICES)
        known[n_known++] = (__typeof__(known[0])){device, gpu};
    pthread_mutex_unlock(&known_lock);
    return gpu;
}

/* The real function's answer, NVML_ERROR_FUNCTION_NOT_FOUND where the
 * library or the function is missing. */
#define NVML_CALL_REAL(fn, args)                                               \
    (pthread_once(&real_once, load_real),                                      \
     real.fn ? real.fn args : NVML_ERROR_FUNCTION_NOT_FOUND)

/* Puts the quota's view of device into what the real function answered:
 * *total (never above the real one), *used and *free_mem; false, leaving them
 * as they were, if the device is not ours or has no quota. */
static bool quota_view(nvmlDevice_t device, unsigned long long *total,
                       unsigned long long *free_mem, unsigned long long *used)
{
    int gpu = gpu_of(device);
    uint64_t quota, pod_used;

    if (gpu < 0)
        return false;
    /* nvidia-smi never makes a context: register here, or a quota that
     * only the scheduler knows (the operator's) would not be shown. */
    hook_gating_start();
    mem_pools_settle(gpu);
    if (!nvshare_mem_view(gpu, &quota, &pod_used))
        return false;
    if (quota < *total)
        *total = quota;
    *used = pod_used < *total ? pod_used : *total;
    *free_mem = *total - *used;
    return true;
}

HOOK_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
                                                 nvmlMemory_t *memory)
{
    nvmlReturn_t rc = NVML_CALL_REAL(get_memory, (device, memory));

    if (rc == NVML_SUCCESS)
        quota_view(device, &memory->total, &memory->free, &memory->used);
    return rc;
}

HOOK_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                    nvmlMemory_v2_t *memory)
{
    nvmlReturn_t rc = NVML_CALL_REAL(get_memory_v2, (device, memory));

    if (rc == NVML_SUCCESS &&
        quota_view(device, &memory->total, &memory->free, &memory->used))
        memory->reserved = 0;
    return rc;
}

void *hook_nvml_wrapper(const char *name)
{
    if (strcmp(name, "nvmlDeviceGetMemoryInfo") == 0)
        return (void *)&nvmlDeviceGetMemoryInfo;
    if (strcmp(name, "nvmlDeviceGetMemoryInfo_v2") == 0)
        return (void *)&nvmlDeviceGetMemoryInfo_v2;
    return NULL;
}
