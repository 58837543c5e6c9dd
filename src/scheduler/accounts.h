/* accounts.h - pods as billing and limit units.
 *
 * Pure like policy.h and quota.h: no I/O, no clock. Functions change the
 * accounts and return actions (what the policy and the quota arbiter must
 * be told); clients_actions.c carries them out, so limits flow one way:
 * accounts -> policy / quota -> clients_actions.c -> messages. */
#ifndef NVSHARE_ACCOUNTS_H
#define NVSHARE_ACCOUNTS_H

#include <stdbool.h>
#include <stdint.h>

#include "groups.h"   /* struct group */
#include "pods.h"     /* struct pod_id */
#include "protocol.h" /* LIMIT_* */

/* A limit as each source sets it, 0 = not set. The one in force is, in
 * this order, the operator's (nvsharectl: on a Kubernetes pod an override
 * that the pod's next annotation change ends, pods_learn), the pod's
 * annotation, its resource request (memory only); a tenant's declaration
 * can only lower it, never raise or remove it; with none, no limit. */
struct limit_setting {
    uint64_t declared;   /* lowest a client of the pod declared */
    uint64_t runtime;    /* the operator's */
    uint64_t annotation; /* nvshare.com/gpu-core-limit, gpu-memory-limit */
    uint64_t request;    /* the nvshare.com/gpu-memory request */
};

/* What a pod is billed and limited as: one account per share of it
 * (pods.h: pod_member), which is the whole pod unless the operator set it
 * and named no owner. Clients without a pod are an account each. A group
 * (groups.h) is an account too, which its members' clients are billed to
 * on its GPU, and their pods' own accounts elsewhere. Indexes
 * are the policy's and the quota's account numbers; there are as many
 * accounts as client slots, so attaching always finds one. */
struct account {
    int refs;                   /* registered clients (a group's: clients
                                  billed to it); 0 = free */
    struct pod_id pod;          /* empty: a client on its own, or a group */
    char group[GROUP_NAME_MAX]; /* a group's name; "": not a group */
    uint32_t member;            /* with a pod: whose share of it (pod_member) */
    struct limit_setting core;  /* percent */
    struct limit_setting memory;    /* bytes per GPU */
    struct limit_setting priority;  /* enum priority_class (no request) */
    uint64_t min_share;             /* the operator's floor, percent */
    struct limit_setting idle_swap; /* enum idle_swap (runtime, annotation) */
    /* The operator's limits on one GPU (pods.h), by GPU index: on that GPU
     * they take the place of core.runtime and memory.runtime; 0 = none. */
    uint64_t gpu_core[PROTO_MAX_GPUS];
    uint64_t gpu_memory[PROTO_MAX_GPUS];
};

/* What a registering client is billed as and limited to. */
struct account_claim {
    struct pod_id pod;          /* empty: bill it on its own */
    uint32_t member;            /* with a pod: pod_member of the client */
    uint64_t core_declared;     /* percent; 0 = none (or not honoured) */
    uint64_t memory_declared;   /* bytes; 0 = none (or not honoured) */
    uint64_t priority_declared; /* enum priority_class; 0 = none */
    const struct pod *record;   /* the pod's record (pods.h), or NULL */
};

enum account_action_kind {
    ACCOUNT_RESET,  /* forget the account's usage: its number is new or freed */
    ACCOUNT_LIMITS, /* the effective limits are core_limit and memory_limit,
                       GPU by GPU */
};

struct account_action {
    enum account_action_kind kind;
    int account;
    uint8_t core_limit[PROTO_MAX_GPUS];    /* by GPU: percent; 0 = none */
    uint64_t memory_limit[PROTO_MAX_GPUS]; /* by GPU: bytes; 0 = none */
    unsigned priority;                     /* enum priority_class in force */
    unsigned min_share;                    /* percent; 0 = none */
    bool idle_swap; /* its idle memory may be swapped out */
};

struct account_actions {
    int n;
    struct account_action list[2]; /* the most one call emits */
};

/* A client registered: returns its account (its share of the pod, or a
 * new one). A declaration lower than the share's declared limit lowers it
 * for the share.
 * n_accounts is the table's size: it holds one more than the registered
 * clients, so attaching always finds one. */
int account_attach(struct account *accounts, int n_accounts,
                   const struct account_claim *claim,
                   struct account_actions *out);

/* The pod's first account (a Kubernetes pod has one), or -1 when none of
 * its clients is registered. */
int account_of_pod(const struct account *accounts, int n_accounts,
                   const struct pod_id *pod);

/* A client is billed to group g on its GPU: returns the group's account
 * (found by name, or a new one whose limits are g's on its GPU). n_accounts
 * as account_attach's: the caller makes sure a free account is left. */
int account_attach_group(struct account *accounts, int n_accounts,
                         const struct group *g, struct account_actions *out);

/* The group's account, or -1 when none of its clients is registered. */
int account_of_group(const struct account *accounts, int n_accounts,
                     const char *name);

/* The group's limits changed: they become its account's. */
void account_set_group(struct account *accounts, int account,
                       const struct group *g, struct account_actions *out);

/* A registered client left (or is billed elsewhere on a GPU: its group's
 * account); the account is freed with its last client. */
void account_detach(struct account *accounts, int account,
                    struct account_actions *out);

/* Sets one of the operator settings of a client on its own (pods.h), a
 * core or memory limit on gpu (-1: the one for every GPU); 0 removes it,
 * leaving the declared one. A pod's come from its record:
 * account_set_pod. */
void account_set_runtime(struct account *accounts, int account,
                         enum pod_setting which, int gpu, uint64_t value,
                         struct account_actions *out);

/* The pod's record changed (the operator's settings, the pod watcher's
 * facts, a deleted pod): its operator's, annotation and request limits
 * become the account's, its privileges if the share has them
 * (pod_privileged); record NULL clears them. */
void account_set_pod(struct account *accounts, int account,
                     const struct pod *record, struct account_actions *out);

/* The limit in force, by the order of struct limit_setting, and where it
 * comes from (enum limit_source). */
uint64_t limit_effective(const struct limit_setting *l, uint8_t *source);
/* The account's core limit (percent) or memory limit (bytes) in force on
 * gpu, and where it comes from: as limit_effective, the operator's limit
 * on that GPU, if any, taking the place of the one for every GPU; gpu -1:
 * the one for every GPU. 0: none. */
uint64_t account_core_on(const struct account *a, int gpu, uint8_t *source);
uint64_t account_memory_on(const struct account *a, int gpu, uint8_t *source);

/* The priority class in force: the operator's, else the annotation's, else
 * normal; a declaration (NVSHARE_PRIORITY) can only lower it. */
unsigned priority_effective(const struct limit_setting *l, uint8_t *source);

/* Idle reclaim in force (enum idle_swap, never unset): the operator's,
 * else the annotation's, else on. */
unsigned idle_swap_effective(const struct limit_setting *l, uint8_t *source);

#endif
