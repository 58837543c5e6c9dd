/* pools.c - stream-ordered memory pools and graph memory nodes.
 *
 * A pool reserves device memory in 2 MiB steps when its unused reservation
 * cannot hold an allocation, and keeps it after frees (as with a release
 * threshold of "never", what PyTorch sets) until cuMemPoolTrimTo or
 * cuMemPoolDestroy. Frees are immediate, not stream-ordered. Each device
 * has a default pool, which is also its current one. Graph memory nodes
 * take no memory (graphs are never instantiated here). */
#include <stdlib.h>

#include "fake.h"

#define POOL_STEP (2ull << 20)

struct fake_pool {
    int dev;
    uint64_t reserved, used;
};

static struct fake_pool default_pools[FAKE_MAX_DEVICES];

static uint64_t round_up(uint64_t n, uint64_t step)
{
    return (n + step - 1) / step * step;
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t bytesize,
                           struct fake_pool *pool)
{
    uint64_t growth = 0;
    CUresult rc;

    if (pool == NULL || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    if (pool->used + bytesize > pool->reserved)
        growth = round_up(pool->used + bytesize - pool->reserved, POOL_STEP);
    if (growth && !fake_mem_take(pool->dev, growth)) {
        pthread_mutex_unlock(&fake_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pool->reserved += growth;
    pool->used += bytesize;
    pthread_mutex_unlock(&fake_lock);
    rc = fake_mem_new(FAKE_MEM_LINEAR, pool->dev, bytesize, false, pool, dptr);
    if (rc != CUDA_SUCCESS)
        fake_pool_freed(pool, bytesize);
    return rc;
}

void fake_pool_freed(struct fake_pool *pool, uint64_t size)
{
    pthread_mutex_lock(&fake_lock);
    pool->used -= size;
    pthread_mutex_unlock(&fake_lock);
}

static struct fake_pool *current_pool(void)
{
    struct fake_ctx *ctx = fake_current();

    return ctx ? &default_pools[ctx->dev] : NULL;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    if (dev < 0 || dev >= fake_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    default_pools[dev].dev = dev;
    *pool = (CUmemoryPool)&default_pools[dev];
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return cuDeviceGetMemPool(pool, dev);
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    (void)hStream;
    return pool_alloc(dptr, bytesize, current_pool());
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    (void)hStream;
    return pool_alloc(dptr, bytesize, current_pool());
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                 CUmemoryPool pool, CUstream hStream)
{
    (void)hStream;
    return pool_alloc(dptr, bytesize, (struct fake_pool *)pool);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                      CUmemoryPool pool, CUstream hStream)
{
    (void)hStream;
    return pool_alloc(dptr, bytesize, (struct fake_pool *)pool);
}

/* Pool memory goes back to its pool; cuMemAlloc's is freed. */
static CUresult free_async(CUdeviceptr dptr)
{
    struct fake_pool *pool = NULL;
    uint64_t size = 0;
    CUresult rc = fake_mem_delete(FAKE_MEM_LINEAR, dptr, &size, &pool);

    if (rc == CUDA_SUCCESS && pool)
        fake_pool_freed(pool, size);
    return rc;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    (void)hStream;
    return free_async(dptr);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    (void)hStream;
    return free_async(dptr);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    struct fake_pool *p;

    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        props->location.id < 0 || props->location.id >= fake_device_count())
        return CUDA_ERROR_INVALID_VALUE;
    if ((p = calloc(1, sizeof(*p))) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->dev = props->location.id;
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

/* Keeps at least minBytesToKeep, and always what is in use. */
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    struct fake_pool *p = (struct fake_pool *)pool;
    uint64_t keep;

    pthread_mutex_lock(&fake_lock);
    keep =
        round_up(p->used > minBytesToKeep ? p->used : minBytesToKeep, POOL_STEP);
    if (p->reserved > keep) {
        fake_mem_give(p->dev, p->reserved - keep);
        p->reserved = keep;
    }
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    struct fake_pool *p = (struct fake_pool *)pool;

    pthread_mutex_lock(&fake_lock);
    fake_mem_give(p->dev, p->reserved);
    pthread_mutex_unlock(&fake_lock);
    if (p < default_pools || p >= default_pools + FAKE_MAX_DEVICES)
        free(p);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                               void *value)
{
    struct fake_pool *p = (struct fake_pool *)pool;

    pthread_mutex_lock(&fake_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        *(cuuint64_t *)value = p->reserved;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = p->used;
        break;
    default:
        *(cuuint64_t *)value = 0;
        break;
    }
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

/* ---- graph memory --------------------------------------------------------- */

static char graph_nodes[1];

CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                const CUgraphNode *dependencies,
                                size_t numDependencies,
                                CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    (void)hGraph, (void)dependencies, (void)numDependencies;
    if (nodeParams->bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    nodeParams->dptr = 0x600000000000ull;
    *phGraphNode = (CUgraphNode)graph_nodes;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device,
                                      CUgraphMem_attribute attr, void *value)
{
    (void)device, (void)attr;
    *(cuuint64_t *)value = 0;
    return CUDA_SUCCESS;
}
