/* test_idle_reclaim.c - memory of idle clients taken back: the idle-swap
 * threshold, the per-pod opt-out, the host swap budget, why a waiter waits
 * and the swap counters, driven through the pure policy with a synthetic
 * clock.
 *
 * One GPU of 16 GiB (14.4 admitted); clients 0-7 joined, each billed to
 * its own account, all of their memory evictable, concurrent mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "policy_fixture.h"

#define MS 1000000ull
#define SEC (1000 * MS)
#define GiB (1ull << 30)
#define TQ (100 * MS)
#define DRAIN_TIMEOUT (1000 * MS)
#define IDLE_AFTER (10 * SEC)
#define SWITCH_TIME (60 * SEC)

static int setup(void **state)
{
    (void)state;
    policy_start(&p, 1, TQ, DRAIN_TIMEOUT);
    policy_set_capacity(&p, 0, 16 * GiB);
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    policy_set_switch_time(&p, SWITCH_TIME, 0);
    policy_set_idle_swap_after(&p, IDLE_AFTER);
    for (int c = 0; c < 8; c++)
        policy_join(&p, 0, c, c, 0);
    return 0;
}

/* c's memory as an allocation that waits for room tells it ahead of c's
 * request (pending): not on the GPU before c's grant. */
static void footprint(int c, uint64_t bytes)
{
    policy_set_footprint(&p, 0, c, bytes, bytes, bytes);
}

/* c's memory as libnvshare allocates it: on the GPU at once, whether or
 * not c runs. */
static void allocated(int c, uint64_t bytes)
{
    policy_set_footprint(&p, 0, c, bytes, bytes, 0);
}

static void swapped(int c, int direction, uint64_t now)
{
    policy_actions_clear(&out);
    policy_swapped(&p, 0, c, direction, mem(c)->evictable, 100 * MS, now, &out);
}

/* Client c runs from `at` and gives the GPU back unasked 10 ms later: idle
 * from then on, its memory still on the GPU. */
static void run_then_idle(int c, uint64_t bytes, uint64_t at)
{
    footprint(c, bytes);
    request(c, at);
    assert_int_equal(count(ACTION_GRANT, c), 1);
    release(c, at + 10 * MS);
    assert_true(mem(c)->resident);
}

static struct policy_wait_why why_of(int c, uint64_t now)
{
    struct policy_wait_why why;

    policy_view_wait_why(&p, 0, c, now, &why);
    return why;
}

/* c is sent PREPARE_SWAP at `due` and not before (the policy wakes up
 * then), and once. */
static void prepares_once_at(int c, uint64_t due)
{
    assert_int_equal(tick(due - 1), due);
    assert_int_equal(count(ACTION_PREPARE_SWAP, ANY), 0);
    tick(due);
    assert_int_equal(count(ACTION_PREPARE_SWAP, c), 1);
    tick(due + 5 * SEC);
    assert_int_equal(count(ACTION_PREPARE_SWAP, ANY), 0);
}

/* Client c is asked to prepare at no tick from `from` to before `until`,
 * one every `step`. */
static void never_prepares(int c, uint64_t from, uint64_t until, uint64_t step)
{
    for (uint64_t t = from; t < until; t += step) {
        tick(t);
        assert_int_equal(count(ACTION_PREPARE_SWAP, c), 0);
    }
}

/* An idle holder is swapped out for a waiter only once idle for
 * idle-swap-after; the policy wakes up at that moment rather than polling,
 * and says meanwhile why the waiter waits. */
