/* policy_memory.c - memory-aware scheduling: footprints, what fits, and
 * the switch time (see "Memory" and "Rotation" in policy.h). Making room
 * is policy_swap.c's. */
#include "policy_internal.h"

uint64_t policy_memory_limit(const struct policy *p, int gpu)
{
    uint64_t capacity = p->gpus[gpu].capacity;

    return capacity - capacity / 100 * p->reserve_percent;
}

/* The part of m's footprint that stays on the GPU while it is swapped
 * out: what it allocated that is not evictable (device memory) and its
 * context. Not its credit, which is no memory yet: counted as resident,
 * a swapped-out runner's credit kept a waiter of clients that fit one at
 * a time out for good (0.5 GiB of context and 256 MiB of credit beside
 * 13.75 GiB is over 14.4 GiB, the context alone is not), and no swap-out
 * could make that room. What it allocates from its credit while swapped
 * out is evictable, and counts from its next grant as any other. A client
 * with nothing evictable never swaps out and allocates device memory: its
 * credit stays counted. */
uint64_t pol_fixed_bytes(const struct member *m)
{
    uint64_t fixed = m->footprint - m->evictable;

    if (!m->evictable)
        return fixed;
    return fixed - (m->credit < fixed ? m->credit : fixed);
}

/* What of m's footprint leaves the GPU's count when it swaps out: its
 * evictable memory and its credit. */
uint64_t pol_movable_bytes(const struct member *m)
{
    return m->footprint - pol_fixed_bytes(m);
}

/* What a swap-out of m would take off the GPU now: all that can move
 * while it is resident, else what it allocated since it swapped out. */
uint64_t pol_leaving_bytes(const struct member *m)
{
    return m->resident ? pol_movable_bytes(m) : m->allocated_while_out;
}

/* What of m's memory is on the GPU now. */
uint64_t pol_occupied_bytes(const struct member *m)
{
    if (!m->present)
        return 0;
    if (pol_running(m) || m->resident)
        return m->footprint;
    return pol_fixed_bytes(m) + m->allocated_while_out;
}

uint64_t pol_resident_bytes(const struct gpu_sched *g)
{
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        sum += pol_occupied_bytes(&g->members[c]);
    return sum;
}

/* What the clients of g hold together, on the GPU or swapped out. */
uint64_t pol_held_bytes(const struct gpu_sched *g)
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
            sum += pol_fixed_bytes(&g->members[c]);
    return sum;
}

uint64_t pol_idle_swap_due(const struct policy *p, const struct member *m)
{
    return p->idle_swap_off[m->account] ? 0 : m->since + p->idle_swap_after_ns;
}

bool pol_pinned(const struct policy *p, const struct member *m)
{
    return pol_idle(m) && m->resident && m->evictable &&
           p->idle_swap_off[m->account];
}

/* Evictable memory that stays while its clients stay idle. */
static uint64_t pinned_total(const struct policy *p, const struct gpu_sched *g)
{
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        if (pol_pinned(p, &g->members[c]))
            sum += g->members[c].evictable;
    return sum;
}

/* Whether evicting all that can move would make room for client: memory
 * that cannot move (fixed parts, idle memory of pods that opted out) may
 * leave it too little (a client bigger than the limit only needs the
 * others' evictable memory gone, see pol_fits()). */
bool pol_room_possible(const struct policy *p, const struct gpu_sched *g,
                       int gpu, int client)
{
    const struct member *m = &g->members[client];
    uint64_t limit = policy_memory_limit(p, gpu), pinned = pinned_total(p, g);

    if (m->footprint > limit)
        return pinned == 0;
    /* Its own memory counts whole, wherever it is now. */
    return fixed_total(g) - pol_fixed_bytes(m) + pinned + m->footprint <= limit;
}

/* Whether admitting client adds no more than the GPU can hold. Memory that
 * is not evictable is on the GPU whether it runs or not, so a client with
 * none adds nothing; a client that is swapping out waits for the swap to
 * finish. */
