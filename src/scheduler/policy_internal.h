/* policy_internal.h - what the policy's files share above the bottom
 * layer (policy_core.h: the state, its helpers and queues).
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
 * The state, its inline helpers and the queues belong to the bottom layer
 * (policy_core.h): no file above it edits a queue. Each rule in the
 * middle decides one thing; only the top calls them in turn for an event
 * or a tick. Names shared among these files start with pol_, those of the
 * daemon's interface (policy.h) with policy_. Only these files include
 * this header, and unit tests that check internals; the daemon reads the
 * state through the views of policy.h. */
#ifndef NVSHARE_POLICY_INTERNAL_H
#define NVSHARE_POLICY_INTERNAL_H

#include "policy_core.h"

/* Hidden, as they were static before the split: the library is built
 * -fPIC, where a function that could be interposed is not inlined even in
 * its own file, and the decisions are on every event's path. */
#pragma GCC visibility push(hidden)

/* Functions marked pure only read the state: the compiler may then merge
 * calls with the same arguments, as it did when they were static. */

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
uint64_t pol_fixed_bytes(const struct member *m) __attribute__((pure));
uint64_t pol_movable_bytes(const struct member *m) __attribute__((pure));
uint64_t pol_leaving_bytes(const struct member *m) __attribute__((pure));
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
/* Whether a client of another account, connected or to come, may be of a
 * higher class than account's, and so preempt its clients at any time. */
bool pol_preemptible(const struct policy *p, int account) __attribute__((pure));
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
/* PREPARE_SWAP, with more evictable memory than they last prepared, to
 * idle clients that idle reclaim may swap out, idle for
 * POLICY_PREPARE_AFTER_NS, and to holders that would leave at once for a
 * waiter for memory; returns when the next one is due (0: none). */
uint64_t pol_prepare_ahead(const struct policy *p, struct gpu_sched *g, int gpu,
                           uint64_t now, struct policy_actions *out);
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
