/* state.c - see state.h. */
#include "state.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "parse.h"

/* Appends to a buffer like snprintf, counting what it would need. */
struct out {
    char *buf;
    size_t len, n;
};

static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int w;

    va_start(ap, fmt);
    w = vsnprintf(o->n < o->len ? o->buf + o->n : NULL,
                  o->n < o->len ? o->len - o->n : 0, fmt, ap);
    va_end(ap);
    if (w > 0)
        o->n += (size_t)w;
}

/* Names are written so that a space, '/', '=' or a control byte in a
 * declared name cannot change the line's meaning: %XX for anything but
 * the characters Kubernetes names are made of. */
static bool plain(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '.' || c == '_';
}

static void put_name(struct out *o, const char *name)
{
    const unsigned char *p = (const unsigned char *)name;

    /* A run of plain characters at a time: a node may have 100,000 pods. */
    while (*p) {
        int run = 0;
        while (plain(p[run]))
            run++;
        if (run)
            put(o, "%.*s", run, p);
        else
            put(o, "%%%02X", *p);
        p += run ? run : 1;
    }
}

static int get_name(const char *text, size_t n, char *out, size_t size)
{
    size_t w = 0;

    for (size_t i = 0; i < n; i++) {
        if (w + 1 >= size)
            return -1;
        if (text[i] != '%') {
            if (!plain((unsigned char)text[i]))
                return -1;
            out[w++] = text[i];
        } else if (i + 2 < n && isxdigit((unsigned char)text[i + 1]) &&
                   isxdigit((unsigned char)text[i + 2])) {
            char hex[3] = {text[i + 1], text[i + 2], '\0'};
            unsigned long v = strtoul(hex, NULL, 16);
            if (!v)
                return -1;
            out[w++] = (char)v;
            i += 2;
        } else {
            return -1;
        }
    }
    out[w] = '\0';
    return w ? 0 : -1;
}

static void put_pod_id(struct out *o, const struct pod_id *id)
{
    if (id->uid[0]) {
        put(o, "uid:");
        put_name(o, id->uid);
        return;
    }
    if (id->pod_namespace[0]) {
        put_name(o, id->pod_namespace);
        put(o, "/");
    }
    put_name(o, id->pod_name);
}

/* "group <name> gpu=<index> pods=<id>,<id>... [memory-limit=<size>]
 *  [core-limit=<1-100>] [priority=<1-9>]" */
static void put_group(struct out *o, const struct group *g)
{
    char size[64];

    put(o, "group %s gpu=%d pods=", g->name, g->gpu);
    for (int m = 0; m < g->n_members; m++) {
        put(o, m ? "," : "");
        put_pod_id(o, &g->members[m]);
    }
    if (g->memory) {
        format_size_exact(g->memory, size, sizeof(size));
        put(o, " memory-limit=%s", size);
    }
    if (g->core)
        put(o, " core-limit=%u", (unsigned)g->core);
    if (g->priority)
        put(o, " priority=%u", (unsigned)g->priority);
    put(o, "\n");
}

