/* test_memory_aware.c - memory-aware scheduling (running sets, modes,
 * admission by footprint, WAIT_FOR_MEM, EVICT/SWAPPED, switch time, load)
 * driven through the pure policy with a synthetic clock.
 *
 * One GPU of 16 GiB; clients 0-7 joined, each billed to its own account;
 * footprints are evictable unless a test says otherwise, and set before a
 * client's request as an allocation that waits for room tells them
 * (pending: not on the GPU before the client's grant). */
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
#define TQ (100 * MS)
#define DRAIN_TIMEOUT (1000 * MS)
#define CAPACITY (16 * GiB)
#define N_CLIENTS 8


static int setup(void **state)
{
    (void)state;
    policy_start(&p, 1, TQ, DRAIN_TIMEOUT);
    policy_set_capacity(&p, 0, CAPACITY);
    /* Idle clients swap as soon as a waiter needs the room, as before
     * idle-swap-after: the tests of idle reclaim set it themselves. */
    policy_set_idle_swap_after(&p, 0);
    for (int c = 0; c < N_CLIENTS; c++)
        policy_join(&p, 0, c, c, 0);
    return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static const char *kind_name(enum action_kind k)
{
    switch (k) {
    case ACTION_GRANT:
        return "GRANT";
    case ACTION_DROP:
        return "DROP";
    case ACTION_REVOKE:
        return "REVOKE";
    case ACTION_WAIT_FOR_MEM:
        return "WAIT_FOR_MEM";
    case ACTION_MEM_AVAILABLE:
        return "MEM_AVAILABLE";
    case ACTION_EVICT:
        return "EVICT";
    case ACTION_PREPARE_SWAP:
        return "PREPARE_SWAP";
    case ACTION_DRAIN_TO:
        return "DRAIN_TO";
    }
    return "?";
}

static void print_actions(const char *why)
{
    fprintf(stderr, "%s: %d action(s):", why, out.n);
    for (int i = 0; i < out.n; i++)
        fprintf(stderr, " %s(%d)", kind_name(out.list[i].kind),
                out.list[i].client);
    fprintf(stderr, "\n");
}

struct exp {
    enum action_kind kind;
    int client;
};

/* Asserts that `out` holds exactly these actions, in this order, leaving
 * PREPARE_SWAP out on both sides: when it comes is what the tests of
 * section 14 check (with find() and prepare_sent), and the random events
 * check that one precedes every EVICT. */
static void expect_actions(const struct exp *e, int n)
{
    static struct exp want[POLICY_MAX_ACTIONS], got[POLICY_MAX_ACTIONS];
    int n_want = 0, n_got = 0;
    bool same;

    for (int i = 0; i < n; i++)
        if (e[i].kind != ACTION_PREPARE_SWAP)
            want[n_want++] = e[i];
    for (int i = 0; i < out.n; i++) {
        assert_int_equal(out.list[i].gpu, 0);
        if (out.list[i].kind != ACTION_PREPARE_SWAP)
            got[n_got++] = (struct exp){out.list[i].kind, out.list[i].client};
    }
    same = n_got == n_want;
    for (int i = 0; same && i < n_want; i++)
        same = got[i].kind == want[i].kind && got[i].client == want[i].client;
    if (!same) {
        fprintf(stderr, "expected:");
        for (int i = 0; i < n_want; i++)
            fprintf(stderr, " %s(%d)", kind_name(want[i].kind), want[i].client);
        fprintf(stderr, "\n");
        print_actions("got");
    }
    assert_true(same);
}

#define EXPECT(...)                                                            \
    expect_actions((const struct exp[]){__VA_ARGS__},                          \
                   (int)(sizeof((const struct exp[]){__VA_ARGS__}) /           \
                         sizeof(struct exp)))

static void expect_none(void)
{
    EXPECT({ACTION_PREPARE_SWAP, -1}); /* only PREPARE_SWAPs, if any */
}

static int find(enum action_kind kind, int client)
{
    for (int i = 0; i < out.n; i++)
        if (out.list[i].kind == kind && out.list[i].client == client)
            return i;
    return -1;
}

static void fp_gib(int c, double gib, bool evictable)
{
    uint64_t bytes = (uint64_t)(gib * (double)GiB);

    policy_set_footprint(&p, 0, c, bytes, evictable ? bytes : 0,
                         evictable ? bytes : 0);
}

/* A partly evictable client: fixed_gib stay on the GPU when it swaps out
 * (device memory, context), evictable_gib leave. */
static void fp_parts(int c, double fixed_gib, double evictable_gib)
{
    policy_set_footprint(&p, 0, c,
                         (uint64_t)((fixed_gib + evictable_gib) * (double)GiB),
                         (uint64_t)(evictable_gib * (double)GiB),
                         (uint64_t)(evictable_gib * (double)GiB));
}

static void swapped_out(int c, uint64_t bytes, uint64_t duration, uint64_t now)
{
    policy_actions_clear(&out);
    policy_swapped(&p, 0, c, SWAP_OUT, bytes, duration, now, &out);
}

static void leave(int c, uint64_t now)
{
    policy_actions_clear(&out);
    policy_leave(&p, c, now, &out);
}

static int n_running(void)
{
    return p.gpus[0].n_running;
}

static uint64_t limit(void)
{
    return policy_memory_limit(&p, 0);
}

static void assert_near(uint64_t actual, uint64_t expected, uint64_t tolerance)
{
    uint64_t d = actual > expected ? actual - expected : expected - actual;

    if (d > tolerance)
        fprintf(stderr, "%llu is not within %llu of %llu\n",
                (unsigned long long)actual, (unsigned long long)tolerance,
                (unsigned long long)expected);
    assert_true(d <= tolerance);
}

/* ---- 1. small clients co-run -------------------------------------------- */

static void test_three_4g_clients_co_run_in_concurrent_mode(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    for (int c = 0; c < 3; c++)
        fp_gib(c, 4, true);
    for (int c = 0; c < 3; c++) {
        request(c, (uint64_t)c * MS);
        EXPECT({ACTION_GRANT, c});
    }
    assert_int_equal(n_running(), 3);
    assert_int_equal(policy_running_footprint(&p, 0), 12 * GiB);
    assert_int_equal(policy_resident(&p, 0), 12 * GiB);
    /* Nobody waits: nobody is ever dropped. The one wake-up to come: a
     * fourth would not fit, so each prepares once it has run for the
     * switch time. */
    assert_int_equal(tick(100 * TQ), POLICY_SWITCH_UNMEASURED_NS);
    expect_none();
}

static void test_three_4g_light_clients_co_run_in_auto_mode(void **state)
{
    (void)state;
    assert_int_equal(p.gpus[0].mode, SCHED_MODE_AUTO);
    for (int c = 0; c < 3; c++) {
        fp_gib(c, 4, true);
        policy_set_load(&p, 0, c, 100 + 100 * (unsigned)c); /* all light */
    }
    for (int c = 0; c < 3; c++) {
        request(c, (uint64_t)c * MS);
        EXPECT({ACTION_GRANT, c});
    }
    assert_int_equal(n_running(), 3);
    assert_int_equal(tick(100 * TQ), POLICY_SWITCH_UNMEASURED_NS);
    expect_none();
    assert_int_equal(n_running(), 3);
}

/* ---- 2. 12 + 12 alternate --------------------------------------------- */

/* Swaps in these tests take less than the drain timeout, past which an
 * unanswered EVICT counts as done (test 11). */
#define SWAP (600 * MS)

/* One memory rotation: runner (granted at granted_at) holds for quantum
 * while waiter waits for memory; it is dropped, releases, is evicted,
 * asks again, and once its swap-out completes the waiter gets the GPU.
 * Returns the time of the waiter's grant. */
static uint64_t rotate(int runner, int waiter, uint64_t granted_at,
                       uint64_t quantum, uint64_t swap_ns)
{
    uint64_t now = granted_at + quantum;

    assert_int_equal(tick(now - 1), now);
    expect_none();
    tick(now);
    EXPECT({ACTION_DROP, runner});
    assert_int_equal(out.list[0].lease, mem(runner)->lease);

    now += 5 * MS;
    release(runner, now);
    EXPECT({ACTION_EVICT, runner});
    assert_true(mem(runner)->evicting);

    now += 1 * MS;
    request(runner, now); /* compute loop: asks again at once */
    assert_int_equal(count(ACTION_GRANT, ANY), 0);

    /* Nothing is granted before the swap-out completes. */
    tick(now + swap_ns / 2);
    if (count(ACTION_GRANT, ANY))
        print_actions("tick during the swap-out");
    assert_int_equal(count(ACTION_GRANT, ANY), 0);
    assert_false(policy_is_running(&p, 0, waiter));
    assert_int_equal(n_running(), 0);

    now += swap_ns;
    bool waiter_prepared = mem(waiter)->prepare_sent;
    swapped_out(runner, mem(runner)->footprint, swap_ns, now);
    /* The new runner is told to prepare once (unless it was when their
     * memory first outgrew the GPU), when the old one waits. */
    if (waiter_prepared)
        EXPECT({ACTION_MEM_AVAILABLE, waiter}, {ACTION_GRANT, waiter},
               {ACTION_WAIT_FOR_MEM, runner});
    else
        EXPECT({ACTION_MEM_AVAILABLE, waiter}, {ACTION_GRANT, waiter},
               {ACTION_WAIT_FOR_MEM, runner}, {ACTION_PREPARE_SWAP, waiter});
    assert_true(policy_is_running(&p, 0, waiter));
    assert_false(policy_is_running(&p, 0, runner));
    assert_int_equal(mem(runner)->state, MEMBER_WAITING);
    assert_int_equal(mem(runner)->wait_reason, WAIT_MEMORY);
    return now;
}

static void start_12_12(uint64_t quantum)
{
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_gib(0, 12, true);
    fp_gib(1, 12, true);

    request(0, 0);
    /* Together they hold more than the GPU admits: both prepare their
     * swap-outs from the start, a whole quantum ahead of the first. */
    EXPECT({ACTION_PREPARE_SWAP, 0}, {ACTION_PREPARE_SWAP, 1}, {ACTION_GRANT, 0});
    assert_int_equal(find(ACTION_PREPARE_SWAP, 0), 0);
    assert_int_equal(find(ACTION_PREPARE_SWAP, 1), 1);
    request(1, 1 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 1});
    const struct policy_action *a = &out.list[0];
    assert_int_equal(a->mem.need, 12 * GiB);
    assert_int_equal(a->mem.limit, limit());
    assert_int_equal(a->mem.free, limit() - 12 * GiB);
    assert_int_equal(a->mem.wait_ns, quantum - 1 * MS);
    assert_int_equal(mem(1)->state, MEMBER_WAITING);
    assert_int_equal(mem(1)->wait_reason, WAIT_MEMORY);
    assert_false(policy_is_running(&p, 0, 1));
}

