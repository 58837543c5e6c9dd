/* memory_pools.c - stream-ordered pools and graph memory, charged by what
 * they reserve.
 *
 * A pool keeps the memory of freed allocations (PyTorch's cudaMallocAsync
 * backend sets its release threshold to "never"), so what a process holds
 * is the pool's CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, not the sum of its
 * live allocations. Each known pool is charged exactly its last-read
 * reservation:
 *   - an allocation from a pool charges, before the call, the part of the
 *     request the pool's unused reservation cannot cover (rounded up to the
 *     2 MiB the driver grows pools by); afterwards the real growth is read
 *     and the difference charged or given back; if it does not fit, the
 *     allocation is freed, its stream synchronized and the pool trimmed
 *     back, and the call fails with CUDA_ERROR_OUT_OF_MEMORY;
 *   - cuMemPoolTrimTo and a release at synchronization (threshold reached)
 *     are seen at the next settle: before any reservation of a process that
 *     uses pools, and on every memory query; cuMemPoolDestroy gives back all.
 * Pool allocations of a process are serialized (pools.lock is held across
 * the driver call, a few microseconds) so that one allocation's growth is
 * never mistaken for another's.
 *
 * Graph memory (cuGraphAddMemAllocNode) comes from a per-device pool that
 * the driver fills at launch, when it is too late to refuse. It is charged
 * conservatively: a node's bytes from its creation, and the device's graph
 * reservation (cuDeviceGetGraphMemAttribute) when it is more; the charge
 * falls back to the reservation only at cuDeviceGraphMemTrim. */
#include <pthread.h>

#include "allocations.h"
#include "driver.h"
#include "memory_pools.h"
#include "log.h"
#include "nvshare_memory.h"

#define MAX_POOLS 256
#define POOL_GRANULARITY (2ull << 20)

struct tracked_pool {
    CUmemoryPool pool;
    int gpu;
    uint64_t charged;
};

static struct {
    pthread_mutex_t lock;
    struct tracked_pool pools[MAX_POOLS];
    int n_pools;
    uint64_t graph_charged[NVSHARE_MAX_GPUS];
    bool graph_used[NVSHARE_MAX_GPUS];
} pools = {.lock = PTHREAD_MUTEX_INITIALIZER};

_Atomic bool mem_pools_in_use;

static uint64_t pool_attribute(CUmemoryPool pool, CUmemPool_attribute attr)
{
    const struct hook_driver *drv = hook_driver();
    cuuint64_t value = 0;

    if (drv && drv->mem_pool_get_attribute)
        drv->mem_pool_get_attribute(pool, attr, &value);
    return value;
}

static uint64_t graph_reserved(int gpu)
{
    const struct hook_driver *drv = hook_driver();
    cuuint64_t value = 0;

    if (drv && drv->graph_mem_attribute)
        drv->graph_mem_attribute((CUdevice)gpu,
                                 CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &value);
    return value;
}

static struct tracked_pool *find_locked(CUmemoryPool pool)
{
    for (int i = 0; i < pools.n_pools; i++)
        if (pools.pools[i].pool == pool)
            return &pools.pools[i];
    return NULL;
}

static struct tracked_pool *track_locked(CUmemoryPool pool, int gpu)
{
    struct tracked_pool *p = find_locked(pool);

    if (p != NULL)
        return p;
    if (pools.n_pools == MAX_POOLS) {
        log_warn("more than %d memory pools: pool %p is not charged", MAX_POOLS,
                 (void *)pool);
        return NULL;
    }
    p = &pools.pools[pools.n_pools++];
    *p = (struct tracked_pool){pool, gpu, 0};
    atomic_store(&mem_pools_in_use, true);
    return p;
}

/* Brings a charge to what is reserved now. Growth nobody claimed (an
 * unwrapped path) is charged if the quota allows, else retried next time. */
static void settle_charge(int gpu, uint64_t *charged, uint64_t reserved)
{
    if (reserved < *charged) {
        nvshare_mem_release(gpu, *charged - reserved);
        *charged = reserved;
    } else if (reserved > *charged &&
               nvshare_mem_reserve(gpu, reserved - *charged) == 0) {
        *charged = reserved;
    }
}

