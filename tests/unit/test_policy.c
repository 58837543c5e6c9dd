/* test_policy.c - the scheduling policy driven by a synthetic clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy_internal.h" /* checks the state it drives */
#include "policy_fixture.h"

#define MS 1000000ull
#define TQ (100 * MS)
#define DRAIN_TIMEOUT (1000 * MS)

static struct policy p;

static int setup(void **state)
{
    (void)state;
    policy_start(&p, 2, TQ, DRAIN_TIMEOUT);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL); /* time slicing */
    for (int c = 0; c < 8; c++) {
        policy_join(&p, 0, c, c, 0);
        policy_join(&p, 1, c, c, 0);
    }
    return 0;
}

/* Asserts that out holds exactly one action of the given kind and returns
 * its lease. */
static uint32_t expect_one(const struct policy_actions *out,
                           enum action_kind kind, int gpu, int client)
{
    assert_int_equal(out->n, 1);
    assert_int_equal(out->list[0].kind, kind);
    assert_int_equal(out->list[0].gpu, gpu);
    assert_int_equal(out->list[0].client, client);
    return out->list[0].lease;
}

static uint32_t request(int gpu, int client, uint64_t now)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    policy_request(&p, gpu, client, now, &out);
    return out.n ? expect_one(&out, ACTION_GRANT, gpu, client) : 0;
}

static void test_free_gpu_is_granted_at_once(void **state)
{
    (void)state;
    assert_int_not_equal(request(0, 0, 0), 0);
    assert_int_equal(policy_holder(&p, 0), 0);
    assert_int_equal(p.gpus[0].members[0].state, MEMBER_HOLDING);
}

static void test_waiters_are_served_in_fcfs_order(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t lease = request(0, 0, 0);

    (void)state;
    assert_int_equal(request(0, 3, 1 * MS), 0);
    assert_int_equal(request(0, 1, 2 * MS), 0);
    assert_int_equal(request(0, 2, 3 * MS), 0);
    int expected[] = {3, 1, 2};
    for (int i = 0; i < 3; i++) {
        out.n = 0;
        policy_release(&p, 0, i == 0 ? 0 : expected[i - 1], lease, 0, 0,
                       (10 + (uint64_t)i) * MS, &out);
        lease = expect_one(&out, ACTION_GRANT, 0, expected[i]);
    }
}

static void test_no_preemption_without_waiters(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    request(0, 0, 0);
    assert_int_equal(policy_tick(&p, 100 * TQ, &out), 0);
    assert_int_equal(out.n, 0);
    assert_int_equal(policy_holder(&p, 0), 0);
}

static void test_holder_is_dropped_after_its_quantum(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t lease = request(0, 0, 0);

    (void)state;
    request(0, 1, 10 * MS);
    assert_int_equal(policy_tick(&p, 10 * MS, &out), TQ);
    assert_int_equal(out.n, 0);
    policy_tick(&p, TQ, &out);
    assert_int_equal(expect_one(&out, ACTION_DROP, 0, 0), lease);
    assert_int_equal(p.gpus[0].members[0].state, MEMBER_DRAINING);

    /* No second DROP while it drains. */
    out.n = 0;
    policy_tick(&p, TQ + 5 * MS, &out);
    assert_int_equal(out.n, 0);

    policy_release(&p, 0, 0, lease, 3 * MS, 0, TQ + 7 * MS, &out);
    expect_one(&out, ACTION_GRANT, 0, 1);
    assert_int_equal(p.gpus[0].members[0].last_drain_ns, 3 * MS);
    assert_int_equal(p.gpus[0].members[0].last_preempt_ns, 7 * MS);
    assert_int_equal(p.gpus[0].members[0].held_ns, TQ + 7 * MS);
}

static void test_waiter_arriving_late_preempts_at_once(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    request(0, 0, 0);
    request(0, 1, 5 * TQ);
    policy_tick(&p, 5 * TQ, &out);
    expect_one(&out, ACTION_DROP, 0, 0);
}

