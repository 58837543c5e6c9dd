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
 *   - VMM keeps the driver's rules, as a swap that keeps an allocation's
 *     address relies on them and a mistake must fail here as on a GPU:
 *     cuMemAddressReserve takes addresses only; cuMemMap puts a whole
 *     physical allocation (cuMemCreate) where nothing of the reservation is
 *     mapped; the device may touch it once cuMemSetAccess allowed it (else
 *     CUDA_ERROR_ILLEGAL_ADDRESS, the GPU's fault), and never an unmapped
 *     address of a reservation (CUDA_ERROR_INVALID_VALUE); the physical
 *     memory is freed when its handle is released (cuMemRelease as often as
 *     it was created and retained) and no mapping uses it any more;
 *     cuMemGetAddressRange and cuPointerGetAttribute tell a mapping's range;
 *   - pinned host memory (cuMemHostAlloc) is real memory, and making it
 *     takes bytes / FAKE_CUDA_PIN_GBPS (default 2) like a real driver's
 *     page locking, so a test sees who pays for it. Copies between it and
 *     the device are timeline work of bytes / FAKE_CUDA_COPY_GBPS (default
 *     50), traced as copy_dtoh / copy_htod, memsets of bytes / 1000 GB/s,
 *     traced as memset; synchronous ones wait for the NULL stream.
 *
 * Content. Copies carry the data's identity per 2 MiB page, so that a test
 * sees a swap that would hand a kernel garbage: a device-to-host copy
 * stamps the destination at every page of device address with the page's
 * content, the address it belongs to. Managed memory's content is always
 * its own address: cuMemDiscardBatchAsync and
 * cuMemDiscardAndPrefetchBatchAsync lose a range's content (counted in
 * bytes), and only copies back of pages stamped with their own addresses
 * restore it. VMM physical memory has a tag per page instead, the address
 * whose content it holds: 0 (garbage) when created; the page's address
 * when the application writes it through a mapping (a memset, or a copy
 * in of a host buffer without a stamp); a copy in of a stamped page sets
 * it to the stamp, and a copy out stamps the tag, so garbage copied out
 * and back stays garbage. fake_cuda_lost_bytes(ptr) says how much of the
 * allocation (managed) or reservation (VMM) holding ptr is lost: for VMM,
 * the pages the application wrote that are unmapped or whose tag is not
 * their address; a page never written has nothing to lose. Other linear
 * memory loses nothing (0), so that a program can report on whatever
 * memory it was given. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define PITCH_ALIGN 512u
/* The VMM granularity, also the page of the content model. */
#define PAGE (2ull << 20)
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
    /* FAKE_MEM_VMM: freed when both counts are 0 (the driver's rule). */
    unsigned refs;     /* its cuMemCreate and retains, less releases */
    unsigned mappings; /* cuMemMap's of it not unmapped */
    uint64_t *tags;    /* per page: the VA whose content it holds, 0: none */
    CUmemAllocationProp prop;
    struct allocation *next;
};

static struct allocation *allocations;
static uint64_t used[FAKE_MAX_DEVICES];
static uint64_t next_handle = 0x700000000000ull;

