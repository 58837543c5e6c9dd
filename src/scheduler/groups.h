/* groups.h - account groups: pods that draw on one budget on one GPU.
 *
 * Pure like pods.h: no I/O, no clock. A DRA ResourceClaim reserved for
 * several pods is one budget they share (docs/dra.md): its memory and
 * compute hold for those pods together on the claim's GPU, so one pod may
 * use what the others leave idle. The operator (nvsharectl set group, or
 * the DRA driver) names the group, its GPU, its member pods and its
 * limits; the scheduler bills the members' clients on that GPU to the
 * group's account (accounts.h) instead of each pod's own, and keeps the
 * pods' own accounts everywhere else. A pod is in at most one group per
 * GPU: two overlapping budgets would leave no single limit to enforce. */
#ifndef NVSHARE_GROUPS_H
#define NVSHARE_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pods.h" /* struct pod_id */

#define GROUP_MAX 32 /* groups on a node */
#define GROUP_MAX_MEMBERS PROTO_GROUP_MAX_MEMBERS
#define GROUP_NAME_MAX PROTO_GROUP_NAME_MAX

struct group {
    char name[GROUP_NAME_MAX];
    int gpu;          /* the scheduler's GPU index */
    uint64_t memory;  /* bytes; 0 = none */
    uint8_t core;     /* percent; 0 = none */
    uint8_t priority; /* enum priority_class; 0 = normal */
    int n_members;
    struct pod_id members[GROUP_MAX_MEMBERS];
};

struct group_table {
    struct group list[GROUP_MAX];
    int n;
};

/* Whether name is a group's name: 1 to GROUP_NAME_MAX - 1 bytes of
 * letters, digits, '-', '_' and '.' (a claim UID, a state-file word). */
bool group_name_valid(const char *name);

/* Adds g, or replaces the group of its name. 0, or -1 with err: a bad
 * name, no member or too many, a priority out of range, a member twice, a member already in
 * another group on g's GPU, a core limit over 100, the table full. */
int groups_set(struct group_table *t, const struct group *g, char *err,
               size_t err_len);

/* Removes the group named name: whether there was one. */
bool groups_remove(struct group_table *t, const char *name);

/* The group pod is a member of on gpu, or -1. */
int groups_of(const struct group_table *t, const struct pod_id *pod, int gpu);

/* The group named name, or -1. */
int groups_find(const struct group_table *t, const char *name);
/* The highest priority class of a group (0: none). */
unsigned groups_top_class(const struct group_table *t);

#endif
