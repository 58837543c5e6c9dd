/* gpus.c - see gpus.h. NVML is reached through dlopen so that the scheduler
 * runs (with NVSHARE_GPUS) on hosts without the NVIDIA driver, and declares
 * the handful of NVML entry points it calls itself rather than requiring
 * nvml.h at build time. */
#include "gpus.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_abi.h"
#include "parse.h"

int gpus_parse(const char *spec, struct node_gpu *out, int max, char *err,
               int err_len)
{
    char *copy = strdup(spec), *save = NULL, *item;
    int n = 0;

    if (!copy) {
        snprintf(err, (size_t)err_len, "out of memory");
        return -1;
    }
    for (item = strtok_r(copy, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(item, ':');
        char perr[PARSE_ERR_LEN];
        long mib;

        if (n == max) {
            snprintf(err, (size_t)err_len, "NVSHARE_GPUS: more than %d GPUs",
                     max);
            goto fail;
        }
        if (!colon || colon == item ||
            strlen(item) - strlen(colon) >= PROTO_UUID_MAX) {
            snprintf(err, (size_t)err_len,
                     "NVSHARE_GPUS: '%s' is not UUID:MiB (e.g. GPU-1234:81920)",
                     item);
            goto fail;
        }
        *colon = '\0';
        if (parse_int_range(colon + 1, 1, 1L << 40, &mib, perr)) {
            snprintf(err, (size_t)err_len, "NVSHARE_GPUS: memory of %s: %s",
                     item, perr);
            goto fail;
        }
        for (int i = 0; i < n; i++) {
            if (strcmp(out[i].uuid, item) == 0) {
                snprintf(err, (size_t)err_len, "NVSHARE_GPUS: %s listed twice",
                         item);
                goto fail;
            }
        }
        snprintf(out[n].uuid, sizeof(out[n].uuid), "%s", item);
        snprintf(out[n].name, sizeof(out[n].name), "configured by NVSHARE_GPUS");
        out[n].memory_total = (uint64_t)mib << 20;
        n++;
    }
    if (n == 0) {
        snprintf(err, (size_t)err_len, "NVSHARE_GPUS is empty");
        goto fail;
    }
    free(copy);
    return n;
fail:
    free(copy);
    return -1;
}

struct nvml {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
};

static int nvml_discover(struct node_gpu *out, int max, char *err, int err_len)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    struct nvml api;
    unsigned int count = 0;
    int n = 0;

    if (!lib)
        return 0; /* no driver: a node without GPUs */
    *(void **)&api.init = dlsym(lib, "nvmlInit_v2");
    *(void **)&api.shutdown = dlsym(lib, "nvmlShutdown");
    *(void **)&api.count = dlsym(lib, "nvmlDeviceGetCount_v2");
    *(void **)&api.handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&api.uuid = dlsym(lib, "nvmlDeviceGetUUID");
    *(void **)&api.name = dlsym(lib, "nvmlDeviceGetName");
    *(void **)&api.memory = dlsym(lib, "nvmlDeviceGetMemoryInfo");
    /* cppcheck-suppress uninitvar ; every member is set just above, through
     * a void ** that cppcheck does not follow */
    if (!api.init || !api.shutdown || !api.count || !api.handle || !api.uuid ||
        !api.name || !api.memory) {
        snprintf(err, (size_t)err_len,
                 "libnvidia-ml.so.1 lacks a needed function");
        dlclose(lib);
        return -1;
    }
    if (api.init() != NVML_SUCCESS) {
        snprintf(err, (size_t)err_len, "nvmlInit failed (is the driver loaded?)");
        dlclose(lib);
        return -1;
    }
    if (api.count(&count) != 0)
        count = 0;
    for (unsigned int i = 0; i < count && n < max; i++) {
        nvmlDevice_t dev;
        nvmlMemory_t mem;
        if (api.handle(i, &dev) || api.uuid(dev, out[n].uuid, PROTO_UUID_MAX) ||
            api.name(dev, out[n].name, PROTO_NAME_MAX) || api.memory(dev, &mem)) {
            snprintf(err, (size_t)err_len, "NVML could not describe GPU %u", i);
            n = -1;
            break;
        }
        out[n++].memory_total = mem.total;
    }
    api.shutdown();
    dlclose(lib);
    return n;
}

int gpus_discover(const char *spec, struct node_gpu *out, int max, char *err,
                  int err_len)
{
    if (spec && *spec)
        return gpus_parse(spec, out, max, err, err_len);
    return nvml_discover(out, max, err, err_len);
}