bool pol_fits(const struct policy *p, const struct gpu_sched *g, int gpu,
              int client)
{
    const struct member *m = &g->members[client];
    uint64_t others = pol_resident_bytes(g) - pol_occupied_bytes(m);

    if (!g->capacity || !m->evictable)
        return true;
    if (m->evicting)
        return false;
    /* A client bigger than the limit runs beside nothing that can move
     * rather than never. */
    if (m->footprint > policy_memory_limit(p, gpu))
        return others == fixed_total(g) - pol_fixed_bytes(m);
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
        if (pol_running(m))
            outgoing += m->evictable;
    }
    return (uint64_t)(outgoing * g->swap_out.ns_per_byte +
                      incoming * g->swap_in.ns_per_byte);
}

uint64_t pol_switch_time(const struct policy *p, const struct gpu_sched *g,
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

/* ---- settings and queries ---------------------------------------------- */

void policy_set_capacity(struct policy *p, int gpu, uint64_t bytes)
{
    p->gpus[gpu].capacity = bytes;
}

/* Memory that a swapped-out client allocates is on the GPU, the rest of
 * its evictable memory in host memory: admitting a newcomer into it would
 * fail the newcomer's allocation. What it frees meanwhile may be either;
 * counted as what was in host memory, until its next swap-out or grant. */
static void note_allocated_while_out(struct member *m, uint64_t evictable,
                                     uint64_t pending)
{
    uint64_t now_real = evictable > pending ? evictable - pending : 0;
    uint64_t was_real = m->evictable > m->pending ? m->evictable - m->pending : 0;

    if (now_real > was_real)
        m->allocated_while_out += now_real - was_real;
    if (m->allocated_while_out > now_real)
        m->allocated_while_out = now_real;
}

void policy_set_footprint(struct policy *p, int gpu, int client,
                          uint64_t footprint, uint64_t evictable,
                          uint64_t pending)
{
    struct member *m = &p->gpus[gpu].members[client];

    if (evictable > footprint)
        evictable = footprint;
    /* libnvshare backs every allocation with device memory at once, so
     * evictable memory that appears while the client does not run (before
     * its first grant, or idle) is on the GPU: admitting a newcomer into
     * it would fail the newcomer's allocation. Only what a waiting
     * allocation told ahead (pending) is not there until it is granted. */
    if (m->evictable == 0 && evictable)
        m->resident = pol_running(m) || evictable > pending;
    else if (m->evictable && evictable == 0)
        m->resident = pol_running(m);
    else if (!m->resident && !pol_running(m))
        note_allocated_while_out(m, evictable, pending);
    if (m->resident || !evictable)
        m->allocated_while_out = 0;
    m->footprint = footprint;
    m->evictable = evictable;
    m->pending = pending;
}

void policy_set_credit(struct policy *p, int gpu, int client, uint64_t bytes)
{
    p->gpus[gpu].members[client].credit = bytes;
}

void policy_set_reserve(struct policy *p, unsigned percent)
{
    p->reserve_percent = percent;
}

void policy_set_idle_swap_after(struct policy *p, uint64_t ns)
{
    p->idle_swap_after_ns = ns;
}

void policy_set_idle_swap(struct policy *p, int account, bool on)
{
    p->idle_swap_off[account] = !on;
}

bool policy_idle_swap(const struct policy *p, int account)
{
    return !p->idle_swap_off[account];
}

void policy_set_host_swap_budget(struct policy *p, uint64_t bytes)
{
    p->host_swap_budget = bytes;
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
    return pol_resident_bytes(&p->gpus[gpu]);
}

uint64_t policy_running_footprint(const struct policy *p, int gpu)
{
    const struct gpu_sched *g = &p->gpus[gpu];
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        if (pol_running(&g->members[c]))
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
    return pol_switch_time(p, g, w ? w->evictable : 0, measured);
}
