/* collectives.c - which kernels are collectives, counted for gang drains.
 *
 * An NCCL collective kernel, once queued on one rank's GPU, runs until
 * every other rank of the job has launched its own. When a gang is
 * preempted its ranks agree to stop after the same collective
 * (docs/protocol.md, Gang drains), for which each counts the collectives it
 * launched. NCCL is linked into the application (statically, in PyTorch),
 * so its calls cannot be interposed; its kernels can, and NCCL names them:
 * ncclDevKernel_* (2.19 on), ncclKernel_* before, ncclSym* for the
 * symmetric-memory kernels of 2.27 on (mangled). Collectives of other
 * libraries (custom all-reduce kernels over IPC memory) are not known:
 * their gangs' drains may wait for the drain timeout.
 *
 * A launch asks a table whether its function is a collective: the first
 * launch of a function asks the driver for its name (cuFuncGetName, or
 * cuKernelGetName for a CUkernel launched as a function), later ones find
 * the answer with one hash and an atomic load, no lock (collectives.h: a
 * kernel that is no collective, in its home slot, costs a handful of
 * instructions). Functions are never forgotten: a function handle that the
 * driver reuses after its module was unloaded keeps its first answer, which
 * can only misplace one gang drain point (and revocation bounds a drain
 * that goes wrong). */
#include <stdint.h>
#include <string.h>

#include "collectives.h"
#include "driver.h"
#include "nvshare_client.h"
#include "log.h"

#define MAX_PROBES 32

_Atomic uintptr_t hook_kernel_table[HOOK_KERNEL_SLOTS];

/* NCCL's kernels are C++ functions: the driver gives their mangled names,
 * "_Z<length>ncclDevKernel_AllReduce_Sum_bf16_RING_LL<arguments>". */
static bool named_collective(const char *name)
{
    const char *plain = name;

    if (strncmp(plain, "_Z", 2) == 0)
        for (plain += 2; *plain >= '0' && *plain <= '9'; plain++)
            ;
    bool collective = strncmp(plain, "ncclDevKernel", 13) == 0 ||
                      strncmp(plain, "ncclKernel", 10) == 0 ||
                      strncmp(plain, "ncclSym", 7) == 0;

    if (collective)
        log_debug("%s is a collective", name);
    return collective;
}

static bool is_collective(CUfunction f)
{
    const struct hook_driver *drv = hook_driver();
    const char *name = NULL;

    if (drv == NULL)
        return false;
    if (drv->func_get_name && drv->func_get_name(&name, f) == CUDA_SUCCESS && name)
        return named_collective(name);
    if (drv->kernel_get_name &&
        drv->kernel_get_name(&name, (void *)f) == CUDA_SUCCESS && name)
        return named_collective(name);
    return false;
}

void hook_kernel_launched_slow(int gpu, CUfunction f)
{
    uintptr_t address = (uintptr_t)f;
    size_t i = hook_kernel_slot(f);

    if (address == 0)
        return;
    for (int probe = 0; probe < MAX_PROBES;
         probe++, i = (i + 1) & (HOOK_KERNEL_SLOTS - 1)) {
        uintptr_t slot =
            atomic_load_explicit(&hook_kernel_table[i], memory_order_acquire);
        if (slot == 0) {
            uintptr_t entry = address << 1 | (is_collective(f) ? 1 : 0);
            /* Another thread may have taken the slot meanwhile, for f or
             * for another function: then look at what it holds. */
            if (!atomic_compare_exchange_strong(&hook_kernel_table[i], &slot,
                                                entry)) {
                if (slot >> 1 != address)
                    continue;
            } else {
                slot = entry;
            }
        }
        if (slot >> 1 == address) {
            if (slot & 1)
                nvshare_collective_submitted(gpu);
            return;
        }
    }
    /* A crowded neighbourhood: ask every time (never seen in practice). */
    if (is_collective(f))
        nvshare_collective_submitted(gpu);
}
