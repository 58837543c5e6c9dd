/* vmm_app.c - the application's own virtual memory management made
 * swappable: PyTorch's expandable segments, and anything else that maps
 * cuMemCreate's physical memory itself.
 *
 * A swap must release physical memory that the application still holds a
 * handle to, and give it new physical memory at the same addresses. So,
 * while memory is swappable, the handle the application gets from
 * cuMemCreate is a token of libnvshare's (tokens are not addresses: their
 * top bits make them non-canonical), and every entry point that takes a
 * handle reads the physical allocation behind the token now. What the
 * application does to its ranges is kept (the mappings, their access), so
 * that a swap-in can do it again. While its process is swapped out (its
 * gate is closed, so nothing of it runs on the GPU) a mapping or an access
 * change is only recorded, an unmap only forgets, and the swap-in applies
 * what is left.
 *
 * Memory that leaves the process (cuMemExportToShareableHandle, a
 * multicast object, a sparse array) is pinned: it never moves again, and
 * the scheduler counts it as resident. Physical memory that is not mapped
 * stays where it is (there is nothing to copy it through). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "ledger.h"
#include "staging.h"
#include "stats.h"
#include "vmm.h"
#include "vmm_app.h"
#include "log.h"

#define TOKEN_TAG 0xa5a5000000000000ull
#define TOKEN_MASK 0xffff000000000000ull

struct app_alloc;

struct app_mapping {
    CUdeviceptr va;
    size_t size, offset;
    struct app_alloc *alloc;
    CUmemAccessDesc access[NVSHARE_MAX_GPUS];
    size_t n_access;
    void *backing; /* its content while out */
    struct app_mapping *next;
};

struct app_alloc {
    uint64_t token;
    CUmemGenericAllocationHandle physical; /* 0 while out */
    CUmemAllocationProp prop;
    int gpu;
    uint64_t size;
    unsigned app_refs; /* cuMemCreate and retains, less releases */
    unsigned mappings;
    bool pinned; /* left the process: never moves */
    bool out;
    bool moving; /* queued by the swap in progress */
    struct app_alloc *next;
};

static struct app_alloc *allocs;
static struct app_mapping *mappings;
static uint64_t next_token = 1;
static pthread_mutex_t app_lock = PTHREAD_MUTEX_INITIALIZER;

bool vmm_app_is_token(uint64_t handle)
{
    return (handle & TOKEN_MASK) == TOKEN_TAG;
}

static struct app_alloc *alloc_locked(uint64_t token)
{
    for (struct app_alloc *a = allocs; a; a = a->next)
        if (a->token == token)
            return a;
    return NULL;
}

static struct app_mapping *mapping_at_locked(CUdeviceptr addr)
{
    for (struct app_mapping *m = mappings; m; m = m->next)
        if (addr >= m->va && addr < m->va + m->size)
            return m;
    return NULL;
}

static void forget_alloc_locked(struct app_alloc *a)
{
    for (struct app_alloc **link = &allocs; *link; link = &(*link)->next)
        if (*link == a) {
            *link = a->next;
            free(a);
            return;
        }
}

/* An allocation the application released and no longer maps is gone. */
static void maybe_gone_locked(struct app_alloc *a)
{
    if (a->app_refs == 0 && a->mappings == 0)
        forget_alloc_locked(a);
}

/* ---- creation and release (memory_paths.c's cuMemCreate path) ---------- */

bool vmm_app_last_ref(uint64_t token)
{
    pthread_mutex_lock(&app_lock);
    struct app_alloc *a = alloc_locked(token);
    bool last = a == NULL || a->app_refs <= 1;
    pthread_mutex_unlock(&app_lock);
    return last;
}

CUresult vmm_app_create(int gpu, CUmemGenericAllocationHandle *handle,
                        uint64_t size, const CUmemAllocationProp *prop)
{
    CUmemGenericAllocationHandle physical;
    struct app_alloc *a = calloc(1, sizeof(*a));
    CUresult rc;

    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = vmm_create(gpu, size, prop, &physical);
    if (rc != CUDA_SUCCESS) {
        free(a);
        return rc;
    }
    pthread_mutex_lock(&app_lock);
    *a = (struct app_alloc){.token = TOKEN_TAG | next_token++,
                            .physical = physical,
                            .prop = *prop,
                            .gpu = gpu,
                            .size = size,
                            .app_refs = 1,
                            .next = allocs};
    allocs = a;
    *handle = a->token;
    pthread_mutex_unlock(&app_lock);
    return CUDA_SUCCESS;
}

