/* policy_swap.c - making room on a GPU: PREPARE_SWAP, EVICT and what
 * their answers say (see "Memory" in policy.h). What fits is
 * policy_memory.c's to say; which client goes first follows the priority
 * classes (policy_priority.c). */
#include "policy_internal.h"

/* Memory on its way out (EVICT sent, SWAPPED not yet received): what
 * leaves the GPU's count with the swap-out, its credit with its evictable
 * memory. */
static uint64_t evicting_bytes(const struct gpu_sched *g)
{
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        if (g->members[c].present && g->members[c].evicting)
            sum += pol_leaving_bytes(&g->members[c]);
    return sum;
}

static void send_prepare(struct gpu_sched *g, int gpu, int client,
                         struct policy_actions *out)
{
    struct member *m = &g->members[client];

    m->prepare_sent = true;
    m->prepared_bytes = m->evictable;
    pol_emit(out, ACTION_PREPARE_SWAP, gpu, client, m->lease);
}

/* PREPARE_SWAP, once per membership ahead of a swap: the client makes its
 * staging ring and the host copies of what it holds then. */
void pol_prepare(struct gpu_sched *g, int gpu, int client,
                 struct policy_actions *out)
{
    if (!g->members[client].prepare_sent)
        send_prepare(g, gpu, client, out);
}

/* Whether m's host copies are made for as much as it holds now. */
static bool prepared(const struct member *m)
{
    return m->prepare_sent && m->evictable <= m->prepared_bytes;
}

/* When idle m is to prepare (0: not at all). */
static uint64_t idle_prepare_due(const struct policy *p, const struct member *m)
{
    if (!m->resident || !pol_idle_swap_due(p, m))
        return 0;
    return m->since + POLICY_PREPARE_AFTER_NS;
}

/* When holder m is to prepare (0: not at all). A waiter for memory has a
 * holder leave at once once it has had the GPU for the switch time, and a
 * waiter of a higher class at any time: its swap-out, unprepared, would
 * write host memory for the first time on the waiter's critical path (at
 * half the link's speed on an H200's host). So a holder that a higher
 * class could preempt prepares as soon as its start's allocations are
 * made (POLICY_PREPARE_AFTER_NS after its grant), any other one at its
 * switch time, whatever the size of the newcomer to come. Never for a pod
 * opted out of idle swap (a latency-critical service): its own process
 * would make the copies, beside its requests. */
static uint64_t holder_prepare_due(const struct policy *p,
                                   const struct gpu_sched *g,
                                   const struct member *m)
{
    bool measured;

    if (m->state != MEMBER_HOLDING || !g->capacity ||
        p->idle_swap_off[m->account])
        return 0;
    if (pol_preemptible(p, m->account))
        return m->granted_at + POLICY_PREPARE_AFTER_NS;
    return m->granted_at + pol_switch_time(p, g, 0, &measured);
}

uint64_t pol_prepare_ahead(const struct policy *p, struct gpu_sched *g, int gpu,
                           uint64_t now, struct policy_actions *out)
{
    uint64_t next = 0;

    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (!m->present || !m->evictable || m->evicting || prepared(m))
            continue;
        uint64_t due = pol_idle(m) ? idle_prepare_due(p, m)
                                   : holder_prepare_due(p, g, m);
        if (!due)
            continue;
        if (now < due) {
            pol_earliest(&next, due);
        } else if (!pol_room_for(out, 1)) {
            out->truncated = true;
            break;
        } else {
            send_prepare(g, gpu, c, out);
        }
    }
    return next;
}

/* Room for an EVICT and the PREPARE_SWAP that may have to precede it. */
static bool room_for_evict(const struct policy_actions *out,
                           const struct member *m)
{
    return pol_room_for(out, m->prepare_sent ? 1 : 2);
}

static void evict(struct gpu_sched *g, int gpu, int client, uint64_t now,
                  struct policy_actions *out)
{
    struct member *m = &g->members[client];

