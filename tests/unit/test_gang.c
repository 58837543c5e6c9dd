/* test_gang.c - gang grants: a multi-GPU job gets all its GPUs in one
 * decision or none, its ranks are dropped together, single-GPU clients
 * cannot starve it, and randomized schedules of gangs and single-GPU
 * clients never reach a circular wait. Driven by a synthetic clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy_internal.h" /* checks the state it drives */
#include "policy_fixture.h"

#define MS 1000000ull
#define SEC (1000 * MS)
#define TQ (100 * MS)
#define DRAIN_TIMEOUT (10 * SEC)


/* A gang's GPUs are those its ranks asked for: as if each had asked once
 * before the test. */
static void join(int gpu, int client, int gang)
{
    policy_set_gang(&p, client, gang);
    policy_join(&p, gpu, client, client, 0);
    p.gpus[gpu].members[client].requested = true;
    p.gangs_spanning = 1; /* what a first request on a second GPU sets */
}

static int state(int gpu, int client)
{
    return p.gpus[gpu].members[client].state;
}

/* Two GPUs, serial. Gang 0: client 0 on GPU 0 and client 1 on GPU 1.
 * Gang 1: client 2 on GPU 0 and client 3 on GPU 1. Client 4 is alone on
 * GPU 1, client 5 alone on GPU 0. */
static int setup(void **unused)
{
    (void)unused;
    policy_start(&p, 2, TQ, DRAIN_TIMEOUT);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
    static const int gang[] = {0, 0, 1, 1, -1, -1};
    static const int gpu[] = {0, 1, 0, 1, 1, 0};
    for (int c = 0; c < 6; c++)
        join(gpu[c], c, gang[c]);
    return 0;
}

static void test_grant_is_all_or_none(void **unused)
{
    (void)unused;
    request_on(1, 4, 0); /* the single client takes GPU 1 */
    assert_int_equal(count_on(ACTION_GRANT, 1, 4), 1);
    request_on(0, 0, 1 * MS);
    /* GPU 0 is free, but the gang's GPU 1 is not: no part of it. */
    assert_int_equal(out.n, 0);
    assert_int_equal(state(0, 0), MEMBER_WAITING);
    request_on(1, 1, 2 * MS);
    assert_int_equal(out.n, 0);
    tick(TQ);
    assert_int_equal(count_on(ACTION_DROP, 1, 4), 1);
    release_on(1, 4, TQ + 1 * MS);
    /* One decision grants both ranks. */
    assert_int_equal(count_on(ACTION_GRANT, 0, 0), 1);
    assert_int_equal(count_on(ACTION_GRANT, 1, 1), 1);
    assert_int_equal(p.gpus[0].members[0].granted_at,
                     p.gpus[1].members[1].granted_at);
}

static void test_crossed_requests_cannot_deadlock(void **unused)
{
    (void)unused;
    /* The crossed case of per-GPU locks: A asks for GPU 0, B for GPU 1,
     * then each for the other. */
    request_on(0, 0, 0);
    assert_int_equal(count_on(ACTION_GRANT, 0, 0), 1); /* A holds both */
    request_on(1, 3, 1 * MS);
    assert_int_equal(out.n, 0); /* B gets no part of them */
    request_on(1, 1, 2 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 1, 1), 1); /* A's GPU 1 was kept */
    request_on(0, 2, 3 * MS);
    assert_int_equal(out.n, 0);
    /* A's quantum ends: both ranks go, then B gets both. */
    tick(TQ);
    assert_int_equal(count_on(ACTION_DROP, 0, 0), 1);
    assert_int_equal(count_on(ACTION_DROP, 1, 1), 1);
    release_on(0, 0, TQ + 1 * MS);
    assert_int_equal(out.n, 0);
    release_on(1, 1, TQ + 2 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 0, 2), 1);
    assert_int_equal(count_on(ACTION_GRANT, 1, 3), 1);
}

