/* clients_actions.c - carrying out the policy's, the quota arbiter's and
 * the accounts' actions: the messages the scheduler sends its clients. */
#include "clients_internal.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "scheduler.h"

static int client_gpu_index(const struct client *c, int node_gpu)
{
    for (int i = 0; i < c->n_gpus; i++)
        if (c->node_gpu[i] == node_gpu)
            return i;
    return -1;
}

void client_send(struct client *c, const struct msg *m)
{
    if (c->doomed)
        return;
    int rc = msg_send(c->fd, m);
    if (rc) {
        log_uid_warn(c->uid, "client %llu: cannot send %s (%s): disconnecting",
                     (unsigned long long)c->id, msg_type_name(m->type),
                     proto_strerror(rc));
        c->doomed = true;
    }
}

static void tell_wait_for_memory(const struct client *c,
                                 const struct policy_action *a)
{
    char need[32], free_bytes[32], limit[32], wait[32];

    format_size(a->mem.need, need, sizeof(need));
    format_size(a->mem.free, free_bytes, sizeof(free_bytes));
    format_size(a->mem.limit, limit, sizeof(limit));
    format_duration(a->mem.wait_ns, wait, sizeof(wait));
    log_uid_info(c->uid,
                 "gpu %d: client %llu (pod %s) waits for memory: needs "
                 "%s, %s free of %s; next rotation in %s",
                 a->gpu, (unsigned long long)c->id, client_pod(c), need,
                 free_bytes, limit, a->mem.wait_ns ? wait : "-");
}

/* GRANT, DROP and DRAIN_TO: the lock messages. A gang's ranks agree where
 * to stop (policy_drain_point), so theirs is DROP_GANG_LOCK. */
static void send_lock(struct scheduler *s, struct client *c,
                      const struct policy_action *a, uint8_t gpu)
{
    struct msg m = {.u.lock = {.gpu = gpu, .lease = a->lease}};
    bool grant = a->kind == ACTION_GRANT;

    if (a->kind == ACTION_DRAIN_TO) {
        log_debug("gpu %d: client %llu drains after collective %llu", a->gpu,
                  (unsigned long long)c->id, (unsigned long long)a->collectives);
        m = (struct msg){.type = MSG_DRAIN_TO};
        m.u.drain = (struct msg_drain){gpu, a->lease, a->collectives};
        client_send(c, &m);
        return;
    }
    log_debug("gpu %d: %slease %u %s client %llu", a->gpu, grant ? "" : "drop ",
              a->lease, grant ? "to" : "of", (unsigned long long)c->id);
    m.type = grant                                    ? MSG_LOCK_OK
             : policy_gang(s->policy, a->client) >= 0 ? MSG_DROP_GANG_LOCK
                                                      : MSG_DROP_LOCK;
    client_send(c, &m);
}

/* WAIT_FOR_MEM and MEM_AVAILABLE. */
static void send_memory_wait(struct client *c, const struct policy_action *a,
                             uint8_t gpu)
{
    struct msg m = {.type = MSG_MEM_AVAILABLE};

    if (a->kind == ACTION_WAIT_FOR_MEM) {
        tell_wait_for_memory(c, a);
        m.type = MSG_WAIT_FOR_MEM;
        m.u.wait = (struct msg_wait){gpu, a->mem.need, a->mem.free,
                                     a->mem.limit, a->mem.wait_ns};
    } else {
        m.u.wait = (struct msg_wait){.gpu = gpu, .wait_ns = a->mem.wait_ns};
    }
    client_send(c, &m);
}

/* EVICT and PREPARE_SWAP. */
static void send_swap(struct client *c, const struct policy_action *a, uint8_t gpu)
{
    bool evict = a->kind == ACTION_EVICT;
    struct msg m = {.type = evict ? MSG_EVICT : MSG_PREPARE_SWAP};

    log_debug("gpu %d: client %llu %s", a->gpu, (unsigned long long)c->id,
              evict ? "swaps out" : "prepares to swap out");
    m.u.swap = (struct msg_swap){.gpu = gpu};
    client_send(c, &m);
}

