/* policy.c - the top of the policy: the events, admission, rotation and
 * the tick, which combine the rules of the files below (their layers are
 * in policy_internal.h). See policy.h for the model. */
#include "policy_internal.h"

#include <string.h>

/* ---- load -------------------------------------------------------------- */

/* Until its first load report a client gets a trial beside others rather
 * than a wait, as long as that report may take (LOAD_FIRST_REPORT_NS of
 * GPU time) or one quantum if longer: a shorter trial would rotate
 * newcomers that are light, one at a time, until they are measured
 * (three light jobs started together ran alone by turns for 3 s). After
 * it a client counts as heavy until measured, so one whose load never
 * arrives cannot co-run with busy clients for a whole run. When the trial
 * ends (0: it is measured or already over). */
static uint64_t trial_end(const struct policy *p, const struct gpu_sched *g,
                          const struct member *m, uint64_t now)
{
    uint64_t held = pol_held_total(m, now), trial = pol_gpu_quantum(p, g);

    if (trial < LOAD_FIRST_REPORT_NS)
        trial = LOAD_FIRST_REPORT_NS;
    if (m->load_known || held >= trial)
        return 0;
    return now + (trial - held);
}

static bool maybe_light(const struct policy *p, const struct gpu_sched *g,
                        const struct member *m, uint64_t now)
{
    if (m->load_known)
        return m->load_permille < p->light_permille;
    return trial_end(p, g, m, now) != 0;
}

/* Whether client may run beside the current runners in g's mode. */
static bool compatible(const struct policy *p, const struct gpu_sched *g,
                       int client, uint64_t now)
{
    if (g->n_running == 0)
        return true;
    switch (g->mode) {
    case SCHED_MODE_SERIAL:
        return false;
    case SCHED_MODE_CONCURRENT:
        return true;
    default: {
        /* A higher class need not wait for the lower-class holders it
         * dropped to drain: the GPU time-slices its first kernels with
         * their last ones, finer than a kernel. */
        if (pol_beside_draining(p, g, client))
            return true;
        /* A client known (or taken) to be heavy runs alone. */
        if (!maybe_light(p, g, &g->members[client], now))
            return false;
        bool runners_paced = true;
        for (int c = 0; c < g->slots; c++) {
            const struct member *r = &g->members[c];
            if (!pol_running(r))
                continue;
            if (!maybe_light(p, g, r, now))
                return false;
            runners_paced = runners_paced && pol_core_limited(g, r->account);
        }
        /* A trial spares a newcomer a quantum's wait. Runners under a core
         * limit give the GPU up within a pace slice anyway, and two heavy
         * clients side by side each lose more than that wait. */
        return g->members[client].load_known || !runners_paced;
    }
    }
}

/* ---- admission ---------------------------------------------------------- */

/* The quantum a runner gets while `waiter` waits for the reason it has. */
static uint64_t quantum_for(const struct policy *p, const struct gpu_sched *g,
                            const struct member *waiter)
{
    bool measured;

    if (waiter->wait_reason == WAIT_MEMORY)
        return pol_switch_time(p, g, waiter->evictable, &measured);
    return pol_gpu_quantum(p, g);
}

/* When the earliest runner's quantum ends (0: nobody runs). */
static uint64_t next_rotation(const struct gpu_sched *g, uint64_t quantum)
{
    uint64_t due = 0;

    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (m->present && m->state == MEMBER_HOLDING &&
            (due == 0 || m->granted_at + quantum < due))
            due = m->granted_at + quantum;
    }
    return due;
}

static void tell_waits_for_memory(const struct policy *p, struct gpu_sched *g,
                                  int gpu, int client, uint64_t now,
                                  struct policy_actions *out)
{
    struct member *m = &g->members[client];
    uint64_t limit = policy_memory_limit(p, gpu),
             resident = pol_resident_bytes(g);
    uint64_t due = next_rotation(g, quantum_for(p, g, m));

