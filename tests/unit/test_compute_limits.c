/* test_compute_limits.c - core limits, windows, billing and scaling, driven
 * by a discrete-event simulation on a synthetic clock.
 *
 * Simulated clients are compute-bound: they always want the GPU, ask again
 * the moment they release it, and take drain_ns to answer a DROP (the tail
 * that real clients report). Shares are measured per window from the
 * policy's own hold accounting; the tests of the first window measure what
 * the clients ran instead: from their first submission (LOCK_IN_USE, a
 * wake-up after the grant) to the end of their drain. LOCK_IN_USE and
 * LOCK_RELEASED take in_use_leg_ns and release_leg_ns to reach the
 * scheduler, and carry the client's times when reports_times is set. */
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
#define WINDOW (1000 * MS)
#define MAX_SIM 4
#define MAX_RUNS 4096


struct sim {
    uint64_t now;
    uint64_t drain_ns;
    uint64_t drain_jitter_ns; /* each drain takes up to this much more */
    uint64_t jitter_state;    /* its pseudo-random sequence */
    int n;
    bool wants[MAX_SIM];
    uint64_t release_at[MAX_SIM]; /* 0: no release pending */
    uint32_t lease[MAX_SIM];
    uint64_t wake_ns;       /* grant to first submission */
    uint64_t in_use_leg_ns; /* client -> scheduler message latencies */
    uint64_t release_leg_ns;
    bool reports_times;          /* at_ns of LOCK_IN_USE, LOCK_RELEASED */
    uint64_t in_use_at[MAX_SIM]; /* 0: no first submission pending */
    uint64_t submitted_at[MAX_SIM];
    uint64_t drained_at[MAX_SIM];
    uint64_t run_from[MAX_SIM]; /* running since (0: not running) */
    struct {
        uint64_t from, to;
    } runs[MAX_SIM][MAX_RUNS];
    int n_runs[MAX_SIM];
    uint64_t busy_since; /* GPU idle accounting */
    uint64_t busy_ns;
    bool idle_while_eligible_waiting;
};

static struct sim sim;

static void apply(const struct policy_actions *out)
{
    for (int i = 0; i < out->n; i++) {
        const struct policy_action *a = &out->list[i];
        if (a->kind == ACTION_GRANT) {
            sim.lease[a->client] = a->lease;
            if (sim.wake_ns) {
                sim.submitted_at[a->client] = sim.now + sim.wake_ns;
                sim.in_use_at[a->client] =
                    sim.now + sim.wake_ns + sim.in_use_leg_ns;
            } else {
                sim.run_from[a->client] = sim.now;
            }
        } else if (a->kind == ACTION_DROP) {
            uint64_t drain = sim.drain_ns;
            if (sim.drain_jitter_ns) {
                sim.jitter_state = sim.jitter_state * 6364136223846793005ull +
                                   1442695040888963407ull;
                drain += (sim.jitter_state >> 33) % sim.drain_jitter_ns;
            }
            /* Dropped before it woke up, it has queued nothing. */
            sim.drained_at[a->client] =
                sim.now + (sim.in_use_at[a->client] ? 0 : drain);
            sim.release_at[a->client] = sim.now + drain + sim.release_leg_ns;
        }
    }
}

static void start_tq(int n, const unsigned *limits, uint64_t drain_ns,
                     uint64_t tq_ns)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    memset(&sim, 0, sizeof(sim));
    sim.n = n;
    sim.drain_ns = drain_ns;
    policy_start(&p, 1, tq_ns, 10000 * MS);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL); /* time slicing */
    for (int c = 0; c < n; c++) {
        policy_join(&p, 0, c, c, 0);
        policy_set_core_limit(&p, 0, c, limits[c], 0);
        sim.wants[c] = true;
        policy_request(&p, 0, c, 0, &out);
    }
    apply(&out);
}

