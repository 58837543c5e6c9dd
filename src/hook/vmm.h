/* vmm.h - swappable device memory: ranges whose physical memory goes and
 * comes back. */
#ifndef NVSHARE_HOOK_VMM_H
#define NVSHARE_HOOK_VMM_H

#include "hook.h"

/* vmm.c: ranges whose physical memory can go and come back (all return
 * the driver's error; vmm_allocate waits for room the scheduler makes). */
uint64_t vmm_granularity(int gpu); /* 0: no virtual memory management */
/* Whether an allocation of bytes on gpu is made swappable now:
 * nvshare_oversub_for_allocation(), the driver has virtual memory
 * management, and bytes is at least its granularity. */
bool hook_oversub(int gpu, uint64_t bytes);
uint64_t vmm_rounded(int gpu, uint64_t bytes);
CUresult vmm_allocate(int gpu, uint64_t bytes, CUdeviceptr *va,
                      CUmemGenericAllocationHandle *physical);
CUresult vmm_back(int gpu, CUdeviceptr va, uint64_t bytes,
                  CUmemGenericAllocationHandle *physical);
CUresult vmm_create(int gpu, uint64_t bytes, const CUmemAllocationProp *prop,
                    CUmemGenericAllocationHandle *physical);
/* What vmm_create calls on a full GPU before it waits: frees memory this
 * process keeps, returns its bytes (vmm_async.c installs it). */
void vmm_on_full_release(uint64_t (*release)(int gpu));
/* Whether an allocation of this process waits for room: the process that
 * needs memory, not the one that will give it, so no host copies of its
 * are made ahead. */
bool vmm_room_awaited(void);
CUresult vmm_create_waiting(int gpu, uint64_t bytes,
                            const CUmemAllocationProp *prop,
                            CUmemGenericAllocationHandle *physical);
CUresult vmm_unback(CUdeviceptr va, uint64_t bytes,
                    CUmemGenericAllocationHandle *physical);
CUresult vmm_free(CUdeviceptr va, uint64_t bytes,
                  CUmemGenericAllocationHandle *physical);

#endif
