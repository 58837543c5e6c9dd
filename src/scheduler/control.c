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
        .n_pending = (uint32_t)clients_pending(s),
        .refused = s->refused,
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
    return msg_send(fd, &m);
}

/* One line per client and GPU it uses: nothing is sent for a GPU it does
 * not use. */
static int send_client(struct scheduler *s, int fd, int slot, int g, uint64_t now)
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
    cl->priority =
        (uint8_t)priority_effective(&a->priority, &cl->priority_source);
    cl->min_share = (uint8_t)a->min_share;
    return msg_send(fd, &m);
}

static int send_pod(int fd, const struct pod *p)
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
            memcpy(r->container_id, u->identity.container_id,
                   sizeof(r->container_id));
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
    for (int slot = 0; slot < s->table_size; slot++) {
        const struct client *c = s->clients[slot];
        if (!c->used || !c->registered)
            continue;
        for (int g = 0; g < s->n_gpus; g++)
            if ((rc = send_client(s, fd, slot, g, now)))
                return rc;
    }
    if ((rc = send_unhooked(s, fd, now)))
        return rc;
    for (size_t i = 0; i < s->state.pods.n; i++)
        if ((rc = send_pod(fd, &s->state.pods.list[i])))
            return rc;
    return msg_send(fd, &m);
}

/* The pod named by target: "uid:<pod-uid>", "namespace/pod", "pod" (in
 * namespace default, as kubectl reads it), or a client id (its pod;
 * *account is set too, since a client with no pod is limited through its
 * own account). 0, or -1 with err. */
static int pod_find(const struct scheduler *s, const char *target,
                    struct pod_id *id, int *account, char *err, size_t err_len)
{
    const char *slash = strchr(target, '/');
    char *end;
    unsigned long long client = strtoull(target, &end, 10);

    memset(id, 0, sizeof(*id));
    *account = -1;
    if (*target && !*end) {
        for (int i = 0; i < s->table_size; i++) {
            const struct client *c = s->clients[i];
            if (c->used && c->registered && c->id == client) {
                *account = c->account;
                *id = s->accounts[c->account].pod;
                return 0;
            }
        }
        snprintf(err, err_len, "no client with id %llu", client);
        return -1;
    }
    if (!strncmp(target, "uid:", 4) && target[4] &&
        strlen(target + 4) < sizeof(id->uid)) {
        snprintf(id->uid, sizeof(id->uid), "%s", target + 4);
    } else if (slash ? slash > target && slash[1] &&
                           (size_t)(slash - target) < sizeof(id->pod_namespace) &&
                           strlen(slash + 1) < sizeof(id->pod_name)
                     : *target && strlen(target) < sizeof(id->pod_name)) {
        if (slash)
            memcpy(id->pod_namespace, target, (size_t)(slash - target));
        snprintf(id->pod_name, sizeof(id->pod_name), "%s",
                 slash ? slash + 1 : target);
        pod_id_default_namespace(id);
        /* A Kubernetes pod the watcher named is set by its UID. */
        for (size_t i = 0; i < s->state.pods.n; i++) {
            const struct pod_id *p = &s->state.pods.list[i].id;
            if (p->uid[0] && !strcmp(p->pod_namespace, id->pod_namespace) &&
                !strcmp(p->pod_name, id->pod_name))
                *id = *p;
        }
    } else {
        snprintf(err, err_len,
                 "'%s' is not a pod: give namespace/pod, pod, "
                 "uid:<pod-uid> or a client id from nvsharectl status",
                 target);
        return -1;
    }
    *account = account_of_pod(s->accounts, s->table_size, id);
    return 0;
}