static void start(int n, const unsigned *limits, uint64_t drain_ns)
{
    start_tq(n, limits, drain_ns, 100 * MS);
}

/* Advances the simulation to time `until`, processing releases and ticks. */
static void run_until(uint64_t until)
{
    while (sim.now < until) {
        struct policy_actions out;
        policy_actions_clear(&out);
        uint64_t next = policy_tick(&p, sim.now, &out);
        apply(&out);
        for (int c = 0; c < sim.n; c++) {
            if (sim.release_at[c] && (next == 0 || sim.release_at[c] < next))
                next = sim.release_at[c];
            if (sim.in_use_at[c] && (next == 0 || sim.in_use_at[c] < next))
                next = sim.in_use_at[c];
        }
        if (next == 0 || next > until)
            next = until;
        if (next <= sim.now)
            next = sim.now + 1;

        /* Property: the GPU never idles while a client that has budget
         * to use now waits. */
        const struct gpu_sched *g = &p.gpus[0];
        if (policy_holder(&p, 0) < 0)
            for (int i = 0; i < g->n_waiting; i++)
                if (!policy_spent(&p, 0, g->members[g->queue[i]].account, sim.now))
                    sim.idle_while_eligible_waiting = true;
        if (policy_holder(&p, 0) >= 0)
            sim.busy_ns += next - sim.now;
        sim.now = next;

        for (int c = 0; c < sim.n; c++) {
            if (sim.in_use_at[c] && sim.in_use_at[c] <= sim.now) {
                sim.in_use_at[c] = 0;
                policy_in_use(&p, 0, c, sim.lease[c],
                              sim.reports_times ? sim.submitted_at[c] : 0,
                              sim.now);
                sim.run_from[c] = sim.submitted_at[c];
            }
            if (!sim.release_at[c] || sim.release_at[c] > sim.now)
                continue;
            out.n = 0;
            sim.release_at[c] = 0;
            sim.in_use_at[c] = 0; /* dropped before it woke up */
            if (sim.run_from[c] && sim.n_runs[c] < MAX_RUNS) {
                sim.runs[c][sim.n_runs[c]].from = sim.run_from[c];
                sim.runs[c][sim.n_runs[c]++].to = sim.drained_at[c];
            }
            sim.run_from[c] = 0;
            policy_release(&p, 0, c, sim.lease[c], sim.drain_ns,
                           sim.reports_times ? sim.drained_at[c] : 0, sim.now,
                           &out);
            if (sim.wants[c])
                policy_request(&p, 0, c, sim.now, &out);
            apply(&out);
        }
    }
}

/* Runs `windows` windows after a warm-up window and returns each client's
 * share of GPU time (held time / elapsed) over them, in percent. */
static void measure(int windows, double *share)
{
    uint64_t held[MAX_SIM], from;

    run_until(sim.now + WINDOW);
    from = sim.now;
    for (int c = 0; c < sim.n; c++)
        held[c] = policy_held_ns(&p, 0, c, sim.now);
    run_until(sim.now + (uint64_t)windows * WINDOW);
    for (int c = 0; c < sim.n; c++)
        share[c] = 100.0 * (double)(policy_held_ns(&p, 0, c, sim.now) - held[c]) /
                   (double)(sim.now - from);
    assert_false(sim.idle_while_eligible_waiting);
}

static void expect_shares_tq(int n, const unsigned *limits, const double *target,
                             uint64_t drain_ns, uint64_t tq_ns)
{
    double share[MAX_SIM];

    start_tq(n, limits, drain_ns, tq_ns);
    measure(10, share);
    for (int c = 0; c < n; c++) {
        printf("  limit %3u%%: share %6.2f%% (target %6.2f%%, drain %.1f ms)\n",
               limits[c], share[c], target[c], (double)drain_ns / MS);
        assert_true(share[c] > target[c] - 1.0 && share[c] < target[c] + 1.0);
    }
}