static void test_memory_limit_is_capacity_less_10_percent(void **state)
{
    (void)state;
    /* 16 GiB - 10 %; within 100 bytes for the rounding of capacity / 100. */
    assert_near(limit(), CAPACITY - CAPACITY / 10, 100);
}

static void test_12g_clients_alternate_with_fixed_switch_time(void **state)
{
    const uint64_t switch_ns = 10 * SEC;
    bool measured = true;

    (void)state;
    policy_set_switch_time(&p, switch_ns, 0);
    start_12_12(switch_ns);
    assert_int_equal(policy_switch_time(&p, 0, &measured), switch_ns);
    assert_false(measured);

    /* Not granted while the first runs (before its switch time). */
    for (uint64_t t = 100 * MS; t < switch_ns; t += 700 * MS) {
        tick(t);
        expect_none();
        assert_false(policy_is_running(&p, 0, 1));
    }

    uint64_t granted_at = 0;
    for (int i = 0; i < 6; i++) {
        int runner = i % 2, waiter = 1 - runner;
        granted_at = rotate(runner, waiter, granted_at, switch_ns, 500 * MS);
        /* The fixed switch time does not move with measured swaps. */
        assert_int_equal(policy_switch_time(&p, 0, &measured), switch_ns);
        assert_false(measured);
    }
    assert_int_equal(mem(0)->grants, 4);
    assert_int_equal(mem(1)->grants, 3);
}

/* 12 + 12 GiB: both are asked to prepare their swap-outs as soon as they
 * hold more than the GPU admits, a whole switch time before the first
 * EVICT, and only once: not again with an EVICT, nor at later rotations. */
static void test_runner_prepares_once_before_its_evict(void **state)
{
    const uint64_t switch_ns = 10 * SEC;
    uint64_t granted_at;

    (void)state;
    policy_set_switch_time(&p, switch_ns, 0);
    start_12_12(switch_ns); /* PREPARE_SWAP(0), PREPARE_SWAP(1) at 0 */

    tick(switch_ns);
    EXPECT({ACTION_DROP, 0});
    release(0, switch_ns + 5 * MS);
    EXPECT({ACTION_EVICT, 0});
    assert_int_equal(count(ACTION_PREPARE_SWAP, ANY), 0); /* not a second time */

    granted_at = switch_ns + 5 * MS;
    swapped_out(0, 12 * GiB, 500 * MS, granted_at);
    /* 1 runs: it prepares once 0 waits again (rotate() checks the order);
     * no rotation prepares anyone again. */
    request(0, granted_at + 1 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 0});
    assert_int_equal(count(ACTION_PREPARE_SWAP, ANY), 0);
    for (int i = 0; i < 4; i++) {
        int runner = (i + 1) % 2, waiter = 1 - runner;
        granted_at = rotate(runner, waiter, granted_at, switch_ns, 500 * MS);
    }
}

/* Clients that fit together, or wait only for the lock, are never asked to
 * prepare a swap-out. */
static void test_no_prepare_while_memory_fits(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_SERIAL);
    fp_gib(0, 6, true);
    fp_gib(1, 6, true);
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    request(1, 1 * MS);
    expect_none();
    assert_int_equal(mem(1)->wait_reason, WAIT_LOCK);
    for (int i = 0; i < 6; i++) {
        int runner = i % 2, waiter = 1 - runner;
        uint64_t t = (uint64_t)(i + 1) * TQ + (uint64_t)i * 2 * MS;
        tick(t);
        EXPECT({ACTION_DROP, runner});
        release(runner, t + 1 * MS);
        EXPECT({ACTION_GRANT, waiter});
        request(runner, t + 2 * MS);
        expect_none();
    }
    assert_false(mem(0)->prepare_sent);
    assert_false(mem(1)->prepare_sent);
}

/* A client that leaves and joins again is a new membership: it is asked
 * again when a waiter needs its room. */
static void test_prepare_is_sent_again_after_rejoin(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_gib(0, 12, true);
    fp_gib(1, 12, true);
    request(0, 0);
    assert_true(find(ACTION_PREPARE_SWAP, 0) >= 0 &&
                find(ACTION_PREPARE_SWAP, 1) >= 0);
    request(1, 1 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 1});
    leave(0, 2 * MS);
    EXPECT({ACTION_MEM_AVAILABLE, 1}, {ACTION_GRANT, 1});

    policy_join(&p, 0, 0, 0, 3 * MS);
    assert_false(mem(0)->prepare_sent);
    fp_gib(0, 12, true);
    request(0, 4 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 0});
    assert_true(find(ACTION_PREPARE_SWAP, 0) >= 0);     /* the new membership */
    assert_int_equal(find(ACTION_PREPARE_SWAP, 1), -1); /* asked already */
    leave(1, 5 * MS);
    EXPECT({ACTION_MEM_AVAILABLE, 0}, {ACTION_GRANT, 0});
    policy_join(&p, 0, 1, 1, 6 * MS);
    fp_gib(1, 12, true);
    request(1, 7 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 1});
    assert_true(find(ACTION_PREPARE_SWAP, 1) >= 0);
    assert_int_equal(find(ACTION_PREPARE_SWAP, 0), -1);
}

