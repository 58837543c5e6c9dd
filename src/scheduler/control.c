/* control.c - the operators' socket: status and settings.
 *
 * Separate from the client socket so that an application can never change
 * the scheduler's settings. The socket file is 0600 and, in depth, only
 * root and the daemon's own user are served. */
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
#include "settings.h"
#include "sock.h"

struct control_conn {
    struct scheduler *sched;
    int fd;
    struct frame_reader reader;
};

static void close_conn(struct control_conn *conn)
{
    event_loop_remove(conn->sched->loop, conn->fd);
    close(conn->fd);
    free(conn);
}

static int send_node(struct scheduler *s, int fd, uint64_t now)
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
        .n_unhooked = (uint16_t)unhooked_count(s),
        .unhooked_seen = s->unhooked_seen,
    };
    return msg_send(fd, &m);
}

static int send_gpu(struct scheduler *s, int fd, int g, uint64_t now)
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
    gpu->switches = v.switches;
    gpu->swaps_out = v.swap_out.count;
    gpu->swaps_in = v.swap_in.count;
    gpu->swap_out_bytes = v.swap_out.bytes;
    gpu->swap_in_bytes = v.swap_in.bytes;
    gpu->swap_out_ns = v.swap_out.ns;
    gpu->swap_in_ns = v.swap_in.ns;
    gpu->last_swap_out_ns = v.swap_out.last_ns;
    gpu->last_swap_in_ns = v.swap_in.last_ns;
    for (int c = 0; c < POLICY_MAX_CLIENTS && gpu->n_running < PROTO_MAX_WAITERS; c++)
        if (policy_is_running(p, g, c))
            gpu->running[gpu->n_running++] = s->clients[c].id;
    int n_waiting = policy_view_waiting(p, g, now, waiting, PROTO_MAX_WAITERS);
    for (int i = 0; i < n_waiting && i < PROTO_MAX_WAITERS; i++)
        gpu->waiting[gpu->n_waiting++] = (struct status_waiter){
            s->clients[waiting[i].client].id, waiting[i].reason};
    if (n_waiting > PROTO_MAX_WAITERS)
        gpu->truncated_waiting = (uint32_t)(n_waiting - PROTO_MAX_WAITERS);
    return msg_send(fd, &m);
}

/* One line per client and GPU it uses: nothing is sent for a GPU it does
 * not use. */
static int send_client(struct scheduler *s, int fd, int slot, int g,
                       uint64_t now)
{
    const struct policy *p = s->policy;
    const struct client *c = &s->clients[slot];
    struct msg m = {.type = MSG_CTL_STATUS_CLIENT};
    struct msg_status_client *cl = &m.u.client;
    struct policy_member_view v;

    if (!policy_view_member(p, g, slot, now, &v))
        return 0;
    cl->client_id = c->id;
    cl->pid = (uint32_t)c->pid;
    memcpy(cl->pod_namespace, c->reg.pod_namespace, sizeof(cl->pod_namespace));
    memcpy(cl->pod_name, c->reg.pod_name, sizeof(cl->pod_name));
    memcpy(cl->container_name, c->reg.container_name,
           sizeof(cl->container_name));
    cl->gpu = (uint16_t)g;
    cl->state = v.state;
    cl->held_ns = v.held_ns;
    cl->wait_ns = v.wait_ns;
    cl->grants = v.grants;
    cl->last_drain_ns = v.last_drain_ns;
    cl->last_preempt_ns = v.last_preempt_ns;
    const struct account *a = &s->accounts[c->account];
    const struct quota_gpu *qg = &s->quota.gpus[g];
    cl->core_limit = (uint8_t)limit_effective(&a->core, &cl->limit_source);
    cl->mem_quota = limit_effective(&a->memory, &cl->mem_quota_source);
    cl->mem_allocated = qg->clients[slot].allocated;
    cl->pod_mem_held = quota_account_held(&s->quota, g, c->account);
    cl->pod_mem_peak = qg->accounts[c->account].peak;
    cl->pod_mem_refused = qg->accounts[c->account].refused;
    cl->budget_ns = policy_budget_ns(p, g, c->account);
    cl->used_ns = policy_used_ns(p, g, c->account, now);
    cl->throttled = policy_spent(p, g, c->account, now);
    cl->footprint = v.footprint;
    cl->evictable = v.evictable;
    cl->oversubscribed = c->oversubscribed;
    cl->swapped_out = v.swapped_out;
    cl->load_permille = v.load_permille;
    cl->wait_reason = v.wait_reason;
    return msg_send(fd, &m);
}

/* The reported unhooked processes, as many as send_node announced. */
static int send_unhooked(struct scheduler *s, int fd, uint64_t now)
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
            memcpy(r->container_id, u->identity.container_id, sizeof(r->container_id));
            if ((rc = msg_send(fd, &m)))
                return rc;
        }
    }
    return 0;
}

