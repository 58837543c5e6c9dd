/* groups.c - see groups.h. */
#include "groups.h"

#include <stdio.h>
#include <string.h>

bool group_name_valid(const char *name)
{
    size_t n = strnlen(name, GROUP_NAME_MAX);

    if (n == 0 || n == GROUP_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

int groups_find(const struct group_table *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->list[i].name, name))
            return i;
    return -1;
}

int groups_of(const struct group_table *t, const struct pod_id *pod, int gpu)
{
    if (pod_id_empty(pod))
        return -1;
    for (int i = 0; i < t->n; i++)
        for (int m = 0; t->list[i].gpu == gpu && m < t->list[i].n_members; m++)
            if (pod_id_equal(&t->list[i].members[m], pod))
                return i;
    return -1;
}

/* Why g cannot be set beside the others of t (except the one it replaces,
 * at index self), or NULL. */
static const char *refusal(const struct group_table *t, const struct group *g,
                           int self, char *err, size_t err_len)
{
    if (!group_name_valid(g->name))
        return "a group's name is 1-63 letters, digits, '-', '_' or '.'";
    if (g->n_members < 1 || g->n_members > GROUP_MAX_MEMBERS)
        return "a group has 1-16 pods";
    if (g->core > 100)
        return "a group's core limit is 1-100 %";
    if (g->priority > PRIORITY_HIGHEST)
        return "a group's priority is a class 1-9";
    for (int m = 0; m < g->n_members; m++) {
        if (pod_id_empty(&g->members[m]))
            return "a group's member is a pod";
        for (int k = 0; k < m; k++)
            if (pod_id_equal(&g->members[k], &g->members[m]))
                return "a pod is named twice";
        int other = groups_of(t, &g->members[m], g->gpu);
        if (other >= 0 && other != self) {
            char pod[2 * PROTO_NAME_MAX + 8];
            pod_id_format(&g->members[m], pod, sizeof(pod));
            snprintf(err, err_len, "pod %s is in group %s on that GPU already",
                     pod, t->list[other].name);
            return err;
        }
    }
    if (self < 0 && t->n == GROUP_MAX)
        return "32 groups at most";
    return NULL;
}

int groups_set(struct group_table *t, const struct group *g, char *err,
               size_t err_len)
{
    int self = groups_find(t, g->name);
    const char *why = refusal(t, g, self, err, err_len);

    if (why) {
        if (why != err)
            snprintf(err, err_len, "%s", why);
        return -1;
    }
    t->list[self >= 0 ? self : t->n++] = *g;
    return 0;
}

bool groups_remove(struct group_table *t, const char *name)
{
    int i = groups_find(t, name);

    if (i < 0)
        return false;
    t->list[i] = t->list[--t->n];
    return true;
}

unsigned groups_top_class(const struct group_table *t)
{
    unsigned top = 0;

    for (int i = 0; i < t->n; i++)
        if (t->list[i].priority > top)
            top = t->list[i].priority;
    return top;
}
