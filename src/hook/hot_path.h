/* hot_path.h - what a wrapper runs for each submission while its process holds
 * the GPU: the gate (nvshare_client.h's nvshare_submit_begin/end), the
 * submitting thread's GPU, the backlog countdown, the collective table
 * and the counters. Loads and thread-local arithmetic only: no syscall,
 * no lock, no allocation (bench/launch_overhead measures it). */
#ifndef NVSHARE_HOOK_HOT_PATH_H
#define NVSHARE_HOOK_HOT_PATH_H

#include "backlog.h"
#include "client_start.h"
#include "collectives.h"
#include "context.h"
#include "hook.h"
#include "nvshare_client.h"
#include "stats.h"

/* The GPU a submission from this thread goes to, or -1 if not gating. */
static inline int hook_submit_gpu(void)
{
    int state = atomic_load_explicit(&hook_gating, memory_order_relaxed);

    if (hook_unlikely(state != HOOK_GATING_ON))
        state = hook_gating_start();
    return state == HOOK_GATING_ON ? hook_current_gpu : -1;
}

/* After each gated stream submission: every so many, check the backlog. */
static inline void hook_backlog_tick(CUstream stream, int pt_flags)
{
    if (hook_unlikely(--hook_backlog_countdown <= 0))
        hook_backlog_check(stream, pt_flags);
}

/* After a graph launch: a graph other than the last one may cost anything
 * (a whole training step where the eager warm-up's kernels took
 * microseconds), so its first launch is checked. */
static inline void hook_backlog_graph_tick(CUgraphExec graph, CUstream stream,
                                           int pt_flags)
{
    if (hook_unlikely(graph != hook_backlog_graph)) {
        hook_backlog_graph = graph;
        hook_backlog_restart();
    }
    hook_backlog_tick(stream, pt_flags);
}

static inline CUstream config_stream(const CUlaunchConfig *config)
{
    return config ? config->hStream : NULL;
}

#endif
