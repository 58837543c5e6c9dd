/* policy_memory.c - memory-aware scheduling: footprints, admission by
 * memory, PREPARE_SWAP and EVICT, and the switch time (see "Memory" and
 * "Rotation" in policy.h). */
#include "policy_internal.h"

uint64_t policy_memory_limit(const struct policy *p, int gpu)
{
    uint64_t capacity = p->gpus[gpu].capacity;

    return capacity - capacity / 100 * p->reserve_percent;
}

/* The part of m's footprint that stays on the GPU while it is swapped
 * out: what it allocated that is not managed memory, its credit and its
 * context. */
static uint64_t fixed_bytes(const struct member *m)
{
    return m->footprint - m->evictable;
}

/* What of m's memory is on the GPU now. */
uint64_t occupied_bytes(const struct member *m)
{
    if (!m->present)
        return 0;
    return running(m) || m->resident ? m->footprint : fixed_bytes(m);
}

uint64_t resident_bytes(const struct gpu_sched *g)
{
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        sum += occupied_bytes(&g->members[c]);
    return sum;
}

/* What the clients of g hold together, on the GPU or swapped out. */
uint64_t held_bytes(const struct gpu_sched *g)
{
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        if (g->members[c].present)
            sum += g->members[c].footprint;
    return sum;
}

/* What no swap-out can move: the fixed part of every client. */
static uint64_t fixed_total(const struct gpu_sched *g)
{
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        if (g->members[c].present)
            sum += fixed_bytes(&g->members[c]);
    return sum;
}

/* Whether evicting all that can move would make room for client: memory
 * that cannot move may leave it too little (a client bigger than the limit
 * only needs the others' evictable memory gone, see fits()). */
bool room_possible(const struct policy *p, const struct gpu_sched *g,
                   int gpu, int client)
{
    const struct member *m = &g->members[client];
    uint64_t limit = policy_memory_limit(p, gpu);

    return m->footprint > limit ||
           fixed_total(g) + m->footprint - occupied_bytes(m) <= limit;
}

/* Memory on its way out (EVICT sent, SWAPPED not yet received). */
static uint64_t evicting_bytes(const struct gpu_sched *g)
{
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        if (g->members[c].present && g->members[c].evicting)
            sum += g->members[c].evictable;
    return sum;
}

/* Whether admitting client adds no more than the GPU can hold. Memory that
 * is not evictable is on the GPU whether it runs or not, so a client with
 * none adds nothing; a client that is swapping out waits for the swap to
 * finish. */
bool fits(const struct policy *p, const struct gpu_sched *g, int gpu,
          int client)
{
    const struct member *m = &g->members[client];
    uint64_t others = resident_bytes(g) - occupied_bytes(m);

    if (!g->capacity || !m->evictable)
        return true;
    if (m->evicting)
        return false;
    /* A client bigger than the limit runs beside nothing that can move
     * rather than never. */
    if (m->footprint > policy_memory_limit(p, gpu))
        return others == fixed_total(g) - fixed_bytes(m);
    return others + m->footprint <= policy_memory_limit(p, gpu);
}

/* ---- switch time ------------------------------------------------------- */

static uint64_t clamp(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static bool swaps_measured(const struct gpu_sched *g)
{
    return g->swap_out.ns_per_byte > 0 && g->swap_in.ns_per_byte > 0;
}

/* Time to swap the running evictable memory out and `incoming` bytes in,
 * at the measured rates. */
static uint64_t swap_estimate_ns(const struct gpu_sched *g, uint64_t incoming)
{
    uint64_t outgoing = 0;

    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (running(m))
            outgoing += m->evictable;
    }
    return (uint64_t)(outgoing * g->swap_out.ns_per_byte +
                      incoming * g->swap_in.ns_per_byte);
}

uint64_t switch_time(const struct policy *p, const struct gpu_sched *g,
                     uint64_t incoming, bool *measured)
{
    *measured = p->switch_fixed_ns == 0 && swaps_measured(g);
    if (p->switch_fixed_ns)
        return p->switch_fixed_ns;
    if (!*measured)
        return POLICY_SWITCH_UNMEASURED_NS;
    return clamp(swap_estimate_ns(g, incoming) * p->switch_multiplier,
                 POLICY_SWITCH_MIN_NS, POLICY_SWITCH_MAX_NS);
}

