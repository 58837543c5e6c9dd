/* client_internal.h - what the client runtime's files share, not exported. */
#ifndef NVSHARE_CLIENT_INTERNAL_H
#define NVSHARE_CLIENT_INTERNAL_H

#include "nvshare_client.h"

#include "protocol.h"

/* "namespace/pod" or "-" (outside Kubernetes), for log lines. */
const char *client_pod_name(void);

/* Sends m to the scheduler if connected; 0 or a negative proto_error.
 * Takes the connection lock: never call it holding another client lock. */
int client_send(const struct msg *m);

/* memory.c, driven by the client thread (none with the connection lock). */
void memory_on_message(const struct msg *m); /* UPDATE_LIMIT, MEM_GRANT, MEM_RECLAIM */
void memory_expect_scheduler(void); /* a first connection attempt starts */
void memory_on_registered(int n_gpus, const uint8_t *managed);
void memory_on_disconnected(void); /* also: an attempt failed */
void memory_report(int n_gpus); /* allocated bytes that changed */
/* Reports gpu's allocated bytes now if they changed: a lock request must
 * not reach the scheduler before the footprint it is admitted by. */
void memory_flush(int gpu);
void memory_after_fork(void);

#endif
