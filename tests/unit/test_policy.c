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

/* Requests gpu: whatever answers at once is a grant to the client; returns
 * its lease, or 0 if nothing answers. */
static uint32_t request_lease(int gpu, int client, uint64_t now)
{
    request_on(gpu, client, now);
    return out.n ? expect_one(&out, ACTION_GRANT, gpu, client) : 0;
}

static void test_free_gpu_is_granted_at_once(void **state)
{
    (void)state;
    assert_int_not_equal(request_lease(0, 0, 0), 0);
    assert_int_equal(policy_holder(&p, 0), 0);
    assert_int_equal(p.gpus[0].members[0].state, MEMBER_HOLDING);
}

static void test_waiters_are_served_in_fcfs_order(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t lease = request_lease(0, 0, 0);

    (void)state;
    assert_int_equal(request_lease(0, 3, 1 * MS), 0);
    assert_int_equal(request_lease(0, 1, 2 * MS), 0);
    assert_int_equal(request_lease(0, 2, 3 * MS), 0);
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
    request_lease(0, 0, 0);
    assert_int_equal(policy_tick(&p, 100 * TQ, &out), 0);
    assert_int_equal(out.n, 0);
    assert_int_equal(policy_holder(&p, 0), 0);
}

static void test_holder_is_dropped_after_its_quantum(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t lease = request_lease(0, 0, 0);

    (void)state;
    request_lease(0, 1, 10 * MS);
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
    request_lease(0, 0, 0);
    request_lease(0, 1, 5 * TQ);
    policy_tick(&p, 5 * TQ, &out);
    expect_one(&out, ACTION_DROP, 0, 0);
}

static void test_tq_change_applies_to_current_holder(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    policy_set_tq(&p, 30000 * MS);
    request_lease(0, 0, 0);
    request_lease(0, 1, 1 * MS);
    assert_int_equal(policy_tick(&p, 50 * MS, &out), 30000 * MS);
    policy_set_tq(&p, 100 * MS);
    assert_int_equal(policy_tick(&p, 50 * MS, &out), 100 * MS);
    assert_int_equal(out.n, 0);
    policy_tick(&p, 100 * MS, &out);
    expect_one(&out, ACTION_DROP, 0, 0);
}

/* Hands gpu over from holder to waiter at `at`: the holder's drain ends
 * 1 ms after its DROP, its release arrives 0.1 ms later, and the waiter
 * submits its first work `gap` after the drain's end. Returns the
 * waiter's lease. */
static uint32_t hand_over(int gpu, int holder, uint32_t lease, uint64_t at,
                          uint64_t gap, int waiter)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t granted;

    policy_tick(&p, at, &out);
    expect_one(&out, ACTION_DROP, gpu, holder);
    out.n = 0;
    policy_release(&p, gpu, holder, lease, 1 * MS, at + 1 * MS,
                   at + 1100 * 1000, &out);
    granted = expect_one(&out, ACTION_GRANT, gpu, waiter);
    policy_in_use(&p, gpu, waiter, granted, at + 1 * MS + gap, at + 1 * MS + gap);
    return granted;
}

/* The GPU idles between one holder's drain and the next one's first
 * submission: that is what a hand-over costs, and the quantum is 100 x
 * its mean. */
