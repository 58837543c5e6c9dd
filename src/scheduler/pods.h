/* pods.h - pods as the operator knows them: identity, owner and limits.
 *
 * Pure like accounts.h: no I/O, no clock. A pod is named by the kernel or
 * by the operator, never by a tenant alone:
 *   - on a Kubernetes node, by the pod UID in the client's cgroup
 *     (identity.h); its namespace and name come from the control plane;
 *   - on a plain host, by the namespace/name a client declares, bound to
 *     the uid that first declared it: a client of another uid (root
 *     aside) cannot join, use or change that pod.
 * Limits here are the operator's (nvsharectl, later the API server). A
 * record lives while the pod has clients or a limit; records with a limit
 * are what the state file persists (state.h), so they can be set before
 * the pod's first process connects and survive restarts. */
#ifndef NVSHARE_PODS_H
#define NVSHARE_PODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h" /* PROTO_NAME_MAX, PROTO_POD_UID_MAX */

struct pod_id {
    char uid[PROTO_POD_UID_MAX];              /* Kubernetes pod UID, or "" */
    char pod_namespace[PROTO_NAME_MAX]; /* plain host: as declared */
    char pod_name[PROTO_NAME_MAX];      /* "" with a uid: not known yet */
};

struct pod {
    struct pod_id id;
    bool bound;         /* plain host: owner is set */
    uint32_t owner;     /* the uid allowed to join (root always may) */
    uint64_t core_limit;   /* percent; 0 = none */
    uint64_t memory_limit; /* bytes per GPU; 0 = none */
    int clients;           /* registered clients billed to it */
};

struct pod_table {
    struct pod *list;
    size_t n, cap;
};

/* Whether id names a pod at all (a client that declares none is billed on
 * its own). */
bool pod_id_empty(const struct pod_id *id);
bool pod_id_equal(const struct pod_id *a, const struct pod_id *b);
/* "namespace/name", "name" or "uid:<pod-uid>", as status and logs show it. */
void pod_id_format(const struct pod_id *id, char *buf, size_t len);

struct pod *pods_find(struct pod_table *t, const struct pod_id *id);
/* The pod's record, made (unbound, no limits) if there is none; NULL when
 * out of memory. */
struct pod *pods_get(struct pod_table *t, const struct pod_id *id);

/* A client of uid registers for pod id: 0 and its record (the pod is bound
 * to uid if it was not bound yet), or -1 if the pod is bound to another
 * uid (*owner says which) or memory ran out (*owner = uid). Kubernetes pods
 * (a uid from the cgroup) are never bound: the kernel names them. */
int pods_join(struct pod_table *t, const struct pod_id *id, uint32_t uid,
              struct pod **out, uint32_t *owner);

/* A client of the pod left: a record with no clients and no limit is
 * forgotten, binding included, since nothing persists it. */
void pods_leave(struct pod_table *t, const struct pod_id *id);

/* Sets the operator's core (percent) or memory (bytes) limit, 0 removing
 * it; a record left with no clients and no limit is forgotten. Returns the
 * record, or NULL when it is forgotten or memory ran out (*failed). */
struct pod *pods_set_limit(struct pod_table *t, const struct pod_id *id,
                           bool core, uint64_t value, bool *failed);

/* Whether the record is part of the persisted state. */
bool pod_configured(const struct pod *p);

void pods_free(struct pod_table *t);

#endif