/* The per-pod settings of CTL_SET, as pods.h names them. */
static const struct {
    enum ctl_key key;
    enum pod_setting which;
    const char *name;
    uint64_t max; /* 0: any */
    const char *range;
} pod_settings[] = {
    {CTL_SET_CORE_LIMIT, POD_CORE_LIMIT, "core limit", 100, "1-100 %"},
    {CTL_SET_MEMORY_LIMIT, POD_MEMORY_LIMIT, "memory limit", 0, ""},
    {CTL_SET_PRIORITY, POD_PRIORITY, "priority", PRIORITY_HIGHEST,
     "high, normal, low or 1-9"},
    {CTL_SET_MIN_SHARE, POD_MIN_SHARE, "min share", 100, "1-100 %"},
    {CTL_SET_OWNER, POD_OWNER, "owner", UINT32_MAX - 1,
     "a uid other than root's (root's processes may join any pod)"},
};

/* The value of a per-pod setting as people read it. */
static void format_pod_setting(enum pod_setting which, uint64_t value,
                               char *buf, size_t len)
{
    switch (which) {
    case POD_MEMORY_LIMIT:
        format_size(value, buf, len);
        break;
    case POD_PRIORITY:
        format_priority((unsigned)value, buf, len);
        break;
    case POD_OWNER:
        snprintf(buf, len, "uid %u", (unsigned)value);
        break;
    default:
        snprintf(buf, len, "%u%%", (unsigned)value);
        break;
    }
}

/* The setting in force for the account, and where it comes from. */
static uint64_t pod_setting_effective(const struct account *a,
                                      enum pod_setting which, uint8_t *source)
{
    switch (which) {
    case POD_CORE_LIMIT:
        return limit_effective(&a->core, source);
    case POD_MEMORY_LIMIT:
        return limit_effective(&a->memory, source);
    case POD_PRIORITY:
        return priority_effective(&a->priority, source);
    case POD_MIN_SHARE:
        break;
    case POD_OWNER:
        *source = LIMIT_NONE;
        return 0;
    }
    *source = a->min_share ? LIMIT_RUNTIME : LIMIT_NONE;
    return a->min_share;
}

/* A per-pod setting from the operator: it holds whether or not the pod is
 * connected, survives restarts, and a client's declaration can only lower
 * it. 0 removes it. On a plain host, the owner decides which of the pod's
 * shares (accounts.h) get its priority and floor. */
static void set_pod_limit(struct scheduler *s, const struct msg_ctl_set *set,
                          struct msg_ctl_reply *reply)
{
    bool failed = false;
    char value[32], name[2 * PROTO_NAME_MAX + 8];
    const struct pod *record = NULL;
    struct pod_id id;
    uint8_t source = LIMIT_NONE;
    uint64_t limit = set->value;
    int account;
    size_t k = 0;