    m->told_wait_mem = true;
    struct policy_action *a = pol_emit(out, ACTION_WAIT_FOR_MEM, gpu, client, 0);
    a->mem.need = m->footprint;
    a->mem.free = limit > resident ? limit - resident : 0;
    a->mem.limit = limit;
    a->mem.wait_ns = due > now ? due - now : 0;
}

/* Admits waiters in order while they fit and the mode allows. The first
 * waiter that cannot be admitted ("blocked") may be passed only while it
 * has waited less than its quantum: after that, the room that frees is
 * kept for it. A member of a gang waits here for its gang's grant. */
static void admit_queue(struct policy *p, struct gpu_sched *g, int gpu,
                        uint64_t now, struct policy_actions *out)
{
    int *order = p->scratch.admit_order;
    int n = pol_waiter_order(p, g, now, order);
    bool blocked_seen = false, aged = false;

    pol_gang_census(p);
    pol_prepare_if_oversubscribed(p, g, gpu, out);
    for (int i = 0; i < n; i++) {
        int c = order[i];
        struct member *m = &g->members[c];
        if (aged && !pol_resumes_in_place(p, g, gpu, c))
            continue;
        if (!pol_room_for(out, 3)) {
            out->truncated = true;
            return;
        }
        /* Lower classes run only while no higher one wants the GPU; they
         * hold nobody back, so they are not the blocked waiter either.
         * p->ranked first: without priorities no call on this path. */
        if (p->ranked && pol_outranked(p, g, gpu, c, now)) {
            m->wait_reason = WAIT_PRIORITY;
            continue;
        }
        /* Gangs age on their own (policy_gang.c): a wait for one holds
         * nobody back here. A rank that does not fit gets room made as
         * any waiter would: its gang is granted only once all fit. */
        if (!pol_gang_allows(p, gpu, c, now)) {
            bool rank_without_room = pol_gang_member(p, c) &&
                                     !pol_fits(p, g, gpu, c);
            m->wait_reason = rank_without_room ? WAIT_MEMORY : WAIT_LOCK;
            if (rank_without_room && !m->told_wait_mem)
                tell_waits_for_memory(p, g, gpu, c, now, out);
            if (rank_without_room && pol_room_possible(p, g, gpu, c))
                pol_evict_for(p, g, gpu, c,
                              m->footprint - pol_occupied_bytes(m), now, out);
            continue;
        }
        bool ok_mode = compatible(p, g, c, now),
             ok_memory = pol_fits(p, g, gpu, c);
        if (ok_mode && ok_memory) {
            pol_dequeue(g, c);
            pol_grant(g, gpu, c, now, out);
            continue;
        }
        /* Memory is the reason whenever it does not fit: even once the
         * lock is free it must wait for a swap, so its runners get the
         * switch time, not the TQ. */
        m->wait_reason = ok_memory ? WAIT_LOCK : WAIT_MEMORY;
        if (!ok_memory && !m->told_wait_mem)
            tell_waits_for_memory(p, g, gpu, c, now, out);
        /* Until memory that cannot move goes, it holds nobody back. */
        if (blocked_seen || (!ok_memory && !pol_room_possible(p, g, gpu, c)))
            continue;
        blocked_seen = true;
        if (!ok_memory) {
            pol_evict_for(p, g, gpu, c, m->footprint - pol_occupied_bytes(m),
                          now, out);
        }
        /* Aged: nobody passes it any more but a holder going on with its
         * turn, which needs no room. */
        aged = aged || now - m->since >= quantum_for(p, g, m);
    }
}

static void admit(struct policy *p, struct gpu_sched *g, int gpu, uint64_t now,
                  struct policy_actions *out)
{
    admit_queue(p, g, gpu, now, out);
    if (!p->gangs_spanning)
        return;
    /* What freed gpu may have ended a gang's hold on others. */
    for (int other = 0; other < p->n_gpus; other++)
        if (other != gpu)
            admit_queue(p, &p->gpus[other], other, now, out);
    pol_gang_admit(p, now, out);
}

