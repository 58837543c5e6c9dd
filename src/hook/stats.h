/* stats.h - NVSHARE_STATS counters. */
#ifndef NVSHARE_HOOK_STATS_H
#define NVSHARE_HOOK_STATS_H

#include "hook.h"
#include "driver.h"

extern bool hook_stats_enabled;
extern _Atomic uint64_t hook_stat_calls[NVSHARE_SYMBOL_COUNT];
extern _Atomic uint64_t hook_stat_gated[NVSHARE_SYMBOL_COUNT];

enum hook_event {
    HOOK_EV_DLSYM_SUBSTITUTED, /* dlsym answered with a wrapper */
    HOOK_EV_PROC_SUBSTITUTED,  /* cuGetProcAddress answered with a wrapper */
    HOOK_EV_PROC_UNMAPPED,     /* ... with a wrapped API we could not map */
    HOOK_EV_BACKLOG_CHECKS,
    HOOK_EV_BACKLOG_WAITS,
    HOOK_EV_BACKLOG_WAIT_US,
    HOOK_EV_PROCESS_MARKS,     /* marks in the process's table (backlog.c) */
    HOOK_EV_BUSY_NS,           /* busy time reported (nvshare_note_busy) */
    HOOK_EV_BUSY_SPAN_NS,      /* ... of this much wall time */
    HOOK_EV_BUSY_SKIPPED,      /* spans not reported: a gate wait possible */
    HOOK_EV_OVERSUB_CONVERTED, /* device allocations made by vmm.c */
    HOOK_EV_SWAP_OUTS,
    HOOK_EV_SWAP_OUT_BYTES,
    HOOK_EV_SWAP_OUT_US,
    HOOK_EV_SWAP_INS,
    HOOK_EV_SWAP_IN_BYTES,
    HOOK_EV_SWAP_IN_US,
    HOOK_EV_HOST_MADE_AHEAD, /* bytes of host copies made by PREPARE_SWAP */
    HOOK_EV_COUNT
};
extern _Atomic uint64_t hook_stat_events[HOOK_EV_COUNT];

void hook_stats_init(void);

static inline void hook_count(_Atomic uint64_t *counter, uint64_t n)
{
    if (hook_unlikely(hook_stats_enabled))
        atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

#endif
