/* clients.c - the client socket: registration, lock messages, departures.
 *
 * A client that breaks the protocol (undecodable frame, wrong version,
 * message out of order, GPU index it did not register) loses its connection
 * with one log line saying why; its locks pass on exactly as if it had
 * died. The daemon and every other client carry on.
 *
 * Every line that a client's behaviour causes is charged to its uid
 * (log_uid_*: see log.h), so that no tenant, looping connect, REGISTER and
 * a bad message, can flood the log; lines about the daemon itself are
 * not. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "parse.h"
#include "scheduler.h"
#include "sock.h"

/* The pod c is billed to, as logs show it ("ns/name", "uid:...", "-"). One
 * buffer: one call per log line. */
static const char *pod_of(const struct client *c)
{
    static char text[2 * PROTO_NAME_MAX + 8];

    pod_id_format(&c->sched->accounts[c->account].pod, text, sizeof(text));
    return text;
}

static void close_client(struct scheduler *s, struct client *c,
                         struct policy_actions *out)
{
    if (c->registered) {
        log_uid_info(c->uid, "client %llu (pid %d, pod %s) left",
                     (unsigned long long)c->id, (int)c->pid, pod_of(c));
        pods_leave(&s->state.pods, &s->accounts[c->account].pod);
    }
    event_loop_remove(s->loop, c->fd);
    close(c->fd);
    free(c->reader);
    struct quota_actions quota_out = {0};
    struct account_actions account_out = {0};
    int slot = c->slot;

    c->welcomed = false; /* its socket is closed: tell it nothing more */
    policy_leave(s->policy, slot, now_ns(), out);
    quota_leave(&s->quota, slot, now_ns(), &quota_out);
    if (c->registered)
        account_detach(s->accounts, c->account, &account_out);
    clients_apply_accounts(s, &account_out);
    footprint_forget(s, slot);
    s->yield_told -= c->yield_sent.idle_release_ns || c->yield_sent.max_backlog_ns;
    *c = (struct client){.slot = slot, .fd = -1};
    clients_apply_quota(s, &quota_out);
    clients_retell_yield(s);
}

/* Sending the departures' actions may doom more clients: the loop runs
 * until none is left, each pass a plain scan, never a recursion. */
bool clients_reap(struct scheduler *s)
{
    static struct policy_actions out; /* large: off the stack */
    bool closed = false, again = true;

    while (again) {
        again = false;
        for (int i = 0; i < s->table_size; i++) {
            if (!s->clients[i]->used || !s->clients[i]->doomed)
                continue;
            policy_actions_clear(&out);
            close_client(s, s->clients[i], &out);
            clients_apply(s, &out);
            closed = again = true;
        }
    }
    return closed;
}

static int client_gpu_index(const struct client *c, int node_gpu)
{
    for (int i = 0; i < c->n_gpus; i++)
        if (c->node_gpu[i] == node_gpu)
            return i;
    return -1;
}

static void send_or_doom(struct client *c, const struct msg *m)
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

static void tell_wait_for_memory(const struct client *c, const struct policy_action *a)
{
    char need[32], free_bytes[32], limit[32], wait[32];

    format_size(a->mem.need, need, sizeof(need));
    format_size(a->mem.free, free_bytes, sizeof(free_bytes));
    format_size(a->mem.limit, limit, sizeof(limit));
    format_duration(a->mem.wait_ns, wait, sizeof(wait));
    log_uid_info(c->uid, "gpu %d: client %llu (pod %s) waits for memory: needs "
                 "%s, %s free of %s; next rotation in %s", a->gpu,
                 (unsigned long long)c->id, pod_of(c), need, free_bytes, limit,
                 a->mem.wait_ns ? wait : "-");
}

/* Tells c how soon to give its GPUs back (policy_yield_terms, the
 * shortest over its GPUs), when that changed. */
static void tell_yield_terms(struct scheduler *s, struct client *c)
{
    struct msg m = {.type = MSG_UPDATE_YIELD};

    for (int i = 0; i < c->n_gpus; i++) {
        if (c->node_gpu[i] < 0)
            continue;
        struct policy_yield t = policy_yield_terms(s->policy, c->node_gpu[i], c->slot);
        struct msg_yield *y = &m.u.yield;
        if (t.idle_release_ns && (!y->idle_release_ns || t.idle_release_ns < y->idle_release_ns))
            y->idle_release_ns = t.idle_release_ns;
        if (t.max_backlog_ns && (!y->max_backlog_ns || t.max_backlog_ns < y->max_backlog_ns))
            y->max_backlog_ns = t.max_backlog_ns;
    }
    if (m.u.yield.idle_release_ns == c->yield_sent.idle_release_ns &&
        m.u.yield.max_backlog_ns == c->yield_sent.max_backlog_ns)
        return;
    s->yield_told += !c->yield_sent.idle_release_ns && !c->yield_sent.max_backlog_ns;
    c->yield_sent = m.u.yield;
    s->yield_told -= !m.u.yield.idle_release_ns && !m.u.yield.max_backlog_ns;
    send_or_doom(c, &m);
}

void clients_retell_yield(struct scheduler *s)
{
    /* Without priorities nobody is told anything, unless told before. */
    if (!policy_ranked(s->policy) && s->yield_told == 0)
        return;
    for (int slot = 0; slot < s->table_size; slot++)
        if (s->clients[slot]->used && s->clients[slot]->welcomed)
            tell_yield_terms(s, s->clients[slot]);
}

