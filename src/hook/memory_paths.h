/* memory_paths.h - one function per ALLOC / FREE / INFO / EXPORT entry point. */
#ifndef NVSHARE_HOOK_MEMORY_PATHS_H
#define NVSHARE_HOOK_MEMORY_PATHS_H

#include "hook.h"
#include "allocations.h"

/* memory_paths.c: one function per ALLOC / FREE / INFO / EXPORT entry
 * point, with the entry point's own parameters. */
#define MEM_DECLARE_ALLOC(e, params) struct mem_claim mem_claim_##e params;
#define MEM_DECLARE_FREE(e, params) struct mem_free mem_free_##e params;
#define MEM_DECLARE_INFO(e, params) void mem_view_##e params;
#define MEM_DECLARE_EXPORT(e, params) void mem_export_refused_##e params;
#define MEM_DECLARE_SUBMIT(e, params)
#define MEM_DECLARE_KERNEL(e, params)
#define MEM_DECLARE_GRAPH(e, params)
#define MEM_DECLARE_SUBMIT_SYNC(e, params)
#define MEM_DECLARE_SYNC(e, params)
#define MEM_DECLARE_OTHER(e, params)
#define MEM_DECLARE_CTX(e, params)
#define MEM_DECLARE_VMM(e, params)
#define MEM_DECLARE_LOOKUP(e, params)
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    MEM_DECLARE_##cat(e, params)
#include "entry_points.def"
#undef NVSHARE_SYMBOL

#endif