/* ---- swaps ------------------------------------------------------------ */

/* PREPARE_SWAP, once per membership: the client then makes the pinned host
 * copies of what it allocates later by itself. */
void prepare(struct gpu_sched *g, int gpu, int client,
             struct policy_actions *out)
{
    struct member *m = &g->members[client];

    if (m->prepare_sent)
        return;
    m->prepare_sent = true;
    emit(out, ACTION_PREPARE_SWAP, gpu, client, m->lease);
}

/* Room for an EVICT and the PREPARE_SWAP that may have to precede it. */
static bool room_for_evict(const struct policy_actions *out,
                           const struct member *m)
{
    return room_for(out, m->prepare_sent ? 1 : 2);
}

static void evict(struct gpu_sched *g, int gpu, int client, uint64_t now,
                  struct policy_actions *out)
{
    struct member *m = &g->members[client];

    prepare(g, gpu, client, out);
    m->evicting = true;
    m->evict_sent_at = now;
    emit(out, ACTION_EVICT, gpu, client, m->lease);
}

/* The GPU's clients hold more than it admits: sooner or later they swap,
 * so every evictable one prepares now. Pinning is slow (~1.7 GB/s on an
 * H100): started when the jobs allocate, it is done before most of their
 * swap-outs, not only a switch time ahead of the first. */
void prepare_if_oversubscribed(const struct policy *p,
                               struct gpu_sched *g, int gpu,
                               struct policy_actions *out)
{
    if (!g->capacity || held_bytes(g) <= policy_memory_limit(p, gpu))
        return;
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (!m->present || !m->evictable || m->prepare_sent)
            continue;
        if (!room_for(out, 1)) {
            out->truncated = true;
            return;
        }
        prepare(g, gpu, c, out);
    }
}

/* Eviction order: lower priority classes first, then the oldest hold. */
static bool goes_before(const struct policy *p, const struct member *a,
                        const struct member *b)
{
    unsigned ca = class_of(p, a->account), cb = class_of(p, b->account);

    return ca != cb ? ca < cb : a->grant_seq < b->grant_seq;
}

/* Whether client c may be swapped out to make room for waiter: an idle
 * evictable client whose memory is on the GPU, or a runner of a lower
 * class that the waiter preempts (it swaps out once it has released). */
static bool may_evict(const struct policy *p, const struct gpu_sched *g,
                      int gpu, int c, int waiter, uint64_t now)
{
    const struct member *m = &g->members[c];

    if (c == waiter || !m->present || !m->evictable || !m->resident ||
        m->evicting || m->evict_after_release)
        return false;
    if (!running(m))
        return true;
    return class_of(p, m->account) < class_of(p, g->members[waiter].account) &&
           outranked(p, g, gpu, c, now);
}

/* Memory on its way out: EVICT sent, or a runner's after its release. */
static uint64_t leaving_bytes(const struct gpu_sched *g)
{
    uint64_t sum = evicting_bytes(g);

    for (int c = 0; c < g->slots; c++)
        if (running(&g->members[c]) && g->members[c].evict_after_release)
            sum += g->members[c].evictable;
    return sum;
}

/* Asks evictable clients other than the waiter that still occupy the GPU
 * to swap out, lowest class and oldest hold first, until `need` more bytes
 * would fit (all of them for a waiter bigger than the limit, see fits()).
 * A lower-class runner that the waiter preempts goes before the idle
 * clients of higher classes. */
void evict_for(const struct policy *p, struct gpu_sched *g, int gpu,
               int waiter, uint64_t need, uint64_t now,
               struct policy_actions *out)
{
    uint64_t limit = policy_memory_limit(p, gpu);
    uint64_t resident = resident_bytes(g), leaving = leaving_bytes(g);
    bool alone = g->members[waiter].footprint > limit;

