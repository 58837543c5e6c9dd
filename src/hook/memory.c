/* memory.c - the memory quota around every device-memory allocation.
 *
 * An allocation is a claim: made from the call's arguments before the
 * driver runs (mem_claim_<entry point>() in memory_paths.c), charged with
 * nvshare_mem_reserve() - if the quota refuses, the driver is never called
 * and the application gets CUDA_ERROR_OUT_OF_MEMORY - and settled after it:
 * a failed call gives the bytes back; a successful one is remembered by its
 * output (pointer or handle) in the allocation map, so that the matching
 * free gives back exactly what was charged. Paths whose real size is known
 * only afterwards (pitch, IPC, arrays, pools) measure it then and charge or
 * give back the difference; if the rest does not fit, the allocation is
 * undone and refused like the others.
 *
 * Frees of pointers the map does not know (allocated before libnvshare saw
 * the process, or by paths charged as a whole, like pools) pass through.
 *
 * The map also knows which allocations are evictable (the application's
 * cuMemAllocManaged, and device allocations made by vmm.c while memory is
 * swappable, hook_oversub(): "converted") and in which context they were
 * made, so that swap.c can move them off the GPU and back. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hook.h"
#include "log.h"
#include "nvshare_memory.h"

/* ---- the allocation map: (kind, pointer or handle) -> (gpu, bytes) ---- */

#define MAP_BUCKETS 4096 /* chains stay short up to ~10^5 live allocations */

struct mem_entry {
    uint64_t key;
    enum mem_kind kind;
    struct mem_record rec;
    struct mem_entry *next;
};

static struct mem_entry *buckets[MAP_BUCKETS];
static uint64_t managed_bytes[NVSHARE_MAX_GPUS]; /* under map_lock */
/* Evictable bytes outside the map (mem_evictable_extra). */
static uint64_t extra_bytes[NVSHARE_MAX_GPUS]; /* under map_lock */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

static struct mem_entry **bucket_of(enum mem_kind kind, uint64_t key)
{
    uint64_t h = (key ^ ((uint64_t)kind << 56)) * 0x9e3779b97f4a7c15ull;

    return &buckets[h >> 52]; /* top 12 bits: MAP_BUCKETS = 4096 */
}
_Static_assert(MAP_BUCKETS == 1 << 12, "bucket_of takes 12 bits");

static bool counts_managed(const struct mem_record *rec)
{
    return rec->managed && rec->gpu >= 0 && rec->gpu < NVSHARE_MAX_GPUS;
}

/* The scheduler counts what is not managed as resident while this process
 * is swapped out: tell the ledger in the same order as the map changes.
 * Map lock held. */
static void managed_changed(int gpu)
{
    nvshare_mem_set_evictable(gpu, managed_bytes[gpu] + extra_bytes[gpu]);
}

void mem_evictable_extra(int gpu, uint64_t bytes, bool add)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&map_lock);
    if (add)
        extra_bytes[gpu] += bytes;
    else
        extra_bytes[gpu] -= bytes;
    managed_changed(gpu);
    pthread_mutex_unlock(&map_lock);
}

/* Returns false if there was no memory to remember it. */
static bool map_put(enum mem_kind kind, uint64_t key, const struct mem_record *rec)
{
    struct mem_entry *e = malloc(sizeof(*e)), **head;

    if (e == NULL)
        return false;
    pthread_mutex_lock(&map_lock);
    head = bucket_of(kind, key);
    *e = (struct mem_entry){key, kind, *rec, *head};
    *head = e;
    if (counts_managed(rec)) {
        managed_bytes[rec->gpu] += rec->bytes;
        managed_changed(rec->gpu);
    }
    pthread_mutex_unlock(&map_lock);
    return true;
}

static bool map_take(enum mem_kind kind, uint64_t key, struct mem_record *rec)
{
    struct mem_entry **link, *found = NULL;

    pthread_mutex_lock(&map_lock);
    for (link = bucket_of(kind, key); *link; link = &(*link)->next)
        if ((*link)->key == key && (*link)->kind == kind) {
            found = *link;
            *link = found->next;
            if (counts_managed(&found->rec)) {
                managed_bytes[found->rec.gpu] -= found->rec.bytes;
                managed_changed(found->rec.gpu);
            }
            break;
        }
    pthread_mutex_unlock(&map_lock);
    if (found == NULL)
        return false;
    *rec = found->rec;
    free(found);
    return true;
}

uint64_t mem_managed_bytes(int gpu)
{
    uint64_t bytes;

    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return 0;
    pthread_mutex_lock(&map_lock);
    bytes = managed_bytes[gpu];
    pthread_mutex_unlock(&map_lock);
    return bytes;
}

