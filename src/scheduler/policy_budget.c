/* policy_budget.c - compute limits: billing, windows, pacing and the
 * scaling of over-subscribed limits (see "Compute limits" in policy.h). */
#include "policy_internal.h"

#include <string.h>

/* Runners that are billed now: each pays an equal share of the wall time. */
static int billed_runners(const struct gpu_sched *g)
{
    return g->n_running > 0 ? g->n_running : 1;
}

/* Time billed to account in this window, including holds in progress. */
uint64_t pol_used_ns(const struct gpu_sched *g, int account, uint64_t now)
{
    uint64_t used = g->usage[account].used_ns;

    for (int c = 0; c < g->slots && g->n_running; c++) {
        const struct member *m = &g->members[c];
        if (pol_running(m) && m->account == account && now > m->billed_until)
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
    bool *counted = p->scratch.limit_counted; /* all false between calls */
    unsigned sum = 0;

    if (account >= 0) {
        counted[account] = true;
        sum += g->core_limit[account];
    }
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        int a = m->account;
        bool takes_part = m->present && m->state != MEMBER_IDLE;
        if (!counted[a] && pol_core_limited(g, a) &&
            (takes_part || g->usage[a].used_ns)) {
            counted[a] = true;
            sum += g->core_limit[a];
        }
    }
    /* Cleared where it was set, not whole: the tables may have grown far
     * beyond the members of this GPU. */
    if (account >= 0)
        counted[account] = false;
    for (int c = 0; c < g->slots; c++)
        counted[g->members[c].account] = false;
    return sum;
}

/* The account's budget per window (0: unlimited). Over-subscribed limits
 * are scaled by 100/sum: the ratios hold and the GPU stays busy. */
static uint64_t budget_for(const struct policy *p, const struct gpu_sched *g,
                           int account, unsigned sum)
{
    if (!pol_core_limited(g, account))
        return 0;
    return p->window_ns * g->core_limit[account] / (sum > 100 ? sum : 100);
}

uint64_t pol_budget_ns(const struct policy *p, const struct gpu_sched *g,
                       int account)
{
    return pol_core_limited(g, account)
               ? budget_for(p, g, account, limit_sum(p, g, account))
               : 0;
}

/* Bills every runner for the time since its billed_until. Called before
 * the running set changes, so that each share is of the right size. */
void pol_bill_runners(struct gpu_sched *g, uint64_t now)
{
    int n = billed_runners(g);

    for (int c = 0; c < g->slots && g->n_running; c++) {
        struct member *m = &g->members[c];
        if (!pol_running(m) || now <= m->billed_until)
            continue;
        uint64_t share = (now - m->billed_until) / (uint64_t)n;
        g->usage[m->account].used_ns += share;
        g->stats[m->account].billed_ns += share;
        m->billed_until = now;
        g->window_idle = false;
    }
}

/* What ran until now is billed to the account it ran as. */
void policy_move(struct policy *p, int gpu, int client, int account, uint64_t now)
{
    struct gpu_sched *g = &p->gpus[gpu];

    pol_bill_runners(g, now);
    g->members[client].account = account;
}

/* Billing of runner m starts now. On a GPU where nothing has been billed
 * for a whole window, the first billing also starts the window: a pod's
 * first window then begins at its first submission. */
void pol_start_billing(struct gpu_sched *g, struct member *m, uint64_t now)
{
    if (g->window_idle && g->n_running == 1)
        g->window_start = now;
    m->billed_until = now;
}

/* The account is held back by its limit from now until `until`: throttled
 * time for the metrics, counted as it passes. A hold-back that overlaps the
 * previous one replaces it from now on. */
static void note_held_back(struct gpu_sched *g, int account, uint64_t now,
                           uint64_t until)
{
    struct policy_account_stats *st = &g->stats[account];

    if (st->held_until > st->held_from)
        st->throttled_ns +=
            (now < st->held_until ? now : st->held_until) - st->held_from;
    st->held_from = now;
    st->held_until = until;
}

/* Starts a new window if the current one is over: what each account used
 * beyond its budget is carried over (in part), throttles are lifted, and
 * the budgets of the accounts taking part accrue from the new start. */
void pol_roll_window(struct policy *p, struct gpu_sched *g, uint64_t now)
{
    uint64_t end = g->window_start + p->window_ns;

    if (now < end)
        return;
    pol_bill_runners(g, end);
    bool consecutive = now < end + p->window_ns, billed = false;
    bool *taking_part = p->scratch.taking_part;
    uint64_t *budgets = p->scratch.budgets;
    memset(taking_part, 0, sizeof(*taking_part) * (size_t)p->table_size);
    for (int c = 0; c < g->slots; c++)
        if (g->members[c].present && g->members[c].state != MEMBER_IDLE)
            taking_part[g->members[c].account] = true;
    /* Budgets first: they depend on who used time in the ending window. */
    for (int a = 0; a < p->table_size; a++)
        budgets[a] = g->usage[a].used_ns ? pol_budget_ns(p, g, a) : 0;
    g->window_start = now - (now - g->window_start) % p->window_ns;
    for (int a = 0; a < p->table_size; a++) {
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
        if (budgets[a] && over >= budgets[a])
            note_held_back(g, a, now, g->window_start + p->window_ns);
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
        if (pol_running(m) && m->billed_until < g->window_start)
            m->billed_until = g->window_start;
    }
}

