/* memory_paths.c - what each memory entry point of entry_points.def means
 * for the quota: for an ALLOC, which GPU and how many bytes to charge and
 * what to remember (mem_claim_<name>); for a FREE, what to give back
 * (mem_free_<name>); for an INFO, how the answer is virtualised
 * (mem_view_<name>). Each has the entry point's own parameters; the
 * wrappers that call them are generated in wrappers.c. */
#include <limits.h>
#include <stdint.h>

#include "allocations.h"
#include "driver.h"
#include "ledger.h"
#include "memory_paths.h"
#include "memory_pools.h"
#include "stats.h"
#include "vmm.h"
#include "vmm_app.h"
#include "vmm_async.h"
#include "log.h"
#include "nvshare_memory.h"

static int gpu_of_device(CUdevice dev)
{
    return dev >= 0 && dev < NVSHARE_MAX_GPUS ? (int)dev : -1;
}

/* Device memory at a CUmemLocation; -1 for host memory (not charged). */
static int gpu_of_location(const CUmemLocation *location)
{
    return location->type == CU_MEM_LOCATION_TYPE_DEVICE
               ? gpu_of_device((CUdevice)location->id)
               : -1;
}

static struct mem_claim plain(int gpu, uint64_t bytes, enum mem_kind kind,
                              const void *out)
{
    return (
        struct mem_claim){.gpu = gpu, .bytes = bytes, .kind = kind, .out = out};
}

/* ---- linear memory ------------------------------------------------------ */

/* Swappable memory: while nvshare_oversub_for_allocation() says so,
 * cuMemAlloc_v2 and cuMemAllocPitch_v2 of at least the granularity are
 * made by vmm.c, at addresses whose physical memory swap.c can release
 * and bring back. The charge is what they take: the size rounded up to
 * the granularity. */
#define CONVERTED_PITCH_ALIGN 512u /* what drivers give cuMemAllocPitch */

static uint64_t converted_size(const struct mem_claim *claim)
{
    return vmm_rounded(claim->gpu, claim->bytes);
}

/* A failure other than a full GPU (a driver that refuses what it said it
 * supports) leaves the allocation to cuMemAlloc: device memory that
 * cannot move, but memory. */
static bool fall_back(struct mem_claim *claim, CUresult rc,
                      const struct mem_path *plain_path)
{
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_OUT_OF_MEMORY)
        return false;
    log_debug("gpu %d: swappable allocation refused (%d): device memory "
              "instead",
              claim->gpu, (int)rc);
    claim->path = plain_path;
    claim->managed = claim->converted = false;
    return true;
}

static CUresult allocate_converted(struct mem_claim *claim)
{
    CUresult rc = vmm_allocate(claim->gpu, converted_size(claim),
                               (CUdeviceptr *)claim->out, &claim->physical);

    if (fall_back(claim, rc, NULL))
        return HOOK_CALL_REAL(cuMemAlloc_v2,
                              ((CUdeviceptr *)claim->out, (size_t)claim->bytes));
    if (rc == CUDA_SUCCESS)
        hook_count(&hook_stat_events[HOOK_EV_OVERSUB_CONVERTED], 1);
    return rc;
}

static void free_converted(const struct mem_claim *claim)
{
    CUmemGenericAllocationHandle physical = claim->physical;

    vmm_free(*(const CUdeviceptr *)claim->out, converted_size(claim), &physical);
}

static const struct mem_path converted_path = {.allocate = allocate_converted,
                                               .measure = converted_size,
                                               .undo = free_converted};

static void convert(struct mem_claim *claim, const struct mem_path *path)
{
    claim->path = path;
    claim->managed = claim->converted = true;
}

struct mem_claim mem_claim_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    struct mem_claim claim = plain(hook_alloc_gpu(), bytesize, MEM_DEVPTR, dptr);

    if (hook_oversub(claim.gpu, bytesize))
        convert(&claim, &converted_path);
    return claim;
}

/* Managed memory is charged in full: it may all become resident. */
struct mem_claim mem_claim_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                                             unsigned int flags)
{
    struct mem_claim claim = plain(hook_alloc_gpu(), bytesize, MEM_DEVPTR, dptr);