static void expect_shares(int n, const unsigned *limits, const double *target,
                          uint64_t drain_ns)
{
    expect_shares_tq(n, limits, target, drain_ns, 100 * MS);
}

/* A limited pod queued behind unlimited ones with long quanta still gets its
 * share of every window: it is served first while it has budget, and a
 * holder makes room before the window ends. */
static void test_limited_beside_unlimited_with_long_quanta(void **state)
{
    unsigned a[] = {20, 100, 100}, b[] = {30, 10, 100};
    double ta[] = {20, 40, 40}, tb[] = {30, 10, 60};

    (void)state;
    expect_shares_tq(3, a, ta, 2 * MS, 500 * MS);
    expect_shares_tq(3, b, tb, 2 * MS, 500 * MS);
    expect_shares_tq(3, a, ta, 2 * MS, 2000 * MS);
}

static void test_single_client_at_each_limit(void **state)
{
    (void)state;
    for (unsigned limit = 10; limit <= 90; limit += 20) {
        unsigned l[] = {limit};
        double t[] = {limit};
        expect_shares(1, l, t, 0);
        expect_shares(1, l, t, 3 * MS); /* a real drain tail */
    }
}

static void test_a50_alone_leaves_gpu_idle(void **state)
{
    unsigned l[] = {50};
    double t[] = {50};

    (void)state;
    expect_shares(1, l, t, 2 * MS);
}

static void test_a50_b_unlimited(void **state)
{
    unsigned l[] = {50, 100};
    double t[] = {50, 50};

    (void)state;
    expect_shares(2, l, t, 2 * MS);
}

static void test_a50_b60_scaled(void **state)
{
    unsigned l[] = {50, 60};
    double t[] = {50.0 * 100 / 110, 60.0 * 100 / 110};

    (void)state;
    /* The default quantum (30 s), so that only the limits hand over. */
    expect_shares_tq(2, l, t, 2 * MS, 30000 * MS);
    /* The GPU stays full. */
    assert_true(sim.busy_ns > (sim.now - WINDOW) * 99 / 100);
    /* Each pod's turn ends with its slice (a turn of two slices would let a
     * share over ten seconds stray by a point), and each has one turn a
     * slice, not two (dropped just before the slice's end, then granted
     * again). */
    double per_window = (double)p.gpus[0].switches * WINDOW / (double)sim.now;
    printf("  hand-overs: %.1f a window (%d slices)\n", per_window,
           POLICY_PACE_SLICES);
    assert_true(per_window <= 2 * POLICY_PACE_SLICES + 0.5);
    for (int c = 0; c < 2; c++) {
        uint64_t longest = 0, share = WINDOW * (uint64_t)(t[c] * 100) / 10000 /
                                      POLICY_PACE_SLICES;
        for (int r = 2; r < sim.n_runs[c]; r++) /* the first window aside */
            if (sim.runs[c][r].to - sim.runs[c][r].from > longest)
                longest = sim.runs[c][r].to - sim.runs[c][r].from;
        printf("  pod %d: longest turn %.1f ms, share of a slice %.1f ms\n", c,
               (double)longest / MS, (double)share / MS);
        assert_true(longest <= share + 5 * MS);
    }
}

static void test_a80_b80_split_evenly(void **state)
{
    unsigned l[] = {80, 80};
    double t[] = {50, 50};

    (void)state;
    expect_shares(2, l, t, 2 * MS);
}

static void test_30_30_30(void **state)
{
    unsigned l[] = {30, 30, 30};
    double t[] = {30, 30, 30};

    (void)state;
    expect_shares(3, l, t, 2 * MS);
}

static void test_mixes(void **state)
{
    unsigned a[] = {10, 90}, b[] = {25, 75};
    double ta[] = {10, 90}, tb[] = {25, 75};

    (void)state;
    expect_shares(2, a, ta, 2 * MS);
    expect_shares(2, b, tb, 2 * MS);
}

