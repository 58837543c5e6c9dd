/* claim.c - a ResourceClaim as Prepare reads it, and the quantities in it.
 * Nothing here does I/O: the unit test feeds it JSON. */
#include "driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parse.h"
#include "protocol.h"

/* Quantities come back canonical ("4096Mi" may read "4Gi"): they are
 * compared as numbers, never as strings. A fraction or milli-units round
 * up, as the allocator rounds a request up. */
bool quantity_parse(const char *text, uint64_t *out)
{
    uint64_t whole = 0, frac = 0, frac_scale = 1, multiplier = 0, divisor = 1;
    const char *p = text;

    if (!text || *p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return false;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (frac_scale >= 1000000000ULL)
                continue; /* beyond a nanounit: no quantity is that fine */
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_scale *= 10;
        }
    }
    if (!strcmp(p, "m")) {
        multiplier = 1;
        divisor = 1000;
    }
    for (const struct parse_unit *u = parse_quantity_units;
         !multiplier && u->suffix; u++)
        if (!strcmp(p, u->suffix))
            multiplier = u->scale;
    if (!multiplier || (whole && whole > UINT64_MAX / multiplier))
        return false;
    /* value = (whole + frac / frac_scale) * multiplier / divisor, up */
    uint64_t value = whole * multiplier;
    uint64_t part =
        frac ? (multiplier / frac_scale) * frac +
                   ((multiplier % frac_scale) * frac + frac_scale - 1) / frac_scale
             : 0;
    if (value > UINT64_MAX - part)
        return false;
    value += part;
    *out = value / divisor + (value % divisor != 0);
    return true;
}

