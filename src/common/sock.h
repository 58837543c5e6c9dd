/* sock.h - Unix stream sockets, the only transport nvshare uses. */
#ifndef NVSHARE_SOCK_H
#define NVSHARE_SOCK_H

#include <sys/types.h>

/* Connects to path. Returns a close-on-exec fd or -1 with errno set. */
int unix_connect(const char *path);

/* Binds and listens on path (replacing a stale socket file) with the given
 * permission bits. Returns a non-blocking close-on-exec fd or -1. */
int unix_listen(const char *path, mode_t mode);

/* Accepts a pending connection: a non-blocking close-on-exec fd, or -1
 * with errno set. Out of file descriptors (EMFILE, ENFILE), the connection
 * is accepted on the descriptor kept spare for this (unix_keep_spare) and
 * closed at once, and -1 returned with errno EMFILE: a connection left
 * pending keeps the listening socket readable, which would spin an event
 * loop. */
int unix_accept(int listen_fd);

/* Keeps a descriptor spare for unix_accept; -1 if none could be opened. */
int unix_keep_spare(void);

/* The kernel's view of the peer: pid and uid from SO_PEERCRED. */
int unix_peer(int fd, pid_t *pid, uid_t *uid);

#endif