static void test_preemption_drains_every_rank_first(void **unused)
{
    (void)unused;
    request_on(0, 0, 0);
    request_on(1, 1, 0);
    assert_int_equal(state(1, 1), MEMBER_HOLDING);
    request_on(0, 5, 1 * MS); /* a single client waits on GPU 0 only */
    tick(TQ);
    /* Its quantum ends on GPU 0; GPU 1's rank is dropped with it. */
    assert_int_equal(count_on(ACTION_DROP, 0, 0), 1);
    assert_int_equal(count_on(ACTION_DROP, 1, 1), 1);
    release_on(0, 0, TQ + 1 * MS);
    /* GPU 0 goes on only when the last rank has drained. */
    assert_int_equal(count_on(ACTION_GRANT, 0, 5), 0);
    release_on(1, 1, TQ + 2 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 0, 5), 1);
}

/* A rank's whole drain is what a hand-over costs its peers, who wait at
 * their collectives: it is what the auto quantum follows on its GPUs. */
static void test_auto_quantum_counts_a_rank_s_whole_drain(void **unused)
{
    struct policy_gpu_view v;

    (void)unused;
    policy_set_tq(&p, POLICY_TQ_AUTO);
    request_on(0, 0, 0);
    request_on(1, 1, 0);
    request_on(0, 5, 1 * MS);
    tick(POLICY_TQ_FLOOR_NS);
    assert_int_equal(count_on(ACTION_DROP, 1, 1), 1);
    release_on(0, 0, POLICY_TQ_FLOOR_NS + 3 * MS);
    release_on(1, 1, POLICY_TQ_FLOOR_NS + 5 * MS);
    /* One sample each, beside the prior's hand-overs of the floor's cost. */
    const uint64_t prior = POLICY_HANDOVER_PRIOR_N * POLICY_HANDOVER_PRIOR_NS;
    policy_view_gpu(&p, 0, &v);
    assert_int_equal(v.handover_mean_ns,
                     (prior + 3 * MS) / (POLICY_HANDOVER_PRIOR_N + 1));
    assert_int_equal(v.quantum_ns, v.handover_mean_ns * POLICY_TQ_DRAIN_MULTIPLE);
    policy_view_gpu(&p, 1, &v);
    assert_int_equal(v.handover_mean_ns,
                     (prior + 5 * MS) / (POLICY_HANDOVER_PRIOR_N + 1));
    assert_int_equal(v.quantum_ns, v.handover_mean_ns * POLICY_TQ_DRAIN_MULTIPLE);
}

/* A gang's ranks share one turn, the longest quantum among its GPUs: a
 * gang loses both GPUs when either rank's turn ends, so cut at the GPU
 * whose hand-overs are cheap it got shorter turns than a single-GPU
 * client on the other GPU (43.5 % of that GPU's held time, two H200s). */
static void test_gang_turn_is_its_longest_quantum(void **unused)
{
    (void)unused;
    policy_set_tq(&p, POLICY_TQ_AUTO);
    p.gpus[0].auto_quantum_ns = 500 * MS;
    p.gpus[1].auto_quantum_ns = 200 * MS;
    /* Gang 1 has had a turn, so it does not arrive fresh below. */
    request_on(0, 2, 0);
    request_on(1, 3, 0);
    assert_int_equal(count_on(ACTION_GRANT, 1, 3), 1);
    release_on(0, 2, 10 * MS);
    release_on(1, 3, 10 * MS);
    request_on(0, 0, 20 * MS);
    request_on(1, 1, 20 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 1, 1), 1);
    request_on(0, 2, 21 * MS);
    request_on(1, 3, 21 * MS);
    /* GPU 1's quantum has passed, GPU 0's has not: the gang keeps both. */
    tick(20 * MS + 300 * MS);
    assert_int_equal(count_on(ACTION_DROP, 1, 1), 0);
    assert_int_equal(count_on(ACTION_DROP, 0, 0), 0);
    tick(20 * MS + 500 * MS);
    assert_int_equal(count_on(ACTION_DROP, 0, 0), 1);
    assert_int_equal(count_on(ACTION_DROP, 1, 1), 1);
}

