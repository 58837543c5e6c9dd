/* test_parse.c - operator-supplied values: durations, sizes, ranges,
 * switches, and how they are printed back. Table-driven: one row per case.
 * A refused value must leave *out untouched and explain itself in err. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>

#include "parse.h"

#define SENTINEL 0x5eed5eed5eed5eedull

struct u64_case {
    const char *text;
    uint64_t want;
};

static void expect_u64_ok(int (*fn)(const char *, uint64_t *, char *),
                          const struct u64_case *c)
{
    char err[PARSE_ERR_LEN] = "";
    uint64_t out = SENTINEL;

    if (fn(c->text, &out, err) != 0)
        fail_msg("'%s' refused: %s", c->text, err);
    if (out != c->want)
        fail_msg("'%s' gave %llu, want %llu", c->text, (unsigned long long)out,
                 (unsigned long long)c->want);
}

static void expect_u64_bad(int (*fn)(const char *, uint64_t *, char *),
                           const char *text)
{
    char err[PARSE_ERR_LEN] = "";
    uint64_t out = SENTINEL;

    if (fn(text, &out, err) != -1)
        fail_msg("'%s' accepted as %llu", text ? text : "(null)",
                 (unsigned long long)out);
    assert_true(out == SENTINEL);
    assert_true(err[0] != '\0');
    assert_non_null(memchr(err, '\0', sizeof(err)));
    /* err may be NULL */
    assert_int_equal(fn(text, &out, NULL), -1);
    assert_true(out == SENTINEL);
}

static const struct u64_case durations_ok[] = {
    {"30s", 30000000000ull},
    {"100ms", 100000000ull},
    {"250us", 250000ull},
    {"1.5s", 1500000000ull},
    {"2m", 120000000000ull},
    {"1h", 3600000000000ull},
    {"1ns", 1ull},
    {"0.5ms", 500000ull},
    {".5s", 500000000ull},
    {"1.0000000004s", 1000000000ull},        /* rounded to the nearest ns */
    {"88888h", 88888ull * 3600000000000ull}, /* just under the ~10-year cap */
};

static const char *const durations_bad[] = {
    "",       "abc",   "-1",    "4x",     "0",    "0ms",
    "1e400",  " 5s",   "5 s",   NULL,     "+5s",  "5s ",
    "s",      "ms",    ".",     "nan",    "inf",  "5S",
    "5sec",   "1.5.s", "0.1ns", "1e-400", "5s\n", "100000000000000000000",
    "88889h", "5",     "500",   "1.5", /* a bare number needs a unit */
};

static void test_duration_valid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(durations_ok) / sizeof(durations_ok[0]); i++)
        expect_u64_ok(parse_duration_ns, &durations_ok[i]);
}

static void test_duration_invalid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(durations_bad) / sizeof(durations_bad[0]); i++)
        expect_u64_bad(parse_duration_ns, durations_bad[i]);
}

/* Only decimal digits and one '.' come before the unit: no C hex floats
 * ("0x10", "0x1p3s"), which strtod would accept. */
static void test_duration_rejects_hex(void **state)
{
    (void)state;
    expect_u64_bad(parse_duration_ns, "0x10");
    expect_u64_bad(parse_duration_ns, "0x1p3s");
    expect_u64_bad(parse_size_bytes, "0x10Gi");
}

static const struct u64_case sizes_ok[] = {
    {"4Gi", 4ull << 30},
    {"4096Mi", 4ull << 30},
    {"512M", 512000000ull},
    {"1234", 1234ull},
    {"1.5Gi", 3ull << 29},
    {"0", 0},
    {"1Ki", 1024},
    {"2Ti", 2ull << 40},
    {"3k", 3000},
    {"2Pi", 2ull << 50},
    {"3P", 3000000000000000ull},
    {"1Ei", 1ull << 60},
    {"9E", 9000000000000000000ull},
    {"7G", 7000000000ull},
    {"1T", 1000000000000ull},
    {"0.5Ki", 512},
    {"8000000Ti", 8000000ull << 40}, /* under the 9.2e18 cap */
};