void clients_apply(struct scheduler *s, const struct policy_actions *actions)
{
    for (int i = 0; i < actions->n; i++) {
        const struct policy_action *a = &actions->list[i];
        struct client *c = s->clients[a->client];
        struct msg m = {.u.lock = {.lease = a->lease}};
        uint8_t gpu = (uint8_t)client_gpu_index(c, a->gpu);

        m.u.lock.gpu = gpu;
        switch (a->kind) {
        case ACTION_GRANT:
        case ACTION_DROP: {
            bool grant = a->kind == ACTION_GRANT;
            log_debug("gpu %d: %slease %u %s client %llu", a->gpu,
                      grant ? "" : "drop ", a->lease, grant ? "to" : "of",
                      (unsigned long long)c->id);
            /* A gang's ranks agree where to stop (policy_drain_point). */
            m.type = grant ? MSG_LOCK_OK
                     : policy_gang(s->policy, a->client) >= 0
                         ? MSG_DROP_GANG_LOCK
                         : MSG_DROP_LOCK;
            send_or_doom(c, &m);
            break;
        }
        case ACTION_DRAIN_TO:
            log_debug("gpu %d: client %llu drains after collective %llu",
                      a->gpu, (unsigned long long)c->id,
                      (unsigned long long)a->collectives);
            m = (struct msg){.type = MSG_DRAIN_TO};
            m.u.drain = (struct msg_drain){gpu, a->lease, a->collectives};
            send_or_doom(c, &m);
            break;
        case ACTION_REVOKE:
            log_uid_warn(c->uid,
                         "gpu %d: client %llu (pid %d, pod %s) %s: lock revoked",
                         a->gpu, (unsigned long long)c->id, (int)c->pid, pod_of(c),
                         process_stopped(c->pid)
                         ? "is stopped"
                         : "did not answer DROP_LOCK in time");
            break;
        case ACTION_WAIT_FOR_MEM:
            tell_wait_for_memory(c, a);
            m = (struct msg){.type = MSG_WAIT_FOR_MEM};
            m.u.wait = (struct msg_wait){gpu, a->mem.need, a->mem.free,
                                         a->mem.limit, a->mem.wait_ns};
            send_or_doom(c, &m);
            break;
        case ACTION_MEM_AVAILABLE:
            m = (struct msg){.type = MSG_MEM_AVAILABLE};
            m.u.wait = (struct msg_wait){.gpu = gpu, .wait_ns = a->mem.wait_ns};
            send_or_doom(c, &m);
            break;
        case ACTION_EVICT:
        case ACTION_PREPARE_SWAP: {
            bool evict = a->kind == ACTION_EVICT;
            log_debug("gpu %d: client %llu %s", a->gpu, (unsigned long long)c->id,
                      evict ? "swaps out" : "prepares to swap out");
            m = (struct msg){.type = evict ? MSG_EVICT : MSG_PREPARE_SWAP};
            m.u.swap = (struct msg_swap){.gpu = gpu};
            send_or_doom(c, &m);
            break;
        }
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
            send_or_doom(c, &m);
            break;
        case QUOTA_RECLAIM:
            m.type = MSG_MEM_RECLAIM;
            send_or_doom(c, &m);
            break;
        case QUOTA_LIMIT:
            m.type = MSG_UPDATE_LIMIT;
            send_or_doom(c, &m);
            break;
        }
    }
    quota_actions_free(actions);
}

/* Tells c its pod's core limit in force (percent, 0: none). The scheduler
 * enforces it; the client paces itself to it only while the scheduler is
 * away, so that a restart lets no pod run over its limit. */
static void tell_core_limit(struct client *c, unsigned percent)
{
    struct msg m = {.type = MSG_UPDATE_CORE_LIMIT, .u.core.percent = (uint8_t)percent};

    if (c->welcomed)
        send_or_doom(c, &m);
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
            policy_set_core_limit(s->policy, a->account, a->core_limit, now_ns());
            for (int slot = 0; slot < s->table_size; slot++)
                if (s->clients[slot]->used && s->clients[slot]->account == a->account)
                    tell_core_limit(s->clients[slot], a->core_limit);
            policy_set_priority(s->policy, a->account, a->priority);
            policy_set_min_share(s->policy, a->account, a->min_share);
            clients_retell_yield(s);
            for (int g = 0; g < s->n_gpus; g++) {
                struct quota_actions out = {0};
                quota_set_limit(&s->quota, g, a->account, a->memory_limit, &out);
                clients_apply_quota(s, &out);
            }
            break;
        }
    }
}

/* Limits of oversubscription: a client's memory must fit on the GPU by
 * itself (memory that can never be resident all at once would page-fault
 * forever), and what all clients of the GPU hold together stays within
 * NVSHARE_OVERSUB_RATIO x capacity, which bounds the host memory that
 * swapped-out clients occupy. */
