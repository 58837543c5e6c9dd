/* slice.c - this node's ResourceSlice: one device per healthy GPU, each
 * shareable (allowMultipleAllocations) by its capacities "memory" and
 * "computePercent". Every capacity has a request policy with a default,
 * or a claim that names no amount would consume the whole GPU.
 *
 * The pool is the node, in one slice. A new slice is created at a higher
 * generation before the old ones are deleted: consumers read only the
 * highest generation, so the node never looks empty in between. */
#include "driver.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "log.h"

#define SLICES_PATH "/apis/resource.k8s.io/v1/resourceslices"

/* "80Gi" or "81920Mi"; every amount here is a whole number of MiB. */
static void format_mib(uint64_t bytes, char *buf, size_t len)
{
    if (bytes % (1ULL << 30) == 0)
        snprintf(buf, len, "%" PRIu64 "Gi", bytes >> 30);
    else
        snprintf(buf, len, "%" PRIu64 "Mi", bytes >> 20);
}

static void add_capacity(cJSON *caps, const char *name, const char *value,
                         const char *def, const char *min, const char *max,
                         const char *step)
{
    cJSON *c = cJSON_AddObjectToObject(caps, name);
    cJSON *policy, *range;

    cJSON_AddStringToObject(c, "value", value);
    policy = cJSON_AddObjectToObject(c, "requestPolicy");
    cJSON_AddStringToObject(policy, "default", def);
    range = cJSON_AddObjectToObject(policy, "validRange");
    cJSON_AddStringToObject(range, "min", min);
    cJSON_AddStringToObject(range, "max", max);
    cJSON_AddStringToObject(range, "step", step);
}

static void add_attribute(cJSON *attrs, const char *name, const char *type,
                          cJSON *value)
{
    cJSON_AddItemToObject(cJSON_AddObjectToObject(attrs, name), type, value);
}

/* NVML's "580.159.04" or "9.0" as the strict semver a version attribute
 * must be ("580.159.4", "9.0.0"): no leading zeros, three numbers. false
 * for anything else, which is left out: one invalid attribute would make
 * the API server refuse the whole slice. */
static bool semver(const char *text, char *buf, size_t len)
{
    unsigned long part[3] = {0, 0, 0};
    const char *s = text;
    int n = 0;

    for (;;) {
        char *end;

        if (n == 3 || *s < '0' || *s > '9')
            return false;
        part[n++] = strtoul(s, &end, 10);
        if (*end == '\0')
            break;
        if (*end != '.')
            return false;
        s = end + 1;
    }
    if (n < 2)
        return false;
    snprintf(buf, len, "%lu.%lu.%lu", part[0], part[1], part[2]);
    return true;
}

/* The device for GPU g, or NULL when it cannot be shared (unhealthy, or
 * too small for two steps of memory: the API server would refuse the
 * policy, and with it the whole slice). */
static cJSON *device_json(const struct driver *d, int g)
{
    const struct plugin_gpu *gpu = &d->gpus.gpus[g];
    uint64_t unit = d->gpus.memory_unit;
    uint64_t total = gpu->capacity_bytes / unit * unit;
    uint64_t def = (d->default_memory + unit - 1) / unit * unit;
    char name[32], value[32], step[32], def_text[32], compute_def[8], version[64];
    cJSON *dev, *attrs, *caps;

    if (!gpu->healthy || total < 2 * unit)
        return NULL;
    if (def < unit)
        def = unit;
    if (def > total)
        def = total;
    snprintf(name, sizeof(name), "gpu-%d", g);
    format_mib(total, value, sizeof(value));
    format_mib(unit, step, sizeof(step));
    format_mib(def, def_text, sizeof(def_text));
    snprintf(compute_def, sizeof(compute_def), "%u", d->default_compute);
    dev = cJSON_CreateObject();
    cJSON_AddStringToObject(dev, "name", name);
    cJSON_AddBoolToObject(dev, "allowMultipleAllocations", 1);
    attrs = cJSON_AddObjectToObject(dev, "attributes");
    add_attribute(attrs, "uuid", "string", cJSON_CreateString(gpu->uuid));
    add_attribute(attrs, "index", "int", cJSON_CreateNumber(g));
    if (gpu->product[0])
        add_attribute(attrs, "productName", "string",
                      cJSON_CreateString(gpu->product));
    if (semver(d->gpus.driver_version, version, sizeof(version)))
        add_attribute(attrs, "driverVersion", "version",
                      cJSON_CreateString(version));
    if (semver(gpu->compute_capability, version, sizeof(version)))
        add_attribute(attrs, "cudaComputeCapability", "version",
                      cJSON_CreateString(version));
    caps = cJSON_AddObjectToObject(dev, "capacity");
    add_capacity(caps, "memory", value, def_text, step, value, step);
    add_capacity(caps, "computePercent", "100", compute_def, "1", "100", "1");
    return dev;
}

