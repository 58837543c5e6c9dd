/* policy_hold.c - a hold of a GPU from its grant to its end, and the DROP
 * that asks for it back: what each changes in the member, the meter of
 * GPU time (policy_budget.c) and the timing of hand-overs
 * (policy_quantum.c). Both the tick (policy.c) and the gangs
 * (policy_gang.c) decide with these. */
#include "policy_internal.h"

/* Grants client g: it holds the GPU from now, and its account's time runs.
 * The runners so far are billed first, at the old count. */
void pol_grant(struct gpu_sched *g, int gpu, int client, uint64_t now,
               struct policy_actions *out)
{
    struct member *m = &g->members[client];

    histogram_observe(&g->stats[m->account].lock_wait, now - m->since);
    if (m->told_wait_mem)
        pol_emit(out, ACTION_MEM_AVAILABLE, gpu, client, 0)->mem.wait_ns =
            now - m->since;
    pol_bill_runners(g, now);
    if (g->last_granted >= 0 && g->last_granted != client)
        g->switches++;
    pol_quantum_on_grant(g, m);
    g->last_granted = client;
    g->n_running++;
    m->lease = ++g->lease;
    m->grant_seq = ++g->grant_seq;
    m->granted_at = now;
    pol_start_billing(g, m, now);
    m->grants++;
    m->wait_reason = WAIT_NONE;
    m->told_wait_mem = false;
    m->fresh = false;
    m->cut_short = false;
    m->evict_after_release = false;
    m->swap_in_from = m->parked ? now : 0;
    if (m->evictable)
        m->resident = true;
    m->allocated_while_out = 0;
    pol_set_state(m, MEMBER_HOLDING, now);
    pol_emit(out, ACTION_GRANT, gpu, client, m->lease);
}

/* Ends client's hold, crediting its duration and billing its account. Its
 * memory stays resident until it is evicted. */
void pol_end_hold(struct policy *p, struct gpu_sched *g, int client, uint64_t now)
{
    struct member *m = &g->members[client];

    pol_bill_runners(g, now);
    m->held_ns += now - m->granted_at;
    g->ran_until[m->account] = now;
    g->n_running--;
    pol_throttle_if_spent(p, g, m->account, now);
    m->dropped = m->state == MEMBER_DRAINING;
    /* A pause keeps a turn for memory (pol_resumes_in_place); a drop ends it. */
    m->turn_used_ns = !m->dropped && pol_memory_waiter(g)
                          ? m->turn_used_ns + (now - m->granted_at)
                          : 0;
    m->released_at = now;
    /* It ran: whatever it had in host memory is back, whether or not its
     * SWAPPED(in) came. */
    m->parked = false;
    m->swap_in_from = 0;
    pol_set_state(m, MEMBER_IDLE, now);
}

/* Asks holder client to give g back: it drains from now. */
void pol_drop(struct gpu_sched *g, int gpu, int client, uint64_t now,
              struct policy_actions *out)
{
    struct member *m = &g->members[client];

    pol_set_state(m, MEMBER_DRAINING, now);
    m->drop_sent_at = now;
    m->draining_heard_at = 0;
    m->pointed = m->drain_to_sent = false;
    g->stats[m->account].preemptions++;
    pol_emit(out, ACTION_DROP, gpu, client, m->lease);
}
