/* nvml.c - a fake libnvidia-ml.so.1: the few functions nvidia-smi-like
 * callers use to read a GPU's memory, for the same devices as the fake
 * libcuda (FAKE_CUDA_DEVICES, FAKE_CUDA_MEM_MB). It cannot see the fake
 * libcuda's allocations: every device reports all its memory free, so what
 * a test reads under a quota comes from libnvshare alone. The processes on
 * a device come from a file the test writes (FAKE_NVML_PROCESSES) and from
 * the shared fake device's list (FAKE_CUDA_SHARED_GPU, fake.h). */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake.h"
#include "nvml_abi.h"


static CUuuid uuids[FAKE_MAX_DEVICES];
static int count;

nvmlReturn_t nvmlInit_v2(void)
{
    count = fake_read_uuids(uuids);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = (unsigned int)count;
    return NVML_SUCCESS;
}

/* A device handle is its index + 1 (never NULL). */
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
    if (index >= (unsigned int)count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = (void *)(uintptr_t)(index + 1);
    return NVML_SUCCESS;
}

static int index_of(void *device)
{
    uintptr_t i = (uintptr_t)device;

    return i >= 1 && i <= (uintptr_t)count ? (int)(i - 1) : -1;
}

nvmlReturn_t nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length)
{
    int i = index_of(device);
    const unsigned char *b;

    if (i < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    b = (const unsigned char *)uuids[i].bytes;
    snprintf(uuid, length,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
    return NVML_SUCCESS;
}

static unsigned long long total_bytes(void)
{
    const char *mem = getenv("FAKE_CUDA_MEM_MB");

    return (mem ? strtoull(mem, NULL, 10) : 16384) << 20;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(void *device, nvmlMemory_t *memory)
{
    if (index_of(device) < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *memory = (nvmlMemory_t){total_bytes(), total_bytes(), 0};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *device, nvmlMemory_v2_t *memory)
{
    if (index_of(device) < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = total_bytes();
    memory->reserved = 0;
    memory->free = total_bytes();
    memory->used = 0;
    return NVML_SUCCESS;
}

/* Even devices on NUMA node 0, odd ones on node 1. */
nvmlReturn_t nvmlDeviceGetNumaNodeId(void *device, unsigned int *node)
{
    int i = index_of(device);

    if (i < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *node = (unsigned int)(i % 2);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(void *device, char *name, unsigned int length)
{
    if (index_of(device) < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(name, length, "Fake GPU");
    return NVML_SUCCESS;
}

/* An H100's, as the fake libcuda's attributes. */
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(void *device, int *major,
                                                int *minor)
{
    if (index_of(device) < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = 9;
    *minor = 0;
    return NVML_SUCCESS;
}

/* With a leading zero, as NVIDIA numbers its drivers: not semver. */
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    snprintf(version, length, "580.159.04");
    return NVML_SUCCESS;
}

/* FAKE_NVML_LOST names a file: while it exists, the GPU whose UUID it
 * holds has "fallen off the bus" (the device plugin's health test). */
static bool lost(const char *uuid)
{
    const char *path = getenv("FAKE_NVML_LOST");
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
    FILE *f;

    if (!path || !(f = fopen(path, "r")))
        return false;
    if (!fgets(text, sizeof(text), f))
        text[0] = '\0';
    fclose(f);
    text[strcspn(text, "\n")] = '\0';
    return strcmp(text, uuid) == 0;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, void **device)
{
    char mine[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

    if (lost(uuid))
        return NVML_ERROR_GPU_IS_LOST;

    for (int i = 0; i < count; i++) {
        void *handle = (void *)(uintptr_t)(i + 1);
        nvmlDeviceGetUUID(handle, mine, sizeof(mine));
        if (strcmp(mine, uuid) == 0) {
            *device = handle;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_INVALID_ARGUMENT;
}

/* The processes with a context on the shared fake device (FAKE_CUDA_SHARED_GPU),
 * mapped read-only; NULL until a fake libcuda has made the file. */
static const struct fake_shared_gpu *shared_gpu(void)
{
    static const struct fake_shared_gpu *map;
    const char *path = getenv("FAKE_CUDA_SHARED_GPU");
    struct stat st;
    int fd;

    if (map || !path || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return map;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(*map)) {
        void *m = mmap(NULL, sizeof(*map), PROT_READ, MAP_SHARED, fd, 0);
        map = m == MAP_FAILED ? NULL : m;
    }
    close(fd);
    return map;
}

/* As NVML forgets a process when its contexts go: a zombie is gone. */
static bool alive(pid_t pid)
{
    char path[64], stat[256];
    FILE *f;
    char *paren;
    bool running = false;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r")))
        return false;
    if (fgets(stat, sizeof(stat), f) && (paren = strrchr(stat, ')')))
        running = paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
    fclose(f);
    return running;
}

static void add(nvmlProcessInfo_t *infos, unsigned int cap, unsigned int *found,
                unsigned int pid, unsigned long long used)
{
    for (unsigned int i = 0; i < *found && i < cap; i++)
        if (infos[i].pid == pid)
            return;
    if (*found < cap)
        infos[*found] = (nvmlProcessInfo_t){pid, used, 0, 0};
    (*found)++;
}

/* The processes a test lists in the file named by FAKE_NVML_PROCESSES, one
 * "<pid> <used bytes>" per line, reported on every device (the fake cannot
 * see other processes' memory otherwise); then those with a context on
 * this device of the shared fake GPU, with their device memory. */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *device,
                                                     unsigned int *n,
                                                     nvmlProcessInfo_t *infos)
{
    const char *path = getenv("FAKE_NVML_PROCESSES");
    FILE *f = path ? fopen(path, "r") : NULL;
    const struct fake_shared_gpu *shared = shared_gpu();
    unsigned int found = 0, pid;
    unsigned long long used;
    int dev = index_of(device);

    if (dev < 0) {
        if (f)
            fclose(f);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    while (f && fscanf(f, "%u %llu", &pid, &used) == 2)
        add(infos, *n, &found, pid, used);
    if (f)
        fclose(f);
    for (int i = 0; shared && i < FAKE_SHARED_MAX_PROCS; i++) {
        int32_t p = atomic_load(&shared->procs[i].pid);
        if (p > 0 && (atomic_load(&shared->procs[i].devices) & (1u << dev)) &&
            alive(p))
            add(infos, *n, &found, (unsigned int)p,
                atomic_load(&shared->procs[i].used));
    }
    *n = found;
    return NVML_SUCCESS;
}

/* The fake has no graphics: none, as on a compute-only node. */
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(void *device,
                                                      unsigned int *n,
                                                      nvmlProcessInfo_t *infos)
{
    (void)infos;
    if (index_of(device) < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *n = 0;
    return NVML_SUCCESS;
}
