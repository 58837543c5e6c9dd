/* pods.h - pods as the operator knows them: identity, owner and limits.
 *
 * Pure like accounts.h: no I/O, no clock. A pod is named by the kernel or
 * by the operator, never by a tenant alone:
 *   - on a Kubernetes node, by the pod UID in the client's cgroup
 *     (identity.h); its namespace and name come from the control plane;
 *   - on a plain host, by the namespace/name a client declares. Its owner
 *     is the uid the operator named (nvsharectl set owner); a pod the
 *     operator set nothing for is bound to the uid that first declared it.
 *     A client of another uid (root aside) cannot join, use or change a
 *     pod that has an owner. A pod with the operator's settings and no
 *     owner named binds no one: each uid that declares it is a share of
 *     its own, held to the pod's limits (they only restrict), and only
 *     root's share gets its privileges (a priority above normal, the
 *     floor), so that whoever declares it first takes nothing from the
 *     processes it was set for.
 * Limits, the priority class and idle reclaim here come from the operator
 * (nvsharectl) and, on a Kubernetes node, from the API server through the
 * pod watcher (its annotations and gpu-memory request); the floor (min share) from the
 * operator only. A record lives while the pod has clients, an operator's
 * setting or the watcher lists it; records with an operator's setting are
 * what the state file persists (state.h), so they can be set
 * before the pod's first process connects and survive restarts. The
 * watcher's facts are not persisted: after a restart it lists them again. */
#ifndef NVSHARE_PODS_H
#define NVSHARE_PODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h" /* PROTO_NAME_MAX, PROTO_POD_UID_MAX */

struct pod_id {
    char uid[PROTO_POD_UID_MAX];        /* Kubernetes pod UID, or "" */
    char pod_namespace[PROTO_NAME_MAX]; /* plain host: as declared */
    char pod_name[PROTO_NAME_MAX];      /* "" with a uid: not known yet */
};

struct pod {
    struct pod_id id;
    bool bound;            /* plain host: owner is set */
    bool owner_named;      /* by the operator, not by a first join */
    uint32_t owner;        /* the uid allowed to join (root always may) */
    uint64_t core_limit;   /* the operator's, percent; 0 = none */
    uint64_t memory_limit; /* the operator's, bytes per GPU; 0 = none */
    uint64_t priority;     /* the operator's, enum priority_class; 0 = none */
    uint64_t min_share;    /* the operator's floor, percent; 0 = none */
    uint64_t idle_swap;    /* the operator's, enum idle_swap; 0 = none */
    /* The operator's limits on one GPU, by the scheduler's GPU index (0 =
     * none: core_limit and memory_limit hold there). A DRA claim gives a
     * pod a share of each of its GPUs, which need not be alike. They hold
     * until removed or the pod is deleted: no annotation describes them. */
    uint8_t gpu_core_limit[PROTO_MAX_GPUS];    /* percent */
    uint64_t gpu_memory_limit[PROTO_MAX_GPUS]; /* bytes */
    int clients; /* registered clients billed to it */
    /* From the API server (Kubernetes pods only), 0 = none. */
    bool listed;                   /* the pod watcher named it */
    bool stale;                    /* a re-list began and has not named it */
    uint64_t annotation_core;      /* nvshare.com/gpu-core-limit, percent */
    uint64_t annotation_memory;    /* nvshare.com/gpu-memory-limit, bytes */
    uint64_t memory_request;       /* nvshare.com/gpu-memory, bytes per GPU */
    uint64_t annotation_priority;  /* nvshare.com/priority, priority_class */
    uint64_t annotation_idle_swap; /* nvshare.com/idle-swap, enum idle_swap */
};

/* What the operator sets per pod. */
enum pod_setting {
    POD_CORE_LIMIT,
    POD_MEMORY_LIMIT,
    POD_PRIORITY,
    POD_MIN_SHARE,
    POD_OWNER, /* a plain host's pod: the uid it belongs to */
    POD_IDLE_SWAP,
};

struct pod_table {
    struct pod *list;
    size_t n, cap;
    /* Open addressing over the ids (a node may hold 100,000 pods): a
     * slot holds a position in list + 1, 0 when empty; a power of two, at
     * least twice n. */
    size_t *index;
    size_t index_cap;
    /* Records by class (the operator's priority, else the annotation's),
     * so that the highest is known without a walk. */
    size_t by_class[PRIORITY_HIGHEST + 1];
};

