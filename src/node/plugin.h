/* plugin.h - nvshare-device-plugin: the node's GPUs as kubelet resources.
 *
 * Two resources, each served on its own socket and registered on its own:
 *   nvshare.com/gpu         N virtual devices per GPU, "<uuid>-v<k>"
 *   nvshare.com/gpu-memory  capacity / unit devices per GPU, "<uuid>-m<k>"
 * The node's GPUs and settings (config.c, nvml.c, here in src/node) are
 * what the DRA driver shares; the allocation logic (allocation.c, in
 * src/device-plugin) knows nothing of gRPC or protobuf. */
#ifndef NVSHARE_DEVICE_PLUGIN_H
#define NVSHARE_DEVICE_PLUGIN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

#define PLUGIN_MAX_GPUS 16
#define PLUGIN_ERR_LEN 256
/* Where Allocate puts nvshare inside the container. */
#define CONTAINER_LIB_DIR "/usr/local/nvshare/lib"
#define CONTAINER_SOCK_DIR DEFAULT_SOCK_DIR

enum resource { RESOURCE_GPU, RESOURCE_MEMORY, RESOURCE_COUNT };

struct plugin_gpu {
    char uuid[PROTO_UUID_MAX];
    uint64_t capacity_bytes; /* physical memory x oversubscription ratio */
    unsigned memory_ids;     /* capacity_bytes / memory unit */
    unsigned memory_ids_allocated; /* as last seen from kubelet, see allocation.c */
    int numa_node;                 /* -1: unknown */
    bool healthy;
    /* From NVML, for the DRA driver's attributes; "" when unknown. */
    char product[64];            /* "NVIDIA H100 80GB HBM3" */
    char compute_capability[16]; /* "9.0" */
};

struct plugin {
    struct plugin_gpu gpus[PLUGIN_MAX_GPUS];
    int gpu_count;
    unsigned virtual_gpus; /* nvshare.com/gpu devices per GPU */
    uint64_t memory_unit;  /* bytes of one nvshare.com/gpu-memory device */
    bool pack; /* prefer the fullest GPU that fits, not the emptiest */
    bool oversubscribed; /* gpu-memory capacity above physical memory */
    char kubelet_dir[PATH_MAX - 64]; /* room for "/<socket name>" in a path */
    char sock_dir[PATH_MAX];         /* the scheduler's, on the host */
    char lib_dir[PATH_MAX];          /* libnvshare.so's, on the host */
    char driver_version[32];         /* NVML's, "580.159.04"; "" unknown */
};

extern const char *const resource_names[RESOURCE_COUNT];
extern const char *const resource_sockets[RESOURCE_COUNT];

/* config.c: the environment and the GPUs (NVSHARE_GPUS or NVML). Returns
 * 0, or -1 after logging why the plugin cannot run. */
int plugin_configure(struct plugin *p);

/* nvml.c: NVML loaded once for NUMA nodes and health; all are no-ops
 * returning "unknown"/healthy when NVML is not loaded. */
bool nvml_open(void);
int nvml_numa_node(const char *uuid);
bool nvml_healthy(const char *uuid);
/* Reads every GPU's health again, logging each change: whether any did. */
bool plugin_health_changed(struct plugin *p);
void nvml_close(void);
/* Fills each GPU's product and compute capability and the driver version
 * from NVML, loading it for the while if it is not loaded: GPUs that
 * NVSHARE_GPUS names and NVML does not know stay "". */
void nvml_describe(struct plugin *p);

/* Device IDs. The name fits in 63 bytes (kubelet's limit). */
void device_id(enum resource r, const struct plugin_gpu *gpu, unsigned k,
               char *buf, size_t len);
unsigned devices_per_gpu(const struct plugin *p, enum resource r,
                         const struct plugin_gpu *gpu);
/* The index of the GPU an ID of resource r names, or -1 if no such device. */
int device_gpu(const struct plugin *p, enum resource r, const char *id);

/* GetPreferredAllocation for one container: picks size IDs out of
 * available (always including must), into out (pointers to the inputs).
 * Returns 0, or -1 with a sentence in err for a request kubelet would
 * never send (unknown or repeated IDs, impossible sizes). */
int preferred_allocation(struct plugin *p, enum resource r,
                         char *const *available, size_t n_available,
                         char *const *must, size_t n_must, long size,
                         const char **out, char err[PLUGIN_ERR_LEN]);

/* What Allocate gives one container. */
struct container_allocation {
    char visible_devices[PLUGIN_MAX_GPUS * PROTO_UUID_MAX]; /* RESOURCE_GPU */
    uint64_t memory_limit;                                  /* bytes per GPU */
};

int allocate_container(struct plugin *p, enum resource r, char *const *ids,
                       size_t n_ids, struct container_allocation *out,
                       char err[PLUGIN_ERR_LEN]);

#endif