    (void)flags;
    claim.managed = true;
    return claim;
}

/* The pitch is chosen by the driver: charge the unpadded size first (the
 * least it can take), then what it returned, pitch * height. */
static uint64_t pitched_size(const struct mem_claim *claim)
{
    return (uint64_t)*claim->u.pitch.pitch * claim->u.pitch.height;
}

static void free_pointer(const struct mem_claim *claim)
{
    HOOK_CALL_REAL(cuMemFree_v2, (*(const CUdeviceptr *)claim->out));
}

static const struct mem_path pitch_path = {.measure = pitched_size,
                                           .undo = free_pointer};

/* Converted: the pitch the driver would choose (rows of 512-byte
 * multiples), pitch * height rounded up to the granularity. */
static size_t converted_pitch(const struct mem_claim *claim)
{
    return (claim->u.pitch.width + CONVERTED_PITCH_ALIGN - 1) /
           CONVERTED_PITCH_ALIGN * CONVERTED_PITCH_ALIGN;
}

static uint64_t converted_pitched_size(const struct mem_claim *claim)
{
    return vmm_rounded(claim->gpu,
                       (uint64_t)converted_pitch(claim) * claim->u.pitch.height);
}

static CUresult allocate_converted_pitch(struct mem_claim *claim)
{
    CUresult rc = vmm_allocate(claim->gpu, converted_pitched_size(claim),
                               (CUdeviceptr *)claim->out, &claim->physical);

    if (fall_back(claim, rc, &pitch_path))
        return HOOK_CALL_REAL(cuMemAllocPitch_v2,
                              ((CUdeviceptr *)claim->out,
                               (size_t *)claim->u.pitch.pitch,
                               claim->u.pitch.width, claim->u.pitch.height,
                               claim->u.pitch.element));
    if (rc == CUDA_SUCCESS) {
        hook_count(&hook_stat_events[HOOK_EV_OVERSUB_CONVERTED], 1);
        *(size_t *)claim->u.pitch.pitch = converted_pitch(claim);
    }
    return rc;
}

static void free_converted_pitch(const struct mem_claim *claim)
{
    CUmemGenericAllocationHandle physical = claim->physical;

    vmm_free(*(const CUdeviceptr *)claim->out, converted_pitched_size(claim),
             &physical);
}

static const struct mem_path converted_pitch_path =
    {.allocate = allocate_converted_pitch,
     .measure = converted_pitched_size,
     .undo = free_converted_pitch};

struct mem_claim mem_claim_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
                                              size_t WidthInBytes, size_t Height,
                                              unsigned int ElementSizeBytes)
{
    struct mem_claim claim = plain(hook_alloc_gpu(),
                                   (uint64_t)WidthInBytes * Height, MEM_DEVPTR,
                                   dptr);
    /* Arguments the driver refuses stay its to refuse. */
    bool valid = WidthInBytes > 0 && Height > 0 && pPitch != NULL &&
                 (ElementSizeBytes == 4 || ElementSizeBytes == 8 ||
                  ElementSizeBytes == 16) &&
                 WidthInBytes <= SIZE_MAX - CONVERTED_PITCH_ALIGN &&
                 (WidthInBytes + CONVERTED_PITCH_ALIGN) <= SIZE_MAX / Height;

    claim.path = &pitch_path;
    if (valid && hook_oversub(claim.gpu, claim.bytes))
        convert(&claim, &converted_pitch_path);
    claim.u.pitch.pitch = pPitch;
    claim.u.pitch.width = WidthInBytes;
    claim.u.pitch.height = Height;
    claim.u.pitch.element = ElementSizeBytes;
    return claim;
}

/* Mapped external memory is freed with cuMemFree, like cuMemAlloc's. */
struct mem_claim mem_claim_cuExternalMemoryGetMappedBuffer(
    CUdeviceptr *devPtr, CUexternalMemory extMem,
    const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc)
{
    (void)extMem;
    return plain(hook_alloc_gpu(), bufferDesc ? bufferDesc->size : 0,
                 MEM_DEVPTR, devPtr);
}

