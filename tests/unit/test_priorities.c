/* test_priorities.c - priority classes, preemption and floors driven
 * through the pure policy with a synthetic clock.
 *
 * One GPU of 16 GiB (memory is checked only where a test sets footprints,
 * before a client's request, as an allocation that waits for room tells
 * them: pending, not on the GPU before the client's grant);
 * clients 0-7 joined, each billed to its own account; time slicing with a
 * long TQ, so that any drop before it is the priorities' doing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy_internal.h" /* checks the state it drives */
#include "policy_fixture.h"

#define MS 1000000ull
#define SEC (1000 * MS)
#define GiB (1ull << 30)
#define TQ (30 * SEC)
#define DRAIN_TIMEOUT (10 * SEC)
#define CAPACITY (16 * GiB)
#define N_CLIENTS 8


static int setup(void **state)
{
    (void)state;
    policy_start(&p, 1, TQ, DRAIN_TIMEOUT);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
    for (int c = 0; c < N_CLIENTS; c++)
        policy_join(&p, 0, c, c, 0);
    return 0;
}

static void test_higher_class_preempts_at_once(void **state)
{
    (void)state;
    policy_set_priority(&p, 0, PRIORITY_LOW);
    policy_set_priority(&p, 1, PRIORITY_HIGH);
    request(0, 0);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    request(1, 5 * MS);
    assert_int_equal(out.n, 0); /* serial: waits for the drain */
    tick(5 * MS);               /* the daemon ticks after every event */
    assert_int_equal(out.n, 1);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    release(0, 8 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    assert_true(policy_is_running(&p, 0, 1));
}

/* In auto mode a higher class starts beside the lower-class holder it
 * dropped, while that one drains, rather than after: a request of a
 * service waits for no drain. The lower class runs again once the higher
 * one gives the GPU back. Serial mode keeps one holder at a time
 * (test_higher_class_preempts_at_once). */
static void test_higher_class_starts_beside_the_draining_holder(void **state)
{
    (void)state;
    policy_set_mode(&p, -1, SCHED_MODE_AUTO);
    policy_set_priority(&p, 0, PRIORITY_LOW);
    policy_set_priority(&p, 1, PRIORITY_HIGH);
    policy_set_load(&p, 0, 0, 990);
    request(0, 0);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    request(1, 5 * MS);
    tick(5 * MS);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    assert_int_equal(mem(0)->state, MEMBER_DRAINING);
    /* Drained, the low one waits for the high one. */
    release(0, 9 * MS);
    request(0, 10 * MS);
    assert_int_equal(count(ACTION_GRANT, 0), 0);
    assert_int_equal(mem(0)->wait_reason, WAIT_PRIORITY);
    /* The high one gives the GPU back (idle): the low one runs again. */
    release(1, 12 * MS);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
}

/* A class above another lends the GPU between its requests (a short idle
 * release); a class below another keeps its drains short (a short
 * backlog); without priorities nobody is told anything. */
static void test_yield_terms_follow_the_classes_on_the_gpu(void **state)
{
    struct policy_yield t;

    (void)state;
    t = policy_yield_terms(&p, 0, 1);
    assert_true(t.idle_release_ns == 0 && t.max_backlog_ns == 0);
    policy_set_priority(&p, 0, PRIORITY_LOW);
    policy_set_priority(&p, 1, PRIORITY_HIGH);
    t = policy_yield_terms(&p, 0, 1); /* above every other: unbounded */
    assert_true(t.idle_release_ns == POLICY_LEND_IDLE_NS &&
                t.max_backlog_ns == POLICY_BACKLOG_UNBOUNDED);
    t = policy_yield_terms(&p, 0, 0);
    assert_true(t.idle_release_ns == 0 &&
                t.max_backlog_ns == POLICY_LENT_BACKLOG_NS);
    t = policy_yield_terms(&p, 0, 2); /* normal, between the two */
    assert_true(t.idle_release_ns == POLICY_LEND_IDLE_NS &&
                t.max_backlog_ns == POLICY_LENT_BACKLOG_NS);
    /* Only the clients of that GPU count. */
    policy_actions_clear(&out);
    for (int c = 2; c < N_CLIENTS; c++)
        policy_leave(&p, c, 0, &out);
    policy_leave(&p, 0, 0, &out);
    t = policy_yield_terms(&p, 0, 1);
    assert_true(t.idle_release_ns == 0 && t.max_backlog_ns == 0);
}

static void test_lower_class_waits_while_higher_wants(void **state)
{
    (void)state;
    policy_set_priority(&p, 0, PRIORITY_HIGH);
    policy_set_priority(&p, 1, PRIORITY_HIGH);
    policy_set_priority(&p, 2, PRIORITY_NORMAL);
    request(0, 0);
    request(2, 1 * MS);
    request(1, 2 * MS);
    /* Past the TQ the high holder rotates with the other high client,
     * never with the normal one, which waits for priority. */
    tick(TQ);
    assert_int_equal(out.n, 1);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    struct policy_member_view v;
    assert_true(policy_view_member(&p, 0, 2, TQ, &v));
    assert_int_equal(v.wait_reason, WAIT_PRIORITY);
    release(0, TQ + 1 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    /* The high client 0 asks again: still no turn for 2. */
    request(0, TQ + 2 * MS);
    tick(2 * TQ + 2 * MS);
    assert_int_equal(count(ACTION_DROP, 1), 1);
    release(1, 2 * TQ + 3 * MS);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    assert_int_equal(count(ACTION_GRANT, 2), 0);
    /* Once no high client wants the GPU, the normal one runs. */
    release(0, 2 * TQ + 10 * MS);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
}

static void test_preemption_follows_class_order(void **state)
{
    (void)state;
    policy_set_priority(&p, 0, PRIORITY_LOW);
    policy_set_priority(&p, 2, PRIORITY_HIGH); /* 1 stays normal */
    request(0, 0);
    request(1, 10 * MS);
    tick(10 * MS);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    release(0, 11 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    request(0, 12 * MS); /* the low client still has work */
    request(2, 20 * MS);
    tick(20 * MS);
    assert_int_equal(count(ACTION_DROP, 1), 1);
    release(1, 21 * MS);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
    request(1, 22 * MS);
    release(2, 30 * MS); /* the high one is done: normal before low */
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    assert_int_equal(count(ACTION_GRANT, 0), 0);
    release(1, 40 * MS);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
}

static void test_concurrent_mode_does_not_mix_classes(void **state)
{
    (void)state;
    policy_set_mode(&p, -1, SCHED_MODE_CONCURRENT);
    policy_set_priority(&p, 0, PRIORITY_LOW);
    policy_set_priority(&p, 1, PRIORITY_LOW);
    policy_set_priority(&p, 2, PRIORITY_HIGH);
    request(0, 0);
    request(1, 0);
    assert_int_equal(p.gpus[0].n_running, 2); /* one class co-runs */
    request(2, 5 * MS);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
    tick(5 * MS);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    assert_int_equal(count(ACTION_DROP, 1), 1);
    release(0, 6 * MS);
    release(1, 6 * MS);
    request(0, 7 * MS);
    assert_int_equal(out.n, 0);
    assert_int_equal(mem(0)->wait_reason, WAIT_PRIORITY);
}

/* The clients of the simulation always want the GPU: they ask again as
 * soon as they release it, and drain in 1 ms. Returns the GPU time each
 * account ran over [from, until). */
#define DRAIN (1 * MS)
static void simulate(int n, uint64_t until, uint64_t from, uint64_t *ran)
{
    uint64_t now = 0, release_at[N_CLIENTS] = {0}, run_from[N_CLIENTS] = {0};

    memset(ran, 0, sizeof(*ran) * (size_t)n);
    for (int c = 0; c < n; c++) {
        request(c, 0);
        if (count(ACTION_GRANT, c))
            run_from[c] = 1;
    }
    while (now < until) {
        uint64_t next = tick(now);
        for (int i = 0; i < out.n; i++)
            if (out.list[i].kind == ACTION_DROP)
                release_at[out.list[i].client] = now + DRAIN;
        for (int c = 0; c < n; c++)
            if (release_at[c] && (!next || release_at[c] < next))
                next = release_at[c];
        if (!next || next > until)
            next = until;
        if (next <= now)
            next = now + 1;
        for (int c = 0; c < n; c++)
            if (run_from[c] && next > from)
                ran[c] +=
                    next - (run_from[c] - 1 > from ? run_from[c] - 1 : from);
        for (int c = 0; c < n; c++)
            if (run_from[c])
                run_from[c] = next + 1;
        now = next;
        for (int c = 0; c < n; c++) {
            if (!release_at[c] || release_at[c] > now)
                continue;
            release_at[c] = 0;
            release(c, now);
            run_from[c] = 0;
            for (int i = 0; i < out.n; i++)
                if (out.list[i].kind == ACTION_GRANT)
                    run_from[out.list[i].client] = now + 1;
            request(c, now);
            for (int i = 0; i < out.n; i++)
                if (out.list[i].kind == ACTION_GRANT)
                    run_from[out.list[i].client] = now + 1;
        }
    }
}

static void test_floor_is_served_every_window(void **state)
{
    uint64_t ran[2];

    (void)state;
    policy_set_priority(&p, 0, PRIORITY_HIGH);
    policy_set_priority(&p, 1, PRIORITY_LOW);
    simulate(2, 10 * SEC, 0, ran);
    assert_true(ran[1] < 10 * MS); /* no floor: starved */

    setup(NULL);
    policy_set_priority(&p, 0, PRIORITY_HIGH);
    policy_set_priority(&p, 1, PRIORITY_LOW);
    policy_set_min_share(&p, 1, 10);
    simulate(2, 10 * SEC, 0, ran);
    fprintf(stderr, "floor 10%%: high %.1f%%, low %.1f%%\n",
            (double)ran[0] / (100.0 * MS), (double)ran[1] / (100.0 * MS));
    assert_true(ran[1] >= 9 * 95 * MS && ran[1] <= 10 * 115 * MS);
    assert_true(ran[0] + ran[1] >= 10 * SEC * 98 / 100);
}

static void test_floor_does_not_preempt_its_own_class(void **state)
{
    (void)state;
    policy_set_min_share(&p, 1, 50);
    request(0, 0);
    request(1, 1 * MS);
    tick(1 * MS);
    assert_int_equal(out.n, 0); /* both normal: the TQ rotates them */
}

static void test_core_limit_caps_every_class(void **state)
{
    uint64_t ran[2];

    (void)state;
    policy_set_priority(&p, 0, PRIORITY_HIGH);
    policy_set_priority(&p, 1, PRIORITY_LOW);
    policy_set_core_limit(&p, 0, 0, 30, 0);
    simulate(2, 10 * SEC, 1 * SEC, ran);
    fprintf(stderr, "high limited to 30%%: high %.1f%%, low %.1f%%\n",
            (double)ran[0] / (90.0 * MS), (double)ran[1] / (90.0 * MS));
    assert_true(ran[0] <= 9 * 310 * MS && ran[0] >= 9 * 280 * MS);
    assert_true(ran[0] + ran[1] >= 9 * SEC * 97 / 100); /* never idle */

    /* A floor above the limit: the limit caps it. */
    setup(NULL);
    policy_set_priority(&p, 0, PRIORITY_HIGH);
    policy_set_priority(&p, 1, PRIORITY_LOW);
    policy_set_min_share(&p, 1, 50);
    policy_set_core_limit(&p, 0, 1, 20, 0);
    simulate(2, 10 * SEC, 1 * SEC, ran);
    fprintf(stderr, "low floor 50%% limited to 20%%: high %.1f%%, low %.1f%%\n",
            (double)ran[0] / (90.0 * MS), (double)ran[1] / (90.0 * MS));
    assert_true(ran[1] <= 9 * 210 * MS && ran[1] >= 9 * 180 * MS);
}

static void test_low_class_is_swapped_out_first(void **state)
{
    (void)state;
    policy_set_capacity(&p, 0, CAPACITY);
    policy_set_priority(&p, 0, PRIORITY_NORMAL);
    policy_set_priority(&p, 1, PRIORITY_LOW);
    policy_set_priority(&p, 2, PRIORITY_HIGH);
    policy_set_footprint(&p, 0, 0, 5 * GiB, 5 * GiB, 5 * GiB);
    policy_set_footprint(&p, 0, 1, 5 * GiB, 5 * GiB, 5 * GiB);
    policy_set_footprint(&p, 0, 2, 8 * GiB, 8 * GiB, 8 * GiB);
    policy_set_idle_swap_after(&p, 0);
    request(0, 0);
    release(0, 10 * MS);
    request(1, 20 * MS);
    release(1, 30 * MS); /* both idle and resident: 10 GiB */
    request(2, 40 * MS);
    /* Only one needs to go: the low one, though the normal one is older. */
    assert_int_equal(count(ACTION_EVICT, 1), 1);
    assert_int_equal(count(ACTION_EVICT, 0), 0);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 2), 1);
    policy_actions_clear(&out);
    policy_swapped(&p, 0, 1, SWAP_OUT, 5 * GiB, 100 * MS, 140 * MS, &out);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
}

static void test_running_low_class_goes_before_idle_normal(void **state)
{
    (void)state;
    policy_set_capacity(&p, 0, CAPACITY);
    policy_set_priority(&p, 0, PRIORITY_NORMAL);
    policy_set_priority(&p, 1, PRIORITY_LOW);
    policy_set_priority(&p, 2, PRIORITY_HIGH);
    policy_set_footprint(&p, 0, 0, 5 * GiB, 5 * GiB, 5 * GiB);
    policy_set_footprint(&p, 0, 1, 5 * GiB, 5 * GiB, 5 * GiB);
    policy_set_footprint(&p, 0, 2, 8 * GiB, 8 * GiB, 8 * GiB);
    policy_set_idle_swap_after(&p, 0);
    request(0, 0);
    release(0, 10 * MS); /* idle, resident, older */
    request(1, 20 * MS); /* the low client runs: 10 GiB resident */
    request(2, 30 * MS);
    /* The running low client will be preempted: it is the one to swap
     * once it has released (all three prepared when they outgrew the
     * GPU), not the idle normal one. */
    assert_int_equal(count(ACTION_EVICT, 0), 0);
    assert_true(mem(1)->evict_after_release);
    tick(30 * MS);
    assert_int_equal(count(ACTION_DROP, 1), 1);
    release(1, 31 * MS);
    assert_int_equal(count(ACTION_EVICT, 1), 1);
    assert_int_equal(count(ACTION_EVICT, 0), 0);
    policy_actions_clear(&out);
    policy_swapped(&p, 0, 1, SWAP_OUT, 5 * GiB, 100 * MS, 131 * MS, &out);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
}

static void test_running_low_class_is_dropped_then_swapped(void **state)
{
    (void)state;
    policy_set_capacity(&p, 0, CAPACITY);
    policy_set_priority(&p, 0, PRIORITY_LOW);
    policy_set_priority(&p, 1, PRIORITY_HIGH);
    policy_set_footprint(&p, 0, 0, 10 * GiB, 10 * GiB, 10 * GiB);
    policy_set_footprint(&p, 0, 1, 8 * GiB, 8 * GiB, 8 * GiB);
    request(0, 0);
    request(1, 10 * MS);
    tick(10 * MS);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    release(0, 12 * MS);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    policy_actions_clear(&out);
    policy_swapped(&p, 0, 0, SWAP_OUT, 10 * GiB, 200 * MS, 212 * MS, &out);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    /* The low client asks again: it waits for priority, not memory. */
    request(0, 220 * MS);
    assert_int_equal(out.n, 0);
    assert_int_equal(mem(0)->wait_reason, WAIT_PRIORITY);
}

static void test_unmovable_low_client_makes_high_wait(void **state)
{
    (void)state;
    policy_set_capacity(&p, 0, CAPACITY);
    policy_set_priority(&p, 0, PRIORITY_LOW);
    policy_set_priority(&p, 1, PRIORITY_HIGH);
    policy_set_footprint(&p, 0, 0, 10 * GiB, 0, 0); /* device memory */
    policy_set_footprint(&p, 0, 1, 8 * GiB, 8 * GiB, 8 * GiB);
    request(0, 0);
    request(1, 10 * MS);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    /* Dropping the low client would free nothing: it keeps running, and
     * nobody is given memory that is not there. */
    tick(10 * MS);
    assert_int_equal(count(ACTION_DROP, 0), 0);
    assert_int_equal(count(ACTION_GRANT, 1), 0);
    policy_actions_clear(&out);
    policy_leave(&p, 0, 20 * MS, &out);
    assert_int_equal(count(ACTION_MEM_AVAILABLE, 1), 1);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
}

/* Random events with random classes, floors, loads and footprints: no
 * holder is left running, after a tick, while a client of a higher class
 * wants the GPU; no grant goes to a client that one of a higher class
 * waits in front of; nobody is told to swap out while it runs. */
static void test_random_events_keep_classes_apart(void **state)
{
    uint64_t now = 0;
    unsigned seed = 4242;
    int drops = 0, evicts = 0, priority_waits = 0;

    (void)state;
    policy_set_mode(&p, -1, SCHED_MODE_AUTO);
    policy_set_capacity(&p, 0, CAPACITY);
    for (int step = 0; step < 100000; step++) {
        int c = rand_r(&seed) % N_CLIENTS;

        now += (uint64_t)(rand_r(&seed) % 20) * MS;
        policy_actions_clear(&out);
        switch (rand_r(&seed) % 9) {
        case 0:
        case 1:
        case 2:
            policy_request(&p, 0, c, now, &out);
            break;
        case 3:
            if (policy_is_running(&p, 0, c))
                policy_release(&p, 0, c, mem(c)->lease, 0, 0, now, &out);
            break;
        case 4:
            policy_tick(&p, now, &out);
            for (int x = 0; x < N_CLIENTS; x++)
                if (mem(x)->state == MEMBER_HOLDING)
                    assert_false(pol_outranked(&p, &p.gpus[0], 0, x, now));
            break;
        case 5:
            policy_set_priority(&p, c, (unsigned)(rand_r(&seed) % 4));
            break;
        case 6:
            if (rand_r(&seed) % 10 == 0)
                policy_set_min_share(&p, c, (unsigned)(rand_r(&seed) % 3) * 10);
            else
                policy_set_load(&p, 0, c, (unsigned)(rand_r(&seed) % 1001));
            break;
        case 7: {
            uint64_t bytes = (uint64_t)(rand_r(&seed) % 9) * GiB;
            uint64_t evictable = rand_r(&seed) % 4 ? bytes : bytes / 2;
            policy_set_footprint(&p, 0, c, bytes, evictable, evictable);
            break;
        }
        case 8:
            if (mem(c)->evicting) {
                policy_swapped(&p, 0, c, SWAP_OUT, mem(c)->evictable, MS, now,
                               &out);
            } else if (rand_r(&seed) % 10 == 0) {
                policy_leave(&p, c, now, &out);
                policy_join(&p, 0, c, c, now);
            }
            break;
        }
        int running = 0, waiting = 0;
        for (int x = 0; x < N_CLIENTS; x++) {
            running += policy_is_running(&p, 0, x);
            waiting += mem(x)->state == MEMBER_WAITING;
        }
        assert_int_equal(running, p.gpus[0].n_running);
        assert_int_equal(waiting, p.gpus[0].n_waiting);
        for (int i = 0; i < out.n; i++) {
            if (out.list[i].kind == ACTION_GRANT)
                assert_false(
                    pol_outranked(&p, &p.gpus[0], 0, out.list[i].client, now));
            if (out.list[i].kind == ACTION_EVICT)
                assert_false(policy_is_running(&p, 0, out.list[i].client));
            drops += out.list[i].kind == ACTION_DROP;
            evicts += out.list[i].kind == ACTION_EVICT;
        }
        for (int x = 0; x < N_CLIENTS; x++)
            priority_waits += mem(x)->state == MEMBER_WAITING &&
                              mem(x)->wait_reason == WAIT_PRIORITY;
    }
    /* The run went through what it checks. */
    fprintf(stderr, "drops %d, evictions %d, waits for priority %d\n", drops,
            evicts, priority_waits);
    assert_true(drops > 1000 && evicts > 100 && priority_waits > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_higher_class_preempts_at_once, setup),
        cmocka_unit_test_setup(test_lower_class_waits_while_higher_wants, setup),
        cmocka_unit_test_setup(test_preemption_follows_class_order, setup),
        cmocka_unit_test_setup(test_concurrent_mode_does_not_mix_classes, setup),
        cmocka_unit_test_setup(test_floor_is_served_every_window, setup),
        cmocka_unit_test_setup(test_floor_does_not_preempt_its_own_class, setup),
        cmocka_unit_test_setup(test_core_limit_caps_every_class, setup),
        cmocka_unit_test_setup(test_low_class_is_swapped_out_first, setup),
        cmocka_unit_test_setup(test_running_low_class_goes_before_idle_normal,
                               setup),
        cmocka_unit_test_setup(test_running_low_class_is_dropped_then_swapped,
                               setup),
        cmocka_unit_test_setup(test_unmovable_low_client_makes_high_wait, setup),
        cmocka_unit_test_setup(test_random_events_keep_classes_apart, setup),
        cmocka_unit_test_setup(test_higher_class_starts_beside_the_draining_holder,
                               setup),
        cmocka_unit_test_setup(test_yield_terms_follow_the_classes_on_the_gpu,
                               setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
