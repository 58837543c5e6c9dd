/* vmm.c - device memory whose physical pages can go and come back at the
 * same addresses: what cuMemAlloc_v2 and cuMemAllocPitch_v2 return while
 * memory is swappable (nvshare_oversub_enabled()).
 *
 * The driver's virtual memory management separates an address range
 * (cuMemAddressReserve) from the physical memory behind it (cuMemCreate,
 * cuMemMap, cuMemSetAccess). So the hook reserves the range the
 * application sees and backs it with one physical allocation; a swap-out
 * copies the contents to host memory and unmaps and releases the physical
 * memory (the GPU gets it back at once, whatever the application does),
 * and a swap-in maps new physical memory at the same addresses and copies
 * the contents back. Kernels run on plain device memory: nothing pages,
 * unlike managed memory, which the driver may migrate under a kernel and
 * which it refuses to give back on demand.
 *
 * What it costs the application: sizes are rounded up to the granularity
 * (2 MiB), so only allocations of at least that size are made this way
 * (PyTorch's, JAX's and CuPy's pools allocate in such blocks); smaller
 * ones stay plain device memory, counted as resident. Legacy IPC
 * (cuIpcGetMemHandle) does not export VMM memory: a process that shares
 * device memory with another one that way runs with
 * NVSHARE_ENABLE_OVERSUB=0 (docs/operations.md). */
#include <stdatomic.h>
#include <time.h>

#include "driver.h"
#include "ledger.h"
#include "vmm.h"
#include "nvshare_client.h"
#include "log.h"
#include "nvshare_client.h"

/* How long an allocation or a swap-in waits for the physical memory that
 * the scheduler is making room for (an idle process swapping out) before
 * the application gets CUDA_ERROR_OUT_OF_MEMORY. */
#define VMM_ROOM_WAIT_NS (60ull * 1000000000u)
#define VMM_ROOM_POLL_NS (10ull * 1000000u)

static bool vmm_available(const struct hook_driver *drv)
{
    return drv && drv->mem_address_reserve && drv->mem_address_free &&
           drv->mem_map && drv->mem_unmap && drv->mem_set_access &&
           drv->mem_get_granularity && HOOK_REAL(cuMemCreate) &&
           HOOK_REAL(cuMemRelease);
}

static CUmemAllocationProp physical_on(int gpu)
{
    return (CUmemAllocationProp){
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = gpu},
    };
}

/* Per device: 0 not asked yet, NONE without virtual memory management
 * (some virtualised GPUs: warned once), else the granularity. */
#define NONE UINT64_MAX
static _Atomic uint64_t granularity[NVSHARE_MAX_GPUS];

static uint64_t ask_granularity(const struct hook_driver *drv, int gpu)
{
    CUmemAllocationProp prop = physical_on(gpu);
    int supported = 0;
    size_t g = 0;

    if (drv->device_get_attribute)
        drv->device_get_attribute(&supported,
                                  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                  (CUdevice)gpu);
    if (supported &&
        drv->mem_get_granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
            CUDA_SUCCESS &&
        g != 0)
        return g;
    log_warn("gpu %d has no virtual memory management: its device memory "
             "stays where it is and cannot be swapped",
             gpu);
    return NONE;
}

uint64_t vmm_granularity(int gpu)
{
    const struct hook_driver *drv = hook_driver();
    uint64_t known, expected = 0;

    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS || !vmm_available(drv))
        return 0;
    known = atomic_load_explicit(&granularity[gpu], memory_order_relaxed);
    if (known == 0) {
        known = ask_granularity(drv, gpu);
        if (!atomic_compare_exchange_strong(&granularity[gpu], &expected, known))
            known = expected; /* another thread asked (and warned) first */
    }
    return known == NONE ? 0 : known;
}