static void test_12g_clients_alternate_with_auto_switch_time(void **state)
{
    bool measured = true;

    (void)state;
    assert_int_equal(policy_switch_time(&p, 0, &measured),
                     POLICY_SWITCH_UNMEASURED_NS);
    assert_false(measured);
    start_12_12(POLICY_SWITCH_UNMEASURED_NS);

    /* First rotation: nothing measured yet. */
    uint64_t t = rotate(0, 1, 0, POLICY_SWITCH_UNMEASURED_NS, SWAP);
    /* Only the swap-out is measured: still unmeasured. */
    assert_int_equal(policy_switch_time(&p, 0, &measured),
                     POLICY_SWITCH_UNMEASURED_NS);
    assert_false(measured);

    /* The new runner reports its swap-in: 12 GiB in 0.6 s. */
    policy_actions_clear(&out);
    policy_swapped(&p, 0, 1, SWAP_IN, 12 * GiB, SWAP, t + SWAP, &out);
    expect_none();
    /* Out 12 GiB (the runner) + in 12 GiB (the waiter) = 1.2 s, x20. */
    uint64_t expected = 2 * SWAP * POLICY_SWITCH_MULTIPLIER;
    assert_near(policy_switch_time(&p, 0, &measured), expected, 1000);
    assert_true(measured);

    /* The rotation uses it. */
    uint64_t q = policy_switch_time(&p, 0, &measured);
    assert_int_equal(tick(t + 2 * SWAP), t + q);
    expect_none();
    t = rotate(1, 0, t, q, SWAP);
    policy_actions_clear(&out);
    policy_swapped(&p, 0, 0, SWAP_IN, 12 * GiB, SWAP, t + SWAP, &out);
    q = policy_switch_time(&p, 0, &measured);
    assert_near(q, expected, 1000);
    t = rotate(0, 1, t, q, SWAP);

    /* Another multiplier. */
    policy_set_switch_time(&p, 0, 10);
    assert_near(policy_switch_time(&p, 0, &measured), 2 * SWAP * 10, 1000);
    assert_true(measured);
}

/* A running 12 GiB client and a 12 GiB memory waiter; then swaps of
 * `bytes` in `ns` both ways are reported by a bystander. */
static uint64_t switch_time_after_swaps(uint64_t bytes, uint64_t ns,
                                        bool *measured)
{
    start_12_12(POLICY_SWITCH_UNMEASURED_NS);
    policy_actions_clear(&out);
    policy_swapped(&p, 0, 5, SWAP_OUT, bytes, ns, 2 * MS, &out);
    policy_swapped(&p, 0, 5, SWAP_IN, bytes, ns, 3 * MS, &out);
    expect_none();
    return policy_switch_time(&p, 0, measured);
}

static void test_auto_switch_time_is_clamped_below(void **state)
{
    bool measured = false;

    (void)state;
    /* 64 MiB in 0.1 ms: 24 GiB move in 38.4 ms, x20 = 0.77 s < 5 s. */
    assert_int_equal(switch_time_after_swaps(64ull << 20, 100000, &measured),
                     POLICY_SWITCH_MIN_NS);
    assert_true(measured);
}

static void test_auto_switch_time_is_clamped_above(void **state)
{
    bool measured = false;

    (void)state;
    /* 12 GiB in 60 s: 120 s, x20 = 40 min > 5 min. */
    assert_int_equal(switch_time_after_swaps(12 * GiB, 60 * SEC, &measured),
                     POLICY_SWITCH_MAX_NS);
    assert_true(measured);
}

/* ---- 3. light beside heavy in auto ------------------------------------ */

static void test_light_and_heavy_time_slice_in_auto(void **state)
{
    const int light = 0, heavy = 1;

    (void)state;
    /* 10 % and 80 % of 16 GiB. */
    policy_set_footprint(&p, 0, light, CAPACITY / 10, CAPACITY / 10,
                         CAPACITY / 10);
    policy_set_footprint(&p, 0, heavy, CAPACITY / 10 * 8, CAPACITY / 10 * 8,
                         CAPACITY / 10 * 8);
    policy_set_load(&p, 0, light, 100);
    policy_set_load(&p, 0, heavy, 800);

    request(heavy, 0);
    EXPECT({ACTION_GRANT, heavy});
    request(light, 1 * MS);
    expect_none(); /* no WAIT_FOR_MEM: it waits for the lock */
    assert_int_equal(mem(light)->wait_reason, WAIT_LOCK);

    uint64_t granted_at = 0;
    int runner = heavy, waiter = light;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(tick(granted_at + TQ - 1), granted_at + TQ);
        expect_none();
        assert_int_equal(n_running(), 1);
        tick(granted_at + TQ);
        EXPECT({ACTION_DROP, runner});
        release(runner, granted_at + TQ + 2 * MS);
        EXPECT({ACTION_GRANT, waiter}); /* memory fits: no EVICT */
        granted_at += TQ + 2 * MS;
        request(runner, granted_at + 1 * MS);
        expect_none();
        assert_int_equal(mem(runner)->wait_reason, WAIT_LOCK);
        assert_int_equal(n_running(), 1);
        assert_true(policy_resident(&p, 0) <= limit());
        int t = runner;
        runner = waiter;
        waiter = t;
    }
    assert_int_equal(mem(light)->grants, 4);
    assert_int_equal(mem(heavy)->grants, 5);
}

/* ---- 4. growth while running ---------------------------------------- */

static void growth_drops_newest(int grower)
{
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_gib(0, 4, true);
    fp_gib(1, 4, true);
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    request(1, 1 * MS);
    EXPECT({ACTION_GRANT, 1});

    fp_gib(grower, 12, true); /* 16 GiB > 14.4 */
    tick(10 * MS);
    /* The newest runner, which prepares its swap-out while it drains. */
    EXPECT({ACTION_PREPARE_SWAP, 1}, {ACTION_DROP, 1});
    tick(11 * MS);
    expect_none(); /* one at a time */
    release(1, 12 * MS);
    EXPECT({ACTION_EVICT, 1});
    assert_true(policy_is_running(&p, 0, 0));

    request(1, 13 * MS); /* it wants the GPU again */
    assert_int_equal(count(ACTION_GRANT, ANY), 0);
    swapped_out(1, mem(1)->footprint, 100 * MS, 113 * MS);
    /* Whichever of the two calls told it, it was told once. */
    uint64_t other = grower == 0 ? 12 * GiB : 4 * GiB;
    uint64_t need = grower == 1 ? 12 * GiB : 4 * GiB;
    if (find(ACTION_WAIT_FOR_MEM, 1) < 0) {
        /* Told at the request, while its swap-out was in progress. */
        assert_true(mem(1)->told_wait_mem);
        expect_none();
    } else {
        EXPECT({ACTION_WAIT_FOR_MEM, 1});
        assert_int_equal(out.list[0].mem.need, need);
        assert_int_equal(out.list[0].mem.free, limit() - other);
    }
    assert_int_equal(mem(1)->state, MEMBER_WAITING);
    assert_int_equal(mem(1)->wait_reason, WAIT_MEMORY);
    assert_true(policy_is_running(&p, 0, 0));
    assert_false(policy_is_running(&p, 0, 1));
}

static void test_growth_of_oldest_drops_newest_and_evicts_it(void **state)
{
    (void)state;
    growth_drops_newest(0);
}

static void test_growth_of_newest_drops_it_and_evicts_it(void **state)
{
    (void)state;
    growth_drops_newest(1);
}

/* ---- 5. predecessor exits early ------------------------------------- */

static void test_waiter_is_granted_when_predecessor_exits_early(void **state)
{
    (void)state;
    policy_set_switch_time(&p, 10 * SEC, 0);
    start_12_12(10 * SEC);
    tick(1 * SEC);
    expect_none();
    leave(0, 2 * SEC);
    EXPECT({ACTION_MEM_AVAILABLE, 1}, {ACTION_GRANT, 1});
    assert_int_equal(out.list[0].mem.wait_ns, 2 * SEC - 1 * MS);
    assert_true(policy_is_running(&p, 0, 1));
}

/* ---- 6. aging ------------------------------------------------------- */