/* ---- IPC: the importer charges the size of what it opened --------------- */

static uint64_t opened_size(const struct mem_claim *claim)
{
    const struct hook_driver *drv = hook_driver();
    CUdeviceptr base;
    size_t size = 0;

    if (drv && drv->mem_get_address_range)
        drv->mem_get_address_range(&base, &size,
                                   *(const CUdeviceptr *)claim->out);
    return size;
}

static void close_opened(const struct mem_claim *claim)
{
    HOOK_CALL_REAL(cuIpcCloseMemHandle, (*(const CUdeviceptr *)claim->out));
}

static const struct mem_path ipc_path = {.measure = opened_size,
                                         .undo = close_opened};

static struct mem_claim ipc_claim(CUdeviceptr *pdptr)
{
    struct mem_claim claim = plain(hook_alloc_gpu(), 0, MEM_DEVPTR, pdptr);

    claim.path = &ipc_path;
    return claim;
}

struct mem_claim mem_claim_cuIpcOpenMemHandle(CUdeviceptr *pdptr,
                                              CUipcMemHandle handle,
                                              unsigned int Flags)
{
    (void)handle, (void)Flags;
    return ipc_claim(pdptr);
}

struct mem_claim mem_claim_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr,
                                                 CUipcMemHandle handle,
                                                 unsigned int Flags)
{
    (void)handle, (void)Flags;
    return ipc_claim(pdptr);
}

/* ---- pools -------------------------------------------------------------- */

static CUmemoryPool current_pool(int gpu)
{
    const struct hook_driver *drv = hook_driver();
    CUmemoryPool pool = NULL;

    if (drv && drv->device_get_mem_pool)
        drv->device_get_mem_pool(&pool, (CUdevice)gpu);
    return pool;
}

/* Stream-ordered swappable memory (vmm_async.c): a parked block of about
 * the size, or a new range. Capture mode is relaxed around the driver
 * calls: another thread's capture in global mode would take them for
 * unsafe ones the application did not make. */
static CUresult allocate_stream_ordered(struct mem_claim *claim)
{
    const struct hook_driver *drv = hook_driver();
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUresult rc;

    if (claim->u.async.reused) {
        *(CUdeviceptr *)claim->out = claim->u.async.reused;
        return CUDA_SUCCESS;
    }
    if (drv->exchange_capture_mode)
        drv->exchange_capture_mode(&mode);
    rc = vmm_allocate(claim->gpu, claim->bytes, (CUdeviceptr *)claim->out,
                      &claim->physical);
    if (drv->exchange_capture_mode)
        drv->exchange_capture_mode(&mode);
    if (fall_back(claim, rc, NULL))
        return claim->u.async.pt
                   ? HOOK_CALL_REAL(cuMemAllocAsync_ptsz,
                                    ((CUdeviceptr *)claim->out,
                                     (size_t)claim->bytes, claim->u.async.stream))
                   : HOOK_CALL_REAL(cuMemAllocAsync, ((CUdeviceptr *)claim->out,
                                                      (size_t)claim->bytes,
                                                      claim->u.async.stream));
    if (rc == CUDA_SUCCESS)
        hook_count(&hook_stat_events[HOOK_EV_OVERSUB_CONVERTED], 1);
    return rc;
}

static const struct mem_path stream_ordered_path = {
    .allocate = allocate_stream_ordered};

static struct mem_claim alloc_async(CUdeviceptr *dptr, size_t bytesize,
                                    CUstream stream, bool pt)
{
    int gpu = hook_alloc_gpu();
    struct mem_claim claim;

    if (!vmm_async_wanted(gpu, bytesize, stream, pt))
        return mem_pool_claim(current_pool(gpu), gpu, bytesize, stream, pt, dptr);
    claim = plain(gpu, vmm_rounded(gpu, bytesize), MEM_DEVPTR, dptr);
    convert(&claim, &stream_ordered_path);
    claim.u.async.stream = stream;
    claim.u.async.pt = pt;
    /* A parked block is still charged: its charge passes to the claim. */
    claim.precharged = vmm_async_reuse(gpu, claim.bytes, stream, pt,
                                       &claim.u.async.reused, &claim.bytes,
                                       &claim.physical);
    return claim;
}

