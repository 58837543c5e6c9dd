/* memory.c - device memory: linear, pitched, managed, VMM, arrays, IPC and
 * external memory, taken from each device's FAKE_CUDA_MEM_MB (the node's,
 * shared with the other processes of a FAKE_CUDA_SHARED_GPU: shared_gpu.c).
 *
 * Nothing is ever dereferenced: handles and pointers are addresses from one
 * counter. Sizes follow what a test needs to see, not a real GPU's layout:
 *   - linear memory takes what was asked (pitch: rows of 512-byte multiples);
 *   - cuMemCreate wants multiples of the 2 MiB granularity;
 *   - arrays are padded to 64 KiB, and cuArrayGetMemoryRequirements says so;
 *   - an IPC handle carries the size of the memory it opens in its first 8
 *     bytes (the exporter is another process); opening takes no memory;
 *   - cuImportExternalMemory remembers the size; mapped buffers take memory
 *     and are freed with cuMemFree, as with a real driver;
 *   - managed memory (cuMemAllocManaged) takes none of FAKE_CUDA_MEM_MB: a
 *     real driver lets it exceed the device's memory and evicts it, which
 *     is what oversubscription relies on. cuPointerGetAttribute says it is
 *     managed; cuMemPrefetchAsync(_v2) moves it (timeline work of
 *     bytes / FAKE_CUDA_SWAP_GBPS, traced as prefetch_host / prefetch_device)
 *     and cuMemRangeGetAttribute(LAST_PREFETCH_LOCATION) says where to;
 *   - pinned host memory (cuMemHostAlloc) is real memory, and making it
 *     takes bytes / FAKE_CUDA_PIN_GBPS (default 2) like a real driver's
 *     page locking, so a test sees who pays for it. Async copies
 *     between it and managed memory are timeline work of bytes /
 *     FAKE_CUDA_COPY_GBPS (default 50), traced as copy_dtoh / copy_htod,
 *     and carry the data's identity: a device-to-host copy stamps the
 *     destination at every 2 MiB of device address with that address.
 *     cuMemDiscardBatchAsync and cuMemDiscardAndPrefetchBatchAsync lose a
 *     managed range's content; only host-to-device copies of pages stamped
 *     with their own addresses bring it back, and
 *     fake_cuda_lost_bytes(ptr) says how much of an allocation is still
 *     lost. So a test sees a swap that would hand a kernel garbage. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define PITCH_ALIGN 512u
#define VMM_GRANULARITY (2ull << 20)
#define ARRAY_PADDING (64ull << 10)

struct allocation {
    enum fake_mem_kind kind;
    uint64_t handle, size;
    int dev;
    bool physical;
    bool managed;
    int prefetched_to; /* managed: CU_DEVICE_INVALID, CU_DEVICE_CPU or a device */
    uint64_t lost;     /* managed: bytes discarded and not copied back */
    struct fake_pool *pool;
    struct allocation *next;
};

static struct allocation *allocations;
static uint64_t used[FAKE_MAX_DEVICES];
static uint64_t next_handle = 0x700000000000ull;

bool fake_mem_take(int dev, uint64_t bytes)
{
    if (used[dev] + bytes > fake_memory_total(dev) ||
        !fake_shared_gpu_take(dev, bytes))
        return false;
    used[dev] += bytes;
    return true;
}

void fake_mem_give(int dev, uint64_t bytes)
{
    used[dev] -= bytes;
    fake_shared_gpu_give(dev, bytes);
}