static void test_tq_change_applies_to_current_holder(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    policy_set_tq(&p, 30000 * MS);
    request(0, 0, 0);
    request(0, 1, 1 * MS);
    assert_int_equal(policy_tick(&p, 50 * MS, &out), 30000 * MS);
    policy_set_tq(&p, 100 * MS);
    assert_int_equal(policy_tick(&p, 50 * MS, &out), 100 * MS);
    assert_int_equal(out.n, 0);
    policy_tick(&p, 100 * MS, &out);
    expect_one(&out, ACTION_DROP, 0, 0);
}

static void test_death_of_holder_passes_lock_at_once(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    request(0, 0, 0);
    request(0, 1, 1 * MS);
    request(0, 2, 2 * MS);
    policy_leave(&p, 0, 3 * MS, &out);
    expect_one(&out, ACTION_GRANT, 0, 1);
    assert_false(p.gpus[0].members[0].present);
    assert_int_equal(p.gpus[0].n_waiting, 1);
}

static void test_death_of_waiter_leaves_queue(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t lease = request(0, 0, 0);

    (void)state;
    request(0, 1, 1 * MS);
    request(0, 2, 2 * MS);
    policy_leave(&p, 1, 3 * MS, &out);
    assert_int_equal(out.n, 0);
    policy_release(&p, 0, 0, lease, 0, 0, 4 * MS, &out);
    expect_one(&out, ACTION_GRANT, 0, 2);
}

static void test_release_crossing_drop_is_not_counted_twice(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t first = request(0, 0, 0);

    (void)state;
    request(0, 1, 1 * MS);
    policy_tick(&p, TQ, &out);          /* DROP(first) is on the wire ... */
    out.n = 0;
    policy_release(&p, 0, 0, first, 0, 0, TQ, &out); /* ... as A releases */
    uint32_t second = expect_one(&out, ACTION_GRANT, 0, 1);
    assert_int_not_equal(first, second);

    /* A asks again and, later, a duplicate release of its old lease
     * arrives: it must not free B's GPU. */
    out.n = 0;
    request(0, 0, TQ + 1 * MS);
    policy_release(&p, 0, 0, first, 0, 0, TQ + 2 * MS, &out);
    assert_int_equal(out.n, 0);
    assert_int_equal(policy_holder(&p, 0), 1);

    /* Nor may a release by a client that does not hold the GPU. */
    policy_release(&p, 0, 0, second, 0, 0, TQ + 3 * MS, &out);
    assert_int_equal(out.n, 0);
    assert_int_equal(policy_holder(&p, 0), 1);
}

static void test_stuck_holder_is_revoked(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t lease = request(0, 0, 0);

    (void)state;
    request(0, 1, 1 * MS);
    policy_tick(&p, TQ, &out);
    out.n = 0;
    assert_int_equal(policy_tick(&p, TQ + 10 * MS, &out), TQ + DRAIN_TIMEOUT);
    policy_tick(&p, TQ + DRAIN_TIMEOUT, &out);
    assert_int_equal(out.n, 2);
    assert_int_equal(out.list[0].kind, ACTION_REVOKE);
    assert_int_equal(out.list[0].client, 0);
    assert_int_equal(out.list[1].kind, ACTION_GRANT);
    assert_int_equal(out.list[1].client, 1);

    out.n = 0; /* the late release changes nothing */
    policy_release(&p, 0, 0, lease, 0, 0, TQ + DRAIN_TIMEOUT + 1, &out);
    assert_int_equal(out.n, 0);
    assert_int_equal(policy_holder(&p, 0), 1);
}

static void test_gpus_are_independent(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    policy_start(&p, POLICY_MAX_GPUS, TQ, DRAIN_TIMEOUT);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL); /* time slicing */
    for (int g = 0; g < POLICY_MAX_GPUS; g++) {
        policy_join(&p, g, g, g, 0);
        policy_join(&p, g, 100 + g, 100 + g, 0);
    }
    for (int g = 0; g < POLICY_MAX_GPUS; g++)
        assert_int_not_equal(request(g, g, 0), 0);
    /* Contention on GPU 7 only. */
    request(7, 107, 1 * MS);
    policy_tick(&p, TQ, &out);
    expect_one(&out, ACTION_DROP, 7, 7);
    for (int g = 0; g < POLICY_MAX_GPUS; g++)
        assert_int_equal(policy_holder(&p, g), g);
}

/* No fixed limit: 1,000 clients (past the old 512) join one GPU, the
 * tables growing under them with 511 waiting; every one is served, first
 * come first served. */
