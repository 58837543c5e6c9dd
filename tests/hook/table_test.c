/* table_test.c - every wrapped entry point is reached by every route.
 *
 * Generated from entry_points.def. Run with libnvshare preloaded over the
 * fake driver; for each exported symbol of the table it checks that
 *   - direct linking (this program's reference to the symbol) resolves to
 *     libnvshare's wrapper, not to the driver's function;
 *   - dlsym(handle of libcuda.so.1, name) returns that wrapper;
 *   - cuGetProcAddress_v2 and cuGetProcAddress, at the version and flags the
 *     CUDA runtime asks for the symbol (flags 2 for per-thread variants),
 *     return it, whether called directly, through dlsym, or through the
 *     pointer returned for "cuGetProcAddress" (the runtime's own route);
 * and that a wrapper reached these ways runs (counted by NVSHARE_STATS). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "entry_points.h"

void *fake_cuda_address_of(const char *name);

typedef CUresult (*get_proc_v2_fn)(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);
typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t);

static const struct nvshare_symbol facts[NVSHARE_SYMBOL_COUNT] = {
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    NVSHARE_FACTS(e, api, since, pt, cat)
#include "entry_points.def"
#undef NVSHARE_SYMBOL
};

/* What this program links to, resolved by the dynamic linker. */
static void *const linked[NVSHARE_SYMBOL_COUNT] = {
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    [NVSHARE_ID_##e] = (void *)&e,
#include "entry_points.def"
#undef NVSHARE_SYMBOL
};


static void *via_v2(get_proc_v2_fn fn, const struct nvshare_symbol *s)
{
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *p = NULL;
    CUresult rc = fn(s->api, &p, s->since, (cuuint64_t)s->pt_flags, &status);

    return rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS ? p : NULL;
}

static void *via_v1(get_proc_fn fn, const struct nvshare_symbol *s)
{
    void *p = NULL;

    return fn(s->api, &p, s->since, (cuuint64_t)s->pt_flags) == CUDA_SUCCESS
               ? p
               : NULL;
}

int main(void)
{
    void *(*wrapper_of)(const char *) =
        (void *(*)(const char *))dlsym(RTLD_DEFAULT, "nvshare_hook_wrapper");
    uint64_t (*calls_of)(const char *) =
        (uint64_t(*)(const char *))dlsym(RTLD_DEFAULT, "nvshare_hook_calls");
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    get_proc_v2_fn runtime_route = NULL, dlsym_v2;
    get_proc_fn dlsym_v1;

    if (wrapper_of == NULL || calls_of == NULL || libcuda == NULL) {
        printf("FAIL: run with libnvshare preloaded over the fake libcuda\n");
        return 1;
    }
    dlsym_v2 = (get_proc_v2_fn)dlsym(libcuda, "cuGetProcAddress_v2");
    dlsym_v1 = (get_proc_fn)dlsym(libcuda, "cuGetProcAddress");
    /* The runtime's bootstrap: dlsym v2, then ask it for itself at 12000. */
    dlsym_v2("cuGetProcAddress", (void **)&runtime_route, 12000, 0, NULL);
    EXPECT(runtime_route == (get_proc_v2_fn)wrapper_of("cuGetProcAddress_v2"),
           "cuGetProcAddress(\"cuGetProcAddress\", 12000) is not the wrapper");

    for (int i = 0; i < NVSHARE_SYMBOL_COUNT; i++) {
        const struct nvshare_symbol *s = &facts[i];
        void *wrapper = wrapper_of(s->name);

        EXPECT(wrapper != NULL && wrapper != fake_cuda_address_of(s->name),
               "%s: no wrapper", s->name);
        EXPECT(linked[i] == wrapper, "%s: direct link bypasses", s->name);
        EXPECT(dlsym(libcuda, s->name) == wrapper, "%s: dlsym bypasses", s->name);
        EXPECT(via_v2(cuGetProcAddress_v2, s) == wrapper,
               "%s: cuGetProcAddress_v2(%s, %d, %d) bypasses", s->name, s->api,
               s->since, s->pt_flags);
        EXPECT(via_v2(dlsym_v2, s) == wrapper,
               "%s: dlsym'd cuGetProcAddress_v2 bypasses", s->name);
        EXPECT(via_v2(runtime_route, s) == wrapper,
               "%s: runtime route bypasses", s->name);
        EXPECT(via_v1(dlsym_v1, s) == wrapper,
               "%s: 4-argument cuGetProcAddress bypasses", s->name);
    }

    /* The reference's example, spelled out. */
    void *p = NULL;
    cuGetProcAddress_v2("cuLaunchKernel", &p, 7000, 2, NULL);
    EXPECT(p == wrapper_of("cuLaunchKernel_ptsz") && p != NULL,
           "(cuLaunchKernel, 7000, flags 2) is not the _ptsz wrapper");

    /* Reached means run: one call through each route is counted. */
    CUresult (*sync_fn)(void) = NULL;
    uint64_t before = calls_of("cuCtxSynchronize");
    cuCtxSynchronize();
    ((CUresult(*)(void))dlsym(libcuda, "cuCtxSynchronize"))();
    runtime_route("cuCtxSynchronize", (void **)&sync_fn, 2000, 0, NULL);
    sync_fn();
    EXPECT(calls_of("cuCtxSynchronize") == before + 3,
           "cuCtxSynchronize calls not counted (run with NVSHARE_STATS=1)");

    /* Names libnvshare does not wrap pass through untouched. */
    EXPECT(dlsym(libcuda, "cuInit") == fake_cuda_address_of("cuInit"),
           "dlsym(cuInit) was altered");
    EXPECT(dlsym(libcuda, "cuNoSuchFunction") == NULL,
           "dlsym of a missing name found something");

    printf("%s: %d symbols, %d failures\n", failures ? "FAIL" : "PASS",
           NVSHARE_SYMBOL_COUNT, failures);
    return failures ? 1 : 0;
}