/* Throttles the account of a client if it has used its budget. */
void pol_throttle_if_spent(struct policy *p, struct gpu_sched *g, int account,
                           uint64_t now)
{
    uint64_t budget = pol_budget_ns(p, g, account);

    if (budget && !g->usage[account].throttled &&
        pol_used_ns(g, account, now) >= budget) {
        g->usage[account].throttled = true;
        note_held_back(g, account, now, g->window_start + p->window_ns);
    }
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
uint64_t pol_slice_end(const struct policy *p, const struct gpu_sched *g,
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
    uint64_t from = slice_start(p, g, now), to = pol_slice_end(p, g, now);

    if (u->accruing && u->accrues_from < from)
        from = u->accrues_from > g->window_start ? u->accrues_from
                                                 : g->window_start;
    return (uint64_t)((unsigned __int128)budget * (to - from) / p->window_ns);
}

/* The account starts taking part in this window: its budget accrues from
 * the current slice on. */
void pol_start_accruing(const struct policy *p, struct gpu_sched *g,
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
bool pol_spent(const struct policy *p, const struct gpu_sched *g, int account,
               uint64_t now)
{
    const struct account_usage *u = &g->usage[account];
    uint64_t budget = pol_budget_ns(p, g, account);

    if (u->throttled || now < u->paced_until)
        return true;
    return budget && pol_used_ns(g, account, now) >=
                         allowance(p, g, account, budget, now);
}

/* A runner dropped at its pace waits for the next slice; once the whole
 * budget has accrued, for the next window. */
void pol_hold_back(const struct policy *p, struct gpu_sched *g, int account,
                   uint64_t now)
{
    uint64_t budget = pol_budget_ns(p, g, account);

    struct account_usage *u = &g->usage[account];

    if (allowance(p, g, account, budget, now) >= budget) {
        if (!u->throttled)
            note_held_back(g, account, now, g->window_start + p->window_ns);
        u->throttled = true;
    } else {
        u->paced_until = pol_slice_end(p, g, now);
        note_held_back(g, account, now, u->paced_until);
    }
}

/* What account may still use in this window; 0 if it has no limit or has
 * used its budget. */
uint64_t pol_budget_left(const struct policy *p, const struct gpu_sched *g,
                         int account, uint64_t now)
{
    if (!pol_core_limited(g, account))
        return 0;
    uint64_t budget = pol_budget_ns(p, g, account),
             used = pol_used_ns(g, account, now);

    return budget > used ? budget - used : 0;
}

/* The order in which waiters are considered: limited pods with budget left
 * first (in queue order): a limit is a share of every window, and a pod
 * that queued behind long quanta would otherwise see the window end before
 * its turn. Then the others in queue order. Pods that have used what
 * their budget has accrued so far are left out. */
int pol_waiter_order(const struct policy *p, const struct gpu_sched *g,
                     uint64_t now, int *order)
{
    int n = 0;

    for (int i = 0; i < g->n_waiting; i++) {
        int c = g->queue[i], account = g->members[c].account;
        if (!pol_spent(p, g, account, now) && pol_budget_left(p, g, account, now))
            order[n++] = c;
    }
    for (int i = 0; i < g->n_waiting; i++) {
        int c = g->queue[i], account = g->members[c].account;
        if (!pol_spent(p, g, account, now) && !pol_budget_left(p, g, account, now))
            order[n++] = c;
    }
    return n;
}

/* The budget that waiting limited pods still need in this window, each pod
 * counted once. */
static uint64_t waiting_budget(const struct policy *p,
                               const struct gpu_sched *g, uint64_t now)
{
    bool *counted = p->scratch.waiting_counted; /* all false between calls */
    uint64_t need = 0;

    for (int i = 0; i < g->n_waiting; i++) {
        int account = g->members[g->queue[i]].account;
        if (!counted[account] && !g->usage[account].throttled) {
            counted[account] = true;
            need += pol_budget_left(p, g, account, now);
        }
    }
    for (int i = 0; i < g->n_waiting; i++)
        counted[g->members[g->queue[i]].account] = false;
    return need;
}

/* When runner m must be dropped to stay within what its account's budget
 * has accrued by the end of this slice (0: never), leading by its measured
 * DROP-to-release latency. */
uint64_t pol_pace_due(const struct policy *p, const struct gpu_sched *g,
                      const struct member *m, uint64_t now)
{
    uint64_t budget = pol_budget_ns(p, g, m->account);

    if (!budget)
        return 0;
    uint64_t allowed = allowance(p, g, m->account, budget, now);
    uint64_t used = pol_used_ns(g, m->account, now);
    uint64_t left = allowed > used ? allowed - used : 0;

    /* Shared time is billed at 1/n: the budget lasts n times as long. */
    left *= (uint64_t)billed_runners(g);
    /* Early by the drop latency, the drain lands inside the budget. A
     * latency longer than a slice's budget cannot land there (a CUDA
     * graph's 40 ms drain held to 10 %, 20 ms a slice): the runner would be
     * dropped at once, find nothing queued, wait for the next slice, run
     * only once its accrual outgrew the latency and lose the rest at the
     * window's end (such a graph used 8.9 %). It runs half of what is left
     * instead, and the slices after repay its tail.
     * A drain that lands short of or past its mark moves what the next
     * slice allows by as much, but the window's last slice has no next:
     * what it leaves unused is lost when the window rolls, what it overruns
     * is carried and repaid. There the lead is the shortest recent latency,
     * so that drains that vary (a CUDA graph's: 4-15 ms) overrun rather than
     * fall short: led by their average, such a pod used 0.1-0.2 points less
     * than its limit at every limit. */
    bool last_slice = pol_slice_end(p, g, now) == g->window_start + p->window_ns;
    uint64_t latency = last_slice ? pol_recent_preempts(m).shortest
                                  : m->preempt_estimate_ns;
    uint64_t most = pol_drain_outlasts_slice(latency, budget) ? left / 2 : left;
    return now + left - (latency < most ? latency : most);
}

/* Whether limited holder m hands the GPU to a limited waiter now, at the
 * start of a slice, with budget left. Running on into the next slice's
 * budget, two pods that fill the GPU between them take turns of two slices
 * each (A's share of slice k and of k + 1, then B's), and a share measured
 * over ten seconds strays by up to half such a turn: 1 point at five slices
 * a window (a 50 + 60 % pair read 53.50 for 54.55). A holder granted too
 * recently to have used half a slice's share runs on: it was granted just
 * before the slice ended, and yielding at once would hand over twice. */
bool pol_yields_at_slice_start(const struct policy *p,
                               const struct gpu_sched *g, const struct member *m,
                               const struct member *waiter, uint64_t now)
{
    uint64_t budget = pol_budget_ns(p, g, m->account);

    return waiter && budget && pol_budget_ns(p, g, waiter->account) &&
           m->granted_at < slice_start(p, g, now) &&
           now - m->granted_at >= pol_slice_share(budget) / 2;
}

/* When a runner without a budget of its own to use up must make room so
 * that waiting limited pods still get their budgets in this window (0: no
 * need). */
uint64_t pol_room_due_for_waiters(const struct policy *p,
                                  const struct gpu_sched *g,
                                  const struct member *m, uint64_t now)
{
    uint64_t need, end = g->window_start + p->window_ns;

    if (pol_budget_left(p, g, m->account, now))
        return 0;
    need = waiting_budget(p, g, now);
    if (!need)
        return 0;
    need += m->preempt_estimate_ns;
    return end > need ? end - need : 1;
}

bool pol_has_spent_waiter(const struct policy *p, const struct gpu_sched *g,
                          uint64_t now)
{
    for (int i = 0; i < g->n_waiting; i++)
        if (pol_spent(p, g, g->members[g->queue[i]].account, now))
            return true;
    return false;
}

/* ---- settings and queries ---------------------------------------------- */

void policy_set_core_limit(struct policy *p, int gpu, int account,
                           unsigned limit, uint64_t now)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct account_usage *u = &g->usage[account];
    unsigned old = g->core_limit[account];

    g->core_limit[account] = (uint8_t)(limit >= 100 ? 0 : limit);
    pol_roll_window(p, g, now);
    uint64_t budget = pol_budget_ns(p, g, account);
    /* Used time is kept: only the budget it is measured against moves. */
    u->throttled = budget && pol_used_ns(g, account, now) >= budget;
    u->paced_until = 0;
    if (!u->throttled && g->stats[account].held_until > now)
        g->stats[account].held_until = now; /* released early */
    if (g->core_limit[account] && (!old || g->core_limit[account] < old))
        u->limit_lowered = true;
}

void policy_set_window(struct policy *p, uint64_t window_ns,
                       unsigned carryover_percent)
{
    p->window_ns = window_ns;
    p->carryover_percent = carryover_percent > 100 ? 100 : carryover_percent;
}

uint64_t policy_budget_ns(const struct policy *p, int gpu, int account)
{
    return pol_budget_ns(p, &p->gpus[gpu], account);
}

uint64_t policy_used_ns(const struct policy *p, int gpu, int account, uint64_t now)
{
    return pol_used_ns(&p->gpus[gpu], account, now);
}

bool policy_spent(const struct policy *p, int gpu, int account, uint64_t now)
{
    return pol_spent(p, &p->gpus[gpu], account, now);
}

unsigned policy_limit_sum(const struct policy *p, int gpu)
{
    return limit_sum(p, &p->gpus[gpu], -1);
}
