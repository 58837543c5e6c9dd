/* entry_points.h - expands entry_points.def into per-symbol facts.
 *
 * A row of the table may stand for two exported symbols (the legacy one and
 * its _ptsz/_ptds twin). Users define
 *
 *   NVSHARE_SYMBOL(exported, api, since, pt, category, stream, params, args)
 *
 * and include "entry_points.def"; it is expanded once per exported symbol,
 * with pt = 2 (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) for the
 * per-thread variant and 0 otherwise. Shared by libnvshare, the fake driver
 * and the tests, so that all three agree on the list by construction. */
#ifndef NVSHARE_ENTRY_POINTS_H
#define NVSHARE_ENTRY_POINTS_H

/* Deprecated launch functions (cuLaunch, cuLaunchGrid, ...) still submit
 * work, so they are wrapped, and wrapping them must not warn. */
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>

/* cuda.h #defines these API names to a newer variant. The table names exact
 * exported symbols, including the older variants, so the macros must go. */
#undef cuGetProcAddress
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync
#undef cuMemPrefetchAsync
#undef cuMemGetInfo
#undef cuDeviceTotalMem
#undef cuIpcOpenMemHandle

#define NVSHARE_PT_SINCE(since) ((since) > 7000 ? (since) : 7000)

#define NVSHARE_ENTRY(e, api, since, variants, cat, stream, params, args)      \
    NVSHARE_VARIANTS_##variants(e, api, since, cat, stream, params, args)
#define NVSHARE_VARIANTS_ONE(e, api, since, cat, stream, params, args)         \
    NVSHARE_SYMBOL(e, api, since, 0, cat, stream, params, args)
#define NVSHARE_VARIANTS_PTSZ(e, api, since, cat, stream, params, args)        \
    NVSHARE_SYMBOL(e, api, since, 0, cat, stream, params, args)                \
    NVSHARE_SYMBOL(e##_ptsz, api, NVSHARE_PT_SINCE(since), 2, cat, stream,     \
                   params, args)
#define NVSHARE_VARIANTS_PTDS(e, api, since, cat, stream, params, args)        \
    NVSHARE_SYMBOL(e, api, since, 0, cat, stream, params, args)                \
    NVSHARE_SYMBOL(e##_ptds, api, NVSHARE_PT_SINCE(since), 2, cat, stream,     \
                   params, args)

enum nvshare_category {
    NVSHARE_CAT_SUBMIT,
    NVSHARE_CAT_KERNEL,
    NVSHARE_CAT_GRAPH,
    NVSHARE_CAT_SUBMIT_SYNC,
    NVSHARE_CAT_ALLOC,
    NVSHARE_CAT_FREE,
    NVSHARE_CAT_INFO,
    NVSHARE_CAT_EXPORT,
    NVSHARE_CAT_VMM,
    NVSHARE_CAT_SYNC,
    NVSHARE_CAT_CTX,
    NVSHARE_CAT_LOOKUP,
    NVSHARE_CAT_OTHER,
};

/* NVSHARE_ID_cuLaunchKernel_ptsz, ...: index of each exported symbol. */
enum nvshare_symbol_id {
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    NVSHARE_ID_##e,
#include "entry_points.def"
#undef NVSHARE_SYMBOL
    NVSHARE_SYMBOL_COUNT
};

/* Prototypes of every exported symbol. Where cuda.h declares the name too,
 * the compiler checks that the table's parameter list matches it. */
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    CUresult e params;
#include "entry_points.def"
#undef NVSHARE_SYMBOL

/* The static facts of one exported symbol. */
struct nvshare_symbol {
    const char *name; /* exported name: "cuLaunchKernel_ptsz" */
    const char *api;  /* name asked of cuGetProcAddress: "cuLaunchKernel" */
    int since;        /* version the runtime asks for it at */
    int pt_flags;     /* 2 for a _ptsz/_ptds variant, else 0 */
    enum nvshare_category category;
};

/* Initialiser of one struct nvshare_symbol, for tables built with
 * #define NVSHARE_SYMBOL(e, api, since, pt, cat, ...) NVSHARE_FACTS(e, ...). */
#define NVSHARE_FACTS(e, api, since, pt, cat)                                  \
    [NVSHARE_ID_##e] = {#e, api, since, pt, NVSHARE_CAT_##cat},

#endif
