/* vmm_async.c - stream-ordered allocations (cuMemAllocAsync) made
 * swappable: what PyTorch's cudaMallocAsync backend allocates.
 *
 * The driver's pools hand out memory nvshare cannot release: a pool owns
 * its physical memory. So an allocation from the device's default pool of
 * at least the granularity is made by vmm.c instead, like cuMemAlloc's,
 * and swaps like it. What the pool gave such an application is kept: a
 * free is stream-ordered and memory is reused without a round trip to the
 * driver. A cuMemFreeAsync parks the block with an event recorded on the
 * freeing stream; an allocation of the same rounded size (or up to an
 * eighth more) takes it back at once on that stream, whose order already
 * puts the free before it, and on any other stream once the event has
 * completed. Parked blocks stay charged to the quota, as a pool's
 * reservation is, and count as evictable: they are released, not copied,
 * when the process swaps out, when an allocation does not fit the quota
 * or the GPU, when the application trims the default pool (PyTorch's
 * empty_cache) and when more than PARKED_MAX are parked.
 *
 * Left to the pool: allocations during stream capture (they become graph
 * nodes), from other pools (cuMemAllocFromPoolAsync: the application chose
 * its pool's properties, IPC export among them) or while the application
 * made another pool current, and those smaller than the granularity. */
#include <pthread.h>

#include "driver.h"
#include "ledger.h"
#include "vmm.h"
#include "vmm_async.h"
#include "log.h"
#include "nvshare_memory.h"

#define PARKED_MAX 1024

struct parked {
    int gpu;
    CUdeviceptr va;
    uint64_t bytes;
    CUmemGenericAllocationHandle physical;
    CUstream stream; /* NULL: a per-thread default stream, never matched */
    CUevent freed;   /* completes when the stream's work before the free */
};

static struct {
    pthread_mutex_t lock;
    struct parked blocks[PARKED_MAX]; /* oldest first */
    int n;
} parking = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic uint64_t parked_bytes[NVSHARE_MAX_GPUS];

/* The stream as the driver orders it: the legacy default stream is one
 * per context whatever the spelling; a per-thread default stream is one
 * per thread, so its handle says nothing across threads. */
static CUstream ordering_stream(CUstream stream, bool pt)
{
    if (stream == CU_STREAM_PER_THREAD || (stream == NULL && pt))
        return NULL;
    return stream == NULL ? CU_STREAM_LEGACY : stream;
}

static bool capturing(const struct hook_driver *drv, CUstream stream, bool pt)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;

    if (pt && stream == NULL)
        stream = CU_STREAM_PER_THREAD;
    return drv->stream_is_capturing == NULL ||
           drv->stream_is_capturing(stream, &status) != CUDA_SUCCESS ||
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static bool default_pool_current(const struct hook_driver *drv, int gpu)
{
    CUmemoryPool current = NULL, fallback = NULL;

    return drv->device_get_mem_pool && drv->device_get_default_mem_pool &&
           drv->device_get_mem_pool(&current, (CUdevice)gpu) == CUDA_SUCCESS &&
           drv->device_get_default_mem_pool(&fallback, (CUdevice)gpu) ==
               CUDA_SUCCESS &&
           current == fallback;
}

bool vmm_async_wanted(int gpu, uint64_t bytes, CUstream stream, bool pt)
{
    const struct hook_driver *drv = hook_driver();

    return drv && hook_oversub(gpu, bytes) && default_pool_current(drv, gpu) &&
           !capturing(drv, stream, pt);
}

static bool reusable(const struct hook_driver *drv, const struct parked *p,
                     int gpu, uint64_t bytes, CUstream stream)
{
    if (p->gpu != gpu || p->bytes < bytes || p->bytes - bytes > bytes / 8)
        return false;
    return (stream != NULL && p->stream == stream) ||
           drv->event_query(p->freed) == CUDA_SUCCESS;
}

static void unpark_locked(int i)
{
    atomic_fetch_sub(&parked_bytes[parking.blocks[i].gpu],
                     parking.blocks[i].bytes);
    mem_evictable_extra(parking.blocks[i].gpu, parking.blocks[i].bytes, false,
                        false);
    parking.n--;
    for (; i < parking.n; i++)
        parking.blocks[i] = parking.blocks[i + 1];
}

