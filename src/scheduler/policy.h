/* policy.h - who holds each GPU, who waits, and when to preempt.
 *
 * This module is pure: no I/O, no clock, and no allocation but in
 * policy_grow(). Every function takes the state and the current time and
 * writes the decisions it made into a struct policy_actions for the daemon
 * to carry out. Unit tests drive it with
 * synthetic clocks; the daemon only feeds it events.
 *
 * Model (per GPU, each independent of the others but for gangs, the
 * multi-GPU jobs whose GPUs are granted together: policy_gang.c):
 *  - A running set of holders and a queue of waiters. Who may join the
 *    running set depends on the GPU's mode:
 *      serial      one holder at a time;
 *      concurrent  every client whose memory fits;
 *      auto        like concurrent for light clients (measured busy
 *                  fraction under light_permille), exclusive for the rest:
 *                  co-running two clients that keep the GPU busy costs each
 *                  more than time slicing them, and a light client beside a
 *                  heavy one gets starved by it.
 *    A client whose load is not yet measured counts as light until it
 *    can have been measured (clients report their load within their first
 *    second of GPU time, LOAD_FIRST_REPORT_NS) or for one quantum if
 *    longer: a trial beside others rather than a wait for every newcomer.
 *    Unmeasured after that, it counts as heavy.
 *    Runners that are all under a core limit get no one on trial beside
 *    them: they give the GPU up within a pace slice anyway.
 *  - Memory. A client's footprint is what it holds (allocated + credit)
 *    plus its context overhead. Its evictable part (managed memory, as the
 *    client reports it) and its credit (granted, not yet allocated: no
 *    memory on the GPU) occupy the GPU only while it runs or until it has
 *    swapped out; the rest (device memory, context) always does, so a
 *    client may be partly evictable. Evictable memory is on the GPU from
 *    its allocation, run or not (libnvshare backs it at once), except the
 *    bytes of an allocation that waits for room (pending: told ahead, so
 *    that admission sees what must fit), which are not there before the
 *    client's grant. A client with nothing evictable never
 *    swaps out: its credit always counts. A waiter is admitted only if the
 *    memory that would then occupy the GPU fits in capacity minus the
 *    reserve; if not, it is told (WAIT_FOR_MEM) and evictable clients that
 *    do not run are asked to swap out (EVICT) until it fits: those taking
 *    turns at once, idle ones after idle-swap-after (see "Idle reclaim"
 *    below), within the host swap budget. Their memory occupies the GPU
 *    until their SWAPPED(out). Admission follows queue order; a later
 *    waiter may pass a blocked one only while that one has waited less than
 *    its quantum, so big clients cannot starve. As soon as the clients of
 *    the GPU together hold more than it admits, every evictable one
 *    (running or not) is asked, once per membership, to get ready to swap
 *    out (PREPARE_SWAP): its staging ring and host copies take time to
 *    make, which its swap-out would otherwise spend on a waiter's critical
 *    path; so is an idle client that idle reclaim may swap out, once idle
 *    for POLICY_PREPARE_AFTER_NS (see "Idle reclaim"), and a holder that a
 *    waiter for memory could have leave at once: one that a higher class
 *    (of an account, or expected: policy_expect_class) could preempt,
 *    POLICY_PREPARE_AFTER_NS after its grant, any other once it has had
 *    the GPU for the switch time; never one whose pod opted out of idle
 *    swap.
 *    Every EVICT follows the client's PREPARE_SWAP.
 *  - Rotation. Once someone waits, a running client that has had the GPU
 *    for its quantum is asked to give it back (DROP); it answers after
 *    draining its work (release). The quantum is the TQ when the first
 *    blocked waiter waits for the lock, the switch time when it waits for
 *    memory: swapping costs seconds, so a memory rotation must buy enough
 *    run time to be worth it. Auto switch time = measured swap time of the
 *    memory that would move, times the multiplier, clamped.
 *  - A holder that does not answer a DROP in time is revoked, so that one
 *    stuck process cannot stall everyone: in time is 4 x its longest
 *    recent DROP-to-release latency, at least POLICY_DRAIN_QUIET_NS, and up
 *    to the drain timeout while it says it is still draining (DRAINING at
 *    least every POLICY_DRAINING_GRACE_NS). A holder whose process the
 *    daemon sees stopped is revoked at once (policy_revoke). A client that
 *    does not answer EVICT within the drain timeout is taken as swapped
 *    out.
 *  - Leases number the grants of a GPU: a release that names another lease
 *    than the client's current one (it crossed a DROP) is ignored.
 *  - Anti-thrashing off: nobody holds or waits, every client runs freely.
 *
 * Compute limits. Clients are billed to accounts (one per pod; the daemon
 * assigns them). An account may have a core limit: a percentage of each
 * GPU's time over every accounting window (default 1 s). A holder is
 * billed from its first submission under a grant to the release that
 * follows the drain, so the drain tail is paid by whoever queued the work;
 * while n clients run at once each pays 1/n of the wall time. When the
 * limits of the accounts active on a GPU sum above 100 %, each is scaled by
 * 100/sum, so the GPU stays full and the ratios hold; a pod at 100 % is
 * unlimited and takes no part in that sum.
 *
 * A limit is a cap in every window from a pod's first submission on:
 *  - A GPU on which nothing was billed for a whole window starts its next
 *    window where billing starts again, not on the old grid: otherwise a
 *    pod's first submission lands mid-window, it spends a whole budget in
 *    what is left of that window and another at the start of the next.
 *  - The budget is paced: it accrues in POLICY_PACE_SLICES steps through
 *    the window, from the window's start or from the slice in which the
 *    pod asked for the GPU if it was not taking part yet. A runner that
 *    reaches what has accrued is dropped (early by its measured
 *    DROP-to-release latency, so that the tail lands inside the budget; in
 *    a window's last slice by the shortest recent one, so that a varying
 *    tail overruns, to be repaid, rather than leave budget unused) and
 *    waits for the next slice, or for the next window once its whole budget
 *    is used (throttled). Progress is thus even at a fifth of a window, so a
 *    measurement that ends mid-window sees the limit, not a burst. For the
 *    same reason a limited holder whose turn began in an earlier slice
 *    hands over to a limited waiter as a slice starts: limited pods that
 *    share a GPU take one turn each per slice.
 *  - What a window used beyond its budget (a drain tail longer than the
 *    estimate) is carried into the next one (carryover_percent) and repaid
 *    there; only a limit lowered during the window caps the carry at one
 *    budget, so that a change throttles one window at most.
 * Windows roll on every entry point, so an idle GPU never keeps a stale
 * window.
 *
 * Priorities. Each account has a class (enum priority_class; normal unless
 * set). A client wants the GPU when it holds it, or waits within its budget
 * and its memory fits or can be made to fit by swaps. A holder that a
 * client of a higher class wants the GPU from is dropped at once, without
 * waiting for any quantum, and keeps its turn; a waiter that one of a
 * higher class wants it waits (WAIT_PRIORITY) and holds nobody back, so
 * lower classes run only while no higher one wants the GPU, and within a
 * class everything is as without priorities. A core limit stays a cap: a
 * spent account wants nothing. For memory, idle evictable clients of lower
 * classes are swapped out first; a waiter that cannot fit until memory
 * that cannot move goes waits for memory (WAIT_FOR_MEM) and, since the GPU
 * would idle, holds no lower class back. A floor (min share, percent of
 * each window) ranks an account above every class until it has used that
 * much of the window: a lower class gets its floor even under a busy
 * higher one. When nobody sets a class or floor, none of this costs
 * anything.
 *
 * Lending. A higher class that uses a few percent of the GPU (a service
 * between requests) would still hold it all the time and starve the
 * rest, so it lends the GPU whenever it is idle: its leases come with a
 * short idle release (POLICY_LEND_IDLE_NS, policy_yield_terms), after
 * which it gives the GPU back and a lower class runs. At its next request
 * the lower-class holder is dropped and, in auto mode, the higher class is
 * granted at once beside it while it drains (the GPU time-slices the two
 * contexts, finer than a kernel; serial mode waits for the drain). Lower
 * classes' leases come with a short backlog (POLICY_LENT_BACKLOG_NS), so
 * that the drain is short too. */
