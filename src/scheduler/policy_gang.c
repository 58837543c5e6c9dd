/* policy_gang.c - gang grants: the GPUs of a multi-GPU job go together.
 *
 * A data-parallel job runs one rank per GPU, and its collectives spin on
 * every GPU until all ranks arrive. Locks taken GPU by GPU let job A hold
 * GPU 0 and wait for GPU 1 while job B holds GPU 1 and waits for GPU 0:
 * neither progresses, and a rank whose peer is gated burns its quantum.
 * So the clients of a gang (a job: the daemon numbers them, see
 * policy_set_gang) whose members span two GPUs or more are granted as one:
 *  - All or none. A member's request waits until the gang is granted; the
 *    gang is granted, in one decision, when none of its GPUs has a runner,
 *    and then every waiting member on every GPU gets its lock at once, so
 *    the job's quantum starts on all of them together.
 *  - While any member runs, the gang holds all its GPUs: no other job is
 *    admitted on them, and a member that asks later is granted at once.
 *    A gang thus never holds part of what another waits for while waiting
 *    itself: no circular wait.
 *  - Preemption drains all ranks: once one member is dropped (its quantum
 *    ended on one GPU, or it was revoked), every member is, and the gang's
 *    GPUs go to others only when the last one has released. Where no rank
 *    runs (one gave its GPU back), a client waiting there ends the gang's
 *    quantum all the same, counted from its first rank's grant.
 *  - Aging, as for memory waits: single-GPU clients may take a GPU a
 *    waiting gang needs only until the gang has waited its quantum (the
 *    TQ); after that its GPUs admit nobody who came after it, runners
 *    there rotate as for any waiter, and the gang is granted when the
 *    last one drains, unless a client that waited longer takes a GPU
 *    first (it is admitted before gangs are considered).
 *    Among gangs, the one that has waited longest goes first, and an aged
 *    gang keeps its GPUs from younger ones. A gang its compute limit holds
 *    back keeps nothing: it could not use it.
 *  - A drain point: a rank stopped just before a collective would leave
 *    its peers' collectives spinning, and their drains with them. Dropped
 *    ranks report how many collectives they launched; once all have, each
 *    is told the highest count, and the ranks behind launch up to it
 *    before they drain (policy_drain_point). A rank that waits while its
 *    gang drains joins the drain (granted and dropped at once).
 *  - Memory: the gang is granted once every waiting rank fits; a rank that
 *    does not is told and gets idle clients evicted, as any waiter.
 * A gang's GPUs are those its members have asked for (a process registers
 * every GPU it sees, and may use one); a gang whose members all use one
 * GPU is an ordinary set of clients.
 *
 * The gang table is a census of the members, taken where it is read, so
 * that no other file keeps gang bookkeeping; it is not taken until a
 * first request makes some gang span GPUs, so that scheduling without
 * multi-GPU jobs costs what it did. */
#include "policy_internal.h"

#include <string.h>

void policy_set_gang(struct policy *p, int client, int gang)
{
    p->gang_of[client] = gang + 1;
    if (gang + 1 > p->gang_slots)
        p->gang_slots = gang + 1;
}

int policy_gang(const struct policy *p, int client)
{
    int gang = p->gang_of[client];
    uint32_t gpus = 0;

    /* Counted here rather than read from the census, which only the
     * decisions keep current. */
    for (int gpu = 0; gang && gpu < p->n_gpus; gpu++) {
        const struct gpu_sched *g = &p->gpus[gpu];
        for (int c = 0; c < g->slots; c++)
            if (g->members[c].present && g->members[c].requested &&
                p->gang_of[c] == gang) {
                gpus |= 1u << gpu;
                break;
            }
    }
    return (gpus & (gpus - 1)) ? gang - 1 : -1;
}

/* Whether the gang spans several GPUs: only then does it go together. */
static bool spans(const struct gang *gang)
{
    return gang->gpus & (gang->gpus - 1);
}