/* ---- events ------------------------------------------------------------- */

void policy_request(struct policy *p, int gpu, int client, uint64_t now,
                    struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (!p->anti_thrash || !m->present || m->state != MEMBER_IDLE)
        return; /* a request crossing SCHED_OFF, or a duplicate */
    pol_roll_window(p, g, now);
    pol_start_accruing(p, g, m->account, now);
    m->fresh = pol_arrives_fresh(p, g, m, now);
    m->fresh_cut = false;
    pol_set_state(m, MEMBER_WAITING, now);
    m->wait_reason = WAIT_LOCK;
    if (!m->requested)
        pol_gang_requested(p, gpu, client);
    /* Fresh arrivals first, in the order they came; then holders cut
     * short, who keep their turn, in the order they were cut; then
     * everyone else. */
    pol_enqueue(g, client, pol_queue_position(g, m));
    admit(p, g, gpu, now, out);
}

/* A time the client reported, within what the scheduler has seen of the
 * hold (from billed_until to now): a client on another clock, or none, is
 * billed by the scheduler's own. */
static uint64_t client_time(const struct member *m, uint64_t at, uint64_t now)
{
    if (!at || at > now)
        return now;
    return at > m->billed_until ? at : m->billed_until;
}

void policy_in_use(struct policy *p, int gpu, int client, uint32_t lease,
                   uint64_t submitted_at, uint64_t now)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (m->state != MEMBER_HOLDING || m->lease != lease || now <= m->billed_until)
        return;
    pol_roll_window(p, g, now);
    pol_quantum_on_first_submission(g, m, pol_gang_member(p, client),
                                    client_time(m, submitted_at, now));
    pol_start_billing(g, m, client_time(m, submitted_at, now));
}

void policy_release(struct policy *p, int gpu, int client, uint32_t lease,
                    uint64_t drain_ns, uint64_t drained_at, uint64_t now,
                    struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (!pol_running(m) || m->lease != lease)
        return; /* it crossed a DROP or a revocation: already handled */
    pol_roll_window(p, g, now);
    /* Billed up to the end of its drain; end_hold bills nothing after. */
    uint64_t drained = client_time(m, drained_at, now);
    pol_bill_runners(g, drained);
    m->billed_until = now;
    m->last_drain_ns = drain_ns;
    if (m->state == MEMBER_DRAINING) {
        m->last_preempt_ns = now - m->drop_sent_at;
        m->recent_preempt_ns[m->n_recent_preempts++ % POLICY_DRAIN_HISTORY] =
            m->last_preempt_ns;
        histogram_observe(&g->stats[m->account].drain, m->last_preempt_ns);
        pol_quantum_on_release(g, client, pol_gang_member(p, client), drained,
                               now);
        m->preempt_estimate_ns =
            m->preempt_estimate_ns
                ? (3 * m->preempt_estimate_ns + m->last_preempt_ns) / 4
                : m->last_preempt_ns;
    } else {
        /* Given back unasked: its quantum is over. */
        m->cut_short = false;
        m->quantum_used_ns = 0;
    }
    pol_end_hold(p, g, client, now);
    pol_evict_if_asked(g, gpu, client, now, out);
    admit(p, g, gpu, now, out);
}

void policy_leave(struct policy *p, int client, uint64_t now,
                  struct policy_actions *out)
{
    bool was_member[POLICY_MAX_GPUS] = {false};

    /* Gone from every GPU before any admits: admission on one GPU may
     * grant on others (gangs). */
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        if (!(was_member[gpu] = g->members[client].present))
            continue;
        pol_roll_window(p, g, now);
        pol_dequeue(g, client);
        if (pol_running(&g->members[client]))
            pol_end_hold(p, g, client, now);
        g->members[client].present = false;
    }
    p->gang_of[client] = 0;
    for (int gpu = 0; gpu < p->n_gpus; gpu++)
        if (was_member[gpu])
            admit(p, &p->gpus[gpu], gpu, now, out);
}

