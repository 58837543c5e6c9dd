/* quota.h - GPU memory quotas per pod: the scheduler as the single arbiter.
 *
 * Pure like policy.h: no I/O, no clock, and no allocation but in quota_grow()
 * and in the action lists; functions take the time and return actions. Per GPU and account (pod) there is a quota; per client the bytes
 * it "holds": what it has allocated plus credit it may still allocate
 * without asking. The sum of holdings of a pod never grows beyond its
 * quota: a request is granted only if it fits, so two processes of a pod
 * allocating at the same moment cannot both get the last bytes.
 *
 * A request that does not fit while other processes of the pod sit on
 * unused credit is parked: those processes are asked to give their credit
 * back (RECLAIM) and the request is decided again as their returns arrive,
 * or refused when the reclaim deadline passes. A client that leaves gives
 * back everything it held.
 *
 * Lowering a quota below what a pod holds revokes nothing: requests are
 * refused until frees bring the pod under it. */
#ifndef NVSHARE_QUOTA_H
#define NVSHARE_QUOTA_H

#include <stdbool.h>
#include <stdint.h>

#include "policy.h" /* POLICY_MAX_GPUS */

#define QUOTA_MAX_PARKED 64
#define QUOTA_RECLAIM_TIMEOUT_NS 100000000ull /* 100 ms */

struct quota_client {
    bool present;
    int account;
    uint64_t held;      /* allocated + credit, as granted */
    uint64_t allocated; /* as last reported */
};

struct quota_account {
    uint64_t limit;   /* bytes; 0 = none */
    uint64_t peak;    /* highest allocated total seen */
    uint64_t refused; /* requests refused */
};

struct quota_request {
    int gpu, client;
    uint32_t seq;
    uint64_t need, want;
    uint64_t deadline;
};

struct quota_gpu {
    struct quota_client *clients;   /* by client slot */
    struct quota_account *accounts; /* by account */
};

struct quota {
    int n_gpus;
    int table_size; /* of every gpu's tables: quota_grow() */
    struct quota_gpu gpus[POLICY_MAX_GPUS];
    struct quota_request parked[QUOTA_MAX_PARKED];
    int n_parked;
};

enum quota_action_kind {
    QUOTA_GRANT,   /* MEM_GRANT(seq, bytes) to client */
    QUOTA_REFUSE,  /* MEM_GRANT(seq, 0) to client */
    QUOTA_RECLAIM, /* MEM_RECLAIM to client: return unused credit */
    QUOTA_LIMIT,   /* UPDATE_LIMIT to client: its pod's quota on gpu */
};

struct quota_action {
    enum quota_action_kind kind;
    int gpu, client;
    uint32_t seq;
    uint64_t bytes;    /* granted (QUOTA_GRANT) */
    uint64_t quota;    /* the pod's quota on gpu (GRANT, REFUSE, LIMIT) */
    uint64_t pod_held; /* what the pod holds there, this action included */
};

/* A call may emit one action per client of a pod (quota_set_limit, the
 * RECLAIMs of quota_request), so the list grows as it fills: start it
 * zeroed, and free it with quota_actions_free() once carried out. An
 * action that finds no memory is dropped and counted in `lost`. */
struct quota_actions {
    int n, size;
    unsigned lost;
    struct quota_action *list;
};

void quota_actions_free(struct quota_actions *out);

void quota_init(struct quota *q, int n_gpus);

/* Client slots and account numbers are below the table size, which only
 * grows (see policy_grow()). Returns false, q unchanged, if memory runs
 * out. quota_destroy() frees the tables. */
bool quota_grow(struct quota *q, int table_size);
void quota_destroy(struct quota *q);

/* A client registered for gpu, billed to account. It is told its pod's
 * quota there, even when there is none: that tells it the scheduler
 * arbitrates its allocations from now on. */
void quota_join(struct quota *q, int gpu, int client, int account,
                struct quota_actions *out);

/* The client needs `need` more bytes than it holds to allocate, and would
 * like `want` (>= need) to keep some credit. allocated: its current total. */
void quota_request(struct quota *q, int gpu, int client, uint32_t seq,
                   uint64_t need, uint64_t want, uint64_t allocated,
                   uint64_t now, struct quota_actions *out);

/* Refuses a request for a reason outside the pod's quota (the daemon's
 * oversubscription limits), counted with the pod's refusals. */
void quota_refuse(struct quota *q, int gpu, int client, uint32_t seq,
                  struct quota_actions *out);

/* The client gives back `bytes` of what it holds and reports its total. */
void quota_return(struct quota *q, int gpu, int client, uint64_t bytes,
                  uint64_t allocated, uint64_t now, struct quota_actions *out);

/* The client is billed to account on gpu from now on (its pod joined or
 * left a group, groups.h): what it holds goes with it. It and the other
 * clients of both accounts there are told their quota and holding anew. */
void quota_move(struct quota *q, int gpu, int client, int account,
                struct quota_actions *out);

/* The client reports what it has allocated. It holds at least that: after
 * a (re)registration this is how the scheduler learns what a process
 * already has. Grants in flight are never undone by a report. */
void quota_report(struct quota *q, int gpu, int client, uint64_t allocated);

/* The client left: everything it held goes back to its pod. */
void quota_leave(struct quota *q, int client, uint64_t now,
                 struct quota_actions *out);

/* Sets an account's quota on gpu (0: none) and tells its clients there.
 * One GPU per call bounds the actions by the number of clients. */
void quota_set_limit(struct quota *q, int gpu, int account, uint64_t limit,
                     struct quota_actions *out);

/* Refuses parked requests whose reclaim deadline passed. Returns the next
 * deadline (0: none). */
uint64_t quota_tick(struct quota *q, uint64_t now, struct quota_actions *out);

/* Forgets an account before its number is reused. */
void quota_reset_account(struct quota *q, int account);

/* The pod's totals on gpu: bytes held (quota usage) and allocated. */
uint64_t quota_account_held(const struct quota *q, int gpu, int account);
uint64_t quota_account_allocated(const struct quota *q, int gpu, int account);

#endif
