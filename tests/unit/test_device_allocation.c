/* test_device_allocation.c - the device plugin's pure allocation logic:
 * device IDs, preferred allocations (spread and pack), what Allocate gives
 * a container. The gRPC side is k8s_device_plugin's. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plugin.h"

#define GiB (1ull << 30)

static struct plugin p;

/* Three GPUs: 80, 40 and 80 GiB, 4 virtual GPUs each, 1 GiB units. */
static int setup(void **state)
{
    static const uint64_t sizes[] = {80 * GiB, 40 * GiB, 80 * GiB};

    (void)state;
    memset(&p, 0, sizeof(p));
    p.virtual_gpus = 4;
    p.memory_unit = GiB;
    p.gpu_count = 3;
    for (int g = 0; g < 3; g++) {
        snprintf(p.gpus[g].uuid, sizeof(p.gpus[g].uuid), "GPU-%d", g);
        p.gpus[g].capacity_bytes = sizes[g];
        p.gpus[g].memory_ids = (unsigned)(sizes[g] / GiB);
        p.gpus[g].numa_node = -1;
        p.gpus[g].healthy = true;
    }
    return 0;
}

/* Every device of r, except the first `allocated[g]` of each GPU. */
static size_t free_devices(enum resource r, const unsigned allocated[3],
                           char ***out)
{
    size_t n = 0;

    *out = calloc(512, sizeof(char *));
    for (int g = 0; g < 3; g++) {
        for (unsigned k = allocated[g]; k < devices_per_gpu(&p, r, &p.gpus[g]);
             k++) {
            (*out)[n] = malloc(64);
            device_id(r, &p.gpus[g], k, (*out)[n++], 64);
        }
    }
    return n;
}