bool vmm_async_reuse(int gpu, uint64_t bytes, CUstream stream, bool pt,
                     CUdeviceptr *va, uint64_t *block_bytes,
                     CUmemGenericAllocationHandle *physical)
{
    const struct hook_driver *drv = hook_driver();
    CUevent freed = NULL;

    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS ||
        atomic_load_explicit(&parked_bytes[gpu], memory_order_relaxed) == 0)
        return false;
    stream = ordering_stream(stream, pt);
    pthread_mutex_lock(&parking.lock);
    /* Newest first: the block most likely still in the GPU's caches. */
    for (int i = parking.n - 1; i >= 0; i--)
        if (reusable(drv, &parking.blocks[i], gpu, bytes, stream)) {
            *va = parking.blocks[i].va;
            *block_bytes = parking.blocks[i].bytes;
            *physical = parking.blocks[i].physical;
            freed = parking.blocks[i].freed;
            unpark_locked(i);
            break;
        }
    pthread_mutex_unlock(&parking.lock);
    if (freed)
        drv->event_destroy(freed);
    return freed != NULL;
}

/* Frees a block taken out of the parking: its stream's work before the
 * free ends first. The charge goes back with it. */
static void release(const struct hook_driver *drv, struct parked *p)
{
    drv->event_synchronize(p->freed);
    drv->event_destroy(p->freed);
    vmm_free(p->va, p->bytes, &p->physical);
    nvshare_mem_release(p->gpu, p->bytes);
}

bool vmm_async_park(int gpu, CUdeviceptr va, uint64_t bytes,
                    CUmemGenericAllocationHandle physical, CUstream stream,
                    bool pt)
{
    const struct hook_driver *drv = hook_driver();
    struct parked block = {gpu,
                           va,
                           bytes,
                           physical,
                           ordering_stream(stream, pt),
                           NULL},
                  oldest;
    bool full;

    if (drv == NULL || drv->event_create == NULL || drv->event_record == NULL ||
        drv->event_create(&block.freed, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return false;
    if (drv->event_record(block.freed, pt && stream == NULL
                                           ? CU_STREAM_PER_THREAD
                                           : stream) != CUDA_SUCCESS) {
        drv->event_destroy(block.freed);
        return false;
    }
    pthread_mutex_lock(&parking.lock);
    full = parking.n == PARKED_MAX;
    if (full) {
        oldest = parking.blocks[0];
        unpark_locked(0);
    }
    parking.blocks[parking.n++] = block;
    atomic_fetch_add(&parked_bytes[gpu], bytes);
    mem_evictable_extra(gpu, bytes, true, false);
    pthread_mutex_unlock(&parking.lock);
    if (full)
        release(drv, &oldest);
    return true;
}

uint64_t vmm_async_parked(int gpu)
{
    return gpu >= 0 && gpu < NVSHARE_MAX_GPUS
               ? atomic_load_explicit(&parked_bytes[gpu], memory_order_relaxed)
               : 0;
}

uint64_t vmm_async_drain(int gpu)
{
    const struct hook_driver *drv = hook_driver();
    struct parked taken[64];
    uint64_t drained = 0;
    int n;

    if (drv == NULL)
        return 0;
    /* In batches, so that the events are waited for outside the lock. */
    do {
        n = 0;
        pthread_mutex_lock(&parking.lock);
        for (int i = 0; i < parking.n && n < 64;)
            if (parking.blocks[i].gpu == gpu) {
                taken[n++] = parking.blocks[i];
                unpark_locked(i);
            } else {
                i++;
            }
        pthread_mutex_unlock(&parking.lock);
        for (int i = 0; i < n; i++) {
            release(drv, &taken[i]);
            drained += taken[i].bytes;
        }
    } while (n == 64);
    if (drained)
        log_debug("gpu %d: released %.1f MiB of freed stream-ordered memory",
                  gpu, (double)drained / (1 << 20));
    return drained;
}

void vmm_async_pool_trimmed(CUmemoryPool pool)
{
    const struct hook_driver *drv = hook_driver();
    CUmemoryPool fallback;

    for (int gpu = 0;
         drv && drv->device_get_default_mem_pool && gpu < NVSHARE_MAX_GPUS; gpu++)
        if (vmm_async_parked(gpu) != 0 &&
            drv->device_get_default_mem_pool(&fallback, (CUdevice)gpu) ==
                CUDA_SUCCESS &&
            fallback == pool)
            vmm_async_drain(gpu);
}

/* A GPU found full releases the parked blocks first (vmm.c). */
__attribute__((constructor)) static void register_release_when_full(void)
{
    vmm_on_full_release(vmm_async_drain);
}

/* A forked child does not own its parent's blocks (as ledger.c's map). */
static void forget_parked_in_child(void)
{
    pthread_mutex_init(&parking.lock, NULL);
    parking.n = 0;
    for (int gpu = 0; gpu < NVSHARE_MAX_GPUS; gpu++)
        atomic_store(&parked_bytes[gpu], 0);
}

__attribute__((constructor)) static void register_parking_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_parked_in_child);
}
