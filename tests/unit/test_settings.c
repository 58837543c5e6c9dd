/* test_settings.c - the scheduler's settings table (settings.c): every
 * default within its bounds, and a value judged alike whether it comes from
 * the environment or from nvsharectl set (parsed as nvsharectl parses it,
 * then checked as the scheduler's control socket checks it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "parse.h"
#include "policy.h"
#include "protocol.h"
#include "settings.h"

static void test_defaults_within_bounds(void **state)
{
    char err[PARSE_ERR_LEN];

    (void)state;
    for (int id = 0; id < SETTING_COUNT; id++) {
        const struct setting *s = &settings_table[id];
        assert_non_null(s->name);
        assert_non_null(s->env);
        assert_non_null(s->label);
        assert_non_null(s->help);
        assert_true(s->min <= s->max);
        if (setting_check(id, s->fallback, err, sizeof(err)))
            fail_msg("%s: default out of bounds: %s", s->env, err);
        if (s->kind == SETTING_ENUM) {
            uint64_t n = 0;
            while (s->choices[n])
                n++;
            assert_int_equal(n, s->max + 1);
        }
    }
}

/* The value settings_load gives for env=text, or -1 if it refuses to start. */
static int load(enum setting_id id, const char *text, uint64_t *value)
{
    uint64_t values[SETTING_COUNT];
    int rc;

    setenv(settings_table[id].env, text, 1);
    rc = settings_load(values);
    unsetenv(settings_table[id].env);
    *value = values[id];
    return rc;
}

/* Whether the environment takes text: a refused value leaves the default
 * (or, for a choice, stops the scheduler). */
static int env_accepts(enum setting_id id, const char *text, uint64_t want)
{
    uint64_t value;

    if (load(id, text, &value) < 0)
        return 0;
    if (want == settings_table[id].fallback)
        fail_msg("pick a test value other than %s's default",
                 settings_table[id].env);
    return value == want;
}

static void expect_alike(enum setting_id id, const char *text, uint64_t parsed,
                         int ctl_parsed)
{
    char err[PARSE_ERR_LEN];
    int ctl = ctl_parsed && setting_check(id, parsed, err, sizeof(err)) == 0;
    int env = env_accepts(id, text, parsed);

    if (ctl != env)
        fail_msg("%s=%s: environment %s it, nvsharectl set %s it",
                 settings_table[id].env, text, env ? "takes" : "refuses",
                 ctl ? "takes" : "refuses");
}

static void expect_durations_alike(enum setting_id id, const char *const texts[])
{
    for (int i = 0; texts[i]; i++) {
        uint64_t ns = 0;
        int ok = parse_duration_ns(texts[i], &ns, NULL) == 0;
        expect_alike(id, texts[i], ns, ok);
    }
}

static void test_tq_alike(void **state)
{
    /* Texts that are no duration would read as the default (auto, 0) if
     * refused, so they are checked apart. */
    static const char *const texts[] = {"500us", "1ms", "100ms", "1h",
                                        "61m",   "2h",  NULL};
    uint64_t value;

    (void)state;
    expect_durations_alike(SETTING_TQ, texts);
    {
        char why[PARSE_ERR_LEN];
        assert_int_equal(setting_parse(SETTING_TQ, "0", &value, why, sizeof(why)),
                         -1);
        assert_int_equal(setting_parse(SETTING_TQ, "soon", &value, why,
                                       sizeof(why)),
                         -1);
    }
    /* The case the table was made for: refused both ways. */
    assert_int_equal(load(SETTING_TQ, "2h", &value), 0);
    assert_int_equal(value, POLICY_TQ_AUTO);
    /* auto is a value of its own, read back as written. */
    char err[PARSE_ERR_LEN], text[32];
    value = 1;
    assert_int_equal(setting_parse(SETTING_TQ, "auto", &value, err, sizeof(err)),
                     0);
    assert_int_equal(value, POLICY_TQ_AUTO);
    assert_int_equal(setting_check(SETTING_TQ, POLICY_TQ_AUTO, err, sizeof(err)),
                     0);
    setting_format(SETTING_TQ, POLICY_TQ_AUTO, text, sizeof(text));
    assert_string_equal(text, "auto");
    /* Other settings know no auto. */
    assert_int_equal(setting_parse(SETTING_DRAIN_TIMEOUT, "auto", &value, err,
                                   sizeof(err)),
                     -1);
}

static void test_switch_time_alike(void **state)
{
    static const char *const texts[] = {"50ms", "100ms", "45s",
                                        "1h",   "2h",    NULL};

    (void)state;
    expect_durations_alike(SETTING_SWITCH_TIME_FIXED, texts);
}