static void test_aging_stops_backfill_past_a_big_waiter(void **state)
{
    const uint64_t q = 1 * SEC;     /* the big one's quantum */
    const uint64_t life = 250 * MS; /* how long each small one runs */
    const int big = 0, first_small = 10;
    uint64_t granted_at[TEST_TABLE_SIZE] = {0};
    int n_small = 0, backfilled = 0;
    uint64_t big_since = 10 * MS, big_granted = 0;

    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    policy_set_switch_time(&p, q, 0);
    fp_gib(big, 12, true);

    for (uint64_t t = 0; t <= 3 * SEC && !big_granted; t += 10 * MS) {
        /* Small ones that have run their life exit. */
        for (int c = first_small; c < first_small + n_small; c++) {
            if (policy_is_running(&p, 0, c) && t >= granted_at[c] + life) {
                leave(c, t);
                for (int i = 0; i < out.n; i++)
                    if (out.list[i].kind == ACTION_GRANT)
                        granted_at[out.list[i].client] = t;
            }
        }
        if (t == big_since) {
            request(big, t);
            if (t == 10 * MS)
                EXPECT({ACTION_WAIT_FOR_MEM, big},
                       {ACTION_PREPARE_SWAP, first_small});
        }
        if (t % (100 * MS) == 0) { /* a small one arrives */
            int c = first_small + n_small++;
            policy_join(&p, 0, c, c, t);
            fp_gib(c, 4, true);
            request(c, t);
            for (int i = 0; i < out.n; i++)
                if (out.list[i].kind == ACTION_GRANT)
                    granted_at[out.list[i].client] = t;
        }
        policy_actions_clear(&out);
        policy_tick(&p, t, &out);
        for (int i = 0; i < out.n; i++)
            if (out.list[i].kind == ACTION_GRANT)
                granted_at[out.list[i].client] = t;

        for (int c = first_small; c < first_small + n_small; c++) {
            if (!policy_is_running(&p, 0, c) || granted_at[c] != t)
                continue;
            /* A small one admitted while the big one waits: only before the
             * big one has waited its quantum. */
            if (t > big_since) {
                assert_true(t - big_since < q);
                backfilled++;
            }
        }
        if (policy_is_running(&p, 0, big))
            big_granted = t;
    }
    assert_true(backfilled > 0); /* the backfill did happen */
    assert_true(big_granted > 0);
    assert_true(big_granted - big_since <= 2 * q);
}

/* ---- 7. mode change while running ---------------------------------- */

static void test_mode_change_to_serial_and_back(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    for (int c = 0; c < 3; c++) {
        fp_gib(c, 4, true);
        request(c, (uint64_t)c * MS);
        EXPECT({ACTION_GRANT, c});
    }
    policy_set_mode(&p, 0, SCHED_MODE_SERIAL);
    tick(10 * MS);
    EXPECT({ACTION_DROP, 1}, {ACTION_DROP, 2}); /* all but the oldest at once */
    tick(11 * MS);
    expect_none(); /* while they drain */
    release(2, 12 * MS);
    expect_none();
    tick(13 * MS);
    expect_none();
    release(1, 14 * MS);
    expect_none();
    tick(15 * MS);
    expect_none();
    assert_int_equal(n_running(), 1);
    assert_true(policy_is_running(&p, 0, 0));

    request(1, 16 * MS);
    expect_none();
    request(2, 17 * MS);
    expect_none();
    assert_int_equal(mem(1)->wait_reason, WAIT_LOCK);
    assert_int_equal(mem(2)->wait_reason, WAIT_LOCK);

    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    tick(18 * MS);
    EXPECT({ACTION_GRANT, 1}, {ACTION_GRANT, 2});
    assert_int_equal(n_running(), 3);
}

/* ---- 8. unknown loads in auto --------------------------------------- */

static void test_auto_unknown_loads_then_light_then_heavy(void **state)
{
    (void)state;
    fp_gib(0, 2, true);
    fp_gib(1, 2, true);
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    request(1, 1 * MS);
    EXPECT({ACTION_GRANT, 1}); /* not measured yet: a trial beside it */
    assert_int_equal(n_running(), 2);

    policy_set_load(&p, 0, 0, 200); /* the first is light */
    tick(20 * MS);
    expect_none();
    assert_int_equal(n_running(), 2);

    policy_set_load(&p, 0, 1, 900); /* the newcomer is heavy */
    tick(30 * MS);
    EXPECT({ACTION_DROP, 1});
}

static void test_auto_known_heavy_runs_alone(void **state)
{
    (void)state;
    fp_gib(0, 2, true);
    fp_gib(1, 2, true);
    fp_gib(2, 2, true);
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    policy_set_load(&p, 0, 0, 900);
    request(1, 1 * MS);
    expect_none(); /* a newcomer does not join a known heavy runner */
    assert_int_equal(mem(1)->wait_reason, WAIT_LOCK);
    policy_set_load(&p, 0, 0, 200); /* it turned light: they may share */
    request(2, 2 * MS);
    EXPECT({ACTION_GRANT, 1}, {ACTION_GRANT, 2});
}

/* ---- 9. non-evictable memory ---------------------------------------- */

static void test_non_evictable_memory_counts_and_never_blocks_itself(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_gib(0, 8, false); /* never asks for the GPU */
    assert_int_equal(policy_resident(&p, 0), 8 * GiB);
    assert_int_equal(policy_running_footprint(&p, 0), 0);

    fp_gib(1, 10, false);
    assert_int_equal(policy_resident(&p, 0), 18 * GiB);
    request(1, 0); /* 18 GiB > 14.4, but it is already there */
    EXPECT({ACTION_GRANT, 1});
    release(1, 10 * MS);
    expect_none();
    assert_int_equal(policy_resident(&p, 0), 18 * GiB);
}

static void test_evictable_waiter_blocked_by_non_evictable_memory(void **state)
{
    int evicts = 0;

    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_gib(0, 8, false); /* idle, not evictable */
    fp_gib(3, 2, true);  /* runs once, then idle but resident */
    request(3, 0);
    EXPECT({ACTION_GRANT, 3});
    release(3, 1 * MS);
    expect_none();
    assert_int_equal(policy_resident(&p, 0), 10 * GiB);

    /* 8 non-evictable + 8 > 14.4 whatever is evicted. */
    fp_gib(2, 8, true);
    request(2, 2 * MS);
    evicts += count(ACTION_EVICT, ANY);
    assert_int_equal(count(ACTION_GRANT, ANY), 0);
    assert_true(find(ACTION_WAIT_FOR_MEM, 2) >= 0);
    for (uint64_t t = 100 * MS; t < 5 * SEC; t += 100 * MS) {
        tick(t);
        evicts += count(ACTION_EVICT, ANY);
        assert_int_equal(count(ACTION_GRANT, ANY), 0);
    }
    assert_int_equal(mem(2)->state, MEMBER_WAITING);

    /* The non-evictable client exits: the waiter fits. */
    leave(0, 5 * SEC);
    evicts += count(ACTION_EVICT, ANY);
    assert_true(find(ACTION_GRANT, 2) >= 0);
    assert_true(find(ACTION_MEM_AVAILABLE, 2) == find(ACTION_GRANT, 2) - 1);

    /* Evicting the 2 GiB client could never have made 8 GiB fit beside
     * 8 GiB that cannot move, nor was it needed once that left. */
    if (evicts)
        fprintf(stderr, "%d EVICT(s) sent in vain\n", evicts);
    assert_int_equal(evicts, 0);
}

/* An oversubscribed (evictable) client bigger than the limit alone: it
 * must still get the GPU when nothing else occupies it. */
static void test_evictable_client_bigger_than_limit_runs_alone(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_gib(0, 15, true); /* > 14.4 GiB, < 16 GiB */
    request(0, 0);
    if (find(ACTION_GRANT, 0) < 0)
        print_actions("bigger-than-limit client on an empty GPU");
    EXPECT({ACTION_GRANT, 0});
}

/* ---- 9b. partly evictable clients ------------------------------------- */

/* Swapping out moves only the evictable part: the waiter is admitted
 * beside the fixed part that stays, and what is then resident is both. */
static void test_partly_evictable_client_leaves_its_fixed_part(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_parts(0, 2, 6);
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    release(0, 1 * MS);
    assert_int_equal(policy_resident(&p, 0), 8 * GiB);

    fp_parts(1, 0.5, 7.5); /* 8 + 8 > 14.4: 0 must leave */
    request(1, 2 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 1}, {ACTION_PREPARE_SWAP, 0}, {ACTION_EVICT, 0});
    swapped_out(0, 6 * GiB, 100 * MS, 102 * MS);
    EXPECT({ACTION_MEM_AVAILABLE, 1}, {ACTION_GRANT, 1});
    assert_int_equal(policy_resident(&p, 0), 2 * GiB + 8 * GiB);
    assert_true(policy_resident(&p, 0) <= limit());
}

/* The failure of issue 10: a job whose memory is mostly device memory
 * (allocated before it knew the node's oversubscription default) swaps out
 * a little managed memory. Evicting it cannot make room for another big
 * job, so the other job is neither admitted nor the first asked to leave. */