#ifndef NVSHARE_POLICY_H
#define NVSHARE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"    /* enum sched_mode, enum wait_reason */
#include "host_memory.h" /* HOST_SWAP_BUDGET_UNKNOWN */

#define POLICY_MAX_GPUS 32

/* Revocation of a holder that does not answer DROP: it has at least
 * POLICY_DRAIN_QUIET_NS, or 4 x the longest of its last
 * POLICY_DRAIN_HISTORY DROP-to-release latencies (their p99, for so few),
 * to release; a DRAINING message buys POLICY_DRAINING_GRACE_NS more, up to
 * the drain timeout. Clients send DRAINING every 250 ms while they drain:
 * the grace forgives three lost beats. */
#define POLICY_DRAIN_QUIET_NS 1000000000ull    /* 1 s */
#define POLICY_DRAINING_GRACE_NS 1000000000ull /* 1 s */
#define POLICY_DRAIN_HISTORY 16

/* The time quantum. Pinned by the operator (nvsharectl set tq 2s), or auto
 * (POLICY_TQ_AUTO, the default): per GPU, POLICY_TQ_DRAIN_MULTIPLE x the
 * mean of its last POLICY_HANDOVER_HISTORY hand-overs (policy_quantum.c), within
 * [POLICY_TQ_FLOOR_NS, POLICY_TQ_CEILING_NS], so that a hand-over costs a
 * holder at most 1 % of its quantum whatever its drains cost (see
 * policy_quantum.c). A client that arrives fresh (its pod has not run on
 * the GPU for POLICY_FRESH_IDLE_NS) waits at most the fresh slice: the
 * holder is cut short for it once it has held POLICY_FRESH_SLICE_NS since
 * its grant (a twentieth of its quantum where that has grown: 5 x the mean
 * hand-over, up to the floor) and keeps the rest of its quantum; one cut
 * per arrival (auto only: a pinned quantum is never cut short for one).
 * Memory rotations keep the switch time, so a short quantum never causes a
 * swap. */