static void test_rank_dropped_alone_drops_the_gang(void **unused)
{
    (void)unused;
    request_on(0, 0, 0);
    request_on(1, 1, 0);
    /* A single client waits on GPU 1: its rotation drops rank 1, and
     * rank 0, whose GPU nobody else wants, goes with it. */
    request_on(1, 4, 1 * MS);
    tick(TQ);
    assert_int_equal(count_on(ACTION_DROP, 1, 1), 1);
    assert_int_equal(count_on(ACTION_DROP, 0, 0), 1);
}

static uint64_t drain_to(int gpu, int client)
{
    for (int i = 0; i < out.n; i++)
        if (out.list[i].kind == ACTION_DRAIN_TO && out.list[i].gpu == gpu &&
            out.list[i].client == client)
            return out.list[i].collectives;
    return 0;
}

static void drain_point(int gpu, int client, uint64_t collectives)
{
    policy_actions_clear(&out);
    policy_drain_point(&p, gpu, client, p.gpus[gpu].members[client].lease,
                       collectives, &out);
}

/* Gang 0 runs on both GPUs until client 5 has waited for GPU 0 a quantum:
 * both ranks are dropped. */
static void gang_0_dropped_for_client_5(void)
{
    request_on(0, 0, 0);
    request_on(1, 1, 0);
    request_on(0, 5, 1 * MS);
    tick(TQ);
    assert_int_equal(count_on(ACTION_DROP, 0, 0), 1);
    assert_int_equal(count_on(ACTION_DROP, 1, 1), 1);
}

/* Rank 0 of gang 0 runs alone (rank 1 has not asked yet) until client 5
 * has waited for GPU 0 a quantum, and says where it stands. */
static void rank_0_alone_dropped_for_client_5(uint64_t collectives)
{
    request_on(0, 0, 0);
    request_on(0, 5, 1 * MS);
    tick(TQ);
    assert_int_equal(count_on(ACTION_DROP, 0, 0), 1);
    drain_point(0, 0, collectives);
}

static void test_ranks_agree_on_the_furthest_drain_point(void **unused)
{
    (void)unused;
    gang_0_dropped_for_client_5();
    /* Rank 1 launched one collective more than rank 0 before its gate
     * closed: nobody drains until both have said where they stand, then
     * both are told the furthest point, once. */
    drain_point(1, 1, 8);
    assert_int_equal(out.n, 0);
    drain_point(0, 0, 7);
    assert_int_equal(drain_to(0, 0), 8);
    assert_int_equal(drain_to(1, 1), 8);
    assert_int_equal(out.n, 2);
    drain_point(0, 0, 7); /* a duplicate changes nothing */
    assert_int_equal(out.n, 0);
    release_on(0, 0, TQ + 2 * MS);
    release_on(1, 1, TQ + 3 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 0, 5), 1);
}

static void test_rank_waiting_during_the_drain_joins_it(void **unused)
{
    (void)unused;
    rank_0_alone_dropped_for_client_5(4);
    assert_int_equal(drain_to(0, 0), 4);
    /* Rank 0's fourth collective needs rank 1's, which now asks for its
     * GPU: it joins the drain and is told to reach the same point. */
    request_on(1, 1, TQ + 1 * MS);
    tick(TQ + 2 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 1, 1), 1);
    assert_int_equal(count_on(ACTION_DROP, 1, 1), 1);
    drain_point(1, 1, 3);
    assert_int_equal(drain_to(1, 1), 4);
    assert_int_equal(out.n, 1);
    release_on(0, 0, TQ + 5 * MS);
    release_on(1, 1, TQ + 6 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 0, 5), 1);
}