    /* apply_setting calls it for the keys of pod_settings only. */
    while (k + 1 < sizeof(pod_settings) / sizeof(pod_settings[0]) &&
           pod_settings[k].key != set->key)
        k++;
    enum pod_setting which = pod_settings[k].which;
    const char *what = pod_settings[k].name;
    if (pod_find(s, set->target, &id, &account, reply->text, sizeof(reply->text))) {
        reply->status = ENOENT;
        return;
    }
    if (pod_settings[k].max && set->value > pod_settings[k].max) {
        reply->status = EINVAL;
        snprintf(reply->text, sizeof(reply->text),
                 "%s must be %s (or 0 to remove it)", what,
                 pod_settings[k].range);
        return;
    }
    if (which == POD_OWNER && (pod_id_empty(&id) || id.uid[0])) {
        reply->status = EINVAL;
        snprintf(reply->text, sizeof(reply->text),
                 "%.200s has no owner to name: "
                 "%s",
                 set->target,
                 id.uid[0] ? "a Kubernetes pod is its cgroup's"
                           : "the client is in no pod");
        return;
    }
    if (!pod_id_empty(&id)) {
        record = pods_set_limit(&s->state.pods, &id, which, set->value, &failed);
        if (failed) {
            reply->status = ENOMEM;
            snprintf(reply->text, sizeof(reply->text), "out of memory");
            return;
        }
        scheduler_save_state(s);
    }
    if (account >= 0) {
        struct account_actions out = {0};
        if (pod_id_empty(&id)) {
            account_set_runtime(s->accounts, account, which, set->value, &out);
            clients_apply_accounts(s, &out);
        }
        /* Every share of the pod (accounts.h), by the record: which of
         * them get its privileges depends on its owner. */
        for (int i = 0; !pod_id_empty(&id) && i < s->table_size; i++) {
            if (!s->accounts[i].refs || !pod_id_equal(&s->accounts[i].pod, &id))
                continue;
            out.n = 0;
            account_set_pod(s->accounts, i, record, &out);
            clients_apply_accounts(s, &out);
        }
        limit = pod_setting_effective(&s->accounts[account], which, &source);
    }
    if (pod_id_empty(&id))
        snprintf(name, sizeof(name), "client %s (in no pod: until it leaves)",
                 set->target);
    else
        pod_id_format(&id, name, sizeof(name));
    format_pod_setting(which, set->value ? set->value : limit, value,
                       sizeof(value));
    if (set->value)
        snprintf(reply->text, sizeof(reply->text), "%s of %.200s set to %s%s",
                 what, name, value, account < 0 ? " (not connected)" : "");
    else
        snprintf(reply->text, sizeof(reply->text), "%s of %.200s removed", what,
                 name);
    if (source == LIMIT_DECLARED) {
        size_t n = strlen(reply->text);
        format_pod_setting(which, limit, value, sizeof(value));
        snprintf(reply->text + n, sizeof(reply->text) - n,
                 "; its clients declared %s, which holds", value);
    }
    bool privilege = which == POD_MIN_SHARE ||
                     (which == POD_PRIORITY && set->value > PRIORITY_NORMAL);
    size_t n = strlen(reply->text);
    if (set->value && privilege && record && !record->id.uid[0] &&
        !record->owner_named)
        snprintf(reply->text + n, sizeof(reply->text) - n,
                 "; with no owner named, only root's processes get it "
                 "(nvsharectl set owner)");
    else if (set->value && which == POD_OWNER)
        snprintf(reply->text + n,
                 sizeof(reply->text) - n, ": other uids' processes (root's aside) are billed on their own");
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
    state_set_mode(&s->state, gpu < 0 ? NULL : s->gpus[gpu].uuid,
                   (uint8_t)set->value);
    scheduler_save_state(s);
    if (gpu < 0)
        snprintf(reply->text, sizeof(reply->text),
                 "scheduling mode %s on every GPU", sched_mode_names[set->value]);
    else
        snprintf(reply->text, sizeof(reply->text), "scheduling mode %s on gpu %d",
                 sched_mode_names[set->value], gpu);
    log_info("%s", reply->text);
}

/* A node-wide setting changed at run time: kept across restarts. */
static void remember(struct scheduler *s, enum setting_id id, uint64_t value)
{
    s->state.set[id] = true;
    s->state.value[id] = value;
    scheduler_save_state(s);
}

static void apply_setting(struct scheduler *s, const struct msg_ctl_set *set,
                          struct msg_ctl_reply *reply);

/* nvsharectl reset: the node setting named by target is set to what the
 * environment (else the default) gave it at start, and the state file no
 * longer holds it, so the environment decides again at the next start. */
static void reset_setting(struct scheduler *s, const char *name,
                          struct msg_ctl_reply *reply)
{
    static const uint16_t keys[SETTING_COUNT] = {[SETTING_TQ] = CTL_SET_TQ,
                                                 [SETTING_ANTI_THRASH] =
                                                     CTL_SET_ANTI_THRASH,
                                                 [SETTING_SCHEDULING_MODE] =
                                                     CTL_SET_MODE,
                                                 [SETTING_SWITCH_TIME_FIXED] =
                                                     CTL_SET_SWITCH_TIME};
    struct msg_ctl_set set = {0};
    char env[160];
    int id = 0;