static void test_fixed_part_is_never_overcommitted(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_parts(0, 8, 0.5);
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    release(0, 1 * MS);

    fp_parts(1, 0.5, 8); /* 8 fixed + 8.5 > 14.4 whatever moves */
    request(1, 2 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 1});
    for (uint64_t t = 100 * MS; t < 5 * SEC; t += 100 * MS) {
        tick(t);
        assert_int_equal(count(ACTION_GRANT, ANY), 0);
        assert_int_equal(count(ACTION_EVICT, ANY), 0);
    }
    assert_int_equal(mem(1)->state, MEMBER_WAITING);

    /* Once the first job frees its device memory, the second fits beside
     * what is left of it. */
    fp_parts(0, 0.5, 0.5);
    tick(5 * SEC);
    EXPECT({ACTION_MEM_AVAILABLE, 1}, {ACTION_GRANT, 1});
    assert_int_equal(policy_resident(&p, 0), 9 * GiB + GiB / 2);
}

/* A partly evictable client bigger than the limit runs once everything
 * that can move has left, beside the fixed parts of the others. */
static void test_partly_evictable_client_bigger_than_limit(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_parts(0, 0.5, 3);
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    release(0, 1 * MS);

    fp_parts(1, 0.5, 14.5); /* 15 > 14.4 */
    request(1, 2 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 1}, {ACTION_PREPARE_SWAP, 0}, {ACTION_EVICT, 0});
    swapped_out(0, 3 * GiB, 10 * MS, 12 * MS);
    EXPECT({ACTION_MEM_AVAILABLE, 1}, {ACTION_GRANT, 1});
    assert_int_equal(policy_resident(&p, 0), 15 * GiB + GiB / 2);
}

/* A waiter that memory which cannot move keeps out waits without holding
 * anyone back: the holder of that memory is neither rotated out for it nor
 * queued behind it, and the waiter runs once that memory is gone. */
static void test_waiter_kept_out_by_fixed_memory_holds_nobody_back(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_parts(0, 8, 0);
    fp_parts(1, 0.5, 7.5); /* 8 + 8 > 14.4 */
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    request(1, 1 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 1});
    for (uint64_t t = SEC; t <= 120 * SEC; t += SEC) {
        tick(t);
        expect_none();
    }
    release(0, 121 * SEC);
    expect_none();
    request(0, 122 * SEC);
    EXPECT({ACTION_GRANT, 0});
    leave(0, 123 * SEC);
    EXPECT({ACTION_MEM_AVAILABLE, 1}, {ACTION_GRANT, 1});
}

/* ---- 9c. credit ---------------------------------------------------- */

/* A client of ctx_gib context overhead that allocated evictable_gib (its
 * swappable memory) and holds credit_gib of credit: bytes granted that it
 * has not allocated (quota.h), counted in its footprint. */
static void fp_credit(int c, double ctx_gib, double evictable_gib,
                      double credit_gib)
{
    policy_set_footprint(&p, 0, c,
                         (uint64_t)((ctx_gib + evictable_gib + credit_gib) *
                                    (double)GiB),
                         (uint64_t)(evictable_gib * (double)GiB),
                         (uint64_t)(evictable_gib * (double)GiB));
    policy_set_credit(&p, 0, c, (uint64_t)(credit_gib * (double)GiB));
}

/* Two compute loops that fit one at a time rotate for memory, each with a
 * context of 0.5 GiB and 13 GiB evictable. Their credit grows from 64 MiB
 * (an allocation's slack) to 256 MiB (a client's cap) as they allocate and
 * free: swapped out, a client leaves its context on the GPU, not
 * its credit, which is no memory yet. Counted as resident, the runner's
 * credit kept the waiter out for good (0.75 + 13.75 > 14.4): the waiter
 * held nobody back, the runner was never asked to leave, and once it went
 * idle the GPU idled with the waiter waiting. Beside the runner's context
 * alone the waiter fits (0.5 + 13.75 <= 14.4), so they keep rotating, and
 * a runner that goes idle is swapped out for the waiter. */
static void test_credit_of_swapped_out_client_keeps_nobody_out(void **state)
{
    const uint64_t switch_ns = 10 * SEC;
    uint64_t granted_at = 0;

    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    policy_set_switch_time(&p, switch_ns, 0);
    fp_credit(0, 0.5, 13, 1.0 / 16);
    fp_credit(1, 0.5, 13, 1.0 / 16);
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    request(1, 1 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 1});

    for (int i = 0; i < 6; i++) {
        int runner = i % 2, waiter = 1 - runner;
        /* The runner's credit grows during its turn. */
        fp_credit(runner, 0.5, 13, 0.25);
        if (!pol_room_possible(&p, &p.gpus[0], 0, waiter))
            fprintf(stderr,
                    "rotation %d: client %d can never fit beside what %d "
                    "leaves on the GPU (%llu of %llu bytes resident)\n",
                    i, waiter, runner, (unsigned long long)policy_resident(&p, 0),
                    (unsigned long long)limit());
        granted_at = rotate(runner, waiter, granted_at, switch_ns, SWAP);
        assert_true(policy_resident(&p, 0) <= limit());
    }
    assert_int_equal(mem(0)->grants, 4);
    assert_int_equal(mem(1)->grants, 3);
    /* Of the client swapped out, its context stays; its credit and its
     * evictable memory do not count. */
    assert_int_equal(policy_resident(&p, 0), GiB / 2 + mem(0)->footprint);

    /* The runner (0) gives the GPU back unasked and stays idle: it is
     * swapped out for the waiter at once (idle-swap-after is 0 here). */
    release(0, granted_at + 1 * SEC);
    EXPECT({ACTION_EVICT, 0});
    swapped_out(0, 13 * GiB, SWAP, granted_at + 2 * SEC);
    EXPECT({ACTION_MEM_AVAILABLE, 1}, {ACTION_GRANT, 1});
    assert_true(policy_resident(&p, 0) <= limit());
}

/* Whether room can be made for a waiter counts all of its footprint,
 * whether its memory is still on the GPU or not: 6 GiB that cannot move
 * beside a 10 GiB waiter leave no room in the 14.4 GiB admitted, and 4
 * GiB do. Counted as resident, the waiter's own memory was left out of
 * the sum, and others were swapped out for a room it could never have. */
static void test_room_counts_a_resident_waiter_whole(void **state)
{
    const struct gpu_sched *g = &p.gpus[0];

    (void)state;
    fp_gib(0, 10, true);
    for (int resident = 0; resident < 2; resident++) {
        mem(0)->resident = resident;
        fp_gib(1, 6, false);
        assert_false(pol_room_possible(&p, g, 0, 0));
        fp_gib(1, 4, false);
        assert_true(pol_room_possible(&p, g, 0, 0));
    }
}

/* Who goes: the credit of a client swapped out leaves the count with its
 * evictable memory, so no second client is swapped out for room that the
 * first one's credit makes. */
static void test_credit_leaves_with_the_evicted_client(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_credit(0, 0.5, 1, 0.25); /* 1.75, of which 1.25 leaves */
    fp_credit(1, 0.5, 4, 0);    /* 4.5 */
    for (int c = 0; c < 2; c++) {
        request(c, (uint64_t)c * MS);
        EXPECT({ACTION_GRANT, c});
    }
    release(0, 10 * MS); /* idle the longest: goes first */
    release(1, 11 * MS);
    assert_int_equal(policy_resident(&p, 0), 6 * GiB + GiB / 4);

    /* 6.25 + 9.25 is 1.1 over the limit: 0's evictable 1 GiB is not
     * enough, with its credit it is. */
    fp_credit(2, 0.5, 8.75, 0);
    request(2, 20 * MS);
    EXPECT({ACTION_WAIT_FOR_MEM, 2}, {ACTION_EVICT, 0});
    swapped_out(0, GiB, 10 * MS, 30 * MS);
    EXPECT({ACTION_MEM_AVAILABLE, 2}, {ACTION_GRANT, 2});
    assert_true(mem(1)->resident);
    assert_true(policy_resident(&p, 0) <= limit());
}

/* ---- 10. compute limits in concurrent mode -------------------------- */

