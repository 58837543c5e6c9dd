/* service.c - see service.h. Every request is checked before use: bytes
 * that do not decode, unknown devices and requests kubelet never sends get
 * INVALID_ARGUMENT and one log line, never a crash. */
#include "service.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "log.h"
#include "pb_strings.h"

static const struct {
    const char *name;
    enum method method;
} methods[] = {
    {"GetDevicePluginOptions", METHOD_OPTIONS},
    {"ListAndWatch", METHOD_LIST_AND_WATCH},
    {"GetPreferredAllocation", METHOD_PREFERRED},
    {"Allocate", METHOD_ALLOCATE},
    {"PreStartContainer", METHOD_PRE_START},
};

enum method method_from_path(const char *path, size_t len)
{
    static const char prefix[] = "/v1beta1.DevicePlugin/";

    if (len <= sizeof(prefix) - 1 || memcmp(path, prefix, sizeof(prefix) - 1) != 0)
        return METHOD_UNKNOWN;
    path += sizeof(prefix) - 1;
    len -= sizeof(prefix) - 1;
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strlen(methods[i].name) == len &&
            memcmp(methods[i].name, path, len) == 0)
            return methods[i].method;
    return METHOD_UNKNOWN;
}

void service_device_list(const struct plugin *p, enum resource r,
                         struct reply *out)
{
    V1beta1__ListAndWatchResponse list = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    V1beta1__NUMANode numa[PLUGIN_MAX_GPUS];
    V1beta1__NUMANode *numa_ptr[PLUGIN_MAX_GPUS];
    V1beta1__TopologyInfo topology[PLUGIN_MAX_GPUS];
    size_t total = 0, n = 0;
    V1beta1__Device *devices, **device_ptrs;
    char *ids;
    enum { ID_LEN = 64 };

    memset(out, 0, sizeof(*out));
    for (int g = 0; g < p->gpu_count; g++) {
        total += devices_per_gpu(p, r, &p->gpus[g]);
        v1beta1__numanode__init(&numa[g]);
        numa[g].id = p->gpus[g].numa_node;
        numa_ptr[g] = &numa[g];
        v1beta1__topology_info__init(&topology[g]);
        topology[g].n_nodes = 1;
        topology[g].nodes = &numa_ptr[g];
    }
    devices = reply_calloc(out, total + 1, sizeof(*devices));
    device_ptrs = reply_calloc(out, total + 1, sizeof(*device_ptrs));
    ids = reply_calloc(out, total + 1, ID_LEN);
    if (!devices || !device_ptrs || !ids)
        return;
    for (int g = 0; g < p->gpu_count; g++) {
        const struct plugin_gpu *gpu = &p->gpus[g];

        for (unsigned k = 0; k < devices_per_gpu(p, r, gpu); k++, n++) {
            v1beta1__device__init(&devices[n]);
            device_id(r, gpu, k, ids + n * ID_LEN, ID_LEN);
            devices[n].id = ids + n * ID_LEN;
            devices[n].health = gpu->healthy ? "Healthy" : "Unhealthy";
            devices[n].topology = gpu->numa_node >= 0 ? &topology[g] : NULL;
            device_ptrs[n] = &devices[n];
        }
    }
    list.n_devices = n;
    list.devices = device_ptrs;
    reply_pack(out, &list.base);
}

void service_register_request(enum resource r, struct reply *out)
{
    V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
    V1beta1__DevicePluginOptions options = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

    memset(out, 0, sizeof(*out));
    options.get_preferred_allocation_available = 1;
    req.version = "v1beta1";
    req.endpoint = (char *)resource_sockets[r];
    req.resource_name = (char *)resource_names[r];
    req.options = &options;
    reply_pack(out, &req.base);
}

/* protobuf-c would hand over the ID's prefix: another device's ID. */
#define NUL_IN_ID "a device ID holds a NUL byte"

/* How many IDs the request's containers can be given at most: the room
 * for the answer. */
static size_t ids_wanted(const V1beta1__PreferredAllocationRequest *req)
{
    size_t wanted = 0;

    for (size_t c = 0; c < req->n_container_requests; c++) {
        const V1beta1__ContainerPreferredAllocationRequest *cr =
            req->container_requests[c];
        long size = cr->allocation_size;
        if (size > 0 && (size_t)size <= cr->n_available_deviceids +
                                            cr->n_must_include_deviceids)
            wanted += (size_t)size;
    }
    return wanted;
}