static void test_auto_quantum_follows_the_mean_hand_over(void **state)
{
    struct policy_gpu_view v;
    uint64_t now = 0;
    uint32_t lease[2];

    (void)state;
    policy_set_tq(&p, POLICY_TQ_AUTO);
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.quantum_ns, POLICY_TQ_FLOOR_NS);
    assert_int_equal(v.quantum_reason, QUANTUM_FLOOR);
    assert_int_equal(v.handover_mean_ns, 0);

    /* Two heavy clients take turns; a hand-over costs 2 ms, one in four
     * 6 ms: a mean of 3 ms, a quantum of 300 ms. */
    lease[0] = request_lease(0, 0, now);
    request_lease(0, 1, now + 1);
    for (int turn = 0; turn < 200; turn++) {
        int holder = turn % 2;
        uint64_t gap = turn % 4 == 3 ? 6 * MS : 2 * MS;
        policy_view_gpu(&p, 0, &v);
        now = p.gpus[0].members[holder].granted_at + v.quantum_ns;
        lease[!holder] = hand_over(0, holder, lease[holder], now, gap, !holder);
        struct policy_actions out;
        policy_actions_clear(&out);
        policy_request(&p, 0, holder, now + 2 * MS, &out); /* not fresh */
        assert_int_equal(out.n, 0);
    }
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.handover_mean_ns, 3 * MS);
    assert_int_equal(v.quantum_ns, 300 * MS);
    assert_int_equal(v.quantum_reason, QUANTUM_DRAIN);

    /* Pinned, the hand-overs no longer count; auto again, they do. */
    policy_set_tq(&p, 2000 * MS);
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.quantum_ns, 2000 * MS);
    assert_int_equal(v.quantum_reason, QUANTUM_PINNED);
    policy_set_tq(&p, POLICY_TQ_AUTO);
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.quantum_ns, 300 * MS);

    /* The other GPU has its own. */
    policy_view_gpu(&p, 1, &v);
    assert_int_equal(v.quantum_ns, POLICY_TQ_FLOOR_NS);
}

/* A long drain is no hand-over cost: the holder's queued work runs. */
static void test_long_drains_keep_the_floor(void **state)
{
    struct policy_gpu_view v;
    uint32_t lease;
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    policy_set_tq(&p, POLICY_TQ_AUTO);
    lease = request_lease(0, 0, 0);
    request_lease(0, 1, 1);
    for (int turn = 0; turn < 20; turn++) {
        int holder = turn % 2;
        uint64_t at = p.gpus[0].members[holder].granted_at + POLICY_TQ_FLOOR_NS;
        out.n = 0;
        policy_tick(&p, at, &out);
        expect_one(&out, ACTION_DROP, 0, holder);
        out.n = 0;
        /* A 100 ms kernel was running: the drain waits for it. */
        policy_release(&p, 0, holder, lease, 100 * MS, at + 100 * MS,
                       at + 100 * MS, &out);
        lease = expect_one(&out, ACTION_GRANT, 0, !holder);
        policy_in_use(&p, 0, !holder, lease, at + 100 * MS + 200 * 1000,
                      at + 100 * MS + 200 * 1000);
        out.n = 0;
        policy_request(&p, 0, holder, at + 101 * MS, &out);
    }
    /* 20 hand-overs of 200 us, beside the prior's of the floor's cost. */
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.handover_mean_ns,
                     (20 * 200 * 1000 +
                      POLICY_HANDOVER_PRIOR_N * POLICY_HANDOVER_PRIOR_NS) /
                         (20 + POLICY_HANDOVER_PRIOR_N));
    assert_int_equal(v.quantum_ns, POLICY_TQ_FLOOR_NS);
}

static void test_auto_quantum_stays_within_its_bounds(void **state)
{
    struct policy_gpu_view v;
    uint32_t lease = 0;

    (void)state;
    policy_set_tq(&p, POLICY_TQ_AUTO);
    for (int i = 0; i < POLICY_HANDOVER_HISTORY; i++)
        pol_quantum_observe_handover(&p.gpus[0], 10 * 1000); /* 10 us */
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.quantum_ns, POLICY_TQ_FLOOR_NS);
    assert_int_equal(v.quantum_reason, QUANTUM_FLOOR);
    /* A host busy for a moment: a few slow hand-overs among 128 move the
     * mean, not the quantum. */
    for (int i = 0; i < 3; i++)
        pol_quantum_observe_handover(&p.gpus[0], 20 * MS);
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.handover_mean_ns, (125 * 10 * 1000 + 3 * 20 * MS) / 128);
    assert_int_equal(v.quantum_ns, POLICY_TQ_FLOOR_NS);
    /* One wild sample counts as 300 ms at most: what the ceiling needs. */
    pol_quantum_observe_handover(&p.gpus[0], 3600000 * MS);
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.handover_mean_ns,
                     (124 * 10 * 1000 + 3 * 20 * MS + 300 * MS) / 128);
    /* Hand-overs of a whole second: capped, so a waiter waits at most 30 s. */
    for (int i = 0; i < POLICY_HANDOVER_HISTORY; i++)
        pol_quantum_observe_handover(&p.gpus[0], 1000 * MS);
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.quantum_ns, POLICY_TQ_CEILING_NS);
    assert_int_equal(v.quantum_reason, QUANTUM_CEILING);
    (void)lease;
}

