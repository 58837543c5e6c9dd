/* shards.c - see shards.h. */
#include "shards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "protocol.h" /* DEFAULT_SOCK_DIR */

#ifndef NVSHARE_DEFAULT_LIBNVSHARE
#define NVSHARE_DEFAULT_LIBNVSHARE "/usr/local/lib/libnvshare.so"
#endif

/* value into buf of size n, or -1 with err when it does not fit. */
static int copy_path(char *buf, size_t n, const char *key, const char *value,
                     char err[SHARDS_ERR_LEN])
{
    if (value[0] != '/' || strlen(value) >= n) {
        snprintf(err, SHARDS_ERR_LEN,
                 "%s: give an absolute path shorter than %zu "
                 "bytes, not '%.100s'",
                 key, n, value);
        return -1;
    }
    memcpy(buf, value, strlen(value) + 1);
    return 0;
}

static int parse_one(struct shards_config *c, const char *key,
                     const char *value, char err[SHARDS_ERR_LEN])
{
    char why[PARSE_ERR_LEN];
    long n;

    if (!strcmp(key, "memory_per_shard")) {
        if (parse_size_bytes(value, &c->memory_per_shard, why) ||
            c->memory_per_shard == 0)
            goto bad;
    } else if (!strcmp(key, "compute_per_shard")) {
        if (parse_int_range(value, 1, 100, &n, why))
            goto bad;
        c->compute_per_shard = (unsigned)n;
    } else if (!strcmp(key, "shards_per_gpu")) {
        if (parse_int_range(value, 1, 1000000, &n, why))
            goto bad;
        c->shards_per_gpu = (unsigned)n;
    } else if (!strcmp(key, "on_error")) {
        if (strcmp(value, "run") && strcmp(value, "fail")) {
            snprintf(why, sizeof(why), "say run (unscheduled) or fail");
            goto bad;
        }
        c->fail_job = !strcmp(value, "fail");
    } else if (!strcmp(key, "sock_dir")) {
        return copy_path(c->sock_dir, sizeof(c->sock_dir), key, value, err);
    } else if (!strcmp(key, "libnvshare")) {
        return copy_path(c->libnvshare, sizeof(c->libnvshare), key, value, err);
    } else {
        snprintf(err, SHARDS_ERR_LEN,
                 "unknown argument '%.60s' (memory_per_shard, "
                 "compute_per_shard, shards_per_gpu, on_error, sock_dir, "
                 "libnvshare)",
                 key);
        return -1;
    }
    return 0;
bad:
    snprintf(err, SHARDS_ERR_LEN, "%.40s=%.60s: %s", key, value, why);
    return -1;
}

int shards_parse_args(struct shards_config *c, int argc, char **argv,
                      char err[SHARDS_ERR_LEN])
{
    memset(c, 0, sizeof(*c));
    snprintf(c->sock_dir, sizeof(c->sock_dir), "%s", DEFAULT_SOCK_DIR);
    snprintf(c->libnvshare, sizeof(c->libnvshare), "%s",
             NVSHARE_DEFAULT_LIBNVSHARE);
    for (int i = 0; i < argc; i++) {
        char key[64];
        const char *eq = strchr(argv[i], '=');
        if (!eq || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof(key)) {
            snprintf(err, SHARDS_ERR_LEN, "argument '%.60s' is not key=value",
                     argv[i]);
            return -1;
        }
        memcpy(key, argv[i], (size_t)(eq - argv[i]));
        key[eq - argv[i]] = '\0';
        if (parse_one(c, key, eq + 1, err))
            return -1;
    }
    if (!c->shards_per_gpu && (!c->memory_per_shard || !c->compute_per_shard)) {
        snprintf(err, SHARDS_ERR_LEN,
                 "give shards_per_gpu (as gres.conf cuts each "
                 "GPU), or both memory_per_shard and compute_per_shard");
        return -1;
    }
    return 0;
}

bool shards_need_gpu_memory(const struct shards_config *c)
{
    return c->memory_per_shard == 0;
}

int shards_job_kind(const char *shards_on_node, const char *gpus,
                    enum shards_job_kind *kind, unsigned *shards,
                    char err[SHARDS_ERR_LEN])
{
    char why[PARSE_ERR_LEN];
    long n;

    *shards = 0;
    if (shards_on_node && shards_on_node[0]) {
        if (parse_int_range(shards_on_node, 1, 1000000, &n, why)) {
            snprintf(err, SHARDS_ERR_LEN, "SLURM_SHARDS_ON_NODE=%.40s: %s",
                     shards_on_node, why);
            return -1;
        }
        *shards = (unsigned)n;
        *kind = SHARDS_SHARED;
    } else {
        *kind = gpus && gpus[0] ? SHARDS_WHOLE_GPU : SHARDS_NO_GPU;
    }
    return 0;
}

void shards_limits(const struct shards_config *c, unsigned shards,
                   uint64_t gpu_memory, struct shards_limits *out)
{
    unsigned __int128 memory;
    unsigned long long core;

    if (c->memory_per_shard)
        memory = (unsigned __int128)c->memory_per_shard * shards;
    else
        memory = (unsigned __int128)gpu_memory * shards / c->shards_per_gpu;
    if (!c->memory_per_shard && memory > gpu_memory)
        memory = gpu_memory;
    out->memory = memory > UINT64_MAX ? UINT64_MAX : (uint64_t)memory;

    if (c->compute_per_shard)
        core = (unsigned long long)c->compute_per_shard * shards;
    else
        core = 100ull * shards / c->shards_per_gpu;
    out->core = core > 100 ? 100 : core < 1 ? 1 : (unsigned)core;
}