static void test_swapped_out_rank_does_not_join_the_drain(void **unused)
{
    (void)unused;
    rank_0_alone_dropped_for_client_5(4);
    /* Rank 1's memory went to the host: joining the drain would bring it
     * back beside client 4 (on GPU 1), which the GPU may not hold. */
    p.gpus[1].members[1].evictable = 1ull << 30;
    p.gpus[1].members[1].resident = false;
    request_on(1, 4, TQ + 1 * MS);
    request_on(1, 1, TQ + 1 * MS);
    tick(TQ + 2 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 1, 1), 0);
    assert_int_equal(state(1, 1), MEMBER_WAITING);
}

static void test_rank_that_drained_waits_for_the_next_grant(void **unused)
{
    (void)unused;
    gang_0_dropped_for_client_5();
    drain_point(0, 0, 3);
    drain_point(1, 1, 3);
    release_on(1, 1, TQ + 1 * MS);
    /* Rank 1 drained to the point and asks again while rank 0 still
     * drains: it is not admitted into this drain again. */
    request_on(1, 1, TQ + 2 * MS);
    tick(TQ + 3 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 1, 1), 0);
    assert_int_equal(state(1, 1), MEMBER_WAITING);
    release_on(0, 0, TQ + 4 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 0, 5), 1);
}

static void test_revoked_rank_does_not_block_the_agreement(void **unused)
{
    (void)unused;
    gang_0_dropped_for_client_5();
    drain_point(0, 0, 3);
    assert_int_equal(out.n, 0);
    /* Rank 0 says it drains on, rank 1 is silent: once rank 1 is revoked
     * (after a second), rank 0 is told. */
    policy_draining(&p, 0, 0, p.gpus[0].members[0].lease, TQ + 900 * MS);
    tick(TQ + SEC + 1 * MS);
    assert_int_equal(count_on(ACTION_REVOKE, 1, 1), 1);
    assert_int_equal(state(0, 0), MEMBER_DRAINING);
    assert_int_equal(drain_to(0, 0), 3);
}

/* A gang keeps a GPU on which its rank gave the lock back; a client that
 * waits for that GPU ends the gang's quantum all the same, though no rank
 * runs there for the GPU's own rotation to drop. */
static void test_idle_rank_does_not_keep_its_gpu_forever(void **unused)
{
    (void)unused;
    request_on(0, 0, 0);
    request_on(1, 1, 0);
    release_on(1, 1, 10 * MS); /* rank 1 idles */
    request_on(1, 4, 20 * MS);
    assert_int_equal(state(1, 4), MEMBER_WAITING); /* the gang holds GPU 1 */
    assert_int_equal(tick(30 * MS), TQ);
    assert_int_equal(out.n, 0);
    tick(TQ);
    assert_int_equal(count_on(ACTION_DROP, 0, 0), 1);
    release_on(0, 0, TQ + 1 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 1, 4), 1);
}

/* A gang that its pod's core limit holds back keeps no GPU from others:
 * it could not use it. */
static void test_throttled_gang_keeps_no_gpu(void **unused)
{
    (void)unused;
    policy_set_core_limit(&p, 0, 0, 10, 0); /* the ranks' accounts */
    policy_set_core_limit(&p, 1, 1, 10, 0);
    /* Its budget accrues a tenth of each slice: it waits out most of each
     * slice, longer than a 20 ms quantum. */
    policy_set_tq(&p, 20 * MS);
    for (uint64_t now = 0; now < 350 * MS; now += 1 * MS) {
        for (int c = 0; c < 2; c++)
            if (state(c, c) == MEMBER_IDLE)
                request_on(c, c, now);
        tick(now);
        for (int c = 0; c < 2; c++)
            if (state(c, c) == MEMBER_DRAINING)
                release_on(c, c, now);
    }
    /* Ahead of its pace mid-slice, long past its quantum of wait. */
    assert_int_equal(state(1, 1), MEMBER_WAITING);
    assert_true(policy_spent(&p, 1, 1, 350 * MS));
    request_on(1, 4, 350 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 1, 4), 1);
}