/* Among the first hand-overs, one long idle (a job's start-up) does not
 * make turns of seconds: the prior's hand-overs of the floor's cost count
 * until the history is full. */
static void test_auto_quantum_shrugs_off_an_early_long_idle(void **state)
{
    struct policy_gpu_view v;

    (void)state;
    policy_set_tq(&p, POLICY_TQ_AUTO);
    pol_quantum_observe_handover(&p.gpus[0], 200 * 1000);
    pol_quantum_observe_handover(&p.gpus[0], 150 * MS);
    pol_quantum_observe_handover(&p.gpus[0], 200 * 1000);
    policy_view_gpu(&p, 0, &v);
    /* Without the prior: a mean of 50 ms, turns of 5 s. */
    assert_true(v.quantum_ns < 1000 * MS);
    assert_int_equal(v.quantum_reason, QUANTUM_DRAIN);
}

/* A fresh arrival waits at most the floor, whatever the quantum: the
 * holder is cut short and keeps the rest of its turn. */
static void test_fresh_arrival_waits_at_most_the_floor(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t lease;

    (void)state;
    /* Hand-overs of 100 ms: a quantum of 10 s. */
    policy_set_tq(&p, POLICY_TQ_AUTO);
    for (int i = 0; i < POLICY_HANDOVER_HISTORY; i++)
        pol_quantum_observe_handover(&p.gpus[0], 100 * MS);
    /* Clients 0 and 1 take turns; 1 waits for its next one. */
    policy_release(&p, 0, 1, request_lease(0, 1, 0), 0, 0, 1 * MS, &out);
    lease = request_lease(0, 0, 1 * MS);
    request_lease(0, 1, 2 * MS);
    assert_int_equal(policy_tick(&p, 3 * MS, &out), 10001 * MS);

    /* A new job arrives: it goes ahead of client 1, and client 0 is
     * dropped once it has held the floor. */
    request_lease(0, 2, 50 * MS);
    assert_int_equal(p.gpus[0].queue[0], 2);
    assert_int_equal(policy_tick(&p, 50 * MS, &out), 1 * MS + POLICY_TQ_FLOOR_NS);
    lease = hand_over(0, 0, lease, 1 * MS + POLICY_TQ_FLOOR_NS, 200 * 1000, 2);
    /* Client 0 comes back at once: ahead of client 1, with the rest of its
     * quantum. */
    out.n = 0;
    policy_request(&p, 0, 0, 103 * MS, &out);
    assert_int_equal(p.gpus[0].queue[0], 0);
    assert_int_equal(p.gpus[0].members[0].quantum_used_ns, POLICY_TQ_FLOOR_NS);
    /* Nobody fresh waits: the new job keeps the GPU a whole quantum (the
     * 0.2 ms hand-over took the mean a little under 100 ms). */
    struct policy_gpu_view v;
    policy_view_gpu(&p, 0, &v);
    assert_true(v.quantum_ns > 9900 * MS);
    assert_int_equal(policy_tick(&p, 103 * MS, &out),
                     p.gpus[0].members[2].granted_at + v.quantum_ns);
    (void)lease;
}

