/* policy.c - see policy.h for the model. */
#include "policy.h"

#include <string.h>

static bool room_for(const struct policy_actions *out, int n)
{
    return out->n + n <= POLICY_MAX_ACTIONS;
}

static struct policy_action *emit(struct policy_actions *out,
                                  enum action_kind kind, int gpu, int client,
                                  uint32_t lease)
{
    /* Callers check room_for() before they change any state. */
    struct policy_action *a = &out->list[out->n++];

    *a = (struct policy_action){.kind = kind, .gpu = gpu, .client = client,
                                .lease = lease};
    return a;
}

static void set_state(struct member *m, enum member_state state, uint64_t now)
{
    m->state = (uint8_t)state;
    m->since = now;
}

static bool running(const struct member *m)
{
    return m->present &&
           (m->state == MEMBER_HOLDING || m->state == MEMBER_DRAINING);
}

#define DEFAULT_WINDOW_NS 1000000000ull

void policy_init(struct policy *p, int n_gpus, uint64_t tq_ns,
                 uint64_t drain_timeout_ns)
{
    memset(p, 0, sizeof(*p));
    p->tq_ns = tq_ns;
    p->drain_timeout_ns = drain_timeout_ns;
    p->anti_thrash = true;
    p->window_ns = DEFAULT_WINDOW_NS;
    p->carryover_percent = 100;
    p->reserve_percent = POLICY_RESERVE_PERCENT;
    p->light_permille = POLICY_LIGHT_PERMILLE;
    p->switch_multiplier = POLICY_SWITCH_MULTIPLIER;
    p->n_gpus = n_gpus;
    for (int g = 0; g < n_gpus; g++) {
        p->gpus[g].mode = SCHED_MODE_AUTO;
        p->gpus[g].last_granted = -1;
        p->gpus[g].window_idle = true;
    }
}

void policy_join(struct policy *p, int gpu, int client, int account,
                 uint64_t now)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (client >= g->slots)
        g->slots = client + 1;
    memset(m, 0, sizeof(*m));
    m->present = true;
    m->account = account;
    set_state(m, MEMBER_IDLE, now);
}

/* ---- compute accounting ------------------------------------------------ */

static bool limited(const struct policy *p, int account)
{
    return p->core_limit[account] > 0 && p->core_limit[account] < 100;
}

/* Runners that are billed now: each pays an equal share of the wall time. */
static int billed_runners(const struct gpu_sched *g)
{
    return g->n_running > 0 ? g->n_running : 1;
}

/* Time billed to account in this window, including holds in progress. */
static uint64_t used_ns(const struct gpu_sched *g, int account, uint64_t now)
{
    uint64_t used = g->usage[account].used_ns;

    for (int c = 0; c < g->slots && g->n_running; c++) {
        const struct member *m = &g->members[c];
        if (running(m) && m->account == account && now > m->billed_until)
            used += (now - m->billed_until) / (uint64_t)billed_runners(g);
    }
    return used;
}

/* The sum of the limits of the limited accounts taking part in this window
 * on g (a client that wants or holds the GPU, or time used), counting
 * account (unless -1) as taking part. */
static unsigned limit_sum(const struct policy *p, const struct gpu_sched *g,
                          int account)
{
    bool counted[POLICY_MAX_CLIENTS] = {false};
    unsigned sum = 0;

    if (account >= 0) {
        counted[account] = true;
        sum += p->core_limit[account];
    }
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        int a = m->account;
        bool takes_part = m->present && m->state != MEMBER_IDLE;
        if (!counted[a] && limited(p, a) && (takes_part || g->usage[a].used_ns)) {
            counted[a] = true;
            sum += p->core_limit[a];
        }
    }
    return sum;
}

/* The account's budget per window (0: unlimited). Over-subscribed limits
 * are scaled by 100/sum: the ratios hold and the GPU stays busy. */
static uint64_t budget_for(const struct policy *p, int account, unsigned sum)
{
    if (!limited(p, account))
        return 0;
    return p->window_ns * p->core_limit[account] / (sum > 100 ? sum : 100);
}

static uint64_t budget_ns(const struct policy *p, const struct gpu_sched *g,
                          int account)
{
    return limited(p, account) ? budget_for(p, account, limit_sum(p, g, account))
                               : 0;
}

/* Bills every runner for the time since its billed_until. Called before
 * the running set changes, so that each share is of the right size. */
