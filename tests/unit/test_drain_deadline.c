/* test_drain_deadline.c - when a holder that does not answer DROP loses its
 * GPU: 1 s or 4 x its recent DROP-to-release latencies, up to the drain
 * timeout while it says DRAINING, and at once when the daemon sees its
 * process stopped. Driven by a synthetic clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy_internal.h" /* checks the state it drives */
#include "policy_fixture.h"

#define MS 1000000ull
#define SEC (1000 * MS)
#define TQ (100 * MS)
#define DRAIN_TIMEOUT (10 * SEC)


static int setup(void **state)
{
    (void)state;
    policy_start(&p, 1, TQ, DRAIN_TIMEOUT);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
    for (int c = 0; c < 3; c++)
        policy_join(&p, 0, c, c, 0);
    return 0;
}

/* Client 0 holds from `at`, client 1 waits; the DROP goes out at at + TQ.
 * Returns client 0's lease. */
static uint32_t hold_with_waiter(uint64_t at)
{
    policy_actions_clear(&out);
    policy_request(&p, 0, 0, at, &out);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    uint32_t lease = out.list[0].lease;
    policy_actions_clear(&out);
    policy_request(&p, 0, 1, at + 1 * MS, &out);
    tick(at + TQ);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    return lease;
}

static void test_silent_holder_loses_the_gpu_after_1s(void **state)
{
    (void)state;
    hold_with_waiter(0);
    /* Not the 10 s drain timeout: nothing says the drain is long. */
    assert_int_equal(tick(TQ + 1 * MS), TQ + POLICY_DRAIN_QUIET_NS);
    tick(TQ + POLICY_DRAIN_QUIET_NS - 1);
    assert_int_equal(out.n, 0);
    tick(TQ + POLICY_DRAIN_QUIET_NS);
    assert_int_equal(count(ACTION_REVOKE, 0), 1);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
}

static void test_deadline_follows_measured_drains(void **state)
{
    uint64_t t = 0;

    (void)state;
    /* Client 0 releases 300 ms after each DROP, then 600 ms once: 4 x the
     * longest recent one is 2.4 s. */
    for (int i = 0; i < 4; i++) {
        uint32_t lease = hold_with_waiter(t);
        uint64_t late = i == 3 ? 600 * MS : 300 * MS;
        policy_actions_clear(&out);
        policy_release(&p, 0, 0, lease, late, 0, t + TQ + late, &out);
        assert_int_equal(count(ACTION_GRANT, 1), 1);
        lease = out.list[0].lease;
        policy_actions_clear(&out);
        policy_release(&p, 0, 1, lease, 0, 0, t + TQ + late + 1 * MS, &out);
        t += 10 * SEC;
    }
    hold_with_waiter(t);
    assert_int_equal(tick(t + TQ + 1 * MS), t + TQ + 2400 * MS);
    tick(t + TQ + 2400 * MS);
    assert_int_equal(count(ACTION_REVOKE, 0), 1);
}

static void test_draining_buys_time_up_to_the_drain_timeout(void **state)
{
    (void)state;
    uint32_t lease = hold_with_waiter(0);
    uint64_t t = TQ;

    /* A beat every 250 ms keeps it; the drain timeout still bounds it. */
    for (t = TQ + 250 * MS; t < TQ + DRAIN_TIMEOUT; t += 250 * MS) {
        policy_draining(&p, 0, 0, lease, t);
        uint64_t due = tick(t);
        assert_int_equal(count(ACTION_REVOKE, 0), 0);
        uint64_t expect = t + POLICY_DRAINING_GRACE_NS;
        assert_int_equal(due, expect < TQ + DRAIN_TIMEOUT ? expect
                                                          : TQ + DRAIN_TIMEOUT);
    }
    tick(TQ + DRAIN_TIMEOUT);
    assert_int_equal(count(ACTION_REVOKE, 0), 1);
}

static void test_beats_that_stop_lose_the_gpu_1s_later(void **state)
{
    (void)state;
    uint32_t lease = hold_with_waiter(0);

    policy_draining(&p, 0, 0, lease, TQ + 2 * SEC); /* after the quiet time */
    tick(TQ + 2 * SEC);
    assert_int_equal(out.n, 0);
    tick(TQ + 3 * SEC - 1);
    assert_int_equal(out.n, 0);
    tick(TQ + 3 * SEC);
    assert_int_equal(count(ACTION_REVOKE, 0), 1);
}

static void test_draining_of_another_lease_is_ignored(void **state)
{
    (void)state;
    uint32_t lease = hold_with_waiter(0);

    policy_draining(&p, 0, 0, lease + 1, TQ + 500 * MS);
    policy_draining(&p, 0, 2, lease, TQ + 500 * MS); /* not a runner */
    tick(TQ + POLICY_DRAIN_QUIET_NS);
    assert_int_equal(count(ACTION_REVOKE, 0), 1);
}

static void test_stopped_holder_is_dropped_and_revoked_at_once(void **state)
{
    (void)state;
    policy_actions_clear(&out);
    policy_request(&p, 0, 0, 0, &out);
    uint32_t lease = out.list[0].lease;
    policy_actions_clear(&out);
    policy_request(&p, 0, 1, 1 * MS, &out);

    /* Long before its quantum: DROP (it waits in the socket), REVOKE, and
     * the waiter runs. */
    policy_actions_clear(&out);
    policy_revoke(&p, 0, 0, 2 * MS, &out);
    assert_int_equal(out.n, 3);
    assert_int_equal(out.list[0].kind, ACTION_DROP);
    assert_int_equal(out.list[0].lease, lease);
    assert_int_equal(out.list[1].kind, ACTION_REVOKE);
    assert_int_equal(out.list[2].kind, ACTION_GRANT);
    assert_int_equal(out.list[2].client, 1);
    assert_int_equal(policy_holder(&p, 0), 1);

    /* Resumed, it drains and answers: the stale release changes nothing,
     * and it waits like anyone else. */
    policy_actions_clear(&out);
    policy_release(&p, 0, 0, lease, 0, 0, 3 * SEC, &out);
    assert_int_equal(out.n, 0);
    policy_request(&p, 0, 0, 3 * SEC, &out);
    assert_int_equal(out.n, 0);
    assert_int_equal(p.gpus[0].members[0].state, MEMBER_WAITING);
    assert_int_equal(policy_holder(&p, 0), 1);
}

static void test_revoking_a_client_that_does_not_run_does_nothing(void **state)
{
    (void)state;
    policy_actions_clear(&out);
    policy_request(&p, 0, 0, 0, &out);
    policy_actions_clear(&out);
    policy_request(&p, 0, 1, 1 * MS, &out);
    policy_revoke(&p, 0, 1, 2 * MS, &out); /* a waiter */
    policy_revoke(&p, 0, 2, 2 * MS, &out); /* idle */
    assert_int_equal(out.n, 0);
    assert_int_equal(policy_holder(&p, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_silent_holder_loses_the_gpu_after_1s, setup),
        cmocka_unit_test_setup(test_deadline_follows_measured_drains, setup),
        cmocka_unit_test_setup(test_draining_buys_time_up_to_the_drain_timeout,
                               setup),
        cmocka_unit_test_setup(test_beats_that_stop_lose_the_gpu_1s_later, setup),
        cmocka_unit_test_setup(test_draining_of_another_lease_is_ignored, setup),
        cmocka_unit_test_setup(test_stopped_holder_is_dropped_and_revoked_at_once,
                               setup),
        cmocka_unit_test_setup(test_revoking_a_client_that_does_not_run_does_nothing,
                               setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
