/* cgroup_memory.h - how much host memory this process's memory cgroup
 * (its container's, its pod's) lets it fill before the kernel's OOM killer
 * acts on it. The host may have plenty while the container has little: a
 * swap-out writes the host copy of its GPU memory in the process, so the
 * copy is charged to the container, and one past its limit kills it. */
#ifndef NVSHARE_CGROUP_MEMORY_H
#define NVSHARE_CGROUP_MEMORY_H

#include <stdint.h>

/* No limit on the way, or none could be read. */
#define CGROUP_MEMORY_UNLIMITED UINT64_MAX

/* What a swap-out must leave in the cgroup besides its copy: the staging
 * buffers it may pin (128 MiB at most) and what the process itself allocates
 * meanwhile. */
#define CGROUP_SWAP_MARGIN (256ull << 20)

/* Each the least over the process's cgroup and the ancestors visible to it
 * that set a limit (v2: memory.max and memory.high, whichever is lower; v1:
 * memory.limit_in_bytes). */
struct cgroup_memory {
    uint64_t free;      /* limit - usage: filling it pushes nothing out */
    uint64_t available; /* limit - (usage - inactive_file): also the page
                           cache and lazily freed pages (host copies made
                           ahead, MADV_FREE) the kernel reclaims first */
};

/* From a cgroup file system mounted at root (v2, or v1 with its memory
 * hierarchy at root/memory) and self_cgroup, the text of
 * /proc/self/cgroup. A path that does not exist under root (a cgroup
 * namespace shows "/" and mounts the container's own cgroup at root) is
 * walked up to the levels that do. */
struct cgroup_memory cgroup_memory_of(const char *root, const char *self_cgroup);

/* This process's, now: /sys/fs/cgroup and /proc/self/cgroup. */
struct cgroup_memory cgroup_memory_now(void);

#endif