static uint64_t round_up(uint64_t n, uint64_t to)
{
    return (n + to - 1) / to * to;
}

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

    uint64_t *tags = NULL;

    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((a = malloc(sizeof(*a))) == NULL ||
        (kind == FAKE_MEM_VMM &&
         (tags = calloc(round_up(size, PAGE) / PAGE, sizeof(*tags))) == NULL)) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&fake_lock);
    if (physical && !fake_mem_take(dev, size)) {
        pthread_mutex_unlock(&fake_lock);
        free(tags);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *a = (struct allocation){.kind = kind,
                             .handle = next_handle,
                             .size = size,
                             .dev = dev,
                             .physical = physical,
                             .managed = managed,
                             .prefetched_to = CU_DEVICE_INVALID,
                             .pool = pool,
                             .refs = 1,
                             .tags = tags,
                             .next = allocations};
    allocations = a;
    /* Keep addresses 2 MiB apart, as the driver does. */
    next_handle += round_up(size, PAGE);
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

/* VMM: a reservation of addresses (cuMemAddressReserve) and the physical
 * allocations mapped into it. */
struct mapping {
    uint64_t va, size;
    struct allocation *phys;
    bool access; /* cuMemSetAccess gave the device access */
    struct mapping *next;
};

struct reservation {
    uint64_t base, size;
    struct mapping *mappings;
    bool *written; /* per page: the application wrote through its address */
    struct reservation *next;
};

static struct reservation *reservations;

/* The reservation holding va, or NULL. Lock held. */
static struct reservation *reservation_locked(uint64_t va)
{
    for (struct reservation *r = reservations; r; r = r->next)
        if (va >= r->base && va < r->base + r->size)
            return r;
    return NULL;
}

/* The mapping of r holding va, or NULL. Lock held. */
static struct mapping *mapping_of_locked(const struct reservation *r, uint64_t va)
{
    for (struct mapping *m = r->mappings; m; m = m->next)
        if (va >= m->va && va < m->va + m->size)
            return m;
    return NULL;
}

/* What the driver tells of the memory holding dptr: a linear allocation
 * (managed or not) or, on a VMM address, the mapping. Lock held. */
struct range {
    uint64_t base, size;
    int dev;
    bool managed;
};

static bool range_locked(CUdeviceptr dptr, struct range *out)
{
    struct allocation *a = holding_locked(dptr);
    struct reservation *r;
    struct mapping *m;

    if (a) {
        *out = (struct range){a->handle, a->size, a->dev, a->managed};
        return true;
    }
    if ((r = reservation_locked(dptr)) && (m = mapping_of_locked(r, dptr))) {
        *out = (struct range){m->va, m->size, m->phys->dev, false};
        return true;
    }
    return false;
}

/* Base and size of the allocation or mapping holding dptr. */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
                                 CUdeviceptr dptr)
{
    struct range range;
    bool found;

    pthread_mutex_lock(&fake_lock);
    if ((found = range_locked(dptr, &range))) {
        if (pbase)
            *pbase = range.base;
        if (psize)
            *psize = range.size;
    }
    pthread_mutex_unlock(&fake_lock);
    return found ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                               CUdeviceptr ptr)
{
    CUresult rc = CUDA_SUCCESS;
    struct range range;

    pthread_mutex_lock(&fake_lock);
    if (!range_locked(ptr, &range))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED)
        *(bool *)data = range.managed;
    else if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
        *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
    else if (attribute == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        *(int *)data = range.dev;
    else if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *(CUdeviceptr *)data = range.base;
    else if (attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
        *(size_t *)data = range.size;
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

/* Set by fake_cuda_fail_copies_after(n): the copies between host and
 * device after the next n fail, as on a device lost in the middle of a
 * swap; n < 0 (the start) lets every copy through. */
static atomic_long copies_before_failure = -1;

__attribute__((visibility("default"))) void fake_cuda_fail_copies_after(long n)
{
    atomic_store(&copies_before_failure, n);
}

static bool copy_fails(void)
{
    long left = atomic_load(&copies_before_failure);

    while (left > 0 && !atomic_compare_exchange_weak(&copies_before_failure,
                                                     &left, left - 1))
        ;
    return left == 0;
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

/* ---- pinned host memory, copies, memsets and discards ------------------- */

/* One stamp per page, the spacing of allocations: every allocation has
 * one at its start, and a 12 GiB swap touches 24 MiB of the host. A stamp
 * is the content's address (0: garbage) salted, so that a zeroed or
 * ordinary host buffer does not read as one. */
#define STAMP_SALT 0x5eed5eed00000000ull
#define HOST_PAGE 4096u
/* Memsets run at a device's own bandwidth, not a copy's. */
#define MEMSET_GBPS 1000.0

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
    if (fake_unsafe_call_refused())
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
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
#define FOR_EACH_STAMP(at, ptr, count)                                         \
    for (CUdeviceptr at = round_up(ptr, PAGE);                                 \
         at + sizeof(uint64_t) <= (ptr) + (count); at += PAGE)

/* The pages [ptr, ptr + count) touches, by their address. */
#define FOR_EACH_PAGE(page, ptr, count)                                        \
    for (CUdeviceptr page = (ptr) / PAGE * PAGE; page < (ptr) + (count);       \
         page += PAGE)

static void stamp(void *host, uint64_t content)
{
    uint64_t v = content ^ STAMP_SALT;

    memcpy(host, &v, sizeof(v));
}

/* Whether host carries a stamp; if so, *content is its content's address. */
static bool stamped(const void *host, uint64_t *content)
{
    uint64_t v;

    memcpy(&v, host, sizeof(v));
    v ^= STAMP_SALT;
    if (v % PAGE != 0 || v >> 48 != 0)
        return false;
    *content = v;
    return true;
}

/* Whether the device may touch [ptr, ptr + count). Outside VMM
 * reservations anything goes, as before (linear and managed memory, and
 * addresses the fake never gave, which tests of other things pass). In a
 * reservation every byte must be mapped, else CUDA_ERROR_INVALID_VALUE as
 * the driver checks a copy's range, and have access set, else
 * CUDA_ERROR_ILLEGAL_ADDRESS, the GPU's fault: a forgotten cuMemSetAccess
 * fails as it would on a GPU. *r: the reservation, NULL if none or if
 * count is 0. Lock held. */
static CUresult reach_locked(CUdeviceptr ptr, size_t count,
                             struct reservation **r)
{
    CUresult rc = CUDA_SUCCESS;
    struct mapping *m;

    *r = NULL;
    if (count == 0 || (*r = reservation_locked(ptr)) == NULL)
        return CUDA_SUCCESS;
    if (count > (*r)->base + (*r)->size - ptr)
        return CUDA_ERROR_INVALID_VALUE;
    for (uint64_t va = ptr; va < ptr + count; va = m->va + m->size) {
        if ((m = mapping_of_locked(*r, va)) == NULL)
            return CUDA_ERROR_INVALID_VALUE;
        if (!m->access)
            rc = CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    return rc;
}

/* The tag of the physical page mapped at page of r, NULL if unmapped.
 * Lock held. */
static uint64_t *tag_locked(const struct reservation *r, uint64_t page)
{
    struct mapping *m = mapping_of_locked(r, page);

    return m ? &m->phys->tags[(page - m->va) / PAGE] : NULL;
}

/* The application wrote the page (mapped) of r: it holds its own content
 * now, and losing it from here on is losing data. Lock held. */
static void written_locked(struct reservation *r, uint64_t page)
{
    *tag_locked(r, page) = page;
    r->written[(page - r->base) / PAGE] = true;
}

/* sync: a synchronous call's work, on the NULL stream (pt: a _ptds
 * variant's, the per-thread one), which it waits for. */
static CUresult finish(CUresult rc, bool pt, bool sync)
{
    if (rc != CUDA_SUCCESS || !sync)
        return rc;
    return pt ? cuStreamSynchronize_ptsz(NULL) : cuStreamSynchronize(NULL);
}

/* A copy out stamps the host buffer with the content of each page: a
 * managed page's own address (what was discarded is counted apart), a VMM
 * page's physical tag, so that garbage copied out stays garbage. */
static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t count,
                          CUstream hStream, bool pt, bool sync)
{
    struct reservation *r;
    CUresult rc;

    if (atomic_load(&deinitialized))
        return CUDA_ERROR_DEINITIALIZED;
    if (copy_fails())
        return CUDA_ERROR_UNKNOWN;
    pthread_mutex_lock(&fake_lock);
    rc = reach_locked(src, count, &r);
    if (rc == CUDA_SUCCESS && dst && (r || managed_range_locked(src, count)))
        FOR_EACH_STAMP(at, src, count)
        {
            stamp((char *)dst + (at - src), r ? *tag_locked(r, at) : at);
        }
    pthread_mutex_unlock(&fake_lock);
    if (rc == CUDA_SUCCESS)
        rc = fake_submit_bytes(hStream, pt,
                               (uint64_t)((double)count / copy_gbps()),
                               "copy_dtoh", count);
    return finish(rc, pt, sync);
}

/* A copy in of a stamped page gives the page that content (a swap's copy
 * back); of an unstamped one, the application's own data. */
static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t count,
                          CUstream hStream, bool pt, bool sync)
{
    struct reservation *r;
    struct allocation *a;
    CUresult rc;

    if (copy_fails())
        return CUDA_ERROR_UNKNOWN;
    pthread_mutex_lock(&fake_lock);
    rc = reach_locked(dst, count, &r);
    if (rc == CUDA_SUCCESS && src && r) {
        FOR_EACH_PAGE(page, dst, count)
        {
            uint64_t content;
            if (page >= dst && page + sizeof(uint64_t) <= dst + count &&
                stamped((const char *)src + (page - dst), &content))
                *tag_locked(r, page) = content;
            else
                written_locked(r, page);
        }
    } else if (rc == CUDA_SUCCESS && src &&
               (a = managed_range_locked(dst, count)) && a->lost) {
        bool intact = true;
        FOR_EACH_STAMP(at, dst, count)
        {
            uint64_t content;
            intact = intact &&
                     stamped((const char *)src + (at - dst), &content) &&
                     content == at;
        }
        if (intact)
            a->lost -= count < a->lost ? count : a->lost;
    }
    pthread_mutex_unlock(&fake_lock);
    if (rc == CUDA_SUCCESS)
        rc = fake_submit_bytes(hStream, pt,
                               (uint64_t)((double)count / copy_gbps()),
                               "copy_htod", count);
    return finish(rc, pt, sync);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice,
                              size_t ByteCount, CUstream hStream)
{
    return copy_dtoh(dstHost, srcDevice, ByteCount, hStream, false, false);
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice,
                                   size_t ByteCount, CUstream hStream)
{
    return copy_dtoh(dstHost, srcDevice, ByteCount, hStream, true, false);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                              size_t ByteCount, CUstream hStream)
{
    return copy_htod(dstDevice, srcHost, ByteCount, hStream, false, false);
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
                                   size_t ByteCount, CUstream hStream)
{
    return copy_htod(dstDevice, srcHost, ByteCount, hStream, true, false);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy_dtoh(dstHost, srcDevice, ByteCount, NULL, false, true);
}

CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice,
                              size_t ByteCount)
{
    return copy_dtoh(dstHost, srcDevice, ByteCount, NULL, true, true);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost,
                         size_t ByteCount)
{
    return copy_htod(dstDevice, srcHost, ByteCount, NULL, false, true);
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
                              size_t ByteCount)
{
    return copy_htod(dstDevice, srcHost, ByteCount, NULL, true, true);
}

/* A memset is the application writing its pages. */
static CUresult memset_range(CUdeviceptr dst, size_t bytes, CUstream hStream,
                             bool pt, bool sync)
{
    struct reservation *r;
    CUresult rc;

    pthread_mutex_lock(&fake_lock);
    rc = reach_locked(dst, bytes, &r);
    if (rc == CUDA_SUCCESS && r)
        FOR_EACH_PAGE(page, dst, bytes)
        {
            written_locked(r, page);
        }
    pthread_mutex_unlock(&fake_lock);
    if (rc == CUDA_SUCCESS)
        rc = fake_submit_bytes(hStream, pt,
                               (uint64_t)((double)bytes / MEMSET_GBPS),
                               "memset", bytes);
    return finish(rc, pt, sync);
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    (void)uc;
    return memset_range(dstDevice, N, NULL, false, true);
}

CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    (void)uc;
    return memset_range(dstDevice, N, NULL, true, true);
}

CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    (void)us;
    return memset_range(dstDevice, N * 2, NULL, false, true);
}

CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    (void)us;
    return memset_range(dstDevice, N * 2, NULL, true, true);
}

CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    (void)ui;
    return memset_range(dstDevice, N * 4, NULL, false, true);
}

CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    (void)ui;
    return memset_range(dstDevice, N * 4, NULL, true, true);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                         CUstream hStream)
{
    (void)uc;
    return memset_range(dstDevice, N, hStream, false, false);
}

CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                              CUstream hStream)
{
    (void)uc;
    return memset_range(dstDevice, N, hStream, true, false);
}

CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                          CUstream hStream)
{
    (void)us;
    return memset_range(dstDevice, N * 2, hStream, false, false);
}

CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us,
                               size_t N, CUstream hStream)
{
    (void)us;
    return memset_range(dstDevice, N * 2, hStream, true, false);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                          CUstream hStream)
{
    (void)ui;
    return memset_range(dstDevice, N * 4, hStream, false, false);
}

CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                               CUstream hStream)
{
    (void)ui;
    return memset_range(dstDevice, N * 4, hStream, true, false);
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
 * content was discarded and not copied back; for a VMM address, bytes of
 * the pages of its reservation that the application wrote and that are
 * unmapped or hold another content now; 0 for other linear memory, which
 * nothing loses (-1: no memory the fake knows). */
long long fake_cuda_lost_bytes(CUdeviceptr ptr);
long long fake_cuda_lost_bytes(CUdeviceptr ptr)
{
    struct allocation *a;
    struct reservation *r;
    long long lost = -1;

    pthread_mutex_lock(&fake_lock);
    if ((a = holding_locked(ptr)) != NULL) {
        lost = (long long)a->lost;
    } else if ((r = reservation_locked(ptr)) != NULL) {
        lost = 0;
        for (uint64_t page = r->base; page < r->base + r->size; page += PAGE) {
            const uint64_t *tag;
            if (r->written[(page - r->base) / PAGE] &&
                ((tag = tag_locked(r, page)) == NULL || *tag != page))
                lost += PAGE;
        }
    }
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

/* Exports memory from cuMemAlloc (its size in the first 8 bytes, as
 * ipc_open reads it); VMM memory is refused, as by the driver. */
CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    CUdeviceptr base;
    size_t size;
    bool vmm;

    pthread_mutex_lock(&fake_lock);
    vmm = reservation_locked(dptr) != NULL;
    pthread_mutex_unlock(&fake_lock);
    if (vmm || cuMemGetAddressRange_v2(&base, &size, dptr) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    memset(pHandle, 0, sizeof(*pHandle));
    uint64_t bytes = size;
    memcpy(pHandle->reserved, &bytes, sizeof(bytes));
    return CUDA_SUCCESS;
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
    *granularity = PAGE;
    return CUDA_SUCCESS;
}

/* The physical allocation handle names, if not released. Lock held. */
static struct allocation *physical_locked(CUmemGenericAllocationHandle handle)
{
    for (struct allocation *a = allocations; a; a = a->next)
        if (a->kind == FAKE_MEM_VMM && a->handle == handle)
            return a->refs ? a : NULL;
    return NULL;
}

/* Physical memory with garbage in it (tags 0), until written. */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult rc;

    (void)flags;
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        prop->location.id < 0 || prop->location.id >= fake_device_count() ||
        size % PAGE != 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = fake_mem_new(FAKE_MEM_VMM, prop->location.id, size, true, NULL, handle);
    if (rc == CUDA_SUCCESS) {
        pthread_mutex_lock(&fake_lock);
        physical_locked(*handle)->prop = *prop;
        pthread_mutex_unlock(&fake_lock);
    }
    return rc;
}

/* Frees a once it is released and unmapped. Lock held. */
static void physical_unused_locked(struct allocation *a)
{
    struct allocation **link = &allocations;

    if (a->refs || a->mappings)
        return;
    while (*link != a)
        link = &(*link)->next;
    *link = a->next;
    fake_mem_give(a->dev, a->size);
    free(a->tags);
    free(a);
}

/* A mapping keeps the memory: released and mapped, it is freed at unmap. */
CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct allocation *a;

    pthread_mutex_lock(&fake_lock);
    if ((a = physical_locked(handle)) != NULL) {
        a->refs--;
        physical_unused_locked(a);
    }
    pthread_mutex_unlock(&fake_lock);
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
                                     void *addr)
{
    struct reservation *r;
    struct mapping *m = NULL;

    pthread_mutex_lock(&fake_lock);
    if ((r = reservation_locked((uint64_t)(uintptr_t)addr)) != NULL &&
        (m = mapping_of_locked(r, (uint64_t)(uintptr_t)addr)) != NULL) {
        m->phys->refs++;
        *handle = m->phys->handle;
    }
    pthread_mutex_unlock(&fake_lock);
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle)
{
    struct allocation *a;

    pthread_mutex_lock(&fake_lock);
    if ((a = physical_locked(handle)) != NULL)
        *prop = a->prop;
    pthread_mutex_unlock(&fake_lock);
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Addresses only: from the counter of every handle, taking no memory.
 * The address asked for is a hint, as for the driver, and not taken. */
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                             CUdeviceptr addr, unsigned long long flags)
{
    struct reservation *r;

    (void)addr;
    if (ptr == NULL || size == 0 || size % PAGE != 0 || flags != 0 ||
        (alignment & (alignment - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = calloc(1, sizeof(*r))) == NULL ||
        (r->written = calloc(size / PAGE, sizeof(*r->written))) == NULL) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&fake_lock);
    r->base = round_up(next_handle, alignment > PAGE ? alignment : PAGE);
    r->size = size;
    next_handle = r->base + size;
    r->next = reservations;
    reservations = r;
    *ptr = r->base;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

/* The whole reservation, once nothing is mapped in it. */
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    struct reservation **link, *r = NULL;

    pthread_mutex_lock(&fake_lock);
    for (link = &reservations; *link; link = &(*link)->next)
        if ((*link)->base == ptr && (*link)->size == size &&
            (*link)->mappings == NULL) {
            r = *link;
            *link = r->next;
            break;
        }
    pthread_mutex_unlock(&fake_lock);
    if (r == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    free(r->written);
    free(r);
    return CUDA_SUCCESS;
}

/* A whole physical allocation at a page of a reservation where nothing is
 * mapped yet; without access until cuMemSetAccess. */
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                  CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    struct mapping *m = malloc(sizeof(*m));
    struct reservation *r;
    struct allocation *a;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fake_lock);
    a = physical_locked(handle);
    r = reservation_locked(ptr);
    if (a && r && offset == 0 && flags == 0 && size == a->size &&
        ptr % PAGE == 0 && size <= r->base + r->size - ptr) {
        rc = CUDA_SUCCESS;
        for (struct mapping *o = r->mappings; o; o = o->next)
            if (o->va < ptr + size && ptr < o->va + o->size)
                rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc == CUDA_SUCCESS) {
        *m = (struct mapping){ptr, size, a, false, r->mappings};
        r->mappings = m;
        a->mappings++;
    }
    pthread_mutex_unlock(&fake_lock);
    if (rc != CUDA_SUCCESS)
        free(m);
    return rc;
}

