/* wrappers.c - the wrappers generated from entry_points.def.
 *
 * Submissions (SUBMIT, SUBMIT_SYNC) are bracketed by nvshare_submit_begin/
 * end on the GPU of the calling thread's current context, which context.c
 * keeps in a thread-local so the hot path makes no driver call to find it.
 * Stream submissions then tick the backlog counter (backlog.c). Everything
 * else is counted and forwarded; CTX and LOOKUP wrappers are hand-written in
 * context.c and proc_address.c. */
#include "hook.h"

#define WRAP_FORWARD(e, params, args)                                          \
    HOOK_EXPORT CUresult e params                                              \
    {                                                                          \
        hook_count(&hook_stat_calls[NVSHARE_ID_##e], 1);                       \
        return HOOK_CALL_REAL(e, args);                                        \
    }

#define WRAP_GATED(e, params, args, after_submit)                              \
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
        nvshare_submit_end();                                                  \
        hook_count(&hook_stat_gated[NVSHARE_ID_##e], 1);                       \
        after_submit;                                                          \
        return rc;                                                             \
    }

#define WRAP_SUBMIT(e, pt, stream, params, args)                               \
    WRAP_GATED(e, params, args, hook_backlog_tick(stream, pt))
#define WRAP_SUBMIT_SYNC(e, pt, stream, params, args)                          \
    WRAP_GATED(e, params, args, (void)0)
#define WRAP_ALLOC(e, pt, stream, params, args) WRAP_FORWARD(e, params, args)
#define WRAP_FREE(e, pt, stream, params, args) WRAP_FORWARD(e, params, args)
#define WRAP_INFO(e, pt, stream, params, args) WRAP_FORWARD(e, params, args)
#define WRAP_SYNC(e, pt, stream, params, args) WRAP_FORWARD(e, params, args)
#define WRAP_OTHER(e, pt, stream, params, args) WRAP_FORWARD(e, params, args)
#define WRAP_CTX(e, pt, stream, params, args)
#define WRAP_LOOKUP(e, pt, stream, params, args)

#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    WRAP_##cat(e, pt, stream, params, args)
#include "entry_points.def"
#undef NVSHARE_SYMBOL
