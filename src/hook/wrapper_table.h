/* wrapper_table.h - every wrapper's address, by symbol id. */
#ifndef NVSHARE_HOOK_WRAPPER_TABLE_H
#define NVSHARE_HOOK_WRAPPER_TABLE_H

#include "hook.h"

extern void *const hook_wrappers[NVSHARE_SYMBOL_COUNT];

#endif