    if (!room_possible(p, g, gpu, waiter))
        return;
    while (alone || resident - leaving + need > limit) {
        int first = -1;
        for (int c = 0; c < g->slots; c++)
            if (may_evict(p, g, gpu, c, waiter, now) &&
                (first < 0 || goes_before(p, &g->members[c], &g->members[first])))
                first = c;
        if (first < 0 || !room_for_evict(out, &g->members[first]))
            return;
        struct member *m = &g->members[first];
        leaving += m->evictable;
        if (running(m)) {
            /* It prepares while it drains: its EVICT follows the release. */
            m->evict_after_release = true;
            prepare(g, gpu, first, out);
        } else {
            evict(g, gpu, first, now, out);
        }
    }
}

/* A runner dropped because the running set outgrew the GPU swaps out as
 * soon as it has stopped (released or revoked). */
void evict_if_asked(struct gpu_sched *g, int gpu, int client,
                    uint64_t now, struct policy_actions *out)
{
    struct member *m = &g->members[client];

    if (m->evict_after_release && m->evictable && room_for_evict(out, m))
        evict(g, gpu, client, now, out);
    m->evict_after_release = false;
}

/* The newest evictable runner, when the runners' memory grew past the
 * limit (-1: it did not, or nobody can leave). */
int overgrown_runner(const struct policy *p, const struct gpu_sched *g,
                     int gpu)
{
    int newest = -1, holding = 0;

    /* Memory on its way out does not count: one growth drops one runner. */
    if (!g->capacity ||
        resident_bytes(g) - evicting_bytes(g) <= policy_memory_limit(p, gpu))
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

void policy_swapped(struct policy *p, int gpu, int client, int direction,
                    uint64_t bytes, uint64_t duration_ns, uint64_t now,
                    struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];
    struct swap_stats *s = direction == SWAP_OUT ? &g->swap_out : &g->swap_in;

    if (!m->present)
        return;
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
    if (direction == SWAP_OUT && m->evicting) {
        m->evicting = false;
        m->resident = running(m);
        admit(p, g, gpu, now, out);
    }
}

/* A client that does not answer EVICT within the drain timeout is taken as
 * swapped out; next: the earliest such timeout still to come. */
void expire_evictions(const struct policy *p, struct gpu_sched *g,
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
        } else {
            earliest(next, due);
        }
    }
}

/* ---- settings and queries ---------------------------------------------- */

void policy_set_capacity(struct policy *p, int gpu, uint64_t bytes)
{
    p->gpus[gpu].capacity = bytes;
}

void policy_set_footprint(struct policy *p, int gpu, int client,
                          uint64_t footprint, uint64_t evictable)
{
    struct member *m = &p->gpus[gpu].members[client];

    if (evictable > footprint)
        evictable = footprint;
    /* Managed memory that appears while the client is idle has not been
     * touched by the GPU yet: it is not resident until the next grant. */
    if ((m->evictable == 0) != (evictable == 0))
        m->resident = running(m);
    m->footprint = footprint;
    m->evictable = evictable;
}

void policy_set_reserve(struct policy *p, unsigned percent)
{
    p->reserve_percent = percent;
}

void policy_set_switch_time(struct policy *p, uint64_t fixed_ns,
                            unsigned multiplier)
{
    p->switch_fixed_ns = fixed_ns;
    if (multiplier)
        p->switch_multiplier = multiplier;
}

uint64_t policy_resident(const struct policy *p, int gpu)
{
    return resident_bytes(&p->gpus[gpu]);
}

uint64_t policy_running_footprint(const struct policy *p, int gpu)
{
    const struct gpu_sched *g = &p->gpus[gpu];
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        if (running(&g->members[c]))
            sum += g->members[c].footprint;
    return sum;
}

uint64_t policy_switch_time(const struct policy *p, int gpu, bool *measured)
{
    const struct gpu_sched *g = &p->gpus[gpu];
    const struct member *w = NULL;

    for (int i = 0; i < g->n_waiting && !w; i++)
        if (g->members[g->queue[i]].wait_reason == WAIT_MEMORY)
            w = &g->members[g->queue[i]];
    return switch_time(p, g, w ? w->evictable : 0, measured);
}