#define POLICY_TQ_AUTO 0
#define POLICY_TQ_FLOOR_NS 100000000ull     /* 100 ms */
#define POLICY_TQ_CEILING_NS 30000000000ull /* 30 s */
#define POLICY_TQ_DRAIN_MULTIPLE 100
#define POLICY_HANDOVER_HISTORY 128
/* Counted until the history is full (policy_quantum.c): the floor's cost. */
#define POLICY_HANDOVER_PRIOR_N 16
#define POLICY_HANDOVER_PRIOR_NS (POLICY_TQ_FLOOR_NS / POLICY_TQ_DRAIN_MULTIPLE)
#define POLICY_FRESH_IDLE_NS 1000000000ull /* 1 s */
#define POLICY_FRESH_SLICE_NS 5000000ull   /* 5 ms: POLICY_TQ_FLOOR_NS / 20 */

enum member_state {
    MEMBER_IDLE = 0, /* values match enum client_gpu_state in protocol.h */
    MEMBER_WAITING,
    MEMBER_HOLDING,
    MEMBER_DRAINING,
};

/* Swaps of one direction on a GPU. */
struct swap_stats {
    uint64_t count, bytes, ns; /* totals */
    uint64_t last_ns;
    double ns_per_byte; /* moving average; 0 = not measured */
};

/* A latency histogram with fixed bounds (the metrics endpoint's buckets):
 * bucket[i] counts observations <= histogram_bounds_ns[i]; count and sum
 * cover all of them. */
#define HISTOGRAM_BUCKETS 9
static const uint64_t histogram_bounds_ns[HISTOGRAM_BUCKETS] =
    {100000ull,     1000000ull,    10000000ull,    100000000ull,   500000000ull,
     1000000000ull, 5000000000ull, 30000000000ull, 120000000000ull};

