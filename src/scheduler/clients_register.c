/* clients_register.c - a client's REGISTER: who it is (its pod, its
 * job), which GPUs it joins, and its welcome (REGISTER_OK, then its
 * limits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients_internal.h"
#include "clock.h"
#include "log.h"
#include "scheduler.h"

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
        snprintf(claim->pod.uid, sizeof(claim->pod.uid), "%s",
                 c->identity.pod_uid);
    } else if (kind == IDENTITY_HOST && c->identity.slurm_job[0]) {
        /* A Slurm job's cgroup names its pod (docs/slurm.md), whatever the
         * process declares; its owner, set by nvshare_spank.so, still
         * decides who may join it. */
        snprintf(claim->pod.pod_namespace, sizeof(claim->pod.pod_namespace),
                 "slurm");
        snprintf(claim->pod.pod_name, sizeof(claim->pod.pod_name), "%s",
                 c->identity.slurm_job);
    } else if (kind == IDENTITY_HOST) {
        memcpy(claim->pod.pod_namespace, reg->pod_namespace,
               sizeof(claim->pod.pod_namespace));
        memcpy(claim->pod.pod_name, reg->pod_name, sizeof(claim->pod.pod_name));
        pod_id_default_namespace(&claim->pod);
    } else if (reg->pod_name[0]) {
        log_uid_warn(c->uid,
                     "client pid %d: cannot read its cgroup under %s: "
                     "billed on its own, not as the pod it declares",
                     (int)c->pid, s->proc_root ? s->proc_root : "/proc");
    }
    if (pod_id_empty(&claim->pod))
        return;
    if (pods_join(&s->state.pods, &claim->pod, (uint32_t)c->uid, &pod, &owner) <
        0) {
        pod_id_format(&claim->pod, declared, sizeof(declared));
        if (owner == (uint32_t)c->uid)
            log_error("client pid %d: out of memory for pod %s: billed on its "
                      "own",
                      (int)c->pid, declared);
        else
            log_uid_warn(c->uid,
                         "client pid %d (uid %u) declares pod %s, which "
                         "belongs to uid %u: billed on its own, with none of "
                         "that pod's quota, budget or limits",
                         (int)c->pid, (unsigned)c->uid, declared,
                         (unsigned)owner);
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
        log_warn("client %llu: out of memory: its GPUs are not granted "
                 "together",
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
            if (*p < 0x20 || *p == 0x7f ||
                (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
                return names[i];
    return NULL;
}

/* Tells the process why, once, and closes it: it retries with a back-off
 * (src/client/connection.c), each refusal a line charged to its uid. */
static void refuse_registration(struct client *c, const char *name)
{
    struct msg m = {.type = MSG_REFUSED};

    m.u.refused = (struct msg_refused){REFUSED_BAD_NAME, (uint32_t)c->uid, 0};
    log_uid_warn(c->uid,
                 "client pid %d (uid %u) declares a name with a control "
                 "character (\"%s\"): registration refused",
                 (int)c->pid, (unsigned)c->uid, name);
    client_send(c, &m);
    c->doomed = true;
}

/* Joins c to the node GPUs it names, marking them known in reply; a GPU
 * this scheduler does not manage is said once and left to run unscheduled. */
static void join_gpus(struct scheduler *s, struct client *c,
                      const struct msg_register *reg,
                      struct msg_register_ok *reply,
                      struct quota_actions *quota_out)
{
    uint64_t now = now_ns();

    for (int i = 0; i < reg->n_gpus; i++) {
        c->node_gpu[i] = -1;
        c->billed[i] = c->account;
        for (int g = 0; g < s->n_gpus; g++)
            if (strcmp(reg->gpu_uuids[i], s->gpus[g].uuid) == 0)
                c->node_gpu[i] = g;
        if (c->node_gpu[i] < 0) {
            log_uid_warn(c->uid,
                         "client %llu (pid %d) uses GPU %s, which this "
                         "scheduler does not manage",
                         (unsigned long long)c->id, (int)c->pid,
                         reg->gpu_uuids[i]);
            continue;
        }
        c->billed[i] = client_group_account(s, c, c->node_gpu[i]);
        policy_join(s->policy, c->node_gpu[i], c->slot, c->billed[i], now);
        quota_join(&s->quota, c->node_gpu[i], c->slot, c->billed[i], quota_out);
        footprint_update(s, c->node_gpu[i], c->slot);
        reply->gpu_known[i] = 1;
    }
}

void client_register(struct scheduler *s, struct client *c,
                     const struct msg_register *reg)
{
    struct msg reply = {.type = MSG_REGISTER_OK};
    struct policy_settings_view settings;
    struct account_actions account_out = {0};
    struct quota_actions quota_out = {0};
    struct account_claim claim;
    const char *bad_name = name_with_control(reg);

    if (bad_name) {
        refuse_registration(c, bad_name);
        return;
    }
    /* Groups' accounts are more than one a client: one may need room. */
    if (!scheduler_account_room(s)) {
        log_error("client pid %d: out of memory for its account: closed",
                  (int)c->pid);
        c->doomed = true;
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
    policy_set_gang(s->policy, c->slot, c->gang);
    policy_view_settings(s->policy, &settings);
    reply.u.reg_ok.client_id = c->id;
    reply.u.reg_ok.scheduling_on = settings.anti_thrash;
    reply.u.reg_ok.oversub_default = s->oversub_default;
    c->oversubscribed =
        reg->oversub == OVERSUB_ON ||
        (reg->oversub == OVERSUB_NODE_DEFAULT && s->oversub_default);
    reply.u.reg_ok.n_gpus = reg->n_gpus;
    join_gpus(s, c, reg, &reply.u.reg_ok, &quota_out);
    log_uid_info(c->uid,
                 "client %llu registered: pid %d, uid %u, pod %s (%s), "
                 "container %s, %d GPU(s)%s",
                 (unsigned long long)c->id, (int)c->pid, (unsigned)c->uid,
                 client_pod(c),
                 c->identity.kind == IDENTITY_POD || c->identity.slurm_job[0]
                     ? "from its cgroup"
                     : "declared",
                 c->identity.container_id[0] ? c->identity.container_id
                 : reg->container_name[0]    ? reg->container_name
                                             : "-",
                 reg->n_gpus, c->oversubscribed ? ", oversubscribed" : "");
    client_send(c, &reply);
    c->welcomed = true;
    /* Its limits (UPDATE_CORE_LIMIT, UPDATE_LIMIT) follow REGISTER_OK. */
    client_tell_core_limit(s, c);
    clients_apply_quota(s, &quota_out);
    clients_retell_yield(s, clients_gpu_mask(c));
}