static bool oversub_allows(struct scheduler *s, const struct client *c, int gpu,
                           uint64_t need)
{
    int slot = c->slot;
    struct policy_gpu_view g;
    struct policy_member_view m = {0};
    char want[32], max[32];

    if (!c->oversubscribed)
        return true;
    policy_view_gpu(s->policy, gpu, &g);
    policy_view_member(s->policy, gpu, slot, now_ns(), &m);
    uint64_t limit = g.memory_limit, total = g.held;
    if (!g.capacity)
        return true;
    if (m.footprint + need > limit) {
        format_size(m.footprint + need, want, sizeof(want));
        format_size(limit, max, sizeof(max));
        log_uid_warn(c->uid, "gpu %d: client %llu (pod %s): allocation refused: its "
                     "footprint would be %s, more than the %s this GPU admits "
                     "(capacity minus the reserve), even alone", gpu,
                     (unsigned long long)c->id, pod_of(c), want, max);
        return false;
    }
    if (total + need > g.capacity * s->oversub_ratio) {
        format_size(total + need, want, sizeof(want));
        format_size(g.capacity * s->oversub_ratio, max, sizeof(max));
        log_uid_warn(c->uid, "gpu %d: client %llu (pod %s): allocation refused: "
                     "the GPU's clients would hold %s, more than "
                     "NVSHARE_OVERSUB_RATIO=%u x its capacity (%s)", gpu,
                     (unsigned long long)c->id, pod_of(c), want,
                     s->oversub_ratio, max);
        return false;
    }
    return true;
}

/* Bounds of what a client says (docs/protocol.md, "Bounds"): no client
 * holds more than CLIENT_BYTES_PER_CAPACITY x its GPU's capacity (managed
 * memory may exceed the GPU, never by that much), or 1 PiB where the
 * capacity is not known; no drain or swap lasts a day. A report beyond
 * them is a protocol violation: a value that no process can have would
 * otherwise overflow the sums of footprints and quotas. A request beyond
 * them (MEM_RESERVE: an application may ask for anything) is refused. */
#define CLIENT_BYTES_PER_CAPACITY 64
#define CLIENT_BYTES_UNKNOWN_MAX (1ull << 50)
#define CLIENT_DURATION_MAX_NS (86400ull * 1000000000ull)

static uint64_t bytes_bound(const struct scheduler *s, int gpu)
{
    struct policy_gpu_view g;

    policy_view_gpu(s->policy, gpu, &g);
    if (!g.capacity)
        return CLIENT_BYTES_UNKNOWN_MAX;
    return g.capacity < UINT64_MAX / CLIENT_BYTES_PER_CAPACITY
               ? g.capacity * CLIENT_BYTES_PER_CAPACITY
               : UINT64_MAX;
}

/* Whether value is within bound; if not, dooms c with one log line. */
static bool within(struct client *c, const struct msg *m, const char *field,
                   uint64_t value, uint64_t bound)
{
    if (value <= bound)
        return true;
    log_uid_warn(c->uid, "client %llu (pid %d): %s %s %llu is above the bound %llu: "
                 "disconnecting", (unsigned long long)c->id, (int)c->pid,
                 msg_type_name(m->type), field, (unsigned long long)value,
                 (unsigned long long)bound);
    c->doomed = true;
    return false;
}

/* The numbers of a client's message, against the bounds above. */
static bool in_bounds(const struct scheduler *s, struct client *c, int gpu,
                      const struct msg *m)
{
    uint64_t bytes = bytes_bound(s, gpu);

    switch (m->type) {
    case MSG_MEM_UPDATE:
    case MSG_MEM_RESERVE:
        return within(c, m, "allocated", m->u.mem.allocated, bytes);
    case MSG_MEM_RETURN:
        return within(c, m, "allocated", m->u.mem.allocated, bytes) &&
               within(c, m, "bytes", m->u.mem.bytes, bytes);
    case MSG_LOCK_RELEASED:
        return within(c, m, "drain_ns", m->u.lock.drain_ns,
                      CLIENT_DURATION_MAX_NS);
    case MSG_SWAPPED:
        return within(c, m, "bytes", m->u.swap.bytes, bytes) &&
               within(c, m, "duration_ns", m->u.swap.duration_ns,
                      CLIENT_DURATION_MAX_NS);
    case MSG_LOAD:
        return within(c, m, "span_ns", m->u.load.span_ns,
                      CLIENT_DURATION_MAX_NS);
    default:
        return true;
    }
}

/* A MEM_RESERVE that would have the client hold more than the bound, in
 * all its grants together, cannot be granted. */
static bool reserve_possible(const struct scheduler *s, const struct client *c,
                             int gpu, uint64_t bytes)
{
    uint64_t bound = bytes_bound(s, gpu);
    uint64_t held = s->quota.gpus[gpu].clients[c->slot].held;
    char want[32], has[32];

    if (bytes <= bound && held <= bound - bytes)
        return true;
    format_size(bytes, want, sizeof(want));
    format_size(held, has, sizeof(has));
    log_uid_warn(c->uid, "gpu %d: client %llu (pod %s): allocation of %s refused: "
                 "it holds %s, and no client may hold more than %d x the GPU's "
                 "capacity", gpu, (unsigned long long)c->id, pod_of(c), want,
                 has, CLIENT_BYTES_PER_CAPACITY);
    return false;
}