struct histogram {
    uint64_t count, sum_ns;
    uint64_t bucket[HISTOGRAM_BUCKETS]; /* not cumulative */
};

static inline void histogram_observe(struct histogram *h, uint64_t ns)
{
    int i = 0;

    while (i < HISTOGRAM_BUCKETS && ns > histogram_bounds_ns[i])
        i++;
    if (i < HISTOGRAM_BUCKETS)
        h->bucket[i]++;
    h->count++;
    h->sum_ns += ns;
}

/* What an account did on a GPU since its number was given out, for the
 * metrics endpoint: counters only grow until policy_reset_account(). */
struct policy_account_stats {
    uint64_t billed_ns;    /* GPU time billed, holds in progress included
                               (in the view) */
    uint64_t throttled_ns; /* held back by its core limit (pace or budget),
                               up to held_from */
    uint64_t held_from, held_until; /* the latest hold-back (view: counted
                                       up to now) */
    uint64_t preemptions;           /* DROPs sent to its clients */
    uint64_t swap_outs, swap_ins;   /* SWAPPED of its clients */
    uint64_t swap_in_wait_ns;       /* their LOCK_OK to SWAPPED(in) */
    struct histogram lock_wait;     /* request to grant */
    struct histogram drain;         /* DROP to release */
};

/* The state; its fields are the policy's own (policy_internal.h): outside
 * the policy it is read through the views below. */
struct policy;

/* Defaults of the memory-aware settings. The switch time multiplier keeps
 * swapping near 1/30 of the time of clients that rotate, under the 5 % that
 * jobs which do not fit together may lose; until both directions have been
 * measured the switch time is the seed design's fixed default. */
#define POLICY_RESERVE_PERCENT 10
#define POLICY_LIGHT_PERMILLE 500
#define POLICY_SWITCH_MULTIPLIER 30
#define POLICY_SWITCH_MIN_NS 5000000000ull         /* 5 s */
#define POLICY_SWITCH_MAX_NS 300000000000ull       /* 5 min */
#define POLICY_SWITCH_UNMEASURED_NS 60000000000ull /* before any swap */

enum action_kind {
    ACTION_GRANT,         /* send LOCK_OK(gpu, lease) to client */
    ACTION_DROP,          /* send DROP_LOCK(gpu, lease) to client */
    ACTION_REVOKE,        /* client did not answer DROP in time, or its
                             process is stopped: the GPU passed on */
    ACTION_WAIT_FOR_MEM,  /* tell client it waits for memory (mem below) */
    ACTION_MEM_AVAILABLE, /* tell client it no longer does (before GRANT) */
    ACTION_EVICT,         /* ask client to swap its memory out */
    ACTION_PREPARE_SWAP,  /* ask client to get ready for an EVICT */
    ACTION_DRAIN_TO,      /* tell a gang rank to launch up to collectives,
                             then drain */
};

struct policy_action {
    enum action_kind kind;
    int gpu;
    int client;
    uint32_t lease;
    struct {
        uint64_t need, free, limit, wait_ns;
    } mem; /* WAIT_FOR_MEM; MEM_AVAILABLE: wait_ns = time waited */
    uint64_t collectives; /* DRAIN_TO */
};

/* One call emits at most three actions per client and GPU it touches, plus
 * one PREPARE_SWAP per membership, which with enough clients is more than
 * the list holds: a call that runs out of room stops early, before it
 * changes the state it could not report, sets `truncated`, and the daemon
 * calls policy_tick again at once. The size is not tied to the number of
 * clients, which has no limit. */
#define POLICY_MAX_ACTIONS 2048

struct policy_actions {
    int n;
    bool truncated;
    struct policy_action list[POLICY_MAX_ACTIONS];
};

/* Rather than `= {0}`: clearing the whole list on every event would cost
 * more than the decision. */
static inline void policy_actions_clear(struct policy_actions *a)
{
    a->n = 0;
    a->truncated = false;
}

