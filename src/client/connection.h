/* connection.h - the client thread (connection.c), as client.c starts and
 * stops it. It drives the gates (gate.h) and calls nothing above itself. */
#ifndef NVSHARE_CONNECTION_H
#define NVSHARE_CONNECTION_H

#include "client_conn.h"
#include "nvshare_client.h"

/* Starts the client thread for config's GPUs, telling observer the
 * connection's events; with client.mu held. -1 if it could not start. */
int conn_start(const struct nvshare_client_config *config,
               const struct conn_observer *observer);
/* Stops the client thread and closes the connection. -1 if the thread
 * could not be told (it runs on). */
int conn_stop(void);
/* Sends m with client.mu held; 0, -1 when not connected, or a proto_error
 * (the gate's gate_link.send_locked). */
int conn_send_locked(const struct msg *m);
/* In a forked child: the connection is the parent's. */
void conn_after_fork(void);

#endif
