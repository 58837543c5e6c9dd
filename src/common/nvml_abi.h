/* nvml_abi.h - the few NVML types nvshare uses, declared from the NVML ABI
 * (stable since NVML 5) so that nothing needs nvml.h to build: the build
 * machines have none, and NVML is always reached through dlopen. */
#ifndef NVSHARE_NVML_ABI_H
#define NVSHARE_NVML_ABI_H

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

/* nvmlProcessInfo_v2_t, the layout of the _v3 process listings. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes */
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96

#endif
