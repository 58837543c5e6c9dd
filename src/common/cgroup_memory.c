/* cgroup_memory.c - see cgroup_memory.h. */
#include "cgroup_memory.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "file.h"

#define PATH_LEN 4096
/* v1 writes "no limit" as the largest page-aligned signed 64-bit value. */
#define V1_NO_LIMIT (1ull << 62)

enum cgroup_version { CGROUP_V1 = 1, CGROUP_V2 = 2 };

/* dir/name into text; false when it cannot be read. */
static bool read_text(const char *dir, const char *name, char *text, size_t size)
{
    char path[PATH_LEN];

    return (size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) <
               sizeof(path) &&
           file_read_text(path, text, size);
}

/* A file holding one number, or "max" (CGROUP_MEMORY_UNLIMITED). */
static bool read_bytes(const char *dir, const char *name, uint64_t *bytes)
{
    char text[64];
    unsigned long long v;

    if (!read_text(dir, name, text, sizeof(text)))
        return false;
    if (strncmp(text, "max", 3) == 0) {
        *bytes = CGROUP_MEMORY_UNLIMITED;
        return true;
    }
    if (sscanf(text, "%llu", &v) != 1)
        return false;
    *bytes = v;
    return true;
}

/* The value of memory.stat's line `key` (0 when it has none). */
static uint64_t stat_bytes(const char *stat, const char *key)
{
    const char *value = file_keyed_line(stat, key);
    unsigned long long v;

    return value && sscanf(value, "%llu", &v) == 1 ? v : 0;
}

/* One level's limit, usage and inactive file pages; false when it sets no
 * limit or does not say its usage. */
static bool read_level(const char *dir, enum cgroup_version version,
                       uint64_t *limit, uint64_t *usage, uint64_t *inactive)
{
    char stat[8192];
    uint64_t high;

    if (version == CGROUP_V2) {
        if (!read_bytes(dir, "memory.max", limit) ||
            !read_bytes(dir, "memory.current", usage))
            return false;
        /* Past memory.high the kernel throttles the process hard. */
        if (read_bytes(dir, "memory.high", &high) && high < *limit)
            *limit = high;
    } else {
        if (!read_bytes(dir, "memory.limit_in_bytes", limit) ||
            !read_bytes(dir, "memory.usage_in_bytes", usage))
            return false;
        if (*limit >= V1_NO_LIMIT)
            *limit = CGROUP_MEMORY_UNLIMITED;
    }
    if (*limit == CGROUP_MEMORY_UNLIMITED)
        return false;
    *inactive = 0;
    if (read_text(dir, "memory.stat", stat, sizeof(stat)))
        /* v1's total_ counts the level's descendants too, as v2's does. */
        *inactive = stat_bytes(stat, version == CGROUP_V2
                                         ? "inactive_file "
                                         : "total_inactive_file ");
    return true;
}

/* Whether the comma-separated list (len bytes) names controller. */
static bool lists(const char *list, size_t len, const char *controller)
{
    size_t want = strlen(controller);

    for (size_t at = 0; at < len;) {
        size_t item = strcspn(list + at, ",:");
        if (item > len - at)
            item = len - at;
        if (item == want && strncmp(list + at, controller, want) == 0)
            return true;
        at += item + 1;
    }
    return false;
}

/* Whether the path (len bytes) climbs out of where it starts. */
static bool climbs(const char *path, size_t len)
{
    for (size_t at = 0; at + 3 <= len; at++)
        if (strncmp(path + at, "/..", 3) == 0 &&
            (at + 3 == len || path[at + 3] == '/'))
            return true;
    return false;
}

/* The path of the memory cgroup in self_cgroup's line for version (v1: the
 * hierarchy that lists "memory"), into path; false when it has none. A
 * path that leaves its root ("..", outside the cgroup namespace) reads as
 * the root. */
static bool cgroup_path(const char *self_cgroup, enum cgroup_version version,
                        char *path, size_t size)
{
    for (const char *line = self_cgroup; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *controllers = strchr(line, ':'), *p;
        size_t len;

        if (!controllers || !(p = strchr(controllers + 1, ':')))
            continue;
        controllers++;
        if (version == CGROUP_V2
                ? p != controllers || line[0] != '0'
                : !lists(controllers, (size_t)(p - controllers), "memory"))
            continue;
        p++;
        len = strcspn(p, "\n");
        /* "/" is the root itself. */
        if (p[0] != '/' || len == 1 || len >= size || climbs(p, len))
            len = 0;
        memcpy(path, p, len);
        path[len] = '\0';
        return true;
    }
    return false;
}

static bool is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

struct cgroup_memory cgroup_memory_of(const char *root, const char *self_cgroup)
{
    struct cgroup_memory room = {CGROUP_MEMORY_UNLIMITED,
                                 CGROUP_MEMORY_UNLIMITED};
    enum cgroup_version version = CGROUP_V2;
    char base[PATH_LEN], dir[PATH_LEN], path[PATH_LEN];

    snprintf(base, sizeof(base), "%s/memory", root);
    if (is_dir(base) && cgroup_path(self_cgroup, CGROUP_V1, path, sizeof(path)))
        version = CGROUP_V1;
    else if (cgroup_path(self_cgroup, CGROUP_V2, path, sizeof(path)))
        snprintf(base, sizeof(base), "%s", root);
    else
        return room;
    if ((size_t)snprintf(dir, sizeof(dir), "%s%s", base, path) >= sizeof(dir))
        return room;
    size_t base_len = strlen(base);
    for (;;) {
        uint64_t limit, usage, inactive;

        if (read_level(dir, version, &limit, &usage, &inactive)) {
            uint64_t used = usage - (inactive < usage ? inactive : usage);
            uint64_t free = limit > usage ? limit - usage : 0;
            uint64_t available = limit > used ? limit - used : 0;
            room.free = free < room.free ? free : room.free;
            room.available = available < room.available ? available
                                                        : room.available;
        }
        char *slash = strrchr(dir + base_len, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    return room;
}

struct cgroup_memory cgroup_memory_now(void)
{
    char self[4096];

    if (!file_read_text("/proc/self/cgroup", self, sizeof(self)))
        return (struct cgroup_memory){CGROUP_MEMORY_UNLIMITED,
                                      CGROUP_MEMORY_UNLIMITED};
    return cgroup_memory_of("/sys/fs/cgroup", self);
}