static CUresult mem_new(enum fake_mem_kind kind, int dev, uint64_t size,
                        bool physical, bool managed, struct fake_pool *pool,
                        unsigned long long *out)
{
    struct allocation *a;

    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((a = malloc(sizeof(*a))) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fake_lock);
    if (physical && !fake_mem_take(dev, size)) {
        pthread_mutex_unlock(&fake_lock);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *a = (struct allocation){kind,
                             next_handle,
                             size,
                             dev,
                             physical,
                             managed,
                             CU_DEVICE_INVALID,
                             0,
                             pool,
                             allocations};
    allocations = a;
    /* Keep addresses 2 MiB apart, as the driver does. */
    next_handle +=
        (size + VMM_GRANULARITY - 1) / VMM_GRANULARITY * VMM_GRANULARITY;
    *out = a->handle;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

CUresult fake_mem_new(enum fake_mem_kind kind, int dev, uint64_t size,
                      bool physical, struct fake_pool *pool,
                      unsigned long long *out)
{
    return mem_new(kind, dev, size, physical, false, pool, out);
}

CUresult fake_mem_delete(enum fake_mem_kind kind, uint64_t handle,
                         uint64_t *size, struct fake_pool **pool)
{
    struct allocation **link, *a = NULL;

    pthread_mutex_lock(&fake_lock);
    for (link = &allocations; *link; link = &(*link)->next)
        if ((*link)->handle == handle && (*link)->kind == kind) {
            a = *link;
            *link = a->next;
            if (a->physical)
                fake_mem_give(a->dev, a->size);
            break;
        }
    pthread_mutex_unlock(&fake_lock);
    if (a == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (size)
        *size = a->size;
    if (pool)
        *pool = a->pool;
    free(a);
    return CUDA_SUCCESS;
}

static int current_dev(void)
{
    struct fake_ctx *ctx = fake_current();

    return ctx ? ctx->dev : -1;
}

static CUresult linear(CUdeviceptr *dptr, uint64_t size)
{
    int dev = current_dev();

    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return fake_mem_new(FAKE_MEM_LINEAR, dev, size, true, NULL, dptr);
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    int dev = current_dev();

    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    uint64_t held;

    pthread_mutex_lock(&fake_lock);
    if (!fake_shared_gpu_used(dev, &held))
        held = used[dev];
    *free_bytes = fake_memory_total(dev) - held;
    *total_bytes = fake_memory_total(dev);
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

/* The 32-bit ABI clamps. */
CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total_bytes)
{
    size_t f, t;
    CUresult rc = cuMemGetInfo_v2(&f, &t);

    if (rc == CUDA_SUCCESS) {
        *free_bytes = f < UINT32_MAX ? (unsigned int)f : UINT32_MAX;
        *total_bytes = t < UINT32_MAX ? (unsigned int)t : UINT32_MAX;
    }
    return rc;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return linear(dptr, bytesize);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    int dev = current_dev();

    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return mem_new(FAKE_MEM_LINEAR, dev, bytesize, false, true, NULL, dptr);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
                            size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    size_t pitch = (WidthInBytes + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    CUresult rc;

    (void)ElementSizeBytes;
    rc = linear(dptr, (uint64_t)pitch * Height);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return fake_mem_delete(FAKE_MEM_LINEAR, dptr, NULL, NULL);
}

/* The linear allocation holding dptr. Lock held. */
static struct allocation *holding_locked(CUdeviceptr dptr)
{
    for (struct allocation *a = allocations; a; a = a->next)
        if (a->kind <= FAKE_MEM_IPC && dptr >= a->handle &&
            dptr < a->handle + a->size)
            return a;
    return NULL;
}

/* Base and size of the allocation holding dptr. */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
                                 CUdeviceptr dptr)
{
    struct allocation *a;

    pthread_mutex_lock(&fake_lock);
    if ((a = holding_locked(dptr)) != NULL) {
        if (pbase)
            *pbase = a->handle;
        if (psize)
            *psize = a->size;
    }
    pthread_mutex_unlock(&fake_lock);
    return a ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                               CUdeviceptr ptr)
{
    CUresult rc = CUDA_SUCCESS;
    struct allocation *a;

    pthread_mutex_lock(&fake_lock);
    if ((a = holding_locked(ptr)) == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED)
        *(bool *)data = a->managed;
    else if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
        *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
    else if (attribute == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        *(int *)data = a->dev;
    else if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *(CUdeviceptr *)data = a->handle;
    else if (attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
        *(size_t *)data = a->size;
    else
        rc = CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

/* ---- managed memory: prefetch and advice ---------------------------------- */

/* Set by fake_cuda_deinitialize(): the driver shut down, as a real one
 * does once the process's exit handlers ran, and moving memory fails with
 * CUDA_ERROR_DEINITIALIZED (a swap racing the process's exit). */
static atomic_bool deinitialized;

__attribute__((visibility("default"))) void fake_cuda_deinitialize(void)
{
    atomic_store(&deinitialized, true);
}

static double swap_gbps(void)
{
    static double gbps;
    const char *text;

    if (gbps <= 0) {
        text = getenv("FAKE_CUDA_SWAP_GBPS");
        gbps = text ? strtod(text, NULL) : 0;
        if (!(gbps > 0))
            gbps = 10.0;
    }
    return gbps;
}

/* dst: a device ordinal or CU_DEVICE_CPU. Queued on hStream as work of
 * bytes / FAKE_CUDA_SWAP_GBPS. The range must be managed memory. */
static CUresult prefetch(CUdeviceptr ptr, size_t count, int dst,
                         CUstream hStream, bool pt)
{
    struct allocation *a;
    bool managed;

    if (atomic_load(&deinitialized))
        return CUDA_ERROR_DEINITIALIZED;
    if (count == 0 ||
        (dst != CU_DEVICE_CPU && (dst < 0 || dst >= fake_device_count())))
        return CUDA_ERROR_INVALID_VALUE;
    if (dst != CU_DEVICE_CPU && !fake_concurrent_managed_access())
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fake_lock);
    a = holding_locked(ptr);
    managed = a && a->managed && ptr + count <= a->handle + a->size;
    if (managed)
        a->prefetched_to = dst;
    pthread_mutex_unlock(&fake_lock);
    if (!managed)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_submit_bytes(hStream, pt, (uint64_t)((double)count / swap_gbps()),
                             dst == CU_DEVICE_CPU ? "prefetch_host"
                                                  : "prefetch_device",
                             count);
}

static int location_device(CUmemLocation location)
{
    switch (location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return location.id;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return CU_DEVICE_CPU;
    default:
        return CU_DEVICE_INVALID;
    }
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count,
                            CUdevice dstDevice, CUstream hStream)
{
    return prefetch(devPtr, count, dstDevice, hStream, false);
}

CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count,
                                 CUdevice dstDevice, CUstream hStream)
{
    return prefetch(devPtr, count, dstDevice, hStream, true);
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count,
                               CUmemLocation location, unsigned int flags,
                               CUstream hStream)
{
    (void)flags;
    return prefetch(devPtr, count, location_device(location), hStream, false);
}

CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                    CUmemLocation location, unsigned int flags,
                                    CUstream hStream)
{
    (void)flags;
    return prefetch(devPtr, count, location_device(location), hStream, true);
}

/* Advice is accepted and changes nothing. */
CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                        CUmemLocation location)
{
    (void)devPtr, (void)count, (void)advice, (void)location;
    return CUDA_SUCCESS;
}

#undef cuMemAdvise
CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                     CUdevice device);
CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                     CUdevice device)
{
    (void)devPtr, (void)count, (void)advice, (void)device;
    return CUDA_SUCCESS;
}

