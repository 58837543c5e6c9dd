/* accounts.c - see accounts.h.
 *
 * All clients of a pod share one account (one per uid for a pod the
 * operator set without naming its owner: pods.h), so a pod's compute limit
 * and memory quota hold however many processes it runs. Who may join a pod
 * is decided before (pods.h); here the limits combine: a tenant's
 * declaration only ever lowers what the operator allows. */
#include "accounts.h"

#include <stdio.h>
#include <string.h>

static void emit(struct account_actions *out, enum account_action_kind kind,
                 const struct account *accounts, int account)
{
    struct account_action a = {.kind = kind, .account = account};
    uint8_t source;

    if (kind == ACCOUNT_LIMITS) {
        for (int g = 0; g < PROTO_MAX_GPUS; g++) {
            a.core_limit[g] =
                (uint8_t)account_core_on(&accounts[account], g, &source);
            a.memory_limit[g] = account_memory_on(&accounts[account], g, &source);
        }
        a.priority = priority_effective(&accounts[account].priority, &source);
        a.min_share = (unsigned)accounts[account].min_share;
        a.idle_swap = idle_swap_effective(&accounts[account].idle_swap,
                                          &source) == IDLE_SWAP_ON;
    }
    out->list[out->n++] = a;
}

/* l in force where the operator's limit is operator_there instead (0: as
 * it is). */
static uint64_t effective_there(const struct limit_setting *l,
                                uint64_t operator_there, uint8_t *source)
{
    struct limit_setting there = *l;

    if (operator_there)
        there.runtime = operator_there;
    return limit_effective(&there, source);
}

uint64_t account_core_on(const struct account *a, int gpu, uint8_t *source)
{
    return effective_there(&a->core, gpu < 0 ? 0 : a->gpu_core[gpu], source);
}

uint64_t account_memory_on(const struct account *a, int gpu, uint8_t *source)
{
    return effective_there(&a->memory, gpu < 0 ? 0 : a->gpu_memory[gpu], source);
}

uint64_t limit_effective(const struct limit_setting *l, uint8_t *source)
{
    uint64_t authority = l->runtime;
    uint8_t from = LIMIT_RUNTIME;

    if (!authority) {
        authority = l->annotation ? l->annotation : l->request;
        from = l->annotation ? LIMIT_ANNOTATION
               : l->request  ? LIMIT_REQUEST
                             : LIMIT_NONE;
    }
    if (l->declared && (!authority || l->declared < authority)) {
        *source = LIMIT_DECLARED;
        return l->declared;
    }
    *source = from;
    return authority;
}

unsigned priority_effective(const struct limit_setting *l, uint8_t *source)
{
    uint64_t authority = l->runtime ? l->runtime : l->annotation;

    *source = l->runtime      ? LIMIT_RUNTIME
              : l->annotation ? LIMIT_ANNOTATION
                              : LIMIT_NONE;
    if (!authority)
        authority = PRIORITY_NORMAL;
    if (l->declared && l->declared < authority) {
        *source = LIMIT_DECLARED;
        return (unsigned)l->declared;
    }
    return (unsigned)authority;
}

unsigned idle_swap_effective(const struct limit_setting *l, uint8_t *source)
{
    *source = l->runtime      ? LIMIT_RUNTIME
              : l->annotation ? LIMIT_ANNOTATION
                              : LIMIT_NONE;
    if (l->runtime)
        return (unsigned)l->runtime;
    return l->annotation ? (unsigned)l->annotation : IDLE_SWAP_ON;
}

/* The record's sources into the account's settings (declared untouched).
 * A share without the pod's privileges is held to its limits and to a
 * priority no higher than normal, without the floor, and its idle memory
 * is swapped like anyone's: keeping it holds others back. */
static void take_sources(struct account *a, const struct pod *record)
{
    static const struct pod none;
    bool privileged;

    if (!record)
        record = &none;
    privileged = pod_privileged(record, a->member);
    a->core.runtime = record->core_limit;
    a->core.annotation = record->annotation_core;
    a->core.request = 0;
    a->memory.runtime = record->memory_limit;
    a->memory.annotation = record->annotation_memory;
    a->memory.request = record->memory_request;
    a->priority.runtime = privileged || record->priority < PRIORITY_NORMAL
                              ? record->priority
                              : PRIORITY_NORMAL;
    a->priority.annotation = record->annotation_priority;
    a->min_share = privileged ? record->min_share : 0;
    a->idle_swap.runtime = privileged || record->idle_swap != IDLE_SWAP_OFF
                               ? record->idle_swap
                               : IDLE_SWAP_UNSET;
    a->idle_swap.annotation = record->annotation_idle_swap;
    for (int g = 0; g < PROTO_MAX_GPUS; g++) {
        a->gpu_core[g] = record->gpu_core_limit[g];
        a->gpu_memory[g] = record->gpu_memory_limit[g];
    }
}

/* Lowers a declared limit: a tenant cannot raise one that another of the
 * pod's clients declared. Returns whether it changed. */
