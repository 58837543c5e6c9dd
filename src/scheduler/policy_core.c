/* policy_core.c - the bottom of the policy: its tables, the members of
 * each GPU and their queue, and the settings and queries that only read or
 * write them. Every other policy file may call this one; it calls none of
 * them (the layers are in policy_internal.h), and no other edits a queue. */
#include "policy_core.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

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
    p->idle_swap_after_ns = POLICY_IDLE_SWAP_AFTER_NS;
    p->host_swap_budget = POLICY_HOST_BUDGET_NONE;
    p->n_gpus = n_gpus;
    for (int g = 0; g < n_gpus; g++) {
        p->gpus[g].mode = SCHED_MODE_AUTO;
        p->gpus[g].last_granted = -1;
        p->gpus[g].window_idle = true;
        p->gpus[g].auto_quantum_ns = POLICY_TQ_FLOOR_NS;
    }
}

bool policy_grow(struct policy *p, int table_size)
{
    int old = p->table_size;
    struct policy_scratch *s = &p->scratch;
    bool ok = true;

    if (table_size <= old)
        return true;
    /* Each array that grew is valid at its new size, so a failure halfway
     * only keeps the old table size: the next call grows the rest. */
    ok = ok && grow_zeroed(&p->priority, sizeof(*p->priority), old, table_size);
    ok = ok && grow_zeroed(&p->min_share, sizeof(*p->min_share), old, table_size);
    ok = ok && grow_zeroed(&p->idle_swap_off, sizeof(*p->idle_swap_off), old,
                           table_size);
    ok = ok && grow_zeroed(&s->admit_order, sizeof(int), old, table_size);
    ok = ok && grow_zeroed(&s->blocked_order, sizeof(int), old, table_size);
    ok = ok && grow_zeroed(&s->limit_counted, sizeof(bool), old, table_size);
    ok = ok && grow_zeroed(&s->waiting_counted, sizeof(bool), old, table_size);
    ok = ok && grow_zeroed(&s->taking_part, sizeof(bool), old, table_size);
    ok = ok && grow_zeroed(&s->budgets, sizeof(uint64_t), old, table_size);
    ok = ok && grow_zeroed(&s->gang_considered, sizeof(bool), old, table_size);
    ok = ok && grow_zeroed(&p->gang_of, sizeof(int), old, table_size);
    ok = ok && grow_zeroed(&p->gangs, sizeof(struct gang), old, table_size);
    for (int gpu = 0; ok && gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        ok = grow_zeroed(&g->queue, sizeof(int), old, table_size) &&
             grow_zeroed(&g->members, sizeof(struct member), old, table_size) &&
             grow_zeroed(&g->usage, sizeof(struct account_usage), old,
                         table_size) &&
             grow_zeroed(&g->ran_until, sizeof(uint64_t), old, table_size) &&
             grow_zeroed(&g->core_limit, sizeof(uint8_t), old, table_size) &&
             grow_zeroed(&g->stats, sizeof(struct policy_account_stats), old,
                         table_size);
    }
    if (ok)
        p->table_size = table_size;
    return ok;
}

void policy_destroy(struct policy *p)
{
    struct policy_scratch *s = &p->scratch;

    free(p->priority);
    free(p->min_share);
    free(p->idle_swap_off);
    free(s->admit_order);
    free(s->blocked_order);
    free(s->limit_counted);
    free(s->waiting_counted);
    free(s->taking_part);
    free(s->budgets);
    free(s->gang_considered);
    *s = (struct policy_scratch){0};
    free(p->gang_of);
    free(p->gangs);
    p->gang_of = NULL;
    p->gangs = NULL;
    p->gang_slots = 0;
    p->priority = NULL;
    p->min_share = NULL;
    p->idle_swap_off = NULL;
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        free(g->queue);
        free(g->members);
        free(g->usage);
        free(g->stats);
        free(g->ran_until);
        free(g->core_limit);
        g->core_limit = NULL;
        g->stats = NULL;
        g->ran_until = NULL;
        g->queue = NULL;
        g->members = NULL;
        g->usage = NULL;
    }
    p->table_size = 0;
}

void policy_join(struct policy *p, int gpu, int client, int account, uint64_t now)
{
    struct gpu_sched *g = &p->gpus[gpu];
    struct member *m = &g->members[client];

    if (client >= g->slots)
        g->slots = client + 1;
    memset(m, 0, sizeof(*m));
    m->present = true;
    m->account = account;
    pol_set_state(m, MEMBER_IDLE, now);
}

/* ---- members ------------------------------------------------------------ */

/* Time held so far, including a hold in progress. */
uint64_t pol_held_total(const struct member *m, uint64_t now)
{
    return m->held_ns + (pol_running(m) ? now - m->granted_at : 0);
}

void pol_enqueue(struct gpu_sched *g, int client, int at)
{
    memmove(&g->queue[at + 1], &g->queue[at],
            (size_t)(g->n_waiting - at) * sizeof(g->queue[0]));
    g->queue[at] = client;
    g->n_waiting++;
}

int pol_dequeue_at(struct gpu_sched *g, int at)
{
    int client = g->queue[at];

    memmove(&g->queue[at], &g->queue[at + 1],
            (size_t)(g->n_waiting - at - 1) * sizeof(g->queue[0]));
    g->n_waiting--;
    return client;
}

void pol_dequeue(struct gpu_sched *g, int client)
{
    for (int i = 0; i < g->n_waiting; i++)
        if (g->queue[i] == client) {
            pol_dequeue_at(g, i);
            return;
        }
}

void pol_dequeue_all(struct gpu_sched *g, uint64_t now)
{
    for (int i = 0; i < g->n_waiting; i++)
        pol_set_state(&g->members[g->queue[i]], MEMBER_IDLE, now);
    g->n_waiting = 0;
}

/* ---- settings and queries ------------------------------------------------ */

void policy_set_tq(struct policy *p, uint64_t tq_ns)
{
    p->tq_ns = tq_ns;
}

void policy_set_load(struct policy *p, int gpu, int client, unsigned busy_permille)
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

uint64_t policy_held_ns(const struct policy *p, int gpu, int client, uint64_t now)
{
    const struct member *m = &p->gpus[gpu].members[client];

    return pol_held_total(m, now);
}

int policy_holder(const struct policy *p, int gpu)
{
    const struct gpu_sched *g = &p->gpus[gpu];
    int oldest = -1;

    for (int c = 0; c < g->slots && g->n_running; c++)
        if (pol_running(&g->members[c]) &&
            (oldest < 0 || g->members[c].grant_seq < g->members[oldest].grant_seq))
            oldest = c;
    return oldest;
}

bool policy_is_running(const struct policy *p, int gpu, int client)
{
    return pol_running(&p->gpus[gpu].members[client]);
}