/* MEM_RESERVE, MEM_RETURN, MEM_UPDATE. */
static void handle_memory(struct scheduler *s, struct client *c, int gpu,
                          const struct msg *m)
{
    struct quota_actions out = {0};
    int slot = c->slot;
    const struct msg_mem *mem = &m->u.mem;
    /* Credit wanted beyond the need: up to the GPU's capacity (the bound
     * where it is not known), which also keeps bytes + extra from
     * wrapping. */
    struct policy_gpu_view g;
    policy_view_gpu(s->policy, gpu, &g);
    uint64_t most = g.capacity ? g.capacity : bytes_bound(s, gpu);
    uint64_t room = mem->bytes < most ? most - mem->bytes : 0;
    uint64_t extra = mem->extra < room ? mem->extra : room;

    if (m->type == MSG_MEM_RESERVE &&
        (!reserve_possible(s, c, gpu, mem->bytes) ||
         !oversub_allows(s, c, gpu, mem->bytes)))
        quota_refuse(&s->quota, gpu, slot, mem->seq, &out);
    else if (m->type == MSG_MEM_RESERVE)
        quota_request(&s->quota, gpu, slot, mem->seq, mem->bytes,
                      mem->bytes + extra, mem->allocated, now_ns(), &out);
    else if (m->type == MSG_MEM_RETURN)
        quota_return(&s->quota, gpu, slot, mem->bytes, mem->allocated, now_ns(),
                     &out);
    else
        quota_report(&s->quota, gpu, slot, mem->allocated);
    s->evictable[gpu][slot] = mem->evictable;
    clients_apply_quota(s, &out);
    /* Grants and returns moved what other clients hold too. */
    for (int i = 0; i < s->table_size; i++)
        if (policy_is_member(s->policy, gpu, i))
            footprint_update(s, gpu, i);
}

void clients_broadcast(struct scheduler *s, uint16_t type)
{
    struct msg m = {.type = type};

    for (int i = 0; i < s->table_size; i++)
        if (s->clients[i]->used && s->clients[i]->registered)
            send_or_doom(s->clients[i], &m);
}

int clients_count(const struct scheduler *s)
{
    int n = 0;

    for (int i = 0; i < s->table_size; i++)
        n += s->clients[i]->used && s->clients[i]->registered;
    return n;
}

int clients_pending(const struct scheduler *s)
{
    int n = 0;

    for (int i = 0; i < s->table_size; i++)
        n += s->clients[i]->used && !s->clients[i]->registered;
    return n;
}

/* Who the client is: the kernel says which pod (its cgroup) on a Kubernetes
 * node; on a plain host the pod it declares counts only if its uid may
 * join it. Anything else is billed on its own, never refused: a refused
 * client would run unscheduled, which is what an impostor wants. */
static void claim_of(struct scheduler *s, struct client *c,
                     const struct msg_register *reg, struct account_claim *claim)
{
    enum identity_kind kind = identity_of_pid(s->proc_root, c->pid, &c->identity);
    char declared[2 * PROTO_NAME_MAX + 8];
    uint32_t owner;
    struct pod *pod;

    memset(claim, 0, sizeof(*claim));
    if (s->declared_limits) {
        claim->core_declared = reg->core_limit;
        claim->memory_declared = reg->memory_limit;
    }
    /* A declared priority can only lower the pod's: always honoured. */
    claim->priority_declared = reg->priority;
    if (kind == IDENTITY_POD) {
        snprintf(claim->pod.uid, sizeof(claim->pod.uid), "%s", c->identity.pod_uid);
    } else if (kind == IDENTITY_HOST && c->identity.slurm_job[0]) {
        /* A Slurm job's cgroup names its pod (docs/slurm.md), whatever the
         * process declares; its owner, set by nvshare_spank.so, still
         * decides who may join it. */
        snprintf(claim->pod.pod_namespace, sizeof(claim->pod.pod_namespace), "slurm");
        snprintf(claim->pod.pod_name, sizeof(claim->pod.pod_name), "%s",
                 c->identity.slurm_job);
    } else if (kind == IDENTITY_HOST) {
        memcpy(claim->pod.pod_namespace, reg->pod_namespace,
               sizeof(claim->pod.pod_namespace));
        memcpy(claim->pod.pod_name, reg->pod_name, sizeof(claim->pod.pod_name));
        pod_id_default_namespace(&claim->pod);
    } else if (reg->pod_name[0]) {
        log_uid_warn(c->uid, "client pid %d: cannot read its cgroup under %s: "
                     "billed on its own, not as the pod it declares", (int)c->pid,
                     s->proc_root ? s->proc_root : "/proc");
    }
    if (pod_id_empty(&claim->pod))
        return;
    if (pods_join(&s->state.pods, &claim->pod, (uint32_t)c->uid, &pod, &owner) < 0) {
        pod_id_format(&claim->pod, declared, sizeof(declared));
        if (owner == (uint32_t)c->uid)
            log_error("client pid %d: out of memory for pod %s: billed on its own",
                      (int)c->pid, declared);
        else
            log_uid_warn(c->uid, "client pid %d (uid %u) declares pod %s, which "
                         "belongs to uid %u: billed on its own, with none of "
                         "that pod's quota, budget or limits", (int)c->pid,
                         (unsigned)c->uid, declared, (unsigned)owner);
        memset(&claim->pod, 0, sizeof(claim->pod));
        return;
    }
    claim->pod = pod->id; /* with its name, if the pod watcher told it */
    claim->member = pod_member(pod, (uint32_t)c->uid);
    claim->record = pod;
}

/* Whether clients a and b are ranks of one job: the same NVSHARE_JOB_ID
 * and uid (another uid cannot make a job wait for its GPUs), or without
 * one, the same account (a pod, or a process alone). */