bool hook_oversub(int gpu, uint64_t bytes)
{
    uint64_t g;

    return gpu >= 0 && gpu < NVSHARE_MAX_GPUS &&
           (g = vmm_granularity(gpu)) != 0 && bytes >= g &&
           nvshare_oversub_for_allocation();
}

uint64_t vmm_rounded(int gpu, uint64_t bytes)
{
    uint64_t g = vmm_granularity(gpu);

    return g && bytes <= UINT64_MAX - g ? (bytes + g - 1) / g * g : 0;
}

/* Every device that can reach this one gets access too, as it would to
 * memory from cuMemAlloc once the application enables peer access. */
static CUresult grant_access(const struct hook_driver *drv, int gpu,
                             CUdeviceptr va, uint64_t bytes)
{
    CUmemAccessDesc access[NVSHARE_MAX_GPUS];
    int n = 0, count = 0;

    if (drv->device_get_count == NULL ||
        drv->device_get_count(&count) != CUDA_SUCCESS)
        count = gpu + 1;
    for (int dev = 0; dev < count && dev < NVSHARE_MAX_GPUS; dev++) {
        int peer = dev == gpu;
        if (!peer && drv->device_can_access_peer &&
            drv->device_can_access_peer(&peer, dev, gpu) != CUDA_SUCCESS)
            peer = 0;
        if (peer)
            access[n++] =
                (CUmemAccessDesc){.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE,
                                               .id = dev},
                                  .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    }
    return drv->mem_set_access(va, (size_t)bytes, access, (size_t)n);
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

    nanosleep(&ts, NULL);
}

/* Physical memory mapped at va with access, released again on failure. */
static CUresult map_physical(const struct hook_driver *drv, int gpu,
                             CUdeviceptr va, uint64_t bytes,
                             CUmemGenericAllocationHandle *physical)
{
    CUresult rc = drv->mem_map(va, (size_t)bytes, 0, *physical, 0);

    if (rc == CUDA_SUCCESS &&
        (rc = grant_access(drv, gpu, va, bytes)) != CUDA_SUCCESS)
        drv->mem_unmap(va, (size_t)bytes);
    if (rc != CUDA_SUCCESS) {
        HOOK_CALL_REAL(cuMemRelease, (*physical));
        *physical = 0;
    }
    return rc;
}

/* cuMemCreate; with wait, for as long as the scheduler may take to make
 * room while the GPU is full (an idle process swapping out). */
static CUresult create(int gpu, uint64_t bytes, const CUmemAllocationProp *prop,
                       CUmemGenericAllocationHandle *physical, bool wait)
{
    uint64_t deadline = 0;
    bool told = false;
    CUresult rc;

    while ((rc = HOOK_CALL_REAL(cuMemCreate, (physical, (size_t)bytes, prop, 0))) ==
               CUDA_ERROR_OUT_OF_MEMORY &&
           wait && nvshare_client_connected()) {
        uint64_t now = hook_now_ns();
        if (deadline == 0)
            deadline = now + VMM_ROOM_WAIT_NS;
        if (now >= deadline)
            break;
        if (!told) {
            log_info("gpu %d: waiting for %.1f MiB of device memory that the "
                     "scheduler makes room for",
                     gpu, (double)bytes / (1 << 20));
            told = true;
        }
        sleep_ns(VMM_ROOM_POLL_NS);
    }
    return rc;
}

/* Allocations of this process waiting for room now. */
static _Atomic int waiting_for_room;

/* Freed memory this process keeps for reuse (vmm_async.c's parked blocks),
 * released before anything waits for room; vmm_async.c, above this file,
 * installs it at load. */
static uint64_t (*kept_memory_release)(int gpu);

void vmm_on_full_release(uint64_t (*release)(int gpu))
{
    kept_memory_release = release;
}

/* cuMemCreate, making room when the GPU is full: first this process's
 * parked stream-ordered frees go; then the room may be an idle process's,
 * which the scheduler takes back for a process that waits for the GPU, so
 * the call waits for the lock as a waiter for memory (its bytes told as
 * evictable first, so that admission sees what must fit), then for the
 * room. */