/* Whole mappings only, as the driver wants; at least one. */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    struct reservation *r;
    struct mapping **link, *m;
    bool any = false, whole = true;

    pthread_mutex_lock(&fake_lock);
    if ((r = reservation_locked(ptr)) != NULL && size != 0 &&
        size <= r->base + r->size - ptr)
        for (m = r->mappings; m; m = m->next)
            if (m->va < ptr + size && ptr < m->va + m->size) {
                any = true;
                whole = whole && m->va >= ptr && m->va + m->size <= ptr + size;
            }
    for (link = any && whole ? &r->mappings : NULL; link && *link;) {
        m = *link;
        if (m->va >= ptr && m->va + m->size <= ptr + size) {
            *link = m->next;
            m->phys->mappings--;
            physical_unused_locked(m->phys);
            free(m);
        } else {
            link = &m->next;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return any && whole ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Every byte of the range must be mapped. It is accessible if a device was
 * given any access (not CU_MEM_ACCESS_FLAGS_PROT_NONE). */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
                        const CUmemAccessDesc *desc, size_t count)
{
    struct reservation *r;
    struct mapping *m;
    bool access = false;
    CUresult rc = CUDA_SUCCESS;

    if (desc == NULL || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            desc[i].location.id < 0 || desc[i].location.id >= fake_device_count())
            return CUDA_ERROR_INVALID_VALUE;
        access = access || desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
    }
    pthread_mutex_lock(&fake_lock);
    if ((r = reservation_locked(ptr)) == NULL || size > r->base + r->size - ptr)
        rc = CUDA_ERROR_INVALID_VALUE;
    for (uint64_t va = ptr; rc == CUDA_SUCCESS && va < ptr + size;
         va = m->va + m->size)
        if ((m = mapping_of_locked(r, va)) == NULL)
            rc = CUDA_ERROR_INVALID_VALUE;
    for (m = rc == CUDA_SUCCESS ? r->mappings : NULL; m; m = m->next)
        if (m->va < ptr + size && ptr < m->va + m->size)
            m->access = access;
    pthread_mutex_unlock(&fake_lock);
    return rc;
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
