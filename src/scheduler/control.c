/* control.c - the operators' socket: connections and status.
 *
 * Separate from the client socket so that an application can never change
 * the scheduler's settings. The socket file is 0600 and, in depth, only
 * root and the daemon's own user are served. Settings are changed in
 * control_set.c, the pod watcher's facts taken in pod_facts.c. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "parse.h"
#include "scheduler.h"
#include "sock.h"

struct control_conn {
    struct scheduler *sched;
    int fd;
    struct frame_reader reader;
    uint64_t idle_since; /* connected, or its last request answered */
    bool pod_watcher;    /* sent the latest CTL_POD_SYNC_BEGIN */
    struct control_conn *prev, *next; /* in sched->control_conns */
};

static void close_conn(struct control_conn *conn)
{
    if (conn->prev)
        conn->prev->next = conn->next;
    else
        conn->sched->control_conns = conn->next;
    if (conn->next)
        conn->next->prev = conn->prev;
    event_loop_remove(conn->sched->loop, conn->fd);
    close(conn->fd);
    free(conn);
}

static void mark_pod_watcher(struct control_conn *conn)
{
    for (struct control_conn *c = conn->sched->control_conns; c; c = c->next)
        c->pod_watcher = c == conn;
}

uint64_t control_expire_idle(struct scheduler *s, uint64_t now)
{
    struct control_conn *conn = s->control_conns, *next;
    uint64_t next_due = 0;
    int closed = 0;

    for (; conn; conn = next) {
        uint64_t due = conn->idle_since + CONTROL_IDLE_NS;
        next = conn->next;
        /* The pod watcher keeps its connection for as long as it runs: it
         * tells each change the moment it comes, and learns of a restart
         * from the connection's end, which a watcher that connected per
         * change or pinged would learn late or at a cost. Closed when
         * idle, it reconnected and sent every pod again each
         * CONTROL_IDLE_NS of a quiet cluster. Bounded all the same: only
         * root and our uid reach this socket, and only the latest
         * connection to begin a sync is kept (one descriptor); an older
         * one is idle like any other. */
        if (conn->pod_watcher)
            continue;
        if (now + CLIENT_STALL_BATCH_NS < due) {
            if (next_due == 0 || due < next_due)
                next_due = due;
            continue;
        }
        close_conn(conn);
        closed++;
    }
    /* A line per batch, not per connection. */
    if (closed)
        log_warn("control: %d connection(s) sent no request for %.1f s: "
                 "disconnecting",
                 closed, (double)CONTROL_IDLE_NS / 1e9);
    return next_due;
}

static int send_node(struct scheduler *s, const struct status_sink *out,
                     uint64_t now)
{
    struct policy_settings_view v;
    struct msg m = {.type = MSG_CTL_STATUS_NODE};

    policy_view_settings(s->policy, &v);
    m.u.node = (struct msg_status_node){
        .tq_ns = v.tq_ns,
        .window_ns = v.window_ns,
        .anti_thrash = v.anti_thrash,
        .n_gpus = (uint16_t)s->n_gpus,
        .n_clients = (uint16_t)clients_count(s),
        .uptime_ns = now - s->started_at,
        .switch_time_fixed_ns = v.switch_fixed_ns,
        .switch_multiplier = (uint16_t)v.switch_multiplier,
        .reserve_percent = (uint8_t)v.reserve_percent,
        .oversub_default = s->oversub_default,
        .n_pending = (uint32_t)clients_pending(s),
        .refused = s->refused,
        .n_unhooked = (uint16_t)unhooked_count(s),
        .unhooked_seen = s->unhooked_seen,
    };
    return out->emit(out->ctx, &m);
}

/* Where setting id's value in force comes from. */
static uint8_t source_of(const struct scheduler *s, enum setting_id id)
{
    /* A switch time set with nvsharectl makes the switch time mode too
     * (state_overlay). */
    if (id == SETTING_SWITCH_TIME_MODE && s->state.set[SETTING_SWITCH_TIME_FIXED])
        id = SETTING_SWITCH_TIME_FIXED;
    if (s->state.set[id])
        return s->set_since_start[id] ? SETTING_SOURCE_RUNTIME
                                      : SETTING_SOURCE_STATE_FILE;
    return setting_from_env(id) ? SETTING_SOURCE_ENV : SETTING_SOURCE_DEFAULT;
}