CUresult vmm_create(int gpu, uint64_t bytes, const CUmemAllocationProp *prop,
                    CUmemGenericAllocationHandle *physical)
{
    CUresult rc = create(gpu, bytes, prop, physical, false);

    if (rc == CUDA_ERROR_OUT_OF_MEMORY && kept_memory_release &&
        kept_memory_release(gpu) != 0)
        rc = create(gpu, bytes, prop, physical, false);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && nvshare_client_connected()) {
        atomic_fetch_add(&waiting_for_room, 1);
        mem_evictable_extra(gpu, bytes, true, true);
        nvshare_submit_begin(gpu);
        rc = create(gpu, bytes, prop, physical, true);
        nvshare_submit_end();
        mem_evictable_extra(gpu, bytes, false, true);
        atomic_fetch_sub(&waiting_for_room, 1);
    }
    return rc;
}

bool vmm_room_awaited(void)
{
    return atomic_load_explicit(&waiting_for_room, memory_order_relaxed) != 0;
}

CUresult vmm_create_waiting(int gpu, uint64_t bytes,
                            const CUmemAllocationProp *prop,
                            CUmemGenericAllocationHandle *physical)
{
    return create(gpu, bytes, prop, physical, true);
}

static CUresult back(const struct hook_driver *drv, int gpu, CUdeviceptr va,
                     uint64_t bytes, CUmemGenericAllocationHandle *physical,
                     bool wait)
{
    CUmemAllocationProp prop = physical_on(gpu);
    CUresult rc = create(gpu, bytes, &prop, physical, wait);

    if (rc != CUDA_SUCCESS) {
        *physical = 0; /* the caller tells backed memory by it */
        return rc;
    }
    return map_physical(drv, gpu, va, bytes, physical);
}

CUresult vmm_back(int gpu, CUdeviceptr va, uint64_t bytes,
                  CUmemGenericAllocationHandle *physical)
{
    const struct hook_driver *drv = hook_driver();

    return vmm_available(drv) ? back(drv, gpu, va, bytes, physical, true)
                              : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult vmm_unback(CUdeviceptr va, uint64_t bytes,
                    CUmemGenericAllocationHandle *physical)
{
    const struct hook_driver *drv = hook_driver();
    CUresult rc;

    if (*physical == 0)
        return CUDA_SUCCESS;
    if (!vmm_available(drv))
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((rc = drv->mem_unmap(va, (size_t)bytes)) != CUDA_SUCCESS)
        return rc;
    rc = HOOK_CALL_REAL(cuMemRelease, (*physical));
    *physical = 0;
    return rc;
}

CUresult vmm_allocate(int gpu, uint64_t bytes, CUdeviceptr *va,
                      CUmemGenericAllocationHandle *physical)
{
    const struct hook_driver *drv = hook_driver();
    CUmemAllocationProp prop = physical_on(gpu);
    CUresult rc;

    if (!vmm_available(drv))
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((rc = drv->mem_address_reserve(va, (size_t)bytes, 0, 0, 0)) !=
        CUDA_SUCCESS)
        return rc;
    if ((rc = vmm_create(gpu, bytes, &prop, physical)) == CUDA_SUCCESS)
        rc = map_physical(drv, gpu, *va, bytes, physical);
    if (rc != CUDA_SUCCESS)
        drv->mem_address_free(*va, (size_t)bytes);
    return rc;
}

CUresult vmm_free(CUdeviceptr va, uint64_t bytes,
                  CUmemGenericAllocationHandle *physical)
{
    const struct hook_driver *drv = hook_driver();
    CUresult rc = vmm_unback(va, bytes, physical);

    if (rc != CUDA_SUCCESS)
        return rc;
    return drv ? drv->mem_address_free(va, (size_t)bytes)
               : CUDA_ERROR_DEINITIALIZED;
}
