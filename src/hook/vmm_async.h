/* vmm_async.h - stream-ordered allocations made swappable, their frees parked. */
#ifndef NVSHARE_HOOK_VMM_ASYNC_H
#define NVSHARE_HOOK_VMM_ASYNC_H

#include "hook.h"

/* vmm_async.c: stream-ordered allocations made by vmm.c, their frees
 * parked for reuse. */
bool vmm_async_wanted(int gpu, uint64_t bytes, CUstream stream, bool pt);
/* Takes a parked block of about bytes usable on stream now. */
bool vmm_async_reuse(int gpu, uint64_t bytes, CUstream stream, bool pt,
                     CUdeviceptr *va, uint64_t *block_bytes,
                     CUmemGenericAllocationHandle *physical);
/* Parks a block freed on stream (false: it could not be, free it now). */
bool vmm_async_park(int gpu, CUdeviceptr va, uint64_t bytes,
                    CUmemGenericAllocationHandle physical, CUstream stream,
                    bool pt);
uint64_t vmm_async_parked(int gpu);
/* Frees gpu's parked blocks and gives their charge back; their bytes. */
uint64_t vmm_async_drain(int gpu);
/* cuMemPoolTrimTo(pool): a default pool's trim frees its parked blocks. */
void vmm_async_pool_trimmed(CUmemoryPool pool);

#endif
