/* config.c - the plugin's settings, all from the environment (see the
 * "Device plugin" section of docs/kubernetes.md), and its GPUs. */
#include "plugin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "gpus.h"
#include "log.h"

/* Above 4x, memory a pod was promised would mostly live in host RAM; the
 * bound also keeps the gpu-memory device list small (see main.c). */
#define MAX_OVERSUB_RATIO 4.0

static double env_ratio(const char *name, double fallback)
{
    const char *text = getenv(name);
    char *end;
    double v;

    if (!text || !*text)
        return fallback;
    v = strtod(text, &end);
    if (*end || !isfinite(v) || v < 0.1 || v > MAX_OVERSUB_RATIO) {
        log_warn("ignoring %s=%s: not a ratio between 0.1 and %.1f, using %.1f",
                 name, text, MAX_OVERSUB_RATIO, fallback);
        return fallback;
    }
    return v;
}

static void env_path(const char *name, const char *fallback, char *buf, size_t len)
{
    const char *text = getenv(name);

    snprintf(buf, len, "%s", text && *text ? text : fallback);
}

/* The plugin's own settings, from its environment. */
static void read_settings(struct plugin *p)
{
    memset(p, 0, sizeof(*p));
    p->virtual_gpus =
        (unsigned)env_int_range("NVSHARE_VIRTUAL_GPUS", 1, 1000, 10);
    p->memory_unit = env_size_bytes("NVSHARE_GPU_MEMORY_UNIT", 256ULL << 20);
    if (p->memory_unit < (1ULL << 20)) {
        log_warn("ignoring NVSHARE_GPU_MEMORY_UNIT below 1Mi, using 256Mi");
        p->memory_unit = 256ULL << 20;
    }
    p->pack = env_int_range("NVSHARE_ALLOCATION_PACK", 0, 1, 0) == 1;
    env_path("NVSHARE_KUBELET_DIR", "/var/lib/kubelet/device-plugins",
             p->kubelet_dir, sizeof(p->kubelet_dir));
    env_path("NVSHARE_LIB_DIR", "/var/lib/nvshare/lib", p->lib_dir,
             sizeof(p->lib_dir));
    snprintf(p->sock_dir, sizeof(p->sock_dir), "%s", env_sock_dir());
}

int plugin_configure(struct plugin *p)
{
    struct node_gpu found[PLUGIN_MAX_GPUS];
    char err[256];
    const char *spec = getenv("NVSHARE_GPUS");
    bool configured = spec && *spec;
    double ratio = env_ratio("NVSHARE_GPU_MEMORY_OVERSUB_RATIO", 1.0);
    uint64_t physical_override =
        (uint64_t)env_int_range("NVSHARE_GPU_PHYSICAL_MEMORY_MB", 1, 1L << 30, 0)
        << 20;
    int n;

    read_settings(p);
    n = gpus_discover(spec, found, PLUGIN_MAX_GPUS, err, sizeof(err));
    if (n < 0) {
        log_error("%s", err);
        return -1;
    }
    /* NVSHARE_GPUS names GPUs NVML may not know: no health or NUMA then. */
    if (!configured)
        nvml_open();
    for (int g = 0; g < n; g++) {
        struct plugin_gpu *gpu = &p->gpus[g];
        uint64_t physical = physical_override ? physical_override
                                              : found[g].memory_total;

        _Static_assert(sizeof(gpu->uuid) == sizeof(found[g].uuid),
                       "UUID sizes differ");
        memcpy(gpu->uuid, found[g].uuid, sizeof(gpu->uuid));
        gpu->capacity_bytes = (uint64_t)((double)physical * ratio);
        gpu->memory_ids = (unsigned)(gpu->capacity_bytes / p->memory_unit);
        gpu->numa_node = nvml_numa_node(gpu->uuid);
        gpu->healthy = nvml_healthy(gpu->uuid);
        if (strlen(gpu->uuid) + 12 > 63) {
            log_error("GPU UUID %s is too long for a kubelet device ID",
                      gpu->uuid);
            return -1;
        }
        log_info("GPU %s: %u virtual GPUs, %u x %llu MiB of gpu-memory (ratio "
                 "%.2f), NUMA %d",
                 gpu->uuid, p->virtual_gpus, gpu->memory_ids,
                 (unsigned long long)(p->memory_unit >> 20), ratio,
                 gpu->numa_node);
    }
    p->gpu_count = n;
    p->oversubscribed = ratio > 1.0;
    if (n == 0)
        log_warn("no GPUs found: advertising no devices");
    return 0;
}