/* Every row of the settings table, its value as the state file writes it. */
static int send_settings(struct scheduler *s, const struct status_sink *out)
{
    uint64_t v[SETTING_COUNT];
    struct msg m = {.type = MSG_CTL_STATUS_SETTING};
    struct msg_status_setting *r = &m.u.setting;
    int rc;

    memcpy(v, s->env_settings, sizeof(v));
    state_overlay(&s->state, v);
    for (int id = 0; id < SETTING_COUNT; id++) {
        snprintf(r->name, sizeof(r->name), "%s", settings_table[id].name);
        setting_format(id, setting_state_value(v, id), r->value,
                       sizeof(r->value));
        r->source = source_of(s, id);
        if ((rc = out->emit(out->ctx, &m)))
            return rc;
    }
    return 0;
}

static int send_gpu(struct scheduler *s, const struct status_sink *out, int g,
                    uint64_t now)
{
    const struct policy *p = s->policy;
    struct msg m = {.type = MSG_CTL_STATUS_GPU};
    struct msg_status_gpu *gpu = &m.u.gpu;
    struct policy_waiter_view waiting[PROTO_MAX_WAITERS];
    struct policy_gpu_view v;

    policy_view_gpu(p, g, &v);
    gpu->index = (uint16_t)g;
    snprintf(gpu->uuid, sizeof(gpu->uuid), "%s", s->gpus[g].uuid);
    snprintf(gpu->name, sizeof(gpu->name), "%s", s->gpus[g].name);
    gpu->memory_total = s->gpus[g].memory_total;
    gpu->mode = v.mode;
    gpu->reserve = v.capacity - v.memory_limit;
    gpu->running_footprint = v.running_footprint;
    gpu->resident = v.resident;
    gpu->switch_time_ns = v.switch_time_ns;
    gpu->switch_measured = v.switch_measured;
    gpu->tq_ns = v.quantum_ns;
    gpu->tq_reason = v.quantum_reason;
    gpu->handover_mean_ns = v.handover_mean_ns;
    gpu->switches = v.switches;
    gpu->swaps_out = v.swap_out.count;
    gpu->swaps_in = v.swap_in.count;
    gpu->swap_out_bytes = v.swap_out.bytes;
    gpu->swap_in_bytes = v.swap_in.bytes;
    gpu->swap_out_ns = v.swap_out.ns;
    gpu->swap_in_ns = v.swap_in.ns;
    gpu->last_swap_out_ns = v.swap_out.last_ns;
    gpu->last_swap_in_ns = v.swap_in.last_ns;
    for (int c = 0; c < s->table_size && gpu->n_running < PROTO_MAX_WAITERS; c++)
        if (policy_is_running(p, g, c))
            gpu->running[gpu->n_running++] = s->clients[c]->id;
    int n_waiting = policy_view_waiting(p, g, now, waiting, PROTO_MAX_WAITERS);
    for (int i = 0; i < n_waiting && i < PROTO_MAX_WAITERS; i++)
        gpu->waiting[gpu->n_waiting++] =
            (struct status_waiter){s->clients[waiting[i].client]->id,
                                   waiting[i].reason};
    if (n_waiting > PROTO_MAX_WAITERS)
        gpu->truncated_waiting = (uint32_t)(n_waiting - PROTO_MAX_WAITERS);
    return out->emit(out->ctx, &m);
}

/* Why the client at slot waits for memory on g, as the policy sees it, in
 * the words of people: the pod of the client in its way. "" when the
 * policy names no reason beyond the runners' rotation. */