void mem_for_each_managed(int gpu, CUcontext ctx,
                          void (*fn)(CUdeviceptr ptr, uint64_t bytes,
                                     struct mem_swap_slot *slot, void *arg),
                          void (*done)(void *arg), void *arg)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&map_lock);
    for (int b = 0; b < MAP_BUCKETS && managed_bytes[gpu] > 0; b++)
        for (struct mem_entry *e = buckets[b]; e; e = e->next)
            if (e->kind == MEM_DEVPTR && e->rec.managed && e->rec.gpu == gpu &&
                e->rec.ctx == ctx)
                fn((CUdeviceptr)e->key, e->rec.bytes, &e->rec.swap, arg);
    done(arg);
    pthread_mutex_unlock(&map_lock);
}

void mem_for_each_managed_on_gpu(int gpu,
                                 void (*fn)(CUdeviceptr ptr, uint64_t bytes,
                                            CUcontext ctx,
                                            struct mem_swap_slot *slot, void *arg),
                                 void *arg)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&map_lock);
    for (int b = 0; b < MAP_BUCKETS && managed_bytes[gpu] > 0; b++)
        for (struct mem_entry *e = buckets[b]; e; e = e->next)
            if (e->kind == MEM_DEVPTR && e->rec.managed && e->rec.gpu == gpu)
                fn((CUdeviceptr)e->key, e->rec.bytes, e->rec.ctx, &e->rec.swap,
                   arg);
    pthread_mutex_unlock(&map_lock);
}

bool mem_with_managed(int gpu, CUdeviceptr ptr, uint64_t bytes,
                      bool (*fn)(CUcontext ctx, struct mem_swap_slot *slot,
                                 void *arg),
                      void *arg)
{
    bool result = false;

    pthread_mutex_lock(&map_lock);
    for (struct mem_entry *e = *bucket_of(MEM_DEVPTR, ptr); e; e = e->next)
        if (e->key == ptr && e->kind == MEM_DEVPTR) {
            if (e->rec.managed && e->rec.gpu == gpu && e->rec.bytes == bytes)
                result = fn(e->rec.ctx, &e->rec.swap, arg);
            break;
        }
    pthread_mutex_unlock(&map_lock);
    return result;
}

/* A forked child does not own its parent's allocations: forget them
 * without giving anything back (the parent still holds them). The nodes
 * are leaked on purpose: the lock may have been held mid-update. */
static void forget_allocations_in_child(void)
{
    pthread_mutex_init(&map_lock, NULL);
    memset(buckets, 0, sizeof(buckets));
    memset(managed_bytes, 0, sizeof(managed_bytes));
    memset(extra_bytes, 0, sizeof(extra_bytes));
}

__attribute__((constructor)) static void register_memory_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_allocations_in_child);
}

/* ---- claims ------------------------------------------------------------- */

int hook_alloc_gpu(void)
{
    const struct hook_driver *drv;
    CUdevice dev;

    if (hook_gating_start() == HOOK_GATING_ON)
        return hook_current_gpu;
    /* Not gating: the current GPU is not tracked, ask the driver. */
    drv = hook_driver();
    if (drv && drv->ctx_get_device && drv->ctx_get_device(&dev) == CUDA_SUCCESS &&
        dev >= 0 && dev < NVSHARE_MAX_GPUS)
        return (int)dev;
    return 0;
}

bool hook_oversub(int gpu, uint64_t bytes)
{
    uint64_t granularity;

    return gpu >= 0 && gpu < NVSHARE_MAX_GPUS &&
           (granularity = vmm_granularity(gpu)) != 0 && bytes >= granularity &&
           nvshare_oversub_for_allocation();
}

static void finish(struct mem_claim *claim)
{
    if (claim->path && claim->path->finish)
        claim->path->finish(claim);
}

bool mem_claim_reserve(struct mem_claim *claim)
{
    if (claim->gpu < 0 || claim->precharged)
        return true;
    /* Pools may have given memory back since they were last read. */
    if (atomic_load_explicit(&mem_pools_in_use, memory_order_relaxed) &&
        !(claim->path && claim->path->settles_pools))
        mem_pools_settle(claim->gpu);
    if (nvshare_mem_reserve(claim->gpu, claim->bytes) == 0)
        return true;
    /* Freed stream-ordered memory kept for reuse makes room first. */
    return vmm_async_parked(claim->gpu) != 0 &&
           vmm_async_drain(claim->gpu) != 0 &&
           nvshare_mem_reserve(claim->gpu, claim->bytes) == 0;
}

