/* device.c - devices and their memory.
 *
 * FAKE_CUDA_DEVICES is a device count ("2") or a comma-separated list of
 * UUIDs as nvidia-smi prints them ("GPU-0a1b...,GPU-..."); default one
 * device, GPU-fa4e0000-0000-0000-0000-00000000000<i>. FAKE_CUDA_MEM_MB is
 * each device's memory (default 16384). Allocations only account: device
 * pointers are addresses nobody may dereference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define ALLOC_ALIGN (2u << 20)

struct allocation {
    CUdeviceptr ptr;
    size_t size;
    int dev;
    struct allocation *next;
};

static struct {
    bool initialized;
    int count;
    CUuuid uuids[FAKE_MAX_DEVICES];
    uint64_t total, used[FAKE_MAX_DEVICES];
    CUdeviceptr next_ptr;
    struct allocation *allocations;
} devices;

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "GPU-xxxxxxxx-xxxx-..." up to a comma or the end; 0 on success. */
static int parse_uuid(const char *text, CUuuid *uuid)
{
    int nibbles = 0;

    if (strncmp(text, "GPU-", 4) == 0)
        text += 4;
    for (; *text && *text != ',' && nibbles < 32; text++) {
        int v = hex_value(*text);

        if (*text == '-')
            continue;
        if (v < 0)
            return -1;
        if (nibbles % 2 == 0)
            uuid->bytes[nibbles / 2] = (char)(v << 4);
        else
            uuid->bytes[nibbles / 2] |= (char)v;
        nibbles++;
    }
    return nibbles == 32 ? 0 : -1;
}

static void read_devices(void)
{
    const char *spec = getenv("FAKE_CUDA_DEVICES");
    const char *mem = getenv("FAKE_CUDA_MEM_MB");

    devices.count = spec ? atoi(spec) : 1;
    if (spec && strchr(spec, '-')) { /* a list of UUIDs */
        devices.count = 0;
        for (const char *p = spec; p && devices.count < FAKE_MAX_DEVICES;
             p = strchr(p, ','), p = p ? p + 1 : NULL)
            if (parse_uuid(p, &devices.uuids[devices.count]) == 0)
                devices.count++;
    } else {
        if (devices.count < 0 || devices.count > FAKE_MAX_DEVICES)
            devices.count = 1;
        for (int i = 0; i < devices.count; i++) {
            devices.uuids[i].bytes[0] = (char)0xfa;
            devices.uuids[i].bytes[1] = 0x4e;
            devices.uuids[i].bytes[15] = (char)i;
        }
    }
    devices.total = (mem ? strtoull(mem, NULL, 10) : 16384) << 20;
    devices.next_ptr = 0x700000000000ull;
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
CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr,
                              CUdevice dev)
{
    CUresult rc = check_device(dev);

    if (rc != CUDA_SUCCESS)
        return rc;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
    default: *value = 0; break;
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

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    struct fake_ctx *ctx = fake_current();

    if (ctx == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&fake_lock);
    *free_bytes = devices.total - devices.used[ctx->dev];
    *total_bytes = devices.total;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    struct fake_ctx *ctx = fake_current();
    struct allocation *a;
    size_t size = (bytesize + ALLOC_ALIGN - 1) / ALLOC_ALIGN * ALLOC_ALIGN;

    if (ctx == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((a = malloc(sizeof(*a))) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fake_lock);
    if (devices.used[ctx->dev] + size > devices.total) {
        pthread_mutex_unlock(&fake_lock);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *a = (struct allocation){devices.next_ptr, size, ctx->dev,
                             devices.allocations};
    devices.allocations = a;
    devices.next_ptr += size;
    devices.used[ctx->dev] += size;
    *dptr = a->ptr;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    struct allocation **link, *a = NULL;

    pthread_mutex_lock(&fake_lock);
    for (link = &devices.allocations; *link; link = &(*link)->next)
        if ((*link)->ptr == dptr) {
            a = *link;
            *link = a->next;
            devices.used[a->dev] -= a->size;
            break;
        }
    pthread_mutex_unlock(&fake_lock);
    free(a);
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