static void settle_locked(int gpu)
{
    for (int i = 0; i < pools.n_pools; i++)
        if (pools.pools[i].gpu == gpu)
            settle_charge(gpu, &pools.pools[i].charged,
                          pool_attribute(pools.pools[i].pool,
                                         CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
    /* Graph memory is only ever charged up here: see the top comment. */
    if (gpu >= 0 && gpu < NVSHARE_MAX_GPUS && pools.graph_used[gpu]) {
        uint64_t reserved = graph_reserved(gpu);

        if (reserved > pools.graph_charged[gpu])
            settle_charge(gpu, &pools.graph_charged[gpu], reserved);
    }
}

void mem_pools_settle(int gpu)
{
    if (!atomic_load_explicit(&mem_pools_in_use, memory_order_relaxed))
        return;
    pthread_mutex_lock(&pools.lock);
    settle_locked(gpu);
    pthread_mutex_unlock(&pools.lock);
}

void mem_pool_created(CUmemoryPool pool, int gpu)
{
    pthread_mutex_lock(&pools.lock);
    track_locked(pool, gpu);
    pthread_mutex_unlock(&pools.lock);
}

/* ---- allocations from a pool ------------------------------------------- */

static uint64_t pool_growth(const struct mem_claim *claim)
{
    struct tracked_pool *p = find_locked(claim->u.pool.pool);
    uint64_t reserved =
        pool_attribute(claim->u.pool.pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);

    return reserved > p->charged ? reserved - p->charged : 0;
}

static void pool_undo(const struct mem_claim *claim)
{
    CUdeviceptr ptr = *(const CUdeviceptr *)claim->out;
    CUstream stream = claim->u.pool.stream;
    struct tracked_pool *p = find_locked(claim->u.pool.pool);

    if (claim->u.pool.pt) {
        HOOK_CALL_REAL(cuMemFreeAsync_ptsz, (ptr, stream));
        HOOK_CALL_REAL(cuStreamSynchronize_ptsz, (stream));
    } else {
        HOOK_CALL_REAL(cuMemFreeAsync, (ptr, stream));
        HOOK_CALL_REAL(cuStreamSynchronize, (stream));
    }
    HOOK_CALL_REAL(cuMemPoolTrimTo, (claim->u.pool.pool, (size_t)p->charged));
}

static void pool_commit(const struct mem_claim *claim, uint64_t bytes)
{
    find_locked(claim->u.pool.pool)->charged += bytes;
}

static void pool_unlock(const struct mem_claim *claim)
{
    (void)claim;
    pthread_mutex_unlock(&pools.lock);
}

static const struct mem_path pool_path = {
    .measure = pool_growth,
    .undo = pool_undo,
    .commit = pool_commit,
    .finish = pool_unlock,
    .settles_pools = true,
};

struct mem_claim mem_pool_claim(CUmemoryPool pool, int gpu, size_t bytes,
                                CUstream stream, bool pt, CUdeviceptr *out)
{
    struct mem_claim claim = {.gpu = -1};
    struct tracked_pool *p;
    uint64_t unused, need;

    pthread_mutex_lock(&pools.lock);
    if (pool == NULL || (p = track_locked(pool, gpu)) == NULL) {
        pthread_mutex_unlock(&pools.lock);
        return claim; /* not charged; the driver will judge the pool */
    }
    settle_locked(p->gpu);
    unused = p->charged - pool_attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    if (unused > p->charged) /* used above the charge: nothing unused */
        unused = 0;
    need = bytes > unused ? bytes - unused : 0;
    claim = (struct mem_claim){
        .gpu = p->gpu,
        .bytes =
            (need + POOL_GRANULARITY - 1) / POOL_GRANULARITY * POOL_GRANULARITY,
        .out = out,
        .path = &pool_path,
        .u.pool = {pool, stream, pt},
    };
    return claim; /* pools.lock stays held until pool_unlock */
}

void mem_pool_after_trim(const struct mem_free *f)
{
    struct tracked_pool *p;

    pthread_mutex_lock(&pools.lock);
    if ((p = find_locked(f->pool)) != NULL)
        settle_charge(p->gpu, &p->charged,
                      pool_attribute(p->pool,
                                     CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
    pthread_mutex_unlock(&pools.lock);
}

/* Memory of allocations still outstanding at destroy is freed by the
 * driver when they are; it is given back now (see docs/interposition.md). */
void mem_pool_after_destroy(const struct mem_free *f)
{
    struct tracked_pool *p;

    pthread_mutex_lock(&pools.lock);
    if ((p = find_locked(f->pool)) != NULL) {
        nvshare_mem_release(p->gpu, p->charged);
        *p = pools.pools[--pools.n_pools];
    }
    pthread_mutex_unlock(&pools.lock);
}

/* ---- graph memory ------------------------------------------------------- */

static void graph_commit(const struct mem_claim *claim, uint64_t bytes)
{
    pthread_mutex_lock(&pools.lock);
    pools.graph_charged[claim->gpu] += bytes;
    pools.graph_used[claim->gpu] = true;
    atomic_store(&mem_pools_in_use, true);
    pthread_mutex_unlock(&pools.lock);
}

static const struct mem_path graph_path = {.commit = graph_commit};

struct mem_claim mem_graph_claim(int gpu, uint64_t bytes)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return (struct mem_claim){.gpu = -1};
    return (struct mem_claim){.gpu = gpu, .bytes = bytes, .path = &graph_path};
}

void mem_graph_after_trim(const struct mem_free *f)
{
    int gpu = (int)f->dev;

    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&pools.lock);
    settle_charge(gpu, &pools.graph_charged[gpu], graph_reserved(gpu));
    pthread_mutex_unlock(&pools.lock);
}

/* A forked child holds none of its parent's pools. */
static void forget_pools_in_child(void)
{
    pthread_mutex_init(&pools.lock, NULL);
    pools.n_pools = 0;
    for (int i = 0; i < NVSHARE_MAX_GPUS; i++) {
        pools.graph_charged[i] = 0;
        pools.graph_used[i] = false;
    }
    atomic_store(&mem_pools_in_use, false);
}

__attribute__((constructor)) static void register_pools_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_pools_in_child);
}