void policy_swapped(struct policy *p, int gpu, int client, int direction,
                    uint64_t bytes, uint64_t duration_ns, uint64_t now,
                    struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];

    if (pol_swap_done(g, client, direction, bytes, duration_ns, now))
        admit(p, g, gpu, now, out);
}

/* ---- ticks -------------------------------------------------------------- */


/* The first waiter admit() could not admit and for which rotating the
 * runners can make room, or -1. */
static int blocked_waiter(const struct policy *p, const struct gpu_sched *g,
                          int gpu, uint64_t now)
{
    int *order = p->scratch.blocked_order;
    int n = pol_waiter_order(p, g, now, order);

    for (int i = 0; i < n; i++)
        if ((pol_fits(p, g, gpu, order[i]) ||
             pol_room_possible(p, g, gpu, order[i])) &&
            !(p->ranked && pol_outranked(p, g, gpu, order[i], now)))
            return order[i];
    return -1;
}

/* When a draining member is revoked (see POLICY_DRAIN_QUIET_NS). */
static uint64_t drain_deadline(const struct policy *p, const struct member *m)
{
    uint64_t quiet = 4 * pol_recent_preempts(m).longest;
    uint64_t due =
        m->drop_sent_at +
        (quiet > POLICY_DRAIN_QUIET_NS ? quiet : POLICY_DRAIN_QUIET_NS);
    uint64_t limit = m->drop_sent_at + p->drain_timeout_ns;

    if (m->draining_heard_at &&
        m->draining_heard_at + POLICY_DRAINING_GRACE_NS > due)
        due = m->draining_heard_at + POLICY_DRAINING_GRACE_NS;
    return due < limit ? due : limit;
}

/* The holder admitted first (-1: none), and how many hold. */
static int oldest_holder(const struct gpu_sched *g, int *holding)
{
    int oldest = -1;

    *holding = 0;
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (!m->present || m->state != MEMBER_HOLDING)
            continue;
        ++*holding;
        if (oldest < 0 || m->grant_seq < g->members[oldest].grant_seq)
            oldest = c;
    }
    return oldest;
}

/* Whether holder c may not stay beside the oldest holder: the mode
 * changed, a load report showed a heavy client among several, or a trial
 * ended. */
static bool misfit(const struct policy *p, const struct gpu_sched *g, int c,
                   int oldest, uint64_t now)
{
    switch (g->mode) {
    case SCHED_MODE_SERIAL:
        return true;
    case SCHED_MODE_CONCURRENT:
        return false;
    default:
        return !maybe_light(p, g, &g->members[c], now) ||
               !maybe_light(p, g, &g->members[oldest], now);
    }
}

/* Drops every misfit at once: one per tick would let heavy clients share
 * the GPU for a drain each. Returns whether it dropped any. */
static bool drop_misfits(const struct policy *p, struct gpu_sched *g, int gpu,
                         uint64_t now, struct policy_actions *out)
{
    int holding, oldest = oldest_holder(g, &holding);
    bool dropped = false;

    for (int c = 0; holding >= 2 && c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (!m->present || m->state != MEMBER_HOLDING || c == oldest ||
            !misfit(p, g, c, oldest, now))
            continue;
        if (!pol_room_for(out, 1)) {
            out->truncated = true;
            break;
        }
        pol_drop(g, gpu, c, now, out);
        dropped = true;
    }
    return dropped;
}

void policy_draining(struct policy *p, int gpu, int client, uint32_t lease,
                     uint64_t now)
{
    struct member *m = &p->gpus[gpu].members[client];

    if (m->present && m->state == MEMBER_DRAINING && m->lease == lease)
        m->draining_heard_at = now;
}