static void format_wait_why(const struct scheduler *s, int g, int slot,
                            uint64_t now, char *buf, size_t len)
{
    struct policy_wait_why why;
    char who[2 * PROTO_NAME_MAX + 32], idle[32], after[32], parked[32],
        budget[32], fixed[32];

    policy_view_wait_why(s->policy, g, slot, now, &why);
    buf[0] = '\0';
    if (why.why == WHY_NONE)
        return;
    if (why.why == WHY_HOST_BUDGET) {
        format_size(why.parked, parked, sizeof(parked));
        format_size(why.budget, budget, sizeof(budget));
        snprintf(buf, len, "host swap budget (%s of %s parked)", parked, budget);
        return;
    }
    const struct client *c = s->clients[why.blocker];
    const struct pod_id *pod = &s->accounts[c->account].pod;
    if (pod_id_empty(pod))
        snprintf(who, sizeof(who), "client %llu", (unsigned long long)c->id);
    else
        pod_id_format(pod, who, sizeof(who));
    format_duration(why.idle_ns, idle, sizeof(idle));
    format_duration(why.idle_swap_after_ns, after, sizeof(after));
    switch (why.why) {
    case WHY_SWAPPING:
        if (why.idle_ns)
            snprintf(buf, len, "%.300s, idle %s, being swapped out", who, idle);
        else
            snprintf(buf, len, "%.300s being swapped out", who);
        break;
    case WHY_IDLE_TOO_SHORT:
        snprintf(buf, len, "%.300s idle %s (swapped after %s)", who, idle, after);
        break;
    case WHY_IDLE_SWAP_OFF:
        snprintf(buf, len, "%.300s idle %s (idle-swap off)", who, idle);
        break;
    case WHY_CANNOT_MOVE:
        format_size(why.fixed, fixed, sizeof(fixed));
        if (why.idle_ns)
            snprintf(buf, len, "%.300s idle %s (%s cannot move)", who, idle,
                     fixed);
        else
            snprintf(buf, len, "%.300s (%s cannot move)", who, fixed);
        break;
    }
}

/* One line per client and GPU it uses: nothing is sent for a GPU it does
 * not use. */
static int send_client(struct scheduler *s, const struct status_sink *out,
                       int slot, int g, uint64_t now)
{
    const struct policy *p = s->policy;
    const struct client *c = s->clients[slot];
    struct msg m = {.type = MSG_CTL_STATUS_CLIENT};
    struct msg_status_client *cl = &m.u.client;
    struct policy_member_view v;

    if (!policy_view_member(p, g, slot, now, &v))
        return 0;
    cl->client_id = c->id;
    cl->pid = (uint32_t)c->pid;
    const struct pod_id *pod = &s->accounts[c->account].pod;
    memcpy(cl->pod_namespace, pod->pod_namespace, sizeof(cl->pod_namespace));
    memcpy(cl->pod_name, pod->pod_name, sizeof(cl->pod_name));
    memcpy(cl->pod_uid, pod->uid, sizeof(cl->pod_uid));
    cl->pod_source = pod->uid[0]         ? POD_SOURCE_CGROUP
                     : pod_id_empty(pod) ? POD_SOURCE_NONE
                                         : POD_SOURCE_DECLARED;
    memcpy(cl->container_name, c->reg.container_name, sizeof(cl->container_name));
    snprintf(cl->container_id, sizeof(cl->container_id), "%s",
             c->identity.container_id);
    cl->uid = (uint32_t)c->uid;
    cl->gang = (uint32_t)(policy_gang(p, slot) + 1);
    cl->gpu = (uint16_t)g;
    cl->state = v.state;
    cl->held_ns = v.held_ns;
    cl->wait_ns = v.wait_ns;
    cl->grants = v.grants;
    cl->last_drain_ns = v.last_drain_ns;
    cl->last_preempt_ns = v.last_preempt_ns;
    int account = client_account_on(c, g);
    const struct account *a = &s->accounts[account];
    const struct quota_gpu *qg = &s->quota.gpus[g];
    cl->core_limit = (uint8_t)account_core_on(a, g, &cl->limit_source);
    cl->mem_quota = account_memory_on(a, g, &cl->mem_quota_source);
    cl->mem_allocated = qg->clients[slot].allocated;
    cl->pod_mem_held = quota_account_held(&s->quota, g, account);
    cl->pod_mem_peak = qg->accounts[account].peak;
    cl->pod_mem_refused = qg->accounts[account].refused;
    cl->budget_ns = policy_budget_ns(p, g, account);
    cl->used_ns = policy_used_ns(p, g, account, now);
    cl->throttled = policy_spent(p, g, account, now);
    cl->footprint = v.footprint;
    cl->evictable = v.evictable;
    cl->oversubscribed = c->oversubscribed;
    cl->swapped_out = v.swapped_out;
    cl->load_permille = v.load_permille;
    cl->wait_reason = v.wait_reason;
    cl->priority =
        (uint8_t)priority_effective(&a->priority, &cl->priority_source);
    cl->min_share = (uint8_t)a->min_share;
    cl->idle_swap =
        (uint8_t)idle_swap_effective(&a->idle_swap, &cl->idle_swap_source);
    cl->resident = v.resident;
    cl->parked = v.parked;
    cl->idle_ns = v.idle_ns;
    cl->swap_outs = v.swap_outs;
    cl->swap_ins = v.swap_ins;
    cl->swap_in_wait_ns = v.swap_in_wait_ns;
    format_wait_why(s, g, slot, now, cl->wait_why, sizeof(cl->wait_why));
    memcpy(cl->group, a->group, sizeof(cl->group));
    return out->emit(out->ctx, &m);
}

