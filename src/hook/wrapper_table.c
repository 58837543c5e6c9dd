/* wrapper_table.c - the address of every wrapper, by symbol id: what dlsym
 * and cuGetProcAddress hand out in place of the driver's functions. It
 * names every wrapper (wrappers.c, context.c, proc_address.c, vmm_app.c),
 * so it sits above them all; cuGetProcAddress reads it and is in it, the
 * one circle that is inherent (tests/shape). */
#include "symbols.h"
#include "wrapper_table.h"

void *const hook_wrappers[NVSHARE_SYMBOL_COUNT] = {
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    [NVSHARE_ID_##e] = (void *)&e,
#include "entry_points.def"
#undef NVSHARE_SYMBOL
};

/* Test introspection: the wrapper libnvshare substitutes for name. */
HOOK_EXPORT void *nvshare_hook_wrapper(const char *name)
{
    int id = hook_symbol_by_name(name);

    return id < 0 ? NULL : hook_wrappers[id];
}