static void bill_runners(struct gpu_sched *g, uint64_t now)
{
    int n = billed_runners(g);

    for (int c = 0; c < g->slots && g->n_running; c++) {
        struct member *m = &g->members[c];
        if (!running(m) || now <= m->billed_until)
            continue;
        g->usage[m->account].used_ns += (now - m->billed_until) / (uint64_t)n;
        m->billed_until = now;
        g->window_idle = false;
    }
}

/* Billing of runner m starts now. On a GPU where nothing has been billed
 * for a whole window, the first billing also starts the window: a pod's
 * first window then begins at its first submission. */
static void start_billing(struct gpu_sched *g, struct member *m, uint64_t now)
{
    if (g->window_idle && g->n_running == 1)
        g->window_start = now;
    m->billed_until = now;
}

/* Starts a new window if the current one is over: what each account used
 * beyond its budget is carried over (in part), throttles are lifted, and
 * the budgets of the accounts taking part accrue from the new start. */
static void roll_window(struct policy *p, struct gpu_sched *g, uint64_t now)
{
    uint64_t end = g->window_start + p->window_ns;

    if (now < end)
        return;
    bill_runners(g, end);
    bool consecutive = now < end + p->window_ns, billed = false;
    bool taking_part[POLICY_MAX_CLIENTS] = {false};
    uint64_t budgets[POLICY_MAX_CLIENTS];
    for (int c = 0; c < g->slots; c++)
        if (g->members[c].present && g->members[c].state != MEMBER_IDLE)
            taking_part[g->members[c].account] = true;
    /* Budgets first: they depend on who used time in the ending window. */
    for (int a = 0; a < POLICY_MAX_CLIENTS; a++)
        budgets[a] = g->usage[a].used_ns ? budget_ns(p, g, a) : 0;
    g->window_start = now - (now - g->window_start) % p->window_ns;
    for (int a = 0; a < POLICY_MAX_CLIENTS; a++) {
        struct account_usage *u = &g->usage[a];
        uint64_t over = 0;
        billed |= u->used_ns > 0;
        if (budgets[a] && consecutive && u->used_ns > budgets[a])
            over = (u->used_ns - budgets[a]) * p->carryover_percent / 100;
        /* Overshoot is repaid in full, or a pod whose drain tails outrun
         * its budget would run above its limit for good; a limit lowered
         * far below what was used throttles one window at most. */
        if (u->limit_lowered && over > budgets[a])
            over = budgets[a];
        *u = (struct account_usage){
            .used_ns = over,
            .throttled = budgets[a] && over >= budgets[a],
            .accruing = over > 0 || taking_part[a],
            .accrues_from = g->window_start,
        };
    }
    /* Idle for a whole window: the next billing starts a fresh one. */
    g->window_idle = g->n_running == 0 && (!billed || !consecutive);
    for (int c = 0; c < g->slots && g->n_running; c++) {
        struct member *m = &g->members[c];
        /* A runner across windows pays the current window from its start;
         * what it ran in skipped windows is past any budget's reach. */
        if (running(m) && m->billed_until < g->window_start)
            m->billed_until = g->window_start;
    }
}

/* Throttles the account of a client if it has used its budget. */
static void throttle_if_spent(struct policy *p, struct gpu_sched *g,
                              int account, uint64_t now)
{
    uint64_t budget = budget_ns(p, g, account);

    if (budget && used_ns(g, account, now) >= budget)
        g->usage[account].throttled = true;
}

/* ---- pacing ------------------------------------------------------------ */

static uint64_t slice_ns(const struct policy *p)
{
    uint64_t slice = p->window_ns / POLICY_PACE_SLICES;

    return slice ? slice : 1;
}

/* The start of the slice of g's window that contains now. */
static uint64_t slice_start(const struct policy *p, const struct gpu_sched *g,
                            uint64_t now)
{
    if (now <= g->window_start)
        return g->window_start;
    return now - (now - g->window_start) % slice_ns(p);
}

/* When the slice that contains now ends: the budget accrues another step. */
static uint64_t slice_end(const struct policy *p, const struct gpu_sched *g,
                          uint64_t now)
{
    uint64_t end = slice_start(p, g, now) + slice_ns(p);
    uint64_t window_end = g->window_start + p->window_ns;

    return end < window_end ? end : window_end;
}