static int send_pod(const struct status_sink *out, const struct pod *p)
{
    struct msg m = {.type = MSG_CTL_STATUS_POD};
    struct msg_status_pod *r = &m.u.pod;

    memcpy(r->pod_namespace, p->id.pod_namespace, sizeof(r->pod_namespace));
    memcpy(r->pod_name, p->id.pod_name, sizeof(r->pod_name));
    memcpy(r->pod_uid, p->id.uid, sizeof(r->pod_uid));
    r->bound = p->bound;
    r->owner = p->owner;
    r->core_limit = (uint8_t)p->core_limit;
    r->memory_limit = p->memory_limit;
    r->clients = (uint32_t)p->clients;
    r->annotation_core_limit = (uint8_t)p->annotation_core;
    r->annotation_memory_limit = p->annotation_memory;
    r->memory_request = p->memory_request;
    r->priority = (uint8_t)p->priority;
    r->min_share = (uint8_t)p->min_share;
    r->annotation_priority = (uint8_t)p->annotation_priority;
    r->idle_swap = (uint8_t)p->idle_swap;
    r->annotation_idle_swap = (uint8_t)p->annotation_idle_swap;
    for (int g = 0; g < PROTO_MAX_GPUS; g++) {
        if (!p->gpu_core_limit[g] && !p->gpu_memory_limit[g])
            continue;
        r->gpu_limits[r->n_gpu_limits++] =
            (struct pod_gpu_limit){.gpu = (uint16_t)g,
                                   .core_limit = p->gpu_core_limit[g],
                                   .memory_limit = p->gpu_memory_limit[g]};
    }
    return out->emit(out->ctx, &m);
}

/* The reported unhooked processes, as many as send_node announced. */
static int send_unhooked(struct scheduler *s, const struct status_sink *out,
                         uint64_t now)
{
    struct msg m = {.type = MSG_CTL_STATUS_UNHOOKED};
    struct msg_status_unhooked *r = &m.u.unhooked;
    int rc;

    for (int g = 0; g < s->n_gpus; g++) {
        for (int i = 0; i < s->n_unhooked[g]; i++) {
            const struct unhooked_proc *u = &s->unhooked[g][i];
            if (!u->reported)
                continue;
            *r = (struct msg_status_unhooked){
                .gpu = (uint16_t)g,
                .pid = (uint32_t)u->pid,
                .used = u->used,
                .seen_ns = now - u->since,
                .origin = (uint8_t)u->identity.kind,
                .qos = (uint8_t)u->identity.qos,
            };
            memcpy(r->pod_uid, u->identity.pod_uid, sizeof(r->pod_uid));
            memcpy(r->container_id, u->identity.container_id,
                   sizeof(r->container_id));
            if ((rc = out->emit(out->ctx, &m)))
                return rc;
        }
    }
    return 0;
}

int control_status(struct scheduler *s, const struct status_sink *out,
                   bool with_settings)
{
    uint64_t now = now_ns();
    struct msg m = {.type = MSG_CTL_STATUS_END};
    int rc;

    if ((rc = send_node(s, out, now)))
        return rc;
    /* Only on request: an nvsharectl older than these records refuses
     * them. */
    if (with_settings && (rc = send_settings(s, out)))
        return rc;
    for (int g = 0; g < s->n_gpus; g++)
        if ((rc = send_gpu(s, out, g, now)))
            return rc;
    for (int slot = 0; slot < s->table_size; slot++) {
        const struct client *c = s->clients[slot];
        if (!c->used || !c->registered)
            continue;
        for (int g = 0; g < s->n_gpus; g++)
            if ((rc = send_client(s, out, slot, g, now)))
                return rc;
    }
    if ((rc = send_unhooked(s, out, now)))
        return rc;
    for (size_t i = 0; i < s->state.pods.n; i++)
        if ((rc = send_pod(out, &s->state.pods.list[i])))
            return rc;
    return out->emit(out->ctx, &m);
}

