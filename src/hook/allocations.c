/* allocations.c - the memory quota around every device-memory allocation.
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
 * Above the ledger (the map) and the swappable kinds (vmm*.c), which make
 * or take back what a claim or a free says. */
#include <stdlib.h>
#include <string.h>

#include "allocations.h"
#include "client_start.h"
#include "context.h"
#include "driver.h"
#include "ledger.h"
#include "memory_pools.h"
#include "staging.h"
#include "vmm.h"
#include "vmm_app.h"
#include "vmm_async.h"
#include "nvshare_client.h"
#include "log.h"
#include "nvshare_memory.h"

/* Whether anything can have written a converted allocation is known from
 * its birth: made while this process could not submit to its GPU (gate
 * closed), and not granted the GPU since, it is blank (swap.c): every
 * copy, memset and kernel that could reach it is gated, and the
 * application never touches converted memory on the host. */
static void note_birth(struct mem_swap_slot *slot, int gpu)
{
    slot->blank_at_birth =
        !atomic_load_explicit(&nvshare_gate_open[gpu], memory_order_acquire);
    slot->grants_at_birth = nvshare_lock_grants(gpu);
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
            note_birth(&rec.swap, claim->gpu);
        }
        memcpy(&key, claim->out, sizeof(key));
        if (!mem_map_put(claim->kind, key, &rec))
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
        f->found = mem_map_take(f->kind, f->key, &f->rec);
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

void mem_free_settle(struct mem_free *f, CUresult rc)
{
    if (rc == CUDA_SUCCESS && f->after) {
        f->after(f);
    } else if (f->found && rc == CUDA_SUCCESS) {
        staging_host_free(f->rec.swap.backing, f->rec.bytes);
        if (!f->parked)
            nvshare_mem_release(f->rec.gpu, f->rec.bytes);
    } else if (f->found && !mem_map_put(f->kind, f->key, &f->rec)) {
        /* Cannot follow it further; its host copy may hold its data. */
        nvshare_mem_release(f->rec.gpu, f->rec.bytes);
    }
}