size_t state_format(const struct node_state *st, char *buf, size_t len)
{
    struct out o = {buf, len, 0};
    char value[64];

    if (len)
        buf[0] = '\0';
    put(&o, "# nvshare-scheduler state: what nvsharectl set at run time.\n"
            "# Rewritten on every change; edit only while the scheduler is "
            "stopped.\n");
    for (int id = 0; id < SETTING_COUNT; id++) {
        if (!st->set[id] || id == SETTING_SCHEDULING_MODE)
            continue;
        setting_format(id, st->value[id], value, sizeof(value));
        put(&o, "%s %s\n", settings_table[id].name, value);
    }
    if (st->set[SETTING_SCHEDULING_MODE]) {
        setting_format(SETTING_SCHEDULING_MODE,
                       st->value[SETTING_SCHEDULING_MODE], value, sizeof(value));
        put(&o, "mode %s\n", value);
    }
    for (int i = 0; i < st->n_modes; i++) {
        setting_format(SETTING_SCHEDULING_MODE, st->modes[i].mode, value,
                       sizeof(value));
        put(&o, "mode %s ", value);
        put_name(&o, st->modes[i].uuid);
        put(&o, "\n");
    }
    for (size_t i = 0; i < st->pods.n; i++) {
        const struct pod *p = &st->pods.list[i];
        if (!pod_configured(p))
            continue;
        put(&o, "pod ");
        put_pod_id(&o, &p->id);
        if (p->owner_named)
            put(&o, " owner=%u", p->owner);
        if (p->core_limit)
            put(&o, " core-limit=%llu", (unsigned long long)p->core_limit);
        if (p->memory_limit) {
            format_size_exact(p->memory_limit, value, sizeof(value));
            put(&o, " memory-limit=%s", value);
        }
        if (p->priority)
            put(&o, " priority=%llu", (unsigned long long)p->priority);
        if (p->min_share)
            put(&o, " min-share=%llu", (unsigned long long)p->min_share);
        if (p->idle_swap)
            put(&o, " idle-swap=%s",
                p->idle_swap == IDLE_SWAP_OFF ? "off" : "on");
        /* By GPU index: the node's GPUs keep their order across restarts
         * as long as the node keeps its GPUs. */
        for (int g = 0; g < PROTO_MAX_GPUS; g++) {
            if (p->gpu_core_limit[g])
                put(&o, " core-limit@%d=%u", g, (unsigned)p->gpu_core_limit[g]);
            if (p->gpu_memory_limit[g]) {
                format_size_exact(p->gpu_memory_limit[g], value, sizeof(value));
                put(&o, " memory-limit@%d=%s", g, value);
            }
        }
        put(&o, "\n");
    }
    for (int i = 0; i < st->groups.n; i++)
        put_group(&o, &st->groups.list[i]);
    return o.n;
}

void state_set_mode(struct node_state *st, const char *uuid, uint8_t mode)
{
    if (!uuid) {
        st->set[SETTING_SCHEDULING_MODE] = true;
        st->value[SETTING_SCHEDULING_MODE] = mode;
        st->n_modes = 0;
        return;
    }
    for (int i = 0; i < st->n_modes; i++) {
        if (!strcmp(st->modes[i].uuid, uuid)) {
            st->modes[i].mode = mode;
            return;
        }
    }
    if (st->n_modes == POLICY_MAX_GPUS)
        return;
    struct gpu_mode *m = &st->modes[st->n_modes++];
    snprintf(m->uuid, sizeof(m->uuid), "%s", uuid);
    m->mode = mode;
}

void state_overlay(const struct node_state *st, uint64_t v[SETTING_COUNT])
{
    for (int id = 0; id < SETTING_COUNT; id++)
        if (st->set[id])
            v[id] = st->value[id];
    if (st->set[SETTING_SWITCH_TIME_FIXED]) {
        bool fixed = st->value[SETTING_SWITCH_TIME_FIXED] != 0;
        v[SETTING_SWITCH_TIME_MODE] = fixed ? SWITCH_TIME_FIXED
                                            : SWITCH_TIME_AUTO;
        if (!fixed)
            v[SETTING_SWITCH_TIME_FIXED] =
                settings_table[SETTING_SWITCH_TIME_FIXED].fallback;
    }
}

