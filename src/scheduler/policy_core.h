/* policy_core.h - the bottom layer of the policy (policy_internal.h lists
 * the layers): its state, the inline helpers every rule shares, and what
 * policy_core.c does on the tables: the members and the queues. Only
 * policy_core.c edits a queue. */
#ifndef NVSHARE_POLICY_CORE_H
#define NVSHARE_POLICY_CORE_H

#include "policy.h"

/* A client's membership of one GPU. The fields are grouped by the rule
 * that writes them; the hold (policy_hold.c) also resets, at a grant or a
 * hold's end, what a rule set for one wait or one hold. */
struct member {
    /* policy_core.c: the membership and its state (pol_set_state) */
    bool present;   /* the client uses this GPU */
    int account;    /* billed to; 0 .. table_size - 1 */
    uint8_t state;  /* enum member_state */
    uint64_t since; /* when state was entered */
    bool load_known;
    uint16_t load_permille;
    /* policy.c: waiting, and what the client reported of its releases */
    uint8_t wait_reason;      /* enum wait_reason (protocol.h) while waiting */
    bool told_wait_mem;       /* WAIT_FOR_MEM sent during this wait */
    uint64_t last_drain_ns;   /* drain time the client measured */
    uint64_t last_preempt_ns; /* DROP sent to release received */
    uint64_t preempt_estimate_ns; /* moving average of the above */
    uint64_t recent_preempt_ns[POLICY_DRAIN_HISTORY]; /* the latest, ring */
    uint8_t n_recent_preempts;
    uint64_t draining_heard_at; /* its latest DRAINING; 0: none since DROP */
    /* policy_hold.c: the holds */
    uint64_t held_ns; /* completed holds; see policy_held_ns() */
    uint64_t grants;
    uint32_t lease;     /* of its current (or last) grant */
    uint64_t grant_seq; /* order of grants: oldest runner first */
    uint64_t granted_at;
    uint64_t drop_sent_at; /* valid while draining */
    bool dropped;          /* its last hold ended on a DROP: rotated out,
                             not idle (pol_idle) */
    uint64_t released_at;  /* its last hold's end */
    uint64_t turn_used_ns; /* of its turn while a waiter waits for memory:
                              held before it paused (gave the GPU back
                              unasked); 0 once its turn is over */
    /* policy_quantum.c, and policy.c where it cuts a turn short: the TQ */
    bool cut_short;           /* dropped before its quantum to make room for
                              limited pods or a fresh arrival: its next
                              request goes first after fresh ones and
                              those cut short before it; until its grant */
    bool fresh;               /* waiting, arrived fresh (policy_quantum.c) */
    bool fresh_cut;           /* ... and a holder was cut short for it */
    bool times_handover;      /* granted after a hand-over: its first
                              submission ends it (policy_quantum.c) */
    uint64_t quantum_used_ns; /* of its quantum, before it was cut short */
    /* policy_budget.c: billing */
    uint64_t billed_until; /* a running client is billed from here on */
    /* policy_gang.c: gangs */
    bool requested; /* it asked for it at least once: its gang needs it */
    /* A gang rank's drain point (policy_drain_point), since its DROP. */
    bool pointed;
    bool drain_to_sent;
    uint64_t drain_point;
    /* policy_memory.c: its memory */
    uint64_t footprint; /* bytes: held + context overhead */
    uint64_t evictable; /* of the footprint: bytes a swap-out moves */
    uint64_t credit;    /* of the footprint: granted, not allocated */
    uint64_t pending;   /* of the evictable: told ahead by allocations that
                           wait for room, not on the GPU */
    /* policy_swap.c: where its memory is, and the swaps */
    bool resident;                /* its evictable memory is on the GPU */
    uint64_t allocated_while_out; /* not resident: evictable bytes it
                                     allocated since, on the GPU all the
                                     same (libnvshare backs them at once) */
    bool evicting;                /* EVICT sent, SWAPPED not yet received */
    bool evict_after_release;     /* dropped because the runners outgrew it */
    bool prepare_sent;            /* PREPARE_SWAP sent during this membership */
    uint64_t prepared_bytes;      /* its evictable bytes at the latest one */
    uint64_t evict_sent_at;
    bool parked;           /* its evictable memory is in host memory: swapped
                             out, not swapped in yet */
    uint64_t swap_in_from; /* granted while parked: since then it swaps in
                               (0: it does not) */
    uint64_t swap_outs, swap_ins; /* done during this membership */
    uint64_t swap_in_wait_ns;     /* grant to SWAPPED(in), summed */
};

