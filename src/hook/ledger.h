/* ledger.h - the allocation map: what each live allocation was charged, which
 * are evictable. */
#ifndef NVSHARE_HOOK_LEDGER_H
#define NVSHARE_HOOK_LEDGER_H

#include "hook.h"

/* What the output of an allocation names, so that a free of the same value
 * finds it: the same number can be a pointer and an array handle. */
enum mem_kind { MEM_NOTHING, MEM_DEVPTR, MEM_ARRAY, MEM_MIPMAP, MEM_VMM };

/* What swap.c keeps of an evictable allocation, in the allocation map. */
struct mem_swap_slot {
    bool converted; /* made by vmm.c for swapping: device memory to the
                       application, at addresses that outlive its pages */
    bool out;       /* its data is in backing, its physical memory released */
    CUmemGenericAllocationHandle physical; /* converted: behind it, or 0 */
    void *backing;       /* plain host copy (staging.c), kept until the free */
    bool blank_at_birth; /* made while this process could not submit
                            to its GPU (gate closed) */
    uint64_t grants_at_birth; /* nvshare_lock_grants() when it was made */
};

/* What the map knows of one live allocation. Managed ones (evictable) also
 * carry the context they were made in, where swap.c moves them. */
struct mem_record {
    int gpu;
    uint64_t bytes;
    bool managed;
    CUcontext ctx;
    struct mem_swap_slot swap;
};

/* Bytes outside the allocation map that count as evictable (add), or no
 * longer: an allocation vmm.c makes that waits for room (so that the
 * scheduler admits this process, as a waiter for memory, only where they
 * fit; pending: not on the GPU, which the scheduler must know, or it
 * would count them there) and stream-ordered frees parked for reuse
 * (vmm_async.c; on the GPU). */
void mem_evictable_extra(int gpu, uint64_t bytes, bool add, bool pending);
/* swap.c: slot (of a managed allocation of bytes on gpu) is out, or back;
 * with the map locked (in mem_for_each_managed's fn or done). */
void mem_slot_out(int gpu, uint64_t bytes, struct mem_swap_slot *slot, bool out);
/* swap.c: bytes of the application's own memory on gpu that a swap left
 * out (vmm_app_out_bytes). */
void mem_app_out(int gpu, uint64_t bytes);
/* Whether ptr is the start of an allocation vmm.c made. */
bool mem_is_converted(CUdeviceptr ptr);
/* The allocation (kind, key) counts as evictable, or no longer. */
void mem_set_evictable(enum mem_kind kind, uint64_t key, bool evictable);
/* Bytes of live managed allocations on gpu. */
uint64_t mem_managed_bytes(int gpu);
/* Calls fn(ptr, bytes, slot, arg) for each live managed allocation of gpu
 * made in ctx, then done(arg), all with the allocation map locked: a free
 * or an allocation on another thread waits until done returns, so nothing
 * fn was given is freed or replaced before then. fn and done must not
 * allocate or free through libnvshare. */
void mem_for_each_managed(int gpu, CUcontext ctx,
                          void (*fn)(CUdeviceptr ptr, uint64_t bytes,
                                     struct mem_swap_slot *slot, void *arg),
                          void (*done)(void *arg), void *arg);
/* Calls fn(ptr, bytes, ctx, slot, arg) for each live managed allocation of
 * gpu, whatever its context, with the map locked (same rules as above). */
void mem_for_each_managed_on_gpu(int gpu,
                                 void (*fn)(CUdeviceptr ptr, uint64_t bytes,
                                            CUcontext ctx,
                                            struct mem_swap_slot *slot, void *arg),
                                 void *arg);
/* If the live managed allocation at ptr is on gpu and has exactly bytes:
 * returns fn(ctx, slot, arg), called with the map locked. Else false. */
bool mem_with_managed(int gpu, CUdeviceptr ptr, uint64_t bytes,
                      bool (*fn)(CUcontext ctx, struct mem_swap_slot *slot,
                                 void *arg),
                      void *arg);
/* ledger.c: the map's entries. put returns false if there was no memory
 * to remember it; take, whether (kind, key) was there. */
bool mem_map_put(enum mem_kind kind, uint64_t key, const struct mem_record *rec);
bool mem_map_take(enum mem_kind kind, uint64_t key, struct mem_record *rec);

#endif
