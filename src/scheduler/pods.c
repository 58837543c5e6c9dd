/* pods.c - see pods.h. */
#include "pods.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool pod_id_empty(const struct pod_id *id)
{
    return !id->uid[0] && !id->pod_name[0];
}

bool pod_id_equal(const struct pod_id *a, const struct pod_id *b)
{
    /* A Kubernetes pod is its UID, whatever it is called. */
    if (a->uid[0] || b->uid[0])
        return !strcmp(a->uid, b->uid);
    return !strcmp(a->pod_name, b->pod_name) &&
           !strcmp(a->pod_namespace, b->pod_namespace);
}

void pod_id_default_namespace(struct pod_id *id)
{
    if (id->pod_name[0] && !id->pod_namespace[0])
        snprintf(id->pod_namespace, sizeof(id->pod_namespace),
                 POD_DEFAULT_NAMESPACE);
}

void pod_id_format(const struct pod_id *id, char *buf, size_t len)
{
    if (id->uid[0] && !id->pod_name[0])
        snprintf(buf, len, "uid:%s", id->uid);
    else if (id->pod_namespace[0])
        snprintf(buf, len, "%s/%s", id->pod_namespace, id->pod_name);
    else
        snprintf(buf, len, "%s", id->pod_name[0] ? id->pod_name : "-");
}

bool pod_configured(const struct pod *p)
{
    for (int g = 0; g < PROTO_MAX_GPUS; g++)
        if (p->gpu_core_limit[g] || p->gpu_memory_limit[g])
            return true;
    return p->core_limit || p->memory_limit || p->priority || p->min_share ||
           p->idle_swap || p->owner_named;
}

/* FNV-1a over what pod_id_equal compares: the UID of a Kubernetes pod,
 * else the namespace and name. */
static size_t id_hash(const struct pod_id *id)
{
    uint64_t h = 14695981039346656037ull;
    const char *parts[2] = {id->uid, NULL};

    if (!id->uid[0]) {
        parts[0] = id->pod_namespace;
        parts[1] = id->pod_name;
    }
    for (int i = 0; i < 2 && parts[i]; i++)
        for (const unsigned char *c = (const unsigned char *)parts[i];; c++) {
            h = (h ^ *c) * 1099511628211ull;
            if (!*c)
                break;
        }
    return (size_t)h;
}

/* The index slot that holds id, or the empty one where it would go. */
static size_t slot_of(const struct pod_table *t, const struct pod_id *id)
{
    size_t mask = t->index_cap - 1, s = id_hash(id) & mask;

    while (t->index[s] && !pod_id_equal(&t->list[t->index[s] - 1].id, id))
        s = (s + 1) & mask;
    return s;
}

/* Makes the index room for one more pod; false when out of memory. */
static bool index_reserve(struct pod_table *t)
{
    size_t cap = t->index_cap ? t->index_cap : 32;

    while (cap < 2 * (t->n + 1))
        cap *= 2;
    if (cap == t->index_cap)
        return true;
    size_t *index = calloc(cap, sizeof(*index));
    if (!index)
        return false;
    free(t->index);
    t->index = index;
    t->index_cap = cap;
    for (size_t i = 0; i < t->n; i++)
        t->index[slot_of(t, &t->list[i].id)] = i + 1;
    return true;
}

struct pod *pods_find(struct pod_table *t, const struct pod_id *id)
{
    size_t s;

    if (!t->index_cap)
        return NULL;
    s = slot_of(t, id);
    return t->index[s] ? &t->list[t->index[s] - 1] : NULL;
}

struct pod *pods_get(struct pod_table *t, const struct pod_id *id)
{
    struct pod *p = pods_find(t, id);

    if (p)
        return p;
    if (!index_reserve(t))
        return NULL;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        struct pod *list = realloc(t->list, cap * sizeof(*list));
        if (!list)
            return NULL;
        t->list = list;
        t->cap = cap;
    }
    p = &t->list[t->n];
    memset(p, 0, sizeof(*p));
    p->id = *id;
    t->index[slot_of(t, id)] = ++t->n;
    return p;
}