    pol_prepare(g, gpu, client, out);
    m->evicting = true;
    m->evict_sent_at = now;
    pol_emit(out, ACTION_EVICT, gpu, client, m->lease);
}

/* The GPU's clients hold more than it admits: sooner or later they swap,
 * so every evictable one prepares now. Pinning is slow (~1.7 GB/s on an
 * H100): started when the jobs allocate, it is done before most of their
 * swap-outs, not only a switch time ahead of the first. */
void pol_prepare_if_oversubscribed(const struct policy *p, struct gpu_sched *g,
                                   int gpu, struct policy_actions *out)
{
    if (!g->capacity || pol_held_bytes(g) <= policy_memory_limit(p, gpu))
        return;
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (!m->present || !m->evictable || m->prepare_sent)
            continue;
        if (!pol_room_for(out, 1)) {
            out->truncated = true;
            return;
        }
        pol_prepare(g, gpu, c, out);
    }
}

/* Eviction order: lower priority classes first, then the client that ran
 * longest ago (the longest idle), then the oldest grant. */
static bool goes_before(const struct policy *p, const struct member *a,
                        const struct member *b)
{
    unsigned ca = pol_class_of(p, a->account), cb = pol_class_of(p, b->account);

    if (ca != cb)
        return ca < cb;
    if (a->released_at != b->released_at)
        return a->released_at < b->released_at;
    return a->grant_seq < b->grant_seq;
}

/* Whether client c may be swapped out to make room for waiter, its memory
 * being on the GPU: an idle client once idle for idle-swap-after, unless
 * its pod opted out; a client that takes turns, dropped (rotated out) or
 * waiting behind the waiter; a runner of a lower class that the waiter
 * preempts (it swaps out once it has released). A busy client is never
 * swapped for being idle. */
static bool may_evict(const struct policy *p, const struct gpu_sched *g,
                      int gpu, int c, int waiter, uint64_t now)
{
    const struct member *m = &g->members[c];

    if (c == waiter || !m->present || !m->evictable || !pol_leaving_bytes(m) ||
        m->evicting || m->evict_after_release)
        return false;
    if (pol_idle(m)) {
        uint64_t due = pol_idle_swap_due(p, m);
        return due && now >= due;
    }
    if (!pol_running(m))
        return !pol_resumes_in_place(p, g, gpu, c);
    return pol_class_of(p, m->account) <
               pol_class_of(p, g->members[waiter].account) &&
           pol_outranked(p, g, gpu, c, now);
}

/* Memory that is, or is bound to be, in host memory: parked, on its way
 * out, or a runner's after its release. */
static uint64_t bound_for_host(const struct member *m)
{
    if (!m->present || !(m->parked || m->evicting || m->evict_after_release))
        return 0;
    return m->evictable;
}

uint64_t pol_parked_bytes(const struct policy *p)
{
    uint64_t sum = 0;

    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        const struct gpu_sched *g = &p->gpus[gpu];
        for (int c = 0; c < g->slots; c++)
            sum += bound_for_host(&g->members[c]);
    }
    return sum;
}

/* What is parked, less the waiter's own memory: it comes back from the
 * host as the waiter is admitted, so two clients can always trade places. */
static uint64_t parked_but(const struct policy *p, const struct member *waiter)
{
    return pol_parked_bytes(p) - bound_for_host(waiter);
}

/* What m's swap-out would add to what is parked: its evictable memory,
 * none of which is counted yet while it is resident; all of it already
 * is while it is out (bound_for_host), what it allocated since as well. */
static uint64_t to_host_bytes(const struct member *m)
{
    return m->resident ? m->evictable : 0;
}

static bool within_budget(const struct policy *p, uint64_t parked,
                          const struct member *m)
{
    return parked <= p->host_swap_budget &&
           to_host_bytes(m) <= p->host_swap_budget - parked;
}