static void test_core_limit_in_concurrent_mode_bills_half(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    policy_set_core_limit(&p, 0, 0, 25, 0);
    fp_gib(0, 2, true);
    fp_gib(1, 2, true);
    request(0, 0);
    EXPECT({ACTION_GRANT, 0});
    request(1, 0);
    EXPECT({ACTION_GRANT, 1});

    assert_int_equal(policy_budget_ns(&p, 0, 0), 250 * MS);
    assert_int_equal(policy_used_ns(&p, 0, 0, 100 * MS), 50 * MS);
    assert_int_equal(policy_used_ns(&p, 0, 0, 200 * MS), 100 * MS);
    assert_int_equal(policy_used_ns(&p, 0, 1, 200 * MS), 100 * MS);

    /* The budget accrues by a slice's share at a time; at half rate the
     * first share lasts twice as long in wall time. */
    const uint64_t share = 250 * MS / POLICY_PACE_SLICES;
    assert_int_equal(tick(10 * MS), 2 * share);
    expect_none();
    tick(2 * share - 1);
    expect_none();
    tick(2 * share);
    EXPECT({ACTION_DROP, 0});
    assert_int_equal(policy_used_ns(&p, 0, 0, 2 * share), share);
    assert_true(policy_spent(&p, 0, 0, 2 * share));
    assert_false(p.gpus[0].usage[0].throttled); /* only until the slice ends */
    assert_true(policy_is_running(&p, 0, 1));
}

/* ---- 11. unanswered EVICT ------------------------------------------- */

static void test_unanswered_evict_counts_as_swapped_after_timeout(void **state)
{
    const uint64_t q = 10 * SEC;

    (void)state;
    policy_set_switch_time(&p, q, 0);
    start_12_12(q);
    tick(q);
    EXPECT({ACTION_DROP, 0});
    release(0, q + 5 * MS);
    EXPECT({ACTION_EVICT, 0});
    uint64_t sent = q + 5 * MS;

    assert_int_equal(tick(sent + 1 * MS), sent + DRAIN_TIMEOUT);
    expect_none();
    tick(sent + DRAIN_TIMEOUT - 1);
    expect_none();
    tick(sent + DRAIN_TIMEOUT);
    EXPECT({ACTION_MEM_AVAILABLE, 1}, {ACTION_GRANT, 1});
    assert_false(mem(0)->evicting);
    assert_false(mem(0)->resident);
    assert_int_equal(policy_resident(&p, 0), 12 * GiB);

    /* A late SWAPPED changes nothing. */
    swapped_out(0, 12 * GiB, 2 * SEC, sent + DRAIN_TIMEOUT + 1 * MS);
    expect_none();
    assert_true(policy_is_running(&p, 0, 1));
}

/* ---- extra: a revoked overgrown runner ------------------------------ */

/* A runner dropped because the others outgrew the GPU, then revoked (it did
 * not answer the DROP), must not be evicted at a later, ordinary release. */
static void test_revoked_overgrown_runner_not_evicted_later(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_gib(0, 4, true);
    fp_gib(1, 4, true);
    request(0, 0);
    request(1, 1 * MS);
    assert_int_equal(n_running(), 2);
    fp_gib(0, 12, true);
    tick(10 * MS);
    EXPECT({ACTION_PREPARE_SWAP, 1}, {ACTION_DROP, 1});
    tick(10 * MS + DRAIN_TIMEOUT);
    assert_true(find(ACTION_REVOKE, 1) >= 0);
    if (find(ACTION_EVICT, 1) >= 0) /* evicted on revocation: it answers */
        swapped_out(1, 4 * GiB, 100 * MS, 100 * MS + DRAIN_TIMEOUT);

    /* The big one is done; the revoked one runs again, alone, and
     * releases with nobody waiting. */
    leave(0, 2 * SEC);
    request(1, 2 * SEC + 1 * MS);
    assert_true(find(ACTION_GRANT, 1) >= 0);
    release(1, 3 * SEC);
    if (out.n)
        print_actions("ordinary release, nobody waiting");
    expect_none();
}

/* ---- extra: admission of a client whose memory is still resident ------ */

/* A client whose memory is still on the GPU from its last hold is admitted
 * only if the memory then in use fits: here a non-evictable client arrived
 * meanwhile, and 6 (runner) + 6 (not evictable) + 4 (it) = 16 > 14.4. */
static void test_idle_resident_client_is_not_admitted_past_the_limit(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    fp_gib(3, 4, true);
    request(3, 0);
    EXPECT({ACTION_GRANT, 3});
    release(3, 10 * MS);
    expect_none();
    fp_gib(0, 6, true);
    request(0, 20 * MS);
    EXPECT({ACTION_GRANT, 0});
    fp_gib(5, 6, false); /* arrives, idle */
    assert_int_equal(policy_resident(&p, 0), 16 * GiB);

    request(3, 30 * MS);
    if (find(ACTION_GRANT, 3) >= 0)
        print_actions("resident client admitted past the limit");
    assert_int_equal(find(ACTION_GRANT, 3), -1);
    assert_true(find(ACTION_WAIT_FOR_MEM, 3) >= 0);
    assert_true(policy_running_footprint(&p, 0) + 6 * GiB <= limit());
}

/* ---- extra: growth and revocations ---------------------------------- */

/* Three 4 GiB runners; the oldest grows to 8 GiB (16 > 14.4). Dropping and
 * evicting the newest is enough (8 + 4 = 12): while its swap-out is in
 * progress, nobody else is dropped. */
static void test_growth_drops_one_runner_while_it_swaps_out(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    for (int c = 0; c < 3; c++) {
        fp_gib(c, 4, true);
        request(c, (uint64_t)c * MS);
        EXPECT({ACTION_GRANT, c});
    }
    fp_gib(0, 8, true);
    tick(10 * MS);
    EXPECT({ACTION_PREPARE_SWAP, 2}, {ACTION_DROP, 2});
    release(2, 20 * MS);
    EXPECT({ACTION_EVICT, 2});
    tick(30 * MS); /* its 4 GiB are on their way out */
    expect_none();
    swapped_out(2, 4 * GiB, 300 * MS, 330 * MS);
    expect_none();
    tick(340 * MS);
    expect_none();
    assert_true(policy_is_running(&p, 0, 0));
    assert_true(policy_is_running(&p, 0, 1));
}

/* The same, but the dropped runner does not answer the DROP: once it is
 * revoked its memory is still what has to go (it is evicted), and the
 * other runner is not dropped in its place. */
static void test_revoked_overgrown_runner_is_evicted_not_replaced(void **state)
{
    int evicted = 0;

    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_CONCURRENT);
    for (int c = 0; c < 3; c++) {
        fp_gib(c, 4, true);
        request(c, (uint64_t)c * MS);
    }
    fp_gib(0, 8, true);
    tick(10 * MS);
    EXPECT({ACTION_PREPARE_SWAP, 2}, {ACTION_DROP, 2});
    tick(10 * MS + DRAIN_TIMEOUT);
    assert_true(find(ACTION_REVOKE, 2) >= 0);
    evicted += find(ACTION_EVICT, 2) >= 0;
    if (find(ACTION_DROP, 1) >= 0)
        print_actions("the revocation");
    assert_int_equal(find(ACTION_DROP, 1), -1);
    for (uint64_t t = 20 * MS + DRAIN_TIMEOUT; t < 2 * DRAIN_TIMEOUT;
         t += 100 * MS) {
        tick(t);
        evicted += find(ACTION_EVICT, 2) >= 0;
        if (find(ACTION_DROP, 1) >= 0)
            print_actions("after the revocation");
        assert_int_equal(find(ACTION_DROP, 1), -1);
    }
    assert_int_equal(evicted, 1);
}

/* auto: a heavy runner among light ones is dropped; while it drains
 * another turns heavy. When the first is revoked, the second is dropped by
 * that tick, or the tick asks to be called again at once (it must not wait
 * for some unrelated event). */
static void test_revoke_then_heavy_pair_is_resolved(void **state)
{
    (void)state;
    for (int c = 0; c < 3; c++) {
        fp_gib(c, 2, true);
        policy_set_load(&p, 0, c, 100);
        request(c, (uint64_t)c * MS);
        EXPECT({ACTION_GRANT, c});
    }
    policy_set_load(&p, 0, 2, 900);
    tick(10 * MS);
    EXPECT({ACTION_DROP, 2});
    policy_set_load(&p, 0, 1, 900);
    tick(20 * MS);
    EXPECT({ACTION_DROP, 1}); /* heavy beside heavy: not after 2's drain */

    uint64_t t = 10 * MS + DRAIN_TIMEOUT;
    tick(t);
    EXPECT({ACTION_REVOKE, 2});
    tick(20 * MS + DRAIN_TIMEOUT);
    EXPECT({ACTION_REVOKE, 1});
    assert_int_equal(n_running(), 1);
    assert_true(policy_is_running(&p, 0, 0));
}