void policy_init(struct policy *p, int n_gpus, uint64_t tq_ns,
                 uint64_t drain_timeout_ns);

/* Client slots and account numbers are below the table size, which only
 * grows: the daemon grows every module's tables together before it gives
 * out a slot. Returns false, the policy unchanged, if memory runs out.
 * policy_destroy() frees the tables (not p). */
bool policy_grow(struct policy *p, int table_size);
void policy_destroy(struct policy *p);

/* Membership: a client registered for a GPU (before any request), billed to
 * account. */
void policy_join(struct policy *p, int gpu, int client, int account,
                 uint64_t now);

/* The client belongs to gang (a multi-GPU job: 0 .. table_size - 1, the
 * daemon numbers them; -1: none). Called before its joins. A gang whose
 * members span several GPUs is granted all its GPUs together (see
 * policy_gang.c); policy_leave forgets the client's gang. */
void policy_set_gang(struct policy *p, int client, int gang);
/* The client's gang while its members have asked for several GPUs (the
 * GPUs it needs: a process registers every GPU it sees), else -1. */
int policy_gang(const struct policy *p, int client);

/* The client wants gpu. Grants at once if it is free and nobody waits. */
void policy_request(struct policy *p, int gpu, int client, uint64_t now,
                    struct policy_actions *out);

/* The client made its first submission under lease at submitted_at (its
 * clock, which is ours; 0: unknown, now): the wait between the grant and
 * then (its thread waking up) is not billed. */
void policy_in_use(struct policy *p, int gpu, int client, uint32_t lease,
                   uint64_t submitted_at, uint64_t now);

/* The client drained by drained_at (0: unknown, now) and gave gpu back
 * under lease. Its billing stops at drained_at: the GPU idles while the
 * release is on its way. */
void policy_release(struct policy *p, int gpu, int client, uint32_t lease,
                    uint64_t drain_ns, uint64_t drained_at, uint64_t now,
                    struct policy_actions *out);

/* The client is still draining gpu under lease (DRAINING): its drain is
 * long, not stuck, so it may take up to the drain timeout. */
void policy_draining(struct policy *p, int gpu, int client, uint32_t lease,
                     uint64_t now);

/* A rank of a gang (policy_gang() >= 0 when it was dropped: its DROP
 * asked it to agree) closed its gate on gpu under lease, having launched
 * `collectives` collective kernels there. Once every dropped rank of the
 * gang has said so, and none runs undropped, each is told the highest
 * count (DRAIN_TO): the ranks behind launch up to it, then all drain, so
 * that no collective waits for a peer held at its gate. */
void policy_drain_point(struct policy *p, int gpu, int client, uint32_t lease,
                        uint64_t collectives, struct policy_actions *out);

/* The client's process cannot answer (the daemon saw it stopped): if it
 * runs on gpu it loses it now. A holder is sent DROP first, so that the
 * DROP waits in its socket for it to resume; then REVOKE, and the GPU
 * passes on. */
void policy_revoke(struct policy *p, int gpu, int client, uint64_t now,
                   struct policy_actions *out);

/* The client disconnected or died: it leaves every GPU; locks pass on. */
void policy_leave(struct policy *p, int client, uint64_t now,
                  struct policy_actions *out);

/* Preemptions and revocations that are due. Returns the next time at which
 * policy_tick has something to do (0: nothing pending). The daemon calls it
 * after every batch of events and when that time comes. */
uint64_t policy_tick(struct policy *p, uint64_t now, struct policy_actions *out);

/* Settings. A new TQ (POLICY_TQ_AUTO: auto) applies to the current holder
 * too, measured from its grant. Switching anti-thrashing either way drops every holder and waiter:
 * the daemon tells clients (SCHED_ON/SCHED_OFF) and they start over. */
void policy_set_tq(struct policy *p, uint64_t tq_ns);
void policy_set_anti_thrash(struct policy *p, bool on, uint64_t now);

/* Sets an account's core limit on gpu (1-100; 0 or 100: unlimited): each
 * GPU its own, as a pod's claims give it a share of each. Time already
 * used in the window is kept: raising the limit lifts a throttle that the
 * new budget covers, lowering it drops a holder now over budget at the next
 * tick. */