/* Memory on its way out: EVICT sent, or a runner's after its release. */
static uint64_t leaving_bytes(const struct gpu_sched *g)
{
    uint64_t sum = evicting_bytes(g);

    for (int c = 0; c < g->slots; c++)
        if (pol_running(&g->members[c]) && g->members[c].evict_after_release)
            sum += pol_movable_bytes(&g->members[c]);
    return sum;
}

/* Asks evictable clients other than the waiter that still occupy the GPU
 * to swap out (may_evict), lowest class and longest idle first, until
 * `need` more bytes would fit (all of them for a waiter bigger than the
 * limit, see pol_fits()), as far as the host swap budget allows. A
 * lower-class runner that the waiter preempts goes before the idle clients
 * of higher classes. */
void pol_evict_for(const struct policy *p, struct gpu_sched *g, int gpu,
                   int waiter, uint64_t need, uint64_t now,
                   struct policy_actions *out)
{
    uint64_t limit = policy_memory_limit(p, gpu);
    uint64_t resident = pol_resident_bytes(g), leaving = leaving_bytes(g);
    uint64_t parked = parked_but(p, &g->members[waiter]);
    bool alone = g->members[waiter].footprint > limit;

    if (!pol_room_possible(p, g, gpu, waiter))
        return;
    while (alone || resident - leaving + need > limit) {
        int first = -1;
        for (int c = 0; c < g->slots; c++)
            if (may_evict(p, g, gpu, c, waiter, now) &&
                within_budget(p, parked, &g->members[c]) &&
                (first < 0 || goes_before(p, &g->members[c], &g->members[first])))
                first = c;
        if (first < 0 || !room_for_evict(out, &g->members[first]))
            return;
        struct member *m = &g->members[first];
        /* Its credit leaves the count too; only its evictable memory goes
         * to the host. */
        leaving += pol_leaving_bytes(m);
        parked += to_host_bytes(m);
        if (pol_running(m)) {
            /* It prepares while it drains: its EVICT follows the release. */
            m->evict_after_release = true;
            pol_prepare(g, gpu, first, out);
        } else {
            evict(g, gpu, first, now, out);
        }
    }
}

/* A runner dropped because the running set outgrew the GPU swaps out as
 * soon as it has stopped (released or revoked). */
void pol_evict_if_asked(struct gpu_sched *g, int gpu, int client, uint64_t now,
                        struct policy_actions *out)
{
    struct member *m = &g->members[client];

    if (m->evict_after_release && m->evictable && room_for_evict(out, m))
        evict(g, gpu, client, now, out);
    m->evict_after_release = false;
}

/* The newest evictable runner, when the runners' memory grew past the
 * limit (-1: it did not, or nobody can leave). */
int pol_overgrown_runner(const struct policy *p, const struct gpu_sched *g,
                         int gpu)
{
    int newest = -1, holding = 0;

    /* Memory on its way out does not count: one growth drops one runner. */
    if (!g->capacity || pol_resident_bytes(g) - evicting_bytes(g) <=
                            policy_memory_limit(p, gpu))
        return -1;
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (!m->present || m->state != MEMBER_HOLDING)
            continue;
        holding++;
        if (m->evictable &&
            (newest < 0 || m->grant_seq > g->members[newest].grant_seq))
            newest = c;
    }
    return holding >= 2 && g->n_running == holding ? newest : -1;
}

/* Records a swap of client's memory on g; true when it ends an eviction:
 * room was made, and the waiters may be admitted. */