/* ---- 13. random events --------------------------------------------- */

struct rnd {
    unsigned evictable_percent[N_CLIENTS]; /* of each footprint */
    int serial_cap; /* runners allowed while serial: only ever shrinks */
    int prepares[N_CLIENTS];      /* PREPARE_SWAPs during its membership */
    uint64_t prepared[N_CLIENTS]; /* its evictable bytes at the latest */
};

static char last_event[128];

static void dump_members(const char *why)
{
    fprintf(stderr, "last event: %s\n", last_event);
    const struct gpu_sched *g = &p.gpus[0];

    fprintf(stderr, "%s: mode %d, limit %llu, resident %llu, n_running %d\n",
            why, g->mode, (unsigned long long)limit(),
            (unsigned long long)policy_resident(&p, 0), g->n_running);
    for (int c = 0; c < N_CLIENTS; c++) {
        const struct member *m = &g->members[c];
        fprintf(stderr,
                "  %d: present %d state %d reason %d fp %llu evictable %llu "
                "resident %d evicting %d evict_after_release %d load %d/%d\n",
                c, m->present, m->state, m->wait_reason,
                (unsigned long long)m->footprint,
                (unsigned long long)m->evictable, m->resident, m->evicting,
                m->evict_after_release, m->load_known, m->load_permille);
    }
}

static bool heavy(const struct member *m)
{
    return m->load_known && m->load_permille >= p.light_permille;
}

static void check_memory_invariants(struct rnd *r, bool after_tick, uint64_t now)
{
    const struct gpu_sched *g = &p.gpus[0];
    const uint64_t lim = limit();
    int running = 0, holding = 0, waiting = 0;
    uint64_t committed = 0, nonevict = 0;
    bool any_evicting = false, heavy_holding = false, evictable_holding = false;

    (void)now;
    for (int c = 0; c < N_CLIENTS; c++) {
        const struct member *m = &g->members[c];
        if (!m->present)
            continue;
        bool run = policy_is_running(&p, 0, c);
        running += run;
        holding += m->state == MEMBER_HOLDING;
        waiting += m->state == MEMBER_WAITING;
        committed += run ? m->footprint : m->footprint - m->evictable;
        nonevict += m->footprint - m->evictable;
        if (m->evicting) {
            any_evicting = true;
            assert_false(run); /* nobody runs while evicting */
            assert_true(m->evictable);
        }
        if (m->state == MEMBER_HOLDING && heavy(m))
            heavy_holding = true;
        if (m->state == MEMBER_HOLDING && m->evictable)
            evictable_holding = true;
    }
    assert_int_equal(running, g->n_running);
    assert_int_equal(waiting, g->n_waiting);
    for (int i = 0; i < g->n_waiting; i++)
        assert_int_equal(g->members[g->queue[i]].state, MEMBER_WAITING);
    assert_true(policy_resident(&p, 0) >= policy_running_footprint(&p, 0));

    int grants = 0;
    for (int i = 0; i < out.n; i++) {
        const struct policy_action *a = &out.list[i];
        const struct member *m = &g->members[a->client];
        assert_int_equal(a->gpu, 0);
        switch (a->kind) {
        case ACTION_GRANT:
            grants++;
            /* Names a client now running with that lease. */
            assert_true(policy_is_running(&p, 0, a->client));
            assert_int_equal(m->lease, a->lease);
            assert_false(m->evicting);
            /* Memory: evictable grantees fit, unless alone too big. */
            if (m->evictable && m->footprint <= lim && committed > lim) {
                fprintf(stderr, "GRANT(%d) of %llu: committed %llu > %llu\n",
                        a->client, (unsigned long long)m->footprint,
                        (unsigned long long)committed, (unsigned long long)lim);
                print_actions("this call");
                dump_members("after");
                fail();
            }
            if (g->mode == SCHED_MODE_AUTO) {
                /* Nobody running beside it (not granted later in this
                 * call) is known to be heavy, and neither is it. */
                bool others = false, none_heavy = true;
                for (int c = 0; c < N_CLIENTS; c++) {
                    if (c == a->client || !policy_is_running(&p, 0, c))
                        continue;
                    bool later = false;
                    for (int j = i + 1; j < out.n; j++)
                        later |= out.list[j].kind == ACTION_GRANT &&
                                 out.list[j].client == c;
                    if (later)
                        continue;
                    others = true;
                    none_heavy &= !heavy(&g->members[c]);
                }
                if (others) {
                    assert_false(heavy(m));
                    assert_true(none_heavy);
                }
            }
            break;
        case ACTION_MEM_AVAILABLE:
            assert_true(i + 1 < out.n);
            assert_int_equal(out.list[i + 1].kind, ACTION_GRANT);
            assert_int_equal(out.list[i + 1].client, a->client);
            break;
        case ACTION_WAIT_FOR_MEM:
            /* Still waiting, or admitted later in the same call (a tick
             * that revoked someone or timed an EVICT out). */
            if (m->state != MEMBER_WAITING) {
                bool later = false;
                for (int j = i + 1; j < out.n; j++)
                    later |= out.list[j].kind == ACTION_MEM_AVAILABLE &&
                             out.list[j].client == a->client;
                if (!later) {
                    print_actions("WAIT_FOR_MEM to a client not waiting");
                    dump_members("after");
                }
                assert_true(later);
            }
            assert_true(m->evictable);
            assert_int_equal(a->mem.limit, lim);
            assert_int_equal(a->mem.need, m->footprint);
            break;
        case ACTION_EVICT:
            assert_false(policy_is_running(&p, 0, a->client));
            assert_true(m->evictable);
            if (r->prepares[a->client] < 1) {
                print_actions("EVICT without a PREPARE_SWAP before it");
                dump_members("after");
            }
            assert_true(r->prepares[a->client] >= 1);
            break;
        case ACTION_PREPARE_SWAP:
            /* Again only for memory allocated since (an idle client's). */
            assert_true(m->evictable);
            assert_true(r->prepares[a->client]++ == 0 ||
                        m->evictable > r->prepared[a->client]);
            r->prepared[a->client] = m->evictable;
            break;
        case ACTION_DROP:
            assert_int_equal(m->lease, a->lease);
            break;
        case ACTION_REVOKE:
            assert_false(policy_is_running(&p, 0, a->client));
            break;
        case ACTION_DRAIN_TO:
            fail_msg("DRAIN_TO without gangs (client %d)", a->client);
            break;
        }
    }

    if (g->mode == SCHED_MODE_SERIAL) {
        assert_true(running <= r->serial_cap);
        r->serial_cap = running > 1 ? running : 1;
        if (grants) {
            assert_int_equal(grants, 1);
            assert_int_equal(running, 1);
        }
    }

    /* A tick that revoked someone settles the running set at the next
     * tick (see test_revoke_then_heavy_pair_is_resolved): not checked. */
    if (after_tick && !count(ACTION_REVOKE, ANY)) {
        bool settled = holding >= 2 && g->n_running == holding;
        /* Ticks resolve running sets that the mode, loads or memory no
         * longer allow, one DROP at a time. */
        if (settled && g->mode == SCHED_MODE_SERIAL)
            fail_msg("serial: %d holding after a tick", holding);
        if (settled && g->mode == SCHED_MODE_AUTO && heavy_holding) {
            print_actions("this tick");
            dump_members("after tick");
            fail_msg("auto: heavy among %d holding after a tick", holding);
        }
        /* Runners (with the memory that cannot move) that outgrew the
         * limit: the newest evictable one leaves. */
        if (settled && evictable_holding && committed > lim) {
            dump_members("after tick");
            fail_msg("runners' %llu > limit after a tick, %d holding",
                     (unsigned long long)committed, holding);
        }
        /* The GPU does not sit idle while the first waiter could run. */
        if (running == 0 && waiting > 0 && !any_evicting) {
            const struct member *head = &g->members[g->queue[0]];
            if (!(head->evictable && nonevict + head->evictable > lim))
                fail_msg("idle GPU, %d waiting, head %d fits", waiting,
                         g->queue[0]);
        }
    }
}