/* 0s is a value of idle-swap-after (swap at once), not auto; the host
 * swap budget knows auto, and sizes. */
static void test_idle_reclaim_settings_alike(void **state)
{
    static const char *const texts[] = {"1ms", "30s", "24h", "25h", NULL};
    char err[PARSE_ERR_LEN], text[32];
    uint64_t value = 1;

    (void)state;
    expect_durations_alike(SETTING_IDLE_SWAP_AFTER, texts);
    expect_alike(SETTING_IDLE_SWAP_AFTER, "0s", 0, 1);
    expect_alike(SETTING_IDLE_SWAP_AFTER, "0", 0, 1);
    assert_int_equal(setting_parse(SETTING_IDLE_SWAP_AFTER, "0s", &value, err,
                                   sizeof(err)),
                     0);
    assert_int_equal(value, 0);
    /* Other durations still refuse 0. */
    assert_int_equal(setting_parse(SETTING_DRAIN_TIMEOUT, "0s", &value, err,
                                   sizeof(err)),
                     -1);
    assert_int_equal(setting_parse(SETTING_IDLE_SWAP_AFTER, "auto", &value, err,
                                   sizeof(err)),
                     -1);
    setting_format(SETTING_IDLE_SWAP_AFTER, 0, text, sizeof(text));
    assert_string_equal(text, "0");
    assert_int_equal(setting_parse(SETTING_HOST_SWAP_BUDGET, "auto", &value,
                                   err, sizeof(err)),
                     0);
    assert_int_equal(value, 0);
    assert_int_equal(setting_parse(SETTING_HOST_SWAP_BUDGET, "64Gi", &value,
                                   err, sizeof(err)),
                     0);
    assert_int_equal(value, 64ull << 30);
    setting_format(SETTING_HOST_SWAP_BUDGET, 0, text, sizeof(text));
    assert_string_equal(text, "auto");
}

static void test_mode_alike(void **state)
{
    static const char *const texts[] = {"serial", "concurrent", "fast", "", NULL};

    (void)state;
    for (int i = 0; texts[i]; i++) {
        uint64_t m = 0;
        while (sched_mode_names[m] && strcmp(texts[i], sched_mode_names[m]))
            m++;
        if (!texts[i][0])
            continue; /* unset: the default, not a choice */
        expect_alike(SETTING_SCHEDULING_MODE, texts[i], m,
                     sched_mode_names[m] != NULL);
    }
}

static void test_anti_thrash_alike(void **state)
{
    char err[PARSE_ERR_LEN];
    int on = -1;

    (void)state;
    assert_int_equal(parse_switch("off", &on, NULL), 0);
    expect_alike(SETTING_ANTI_THRASH, "off", (uint64_t)on, 1);
    /* Over the wire a value is a number: 2 is neither on nor off. */
    assert_int_equal(setting_check(SETTING_ANTI_THRASH, 2, err, sizeof(err)), -1);
    assert_string_equal(err, "anti-thrash is on or off");
}

static void test_ctl_messages(void **state)
{
    char err[PARSE_ERR_LEN];

    (void)state;
    /* tests/integration/ctl_test.sh expects these sentences. */
    assert_int_equal(setting_check(SETTING_TQ, 7200 * 1000000000ull, err,
                                   sizeof(err)),
                     -1);
    assert_string_equal(err,
                        "time quantum must be between 1ms and 1h, or auto");
    assert_int_equal(setting_check(SETTING_SWITCH_TIME_FIXED, 1, err, sizeof(err)),
                     -1);
    assert_string_equal(err, "switch time must be between 100ms and 1h");
    assert_int_equal(setting_check(SETTING_SCHEDULING_MODE, 3, err, sizeof(err)),
                     -1);
    assert_string_equal(err, "mode must be serial, concurrent or auto");
}

static void test_usage_names_every_variable(void **state)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    (void)state;
    assert_non_null(out);
    settings_usage(out);
    fclose(out);
    for (int id = 0; id < SETTING_COUNT; id++)
        if (!strstr(text, settings_table[id].env))
            fail_msg("usage text lacks %s", settings_table[id].env);
    assert_non_null(strstr(text, "(1ms-1h, default auto)"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_within_bounds),
        cmocka_unit_test(test_tq_alike),
        cmocka_unit_test(test_switch_time_alike),
        cmocka_unit_test(test_idle_reclaim_settings_alike),
        cmocka_unit_test(test_mode_alike),
        cmocka_unit_test(test_anti_thrash_alike),
        cmocka_unit_test(test_ctl_messages),
        cmocka_unit_test(test_usage_names_every_variable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