/* Whether id names a pod at all (a client that declares none is billed on
 * its own). */
bool pod_id_empty(const struct pod_id *id);
bool pod_id_equal(const struct pod_id *a, const struct pod_id *b);
/* A pod named without a namespace is in "default", as in Kubernetes: one
 * pod, whichever way a process, nvsharectl or the state file names it. */
#define POD_DEFAULT_NAMESPACE "default"
void pod_id_default_namespace(struct pod_id *id);
/* "namespace/name", "name" or "uid:<pod-uid>", as status and logs show it. */
void pod_id_format(const struct pod_id *id, char *buf, size_t len);

struct pod *pods_find(struct pod_table *t, const struct pod_id *id);
/* The highest priority class the operator or an annotation gave a pod
 * (0: none), whether or not a process of it runs yet. */
unsigned pods_top_class(const struct pod_table *t);
/* The pod's record, made (unbound, no limits) if there is none; NULL when
 * out of memory. */
struct pod *pods_get(struct pod_table *t, const struct pod_id *id);

/* A client of uid registers for pod id: 0 and its record (a pod without
 * the operator's settings is bound to uid if it was not bound yet), or -1
 * if the pod is bound to another uid (*owner says which) or memory ran out
 * (*owner = uid). Kubernetes pods (a uid from the cgroup) are never bound:
 * the kernel names them. */
int pods_join(struct pod_table *t, const struct pod_id *id, uint32_t uid,
              struct pod **out, uint32_t *owner);

/* Whose share of pod p a client of uid is billed with (accounts.h): the
 * owner's with a bound pod, else its own uid's; 0 for a Kubernetes pod,
 * which is one share whoever runs in it. */
uint32_t pod_member(const struct pod *p, uint32_t uid);

/* Whether the share of member (pod_member) gets the pod's privileges: a
 * priority above normal, the floor, idle memory kept on the GPU (idle-swap
 * off). Limits hold for every share. */
bool pod_privileged(const struct pod *p, uint32_t member);

/* A client of the pod left: a record with no clients and no limit is
 * forgotten, binding included, since nothing persists it. */
void pods_leave(struct pod_table *t, const struct pod_id *id);

/* Sets one of the operator's settings (core limit in percent, memory limit
 * in bytes, priority class, floor in percent, owner uid, idle reclaim),
 * 0 removing it, on gpu for a core or memory limit (-1: the one for every
 * GPU; the caller checks both the index and that the setting has one); a
 * record left with no clients and no setting is forgotten, and one given
 * its first setting drops a binding made by a first join. Returns the
 * record, or NULL when it is forgotten or memory ran out (*failed). */
struct pod *pods_set_limit(struct pod_table *t, const struct pod_id *id,
                           enum pod_setting which, int gpu, uint64_t value,
                           bool *failed);

/* The pod watcher's facts about a Kubernetes pod: its name, annotations
 * and request, unreadable annotations left as they were. An annotation
 * that changes ends the operator's override of that limit (nvsharectl set
 * holds until the pod's next annotation change); *dropped has
 * POD_FACT_CORE_UNREADABLE / POD_FACT_MEMORY_UNREADABLE set for the
 * overrides that ended. The first facts about a record (after a restart,
 * its state) end none. NULL when memory ran out. */
struct pod *pods_learn(struct pod_table *t, const struct msg_pod_facts *f,
                       unsigned *dropped);

/* The pod was deleted: its annotations, request and operator's limits go
 * (its UID never comes back), the record with them unless clients are
 * still billed to it. Returns whether it had an operator's limit, which
 * the state file held. */
bool pods_gone(struct pod_table *t, const struct pod_id *id);

/* A re-list begins: every Kubernetes pod is stale until the watcher names
 * it again. */
void pods_mark_stale(struct pod_table *t);

/* Whether a re-list that ended without naming p means p was deleted: it
 * is stale, and the watcher named it before or no process of it is
 * connected. A connected pod the watcher never named (no nvshare.com/
 * annotation or resource) exists all the same and keeps the operator's
 * limits. */
bool pod_gone_after_relist(const struct pod *p);

/* Whether the record is part of the persisted state. */
bool pod_configured(const struct pod *p);

void pods_free(struct pod_table *t);

#endif