void pol_gang_requested(struct policy *p, int gpu, int client)
{
    p->gpus[gpu].members[client].requested = true;
    if (!p->gang_of[client] || p->gangs_spanning)
        return;
    for (int other = 0; other < p->n_gpus; other++) {
        const struct gpu_sched *g = &p->gpus[other];
        for (int c = 0; other != gpu && c < g->slots; c++)
            if (g->members[c].present && g->members[c].requested &&
                p->gang_of[c] == p->gang_of[client]) {
                p->gangs_spanning = 1; /* the census counts them */
                return;
            }
    }
}

/* Only a first request can make a gang span GPUs (pol_gang_requested): until
 * one does, the census is not taken. */
void pol_gang_census(struct policy *p)
{
    if (!p->gangs_spanning)
        return;
    memset(p->gangs, 0, (size_t)p->gang_slots * sizeof(p->gangs[0]));
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        const struct gpu_sched *g = &p->gpus[gpu];
        for (int c = 0; c < g->slots; c++) {
            const struct member *m = &g->members[c];
            if (!m->present || !p->gang_of[c])
                continue;
            struct gang *gang = &p->gangs[p->gang_of[c] - 1];
            if (m->requested)
                gang->gpus |= 1u << gpu;
            if (m->state == MEMBER_WAITING) {
                if (!gang->n_waiting || m->since < gang->wait_since)
                    gang->wait_since = m->since;
                gang->n_waiting++;
            } else if (m->state == MEMBER_HOLDING) {
                gang->n_running++;
            } else if (m->state == MEMBER_DRAINING) {
                gang->n_running++;
                gang->n_draining++;
            }
        }
    }
    p->gangs_spanning = 0;
    for (int i = 0; i < p->gang_slots; i++)
        p->gangs_spanning += spans(&p->gangs[i]);
}

/* The client's gang if it goes together, else NULL. */
static const struct gang *gang_of(const struct policy *p, int client)
{
    const struct gang *gang;

    if (!p->gang_of[client])
        return NULL;
    gang = &p->gangs[p->gang_of[client] - 1];
    return spans(gang) ? gang : NULL;
}

/* The longest TQ among the GPUs of a gang: its turn must cover the
 * slowest hand-over it makes. */
static uint64_t gang_quantum(const struct policy *p, uint32_t gpus)
{
    uint64_t longest = 0;

    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        uint64_t q = pol_gpu_quantum(p, &p->gpus[gpu]);
        if ((gpus & (1u << gpu)) && q > longest)
            longest = q;
    }
    return longest;
}

static bool aged(const struct policy *p, const struct gang *gang, uint64_t now)
{
    return gang->n_waiting &&
           now - gang->wait_since >= gang_quantum(p, gang->gpus);
}

/* Whether a rank of gang number i may not run for its compute limit: the
 * gang could not use the GPUs it would keep. Every rank counts, not only
 * those waiting now: one that has just released asks again in a moment,
 * and a gang granted without it would spin in its collectives, waiting for
 * it, on the budget of the others. */
static bool held_back(const struct policy *p, int i, uint64_t now)
{
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        const struct gpu_sched *g = &p->gpus[gpu];
        for (int c = 0; c < g->slots; c++) {
            const struct member *m = &g->members[c];
            if (m->present && m->requested && p->gang_of[c] == i + 1 &&
                pol_spent(p, g, m->account, now))
                return true;
        }
    }
    return false;
}

/* Whether a gang keeps gpu from a client outside it that has waited since
 * `since`: the gang runs there, or it has waited its quantum for it and
 * longer than the client (first come, first served among the aged: a gang
 * may not starve a single-GPU client either) and may run. */
static bool reserved(const struct policy *p, int gpu, uint64_t since, uint64_t now)
{
    for (int i = 0; i < p->gang_slots; i++) {
        const struct gang *gang = &p->gangs[i];
        if (spans(gang) && (gang->gpus & (1u << gpu)) &&
            (gang->n_running || (aged(p, gang, now) && gang->wait_since <= since &&
                                 !held_back(p, i, now))))
            return true;
    }
    return false;
}

bool pol_gang_member(const struct policy *p, int client)
{
    return p->gangs_spanning && gang_of(p, client);
}