/* "<name> <value>" for a setting nvsharectl may change. */
static int parse_setting(struct node_state *st, const char *key, char *args,
                         char *err, size_t len)
{
    char *value = strtok(args, " \t"), *more = strtok(NULL, " \t");

    for (int id = 0; id < SETTING_COUNT; id++) {
        const struct setting *s = &settings_table[id];
        if (strcmp(key, s->name) != 0)
            continue;
        if (!s->runtime || !value) {
            snprintf(err, len, "'%s' %s", key,
                     s->runtime ? "needs a value" : "is not a run-time setting");
            return -1;
        }
        if (id == SETTING_SCHEDULING_MODE) {
            uint64_t mode;
            if (setting_parse(id, value, &mode, err, len))
                return -1;
            if (!more) {
                state_set_mode(st, NULL, (uint8_t)mode);
                return 0;
            }
            char uuid[PROTO_UUID_MAX];
            if (get_name(more, strlen(more), uuid, sizeof(uuid)) ||
                strtok(NULL, " \t")) {
                snprintf(err, len,
                         "mode: expected a mode and at most one GPU UUID");
                return -1;
            }
            state_set_mode(st, uuid, (uint8_t)mode);
            return 0;
        }
        if (more) {
            snprintf(err, len, "'%s' takes one value", key);
            return -1;
        }
        uint64_t v;
        if (setting_read(id, value, &v, err, len) ||
            setting_check_runtime(id, v, err, len))
            return -1;
        st->set[id] = true;
        st->value[id] = v;
        return 0;
    }
    snprintf(err, len, "unknown setting '%s'", key);
    return -1;
}

static int parse_pod_id(const char *text, struct pod_id *id)
{
    const char *slash = strchr(text, '/');

    memset(id, 0, sizeof(*id));
    if (!strncmp(text, "uid:", 4))
        return get_name(text + 4, strlen(text + 4), id->uid, sizeof(id->uid));
    if (!slash) {
        /* Written before a pod had to have a namespace. */
        if (get_name(text, strlen(text), id->pod_name, sizeof(id->pod_name)))
            return -1;
        pod_id_default_namespace(id);
        return 0;
    }
    return get_name(text, (size_t)(slash - text), id->pod_namespace,
                    sizeof(id->pod_namespace)) ||
           get_name(slash + 1, strlen(slash + 1), id->pod_name,
                    sizeof(id->pod_name));
}

/* "core-limit@<gpu>=<1-100>" or "memory-limit@<gpu>=<size>": a pod's
 * limit on one GPU, by index. 0, or -1 (why says what, if anything). */
static int parse_gpu_limit(const char *word, struct pod *p,
                           char why[PARSE_ERR_LEN])
{
    bool core = !strncmp(word, "core-limit@", 11);
    const char *at = strchr(word, '@'), *eq = strchr(word, '=');
    char index[8];
    long gpu, number;
    uint64_t bytes;

    if (!(core || !strncmp(word, "memory-limit@", 13)) || !eq ||
        (size_t)(eq - at) > sizeof(index))
        return -1;
    memcpy(index, at + 1, (size_t)(eq - at - 1));
    index[eq - at - 1] = '\0';
    if (parse_int_range(index, 0, PROTO_MAX_GPUS - 1, &gpu, why))
        return -1;
    if (core) {
        if (parse_int_range(eq + 1, 1, 100, &number, why))
            return -1;
        p->gpu_core_limit[gpu] = (uint8_t)number;
        return 0;
    }
    if (parse_size_bytes(eq + 1, &bytes, why) || !bytes)
        return -1;
    p->gpu_memory_limit[gpu] = bytes;
    return 0;
}

/* "pod <id> [owner=<uid>] [core-limit=<1-100>] [memory-limit=<size>]
 *  [priority=<1-9>] [min-share=<1-100>] [idle-swap=off|on]
 *  [core-limit@<gpu>=<1-100>] [memory-limit@<gpu>=<size>]..." */
