/* policy.h - who holds each GPU, who waits, and when to preempt.
 *
 * This module is pure: no I/O, no clock, no allocation. Every function takes
 * the state and the current time and writes the decisions it made into a
 * struct policy_actions for the daemon to carry out. Unit tests drive it with
 * synthetic clocks; the daemon only feeds it events.
 *
 * Model (per GPU, each independent of the others):
 *  - At most one holder. Requests queue in FCFS order.
 *  - A holder keeps the GPU while nobody waits. Once someone waits and the
 *    holder has had it for a time quantum (TQ), it is asked to give it back
 *    (DROP). It answers after draining its submitted work (release); the
 *    first waiter is granted the GPU at once.
 *  - A holder that does not answer a DROP within the drain timeout is
 *    revoked, so that one stuck process cannot stall everyone.
 *  - Leases number the grants of a GPU: a release that names an old lease
 *    (it crossed a DROP on the wire) is ignored.
 *  - Anti-thrashing off: nobody holds or waits, every client runs freely. */
#ifndef NVSHARE_POLICY_H
#define NVSHARE_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#define POLICY_MAX_GPUS 32
#define POLICY_MAX_CLIENTS 512

enum member_state {
    MEMBER_IDLE = 0, /* values match enum client_gpu_state in protocol.h */
    MEMBER_WAITING,
    MEMBER_HOLDING,
    MEMBER_DRAINING,
};

struct member {
    bool present;      /* the client uses this GPU */
    uint8_t state;     /* enum member_state */
    uint64_t since;    /* when state was entered */
    uint64_t held_ns;  /* completed holds; see policy_held_ns() */
    uint64_t grants;
    uint64_t last_drain_ns;
};

struct gpu_sched {
    int holder;            /* client slot, -1 if free */
    uint32_t lease;        /* of the current (or last) grant */
    uint64_t granted_at;
    uint64_t drop_sent_at; /* valid while the holder is draining */
    int queue[POLICY_MAX_CLIENTS];
    int n_waiting;
    uint64_t switches;     /* grants that followed another holder */
    struct member members[POLICY_MAX_CLIENTS];
};

struct policy {
    uint64_t tq_ns;
    uint64_t drain_timeout_ns;
    bool anti_thrash;
    int n_gpus;
    struct gpu_sched gpus[POLICY_MAX_GPUS];
};

enum action_kind {
    ACTION_GRANT,  /* send LOCK_OK(gpu, lease) to client */
    ACTION_DROP,   /* send DROP_LOCK(gpu, lease) to client */
    ACTION_REVOKE, /* client ignored DROP past the drain timeout */
};

struct policy_action {
    enum action_kind kind;
    int gpu;
    int client;
    uint32_t lease;
};

struct policy_actions {
    int n;
    struct policy_action list[2 * POLICY_MAX_GPUS + 2];
};

void policy_init(struct policy *p, int n_gpus, uint64_t tq_ns,
                 uint64_t drain_timeout_ns);

/* Membership: a client registered for a GPU (before any request). */
void policy_join(struct policy *p, int gpu, int client, uint64_t now);

/* The client wants gpu. Grants at once if it is free and nobody waits. */
void policy_request(struct policy *p, int gpu, int client, uint64_t now,
                    struct policy_actions *out);

/* The client drained and gave gpu back under lease. */
void policy_release(struct policy *p, int gpu, int client, uint32_t lease,
                    uint64_t drain_ns, uint64_t now, struct policy_actions *out);

/* The client disconnected or died: it leaves every GPU; locks pass on. */
void policy_leave(struct policy *p, int client, uint64_t now,
                  struct policy_actions *out);

/* Preemptions and revocations that are due. Returns the next time at which
 * policy_tick has something to do (0: nothing pending). The daemon calls it
 * after every batch of events and when that time comes. */
uint64_t policy_tick(struct policy *p, uint64_t now, struct policy_actions *out);

/* Settings. A new TQ applies to the current holder too, measured from its
 * grant. Switching anti-thrashing either way drops every holder and waiter:
 * the daemon tells clients (SCHED_ON/SCHED_OFF) and they start over. */
void policy_set_tq(struct policy *p, uint64_t tq_ns);
void policy_set_anti_thrash(struct policy *p, bool on, uint64_t now);

/* Total time the client has held gpu, including a hold in progress. */
uint64_t policy_held_ns(const struct policy *p, int gpu, int client,
                        uint64_t now);

#endif
