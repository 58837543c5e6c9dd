/* dlsym.c - dlsym() interposition.
 *
 * CUDA 11.3+ runtimes, PyTorch, Triton, JAX and CuPy never link libcuda:
 * they dlopen("libcuda.so.1") and resolve through dlsym(handle, ...), which
 * searches only that handle's tree, so exported wrappers alone catch nothing.
 * One unversioned dlsym here catches dlsym@GLIBC_2.2.5 and @GLIBC_2.34.
 *
 * For a name libnvshare wraps (a driver entry point of the table, or one of
 * NVML's memory queries), the real dlsym is asked and, if it finds the
 * name, the wrapper of that exact name is returned instead (a handle that
 * lacks the name still gets NULL).
 *
 * Every other lookup must behave exactly as if we were not here, and two
 * handles depend on who calls: RTLD_NEXT ("the next object after the
 * caller's") and RTLD_DEFAULT (the global scope, then the caller's local
 * scope). glibc identifies the caller by dlsym's return address, so the
 * pass-through is a tail call: the real dlsym runs with the application's
 * return address and answers for the real caller. CMakeLists.txt compiles
 * this file with sibling-call optimisation in every build type, and
 * tests/hook/rtld_test checks the answers against a run without us.
 *
 * Residual: dlsym(RTLD_NEXT, "cuX") for a wrapped cuX is resolved from
 * libnvshare's place in the search order (anything after it), not the
 * caller's; the answer is our wrapper either way when one exists. */
#include <dlfcn.h>

#include "driver.h"
#include "nvml_wrappers.h"
#include "stats.h"
#include "symbols.h"
#include "wrapper_table.h"
#include "log.h"

HOOK_EXPORT void *dlsym(void *handle, const char *name)
{
    int id = hook_symbol_by_name(name);
    void *wrapper = id >= 0 ? hook_wrappers[id] : NULL;
    void *sym;

    if (wrapper == NULL && name[0] == 'n' && name[1] == 'v')
        wrapper = hook_nvml_wrapper(name);
    if (wrapper == NULL) {
        void *(*real)(void *, const char *) = hook_real_dlsym_fn();

        return real ? real(handle, name) : NULL; /* tail call, see above */
    }
    sym = hook_real_dlsym(handle, name);
    if (sym == NULL)
        return NULL;
    log_debug("dlsym(%s): wrapped", name);
    hook_count(&hook_stat_events[HOOK_EV_DLSYM_SUBSTITUTED], 1);
    return wrapper;
}
