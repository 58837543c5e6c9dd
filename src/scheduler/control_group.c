/* control_group.c - nvsharectl set group and reset group: pods that draw
 * on one budget on one GPU (groups.h).
 *
 * A group is the operator's word, like a pod's limits: it holds whether its
 * pods are connected or not and survives restarts (the state file); no
 * tenant names, joins or changes one. The DRA driver sets one for each
 * claim reserved for several pods (docs/dra.md). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "parse.h"
#include "scheduler.h"

/* The group set describes, its members named as control_pod_find reads
 * them. 0, or an errno value with the reason in reply. */
static int group_of(const struct scheduler *s,
                    const struct msg_ctl_set_group *set, struct group *g,
                    struct msg_ctl_reply *reply)
{
    int account;

    memset(g, 0, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "%s", set->name);
    if ((g->gpu = control_find_gpu(s, set->gpu)) < 0) {
        snprintf(reply->text, sizeof(reply->text),
                 "group %s: no GPU '%s' (give an index 0-%d or a UUID)",
                 g->name, set->gpu, s->n_gpus - 1);
        return ENOENT;
    }
    g->memory = set->memory_limit;
    g->core = set->core_limit;
    g->priority = set->priority;
    g->n_members = set->n_members;
    for (int m = 0; m < set->n_members; m++)
        if (control_pod_find(s, set->members[m], &g->members[m], &account,
                             reply->text, sizeof(reply->text)))
            return ENOENT;
    return 0;
}

void control_set_group(struct scheduler *s, const struct msg_ctl_set_group *set,
                       struct msg_ctl_reply *reply)
{
    struct account_actions out = {0};
    char memory[32] = "none", err[PROTO_TEXT_MAX];
    struct group g;

    if ((reply->status = group_of(s, set, &g, reply)))
        return;
    if (groups_set(&s->state.groups, &g, err, sizeof(err))) {
        reply->status = EINVAL;
        snprintf(reply->text, sizeof(reply->text), "group %s: %.400s", g.name,
                 err);
        return;
    }
    scheduler_save_state(s);
    int account = account_of_group(s->accounts, s->table_size, g.name);
    if (account >= 0) {
        account_set_group(s->accounts, account, &g, &out);
        clients_apply_accounts(s, &out);
    }
    clients_regroup(s);
    if (g.memory)
        format_size(g.memory, memory, sizeof(memory));
    snprintf(reply->text, sizeof(reply->text),
             "group %s: %d pod(s) billed together on gpu %d: memory limit %s, "
             "core limit %u%s",
             g.name, g.n_members, g.gpu, memory, (unsigned)g.core,
             g.core ? " %" : " (none)");
    log_info("%s", reply->text);
}

void control_reset_group(struct scheduler *s, const char *name,
                         struct msg_ctl_reply *reply)
{
    if (!groups_remove(&s->state.groups, name)) {
        reply->status = ENOENT;
        snprintf(reply->text, sizeof(reply->text), "no group '%.200s'", name);
        return;
    }
    scheduler_save_state(s);
    clients_regroup(s);
    snprintf(reply->text, sizeof(reply->text),
             "group %s removed: its pods are billed on their own", name);
    log_info("%s", reply->text);
}