void policy_set_core_limit(struct policy *p, int gpu, int account,
                           unsigned limit, uint64_t now);
void policy_set_window(struct policy *p, uint64_t window_ns,
                       unsigned carryover_percent);

/* An account's priority class (enum priority_class, 0: normal) and floor
 * (percent of each window it runs ahead of higher classes; 0: none). */
void policy_set_priority(struct policy *p, int account, unsigned priority);
void policy_set_min_share(struct policy *p, int account, unsigned percent);
unsigned policy_priority(const struct policy *p, int account);
unsigned policy_min_share(const struct policy *p, int account);

/* How soon a client should give gpu back (0: its own settings): after
 * idle_release_ns idle, when it is of a class above another client of gpu;
 * with at most max_backlog_ns of work queued, when it is of a class below
 * another, and with no bound when it is above every other. */
#define POLICY_LEND_IDLE_NS 1000000ull      /* 1 ms */
#define POLICY_LENT_BACKLOG_NS 1000000ull   /* 1 ms */
#define POLICY_BACKLOG_UNBOUNDED UINT64_MAX /* above every other class */
struct policy_yield {
    uint64_t idle_release_ns, max_backlog_ns;
};
struct policy_yield policy_yield_terms(const struct policy *p, int gpu,
                                       int client) __attribute__((pure));
/* Whether any account has a class other than normal or a floor. */
bool policy_ranked(const struct policy *p) __attribute__((pure));
/* The highest class the operator's or the pods' settings give a pod or
 * group, whether its clients connected yet or not: a holder of a lower
 * class may be preempted by one of them at any time, so it prepares its
 * swap-out a second after its grant (see "Memory"). */
void policy_expect_class(struct policy *p, unsigned cls);

/* Slices of a window through which a budget accrues (see Compute limits). */
#define POLICY_PACE_SLICES 5

/* The client is billed to account on gpu from now on (its pod joined or
 * left a group): what it ran until now stays billed to the one before. */
void policy_move(struct policy *p, int gpu, int client, int account,
                 uint64_t now);

/* Forgets an account's limit and usage, before its number is reused. */
void policy_reset_account(struct policy *p, int account);

/* An account's budget per window on gpu after scaling (ns; 0: unlimited),
 * and its time used in the current window including a hold in progress. */
uint64_t policy_budget_ns(const struct policy *p, int gpu, int account);
uint64_t policy_used_ns(const struct policy *p, int gpu, int account,
                        uint64_t now);
/* Whether the account may not run on gpu now: its budget is used
 * (throttled) or it is ahead of its pace. */
bool policy_spent(const struct policy *p, int gpu, int account, uint64_t now);
/* The sum of the core limits taking part on gpu now (percent; limits are
 * scaled while it is above 100). Pods at 100 % are unlimited: not counted. */
unsigned policy_limit_sum(const struct policy *p, int gpu);

/* ---- memory-aware scheduling ---- */

/* Capacity of gpu in bytes (0: not known; memory is then not checked). */
void policy_set_capacity(struct policy *p, int gpu, uint64_t bytes);

/* The client's footprint on gpu changed (bytes held + context overhead),
 * or the part of it that is evictable (its managed memory, at most the
 * footprint), or of that the part that is pending: told ahead by an
 * allocation that waits for room, not on the GPU yet. Evictable memory
 * that appears while the client does not run is on the GPU (resident)
 * unless it is all pending. Growth past the capacity makes the newest
 * runner leave at the next tick. */
void policy_set_footprint(struct policy *p, int gpu, int client,
                          uint64_t footprint, uint64_t evictable,
                          uint64_t pending);

/* Of the client's footprint on gpu, its credit: bytes it may still
 * allocate without asking (quota.h), not memory on the GPU yet. */
void policy_set_credit(struct policy *p, int gpu, int client, uint64_t bytes);

/* The client's measured busy fraction on gpu. */
void policy_set_load(struct policy *p, int gpu, int client,
                     unsigned busy_permille);