/* A rank that is out of budget holds its gang back even while it is not
 * asking (it has just released): granted alone, the other rank would spin
 * in collectives that wait for it. */
static void test_spent_rank_holds_back_its_gang(void **unused)
{
    (void)unused;
    policy_set_core_limit(&p, 1, 1, 10, 0); /* rank 1's account */
    request_on(0, 0, 0);
    request_on(1, 1, 0);
    tick(20 * MS); /* rank 1 is past its 10 ms for this slice */
    assert_int_equal(count_on(ACTION_DROP, 1, 1), 1);
    release_on(0, 0, 21 * MS);
    release_on(1, 1, 21 * MS);
    assert_true(policy_spent(&p, 1, 1, 22 * MS));
    request_on(0, 0, 22 * MS);
    tick(23 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 0, 0), 0);
    /* Rank 0 is granted once rank 1's budget has accrued again. */
    uint64_t now = 23 * MS;
    while (count_on(ACTION_GRANT, 0, 0) == 0 && now < 1 * SEC)
        tick(now += 1 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 0, 0), 1);
    assert_false(policy_spent(&p, 1, 1, now));
    assert_true(policy_spent(&p, 1, 1, now - 1 * MS));
}

/* A rank that does not fit asks idle clients to swap out, as any waiter
 * would; its gang is granted once they have. */
static void test_rank_without_room_gets_it_made(void **unused)
{
    (void)unused;
    const uint64_t GiB = 1ull << 30;

    policy_set_capacity(&p, 1, 10 * GiB); /* 9 GiB admitted */
    /* Told ahead of their requests (pending). */
    policy_set_footprint(&p, 1, 4, 6 * GiB, 6 * GiB, 6 * GiB);
    policy_set_footprint(&p, 1, 1, 4 * GiB, 4 * GiB, 4 * GiB);
    policy_set_idle_swap_after(&p, 0);
    request_on(1, 4, 0);
    release_on(1, 4, 10 * MS); /* idle, its 6 GiB still on the GPU */
    request_on(1, 1, 20 * MS);
    /* The gang cannot be granted until rank 1 fits: room is made. */
    assert_int_equal(count_on(ACTION_EVICT, 1, 4), 1);
    assert_int_equal(count_on(ACTION_WAIT_FOR_MEM, 1, 1), 1);
    request_on(0, 0, 30 * MS);
    assert_int_equal(out.n, 0);
    policy_actions_clear(&out);
    policy_swapped(&p, 1, 4, SWAP_OUT, 6 * GiB, 50 * MS, 80 * MS, &out);
    assert_int_equal(count_on(ACTION_GRANT, 0, 0), 1);
    assert_int_equal(count_on(ACTION_GRANT, 1, 1), 1);
}

/* A process registers every GPU it sees: its gang needs only those its
 * ranks ask for, learned from their first requests. */
static void test_gang_learns_its_gpus_from_requests(void **unused)
{
    (void)unused;
    policy_start(&p, 2, TQ, DRAIN_TIMEOUT);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
    for (int c = 0; c < 2; c++) { /* both ranks see both GPUs */
        policy_set_gang(&p, c, 0);
        policy_join(&p, 0, c, c, 0);
        policy_join(&p, 1, c, c, 0);
    }
    policy_set_gang(&p, 4, -1);
    policy_join(&p, 1, 4, 4, 0);
    policy_join(&p, 0, 5, 5, 0);
    request_on(1, 4, 0);
    request_on(0, 0, 1 * MS);
    /* Nobody of the gang asked for GPU 1 yet: GPU 0 alone is its need. */
    assert_int_equal(count_on(ACTION_GRANT, 0, 0), 1);
    assert_int_equal(policy_gang(&p, 0), -1);
    request_on(1, 1, 2 * MS);
    assert_int_equal(policy_gang(&p, 1), 0);
    assert_int_equal(state(1, 1), MEMBER_WAITING);
    request_on(0, 5, 3 * MS);
    assert_int_equal(state(0, 5), MEMBER_WAITING); /* the gang holds GPU 0 */
    tick(TQ);
    assert_int_equal(count_on(ACTION_DROP, 1, 4), 1);
    release_on(1, 4, TQ + 1 * MS);
    assert_int_equal(count_on(ACTION_GRANT, 1, 1), 1);
}