static bool declare(struct limit_setting *l, uint64_t value)
{
    if (!value || (l->declared && l->declared <= value))
        return false;
    l->declared = value;
    return true;
}

int account_of_pod(const struct account *accounts, int n_accounts,
                   const struct pod_id *pod)
{
    for (int i = 0; i < n_accounts; i++)
        if (accounts[i].refs && !pod_id_empty(&accounts[i].pod) &&
            pod_id_equal(&accounts[i].pod, pod))
            return i;
    return -1;
}

static int account_of_share(const struct account *accounts, int n_accounts,
                            const struct account_claim *claim)
{
    if (pod_id_empty(&claim->pod))
        return -1;
    for (int i = 0; i < n_accounts; i++)
        if (accounts[i].refs && accounts[i].member == claim->member &&
            !pod_id_empty(&accounts[i].pod) &&
            pod_id_equal(&accounts[i].pod, &claim->pod))
            return i;
    return -1;
}

int account_attach(struct account *accounts, int n_accounts,
                   const struct account_claim *claim, struct account_actions *out)
{
    int i = account_of_share(accounts, n_accounts, claim);

    if (i >= 0) {
        struct account *a = &accounts[i];
        bool lowered = declare(&a->core, claim->core_declared);
        lowered |= declare(&a->memory, claim->memory_declared);
        lowered |= declare(&a->priority, claim->priority_declared);
        a->refs++;
        if (lowered)
            emit(out, ACCOUNT_LIMITS, accounts, i);
        return i;
    }
    /* A free account exists: there are as many as client slots, and this
     * client is not billed to one yet. The bound only keeps a broken
     * caller inside the table. */
    for (i = 0; i < n_accounts - 1 && accounts[i].refs; i++)
        ;
    struct account *a = &accounts[i];
    memset(a, 0, sizeof(*a));
    a->refs = 1;
    a->pod = claim->pod;
    a->member = claim->member;
    a->core.declared = claim->core_declared;
    a->memory.declared = claim->memory_declared;
    a->priority.declared = claim->priority_declared;
    take_sources(a, claim->record);
    emit(out, ACCOUNT_RESET, accounts, i);
    emit(out, ACCOUNT_LIMITS, accounts, i);
    return i;
}

int account_of_group(const struct account *accounts, int n_accounts,
                     const char *name)
{
    for (int i = 0; i < n_accounts; i++)
        if (accounts[i].refs && !strcmp(accounts[i].group, name))
            return i;
    return -1;
}

/* A group's limits hold on its GPU alone, as the operator's limits on one
 * GPU of a pod do; no tenant declares them, no annotation names them. */
static void take_group(struct account *a, const struct group *g)
{
    memset(a->gpu_core, 0, sizeof(a->gpu_core));
    memset(a->gpu_memory, 0, sizeof(a->gpu_memory));
    a->gpu_core[g->gpu] = g->core;
    a->gpu_memory[g->gpu] = g->memory;
    a->priority.runtime = g->priority;
}

int account_attach_group(struct account *accounts, int n_accounts,
                         const struct group *g, struct account_actions *out)
{
    int i = account_of_group(accounts, n_accounts, g->name);

    if (i >= 0) {
        accounts[i].refs++;
        return i;
    }
    for (i = 0; i < n_accounts - 1 && accounts[i].refs; i++)
        ;
    struct account *a = &accounts[i];
    memset(a, 0, sizeof(*a));
    a->refs = 1;
    snprintf(a->group, sizeof(a->group), "%s", g->name);
    take_group(a, g);
    emit(out, ACCOUNT_RESET, accounts, i);
    emit(out, ACCOUNT_LIMITS, accounts, i);
    return i;
}

void account_set_group(struct account *accounts, int account,
                       const struct group *g, struct account_actions *out)
{
    take_group(&accounts[account], g);
    emit(out, ACCOUNT_LIMITS, accounts, account);
}

void account_detach(struct account *accounts, int account,
                    struct account_actions *out)
{
    if (--accounts[account].refs == 0)
        emit(out, ACCOUNT_RESET, accounts, account);
}

void account_set_runtime(struct account *accounts, int account,
                         enum pod_setting which, int gpu, uint64_t value,
                         struct account_actions *out)
{
    struct account *a = &accounts[account];

    switch (which) {
    case POD_CORE_LIMIT:
        *(gpu < 0 ? &a->core.runtime : &a->gpu_core[gpu]) = value;
        break;
    case POD_MEMORY_LIMIT:
        *(gpu < 0 ? &a->memory.runtime : &a->gpu_memory[gpu]) = value;
        break;
    case POD_PRIORITY:
        a->priority.runtime = value;
        break;
    case POD_MIN_SHARE:
        a->min_share = value;
        break;
    case POD_IDLE_SWAP:
        a->idle_swap.runtime = value;
        break;
    case POD_OWNER:
        break;
    }
    emit(out, ACCOUNT_LIMITS, accounts, account);
}

void account_set_pod(struct account *accounts, int account,
                     const struct pod *record, struct account_actions *out)
{
    take_sources(&accounts[account], record);
    emit(out, ACCOUNT_LIMITS, accounts, account);
}
