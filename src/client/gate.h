/* gate.h - the gates and the GPU locks, as the layers above see them.
 *
 * gate.c alone owns each lock's state (requested, held, its lease, a drain
 * in progress); the connection thread drives it through the transitions
 * below, named after what happened, and it answers the scheduler through
 * the functions installed by gate_start(). Calls go one way: down. */
#ifndef NVSHARE_GATE_H
#define NVSHARE_GATE_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol.h"

/* How the gate reaches the scheduler; installed before any thread uses the
 * gate. */
struct gate_link {
    /* Sends m with client.mu held: 0, -1 when not connected, or a
     * proto_error. */
    int (*send_locked)(const struct msg *m);
    /* On an application thread about to wait at gpu's gate, before it
     * takes client.mu (conn_observer.before_lock_request). */
    void (*before_lock_request)(int gpu);
};

/* ---- lifecycle (client.c) ------------------------------------------------ */

/* Installs link and readies the exact close (membarrier) and the catch-up
 * wake-up; with client.mu held. -1 without the eventfd. */
int gate_start(const struct gate_link *link);
/* The drain beat thread: DRAINING every DRAIN_BEAT_NS while a drain after
 * DROP_LOCK lasts, so that the scheduler tells a long drain from a stuck
 * process. False if it could not start. */
#define DRAIN_BEAT_NS 250000000ull /* 250 ms */
bool gate_start_beat(void);
/* Stops the beat and closes the wake-up; then every gate is open. */
void gate_stop(void);
/* In a forked child: no lock, no thread, every gate closed (the slow path
 * asks runs_unscheduled()). */
void gate_after_fork(void);

/* ---- the connection's transitions ---------------------------------------- */

/* LOCK_OK: gpu is held under lease; the gate opens. */
void gate_lock_granted(int gpu, uint32_t lease);
/* LOCK_OK, but gpu's memory could not all come back (no room on the GPU):
 * the lock goes back at once (LOCK_RELEASED), the gate stays shut, and the
 * threads waiting at it ask again. */
void gate_lock_declined(int gpu, uint32_t lease);
/* Swaps (connection.c): before EVICT's swap-out, gpu's memory is out and
 * its gate stays shut whatever the mode (a scheduler gone, scheduling
 * off); once a swap-in brought all of it back, the gate follows the mode
 * again. */
void gate_memory_out(int gpu);
void gate_memory_back(int gpu);
bool gate_memory_is_out(int gpu);
/* Whether a thread waits at gpu's gate for memory that is out while no
 * lock will come (no scheduler, scheduling off): the connection thread
 * then brings it back by itself. gate_wake_fd() becomes readable when a
 * thread starts waiting so. */
bool gate_memory_wanted(int gpu);
/* Gives gpu back under lease, if it is still the current lease: closes the
 * gate, waits out submissions in flight, drains and answers LOCK_RELEASED.
 * why is for the log: DROP_LOCK ("preempted"), idle release. */
void gate_drop_asked(int gpu, uint32_t lease, const char *why);
/* Gang drains (docs/protocol.md, Gang drains): on DROP_GANG_LOCK, closes
 * the gate and answers DRAIN_POINT; on DRAIN_TO, drains at once or opens
 * the gate until the point is reached. */
void gate_gang_drop_asked(int gpu, uint32_t lease);
void gate_drain_to(int gpu, uint32_t lease, uint64_t collectives);
/* How long a gang rank may run on to reach its gang's drain point: a
 * training step, with room; past it the rank drains where it is. */
#define CATCH_UP_MAX_NS 2000000000ull /* 2 s */
/* Drains the catch-ups that reached their point or ran out of time (after
 * every wake-up of the client thread) and returns the time until the next
 * one runs out (0: none). gate_wake_fd() becomes readable when one
 * reaches its point. */
uint64_t gate_finish_catch_ups(void);
/* An eventfd, readable when the gates have work for the client thread. */
int gate_wake_fd(void);
/* No lock is held or requested any more: the connection went, or
 * scheduling went off. The gates follow the mode; with client.mu held. */
void gate_locks_lost_locked(void);
/* The mode (client_internal.h) changed: the gates follow it and waiters
 * look again; with client.mu held. */
void gate_mode_changed_locked(void);
/* Closes gpu's gate, waits out in-flight submissions and drains, holding
 * no lock (scheduling switched on, a pace slice's shut part). Returns the
 * drain time; *drained_at: when the drain ended. Without client.mu. */
uint64_t gate_close_and_drain(int gpu, uint64_t *drained_at);

/* ---- what the connection reads ----------------------------------------- */

/* Whether gpu is held; *lease: its current (or last) lease. With
 * client.mu held. */
bool gate_held_locked(int gpu, uint32_t *lease);
/* Whether this process holds some GPU. */
bool gate_holds_any(void);
/* Submissions begun by all threads, for idle detection. */
uint64_t gate_submits_total(void);

#endif
