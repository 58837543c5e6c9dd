/* policy_internal.h - the policy's state and what its files share.
 *
 * The policy is built in layers. A file calls only files listed below it,
 * so that no two of them call each other, even through others
 * (tests/shape/call_graph.sh checks it on the objects):
 *
 *   policy.c           the top: the events, admission, rotation and the
 *                      tick, which combine the rules below into actions
 *   policy_view.c      the state as status reads it
 *   policy_gang.c      gangs: the GPUs of a multi-GPU job go together
 *   policy_hold.c      a hold of a GPU: its grant, its DROP, its end
 *   policy_swap.c      making room: PREPARE_SWAP and EVICT
 *   policy_priority.c  priority classes and floors
 *   policy_budget.c    compute limits: billing, windows, pacing
 *   policy_memory.c    footprints, what fits, the switch time
 *   policy_quantum.c   the TQ: hand-overs and fresh arrivals
 *   policy_core.c      the bottom: the tables, their members and queues
 *
 * The inline helpers below belong to the bottom layer. Each rule in the
 * middle decides one thing; only the top calls them in turn for an event
 * or a tick. Names shared among these files start with pol_, those of the
 * daemon's interface (policy.h) with policy_. Only these files include
 * this header, and unit tests that check internals; the daemon reads the
 * state through the views of policy.h. */
#ifndef NVSHARE_POLICY_INTERNAL_H
#define NVSHARE_POLICY_INTERNAL_H

#include "policy.h"