/* A gang loses every GPU when one rank's turn ends, so its ranks share
 * one turn. Cut at the GPU whose hand-overs are cheapest, the gangs on
 * two H200s got turns of 226 ms where a single-GPU job beside them on
 * the other GPU got 566 ms, and 43.5 % of that GPU's held time instead
 * of a third. */
uint64_t pol_turn_quantum(const struct policy *p, int client, uint64_t quantum)
{
    const struct gang *gang = p->gangs_spanning ? gang_of(p, client) : NULL;
    uint64_t longest = gang ? gang_quantum(p, gang->gpus) : 0;

    return longest > quantum ? longest : quantum;
}

/* Whether only ranks of the client's gang run on gpu. */
static bool only_mates_run(const struct policy *p, int gpu, int client)
{
    const struct gpu_sched *g = &p->gpus[gpu];

    for (int c = 0; c < g->slots && g->n_running; c++)
        if (pol_running(&g->members[c]) && p->gang_of[c] != p->gang_of[client])
            return false;
    return true;
}

bool pol_gang_allows(const struct policy *p, int gpu, int client, uint64_t now)
{
    const struct gang *gang;

    if (!p->gangs_spanning)
        return true;
    gang = gang_of(p, client);
    /* Someone else may still run on a GPU that a rank's first request
     * has just added to its gang: it rotates out as for any waiter. */
    if (gang)
        return gang->n_running && !gang->n_draining &&
               only_mates_run(p, gpu, client);
    return !reserved(p, gpu, p->gpus[gpu].members[client].since, now);
}

const struct member *pol_gang_waiter(const struct policy *p, int gpu)
{
    if (!p->gangs_spanning)
        return NULL;
    for (int i = 0; i < p->gang_slots; i++) {
        const struct gang *gang = &p->gangs[i];
        if (!spans(gang) || !(gang->gpus & (1u << gpu)) || gang->n_running ||
            !gang->n_waiting)
            continue;
        /* Any waiting member stands for the gang: its GPU does not
         * matter to the rotation, only that someone waits. */
        for (int g = 0; g < p->n_gpus; g++)
            for (int c = 0; c < p->gpus[g].slots; c++) {
                const struct member *m = &p->gpus[g].members[c];
                if (m->present && m->state == MEMBER_WAITING &&
                    p->gang_of[c] == i + 1)
                    return m;
            }
    }
    return NULL;
}

/* Whether every waiting member of gang number i may be granted now: no
 * rank is held back by its compute limit, and the waiting ones' memory
 * fits. */
static bool members_ready(const struct policy *p, int i, uint64_t now)
{
    if (held_back(p, i, now))
        return false;
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        const struct gpu_sched *g = &p->gpus[gpu];
        for (int q = 0; q < g->n_waiting; q++) {
            int c = g->queue[q];
            if (p->gang_of[c] == i + 1 && !pol_fits(p, g, gpu, c))
                return false;
        }
    }
    return true;
}

/* Grants the rank waiting at position q of gpu's queue, a member of gang
 * number i. */
static void grant_rank(struct policy *p, int i, int gpu, int q, uint64_t now,
                       struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];
    pol_grant(g, gpu, pol_dequeue_at(g, q), now, out);
    p->gangs[i].n_waiting--;
    p->gangs[i].n_running++;
}

/* Grants every waiting member of gang number i, on every GPU. */
static void grant_gang(struct policy *p, int i, uint64_t now,
                       struct policy_actions *out)
{
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        for (int q = 0; q < g->n_waiting;) {
            if (p->gang_of[g->queue[q]] == i + 1)
                grant_rank(p, i, gpu, q, now, out);
            else
                q++;
        }
    }
}