/* A quantum the operator pinned is not cut short for a fresh arrival. */
static void test_pinned_quantum_is_not_cut_for_a_fresh_arrival(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    policy_set_tq(&p, 2000 * MS);
    request_lease(0, 0, 0);
    request_lease(0, 1, 10 * MS);
    assert_false(p.gpus[0].members[1].fresh);
    assert_int_equal(policy_tick(&p, 10 * MS, &out), 2000 * MS);
    assert_int_equal(out.n, 0);
}

/* A fresh arrival that waits for memory does not cut the holder short: a
 * rotation of memory keeps the switch time. */
static void test_fresh_arrival_waiting_for_memory_keeps_the_switch_time(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    policy_set_tq(&p, POLICY_TQ_AUTO);
    policy_set_switch_time(&p, 5000 * MS, 0);
    policy_set_capacity(&p, 0, 16ull << 30);
    /* Told ahead of their requests (pending). */
    policy_set_footprint(&p, 0, 0, 12ull << 30, 12ull << 30, 12ull << 30);
    policy_set_footprint(&p, 0, 1, 12ull << 30, 12ull << 30, 12ull << 30);
    policy_request(&p, 0, 0, 0, &out);
    assert_true(policy_is_running(&p, 0, 0));
    policy_request(&p, 0, 1, 10 * MS, &out); /* told to wait for memory */
    assert_int_equal(p.gpus[0].members[1].wait_reason, WAIT_MEMORY);
    assert_true(p.gpus[0].members[1].fresh);
    out.n = 0;
    policy_tick(&p, 1000 * MS, &out);
    for (int i = 0; i < out.n; i++)
        assert_int_not_equal(out.list[i].kind, ACTION_DROP);
}

static void test_death_of_holder_passes_lock_at_once(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    request_lease(0, 0, 0);
    request_lease(0, 1, 1 * MS);
    request_lease(0, 2, 2 * MS);
    policy_leave(&p, 0, 3 * MS, &out);
    expect_one(&out, ACTION_GRANT, 0, 1);
    assert_false(p.gpus[0].members[0].present);
    assert_int_equal(p.gpus[0].n_waiting, 1);
}

static void test_death_of_waiter_leaves_queue(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t lease = request_lease(0, 0, 0);

    (void)state;
    request_lease(0, 1, 1 * MS);
    request_lease(0, 2, 2 * MS);
    policy_leave(&p, 1, 3 * MS, &out);
    assert_int_equal(out.n, 0);
    policy_release(&p, 0, 0, lease, 0, 0, 4 * MS, &out);
    expect_one(&out, ACTION_GRANT, 0, 2);
}

static void test_release_crossing_drop_is_not_counted_twice(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);
    uint32_t first = request_lease(0, 0, 0);

    (void)state;
    request_lease(0, 1, 1 * MS);
    policy_tick(&p, TQ, &out); /* DROP(first) is on the wire ... */
    out.n = 0;
    policy_release(&p, 0, 0, first, 0, 0, TQ, &out); /* ... as A releases */
    uint32_t second = expect_one(&out, ACTION_GRANT, 0, 1);
    assert_int_not_equal(first, second);

    /* A asks again and, later, a duplicate release of its old lease
     * arrives: it must not free B's GPU. */
    out.n = 0;
    request_lease(0, 0, TQ + 1 * MS);
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
    uint32_t lease = request_lease(0, 0, 0);

    (void)state;
    request_lease(0, 1, 1 * MS);
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
        assert_int_not_equal(request_lease(g, g, 0), 0);
    /* Contention on GPU 7 only. */
    request_lease(7, 107, 1 * MS);
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
        request_lease(0, c, now += MS);
    assert_true(policy_grow(&p, 1024));
    /* kept through the growth */
    assert_int_equal(p.gpus[0].n_waiting, TEST_TABLE_SIZE - 1);
    for (int c = TEST_TABLE_SIZE; c < N; c++) {
        policy_join(&p, 0, c, c, now);
        request_lease(0, c, now += MS);
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
    request_lease(0, 0, 0);
    request_lease(1, 0, 0);
    request_lease(1, 1, 1 * MS);
    policy_leave(&p, 0, 2 * MS, &out);
    expect_one(&out, ACTION_GRANT, 1, 1);
    assert_int_equal(policy_holder(&p, 0), -1);
}

