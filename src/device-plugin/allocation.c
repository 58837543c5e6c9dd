/* allocation.c - device IDs, preferred allocations and what Allocate gives
 * a container; see plugin.h. Pure: no I/O, testable without kubelet.
 *
 * What the plugin knows of allocations: kubelet never says when a pod ends,
 * but each GetPreferredAllocation lists the devices still free, which is an
 * exact picture of what is allocated at admission (pods not started yet
 * included). The gpu-memory picture is kept per GPU and updated by every
 * Allocate until the next one, and the GPU resource ranks GPUs by it. */
#include "plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const resource_names[RESOURCE_COUNT] = {"nvshare.com/gpu",
                                                    "nvshare.com/gpu-memory"};
const char *const resource_sockets[RESOURCE_COUNT] =
    {"nvshare-gpu.sock", "nvshare-gpu-memory.sock"};
static const char id_letter[RESOURCE_COUNT] = {'v', 'm'};

void device_id(enum resource r, const struct plugin_gpu *gpu, unsigned k,
               char *buf, size_t len)
{
    snprintf(buf, len, "%s-%c%u", gpu->uuid, id_letter[r], k);
}

unsigned devices_per_gpu(const struct plugin *p, enum resource r,
                         const struct plugin_gpu *gpu)
{
    return r == RESOURCE_GPU ? p->virtual_gpus : gpu->memory_ids;
}

/* The GPU an ID names and the device's index on it (*k), or -1. Only the
 * spelling device_id writes: "...-v01" would be a second name for "...-v1". */
static int device_of(const struct plugin *p, enum resource r, const char *id,
                     unsigned *k)
{
    const char *dash = strrchr(id, '-');
    char *end;
    unsigned long index;

    if (!dash || dash[1] != id_letter[r] || dash[2] < '0' || dash[2] > '9' ||
        (dash[2] == '0' && dash[3]))
        return -1;
    index = strtoul(dash + 2, &end, 10);
    if (*end)
        return -1;
    for (int g = 0; g < p->gpu_count; g++) {
        const struct plugin_gpu *gpu = &p->gpus[g];
        size_t len = strlen(gpu->uuid);

        if ((size_t)(dash - id) == len && strncmp(id, gpu->uuid, len) == 0) {
            if (index >= devices_per_gpu(p, r, gpu))
                return -1;
            *k = (unsigned)index;
            return g;
        }
    }
    return -1;
}

int device_gpu(const struct plugin *p, enum resource r, const char *id)
{
    unsigned k;

    return device_of(p, r, id, &k);
}

/* The GPU of each of ids, into gpu_of. Refuses a list that names a device
 * this node does not have, or one device twice: each gpu-memory ID is a unit
 * of the limit, so repeats would multiply it past the GPU. */
