/* proc_address.c - cuGetProcAddress and cuGetProcAddress_v2.
 *
 * The CUDA 12/13 runtime dlsym's cuGetProcAddress_v2, asks it for
 * "cuGetProcAddress" and resolves ~440 entry points through the pointer it
 * got back; the 11.3-11.8 runtimes do the same with the 4-argument form.
 * Each symbol is asked for at the version its ABI appeared, with flags 2 for
 * the per-thread-default-stream variants.
 *
 * Rather than re-implementing the driver's (name, version, flags) -> variant
 * rules, the wrappers call the real function with the arguments unchanged
 * and map the address it returned back to the exported symbol it is (table
 * built in driver.c); if that symbol is wrapped, its wrapper is returned.
 * That keeps every version/flags ABI exactly right, symbolStatus included,
 * and makes "cuGetProcAddress" itself answer with our wrapper of the same
 * arity, which is what keeps the other 440 lookups coming through here. */
#include <string.h>

#include "driver.h"
#include "stats.h"
#include "symbols.h"
#include "wrapper_table.h"
#include "log.h"

static CUresult substitute(const char *symbol, void **pfn, int version,
                           CUresult rc)
{
    int id, category;

    if (rc != CUDA_SUCCESS || pfn == NULL || *pfn == NULL || symbol == NULL)
        return rc;
    id = hook_symbol_by_real(*pfn);
    if (id < 0 && strcmp(symbol, "cuGetProcAddress") == 0)
        /* Whatever the driver hands out for itself, the runtime must keep
         * coming back here: the 5-argument form appeared in 12.0. */
        id = version >= 12000 ? NVSHARE_ID_cuGetProcAddress_v2
                              : NVSHARE_ID_cuGetProcAddress;
    if (id >= 0) {
        log_debug("cuGetProcAddress(%s, %d): %s", symbol, version,
                  hook_symbols[id].name);
        *pfn = hook_wrappers[id];
        hook_count(&hook_stat_events[HOOK_EV_PROC_SUBSTITUTED], 1);
    } else if ((category = hook_api_category(symbol)) >= 0) {
        /* The driver answered with a function it does not export under any
         * name we wrap (an old ABI: the CUDA 13 runtime asks for
         * cuIpcOpenMemHandle@4010 and cuDevicePrimaryCtxRelease@7000).
         * Work submitted through one would bypass the gate: say so loudly;
         * the others are counted and logged for debugging. */
        if (category == NVSHARE_CAT_SUBMIT || category == NVSHARE_CAT_KERNEL ||
            category == NVSHARE_CAT_GRAPH || category == NVSHARE_CAT_SUBMIT_SYNC)
            log_warn("cuGetProcAddress(%s, %d) returned an unexported variant: "
                     "not intercepted",
                     symbol, version);
        else
            log_debug("cuGetProcAddress(%s, %d) returned an unexported "
                      "variant: "
                      "not intercepted",
                      symbol, version);
        hook_count(&hook_stat_events[HOOK_EV_PROC_UNMAPPED], 1);
    }
    return rc;
}

HOOK_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
                                         int cudaVersion, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status)
{
    hook_count(&hook_stat_calls[NVSHARE_ID_cuGetProcAddress_v2], 1);
    return substitute(symbol, pfn, cudaVersion,
                      HOOK_CALL_REAL(cuGetProcAddress_v2,
                                     (symbol, pfn, cudaVersion, flags, status)));
}

HOOK_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn,
                                      int cudaVersion, cuuint64_t flags)
{
    hook_count(&hook_stat_calls[NVSHARE_ID_cuGetProcAddress], 1);
    return substitute(symbol, pfn, cudaVersion,
                      HOOK_CALL_REAL(cuGetProcAddress,
                                     (symbol, pfn, cudaVersion, flags)));
}
