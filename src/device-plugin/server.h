/* server.h - serves both resources to kubelet until SIGTERM or SIGINT. */
#ifndef NVSHARE_DEVICE_PLUGIN_SERVER_H
#define NVSHARE_DEVICE_PLUGIN_SERVER_H

#include "plugin.h"

/* Returns the process's exit status: 0 after a clean shutdown. */
int server_run(struct plugin *p);

#endif