static int resolve_ids(const struct plugin *p, enum resource r, char *const *ids,
                       size_t n, int *gpu_of, char err[PLUGIN_ERR_LEN])
{
    size_t first[PLUGIN_MAX_GPUS], total = 0;
    unsigned char *seen;
    int rc = -1;

    for (int g = 0; g < p->gpu_count; g++) {
        first[g] = total;
        total += devices_per_gpu(p, r, &p->gpus[g]);
    }
    if (n > total) {
        snprintf(err, PLUGIN_ERR_LEN, "%zu %s devices named, the node has %zu",
                 n, resource_names[r], total);
        return -1;
    }
    if (!(seen = calloc(total / 8 + 1, 1))) {
        snprintf(err, PLUGIN_ERR_LEN, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned k;
        size_t bit;

        if ((gpu_of[i] = device_of(p, r, ids[i], &k)) < 0) {
            snprintf(err, PLUGIN_ERR_LEN, "unknown %s device '%.64s'",
                     resource_names[r], ids[i]);
            goto done;
        }
        bit = first[gpu_of[i]] + k;
        if (seen[bit / 8] & (1u << bit % 8)) {
            snprintf(err, PLUGIN_ERR_LEN, "device %s is named twice", ids[i]);
            goto done;
        }
        seen[bit / 8] |= (unsigned char)(1u << bit % 8);
    }
    rc = 0;
done:
    free(seen);
    return rc;
}

/* GPUs in the order the policy prefers them: spreading puts the GPU with
 * the least gpu-memory allocated first (then the fewest virtual GPUs in
 * use), packing the most. */
static const struct plugin *order_plugin;
static const unsigned *order_gpus_used;
static int order_sign;

static int by_load(const void *a, const void *b)
{
    int ga = *(const int *)a, gb = *(const int *)b;
    long ma = order_plugin->gpus[ga].memory_ids_allocated;
    long mb = order_plugin->gpus[gb].memory_ids_allocated;
    long ua = order_gpus_used[ga], ub = order_gpus_used[gb];

    if (ma != mb)
        return order_sign * (ma < mb ? -1 : 1);
    if (ua != ub)
        return order_sign * (ua < ub ? -1 : 1);
    return ga - gb;
}

/* A preferred allocation being made. Lists run to thousands of gpu-memory
 * devices: per available device its GPU and whether it is in out already,
 * so that no scan is quadratic. */
struct pick {
    char *const *available;
    size_t n_available;
    int *gpu_of;
    bool *taken;
    unsigned free_on[PLUGIN_MAX_GPUS], picked_on[PLUGIN_MAX_GPUS];
    int order[PLUGIN_MAX_GPUS]; /* GPUs, in the order the policy prefers */
    const char **out;
    size_t n_out;
};

/* The devices the container must have come first. */
static void pick_required(struct pick *k, char *const *must,
                          const int *must_gpu, size_t n_must)
{
    for (size_t m = 0; m < n_must; m++) {
        int g = must_gpu[m];

        for (size_t i = 0; i < k->n_available; i++)
            if (k->gpu_of[i] == g && strcmp(k->available[i], must[m]) == 0)
                k->taken[i] = true;
        k->out[k->n_out++] = must[m];
        k->picked_on[g]++;
    }
}

/* Orders the GPUs by load (by_load), from what the free devices say is in
 * use. */
static void order_gpus(struct plugin *p, enum resource r, struct pick *k)
{
    unsigned used[PLUGIN_MAX_GPUS] = {0};

    for (size_t i = 0; i < k->n_available; i++)
        k->free_on[k->gpu_of[i]]++;
    for (int g = 0; g < p->gpu_count; g++) {
        unsigned total = devices_per_gpu(p, r, &p->gpus[g]);

        used[g] = total > k->free_on[g] ? total - k->free_on[g] : 0;
        if (r == RESOURCE_MEMORY) /* the exact picture: see the top of the file */
            p->gpus[g].memory_ids_allocated = used[g];
        k->order[g] = g;
    }
    order_plugin = p;
    order_gpus_used = used;
    order_sign = p->pack ? -1 : 1;
    qsort(k->order, (size_t)p->gpu_count, sizeof(k->order[0]), by_load);
}

/* All of a container's memory from one GPU where one has room: the first
 * in policy order (packing: the fullest that fits) moves to the front. */
static void prefer_one_gpu(const struct plugin *p, struct pick *k, size_t size)
{
    size_t need = size - k->n_out;

    for (int i = 0; i < p->gpu_count; i++) {
        int g = k->order[i];
        if (k->free_on[g] >= need + k->picked_on[g]) {
            k->order[i] = k->order[0];
            k->order[0] = g;
            return;
        }
    }
}

/* Rounds: one device per GPU per round for virtual GPUs (a container
 * asking for 2 gets 2 physical GPUs when there are), a whole GPU at a
 * time for memory. */
static void pick_rounds(const struct plugin *p, enum resource r, struct pick *k,
                        size_t size)
{
    for (unsigned round = 0; k->n_out < size; round++) {
        size_t before = k->n_out;
        for (int i = 0; i < p->gpu_count && k->n_out < size; i++) {
            int g = k->order[i];
            for (size_t a = 0; a < k->n_available && k->n_out < size; a++) {
                if (r == RESOURCE_GPU && k->picked_on[g] > round)
                    break;
                if (k->gpu_of[a] != g || k->taken[a])
                    continue;
                k->taken[a] = true;
                k->out[k->n_out++] = k->available[a];
                k->picked_on[g]++;
            }
        }
        if (k->n_out == before)
            break; /* nothing left to pick */
    }
}

int preferred_allocation(struct plugin *p, enum resource r,
                         char *const *available, size_t n_available,
                         char *const *must, size_t n_must, long size,
                         const char **out, char err[PLUGIN_ERR_LEN])
{
    struct pick k = {.available = available,
                     .n_available = n_available,
                     .out = out};
    int *must_gpu = calloc(n_must + 1, sizeof(*must_gpu));
    int rc = -1;

    k.gpu_of = calloc(n_available + 1, sizeof(*k.gpu_of));
    k.taken = calloc(n_available + 1, sizeof(*k.taken));
    if (!k.gpu_of || !must_gpu || !k.taken) {
        snprintf(err, PLUGIN_ERR_LEN, "out of memory");
        goto done;
    }
    if (size <= 0 || (size_t)size > n_available + n_must ||
        (size_t)size < n_must) {
        snprintf(err,
                 PLUGIN_ERR_LEN, "allocation_size %ld does not fit %zu available and %zu required devices",
                 size, n_available, n_must);
        goto done;
    }
    if (resolve_ids(p, r, available, n_available, k.gpu_of, err) ||
        resolve_ids(p, r, must, n_must, must_gpu, err))
        goto done;
    pick_required(&k, must, must_gpu, n_must);
    order_gpus(p, r, &k);
    if (r == RESOURCE_MEMORY && k.n_out < (size_t)size)
        prefer_one_gpu(p, &k, (size_t)size);
    pick_rounds(p, r, &k, (size_t)size);
    if (k.n_out < (size_t)size) {
        snprintf(err, PLUGIN_ERR_LEN,
                 "only %zu distinct devices for allocation_size %ld", k.n_out,
                 size);
        goto done;
    }
    rc = 0;
done:
    free(k.gpu_of);
    free(must_gpu);
    free(k.taken);
    return rc;
}

int allocate_container(struct plugin *p, enum resource r, char *const *ids,
                       size_t n_ids, struct container_allocation *out,
                       char err[PLUGIN_ERR_LEN])
{
    unsigned count_on[PLUGIN_MAX_GPUS] = {0};
    int *gpu_of = calloc(n_ids + 1, sizeof(*gpu_of));
    size_t len = 0;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (!gpu_of) {
        snprintf(err, PLUGIN_ERR_LEN, "out of memory");
        goto done;
    }
    if (n_ids == 0) {
        snprintf(err, PLUGIN_ERR_LEN, "a container request with no devices");
        goto done;
    }
    if (resolve_ids(p, r, ids, n_ids, gpu_of, err))
        goto done;
    for (size_t i = 0; i < n_ids; i++) {
        int g = gpu_of[i];

        if (!p->gpus[g].healthy) {
            snprintf(err, PLUGIN_ERR_LEN, "device %s is on unhealthy GPU %s",
                     ids[i], p->gpus[g].uuid);
            goto done;
        }
        count_on[g]++;
    }
    rc = 0;
    if (r == RESOURCE_MEMORY) {
        /* Per GPU: the IDs' count is the limit on every GPU of the pod. The
         * IDs are distinct, so it is at most the node's memory. */
        out->memory_limit = (uint64_t)n_ids * p->memory_unit;
        for (int g = 0; g < p->gpu_count; g++)
            p->gpus[g].memory_ids_allocated += count_on[g];
        goto done;
    }
    /* Default memory of a pod without nvshare.com/gpu-memory: what its
     * virtual GPUs hold of each GPU (capacity / virtual GPUs apiece), the
     * least of those on all of them, so no GPU is promised more than its
     * capacity however its virtual GPUs are shared out. */
    for (int g = 0; g < p->gpu_count; g++) {
        uint64_t share =
            p->gpus[g].capacity_bytes / p->virtual_gpus * count_on[g];

        if (!count_on[g])
            continue;
        if (out->memory_limit == 0 || share < out->memory_limit)
            out->memory_limit = share;
        len += (size_t)snprintf(out->visible_devices + len,
                                sizeof(out->visible_devices) - len, "%s%s",
                                len ? "," : "", p->gpus[g].uuid);
    }
done:
    free(gpu_of);
    return rc;
}