/* A process alone on two GPUs is a gang of its own. Leaving while it
 * waits on both, it must not be granted the GPU it has not left yet
 * because its gang no longer spans GPUs. */
static void test_leaving_gang_is_granted_nothing(void **unused)
{
    (void)unused;
    policy_set_gang(&p, 6, 2);
    policy_join(&p, 0, 6, 6, 0);
    policy_join(&p, 1, 6, 6, 0);
    request_on(0, 5, 0); /* a single client holds GPU 0 */
    request_on(0, 6, 1 * MS);
    request_on(1, 6, 2 * MS); /* GPU 1 is free, but GPU 0 is not */
    assert_int_equal(out.n, 0);
    assert_int_equal(policy_gang(&p, 6), 2);
    policy_actions_clear(&out);
    policy_leave(&p, 6, 3 * MS, &out);
    for (int i = 0; i < out.n; i++)
        assert_int_not_equal(out.list[i].client, 6);
}

/* Single-GPU clients that keep GPU 1 busy one after the other: the gang
 * is passed for its first quantum of wait at most, then granted once the
 * runner of that time has had its quantum. */
static void test_aging_bounds_the_wait(void **unused)
{
    (void)unused;
    uint64_t now = 0, granted_at = 0;
    int runner = 4, next = -1;

    join(1, 6, -1);
    request_on(1, 4, now);
    request_on(0, 0, 10 * MS); /* the gang waits from here */
    request_on(1, 1, 10 * MS);
    for (now = 20 * MS; now < 5 * SEC && !granted_at; now += 10 * MS) {
        /* The single clients hand GPU 1 to each other every 50 ms,
         * the other one always asking first. */
        next = runner == 4 ? 6 : 4;
        if (state(1, next) == MEMBER_IDLE)
            request_on(1, next, now);
        if (granted_at == 0 && count_on(ACTION_GRANT, 0, 0))
            granted_at = now;
        if (state(1, runner) == MEMBER_HOLDING &&
            now - p.gpus[1].members[runner].granted_at >= 50 * MS) {
            release_on(1, runner, now);
            if (count_on(ACTION_GRANT, 1, next))
                runner = next;
            if (count_on(ACTION_GRANT, 0, 0))
                granted_at = now;
        }
        tick(now);
        struct policy_actions ticked = out; /* release_on() clears out */
        for (int i = 0; i < ticked.n; i++)
            if (ticked.list[i].kind == ACTION_DROP) {
                release_on(ticked.list[i].gpu, ticked.list[i].client, now);
                if (count_on(ACTION_GRANT, 0, 0))
                    granted_at = now;
                if (count_on(ACTION_GRANT, 1, next))
                    runner = next;
            }
        if (state(0, 0) == MEMBER_HOLDING && !granted_at)
            granted_at = now;
    }
    assert_true(granted_at > 0);
    /* Aged at 10 ms + TQ; the runner then holds its quantum at most. */
    assert_true(granted_at <= 10 * MS + 2 * TQ + 10 * MS);
    assert_int_equal(state(1, 1), MEMBER_HOLDING);
}

/* ---- randomized schedules ------------------------------------------------ */

