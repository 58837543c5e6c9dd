/* wrappers.c - the wrappers generated from entry_points.def.
 *
 * Submissions (SUBMIT, SUBMIT_SYNC) are bracketed by nvshare_submit_begin/
 * end on the GPU of the calling thread's current context, which context.c
 * keeps in a thread-local so the hot path makes no driver call to find it.
 * Stream submissions then tick the backlog counter (backlog.c), graph
 * launches after noting which graph they launch; kernel launches are also
 * counted if they are collectives (collectives.c).
 *
 * Allocations (ALLOC) charge the memory quota before the driver is called
 * and never reach it when the quota refuses; what differs between paths
 * (how many bytes, which GPU, what to remember) is in that entry point's
 * mem_claim_<name>() in memory_paths.c. Frees (FREE) give back exactly what
 * was charged; memory queries (INFO) are answered from the quota; exports
 * (EXPORT) say why the driver refused one.
 * Everything else is counted and forwarded; CTX and LOOKUP wrappers are
 * hand-written in context.c and proc_address.c. */
#include "allocations.h"
#include "backlog.h"
#include "collectives.h"
#include "driver.h"
#include "hot_path.h"
#include "memory_paths.h"
#include "stats.h"
#include "nvshare_client.h"

#define WRAP_FORWARD(e, params, args)                                          \
    HOOK_EXPORT CUresult e params                                              \
    {                                                                          \
        hook_count(&hook_stat_calls[NVSHARE_ID_##e], 1);                       \
        return HOOK_CALL_REAL(e, args);                                        \
    }

#define WRAP_GATED(e, params, args, in_flight, after_submit)                   \
    HOOK_EXPORT CUresult e params                                              \
    {                                                                          \
        __typeof__(&e) real = HOOK_REAL(e);                                    \
        CUresult rc;                                                           \
        int gpu;                                                               \
                                                                               \
        hook_count(&hook_stat_calls[NVSHARE_ID_##e], 1);                       \
        if (hook_unlikely(real == NULL))                                       \
            return CUDA_ERROR_NOT_FOUND;                                       \
        gpu = hook_submit_gpu();                                               \
        if (hook_unlikely(gpu < 0))                                            \
            return real args;                                                  \
        nvshare_submit_begin(gpu);                                             \
        rc = real args;                                                        \
        in_flight;                                                             \
        nvshare_submit_end();                                                  \
        hook_count(&hook_stat_gated[NVSHARE_ID_##e], 1);                       \
        after_submit;                                                          \
        return rc;                                                             \
    }

#define WRAP_SUBMIT(e, pt, stream, params, args)                               \
    WRAP_GATED(e, params, args, (void)0, hook_backlog_tick(stream, pt))
/* A collective is counted before the submission ends, so that a drain point
 * taken once the submissions in flight have returned includes it. */
#define WRAP_KERNEL(e, pt, stream, params, args)                               \
    WRAP_GATED(e, params, args,                                                \
               if (rc == CUDA_SUCCESS) hook_kernel_launched(gpu, f),           \
               hook_backlog_tick(stream, pt))
#define WRAP_GRAPH(e, pt, stream, params, args)                                \
    WRAP_GATED(e, params, args, (void)0,                                       \
               hook_backlog_graph_tick(hGraphExec, stream, pt))
#define WRAP_SUBMIT_SYNC(e, pt, stream, params, args)                          \
    WRAP_GATED(e, params, args, (void)0, (void)0)
#define WRAP_ALLOC(e, pt, stream, params, args)                                \
    HOOK_EXPORT CUresult e params                                              \
    {                                                                          \
        __typeof__(&e) real = HOOK_REAL(e);                                    \
        struct mem_claim claim;                                                \
                                                                               \
        hook_count(&hook_stat_calls[NVSHARE_ID_##e], 1);                       \
        if (hook_unlikely(real == NULL))                                       \
            return CUDA_ERROR_NOT_FOUND;                                       \
        claim = mem_claim_##e args;                                            \
        if (!mem_claim_reserve(&claim))                                        \
            return mem_claim_refused(&claim);                                  \
        return mem_claim_settle(&claim, claim.path && claim.path->allocate     \
                                            ? claim.path->allocate(&claim)     \
                                            : real args);                      \
    }

#define WRAP_FREE(e, pt, stream, params, args)                                 \
    HOOK_EXPORT CUresult e params                                              \
    {                                                                          \
        __typeof__(&e) real = HOOK_REAL(e);                                    \
        struct mem_free release;                                               \
        CUresult rc;                                                           \
                                                                               \
        hook_count(&hook_stat_calls[NVSHARE_ID_##e], 1);                       \
        if (hook_unlikely(real == NULL))                                       \
            return CUDA_ERROR_NOT_FOUND;                                       \
        release = mem_free_##e args;                                           \
        mem_free_take(&release);                                               \
        rc = hook_unlikely(mem_free_is_ours(&release))                         \
                 ? mem_free_ours(&release)                                     \
                 : real args;                                                  \
        mem_free_settle(&release, rc);                                         \
        return rc;                                                             \
    }

/* A call whose answer the hook reads after the driver: memory queries
 * (INFO) are virtualised when they succeed, exports (EXPORT) say why the
 * driver refused. */
#define WRAP_THEN(e, params, args, when, then)                                 \
    HOOK_EXPORT CUresult e params                                              \
    {                                                                          \
        CUresult rc;                                                           \
                                                                               \
        hook_count(&hook_stat_calls[NVSHARE_ID_##e], 1);                       \
        rc = HOOK_CALL_REAL(e, args);                                          \
        if (when)                                                              \
            then args;                                                         \
        return rc;                                                             \
    }
#define WRAP_INFO(e, pt, stream, params, args)                                 \
    WRAP_THEN(e, params, args, rc == CUDA_SUCCESS, mem_view_##e)
#define WRAP_EXPORT(e, pt, stream, params, args)                               \
    WRAP_THEN(e, params, args, rc != CUDA_SUCCESS, mem_export_refused_##e)

/* The time spent in a synchronization is time the GPU was busy with this
 * thread's work (backlog.c, busy measure): two clock reads per call. */
#define WRAP_SYNC(e, pt, stream, params, args)                                 \
    HOOK_EXPORT CUresult e params                                              \
    {                                                                          \
        uint64_t start = hook_now_ns();                                        \
        bool pending = hook_busy_mark_live && hook_busy_sync_begin();          \
        CUresult rc;                                                           \
                                                                               \
        hook_count(&hook_stat_calls[NVSHARE_ID_##e], 1);                       \
        rc = HOOK_CALL_REAL(e, args);                                          \
        hook_busy_sync_end(start, pending);                                    \
        return rc;                                                             \
    }
#define WRAP_OTHER(e, pt, stream, params, args) WRAP_FORWARD(e, params, args)
#define WRAP_CTX(e, pt, stream, params, args)
#define WRAP_VMM(e, pt, stream, params, args)
#define WRAP_LOOKUP(e, pt, stream, params, args)

#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    WRAP_##cat(e, pt, stream, params, args)
#include "entry_points.def"
#undef NVSHARE_SYMBOL
