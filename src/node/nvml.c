/* nvml.c - NUMA nodes, health and names from NVML, reached through dlopen like
 * common/gpus.c so that nothing needs nvml.h or the driver to build. A
 * GPU whose handle or memory NVML cannot read any more (fallen off the bus,
 * "GPU is lost") is unhealthy until NVML reads it again. */
#include "plugin.h"

#include <dlfcn.h>
#include <stdio.h>

#include "log.h"
#include "nvml_abi.h"

static struct {
    void *lib;
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*numa)(nvmlDevice_t, unsigned int *); /* driver 535+ only */
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*capability)(nvmlDevice_t, int *, int *);
    nvmlReturn_t (*driver_version)(char *, unsigned int);
} nvml;

bool nvml_open(void)
{
    nvmlReturn_t (*init)(void);

    nvml.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nvml.lib)
        return false;
    *(void **)&init = dlsym(nvml.lib, "nvmlInit_v2");
    *(void **)&nvml.shutdown = dlsym(nvml.lib, "nvmlShutdown");
    *(void **)&nvml.by_uuid = dlsym(nvml.lib, "nvmlDeviceGetHandleByUUID");
    *(void **)&nvml.memory = dlsym(nvml.lib, "nvmlDeviceGetMemoryInfo");
    *(void **)&nvml.numa = dlsym(nvml.lib, "nvmlDeviceGetNumaNodeId");
    *(void **)&nvml.name = dlsym(nvml.lib, "nvmlDeviceGetName");
    *(void **)&nvml.capability =
        dlsym(nvml.lib, "nvmlDeviceGetCudaComputeCapability");
    *(void **)&nvml.driver_version =
        dlsym(nvml.lib, "nvmlSystemGetDriverVersion");
    if (!init || !nvml.shutdown || !nvml.by_uuid || !nvml.memory ||
        init() != NVML_SUCCESS) {
        log_warn(
            "libnvidia-ml.so.1 is unusable: no health checks or NUMA nodes");
        dlclose(nvml.lib);
        nvml.lib = NULL;
        return false;
    }
    return true;
}

int nvml_numa_node(const char *uuid)
{
    nvmlDevice_t dev;
    unsigned int node;

    if (!nvml.lib || !nvml.numa || nvml.by_uuid(uuid, &dev) != NVML_SUCCESS ||
        nvml.numa(dev, &node) != NVML_SUCCESS)
        return -1;
    return (int)node;
}

bool nvml_healthy(const char *uuid)
{
    nvmlDevice_t dev;
    nvmlMemory_t mem;

    if (!nvml.lib)
        return true;
    return nvml.by_uuid(uuid, &dev) == NVML_SUCCESS &&
           nvml.memory(dev, &mem) == NVML_SUCCESS;
}

bool plugin_health_changed(struct plugin *p)
{
    bool changed = false;

    for (int g = 0; g < p->gpu_count; g++) {
        struct plugin_gpu *gpu = &p->gpus[g];
        bool healthy = nvml_healthy(gpu->uuid);

        if (healthy != gpu->healthy) {
            log_warn("GPU %s is now %s", gpu->uuid,
                     healthy ? "healthy" : "unhealthy");
            gpu->healthy = healthy;
            changed = true;
        }
    }
    return changed;
}

void nvml_close(void)
{
    if (nvml.lib) {
        nvml.shutdown();
        dlclose(nvml.lib);
        nvml.lib = NULL;
    }
}

void nvml_describe(struct plugin *p)
{
    bool loaded = nvml.lib != NULL;

    if (!loaded && !nvml_open())
        return;
    if (nvml.driver_version &&
        nvml.driver_version(p->driver_version, sizeof(p->driver_version)) !=
            NVML_SUCCESS)
        p->driver_version[0] = '\0';
    for (int g = 0; g < p->gpu_count; g++) {
        struct plugin_gpu *gpu = &p->gpus[g];
        nvmlDevice_t dev;
        int major, minor;

        if (nvml.by_uuid(gpu->uuid, &dev) != NVML_SUCCESS)
            continue;
        if (nvml.name &&
            nvml.name(dev, gpu->product, sizeof(gpu->product)) != NVML_SUCCESS)
            gpu->product[0] = '\0';
        if (nvml.capability &&
            nvml.capability(dev, &major, &minor) == NVML_SUCCESS)
            snprintf(gpu->compute_capability, sizeof(gpu->compute_capability),
                     "%d.%d", major, minor);
    }
    /* Loaded for this alone: health and NUMA stay as configured. */
    if (!loaded)
        nvml_close();
}
