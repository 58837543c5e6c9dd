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

void policy_init(struct policy *p, int n_gpus, uint64_t tq_ns,
                 uint64_t drain_timeout_ns)
{
    memset(p, 0, sizeof(*p));
    p->tq_ns = tq_ns;
    p->drain_timeout_ns = drain_timeout_ns;
    p->anti_thrash = true;
    p->n_gpus = n_gpus;
    for (int g = 0; g < n_gpus; g++)
        p->gpus[g].holder = -1;
}

void policy_join(struct policy *p, int gpu, int client, uint64_t now)
{
    struct member *m = &p->gpus[gpu].members[client];

    memset(m, 0, sizeof(*m));
    m->present = true;
    set_state(m, MEMBER_IDLE, now);
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

static void grant_next(struct gpu_sched *g, int gpu, uint64_t now,
                       struct policy_actions *out)
{
    if (g->holder >= 0 || g->n_waiting == 0)
        return;
    int next = g->queue[0];
    dequeue(g, next);
    grant(g, gpu, next, now, out);
}

/* Ends the current hold, crediting its duration. */
static void end_hold(struct gpu_sched *g, uint64_t now)
{
    struct member *m = &g->members[g->holder];

    m->held_ns += now - g->granted_at;
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
    set_state(m, MEMBER_WAITING, now);
    g->queue[g->n_waiting++] = client;
    grant_next(g, gpu, now, out);
}

void policy_release(struct policy *p, int gpu, int client, uint32_t lease,
                    uint64_t drain_ns, uint64_t now, struct policy_actions *out)
{
    struct gpu_sched *g = &p->gpus[gpu];

    if (g->holder != client || g->lease != lease)
        return; /* it crossed a DROP or a revocation: already handled */
    g->members[client].last_drain_ns = drain_ns;
    end_hold(g, now);
    grant_next(g, gpu, now, out);
}

void policy_leave(struct policy *p, int client, uint64_t now,
                  struct policy_actions *out)
{
    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        if (!g->members[client].present)
            continue;
        dequeue(g, client);
        if (g->holder == client)
            end_hold(g, now);
        g->members[client].present = false;
        grant_next(g, gpu, now, out);
    }
}

uint64_t policy_tick(struct policy *p, uint64_t now, struct policy_actions *out)
{
    uint64_t next = 0;

    for (int gpu = 0; gpu < p->n_gpus; gpu++) {
        struct gpu_sched *g = &p->gpus[gpu];
        uint64_t due;

        if (g->holder < 0 || g->n_waiting == 0)
            continue;
        struct member *h = &g->members[g->holder];
        if (h->state == MEMBER_HOLDING) {
            due = g->granted_at + p->tq_ns;
            if (now >= due) {
                set_state(h, MEMBER_DRAINING, now);
                g->drop_sent_at = now;
                emit(out, ACTION_DROP, gpu, g->holder, g->lease);
                due = now + p->drain_timeout_ns;
            }
        } else {
            due = g->drop_sent_at + p->drain_timeout_ns;
            if (now >= due) {
                emit(out, ACTION_REVOKE, gpu, g->holder, g->lease);
                end_hold(g, now);
                grant_next(g, gpu, now, out);
                continue;
            }
        }
        if (next == 0 || due < next)
            next = due;
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
            end_hold(g, now);
        for (int i = 0; i < g->n_waiting; i++)
            set_state(&g->members[g->queue[i]], MEMBER_IDLE, now);
        g->n_waiting = 0;
    }
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