/* What account may have used by the end of the current slice: its budget,
 * accrued through the window from when it started taking part in it (an
 * account not taking part yet would start now). */
static uint64_t allowance(const struct policy *p, const struct gpu_sched *g,
                          int account, uint64_t budget, uint64_t now)
{
    const struct account_usage *u = &g->usage[account];
    uint64_t from = slice_start(p, g, now), to = slice_end(p, g, now);

    if (u->accruing && u->accrues_from < from)
        from = u->accrues_from > g->window_start ? u->accrues_from
                                                 : g->window_start;
    return (uint64_t)((unsigned __int128)budget * (to - from) / p->window_ns);
}

/* The account starts taking part in this window: its budget accrues from
 * the current slice on. */
static void start_accruing(const struct policy *p, struct gpu_sched *g,
                           int account, uint64_t now)
{
    struct account_usage *u = &g->usage[account];

    if (!u->accruing) {
        u->accruing = true;
        u->accrues_from = slice_start(p, g, now);
    }
}

/* Whether account may not run now: its budget is used until the window
 * rolls, it was dropped at its pace until the slice ends, or it has used
 * all that has accrued. */
static bool spent(const struct policy *p, const struct gpu_sched *g,
                  int account, uint64_t now)
{
    const struct account_usage *u = &g->usage[account];
    uint64_t budget = budget_ns(p, g, account);

    if (u->throttled || now < u->paced_until)
        return true;
    return budget && used_ns(g, account, now) >= allowance(p, g, account, budget, now);
}

/* A runner dropped at its pace waits for the next slice; once the whole
 * budget has accrued, for the next window. */
static void hold_back(const struct policy *p, struct gpu_sched *g, int account,
                      uint64_t now)
{
    uint64_t budget = budget_ns(p, g, account);

    if (allowance(p, g, account, budget, now) >= budget)
        g->usage[account].throttled = true;
    else
        g->usage[account].paced_until = slice_end(p, g, now);
}

/* What account may still use in this window; 0 if it has no limit or has
 * used its budget. */
static uint64_t budget_left(const struct policy *p, const struct gpu_sched *g,
                            int account, uint64_t now)
{
    if (!limited(p, account))
        return 0;
    uint64_t budget = budget_ns(p, g, account), used = used_ns(g, account, now);

    return budget > used ? budget - used : 0;
}

/* The budget that waiting limited pods still need in this window, each pod
 * counted once. */
static uint64_t waiting_budget(const struct policy *p, const struct gpu_sched *g,
                               uint64_t now)
{
    bool counted[POLICY_MAX_CLIENTS] = {false};
    uint64_t need = 0;

    for (int i = 0; i < g->n_waiting; i++) {
        int account = g->members[g->queue[i]].account;
        if (!counted[account] && !g->usage[account].throttled) {
            counted[account] = true;
            need += budget_left(p, g, account, now);
        }
    }
    return need;
}

/* ---- memory ------------------------------------------------------------ */

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
static uint64_t occupied_bytes(const struct member *m)
{
    if (!m->present)
        return 0;
    return running(m) || m->resident ? m->footprint : fixed_bytes(m);
}