static int parse_pod(struct node_state *st, char *args, char *err, size_t len)
{
    char *word = strtok(args, " \t");
    char why[PARSE_ERR_LEN];
    struct pod_id id;
    struct pod *p;
    long number;

    if (!word || parse_pod_id(word, &id)) {
        snprintf(err, len, "pod: expected namespace/name, name or uid:<pod-uid>");
        return -1;
    }
    if (pods_find(&st->pods, &id)) {
        snprintf(err, len, "pod %s is listed twice", word);
        return -1;
    }
    if (!(p = pods_get(&st->pods, &id))) {
        snprintf(err, len, "out of memory");
        return -1;
    }
    while ((word = strtok(NULL, " \t"))) {
        if (!strncmp(word, "owner=", 6) && !id.uid[0] &&
            !parse_int_range(word + 6, 0, UINT32_MAX - 1, &number, why)) {
            /* owner=0 is an older scheduler's record of root joining
             * first: root needs no naming. */
            p->bound = p->owner_named = number != 0;
            p->owner = (uint32_t)number;
        } else if (!strncmp(word, "core-limit=", 11) &&
                   !parse_int_range(word + 11, 1, 100, &number, why)) {
            p->core_limit = (uint64_t)number;
        } else if (!strncmp(word, "priority=", 9) &&
                   !parse_int_range(word + 9, PRIORITY_LOWEST, PRIORITY_HIGHEST,
                                    &number, why)) {
            bool failed; /* p exists: nothing to make */
            pods_set_limit(&st->pods, &id, POD_PRIORITY, -1, (uint64_t)number,
                           &failed);
        } else if (!strcmp(word, "idle-swap=off")) {
            p->idle_swap = IDLE_SWAP_OFF;
        } else if (!strcmp(word, "idle-swap=on")) {
            p->idle_swap = IDLE_SWAP_ON;
        } else if (!strncmp(word, "min-share=", 10) &&
                   !parse_int_range(word + 10, 1, 100, &number, why)) {
            p->min_share = (uint64_t)number;
        } else if (!strncmp(word, "memory-limit=", 13) &&
                   !parse_size_bytes(word + 13, &p->memory_limit, why) &&
                   p->memory_limit) {
        } else if (!parse_gpu_limit(word, p, why)) {
        } else {
            snprintf(err, len, "pod: cannot read '%s'", word);
            return -1;
        }
    }
    if (!pod_configured(p)) {
        snprintf(err, len, "pod without a setting");
        return -1;
    }
    return 0;
}

/* A pod list of put_group's: "<id>,<id>...". */
static int parse_members(char *list, struct group *g)
{
    for (char *id = strtok_r(list, ",", &list); id;
         id = strtok_r(NULL, ",", &list))
        if (g->n_members == GROUP_MAX_MEMBERS ||
            parse_pod_id(id, &g->members[g->n_members++]))
            return -1;
    return 0;
}

/* A line of put_group's, judged as CTL_SET_GROUP's are (groups_set). */
static int parse_group(struct node_state *st, char *args, char *err, size_t len)
{
    char *word = strtok(args, " \t"), why[PARSE_ERR_LEN];
    struct group g = {.gpu = -1};
    long number;

    if (!word || strlen(word) >= sizeof(g.name)) {
        snprintf(err, len, "group: expected its name");
        return -1;
    }
    strcpy(g.name, word);
    while ((word = strtok(NULL, " \t"))) {
        if (!strncmp(word, "gpu=", 4) &&
            !parse_int_range(word + 4, 0, PROTO_MAX_GPUS - 1, &number, why)) {
            g.gpu = (int)number;
        } else if (!strncmp(word, "pods=", 5) && !g.n_members &&
                   !parse_members(word + 5, &g)) {
        } else if (!strncmp(word, "core-limit=", 11) &&
                   !parse_int_range(word + 11, 1, 100, &number, why)) {
            g.core = (uint8_t)number;
        } else if (!strncmp(word, "priority=", 9) &&
                   !parse_int_range(word + 9, PRIORITY_LOWEST, PRIORITY_HIGHEST,
                                    &number, why)) {
            g.priority = (uint8_t)number;
        } else if (!strncmp(word, "memory-limit=", 13) &&
                   !parse_size_bytes(word + 13, &g.memory, why) && g.memory) {
        } else {
            snprintf(err, len, "group: cannot read '%s'", word);
            return -1;
        }
    }
    if (g.gpu < 0) {
        snprintf(err, len, "group %s: no gpu=", g.name);
        return -1;
    }
    if (groups_find(&st->groups, g.name) >= 0) {
        snprintf(err, len, "group %s is listed twice", g.name);
        return -1;
    }
    return groups_set(&st->groups, &g, err, len);
}

