/* collectives.h - which kernels are collectives (NCCL's). */
#ifndef NVSHARE_HOOK_COLLECTIVES_H
#define NVSHARE_HOOK_COLLECTIVES_H

#include "hook.h"
#include "driver.h"

/* What is known of each launched function: a slot holds
 * (address << 1) | collective, 0 when free (user-space addresses leave the
 * top bit clear); open addressing from hook_kernel_slot(). */
#define HOOK_KERNEL_SLOTS 4096 /* a power of two; far more than NCCL has */
extern _Atomic uintptr_t hook_kernel_table[HOOK_KERNEL_SLOTS];

static inline size_t hook_kernel_slot(CUfunction f)
{
    return (size_t)(((uintptr_t)f >> 4) * 0x9e3779b97f4a7c15ull >> 52) &
           (HOOK_KERNEL_SLOTS - 1);
}

void hook_kernel_launched_slow(int gpu, CUfunction f);

/* After kernel f was launched on gpu, while the submission is in flight:
 * counts it if it is a collective (nvshare_collective_submitted). */
static inline void hook_kernel_launched(int gpu, CUfunction f)
{
    uintptr_t slot = atomic_load_explicit(&hook_kernel_table[hook_kernel_slot(f)],
                                          memory_order_relaxed);

    if (hook_unlikely(slot != (uintptr_t)f << 1))
        hook_kernel_launched_slow(gpu, f);
}

#endif
