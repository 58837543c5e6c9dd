/* memory_pools.h - pool and graph memory, charged by what they reserve. */
#ifndef NVSHARE_HOOK_MEMORY_POOLS_H
#define NVSHARE_HOOK_MEMORY_POOLS_H

#include "hook.h"
#include "allocations.h"
#include "driver.h"

/* memory_pools.c: pool and graph memory charged by what is reserved. */
extern _Atomic bool mem_pools_in_use;
void mem_pools_settle(int gpu);
void mem_pool_created(CUmemoryPool pool, int gpu);
struct mem_claim mem_pool_claim(CUmemoryPool pool, int gpu, size_t bytes,
                                CUstream stream, bool pt, CUdeviceptr *out);
void mem_pool_after_trim(const struct mem_free *f);
void mem_pool_after_destroy(const struct mem_free *f);
struct mem_claim mem_graph_claim(int gpu, uint64_t bytes);
void mem_graph_after_trim(const struct mem_free *f);

#endif