/* Property: in no window is an account billed above its effective budget
 * by more than one drain tail (the tail that follows the DROP, which the
 * moving estimate of the drain absorbs after the first windows). */
static void test_no_window_over_budget(void **state)
{
    static const unsigned mixes[][3] = {{50, 60, 0},
                                        {80, 80, 0},
                                        {10, 90, 0},
                                        {30, 30, 30},
                                        {25, 100, 0}};

    (void)state;
    for (size_t k = 0; k < sizeof(mixes) / sizeof(mixes[0]); k++) {
        int n = mixes[k][2] ? 3 : 2;
        start(n, mixes[k], 3 * MS);
        for (int w = 1; w <= 20; w++) {
            run_until((uint64_t)w * WINDOW - 1);
            for (int c = 0; c < n; c++) {
                uint64_t budget = policy_budget_ns(&p, 0, c);
                uint64_t used = policy_used_ns(&p, 0, c, sim.now);
                if (budget && used > budget + sim.drain_ns)
                    fail_msg("mix %zu window %d: account %d used %llu ns of "
                             "%llu",
                             k, w, c, (unsigned long long)used,
                             (unsigned long long)budget);
            }
            run_until((uint64_t)w * WINDOW);
        }
        assert_false(sim.idle_while_eligible_waiting);
    }
}

static void test_raise_keeps_used_time(void **state)
{
    unsigned l[] = {10};

    (void)state;
    start(1, l, 0);
    /* In the last slice of window 2: the whole budget used since 1.91 s. */
    run_until(WINDOW + 950 * MS);
    assert_true(p.gpus[0].usage[0].throttled);
    uint64_t used = policy_used_ns(&p, 0, 0, sim.now);
    assert_int_equal(used, 100 * MS);

    policy_set_core_limit(&p, 0, 0, 90, sim.now);
    assert_false(p.gpus[0].usage[0].throttled);
    assert_int_equal(policy_used_ns(&p, 0, 0, sim.now), used); /* not reset */
    run_until(2 * WINDOW - 1);
    /* 100 ms before the change, then the rest of the window: the new
     * budget (900 ms) is not reached. */
    used = policy_used_ns(&p, 0, 0, sim.now);
    assert_true(used >= 149 * MS && used <= 150 * MS);
}

static void test_lower_drops_holder_and_keeps_used_time(void **state)
{
    unsigned l[] = {90};
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    start(1, l, 0);
    /* Four slices of 90 ms, then 50 ms into the fifth. */
    run_until(WINDOW + 450 * MS);
    assert_int_equal(policy_holder(&p, 0), 0);
    policy_set_core_limit(&p, 0, 0, 10, sim.now);
    uint64_t used = policy_used_ns(&p, 0, 0, sim.now);
    assert_true(used >= 410 * MS - 10 && used <= 410 * MS + 10); /* kept */
    policy_tick(&p, sim.now, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, ACTION_DROP);
    assert_true(p.gpus[0].usage[0].throttled);
}

static void test_client_leaving_rescales_others(void **state)
{
    unsigned l[] = {50, 60};
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    start(2, l, 0);
    run_until(WINDOW + 300 * MS);
    assert_int_equal(policy_budget_ns(&p, 0, 0), WINDOW * 50 / 110);
    sim.wants[1] = false;
    policy_leave(&p, 1, sim.now, &out);
    apply(&out);
    /* B used time this window, so it still takes part until it rolls. */
    run_until(2 * WINDOW + 1);
    assert_int_equal(policy_budget_ns(&p, 0, 0), WINDOW * 50 / 100);
}

