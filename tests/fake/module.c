/* module.c - modules and kernels.
 *
 * Any image loads. A kernel's simulated duration is in its name:
 * cuModuleGetFunction(&f, mod, "sleep_1500us") returns a kernel that keeps
 * its stream busy for 1.5 ms; a name without a "_<N>us" suffix runs for 0.
 * A name with "ncclDevKernel_" in it (NCCL's, mangled or not) makes it a
 * collective (collective.c).
 * cuFuncGetName gives the name back, as libnvshare classifies kernels by
 * it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

struct fake_function {
    char name[64];
    uint64_t duration_ns;
    bool collective;
};

static char module_image;

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    (void)image;
    *module = (CUmodule)&module_image;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    (void)hmod;
    return CUDA_SUCCESS;
}

static uint64_t duration_in_name(const char *name)
{
    const char *suffix = strrchr(name, '_');
    unsigned long long us;
    char unit[3];

    if (suffix && sscanf(suffix, "_%llu%2s", &us, unit) == 2 &&
        strcmp(unit, "us") == 0)
        return us * 1000;
    return 0;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    struct fake_function *f = calloc(1, sizeof(*f));

    (void)hmod;
    if (f == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->duration_ns = duration_in_name(name);
    f->collective = strstr(name, "ncclDevKernel_") != NULL;
    *hfunc = (CUfunction)f;
    return CUDA_SUCCESS;
}

uint64_t fake_function_duration_ns(CUfunction f)
{
    return f ? ((struct fake_function *)f)->duration_ns : 0;
}

const char *fake_function_name(CUfunction f)
{
    return f ? ((struct fake_function *)f)->name : "null";
}

bool fake_function_is_collective(CUfunction f)
{
    return f && ((struct fake_function *)f)->collective;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    if (name == NULL || hfunc == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *name = ((struct fake_function *)hfunc)->name;
    return CUDA_SUCCESS;
}
