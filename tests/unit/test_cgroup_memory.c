/* test_cgroup_memory.c - the room a process's memory cgroup leaves it,
 * from cgroup file systems laid out in a temporary directory: v2 and v1,
 * nested limits, memory.high, a cgroup namespace, paths that do not exist
 * or climb out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cgroup_memory.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static char root[256];

/* Writes text to root/dir/name, making dir. */
static void put(const char *dir, const char *name, const char *text)
{
    char path[1024], cmd[1100];

    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", root, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/%s/%s", root, dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void put_bytes(const char *dir, const char *name, uint64_t bytes)
{
    char text[32];

    snprintf(text, sizeof(text), "%llu\n", (unsigned long long)bytes);
    put(dir, name, text);
}

static void put_stat(const char *dir, const char *key, uint64_t bytes)
{
    char text[128];

    snprintf(text, sizeof(text), "anon 1\nfile 2\n%s %llu\nactive_file 3\n",
             key, (unsigned long long)bytes);
    put(dir, "memory.stat", text);
}

static int make_root(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/nvshare-cgroup-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int remove_root(void **state)
{
    char cmd[300];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd);
}

/* v2, a container in a pod: each level's room, the least of them. The
 * true root sets no limit and is passed over. */
static void test_v2_least_of_container_and_pod(void **state)
{
    (void)state;
    put("", "cgroup.controllers", "memory\n");
    put_bytes("", "memory.current", 50 * GiB);
    put("kubepods/pod1", "memory.max", "2147483648\n");
    put_bytes("kubepods/pod1", "memory.current", 1900 * MiB);
    put_stat("kubepods/pod1", "inactive_file", 0);
    put_bytes("kubepods/pod1/ctr", "memory.max", 1 * GiB);
    put("kubepods/pod1/ctr", "memory.high", "max\n");
    put_bytes("kubepods/pod1/ctr", "memory.current", 600 * MiB);
    put_stat("kubepods/pod1/ctr", "inactive_file", 100 * MiB);

    struct cgroup_memory m = cgroup_memory_of(root, "0::/kubepods/pod1/ctr\n");
    assert_int_equal(m.free, 148 * MiB);      /* the pod's */
    assert_int_equal(m.available, 148 * MiB); /* the pod has no cache */

    /* With the pod unlimited, the container's: its cache counts. */
    put("kubepods/pod1", "memory.max", "max\n");
    m = cgroup_memory_of(root, "0::/kubepods/pod1/ctr\n");
    assert_int_equal(m.free, 424 * MiB);
    assert_int_equal(m.available, 524 * MiB);
}

/* memory.high below memory.max is the limit: past it the kernel throttles. */
static void test_v2_high_below_max(void **state)
{
    (void)state;
    put_bytes("job", "memory.max", 4 * GiB);
    put_bytes("job", "memory.high", 3 * GiB);
    put_bytes("job", "memory.current", 1 * GiB);
    put_stat("job", "inactive_file", 0);
    struct cgroup_memory m = cgroup_memory_of(root, "0::/job\n");
    assert_int_equal(m.free, 2 * GiB);
    assert_int_equal(m.available, 2 * GiB);
}

/* Usage above the limit (it was lowered) leaves nothing, not a wrap. */
static void test_v2_usage_above_limit(void **state)
{
    (void)state;
    put_bytes("low", "memory.max", 1 * GiB);
    put_bytes("low", "memory.current", 2 * GiB);
    put_stat("low", "inactive_file", 512 * MiB);
    struct cgroup_memory m = cgroup_memory_of(root, "0::/low\n");
    assert_int_equal(m.free, 0);
    assert_int_equal(m.available, 0);
}

/* A cgroup namespace shows "/" and mounts the container's cgroup at root. */
static void test_v2_cgroup_namespace(void **state)
{
    (void)state;
    put_bytes("", "memory.max", 8 * GiB);
    put_bytes("", "memory.current", 3 * GiB);
    put_stat("", "inactive_file", 1 * GiB);
    struct cgroup_memory m = cgroup_memory_of(root, "0::/\n");
    assert_int_equal(m.free, 5 * GiB);
    assert_int_equal(m.available, 6 * GiB);

    /* A path that is not there under root: the levels that are. */
    m = cgroup_memory_of(root, "0::/kubepods/burstable/podX/ctr\n");
    assert_int_equal(m.free, 5 * GiB);

    /* One that climbs out of the namespace: the root only. */
    put_bytes("x", "memory.max", 1 * GiB);
    put_bytes("x", "memory.current", 0);
    m = cgroup_memory_of(root, "0::/../../x\n");
    assert_int_equal(m.free, 5 * GiB);
}

/* v1: the memory hierarchy's line, hierarchical inactive pages, and its
 * way of writing "no limit". */
static void test_v1_memory_hierarchy(void **state)
{
    (void)state;
    put("memory/docker", "memory.limit_in_bytes", "9223372036854771712\n");
    put_bytes("memory/docker", "memory.usage_in_bytes", 10 * GiB);
    put_bytes("memory/docker/abc", "memory.limit_in_bytes", 2 * GiB);
    put_bytes("memory/docker/abc", "memory.usage_in_bytes", 1536 * MiB);
    put_stat("memory/docker/abc", "total_inactive_file", 256 * MiB);
    struct cgroup_memory m = cgroup_memory_of(root,
                                              "12:pids:/docker/abc\n"
                                              "4:cpuacct,memory:/docker/abc\n"
                                              "0::/\n");
    assert_int_equal(m.free, 512 * MiB);
    assert_int_equal(m.available, 768 * MiB);
}

/* Nothing to read, nothing limited: no room is imposed. */
static void test_nothing_known_is_unlimited(void **state)
{
    (void)state;
    struct cgroup_memory m = cgroup_memory_of("/nonexistent", "0::/a\n");
    assert_true(m.free == CGROUP_MEMORY_UNLIMITED);
    assert_true(m.available == CGROUP_MEMORY_UNLIMITED);
    put("unlimited", "memory.max", "max\n");
    put_bytes("unlimited", "memory.current", 1 * GiB);
    m = cgroup_memory_of(root, "0::/unlimited\n");
    assert_true(m.free == CGROUP_MEMORY_UNLIMITED);
    m = cgroup_memory_of(root, "garbage");
    assert_true(m.available == CGROUP_MEMORY_UNLIMITED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_v2_least_of_container_and_pod,
                                        make_root, remove_root),
        cmocka_unit_test_setup_teardown(test_v2_high_below_max, make_root,
                                        remove_root),
        cmocka_unit_test_setup_teardown(test_v2_usage_above_limit, make_root,
                                        remove_root),
        cmocka_unit_test_setup_teardown(test_v2_cgroup_namespace, make_root,
                                        remove_root),
        cmocka_unit_test_setup_teardown(test_v1_memory_hierarchy, make_root,
                                        remove_root),
        cmocka_unit_test_setup_teardown(test_nothing_known_is_unlimited,
                                        make_root, remove_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