static void test_idle_gpu_has_no_stale_window(void **state)
{
    unsigned l[] = {50};
    struct policy_actions out;
    policy_actions_clear(&out);

    (void)state;
    start(1, l, 0);
    run_until(420 * MS); /* 220 ms used in window 1, holding */
    sim.wants[0] = false;
    sim.release_at[0] = 0;
    policy_release(&p, 0, 0, sim.lease[0], 0, 0, sim.now, &out);
    /* Idle for 10 windows, then back: a full budget, not the old window,
     * and the window starts at its grant (then at its first submission),
     * not on the old grid. */
    out.n = 0;
    sim.now = 10 * WINDOW + 200 * MS;
    policy_request(&p, 0, 0, sim.now, &out);
    assert_int_equal(out.n, 1);
    apply(&out);
    assert_int_equal(policy_used_ns(&p, 0, 0, sim.now), 0);
    assert_int_equal(p.gpus[0].window_start, 10 * WINDOW + 200 * MS);
    policy_in_use(&p, 0, 0, sim.lease[0], 0, 10 * WINDOW + 201 * MS);
    assert_int_equal(p.gpus[0].window_start, 10 * WINDOW + 201 * MS);
}

/* Like start_tq, but the clients first ask for the GPU at t0 (an idle GPU
 * until then, t0 anywhere in its windows) and first submit wake_ns after
 * each grant. */
static void start_at(int n, const unsigned *limits, uint64_t drain_ns,
                     uint64_t wake_ns, uint64_t t0)
{
    struct policy_actions out;
    policy_actions_clear(&out);

    memset(&sim, 0, sizeof(sim));
    sim.n = n;
    sim.drain_ns = drain_ns;
    sim.wake_ns = wake_ns;
    policy_start(&p, 1, 100 * MS, 10000 * MS);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
    for (int c = 0; c < n; c++) {
        policy_join(&p, 0, c, c, 0);
        policy_set_core_limit(&p, 0, c, limits[c], 0);
        sim.wants[c] = true;
    }
    run_until(t0);
    for (int c = 0; c < n; c++)
        policy_request(&p, 0, c, t0, &out);
    apply(&out);
}

/* What client c ran in [from, to): from its first submissions to its
 * releases, including a run in progress. */
static uint64_t ran(int c, uint64_t from, uint64_t to)
{
    uint64_t sum = 0;

    for (int i = 0; i <= sim.n_runs[c]; i++) {
        uint64_t a = i < sim.n_runs[c] ? sim.runs[c][i].from : sim.run_from[c];
        uint64_t b = i < sim.n_runs[c] ? sim.runs[c][i].to : sim.now;
        if (i == sim.n_runs[c] && !sim.run_from[c])
            break;
        a = a > from ? a : from;
        b = b < to ? b : to;
        sum += b > a ? b - a : 0;
    }
    return sum;
}

static uint64_t first_submission(int c)
{
    return sim.n_runs[c] ? sim.runs[c][0].from : sim.run_from[c];
}

/* A pod that starts mid-window of the GPU's old grid gets no more than its
 * budget in the window that starts at its first submission, plus what the
 * next window repays: the drain tail of its first drop, before any
 * DROP-to-release latency has been measured. */
static void test_first_window_from_first_submission_within_budget(void **state)
{
    static const unsigned limits[] = {10, 25, 50, 75, 90};

    (void)state;
    for (size_t k = 0; k < sizeof(limits) / sizeof(limits[0]); k++) {
        unsigned l[] = {limits[k]};
        start_at(1, l, 3 * MS, 200000, 1370 * MS);
        run_until(1370 * MS + 3 * WINDOW);
        uint64_t s = first_submission(0), budget = policy_budget_ns(&p, 0, 0);
        uint64_t first = ran(0, s, s + WINDOW);
        uint64_t second = ran(0, s + WINDOW, s + 2 * WINDOW);
        printf("  limit %2u%%: first window %.3f ms, second %.3f ms (budget "
               "%.0f ms)\n",
               l[0], (double)first / MS, (double)second / MS,
               (double)budget / MS);
        assert_true(first <= budget + sim.drain_ns);
        assert_true(first + second <= 2 * budget);
        assert_true(first + second >= 2 * budget - 2 * sim.drain_ns);
    }
}