CUresult mem_claim_refused(struct mem_claim *claim)
{
    finish(claim);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult mem_claim_settle(struct mem_claim *claim, CUresult rc)
{
    const struct mem_path *path = claim->path;
    uint64_t actual = claim->bytes, key = 0;

    if (claim->gpu < 0) {
        finish(claim);
        return rc;
    }
    if (rc != CUDA_SUCCESS) {
        nvshare_mem_release(claim->gpu, claim->bytes);
        finish(claim);
        return rc;
    }
    if (path && path->measure)
        actual = path->measure(claim);
    if (actual > claim->bytes &&
        nvshare_mem_reserve(claim->gpu, actual - claim->bytes) != 0) {
        path->undo(claim);
        nvshare_mem_release(claim->gpu, claim->bytes);
        finish(claim);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (actual < claim->bytes)
        nvshare_mem_release(claim->gpu, claim->bytes - actual);
    if (path && path->commit) {
        path->commit(claim, actual);
    } else {
        /* Every output (CUdeviceptr, CUarray, CUmipmappedArray,
         * CUmemGenericAllocationHandle) is 8 bytes. */
        struct mem_record rec = {claim->gpu,
                                 actual,
                                 claim->managed,
                                 NULL,
                                 {.converted = claim->converted}};
        const struct hook_driver *drv;

        if (claim->managed && (drv = hook_driver()) && drv->ctx_get_current)
            drv->ctx_get_current(&rec.ctx);
        if (claim->converted) {
            rec.swap.physical = claim->physical;
            swap_note_birth(&rec.swap, claim->gpu);
        }
        memcpy(&key, claim->out, sizeof(key));
        if (!map_put(claim->kind, key, &rec))
            log_warn("out of host memory: %llu bytes on gpu %d stay charged "
                     "after they are freed",
                     (unsigned long long)actual, claim->gpu);
    }
    finish(claim);
    return CUDA_SUCCESS;
}

/* ---- frees -------------------------------------------------------------- */

void mem_free_take(struct mem_free *f)
{
    if (f->kind == MEM_VMM && vmm_app_is_token(f->key) &&
        !vmm_app_last_ref(f->key))
        return;
    if (f->after == NULL && f->kind != MEM_NOTHING)
        f->found = map_take(f->kind, f->key, &f->rec);
}

bool mem_is_converted(CUdeviceptr ptr)
{
    bool converted = false;

    pthread_mutex_lock(&map_lock);
    for (struct mem_entry *e = *bucket_of(MEM_DEVPTR, ptr); e; e = e->next)
        if (e->key == ptr && e->kind == MEM_DEVPTR) {
            converted = e->rec.swap.converted;
            break;
        }
    pthread_mutex_unlock(&map_lock);
    return converted;
}

bool mem_free_is_ours(const struct mem_free *f)
{
    return (f->found && f->rec.swap.converted) ||
           (f->kind == MEM_VMM && vmm_app_is_token(f->key));
}

CUresult mem_free_ours(struct mem_free *f)
{
    CUresult rc;

    if (f->kind == MEM_VMM)
        return vmm_app_release(f->key);
    /* A stream-ordered free of resident memory is parked: reused on its
     * stream at once, released once the stream's work before it is done.
     * Where an event cannot be had, the whole context's queued work, a
     * superset of the stream's, ends first. */
    if (f->stream_ordered && f->rec.swap.physical != 0 &&
        vmm_async_park(f->rec.gpu, (CUdeviceptr)f->key, f->rec.bytes,
                       f->rec.swap.physical, f->stream, f->pt)) {
        f->parked = true;
        return CUDA_SUCCESS;
    }
    if (f->stream_ordered &&
        (rc = HOOK_CALL_REAL(cuCtxSynchronize, ())) != CUDA_SUCCESS)
        return rc;
    return vmm_free((CUdeviceptr)f->key, f->rec.bytes, &f->rec.swap.physical);
}

void mem_set_evictable(enum mem_kind kind, uint64_t key, bool evictable)
{
    pthread_mutex_lock(&map_lock);
    for (struct mem_entry *e = *bucket_of(kind, key); e; e = e->next)
        if (e->key == key && e->kind == kind) {
            if (e->rec.managed != evictable && e->rec.gpu >= 0 &&
                e->rec.gpu < NVSHARE_MAX_GPUS) {
                if (evictable)
                    managed_bytes[e->rec.gpu] += e->rec.bytes;
                else
                    managed_bytes[e->rec.gpu] -= e->rec.bytes;
                e->rec.managed = evictable;
                managed_changed(e->rec.gpu);
            }
            break;
        }
    pthread_mutex_unlock(&map_lock);
}

void mem_free_settle(struct mem_free *f, CUresult rc)
{
    if (rc == CUDA_SUCCESS && f->after) {
        f->after(f);
    } else if (f->found && rc == CUDA_SUCCESS) {
        swap_forget(&f->rec.swap, f->rec.bytes);
        if (!f->parked)
            nvshare_mem_release(f->rec.gpu, f->rec.bytes);
    } else if (f->found && !map_put(f->kind, f->key, &f->rec)) {
        /* Cannot follow it further; its host copy may hold its data. */
        nvshare_mem_release(f->rec.gpu, f->rec.bytes);
    }
}