void pol_gang_admit(struct policy *p, uint64_t now, struct policy_actions *out)
{
    uint32_t busy = 0, kept = 0;
    bool *considered = p->scratch.gang_considered;

    if (!p->gang_slots)
        return;
    pol_gang_census(p);
    if (!p->gangs_spanning)
        return;
    for (int gpu = 0; gpu < p->n_gpus; gpu++)
        if (p->gpus[gpu].n_running)
            busy |= 1u << gpu;
    /* A running gang holds its GPUs where none of its ranks runs too. */
    for (int i = 0; i < p->gang_slots; i++)
        if (spans(&p->gangs[i]) && p->gangs[i].n_running)
            busy |= p->gangs[i].gpus;
    /* Oldest wait first; gangs are few, so a selection is enough. */
    for (;;) {
        int oldest = -1;
        for (int i = 0; i < p->gang_slots; i++) {
            const struct gang *gang = &p->gangs[i];
            if (considered[i] || !spans(gang) || !gang->n_waiting ||
                gang->n_running)
                continue;
            if (oldest < 0 || gang->wait_since < p->gangs[oldest].wait_since)
                oldest = i;
        }
        if (oldest < 0)
            break;
        considered[oldest] = true;
        struct gang *gang = &p->gangs[oldest];
        if ((gang->gpus & (busy | kept)) || !members_ready(p, oldest, now)) {
            if (aged(p, gang, now) && !held_back(p, oldest, now))
                kept |= gang->gpus;
            continue;
        }
        if (!pol_room_for(out, 2 * gang->n_waiting)) {
            out->truncated = true;
            break;
        }
        grant_gang(p, oldest, now, out);
        busy |= gang->gpus;
    }
    for (int i = 0; i < p->gang_slots; i++)
        considered[i] = false;
}

/* Whether a client of another job waits on one of gang number i's GPUs. */
static bool others_wait(const struct policy *p, int i)
{
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        const struct gpu_sched *g = &p->gpus[gpu];
        if (!(p->gangs[i].gpus & (1u << gpu)))
            continue;
        for (int q = 0; q < g->n_waiting; q++)
            if (p->gang_of[g->queue[q]] != i + 1)
                return true;
    }
    return false;
}

/* When the quantum of gang number i ends while others wait for its GPUs
 * (0: they do not): from its first rank's grant. Each GPU's rotation ends
 * it where a rank runs; this ends it where none does (a rank gave its GPU
 * back, or was revoked), which the gang still holds. */
static uint64_t gang_quantum_end(const struct policy *p, int i)
{
    uint64_t first = UINT64_MAX;

    if (!others_wait(p, i))
        return 0;
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        const struct gpu_sched *g = &p->gpus[gpu];
        for (int c = 0; c < g->slots; c++) {
            const struct member *m = &g->members[c];
            if (pol_running(m) && p->gang_of[c] == i + 1 && m->granted_at < first)
                first = m->granted_at;
        }
    }
    /* A grant at 0 is a time like any other: the due time is never 0. */
    return first == UINT64_MAX ? 0 : first + gang_quantum(p, p->gangs[i].gpus);
}

/* A rank of gang number i that waits while the gang drains may be behind
 * its peers: their collectives queued up to the drain point need its own.
 * It joins the drain: granted and dropped in one decision (running for
 * a moment beside whoever has its GPU, in memory it holds there already),
 * it reports its point and catches up like the others. That is how ranks
 * whose first requests crossed another job's (granted one by one before the
 * gang spanned GPUs) get out of their circular wait. False if the actions
 * ran out of room. */
static bool admit_to_drain(struct policy *p, int i, uint64_t now,
                           struct policy_actions *out)
{
    uint64_t round_began = UINT64_MAX;

    /* A rank dropped since the drain began has drained to its point: it
     * asks again for the next grant, not for this drain. */
    for (int gpu = 0; gpu < p->n_gpus; gpu++)
        for (int c = 0; c < p->gpus[gpu].slots; c++) {
            const struct member *m = &p->gpus[gpu].members[c];
            if (m->present && m->state == MEMBER_DRAINING &&
                p->gang_of[c] == i + 1 && m->drop_sent_at < round_began)
                round_began = m->drop_sent_at;
        }
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        for (int q = 0; q < g->n_waiting;) {
            int c = g->queue[q];
            const struct member *m = &g->members[c];
            /* A rank swapped out would swap in beside whoever runs: its
             * peers wait for revocation rather than risk that memory. */
            if (p->gang_of[c] != i + 1 ||
                (m->grants && m->drop_sent_at >= round_began) ||
                (m->evictable && !m->resident)) {
                q++;
                continue;
            }
            if (!pol_room_for(out, 3)) {
                out->truncated = true;
                return false;
            }
            grant_rank(p, i, gpu, q, now, out);
            pol_drop(g, gpu, c, now, out);
            p->gangs[i].n_draining++;
        }
    }
    return true;
}