/* Progress is even within windows: measured from the first submission over
 * a time that is not a whole number of windows, each pod lands within half
 * a point of its (scaled) limit, and a scaled mix keeps the GPU full. */
static void test_share_from_first_submission_over_part_windows(void **state)
{
    static const unsigned singles[] = {10, 25, 50, 75, 90};
    const uint64_t t0 = 1370 * MS, span = 5370 * MS;

    (void)state;
    for (size_t k = 0; k < sizeof(singles) / sizeof(singles[0]); k++) {
        unsigned l[] = {singles[k]};
        start_at(1, l, 3 * MS, 200000, t0);
        run_until(t0 + span + 10 * MS);
        uint64_t s = first_submission(0);
        double share = 100.0 * (double)ran(0, s, s + span) / (double)span;
        printf("  limit %2u%%: %.2f%% over %.2f s from the first submission\n",
               l[0], share, (double)span / WINDOW);
        assert_true(share > l[0] - 0.5 && share < l[0] + 0.5);
    }
    unsigned mix[] = {50, 60};
    double target[] = {50.0 * 100 / 110, 60.0 * 100 / 110}, sum = 0;
    start_at(2, mix, 3 * MS, 200000, t0);
    run_until(t0 + span + 10 * MS);
    for (int c = 0; c < 2; c++) {
        double share = 100.0 * (double)ran(c, t0, t0 + span) / (double)span;
        printf("  mix 50+60: %u%% -> %.2f%% (target %.2f%%)\n", mix[c], share,
               target[c]);
        assert_true(share > target[c] - 0.5 && share < target[c] + 0.5);
        sum += share;
    }
    assert_true(sum >= 98.0);
}

/* Steady state is unbiased: billing runs from the client's first
 * submission to the end of its drain, whatever the messages' way to the
 * scheduler takes, so what a pod runs in whole windows is its limit within
 * 0.02 point at every limit. Billed on the messages' arrival instead, a
 * release slower than LOCK_IN_USE (here 150 us against 20 us, at each of ten
 * paced switches a second) costs the pod GPU time it did not get: 0.13
 * point at every limit. What is left (-0.015) is the last slice of each
 * window, dropped early by the release's way too. */
static void test_steady_share_unbiased_by_message_latency(void **state)
{
    static const unsigned limits[] = {10, 25, 50, 75, 90};
    const uint64_t t0 = 1370 * MS, from = t0 + 2 * WINDOW, span = 6 * WINDOW;

    (void)state;
    for (int reports = 1; reports >= 0; reports--) {
        for (size_t k = 0; k < sizeof(limits) / sizeof(limits[0]); k++) {
            unsigned l[] = {limits[k]};
            start_at(1, l, 3 * MS, 200000, t0);
            sim.in_use_leg_ns = 20000; /* from the first release on */
            sim.release_leg_ns = 150000;
            sim.reports_times = reports;
            run_until(from + span + 10 * MS);
            double error =
                100.0 * (double)ran(0, from, from + span) / (double)span - l[0];
            printf("  limit %2u%%, times %s: steady error %+.3f point\n", l[0],
                   reports ? "reported" : "not reported", error);
            if (reports)
                assert_true(error > -0.02 && error < 0.02);
            else /* the bias this fixes: a switch a slice, each billing
                  * the messages' latency (0.13 ms) */
                assert_true(error < -0.01 * POLICY_PACE_SLICES);
        }
    }
}

/* A carry larger than a whole budget (a drain tail longer than the budget)
 * is repaid in full, not forgiven. */