/* The terms of c over all its GPUs: the shortest idle release; the
 * tightest backlog, where a GPU with no wish (0: the client's own) is
 * tighter than one that leaves it unbounded. */
static struct msg_yield yield_terms(struct scheduler *s, const struct client *c)
{
    struct msg_yield y = {0, 0};
    bool own_backlog = false;

    for (int i = 0; i < c->n_gpus; i++) {
        if (c->node_gpu[i] < 0)
            continue;
        struct policy_yield t =
            policy_yield_terms(s->policy, c->node_gpu[i], c->slot);
        if (t.idle_release_ns &&
            (!y.idle_release_ns || t.idle_release_ns < y.idle_release_ns))
            y.idle_release_ns = t.idle_release_ns;
        own_backlog = own_backlog || !t.max_backlog_ns;
        if (t.max_backlog_ns &&
            (!y.max_backlog_ns || t.max_backlog_ns < y.max_backlog_ns))
            y.max_backlog_ns = t.max_backlog_ns;
    }
    if (own_backlog && y.max_backlog_ns == POLICY_BACKLOG_UNBOUNDED)
        y.max_backlog_ns = 0;
    return y;
}

/* Tells c its terms (UPDATE_YIELD) when they changed. */
static void tell_yield_terms(struct scheduler *s, struct client *c)
{
    struct msg m = {.type = MSG_UPDATE_YIELD, .u.yield = yield_terms(s, c)};
    const struct msg_yield *y = &m.u.yield;

    if (y->idle_release_ns == c->yield_sent.idle_release_ns &&
        y->max_backlog_ns == c->yield_sent.max_backlog_ns)
        return;
    s->yield_told += !c->yield_sent.idle_release_ns &&
                     !c->yield_sent.max_backlog_ns;
    c->yield_sent = *y;
    s->yield_told -= !y->idle_release_ns && !y->max_backlog_ns;
    client_send(c, &m);
}

uint32_t clients_gpu_mask(const struct client *c)
{
    uint32_t mask = 0;

    for (int i = 0; i < c->n_gpus; i++)
        if (c->node_gpu[i] >= 0)
            mask |= 1u << c->node_gpu[i];
    return mask;
}

void clients_retell_yield(struct scheduler *s, uint32_t gpus)
{
    /* Without priorities nobody is told anything, unless told before. */
    if (!policy_ranked(s->policy) && s->yield_told == 0)
        return;
    for (int slot = 0; slot < s->table_size; slot++) {
        struct client *c = s->clients[slot];
        if (c->used && c->welcomed && (clients_gpu_mask(c) & gpus))
            tell_yield_terms(s, c);
    }
}

void clients_apply(struct scheduler *s, const struct policy_actions *actions)
{
    for (int i = 0; i < actions->n; i++) {
        const struct policy_action *a = &actions->list[i];
        struct client *c = s->clients[a->client];
        uint8_t gpu = (uint8_t)client_gpu_index(c, a->gpu);

        switch (a->kind) {
        case ACTION_GRANT:
        case ACTION_DROP:
        case ACTION_DRAIN_TO:
            send_lock(s, c, a, gpu);
            break;
        case ACTION_REVOKE:
            log_uid_warn(c->uid, "gpu %d: client %llu (pid %d, pod %s) %s: lock revoked",
                         a->gpu, (unsigned long long)c->id, (int)c->pid,
                         client_pod(c),
                         process_stopped(c->pid)
                             ? "is stopped"
                             : "did not answer DROP_LOCK in time");
            break;
        case ACTION_WAIT_FOR_MEM:
        case ACTION_MEM_AVAILABLE:
            send_memory_wait(c, a, gpu);
            break;
        case ACTION_EVICT:
        case ACTION_PREPARE_SWAP:
            send_swap(c, a, gpu);
            break;
        }
    }
}