CUresult vmm_app_release(uint64_t token)
{
    CUresult rc = CUDA_SUCCESS;

    pthread_mutex_lock(&app_lock);
    struct app_alloc *a = alloc_locked(token);
    if (a == NULL || a->app_refs == 0) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (--a->app_refs == 0) {
        /* The driver frees the physical memory once it is unmapped. */
        if (a->physical)
            rc = HOOK_CALL_REAL(cuMemRelease, (a->physical));
        if (rc != CUDA_SUCCESS)
            a->app_refs++;
        else if (a->mappings == 0)
            forget_alloc_locked(a);
    }
    pthread_mutex_unlock(&app_lock);
    return rc;
}

/* ---- the entry points that take a handle or an address of one ---------- */

static CUresult translate(uint64_t handle, CUmemGenericAllocationHandle *real)
{
    CUresult rc = CUDA_SUCCESS;

    *real = handle;
    if (!vmm_app_is_token(handle))
        return CUDA_SUCCESS;
    pthread_mutex_lock(&app_lock);
    struct app_alloc *a = alloc_locked(handle);
    if (a == NULL || a->physical == 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *real = a->physical;
    pthread_mutex_unlock(&app_lock);
    return rc;
}

/* It leaves the process: from now on it stays where it is. */
static CUresult pin(uint64_t handle, CUmemGenericAllocationHandle *real)
{
    CUresult rc = translate(handle, real);

    if (rc != CUDA_SUCCESS || !vmm_app_is_token(handle))
        return rc;
    pthread_mutex_lock(&app_lock);
    struct app_alloc *a = alloc_locked(handle);
    if (a && !a->pinned) {
        a->pinned = true;
        mem_set_evictable(MEM_VMM, handle, false);
    }
    pthread_mutex_unlock(&app_lock);
    return rc;
}

HOOK_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle,
                              unsigned long long flags)
{
    struct app_mapping *m;
    CUresult rc = CUDA_SUCCESS;

    hook_count(&hook_stat_calls[NVSHARE_ID_cuMemMap], 1);
    if (!vmm_app_is_token(handle))
        return HOOK_CALL_REAL(cuMemMap, (ptr, size, offset, handle, flags));
    if ((m = calloc(1, sizeof(*m))) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&app_lock);
    struct app_alloc *a = alloc_locked(handle);
    if (a == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (!a->out) /* out: the swap-in maps it */
        rc = HOOK_CALL_REAL(cuMemMap, (ptr, size, offset, a->physical, flags));
    if (rc == CUDA_SUCCESS) {
        *m = (struct app_mapping){.va = ptr,
                                  .size = size,
                                  .offset = offset,
                                  .alloc = a,
                                  .next = mappings};
        mappings = m;
        a->mappings++;
        m = NULL;
    }
    pthread_mutex_unlock(&app_lock);
    free(m);
    return rc;
}

/* Whether a mapping in [ptr, ptr + size) is out: then the range is
 * handled mapping by mapping. Lock held. */
static bool any_out_locked(CUdeviceptr ptr, size_t size)
{
    for (struct app_mapping *m = mappings; m; m = m->next)
        if (m->va >= ptr && m->va < ptr + size && m->alloc->out)
            return true;
    return false;
}

HOOK_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult rc = CUDA_SUCCESS;

    hook_count(&hook_stat_calls[NVSHARE_ID_cuMemUnmap], 1);
    pthread_mutex_lock(&app_lock);
    bool out = any_out_locked(ptr, size);
    if (!out)
        rc = HOOK_CALL_REAL(cuMemUnmap, (ptr, size));
    for (struct app_mapping **link = &mappings; rc == CUDA_SUCCESS && *link;) {
        struct app_mapping *m = *link;
        if (m->va < ptr || m->va >= ptr + size) {
            link = &m->next;
            continue;
        }
        if (out && !m->alloc->out)
            HOOK_CALL_REAL(cuMemUnmap, (m->va, m->size));
        staging_host_free(m->backing, m->size);
        *link = m->next;
        m->alloc->mappings--;
        maybe_gone_locked(m->alloc);
        free(m);
    }
    pthread_mutex_unlock(&app_lock);
    return rc;
}

HOOK_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                    const CUmemAccessDesc *desc, size_t count)
{
    CUresult rc = CUDA_SUCCESS;
    bool out;

    hook_count(&hook_stat_calls[NVSHARE_ID_cuMemSetAccess], 1);
    pthread_mutex_lock(&app_lock);
    out = any_out_locked(ptr, size);
    if (!out)
        rc = HOOK_CALL_REAL(cuMemSetAccess, (ptr, size, desc, count));
    for (struct app_mapping *m = mappings; rc == CUDA_SUCCESS && m; m = m->next) {
        if (m->va < ptr || m->va >= ptr + size)
            continue;
        m->n_access = count < NVSHARE_MAX_GPUS ? count : NVSHARE_MAX_GPUS;
        memcpy(m->access, desc, m->n_access * sizeof(*desc));
        if (out && !m->alloc->out)
            rc = HOOK_CALL_REAL(cuMemSetAccess, (m->va, m->size, desc, count));
    }
    pthread_mutex_unlock(&app_lock);
    return rc;
}