static bool same_job(const struct client *a, const struct client *b)
{
    if (a->reg.job_id[0] || b->reg.job_id[0])
        return a->uid == b->uid && strcmp(a->reg.job_id, b->reg.job_id) == 0;
    return a->account == b->account;
}

/* The number of c's job: that of a registered rank of it, or the lowest
 * no job uses (-1 if memory runs out: c is then a job of its own in all
 * but its GPUs' gang). */
static int job_number(struct scheduler *s, const struct client *c)
{
    bool *taken = calloc((size_t)s->table_size, sizeof(*taken));
    int number = -1;

    for (int i = 0; i < s->table_size; i++) {
        const struct client *o = s->clients[i];
        if (!o || !o->used || o == c || !o->registered || o->gang < 0)
            continue;
        if (same_job(c, o)) {
            free(taken);
            return o->gang;
        }
        if (taken)
            taken[o->gang] = true;
    }
    if (!taken) {
        log_warn("client %llu: out of memory: its GPUs are not granted together",
                 (unsigned long long)c->id);
        return -1;
    }
    for (number = 0; taken[number]; number++)
        ;
    free(taken);
    return number;
}

/* The name in reg with a control character (C0, DEL, or C1 in UTF-8), or
 * NULL: no name may carry a line break or a terminal escape into a log, a
 * status or a state file. */
static const char *name_with_control(const struct msg_register *reg)
{
    const char *names[4 + PROTO_MAX_GPUS] = {reg->pod_namespace, reg->pod_name,
                                             reg->container_name, reg->job_id};

    for (int i = 0; i < reg->n_gpus; i++)
        names[4 + i] = reg->gpu_uuids[i];
    for (int i = 0; i < 4 + reg->n_gpus; i++)
        for (const unsigned char *p = (const unsigned char *)names[i]; *p; p++)
            if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
                return names[i];
    return NULL;
}

/* Tells the process why, once, and closes it: it retries with a back-off
 * (src/client/connection.c), each refusal a line charged to its uid. */
static void refuse_registration(struct client *c, const char *name)
{
    struct msg m = {.type = MSG_REFUSED};

    m.u.refused = (struct msg_refused){REFUSED_BAD_NAME, (uint32_t)c->uid, 0};
    log_uid_warn(c->uid, "client pid %d (uid %u) declares a name with a control "
                 "character (\"%s\"): registration refused", (int)c->pid,
                 (unsigned)c->uid, name);
    send_or_doom(c, &m);
    c->doomed = true;
}

static void handle_register(struct scheduler *s, struct client *c,
                            const struct msg_register *reg)
{
    struct msg reply = {.type = MSG_REGISTER_OK};
    struct policy_settings_view settings;
    struct account_actions account_out = {0};
    struct quota_actions quota_out = {0};
    struct account_claim claim;
    int slot = c->slot;
    uint64_t now = now_ns();
    const char *bad_name = name_with_control(reg);

    if (bad_name) {
        refuse_registration(c, bad_name);
        return;
    }
    c->reg = *reg;
    c->reg.pid = (uint32_t)c->pid;
    c->n_gpus = reg->n_gpus;
    c->id = ++s->next_client_id;
    c->registered = true;
    claim_of(s, c, reg, &claim);
    c->account = account_attach(s->accounts, s->table_size, &claim, &account_out);
    clients_apply_accounts(s, &account_out);
    c->gang = job_number(s, c);
    policy_set_gang(s->policy, slot, c->gang);
    policy_view_settings(s->policy, &settings);
    reply.u.reg_ok.client_id = c->id;
    reply.u.reg_ok.scheduling_on = settings.anti_thrash;
    reply.u.reg_ok.oversub_default = s->oversub_default;
    c->oversubscribed = reg->oversub == OVERSUB_ON ||
                        (reg->oversub == OVERSUB_NODE_DEFAULT && s->oversub_default);
    reply.u.reg_ok.n_gpus = reg->n_gpus;
    for (int i = 0; i < reg->n_gpus; i++) {
        c->node_gpu[i] = -1;
        for (int g = 0; g < s->n_gpus; g++)
            if (strcmp(reg->gpu_uuids[i], s->gpus[g].uuid) == 0)
                c->node_gpu[i] = g;
        if (c->node_gpu[i] < 0) {
            log_uid_warn(c->uid, "client %llu (pid %d) uses GPU %s, which this "
                         "scheduler does not manage", (unsigned long long)c->id,
                         (int)c->pid, reg->gpu_uuids[i]);
            continue;
        }
        policy_join(s->policy, c->node_gpu[i], slot, c->account, now);
        quota_join(&s->quota, c->node_gpu[i], slot, c->account, &quota_out);
        footprint_update(s, c->node_gpu[i], slot);
        reply.u.reg_ok.gpu_known[i] = 1;
    }
    log_uid_info(c->uid, "client %llu registered: pid %d, uid %u, pod %s (%s), "
                 "container %s, %d GPU(s)%s", (unsigned long long)c->id, (int)c->pid,
                 (unsigned)c->uid, pod_of(c),
                 c->identity.kind == IDENTITY_POD || c->identity.slurm_job[0]
                     ? "from its cgroup" : "declared",
                 c->identity.container_id[0] ? c->identity.container_id
                 : reg->container_name[0]    ? reg->container_name : "-",
                 reg->n_gpus, c->oversubscribed ? ", oversubscribed" : "");
    send_or_doom(c, &reply);
    c->welcomed = true;
    /* Its limits (UPDATE_CORE_LIMIT, UPDATE_LIMIT) follow REGISTER_OK. */
    tell_core_limit(c, account_core_limit(s->accounts, c->account));
    clients_apply_quota(s, &quota_out);
    clients_retell_yield(s);
}