void clients_apply_quota(struct scheduler *s, struct quota_actions *actions)
{
    if (actions->lost)
        log_error("out of memory: %u memory messages to clients lost",
                  actions->lost);
    for (int i = 0; i < actions->n; i++) {
        const struct quota_action *a = &actions->list[i];
        struct client *c = s->clients[a->client];
        struct msg m = {0};

        if (!c->used || !c->registered)
            continue;
        m.u.mem.gpu = (uint8_t)client_gpu_index(c, a->gpu);
        m.u.mem.quota = a->quota;
        m.u.mem.pod_held = a->pod_held;
        switch (a->kind) {
        case QUOTA_GRANT:
        case QUOTA_REFUSE:
            m.type = MSG_MEM_GRANT;
            m.u.mem.seq = a->seq;
            m.u.mem.bytes = a->bytes;
            log_debug("gpu %d: client %llu %s %llu bytes", a->gpu,
                      (unsigned long long)c->id,
                      a->kind == QUOTA_GRANT ? "granted" : "refused",
                      (unsigned long long)a->bytes);
            client_send(c, &m);
            break;
        case QUOTA_RECLAIM:
            m.type = MSG_MEM_RECLAIM;
            client_send(c, &m);
            break;
        case QUOTA_LIMIT:
            m.type = MSG_UPDATE_LIMIT;
            client_send(c, &m);
            break;
        }
    }
    quota_actions_free(actions);
}

/* The scheduler enforces the core limit, GPU by GPU; the client paces
 * itself to it only while the scheduler is away, so that a restart lets no
 * pod run over its limit. It paces all its GPUs alike, so it is told the
 * lowest limit among them: over none, at the cost of using less of a GPU
 * whose limit is higher while the scheduler is away. */
void client_tell_core_limit(const struct scheduler *s, struct client *c)
{
    struct msg m = {.type = MSG_UPDATE_CORE_LIMIT};
    uint8_t source;

    for (int i = 0; i < c->n_gpus; i++) {
        uint64_t limit = c->node_gpu[i] < 0
                             ? 0
                             : account_core_on(&s->accounts[c->billed[i]],
                                               c->node_gpu[i], &source);
        if (limit && (!m.u.core.percent || limit < m.u.core.percent))
            m.u.core.percent = (uint8_t)limit;
    }
    if (c->welcomed)
        client_send(c, &m);
}

void clients_apply_accounts(struct scheduler *s,
                            const struct account_actions *actions)
{
    for (int i = 0; i < actions->n; i++) {
        const struct account_action *a = &actions->list[i];

        switch (a->kind) {
        case ACCOUNT_RESET:
            policy_reset_account(s->policy, a->account);
            quota_reset_account(&s->quota, a->account);
            break;
        case ACCOUNT_LIMITS:
            for (int g = 0; g < s->n_gpus; g++)
                policy_set_core_limit(s->policy, g, a->account,
                                      a->core_limit[g], now_ns());
            for (int slot = 0; slot < s->table_size; slot++)
                if (s->clients[slot]->used && s->clients[slot]->registered &&
                    client_billed_to(s->clients[slot], a->account))
                    client_tell_core_limit(s, s->clients[slot]);
            policy_set_priority(s->policy, a->account, a->priority);
            policy_set_idle_swap(s->policy, a->account, a->idle_swap);
            policy_set_min_share(s->policy, a->account, a->min_share);
            clients_retell_yield(s, UINT32_MAX);
            for (int g = 0; g < s->n_gpus; g++) {
                struct quota_actions out = {0};
                quota_set_limit(&s->quota, g, a->account, a->memory_limit[g],
                                &out);
                clients_apply_quota(s, &out);
            }
            break;
        }
    }
}


void clients_broadcast(struct scheduler *s, uint16_t type)
{
    struct msg m = {.type = type};

    for (int i = 0; i < s->table_size; i++)
        if (s->clients[i]->used && s->clients[i]->registered)
            client_send(s->clients[i], &m);
}