static void preferred(struct plugin *p, enum resource r,
                      const V1beta1__PreferredAllocationRequest *req,
                      struct reply *out)
{
    V1beta1__PreferredAllocationResponse resp =
        V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    V1beta1__ContainerPreferredAllocationResponse *containers =
        reply_calloc(out, req->n_container_requests, sizeof(*containers));
    V1beta1__ContainerPreferredAllocationResponse **container_ptrs =
        reply_calloc(out, req->n_container_requests, sizeof(*container_ptrs));
    const char **picked = reply_calloc(out, ids_wanted(req) + 1, sizeof(*picked));
    char err[PLUGIN_ERR_LEN];
    size_t used = 0;

    if (!containers || !container_ptrs || !picked)
        return;
    for (size_t c = 0; c < req->n_container_requests; c++) {
        V1beta1__ContainerPreferredAllocationRequest *cr =
            req->container_requests[c];

        if (preferred_allocation(p, r, cr->available_deviceids,
                                 cr->n_available_deviceids,
                                 cr->must_include_deviceids,
                                 cr->n_must_include_deviceids,
                                 cr->allocation_size, picked + used, err)) {
            reply_fail(out, GRPC_STATUS_INVALID_ARGUMENT,
                       "GetPreferredAllocation: %s", err);
            return;
        }
        v1beta1__container_preferred_allocation_response__init(&containers[c]);
        containers[c].n_deviceids = (size_t)cr->allocation_size;
        containers[c].deviceids = (char **)(picked + used);
        container_ptrs[c] = &containers[c];
        used += (size_t)cr->allocation_size;
    }
    resp.n_container_responses = req->n_container_requests;
    resp.container_responses = container_ptrs;
    reply_pack(out, &resp.base);
}

/* The most one container's response holds. */
enum { MAX_ENVS = 5, MAX_MOUNTS = 2 };
struct container_reply {
    V1beta1__ContainerAllocateResponse resp;
    V1beta1__ContainerAllocateResponse__EnvsEntry envs[MAX_ENVS];
    V1beta1__ContainerAllocateResponse__EnvsEntry *env_ptrs[MAX_ENVS];
    V1beta1__Mount mounts[MAX_MOUNTS];
    V1beta1__Mount *mount_ptrs[MAX_MOUNTS];
    struct container_allocation alloc;
    char limit[24], lib_path[PATH_MAX];
};

static void add_env(struct container_reply *c, const char *key, char *value)
{
    V1beta1__ContainerAllocateResponse__EnvsEntry *e = &c->envs[c->resp.n_envs];

    v1beta1__container_allocate_response__envs_entry__init(e);
    e->key = (char *)key;
    e->value = value;
    c->env_ptrs[c->resp.n_envs++] = e;
}

static void add_mount(struct container_reply *c, const char *container_path,
                      const char *host_path, int read_only)
{
    V1beta1__Mount *m = &c->mounts[c->resp.n_mounts];

    v1beta1__mount__init(m);
    m->container_path = (char *)container_path;
    m->host_path = (char *)host_path;
    m->read_only = read_only;
    c->mount_ptrs[c->resp.n_mounts++] = m;
}

/* The two resources' envs never share a name: kubelet merges them in no
 * set order and keeps the first of two values. */
static void fill_container(const struct plugin *p, enum resource r,
                           struct container_reply *c)
{
    v1beta1__container_allocate_response__init(&c->resp);
    c->resp.envs = c->env_ptrs;
    c->resp.mounts = c->mount_ptrs;
    snprintf(c->limit, sizeof(c->limit), "%" PRIu64, c->alloc.memory_limit);
    if (r == RESOURCE_MEMORY) {
        add_env(c, "NVSHARE_GPU_MEMORY_LIMIT", c->limit);
        return;
    }
    snprintf(c->lib_path, sizeof(c->lib_path), "%s/libnvshare.so",
             CONTAINER_LIB_DIR);
    add_env(c, "NVIDIA_VISIBLE_DEVICES", c->alloc.visible_devices);
    add_env(c, "LD_PRELOAD", c->lib_path);
    add_env(c, "NVSHARE_SOCK_DIR", CONTAINER_SOCK_DIR);
    add_env(c, "NVSHARE_GPU_MEMORY_DEFAULT_LIMIT", c->limit);
    /* Above a ratio of 1 any pod may be the one beyond physical memory: all
     * must be swappable for the capacity to be real. */
    if (p->oversubscribed)
        add_env(c, "NVSHARE_ENABLE_OVERSUB", "1");
    add_mount(c, CONTAINER_LIB_DIR, p->lib_dir, 1);
    add_mount(c, CONTAINER_SOCK_DIR, p->sock_dir, 0);
}

