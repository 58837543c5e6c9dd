/* server.h - serves kubelet until SIGTERM or SIGINT. */
#ifndef NVSHARE_DRA_SERVER_H
#define NVSHARE_DRA_SERVER_H

#include "driver.h"

/* Returns the process's exit status: 0 after a clean shutdown. */
int server_run(struct driver *d);

#endif