struct mem_claim mem_claim_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
                                           CUstream hStream)
{
    return alloc_async(dptr, bytesize, hStream, false);
}

struct mem_claim mem_claim_cuMemAllocAsync_ptsz(CUdeviceptr *dptr,
                                                size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, hStream, true);
}

struct mem_claim mem_claim_cuMemAllocFromPoolAsync(CUdeviceptr *dptr,
                                                   size_t bytesize,
                                                   CUmemoryPool pool,
                                                   CUstream hStream)
{
    return mem_pool_claim(pool, hook_alloc_gpu(), bytesize, hStream, false, dptr);
}

struct mem_claim mem_claim_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr,
                                                        size_t bytesize,
                                                        CUmemoryPool pool,
                                                        CUstream hStream)
{
    return mem_pool_claim(pool, hook_alloc_gpu(), bytesize, hStream, true, dptr);
}

/* A new pool holds nothing yet; it is tracked with its device from then on
 * (pools first seen in an allocation get the caller's current GPU). */
static void track_pool(const struct mem_claim *claim, uint64_t bytes)
{
    (void)bytes;
    mem_pool_created(*(const CUmemoryPool *)claim->out, claim->gpu);
}

static const struct mem_path new_pool_path = {.commit = track_pool};

struct mem_claim mem_claim_cuMemPoolCreate(CUmemoryPool *pool,
                                           const CUmemPoolProps *poolProps)
{
    struct mem_claim claim =
        plain(poolProps ? gpu_of_location(&poolProps->location) : -1, 0,
              MEM_DEVPTR, pool);

    claim.path = &new_pool_path;
    return claim;
}

/* ---- graph memory and VMM ---------------------------------------------- */

struct mem_claim mem_claim_cuGraphAddMemAllocNode(
    CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
    size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    (void)phGraphNode, (void)hGraph, (void)dependencies, (void)numDependencies;
    if (nodeParams == NULL)
        return (struct mem_claim){.gpu = -1};
    return mem_graph_claim(gpu_of_location(&nodeParams->poolProps.location),
                           nodeParams->bytesize);
}

/* VMM: physical memory is created here (cuMemAddressReserve only reserves
 * addresses) and freed by cuMemRelease. */
/* While memory is swappable, the application gets a token for its
 * physical memory (vmm_app.c), so that a swap can replace what is behind
 * it. */
static CUresult create_behind_token(struct mem_claim *claim)
{
    return vmm_app_create(claim->gpu, (CUmemGenericAllocationHandle *)claim->out,
                          claim->bytes, claim->u.prop);
}

static const struct mem_path token_path = {.allocate = create_behind_token};

struct mem_claim mem_claim_cuMemCreate(CUmemGenericAllocationHandle *handle,
                                       size_t size,
                                       const CUmemAllocationProp *prop,
                                       unsigned long long flags)
{
    struct mem_claim claim = plain(prop ? gpu_of_location(&prop->location) : -1,
                                   size, MEM_VMM, handle);

    /* What the driver would refuse stays its to refuse. */
    if (claim.gpu >= 0 && flags == 0 && size > 0 &&
        prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
        hook_oversub(claim.gpu, size)) {
        claim.path = &token_path;
        claim.managed = true;
        claim.u.prop = prop;
    }
    return claim;
}

/* The size of an imported generic handle cannot be read until it is
 * mapped: not charged (docs/interposition.md, gaps). */
struct mem_claim mem_claim_cuMemImportFromShareableHandle(
    CUmemGenericAllocationHandle *handle, void *osHandle,
    CUmemAllocationHandleType shHandleType)
{
    (void)handle, (void)osHandle, (void)shHandleType;
    return (struct mem_claim){.gpu = -1};
}

/* ---- arrays: the size from the descriptor, then the driver's own -------- */

