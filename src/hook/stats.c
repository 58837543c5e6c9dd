/* stats.c - NVSHARE_STATS=1: per-entry-point call counts, printed at exit.
 *
 * The GPU tests read these lines to prove coverage (every launch gated, every
 * runtime lookup seen). Counters are touched only when enabled, so the cost
 * when disabled is one predictable branch per call. */
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "stats.h"
#include "symbols.h"
#include "log.h"

bool hook_stats_enabled;
_Atomic uint64_t hook_stat_calls[NVSHARE_SYMBOL_COUNT];
_Atomic uint64_t hook_stat_gated[NVSHARE_SYMBOL_COUNT];
_Atomic uint64_t hook_stat_events[HOOK_EV_COUNT];

static const char *const event_names[HOOK_EV_COUNT] = {
    [HOOK_EV_DLSYM_SUBSTITUTED] = "dlsym-wrapped",
    [HOOK_EV_PROC_SUBSTITUTED] = "getproc-wrapped",
    [HOOK_EV_PROC_UNMAPPED] = "getproc-unmapped",
    [HOOK_EV_BACKLOG_CHECKS] = "backlog-checks",
    [HOOK_EV_BACKLOG_WAITS] = "backlog-waits",
    [HOOK_EV_BACKLOG_WAIT_US] = "backlog-wait-us",
    [HOOK_EV_PROCESS_MARKS] = "process-marks",
    [HOOK_EV_BUSY_NS] = "busy-ns",
    [HOOK_EV_BUSY_SPAN_NS] = "busy-span-ns",
    [HOOK_EV_BUSY_SKIPPED] = "busy-spans-skipped",
    [HOOK_EV_OVERSUB_CONVERTED] = "oversub-converted",
    [HOOK_EV_SWAP_OUTS] = "swap-outs",
    [HOOK_EV_SWAP_OUT_BYTES] = "swap-out-bytes",
    [HOOK_EV_SWAP_OUT_US] = "swap-out-us",
    [HOOK_EV_HOST_MADE_AHEAD] = "host-made-ahead",
    [HOOK_EV_SWAP_INS] = "swap-ins",
    [HOOK_EV_SWAP_IN_BYTES] = "swap-in-bytes",
    [HOOK_EV_SWAP_IN_US] = "swap-in-us",
};

/* One line per symbol called, then one per event:
 *   stats: cuLaunchKernel calls 10 gated 10
 *   stats: getproc-wrapped 431 */
static void print_stats(void)
{
    for (int i = 0; i < NVSHARE_SYMBOL_COUNT; i++) {
        uint64_t calls = atomic_load(&hook_stat_calls[i]);

        if (calls > 0)
            log_info("stats: %s calls %llu gated %llu", hook_symbols[i].name,
                     (unsigned long long)calls,
                     (unsigned long long)atomic_load(&hook_stat_gated[i]));
    }
    for (int i = 0; i < HOOK_EV_COUNT; i++)
        log_info("stats: %s %llu", event_names[i],
                 (unsigned long long)atomic_load(&hook_stat_events[i]));
}

void hook_stats_init(void)
{
    const char *value = getenv("NVSHARE_STATS");

    hook_stats_enabled = value && value[0] != '\0' && strcmp(value, "0") != 0;
    if (hook_stats_enabled)
        atexit(print_stats);
}

static uint64_t counter_of(_Atomic uint64_t *counters, const char *name)
{
    int id = hook_symbol_by_name(name);

    return id < 0 ? 0 : atomic_load(&counters[id]);
}

/* Test introspection (with NVSHARE_STATS=1): calls of name so far. */
HOOK_EXPORT uint64_t nvshare_hook_calls(const char *name)
{
    return counter_of(hook_stat_calls, name);
}

/* Test introspection (with NVSHARE_STATS=1): gated calls of name so far. */
HOOK_EXPORT uint64_t nvshare_hook_gated(const char *name)
{
    return counter_of(hook_stat_gated, name);
}

/* Test introspection (with NVSHARE_STATS=1): the event counter printed as
 * `stats: <name> N` ("busy-ns", "swap-out-bytes", ...), 0 if unknown. */
HOOK_EXPORT uint64_t nvshare_hook_event(const char *name)
{
    for (int i = 0; i < HOOK_EV_COUNT; i++)
        if (strcmp(event_names[i], name) == 0)
            return atomic_load(&hook_stat_events[i]);
    return 0;
}
