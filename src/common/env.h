/* env.h - reading NVSHARE_* settings from the environment.
 *
 * A malformed value is never fatal and never silently zero: the default is
 * kept and one warning names the variable, the value and why it was refused. */
#ifndef NVSHARE_ENV_H
#define NVSHARE_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint64_t env_duration_ns(const char *name, uint64_t fallback);
uint64_t env_size_bytes(const char *name, uint64_t fallback);
long env_int_range(const char *name, long min, long max, long fallback);
bool env_switch(const char *name, bool fallback);
/* A priority class (parse_priority); fallback if unset or unreadable. */
unsigned env_priority(const char *name, unsigned fallback);

/* The directory holding both sockets: $NVSHARE_SOCK_DIR or the default. */
const char *env_sock_dir(void);

/* Joins the socket directory and a socket name; returns -1 if too long. */
int socket_path(const char *name, char *buf, size_t len);

#endif
