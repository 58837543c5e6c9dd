/* test_pod_json.c - how the pod watcher reads a pod object: name, UID,
 * annotations (bad values marked unreadable, never sent as values), the
 * gpu-memory request summed over containers (saturated, not wrapped, when
 * it overflows), and when the scheduler must be told again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pod_json.h"

#define MiB (1ull << 20)
#define UNIT (256 * MiB)

static int read_pod(const char *json, struct watched_pod *p)
{
    cJSON *doc = cJSON_Parse(json);
    int rc;

    assert_non_null(doc);
    rc = pod_from_json(doc, UNIT, p);
    cJSON_Delete(doc);
    return rc;
}

static void test_annotations_and_request(void **state)
{
    struct watched_pod p;

    (void)state;
    assert_int_equal(
        read_pod(
            "{\"metadata\":{\"name\":\"trainer\",\"namespace\":\"ml\",\"uid\":"
            "\"u-1\","
            "\"resourceVersion\":\"42\",\"annotations\":{"
            "\"nvshare.com/gpu-core-limit\":\"30\",\"nvshare.com/"
            "gpu-memory-limit\":\"4Gi\"}},"
            "\"spec\":{\"containers\":["
            "{\"resources\":{\"limits\":{\"nvshare.com/gpu-memory\":\"4\"}}},"
            "{\"resources\":{\"requests\":{\"nvshare.com/gpu-memory\":\"2\"}}},"
            "{\"name\":\"sidecar\"}]}}",
            &p),
        0);
    assert_string_equal(p.facts.pod_uid, "u-1");
    assert_string_equal(p.facts.pod_namespace, "ml");
    assert_string_equal(p.facts.pod_name, "trainer");
    assert_string_equal(p.resource_version, "42");
    assert_int_equal(p.facts.core_limit, 30);
    assert_int_equal(p.facts.memory_limit, 4096 * MiB);
    assert_int_equal(p.facts.memory_request, 6 * UNIT);
    assert_int_equal(p.facts.unreadable, 0);
    assert_int_equal(p.facts.priority, 0);
    assert_true(p.concerns_nvshare);
}

static void test_priority_annotation(void **state)
{
    static const struct {
        const char *text;
        uint8_t priority;
    } cases[] = {
        {"high", PRIORITY_HIGH},
        {"Low", PRIORITY_LOW},
        {"normal", PRIORITY_NORMAL},
        {"7", 7},
        {"0", 0},
        {"10", 0},
        {"urgent", 0},
    };
    char json[512];
    struct watched_pod p;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"name\":\"a\",\"uid\":\"u\","
                 "\"annotations\":{\"nvshare.com/priority\":\"%s\"}}}",
                 cases[i].text);
        assert_int_equal(read_pod(json, &p), 0);
        assert_int_equal(p.facts.priority, cases[i].priority);
        assert_int_equal(p.facts.unreadable,
                         cases[i].priority ? 0 : POD_FACT_PRIORITY_UNREADABLE);
        assert_true(p.concerns_nvshare);
    }
}

/* nvshare.com/idle-swap: "off" keeps the pod's idle memory on the GPU. */
static void test_idle_swap_annotation(void **state)
{
    static const struct {
        const char *text;
        uint8_t idle_swap;
    } cases[] = {
        {"off", IDLE_SWAP_OFF}, {"false", IDLE_SWAP_OFF},
        {"on", IDLE_SWAP_ON},   {"On", IDLE_SWAP_ON},
        {"never", 0},
    };
    char json[512];
    struct watched_pod p, before;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"name\":\"a\",\"uid\":\"u\","
                 "\"annotations\":{\"nvshare.com/idle-swap\":\"%s\"}}}",
                 cases[i].text);
        assert_int_equal(read_pod(json, &p), 0);
        assert_int_equal(p.facts.idle_swap, cases[i].idle_swap);
        assert_int_equal(p.facts.unreadable,
                         cases[i].idle_swap ? 0 : POD_FACT_IDLE_SWAP_UNREADABLE);
        assert_true(p.concerns_nvshare);
        if (i > 0)
            assert_true(pod_facts_differ(&before, &p) ==
                        (cases[i].idle_swap != before.facts.idle_swap ||
                         p.facts.unreadable != before.facts.unreadable));
        before = p;
    }
}

static void test_which_pods_concern_nvshare(void **state)
{
    struct watched_pod p;

    (void)state;
    assert_int_equal(
        read_pod("{\"metadata\":{\"name\":\"web\",\"uid\":\"u\","
                 "\"annotations\":{\"team\":\"a\"}},\"spec\":{\"containers\":"
                 "[{\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]}}",
                 &p),
        0);
    assert_false(p.concerns_nvshare);
    assert_int_equal(read_pod("{\"metadata\":{\"name\":\"a\",\"uid\":\"u\"},"
                              "\"spec\":{\"containers\":[{\"resources\":{"
                              "\"limits\":"
                              "{\"nvshare.com/gpu\":\"1\"}}}]}}",
                              &p),
                     0);
    assert_true(p.concerns_nvshare);
    /* a bad value is still nvshare's: it is reported */
    assert_int_equal(read_pod("{\"metadata\":{\"name\":\"a\",\"uid\":\"u\","
                              "\"annotations\":{\"nvshare.com/"
                              "gpu-core-limit\":\"x\"}}}",
                              &p),
                     0);
    assert_true(p.concerns_nvshare);
}

