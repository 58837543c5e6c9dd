/* test_gpus.c - NVSHARE_GPUS syntax ("UUID:MiB[,UUID:MiB...]") as read by
 * gpus_parse. A refused spec returns -1 with a sentence in err. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <stdio.h>

#include "gpus.h"

#define MAX 8

static struct node_gpu gpus[MAX];
static char err[256];

static int parse(const char *spec, int max)
{
    memset(gpus, 0, sizeof(gpus));
    err[0] = '\0';
    return gpus_parse(spec, gpus, max, err, (int)sizeof(err));
}

static void expect_bad(const char *spec, int max)
{
    int n = parse(spec, max);

    if (n != -1)
        fail_msg("'%s' accepted (%d GPUs)", spec, n);
    assert_true(err[0] != '\0');
}

static void test_single(void **state)
{
    (void)state;
    assert_int_equal(parse("GPU-11111111-2222-3333-4444-555555555555:81920", MAX),
                     1);
    assert_string_equal(gpus[0].uuid,
                        "GPU-11111111-2222-3333-4444-555555555555");
    assert_true(gpus[0].memory_total == 81920ull << 20);
    assert_true(gpus[0].name[0] != '\0');
}

static void test_multiple(void **state)
{
    (void)state;
    assert_int_equal(parse("GPU-a:1,GPU-b:2048,MIG-GPU-c/1/0:40960", MAX), 3);
    assert_string_equal(gpus[0].uuid, "GPU-a");
    assert_true(gpus[0].memory_total == 1ull << 20);
    assert_string_equal(gpus[1].uuid, "GPU-b");
    assert_true(gpus[1].memory_total == 2048ull << 20);
    assert_string_equal(gpus[2].uuid, "MIG-GPU-c/1/0");
    assert_true(gpus[2].memory_total == 40960ull << 20);
}

static void test_exactly_max(void **state)
{
    (void)state;
    assert_int_equal(parse("a:1,b:1,c:1", 3), 3);
}

static void test_largest_memory(void **state)
{
    char spec[64];

    (void)state;
    snprintf(spec, sizeof(spec), "GPU-a:%ld", 1L << 40);
    assert_int_equal(parse(spec, MAX), 1);
    assert_true(gpus[0].memory_total == (1ull << 40) << 20);
    snprintf(spec, sizeof(spec), "GPU-a:%ld", (1L << 40) + 1);
    expect_bad(spec, MAX);
}

static void test_longest_uuid(void **state)
{
    char spec[2 * PROTO_UUID_MAX];

    (void)state;
    memset(spec, 'u', PROTO_UUID_MAX - 1);
    strcpy(spec + PROTO_UUID_MAX - 1, ":1");
    assert_int_equal(parse(spec, MAX), 1);
    assert_int_equal(strlen(gpus[0].uuid), PROTO_UUID_MAX - 1);
    memset(spec, 'u', PROTO_UUID_MAX);
    strcpy(spec + PROTO_UUID_MAX, ":1");
    expect_bad(spec, MAX);
}

static void test_missing_colon(void **state)
{
    (void)state;
    expect_bad("GPU-a", MAX);
    expect_bad("GPU-a:1,GPU-b", MAX);
}

static void test_empty_uuid(void **state)
{
    (void)state;
    expect_bad(":1024", MAX);
    expect_bad("GPU-a:1,:1024", MAX);
}

static void test_bad_memory(void **state)
{
    static const char *const bad[] = {
        "GPU-a:0",   "GPU-a:-1",  "GPU-a:-1024",
        "GPU-a:abc", "GPU-a:",    "GPU-a:1Gi",
        "GPU-a: 1",  "GPU-a:1.5", "GPU-a:99999999999999999999",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_bad(bad[i], MAX);
}

static void test_duplicate(void **state)
{
    (void)state;
    expect_bad("GPU-a:1,GPU-a:2", MAX);
    expect_bad("GPU-a:1,GPU-b:1,GPU-a:1", MAX);
}

static void test_too_many(void **state)
{
    (void)state;
    expect_bad("a:1,b:1,c:1,d:1", 3);
    expect_bad("a:1", 0);
}

static void test_empty(void **state)
{
    (void)state;
    expect_bad("", MAX);
    expect_bad(",", MAX);
    expect_bad(",,,", MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single),
        cmocka_unit_test(test_multiple),
        cmocka_unit_test(test_exactly_max),
        cmocka_unit_test(test_largest_memory),
        cmocka_unit_test(test_longest_uuid),
        cmocka_unit_test(test_missing_colon),
        cmocka_unit_test(test_empty_uuid),
        cmocka_unit_test(test_bad_memory),
        cmocka_unit_test(test_duplicate),
        cmocka_unit_test(test_too_many),
        cmocka_unit_test(test_empty),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
