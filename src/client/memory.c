/* memory.c - the pod's memory ledger inside a process (nvshare_memory.h).
 *
 * Per GPU the process holds `allocated` bytes and may hold `credit`: bytes
 * the scheduler has already reserved for this process but that are not
 * allocated yet. A reservation that fits in the credit is local; otherwise
 * the process asks the scheduler for what it lacks plus a little slack, and
 * the scheduler grants it only if the pod's total stays within the quota.
 * Freed bytes become credit again (so an allocate/free loop stays local) up
 * to a cap; above it they go back to the scheduler at once. When the
 * scheduler runs short for another process of the pod it reclaims credit.
 *
 * With no scheduler the same ledger enforces the static limit per process.
 */
#include "nvshare_memory.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "client_internal.h"
#include "env.h"
#include "log.h"
#include "parse.h"

struct gpu_ledger {
    uint64_t allocated;
    uint64_t credit;       /* granted by the scheduler, not allocated */
    uint64_t quota;        /* the pod's, as last heard; 0 = none */
    uint64_t pod_used;     /* the pod's reserved bytes, as last heard */
    bool refusing;         /* in a burst of refusals: log once */
};

static struct {
    pthread_mutex_t mu;
    pthread_once_t once;
    uint64_t static_limit; /* NVSHARE_GPU_MEMORY_LIMIT; 0 = none */
    struct gpu_ledger gpus[NVSHARE_MAX_GPUS];
} ledger = {.mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static void read_static_limit(void)
{
    ledger.static_limit = env_size_bytes("NVSHARE_GPU_MEMORY_LIMIT", 0);
}

static void log_refusal(int gpu, struct gpu_ledger *g, uint64_t quota,
                        uint64_t used, uint64_t bytes)
{
    char q[32], u[32], b[32];

    if (g->refusing)
        return;
    g->refusing = true;
    format_size(quota, q, sizeof(q));
    format_size(used, u, sizeof(u));
    format_size(bytes, b, sizeof(b));
    log_warn("out of GPU memory quota on gpu %d (pod %s): limit %s, in use %s, "
             "requested %s: CUDA_ERROR_OUT_OF_MEMORY", gpu, client_pod_name(),
             q, u, b);
}

int nvshare_mem_reserve(int gpu, uint64_t bytes)
{
    struct gpu_ledger *g;
    int rc = 0;

    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return 0;
    pthread_once(&ledger.once, read_static_limit);
    pthread_mutex_lock(&ledger.mu);
    g = &ledger.gpus[gpu];
    if (ledger.static_limit &&
        (bytes > ledger.static_limit ||
         g->allocated > ledger.static_limit - bytes)) {
        log_refusal(gpu, g, ledger.static_limit, g->allocated, bytes);
        rc = -1;
    } else {
        g->allocated += bytes;
        g->refusing = false;
    }
    pthread_mutex_unlock(&ledger.mu);
    return rc;
}

void nvshare_mem_release(int gpu, uint64_t bytes)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&ledger.mu);
    struct gpu_ledger *g = &ledger.gpus[gpu];
    g->allocated = bytes > g->allocated ? 0 : g->allocated - bytes;
    pthread_mutex_unlock(&ledger.mu);
}

bool nvshare_mem_view(int gpu, uint64_t *quota, uint64_t *used)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return false;
    pthread_once(&ledger.once, read_static_limit);
    pthread_mutex_lock(&ledger.mu);
    *quota = ledger.static_limit;
    *used = ledger.gpus[gpu].allocated;
    pthread_mutex_unlock(&ledger.mu);
    return *quota != 0;
}

uint64_t nvshare_mem_allocated(int gpu)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return 0;
    pthread_mutex_lock(&ledger.mu);
    uint64_t allocated = ledger.gpus[gpu].allocated;
    pthread_mutex_unlock(&ledger.mu);
    return allocated;
}