static void test_thousand_clients_are_served_in_order(void **state)
{
    enum { N = 1000 };
    struct policy_actions out;
    uint64_t now = 0;

    (void)state;
    for (int c = 8; c < TEST_TABLE_SIZE; c++)
        policy_join(&p, 0, c, c, 0);
    for (int c = 0; c < TEST_TABLE_SIZE; c++)
        request(0, c, now += MS);
    assert_true(policy_grow(&p, 1024));
    /* kept through the growth */
    assert_int_equal(p.gpus[0].n_waiting, TEST_TABLE_SIZE - 1);
    for (int c = TEST_TABLE_SIZE; c < N; c++) {
        policy_join(&p, 0, c, c, now);
        request(0, c, now += MS);
    }
    assert_int_equal(p.gpus[0].n_waiting, N - 1);
    uint32_t lease = p.gpus[0].members[0].lease;
    for (int c = 0; c + 1 < N; c++) {
        policy_actions_clear(&out);
        policy_release(&p, 0, c, lease, 0, 0, now += MS, &out);
        lease = expect_one(&out, ACTION_GRANT, 0, c + 1);
    }
    assert_int_equal(policy_holder(&p, 0), N - 1);
}

static void test_client_on_two_gpus_holds_two_locks(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    request(0, 0, 0);
    request(1, 0, 0);
    request(1, 1, 1 * MS);
    policy_leave(&p, 0, 2 * MS, &out);
    expect_one(&out, ACTION_GRANT, 1, 1);
    assert_int_equal(policy_holder(&p, 0), -1);
}

static void test_anti_thrash_off_clears_and_ignores(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    request(0, 0, 0);
    request(0, 1, 1 * MS);
    policy_set_anti_thrash(&p, false, 10 * MS);
    assert_int_equal(policy_holder(&p, 0), -1);
    assert_int_equal(p.gpus[0].n_waiting, 0);
    assert_int_equal(p.gpus[0].members[0].held_ns, 10 * MS);
    policy_request(&p, 0, 2, 11 * MS, &out);
    assert_int_equal(out.n, 0);
    policy_set_anti_thrash(&p, true, 12 * MS);
    assert_int_not_equal(request(0, 2, 13 * MS), 0);
}

static void test_duplicate_and_foreign_requests_are_ignored(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    request(0, 0, 0);
    request(0, 1, 1 * MS);
    policy_request(&p, 0, 1, 2 * MS, &out);
    policy_request(&p, 0, 0, 2 * MS, &out);
    policy_request(&p, 0, 50, 2 * MS, &out); /* never joined */
    assert_int_equal(out.n, 0);
    assert_int_equal(p.gpus[0].n_waiting, 1);
}

static void test_held_time_counts_a_hold_in_progress(void **state)
{
    (void)state;
    request(0, 0, 10 * MS);
    assert_int_equal(policy_held_ns(&p, 0, 0, 35 * MS), 25 * MS);
    assert_int_equal(policy_held_ns(&p, 0, 1, 35 * MS), 0);
}

static void test_wakeup_before_first_submission_is_not_billed(void **state)
{
    uint32_t lease = request(0, 0, 10 * MS);

    (void)state;
    policy_in_use(&p, 0, 0, lease, 0, 12 * MS);
    assert_int_equal(policy_used_ns(&p, 0, 0, 50 * MS), 38 * MS);
    /* A stale or foreign LOCK_IN_USE changes nothing. */
    policy_in_use(&p, 0, 0, lease + 1, 0, 30 * MS);
    policy_in_use(&p, 0, 1, lease, 0, 30 * MS);
    assert_int_equal(policy_used_ns(&p, 0, 0, 50 * MS), 38 * MS);
    /* Time held still counts from the grant. */
    assert_int_equal(policy_held_ns(&p, 0, 0, 50 * MS), 40 * MS);
}

/* Random events against a synthetic clock; after each, the invariants the
 * daemon relies on must hold. */
