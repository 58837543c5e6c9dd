/* device.c - devices: count, UUIDs (uuids.c), attributes, total memory.
 *
 * FAKE_CUDA_MEM_MB is each device's memory (default 16384); what is
 * allocated of it is kept by memory.c. Devices can access managed memory
 * concurrently (attribute 89) unless FAKE_CUDA_CONCURRENT_MANAGED=0, and
 * have virtual memory management (attribute 102) unless FAKE_CUDA_VMM=0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

static struct {
    bool initialized;
    int count;
    CUuuid uuids[FAKE_MAX_DEVICES];
    uint64_t total;
    bool concurrent_managed;
    bool vmm;
} devices;

static void read_devices(void)
{
    const char *mem = getenv("FAKE_CUDA_MEM_MB");
    const char *managed = getenv("FAKE_CUDA_CONCURRENT_MANAGED");

    devices.count = fake_read_uuids(devices.uuids);
    devices.total = (mem ? strtoull(mem, NULL, 10) : 16384) << 20;
    devices.concurrent_managed = !(managed && strcmp(managed, "0") == 0);
    const char *vmm = getenv("FAKE_CUDA_VMM");
    devices.vmm = !(vmm && strcmp(vmm, "0") == 0);
}

bool fake_concurrent_managed_access(void)
{
    return devices.concurrent_managed;
}

int fake_device_count(void)
{
    return devices.count;
}

bool fake_initialized(void)
{
    return devices.initialized;
}

uint64_t fake_memory_total(int dev)
{
    (void)dev;
    return devices.total;
}

CUresult cuInit(unsigned int flags)
{
    (void)flags;
    /* A rank is one of the job's from now on, even if it exits before its
     * first collective: its peers will not wait for it then. */
    fake_collective_enabled();
    pthread_mutex_lock(&fake_lock);
    if (!devices.initialized)
        read_devices();
    devices.initialized = true;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
    *version = CUDA_VERSION;
    return CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev)
{
    if (!devices.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    return dev >= 0 && dev < devices.count ? CUDA_SUCCESS
                                           : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceGetCount(int *count)
{
    if (!devices.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = devices.count;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult rc = check_device(ordinal);

    if (rc == CUDA_SUCCESS)
        *device = ordinal;
    return rc;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = check_device(dev);

    if (rc == CUDA_SUCCESS)
        snprintf(name, (size_t)len, "nvshare fake GPU %d", (int)dev);
    return rc;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = check_device(dev);

    if (rc == CUDA_SUCCESS)
        *uuid = devices.uuids[dev];
    return rc;
}

/* Enough of an H100 for the runtime's bootstrap. */
CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev)
{
    CUresult rc = check_device(dev);

    if (rc != CUDA_SUCCESS)
        return rc;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *value = 9;
        break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *value = 132;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *value = 1024;
        break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        *value = 32;
        break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
        *value = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
        *value = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
        *value = devices.concurrent_managed;
        break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        *value = devices.vmm;
        break;
    default:
        *value = 0;
        break;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc = check_device(dev);

    if (rc == CUDA_SUCCESS)
        *bytes = devices.total;
    return rc;
}

/* The 32-bit ABI clamps. */
CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    CUresult rc = check_device(dev);

    if (rc == CUDA_SUCCESS)
        *bytes = devices.total < UINT32_MAX ? (unsigned int)devices.total
                                            : UINT32_MAX;
    return rc;
}