/* Only CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: where the range was
 * last prefetched to (CU_DEVICE_CPU, a device, or CU_DEVICE_INVALID). */
CUresult cuMemRangeGetAttribute(void *data, size_t dataSize,
                                CUmem_range_attribute attribute,
                                CUdeviceptr devPtr, size_t count)
{
    CUresult rc = CUDA_SUCCESS;
    struct allocation *a;

    if (attribute != CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (dataSize != sizeof(int))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    a = holding_locked(devPtr);
    if (a == NULL || !a->managed || devPtr + count > a->handle + a->size)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *(int *)data = a->prefetched_to;
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

/* ---- pinned host memory, copies and discards of managed memory ---------- */

/* One stamp per 2 MiB, the spacing of allocations: every allocation has
 * one at its start, and a 12 GiB swap touches 24 MiB of the host. */
#define STAMP_EVERY (2u << 20)
#define STAMP_SALT 0x5eed5eed00000000ull
#define HOST_PAGE 4096u

static double copy_gbps(void)
{
    static double gbps;
    const char *text;

    if (gbps <= 0) {
        text = getenv("FAKE_CUDA_COPY_GBPS");
        gbps = text ? strtod(text, NULL) : 0;
        if (!(gbps > 0))
            gbps = 50.0;
    }
    return gbps;
}

static double pin_gbps(void)
{
    static double gbps;
    const char *text;

    if (gbps <= 0) {
        text = getenv("FAKE_CUDA_PIN_GBPS");
        gbps = text ? strtod(text, NULL) : 0;
        if (!(gbps > 0))
            gbps = 2.0;
    }
    return gbps;
}

/* The calling thread pays for the pinning, without holding the fake's lock:
 * other threads go on meanwhile, as with a real driver. */
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    uint64_t pinned_at;

    (void)Flags;
    if (pp == NULL || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pinned_at = fake_now_ns() + (uint64_t)((double)bytesize / pin_gbps());
    *pp = aligned_alloc(HOST_PAGE,
                        (bytesize + HOST_PAGE - 1) / HOST_PAGE * HOST_PAGE);
    if (*pp == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake_wait_until(pinned_at);
    return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p)
{
    free(p);
    return CUDA_SUCCESS;
}

/* The managed allocation holding [ptr, ptr + count), or NULL. Lock held. */
static struct allocation *managed_range_locked(CUdeviceptr ptr, size_t count)
{
    struct allocation *a = holding_locked(ptr);

    return a && a->managed && count <= a->handle + a->size - ptr ? a : NULL;
}

/* Device addresses in [ptr, ptr + count) that carry a stamp. */
#define FOR_EACH_STAMP(at, ptr, count)                                           \
    for (CUdeviceptr at = ((ptr) + STAMP_EVERY - 1) / STAMP_EVERY * STAMP_EVERY; \
         at + sizeof(uint64_t) <= (ptr) + (count); at += STAMP_EVERY)

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t count,
                          CUstream hStream, bool pt)
{
    if (atomic_load(&deinitialized))
        return CUDA_ERROR_DEINITIALIZED;
    pthread_mutex_lock(&fake_lock);
    if (dst && count && managed_range_locked(src, count))
        FOR_EACH_STAMP(at, src, count)
        {
            uint64_t stamp = at ^ STAMP_SALT;
            memcpy((char *)dst + (at - src), &stamp, sizeof(stamp));
        }
    pthread_mutex_unlock(&fake_lock);
    return fake_submit_bytes(hStream, pt, (uint64_t)((double)count / copy_gbps()),
                             "copy_dtoh", count);
}

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t count,
                          CUstream hStream, bool pt)
{
    struct allocation *a;

    pthread_mutex_lock(&fake_lock);
    if (src && count && (a = managed_range_locked(dst, count)) && a->lost) {
        bool intact = true;
        FOR_EACH_STAMP(at, dst, count)
        {
            uint64_t stamp;
            memcpy(&stamp, (const char *)src + (at - dst), sizeof(stamp));
            intact = intact && stamp == (at ^ STAMP_SALT);
        }
        if (intact)
            a->lost -= count < a->lost ? count : a->lost;
    }
    pthread_mutex_unlock(&fake_lock);
    return fake_submit_bytes(hStream, pt, (uint64_t)((double)count / copy_gbps()),
                             "copy_htod", count);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice,
                              size_t ByteCount, CUstream hStream)
{
    return copy_dtoh(dstHost, srcDevice, ByteCount, hStream, false);
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice,
                                   size_t ByteCount, CUstream hStream)
{
    return copy_dtoh(dstHost, srcDevice, ByteCount, hStream, true);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                              size_t ByteCount, CUstream hStream)
{
    return copy_htod(dstDevice, srcHost, ByteCount, hStream, false);
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
                                   size_t ByteCount, CUstream hStream)
{
    return copy_htod(dstDevice, srcHost, ByteCount, hStream, true);
}

/* Discards (and prefetches to dst, unless CU_DEVICE_INVALID) a batch of
 * managed ranges; as the driver, refuses the legacy stream and flags. */
static CUresult discard(CUdeviceptr *dptrs, size_t *sizes, size_t count, int dst,
                        unsigned long long flags, CUstream hStream, bool pt)
{
    uint64_t bytes = 0;
    size_t i;

    if (count == 0 || !dptrs || !sizes || flags ||
        hStream == CU_STREAM_LEGACY || (hStream == NULL && !pt))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    for (i = 0; i < count && managed_range_locked(dptrs[i], sizes[i]); i++)
        ;
    for (size_t j = 0; i == count && j < count; j++) {
        struct allocation *a = managed_range_locked(dptrs[j], sizes[j]);
        a->lost = a->lost + sizes[j] < a->size ? a->lost + sizes[j] : a->size;
        if (dst != CU_DEVICE_INVALID)
            a->prefetched_to = dst;
        bytes += sizes[j];
    }
    pthread_mutex_unlock(&fake_lock);
    if (i < count)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_submit_bytes(hStream, pt, 0,
                             dst == CU_DEVICE_INVALID
                                 ? "discard"
                                 : "discard_prefetch_device",
                             bytes);
}

CUresult cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                unsigned long long flags, CUstream hStream)
{
    return discard(dptrs, sizes, count, CU_DEVICE_INVALID, flags, hStream, false);
}