/* Tells every dropped rank of gang number i the drain point once all of
 * them have reported theirs and none runs undropped (the next tick drops
 * it, and it reports too). A rank that went idle has completed its work:
 * none of its collectives is queued, and if it is behind, it asks for its
 * GPU before it can catch up, and joins the drain then. A revoked one no
 * longer counts. */
static void settle_drain_point(struct policy *p, int i, struct policy_actions *out)
{
    uint64_t point = 0;
    int untold = 0;

    for (int gpu = 0; gpu < p->n_gpus; gpu++)
        for (int c = 0; c < p->gpus[gpu].slots; c++) {
            const struct member *rank = &p->gpus[gpu].members[c];
            if (!rank->present || p->gang_of[c] != i + 1)
                continue;
            if (rank->state == MEMBER_HOLDING ||
                (rank->state == MEMBER_DRAINING && !rank->pointed))
                return;
            if (rank->state == MEMBER_DRAINING) {
                if (rank->drain_point > point)
                    point = rank->drain_point;
                untold += !rank->drain_to_sent;
            }
        }
    if (!untold)
        return;
    if (!pol_room_for(out, untold)) {
        out->truncated = true;
        return;
    }
    for (int gpu = 0; gpu < p->n_gpus; gpu++)
        for (int c = 0; c < p->gpus[gpu].slots; c++) {
            struct member *rank = &p->gpus[gpu].members[c];
            if (rank->present && p->gang_of[c] == i + 1 &&
                rank->state == MEMBER_DRAINING && !rank->drain_to_sent) {
                rank->drain_to_sent = true;
                pol_emit(out, ACTION_DRAIN_TO, gpu, c, rank->lease)->collectives =
                    point;
            }
        }
}

uint64_t pol_gang_drain(struct policy *p, uint64_t now, struct policy_actions *out)
{
    uint64_t next = 0;

    if (!p->gang_slots)
        return 0;
    pol_gang_census(p);
    if (!p->gangs_spanning)
        return 0;
    for (int i = 0; i < p->gang_slots; i++) {
        struct gang *gang = &p->gangs[i];
        if (!spans(gang) || !gang->n_running)
            continue;
        if (gang->n_draining == gang->n_running) {
            /* A rank that left the drain without reporting (revoked, gone)
             * may be all the others waited for. */
            if (admit_to_drain(p, i, now, out))
                settle_drain_point(p, i, out);
            continue;
        }
        if (!gang->n_draining) {
            uint64_t due = gang_quantum_end(p, i);
            if (!due)
                continue;
            if (now < due) {
                pol_earliest(&next, due);
                continue;
            }
        }
        for (int gpu = 0; gpu < p->n_gpus; gpu++) {
            struct gpu_sched *g = &p->gpus[gpu];
            for (int c = 0; c < g->slots; c++) {
                struct member *m = &g->members[c];
                if (!m->present || m->state != MEMBER_HOLDING ||
                    p->gang_of[c] != i + 1)
                    continue;
                if (!pol_room_for(out, 1)) {
                    out->truncated = true;
                    return next;
                }
                pol_drop(g, gpu, c, now, out);
                gang->n_draining++;
                /* Its drain deadline is judged by the next tick. */
                pol_earliest(&next, now + POLICY_DRAIN_QUIET_NS);
            }
        }
        if (!admit_to_drain(p, i, now, out))
            return next;
    }
    return next;
}

void policy_drain_point(struct policy *p, int gpu, int client, uint32_t lease,
                        uint64_t collectives, struct policy_actions *out)
{
    struct member *m = &p->gpus[gpu].members[client];

    if (!m->present || m->state != MEMBER_DRAINING || m->lease != lease ||
        m->pointed)
        return;
    m->pointed = true;
    m->drain_point = collectives;
    if (p->gang_of[client])
        settle_drain_point(p, p->gang_of[client] - 1, out);
}
