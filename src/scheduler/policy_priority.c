/* policy_priority.c - priority classes and starvation floors (see
 * "Priorities" in policy.h). */
#include "policy_internal.h"

unsigned pol_class_of(const struct policy *p, int account)
{
    return p->priority[account] ? p->priority[account] : PRIORITY_NORMAL;
}

uint64_t pol_floor_ns(const struct policy *p, int account)
{
    return p->window_ns * p->min_share[account] / 100;
}

/* Whether the account is still owed its floor in this window: it runs
 * ahead of higher classes until it has used it. A core limit stays a cap:
 * a spent account is owed nothing. */
static bool floor_due(const struct policy *p, const struct gpu_sched *g,
                      int account, uint64_t now)
{
    return p->min_share[account] &&
           pol_used_ns(g, account, now) < pol_floor_ns(p, account) &&
           !pol_spent(p, g, account, now);
}

/* Higher ranks win: the class, above every class while a floor is due. */
static unsigned rank_of(const struct policy *p, const struct gpu_sched *g,
                        const struct member *m, uint64_t now)
{
    unsigned cls = pol_class_of(p, m->account);

    return floor_due(p, g, m->account, now) ? PRIORITY_HIGHEST + cls : cls;
}

/* Whether member c wants the GPU in a way that holds lower classes back:
 * it holds it, or it waits and could run (within its budget, and its
 * memory fits or can be made to fit). A waiter that cannot fit until
 * memory that cannot move goes holds nobody back: the GPU would idle. */
static bool wants(const struct policy *p, const struct gpu_sched *g, int gpu,
                  int c, uint64_t now)
{
    const struct member *m = &g->members[c];

    if (!m->present)
        return false;
    if (m->state == MEMBER_HOLDING)
        return true;
    return m->state == MEMBER_WAITING && !pol_spent(p, g, m->account, now) &&
           (pol_fits(p, g, gpu, c) || pol_room_possible(p, g, gpu, c));
}

/* Whether another client that wants gpu outranks client c: one of another
 * class (within a class the TQ rotates as without priorities) and of a
 * higher rank. */
bool pol_outranked(const struct policy *p, const struct gpu_sched *g, int gpu,
                   int c, uint64_t now)
{
    if (!p->ranked)
        return false;
    unsigned cls = pol_class_of(p, g->members[c].account);
    unsigned rank = rank_of(p, g, &g->members[c], now);

    for (int x = 0; x < g->slots; x++) {
        const struct member *m = &g->members[x];
        if (x == c || !m->present || pol_class_of(p, m->account) == cls ||
            rank_of(p, g, m, now) <= rank || !wants(p, g, gpu, x, now))
            continue;
        return true;
    }
    return false;
}

bool pol_beside_draining(const struct policy *p, const struct gpu_sched *g,
                         int client)
{
    unsigned cls = pol_class_of(p, g->members[client].account);

    if (!p->ranked)
        return false;
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (pol_running(m) &&
            (m->state != MEMBER_DRAINING || pol_class_of(p, m->account) >= cls))
            return false;
    }
    return true;
}

void policy_expect_class(struct policy *p, unsigned cls)
{
    p->expected_class = cls;
}

bool pol_preemptible(const struct policy *p, int account)
{
    unsigned cls = pol_class_of(p, account);

    return cls < p->top_class || cls < p->expected_class;
}

bool policy_ranked(const struct policy *p)
{
    return p->ranked;
}

struct policy_yield policy_yield_terms(const struct policy *p, int gpu, int client)
{
    const struct gpu_sched *g = &p->gpus[gpu];
    struct policy_yield terms = {0, 0};

    if (!p->ranked)
        return terms;
    unsigned cls = pol_class_of(p, g->members[client].account);
    bool above_all = true;
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (c == client || !m->present)
            continue;
        unsigned other = pol_class_of(p, m->account);
        if (other < cls)
            terms.idle_release_ns = POLICY_LEND_IDLE_NS;
        else if (other > cls)
            terms.max_backlog_ns = POLICY_LENT_BACKLOG_NS;
        above_all = above_all && other < cls;
    }
    /* Nobody preempts the top class: its queue need not be short, and
     * bounding it splits its requests over the GPU's time slices when it
     * shares the GPU with a draining holder (the marks then measure the
     * other context's slices as its own work): p50 4.9 ms where it was
     * 2.1 ms unbounded beside 100 ms kernels on an H200. */
    if (above_all && terms.idle_release_ns)
        terms.max_backlog_ns = POLICY_BACKLOG_UNBOUNDED;
    return terms;
}

/* When the rank of a client of g changes by itself: a running floor ends
 * when it is used, a used floor is owed again at the next window (0:
 * never). */
uint64_t pol_rank_change_due(const struct policy *p, const struct gpu_sched *g,
                             uint64_t now)
{
    uint64_t next = 0;

    if (!p->ranked)
        return 0;
    for (int c = 0; c < g->slots; c++) {
        const struct member *m = &g->members[c];
        if (!m->present || !p->min_share[m->account] || m->state == MEMBER_IDLE)
            continue;
        if (!floor_due(p, g, m->account, now)) {
            pol_earliest(&next, g->window_start + p->window_ns);
        } else if (pol_running(m)) {
            /* Shared time is billed at 1/n: the floor lasts n times as
             * long. */
            uint64_t left =
                pol_floor_ns(p, m->account) - pol_used_ns(g, m->account, now);
            pol_earliest(&next, now + left * (uint64_t)g->n_running);
        }
    }
    return next;
}

static void recount_ranked(struct policy *p)
{
    p->ranked = false;
    p->top_class = PRIORITY_NORMAL;
    for (int a = 0; a < p->table_size; a++) {
        unsigned cls = pol_class_of(p, a);
        p->ranked = p->ranked || cls != PRIORITY_NORMAL || p->min_share[a];
        if (cls > p->top_class)
            p->top_class = cls;
    }
}

/* Unchanged values return early: every registration sets both. */
void policy_set_priority(struct policy *p, int account, unsigned priority)
{
    uint8_t value =
        (uint8_t)(priority > PRIORITY_HIGHEST ? PRIORITY_HIGHEST : priority);

    if (p->priority[account] == value)
        return;
    p->priority[account] = value;
    recount_ranked(p);
}

void policy_set_min_share(struct policy *p, int account, unsigned percent)
{
    uint8_t value = (uint8_t)(percent > 100 ? 100 : percent);

    if (p->min_share[account] == value)
        return;
    p->min_share[account] = value;
    recount_ranked(p);
}

unsigned policy_priority(const struct policy *p, int account)
{
    return pol_class_of(p, account);
}

unsigned policy_min_share(const struct policy *p, int account)
{
    return p->min_share[account];
}