static uint64_t resident_bytes(const struct gpu_sched *g)
{
    uint64_t sum = 0;

    for (int c = 0; c < g->slots; c++)
        sum += occupied_bytes(&g->members[c]);
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
static bool room_possible(const struct policy *p, const struct gpu_sched *g,
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
static bool fits(const struct policy *p, const struct gpu_sched *g, int gpu,
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

/* ---- load -------------------------------------------------------------- */

/* Time held so far, including a hold in progress. */
static uint64_t held_total(const struct member *m, uint64_t now)
{
    return m->held_ns + (running(m) ? now - m->granted_at : 0);
}

/* Until its first load report a client gets a trial of one quantum of GPU
 * time beside others rather than a wait; after that it counts as heavy
 * until measured, so a client whose load never arrives cannot co-run with
 * busy clients for a whole run. When the trial ends (0: it is measured or
 * already over). */
static uint64_t trial_end(const struct policy *p, const struct member *m,
                          uint64_t now)
{
    uint64_t held = held_total(m, now);

    if (m->load_known || held >= p->tq_ns)
        return 0;
    return now + (p->tq_ns - held);
}

static bool maybe_light(const struct policy *p, const struct member *m,
                        uint64_t now)
{
    if (m->load_known)
        return m->load_permille < p->light_permille;
    return trial_end(p, m, now) != 0;
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
    default:
        /* A client known (or taken) to be heavy runs alone. */
        if (!maybe_light(p, &g->members[client], now))
            return false;
        for (int c = 0; c < g->slots; c++)
            if (running(&g->members[c]) && !maybe_light(p, &g->members[c], now))
                return false;
        return true;
    }
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

static uint64_t switch_time(const struct policy *p, const struct gpu_sched *g,
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

/* ---- grants and releases ------------------------------------------------ */

static void grant(struct gpu_sched *g, int gpu, int client, uint64_t now,
                  struct policy_actions *out)
{
    struct member *m = &g->members[client];

    if (m->told_wait_mem)
        emit(out, ACTION_MEM_AVAILABLE, gpu, client, 0)->mem.wait_ns =
            now - m->since;
    bill_runners(g, now);
    if (g->last_granted >= 0 && g->last_granted != client)
        g->switches++;
    g->last_granted = client;
    g->n_running++;
    m->lease = ++g->lease;
    m->grant_seq = ++g->grant_seq;
    m->granted_at = now;
    start_billing(g, m, now);
    m->grants++;
    m->wait_reason = WAIT_NONE;
    m->told_wait_mem = false;
    m->evict_after_release = false;
    if (m->evictable)
        m->resident = true;
    set_state(m, MEMBER_HOLDING, now);
    emit(out, ACTION_GRANT, gpu, client, m->lease);
}

static void dequeue(struct gpu_sched *g, int client)
{
    for (int i = 0; i < g->n_waiting; i++) {
        if (g->queue[i] != client)
            continue;
        memmove(&g->queue[i], &g->queue[i + 1],
                (size_t)(g->n_waiting - i - 1) * sizeof(g->queue[0]));
        g->n_waiting--;
        return;
    }
}

/* Ends client's hold, crediting its duration and billing its account. Its
 * memory stays resident until it is evicted. */
static void end_hold(struct policy *p, struct gpu_sched *g, int client,
                     uint64_t now)
{
    struct member *m = &g->members[client];

    bill_runners(g, now);
    m->held_ns += now - m->granted_at;
    g->n_running--;
    throttle_if_spent(p, g, m->account, now);
    set_state(m, MEMBER_IDLE, now);
}

/* The order in which waiters are considered: limited pods with budget left
 * first (in queue order): a limit is a share of every window, and a pod
 * that queued behind long quanta would otherwise see the window end before
 * its turn. Then the others in queue order. Pods that have used what
 * their budget has accrued so far are left out. */
static int waiter_order(const struct policy *p, const struct gpu_sched *g,
                        uint64_t now, int *order)
{
    int n = 0;

    for (int i = 0; i < g->n_waiting; i++) {
        int c = g->queue[i], account = g->members[c].account;
        if (!spent(p, g, account, now) && budget_left(p, g, account, now))
            order[n++] = c;
    }
    for (int i = 0; i < g->n_waiting; i++) {
        int c = g->queue[i], account = g->members[c].account;
        if (!spent(p, g, account, now) && !budget_left(p, g, account, now))
            order[n++] = c;
    }
    return n;
}

/* The quantum a runner gets while `waiter` waits for the reason it has. */
static uint64_t quantum_for(const struct policy *p, const struct gpu_sched *g,
                            const struct member *waiter)
{
    bool measured;

    if (waiter->wait_reason == WAIT_MEMORY)
        return switch_time(p, g, waiter->evictable, &measured);
    return p->tq_ns;
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

/* PREPARE_SWAP, once per membership: the client then makes the pinned host
 * copies of what it allocates later by itself. */
static void prepare(struct gpu_sched *g, int gpu, int client,
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
static void prepare_if_oversubscribed(const struct policy *p,
                                      struct gpu_sched *g, int gpu,
                                      struct policy_actions *out)
{
    uint64_t held = 0;

    if (!g->capacity)
        return;
    for (int c = 0; c < g->slots; c++)
        if (g->members[c].present)
            held += g->members[c].footprint;
    if (held <= policy_memory_limit(p, gpu))
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

/* Asks idle evictable clients other than the waiter that still occupy the
 * GPU to swap out, oldest hold first, until `need` more bytes would fit
 * (all of them for a waiter bigger than the limit, see fits()). */
static void evict_for(const struct policy *p, struct gpu_sched *g, int gpu,
                      int waiter, uint64_t need, uint64_t now,
                      struct policy_actions *out)
{
    uint64_t limit = policy_memory_limit(p, gpu);
    uint64_t resident = resident_bytes(g), leaving = evicting_bytes(g);
    bool alone = g->members[waiter].footprint > limit;

    if (!room_possible(p, g, gpu, waiter))
        return;
    while (alone || resident - leaving + need > limit) {
        int oldest = -1;
        for (int c = 0; c < g->slots; c++) {
            const struct member *m = &g->members[c];
            if (c != waiter && m->present && m->evictable && m->resident &&
                !running(m) && !m->evicting &&
                (oldest < 0 || m->grant_seq < g->members[oldest].grant_seq))
                oldest = c;
        }
        if (oldest < 0 || !room_for_evict(out, &g->members[oldest]))
            return;
        leaving += g->members[oldest].evictable;
        evict(g, gpu, oldest, now, out);
    }
}

static void tell_waits_for_memory(const struct policy *p, struct gpu_sched *g,
                                  int gpu, int client, uint64_t now,
                                  struct policy_actions *out)
{
    struct member *m = &g->members[client];
    uint64_t limit = policy_memory_limit(p, gpu), resident = resident_bytes(g);
    uint64_t due = next_rotation(g, quantum_for(p, g, m));

    m->told_wait_mem = true;
    struct policy_action *a = emit(out, ACTION_WAIT_FOR_MEM, gpu, client, 0);
    a->mem.need = m->footprint;
    a->mem.free = limit > resident ? limit - resident : 0;
    a->mem.limit = limit;
    a->mem.wait_ns = due > now ? due - now : 0;
}

/* Admits waiters in order while they fit and the mode allows. The first
 * waiter that cannot be admitted ("blocked") may be passed only while it
 * has waited less than its quantum: after that, the room that frees is
 * kept for it. */
static void admit(struct policy *p, struct gpu_sched *g, int gpu, uint64_t now,
                  struct policy_actions *out)
{
    int order[POLICY_MAX_CLIENTS];
    int n = waiter_order(p, g, now, order);
    bool blocked_seen = false;

    prepare_if_oversubscribed(p, g, gpu, out);
    for (int i = 0; i < n; i++) {
        int c = order[i];
        struct member *m = &g->members[c];
        if (!room_for(out, 3)) {
            out->truncated = true;
            return;
        }
        bool ok_mode = compatible(p, g, c, now), ok_memory = fits(p, g, gpu, c);
        if (ok_mode && ok_memory) {
            dequeue(g, c);
            grant(g, gpu, c, now, out);
            continue;
        }
        /* Memory is the reason whenever it does not fit: even once the
         * lock is free it must wait for a swap, so its runners get the
         * switch time, not the TQ. */
        m->wait_reason = ok_memory ? WAIT_LOCK : WAIT_MEMORY;
        if (!ok_memory && !m->told_wait_mem)
            tell_waits_for_memory(p, g, gpu, c, now, out);
        /* Until memory that cannot move goes, it holds nobody back. */
        if (blocked_seen || (!ok_memory && !room_possible(p, g, gpu, c)))
            continue;
        blocked_seen = true;
        if (!ok_memory) {
            evict_for(p, g, gpu, c, m->footprint - occupied_bytes(m), now, out);
        }
        if (now - m->since >= quantum_for(p, g, m))
            return; /* aged: nobody passes it any more */
    }
}

/* A runner dropped because the running set outgrew the GPU swaps out as
 * soon as it has stopped (released or revoked). */
static void evict_if_asked(struct gpu_sched *g, int gpu, int client,
                           uint64_t now, struct policy_actions *out)
{
    struct member *m = &g->members[client];

    if (m->evict_after_release && m->evictable && room_for_evict(out, m))
        evict(g, gpu, client, now, out);
    m->evict_after_release = false;
}

/* ---- events ------------------------------------------------------------- */

void policy_request(struct policy *p, int gpu, int client, uint64_t now,
                    struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (!p->anti_thrash || !m->present || m->state != MEMBER_IDLE)
        return; /* a request crossing SCHED_OFF, or a duplicate */
    roll_window(p, g, now);
    start_accruing(p, g, m->account, now);
    set_state(m, MEMBER_WAITING, now);
    m->wait_reason = WAIT_LOCK;
    if (m->cut_short) {
        memmove(&g->queue[1], &g->queue[0],
                (size_t)g->n_waiting * sizeof(g->queue[0]));
        g->queue[0] = client;
        g->n_waiting++;
        m->cut_short = false;
    } else {
        g->queue[g->n_waiting++] = client;
    }
    admit(p, g, gpu, now, out);
}

void policy_in_use(struct policy *p, int gpu, int client, uint32_t lease,
                   uint64_t now)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (m->state != MEMBER_HOLDING || m->lease != lease ||
        now <= m->billed_until)
        return;
    roll_window(p, g, now);
    start_billing(g, m, now);
}

void policy_release(struct policy *p, int gpu, int client, uint32_t lease,
                    uint64_t drain_ns, uint64_t now, struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (!running(m) || m->lease != lease)
        return; /* it crossed a DROP or a revocation: already handled */
    roll_window(p, g, now);
    m->last_drain_ns = drain_ns;
    if (m->state == MEMBER_DRAINING) {
        m->last_preempt_ns = now - m->drop_sent_at;
        m->preempt_estimate_ns = m->preempt_estimate_ns
            ? (3 * m->preempt_estimate_ns + m->last_preempt_ns) / 4
            : m->last_preempt_ns;
    } else {
        /* Given back unasked: its quantum is over. */
        m->cut_short = false;
        m->quantum_used_ns = 0;
    }
    end_hold(p, g, client, now);
    evict_if_asked(g, gpu, client, now, out);
    admit(p, g, gpu, now, out);
}

void policy_leave(struct policy *p, int client, uint64_t now,
                  struct policy_actions *out)
{
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        if (!g->members[client].present)
            continue;
        roll_window(p, g, now);
        dequeue(g, client);
        if (running(&g->members[client]))
            end_hold(p, g, client, now);
        g->members[client].present = false;
        admit(p, g, gpu, now, out);
    }
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

/* ---- ticks -------------------------------------------------------------- */

static void earliest(uint64_t *next, uint64_t due)
{
    if (*next == 0 || due < *next)
        *next = due;
}

/* When runner m must be dropped to stay within what its account's budget
 * has accrued by the end of this slice (0: never), leading by its measured
 * DROP-to-release latency. */
static uint64_t pace_due(const struct policy *p, const struct gpu_sched *g,
                         const struct member *m, uint64_t now)
{
    uint64_t budget = budget_ns(p, g, m->account);

    if (!budget)
        return 0;
    uint64_t allowed = allowance(p, g, m->account, budget, now);
    uint64_t used = used_ns(g, m->account, now);
    uint64_t left = allowed > used ? allowed - used : 0;

    /* Shared time is billed at 1/n: the budget lasts n times as long. */
    left *= (uint64_t)billed_runners(g);
    return now + (left > m->preempt_estimate_ns ? left - m->preempt_estimate_ns : 0);
}

/* When a runner without a budget of its own to use up must make room so
 * that waiting limited pods still get their budgets in this window (0: no
 * need). */
static uint64_t room_due_for_waiters(const struct policy *p,
                                     const struct gpu_sched *g,
                                     const struct member *m, uint64_t now)
{
    uint64_t need, end = g->window_start + p->window_ns;

    if (budget_left(p, g, m->account, now))
        return 0;
    need = waiting_budget(p, g, now);
    if (!need)
        return 0;
    need += m->preempt_estimate_ns;
    return end > need ? end - need : 1;
}

static bool has_spent_waiter(const struct policy *p, const struct gpu_sched *g,
                             uint64_t now)
{
    for (int i = 0; i < g->n_waiting; i++)
        if (spent(p, g, g->members[g->queue[i]].account, now))
            return true;
    return false;
}

/* The first waiter admit() could not admit and for which rotating the
 * runners can make room, or NULL. */
static const struct member *blocked_waiter(const struct policy *p,
                                           const struct gpu_sched *g, int gpu,
                                           uint64_t now)
{
    int order[POLICY_MAX_CLIENTS];
    int n = waiter_order(p, g, now, order);

    for (int i = 0; i < n; i++)
        if (fits(p, g, gpu, order[i]) || room_possible(p, g, gpu, order[i]))
            return &g->members[order[i]];
    return NULL;
}

static void drop(struct gpu_sched *g, int gpu, int client, uint64_t now,
                 struct policy_actions *out)
{
    struct member *m = &g->members[client];

    set_state(m, MEMBER_DRAINING, now);
    m->drop_sent_at = now;
    emit(out, ACTION_DROP, gpu, client, m->lease);
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
        return !maybe_light(p, &g->members[c], now) ||
               !maybe_light(p, &g->members[oldest], now);
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
        if (!room_for(out, 1)) {
            out->truncated = true;
            break;
        }
        drop(g, gpu, c, now, out);
        dropped = true;
    }
    return dropped;
}

/* The newest evictable runner, when the runners' memory grew past the
 * limit (-1: it did not, or nobody can leave). */
static int overgrown_runner(const struct policy *p, const struct gpu_sched *g,
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

static uint64_t tick_gpu(struct policy *p, struct gpu_sched *g, int gpu,
                         uint64_t now, struct policy_actions *out)
{
    uint64_t next = 0;

    roll_window(p, g, now);
    admit(p, g, gpu, now, out); /* a throttle may have been lifted */
    if (has_spent_waiter(p, g, now))
        earliest(&next, slice_end(p, g, now)); /* more budget accrues */

    /* Revocations first: who may keep running is judged on the set that
     * is left. */
    for (int c = 0; c < g->slots && g->n_running; c++) {
        struct member *m = &g->members[c];
        if (!room_for(out, 3)) {
            out->truncated = true;
            break;
        }
        if (m->present && m->state == MEMBER_DRAINING &&
            now >= m->drop_sent_at + p->drain_timeout_ns) {
            emit(out, ACTION_REVOKE, gpu, c, m->lease);
            end_hold(p, g, c, now);
            evict_if_asked(g, gpu, c, now, out);
        }
    }
    /* Growth is judged on the set that the misfits leave. */
    if (!drop_misfits(p, g, gpu, now, out)) {
        int overgrown = overgrown_runner(p, g, gpu);
        /* It prepares while it drains: its EVICT follows the release. */
        if (overgrown >= 0 && room_for(out, 2)) {
            g->members[overgrown].evict_after_release = true;
            prepare(g, gpu, overgrown, out);
            drop(g, gpu, overgrown, now, out);
        }
    }

    const struct member *waiter = blocked_waiter(p, g, gpu, now);
    uint64_t quantum = waiter ? quantum_for(p, g, waiter) : 0;
    for (int c = 0; c < g->slots && g->n_running; c++) {
        struct member *m = &g->members[c];
        if (!room_for(out, 2)) {
            out->truncated = true;
            break;
        }
        if (m->present && m->state == MEMBER_HOLDING) {
            uint64_t due = pace_due(p, g, m, now), accrues_at = 0;
            /* More budget accrues at the end of the slice: a drop due
             * after that is judged again then. */
            if (due > slice_end(p, g, now) &&
                slice_end(p, g, now) < g->window_start + p->window_ns) {
                accrues_at = slice_end(p, g, now);
                due = 0;
            }
            bool limit = due && now >= due, for_room = false;
            if (!limit && waiter) {
                uint64_t tq_due = m->granted_at + quantum -
                    (m->quantum_used_ns < quantum ? m->quantum_used_ns : quantum);
                uint64_t room_due = room_due_for_waiters(p, g, m, now);
                if (room_due && room_due < tq_due) {
                    tq_due = room_due;
                    for_room = true;
                }
                if (!due || tq_due < due)
                    due = tq_due;
            }
            if (due && now >= due) {
                if (limit)
                    hold_back(p, g, m->account, now);
                /* Cut short, it keeps its turn and the rest of its
                 * quantum: whoever holds when limited pods are due
                 * would otherwise always be the one cut short. */
                m->cut_short = for_room && !limit;
                m->quantum_used_ns = m->cut_short
                    ? m->quantum_used_ns + (now - m->granted_at) : 0;
                drop(g, gpu, c, now, out);
                due = now + p->drain_timeout_ns;
            }
            if (due)
                earliest(&next, due);
            if (accrues_at)
                earliest(&next, accrues_at);
            if (g->mode == SCHED_MODE_AUTO && g->n_running > 1 &&
                (due = trial_end(p, m, now)))
                earliest(&next, due);
        } else if (m->present && m->state == MEMBER_DRAINING) {
            earliest(&next, m->drop_sent_at + p->drain_timeout_ns);
        }
    }
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
            earliest(&next, due);
        }
    }
    admit(p, g, gpu, now, out); /* revocations and evictions made room */
    return next;
}

uint64_t policy_tick(struct policy *p, uint64_t now, struct policy_actions *out)
{
    uint64_t next = 0;

    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        uint64_t due = tick_gpu(p, &p->gpus[gpu], gpu, now, out);
        if (due)
            earliest(&next, due);
    }
    return next;
}

/* ---- settings ------------------------------------------------------------ */

void policy_set_tq(struct policy *p, uint64_t tq_ns)
{
    p->tq_ns = tq_ns;
}

void policy_set_anti_thrash(struct policy *p, bool on, uint64_t now)
{
    if (p->anti_thrash == on)
        return;
    p->anti_thrash = on;
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        for (int c = 0; c < g->slots; c++)
            if (running(&g->members[c]))
                end_hold(p, g, c, now);
        for (int i = 0; i < g->n_waiting; i++)
            set_state(&g->members[g->queue[i]], MEMBER_IDLE, now);
        g->n_waiting = 0;
    }
}

void policy_set_core_limit(struct policy *p, int account, unsigned limit,
                           uint64_t now)
{
    unsigned old = p->core_limit[account];

    p->core_limit[account] = (uint8_t)(limit >= 100 ? 0 : limit);
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        struct account_usage *u = &g->usage[account];
        roll_window(p, g, now);
        uint64_t budget = budget_ns(p, g, account);
        /* Used time is kept: only the budget it is measured against moves. */
        u->throttled = budget && used_ns(g, account, now) >= budget;
        u->paced_until = 0;
        if (p->core_limit[account] && (!old || p->core_limit[account] < old))
            u->limit_lowered = true;
    }
}

void policy_reset_account(struct policy *p, int account)
{
    p->core_limit[account] = 0;
    for (int gpu = 0; gpu < p->n_gpus; gpu++)
        p->gpus[gpu].usage[account] = (struct account_usage){0};
}

void policy_set_window(struct policy *p, uint64_t window_ns,
                       unsigned carryover_percent)
{
    p->window_ns = window_ns;
    p->carryover_percent = carryover_percent > 100 ? 100 : carryover_percent;
}

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

void policy_set_load(struct policy *p, int gpu, int client,
                     unsigned busy_permille)
{
    struct member *m = &p->gpus[gpu].members[client];

    m->load_known = true;
    m->load_permille = (uint16_t)(busy_permille > 1000 ? 1000 : busy_permille);
}

void policy_set_mode(struct policy *p, int gpu, enum sched_mode mode)
{
    for (int g = 0; g < p->n_gpus; g++)
        if (gpu < 0 || g == gpu)
            p->gpus[g].mode = (uint8_t)mode;
}

void policy_set_switch_time(struct policy *p, uint64_t fixed_ns,
                            unsigned multiplier)
{
    p->switch_fixed_ns = fixed_ns;
    if (multiplier)
        p->switch_multiplier = multiplier;
}

/* ---- queries -------------------------------------------------------------- */

uint64_t policy_budget_ns(const struct policy *p, int gpu, int account)
{
    return budget_ns(p, &p->gpus[gpu], account);
}

uint64_t policy_used_ns(const struct policy *p, int gpu, int account,
                        uint64_t now)
{
    return used_ns(&p->gpus[gpu], account, now);
}

bool policy_spent(const struct policy *p, int gpu, int account, uint64_t now)
{
    return spent(p, &p->gpus[gpu], account, now);
}

unsigned policy_limit_sum(const struct policy *p, int gpu)
{
    return limit_sum(p, &p->gpus[gpu], -1);
}

uint64_t policy_held_ns(const struct policy *p, int gpu, int client,
                        uint64_t now)
{
    const struct member *m = &p->gpus[gpu].members[client];

    return held_total(m, now);
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

int policy_holder(const struct policy *p, int gpu)
{
    const struct gpu_sched *g = &p->gpus[gpu];
    int oldest = -1;

    for (int c = 0; c < g->slots && g->n_running; c++)
        if (running(&g->members[c]) &&
            (oldest < 0 || g->members[c].grant_seq < g->members[oldest].grant_seq))
            oldest = c;
    return oldest;
}

bool policy_is_running(const struct policy *p, int gpu, int client)
{
    return running(&p->gpus[gpu].members[client]);
}