static void test_long_overshoot_is_repaid(void **state)
{
    unsigned l[] = {10};

    (void)state;
    start(1, l, 250 * MS); /* every drop's tail is 2.5 budgets */
    run_until(40 * WINDOW);
    double share =
        100.0 * (double)policy_held_ns(&p, 0, 0, sim.now) / (double)sim.now;
    printf("  limit 10%% with 250 ms tails: %.3f%%\n", share);
    /* Over by about the last tail at most (a carry capped at one budget
     * would give 13 %). */
    assert_true(share <= 10.0 + 100.0 * (250 + 2 * 10) / (40 * 1000));
}

/* A drain longer than a slice's budget (a CUDA graph of 40 ms held to 10 %,
 * whose slice accrues 20 ms): dropping such a runner early by its drain
 * latency would drop it at once, nothing submitted, and the budget that
 * accrued meanwhile would be lost at the window's end. It runs, and its
 * tail is repaid in the slices after. */
static void test_drain_longer_than_a_slice(void **state)
{
    unsigned l[] = {10};

    (void)state;
    start_at(1, l, 40 * MS, 200000, 0);
    run_until(11 * WINDOW + 100 * MS);
    double share =
        100.0 * (double)ran(0, WINDOW, 11 * WINDOW) / (double)(10 * WINDOW);
    printf("  limit 10%% with 40 ms drains: ran %.3f%%\n", share);
    assert_true(share > 9.7 && share < 10.3);
}

/* A pod at 100 % is unlimited: it is not counted in the sum that scales the
 * limits, and the limited pods beside it keep their budgets. */
static void test_pod_at_100_is_not_in_the_scaling_sum(void **state)
{
    unsigned l[] = {60, 100}, scaled[] = {60, 50};

    (void)state;
    start(2, l, 2 * MS);
    run_until(WINDOW / 2);
    assert_int_equal(policy_limit_sum(&p, 0), 60);
    assert_int_equal(policy_budget_ns(&p, 0, 0), 600 * MS);
    start(2, scaled, 2 * MS);
    run_until(WINDOW / 2);
    assert_int_equal(policy_limit_sum(&p, 0), 110);
    assert_int_equal(policy_budget_ns(&p, 0, 0), WINDOW * 60 / 110);
}

/* A pod's DRA claims give it a share of each of its GPUs, not alike: one
 * account held to 25 % of GPU 0 and 10 % of GPU 1 is paced to each there,
 * and the limit removed on GPU 1 leaves GPU 0's. */
static void test_core_limit_per_gpu(void **state)
{
    struct policy_actions out;
    uint64_t dropped_at[2] = {0, 0};

    (void)state;
    policy_actions_clear(&out);
    policy_start(&p, 2, 100 * MS, 10000 * MS);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
    policy_join(&p, 0, 0, 0, 0); /* one client of account 0 on both */
    policy_join(&p, 1, 0, 0, 0);
    policy_set_core_limit(&p, 0, 0, 25, 0);
    policy_set_core_limit(&p, 1, 0, 10, 0);
    policy_request(&p, 0, 0, 0, &out);
    policy_request(&p, 1, 0, 0, &out);
    assert_int_equal(policy_budget_ns(&p, 0, 0), WINDOW * 25 / 100);
    assert_int_equal(policy_budget_ns(&p, 1, 0), WINDOW * 10 / 100);
    /* Held on both from 0: each GPU drops it at its own pace. */
    for (uint64_t now = 1 * MS; now <= 60 * MS; now += 1 * MS) {
        policy_actions_clear(&out);
        policy_tick(&p, now, &out);
        for (int i = 0; i < out.n; i++)
            if (out.list[i].kind == ACTION_DROP && !dropped_at[out.list[i].gpu])
                dropped_at[out.list[i].gpu] = now;
    }
    assert_true(dropped_at[1] > 0 && dropped_at[0] > 0);
    assert_true(dropped_at[1] * 2 <= dropped_at[0]); /* 10 % against 25 % */
    policy_set_core_limit(&p, 1, 0, 0, 60 * MS);
    assert_int_equal(policy_budget_ns(&p, 1, 0), 0);
    assert_int_equal(policy_budget_ns(&p, 0, 0), WINDOW * 25 / 100);
}

