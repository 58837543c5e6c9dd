/* scheduler.h - the daemon's state, shared by its connection handlers.
 *
 * The daemon is one event loop (event_loop.h) over: the client socket
 * (clients.c), the control socket (control.c) and a signalfd (main.c). All
 * decisions come from the pure policy (policy.h); this layer turns messages
 * into policy calls and policy actions into messages. */
#ifndef NVSHARE_SCHEDULER_H
#define NVSHARE_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "event_loop.h"
#include "gpus.h"
#include "policy.h"
#include "protocol.h"

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
    struct frame_reader *reader;
};

struct scheduler {
    struct event_loop *loop;
    struct policy policy;
    struct node_gpu gpus[POLICY_MAX_GPUS];
    int n_gpus;
    struct client clients[POLICY_MAX_CLIENTS];
    uint64_t next_client_id;
    uint64_t started_at;
    uid_t uid; /* the daemon's own: may use the control socket, as may root */
};

/* clients.c */
void clients_on_listen(struct event_loop *loop, int fd, void *data);
void clients_apply(struct scheduler *s, const struct policy_actions *actions);
void clients_broadcast(struct scheduler *s, uint16_t type);
int clients_count(const struct scheduler *s);

/* control.c */
void control_on_listen(struct event_loop *loop, int fd, void *data);

#endif