/* One prefetch location for the whole batch (what libnvshare asks). */
static CUresult discard_and_prefetch(CUdeviceptr *dptrs, size_t *sizes,
                                     size_t count, CUmemLocation *locs,
                                     size_t *loc_idxs, size_t n_locs,
                                     unsigned long long flags, CUstream hStream,
                                     bool pt)
{
    if (n_locs != 1 || !locs || !loc_idxs || loc_idxs[0] != 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    int dst = location_device(locs[0]);
    if (dst < 0 || dst >= fake_device_count())
        return CUDA_ERROR_INVALID_VALUE;
    return discard(dptrs, sizes, count, dst, flags, hStream, pt);
}

CUresult cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes,
                                           size_t count, CUmemLocation *locs,
                                           size_t *loc_idxs, size_t n_locs,
                                           unsigned long long flags,
                                           CUstream hStream)
{
    return discard_and_prefetch(dptrs, sizes, count, locs, loc_idxs, n_locs,
                                flags, hStream, false);
}

CUresult cuMemDiscardAndPrefetchBatchAsync_ptsz(
    CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *locs,
    size_t *loc_idxs, size_t n_locs, unsigned long long flags, CUstream hStream)
{
    return discard_and_prefetch(dptrs, sizes, count, locs, loc_idxs, n_locs,
                                flags, hStream, true);
}