struct account_usage {
    uint64_t used_ns;      /* billed in the current window (incl. carry-over) */
    bool throttled;        /* at its budget until the window rolls over */
    bool accruing;         /* its budget accrues in this window ... */
    uint64_t accrues_from; /* ... from here (a slice start) */
    uint64_t paced_until;  /* dropped at its pace: waits until then */
    bool limit_lowered;    /* during this window: carry at most one budget */
};

struct gpu_sched {
    uint8_t mode;      /* enum sched_mode */
    uint64_t capacity; /* bytes admitted against; 0 = not known */
    int n_running;     /* holding or draining */
    uint32_t lease;    /* of the latest grant */
    uint64_t grant_seq;
    int *queue; /* table_size entries, n_waiting in use */
    int n_waiting;
    int slots;         /* members[] in use are below this */
    uint64_t switches; /* grants that followed another holder */
    int last_granted;
    uint64_t window_start;
    bool window_idle; /* nothing billed: the next billing starts it */
    struct swap_stats swap_out, swap_in;
    /* DROP-to-release latencies, a ring, and what they make of the TQ
     * (policy_quantum.c) */
    uint64_t handover_ns[POLICY_HANDOVER_HISTORY];
    unsigned n_handovers;
    uint64_t handover_sum_ns; /* of the ring's samples */
    bool handover_open;       /* a dropped holder released; nobody granted */
    uint64_t handover_from;   /* its drain's end */
    uint64_t handover_mean_ns;
    uint64_t auto_quantum_ns;
    struct member *members;      /* by client slot, table_size of them */
    struct account_usage *usage; /* by account, table_size of them */
    uint8_t *core_limit;         /* by account: percent of this GPU; 0 =
                                    unlimited. Per GPU, since a pod's DRA
                                    claims give it a share of each GPU */
    uint64_t *ran_until;         /* by account: when its latest hold of this GPU
                            ended (0: none); freshness, policy_quantum.c */
    struct policy_account_stats *stats; /* by account: for metrics only */
};

/* Work arrays of table_size entries, one per function that needs one: the
 * functions marked pure below write only their own, which no caller reads,
 * so the compiler's reading of `pure` stays true for everything it sees.
 * The flags are all false between calls (each clears what it set). */
struct policy_scratch {
    int *admit_order, *blocked_order; /* admit(), blocked_waiter() */
    bool *limit_counted;              /* limit_sum() */
    bool *waiting_counted;            /* waiting_budget() */
    bool *taking_part;                /* pol_roll_window() */
    uint64_t *budgets;                /* pol_roll_window() */
    bool *gang_considered;            /* pol_gang_admit() */
};

/* A gang as pol_gang_census() last counted it (policy_gang.c). */
struct gang {
    uint32_t gpus; /* bit per GPU its clients are members of */
    int n_waiting, n_running, n_draining; /* members, over all GPUs */
    uint64_t wait_since; /* its earliest waiting member's request */
};

struct policy {
    uint64_t tq_ns;
    uint64_t drain_timeout_ns;
    bool anti_thrash;
    uint64_t window_ns;
    unsigned carryover_percent;
    unsigned reserve_percent; /* of capacity, kept free */
    unsigned light_permille;  /* auto: busier than this is heavy */
    uint64_t switch_fixed_ns; /* 0: auto */
    unsigned switch_multiplier;
    int table_size;      /* client slots and account numbers
                                      are below it: policy_grow() */
    uint8_t *priority;   /* by account; enum priority_class */
    uint8_t *min_share;  /* by account; floor, percent */
    bool *idle_swap_off; /* by account: its idle memory stays on the GPU */
    uint64_t idle_swap_after_ns; /* idle this long, a client may be
                                    swapped out for a waiter */
    uint64_t host_swap_budget;   /* bytes parked in host memory, at most */
    bool ranked;                 /* some account has a class other than
                                      normal or a floor: else priorities
                                      cost nothing */
    unsigned top_class;          /* the highest class of any account */
    unsigned expected_class;     /* ... of any pod or group, connected or
                                    not (policy_expect_class) */
    struct policy_scratch scratch;
    int *gang_of;       /* by client slot: gang + 1; 0 = none */
    struct gang *gangs; /* by gang number; gang_slots in use */
    int gang_slots;
    int gangs_spanning; /* as the census counted, or 1 when a
                                      first request may have made one: 0,
                                      and gangs cost nothing */
    int n_gpus;
    struct gpu_sched gpus[POLICY_MAX_GPUS];
};

