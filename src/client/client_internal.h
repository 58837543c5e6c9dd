/* client_internal.h - what the gates (gate.c), the connection thread
 * (connection.c) and the lifecycle (client.c) share; not exported, and not
 * for memory.c (which has client_conn.h).
 *
 * All shared state is guarded by client.mu, except the gates (atomics) and
 * the per-thread slots (single writer). */
#ifndef NVSHARE_CLIENT_INTERNAL_H
#define NVSHARE_CLIENT_INTERNAL_H

#include <pthread.h>

#include "client_conn.h"
#include "nvshare_client.h"
#include "protocol.h"

struct gpu_lock {
    bool known; /* the scheduler manages this GPU */
    bool held;
    bool requested;   /* REQ_LOCK sent, LOCK_OK not yet received */
    bool in_use_sent; /* LOCK_IN_USE sent under the current lease */
    uint32_t lease;
    uint64_t grants;
    uint64_t seen_submits; /* idle detection: submissions at last poll */
    uint64_t quiet_since;  /* when seen_submits last changed */
    bool complete_seen;    /* its work had completed at the last poll */
    bool swapped_out;      /* its memory went to the host on EVICT */
    bool swap_in_due;      /* a swap-out since the last swap-in moved bytes */
    uint64_t load_busy_ns, load_span_ns; /* totals at the last LOAD */
    uint64_t load_sent_at;               /* 0: no report yet */
    /* Giving the lock back after DROP_LOCK, which the drain beat announces
     * (DRAINING) from drain_since on (0: not draining). */
    uint64_t drain_since;
    uint64_t beat_sent_at;
    /* A gang rank's drain (see gate_agree_drain_point): DRAIN_POINT sent,
     * DRAIN_TO not received yet; then, while catch_up_to[gpu] is set,
     * launching up to the gang's drain point until catch_up_until. */
    bool agreeing;
    uint64_t catch_up_until;
};

struct client_state {
    pthread_mutex_t mu;
    pthread_cond_t changed; /* connection, scheduling or a lock changed */
    pthread_cond_t beat;    /* a drain began or ended, or stop */
    bool started;
    bool attempted; /* the first connection attempt has finished */
    bool connected; /* registered with the scheduler */
    bool scheduling_on;
    bool warned_absent;
    bool warned_refused; /* since the last registration */
    unsigned registrations;
    bool fail_closed;
    bool membarrier_ok;
    int fd;
    int wake_fd;     /* eventfd: stop request */
    int catch_up_fd; /* eventfd: a catch-up reached its drain point */
    pthread_t thread;
    pthread_t beat_thread;
    bool beat_running;
    int n_gpus;
    char uuids[NVSHARE_MAX_GPUS][PROTO_UUID_MAX];
    struct gpu_lock gpus[NVSHARE_MAX_GPUS];
    struct nvshare_client_ops ops;
    uint64_t idle_release_ns;
    /* UPDATE_YIELD's terms (0: none); the shorter of the two settings
     * applies. */
    _Atomic uint64_t yield_idle_release_ns;
    _Atomic uint64_t yield_max_backlog_ns;
    uint64_t reconnect_ns;
    uint64_t retry_ns; /* after a refusal: doubles up to RETRY_MAX_NS */
    struct msg_register reg;
    uint8_t core_limit; /* the pod's, as the scheduler last told (percent;
                           0: none): paced to while it is away */
    bool paced_shut;    /* while away: in the shut part of a pace slice */
    int oversub_env;    /* NVSHARE_ENABLE_OVERSUB: 0, 1, or -1 (unset) */
    bool oversub_node;  /* the scheduler's default, from REGISTER_OK */
};

extern struct client_state client;

/* gate.c: the application threads' side. */
void gate_set(int gpu, bool open);
/* Opens the gates that may be open now; with client.mu held. */
void gates_open_for_current_mode(void);
/* Submissions begun by all threads, for idle detection. */
uint64_t gate_submits_total(void);
uint64_t gate_close_and_drain(int gpu, uint64_t *drained_at);
void gate_release_lease(int gpu, uint32_t lease, const char *why);
/* Gang drains (docs/protocol.md, Gang drains): on DROP_GANG_LOCK,
 * closes the gate and answers DRAIN_POINT; on DRAIN_TO, drains at once or
 * opens the gate until the point is reached; catch-ups that reached their
 * point or ran out of time drain (the client thread calls it after every
 * wake-up) and the time until the next one runs out (0: none). */
void gate_agree_drain_point(int gpu, uint32_t lease);
void gate_drain_to(int gpu, uint32_t lease, uint64_t collectives);
uint64_t gate_finish_catch_ups(void);
/* Forgets agreements and catch-ups in progress (the lock is gone); with
 * client.mu held. */
void gate_forget_drains_locked(void);
/* The drain beat thread: DRAINING every DRAIN_BEAT_NS while a drain after
 * DROP_LOCK lasts, so that the scheduler tells a long drain from a stuck
 * process. Started and stopped with the client thread. */
#define DRAIN_BEAT_NS 250000000ull /* 250 ms */
/* How long a gang rank may run on to reach its gang's drain point: a
 * training step, with room; past it the rank drains where it is. */
#define CATCH_UP_MAX_NS 2000000000ull /* 2 s */
void *gate_drain_beat(void *arg);

/* connection.c: the client thread. */
/* Sends m with client.mu held; 0, -1 when not connected, or a proto_error. */
int conn_send_locked(const struct msg *m);
void conn_observe(const struct conn_observer *observer);
void conn_before_lock_request(int gpu);
void *conn_thread(void *arg);

#endif