static void random_fp(unsigned *seed, struct rnd *r, int c)
{
    uint64_t bytes = GiB + (uint64_t)rand_r(seed) % (11 * GiB + 1);

    uint64_t evictable = bytes / 100 * r->evictable_percent[c];

    policy_set_footprint(&p, 0, c, bytes, evictable, evictable);
}

/* A quarter of the clients are not evictable, a quarter partly, the rest
 * wholly. */
static unsigned random_evictable_percent(unsigned *seed)
{
    switch (rand_r(seed) % 4) {
    case 0:
        return 0;
    case 1:
        return 30 + (unsigned)rand_r(seed) % 61;
    default:
        return 100;
    }
}

static void run_random(unsigned seed, int steps)
{
    struct rnd r;
    uint64_t now = 0;

    memset(&r, 0, sizeof(r));
    r.serial_cap = 1;
    for (int c = 0; c < N_CLIENTS; c++) {
        r.evictable_percent[c] = random_evictable_percent(&seed);
        random_fp(&seed, &r, c);
    }
    for (int step = 0; step < steps; step++) {
        int c = rand_r(&seed) % N_CLIENTS, ev = rand_r(&seed) % 11;
        bool ticked = false;

        now += (uint64_t)(rand_r(&seed) % 50) * MS;
        snprintf(last_event, sizeof(last_event),
                 "step %d: event %d, client %d, now %llu", step, ev, c,
                 (unsigned long long)now);
        policy_actions_clear(&out);
        switch (ev) {
        case 0:
        case 1:
            policy_request(&p, 0, c, now, &out);
            break;
        case 2: { /* a runner releases, sometimes with a stale lease */
            for (int k = 0; k < N_CLIENTS; k++) {
                int x = (c + k) % N_CLIENTS;
                if (policy_is_running(&p, 0, x)) {
                    policy_release(&p, 0, x,
                                   mem(x)->lease - (uint32_t)(rand_r(&seed) % 2),
                                   (uint64_t)(rand_r(&seed) % 5) * MS, 0, now,
                                   &out);
                    break;
                }
            }
            break;
        }
        case 3:
        case 4: {
            uint64_t next = policy_tick(&p, now, &out);
            assert_true(next == 0 || next >= now);
            ticked = true;
            break;
        }
        case 5:
            if (rand_r(&seed) % 10 == 0) {
                policy_leave(&p, c, now, &out);
                check_memory_invariants(&r, false, now);
                policy_actions_clear(&out);
                policy_join(&p, 0, c, c, now);
                r.prepares[c] = 0;
                r.prepared[c] = 0;
                r.evictable_percent[c] = random_evictable_percent(&seed);
                random_fp(&seed, &r, c);
            }
            break;
        case 6:
            policy_set_load(&p, 0, c, (unsigned)(rand_r(&seed) % 1001));
            break;
        case 7:
            if (rand_r(&seed) % 3 == 0)
                random_fp(&seed, &r, c);
            break;
        case 8: { /* a swap report: usually an evicting client answering */
            int x = -1;
            for (int k = 0; k < N_CLIENTS && x < 0; k++)
                if (mem((c + k) % N_CLIENTS)->evicting)
                    x = (c + k) % N_CLIENTS;
            uint64_t dur = (uint64_t)(100 + rand_r(&seed) % 3000) * MS;
            if (x >= 0 && rand_r(&seed) % 4 != 0)
                policy_swapped(&p, 0, x, SWAP_OUT, mem(x)->footprint, dur, now,
                               &out);
            else
                policy_swapped(&p, 0, c, rand_r(&seed) % 2 ? SWAP_OUT : SWAP_IN,
                               mem(c)->footprint, dur, now, &out);
            break;
        }
        case 9:
            if (rand_r(&seed) % 20 == 0) {
                enum sched_mode mode = (enum sched_mode)(rand_r(&seed) % 3);
                if (mode == SCHED_MODE_SERIAL &&
                    p.gpus[0].mode != SCHED_MODE_SERIAL)
                    r.serial_cap = n_running() > 1 ? n_running() : 1;
                policy_set_mode(&p, 0, mode);
            }
            break;
        case 10:
            if (rand_r(&seed) % 50 == 0)
                policy_set_switch_time(&p,
                                       rand_r(&seed) % 2
                                           ? (uint64_t)(1 + rand_r(&seed) % 5) * SEC
                                           : 0,
                                       0);
            break;
        }
        check_memory_invariants(&r, ticked, now);
    }
}

static void test_random_events_keep_memory_invariants(void **state)
{
    (void)state;
    run_random(20240601u, 100000);
}

static void test_random_events_keep_memory_invariants_other_seed(void **state)
{
    (void)state;
    run_random(7u, 100000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_three_4g_clients_co_run_in_concurrent_mode,
                               setup),
        cmocka_unit_test_setup(test_three_4g_light_clients_co_run_in_auto_mode,
                               setup),
        cmocka_unit_test_setup(test_memory_limit_is_capacity_less_10_percent,
                               setup),
        cmocka_unit_test_setup(test_12g_clients_alternate_with_fixed_switch_time,
                               setup),
        cmocka_unit_test_setup(test_runner_prepares_once_before_its_evict, setup),
        cmocka_unit_test_setup(test_no_prepare_while_memory_fits, setup),
        cmocka_unit_test_setup(test_prepare_is_sent_again_after_rejoin, setup),
        cmocka_unit_test_setup(test_12g_clients_alternate_with_auto_switch_time,
                               setup),
        cmocka_unit_test_setup(test_auto_switch_time_is_clamped_below, setup),
        cmocka_unit_test_setup(test_auto_switch_time_is_clamped_above, setup),
        cmocka_unit_test_setup(test_light_and_heavy_time_slice_in_auto, setup),
        cmocka_unit_test_setup(test_growth_of_oldest_drops_newest_and_evicts_it,
                               setup),
        cmocka_unit_test_setup(test_growth_of_newest_drops_it_and_evicts_it,
                               setup),
        cmocka_unit_test_setup(test_waiter_is_granted_when_predecessor_exits_early,
                               setup),
        cmocka_unit_test_setup(test_aging_stops_backfill_past_a_big_waiter, setup),
        cmocka_unit_test_setup(test_mode_change_to_serial_and_back, setup),
        cmocka_unit_test_setup(test_auto_unknown_loads_then_light_then_heavy,
                               setup),
        cmocka_unit_test_setup(test_auto_known_heavy_runs_alone, setup),
        cmocka_unit_test_setup(test_non_evictable_memory_counts_and_never_blocks_itself,
                               setup),
        cmocka_unit_test_setup(test_evictable_waiter_blocked_by_non_evictable_memory,
                               setup),
        cmocka_unit_test_setup(test_evictable_client_bigger_than_limit_runs_alone,
                               setup),
        cmocka_unit_test_setup(test_partly_evictable_client_leaves_its_fixed_part,
                               setup),
        cmocka_unit_test_setup(test_fixed_part_is_never_overcommitted, setup),
        cmocka_unit_test_setup(test_partly_evictable_client_bigger_than_limit,
                               setup),
        cmocka_unit_test_setup(test_waiter_kept_out_by_fixed_memory_holds_nobody_back,
                               setup),
        cmocka_unit_test_setup(test_credit_of_swapped_out_client_keeps_nobody_out,
                               setup),
        cmocka_unit_test_setup(test_credit_leaves_with_the_evicted_client, setup),
        cmocka_unit_test_setup(test_room_counts_a_resident_waiter_whole, setup),
        cmocka_unit_test_setup(test_core_limit_in_concurrent_mode_bills_half,
                               setup),
        cmocka_unit_test_setup(test_unanswered_evict_counts_as_swapped_after_timeout,
                               setup),
        cmocka_unit_test_setup(test_revoked_overgrown_runner_not_evicted_later,
                               setup),
        cmocka_unit_test_setup(test_idle_resident_client_is_not_admitted_past_the_limit,
                               setup),
        cmocka_unit_test_setup(test_growth_drops_one_runner_while_it_swaps_out,
                               setup),
        cmocka_unit_test_setup(test_revoked_overgrown_runner_is_evicted_not_replaced,
                               setup),
        cmocka_unit_test_setup(test_revoke_then_heavy_pair_is_resolved, setup),
        cmocka_unit_test_setup(test_random_events_keep_memory_invariants, setup),
        cmocka_unit_test_setup(test_random_events_keep_memory_invariants_other_seed,
                               setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