static uint64_t format_bytes(CUarray_format format)
{
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        /* 8-bit, and the lower bound for the rest: the driver's measured
         * size corrects it after the call. */
        return 1;
    }
}

static uint64_t at_least_one(size_t n)
{
    return n ? n : 1;
}

static uint64_t level_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned level)
{
    bool layered = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
    uint64_t depth = layered ? at_least_one(d->Depth)
                             : at_least_one(d->Depth >> level);

    return at_least_one(d->Width >> level) * at_least_one(d->Height >> level) *
           depth * d->NumChannels * format_bytes(d->Format);
}

static uint64_t array_requirement(const struct mem_claim *claim)
{
    const struct hook_driver *drv = hook_driver();
    CUDA_ARRAY_MEMORY_REQUIREMENTS req = {0};
    CUresult rc = CUDA_ERROR_NOT_SUPPORTED;

    if (claim->kind == MEM_ARRAY && drv && drv->array_requirements)
        rc = drv->array_requirements(&req, *(const CUarray *)claim->out,
                                     claim->u.dev);
    else if (claim->kind == MEM_MIPMAP && drv && drv->mipmap_requirements)
        rc = drv->mipmap_requirements(&req, *(const CUmipmappedArray *)claim->out,
                                      claim->u.dev);
    return rc == CUDA_SUCCESS && req.size > claim->bytes ? req.size
                                                         : claim->bytes;
}

static void destroy_array(const struct mem_claim *claim)
{
    if (claim->kind == MEM_ARRAY)
        HOOK_CALL_REAL(cuArrayDestroy, (*(const CUarray *)claim->out));
    else
        HOOK_CALL_REAL(cuMipmappedArrayDestroy,
                       (*(const CUmipmappedArray *)claim->out));
}

static const struct mem_path array_path = {.measure = array_requirement,
                                           .undo = destroy_array};

static struct mem_claim array_claim(uint64_t bytes, enum mem_kind kind,
                                    const void *out)
{
    struct mem_claim claim = plain(hook_alloc_gpu(), bytes, kind, out);

    claim.path = &array_path;
    claim.u.dev = (CUdevice)claim.gpu;
    return claim;
}

struct mem_claim mem_claim_cuArrayCreate_v2(
    CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    CUDA_ARRAY3D_DESCRIPTOR d = {0};

    if (pAllocateArray) {
        d.Width = pAllocateArray->Width;
        d.Height = pAllocateArray->Height;
        d.Format = pAllocateArray->Format;
        d.NumChannels = pAllocateArray->NumChannels;
    }
    return array_claim(level_bytes(&d, 0), MEM_ARRAY, pHandle);
}

struct mem_claim mem_claim_cuArray3DCreate_v2(
    CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    return array_claim(pAllocateArray ? level_bytes(pAllocateArray, 0) : 0,
                       MEM_ARRAY, pHandle);
}

struct mem_claim mem_claim_cuMipmappedArrayCreate(
    CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
    unsigned int numMipmapLevels)
{
    uint64_t bytes = 0;

    for (unsigned level = 0; pMipmappedArrayDesc && level < numMipmapLevels;
         level++)
        bytes += level_bytes(pMipmappedArrayDesc, level);
    return array_claim(bytes, MEM_MIPMAP, pHandle);
}

/* ---- frees -------------------------------------------------------------- */

static struct mem_free by_key(enum mem_kind kind, uint64_t key)
{
    return (struct mem_free){.kind = kind, .key = key};
}

struct mem_free mem_free_cuMemFree_v2(CUdeviceptr dptr)
{
    return by_key(MEM_DEVPTR, dptr);
}

/* A pool allocation is not in the map (its pool is charged); what vmm.c
 * made (cuMemAllocAsync's too) is, and is parked until the stream's work
 * before the free is done (vmm_async.c). */
static struct mem_free on_stream(CUdeviceptr dptr, CUstream stream, bool pt)
{
    struct mem_free f = by_key(MEM_DEVPTR, dptr);

    f.stream_ordered = true;
    f.stream = stream;
    f.pt = pt;
    return f;
}

