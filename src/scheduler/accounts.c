/* accounts.c - see accounts.h.
 *
 * All clients of a pod share one account, so a pod's compute limit and
 * memory quota hold however many processes it runs. An effective limit is
 * the run-time one (set by an operator or the pod's annotation) if any, else
 * the one the pod's clients declared at registration; removing the run-time
 * limit falls back to the declared one. */
#include "accounts.h"

#include <string.h>

static void emit(struct account_actions *out, enum account_action_kind kind,
                 const struct account *accounts, int account)
{
    struct account_action a = {.kind = kind, .account = account};
    uint8_t source;

    if (kind == ACCOUNT_LIMITS) {
        a.core_limit = (unsigned)limit_effective(&accounts[account].core, &source);
        a.memory_limit = limit_effective(&accounts[account].memory, &source);
    }
    out->list[out->n++] = a;
}

uint64_t limit_effective(const struct limit_setting *l, uint8_t *source)
{
    if (l->runtime) {
        *source = LIMIT_RUNTIME;
        return l->runtime;
    }
    *source = l->declared ? LIMIT_DECLARED : LIMIT_NONE;
    return l->declared;
}

int account_attach(struct account *accounts, int n_accounts,
                   const struct msg_register *reg, struct account_actions *out)
{
    int free_index = -1;

    for (int i = 0; i < n_accounts; i++) {
        struct account *a = &accounts[i];
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
                emit(out, ACCOUNT_LIMITS, accounts, i);
            }
            return i;
        }
    }
    struct account *a = &accounts[free_index];
    memset(a, 0, sizeof(*a));
    a->refs = 1;
    if (reg->pod_name[0]) {
        memcpy(a->pod_namespace, reg->pod_namespace, sizeof(a->pod_namespace));
        memcpy(a->pod_name, reg->pod_name, sizeof(a->pod_name));
    }
    a->core.declared = reg->core_limit;
    a->memory.declared = reg->memory_limit;
    emit(out, ACCOUNT_RESET, accounts, free_index);
    emit(out, ACCOUNT_LIMITS, accounts, free_index);
    return free_index;
}

void account_detach(struct account *accounts, int account,
                    struct account_actions *out)
{
    if (--accounts[account].refs == 0)
        emit(out, ACCOUNT_RESET, accounts, account);
}

void account_set_runtime(struct account *accounts, int account,
                         bool core, uint64_t value, struct account_actions *out)
{
    struct account *a = &accounts[account];

    (core ? &a->core : &a->memory)->runtime = value;
    emit(out, ACCOUNT_LIMITS, accounts, account);
}
