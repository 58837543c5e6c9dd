/* symbols.c - what libnvshare wraps: names and categories of every
 * exported symbol in entry_points.def, and the name lookup dlsym needs.
 * Data at the bottom: the driver's loader reads the names; the wrappers'
 * addresses are wrapper_table.c's, at the top. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "symbols.h"

const struct nvshare_symbol hook_symbols[NVSHARE_SYMBOL_COUNT] = {
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    NVSHARE_FACTS(e, api, since, pt, cat)
#include "entry_points.def"
#undef NVSHARE_SYMBOL
};

/* Symbol ids sorted by name, for bsearch: dlsym is called for every name a
 * program resolves, most of them not ours. */
static int by_name[NVSHARE_SYMBOL_COUNT];
static pthread_once_t by_name_once = PTHREAD_ONCE_INIT;

static int compare_ids(const void *a, const void *b)
{
    return strcmp(hook_symbols[*(const int *)a].name,
                  hook_symbols[*(const int *)b].name);
}

static void sort_by_name(void)
{
    for (int i = 0; i < NVSHARE_SYMBOL_COUNT; i++)
        by_name[i] = i;
    qsort(by_name, NVSHARE_SYMBOL_COUNT, sizeof(by_name[0]), compare_ids);
}

static int compare_name_to_id(const void *name, const void *id)
{
    return strcmp(name, hook_symbols[*(const int *)id].name);
}

int hook_symbol_by_name(const char *name)
{
    if (name == NULL || name[0] != 'c' || name[1] != 'u')
        return -1;
    pthread_once(&by_name_once, sort_by_name);
    const int *found = bsearch(name, by_name, NVSHARE_SYMBOL_COUNT,
                               sizeof(by_name[0]), compare_name_to_id);
    return found ? *found : -1;
}

int hook_api_category(const char *api)
{
    for (int i = 0; i < NVSHARE_SYMBOL_COUNT; i++)
        if (strcmp(hook_symbols[i].api, api) == 0)
            return (int)hook_symbols[i].category;
    return -1;
}