/* Test introspection: bytes of the managed allocation holding ptr whose
 * content was discarded and not copied back (-1: no such allocation). */
long long fake_cuda_lost_bytes(CUdeviceptr ptr);
long long fake_cuda_lost_bytes(CUdeviceptr ptr)
{
    struct allocation *a;
    long long lost;

    pthread_mutex_lock(&fake_lock);
    a = managed_range_locked(ptr, 1);
    lost = a ? (long long)a->lost : -1;
    pthread_mutex_unlock(&fake_lock);
    return lost;
}

/* ---- IPC ---------------------------------------------------------------- */

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle)
{
    uint64_t size;
    int dev = current_dev();

    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    memcpy(&size, handle.reserved, sizeof(size));
    return fake_mem_new(FAKE_MEM_IPC, dev, size, false, NULL, pdptr);
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                            unsigned int Flags)
{
    (void)Flags;
    return ipc_open(pdptr, handle);
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                               unsigned int Flags)
{
    (void)Flags;
    return ipc_open(pdptr, handle);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    return fake_mem_delete(FAKE_MEM_IPC, dptr, NULL, NULL);
}

/* ---- external memory ----------------------------------------------------- */

struct external_memory {
    uint64_t size;
};

CUresult cuImportExternalMemory(CUexternalMemory *extMem_out,
                                const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *desc)
{
    struct external_memory *m = malloc(sizeof(*m));

    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->size = desc->size;
    *extMem_out = (CUexternalMemory)m;
    return CUDA_SUCCESS;
}

