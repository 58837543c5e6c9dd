/* policy_view.c - the policy's state as status and the daemon read it,
 * so that nothing outside the policy reads its internals. */
#include "policy_internal.h"

size_t policy_size(void)
{
    return sizeof(struct policy);
}

void policy_view_settings(const struct policy *p, struct policy_settings_view *v)
{
    *v = (struct policy_settings_view){
        .tq_ns = p->tq_ns,
        .window_ns = p->window_ns,
        .anti_thrash = p->anti_thrash,
        .switch_fixed_ns = p->switch_fixed_ns,
        .switch_multiplier = p->switch_multiplier,
        .reserve_percent = p->reserve_percent,
        .idle_swap_after_ns = p->idle_swap_after_ns,
        .host_swap_budget = p->host_swap_budget,
        .parked = pol_parked_bytes(p),
    };
}

void policy_view_gpu(const struct policy *p, int gpu, struct policy_gpu_view *v)
{
    const struct gpu_sched *g = &p->gpus[gpu];

    v->mode = g->mode;
    v->capacity = g->capacity;
    v->memory_limit = policy_memory_limit(p, gpu);
    v->held = pol_held_bytes(g);
    v->running_footprint = policy_running_footprint(p, gpu);
    v->resident = pol_resident_bytes(g);
    v->switch_time_ns = policy_switch_time(p, gpu, &v->switch_measured);
    v->quantum_ns = pol_gpu_quantum(p, g);
    v->quantum_reason = (uint8_t)pol_gpu_quantum_reason(p, g);
    v->handover_mean_ns = g->handover_mean_ns;
    v->switches = g->switches;
    v->swap_out = g->swap_out;
    v->swap_in = g->swap_in;
}

int policy_view_waiting(const struct policy *p, int gpu, uint64_t now,
                        struct policy_waiter_view *w, int max)
{
    const struct gpu_sched *g = &p->gpus[gpu];

    for (int i = 0; i < g->n_waiting && i < max; i++) {
        const struct member *m = &g->members[g->queue[i]];
        w[i] = (struct policy_waiter_view){g->queue[i],
                                           pol_spent(p, g, m->account, now)
                                               ? WAIT_THROTTLED
                                               : m->wait_reason};
    }
    return g->n_waiting;
}

bool policy_view_member(const struct policy *p, int gpu, int client,
                        uint64_t now, struct policy_member_view *v)
{
    const struct gpu_sched *g = &p->gpus[gpu];
    const struct member *m = &g->members[client];
    bool waiting = m->state == MEMBER_WAITING;

    if (!m->present)
        return false;
    *v = (struct policy_member_view){
        .state = m->state,
        .wait_reason = !waiting                           ? WAIT_NONE
                       : pol_spent(p, g, m->account, now) ? WAIT_THROTTLED
                                                          : m->wait_reason,
        .lease = m->lease,
        .wait_ns = waiting ? now - m->since : 0,
        .held_ns = pol_held_total(m, now),
        .grants = m->grants,
        .last_drain_ns = m->last_drain_ns,
        .last_preempt_ns = m->last_preempt_ns,
        .footprint = m->footprint,
        .evictable = m->evictable,
        .evicting = m->evicting,
        /* Never granted: nothing of it was ever on the GPU to swap. */
        .swapped_out = m->evictable && m->grants && !m->resident &&
                       !m->evicting && !pol_running(m),
        .load_permille = m->load_known ? m->load_permille : 0xffff,
        .resident = pol_occupied_bytes(m),
        .parked = m->parked ? m->evictable : 0,
        .idle_ns = m->state == MEMBER_IDLE && m->grants ? now - m->since : 0,
        .swap_outs = m->swap_outs,
        .swap_ins = m->swap_ins,
        .swap_in_wait_ns = m->swap_in_wait_ns,
    };
    return true;
}

void policy_view_wait_why(const struct policy *p, int gpu, int client,
                          uint64_t now, struct policy_wait_why *why)
{
    pol_wait_why(p, gpu, client, now, why);
}

bool policy_is_member(const struct policy *p, int gpu, int client)
{
    return p->gpus[gpu].members[client].present;
}

void policy_view_account(const struct policy *p, int gpu, int account,
                         uint64_t now, struct policy_account_stats *v)
{
    const struct gpu_sched *g = &p->gpus[gpu];

    *v = g->stats[account];
    if (v->held_until > v->held_from && now > v->held_from)
        v->throttled_ns +=
            (now < v->held_until ? now : v->held_until) - v->held_from;
    /* Holds in progress are billed at their end: add what they ran so far. */
    v->billed_ns += pol_used_ns(g, account, now) - g->usage[account].used_ns;
}
