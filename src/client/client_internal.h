/* client_internal.h - what the client runtime's files share, not exported. */
#ifndef NVSHARE_CLIENT_INTERNAL_H
#define NVSHARE_CLIENT_INTERNAL_H

#include "nvshare_client.h"

/* "namespace/pod" or "-" (outside Kubernetes), for log lines. */
const char *client_pod_name(void);

#endif