static int send_status(struct scheduler *s, int fd)
{
    uint64_t now = now_ns();
    struct msg m = {.type = MSG_CTL_STATUS_END};
    int rc;

    if ((rc = send_node(s, fd, now)))
        return rc;
    for (int g = 0; g < s->n_gpus; g++)
        if ((rc = send_gpu(s, fd, g, now)))
            return rc;
    for (int slot = 0; slot < POLICY_MAX_CLIENTS; slot++) {
        const struct client *c = &s->clients[slot];
        if (!c->used || !c->registered)
            continue;
        for (int g = 0; g < s->n_gpus; g++)
            if ((rc = send_client(s, fd, slot, g, now)))
                return rc;
    }
    if ((rc = send_unhooked(s, fd, now)))
        return rc;
    return msg_send(fd, &m);
}

/* Finds the account named by target: "namespace/pod", "pod" (if only one
 * namespace has it) or a client id. Returns -1 and explains in err. */
static int account_find(const struct scheduler *s, const char *target, char *err,
                        size_t err_len)
{
    const char *slash = strchr(target, '/');
    char *end;
    unsigned long long id = strtoull(target, &end, 10);
    int found = -1, matches = 0;

    if (*target && !*end) { /* a client id */
        for (int i = 0; i < POLICY_MAX_CLIENTS; i++)
            if (s->clients[i].used && s->clients[i].registered &&
                s->clients[i].id == id)
                return s->clients[i].account;
        snprintf(err, err_len, "no client with id %llu", id);
        return -1;
    }
    for (int i = 0; i < POLICY_MAX_CLIENTS; i++) {
        const struct account *a = &s->accounts[i];
        if (!a->refs || !a->pod_name[0])
            continue;
        bool match = slash
            ? (size_t)(slash - target) == strlen(a->pod_namespace) &&
                  !strncmp(target, a->pod_namespace, (size_t)(slash - target)) &&
                  !strcmp(slash + 1, a->pod_name)
            : !strcmp(target, a->pod_name);
        if (match) {
            found = i;
            matches++;
        }
    }
    if (matches == 1)
        return found;
    if (matches == 0)
        snprintf(err, err_len, "no pod '%s' is connected (use namespace/pod or a "
                 "client id from nvsharectl status)", target);
    else
        snprintf(err, err_len, "pod '%s' exists in %d namespaces: use "
                 "namespace/pod", target, matches);
    return -1;
}

/* A per-pod limit: the run-time value replaces the pod's declared one;
 * 0 removes it, falling back to the declared one. */
static void set_pod_limit(struct scheduler *s, const struct msg_ctl_set *set,
                          struct msg_ctl_reply *reply)
{
    bool core = set->key == CTL_SET_CORE_LIMIT;
    int account = account_find(s, set->target, reply->text, sizeof(reply->text));
    char value[32];
    uint8_t source;
    uint64_t limit;

    if (account < 0) {
        reply->status = ENOENT;
        return;
    }
    if (core && set->value > 100) {
        reply->status = EINVAL;
        snprintf(reply->text, sizeof(reply->text),
                 "core limit must be 1-100 %% (or 0 to remove it)");
        return;
    }
    struct account_actions out = {0};
    account_set_runtime(s->accounts, account, core, set->value, &out);
    clients_apply_accounts(s, &out);
    limit = limit_effective(core ? &s->accounts[account].core
                                 : &s->accounts[account].memory, &source);
    if (core)
        snprintf(value, sizeof(value), "%u%%", (unsigned)limit);
    else
        format_size(limit, value, sizeof(value));
    if (limit)
        snprintf(reply->text, sizeof(reply->text), "%s limit of %s set to %s%s",
                 core ? "core" : "memory", set->target, value,
                 source == LIMIT_DECLARED ? " (the declared one)" : "");
    else
        snprintf(reply->text, sizeof(reply->text), "%s has no %s limit",
                 set->target, core ? "core" : "memory");
    log_info("%s", reply->text);
}

/* The GPU named by target (index or UUID), -1 for "" (every GPU), or -2. */
static int find_gpu(const struct scheduler *s, const char *target)
{
    char *end;
    long index;

    if (!target[0])
        return -1;
    for (int g = 0; g < s->n_gpus; g++)
        if (!strcmp(target, s->gpus[g].uuid))
            return g;
    index = strtol(target, &end, 10);
    return *end == '\0' && index >= 0 && index < s->n_gpus ? (int)index : -2;
}

static void set_mode(struct scheduler *s, const struct msg_ctl_set *set,
                     struct msg_ctl_reply *reply)
{
    int gpu = find_gpu(s, set->target);