static const char *string_at(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool copy(char *dst, size_t size, const char *src)
{
    if (!src || strlen(src) >= size)
        return false;
    memcpy(dst, src, strlen(src) + 1);
    return true;
}

/* The GPU index a device name of this driver names ("gpu-3"), or -1. */
static int device_gpu_index(const struct driver *d, const char *name)
{
    char *end;
    long index;

    if (strncmp(name, "gpu-", 4) || name[4] < '0' || name[4] > '9')
        return -1;
    index = strtol(name + 4, &end, 10);
    if (*end || index >= d->gpus.gpu_count || (index > 0 && name[4] == '0'))
        return -1;
    return (int)index;
}

/* One consumed capacity of a result; absent means the device's default
 * is unknown here, and 0 (the whole device) is what the claim holds. */
static int consumed(const cJSON *result, const char *key, uint64_t *out,
                    char err[DRA_ERR_LEN])
{
    const cJSON *caps =
        cJSON_GetObjectItemCaseSensitive(result, "consumedCapacity");
    const char *text = caps ? string_at(caps, key) : NULL;

    *out = 0;
    if (caps && !cJSON_IsObject(caps)) {
        snprintf(err, DRA_ERR_LEN, "consumedCapacity is not an object");
        return -1;
    }
    if (!text)
        return 0;
    if (!quantity_parse(text, out)) {
        snprintf(err, DRA_ERR_LEN,
                 "consumedCapacity %s '%.40s' is not a quantity", key, text);
        return -1;
    }
    return 0;
}

static int parse_result(const struct driver *d, const cJSON *r,
                        struct dra_share *s, char err[DRA_ERR_LEN])
{
    const char *request = string_at(r, "request"), *pool = string_at(r, "pool");
    const char *device = string_at(r, "device"),
               *share = string_at(r, "shareID");
    uint64_t compute;
    size_t base;

    memset(s, 0, sizeof(*s));
    if (!request || !pool || !device) {
        snprintf(err, DRA_ERR_LEN,
                 "an allocation result lacks request, pool or device");
        return -1;
    }
    if (strcmp(pool, d->node) || (s->gpu = device_gpu_index(d, device)) < 0) {
        snprintf(err, DRA_ERR_LEN,
                 "device %.60s of pool %.60s is not one of node %.60s's",
                 device, pool, d->node);
        return -1;
    }
    /* kubelet matches containers by the base request name */
    base = strcspn(request, "/");
    if (base >= sizeof(s->request) ||
        (share && !copy(s->share_id, sizeof(s->share_id), share))) {
        snprintf(err, DRA_ERR_LEN, "request name or shareID too long");
        return -1;
    }
    memcpy(s->request, request, base);
    if (consumed(r, "memory", &s->memory, err) ||
        consumed(r, "computePercent", &compute, err))
        return -1;
    if (compute > 100 || s->memory > d->gpus.gpus[s->gpu].capacity_bytes) {
        snprintf(err, DRA_ERR_LEN, "consumed capacity above %s's", device);
        return -1;
    }
    s->compute = (unsigned)compute;
    return 0;
}

/* Whether a config entry's requests name one of c's (none: all of them). */
static bool config_applies(const cJSON *requests, const struct dra_claim *c)
{
    const cJSON *r;

    if (cJSON_GetArraySize(requests) == 0)
        return true;
    cJSON_ArrayForEach(r, requests)
    {
        size_t base = cJSON_IsString(r) ? strcspn(r->valuestring, "/") : 0;

        for (int s = 0; base && s < c->n_shares; s++)
            if (strlen(c->shares[s].request) == base &&
                !strncmp(c->shares[s].request, r->valuestring, base))
                return true;
    }
    return false;
}

/* The opaque configuration of this driver, from the class then the claim
 * (the allocation lists them in that order: the claim's wins). Its
 * parameters hold "priority" (high, normal, low or 1-9) besides apiVersion
 * and kind; anything else is refused rather than ignored, so a misspelt
 * setting is not silently without effect. */
static int parse_config(const cJSON *configs, struct dra_claim *c,
                        char err[DRA_ERR_LEN])
{
    const cJSON *cfg, *field;

    cJSON_ArrayForEach(cfg, configs)
    {
        const cJSON *opaque = cJSON_GetObjectItemCaseSensitive(cfg, "opaque");
        const cJSON *params =
            cJSON_GetObjectItemCaseSensitive(opaque, "parameters");
        const char *driver = string_at(opaque, "driver");

        if (!driver || strcmp(driver, DRA_DRIVER_NAME) ||
            !config_applies(cJSON_GetObjectItemCaseSensitive(cfg, "requests"), c))
            continue;
        if (!cJSON_IsObject(params)) {
            snprintf(err, DRA_ERR_LEN,
                     "opaque config of %s: parameters is not an object",
                     DRA_DRIVER_NAME);
            return -1;
        }
        cJSON_ArrayForEach(field, params)
        {
            char why[PARSE_ERR_LEN];

            if (!strcmp(field->string, "apiVersion") ||
                !strcmp(field->string, "kind"))
                continue;
            if (strcmp(field->string, "priority")) {
                snprintf(err, DRA_ERR_LEN,
                         "opaque config: unknown parameter '%.40s' "
                         "(known: priority)",
                         field->string);
                return -1;
            }
            if (!cJSON_IsString(field) ||
                parse_priority(field->valuestring, &c->priority, why)) {
                snprintf(err, DRA_ERR_LEN, "opaque config: priority: %s",
                         cJSON_IsString(field) ? why : "not a string");
                return -1;
            }
        }
    }
    return 0;
}

/* This driver's results of the allocation (another driver may have devices
 * in the same claim), one share each. */
static int parse_results(const struct driver *d, const cJSON *results,
                         struct dra_claim *c, char err[DRA_ERR_LEN])
{
    const cJSON *r;

    if (!cJSON_IsArray(results)) {
        snprintf(err, DRA_ERR_LEN, "the claim is not allocated");
        return -1;
    }
    cJSON_ArrayForEach(r, results)
    {
        const char *driver = string_at(r, "driver");

        if (!driver || strcmp(driver, DRA_DRIVER_NAME))
            continue;
        if (c->n_shares == DRA_MAX_RESULTS) {
            snprintf(err, DRA_ERR_LEN, "more than %d allocation results",
                     DRA_MAX_RESULTS);
            return -1;
        }
        if (parse_result(d, r, &c->shares[c->n_shares], err))
            return -1;
        c->n_shares++;
    }
    if (!c->n_shares) {
        snprintf(err, DRA_ERR_LEN, "no device of %s is allocated to the claim",
                 DRA_DRIVER_NAME);
        return -1;
    }
    return 0;
}

/* The pods the claim is reserved for (other kinds of consumer are not
 * ours to prepare). */
static int parse_reserved(const cJSON *reserved, struct dra_claim *c,
                          char err[DRA_ERR_LEN])
{
    const cJSON *p;

    cJSON_ArrayForEach(p, reserved)
    {
        const char *resource = string_at(p, "resource"),
                   *api_group = string_at(p, "apiGroup");

        if (!resource || strcmp(resource, "pods") || (api_group && *api_group))
            continue;
        if (c->n_pods == DRA_MAX_PODS ||
            !copy(c->pods[c->n_pods], sizeof(c->pods[0]), string_at(p, "uid"))) {
            snprintf(err, DRA_ERR_LEN, "a reservedFor entry lacks a pod's uid");
            return -1;
        }
        c->n_pods++;
    }
    if (!c->n_pods) {
        snprintf(err, DRA_ERR_LEN, "the claim is reserved for no pod");
        return -1;
    }
    return 0;
}

int claim_parse(const struct driver *d, const char *json, const char *uid,
                struct dra_claim *c, char err[DRA_ERR_LEN])
{
    cJSON *root = cJSON_Parse(json);
    const cJSON *meta, *status, *devices;
    int rc = -1;

    memset(c, 0, sizeof(*c));
    if (!root || !cJSON_IsObject(root)) {
        snprintf(err, DRA_ERR_LEN, "the API server's claim is not JSON");
        goto out;
    }
    meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (!string_at(meta, "uid") || strcmp(string_at(meta, "uid"), uid)) {
        snprintf(err, DRA_ERR_LEN, "the claim was replaced: its uid is now %.40s",
                 string_at(meta, "uid") ? string_at(meta, "uid") : "missing");
        goto out;
    }
    copy(c->uid, sizeof(c->uid), uid);
    copy(c->namespace_, sizeof(c->namespace_), string_at(meta, "namespace"));
    copy(c->name, sizeof(c->name), string_at(meta, "name"));
    status = cJSON_GetObjectItemCaseSensitive(root, "status");
    devices =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(status, "allocation"),
                                         "devices");
    if (parse_results(d, cJSON_GetObjectItemCaseSensitive(devices, "results"),
                      c, err) ||
        parse_config(cJSON_GetObjectItemCaseSensitive(devices, "config"), c, err) ||
        parse_reserved(cJSON_GetObjectItemCaseSensitive(status, "reservedFor"),
                       c, err))
        goto out;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}
