/* host_memory.c - see host_memory.h. */
#include "host_memory.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "file.h"


/* The value of meminfo's line `name`, in bytes; false if it has none. */
static bool meminfo_bytes(const char *meminfo, const char *name, uint64_t *bytes)
{
    const char *value = file_keyed_line(meminfo, name);
    unsigned long long kib;

    if (!value || sscanf(value, " %llu kB", &kib) != 1)
        return false;
    *bytes = (uint64_t)kib << 10;
    return true;
}

/* What meminfo's line `what` says is left above the margin (0 when the
 * margin takes it all), or HOST_SWAP_BUDGET_UNKNOWN. */
static uint64_t room_of(const char *meminfo, const char *what)
{
    uint64_t total, left;

    if (!meminfo_bytes(meminfo, "MemTotal:", &total) ||
        !meminfo_bytes(meminfo, what, &left))
        return HOST_SWAP_BUDGET_UNKNOWN;
    uint64_t margin = total / 10 > HOST_SWAP_MARGIN_MIN ? total / 10
                                                        : HOST_SWAP_MARGIN_MIN;
    return left > margin ? left - margin : 0;
}

uint64_t host_swap_budget_of(const char *meminfo)
{
    return room_of(meminfo, "MemAvailable:");
}

uint64_t host_free_room_of(const char *meminfo)
{
    return room_of(meminfo, "MemFree:");
}

/* `of` applied to <proc_root>/meminfo, read now. */
static uint64_t read_meminfo(const char *proc_root,
                             uint64_t (*of)(const char *meminfo))
{
    char path[4096], text[8192];

    snprintf(path, sizeof(path), "%s/meminfo", proc_root ? proc_root : "/proc");
    if (!file_read_text(path, text, sizeof(text)))
        return HOST_SWAP_BUDGET_UNKNOWN;
    return of(text);
}

uint64_t host_swap_budget_auto(const char *proc_root)
{
    return read_meminfo(proc_root, host_swap_budget_of);
}

uint64_t host_free_room_auto(const char *proc_root)
{
    return read_meminfo(proc_root, host_free_room_of);
}