struct mem_free mem_free_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return on_stream(dptr, hStream, false);
}

struct mem_free mem_free_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return on_stream(dptr, hStream, true);
}

struct mem_free mem_free_cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    return by_key(MEM_DEVPTR, dptr);
}

struct mem_free mem_free_cuMemRelease(CUmemGenericAllocationHandle handle)
{
    return by_key(MEM_VMM, handle);
}

struct mem_free mem_free_cuArrayDestroy(CUarray hArray)
{
    return by_key(MEM_ARRAY, (uint64_t)(uintptr_t)hArray);
}

struct mem_free mem_free_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return by_key(MEM_MIPMAP, (uint64_t)(uintptr_t)hMipmappedArray);
}

struct mem_free mem_free_cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;
    vmm_async_pool_trimmed(pool);
    return (struct mem_free){.pool = pool, .after = mem_pool_after_trim};
}

struct mem_free mem_free_cuMemPoolDestroy(CUmemoryPool pool)
{
    return (struct mem_free){.pool = pool, .after = mem_pool_after_destroy};
}

struct mem_free mem_free_cuDeviceGraphMemTrim(CUdevice device)
{
    return (struct mem_free){.dev = device, .after = mem_graph_after_trim};
}

/* Its mapped buffers are freed (and given back) with cuMemFree. */
struct mem_free mem_free_cuDestroyExternalMemory(CUexternalMemory extMem)
{
    (void)extMem;
    return (struct mem_free){.kind = MEM_NOTHING};
}

/* ---- what the application sees ------------------------------------------ */

/* The quota's view of gpu, with pools brought up to date first. */
static bool quota_view(int gpu, uint64_t *quota, uint64_t *used)
{
    if (gpu < 0)
        return false;
    mem_pools_settle(gpu);
    return nvshare_mem_view(gpu, quota, used);
}

/* total = the quota (never above the real total); free = what is left of
 * it, never negative and never above the real free memory. */
static void virtualise(int gpu, uint64_t *free_bytes, uint64_t *total_bytes)
{
    uint64_t quota, used, left;

    if (!quota_view(gpu, &quota, &used))
        return;
    if (quota < *total_bytes)
        *total_bytes = quota;
    left = used < *total_bytes ? *total_bytes - used : 0;
    if (left < *free_bytes)
        *free_bytes = left;
}

void mem_view_cuMemGetInfo_v2(size_t *free, size_t *total)
{
    uint64_t f = *free, t = *total;

    virtualise(hook_alloc_gpu(), &f, &t);
    *free = f;
    *total = t;
}

/* The 32-bit ABI: the driver already clamped to UINT_MAX; so does this. */
void mem_view_cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    uint64_t f = *free, t = *total;

    virtualise(hook_alloc_gpu(), &f, &t);
    *free = (unsigned int)(f < UINT_MAX ? f : UINT_MAX);
    *total = (unsigned int)(t < UINT_MAX ? t : UINT_MAX);
}

void mem_view_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    uint64_t quota, used;

    if (quota_view(gpu_of_device(dev), &quota, &used) && quota < *bytes)
        *bytes = quota;
}

void mem_view_cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    uint64_t quota, used;

    if (quota_view(gpu_of_device(dev), &quota, &used) && quota < *bytes)
        *bytes = (unsigned int)quota;
}

/* ---- exports -------------------------------------------------------------- */

/* Legacy IPC exports memory from cuMemAlloc only: the driver refuses what
 * vmm.c made in its place, and the application would not know why. */
void mem_export_refused_cuIpcGetMemHandle(CUipcMemHandle *pHandle,
                                          CUdeviceptr dptr)
{
    static atomic_bool told;

    (void)pHandle;
    if (mem_is_converted(dptr) && !atomic_exchange(&told, true))
        log_warn("cuIpcGetMemHandle: memory at 0x%llx is swappable (VMM), "
                 "which legacy IPC cannot export; run this process with "
                 "NVSHARE_ENABLE_OVERSUB=0 to share its device memory",
                 (unsigned long long)dptr);
}