static void release(struct scheduler *s, struct client *c, int gpu,
                    const struct msg_lock *lock, struct policy_actions *out)
{
    int slot = c->slot;
    struct policy_member_view m = {0};
    uint64_t now = now_ns();

    policy_view_member(s->policy, gpu, slot, now, &m);
    bool preempted = m.state == MEMBER_DRAINING;
    uint32_t lease_before = m.lease;

    policy_release(s->policy, gpu, slot, lock->lease, lock->drain_ns,
                   lock->at_ns, now, out);
    policy_view_member(s->policy, gpu, slot, now, &m);
    /* Benchmarks read preemption latency from these lines. */
    if (preempted && lock->lease == lease_before)
        log_debug("gpu %d: client %llu released lease %u: preempt %.3f ms, "
                  "drain %.3f ms", gpu, (unsigned long long)c->id, lock->lease,
                  (double)m.last_preempt_ns / 1e6, (double)lock->drain_ns / 1e6);
}

/* Why a message breaks the protocol, for its one log line. One buffer: one
 * call per log line. */
static char violation[160];

/* The node GPU a client message names, or -1 with violation said (none,
 * or not one it may use). */
static int message_gpu(const struct client *c, const struct msg *m)
{
    int index;

    switch (m->type) {
    case MSG_MEM_RESERVE:
    case MSG_MEM_RETURN:
    case MSG_MEM_UPDATE:
        index = m->u.mem.gpu;
        break;
    case MSG_REQ_LOCK:
    case MSG_LOCK_RELEASED:
    case MSG_LOCK_IN_USE:
    case MSG_DRAINING:
        index = m->u.lock.gpu;
        break;
    case MSG_DRAIN_POINT:
        index = m->u.drain.gpu;
        break;
    case MSG_SWAPPED:
        index = m->u.swap.gpu;
        break;
    case MSG_LOAD:
        index = m->u.load.gpu;
        break;
    default:
        snprintf(violation, sizeof(violation), "is not a message a client sends");
        return -1;
    }
    if (index >= c->n_gpus)
        snprintf(violation, sizeof(violation), "names GPU index %d, but it "
                 "registered %d GPU(s)", index, c->n_gpus);
    else if (c->node_gpu[index] < 0)
        snprintf(violation, sizeof(violation), "names GPU index %d (%s), which "
                 "this scheduler does not manage", index, c->reg.gpu_uuids[index]);
    else
        return c->node_gpu[index];
    return -1;
}

/* Swaps faster than this are not measurements: no link between a GPU and
 * its host moves a terabyte a second. */
#define SWAP_BYTES_PER_NS_MAX 1000

/* Whether a SWAPPED answers what the scheduler asked: a swap-out its EVICT
 * (and once), a swap-in a swap-out of more than 0 bytes (docs/protocol.md,
 * "Swapping in"), at a speed a machine can have. Anything else would enter
 * the GPU's swap statistics and set its switch time: it is ignored, with
 * a line charged to the client's uid. */
static bool swap_solicited(struct scheduler *s, struct client *c, int gpu,
                           const struct msg_swap *swap)
{
    struct policy_member_view m = {0};
    const char *why = NULL;
    bool out = swap->direction == SWAP_OUT;

    policy_view_member(s->policy, gpu, c->slot, now_ns(), &m);
    if (out && !m.evicting)
        why = "no EVICT asked for it";
    else if (!out && !(c->swap_in_due >> gpu & 1))
        why = "it swapped nothing out since its last swap-in";
    else if (swap->bytes / SWAP_BYTES_PER_NS_MAX > swap->duration_ns)
        why = "faster than any GPU's link to its host";
    if (why) {
        log_uid_warn(c->uid, "gpu %d: client %llu (pid %d): SWAPPED %s of %llu "
                     "bytes in %llu ns ignored: %s", gpu,
                     (unsigned long long)c->id, (int)c->pid, out ? "out" : "in",
                     (unsigned long long)swap->bytes,
                     (unsigned long long)swap->duration_ns, why);
        return false;
    }
    if (out && swap->bytes)
        c->swap_in_due |= 1u << gpu;
    else if (!out)
        c->swap_in_due &= ~(1u << gpu);
    return true;
}