/* Three GPUs, serial. Gangs: 0 on GPUs 0-1 (clients 0, 1), 1 on GPUs 1-2
 * (2, 3), 2 on all three (4, 5, 6). Single-GPU clients 7, 8, 9 on GPUs 0,
 * 1, 2. Every client registers all three GPUs, as the hook does, and asks
 * for its own; now and then one leaves and comes back. */
#define R_CLIENTS 10
static const int r_gang[R_CLIENTS] = {0, 0, 1, 1, 2, 2, 2, -1, -1, -1};
static const int r_gpu[R_CLIENTS] = {0, 1, 1, 2, 0, 1, 2, 0, 1, 2};

static uint64_t rng = 88172645463325252ull;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The job of client c: its gang, or itself past the gang numbers. */
static int job_of(int c)
{
    return r_gang[c] >= 0 ? r_gang[c] : 100 + c;
}

/* No two jobs each hold part of what the other waits for: a gang that
 * waits holds nothing (it got all or none), and no GPU has holders of two
 * jobs when one of them is a gang (a draining rank may run beside others:
 * one admitted into its gang's drain, which ends it). */
static void check_no_circular_wait(void)
{
    for (int a = 0; a < R_CLIENTS; a++) {
        int ga = r_gpu[a];
        const struct member *ma = &p.gpus[ga].members[a];
        for (int b = 0; b < R_CLIENTS; b++) {
            int gb = r_gpu[b];
            const struct member *mb = &p.gpus[gb].members[b];
            if (job_of(a) == job_of(b)) {
                /* A waiting rank beside a holding one: the gang holds,
                 * so the rank is granted, unless another job still runs
                 * on its GPU (a GPU its first request just added to the
                 * gang: that one rotates out). */
                if (ma->state == MEMBER_WAITING &&
                    mb->state == MEMBER_HOLDING && !p.gpus[ga].n_running)
                    fail_msg("client %d waits while its gang holds", a);
                continue;
            }
            if (ga == gb && ma->state == MEMBER_HOLDING &&
                mb->state == MEMBER_HOLDING && (r_gang[a] >= 0 || r_gang[b] >= 0))
                fail_msg("clients %d and %d share GPU %d beside a gang", a, b,
                         ga);
        }
    }
}

