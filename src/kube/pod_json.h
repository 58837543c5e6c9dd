/* pod_json.h - a pod object of the Kubernetes API, as nvshare reads it.
 *
 * Pure: no I/O. What the scheduler learns of a pod (struct msg_pod_facts)
 * is its UID, namespace, name, the nvshare.com/gpu-core-limit,
 * nvshare.com/gpu-memory-limit, nvshare.com/priority and nvshare.com/idle-swap
 * annotations and the nvshare.com/gpu-memory request. An annotation that does not parse is never sent as a value:
 * the facts mark it unreadable (the scheduler keeps what it had), and its
 * raw text is kept so that one bad value is reported once, not on every
 * update of the pod. */
#ifndef NVSHARE_POD_JSON_H
#define NVSHARE_POD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "protocol.h"

#define ANNOTATION_CORE_LIMIT "nvshare.com/gpu-core-limit"
#define ANNOTATION_MEMORY_LIMIT "nvshare.com/gpu-memory-limit"
#define ANNOTATION_PRIORITY "nvshare.com/priority"
#define ANNOTATION_IDLE_SWAP "nvshare.com/idle-swap"
#define RESOURCE_GPU_MEMORY "nvshare.com/gpu-memory"
#define NVSHARE_PREFIX "nvshare.com/"
#define ANNOTATION_RAW_MAX 64 /* longer values are unreadable anyway */

/* One annotation: its text ("" when absent) and whether it parsed. */
struct annotation {
    char raw[ANNOTATION_RAW_MAX];
    bool present;
    bool bad;
    char why[128]; /* when bad */
};

struct watched_pod {
    struct msg_pod_facts facts;
    struct annotation core, memory, priority, idle_swap;
    bool concerns_nvshare;  /* an nvshare.com/ annotation or resource */
    bool request_saturated; /* the gpu-memory request overflowed 64 bits:
                               facts.memory_request is UINT64_MAX */
    char resource_version[64];
};

/* Reads a pod object. unit is the size of one nvshare.com/gpu-memory unit
 * (NVSHARE_GPU_MEMORY_UNIT). 0, or -1 when it has no UID or name. */
int pod_from_json(const cJSON *pod, uint64_t unit, struct watched_pod *out);

/* Whether the scheduler must be told again: its facts differ. */
bool pod_facts_differ(const struct watched_pod *a, const struct watched_pod *b);

#endif
