/* shards.h - what a Slurm job's GPUs are worth to nvshare: the plugin's
 * arguments (plugstack.conf) and the arithmetic that turns a job's shards
 * into the memory quota and core limit of its pod.
 *
 * Pure: no Slurm, no socket. nvshare_spank.c reads the job's variables and
 * talks to the scheduler; tests/slurm/test_shards.c checks this part.
 *
 * Slurm's shard GRES cuts each GPU into shards_per_gpu shards and only
 * counts them. A job with n shards of a GPU gets, on that GPU,
 *   memory: n x memory_per_shard, or n / shards_per_gpu of the GPU's memory
 *   time:   n x compute_per_shard percent, or n / shards_per_gpu of 100 %
 * (at most the whole GPU). A job with whole GPUs (--gres=gpu) gets no
 * limit; a job with no GPU is none of nvshare's business. */
#ifndef NVSHARE_SHARDS_H
#define NVSHARE_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHARDS_ERR_LEN 320
#define SHARDS_PATH_MAX 200 /* the control socket's path must fit 256 */

struct shards_config {
    uint64_t memory_per_shard; /* bytes; 0: the GPU's memory / shards_per_gpu */
    unsigned compute_per_shard; /* percent; 0: 100 / shards_per_gpu */
    unsigned shards_per_gpu;    /* as gres.conf cuts each GPU; 0: not given */
    bool fail_job;              /* no scheduler: the job fails (else runs
                                   unscheduled) */
    char sock_dir[SHARDS_PATH_MAX];
    char libnvshare[4096];
};

/* Parses the plugin's arguments (key=value words) over the defaults.
 * Returns 0, or -1 with one sentence in err: an unknown key, a bad value,
 * or a configuration that cannot give a shard's memory and time. */
int shards_parse_args(struct shards_config *c, int argc, char **argv,
                      char err[SHARDS_ERR_LEN]);

/* Whether the plugin needs the GPU's memory from the scheduler. */
bool shards_need_gpu_memory(const struct shards_config *c);

enum shards_job_kind {
    SHARDS_NO_GPU,    /* left alone */
    SHARDS_WHOLE_GPU, /* --gres=gpu: scheduled, no limit */
    SHARDS_SHARED,    /* --gres=shard: scheduled and limited */
};

/* The kind of a job from its step's SLURM_SHARDS_ON_NODE and GPU list
 * (SLURM_STEP_GPUS or SLURM_JOB_GPUS), either NULL when unset; *shards is
 * the shard count for SHARDS_SHARED. A count that is not a positive number
 * is -1 with err. */
int shards_job_kind(const char *shards_on_node, const char *gpus,
                    enum shards_job_kind *kind, unsigned *shards,
                    char err[SHARDS_ERR_LEN]);

struct shards_limits {
    uint64_t memory; /* bytes per GPU */
    unsigned core;   /* percent of each GPU's time, 1-100 */
};

/* The limits of shards shards (> 0); gpu_memory is the GPU's size in bytes
 * when shards_need_gpu_memory (else ignored). */
void shards_limits(const struct shards_config *c, unsigned shards,
                   uint64_t gpu_memory, struct shards_limits *out);

#endif
