/* accounts.h - pods as billing and limit units.
 *
 * Pure like policy.h and quota.h: no I/O, no clock. Functions change the
 * accounts and return actions (what the policy and the quota arbiter must
 * be told); clients.c carries them out, so limits flow one way: accounts ->
 * policy / quota -> clients.c -> messages. */
#ifndef NVSHARE_ACCOUNTS_H
#define NVSHARE_ACCOUNTS_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol.h" /* struct msg_register, PROTO_NAME_MAX, LIMIT_* */

/* A limit as its two sources set it; the run-time one wins. */
struct limit_setting {
    uint64_t declared; /* from a client's registration (environment); 0 = none */
    uint64_t runtime;  /* from nvsharectl or the pod's annotation; 0 = none */
};

/* What a pod is billed and limited as. Clients without a pod name are an
 * account each. Indexes are the policy's and the quota's account numbers;
 * there are as many accounts as client slots, so attaching always finds one. */
struct account {
    int refs; /* registered clients; 0 = free */
    char pod_namespace[PROTO_NAME_MAX];
    char pod_name[PROTO_NAME_MAX];
    struct limit_setting core;   /* percent */
    struct limit_setting memory; /* bytes per GPU */
};

enum account_action_kind {
    ACCOUNT_RESET,  /* forget the account's usage: its number is new or freed */
    ACCOUNT_LIMITS, /* the effective limits are core_limit and memory_limit */
};

struct account_action {
    enum account_action_kind kind;
    int account;
    unsigned core_limit;   /* percent; 0 = none */
    uint64_t memory_limit; /* bytes per GPU; 0 = none */
};

struct account_actions {
    int n;
    struct account_action list[2]; /* the most one call emits */
};

/* A client registered: returns its account (the pod's, or a new one). */
int account_attach(struct account *accounts, int n_accounts,
                   const struct msg_register *reg, struct account_actions *out);

/* A registered client left; the account is freed with its last client. */
void account_detach(struct account *accounts, int account,
                    struct account_actions *out);

/* Sets the account's run-time core (percent) or memory (bytes) limit; 0
 * removes it, falling back to the declared one. */
void account_set_runtime(struct account *accounts, int account,
                         bool core, uint64_t value, struct account_actions *out);

/* The limit in force and where it comes from (LIMIT_RUNTIME, LIMIT_DECLARED
 * or LIMIT_NONE). */
uint64_t limit_effective(const struct limit_setting *l, uint8_t *source);

#endif
