/* clients_groups.c - which account a client is billed to, GPU by GPU.
 *
 * A client is billed to its pod's account (accounts.h), except on a GPU
 * where its pod is in a group (groups.h): there, to the group's account,
 * which the group's pods share. The policy and the quota arbiter bill by
 * the account they were given per (client, GPU) already (policy_join,
 * quota_join), so a group changes that number and nothing else: budgets,
 * quotas and windows hold for whatever account a member has. */
#include <string.h>

#include "clients_internal.h"
#include "clock.h"
#include "log.h"
#include "scheduler.h"

int client_group_account(struct scheduler *s, struct client *c, int g)
{
    const struct group_table *t = &s->state.groups;
    int gi = groups_of(t, &s->accounts[c->account].pod, g);
    struct account_actions out = {0};

    if (gi < 0)
        return c->account;
    if (account_of_group(s->accounts, s->table_size, t->list[gi].name) < 0 &&
        !scheduler_account_room(s)) {
        log_error("client %llu: out of memory for group %s: billed as its "
                  "pod alone on gpu %d",
                  (unsigned long long)c->id, t->list[gi].name, g);
        return c->account;
    }
    int a = account_attach_group(s->accounts, s->table_size, &t->list[gi], &out);
    clients_apply_accounts(s, &out);
    return a;
}

void client_leave_groups(struct scheduler *s, struct client *c)
{
    struct account_actions out = {0};

    for (int i = 0; i < c->n_gpus; i++) {
        if (c->node_gpu[i] >= 0 && c->billed[i] != c->account)
            account_detach(s->accounts, c->billed[i], &out);
        c->billed[i] = c->account;
    }
    clients_apply_accounts(s, &out);
}

/* Whether c's billing on its GPU i is what the groups say. */
static bool billed_right(const struct scheduler *s, const struct client *c, int i)
{
    const struct group_table *t = &s->state.groups;
    int gi = groups_of(t, &s->accounts[c->account].pod, c->node_gpu[i]);

    if (gi < 0)
        return c->billed[i] == c->account;
    return !strcmp(s->accounts[c->billed[i]].group, t->list[gi].name);
}

/* Moves c's billing on its GPU i to where the groups say. */
static void rebill(struct scheduler *s, struct client *c, int i,
                   struct quota_actions *quota_out)
{
    struct account_actions out = {0};
    int g = c->node_gpu[i], from = c->billed[i];
    int to = client_group_account(s, c, g);

    policy_move(s->policy, g, c->slot, to, now_ns());
    quota_move(&s->quota, g, c->slot, to, quota_out);
    c->billed[i] = to;
    if (from != c->account)
        account_detach(s->accounts, from, &out);
    clients_apply_accounts(s, &out);
    log_uid_info(c->uid, "client %llu: billed on gpu %d to %s%s",
                 (unsigned long long)c->id, g,
                 s->accounts[to].group[0] ? "group " : "its pod",
                 s->accounts[to].group);
}

void clients_regroup(struct scheduler *s)
{
    struct quota_actions quota_out = {0};
    uint32_t gpus = 0;

    /* By slot: a growing table (client_group_account) keeps the clients
     * where they are. */
    for (int slot = 0; slot < s->table_size; slot++) {
        struct client *c = s->clients[slot];
        bool moved = false;
        if (!c->used || !c->registered)
            continue;
        for (int i = 0; i < c->n_gpus; i++) {
            if (c->node_gpu[i] < 0 || billed_right(s, c, i))
                continue;
            rebill(s, c, i, &quota_out);
            gpus |= 1u << c->node_gpu[i];
            moved = true;
        }
        if (moved)
            client_tell_core_limit(s, c);
    }
    clients_apply_quota(s, &quota_out);
    clients_retell_yield(s, gpus);
}
