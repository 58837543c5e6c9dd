/* scheduler.h - the daemon's state, shared by its connection handlers.
 *
 * The daemon is one event loop (event_loop.h) over: the client socket
 * (clients.c), the control socket (control.c) and a signalfd (main.c). All
 * decisions come from the pure policy (policy.h); this layer turns messages
 * into policy calls and policy actions into messages. */
#ifndef NVSHARE_SCHEDULER_H
#define NVSHARE_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "accounts.h"
#include "event_loop.h"
#include "gpus.h"
#include "policy.h"
#include "protocol.h"
#include "quota.h"

struct client {
    struct scheduler *sched;
    bool used;
    bool registered;
    bool doomed; /* close after the current batch of actions */
    int fd;
    uint64_t id;
    pid_t pid;   /* from SO_PEERCRED, never from the message */
    uid_t uid;
    struct msg_register reg;
    int n_gpus;
    int node_gpu[PROTO_MAX_GPUS]; /* client's GPU index -> node index, -1 */
    int account;
    bool oversubscribed; /* its device allocations are made managed */
    struct frame_reader *reader;
    uint64_t connected_at;  /* a slot is not held without registering */
    uint64_t partial_since; /* a frame begun and not finished since, or 0 */
};

struct scheduler {
    struct event_loop *loop;
    struct policy *policy;   /* read through the views of policy.h */
    struct quota quota;
    struct node_gpu gpus[POLICY_MAX_GPUS];
    int n_gpus;
    struct client clients[POLICY_MAX_CLIENTS];
    struct account accounts[POLICY_MAX_CLIENTS];
    uint64_t next_client_id;
    uint64_t started_at;
    uid_t uid; /* the daemon's own: may use the control socket, as may root */
    uint8_t oversub_default;       /* NVSHARE_ENABLE_OVERSUB of the daemon */
    unsigned oversub_ratio;        /* clients' memory <= this x capacity */
    uint64_t context_overhead;     /* assumed per client until measured */
    uint64_t overhead[POLICY_MAX_GPUS][POLICY_MAX_CLIENTS]; /* measured */
    uint64_t evictable[POLICY_MAX_GPUS][POLICY_MAX_CLIENTS]; /* reported */
    bool limits_scaled[POLICY_MAX_GPUS]; /* core limits sum above 100 % */
    uint64_t stop_check_due; /* holders.c: next look at holders' state */
};

/* clients.c */
void clients_on_listen(struct event_loop *loop, int fd, void *data);
/* Carry out the pure modules' actions. A client that cannot be sent to is
 * only marked doomed; clients_reap() closes it. */
void clients_apply(struct scheduler *s, const struct policy_actions *actions);
void clients_apply_quota(struct scheduler *s, const struct quota_actions *actions);
void clients_apply_accounts(struct scheduler *s,
                            const struct account_actions *actions);
void clients_broadcast(struct scheduler *s, uint16_t type);
/* Closes the doomed clients, and those their departure dooms. Called once
 * per event-loop iteration, so no handler sees a client vanish under it.
 * Returns whether it closed any (their departures changed the policy). */
bool clients_reap(struct scheduler *s);
/* Dooms connections that stall: not registered, or in the middle of a
 * frame, CLIENT_STALL_NS after they started. Returns when the next one
 * would be due (0: none pending). */
#define CLIENT_STALL_NS 2000000000ull /* 2 s */
uint64_t clients_expire_stalled(struct scheduler *s, uint64_t now);
int clients_count(const struct scheduler *s);

/* footprints.c */
/* Recomputes the client's footprint on node gpu and tells the policy. */
void footprint_update(struct scheduler *s, int gpu, int slot);
/* Samples running clients' context overheads from NVML, at most every 2 s
 * (nothing where NVML cannot tell). */
void footprint_sample_overheads(struct scheduler *s, uint64_t now);
/* Forgets a slot's measurements and reports before it is reused. */
void footprint_forget(struct scheduler *s, int slot);

/* holders.c */
/* Whether the process is stopped (SIGSTOP, ptrace): state T or t. */
bool process_stopped(pid_t pid);
/* Revokes, into out, the GPUs of stopped processes that run where someone
 * waits or that drain; looks every 250 ms while any such runner exists.
 * Returns when to look next (0: at the next tick). */
uint64_t holders_revoke_stopped(struct scheduler *s, uint64_t now,
                                struct policy_actions *out);

/* control.c */
void control_on_listen(struct event_loop *loop, int fd, void *data);

#endif
