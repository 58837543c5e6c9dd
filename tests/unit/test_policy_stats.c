/* test_policy_stats.c - the per-account counters the metrics endpoint
 * reads (policy_view_account): GPU time billed, lock waits, preemptions,
 * drains and time held back by a core limit, on a synthetic clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "policy_internal.h" /* a static struct policy */
#include "policy_fixture.h"

#define MS 1000000ull
#define WINDOW (1000 * MS)


/* The lease of the grant to client in out, or 0. */
static uint32_t granted(const struct policy_actions *out, int client)
{
    for (int i = 0; i < out->n; i++)
        if (out->list[i].kind == ACTION_GRANT && out->list[i].client == client)
            return out->list[i].lease;
    return 0;
}

static bool dropped(const struct policy_actions *out, int client)
{
    for (int i = 0; i < out->n; i++)
        if (out->list[i].kind == ACTION_DROP && out->list[i].client == client)
            return true;
    return false;
}

static void start(uint64_t tq_ns)
{
    policy_start(&p, 1, tq_ns, 10000 * MS);
    policy_set_window(&p, WINDOW, 100);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
}

/* Client 0 (account 0) gets the GPU at once, is dropped after its TQ of
 * 100 ms and drains in 5 ms; client 1 (account 1) waited 105 ms for it. */
static void test_rotation_counters(void **state)
{
    struct policy_actions out;
    struct policy_account_stats a0, a1;
    uint32_t lease0;

    (void)state;
    start(100 * MS);
    policy_join(&p, 0, 0, 0, 0);
    policy_join(&p, 0, 1, 1, 0);
    policy_actions_clear(&out);
    policy_request(&p, 0, 0, 0, &out);
    policy_request(&p, 0, 1, 0, &out);
    lease0 = granted(&out, 0);
    assert_true(lease0);
    policy_actions_clear(&out);
    policy_tick(&p, 100 * MS, &out);
    assert_true(dropped(&out, 0));
    policy_actions_clear(&out);
    policy_release(&p, 0, 0, lease0, 5 * MS, 0, 105 * MS, &out);
    assert_true(granted(&out, 1));

    policy_view_account(&p, 0, 0, 200 * MS, &a0);
    policy_view_account(&p, 0, 1, 200 * MS, &a1);
    assert_int_equal(a0.preemptions, 1);
    assert_int_equal(a1.preemptions, 0);
    assert_int_equal(a0.drain.count, 1);
    assert_int_equal(a0.drain.sum_ns, 5 * MS);
    assert_int_equal(a0.drain.bucket[2], 1); /* <= 10 ms, > 1 ms */
    assert_int_equal(a0.lock_wait.count, 1);
    assert_int_equal(a0.lock_wait.sum_ns, 0);
    assert_int_equal(a0.lock_wait.bucket[0], 1);
    assert_int_equal(a1.lock_wait.count, 1);
    assert_int_equal(a1.lock_wait.sum_ns, 105 * MS);
    assert_int_equal(a1.lock_wait.bucket[4], 1); /* <= 500 ms, > 100 ms */
    /* Client 0's hold is billed to its release; client 1's, in progress. */
    assert_int_equal(a0.billed_ns, 105 * MS);
    assert_int_equal(a1.billed_ns, 95 * MS);
    assert_int_equal(a0.throttled_ns + a1.throttled_ns, 0);

    /* A number given out again starts from nothing. */
    policy_reset_account(&p, 0);
    policy_view_account(&p, 0, 0, 200 * MS, &a0);
    assert_int_equal(a0.preemptions + a0.drain.count + a0.lock_wait.count +
                         a0.billed_ns,
                     0);
}

/* A compute-bound pod at 10 % runs ~100 ms of each 1 s window and is held
 * back for the rest, which its throttled seconds count. */
static void test_throttled_time(void **state)
{
    struct policy_actions out;
    struct policy_account_stats a;
    uint32_t lease = 0;
    uint64_t release_at = 0;

    (void)state;
    start(30 * MS);
    policy_join(&p, 0, 0, 0, 0);
    policy_set_core_limit(&p, 0, 0, 10, 0);
    policy_actions_clear(&out);
    policy_request(&p, 0, 0, 0, &out);
    lease = granted(&out, 0);
    for (uint64_t now = MS; now <= WINDOW - MS; now += MS) {
        policy_actions_clear(&out);
        if (release_at && now >= release_at) {
            policy_release(&p, 0, 0, lease, MS, 0, now, &out);
            release_at = 0;
            lease = 0;
        }
        if (!lease && !release_at) {
            policy_request(&p, 0, 0, now, &out); /* wants it again at once */
            lease = granted(&out, 0);
        }
        policy_tick(&p, now, &out);
        if (!lease)
            lease = granted(&out, 0);
        if (dropped(&out, 0))
            release_at = now + MS;
    }
    policy_view_account(&p, 0, 0, WINDOW - MS, &a);
    print_message("billed %llu ms, throttled %llu ms, preempted %llu times\n",
                  (unsigned long long)(a.billed_ns / MS),
                  (unsigned long long)(a.throttled_ns / MS),
                  (unsigned long long)a.preemptions);
    assert_in_range(a.billed_ns, 90 * MS, 120 * MS);
    assert_in_range(a.throttled_ns, 800 * MS, WINDOW);
    assert_true(a.preemptions >= 5); /* dropped at its pace, slice by slice */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rotation_counters),
        cmocka_unit_test(test_throttled_time),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);

    policy_destroy(&p);
    return rc;
}
