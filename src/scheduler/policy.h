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
 *  - Anti-thrashing off: nobody holds or waits, every client runs freely.
 *
 * Compute limits. Clients are billed to accounts (one per pod; the daemon
 * assigns them). An account may have a core limit: a percentage of each
 * GPU's time over every accounting window (default 1 s). Billed time is the
 * time its clients hold the GPU, from grant to the release that follows the
 * drain, so the drain tail is paid by whoever queued the work. When the
 * limits of the accounts active on a GPU sum above 100 %, each is scaled by
 * 100/sum, so the GPU stays full and the ratios hold. A holder whose account
 * reaches its budget is dropped even if nobody waits (limits are caps), early
 * by its measured DROP-to-release latency so that the tail lands inside the
 * budget; its account is throttled until the window rolls over, and any
 * overshoot is carried into the next window (carryover_percent). Windows
 * roll on every entry point, so an idle GPU never keeps a stale window. */
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
    int account;       /* billed to; 0 .. POLICY_MAX_CLIENTS - 1 */
    uint8_t state;     /* enum member_state */
    uint64_t since;    /* when state was entered */
    uint64_t held_ns;  /* completed holds; see policy_held_ns() */
    uint64_t grants;
    uint64_t last_drain_ns;   /* drain time the client measured */
    uint64_t last_preempt_ns; /* DROP sent to release received */
    uint64_t preempt_estimate_ns; /* moving average of the above */
};

struct account_usage {
    uint64_t used_ns; /* billed in the current window (incl. carry-over) */
    bool throttled;   /* at its budget until the window rolls over */
};

struct gpu_sched {
    int holder;            /* client slot, -1 if free */
    uint32_t lease;        /* of the current (or last) grant */
    uint64_t granted_at;
    uint64_t drop_sent_at; /* valid while the holder is draining */
    int queue[POLICY_MAX_CLIENTS];
    int n_waiting;
    uint64_t switches;     /* grants that followed another holder */
    uint64_t window_start;
    uint64_t billed_until; /* the holder is billed from here on */
    struct member members[POLICY_MAX_CLIENTS];
    struct account_usage usage[POLICY_MAX_CLIENTS]; /* by account */
};

struct policy {
    uint64_t tq_ns;
    uint64_t drain_timeout_ns;
    bool anti_thrash;
    uint64_t window_ns;
    unsigned carryover_percent;
    uint8_t core_limit[POLICY_MAX_CLIENTS]; /* by account; 0 = unlimited */
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

/* Membership: a client registered for a GPU (before any request), billed to
 * account. */
void policy_join(struct policy *p, int gpu, int client, int account,
                 uint64_t now);

/* The client wants gpu. Grants at once if it is free and nobody waits. */
void policy_request(struct policy *p, int gpu, int client, uint64_t now,
                    struct policy_actions *out);

/* The client made its first submission under lease: the wait between the
 * grant and this moment (its thread waking up) is not billed. */
void policy_in_use(struct policy *p, int gpu, int client, uint32_t lease,
                   uint64_t now);

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

/* Sets an account's core limit (1-100; 0 or 100: unlimited). Time already
 * used in the window is kept: raising the limit lifts a throttle that the
 * new budget covers, lowering it drops a holder now over budget at the next
 * tick. */
void policy_set_core_limit(struct policy *p, int account, unsigned limit,
                           uint64_t now);
void policy_set_window(struct policy *p, uint64_t window_ns,
                       unsigned carryover_percent);

/* Forgets an account's limit and usage, before its number is reused. */
void policy_reset_account(struct policy *p, int account);

/* An account's budget per window on gpu after scaling (ns; 0: unlimited),
 * and its time used in the current window including a hold in progress. */
uint64_t policy_budget_ns(const struct policy *p, int gpu, int account);
uint64_t policy_used_ns(const struct policy *p, int gpu, int account,
                        uint64_t now);

/* Total time the client has held gpu, including a hold in progress. */
uint64_t policy_held_ns(const struct policy *p, int gpu, int client,
                        uint64_t now);

#endif
