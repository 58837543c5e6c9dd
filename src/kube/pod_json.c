/* pod_json.c - see pod_json.h. */
#include "pod_json.h"

#include <stdio.h>
#include <string.h>

#include "parse.h"

static const char *string_at(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);

    return cJSON_IsString(item) ? item->valuestring : NULL;
}

/* The annotation's text and value; a value that does not parse leaves
 * *value 0 and a reason in a->why. */
static void read_annotation(const cJSON *annotations, const char *key,
                            bool core, struct annotation *a, uint64_t *value)
{
    const char *text = string_at(annotations, key);
    char err[PARSE_ERR_LEN];
    long percent;
    unsigned priority;
    int on;
    bool is_priority = !strcmp(key, ANNOTATION_PRIORITY),
         is_idle_swap = !strcmp(key, ANNOTATION_IDLE_SWAP);

    memset(a, 0, sizeof(*a));
    *value = 0;
    if (!text)
        return;
    a->present = true;
    snprintf(a->raw, sizeof(a->raw), "%s", text);
    if (strlen(text) >= sizeof(a->raw)) {
        a->bad = true;
        snprintf(a->why, sizeof(a->why), "value too long");
    } else if (is_priority && parse_priority(text, &priority, err) == 0) {
        *value = priority;
    } else if (is_priority) {
        a->bad = true;
        snprintf(a->why, sizeof(a->why),
                 "high, normal, low or a class 1-9 is "
                 "expected");
    } else if (is_idle_swap && parse_switch(text, &on, err) == 0) {
        *value = on ? IDLE_SWAP_ON : IDLE_SWAP_OFF;
    } else if (is_idle_swap) {
        a->bad = true;
        snprintf(a->why, sizeof(a->why), "off or on is expected");
    } else if (core && parse_int_range(text, 1, 100, &percent, err) == 0) {
        *value = (uint64_t)percent;
    } else if (!core && parse_size_bytes(text, value, err) == 0 && *value) {
    } else {
        a->bad = true;
        *value = 0;
        snprintf(a->why, sizeof(a->why), "%s",
                 core ? "a percent 1-100 is expected"
                      : "a size such as 4Gi is expected");
    }
}

/* Units of nvshare.com/gpu-memory the pod's containers ask for: a limit
 * (which an extended resource's request equals), else a request. Sets
 * *saturated when the sum does not fit. */
static uint64_t memory_units(const cJSON *spec, bool *saturated)
{
    const cJSON *containers =
        cJSON_GetObjectItemCaseSensitive(spec, "containers");
    const cJSON *c;
    uint64_t units = 0;

    cJSON_ArrayForEach(c, containers)
    {
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
        const char *text =
            string_at(cJSON_GetObjectItemCaseSensitive(res, "limits"),
                      RESOURCE_GPU_MEMORY);
        char err[PARSE_ERR_LEN];
        long n;

        if (!text)
            text = string_at(cJSON_GetObjectItemCaseSensitive(res, "requests"),
                             RESOURCE_GPU_MEMORY);
        /* The API server admits only whole numbers for extended resources. */
        if (text && parse_int_range(text, 0, 1L << 30, &n, err) == 0 &&
            __builtin_add_overflow(units, (uint64_t)n, &units)) {
            *saturated = true;
            return UINT64_MAX;
        }
    }
    return units;
}

static bool has_nvshare_key(const cJSON *object)
{
    const cJSON *item;

    cJSON_ArrayForEach(item,
                       object) if (item->string &&
                                   !strncmp(item->string, NVSHARE_PREFIX,
                                            strlen(NVSHARE_PREFIX))) return true;
    return false;
}

/* Whether nvshare has anything to do with the pod: other pods of the node
 * are not the scheduler's business. */
static bool concerns_nvshare(const cJSON *annotations, const cJSON *spec)
{
    const cJSON *c;

    if (has_nvshare_key(annotations))
        return true;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, "containers"))
    {
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
        if (has_nvshare_key(cJSON_GetObjectItemCaseSensitive(res, "limits")) ||
            has_nvshare_key(cJSON_GetObjectItemCaseSensitive(res, "requests")))
            return true;
    }
    return false;
}

int pod_from_json(const cJSON *pod, uint64_t unit, struct watched_pod *out)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    const cJSON *annotations =
        cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    const char *uid = string_at(meta, "uid"), *name = string_at(meta, "name");
    const char *ns = string_at(meta, "namespace"),
               *rv = string_at(meta, "resourceVersion");
    struct msg_pod_facts *f = &out->facts;
    uint64_t value;

    memset(out, 0, sizeof(*out));
    if (!uid || !name || !uid[0] || !name[0] ||
        strlen(uid) >= sizeof(f->pod_uid) || strlen(name) >= sizeof(f->pod_name))
        return -1;
    snprintf(f->pod_uid, sizeof(f->pod_uid), "%s", uid);
    snprintf(f->pod_name, sizeof(f->pod_name), "%s", name);
    snprintf(f->pod_namespace, sizeof(f->pod_namespace), "%s", ns ? ns : "");
    snprintf(out->resource_version, sizeof(out->resource_version), "%s",
             rv ? rv : "");
    read_annotation(annotations, ANNOTATION_CORE_LIMIT, true, &out->core, &value);
    f->core_limit = (uint8_t)value;
    read_annotation(annotations, ANNOTATION_MEMORY_LIMIT, false, &out->memory,
                    &value);
    f->memory_limit = value;
    read_annotation(annotations, ANNOTATION_PRIORITY, false, &out->priority,
                    &value);
    f->priority = (uint8_t)value;
    read_annotation(annotations, ANNOTATION_IDLE_SWAP, false, &out->idle_swap,
                    &value);
    f->idle_swap = (uint8_t)value;
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    /* More than 2^64 bytes is more than any GPU: the most that fits says
     * so, where a wrapped product would be any size, small ones too. */
    uint64_t units = memory_units(spec, &out->request_saturated);
    if (out->request_saturated ||
        __builtin_mul_overflow(units, unit, &f->memory_request)) {
        out->request_saturated = true;
        f->memory_request = UINT64_MAX;
    }
    out->concerns_nvshare = concerns_nvshare(annotations, spec);
    f->unreadable = (out->core.bad ? POD_FACT_CORE_UNREADABLE : 0) |
                    (out->memory.bad ? POD_FACT_MEMORY_UNREADABLE : 0) |
                    (out->priority.bad ? POD_FACT_PRIORITY_UNREADABLE : 0) |
                    (out->idle_swap.bad ? POD_FACT_IDLE_SWAP_UNREADABLE : 0);
    return 0;
}

bool pod_facts_differ(const struct watched_pod *a, const struct watched_pod *b)
{
    const struct msg_pod_facts *x = &a->facts, *y = &b->facts;

    return strcmp(x->pod_namespace, y->pod_namespace) ||
           strcmp(x->pod_name, y->pod_name) || x->core_limit != y->core_limit ||
           x->memory_limit != y->memory_limit || x->priority != y->priority ||
           x->idle_swap != y->idle_swap ||
           x->memory_request != y->memory_request ||
           x->unreadable != y->unreadable;
}
