/* proc_address.c - cuGetProcAddress as the driver answers it.
 *
 * A lookup (api, version, flags) returns the address of one of the fake's
 * own exported variants: among those of that api whose ABI is not newer than
 * `version` (and that are per-thread variants only if flags has
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), the newest, a per-thread
 * one before a legacy one of the same version. Unknown names succeed with
 * NULL, like the real driver. The variants are the rows of libnvshare's
 * entry_points.def plus the fake's own functions below; addresses are taken
 * directly, never with dlsym. */
#include <string.h>

#include "fake.h"

struct variant {
    const char *api;
    int since;
    int pt_flags;
    const char *name;
    void *address;
};

#define OWN(api, since, pt, fn)                                                \
    {                                                                          \
        api, since, pt, #fn, (void *)&fn                                       \
    }

static const struct variant variants[] = {
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    OWN(api, since, pt, e),
#include "entry_points.def"
#undef NVSHARE_SYMBOL
    OWN("cuInit", 2000, 0, cuInit),
    OWN("cuDriverGetVersion", 2020, 0, cuDriverGetVersion),
    OWN("cuDeviceGet", 2000, 0, cuDeviceGet),
    OWN("cuDeviceGetCount", 2000, 0, cuDeviceGetCount),
    OWN("cuDeviceGetName", 2000, 0, cuDeviceGetName),
    OWN("cuDeviceGetUuid", 11040, 0, cuDeviceGetUuid_v2),
    OWN("cuDeviceGetAttribute", 2000, 0, cuDeviceGetAttribute),
    OWN("cuCtxGetCurrent", 4000, 0, cuCtxGetCurrent),
    OWN("cuCtxGetDevice", 2000, 0, cuCtxGetDevice),
    OWN("cuModuleLoadData", 2000, 0, cuModuleLoadData),
    OWN("cuModuleUnload", 2000, 0, cuModuleUnload),
    OWN("cuModuleGetFunction", 2000, 0, cuModuleGetFunction),
    OWN("cuFuncGetName", 12030, 0, cuFuncGetName),
    OWN("cuStreamCreate", 2000, 0, cuStreamCreate),
    OWN("cuStreamDestroy", 4000, 0, cuStreamDestroy_v2),
    OWN("cuStreamQuery", 2000, 0, cuStreamQuery),
    OWN("cuStreamQuery", 7000, 2, cuStreamQuery_ptsz),
    OWN("cuStreamIsCapturing", 10000, 0, cuStreamIsCapturing),
    OWN("cuStreamIsCapturing", 10000, 2, cuStreamIsCapturing_ptsz),
    OWN("cuThreadExchangeStreamCaptureMode", 10010, 0,
        cuThreadExchangeStreamCaptureMode),
    OWN("cuEventCreate", 2000, 0, cuEventCreate),
    OWN("cuEventDestroy", 4000, 0, cuEventDestroy_v2),
    OWN("cuEventRecord", 2000, 0, cuEventRecord),
    OWN("cuEventRecord", 7000, 2, cuEventRecord_ptsz),
    OWN("cuEventQuery", 2000, 0, cuEventQuery),
    OWN("cuEventSynchronize", 2000, 0, cuEventSynchronize),
    OWN("cuEventElapsedTime", 12080, 0, cuEventElapsedTime_v2),
    OWN("cuGetErrorString", 6000, 0, cuGetErrorString),
    OWN("cuGetErrorName", 6000, 0, cuGetErrorName),
    OWN("cuGetExportTable", 3000, 0, cuGetExportTable),
    OWN("cuMemAddressReserve", 10020, 0, cuMemAddressReserve),
    OWN("cuMemAddressFree", 10020, 0, cuMemAddressFree),
    OWN("cuMemMap", 10020, 0, cuMemMap),
    OWN("cuMemUnmap", 10020, 0, cuMemUnmap),
    OWN("cuMemSetAccess", 10020, 0, cuMemSetAccess),
    OWN("cuMemGetAllocationGranularity", 10020, 0, cuMemGetAllocationGranularity),
    OWN("cuMemGetAllocationPropertiesFromHandle", 10020, 0,
        cuMemGetAllocationPropertiesFromHandle),
    OWN("cuMemRetainAllocationHandle", 11000, 0, cuMemRetainAllocationHandle),
    OWN("cuMemGetAddressRange", 3020, 0, cuMemGetAddressRange_v2),
    OWN("cuPointerGetAttribute", 4000, 0, cuPointerGetAttribute),
};

static CUresult lookup(const char *symbol, void **pfn, int version,
                       cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    const struct variant *best = NULL;
    bool known = false;

    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        const struct variant *v = &variants[i];

        if (strcmp(v->api, symbol) != 0)
            continue;
        known = true;
        if (v->since > version ||
            (v->pt_flags &&
             !(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
            continue;
        if (best == NULL || v->since > best->since ||
            (v->since == best->since && v->pt_flags > best->pt_flags))
            best = v;
    }
    *pfn = best ? best->address : NULL;
    if (status)
        *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
                  : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                             cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                          cuuint64_t flags)
{
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

/* The runtime's private tables cannot be faked: runtime API calls beyond
 * the bootstrap fail here, as documented. */
CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    (void)pExportTableId;
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    (void)error;
    *pStr = "fake libcuda error";
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    (void)error;
    *pStr = "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}

/* Test introspection: the fake's own address of an exported variant, which
 * libnvshare's wrapper must never be. */
void *fake_cuda_address_of(const char *name)
{
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
        if (strcmp(variants[i].name, name) == 0)
            return variants[i].address;
    return NULL;
}
