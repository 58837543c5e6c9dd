/* symbols.h - names and categories of every wrapped symbol. */
#ifndef NVSHARE_HOOK_SYMBOLS_H
#define NVSHARE_HOOK_SYMBOLS_H

#include "hook.h"

extern const struct nvshare_symbol hook_symbols[NVSHARE_SYMBOL_COUNT];

/* Index of the wrapped symbol with this exact exported name, or -1. */
int hook_symbol_by_name(const char *name);
/* The category (enum nvshare_category) of the wrapped symbols whose api
 * name is api ("cuMemAlloc"), or -1 if none is wrapped. */
int hook_api_category(const char *api);

#endif
