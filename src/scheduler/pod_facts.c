/* pod_facts.c - what the pod watcher tells of this node's pods.
 *
 * nvshare-pod-watcher (src/pod-watcher) lists and watches the API server
 * and sends each pod's name, annotations and gpu-memory request over the
 * control socket, so HTTP, TLS and JSON never run in this loop. Here the
 * facts go into the pod records (pods.h, which decide what an annotation
 * change does to the operator's override) and from there into the
 * accounts of the pod's running clients. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "scheduler.h"

/* The record's limits and name into the account of its running clients. */
static void update_account(struct scheduler *s, const struct pod_id *id,
                           const struct pod *record)
{
    int account = account_of_pod(s->accounts, s->table_size, id);
    struct account_actions out = {0};

    if (account < 0)
        return;
    if (record)
        s->accounts[account].pod = record->id;
    account_set_pod(s->accounts, account, record, &out);
    clients_apply_accounts(s, &out);
}

static void learn(struct scheduler *s, const struct msg_pod_facts *f,
                  struct msg_ctl_reply *reply)
{
    char name[2 * PROTO_NAME_MAX + 8];
    struct pod_id id = {0};
    struct pod before = {0}, *p;
    unsigned dropped;

    if (!f->pod_uid[0] || !f->pod_name[0]) {
        reply->status = EINVAL;
        snprintf(reply->text, sizeof(reply->text),
                 "pod facts need a UID and a name");
        return;
    }
    snprintf(id.uid, sizeof(id.uid), "%s", f->pod_uid);
    if ((p = pods_find(&s->state.pods, &id)))
        before = *p;
    if (!(p = pods_learn(&s->state.pods, f, &dropped))) {
        reply->status = ENOMEM;
        snprintf(reply->text, sizeof(reply->text), "out of memory");
        return;
    }
    pod_id_format(&p->id, name, sizeof(name));
    if (dropped)
        scheduler_save_state(s);
    if (dropped & POD_FACT_CORE_UNREADABLE)
        log_info("pod %s: its core-limit annotation changed: the operator's "
                 "override ends",
                 name);
    if (dropped & POD_FACT_MEMORY_UNREADABLE)
        log_info("pod %s: its memory-limit annotation changed: the operator's "
                 "override ends",
                 name);
    if (dropped & POD_FACT_PRIORITY_UNREADABLE)
        log_info("pod %s: its priority annotation changed: the operator's "
                 "override ends",
                 name);
    if (dropped & POD_FACT_IDLE_SWAP_UNREADABLE)
        log_info("pod %s: its idle-swap annotation changed: the operator's "
                 "override ends",
                 name);
    /* One line when something changed, not one per status update. */
    if (!before.listed || before.annotation_core != p->annotation_core ||
        before.annotation_memory != p->annotation_memory ||
        before.memory_request != p->memory_request ||
        before.annotation_priority != p->annotation_priority ||
        before.annotation_idle_swap != p->annotation_idle_swap)
        log_info("pod %s (uid %s): core-limit annotation %llu%%, memory-limit "
                 "annotation %llu bytes, gpu-memory request %llu bytes, "
                 "priority annotation class %llu, idle-swap annotation %s "
                 "(0 = none)",
                 name, p->id.uid, (unsigned long long)p->annotation_core,
                 (unsigned long long)p->annotation_memory,
                 (unsigned long long)p->memory_request,
                 (unsigned long long)p->annotation_priority,
                 p->annotation_idle_swap == IDLE_SWAP_OFF  ? "off"
                 : p->annotation_idle_swap == IDLE_SWAP_ON ? "on"
                                                           : "0");
    update_account(s, &p->id, p);
    snprintf(reply->text, sizeof(reply->text), "pod %.200s known", name);
}

/* Drops a pod's settings: it was deleted, or a re-list did not name it. */
static void forget(struct scheduler *s, const struct pod_id *id, const char *why)
{
    char name[2 * PROTO_NAME_MAX + 8];
    struct pod *p = pods_find(&s->state.pods, id);

    if (!p)
        return;
    pod_id_format(&p->id, name, sizeof(name));
    log_info("pod %s (uid %s) %s: its settings are dropped", name, id->uid, why);
    if (pods_gone(&s->state.pods, id))
        scheduler_save_state(s);
    update_account(s, id, NULL);
}

void pod_facts_handle(struct scheduler *s, const struct msg *m,
                      struct msg_ctl_reply *reply)
{
    struct pod_id id = {0};

    switch (m->type) {
    case MSG_CTL_POD_FACTS:
        learn(s, &m->u.facts, reply);
        return;
    case MSG_CTL_POD_GONE:
        snprintf(id.uid, sizeof(id.uid), "%s", m->u.facts.pod_uid);
        forget(s, &id, "was deleted");
        snprintf(reply->text, sizeof(reply->text), "pod uid %s gone", id.uid);
        return;
    case MSG_CTL_POD_SYNC_BEGIN:
        pods_mark_stale(&s->state.pods);
        snprintf(reply->text, sizeof(reply->text), "re-list begins");
        return;
    case MSG_CTL_POD_SYNC_END:
        /* Backwards: forgetting moves the last record into the hole. */
        for (size_t i = s->state.pods.n; i-- > 0;) {
            if (i >= s->state.pods.n ||
                !pod_gone_after_relist(&s->state.pods.list[i]))
                continue;
            id = s->state.pods.list[i].id;
            forget(s, &id, "is no longer on this node");
        }
        snprintf(reply->text, sizeof(reply->text), "re-list done");
        return;
    }
}