static void test_random_schedules_never_deadlock(void **unused)
{
    (void)unused;
    uint64_t now = 0, next_tick = 0, longest_wait = 0, stopped_at = 0;
    uint64_t release_at[R_CLIENTS] = {0}, waiting_since[R_CLIENTS] = {0};
    long events = 0, grants = 0;

    policy_start(&p, 3, TQ, DRAIN_TIMEOUT);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
    for (int c = 0; c < R_CLIENTS; c++) {
        join(r_gpu[c], c, r_gang[c]);
        for (int gpu = 0; gpu < 3; gpu++)
            if (gpu != r_gpu[c])
                policy_join(&p, gpu, c, c, 0);
    }
    for (bool stopping = false; events < 200000 || !stopping;) {
        if (events >= 200000 && !stopping) {
            stopping = true; /* no new requests: every waiter must get in */
            stopped_at = now;
        }
        now += 1 * MS + next_random() % (4 * MS);
        int c = (int)(next_random() % R_CLIENTS), gpu = r_gpu[c];
        struct member *m = &p.gpus[gpu].members[c];
        policy_actions_clear(&out);
        if (!stopping && next_random() % 200 == 0) {
            /* It leaves (its process exits) and a new one takes its slot:
             * the new one is not granted anything on its way out. */
            policy_leave(&p, c, now, &out);
            for (int i = 0; i < out.n; i++)
                if (out.list[i].client == c)
                    fail_msg("client %d got an action as it left", c);
            policy_set_gang(&p, c, r_gang[c]);
            for (int g = 0; g < 3; g++)
                policy_join(&p, g, c, c, now);
            release_at[c] = 0;
            events++;
        } else if (m->state == MEMBER_IDLE && !stopping &&
                   next_random() % 3 == 0) {
            policy_request(&p, gpu, c, now, &out);
            waiting_since[c] = now;
            events++;
        } else if (pol_running(m) && release_at[c] && now >= release_at[c]) {
            /* Work ran out, or a DROP was answered. */
            policy_release(&p, gpu, c, m->lease, 0, 0, now, &out);
            release_at[c] = 0;
            events++;
        }
        if (now >= next_tick || out.n) {
            struct policy_actions done = out;
            policy_actions_clear(&out);
            next_tick = policy_tick(&p, now, &out);
            if (!next_tick)
                next_tick = now + TQ;
            for (int i = 0; i < done.n && out.n < POLICY_MAX_ACTIONS; i++)
                out.list[out.n++] = done.list[i];
            events++;
        }
        for (int i = 0; i < out.n; i++) {
            const struct policy_action *a = &out.list[i];
            if (a->kind == ACTION_GRANT) {
                grants++;
                if (now - waiting_since[a->client] > longest_wait)
                    longest_wait = now - waiting_since[a->client];
                /* A burst of work, some longer than the quantum. */
                release_at[a->client] = now + 1 * MS + next_random() % (3 * TQ);
            } else if (a->kind == ACTION_DROP) {
                release_at[a->client] = now + next_random() % (30 * MS);
            }
        }
        check_no_circular_wait();
        if (stopping) {
            bool anyone_waits = false;
            for (int k = 0; k < R_CLIENTS; k++)
                anyone_waits |= p.gpus[r_gpu[k]].members[k].state ==
                                MEMBER_WAITING;
            if (!anyone_waits)
                break;
            if (now - stopped_at > 60 * SEC)
                fail_msg("waiters left after the requests stopped");
        }
    }
    printf("random schedules: %ld events, %ld grants, longest wait %.0f ms\n",
           events, grants, (double)longest_wait / MS);
    /* A waiter waits for the six other jobs at most, each a quantum and
     * a drain (30 ms here), after a quantum of aging: 1 s; twice that
     * for the granularity of the clock's steps. */
    assert_true(longest_wait < 2 * (6 * (TQ + 30 * MS) + TQ));
    assert_true(grants > 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_grant_is_all_or_none, setup),
        cmocka_unit_test_setup(test_crossed_requests_cannot_deadlock, setup),
        cmocka_unit_test_setup(test_preemption_drains_every_rank_first, setup),
        cmocka_unit_test_setup(test_auto_quantum_counts_a_rank_s_whole_drain,
                               setup),
        cmocka_unit_test_setup(test_gang_turn_is_its_longest_quantum, setup),
        cmocka_unit_test_setup(test_rank_dropped_alone_drops_the_gang, setup),
        cmocka_unit_test_setup(test_ranks_agree_on_the_furthest_drain_point,
                               setup),
        cmocka_unit_test_setup(test_rank_waiting_during_the_drain_joins_it, setup),
        cmocka_unit_test_setup(test_swapped_out_rank_does_not_join_the_drain,
                               setup),
        cmocka_unit_test_setup(test_rank_that_drained_waits_for_the_next_grant,
                               setup),
        cmocka_unit_test_setup(test_revoked_rank_does_not_block_the_agreement,
                               setup),
        cmocka_unit_test_setup(test_idle_rank_does_not_keep_its_gpu_forever,
                               setup),
        cmocka_unit_test_setup(test_throttled_gang_keeps_no_gpu, setup),
        cmocka_unit_test_setup(test_spent_rank_holds_back_its_gang, setup),
        cmocka_unit_test_setup(test_rank_without_room_gets_it_made, setup),
        cmocka_unit_test(test_gang_learns_its_gpus_from_requests),
        cmocka_unit_test_setup(test_leaving_gang_is_granted_nothing, setup),
        cmocka_unit_test_setup(test_aging_bounds_the_wait, setup),
        cmocka_unit_test(test_random_schedules_never_deadlock),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);

    policy_destroy(&p);
    return failed;
}
