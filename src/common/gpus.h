/* gpus.h - which GPUs this node has: NVML, or NVSHARE_GPUS when set. */
#ifndef NVSHARE_GPUS_H
#define NVSHARE_GPUS_H

#include <stdint.h>

#include "protocol.h"

struct node_gpu {
    char uuid[PROTO_UUID_MAX];
    char name[PROTO_NAME_MAX];
    uint64_t memory_total; /* bytes */
};

/* Parses NVSHARE_GPUS syntax: "UUID:MiB[,UUID:MiB...]". Returns the number
 * of GPUs, or -1 with a sentence in err. */
int gpus_parse(const char *spec, struct node_gpu *out, int max, char *err,
               int err_len);

/* spec (NVSHARE_GPUS's value) if set and not empty, else NVML (loaded with
 * dlopen). Returns the number of GPUs (0 if there are none) or -1 with a
 * sentence in err. */
int gpus_discover(const char *spec, struct node_gpu *out, int max, char *err,
                  int err_len);

#endif