bool pol_swap_done(struct gpu_sched *g, int client, int direction,
                   uint64_t bytes, uint64_t duration_ns, uint64_t now)
{
    struct member *m = &g->members[client];
    struct swap_stats *s = direction == SWAP_OUT ? &g->swap_out : &g->swap_in;

    if (!m->present)
        return false;
    /* An EVICT answered with nothing left evictable moved nothing (the
     * client's memory cgroup had no room for the copy): its memory is
     * where it was, and no swap-out is counted. The waiters look again. */
    if (direction == SWAP_OUT && m->evicting && !m->evictable) {
        m->evicting = false;
        return true;
    }
    s->count++;
    s->bytes += bytes;
    s->ns += duration_ns;
    s->last_ns = duration_ns;
    /* Small swaps measure latency, not bandwidth: only those of 64 MiB or
     * more move the estimate. */
    if (bytes >= (64ull << 20)) {
        double rate = (double)duration_ns / (double)bytes;
        s->ns_per_byte = s->ns_per_byte > 0 ? (3 * s->ns_per_byte + rate) / 4
                                            : rate;
    }
    struct policy_account_stats *stats = &g->stats[m->account];
    if (direction != SWAP_OUT) {
        m->swap_ins++;
        stats->swap_ins++;
        if (m->swap_in_from) {
            m->swap_in_wait_ns += now - m->swap_in_from;
            stats->swap_in_wait_ns += now - m->swap_in_from;
        }
        m->swap_in_from = 0;
        m->parked = false;
        return false;
    }
    m->swap_outs++;
    stats->swap_outs++;
    if (!m->evicting)
        return false;
    m->evicting = false;
    m->resident = pol_running(m);
    m->parked = !m->resident;
    m->allocated_while_out = 0;
    return true;
}

/* A client that does not answer EVICT within the drain timeout is taken as
 * swapped out; next: the earliest such timeout still to come. */
void pol_expire_evictions(const struct policy *p, struct gpu_sched *g,
                          uint64_t now, uint64_t *next)
{
    for (int c = 0; c < g->slots; c++) {
        struct member *m = &g->members[c];
        if (!m->present || !m->evicting)
            continue;
        /* A client that does not answer EVICT cannot hold the room
         * forever; its managed memory is the driver's to page out. */
        uint64_t due = m->evict_sent_at + p->drain_timeout_ns;
        if (now >= due) {
            m->evicting = false;
            m->resident = false;
            m->parked = true;
            m->allocated_while_out = 0;
        } else {
            pol_earliest(next, due);
        }
    }
}

bool pol_memory_waiter(const struct gpu_sched *g)
{
    for (int i = 0; i < g->n_waiting; i++)
        if (g->members[g->queue[i]].wait_reason == WAIT_MEMORY)
            return true;
    return false;
}

/* A waiter that goes on where it is, its memory still on the GPU (and
 * fitting: one that grew meanwhile needs room like any waiter): it passes
 * a waiter for memory and is not swapped out for it. Either
 *  - a holder that paused within its turn while a waiter waits for
 *    memory: it gave the GPU back unasked (a training job loading data,
 *    saving a checkpoint) less than the switch time into its turn. Its
 *    turn ended at its first pause before: measured on an H200, two 6 GiB
 *    PyTorch jobs on 10 GiB finished 12-34 % later than their solos, the
 *    first holder swapped out 3 s into a 60 s switch time;
 *  - or a client of a pod that opted out of idle swapping (a latency-
 *    critical service), coming back from idle: swapped out at its next
 *    request, it would lose its memory exactly when it needs it. One that
 *    takes turns (was dropped) swaps as any other. */
bool pol_resumes_in_place(const struct policy *p, const struct gpu_sched *g,
                          int gpu, int client)
{
    const struct member *m = &g->members[client];
    bool measured;

    if (!m->present || !m->resident || m->evicting || m->dropped ||
        !pol_fits(p, g, gpu, client))
        return false;
    return p->idle_swap_off[m->account] ||
           (m->turn_used_ns > 0 &&
            m->turn_used_ns < pol_switch_time(p, g, 0, &measured));
}

/* The runner whose memory outgrew what fits beside the resident memory of
 * clients that do not run, or -1. Its process waits in an allocation
 * (libnvshare retries while the GPU is full) for the room that they make
 * as they would for a waiter: a job admitted while small that grows beside
 * an idle notebook. */
int pol_grown_runner(const struct policy *p, const struct gpu_sched *g, int gpu)
{
    if (!g->capacity || pol_resident_bytes(g) <= policy_memory_limit(p, gpu))
        return -1;
    for (int c = 0; c < g->slots; c++)
        if (g->members[c].present && pol_running(&g->members[c]))
            return c;
    return -1;
}