static void revoke(struct policy *p, struct gpu_sched *g, int gpu, int client,
                   uint64_t now, struct policy_actions *out)
{
    pol_emit(out, ACTION_REVOKE, gpu, client, g->members[client].lease);
    pol_end_hold(p, g, client, now);
    pol_evict_if_asked(g, gpu, client, now, out);
}

void policy_revoke(struct policy *p, int gpu, int client, uint64_t now,
                   struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (!pol_running(m) || !pol_room_for(out, 3))
        return; /* out of room: the daemon asks again at its next check */
    pol_roll_window(p, g, now);
    if (m->state == MEMBER_HOLDING)
        pol_drop(g, gpu, client, now, out);
    revoke(p, g, gpu, client, now, out);
    admit(p, g, gpu, now, out);
}

/* Revokes the holders that have not answered a DROP in time. */
static void revoke_overdue(struct policy *p, struct gpu_sched *g, int gpu,
                           uint64_t now, struct policy_actions *out)
{
    for (int c = 0; c < g->slots && g->n_running; c++) {
        struct member *m = &g->members[c];
        if (!pol_room_for(out, 3)) {
            out->truncated = true;
            break;
        }
        if (m->present && m->state == MEMBER_DRAINING &&
            now >= drain_deadline(p, m))
            revoke(p, g, gpu, c, now, out);
    }
}

/* Drops the runners that may not stay together: misfits of the mode, or
 * else the newest runner when their memory outgrew the GPU. */
static void shed_runners(const struct policy *p, struct gpu_sched *g, int gpu,
                         uint64_t now, struct policy_actions *out)
{
    /* Growth is judged on the set that the misfits leave. */
    if (drop_misfits(p, g, gpu, now, out))
        return;
    int grown = pol_grown_runner(p, g, gpu);
    if (grown >= 0)
        pol_evict_for(p, g, gpu, grown, 0, now, out);
    int overgrown = pol_overgrown_runner(p, g, gpu);
    /* It prepares while it drains: its EVICT follows the release. */
    if (overgrown >= 0 && pol_room_for(out, 2)) {
        g->members[overgrown].evict_after_release = true;
        pol_prepare(g, gpu, overgrown, out);
        pol_drop(g, gpu, overgrown, now, out);
    }
}

/* Drops at once every holder that a client of a higher class (or owed
 * its floor) wants the GPU from: it does not wait for the TQ. The holder
 * keeps its turn and the rest of its quantum, as a holder cut short for
 * limited pods does. */
static void preempt_outranked(struct policy *p, struct gpu_sched *g, int gpu,
                              uint64_t now, struct policy_actions *out)
{
    for (int c = 0; c < g->slots && g->n_running; c++) {
        struct member *m = &g->members[c];
        if (!m->present || m->state != MEMBER_HOLDING ||
            !pol_outranked(p, g, gpu, c, now))
            continue;
        if (!pol_room_for(out, 1)) {
            out->truncated = true;
            return;
        }
        m->cut_short = true;
        m->quantum_used_ns += now - m->granted_at;
        pol_drop(g, gpu, c, now, out);
    }
}

/* Whom a GPU's holders rotate for at a tick. */
struct rotation {
    const struct member *waiter; /* NULL: nobody */
    uint64_t quantum;            /* the holders' while it waits */
    bool own;                    /* it waits in this GPU's queue */
    bool cut;                    /* a holder was cut short for it */
};

/* Why a holder's turn ends early (it is then cut short and keeps its
 * turn). */
enum early_end { TURN_WHOLE, TURN_FRESH, TURN_ROOM };

/* When holder m's turn of `quantum` ends while r's waiter waits: its
 * quantum, less what it ran before it was last cut short, or sooner for a
 * fresh arrival or for limited pods that need room (*early says which).
 * Under the auto quantum it runs its slice at least: granted only to be
 * dropped at once, it would cost a hand-over for nothing. */