static const char *const sizes_bad[] = {
    "4Gx",
    "-1",
    "",
    "99999999999999999999Gi",
    "1.5",
    "Gi",
    NULL,
    " 4Gi",
    "4Gi ",
    "4 Gi",
    "4gi",
    "4GiB",
    "0.1Ki",
    "8388608Ti",
    "9300000000000000000",
    "1e400",
    "+4Gi",
    "4i",
    "4GB",
    "3K",
    "4MB", /* not Kubernetes quantities */
};

/* The errors say what a duration needs and what a size suffix means. */
static void test_unit_errors(void **state)
{
    char err[PARSE_ERR_LEN];
    uint64_t out;

    (void)state;
    assert_int_equal(parse_duration_ns("500", &out, err), -1);
    assert_string_equal(err,
                        "duration '500' needs a unit: ns, us, ms, s, m or h, "
                        "e.g. 500ms, 2s");
    assert_int_equal(parse_size_bytes("4GB", &out, err), -1);
    assert_non_null(strstr(err, "unknown unit 'GB'"));
    assert_non_null(strstr(err, "4G = 4x10^9 bytes, 4Gi = 4x2^30 bytes"));
    assert_int_equal(parse_size_bytes("4G", &out, err), 0);
    assert_true(out == 4000000000ull);
    assert_int_equal(parse_size_bytes("4Gi", &out, err), 0);
    assert_true(out == 4ull << 30);
}

static void test_size_valid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(sizes_ok) / sizeof(sizes_ok[0]); i++)
        expect_u64_ok(parse_size_bytes, &sizes_ok[i]);
}

static void test_size_invalid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(sizes_bad) / sizeof(sizes_bad[0]); i++)
        expect_u64_bad(parse_size_bytes, sizes_bad[i]);
}

/* Decimal fractions scale exactly: "1.001k" is 1001 bytes, not a binary
 * floating-point 1000.9999999999999 refused as a fraction of a byte. */
static void test_size_decimal_fractions_are_exact(void **state)
{
    static const struct u64_case cases[] = {
        {"1.001k", 1001},    {"1.003k", 1003},    {"1.5k", 1500},
        {"2.001M", 2001000}, {"0.001G", 1000000},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_u64_ok(parse_size_bytes, &cases[i]);
}

static void test_int_range(void **state)
{
    char err[PARSE_ERR_LEN];
    long out;

    (void)state;
    assert_int_equal(parse_int_range("1", 1, 100, &out, err), 0);
    assert_int_equal(out, 1);
    assert_int_equal(parse_int_range("100", 1, 100, &out, err), 0);
    assert_int_equal(out, 100);
    assert_int_equal(parse_int_range("-5", -5, 5, &out, err), 0);
    assert_int_equal(out, -5);

    static const char *const bad[] = {"0",   "101", "-1",
                                      "",    NULL,  " 5",
                                      "5 ",  "5x",  "0x10",
                                      "1.0", "abc", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        out = 77;
        err[0] = '\0';
        if (parse_int_range(bad[i], 1, 100, &out, err) != -1)
            fail_msg("'%s' accepted", bad[i] ? bad[i] : "(null)");
        assert_int_equal(out, 77);
        assert_true(err[0] != '\0');
        assert_int_equal(parse_int_range(bad[i], 1, 100, &out, NULL), -1);
    }

    /* the whole range of long */
    char text[32];
    snprintf(text, sizeof(text), "%ld", LONG_MAX);
    assert_int_equal(parse_int_range(text, LONG_MIN, LONG_MAX, &out, err), 0);
    assert_true(out == LONG_MAX);
    snprintf(text, sizeof(text), "%ld", LONG_MIN);
    assert_int_equal(parse_int_range(text, LONG_MIN, LONG_MAX, &out, err), 0);
    assert_true(out == LONG_MIN);
    assert_int_equal(parse_int_range("9223372036854775808", LONG_MIN, LONG_MAX,
                                     &out, err),
                     -1);
    assert_int_equal(parse_int_range(text, LONG_MIN + 1, LONG_MAX, &out, err),
                     -1);
}

static void test_switch(void **state)
{
    static const char *const on[] = {"on",   "ON",  "1",  "true",
                                     "True", "yes", "YES"};
    static const char *const off[] = {"off",   "Off", "0", "false",
                                      "FALSE", "no",  "No"};
    static const char *const bad[] = {"",    NULL, "2", "onn",
                                      " on", "of", "y", "enable"};
    char err[PARSE_ERR_LEN];
    int out;

    (void)state;
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        out = -1;
        assert_int_equal(parse_switch(on[i], &out, err), 0);
        assert_int_equal(out, 1);
    }
    for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
        out = -1;
        assert_int_equal(parse_switch(off[i], &out, err), 0);
        assert_int_equal(out, 0);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        out = -1;
        err[0] = '\0';
        assert_int_equal(parse_switch(bad[i], &out, err), -1);
        assert_int_equal(out, -1);
        assert_true(err[0] != '\0');
        assert_int_equal(parse_switch(bad[i], &out, NULL), -1);
    }
}