/* The client finished a swap (direction: enum swap_direction) of bytes in
 * duration_ns. A swap-out frees its memory for waiters. */
void policy_swapped(struct policy *p, int gpu, int client, int direction,
                    uint64_t bytes, uint64_t duration_ns, uint64_t now,
                    struct policy_actions *out);

/* Mode of one GPU (gpu >= 0) or of all. Runners the new mode does not
 * allow together leave at the next tick (newest first). */
void policy_set_mode(struct policy *p, int gpu, enum sched_mode mode);

/* Percent of each GPU's capacity kept free (POLICY_RESERVE_PERCENT). */
void policy_set_reserve(struct policy *p, unsigned percent);

/* Idle reclaim. A client that neither holds a GPU nor waits for it, and gave
 * it back unasked, is idle from then on; its resident memory is swapped out
 * for a waiter that needs the room only once it has been idle for
 * idle_swap_after_ns (0: at once), and never while its account opts out.
 * Clients that take turns swap as before: one that was dropped (rotated
 * out) or waits behind the waiter at once, a lower-class runner that the
 * waiter preempts after its release. Lower classes go first, then the
 * client that ran longest ago. */
#define POLICY_IDLE_SWAP_AFTER_NS 10000000000ull /* 10 s */
/* A client that idle reclaim may swap out is asked to get ready
 * (PREPARE_SWAP) once idle this long, and again once idle after it
 * allocated more: its host copies are then made while nothing waits for
 * them, so that its swap-out, whenever it comes, runs at the link's speed
 * rather than at the pace of the host's first page faults. A shorter pause
 * (an inference server between bursts) does not prepare. So is a holder
 * that a higher class could preempt, this long after its grant: past its
 * start's allocations. */
#define POLICY_PREPARE_AFTER_NS 1000000000ull /* 1 s */
void policy_set_idle_swap_after(struct policy *p, uint64_t ns);
void policy_set_idle_swap(struct policy *p, int account, bool on);
bool policy_idle_swap(const struct policy *p, int account) __attribute__((pure));

/* The most bytes that swapped-out clients of all GPUs may keep in host
 * memory (POLICY_HOST_BUDGET_NONE: no limit): no EVICT takes the parked
 * total past it, the waiter's own parked memory aside (it comes back as
 * the waiter is admitted: two clients can always trade places). */
#define POLICY_HOST_BUDGET_NONE HOST_SWAP_BUDGET_UNKNOWN
void policy_set_host_swap_budget(struct policy *p, uint64_t bytes);

/* Switch time: fixed_ns > 0 fixes it, 0 makes it auto (measured swap time
 * times multiplier, clamped to [POLICY_SWITCH_MIN_NS, _MAX_NS]). */
void policy_set_switch_time(struct policy *p, uint64_t fixed_ns,
                            unsigned multiplier);

/* Memory admitted against on gpu: capacity minus the reserve (0 = none). */
uint64_t policy_memory_limit(const struct policy *p, int gpu);
/* Footprints that occupy gpu now, and those of its running clients. */
uint64_t policy_resident(const struct policy *p, int gpu);
uint64_t policy_running_footprint(const struct policy *p, int gpu);
/* The switch time gpu would use now, and whether it comes from measured
 * swaps. */
uint64_t policy_switch_time(const struct policy *p, int gpu, bool *measured);

/* ---- views: what status and the daemon read ---- */

/* Bytes of a struct policy: the daemon allocates it (the policy allocates
 * only its tables). */
size_t policy_size(void);

struct policy_settings_view {
    uint64_t tq_ns, window_ns;
    bool anti_thrash;
    uint64_t switch_fixed_ns; /* 0: auto */
    unsigned switch_multiplier;
    unsigned reserve_percent;
    uint64_t idle_swap_after_ns;
    uint64_t host_swap_budget; /* POLICY_HOST_BUDGET_NONE: no limit */
    uint64_t parked;           /* bytes in host memory now, all GPUs */
};

