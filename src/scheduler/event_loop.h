/* event_loop.h - the scheduler's only loop: fd readiness plus one deadline.
 *
 * Handlers registered for fds run when their fd is readable (or hung up).
 * After every batch of events, and whenever the deadline passes, the loop
 * calls the tick handler, which does what is due and returns the next
 * deadline (0: none). Everything runs on one thread. */
#ifndef NVSHARE_EVENT_LOOP_H
#define NVSHARE_EVENT_LOOP_H

#include <stdint.h>

struct event_loop;

typedef void (*fd_handler)(struct event_loop *loop, int fd, void *data);
typedef uint64_t (*tick_handler)(struct event_loop *loop, uint64_t now,
                                 void *data);

/* Returns NULL on failure (errno set). */
struct event_loop *event_loop_create(tick_handler tick, void *tick_data);
void event_loop_destroy(struct event_loop *loop);

/* Returns 0, or -1 with errno set. */
int event_loop_add(struct event_loop *loop, int fd, fd_handler handler,
                   void *data);
void event_loop_remove(struct event_loop *loop, int fd);

/* Runs until event_loop_stop() is called from a handler. */
void event_loop_run(struct event_loop *loop);
void event_loop_stop(struct event_loop *loop);

#endif