CUresult cuExternalMemoryGetMappedBuffer(
    CUdeviceptr *devPtr, CUexternalMemory extMem,
    const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc)
{
    const struct external_memory *m = (const struct external_memory *)extMem;

    if (bufferDesc->offset + bufferDesc->size > m->size)
        return CUDA_ERROR_INVALID_VALUE;
    return linear(devPtr, bufferDesc->size);
}

CUresult cuDestroyExternalMemory(CUexternalMemory extMem)
{
    free(extMem);
    return CUDA_SUCCESS;
}

/* ---- VMM ------------------------------------------------------------------ */

CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                       const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    (void)prop, (void)option;
    *granularity = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)flags;
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        prop->location.id < 0 || prop->location.id >= fake_device_count() ||
        size % VMM_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_mem_new(FAKE_MEM_VMM, prop->location.id, size, true, NULL,
                        handle);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    return fake_mem_delete(FAKE_MEM_VMM, handle, NULL, NULL);
}

/* ---- arrays ----------------------------------------------------------------- */

static uint64_t channel_bytes(CUarray_format format)
{
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    default:
        return 4;
    }
}

static uint64_t dim(size_t n, unsigned level)
{
    return (n >> level) ? (n >> level) : 1;
}

static uint64_t padded_array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d,
                                   unsigned levels)
{
    uint64_t bytes = 0;
    bool layered = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);

    for (unsigned l = 0; l < levels; l++)
        bytes += dim(d->Width, l) * dim(d->Height, l) *
                 (layered ? dim(d->Depth, 0) : dim(d->Depth, l)) *
                 d->NumChannels * channel_bytes(d->Format);
    return (bytes + ARRAY_PADDING - 1) / ARRAY_PADDING * ARRAY_PADDING;
}

static CUresult new_array(enum fake_mem_kind kind,
                          const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels,
                          unsigned long long *out)
{
    int dev = current_dev();

    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return fake_mem_new(kind, dev, padded_array_bytes(d, levels), true, NULL,
                        out);
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = desc->Width,
                                 .Height = desc->Height,
                                 .Format = desc->Format,
                                 .NumChannels = desc->NumChannels};

    return new_array(FAKE_MEM_ARRAY, &d, 1, (unsigned long long *)pHandle);
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    return new_array(FAKE_MEM_ARRAY, desc, 1, (unsigned long long *)pHandle);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                unsigned int numMipmapLevels)
{
    return new_array(FAKE_MEM_MIPMAP, desc, numMipmapLevels,
                     (unsigned long long *)pHandle);
}

CUresult cuArrayDestroy(CUarray hArray)
{
    return fake_mem_delete(FAKE_MEM_ARRAY, (uint64_t)(uintptr_t)hArray, NULL,
                           NULL);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return fake_mem_delete(FAKE_MEM_MIPMAP,
                           (uint64_t)(uintptr_t)hMipmappedArray, NULL, NULL);
}

static CUresult requirements(enum fake_mem_kind kind, uint64_t handle,
                             CUDA_ARRAY_MEMORY_REQUIREMENTS *req)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    pthread_mutex_lock(&fake_lock);
    for (struct allocation *a = allocations; a; a = a->next)
        if (a->kind == kind && a->handle == handle) {
            memset(req, 0, sizeof(*req));
            req->size = a->size;
            req->alignment = ARRAY_PADDING;
            rc = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req,
                                      CUarray array, CUdevice device)
{
    (void)device;
    return requirements(FAKE_MEM_ARRAY, (uint64_t)(uintptr_t)array, req);
}

CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req,
                                               CUmipmappedArray mipmap,
                                               CUdevice device)
{
    (void)device;
    return requirements(FAKE_MEM_MIPMAP, (uint64_t)(uintptr_t)mipmap, req);
}
