/* policy_quantum.c - how long a holder keeps a GPU while others wait.
 *
 * A hand-over costs the GPU the time it idles between two holders: from
 * the end of the old holder's drain (its queued work ran meanwhile, which
 * is no loss) to the new holder's first submission: the release on its
 * way, the grant, the new holder's thread waking up. That is 0.1-0.5 ms
 * for an ordinary job, whatever its kernels' length. A gang's ranks are
 * different: a rank that reaches its drain point waits at its collectives
 * for the others, so their whole drain, DROP_LOCK to release, is the cost
 * (2.5 ms median, 11 ms p99 for DDP ranks on an H200).
 *
 * What hand-overs take from a holder is their mean cost over its quantum,
 * so a quantum of 100 x the mean keeps that under 1 %, and is otherwise as
 * short as it can be, so that a GPU shared by N heavy jobs is fair within
 * a fraction of a second. The mean, not a high percentile: a host that is
 * busy for a moment makes a few hand-overs slow, which a p99 would turn
 * into turns of seconds (measured on a loaded 2-core machine: p99 16 ms
 * where the mean stayed under 1 ms), unfair for no gain. One sample counts
 * at most what the ceiling allows. Until the history is full, the mean
 * also counts POLICY_HANDOVER_PRIOR_N hand-overs of the floor's cost
 * (1 ms) as if measured: among the first few, one long idle (a job's
 * start-up: the GPU waited for a gang on another GPU) would otherwise make
 * turns of seconds (measured: 3.4 s while two DDP jobs started up beside a
 * single-GPU job on two H200s). The floor (100 ms) keeps the
 * scheduler's own overhead out of the picture; the ceiling (30 s) bounds a
 * waiter's wait whatever the holders do.
 *
 * The quantum is per GPU: a GPU of DDP ranks does not slow another's
 * turns. It follows the last POLICY_HANDOVER_HISTORY hand-overs, so a slow
 * spell moves it only while it is among them.
 *
 * A fresh arrival (a client that never held the GPU, or comes back after
 * POLICY_FRESH_IDLE_NS idle: a new job, a notebook cell) need not wait a
 * whole quantum: it queues ahead of the clients that just had their turn,
 * and the holder is cut short once it has held the floor, keeping the
 * rest of its quantum for its next turn. A job's first kernel then runs
 * within about the floor per fresh client ahead of it. A quantum the
 * operator pinned is never cut short for one. */
#include "policy_internal.h"


void pol_quantum_observe_handover(struct gpu_sched *g, uint64_t ns)
{
    const uint64_t prior_sum = POLICY_HANDOVER_PRIOR_N * POLICY_HANDOVER_PRIOR_NS;
    unsigned slot = g->n_handovers % POLICY_HANDOVER_HISTORY, n;
    uint64_t q;

    if (ns > POLICY_TQ_CEILING_NS / POLICY_TQ_DRAIN_MULTIPLE)
        ns = POLICY_TQ_CEILING_NS / POLICY_TQ_DRAIN_MULTIPLE;
    if (g->n_handovers >= POLICY_HANDOVER_HISTORY)
        g->handover_sum_ns -= g->handover_ns[slot];
    g->handover_ns[slot] = ns;
    g->handover_sum_ns += ns;
    /* Past the ring's size the count only says "full": keep it there
     * rather than let it wrap to an empty-looking ring. */
    if (++g->n_handovers == 2 * POLICY_HANDOVER_HISTORY)
        g->n_handovers = POLICY_HANDOVER_HISTORY;
    n = g->n_handovers;
    g->handover_mean_ns =
        n < POLICY_HANDOVER_HISTORY
            ? (g->handover_sum_ns + prior_sum) / (n + POLICY_HANDOVER_PRIOR_N)
            : g->handover_sum_ns / POLICY_HANDOVER_HISTORY;
    q = g->handover_mean_ns * POLICY_TQ_DRAIN_MULTIPLE;
    g->auto_quantum_ns = q < POLICY_TQ_FLOOR_NS     ? POLICY_TQ_FLOOR_NS
                         : q > POLICY_TQ_CEILING_NS ? POLICY_TQ_CEILING_NS
                                                    : q;
}

void pol_quantum_on_release(struct gpu_sched *g, int client, bool gang_rank,
                            uint64_t drained_at, uint64_t now)
{
    const struct member *m = &g->members[client];

    g->handover_open = false;
    if (gang_rank) {
        pol_quantum_observe_handover(g, now - m->drop_sent_at);
    } else {
        g->handover_open = true;
        g->handover_from = drained_at;
    }
}

void pol_quantum_on_grant(struct gpu_sched *g, struct member *m)
{
    /* Beside a runner the GPU did not idle: nothing to time. */
    m->times_handover = g->handover_open && g->n_running == 0;
    g->handover_open = false;
}

void pol_quantum_on_first_submission(struct gpu_sched *g, struct member *m,
                                     bool gang_rank, uint64_t at)
{
    /* A rank is granted with its gang, whether or not it has work queued
     * (during DDP's start-up it may submit seconds later): its cost is
     * its whole drain, counted at its release. */
    if (!m->times_handover || gang_rank) {
        m->times_handover = false;
        return;
    }
    m->times_handover = false;
    pol_quantum_observe_handover(g, at > g->handover_from ? at - g->handover_from
                                                          : 0);
}

uint64_t pol_gpu_quantum(const struct policy *p, const struct gpu_sched *g)
{
    return p->tq_ns != POLICY_TQ_AUTO ? p->tq_ns : g->auto_quantum_ns;
}

enum quantum_reason pol_gpu_quantum_reason(const struct policy *p,
                                           const struct gpu_sched *g)
{
    uint64_t q = g->handover_mean_ns * POLICY_TQ_DRAIN_MULTIPLE;

    if (p->tq_ns != POLICY_TQ_AUTO)
        return QUANTUM_PINNED;
    return q <= POLICY_TQ_FLOOR_NS     ? QUANTUM_FLOOR
           : q >= POLICY_TQ_CEILING_NS ? QUANTUM_CEILING
                                       : QUANTUM_DRAIN;
}

uint64_t pol_fresh_quantum(const struct gpu_sched *g)
{
    return g->auto_quantum_ns < POLICY_TQ_FLOOR_NS ? g->auto_quantum_ns
                                                   : POLICY_TQ_FLOOR_NS;
}

bool pol_arrives_fresh(const struct policy *p, const struct member *m,
                       uint64_t now)
{
    /* Under a pinned quantum the queue is first come, first served. */
    if (p->tq_ns != POLICY_TQ_AUTO)
        return false;
    return m->grants == 0 || now - m->since >= POLICY_FRESH_IDLE_NS;
}

int pol_fresh_queue_position(const struct gpu_sched *g)
{
    int i = 0;

    while (i < g->n_waiting && g->members[g->queue[i]].fresh)
        i++;
    return i;
}
