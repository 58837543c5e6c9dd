/* host_memory.h - how much host memory swapped-out clients may fill, when
 * the operator leaves it to the node (host-swap-budget auto). */
#ifndef NVSHARE_HOST_MEMORY_H
#define NVSHARE_HOST_MEMORY_H

#include <stdint.h>

/* The margin left to the host and its other tenants: 10 % of its memory,
 * at least this. */
#define HOST_SWAP_MARGIN_MIN (2ull << 30)

/* The budget a meminfo text gives: MemAvailable less the margin (0 when
 * the margin takes it all), or POLICY_HOST_BUDGET_NONE when the text lacks
 * either line. */
uint64_t host_swap_budget_of(const char *meminfo);

/* The same from <proc_root>/meminfo (NULL: /proc), read now. */
uint64_t host_swap_budget_auto(const char *proc_root);

#endif