HOOK_EXPORT CUresult
cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    hook_count(&hook_stat_calls[NVSHARE_ID_cuMemRetainAllocationHandle], 1);
    pthread_mutex_lock(&app_lock);
    struct app_mapping *m = mapping_at_locked((CUdeviceptr)(uintptr_t)addr);
    if (m && m->alloc->app_refs > 0) {
        /* The driver's count stays libnvshare's one reference. */
        m->alloc->app_refs++;
        *handle = m->alloc->token;
        pthread_mutex_unlock(&app_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&app_lock);
    return HOOK_CALL_REAL(cuMemRetainAllocationHandle, (handle, addr));
}

HOOK_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(
    CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    hook_count(&hook_stat_calls[NVSHARE_ID_cuMemGetAllocationPropertiesFromHandle],
               1);
    if (!vmm_app_is_token(handle))
        return HOOK_CALL_REAL(cuMemGetAllocationPropertiesFromHandle,
                              (prop, handle));
    pthread_mutex_lock(&app_lock);
    struct app_alloc *a = alloc_locked(handle);
    if (a)
        *prop = a->prop;
    pthread_mutex_unlock(&app_lock);
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

HOOK_EXPORT CUresult cuMemExportToShareableHandle(
    void *shareableHandle, CUmemGenericAllocationHandle handle,
    CUmemAllocationHandleType handleType, unsigned long long flags)
{
    CUmemGenericAllocationHandle real;
    CUresult rc;

    hook_count(&hook_stat_calls[NVSHARE_ID_cuMemExportToShareableHandle], 1);
    if ((rc = pin(handle, &real)) != CUDA_SUCCESS)
        return rc;
    return HOOK_CALL_REAL(cuMemExportToShareableHandle,
                          (shareableHandle, real, handleType, flags));
}

HOOK_EXPORT CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle,
                                        size_t mcOffset,
                                        CUmemGenericAllocationHandle memHandle,
                                        size_t memOffset, size_t size,
                                        unsigned long long flags)
{
    CUmemGenericAllocationHandle real;
    CUresult rc;

    hook_count(&hook_stat_calls[NVSHARE_ID_cuMulticastBindMem], 1);
    if ((rc = pin(memHandle, &real)) != CUDA_SUCCESS)
        return rc;
    return HOOK_CALL_REAL(cuMulticastBindMem,
                          (mcHandle, mcOffset, real, memOffset, size, flags));
}

/* Sparse arrays bound to a token: a copy of the list with the physical
 * handles, each allocation pinned. */
static CUresult map_arrays(CUarrayMapInfo *list, unsigned count,
                           CUarrayMapInfo **real)
{
    *real = list;
    for (unsigned i = 0; i < count; i++)
        if (list[i].memHandleType == CU_MEM_HANDLE_TYPE_GENERIC &&
            vmm_app_is_token(list[i].memHandle.memHandle)) {
            if (*real == list) {
                if ((*real = malloc(count * sizeof(*list))) == NULL)
                    return CUDA_ERROR_OUT_OF_MEMORY;
                memcpy(*real, list, count * sizeof(*list));
            }
            CUresult rc = pin(list[i].memHandle.memHandle,
                              &(*real)[i].memHandle.memHandle);
            if (rc != CUDA_SUCCESS) {
                free(*real);
                *real = list;
                return rc;
            }
        }
    return CUDA_SUCCESS;
}

