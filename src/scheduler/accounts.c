/* accounts.c - pods as billing and limit units.
 *
 * All clients of a pod share one account, so a pod's compute limit and
 * memory quota hold however many processes it runs. An effective limit is
 * the run-time one (set by an operator or the pod's annotation) if any, else
 * the one the pod's clients declared at registration; removing the run-time
 * limit falls back to the declared one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "scheduler.h"

uint64_t limit_effective(const struct limit_setting *l, uint8_t *source)
{
    if (l->runtime) {
        *source = LIMIT_RUNTIME;
        return l->runtime;
    }
    *source = l->declared ? LIMIT_DECLARED : LIMIT_NONE;
    return l->declared;
}

void account_apply_limits(struct scheduler *s, int index)
{
    const struct account *a = &s->accounts[index];
    struct quota_actions out = {0};
    uint8_t source;

    policy_set_core_limit(s->policy, index,
                          (unsigned)limit_effective(&a->core, &source), now_ns());
    quota_set_limit(&s->quota, index, limit_effective(&a->memory, &source), &out);
    clients_apply_quota(s, &out);
}

int account_attach(struct scheduler *s, const struct msg_register *reg)
{
    int free_index = -1;

    for (int i = 0; i < POLICY_MAX_CLIENTS; i++) {
        struct account *a = &s->accounts[i];
        if (!a->refs) {
            if (free_index < 0)
                free_index = i;
            continue;
        }
        if (reg->pod_name[0] && !strcmp(a->pod_name, reg->pod_name) &&
            !strcmp(a->pod_namespace, reg->pod_namespace)) {
            a->refs++;
            /* Clients of one pod declare the same environment; a later,
             * different declaration updates it. */
            if ((reg->core_limit && reg->core_limit != a->core.declared) ||
                (reg->memory_limit && reg->memory_limit != a->memory.declared)) {
                if (reg->core_limit)
                    a->core.declared = reg->core_limit;
                if (reg->memory_limit)
                    a->memory.declared = reg->memory_limit;
                account_apply_limits(s, i);
            }
            return i;
        }
    }
    /* There are as many accounts as client slots, so one is free. */
    struct account *a = &s->accounts[free_index];
    memset(a, 0, sizeof(*a));
    a->refs = 1;
    if (reg->pod_name[0]) {
        memcpy(a->pod_namespace, reg->pod_namespace, sizeof(a->pod_namespace));
        memcpy(a->pod_name, reg->pod_name, sizeof(a->pod_name));
    }
    a->core.declared = reg->core_limit;
    a->memory.declared = reg->memory_limit;
    policy_reset_account(s->policy, free_index);
    quota_reset_account(&s->quota, free_index);
    account_apply_limits(s, free_index);
    return free_index;
}

void account_detach(struct scheduler *s, int account)
{
    if (--s->accounts[account].refs == 0) {
        policy_reset_account(s->policy, account);
        quota_reset_account(&s->quota, account);
    }
}

int account_find(const struct scheduler *s, const char *target, char *err,
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
