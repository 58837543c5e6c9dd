/* main.c - nvshare-device-plugin: advertises the node's GPUs to kubelet as
 * nvshare.com/gpu and nvshare.com/gpu-memory (see plugin.h, and the
 * "Device plugin" section of docs/kubernetes.md). */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "plugin.h"
#include "server.h"
#include "service.h"

/* gRPC refuses messages over 4 MiB; the gpu-memory list must stay well
 * under it whatever the node, or kubelet would see no devices at all. */
#define MAX_LIST_BYTES (2u << 20)

int main(void)
{
    static struct plugin plugin;
    struct reply list;

    log_init("device-plugin");
    if (plugin_configure(&plugin))
        return 1;
    service_device_list(&plugin, RESOURCE_MEMORY, &list);
    free(list.data);
    if (list.status != GRPC_STATUS_OK || list.len > MAX_LIST_BYTES) {
        log_error("the gpu-memory device list is %zu bytes (limit %u): raise "
                  "NVSHARE_GPU_MEMORY_UNIT or lower NVSHARE_GPU_MEMORY_OVERSUB_RATIO",
                  list.len, MAX_LIST_BYTES);
        return 1;
    }
    log_info("gpu-memory device list: %zu bytes", list.len);
    return server_run(&plugin);
}