int state_parse(const char *text, struct node_state *st, char *err, size_t len)
{
    char *copy = strdup(text), *line, *next;
    int number = 0, rc = 0;

    if (!copy) {
        snprintf(err, len, "out of memory");
        return -1;
    }
    for (line = copy; line && rc == 0; line = next) {
        char why[256], *key, *args;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        number++;
        line += strspn(line, " \t\r");
        line[strcspn(line, "\r")] = '\0';
        if (!*line || *line == '#')
            continue;
        key = line;
        args = line + strcspn(line, " \t");
        if (*args)
            *args++ = '\0';
        rc = !strcmp(key, "pod") ? parse_pod(st, args, why, sizeof(why))
             : !strcmp(key, "group")
                 ? parse_group(st, args, why, sizeof(why))
                 : parse_setting(st, key, args, why, sizeof(why));
        if (rc)
            snprintf(err, len, "line %d: %s", number, why);
    }
    free(copy);
    return rc;
}

/* A state that cannot be used: path goes aside (path.corrupt, kept for the
 * operator) and st is emptied, so the scheduler starts with defaults. */
static void move_aside(const char *path, const char *why, struct node_state *st)
{
    char aside[4096 + 16];

    pods_free(&st->pods);
    memset(st, 0, sizeof(*st));
    snprintf(aside, sizeof(aside), "%s.corrupt", path);
    if (rename(path, aside) == 0)
        log_error("state file %s is corrupt (%s): moved to %s; starting with "
                  "the "
                  "environment's settings and no pod limits",
                  path, why, aside);
    else
        log_error("state file %s is corrupt (%s) and cannot be moved aside "
                  "(%s); "
                  "starting with the environment's settings and no pod limits",
                  path, why, strerror(errno));
}

int state_load(const char *path, struct node_state *st)
{
    char err[320];
    /* Non-blocking: a FIFO at the path must not hold the start-up. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    char *text = NULL;
    size_t size = 0;
    struct stat info;
    FILE *f;

    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0 || fstat(fd, &info) < 0) {
        log_error("state file %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* A directory opens, then fails to read: it is no state either. */
    if (!S_ISREG(info.st_mode)) {
        close(fd);
        move_aside(path, "it is not a regular file", st);
        return 0;
    }
    if (!(f = fdopen(fd, "r"))) {
        log_error("state file %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    FILE *mem = open_memstream(&text, &size);
    char chunk[4096];
    size_t n;
    while (mem && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        fwrite(chunk, 1, n, mem);
    bool read_error = ferror(f);
    fclose(f);
    if (!mem || fclose(mem) || read_error) {
        log_error("state file %s: cannot read it", path);
        free(text);
        return -1;
    }
    if (strlen(text) == size && state_parse(text, st, err, sizeof(err)) == 0) {
        free(text);
        return 0;
    }
    if (strlen(text) != size)
        snprintf(err, sizeof(err), "it contains a NUL byte");
    free(text);
    move_aside(path, err, st);
    return 0;
}

/* mkdir -p of path's directory, 0700: the file names pods and their limits. */
static int make_parent(const char *path)
{
    char dir[4096];

    snprintf(dir, sizeof(dir), "%s", path);
    for (char *p = dir + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

int state_save(const char *path, const struct node_state *st)
{
    char tmp[4096 + 8], dir[4096];
    size_t need = state_format(st, NULL, 0) + 1;
    char *text = malloc(need);
    int fd = -1, rc = -1;

    if (!text)
        goto out;
    state_format(st, text, need);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (make_parent(path) < 0)
        goto out;
    /* Only a file made here is written: whatever is at the name (a crash's
     * leftover, or a symlink planted to have it written through) goes. */
    if (unlink(tmp) < 0 && errno != ENOENT)
        goto out;
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        goto out;
    for (size_t done = 0, len = strlen(text); done < len;) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            goto out;
        done += (size_t)w;
    }
    if (fsync(fd) < 0 || close(fd) < 0) {
        fd = -1;
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) < 0)
        goto out;
    /* The rename itself must reach the disk before we call it saved. */
    snprintf(dir, sizeof(dir), "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    rc = 0;
out:
    if (rc)
        log_error("cannot save the state to %s: %s: this change will not "
                  "survive a restart",
                  path, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}