static int emit_to_fd(void *ctx, const struct msg *m)
{
    return msg_send(*(const int *)ctx, m);
}

static void conn_on_readable(struct event_loop *loop, int fd, void *data)
{
    struct control_conn *conn = data;
    struct msg m;
    int rc;

    (void)loop;
    rc = frame_reader_fill(&conn->reader, fd);
    while (rc >= 0 && (rc = frame_reader_next(&conn->reader, &m)) > 0) {
        if (m.type == MSG_CTL_STATUS || m.type == MSG_CTL_STATUS_WITH_SETTINGS) {
            struct status_sink out = {emit_to_fd, &fd};
            rc = control_status(conn->sched, &out,
                                m.type == MSG_CTL_STATUS_WITH_SETTINGS);
        } else if (m.type == MSG_CTL_SET || m.type == MSG_CTL_SET_GPU ||
                   m.type == MSG_CTL_SET_GROUP || m.type == MSG_CTL_RESET) {
            struct msg reply = {.type = MSG_CTL_REPLY};
            if (m.type == MSG_CTL_SET)
                control_set(conn->sched, &m.u.set, &reply.u.reply);
            else if (m.type == MSG_CTL_SET_GPU)
                control_set_gpu(conn->sched, &m.u.set_gpu, &reply.u.reply);
            else if (m.type == MSG_CTL_SET_GROUP)
                control_set_group(conn->sched, &m.u.set_group, &reply.u.reply);
            else if (!strcmp(m.u.set.name, "group"))
                control_reset_group(conn->sched, m.u.set.target, &reply.u.reply);
            else
                control_reset(conn->sched, &m.u.set, &reply.u.reply);
            rc = msg_send(fd, &reply);
        } else if (m.type >= MSG_CTL_POD_FACTS && m.type <= MSG_CTL_POD_SYNC_END) {
            struct msg reply = {.type = MSG_CTL_REPLY};
            if (m.type == MSG_CTL_POD_SYNC_BEGIN)
                mark_pod_watcher(conn);
            pod_facts_handle(conn->sched, &m, &reply.u.reply);
            rc = msg_send(fd, &reply);
        } else {
            log_warn("control: unexpected %s: disconnecting",
                     msg_type_name(m.type));
            rc = PROTO_E_TYPE;
        }
        if (rc < 0)
            break;
        conn->idle_since = now_ns();
    }
    if (rc < 0)
        close_conn(conn);
}

void control_on_listen(struct event_loop *loop, int fd, void *data)
{
    struct scheduler *s = data;
    int cfd = unix_accept(fd);
    struct control_conn *conn;
    pid_t pid;
    uid_t uid;

    if (cfd < 0) {
        if (errno == EMFILE)
            clients_note_out_of_fds(s, CONTROL_SOCKET_NAME);
        return;
    }
    if (unix_peer(cfd, &pid, &uid) || (uid != 0 && uid != s->uid)) {
        struct msg refusal = {.type = MSG_CTL_REPLY};
        refusal.u.reply.status = EACCES;
        snprintf(refusal.u.reply.text, sizeof(refusal.u.reply.text),
                 "the control socket serves root and uid %d only", (int)s->uid);
        log_warn("control: refusing pid %d (uid %d): not root or the "
                 "scheduler's user",
                 (int)pid, (int)uid);
        msg_send(cfd, &refusal);
        close(cfd);
        return;
    }
    conn = calloc(1, sizeof(*conn));
    if (conn) {
        conn->sched = s;
        conn->fd = cfd;
    }
    if (!conn || event_loop_add(loop, cfd, conn_on_readable, conn)) {
        log_warn("control: %s", strerror(errno));
        free(conn);
        close(cfd);
        return;
    }
    conn->idle_since = now_ns();
    conn->next = s->control_conns;
    if (conn->next)
        conn->next->prev = conn;
    s->control_conns = conn;
}
