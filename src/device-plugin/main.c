/* main.c - nvshare-device-plugin: advertises the node's GPUs to kubelet as
 * nvshare.com/gpu and nvshare.com/gpu-memory (see plugin.h, and the
 * "Device plugin" section of docs/kubernetes.md). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "log.h"
#include "plugin.h"
#include "server.h"
#include "service.h"

/* gRPC refuses messages over 4 MiB; the gpu-memory list must stay well
 * under it whatever the node, or kubelet would see no devices at all. */
#define MAX_LIST_BYTES (2u << 20)

static void print_usage(FILE *out)
{
    fputs(
        "usage: nvshare-device-plugin [--help | --version]\n"
        "\n"
        "Advertises this node's GPUs to kubelet as nvshare.com/gpu (virtual "
        "GPUs)\n"
        "and nvshare.com/gpu-memory (units of memory), and gives each "
        "container\n"
        "that gets them libnvshare.so and the scheduler's socket. Configured "
        "by\n"
        "the environment (docs/kubernetes.md, Device plugin):\n"
        "\n"
        "  NVSHARE_VIRTUAL_GPUS    nvshare.com/gpu devices per GPU (1-1000,\n"
        "                          default 10)\n"
        "  NVSHARE_GPU_MEMORY_UNIT one nvshare.com/gpu-memory device (at least "
        "1Mi,\n"
        "                          default 256Mi)\n"
        "  NVSHARE_GPU_MEMORY_OVERSUB_RATIO\n"
        "                          gpu-memory advertised per byte of GPU "
        "memory\n"
        "                          (0.1-4, default 1)\n"
        "  NVSHARE_GPU_PHYSICAL_MEMORY_MB\n"
        "                          each GPU's memory instead of NVML's, in "
        "MiB\n"
        "  NVSHARE_ALLOCATION_PACK 1: fill one GPU before the next (default "
        "0:\n"
        "                          spread)\n"
        "  NVSHARE_GPUS            UUID:MiB,... instead of NVML discovery\n"
        "  NVSHARE_KUBELET_DIR     kubelet's device plugin directory (default\n"
        "                          /var/lib/kubelet/device-plugins)\n"
        "  NVSHARE_LIB_DIR         the host directory holding libnvshare.so\n"
        "                          (default /var/lib/nvshare/lib)\n"
        "  NVSHARE_SOCK_DIR        the scheduler's socket directory (default\n"
        "                          " DEFAULT_SOCK_DIR ")\n"
        "  NVSHARE_LOG_FORMAT      text (default) or json\n",
        out);
}

int main(int argc, char **argv)
{
    static struct plugin plugin;
    struct reply list;
    int rc = cli_standard_args(argc, argv, "nvshare-device-plugin", print_usage);

    if (rc >= 0)
        return rc;
    log_init("device-plugin", LOG_INFO);
    if (plugin_configure(&plugin))
        return 1;
    service_device_list(&plugin, RESOURCE_MEMORY, &list);
    free(list.data);
    if (list.status != GRPC_STATUS_OK || list.len > MAX_LIST_BYTES) {
        log_error("the gpu-memory device list is %zu bytes (limit %u): raise "
                  "NVSHARE_GPU_MEMORY_UNIT or lower "
                  "NVSHARE_GPU_MEMORY_OVERSUB_RATIO",
                  list.len, MAX_LIST_BYTES);
        return 1;
    }
    log_info("gpu-memory device list: %zu bytes", list.len);
    return server_run(&plugin);
}
