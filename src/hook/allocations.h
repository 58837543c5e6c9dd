/* allocations.h - the memory quota around allocations and frees: claims. */
#ifndef NVSHARE_HOOK_ALLOCATIONS_H
#define NVSHARE_HOOK_ALLOCATIONS_H

#include "hook.h"
#include "ledger.h"

struct mem_claim;

/* How one allocation path differs from the plain pattern (charge the
 * requested bytes, remember them by the output). Every hook is optional. */
struct mem_path {
    /* Bytes the allocation really took, read after it succeeded. */
    uint64_t (*measure)(const struct mem_claim *claim);
    /* Frees what the driver allocated, when the measured bytes do not fit. */
    void (*undo)(const struct mem_claim *claim);
    /* Takes the charged bytes instead of the allocation map. */
    void (*commit)(const struct mem_claim *claim, uint64_t bytes);
    /* Runs last, on every outcome. */
    void (*finish)(const struct mem_claim *claim);
    /* Makes the allocation instead of the entry point's own driver
     * function (swappable memory: vmm.c instead). */
    CUresult (*allocate)(struct mem_claim *claim);
    /* The claim settled pools itself (and holds their lock). */
    bool settles_pools;
};

/* One allocation in flight: made before the driver call from its
 * arguments, settled after it. */
struct mem_claim {
    int gpu;                     /* -1: not device memory, not charged */
    uint64_t bytes;              /* charged before the call */
    enum mem_kind kind;          /* of the output, for the map */
    const void *out;             /* where the driver writes the output */
    const struct mem_path *path; /* NULL: the plain pattern */
    bool managed;                /* evictable (swap.c): managed memory, */
    bool converted;              /* ... or made by vmm.c */
    bool precharged; /* bytes already charged (a parked block reused) */
    CUmemGenericAllocationHandle physical; /* converted: behind it */
    union {
        struct {
            const size_t *pitch;
            size_t width, height;
            unsigned element;
        } pitch;
        struct {
            CUmemoryPool pool;
            CUstream stream;
            bool pt;
        } pool;
        struct {
            CUstream stream;
            bool pt;
            CUdeviceptr reused; /* a parked block's, or 0 */
        } async;
        CUdevice dev;
        const CUmemAllocationProp *prop; /* cuMemCreate's */
    } u;
};

/* A free in flight: the map entry is taken out before the driver call (so
 * that an address the driver reuses at once is never confused with it) and
 * put back if the free fails. after() runs on success for pools. */
struct mem_free {
    enum mem_kind kind;
    uint64_t key;
    bool found;
    struct mem_record rec; /* what was found */
    void (*after)(const struct mem_free *f);
    CUmemoryPool pool;
    CUdevice dev;
    bool stream_ordered; /* cuMemFreeAsync: queued work may still use it */
    CUstream stream;     /* ... on this stream */
    bool pt;             /* ... of the per-thread default stream family */
    bool parked;         /* kept for reuse (vmm_async.c), still charged */
};

int hook_alloc_gpu(void);
/* Whether a free is libnvshare's to make (what vmm.c made, a token of
 * vmm_app.c), and makes it in place of the entry point's driver function. */
bool mem_free_is_ours(const struct mem_free *f);
CUresult mem_free_ours(struct mem_free *f);

bool mem_claim_reserve(struct mem_claim *claim);
CUresult mem_claim_refused(struct mem_claim *claim);
CUresult mem_claim_settle(struct mem_claim *claim, CUresult rc);
void mem_free_take(struct mem_free *f);
void mem_free_settle(struct mem_free *f, CUresult rc);

#endif