struct policy_waiter_view {
    int client;
    uint8_t reason; /* enum wait_reason; WAIT_THROTTLED while spent */
};

struct policy_gpu_view {
    uint8_t mode; /* enum sched_mode */
    uint64_t capacity, memory_limit;
    uint64_t held; /* footprints of all its clients */
    uint64_t running_footprint, resident;
    uint64_t switch_time_ns;
    bool switch_measured;
    uint64_t quantum_ns;       /* the TQ in force on this GPU */
    uint8_t quantum_reason;    /* enum quantum_reason: why */
    uint64_t handover_mean_ns; /* of its recent hand-overs (and the
                                       prior's); 0: none */
    uint64_t switches;
    struct swap_stats swap_out, swap_in;
};

struct policy_member_view {
    uint8_t state;       /* enum member_state */
    uint8_t wait_reason; /* WAIT_NONE unless waiting */
    uint32_t lease;      /* of its current (or last) grant */
    uint64_t wait_ns;    /* while waiting: since it asked */
    uint64_t held_ns, grants;
    uint64_t last_drain_ns, last_preempt_ns;
    uint64_t footprint, evictable;
    bool evicting; /* EVICT sent, SWAPPED not yet received */
    bool swapped_out;
    uint16_t load_permille; /* 0xffff: not measured yet */
    uint64_t resident;      /* of the footprint, bytes on the GPU now */
    uint64_t parked;        /* bytes it keeps in host memory */
    uint64_t idle_ns;       /* idle (policy_set_idle_swap_after) for */
    uint64_t swap_outs, swap_ins;
    uint64_t swap_in_wait_ns; /* grant to SWAPPED(in), summed */
};

/* Why a waiter for memory is not admitted yet, as far as the policy can
 * tell: the client in the way (blocker), if any, and its numbers. */
enum wait_why {
    WHY_NONE = 0,       /* nobody idle is in the way: runners rotate */
    WHY_SWAPPING,       /* blocker is being swapped out */
    WHY_IDLE_TOO_SHORT, /* blocker is idle for less than idle-swap-after */
    WHY_IDLE_SWAP_OFF,  /* blocker is idle, its pod opted out */
    WHY_HOST_BUDGET,    /* swapping blocker out would pass the host budget */
    WHY_CANNOT_MOVE,    /* no swap-out makes the room: blocker holds the
                           most memory that stays on the GPU (fixed) */
};

struct policy_wait_why {
    uint8_t why; /* enum wait_why */
    int blocker; /* client slot; -1 with WHY_NONE */
    uint64_t idle_ns, idle_swap_after_ns;
    uint64_t parked, budget; /* WHY_HOST_BUDGET: bytes in host memory */
    uint64_t fixed;          /* WHY_CANNOT_MOVE */
};

void policy_view_settings(const struct policy *p, struct policy_settings_view *v);
void policy_view_gpu(const struct policy *p, int gpu, struct policy_gpu_view *v);
/* Returns false (v untouched) if the client does not use gpu. */
/* Writes up to max waiters of gpu in queue order; returns how many wait. */
int policy_view_waiting(const struct policy *p, int gpu, uint64_t now,
                        struct policy_waiter_view *w, int max);
bool policy_view_member(const struct policy *p, int gpu, int client,
                        uint64_t now, struct policy_member_view *v);
bool policy_is_member(const struct policy *p, int gpu, int client);
void policy_view_account(const struct policy *p, int gpu, int account,
                         uint64_t now, struct policy_account_stats *v);
/* Why client, waiting for memory on gpu, waits (WHY_NONE for any other
 * client). */
void policy_view_wait_why(const struct policy *p, int gpu, int client,
                          uint64_t now, struct policy_wait_why *why);

/* The running client of gpu admitted first, or -1. */
int policy_holder(const struct policy *p, int gpu);
bool policy_is_running(const struct policy *p, int gpu, int client);

/* Total time the client has held gpu, including a hold in progress. */
uint64_t policy_held_ns(const struct policy *p, int gpu, int client,
                        uint64_t now);

#endif