    while (id < SETTING_COUNT &&
           (!keys[id] || strcmp(settings_table[id].name, name)))
        id++;
    if (id == SETTING_COUNT) {
        reply->status = EINVAL;
        snprintf(reply->text, sizeof(reply->text),
                 "cannot reset '%.200s': "
                 "tq, anti-thrash, mode or switch-time",
                 name);
        return;
    }
    set.key = keys[id];
    set.value = setting_state_value(s->env_settings, id);
    apply_setting(s, &set, reply);
    if (reply->status)
        return;
    s->state.set[id] = false;
    if (id == SETTING_SCHEDULING_MODE)
        s->state.n_modes = 0;
    scheduler_save_state(s);
    setting_env_text(id, env, sizeof(env));
    size_t n = strlen(reply->text);
    snprintf(reply->text + n, sizeof(reply->text) - n,
             " (%s%s; no longer a run-time "
             "setting)",
             *env ? "from " : "the default", env);
    log_info("%s reset: %s", settings_table[id].name, reply->text);
}

/* Carries out a CTL_SET and describes the result in reply. */
static void apply_setting(struct scheduler *s, const struct msg_ctl_set *set,
                          struct msg_ctl_reply *reply)
{
    char text[64];

    switch (set->key) {
    case CTL_SET_TQ:
        if (setting_check(SETTING_TQ, set->value, reply->text,
                          sizeof(reply->text))) {
            reply->status = EINVAL;
            return;
        }
        policy_set_tq(s->policy, set->value);
        remember(s, SETTING_TQ, set->value);
        format_duration(set->value, text, sizeof(text));
        if (set->value == POLICY_TQ_AUTO)
            snprintf(reply->text, sizeof(reply->text),
                     "time quantum auto: per GPU, "
                     "%d x its mean hand-over, within 100ms-30s",
                     POLICY_TQ_DRAIN_MULTIPLE);
        else
            snprintf(reply->text, sizeof(reply->text),
                     "time quantum pinned at %s", text);
        log_info("%s", reply->text);
        return;
    case CTL_SET_ANTI_THRASH:
        if (setting_check(SETTING_ANTI_THRASH, set->value, reply->text,
                          sizeof(reply->text))) {
            reply->status = EINVAL;
            return;
        }
        policy_set_anti_thrash(s->policy, set->value, now_ns());
        remember(s, SETTING_ANTI_THRASH, set->value);
        clients_broadcast(s, set->value ? MSG_SCHED_ON : MSG_SCHED_OFF);
        snprintf(reply->text, sizeof(reply->text), "anti-thrashing %s",
                 set->value ? "on: clients take turns"
                            : "off: clients run freely");
        log_info("%s", reply->text);
        return;
    case CTL_SET_CORE_LIMIT:
    case CTL_SET_MEMORY_LIMIT:
    case CTL_SET_PRIORITY:
    case CTL_SET_MIN_SHARE:
    case CTL_SET_OWNER:
        set_pod_limit(s, set, reply);
        return;
    case CTL_SET_MODE:
        set_mode(s, set, reply);
        return;
    case CTL_SET_SWITCH_TIME:
        /* 0 is auto: measured swap time x multiplier. */
        if (set->value && setting_check(SETTING_SWITCH_TIME_FIXED, set->value,
                                        text, sizeof(text))) {
            reply->status = EINVAL;
            snprintf(reply->text, sizeof(reply->text), "%s, or auto", text);
            return;
        }
        policy_set_switch_time(s->policy, set->value, 0);
        remember(s, SETTING_SWITCH_TIME_FIXED, set->value);
        format_duration(set->value, text, sizeof(text));
        snprintf(reply->text, sizeof(reply->text), "switch time %s",
                 set->value ? text : "auto (measured swap time x multiplier)");
        log_info("%s", reply->text);
        return;
    case CTL_RESET:
        reset_setting(s, set->target, reply);
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