    if (setting_check(SETTING_SCHEDULING_MODE, set->value, reply->text,
                      sizeof(reply->text))) {
        reply->status = EINVAL;
        return;
    }
    if (gpu == -2) {
        reply->status = ENOENT;
        snprintf(reply->text, sizeof(reply->text),
                 "no GPU '%s' (give an index 0-%d or a UUID)", set->target,
                 s->n_gpus - 1);
        return;
    }
    policy_set_mode(s->policy, gpu, (enum sched_mode)set->value);
    if (gpu < 0)
        snprintf(reply->text, sizeof(reply->text), "scheduling mode %s on every GPU",
                 sched_mode_names[set->value]);
    else
        snprintf(reply->text, sizeof(reply->text), "scheduling mode %s on gpu %d",
                 sched_mode_names[set->value], gpu);
    log_info("%s", reply->text);
}

/* Carries out a CTL_SET and describes the result in reply. */
static void apply_setting(struct scheduler *s, const struct msg_ctl_set *set,
                          struct msg_ctl_reply *reply)
{
    char text[64];

    switch (set->key) {
    case CTL_SET_TQ:
        if (setting_check(SETTING_TQ, set->value, reply->text, sizeof(reply->text))) {
            reply->status = EINVAL;
            return;
        }
        policy_set_tq(s->policy, set->value);
        format_duration(set->value, text, sizeof(text));
        snprintf(reply->text, sizeof(reply->text), "time quantum set to %s", text);
        log_info("%s", reply->text);
        return;
    case CTL_SET_ANTI_THRASH:
        if (setting_check(SETTING_ANTI_THRASH, set->value, reply->text,
                          sizeof(reply->text))) {
            reply->status = EINVAL;
            return;
        }
        policy_set_anti_thrash(s->policy, set->value, now_ns());
        clients_broadcast(s, set->value ? MSG_SCHED_ON : MSG_SCHED_OFF);
        snprintf(reply->text, sizeof(reply->text), "anti-thrashing %s",
                 set->value ? "on: clients take turns" : "off: clients run freely");
        log_info("%s", reply->text);
        return;
    case CTL_SET_CORE_LIMIT:
    case CTL_SET_MEMORY_LIMIT:
        set_pod_limit(s, set, reply);
        return;
    case CTL_SET_MODE:
        set_mode(s, set, reply);
        return;
    case CTL_SET_SWITCH_TIME:
        /* 0 is auto: measured swap time x multiplier. */
        if (set->value && setting_check(SETTING_SWITCH_TIME_FIXED, set->value, text,
                                        sizeof(text))) {
            reply->status = EINVAL;
            snprintf(reply->text, sizeof(reply->text), "%s, or auto", text);
            return;
        }
        policy_set_switch_time(s->policy, set->value, 0);
        format_duration(set->value, text, sizeof(text));
        snprintf(reply->text, sizeof(reply->text), "switch time %s",
                 set->value ? text : "auto (measured swap time x multiplier)");
        log_info("%s", reply->text);
        return;
    }
    reply->status = ENOTSUP;
    snprintf(reply->text, sizeof(reply->text), "unknown setting %u", set->key);
}

static void conn_on_readable(struct event_loop *loop, int fd, void *data)
{
    struct control_conn *conn = data;
    struct msg m;
    int rc;

    (void)loop;
    rc = frame_reader_fill(&conn->reader, fd);
    while (rc >= 0 && (rc = frame_reader_next(&conn->reader, &m)) > 0) {
        if (m.type == MSG_CTL_STATUS) {
            rc = send_status(conn->sched, fd);
        } else if (m.type == MSG_CTL_SET) {
            struct msg reply = {.type = MSG_CTL_REPLY};
            apply_setting(conn->sched, &m.u.set, &reply.u.reply);
            rc = msg_send(fd, &reply);
        } else {
            log_warn("control: unexpected %s: disconnecting", msg_type_name(m.type));
            rc = PROTO_E_TYPE;
        }
        if (rc < 0)
            break;
    }
    if (rc < 0)
        close_conn(conn);
}

void control_on_listen(struct event_loop *loop, int fd, void *data)
{
    struct scheduler *s = data;
    int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    struct control_conn *conn;
    pid_t pid;
    uid_t uid;

    if (cfd < 0)
        return;
    if (unix_peer(cfd, &pid, &uid) || (uid != 0 && uid != s->uid)) {
        struct msg refusal = {.type = MSG_CTL_REPLY};
        refusal.u.reply.status = EACCES;
        snprintf(refusal.u.reply.text, sizeof(refusal.u.reply.text),
                 "the control socket serves root and uid %d only", (int)s->uid);
        log_warn("control: refusing pid %d (uid %d): not root or the "
                 "scheduler's user", (int)pid, (int)uid);
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
    }
}