/* Drains that vary (a CUDA graph's took 4-15 ms on the H100) land short of
 * their mark as often as past it. Past it is carried and repaid; short of
 * it is lost when it happens in a window's last slice. The share over 20
 * windows is the limit at every limit, not a little below (led by the
 * average latency there, the pod used 0.08-0.23 points less). */
static void test_varying_drains_cost_no_share(void **state)
{
    static const unsigned limits[] = {10, 25, 50, 75, 90};

    (void)state;
    for (size_t k = 0; k < sizeof(limits) / sizeof(limits[0]); k++) {
        unsigned l[] = {limits[k]};
        start_at(1, l, 4 * MS, 200000, 0);
        sim.drain_jitter_ns = 11 * MS;
        sim.reports_times = true;
        run_until(21 * WINDOW + 100 * MS);
        double share =
            100.0 * (double)ran(0, WINDOW, 21 * WINDOW) / (double)(20 * WINDOW);
        printf("  limit %2u%% with 4-15 ms drains: ran %.3f%%\n", l[0], share);
        assert_true(share > l[0] - 0.05 && share < l[0] + 0.05);
    }
}

/* A group (groups.h): the clients of two pods billed to one account on
 * the GPU (policy_move) draw on its limit together: 30 % between them
 * while both are busy, and all 30 % for one while the other is idle,
 * where an even split would hold it to 15 %. */
static void test_group_is_one_budget(void **state)
{
    unsigned l[] = {30, 30};
    double share[MAX_SIM];

    (void)state;
    start(2, l, 2 * MS);
    measure(5, share);
    printf("  apart: %.2f%% + %.2f%%\n", share[0], share[1]);
    assert_true(share[0] + share[1] > 59.0);
    policy_move(&p, 0, 1, 0, sim.now);
    measure(5, share);
    printf("  one account: %.2f%% + %.2f%%\n", share[0], share[1]);
    assert_true(share[0] + share[1] > 29.0 && share[0] + share[1] < 31.0);
    assert_true(share[0] > 10.0 && share[1] > 10.0);
    sim.wants[1] = false;
    measure(5, share);
    printf("  the other idle: %.2f%% + %.2f%%\n", share[0], share[1]);
    assert_true(share[0] > 29.0 && share[0] < 31.0);
    assert_true(share[1] < 0.5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_client_at_each_limit),
        cmocka_unit_test(test_a50_alone_leaves_gpu_idle),
        cmocka_unit_test(test_a50_b_unlimited),
        cmocka_unit_test(test_a50_b60_scaled),
        cmocka_unit_test(test_a80_b80_split_evenly),
        cmocka_unit_test(test_30_30_30),
        cmocka_unit_test(test_mixes),
        cmocka_unit_test(test_limited_beside_unlimited_with_long_quanta),
        cmocka_unit_test(test_no_window_over_budget),
        cmocka_unit_test(test_raise_keeps_used_time),
        cmocka_unit_test(test_lower_drops_holder_and_keeps_used_time),
        cmocka_unit_test(test_client_leaving_rescales_others),
        cmocka_unit_test(test_idle_gpu_has_no_stale_window),
        cmocka_unit_test(test_first_window_from_first_submission_within_budget),
        cmocka_unit_test(test_share_from_first_submission_over_part_windows),
        cmocka_unit_test(test_steady_share_unbiased_by_message_latency),
        cmocka_unit_test(test_long_overshoot_is_repaid),
        cmocka_unit_test(test_drain_longer_than_a_slice),
        cmocka_unit_test(test_varying_drains_cost_no_share),
        cmocka_unit_test(test_pod_at_100_is_not_in_the_scaling_sum),
        cmocka_unit_test(test_core_limit_per_gpu),
        cmocka_unit_test(test_group_is_one_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