static uint64_t turn_end(const struct policy *p, const struct gpu_sched *g,
                         const struct member *m, const struct rotation *r,
                         uint64_t quantum, uint64_t now, enum early_end *early)
{
    uint64_t slice = pol_fresh_slice(quantum);
    /* A turn for memory goes on after pauses, it does not start again. */
    uint64_t used = m->quantum_used_ns +
                    (r->waiter->wait_reason == WAIT_MEMORY ? m->turn_used_ns : 0);
    uint64_t rest = used < quantum ? quantum - used : 0;
    if (p->tq_ns == POLICY_TQ_AUTO && rest < slice)
        rest = slice;
    uint64_t tq_due = m->granted_at + rest;
    uint64_t fresh_due = m->granted_at + slice;
    uint64_t room_due = pol_room_due_for_waiters(p, g, m, now);

    *early = TURN_WHOLE;
    if (r->own && fresh_due < tq_due && pol_cuts_short(p, r->waiter, m)) {
        tq_due = fresh_due;
        *early = TURN_FRESH;
    }
    if (room_due && room_due < tq_due) {
        tq_due = room_due;
        *early = TURN_ROOM;
    }
    return tq_due;
}

/* Drops holder c if its pace or (while r's waiter waits) its quantum says
 * so; next: when it must be judged again. */
static void rotate_holder(struct policy *p, struct gpu_sched *g, int gpu, int c,
                          struct rotation *r, uint64_t now,
                          struct policy_actions *out, uint64_t *next)
{
    const struct member *waiter = r->waiter;
    uint64_t quantum = waiter ? pol_turn_quantum(p, c, r->quantum) : 0;
    enum early_end early = TURN_WHOLE;
    struct member *m = &g->members[c];
    uint64_t due = pol_pace_due(p, g, m, now), accrues_at = 0,
             end = pol_slice_end(p, g, now);

    /* More budget accrues at the end of the slice: a drop due after that
     * is judged again then. So is one whose budget lasts to within the
     * runner's DROP-to-release latency of the end (due is early by that
     * much), if the next slice's budget covers that latency: dropped just
     * before the end, it would hand over twice a slice where once does,
     * and every hand-over costs the GPU about a kernel. */
    uint64_t latency = m->preempt_estimate_ns;
    if (due && end < g->window_start + p->window_ns &&
        (due > end ||
         (due + 2 * latency >= end &&
          !pol_drain_outlasts_slice(latency, pol_budget_ns(p, g, m->account))))) {
        accrues_at = end;
        due = 0;
    }
    bool limit = due && now >= due;
    if (!limit && pol_yields_at_slice_start(p, g, m, waiter, now))
        due = now;
    else if (!limit && waiter) {
        uint64_t tq_due = turn_end(p, g, m, r, quantum, now, &early);
        if (!due || tq_due < due)
            due = tq_due;
    }
    if (due && now >= due) {
        if (limit)
            pol_hold_back(p, g, m->account, now);
        /* Cut short, it keeps its turn and the rest of its
         * quantum: whoever holds when limited pods or fresh arrivals
         * are due would otherwise always be the one cut short. */
        m->cut_short = early != TURN_WHOLE && !limit;
        m->quantum_used_ns =
            m->cut_short ? m->quantum_used_ns + (now - m->granted_at) : 0;
        r->cut = r->cut || (early == TURN_FRESH && !limit);
        pol_drop(g, gpu, c, now, out);
        due = drain_deadline(p, m);
    }
    if (due)
        pol_earliest(next, due);
    if (accrues_at)
        pol_earliest(next, accrues_at);
    if (g->mode == SCHED_MODE_AUTO && g->n_running > 1 &&
        (due = trial_end(p, g, m, now)))
        pol_earliest(next, due);
}