static void test_bad_values_are_unreadable(void **state)
{
    static const char *core[] = {"abc", "0", "101", "-5", "30%", ""};
    static const char *memory[] = {"lots", "0", "-1Gi"};
    char json[512];
    struct watched_pod p;

    (void)state;
    for (size_t i = 0; i < sizeof(core) / sizeof(core[0]); i++) {
        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"name\":\"a\",\"uid\":\"u\","
                 "\"annotations\":{\"nvshare.com/gpu-core-limit\":\"%s\"}}}",
                 core[i]);
        assert_int_equal(read_pod(json, &p), 0);
        assert_int_equal(p.facts.unreadable, POD_FACT_CORE_UNREADABLE);
        assert_int_equal(p.facts.core_limit, 0);
        assert_true(p.core.bad);
        assert_string_equal(p.core.raw, core[i]);
    }
    for (size_t i = 0; i < sizeof(memory) / sizeof(memory[0]); i++) {
        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"name\":\"a\",\"uid\":\"u\","
                 "\"annotations\":{\"nvshare.com/gpu-memory-limit\":\"%s\"}}}",
                 memory[i]);
        assert_int_equal(read_pod(json, &p), 0);
        assert_int_equal(p.facts.unreadable, POD_FACT_MEMORY_UNREADABLE);
        assert_int_equal(p.facts.memory_limit, 0);
    }
}

/* A pod of n containers that each ask for units of gpu-memory. */
static char *pod_asking(int n, const char *units)
{
    size_t len = 256 + (size_t)n * 128;
    char *json = malloc(len);
    size_t at;

    assert_non_null(json);
    at = (size_t)snprintf(json, len,
                          "{\"metadata\":{\"name\":\"big\",\"uid\":\"u\"},"
                          "\"spec\":{\"containers\":[");
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(json + at, len - at,
                               "%s{\"resources\":{\"limits\":"
                               "{\"nvshare.com/gpu-memory\":\"%s\"}}}",
                               i ? "," : "", units);
    snprintf(json + at, len - at, "]}}");
    return json;
}

/* 100 containers of 2^30 units of 256 MiB are 2^64 x 6.25 bytes: the
 * product wrapped to 10376293541461622784 before. */
static void test_request_overflow_saturates(void **state)
{
    struct watched_pod p;
    char *json;

    (void)state;
    json = pod_asking(100, "1073741824");
    assert_int_equal(read_pod(json, &p), 0);
    free(json);
    printf("100 x 2^30 units of 256 MiB: memory_request %llu bytes, saturated "
           "%d\n",
           (unsigned long long)p.facts.memory_request, p.request_saturated);
    assert_true(p.request_saturated);
    assert_true(p.facts.memory_request == UINT64_MAX);

    /* The edge: 64 containers of 2^30 units of 2^28 bytes are 2^64 bytes,
     * one byte too many; 63 fit. */
    json = pod_asking(64, "1073741824");
    assert_int_equal(read_pod(json, &p), 0);
    free(json);
    assert_true(p.request_saturated);
    json = pod_asking(63, "1073741824");
    assert_int_equal(read_pod(json, &p), 0);
    free(json);
    assert_false(p.request_saturated);
    assert_true(p.facts.memory_request == 63ull * (1ull << 30) * UNIT);
}

static void test_pod_without_identity_refused(void **state)
{
    struct watched_pod p;

    (void)state;
    assert_int_equal(read_pod("{\"metadata\":{\"name\":\"a\"}}", &p), -1);
    assert_int_equal(read_pod("{\"metadata\":{\"uid\":\"u\"}}", &p), -1);
    assert_int_equal(read_pod("{\"kind\":\"Status\"}", &p), -1);
}

static void test_facts_differ(void **state)
{
    struct watched_pod a, b;

    (void)state;
    assert_int_equal(read_pod("{\"metadata\":{\"name\":\"a\",\"uid\":\"u\","
                              "\"resourceVersion\":\"1\"}}",
                              &a),
                     0);
    /* another resourceVersion (a status update) is not news */
    assert_int_equal(read_pod("{\"metadata\":{\"name\":\"a\",\"uid\":\"u\","
                              "\"resourceVersion\":\"2\",\"labels\":{\"x\":"
                              "\"y\"}}}",
                              &b),
                     0);
    assert_false(pod_facts_differ(&a, &b));
    assert_int_equal(read_pod("{\"metadata\":{\"name\":\"a\",\"uid\":\"u\","
                              "\"annotations\":"
                              "{\"nvshare.com/gpu-core-limit\":\"x\"}}}",
                              &b),
                     0);
    assert_true(pod_facts_differ(&a, &b));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_annotations_and_request),
        cmocka_unit_test(test_priority_annotation),
        cmocka_unit_test(test_idle_swap_annotation),
        cmocka_unit_test(test_which_pods_concern_nvshare),
        cmocka_unit_test(test_bad_values_are_unreadable),
        cmocka_unit_test(test_request_overflow_saturates),
        cmocka_unit_test(test_pod_without_identity_refused),
        cmocka_unit_test(test_facts_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