/* Returns NULL, or why the message breaks the protocol. */
static const char *handle_message(struct scheduler *s, struct client *c,
                                  const struct msg *m, struct policy_actions *out)
{
    int slot = c->slot;
    int gpu;

    if (m->type == MSG_REGISTER && c->registered)
        return "a second time";
    if (m->type == MSG_REGISTER) {
        handle_register(s, c, &m->u.reg);
        return NULL;
    }
    if (!c->registered)
        return "before REGISTER";
    if ((gpu = message_gpu(c, m)) < 0)
        return violation;
    /* Out of bounds: c is doomed, and the log line said why. */
    if (!in_bounds(s, c, gpu, m))
        return NULL;
    switch (m->type) {
    case MSG_MEM_RESERVE:
    case MSG_MEM_RETURN:
    case MSG_MEM_UPDATE:
        handle_memory(s, c, gpu, m);
        return NULL;
    case MSG_LOCK_IN_USE:
        policy_in_use(s->policy, gpu, slot, m->u.lock.lease, m->u.lock.at_ns,
                      now_ns());
        return NULL;
    case MSG_DRAINING:
        policy_draining(s->policy, gpu, slot, m->u.lock.lease, now_ns());
        return NULL;
    case MSG_DRAIN_POINT:
        log_debug("gpu %d: client %llu stopped after collective %llu", gpu,
                  (unsigned long long)c->id,
                  (unsigned long long)m->u.drain.collectives);
        policy_drain_point(s->policy, gpu, slot, m->u.drain.lease,
                           m->u.drain.collectives, out);
        return NULL;
    case MSG_REQ_LOCK:
        log_debug("gpu %d: client %llu requests the lock", gpu,
                  (unsigned long long)c->id);
        if (!(c->asked_gpus >> gpu & 1)) {
            c->asked_gpus |= 1u << gpu; /* its context counts from now on */
            footprint_update(s, gpu, slot);
        }
        policy_request(s->policy, gpu, slot, now_ns(), out);
        return NULL;
    case MSG_LOCK_RELEASED:
        release(s, c, gpu, &m->u.lock, out);
        return NULL;
    case MSG_SWAPPED:
        if (m->u.swap.direction == 0)
            return "without a direction";
        if (!swap_solicited(s, c, gpu, &m->u.swap))
            return NULL;
        log_debug("gpu %d: client %llu swapped %s %llu bytes in %.3f ms", gpu,
                  (unsigned long long)c->id,
                  m->u.swap.direction == SWAP_OUT ? "out" : "in",
                  (unsigned long long)m->u.swap.bytes,
                  (double)m->u.swap.duration_ns / 1e6);
        policy_swapped(s->policy, gpu, slot, m->u.swap.direction,
                       m->u.swap.bytes, m->u.swap.duration_ns, now_ns(), out);
        return NULL;
    case MSG_LOAD:
        policy_set_load(s->policy, gpu, slot, m->u.load.busy_permille);
        return NULL;
    default:
        return "is not a message a client sends";
    }
}

static void client_on_readable(struct event_loop *loop, int fd, void *data)
{
    struct client *c = data;
    struct scheduler *s = c->sched;
    struct msg m;
    int rc;

    (void)loop;
    /* Doomed by another handler of this batch: its messages no longer
     * count, and the reaper closes it after the batch. */
    if (c->doomed)
        return;
    rc = frame_reader_fill(c->reader, fd);
    while (rc >= 0 && (rc = frame_reader_next(c->reader, &m)) > 0) {
        struct policy_actions out;
        uint64_t start = now_ns();
        const char *why;
        policy_actions_clear(&out);
        if ((why = handle_message(s, c, &m, &out))) {
            log_uid_warn(c->uid, "client %llu (pid %d): %s %s: disconnecting",
                         (unsigned long long)c->id, (int)c->pid,
                         msg_type_name(m.type), why);
            c->doomed = true;
        }
        clients_apply(s, &out);
        metrics_note_message(s, m.type, now_ns() - start);
        if (c->doomed)
            return;
    }
    if (rc < 0 && rc != PROTO_E_IO)
        log_uid_warn(c->uid, "client %llu (pid %d): bad message (%s): disconnecting",
                     (unsigned long long)c->id, (int)c->pid, proto_strerror(rc));
    if (rc < 0)
        c->doomed = true;
    if (c->reader->len == 0)
        c->partial_since = 0;
    else if (c->partial_since == 0)
        c->partial_since = now_ns();
}

/* When c stalls (0: it does not): a connection that sends half a frame or
 * never registers would otherwise hold its slot, and its buffer, forever. */
static uint64_t stall_due(const struct client *c)
{
    if (!c->registered)
        return c->connected_at + CLIENT_STALL_NS;
    return c->partial_since ? c->partial_since + CLIENT_STALL_NS : 0;
}

uint64_t clients_expire_stalled(struct scheduler *s, uint64_t now)
{
    const struct client *first_unregistered = NULL;
    int unregistered = 0;
    uint64_t next = 0;

    for (int i = 0; i < s->table_size; i++) {
        struct client *c = s->clients[i];
        uint64_t due;
        if (!c->used || c->doomed || (due = stall_due(c)) == 0)
            continue;
        /* Those due within a batch go together: a flood of connections
         * made over a second then takes a few wake-ups, not one each. */
        if (now + CLIENT_STALL_BATCH_NS < due) {
            if (next == 0 || due < next)
                next = due;
            continue;
        }
        c->doomed = true;
        if (c->registered) {
            log_uid_warn(c->uid, "client %llu (pid %d): a frame unfinished for "
                         "%.1f s: disconnecting", (unsigned long long)c->id,
                         (int)c->pid, (double)CLIENT_STALL_NS / 1e9);
        } else if (unregistered++ == 0) {
            first_unregistered = c;
        }
    }
    /* A line per batch, not per connection. */
    if (unregistered)
        log_warn("%d connection(s) not registered for %.1f s (the first from "
                 "pid %d, uid %u): disconnecting", unregistered,
                 (double)CLIENT_STALL_NS / 1e9, (int)first_unregistered->pid,
                 (unsigned)first_unregistered->uid);
    return next;
}

/* A refused process retries (with a back-off), so a flood of them would
 * flood the log: a uid's first refusal is logged, then at most one line
 * every REFUSAL_LOG_NS with how many followed. */