static void test_format_duration(void **state)
{
    static const struct {
        uint64_t ns;
        const char *want;
    } cases[] = {
        {30000000000ull, "30s"},    {1250000000ull, "1.25s"},
        {1000000000ull, "1s"},      {100000000ull, "100ms"},
        {1500000ull, "1.5ms"},      {250000ull, "250us"},
        {500ull, "0.5us"},          {0, "0s"},
        {120000000000ull, "2m00s"}, {3725000000000ull, "1h02m"},
    };
    char buf[32];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        format_duration(cases[i].ns, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].want);
    }
    /* truncates, never overflows */
    format_duration(30000000000ull, buf, 3);
    assert_string_equal(buf, "30");
}

/* No exponent notation at any size: 1h, 1000s and 999999999ns once printed
 * as "3.6e+03s", "1e+03s" and "1e+03ms". */
static void test_format_duration_has_no_exponent(void **state)
{
    static const uint64_t ns[] = {3600000000000ull, 1000000000000ull,
                                  999999999ull, 999999ull, 86400000000000ull};
    char buf[32];

    (void)state;
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        format_duration(ns[i], buf, sizeof(buf));
        if (strchr(buf, 'e'))
            fail_msg("format_duration(%llu) = \"%s\"",
                     (unsigned long long)ns[i], buf);
    }
}

static void test_format_size(void **state)
{
    static const struct {
        uint64_t bytes;
        const char *want;
    } cases[] = {
        {0, "0 B"},
        {512, "512 B"},
        {1023, "1023 B"},
        {1024, "1.00 KiB"},
        {1536, "1.50 KiB"},
        {4ull << 30, "4.00 GiB"},
        {80ull << 30, "80.00 GiB"},
        {3ull << 40, "3.00 TiB"},
        {1ull << 50, "1024.00 TiB"}, /* TiB is the largest unit */
    };
    char buf[32];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        format_size(cases[i].bytes, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].want);
    }
    format_size(4ull << 30, buf, 5);
    assert_string_equal(buf, "4.00");
}

/* What format_* prints, parse_* reads back (for values that print exactly). */
static void test_format_parse_round_trip(void **state)
{
    static const uint64_t ns[] = {30000000000ull, 1250000000ull, 100000000ull,
                                  250000ull, 1500000ull};
    char buf[32];
    uint64_t out;

    (void)state;
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        format_duration(ns[i], buf, sizeof(buf));
        assert_int_equal(parse_duration_ns(buf, &out, NULL), 0);
        assert_true(out == ns[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration_valid),
        cmocka_unit_test(test_duration_invalid),
        cmocka_unit_test(test_duration_rejects_hex),
        cmocka_unit_test(test_unit_errors),
        cmocka_unit_test(test_size_valid),
        cmocka_unit_test(test_size_invalid),
        cmocka_unit_test(test_size_decimal_fractions_are_exact),
        cmocka_unit_test(test_int_range),
        cmocka_unit_test(test_switch),
        cmocka_unit_test(test_format_duration),
        cmocka_unit_test(test_format_duration_has_no_exponent),
        cmocka_unit_test(test_format_size),
        cmocka_unit_test(test_format_parse_round_trip),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
