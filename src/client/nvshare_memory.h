/* nvshare_memory.h - the pod's GPU memory quota, as seen from inside an
 * application. Part of the client runtime; no CUDA types.
 *
 * The interposer calls nvshare_mem_reserve() before every device-memory
 * allocation and nvshare_mem_release() after every free (and after an
 * allocation that the driver then refused), with exact byte counts. The
 * ledger answers from local credit when it can (no syscall, one mutex),
 * otherwise asks the scheduler, which is the only one that hands out a
 * pod's bytes: all processes of a pod share one quota, and two of them
 * allocating at once can never together exceed it.
 *
 * Without a reachable scheduler each process enforces the static limit
 * (NVSHARE_GPU_MEMORY_LIMIT) alone. Without any limit every call succeeds
 * and only counts. */
#ifndef NVSHARE_MEMORY_H
#define NVSHARE_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

/* Accounts bytes about to be allocated on gpu. Returns 0 if the quota
 * allows it, or -1 if it does not; then it has logged one line naming the
 * pod, the limit, the usage and the request (once per distinct refusal
 * burst, not per call), and the caller must fail the allocation with
 * CUDA_ERROR_OUT_OF_MEMORY. Safe from any thread; may block for one round
 * trip to the scheduler. */
int nvshare_mem_reserve(int gpu, uint64_t bytes);

/* Gives back bytes accounted by nvshare_mem_reserve() (a free, or an
 * allocation the driver refused). Never blocks on the scheduler. */
void nvshare_mem_release(int gpu, uint64_t bytes);

/* What the application should see as gpu's memory: returns true and sets
 * *quota and *used (the whole pod's usage) if gpu has a quota; false if it
 * has none (report the physical memory unchanged). */
bool nvshare_mem_view(int gpu, uint64_t *quota, uint64_t *used);

/* Of this process's accounted bytes on gpu, those a swap-out really moves
 * off the GPU (managed memory; pools, VMM, arrays and device memory made
 * before oversubscription was on stay resident), and of those, pending:
 * the bytes of allocations that wait for room, told ahead so that the
 * scheduler admits this process only where they fit, but not on the GPU
 * yet. The scheduler is told them with the allocated bytes and counts the
 * rest as resident while the process is swapped out, and the evictable
 * bytes but the pending ones as on the GPU whether the process has run
 * or not. The interposer sets them whenever its managed allocations
 * change. Never blocks. */
void nvshare_mem_set_evictable(int gpu, uint64_t bytes, uint64_t pending);

/* This process's accounted bytes on gpu (for tests and statistics). */
uint64_t nvshare_mem_allocated(int gpu);

#endif