/* Empties slot s, moving back the entries after it that the hole would
 * hide (linear probing's deletion, without tombstones). */
static void index_remove(struct pod_table *t, size_t s)
{
    size_t mask = t->index_cap - 1;

    for (size_t k = (s + 1) & mask; t->index[k]; k = (k + 1) & mask) {
        size_t home = id_hash(&t->list[t->index[k] - 1].id) & mask;
        /* The entry at k may fill the hole unless its home is in (s, k]. */
        if (((k - home) & mask) >= ((k - s) & mask)) {
            t->index[s] = t->index[k];
            s = k;
        }
    }
    t->index[s] = 0;
}

/* Forgets p if nothing holds it: no client, no limit, not listed. The last
 * record takes its place. */
static bool forget_if_unused(struct pod_table *t, struct pod *p)
{
    size_t at = (size_t)(p - t->list);

    if (p->clients > 0 || pod_configured(p) || p->listed)
        return false;
    index_remove(t, slot_of(t, &p->id));
    if (at != --t->n) {
        t->index[slot_of(t, &t->list[t->n].id)] = at + 1;
        *p = t->list[t->n];
    }
    return true;
}

int pods_join(struct pod_table *t, const struct pod_id *id, uint32_t uid,
              struct pod **out, uint32_t *owner)
{
    struct pod *p = pods_get(t, id);

    *owner = uid;
    if (!p)
        return -1;
    if (!id->uid[0]) {
        if (!p->bound && !pod_configured(p)) {
            p->bound = true;
            p->owner = uid;
        } else if (p->bound && p->owner != uid && uid != 0) {
            *owner = p->owner;
            return -1;
        }
    }
    p->clients++;
    *out = p;
    return 0;
}

uint32_t pod_member(const struct pod *p, uint32_t uid)
{
    if (p->id.uid[0])
        return 0;
    return p->bound ? p->owner : uid;
}

bool pod_privileged(const struct pod *p, uint32_t member)
{
    return p->id.uid[0] || member == 0 || (p->owner_named && p->owner == member);
}

void pods_leave(struct pod_table *t, const struct pod_id *id)
{
    struct pod *p = pods_find(t, id);

    if (p && p->clients > 0) {
        p->clients--;
        forget_if_unused(t, p);
    }
}

/* The class the record gives, by priority_effective's rule (accounts.c,
 * above this file): the operator's, else the annotation's. */
static unsigned class_of(const struct pod *p)
{
    uint64_t cls = p->priority ? p->priority : p->annotation_priority;

    return cls > PRIORITY_HIGHEST ? PRIORITY_HIGHEST : (unsigned)cls;
}

/* p's class was `before`; it is class_of(p) now. */
static void reclass(struct pod_table *t, unsigned before, const struct pod *p)
{
    if (before)
        t->by_class[before]--;
    if (class_of(p))
        t->by_class[class_of(p)]++;
}

unsigned pods_top_class(const struct pod_table *t)
{
    for (unsigned cls = PRIORITY_HIGHEST; cls > 0; cls--)
        if (t->by_class[cls])
            return cls;
    return 0;
}

struct pod *pods_set_limit(struct pod_table *t, const struct pod_id *id,
                           enum pod_setting which, int gpu, uint64_t value,
                           bool *failed)
{
    struct pod *p = value ? pods_get(t, id) : pods_find(t, id);

    *failed = value && !p;
    if (!p)
        return NULL;
    switch (which) {
    case POD_CORE_LIMIT:
        if (gpu >= 0)
            p->gpu_core_limit[gpu] = (uint8_t)value;
        else
            p->core_limit = value;
        break;
    case POD_MEMORY_LIMIT:
        if (gpu >= 0)
            p->gpu_memory_limit[gpu] = value;
        else
            p->memory_limit = value;
        break;
    case POD_PRIORITY: {
        unsigned before = class_of(p);
        p->priority = value;
        reclass(t, before, p);
        break;
    }
    case POD_MIN_SHARE:
        p->min_share = value;
        break;
    case POD_OWNER:
        p->bound = p->owner_named = value != 0;
        p->owner = (uint32_t)value;
        break;
    case POD_IDLE_SWAP:
        p->idle_swap = value;
        break;
    }
    /* Whoever declared the pod first may not be who it was set for: a
     * first join's binding ends with the operator's first setting. */
    if (pod_configured(p) && !p->owner_named)
        p->bound = false;
    return forget_if_unused(t, p) ? NULL : p;
}

