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
 * A fresh arrival (a client whose pod has not run on the GPU for
 * POLICY_FRESH_IDLE_NS: a new job, a notebook's next cell) need not
 * wait a whole quantum: it queues ahead of the clients that just had their
 * turn, and the holder is cut short for it. The holder keeps the rest of
 * its quantum for its next turn, which comes first after the fresh
 * arrivals (holders cut short queue in the order they were cut). A cut
 * costs one hand-over more, 0.1-0.5 ms of idle GPU per arrival whenever it
 * comes, so it comes as soon as the holder has had its slice,
 * POLICY_FRESH_SLICE_NS (5 ms) since its grant. 5 ms is 10-50 times the
 * hand-over: a holder granted just before an arrival still runs ten times
 * what the cut costs it. And the arrival's first kernel waits at most the
 * slice, the holder's drain (its queued work, a few ms) and the hand-over,
 * which stays within the 10 ms over its native start that a notebook cell
 * may lose; most arrivals come later in a turn and wait only the drain.
 * Busy jobs lose the hand-over per arrival: 20 arrivals in 5 s cost them
 * at most 0.2 %. Where hand-overs cost more the slice is a twentieth of the
 * holder's quantum, 5 x the mean hand-over, up to the floor (100 ms, the
 * rule before): a gang's hand-over is its ranks' whole drain, and DDP
 * ranks' turns of about 1.1 s get a slice of 55 ms.
 *
 * Nobody gets more from it than that. Freshness is the pod's (the
 * account's): none of its clients ran on the GPU in the last second, which
 * a busy job does not give, nor does reconnecting or starting another
 * process (by the client, a pod could jump the queue at every reconnect;
 * a process in no pod is an account of its own, as for its limits).
 * An arrival hands the GPU over once: it cuts short the holders that held
 * the GPU when it asked (several only where light clients share it), or,
 * if another arrival went first, one granted since (fresh_cut), so
 * several in a row cut one holder each. A holder runs at least its slice
 * at every grant (under the auto quantum, even with little of its quantum
 * left), so one cut short is not cut again before it has run that much.
 * Only the arrival's own GPU is cut for it: a gang's waiter borrowed from
 * another GPU has the holders rotate at their quantum. A quantum the
 * operator pinned is never cut short for one, and an arrival that waits
 * for memory cuts nobody: a rotation of memory keeps the switch time. */
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

uint64_t pol_fresh_slice(uint64_t quantum)
{
    uint64_t slice = quantum / (POLICY_TQ_FLOOR_NS / POLICY_FRESH_SLICE_NS);

    return slice < POLICY_FRESH_SLICE_NS ? POLICY_FRESH_SLICE_NS
           : slice > POLICY_TQ_FLOOR_NS  ? POLICY_TQ_FLOOR_NS
                                         : slice;
}

bool pol_cuts_short(const struct policy *p, const struct member *waiter,
                    const struct member *holder)
{
    /* Only a wait for the lock: a memory wait keeps the switch time, so
     * that a fresh arrival never causes a swap before its time. The
     * operator may have pinned the quantum since it arrived. */
    if (p->tq_ns != POLICY_TQ_AUTO || !waiter->fresh ||
        waiter->wait_reason != WAIT_LOCK)
        return false;
    /* One hand-over per arrival: the holders that held the GPU when it
     * asked (several only where light clients share it), or one granted
     * since (another arrival went first), once. */
    return !waiter->fresh_cut || holder->granted_at < waiter->since;
}

bool pol_arrives_fresh(const struct policy *p, const struct gpu_sched *g,
                       const struct member *m, uint64_t now)
{
    uint64_t ran_until = g->ran_until[m->account];

    /* Under a pinned quantum the queue is first come, first served. */
    if (p->tq_ns != POLICY_TQ_AUTO)
        return false;
    /* Its pod's, not its own: a process that reconnects, or a pod that
     * starts another, is not new while the pod keeps the GPU busy. */
    if (ran_until && now - ran_until < POLICY_FRESH_IDLE_NS)
        return false;
    for (int c = 0; c < g->slots; c++)
        if (g->members[c].account == m->account && pol_running(&g->members[c]))
            return false;
    return true;
}

int pol_queue_position(const struct gpu_sched *g, const struct member *m)
{
    int i = 0;

    if (!m->fresh && !m->cut_short)
        return g->n_waiting;
    while (i < g->n_waiting && g->members[g->queue[i]].fresh)
        i++;
    if (m->fresh)
        return i;
    while (i < g->n_waiting && g->members[g->queue[i]].cut_short)
        i++;
    return i;
}
