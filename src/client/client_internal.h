/* client_internal.h - the bottom of the client runtime: the state that the
 * gates (gate.c), the connection thread (connection.c) and the lifecycle
 * (client.c) all read, defined in state.c; not exported, and not for
 * memory.c (which has client_conn.h).
 *
 * The layers, each calling only those below it:
 *
 *   client.c       lifecycle and public API: starts the others, wires them
 *   connection.c   the client thread: the scheduler's messages in, the
 *                  gate's transitions out (gate.h)
 *   gate.c         the gates and the GPU locks' state machine; it sends
 *                  through the function client.c installs, so it never
 *                  names the connection
 *   state.c        this header's state; settings.c, the settings
 *
 * What one layer alone changes lives in it: the locks' states in gate.c,
 * the socket, back-off and per-GPU reports in connection.c. What is here
 * is the mode the gates follow (runs_unscheduled in gate.c) and what
 * several layers set up or read. All of it is guarded by client.mu. */
#ifndef NVSHARE_CLIENT_INTERNAL_H
#define NVSHARE_CLIENT_INTERNAL_H

#include <pthread.h>

#include "client_conn.h"
#include "nvshare_client.h"

struct client_state {
    pthread_mutex_t mu;
    pthread_cond_t changed; /* connection, scheduling or a lock changed */
    /* The mode: written by client.c (started) and the connection (the
     * rest), read by the gates. */
    bool started;
    bool attempted; /* the first connection attempt has finished */
    bool connected; /* registered with the scheduler */
    bool scheduling_on;
    bool fail_closed;
    bool paced_shut; /* while away: in the shut part of a pace slice */
    bool known[NVSHARE_MAX_GPUS]; /* the scheduler manages this GPU */
    /* Set at start. */
    int n_gpus;
    struct nvshare_client_ops ops;
    int oversub_env;   /* NVSHARE_ENABLE_OVERSUB: 0, 1, or -1 (unset) */
    bool oversub_node; /* the scheduler's default, from REGISTER_OK */
};

extern struct client_state client;

#endif
