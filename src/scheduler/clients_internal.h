/* clients_internal.h - what the client socket's files (clients*.c) share
 * among themselves; scheduler.h has what the rest of the daemon calls.
 *
 * The layers, each calling only those below it: clients_accept.c, then
 * clients.c (a client's messages), then clients_register.c and
 * clients_memory.c, then clients_groups.c (which account a client is
 * billed to, GPU by GPU), then clients_actions.c (carrying out actions),
 * then clients_table.c. */
#ifndef NVSHARE_CLIENTS_INTERNAL_H
#define NVSHARE_CLIENTS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "scheduler.h"

/* No client holds more than this many times its GPU's capacity (clients.c,
 * "Bounds"). */
#define CLIENT_BYTES_PER_CAPACITY 64

/* clients_table.c, the bottom */
/* The pod c is billed to, as logs show it ("ns/name", "uid:...", "-"). One
 * buffer: one call per log line. */
const char *client_pod(const struct client *c);
/* Whether c is billed to account on some GPU. */
bool client_billed_to(const struct client *c, int account);
/* The most bytes a client of gpu may report holding. */
uint64_t client_bytes_bound(const struct scheduler *s, int gpu);

/* clients.c, the top */
/* Reads and handles c's messages (the event loop's handler of its fd). */
void client_on_readable(struct event_loop *loop, int fd, void *data);

/* clients_actions.c */
/* Sends m to c; if it cannot, dooms c with one line (nothing is sent to a
 * doomed client). */
void client_send(struct client *c, const struct msg *m);
/* Tells c its pod's core limit in force (percent, 0: none), once it has
 * been welcomed. */
void client_tell_core_limit(const struct scheduler *s, struct client *c);

/* clients_register.c */
void client_register(struct scheduler *s, struct client *c,
                     const struct msg_register *reg);

/* clients_groups.c */
/* The account c is to be billed to on node GPU g: its group's there,
 * attached (account_attach_group), else its own. */
int client_group_account(struct scheduler *s, struct client *c, int g);
/* c left: its group accounts lose it. */
void client_leave_groups(struct scheduler *s, struct client *c);

/* clients_memory.c */
/* MEM_RESERVE, MEM_RETURN, MEM_UPDATE of c on node GPU gpu. */
void client_handle_memory(struct scheduler *s, struct client *c, int gpu,
                          const struct msg *m);

#endif