static void test_idle_client_swapped_only_after_threshold(void **state)
{
    (void)state;
    run_then_idle(0, 12 * GiB, 0); /* idle from 10 ms */
    footprint(1, 12 * GiB);
    request(1, 1 * SEC);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    assert_int_equal(count(ACTION_EVICT, ANY), 0);
    struct policy_wait_why why = why_of(1, 3 * SEC);
    assert_int_equal(why.why, WHY_IDLE_TOO_SHORT);
    assert_int_equal(why.blocker, 0);
    assert_int_equal(why.idle_ns, 3 * SEC - 10 * MS);
    assert_int_equal(why.idle_swap_after_ns, IDLE_AFTER);

    assert_int_equal(tick(2 * SEC), 10 * MS + IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, ANY), 0);
    tick(10 * MS + IDLE_AFTER - 1);
    assert_int_equal(count(ACTION_EVICT, ANY), 0);
    tick(10 * MS + IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    assert_int_equal(count(ACTION_GRANT, 1), 0);
    why = why_of(1, 10 * MS + IDLE_AFTER + 1 * MS);
    assert_int_equal(why.why, WHY_SWAPPING);
    assert_int_equal(why.blocker, 0);

    swapped(0, SWAP_OUT, 10 * SEC + 500 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
}

/* A waiter that no swap-out can make room for is shown waiting for the
 * client that holds the most memory that cannot move. */
static void test_waiter_kept_out_by_memory_that_cannot_move(void **state)
{
    (void)state;
    policy_set_footprint(&p, 0, 2, 2 * GiB, 0, 0);
    policy_set_footprint(&p, 0, 0, 12 * GiB, 0, 0);
    request(0, 0);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    release(0, 10 * MS);
    footprint(1, 4 * GiB);
    request(1, 1 * SEC);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    struct policy_wait_why why = why_of(1, 3 * SEC);
    assert_int_equal(why.why, WHY_CANNOT_MOVE);
    assert_int_equal(why.blocker, 0);
    assert_int_equal(why.fixed, 12 * GiB);
    assert_int_equal(why.idle_ns, 3 * SEC - 10 * MS);

    /* Once it frees what it held, the waiter is admitted. */
    policy_set_footprint(&p, 0, 0, 1 * GiB, 0, 0);
    tick(3 * SEC);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
}

/* A client whose memory cgroup cannot take its host copy answers EVICT
 * with 0 bytes, after reporting its memory as not evictable: that memory
 * still counts as on the GPU, so the waiter is not admitted into it, no
 * swap-out is counted, and the client is not asked again. Reported
 * evictable again, it is swapped out as any other. */
static void test_refused_swap_out_keeps_memory_counted(void **state)
{
    (void)state;
    run_then_idle(0, 12 * GiB, 0); /* idle from 10 ms */
    footprint(1, 12 * GiB);
    request(1, 1 * SEC);
    tick(10 * MS + IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, 0), 1);

    policy_set_footprint(&p, 0, 0, 12 * GiB, 0, 0);
    swapped(0, SWAP_OUT, 10 * SEC + 100 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 0);
    assert_true(policy_resident(&p, 0) >= 12 * GiB);
    /* Nothing moved: no swap-out counted, nothing parked. */
    struct policy_member_view v;
    assert_true(policy_view_member(&p, 0, 0, 10 * SEC + 100 * MS, &v));
    assert_int_equal(v.swap_outs, 0);
    assert_int_equal(v.parked, 0);
    assert_int_equal(v.resident, 12 * GiB);
    policy_actions_clear(&out);
    tick(30 * SEC);
    assert_int_equal(count(ACTION_EVICT, 0), 0);
    assert_int_equal(count(ACTION_GRANT, 1), 0);

    /* The cgroup has room again: evictable again while it idles, on the
     * GPU all along (nothing pending), and swapped out as any other. */
    policy_set_footprint(&p, 0, 0, 12 * GiB, 12 * GiB, 0);
    assert_true(mem(0)->resident);
    assert_int_equal(count(ACTION_GRANT, 1), 0);
    tick(31 * SEC);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    swapped(0, SWAP_OUT, 31 * SEC + 500 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
}

/* A runner admitted while small that grows past what fits beside an idle
 * holder's resident memory (its allocation waits in libnvshare for the
 * room) has the idle holder swapped out once idle-swap-after has passed,
 * and the policy wakes up for it. */
static void test_grown_runner_gets_idle_memory(void **state)
{
    (void)state;
    run_then_idle(0, 8 * GiB, 0); /* idle from 10 ms */
    footprint(1, 1 * GiB);
    request(1, 1 * SEC);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    footprint(1, 8 * GiB); /* 16 GiB resident of 14.4 admitted */
    assert_int_equal(tick(2 * SEC), 10 * MS + IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, ANY), 0);
    tick(10 * MS + IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    assert_int_equal(count(ACTION_DROP, 1), 0); /* the runner keeps running */
}

/* A holder that pauses (gives the GPU back unasked) within its turn for
 * memory goes on with its turn when it asks again: it is not swapped out
 * for the waiter, and its turn ends a switch time after it began, not
 * after the pause. */
static void test_paused_holder_keeps_its_turn(void **state)
{
    (void)state;
    footprint(0, 8 * GiB);
    request(0, 0);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    footprint(1, 8 * GiB);
    request(1, 100 * MS);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    release(0, 3 * SEC); /* a pause: loading data */
    assert_int_equal(count(ACTION_EVICT, ANY), 0);
    request(0, 3 * SEC + 200 * MS);
    assert_int_equal(count(ACTION_EVICT, 0), 0);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    assert_int_equal(count(ACTION_GRANT, 1), 0);
    /* 3 s held before the pause: 57 s left of the switch time. */
    tick(SWITCH_TIME + 200 * MS - 1);
    assert_int_equal(count(ACTION_DROP, 0), 0);
    tick(SWITCH_TIME + 200 * MS);
    assert_int_equal(count(ACTION_DROP, 0), 1);
}

/* A client of a pod that opted out of idle swapping keeps its memory when
 * it comes back from idle while a waiter waits for memory: it runs, and
 * is not swapped out at its next request. */
static void test_opted_out_client_resumes_in_place(void **state)
{
    (void)state;
    policy_set_idle_swap(&p, 0, false);
    run_then_idle(0, 8 * GiB, 0);
    footprint(1, 8 * GiB);
    request(1, 1 * SEC);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    request(0, 20 * SEC);
    assert_int_equal(count(ACTION_EVICT, 0), 0);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
}

/* Idle memory occupies the GPU until it has moved: the EVICT alone admits
 * nobody, only the holder's SWAPPED(out) does. */
static void test_idle_memory_counts_until_swapped_out(void **state)
{
    (void)state;
    policy_set_idle_swap_after(&p, 0);
    run_then_idle(0, 8 * GiB, 0);
    footprint(1, 8 * GiB);
    request(1, 20 * MS);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    for (uint64_t t = 30 * MS; t < DRAIN_TIMEOUT; t += 100 * MS) {
        tick(t);
        assert_int_equal(count(ACTION_GRANT, 1), 0);
        assert_int_equal(policy_resident(&p, 0), 8 * GiB);
    }
    swapped(0, SWAP_OUT, DRAIN_TIMEOUT);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    assert_int_equal(policy_resident(&p, 0), 8 * GiB);
}

/* Memory a client allocated before its first request is on the GPU: a
 * newcomer is not admitted into it. The client counts as idle since it
 * joined, so it is swapped out once idle-swap-after has passed, and then
 * the newcomer runs; the newcomer's own memory, told ahead, is not on the
 * GPU meanwhile. */
static void test_memory_of_a_client_that_never_ran_counts(void **state)
{
    (void)state;
    allocated(0, 12 * GiB); /* joined at 0, never asks */
    assert_int_equal(policy_resident(&p, 0), 12 * GiB);
    footprint(1, 12 * GiB);
    request(1, 1 * SEC);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    assert_int_equal(count(ACTION_GRANT, 1), 0);
    assert_int_equal(policy_resident(&p, 0), 12 * GiB);
    assert_int_equal(why_of(1, 2 * SEC).why, WHY_IDLE_TOO_SHORT);

    tick(IDLE_AFTER - 1);
    assert_int_equal(count(ACTION_EVICT, ANY), 0);
    tick(IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    assert_int_equal(count(ACTION_GRANT, 1), 0);
    swapped(0, SWAP_OUT, IDLE_AFTER + 500 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
}

/* Memory a client allocates while idle, after a run with nothing
 * evictable, is on the GPU as well. */
static void test_memory_allocated_while_idle_counts(void **state)
{
    (void)state;
    policy_set_footprint(&p, 0, 0, GiB / 2, 0, 0); /* its context */
    request(0, 0);
    release(0, 10 * MS);
    policy_set_footprint(&p, 0, 0, 12 * GiB + GiB / 2, 12 * GiB, 0);
    assert_int_equal(policy_resident(&p, 0), 12 * GiB + GiB / 2);
    footprint(1, 12 * GiB);
    request(1, 1 * SEC);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    assert_int_equal(count(ACTION_GRANT, 1), 0);
    tick(10 * MS + IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    swapped(0, SWAP_OUT, 11 * SEC);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
}

/* Memory a swapped-out client allocates (its next cell, before its first
 * kernel) is on the GPU while the rest of its memory is not: a newcomer is
 * not admitted into it, and a swap-out takes it off again. Bytes told
 * ahead by an allocation that waits for room are not there. */
static void test_memory_allocated_while_swapped_out_counts(void **state)
{
    (void)state;
    allocated(0, 8 * GiB);
    request(0, 0);
    release(0, 10 * MS);
    footprint(1, 8 * GiB);
    request(1, 1 * SEC);
    tick(10 * MS + IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    swapped(0, SWAP_OUT, 11 * SEC);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    assert_int_equal(policy_resident(&p, 0), 8 * GiB);

    policy_set_footprint(&p, 0, 0, 10 * GiB, 10 * GiB, 2 * GiB); /* waits */
    assert_int_equal(policy_resident(&p, 0), 8 * GiB);
    allocated(0, 12 * GiB); /* that one, and 2 GiB more, allocated */
    assert_int_equal(policy_resident(&p, 0), 12 * GiB);
    allocated(0, 11 * GiB); /* a free: counted as host memory's */
    assert_int_equal(policy_resident(&p, 0), 12 * GiB);

    footprint(2, 6 * GiB);
    request(2, 12 * SEC);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 2), 1);
    assert_int_equal(count(ACTION_GRANT, 2), 0);
    assert_int_equal(count(ACTION_EVICT, 0), 1); /* idle since 10 ms */
    swapped(0, SWAP_OUT, 12 * SEC + 100 * MS);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
    assert_int_equal(policy_resident(&p, 0), 14 * GiB);
}

/* A pod that opted out keeps its idle memory on the GPU however long it
 * idles: the waiter waits, says why, and holds nobody back. */
static void test_idle_swap_off_is_never_swapped(void **state)
{
    (void)state;
    policy_set_idle_swap(&p, 0, false);
    run_then_idle(0, 12 * GiB, 0);
    footprint(1, 12 * GiB);
    request(1, 1 * SEC);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    for (uint64_t t = 2 * SEC; t < 10 * IDLE_AFTER; t += 1 * SEC) {
        uint64_t next = tick(t);
        assert_int_equal(count(ACTION_EVICT, ANY), 0);
        assert_true(next == 0 || next > t);
    }
    struct policy_wait_why why = why_of(1, 10 * IDLE_AFTER);
    assert_int_equal(why.why, WHY_IDLE_SWAP_OFF);
    assert_int_equal(why.blocker, 0);
    assert_int_equal(why.idle_ns, 10 * IDLE_AFTER - 10 * MS);

    /* It holds nobody back: a small client runs beside the idle memory. */
    footprint(2, 1 * GiB);
    request(2, 10 * IDLE_AFTER);
    assert_int_equal(count(ACTION_GRANT, 2), 1);

    /* Opted in again, it is swapped out at the next tick. */
    policy_set_idle_swap(&p, 0, true);
    tick(10 * IDLE_AFTER + 1 * MS);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
}

/* An idle client is asked to prepare its swap-out once idle for
 * POLICY_PREPARE_AFTER_NS, before anyone waits for its memory, and again
 * only once idle after it allocated more; a shorter pause prepares
 * nothing, nor does a pod that opted out of idle swapping. */
static void test_idle_client_prepares_ahead(void **state)
{
    const uint64_t idle_from = 10 * MS,
                   prepare_at = idle_from + POLICY_PREPARE_AFTER_NS;

    (void)state;
    run_then_idle(0, 8 * GiB, 0);
    prepares_once_at(0, prepare_at);

    /* A short burst that allocates nothing, then a longer one that does. */
    request(0, 7 * SEC);
    release(0, 7 * SEC + 10 * MS);
    tick(9 * SEC);
    assert_int_equal(count(ACTION_PREPARE_SWAP, ANY), 0);
    request(0, 10 * SEC);
    footprint(0, 10 * GiB);
    release(0, 10 * SEC + 300 * MS);
    tick(10 * SEC + 800 * MS); /* paused for half a second */
    assert_int_equal(count(ACTION_PREPARE_SWAP, ANY), 0);
    tick(11 * SEC + 300 * MS);
    assert_int_equal(count(ACTION_PREPARE_SWAP, 0), 1);

    /* Never for an opted-out pod. */
    policy_set_idle_swap(&p, 1, false);
    run_then_idle(1, 2 * GiB, 12 * SEC);
    never_prepares(1, 12 * SEC, 30 * SEC, 100 * MS);
}

/* A holder that has had the GPU for the switch time leaves at once for a
 * waiter for memory: it prepares then, while nothing waits, and again
 * once it holds more; its EVICT needs no PREPARE_SWAP of its own. */
static void test_long_holder_prepares_before_an_arrival(void **state)
{
    (void)state;
    allocated(0, 12 * GiB);
    request(0, 0);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    prepares_once_at(0, SWITCH_TIME);
    allocated(0, 13 * GiB);
    tick(SWITCH_TIME + 6 * SEC);
    assert_int_equal(count(ACTION_PREPARE_SWAP, 0), 1);

    footprint(1, 12 * GiB);
    request(1, 70 * SEC);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    tick(70 * SEC + 1 * MS);
    assert_int_equal(count(ACTION_DROP, 0), 1); /* at once */
    release(0, 70 * SEC + 10 * MS);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    assert_int_equal(count(ACTION_PREPARE_SWAP, ANY), 0);
}

/* A holder prepares at its switch time whatever the size of the newcomer
 * to come, even one that a job its size would fit beside. A
 * latency-critical service (opted out of idle swap) never does: its own
 * process would make the copies, beside its requests. */
static void test_which_holders_prepare(void **state)
{
    (void)state;
    allocated(0, 7 * GiB); /* 7.4 GiB would still fit in 14.4 */
    request(0, 0);
    prepares_once_at(0, SWITCH_TIME);
    release(0, 5 * SWITCH_TIME);
    policy_set_footprint(&p, 0, 0, 0, 0, 0); /* it freed its memory */

    policy_set_idle_swap(&p, 1, false);
    allocated(1, 12 * GiB);
    request(1, 5 * SWITCH_TIME + 1 * SEC);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    never_prepares(1, 6 * SWITCH_TIME, 10 * SWITCH_TIME, SEC);
}

/* A waiter of a higher class has a holder leave at any time: a holder
 * that one could preempt prepares once its start's allocations are made,
 * and its EVICT then needs no PREPARE_SWAP of its own. A holder of the
 * highest class waits for its switch time. */
static void test_preemptible_holder_prepares_at_once(void **state)
{
    (void)state;
    policy_set_priority(&p, 1, PRIORITY_HIGH);
    allocated(0, 10 * GiB);
    request(0, 0);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    prepares_once_at(0, POLICY_PREPARE_AFTER_NS);

    footprint(1, 8 * GiB);
    request(1, 20 * SEC);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    tick(20 * SEC + 1 * MS);
    assert_int_equal(count(ACTION_DROP, 0), 1); /* at once */
    assert_int_equal(count(ACTION_PREPARE_SWAP, 0), 0);
    release(0, 20 * SEC + 10 * MS);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    assert_int_equal(count(ACTION_PREPARE_SWAP, 0), 0);
    swapped(0, SWAP_OUT, 20 * SEC + 100 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    never_prepares(1, 21 * SEC, 20 * SEC + SWITCH_TIME, SEC);
}

/* A class the operator or an annotation gave a pod whose process has not
 * come yet counts too; once none is higher, a holder waits for its switch
 * time. */
static void test_holder_prepares_for_a_class_to_come(void **state)
{
    (void)state;
    policy_expect_class(&p, PRIORITY_HIGH); /* a pod set high, no process */
    allocated(0, 10 * GiB);
    request(0, 0);
    prepares_once_at(0, POLICY_PREPARE_AFTER_NS);
    policy_expect_class(&p, PRIORITY_NORMAL);
    allocated(1, 2 * GiB);
    request(1, 10 * SEC);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    never_prepares(1, 10 * SEC, 10 * SEC + SWITCH_TIME, SEC);
}

/* Busy clients are never swapped for being idle: a runner leaves only at
 * the switch time, and a client that waits ahead of the memory waiter
 * keeps its memory, whatever idle-swap-after says. */
static void test_busy_clients_are_never_swapped_for_idleness(void **state)
{
    (void)state;
    policy_set_idle_swap_after(&p, 0);
    footprint(0, 8 * GiB);
    request(0, 0);
    footprint(1, 8 * GiB);
    request(1, 10 * MS);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 1), 1);
    for (uint64_t t = 1 * SEC; t < SWITCH_TIME; t += 1 * SEC) {
        tick(t);
        assert_int_equal(count(ACTION_EVICT, ANY), 0);
        assert_int_equal(count(ACTION_DROP, ANY), 0);
    }

    /* Serial: 2 waits for the lock behind runner 0, its memory resident
     * from its last hold; 1 waits for memory behind it. */
    setup(NULL);
    policy_set_idle_swap_after(&p, 0);
    policy_set_mode(&p, 0, SCHED_MODE_SERIAL);
    run_then_idle(2, 6 * GiB, 0);
    footprint(0, 2 * GiB);
    request(0, 20 * MS);
    request(2, 30 * MS);
    assert_int_equal(mem(2)->wait_reason, WAIT_LOCK);
    footprint(1, 8 * GiB); /* 2 + 6 + 8 > 14.4 */
    request(1, 40 * MS);
    tick(50 * MS);
    assert_int_equal(count(ACTION_EVICT, ANY), 0);
    assert_true(mem(2)->resident);
}

/* Lower classes go first, then the client idle the longest, though
 * another was granted before it. */
static void test_lowest_class_then_longest_idle_goes_first(void **state)
{
    (void)state;
    policy_set_priority(&p, 2, PRIORITY_LOW);
    footprint(0, 4 * GiB);
    footprint(1, 4 * GiB);
    request(1, 0);
    request(0, 5 * MS);
    release(0, 10 * MS);                /* idle from 10 ms */
    release(1, 30 * MS);                /* from 30 ms, granted first */
    run_then_idle(2, 4 * GiB, 40 * MS); /* from 50 ms, low */
    footprint(3, 8 * GiB);              /* 12 + 8 > 14.4: two must go */
    request(3, IDLE_AFTER + 1 * SEC);
    assert_int_equal(count(ACTION_EVICT, 2), 1);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    assert_int_equal(count(ACTION_EVICT, 1), 0);
}

/* Room that two idle clients make together: the policy wakes up as each
 * reaches idle-swap-after, and swaps it out then. */
static void test_wakes_up_as_idle_clients_reach_threshold(void **state)
{
    (void)state;
    run_then_idle(0, 6 * GiB, 0);       /* idle from 10 ms */
    run_then_idle(1, 6 * GiB, 2 * SEC); /* from 2.01 s */
    footprint(2, 12 * GiB);             /* 12 + 12 > 14.4: both must go */
    request(2, 3 * SEC);
    assert_int_equal(count(ACTION_EVICT, ANY), 0);
    assert_int_equal(tick(4 * SEC), 10 * MS + IDLE_AFTER);
    tick(10 * MS + IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    assert_int_equal(count(ACTION_EVICT, 1), 0);
    swapped(0, SWAP_OUT, 10 * SEC + 500 * MS);
    assert_int_equal(count(ACTION_GRANT, 2), 0);
    assert_int_equal(tick(10 * SEC + 600 * MS), 2 * SEC + 10 * MS + IDLE_AFTER);
    tick(2 * SEC + 10 * MS + IDLE_AFTER);
    assert_int_equal(count(ACTION_EVICT, 1), 1);
    swapped(1, SWAP_OUT, 13 * SEC);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
}

/* The parked total stays within the host budget: a waiter that needs an
 * eviction past it waits, and says why, until the host has room. */
static void test_host_budget_holds_evictions_back(void **state)
{
    (void)state;
    policy_set_idle_swap_after(&p, 0);
    policy_set_host_swap_budget(&p, 10 * GiB);
    run_then_idle(0, 8 * GiB, 0);
    footprint(1, 8 * GiB);
    request(1, 20 * MS);
    assert_int_equal(count(ACTION_EVICT, 0), 1);
    swapped(0, SWAP_OUT, 100 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    release(1, 200 * MS); /* idle, resident; 0's 8 GiB parked */

    footprint(2, 8 * GiB);
    request(2, 300 * MS);
    assert_int_equal(count(ACTION_WAIT_FOR_MEM, 2), 1);
    assert_int_equal(count(ACTION_EVICT, ANY), 0);
    struct policy_settings_view settings;
    policy_view_settings(&p, &settings);
    assert_int_equal(settings.parked, 8 * GiB);
    struct policy_wait_why why = why_of(2, 400 * MS);
    assert_int_equal(why.why, WHY_HOST_BUDGET);
    assert_int_equal(why.blocker, 1);
    assert_int_equal(why.parked, 8 * GiB);
    assert_int_equal(why.budget, 10 * GiB);

    /* 0 leaves: the host has room, and 1 goes. */
    policy_actions_clear(&out);
    policy_leave(&p, 0, 500 * MS, &out);
    assert_int_equal(count(ACTION_EVICT, 1), 1);
}

/* Two clients that take turns trade places within a budget that holds
 * only one of them: the waiter's own parked memory comes back. */
static void test_host_budget_lets_two_clients_trade_places(void **state)
{
    (void)state;
    policy_set_host_swap_budget(&p, 10 * GiB);
    footprint(0, 8 * GiB);
    footprint(1, 8 * GiB);
    request(0, 0);
    request(1, 10 * MS);
    tick(SWITCH_TIME);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    release(0, SWITCH_TIME + 10 * MS);
    request(0, SWITCH_TIME + 20 * MS);
    swapped(0, SWAP_OUT, SWITCH_TIME + 100 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    tick(2 * SWITCH_TIME + 100 * MS);
    assert_int_equal(count(ACTION_DROP, 1), 1);
    release(1, 2 * SWITCH_TIME + 110 * MS); /* 0 waits, its 8 GiB parked */
    assert_int_equal(count(ACTION_EVICT, 1), 1);
}

/* What status shows of a client's swaps: resident and parked bytes, idle
 * time, the counts, and the time from its grant to its SWAPPED(in). */
static void test_member_view_counts_swaps(void **state)
{
    struct policy_member_view v;

    (void)state;
    policy_set_idle_swap_after(&p, 0);
    run_then_idle(0, 8 * GiB, 0);
    assert_true(policy_view_member(&p, 0, 0, 1 * SEC, &v));
    assert_int_equal(v.idle_ns, 1 * SEC - 10 * MS);
    assert_int_equal(v.resident, 8 * GiB);
    footprint(1, 8 * GiB);
    request(1, 1 * SEC);
    swapped(0, SWAP_OUT, 2 * SEC);
    assert_true(policy_view_member(&p, 0, 0, 2 * SEC, &v));
    assert_int_equal(v.resident, 0);
    assert_int_equal(v.parked, 8 * GiB);
    assert_int_equal(v.swap_outs, 1);

    release(1, 3 * SEC);
    request(0, 4 * SEC); /* 1 is idle for 0 s: swapped at once (0) */
    assert_int_equal(count(ACTION_EVICT, 1), 1);
    swapped(1, SWAP_OUT, 5 * SEC);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    swapped(0, SWAP_IN, 5 * SEC + 300 * MS);
    assert_true(policy_view_member(&p, 0, 0, 6 * SEC, &v));
    assert_int_equal(v.swap_ins, 1);
    assert_int_equal(v.swap_in_wait_ns, 300 * MS);
    assert_int_equal(v.parked, 0);
    assert_int_equal(v.idle_ns, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_idle_client_swapped_only_after_threshold,
                               setup),
        cmocka_unit_test_setup(test_idle_memory_counts_until_swapped_out, setup),
        cmocka_unit_test_setup(test_memory_of_a_client_that_never_ran_counts,
                               setup),
        cmocka_unit_test_setup(test_memory_allocated_while_idle_counts, setup),
        cmocka_unit_test_setup(test_memory_allocated_while_swapped_out_counts,
                               setup),
        cmocka_unit_test_setup(test_grown_runner_gets_idle_memory, setup),
        cmocka_unit_test_setup(test_paused_holder_keeps_its_turn, setup),
        cmocka_unit_test_setup(test_opted_out_client_resumes_in_place, setup),
        cmocka_unit_test_setup(test_idle_swap_off_is_never_swapped, setup),
        cmocka_unit_test_setup(test_idle_client_prepares_ahead, setup),
        cmocka_unit_test_setup(test_long_holder_prepares_before_an_arrival, setup),
        cmocka_unit_test_setup(test_which_holders_prepare, setup),
        cmocka_unit_test_setup(test_preemptible_holder_prepares_at_once, setup),
        cmocka_unit_test_setup(test_holder_prepares_for_a_class_to_come, setup),
        cmocka_unit_test_setup(test_busy_clients_are_never_swapped_for_idleness,
                               setup),
        cmocka_unit_test_setup(test_lowest_class_then_longest_idle_goes_first,
                               setup),
        cmocka_unit_test_setup(test_wakes_up_as_idle_clients_reach_threshold,
                               setup),
        cmocka_unit_test_setup(test_host_budget_holds_evictions_back, setup),
        cmocka_unit_test_setup(test_host_budget_lets_two_clients_trade_places,
                               setup),
        cmocka_unit_test_setup(test_member_view_counts_swaps, setup),
        cmocka_unit_test_setup(test_waiter_kept_out_by_memory_that_cannot_move,
                               setup),
        cmocka_unit_test_setup(test_refused_swap_out_keeps_memory_counted, setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