#define REFUSAL_LOG_NS (10 * NS_PER_SEC)

static void log_refusals(const struct refusal_note *n, uint64_t now)
{
    log_warn("refused %llu more connection(s) of uid %u in the last %.0f s",
             (unsigned long long)n->unlogged, (unsigned)n->uid,
             (double)(now - n->logged_at) / 1e9);
}

static void note_refusal(struct scheduler *s, uid_t uid, const char *why)
{
    struct refusal_note *n = NULL, *oldest = &s->refusals[0];
    uint64_t now = now_ns();
    size_t count = sizeof(s->refusals) / sizeof(s->refusals[0]);

    s->refused++;
    for (size_t i = 0; i < count && !n; i++) {
        struct refusal_note *r = &s->refusals[i];
        if (r->logged_at && r->uid == uid)
            n = r;
        else if (r->logged_at < oldest->logged_at)
            oldest = r;
    }
    if (!n) {
        if (oldest->logged_at && oldest->unlogged)
            log_refusals(oldest, now);
        n = oldest;
        *n = (struct refusal_note){.uid = uid};
    }
    if (n->logged_at && now - n->logged_at < REFUSAL_LOG_NS) {
        n->unlogged++;
        return;
    }
    if (n->unlogged)
        log_refusals(n, now);
    else
        log_warn("refusing connections of uid %u: %s", (unsigned)uid, why);
    n->logged_at = now;
    n->unlogged = 0;
}

void clients_note_out_of_fds(struct scheduler *s, const char *socket_name)
{
    uint64_t now = now_ns();
    struct rlimit rl = {0};

    s->refused++;
    if (s->out_of_fds_logged_at && now - s->out_of_fds_logged_at < REFUSAL_LOG_NS) {
        s->out_of_fds_unlogged++;
        return;
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if (s->out_of_fds_unlogged)
        log_warn("out of file descriptors: closed %llu more new connection(s) "
                 "unserved in the last %.0f s", (unsigned long long)s->out_of_fds_unlogged,
                 (double)(now - s->out_of_fds_logged_at) / 1e9);
    log_warn("out of file descriptors (limit %llu): closed a new connection on "
             "%s unserved", (unsigned long long)rl.rlim_cur, socket_name);
    s->out_of_fds_logged_at = now;
    s->out_of_fds_unlogged = 0;
}

/* Tells the process why before closing, so that it says so once and backs
 * off rather than retrying blindly. */
static void refuse(struct scheduler *s, int fd, uid_t uid, uint8_t reason)
{
    struct msg m = {.type = MSG_REFUSED};
    char why[128];

    m.u.refused = (struct msg_refused){reason, (uint32_t)uid,
                                       s->max_connections_per_uid};
    if (reason == REFUSED_UID_LIMIT)
        snprintf(why, sizeof(why), "it has %u connections already "
                 "(NVSHARE_MAX_CONNECTIONS_PER_UID)", s->max_connections_per_uid);
    else
        snprintf(why, sizeof(why), "out of memory for another client");
    msg_send(fd, &m); /* best effort: it is closed either way */
    close(fd);
    note_refusal(s, uid, why);
}

/* Root and the daemon's own uid are trusted (see settings.c); any other
 * uid may hold max_connections_per_uid connections. */
static bool uid_at_limit(const struct scheduler *s, uid_t uid)
{
    unsigned n = 0;

    if (!s->max_connections_per_uid || uid == 0 || uid == s->uid)
        return false;
    for (int i = 0; i < s->table_size; i++)
        n += s->clients[i]->used && s->clients[i]->uid == uid;
    return n >= s->max_connections_per_uid;
}

/* A free slot, growing the tables when every one is taken; NULL if memory
 * ran out. */
static struct client *free_slot(struct scheduler *s)
{
    int size = s->table_size;

    for (int i = 0; i < size; i++)
        if (!s->clients[i]->used)
            return s->clients[i];
    if (!scheduler_grow(s, 2 * size))
        return NULL;
    log_info("client tables grown to %d slots", s->table_size);
    return s->clients[size];
}

void clients_on_listen(struct event_loop *loop, int fd, void *data)
{
    struct scheduler *s = data;
    int cfd = unix_accept(fd);
    struct client *c;
    pid_t pid;
    uid_t uid;

    if (cfd < 0) {
        if (errno == EMFILE)
            clients_note_out_of_fds(s, CLIENT_SOCKET_NAME);
        return;
    }
    if (unix_peer(cfd, &pid, &uid)) {
        log_warn("refusing a client: %s", strerror(errno));
        close(cfd);
        return;
    }
    if (uid_at_limit(s, uid)) {
        refuse(s, cfd, uid, REFUSED_UID_LIMIT);
        return;
    }
    c = free_slot(s);
    if (!c) {
        refuse(s, cfd, uid, REFUSED_NO_MEMORY);
        return;
    }
    int slot = c->slot;
    *c = (struct client){.sched = s, .slot = slot, .fd = cfd, .pid = pid,
                         .uid = uid};
    c->reader = malloc(sizeof(*c->reader));
    if (!c->reader || event_loop_add(loop, cfd, client_on_readable, c)) {
        log_warn("refusing a client: %s", strerror(errno));
        free(c->reader);
        close(cfd);
        c->fd = -1;
        return;
    }
    c->reader->len = 0;
    c->connected_at = now_ns();
    c->used = true;
}