static char *slice_json(const struct driver *d)
{
    cJSON *root = cJSON_CreateObject(), *meta, *spec, *pool, *devices;
    char generate[DRA_NAME_MAX + 32];
    char *text;

    cJSON_AddStringToObject(root, "apiVersion", "resource.k8s.io/v1");
    cJSON_AddStringToObject(root, "kind", "ResourceSlice");
    meta = cJSON_AddObjectToObject(root, "metadata");
    snprintf(generate, sizeof(generate), "%s-%s-", d->node, DRA_DRIVER_NAME);
    cJSON_AddStringToObject(meta, "generateName", generate);
    if (d->node_uid[0]) { /* deleted with its Node */
        cJSON *owners = cJSON_AddArrayToObject(meta, "ownerReferences");
        cJSON *owner = cJSON_CreateObject();

        cJSON_AddStringToObject(owner, "apiVersion", "v1");
        cJSON_AddStringToObject(owner, "kind", "Node");
        cJSON_AddStringToObject(owner, "name", d->node);
        cJSON_AddStringToObject(owner, "uid", d->node_uid);
        cJSON_AddBoolToObject(owner, "controller", 1);
        cJSON_AddItemToArray(owners, owner);
    }
    spec = cJSON_AddObjectToObject(root, "spec");
    cJSON_AddStringToObject(spec, "driver", DRA_DRIVER_NAME);
    cJSON_AddStringToObject(spec, "nodeName", d->node);
    pool = cJSON_AddObjectToObject(spec, "pool");
    cJSON_AddStringToObject(pool, "name", d->node);
    cJSON_AddNumberToObject(pool, "generation", (double)d->slice_generation);
    cJSON_AddNumberToObject(pool, "resourceSliceCount", 1);
    devices = cJSON_AddArrayToObject(spec, "devices");
    for (int g = 0; g < d->gpus.gpu_count; g++) {
        cJSON *dev = device_json(d, g);
        if (dev)
            cJSON_AddItemToArray(devices, dev);
    }
    text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* This node's slices of this driver: their names (up to max) and highest
 * generation. The number of slices, or -1 logged. */
static int list_slices(struct driver *d, char names[][DRA_NAME_MAX], int max,
                       long long *generation)
{
    char path[DRA_NAME_MAX + 160], err[KUBE_ERR_LEN];
    struct kube_body body = {0};
    const cJSON *item;
    cJSON *root;
    long status;
    int n = 0;

    snprintf(path, sizeof(path),
             "%s?fieldSelector=spec.nodeName%%3D%s%%2Cspec.driver%%3D%s",
             SLICES_PATH, d->node, DRA_DRIVER_NAME);
    status = kube_request(&d->kube, "GET", path, NULL, &body, err);
    if (status != 200 || !(root = cJSON_Parse(body.data))) {
        log_warn("cannot list ResourceSlices: %s", status < 0 ? err
                                                   : status == 200
                                                       ? "not JSON"
                                                       : "HTTP error");
        kube_body_free(&body);
        return -1;
    }
    kube_body_free(&body);
    *generation = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, "items"))
    {
        const cJSON *name =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(item,
                                                                              "metadata"),
                                             "name");
        const cJSON *gen = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(item,
                                                                              "spec"),
                                             "pool"),
            "generation");

        if (cJSON_IsNumber(gen) && gen->valuedouble > (double)*generation)
            *generation = (long long)gen->valuedouble;
        if (n < max && cJSON_IsString(name) &&
            strlen(name->valuestring) < DRA_NAME_MAX)
            snprintf(names[n++], DRA_NAME_MAX, "%s", name->valuestring);
    }
    cJSON_Delete(root);
    return n;
}

enum { MAX_OLD_SLICES = 16 };

int slice_publish(struct driver *d)
{
    char old[MAX_OLD_SLICES][DRA_NAME_MAX], err[KUBE_ERR_LEN],
        path[DRA_NAME_MAX + 64];
    struct kube_body body = {0};
    long long generation;
    int n = list_slices(d, old, MAX_OLD_SLICES, &generation);
    char *json;
    cJSON *created;
    long status;

    if (n < 0)
        return -1;
    d->slice_generation =
        (generation > d->slice_generation ? generation : d->slice_generation) + 1;
    json = slice_json(d);
    status = json ? kube_request(&d->kube, "POST", SLICES_PATH, json, &body, err)
                  : -1;
    cJSON_free(json);
    created = status == 201 || status == 200 ? cJSON_Parse(body.data) : NULL;
    if (!created) {
        log_warn("cannot create the ResourceSlice: %s",
                 status < 0 ? (json ? err : "out of memory")
                 : status == 201 || status == 200 ? "answer not JSON"
                 : body.data                      ? body.data
                                                  : "HTTP error");
        kube_body_free(&body);
        return -1;
    }
    kube_body_free(&body);
    const cJSON *name =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(created, "metadata"),
                                         "name");
    snprintf(d->slice_name, sizeof(d->slice_name), "%s",
             cJSON_IsString(name) ? name->valuestring : "");
    cJSON_Delete(created);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%.*s", SLICES_PATH, DRA_NAME_MAX - 1,
                 old[i]);
        status = kube_request(&d->kube, "DELETE", path, NULL, &body, err);
        kube_body_free(&body);
        if (status != 200 && status != 404)
            log_warn("cannot delete the old ResourceSlice %s: %s", old[i],
                     status < 0 ? err : "HTTP error");
    }
    log_info("published ResourceSlice %s (pool %s, generation %lld)",
             d->slice_name, d->node, d->slice_generation);
    return 0;
}

int slice_check(struct driver *d)
{
    char names[MAX_OLD_SLICES][DRA_NAME_MAX];
    long long generation;
    int n = list_slices(d, names, MAX_OLD_SLICES, &generation);

    if (n < 0)
        return -1;
    if (n == 1 && d->slice_name[0] && !strcmp(names[0], d->slice_name))
        return 0;
    log_info("this node's ResourceSlice is gone or has company (%d found): "
             "publishing again",
             n);
    return slice_publish(d);
}