#define MAP_ARRAY_ASYNC(e)                                                     \
    HOOK_EXPORT CUresult e(CUarrayMapInfo *mapInfoList, unsigned int count,    \
                           CUstream hStream)                                   \
    {                                                                          \
        CUarrayMapInfo *real;                                                  \
        CUresult rc;                                                           \
                                                                               \
        hook_count(&hook_stat_calls[NVSHARE_ID_##e], 1);                       \
        if ((rc = map_arrays(mapInfoList, count, &real)) != CUDA_SUCCESS)      \
            return rc;                                                         \
        rc = HOOK_CALL_REAL(e, (real, count, hStream));                        \
        if (real != mapInfoList)                                               \
            free(real);                                                        \
        return rc;                                                             \
    }
MAP_ARRAY_ASYNC(cuMemMapArrayAsync)
MAP_ARRAY_ASYNC(cuMemMapArrayAsync_ptsz)

/* ---- swaps (swap.c, under its locks) -------------------------------------- */

static bool movable(const struct app_alloc *a, int gpu)
{
    return a->gpu == gpu && !a->pinned && a->mappings > 0;
}

void vmm_app_swap_begin(void)
{
    pthread_mutex_lock(&app_lock);
}

static bool install_copy(const struct staging_host_copy *copy, void *host)
{
    bool taken = false;

    pthread_mutex_lock(&app_lock);
    for (struct app_mapping *m = mappings; m && !taken; m = m->next)
        if (m->va == (CUdeviceptr)copy->key && m->size == copy->bytes &&
            m->backing == NULL && !m->alloc->out) {
            m->backing = host;
            taken = true;
        }
    pthread_mutex_unlock(&app_lock);
    return taken;
}

void vmm_app_host_copies(int gpu,
                         void (*add)(struct staging_host_copy copy, void *arg),
                         void *arg)
{
    pthread_mutex_lock(&app_lock);
    for (struct app_mapping *m = mappings; m; m = m->next)
        if (movable(m->alloc, gpu) && !m->alloc->out && m->backing == NULL)
            add((struct staging_host_copy){.key = m->va,
                                           .gpu = gpu,
                                           .bytes = m->size,
                                           .install = install_copy},
                arg);
    pthread_mutex_unlock(&app_lock);
}

/* Two passes, allocations then mappings, rather than every mapping per
 * allocation: PyTorch's expandable segments make thousands of each. */
uint64_t vmm_app_queue(int gpu, bool to_device, struct staging_run *run)
{
    const struct hook_driver *drv = hook_driver();
    uint64_t bytes = 0;

    for (struct app_alloc *a = allocs; a; a = a->next) {
        a->moving = false;
        if (!movable(a, gpu) || a->out != to_device)
            continue;
        if (to_device) {
            CUresult rc =
                vmm_create_waiting(gpu, a->size, &a->prop, &a->physical);
            if (rc != CUDA_SUCCESS) { /* stays out: swap.c says so */
                log_debug("swap in gpu %d: no physical memory for %llu bytes "
                          "of the application's own (%d)",
                          gpu, (unsigned long long)a->size, (int)rc);
                continue;
            }
            a->out = false;
        }
        a->moving = true;
    }
    for (struct app_mapping *m = mappings; m; m = m->next) {
        struct app_alloc *a = m->alloc;

        if (!a->moving)
            continue;
        if (to_device) {
            drv->mem_map(m->va, m->size, m->offset, a->physical, 0);
            if (m->n_access)
                drv->mem_set_access(m->va, m->size, m->access, m->n_access);
            if (m->backing)
                staging_copy(run, true, m->va, m->backing, m->size);
        } else if (m->backing != NULL ||
                   (m->backing = staging_host_alloc(m->size)) != NULL) {
            staging_copy(run, false, m->va, m->backing, m->size);
        } else {
            a->moving = false; /* no host copy: it stays */
        }
        bytes += m->size;
    }
    return bytes;
}

/* After a swap-out, what was copied lets its physical memory go; after a
 * swap-in, the host copies are retired. A failed copy in keeps the host
 * copies: nothing better is left. */
void vmm_app_swap_end(int gpu, bool to_device, bool copied)
{
    const struct hook_driver *drv = hook_driver();

    for (struct app_mapping *m = mappings; m; m = m->next) {
        const struct app_alloc *a = m->alloc;

        if (a->gpu != gpu || !a->moving || (to_device && !copied))
            continue;
        if (to_device || !copied)
            staging_host_retire(m->backing, m->size);
        else
            drv->mem_unmap(m->va, m->size);
    }
    for (struct app_alloc *a = allocs; a; a = a->next) {
        if (a->gpu != gpu || !a->moving || (to_device && !copied))
            continue;
        if (!to_device && copied) {
            if (a->app_refs > 0)
                HOOK_CALL_REAL(cuMemRelease, (a->physical));
            a->physical = 0;
            a->out = true;
        } else if (to_device && a->app_refs == 0) {
            /* Released by the application: only its mappings hold it. */
            HOOK_CALL_REAL(cuMemRelease, (a->physical));
        }
        a->moving = false;
    }
    pthread_mutex_unlock(&app_lock);
}

uint64_t vmm_app_out_bytes(int gpu)
{
    uint64_t bytes = 0;

    pthread_mutex_lock(&app_lock);
    for (const struct app_alloc *a = allocs; a; a = a->next)
        if (movable(a, gpu) && a->out)
            bytes += a->size;
    pthread_mutex_unlock(&app_lock);
    return bytes;
}

static void forget_in_child(void)
{
    pthread_mutex_init(&app_lock, NULL);
}

__attribute__((constructor)) static void register_app_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_in_child);
}