static void test_anti_thrash_off_clears_and_ignores(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    request_lease(0, 0, 0);
    request_lease(0, 1, 1 * MS);
    policy_set_anti_thrash(&p, false, 10 * MS);
    assert_int_equal(policy_holder(&p, 0), -1);
    assert_int_equal(p.gpus[0].n_waiting, 0);
    assert_int_equal(p.gpus[0].members[0].held_ns, 10 * MS);
    policy_request(&p, 0, 2, 11 * MS, &out);
    assert_int_equal(out.n, 0);
    policy_set_anti_thrash(&p, true, 12 * MS);
    assert_int_not_equal(request_lease(0, 2, 13 * MS), 0);
}

static void test_duplicate_and_foreign_requests_are_ignored(void **state)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    request_lease(0, 0, 0);
    request_lease(0, 1, 1 * MS);
    policy_request(&p, 0, 1, 2 * MS, &out);
    policy_request(&p, 0, 0, 2 * MS, &out);
    policy_request(&p, 0, 50, 2 * MS, &out); /* never joined */
    assert_int_equal(out.n, 0);
    assert_int_equal(p.gpus[0].n_waiting, 1);
}

static void test_held_time_counts_a_hold_in_progress(void **state)
{
    (void)state;
    request_lease(0, 0, 10 * MS);
    assert_int_equal(policy_held_ns(&p, 0, 0, 35 * MS), 25 * MS);
    assert_int_equal(policy_held_ns(&p, 0, 1, 35 * MS), 0);
}

static void test_wakeup_before_first_submission_is_not_billed(void **state)
{
    uint32_t lease = request_lease(0, 0, 10 * MS);

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
        cmocka_unit_test_setup(test_auto_quantum_follows_the_mean_hand_over,
                               setup),
        cmocka_unit_test_setup(test_auto_quantum_stays_within_its_bounds, setup),
        cmocka_unit_test_setup(test_auto_quantum_shrugs_off_an_early_long_idle,
                               setup),
        cmocka_unit_test_setup(test_long_drains_keep_the_floor, setup),
        cmocka_unit_test_setup(test_fresh_arrival_waits_at_most_the_floor, setup),
        cmocka_unit_test_setup(test_pinned_quantum_is_not_cut_for_a_fresh_arrival,
                               setup),
        cmocka_unit_test_setup(test_fresh_arrival_waiting_for_memory_keeps_the_switch_time,
                               setup),
        cmocka_unit_test_setup(test_death_of_holder_passes_lock_at_once, setup),
        cmocka_unit_test_setup(test_death_of_waiter_leaves_queue, setup),
        cmocka_unit_test_setup(test_release_crossing_drop_is_not_counted_twice,
                               setup),
        cmocka_unit_test_setup(test_stuck_holder_is_revoked, setup),
        cmocka_unit_test_setup(test_gpus_are_independent, setup),
        cmocka_unit_test_setup(test_client_on_two_gpus_holds_two_locks, setup),
        cmocka_unit_test_setup(test_anti_thrash_off_clears_and_ignores, setup),
        cmocka_unit_test_setup(test_duplicate_and_foreign_requests_are_ignored,
                               setup),
        cmocka_unit_test_setup(test_held_time_counts_a_hold_in_progress, setup),
        cmocka_unit_test_setup(test_wakeup_before_first_submission_is_not_billed,
                               setup),
        cmocka_unit_test_setup(test_random_events_keep_invariants, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
