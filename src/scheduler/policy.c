/* policy.c - see policy.h for the model. */
#include "policy.h"

#include <string.h>

static void emit(struct policy_actions *out, enum action_kind kind, int gpu,
                 int client, uint32_t lease)
{
    /* The bound in policy.h covers the worst call (leave on every GPU). */
    out->list[out->n++] = (struct policy_action){kind, gpu, client, lease};
}

static void set_state(struct member *m, enum member_state state, uint64_t now)
{
    m->state = (uint8_t)state;
    m->since = now;
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
    p->n_gpus = n_gpus;
    for (int g = 0; g < n_gpus; g++)
        p->gpus[g].holder = -1;
}

void policy_join(struct policy *p, int gpu, int client, int account,
                 uint64_t now)
{
    struct member *m = &p->gpus[gpu].members[client];

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

/* Time billed to account in this window, including a hold in progress.
 * Serial scheduling runs one holder at a time, so the holder pays the whole
 * wall time it holds. */
static uint64_t used_ns(const struct gpu_sched *g, int account, uint64_t now)
{
    uint64_t used = g->usage[account].used_ns;

    if (g->holder >= 0 && g->members[g->holder].account == account &&
        now > g->billed_until)
        used += now - g->billed_until;
    return used;
}

/* The sum of the limits of the limited accounts taking part in this window
 * on g (a client that wants or holds the GPU, or time used), counting
 * account as taking part. */
static unsigned limit_sum(const struct policy *p, const struct gpu_sched *g,
                          int account)
{
    bool counted[POLICY_MAX_CLIENTS] = {false};
    unsigned sum = 0;

    counted[account] = true;
    sum += p->core_limit[account];
    for (int c = 0; c < POLICY_MAX_CLIENTS; c++) {
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

/* Bills the holder for the time since billed_until. */
static void bill_holder(struct gpu_sched *g, uint64_t now)
{
    if (g->holder < 0 || now <= g->billed_until)
        return;
    g->usage[g->members[g->holder].account].used_ns += now - g->billed_until;
    g->billed_until = now;
}

/* Starts a new window if the current one is over: what each account used
 * beyond its budget is carried over (in part), throttles are lifted. */
static void roll_window(struct policy *p, struct gpu_sched *g, uint64_t now)
{
    uint64_t end = g->window_start + p->window_ns;

    if (now < end)
        return;
    bill_holder(g, end);
    bool consecutive = now < end + p->window_ns;
    uint64_t budgets[POLICY_MAX_CLIENTS];
    /* Budgets first: they depend on who used time in the ending window. */
    for (int a = 0; a < POLICY_MAX_CLIENTS; a++)
        budgets[a] = g->usage[a].used_ns ? budget_ns(p, g, a) : 0;
    for (int a = 0; a < POLICY_MAX_CLIENTS; a++) {
        struct account_usage *u = &g->usage[a];
        uint64_t over = 0;
        /* Capped at one budget: a limit lowered far below what was used
         * throttles the next window at most, not several. */
        if (budgets[a] && consecutive && u->used_ns > budgets[a])
            over = (u->used_ns - budgets[a]) * p->carryover_percent / 100;
        if (over > budgets[a])
            over = budgets[a];
        u->used_ns = over;
        u->throttled = budgets[a] && over >= budgets[a];
    }
    g->window_start = now - (now - g->window_start) % p->window_ns;
    if (g->holder >= 0 && g->billed_until < g->window_start) {
        /* A holder across windows pays the current window from its start;
         * what it ran in skipped windows is past any budget's reach. */
        g->billed_until = g->window_start;
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

static void grant(struct gpu_sched *g, int gpu, int client, uint64_t now,
                  struct policy_actions *out)
{
    struct member *m = &g->members[client];

    if (g->lease != 0 && g->holder != client)
        g->switches++;
    g->holder = client;
    g->lease++;
    g->granted_at = now;
    g->billed_until = now;
    m->grants++;
    set_state(m, MEMBER_HOLDING, now);
    emit(out, ACTION_GRANT, gpu, client, g->lease);
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

/* What account may still use in this window; 0 if it has no limit or has
 * used its budget. */
static uint64_t budget_left(const struct policy *p, const struct gpu_sched *g,
                            int account, uint64_t now)
{
    uint64_t budget = budget_ns(p, g, account), used = used_ns(g, account, now);

    return budget > used ? budget - used : 0;
}

/* The waiter to serve next, or -1. Limited pods with budget left come
 * first (in FCFS order): a limit is a share of every window, and a pod that
 * queued behind long quanta would otherwise see the window end before its
 * turn. Then the first waiter whose pod is not throttled. */
static int next_waiter(const struct policy *p, const struct gpu_sched *g,
                       uint64_t now)
{
    int first = -1;

    for (int i = 0; i < g->n_waiting; i++) {
        int c = g->queue[i], account = g->members[c].account;
        if (g->usage[account].throttled)
            continue;
        if (budget_left(p, g, account, now))
            return c;
        if (first < 0)
            first = c;
    }
    return first;
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

static void grant_next(struct policy *p, struct gpu_sched *g, int gpu,
                       uint64_t now, struct policy_actions *out)
{
    int next = g->holder < 0 ? next_waiter(p, g, now) : -1;

    if (next < 0)
        return;
    dequeue(g, next);
    grant(g, gpu, next, now, out);
}

/* Ends the current hold, crediting its duration and billing its account. */
static void end_hold(struct policy *p, struct gpu_sched *g, uint64_t now)
{
    struct member *m = &g->members[g->holder];

    bill_holder(g, now);
    m->held_ns += now - g->granted_at;
    throttle_if_spent(p, g, m->account, now);
    set_state(m, MEMBER_IDLE, now);
    g->holder = -1;
}

void policy_request(struct policy *p, int gpu, int client, uint64_t now,
                    struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (!p->anti_thrash || !m->present || m->state != MEMBER_IDLE)
        return; /* a request crossing SCHED_OFF, or a duplicate */
    roll_window(p, g, now);
    set_state(m, MEMBER_WAITING, now);
    g->queue[g->n_waiting++] = client;
    grant_next(p, g, gpu, now, out);
}

void policy_in_use(struct policy *p, int gpu, int client, uint32_t lease,
                   uint64_t now)
{
    struct gpu_sched *g = &p->gpus[gpu];

    if (g->holder != client || g->lease != lease || now <= g->billed_until ||
        g->members[client].state != MEMBER_HOLDING)
        return;
    roll_window(p, g, now);
    g->billed_until = now;
}

void policy_release(struct policy *p, int gpu, int client, uint32_t lease,
                    uint64_t drain_ns, uint64_t now, struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];

    if (g->holder != client || g->lease != lease)
        return; /* it crossed a DROP or a revocation: already handled */
    struct member *m = &g->members[client];
    roll_window(p, g, now);
    m->last_drain_ns = drain_ns;
    if (m->state == MEMBER_DRAINING) {
        m->last_preempt_ns = now - g->drop_sent_at;
        m->preempt_estimate_ns = m->preempt_estimate_ns
            ? (3 * m->preempt_estimate_ns + m->last_preempt_ns) / 4
            : m->last_preempt_ns;
    }
    end_hold(p, g, now);
    grant_next(p, g, gpu, now, out);
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
        if (g->holder == client)
            end_hold(p, g, now);
        g->members[client].present = false;
        grant_next(p, g, gpu, now, out);
    }
}

static void earliest(uint64_t *next, uint64_t due)
{
    if (*next == 0 || due < *next)
        *next = due;
}

/* When the holder must be dropped to stay within its account's budget
 * (0: never), leading by its measured DROP-to-release latency. */
static uint64_t budget_due(const struct policy *p, const struct gpu_sched *g,
                           uint64_t now)
{
    const struct member *h = &g->members[g->holder];
    uint64_t budget = budget_ns(p, g, h->account);
    uint64_t used = used_ns(g, h->account, now);
    uint64_t left = budget > used ? budget - used : 0;

    if (!budget)
        return 0;
    return now + (left > h->preempt_estimate_ns ? left - h->preempt_estimate_ns : 0);
}

/* When a holder without a budget of its own to use up must make room so
 * that waiting limited pods still get their budgets in this window (0: no
 * need). */
static uint64_t room_due_for_waiters(const struct policy *p,
                                     const struct gpu_sched *g, uint64_t now)
{
    const struct member *h = &g->members[g->holder];
    uint64_t need, end = g->window_start + p->window_ns;

    if (budget_left(p, g, h->account, now))
        return 0;
    need = waiting_budget(p, g, now);
    if (!need)
        return 0;
    need += h->preempt_estimate_ns;
    return end > need ? end - need : 1;
}

static bool has_throttled_waiter(const struct gpu_sched *g)
{
    for (int i = 0; i < g->n_waiting; i++)
        if (g->usage[g->members[g->queue[i]].account].throttled)
            return true;
    return false;
}

uint64_t policy_tick(struct policy *p, uint64_t now, struct policy_actions *out)
{
    uint64_t next = 0;

    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];

        roll_window(p, g, now);
        grant_next(p, g, gpu, now, out); /* a throttle may have been lifted */
        if (has_throttled_waiter(g))
            earliest(&next, g->window_start + p->window_ns);
        if (g->holder < 0)
            continue;
        struct member *h = &g->members[g->holder];
        if (h->state == MEMBER_HOLDING) {
            uint64_t due = budget_due(p, g, now);
            bool limit = due && now >= due;
            if (!limit && next_waiter(p, g, now) >= 0) {
                uint64_t tq_due = g->granted_at + p->tq_ns;
                uint64_t room_due = room_due_for_waiters(p, g, now);
                if (room_due && room_due < tq_due)
                    tq_due = room_due;
                if (!due || tq_due < due)
                    due = tq_due;
            }
            if (due && now >= due) {
                set_state(h, MEMBER_DRAINING, now);
                g->drop_sent_at = now;
                if (limit)
                    g->usage[h->account].throttled = true;
                emit(out, ACTION_DROP, gpu, g->holder, g->lease);
                due = now + p->drain_timeout_ns;
            }
            if (due)
                earliest(&next, due);
        } else {
            uint64_t due = g->drop_sent_at + p->drain_timeout_ns;
            if (now >= due) {
                emit(out, ACTION_REVOKE, gpu, g->holder, g->lease);
                end_hold(p, g, now);
                grant_next(p, g, gpu, now, out);
                continue;
            }
            earliest(&next, due);
        }
    }
    return next;
}

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
        if (g->holder >= 0)
            end_hold(p, g, now);
        for (int i = 0; i < g->n_waiting; i++)
            set_state(&g->members[g->queue[i]], MEMBER_IDLE, now);
        g->n_waiting = 0;
    }
}

void policy_set_core_limit(struct policy *p, int account, unsigned limit,
                           uint64_t now)
{
    p->core_limit[account] = (uint8_t)(limit >= 100 ? 0 : limit);
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        roll_window(p, g, now);
        uint64_t budget = budget_ns(p, g, account);
        /* Used time is kept: only the budget it is measured against moves. */
        g->usage[account].throttled =
            budget && used_ns(g, account, now) >= budget;
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

uint64_t policy_budget_ns(const struct policy *p, int gpu, int account)
{
    return budget_ns(p, &p->gpus[gpu], account);
}

uint64_t policy_used_ns(const struct policy *p, int gpu, int account,
                        uint64_t now)
{
    return used_ns(&p->gpus[gpu], account, now);
}

uint64_t policy_held_ns(const struct policy *p, int gpu, int client,
                        uint64_t now)
{
    const struct gpu_sched *g = &p->gpus[gpu];
    uint64_t held = g->members[client].held_ns;

    if (g->holder == client)
        held += now - g->granted_at;
    return held;
}