uint64_t pol_idle_swap_next(const struct policy *p, const struct gpu_sched *g,
                            int gpu, uint64_t now)
{
    uint64_t next = 0;
    bool memory_waiter = pol_grown_runner(p, g, gpu) >= 0;

    for (int i = 0; i < g->n_waiting && !memory_waiter; i++)
        memory_waiter = g->members[g->queue[i]].wait_reason == WAIT_MEMORY;
    for (int c = 0; memory_waiter && c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (!pol_idle(m) || !pol_leaving_bytes(m) || m->evicting)
            continue;
        uint64_t due = pol_idle_swap_due(p, m);
        if (due > now)
            pol_earliest(&next, due);
    }
    return next;
}

/* What keeps m's memory on the GPU for a waiter (WHY_NONE: nothing it can
 * wait out, or m is not in the way). */
static enum wait_why why_stays(const struct policy *p, const struct member *m,
                               uint64_t parked, uint64_t now)
{
    if (!m->present || !m->evictable)
        return WHY_NONE;
    if (m->evicting)
        return WHY_SWAPPING;
    if (!pol_leaving_bytes(m) || pol_running(m))
        return WHY_NONE;
    if (pol_pinned(p, m))
        return WHY_IDLE_SWAP_OFF;
    if (pol_idle(m) && now < pol_idle_swap_due(p, m))
        return WHY_IDLE_TOO_SHORT;
    if (!within_budget(p, parked, m))
        return WHY_HOST_BUDGET;
    return WHY_NONE;
}

/* The first client in eviction order of the most telling kind: a swap in
 * progress ends the wait soonest, then the budget, then idle clients. */
void pol_wait_why(const struct policy *p, int gpu, int waiter, uint64_t now,
                  struct policy_wait_why *why)
{
    static const enum wait_why telling[] = {WHY_SWAPPING, WHY_HOST_BUDGET,
                                            WHY_IDLE_TOO_SHORT,
                                            WHY_IDLE_SWAP_OFF};
    const struct gpu_sched *g = &p->gpus[gpu];
    const struct member *w = &g->members[waiter];
    uint64_t parked = parked_but(p, w);
    int first[WHY_HOST_BUDGET + 1] = {-1, -1, -1, -1, -1};

    *why = (struct policy_wait_why){.why = WHY_NONE,
                                    .blocker = -1,
                                    .idle_swap_after_ns = p->idle_swap_after_ns,
                                    .parked = parked,
                                    .budget = p->host_swap_budget};
    if (!w->present || w->state != MEMBER_WAITING || w->wait_reason != WAIT_MEMORY)
        return;
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        enum wait_why kind = c == waiter ? WHY_NONE
                                         : why_stays(p, m, parked, now);
        if (kind != WHY_NONE &&
            (first[kind] < 0 || goes_before(p, m, &g->members[first[kind]])))
            first[kind] = c;
    }
    for (size_t i = 0; i < sizeof(telling) / sizeof(telling[0]); i++) {
        int c = first[telling[i]];
        if (c < 0)
            continue;
        why->why = (uint8_t)telling[i];
        why->blocker = c;
        if (g->members[c].state == MEMBER_IDLE)
            why->idle_ns = now - g->members[c].since;
        return;
    }
    /* Memory that cannot move (exported, pools, a container without room
     * for the host copy) leaves it too little: it waits for the client
     * holding the most of it to free it or leave. */
    if (pol_room_possible(p, g, gpu, waiter))
        return;
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        uint64_t fixed = pol_fixed_bytes(m);
        if (c != waiter && m->present && fixed > why->fixed) {
            why->why = WHY_CANNOT_MOVE;
            why->blocker = c;
            why->fixed = fixed;
            why->idle_ns = m->state == MEMBER_IDLE ? now - m->since : 0;
        }
    }
}
