/* test_shards.c - the plugin's arguments and the arithmetic that turns a
 * Slurm job's shards into its pod's limits (src/slurm/shards.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shards.h"

#define GiB (1024ull * 1024 * 1024)

static int parse(struct shards_config *c, char *err, int argc, ...)
{
    char *argv[8];
    va_list ap;

    va_start(ap, argc);
    for (int i = 0; i < argc; i++)
        argv[i] = va_arg(ap, char *);
    va_end(ap);
    return shards_parse_args(c, argc, argv, err);
}

static void test_from_gpu_size(void **state)
{
    struct shards_config c;
    struct shards_limits l;
    char err[SHARDS_ERR_LEN];

    (void)state;
    assert_int_equal(parse(&c, err, 1, "shards_per_gpu=8"), 0);
    assert_true(shards_need_gpu_memory(&c));
    assert_false(c.fail_job);
    shards_limits(&c, 2, 16 * GiB, &l);
    assert_int_equal(l.memory, 4 * GiB);
    assert_int_equal(l.core, 25);
    shards_limits(&c, 1, 80 * GiB, &l);
    assert_int_equal(l.memory, 10 * GiB);
    assert_int_equal(l.core, 12); /* 12.5 % rounds down: a cap */
    shards_limits(&c, 8, 16 * GiB, &l);
    assert_int_equal(l.memory, 16 * GiB);
    assert_int_equal(l.core, 100);
    /* Three shards of a GPU cut in 3: one third each, never above it. */
    assert_int_equal(parse(&c, err, 1, "shards_per_gpu=3"), 0);
    shards_limits(&c, 1, 10 * GiB + 1, &l);
    assert_int_equal(l.memory, (10 * GiB + 1) / 3);
    assert_int_equal(l.core, 33);
    /* A GPU cut into more shards than percent: at least 1 %. */
    assert_int_equal(parse(&c, err, 1, "shards_per_gpu=1000"), 0);
    shards_limits(&c, 1, 16 * GiB, &l);
    assert_int_equal(l.core, 1);
}

static void test_per_shard(void **state)
{
    struct shards_config c;
    struct shards_limits l;
    char err[SHARDS_ERR_LEN];

    (void)state;
    assert_int_equal(parse(&c, err, 3, "memory_per_shard=10Gi",
                           "compute_per_shard=12", "on_error=fail"),
                     0);
    assert_false(shards_need_gpu_memory(&c));
    assert_true(c.fail_job);
    shards_limits(&c, 3, 0, &l);
    assert_int_equal(l.memory, 30 * GiB);
    assert_int_equal(l.core, 36);
    shards_limits(&c, 9, 0, &l);
    assert_int_equal(l.core, 100); /* never above the whole GPU */
    /* One given, the other from the GPU's size. */
    assert_int_equal(parse(&c, err, 2, "compute_per_shard=20", "shards_per_gpu=4"),
                     0);
    assert_true(shards_need_gpu_memory(&c));
    shards_limits(&c, 2, 16 * GiB, &l);
    assert_int_equal(l.memory, 8 * GiB);
    assert_int_equal(l.core, 40);
}

static void test_paths(void **state)
{
    struct shards_config c;
    char err[SHARDS_ERR_LEN];

    (void)state;
    assert_int_equal(parse(&c, err, 1, "shards_per_gpu=8"), 0);
    assert_string_equal(c.sock_dir, "/var/run/nvshare");
    assert_int_equal(parse(&c, err, 3, "shards_per_gpu=8", "sock_dir=/run/x",
                           "libnvshare=/opt/nvshare/lib/libnvshare.so"),
                     0);
    assert_string_equal(c.sock_dir, "/run/x");
    assert_string_equal(c.libnvshare, "/opt/nvshare/lib/libnvshare.so");
}

static void test_bad_arguments(void **state)
{
    static const char *const bad[] = {
        "shards_per_gpu=0",
        "shards_per_gpu=x",
        "memory_per_shard=0",
        "memory_per_shard=4Gx",
        "compute_per_shard=101",
        "compute_per_shard=0",
        "on_error=maybe",
        "sock_dir=relative",
        "colour=blue",
        "shards_per_gpu",
        "=8",
    };
    struct shards_config c;
    char err[SHARDS_ERR_LEN];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (parse(&c, err, 2, "shards_per_gpu=8", bad[i]) != -1 || !err[0])
            fail_msg("'%s' accepted", bad[i]);
    }
    /* Neither the shards per GPU nor both per-shard values. */
    assert_int_equal(parse(&c, err, 0), -1);
    assert_int_equal(parse(&c, err, 1, "memory_per_shard=1Gi"), -1);
    assert_non_null(strstr(err, "shards_per_gpu"));
}

static void test_job_kind(void **state)
{
    enum shards_job_kind kind;
    unsigned shards;
    char err[SHARDS_ERR_LEN];

    (void)state;
    assert_int_equal(shards_job_kind("2", "0", &kind, &shards, err), 0);
    assert_int_equal(kind, SHARDS_SHARED);
    assert_int_equal(shards, 2);
    assert_int_equal(shards_job_kind(NULL, "0,1", &kind, &shards, err), 0);
    assert_int_equal(kind, SHARDS_WHOLE_GPU);
    assert_int_equal(shards_job_kind("", "", &kind, &shards, err), 0);
    assert_int_equal(kind, SHARDS_NO_GPU);
    assert_int_equal(shards_job_kind(NULL, NULL, &kind, &shards, err), 0);
    assert_int_equal(kind, SHARDS_NO_GPU);
    assert_int_equal(shards_job_kind("0", "0", &kind, &shards, err), -1);
    assert_int_equal(shards_job_kind("two", "0", &kind, &shards, err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_from_gpu_size),
        cmocka_unit_test(test_per_shard),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_job_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