/* ---- helpers shared by every file (the bottom layer) ------------------- */

static inline bool pol_room_for(const struct policy_actions *out, int n)
{
    return out->n + n <= POLICY_MAX_ACTIONS;
}

static inline struct policy_action *pol_emit(struct policy_actions *out,
                                             enum action_kind kind, int gpu,
                                             int client, uint32_t lease)
{
    /* Callers check pol_room_for() before they change any state. */
    struct policy_action *a = &out->list[out->n++];

    *a = (struct policy_action){.kind = kind,
                                .gpu = gpu,
                                .client = client,
                                .lease = lease};
    return a;
}

static inline void pol_set_state(struct member *m, enum member_state state,
                                 uint64_t now)
{
    m->state = (uint8_t)state;
    m->since = now;
}

static inline bool pol_running(const struct member *m)
{
    return m->present &&
           (m->state == MEMBER_HOLDING || m->state == MEMBER_DRAINING);
}

/* Whether m is idle: it neither holds the GPU nor waits for it, and it gave
 * the GPU back unasked. A client that was dropped is taking turns (rotated
 * out), not idle. */
static inline bool pol_idle(const struct member *m)
{
    return m->present && m->state == MEMBER_IDLE && !m->dropped;
}

/* Whether account's time on a GPU is capped (and therefore paced). */
static inline bool pol_core_limited(const struct gpu_sched *g, int account)
{
    return g->core_limit[account] > 0 && g->core_limit[account] < 100;
}

/* What a budget per window accrues in one pace slice. */
static inline uint64_t pol_slice_share(uint64_t budget)
{
    return budget / POLICY_PACE_SLICES;
}

/* Whether a runner's DROP-to-release latency outlasts what its budget
 * accrues in a pace slice: the drain cannot land inside the slice. */
static inline bool pol_drain_outlasts_slice(uint64_t latency, uint64_t budget)
{
    return latency >= pol_slice_share(budget);
}

/* The shortest and the longest of the member's recent DROP-to-release
 * latencies (0 and 0: none yet). */
struct preempt_range {
    uint64_t shortest, longest;
};

static inline struct preempt_range pol_recent_preempts(const struct member *m)
{
    int n = m->n_recent_preempts < POLICY_DRAIN_HISTORY ? m->n_recent_preempts
                                                        : POLICY_DRAIN_HISTORY;
    struct preempt_range r = {n ? UINT64_MAX : 0, 0};

    for (int i = 0; i < n; i++) {
        uint64_t latency = m->recent_preempt_ns[i];
        if (latency < r.shortest)
            r.shortest = latency;
        if (latency > r.longest)
            r.longest = latency;
    }
    return r;
}

static inline void pol_earliest(uint64_t *next, uint64_t due)
{
    if (*next == 0 || due < *next)
        *next = due;
}

/* Hidden, as they were static before the split: the library is built
 * -fPIC, where a function that could be interposed is not inlined even in
 * its own file, and the decisions are on every event's path. */
#pragma GCC visibility push(hidden)

/* Functions marked pure only read the state: the compiler may then merge
 * calls with the same arguments, as it did when they were static. */

/* ---- policy_core.c ----------------------------------------------------- */

uint64_t pol_held_total(const struct member *m, uint64_t now)
    __attribute__((pure));
/* g's queue: client goes in at position at; out, wherever it is (it waits
 * at most once); the client at position at goes out and is returned; every
 * waiter goes out and idle. */
void pol_enqueue(struct gpu_sched *g, int client, int at);
void pol_dequeue(struct gpu_sched *g, int client);
int pol_dequeue_at(struct gpu_sched *g, int at);
void pol_dequeue_all(struct gpu_sched *g, uint64_t now);

#pragma GCC visibility pop

#endif