static void free_list(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

static int gpu_of(enum resource r, const char *id)
{
    return device_gpu(&p, r, id);
}

static void test_device_ids(void **state)
{
    char id[64];

    (void)state;
    device_id(RESOURCE_GPU, &p.gpus[1], 3, id, sizeof(id));
    assert_string_equal(id, "GPU-1-v3");
    assert_int_equal(gpu_of(RESOURCE_GPU, "GPU-1-v3"), 1);
    assert_int_equal(gpu_of(RESOURCE_MEMORY, "GPU-2-m79"), 2);
    assert_int_equal(gpu_of(RESOURCE_GPU, "GPU-1-v4"), -1);     /* past N */
    assert_int_equal(gpu_of(RESOURCE_MEMORY, "GPU-1-m40"), -1); /* past capacity */
    assert_int_equal(gpu_of(RESOURCE_GPU, "GPU-1-m0"), -1); /* the other resource */
    assert_int_equal(gpu_of(RESOURCE_GPU, "GPU-9-v0"), -1);
    assert_int_equal(gpu_of(RESOURCE_GPU, "GPU-1-v"), -1);
    assert_int_equal(gpu_of(RESOURCE_GPU, "GPU-1-v1x"), -1);
    assert_int_equal(gpu_of(RESOURCE_GPU, "GPU-1-v99999999999999999999999"), -1);
    assert_int_equal(gpu_of(RESOURCE_GPU, ""), -1);
    assert_int_equal(gpu_of(RESOURCE_GPU, "v0"), -1);
}

/* gpu-memory: all of a request from the least allocated GPU that has room;
 * the picture it leaves orders the virtual GPUs too. */
static void test_spread(void **state)
{
    const unsigned mem_used[3] = {10, 0, 70};
    const unsigned none[3] = {0, 0, 0};
    char **avail, err[PLUGIN_ERR_LEN];
    const char *out[8];
    size_t n;

    (void)state;
    n = free_devices(RESOURCE_MEMORY, mem_used, &avail);
    assert_int_equal(preferred_allocation(&p, RESOURCE_MEMORY, avail, n, NULL,
                                          0, 6, out, err),
                     0);
    for (int i = 0; i < 6; i++)
        assert_int_equal(gpu_of(RESOURCE_MEMORY, out[i]), 1);
    assert_int_equal(p.gpus[0].memory_ids_allocated, 10);
    assert_int_equal(p.gpus[2].memory_ids_allocated, 70);
    free_list(avail, n);

    /* Virtual GPUs: least gpu-memory first (1, 0, 2), one per GPU. */
    n = free_devices(RESOURCE_GPU, none, &avail);
    assert_int_equal(preferred_allocation(&p, RESOURCE_GPU, avail, n, NULL, 0,
                                          4, out, err),
                     0);
    assert_int_equal(gpu_of(RESOURCE_GPU, out[0]), 1);
    assert_int_equal(gpu_of(RESOURCE_GPU, out[1]), 0);
    assert_int_equal(gpu_of(RESOURCE_GPU, out[2]), 2);
    assert_int_equal(gpu_of(RESOURCE_GPU, out[3]), 1);
    free_list(avail, n);
}

/* 41 GiB do not fit on the least allocated GPU (40 GiB, empty): the next
 * in order that has room takes all of them. */
static void test_memory_needs_room(void **state)
{
    const unsigned allocated[3] = {30, 0, 35};
    char **avail, err[PLUGIN_ERR_LEN];
    const char **out = calloc(41, sizeof(*out));
    size_t n = free_devices(RESOURCE_MEMORY, allocated, &avail);

    (void)state;
    p.gpus[1].memory_ids_allocated = 50; /* stale: the request's list wins */
    assert_int_equal(preferred_allocation(&p, RESOURCE_MEMORY, avail, n, NULL,
                                          0, 41, out, err),
                     0);
    for (int i = 0; i < 41; i++)
        assert_int_equal(gpu_of(RESOURCE_MEMORY, out[i]), 0);
    free(out);
    free_list(avail, n);
}

static void test_pack(void **state)
{
    const unsigned vgpu_used[3] = {1, 3, 0};
    const unsigned full[3] = {0, 4, 0};
    char **avail, err[PLUGIN_ERR_LEN];
    const char *out[4];
    size_t n;

    (void)state;
    p.pack = true;
    n = free_devices(RESOURCE_GPU, vgpu_used, &avail);
    assert_int_equal(preferred_allocation(&p, RESOURCE_GPU, avail, n, NULL, 0,
                                          1, out, err),
                     0);
    assert_int_equal(gpu_of(RESOURCE_GPU, out[0]), 1);
    free_list(avail, n);
    /* The fullest GPU has no room left: the next fullest. */
    n = free_devices(RESOURCE_GPU, full, &avail);
    assert_int_equal(preferred_allocation(&p, RESOURCE_GPU, avail, n, NULL, 0,
                                          1, out, err),
                     0);
    assert_int_equal(gpu_of(RESOURCE_GPU, out[0]), 0);
    free_list(avail, n);
}

static void test_must_include_and_bad_requests(void **state)
{
    const unsigned none[3] = {0, 0, 0};
    char *must[] = {"GPU-2-v3"}, *unknown[] = {"GPU-7-v0"};
    char **avail, err[PLUGIN_ERR_LEN];
    const char *out[16];
    size_t n = free_devices(RESOURCE_GPU, none, &avail);

    (void)state;
    assert_int_equal(preferred_allocation(&p, RESOURCE_GPU, avail, n, must, 1,
                                          2, out, err),
                     0);
    assert_string_equal(out[0], "GPU-2-v3");
    assert_int_equal(gpu_of(RESOURCE_GPU, out[1]), 0);
    assert_int_equal(preferred_allocation(&p, RESOURCE_GPU, avail, n, NULL, 0,
                                          13, out, err),
                     -1);
    assert_non_null(strstr(err, "allocation_size 13"));
    assert_int_equal(preferred_allocation(&p, RESOURCE_GPU, avail, n, NULL, 0,
                                          0, out, err),
                     -1);
    assert_int_equal(preferred_allocation(&p, RESOURCE_GPU, avail, n, unknown,
                                          1, 1, out, err),
                     -1);
    assert_non_null(strstr(err, "GPU-7-v0"));
    assert_int_equal(preferred_allocation(&p, RESOURCE_GPU, unknown, 1, NULL, 0,
                                          1, out, err),
                     -1);
    free_list(avail, n);
}

static void test_allocate(void **state)
{
    char *vgpus[] = {"GPU-0-v0", "GPU-1-v2", "GPU-0-v1"};
    char *memory[] = {"GPU-2-m0", "GPU-2-m1", "GPU-2-m2"};
    char *bad[] = {"GPU-0-v0", "GPU-0-m0"};
    struct container_allocation a;
    char err[PLUGIN_ERR_LEN];

    (void)state;
    assert_int_equal(allocate_container(&p, RESOURCE_GPU, vgpus, 3, &a, err), 0);
    assert_string_equal(a.visible_devices, "GPU-0,GPU-1");
    assert_int_equal(a.memory_limit,
                     10 * GiB); /* 40 GiB / 4: the smaller GPU's share */
    /* Two virtual GPUs of one GPU: one GPU, two shares of it. */
    assert_int_equal(allocate_container(&p, RESOURCE_GPU,
                                        (char *[]){"GPU-0-v0", "GPU-0-v3"}, 2,
                                        &a, err),
                     0);
    assert_string_equal(a.visible_devices, "GPU-0");
    assert_int_equal(a.memory_limit, 40 * GiB);
    /* Per GPU: 3 units is the limit on every GPU of the pod. */
    assert_int_equal(allocate_container(&p, RESOURCE_MEMORY, memory, 3, &a, err),
                     0);
    assert_int_equal(a.memory_limit, 3 * GiB);
    assert_int_equal(p.gpus[2].memory_ids_allocated, 3);
    assert_int_equal(allocate_container(&p, RESOURCE_GPU, bad, 2, &a, err), -1);
    assert_non_null(strstr(err, "GPU-0-m0"));
    assert_int_equal(allocate_container(&p, RESOURCE_GPU, vgpus, 0, &a, err), -1);
    p.gpus[1].healthy = false;
    assert_int_equal(allocate_container(&p, RESOURCE_GPU, vgpus, 3, &a, err), -1);
    assert_non_null(strstr(err, "unhealthy"));
}

/* Each gpu-memory ID is a unit of the limit: a list that names one device
 * twice, or a second spelling of its index, would be a limit past the GPU. */
static void test_repeated_ids(void **state)
{
    char *twice[] = {"GPU-2-m0", "GPU-2-m1", "GPU-2-m0"};
    char *alias[] = {"GPU-2-m1", "GPU-2-m01"};
    char **many = calloc(50000, sizeof(*many));
    const char *out[4];
    struct container_allocation a;
    char err[PLUGIN_ERR_LEN];
    int rc;

    (void)state;
    for (int i = 0; i < 50000; i++)
        many[i] = "GPU-2-m1";
    rc = allocate_container(&p, RESOURCE_MEMORY, many, 50000, &a, err);
    printf("50,000 copies of one 1 GiB ID: rc %d, memory limit %" PRIu64
           " bytes: %s\n",
           rc, a.memory_limit, rc ? err : "accepted");
    assert_int_equal(rc, -1);
    assert_non_null(
        strstr(err,
               "50000 nvshare.com/gpu-memory devices named, the node has 200"));
    assert_int_equal(allocate_container(&p, RESOURCE_MEMORY, twice, 3, &a, err),
                     -1);
    assert_string_equal(err, "device GPU-2-m0 is named twice");
    assert_int_equal(allocate_container(&p, RESOURCE_MEMORY, alias, 2, &a, err),
                     -1);
    assert_non_null(strstr(err, "GPU-2-m01"));
    assert_int_equal(allocate_container(&p, RESOURCE_GPU,
                                        (char *[]){"GPU-0-v1", "GPU-0-v1"}, 2,
                                        &a, err),
                     -1);
    assert_int_equal(p.gpus[2].memory_ids_allocated, 0);
    assert_int_equal(preferred_allocation(&p, RESOURCE_MEMORY, twice, 3, NULL,
                                          0, 1, out, err),
                     -1);
    assert_int_equal(preferred_allocation(&p, RESOURCE_MEMORY, alias, 1, twice,
                                          3, 3, out, err),
                     -1);
    assert_int_equal(preferred_allocation(&p, RESOURCE_MEMORY, many, 50000,
                                          NULL, 0, 1, out, err),
                     -1);
    assert_int_equal(gpu_of(RESOURCE_MEMORY, "GPU-2-m0"), 2);
    assert_int_equal(gpu_of(RESOURCE_MEMORY, "GPU-2-m00"), -1);
    free(many);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_device_ids, setup),
        cmocka_unit_test_setup(test_spread, setup),
        cmocka_unit_test_setup(test_memory_needs_room, setup),
        cmocka_unit_test_setup(test_pack, setup),
        cmocka_unit_test_setup(test_must_include_and_bad_requests, setup),
        cmocka_unit_test_setup(test_allocate, setup),
        cmocka_unit_test_setup(test_repeated_ids, setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
