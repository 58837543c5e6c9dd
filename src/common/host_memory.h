/* host_memory.h - how much host memory swapped-out clients may fill, when
 * the operator leaves it to the node (the scheduler's host-swap-budget
 * auto), and how much a client makes its host copies ahead in. */
#ifndef NVSHARE_HOST_MEMORY_H
#define NVSHARE_HOST_MEMORY_H

#include <stdint.h>

/* The margin left to the host and its other tenants: 10 % of its memory,
 * at least this. */
#define HOST_SWAP_MARGIN_MIN (2ull << 30)
/* A meminfo that does not say. */
#define HOST_SWAP_BUDGET_UNKNOWN UINT64_MAX

/* The budget a meminfo text gives: MemAvailable less the margin (0 when
 * the margin takes it all), or HOST_SWAP_BUDGET_UNKNOWN when the text lacks
 * either line. */
uint64_t host_swap_budget_of(const char *meminfo);

/* The same from <proc_root>/meminfo (NULL: /proc), read now. */
uint64_t host_swap_budget_auto(const char *proc_root);

/* MemFree less the same margin: what a client may make its host copies
 * ahead in (lazily free, they would otherwise push out the page cache
 * that MemAvailable counts). From a text, and from <proc_root>/meminfo. */
uint64_t host_free_room_of(const char *meminfo);
uint64_t host_free_room_auto(const char *proc_root);

#endif