static void check_invariants(void)
{
    for (int g = 0; g < p.n_gpus; g++) {
        const struct gpu_sched *gs = &p.gpus[g];
        int holding = 0, waiting = 0;

        for (int c = 0; c < 8; c++) {
            const struct member *m = &gs->members[c];
            holding += m->state == MEMBER_HOLDING || m->state == MEMBER_DRAINING;
            waiting += m->state == MEMBER_WAITING;
        }
        assert_true(holding <= 1);
        assert_int_equal(holding, policy_holder(&p, g) >= 0);
        assert_int_equal(waiting, gs->n_waiting);
        /* The GPU never sits free while someone waits. */
        assert_true(policy_holder(&p, g) >= 0 || gs->n_waiting == 0);
        for (int i = 0; i < gs->n_waiting; i++)
            assert_int_equal(gs->members[gs->queue[i]].state, MEMBER_WAITING);
    }
}

static void test_random_events_keep_invariants(void **state)
{
    uint64_t now = 0;
    unsigned seed = 12345;

    (void)state;
    for (int step = 0; step < 200000; step++) {
        struct policy_actions out;
        policy_actions_clear(&out);
        int gpu = rand_r(&seed) % 2, c = rand_r(&seed) % 8;
        const struct gpu_sched *g = &p.gpus[gpu];

        now += (uint64_t)(rand_r(&seed) % 50) * MS;
        switch (rand_r(&seed) % 6) {
        case 0:
        case 1:
            policy_request(&p, gpu, c, now, &out);
            break;
        case 2: /* the holder releases, sometimes with a stale lease */
            if (policy_holder(&p, gpu) >= 0)
                policy_release(&p, gpu, policy_holder(&p, gpu),
                               g->members[policy_holder(&p, gpu)].lease -
                                   (uint32_t)(rand_r(&seed) % 2),
                               0, 0, now, &out);
            break;
        case 3:
            policy_tick(&p, now, &out);
            break;
        case 4:
            if (rand_r(&seed) % 4 == 0) /* stopped, or still draining */
                policy_revoke(&p, gpu, c, now, &out);
            else if (rand_r(&seed) % 3 == 0 && policy_holder(&p, gpu) >= 0)
                policy_draining(&p, gpu, policy_holder(&p, gpu),
                                g->members[policy_holder(&p, gpu)].lease, now);
            else if (rand_r(&seed) % 20 == 0) {
                policy_leave(&p, c, now, &out);
                policy_join(&p, 0, c, c, now);
                policy_join(&p, 1, c, c, now);
            }
            break;
        case 5:
            if (rand_r(&seed) % 100 == 0)
                policy_set_anti_thrash(&p, !p.anti_thrash, now);
            break;
        }
        /* Every grant names the client that now holds the GPU. */
        for (int i = 0; i < out.n; i++)
            if (out.list[i].kind == ACTION_GRANT)
                assert_int_equal(policy_holder(&p, out.list[i].gpu),
                                 out.list[i].client);
        check_invariants();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_free_gpu_is_granted_at_once, setup),
        cmocka_unit_test_setup(test_thousand_clients_are_served_in_order, setup),
        cmocka_unit_test_setup(test_waiters_are_served_in_fcfs_order, setup),
        cmocka_unit_test_setup(test_no_preemption_without_waiters, setup),
        cmocka_unit_test_setup(test_holder_is_dropped_after_its_quantum, setup),
        cmocka_unit_test_setup(test_waiter_arriving_late_preempts_at_once, setup),
        cmocka_unit_test_setup(test_tq_change_applies_to_current_holder, setup),
        cmocka_unit_test_setup(test_death_of_holder_passes_lock_at_once, setup),
        cmocka_unit_test_setup(test_death_of_waiter_leaves_queue, setup),
        cmocka_unit_test_setup(test_release_crossing_drop_is_not_counted_twice, setup),
        cmocka_unit_test_setup(test_stuck_holder_is_revoked, setup),
        cmocka_unit_test_setup(test_gpus_are_independent, setup),
        cmocka_unit_test_setup(test_client_on_two_gpus_holds_two_locks, setup),
        cmocka_unit_test_setup(test_anti_thrash_off_clears_and_ignores, setup),
        cmocka_unit_test_setup(test_duplicate_and_foreign_requests_are_ignored, setup),
        cmocka_unit_test_setup(test_held_time_counts_a_hold_in_progress, setup),
        cmocka_unit_test_setup(test_wakeup_before_first_submission_is_not_billed, setup),
        cmocka_unit_test_setup(test_random_events_keep_invariants, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