static uint64_t tick_gpu(struct policy *p, struct gpu_sched *g, int gpu,
                         uint64_t now, struct policy_actions *out)
{
    uint64_t next = 0;

    pol_roll_window(p, g, now);
    admit(p, g, gpu, now, out); /* a throttle may have been lifted */
    if (pol_has_spent_waiter(p, g, now))
        pol_earliest(&next, pol_slice_end(p, g, now)); /* more budget accrues */

    /* Revocations first: who may keep running is judged on the set that
     * is left. */
    revoke_overdue(p, g, gpu, now, out);
    shed_runners(p, g, gpu, now, out);
    if (p->ranked) {
        preempt_outranked(p, g, gpu, now, out);
        uint64_t rank_due = pol_rank_change_due(p, g, now);
        if (rank_due)
            pol_earliest(&next, rank_due);
    }

    /* A fresh arrival cuts holders short only where it waits itself: a
     * gang's waiter borrowed from another GPU (pol_gang_waiter) has them
     * rotate at their quantum, as its gang ages. */
    int blocked = blocked_waiter(p, g, gpu, now);
    struct rotation r = {0};
    if (blocked >= 0) {
        r.waiter = &g->members[blocked];
        r.quantum = quantum_for(p, g, r.waiter);
        r.own = true;
    }
    pol_gang_census(p);
    if (!r.waiter && (r.waiter = pol_gang_waiter(p, gpu)))
        r.quantum = pol_gpu_quantum(p, g);
    for (int c = 0; c < g->slots && g->n_running; c++) {
        struct member *m = &g->members[c];
        if (!pol_room_for(out, 2)) {
            out->truncated = true;
            break;
        }
        if (m->present && m->state == MEMBER_HOLDING)
            rotate_holder(p, g, gpu, c, &r, now, out, &next);
        else if (m->present && m->state == MEMBER_DRAINING)
            pol_earliest(&next, drain_deadline(p, m));
    }
    if (r.cut)
        g->members[blocked].fresh_cut = true;
    pol_expire_evictions(p, g, now, &next);
    admit(p, g, gpu, now, out); /* revocations and evictions made room */
    /* An idle client that reaches idle-swap-after may make the room. */
    uint64_t idle_due = pol_idle_swap_next(p, g, gpu, now);
    if (idle_due)
        pol_earliest(&next, idle_due);
    uint64_t prepare_due = pol_prepare_ahead(p, g, gpu, now, out);
    if (prepare_due)
        pol_earliest(&next, prepare_due);
    return next;
}

uint64_t policy_tick(struct policy *p, uint64_t now, struct policy_actions *out)
{
    uint64_t next = 0;

    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        uint64_t due = tick_gpu(p, &p->gpus[gpu], gpu, now, out);
        if (due)
            pol_earliest(&next, due);
    }
    uint64_t due = pol_gang_drain(p, now, out);
    if (due)
        pol_earliest(&next, due);
    return next;
}

/* ---- settings ------------------------------------------------------------ */

void policy_set_anti_thrash(struct policy *p, bool on, uint64_t now)
{
    if (p->anti_thrash == on)
        return;
    p->anti_thrash = on;
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        for (int c = 0; c < g->slots; c++)
            if (pol_running(&g->members[c]))
                pol_end_hold(p, g, c, now);
        pol_dequeue_all(g, now);
    }
}

/* Every rule forgets the account: its limit, its class and floor, its
 * time. */
void policy_reset_account(struct policy *p, int account)
{
    policy_set_priority(p, account, PRIORITY_UNSET);
    policy_set_min_share(p, account, 0);
    policy_set_idle_swap(p, account, true);
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        p->gpus[gpu].usage[account] = (struct account_usage){0};
        p->gpus[gpu].ran_until[account] = 0;
        p->gpus[gpu].core_limit[account] = 0;
        p->gpus[gpu].stats[account] = (struct policy_account_stats){0};
    }
}