static void allocate(struct plugin *p, enum resource r,
                     const V1beta1__AllocateRequest *req, struct reply *out)
{
    V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
    struct container_reply *containers =
        reply_calloc(out, req->n_container_requests, sizeof(*containers));
    V1beta1__ContainerAllocateResponse **ptrs =
        reply_calloc(out, req->n_container_requests, sizeof(*ptrs));
    char err[PLUGIN_ERR_LEN];

    if (!containers || !ptrs)
        return;
    for (size_t c = 0; c < req->n_container_requests; c++) {
        V1beta1__ContainerAllocateRequest *cr = req->container_requests[c];

        if (allocate_container(p, r, cr->devices_ids, cr->n_devices_ids,
                               &containers[c].alloc, err)) {
            reply_fail(out, GRPC_STATUS_INVALID_ARGUMENT, "Allocate: %s", err);
            return;
        }
        fill_container(p, r, &containers[c]);
        ptrs[c] = &containers[c].resp;
        if (r == RESOURCE_GPU)
            log_info("Allocate: GPUs %s, default memory limit %" PRIu64
                     " bytes per GPU",
                     containers[c].alloc.visible_devices,
                     containers[c].alloc.memory_limit);
        else
            log_info("Allocate: memory limit %" PRIu64 " bytes per GPU",
                     containers[c].alloc.memory_limit);
    }
    resp.n_container_responses = req->n_container_requests;
    resp.container_responses = ptrs;
    reply_pack(out, &resp.base);
}

/* GetPreferredAllocation and Allocate: both requests are a list of
 * container requests, refused as a whole when it is empty, does not
 * decode or hides a NUL byte in an ID. */
static void containers_call(struct plugin *p, enum resource r, enum method m,
                            const unsigned char *data, size_t len,
                            struct reply *out)
{
    bool allocating = m == METHOD_ALLOCATE;
    const ProtobufCMessageDescriptor *desc =
        allocating ? &v1beta1__allocate_request__descriptor
                   : &v1beta1__preferred_allocation_request__descriptor;
    ProtobufCMessage *req = protobuf_c_message_unpack(desc, NULL, len, data);
    size_t n =
        !req ? 0
        : allocating
            ? ((V1beta1__AllocateRequest *)req)->n_container_requests
            : ((V1beta1__PreferredAllocationRequest *)req)->n_container_requests;
    const char *why =
        pb_request_flaw(req != NULL, req && !n ? "no container requests" : NULL,
                        NUL_IN_ID, desc, data, len);

    if (why)
        reply_fail(out, GRPC_STATUS_INVALID_ARGUMENT, "%s: %s",
                   allocating ? "Allocate" : "GetPreferredAllocation", why);
    else if (allocating)
        allocate(p, r, (V1beta1__AllocateRequest *)req, out);
    else
        preferred(p, r, (V1beta1__PreferredAllocationRequest *)req, out);
    if (req)
        protobuf_c_message_free_unpacked(req, NULL);
}

void service_call(struct plugin *p, enum resource r, enum method m,
                  const unsigned char *request, size_t len, struct reply *out)
{
    V1beta1__DevicePluginOptions options = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    V1beta1__PreStartContainerResponse pre_start =
        V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;

    memset(out, 0, sizeof(*out));
    switch (m) {
    case METHOD_OPTIONS:
    case METHOD_LIST_AND_WATCH:
        if (!pb_decodes(&v1beta1__empty__descriptor, request, len)) {
            reply_fail(out, GRPC_STATUS_INVALID_ARGUMENT,
                       "Empty does not decode");
            return;
        }
        if (m == METHOD_LIST_AND_WATCH) {
            service_device_list(p, r, out);
            return;
        }
        options.get_preferred_allocation_available = 1;
        reply_pack(out, &options.base);
        return;
    case METHOD_PREFERRED:
    case METHOD_ALLOCATE:
        containers_call(p, r, m, request, len, out);
        return;
    case METHOD_PRE_START:
        /* Not asked for (pre_start_required is false): nothing to do. */
        reply_pack(out, &pre_start.base);
        return;
    case METHOD_UNKNOWN:
        break;
    }
    reply_fail(out, GRPC_STATUS_UNIMPLEMENTED, "no such method");
}
