/* client_conn.h - the client runtime as the memory ledger sees it.
 *
 * memory.c includes this header and, of the rest of the runtime, only the
 * public nvshare_client.h: it sends
 * with conn_send() and reads the process's settings, and it hears the
 * connection's events through memory_observer, which nvshare_client_start()
 * hands to the connection. The gates and the connection thread never name
 * memory.c, so the dependency goes one way. */
#ifndef NVSHARE_CLIENT_CONN_H
#define NVSHARE_CLIENT_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol.h"

/* The process's settings, read from the environment once, at first use. */
struct client_settings {
    uint64_t memory_limit; /* NVSHARE_GPU_MEMORY_LIMIT; 0 = none */
    uint8_t core_limit;    /* NVSHARE_GPU_CORE_LIMIT; 0 = none */
    uint8_t priority;      /* NVSHARE_PRIORITY; 0 = none (can only lower
                               the pod's) */
    int oversub;           /* NVSHARE_ENABLE_OVERSUB: 0, 1, or -1 (unset) */
    bool fail_closed;      /* NVSHARE_FAIL_CLOSED */
    uint64_t idle_release_ns;
    uint64_t reconnect_ns;
    char pod_namespace[PROTO_NAME_MAX];
    char pod_name[PROTO_NAME_MAX];
    char container_name[PROTO_NAME_MAX];
    char job_id[PROTO_NAME_MAX];
    char pod_label[2 * PROTO_NAME_MAX]; /* "namespace/pod" or "-", for logs */
};

const struct client_settings *client_settings(void);

/* Sends m to the scheduler if connected; 0 or a negative proto_error.
 * Takes the connection lock: never call it holding another client lock. */
int conn_send(const struct msg *m);

/* What the connection tells the memory ledger. All but before_lock_request
 * run on the client thread, none with the connection lock held. */
struct conn_observer {
    void (*connecting)(void); /* a first connection attempt starts */
    void (*registered)(int n_gpus, const uint8_t *managed);
    void (*disconnected)(void);           /* also: an attempt failed */
    void (*message)(const struct msg *m); /* UPDATE_LIMIT, MEM_GRANT, MEM_RECLAIM */
    void (*tick)(int n_gpus); /* report allocated bytes that changed */
    /* On an application thread about to wait at gpu's gate: a lock request
     * must not reach the scheduler before the footprint it is admitted by. */
    void (*before_lock_request)(int gpu);
    void (*after_fork)(void); /* in a forked child */
    /* Before an EVICT's swap-out of gpu: false when it must not run, as
     * its host copy would not fit the process's memory cgroup (the ledger
     * has then told the scheduler that the memory stays). */
    bool (*swap_out_fits)(int gpu);
};

extern const struct conn_observer memory_observer;

#endif