struct member {
    bool present;        /* the client uses this GPU */
    bool requested;      /* it asked for it at least once: its gang needs it */
    int account;         /* billed to; 0 .. table_size - 1 */
    uint8_t state;       /* enum member_state */
    uint8_t wait_reason; /* enum wait_reason (protocol.h) while waiting */
    bool told_wait_mem;  /* WAIT_FOR_MEM sent during this wait */
    uint64_t since;      /* when state was entered */
    uint64_t held_ns;    /* completed holds; see policy_held_ns() */
    uint64_t grants;
    uint32_t lease;     /* of its current (or last) grant */
    uint64_t grant_seq; /* order of grants: oldest runner first */
    uint64_t granted_at;
    uint64_t billed_until;        /* a running client is billed from here on */
    uint64_t drop_sent_at;        /* valid while draining */
    uint64_t last_drain_ns;       /* drain time the client measured */
    uint64_t last_preempt_ns;     /* DROP sent to release received */
    uint64_t preempt_estimate_ns; /* moving average of the above */
    uint64_t recent_preempt_ns[POLICY_DRAIN_HISTORY]; /* the latest, ring */
    uint8_t n_recent_preempts;
    uint64_t draining_heard_at; /* its latest DRAINING; 0: none since DROP */
    /* A gang rank's drain point (policy_drain_point), since its DROP. */
    bool pointed;
    bool drain_to_sent;
    uint64_t drain_point;
    bool cut_short;           /* dropped before its quantum to make room for
                              limited pods or a fresh arrival: its next
                              request goes first after fresh ones and
                              those cut short before it; until its grant */
    bool fresh;               /* waiting, arrived fresh (policy_quantum.c) */
    bool fresh_cut;           /* ... and a holder was cut short for it */
    bool times_handover;      /* granted after a hand-over: its first
                              submission ends it (policy_quantum.c) */
    uint64_t quantum_used_ns; /* of its quantum, before it was cut short */
    uint64_t turn_used_ns;    /* of its turn while a waiter waits for memory:
                                 held before it paused (gave the GPU back
                                 unasked); 0 once its turn is over */
    /* memory */
    uint64_t footprint;       /* bytes: held + context overhead */
    uint64_t evictable;       /* of the footprint: bytes a swap-out moves */
    bool resident;            /* its evictable memory is on the GPU */
    bool evicting;            /* EVICT sent, SWAPPED not yet received */
    bool evict_after_release; /* dropped because the runners outgrew it */
    bool prepare_sent;        /* PREPARE_SWAP sent during this membership */
    uint64_t evict_sent_at;
    bool dropped;          /* its last hold ended on a DROP: rotated out,
                             not idle (pol_idle) */
    uint64_t released_at;  /* its last hold's end */
    bool parked;           /* its evictable memory is in host memory: swapped
                             out, not swapped in yet */
    uint64_t swap_in_from; /* granted while parked: since then it swaps in
                               (0: it does not) */
    uint64_t swap_outs, swap_ins; /* done during this membership */
    uint64_t swap_in_wait_ns;     /* grant to SWAPPED(in), summed */
    /* load */
    bool load_known;
    uint16_t load_permille;
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
void pol_dequeue(struct gpu_sched *g, int client);

/* ---- policy_quantum.c -------------------------------------------------- */

/* A hand-over cost g ns: the auto TQ follows. */
void pol_quantum_observe_handover(struct gpu_sched *g, uint64_t ns);
/* The hand-over's three moments: client, dropped, gave g back at now,
 * its drain done at drained_at (our clock; a gang's rank counts its whole
 * drain); a client was granted g; a granted client submitted its first
 * work at `at`. */
void pol_quantum_on_release(struct gpu_sched *g, int client, bool gang_rank,
                            uint64_t drained_at, uint64_t now);
void pol_quantum_on_grant(struct gpu_sched *g, struct member *m);
void pol_quantum_on_first_submission(struct gpu_sched *g, struct member *m,
                                     bool gang_rank, uint64_t at);
/* The TQ in force on g, and why. */
uint64_t pol_gpu_quantum(const struct policy *p, const struct gpu_sched *g)
    __attribute__((pure));
enum quantum_reason pol_gpu_quantum_reason(const struct policy *p,
                                           const struct gpu_sched *g)
    __attribute__((pure));
/* How long a holder whose turn is `quantum` keeps the GPU, at least, before
 * it is cut short for a fresh arrival. */
uint64_t pol_fresh_slice(uint64_t quantum) __attribute__((pure));
/* Whether m, asking for g now, arrives fresh: never while the operator
 * pins the quantum, which is then nobody's to cut short. */
bool pol_arrives_fresh(const struct policy *p, const struct gpu_sched *g,
                       const struct member *m, uint64_t now)
    __attribute__((pure));
/* Whether holder may be cut short for waiter: it arrived fresh, waits for
 * the lock, and has not had its hand-over yet. */
bool pol_cuts_short(const struct policy *p, const struct member *waiter,
                    const struct member *holder) __attribute__((pure));
/* Where in g's queue m's request goes: a fresh arrival behind the fresh
 * arrivals at its head, a holder cut short behind them and those cut
 * short before it, anyone else last. */
int pol_queue_position(const struct gpu_sched *g, const struct member *m)
    __attribute__((pure));

/* ---- policy_memory.c --------------------------------------------------- */

uint64_t pol_occupied_bytes(const struct member *m) __attribute__((pure));
/* When idle m may be swapped out for being idle (0: never, its pod opted
 * out); whether its memory stays on the GPU for as long as it is idle. */
uint64_t pol_idle_swap_due(const struct policy *p, const struct member *m)
    __attribute__((pure));
bool pol_pinned(const struct policy *p, const struct member *m)
    __attribute__((pure));
uint64_t pol_resident_bytes(const struct gpu_sched *g) __attribute__((pure));
uint64_t pol_held_bytes(const struct gpu_sched *g) __attribute__((pure));
bool pol_fits(const struct policy *p, const struct gpu_sched *g, int gpu,
              int client) __attribute__((pure));
bool pol_room_possible(const struct policy *p, const struct gpu_sched *g,
                       int gpu, int client) __attribute__((pure));
uint64_t pol_switch_time(const struct policy *p, const struct gpu_sched *g,
                         uint64_t incoming, bool *measured);

/* ---- policy_budget.c --------------------------------------------------- */

uint64_t pol_used_ns(const struct gpu_sched *g, int account, uint64_t now)
    __attribute__((pure));
uint64_t pol_budget_ns(const struct policy *p, const struct gpu_sched *g,
                       int account) __attribute__((pure));
uint64_t pol_budget_left(const struct policy *p, const struct gpu_sched *g,
                         int account, uint64_t now) __attribute__((pure));
/* Waiters in the order admit() (policy.c) considers them; returns how many. */
int pol_waiter_order(const struct policy *p, const struct gpu_sched *g,
                     uint64_t now, int *order);
bool pol_spent(const struct policy *p, const struct gpu_sched *g, int account,
               uint64_t now) __attribute__((pure));
void pol_bill_runners(struct gpu_sched *g, uint64_t now);
void pol_start_billing(struct gpu_sched *g, struct member *m, uint64_t now);
void pol_start_accruing(const struct policy *p, struct gpu_sched *g,
                        int account, uint64_t now);
void pol_roll_window(struct policy *p, struct gpu_sched *g, uint64_t now);
void pol_throttle_if_spent(struct policy *p, struct gpu_sched *g, int account,
                           uint64_t now);
void pol_hold_back(const struct policy *p, struct gpu_sched *g, int account,
                   uint64_t now);
uint64_t pol_slice_end(const struct policy *p, const struct gpu_sched *g,
                       uint64_t now) __attribute__((pure));
uint64_t pol_pace_due(const struct policy *p, const struct gpu_sched *g,
                      const struct member *m, uint64_t now) __attribute__((pure));
uint64_t pol_room_due_for_waiters(const struct policy *p,
                                  const struct gpu_sched *g,
                                  const struct member *m, uint64_t now)
    __attribute__((pure));
bool pol_yields_at_slice_start(const struct policy *p,
                               const struct gpu_sched *g, const struct member *m,
                               const struct member *waiter, uint64_t now)
    __attribute__((pure));
bool pol_has_spent_waiter(const struct policy *p, const struct gpu_sched *g,
                          uint64_t now) __attribute__((pure));

/* ---- policy_priority.c ------------------------------------------------- */

unsigned pol_class_of(const struct policy *p, int account) __attribute__((pure));
uint64_t pol_floor_ns(const struct policy *p, int account) __attribute__((pure));
bool pol_outranked(const struct policy *p, const struct gpu_sched *g, int gpu,
                   int client, uint64_t now) __attribute__((pure));
/* Whether every runner of g is of a class below client's and draining (it
 * was dropped for a higher class): client may start beside them. */
bool pol_beside_draining(const struct policy *p, const struct gpu_sched *g,
                         int client) __attribute__((pure));
uint64_t pol_rank_change_due(const struct policy *p, const struct gpu_sched *g,
                             uint64_t now) __attribute__((pure));

/* ---- policy_swap.c ----------------------------------------------------- */

void pol_prepare(struct gpu_sched *g, int gpu, int client,
                 struct policy_actions *out);
void pol_prepare_if_oversubscribed(const struct policy *p, struct gpu_sched *g,
                                   int gpu, struct policy_actions *out);
void pol_evict_for(const struct policy *p, struct gpu_sched *g, int gpu,
                   int waiter, uint64_t need, uint64_t now,
                   struct policy_actions *out);
void pol_evict_if_asked(struct gpu_sched *g, int gpu, int client, uint64_t now,
                        struct policy_actions *out);
int pol_overgrown_runner(const struct policy *p, const struct gpu_sched *g,
                         int gpu) __attribute__((pure));
int pol_grown_runner(const struct policy *p, const struct gpu_sched *g, int gpu)
    __attribute__((pure));
/* Whether a waiter waits for memory on g. */
bool pol_memory_waiter(const struct gpu_sched *g) __attribute__((pure));
/* Whether client, waiting, goes on with its memory where it is (a pause
 * within its turn for memory, or a pod that opted out of idle swapping). */
bool pol_resumes_in_place(const struct policy *p, const struct gpu_sched *g,
                          int gpu, int client) __attribute__((pure));
void pol_expire_evictions(const struct policy *p, struct gpu_sched *g,
                          uint64_t now, uint64_t *next);
/* A swap of client's memory on g was done; true when it ended an eviction. */
bool pol_swap_done(struct gpu_sched *g, int client, int direction,
                   uint64_t bytes, uint64_t duration_ns, uint64_t now);
/* The next moment an idle client of g reaches idle-swap-after while a
 * waiter waits for memory, or a runner outgrew the room (0: none): room
 * may then be made. */
uint64_t pol_idle_swap_next(const struct policy *p, const struct gpu_sched *g,
                            int gpu, uint64_t now) __attribute__((pure));
/* Bytes parked in host memory over all GPUs, or on their way there. */
uint64_t pol_parked_bytes(const struct policy *p) __attribute__((pure));
/* Why waiter, waiting for memory on gpu, is not admitted yet. */
void pol_wait_why(const struct policy *p, int gpu, int waiter, uint64_t now,
                  struct policy_wait_why *why);

/* ---- policy_hold.c ----------------------------------------------------- */

/* The hold of client on g begins, ends, is asked back; each emits its
 * action. */
void pol_grant(struct gpu_sched *g, int gpu, int client, uint64_t now,
               struct policy_actions *out);
void pol_drop(struct gpu_sched *g, int gpu, int client, uint64_t now,
              struct policy_actions *out);
void pol_end_hold(struct policy *p, struct gpu_sched *g, int client,
                  uint64_t now);

/* ---- policy_gang.c ----------------------------------------------------- */

/* The client asked for gpu for the first time in its membership: its gang
 * may now span GPUs. */
void pol_gang_requested(struct policy *p, int gpu, int client);
/* Recounts the gangs from their members while any may span GPUs;
 * pol_gang_allows and pol_gang_waiter read the latest count. */
void pol_gang_census(struct policy *p);
/* Whether client may be admitted on gpu as far as gangs go: a member of a
 * gang that goes together only while its gang holds; anyone else only
 * where no gang holds or has waited its quantum. */
bool pol_gang_allows(const struct policy *p, int gpu, int client, uint64_t now)
    __attribute__((pure));
/* Whether the client is a rank of a gang that goes together. */
bool pol_gang_member(const struct policy *p, int client) __attribute__((pure));
/* The turn of a holder whose GPU's quantum is `quantum`: for a rank of a
 * gang that goes together, the longest quantum among its gang's GPUs. */
uint64_t pol_turn_quantum(const struct policy *p, int client, uint64_t quantum)
    __attribute__((pure));
/* A waiting member of a gang that needs gpu and does not run, or NULL:
 * gpu's runners rotate for it as for a waiter of their own. */
const struct member *pol_gang_waiter(const struct policy *p, int gpu)
    __attribute__((pure));
/* Grants the waiting gangs whose GPUs are all free, oldest wait first. */
void pol_gang_admit(struct policy *p, uint64_t now, struct policy_actions *out);
/* Drops every holder of a gang one of whose members was dropped, or whose
 * quantum ended while others wait for a GPU it holds with no rank running
 * there. Returns when it must be called again (0: no need). */
uint64_t pol_gang_drain(struct policy *p, uint64_t now,
                        struct policy_actions *out);

#pragma GCC visibility pop

#endif