/* An annotation's new value: the operator's override ends if the value
 * changed (a record's first facts change nothing). */
static void learn(uint64_t *annotation, uint64_t value, uint64_t *operator_limit,
                  bool first, unsigned bit, unsigned *dropped)
{
    if (!first && value != *annotation && *operator_limit) {
        *operator_limit = 0;
        *dropped |= bit;
    }
    *annotation = value;
}

struct pod *pods_learn(struct pod_table *t, const struct msg_pod_facts *f,
                       unsigned *dropped)
{
    struct pod_id id = {0};
    struct pod *p;

    *dropped = 0;
    snprintf(id.uid, sizeof(id.uid), "%s", f->pod_uid);
    if (!(p = pods_get(t, &id)))
        return NULL;
    unsigned before = class_of(p);
    snprintf(p->id.pod_namespace, sizeof(p->id.pod_namespace), "%s",
             f->pod_namespace);
    snprintf(p->id.pod_name, sizeof(p->id.pod_name), "%s", f->pod_name);
    if (!(f->unreadable & POD_FACT_CORE_UNREADABLE))
        learn(&p->annotation_core, f->core_limit, &p->core_limit, !p->listed,
              POD_FACT_CORE_UNREADABLE, dropped);
    if (!(f->unreadable & POD_FACT_MEMORY_UNREADABLE))
        learn(&p->annotation_memory, f->memory_limit, &p->memory_limit,
              !p->listed, POD_FACT_MEMORY_UNREADABLE, dropped);
    if (!(f->unreadable & POD_FACT_PRIORITY_UNREADABLE))
        learn(&p->annotation_priority, f->priority, &p->priority, !p->listed,
              POD_FACT_PRIORITY_UNREADABLE, dropped);
    if (!(f->unreadable & POD_FACT_IDLE_SWAP_UNREADABLE))
        learn(&p->annotation_idle_swap, f->idle_swap, &p->idle_swap, !p->listed,
              POD_FACT_IDLE_SWAP_UNREADABLE, dropped);
    p->memory_request = f->memory_request;
    p->listed = true;
    p->stale = false;
    reclass(t, before, p);
    return p;
}

bool pods_gone(struct pod_table *t, const struct pod_id *id)
{
    struct pod *p = pods_find(t, id);
    bool configured;

    if (!p)
        return false;
    configured = pod_configured(p);
    unsigned before = class_of(p);
    p->core_limit = p->memory_limit = p->priority = p->min_share = 0;
    p->idle_swap = 0;
    memset(p->gpu_core_limit, 0, sizeof(p->gpu_core_limit));
    memset(p->gpu_memory_limit, 0, sizeof(p->gpu_memory_limit));
    p->annotation_core = p->annotation_memory = p->memory_request = 0;
    p->annotation_priority = p->annotation_idle_swap = 0;
    p->listed = p->stale = false;
    reclass(t, before, p);
    forget_if_unused(t, p);
    return configured;
}

void pods_mark_stale(struct pod_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        t->list[i].stale = t->list[i].id.uid[0] != '\0';
}

bool pod_gone_after_relist(const struct pod *p)
{
    return p->stale && (p->listed || p->clients == 0);
}

void pods_free(struct pod_table *t)
{
    free(t->list);
    free(t->index);
    *t = (struct pod_table){0};
}
