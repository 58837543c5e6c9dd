/* test_auto_mode.c - auto mode (the default) with heavy tenants, through
 * the pure policy and a synthetic clock.
 *
 * The simulated tenants behave like libnvshare clients running a job that
 * keeps the GPU busy: they always want the GPU, answer a DROP after a
 * short drain and ask again at once, and report their load (heavy) once
 * they have held the GPU for REPORT_AFTER, as the client does within its
 * first second of GPU time. What must hold: a trial beside others lasts
 * until that report (LOAD_FIRST_REPORT_NS of GPU time at most, or one
 * quantum if longer), two clients measured heavy never share a running set,
 * and N heavy tenants get the GPU as serial mode would give it (full, 1/N
 * each). */
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
#define DRAIN (1 * MS)
#define DRAIN_TIMEOUT (1000 * MS)
#define REPORT_AFTER (750 * MS)
#define MAX_TENANTS 8


struct tenant {
    uint64_t release_at; /* DROP answered then; 0: not draining */
    bool reported;
    uint64_t trial_ns; /* ran beside others while not measured */
};

struct run {
    int n;
    uint64_t tq, step;
    struct tenant t[MAX_TENANTS];
    uint64_t busy_ns;   /* someone ran */
    uint64_t shared_ns; /* two or more ran */
};

static bool holding(int c)
{
    return mem(c)->state == MEMBER_HOLDING;
}

static bool measured_heavy(int c)
{
    return mem(c)->load_known && mem(c)->load_permille >= p.light_permille;
}

static void carry_out(struct run *r, uint64_t now)
{
    for (int i = 0; i < out.n; i++)
        if (out.list[i].kind == ACTION_DROP)
            r->t[out.list[i].client].release_at = now + DRAIN;
    policy_actions_clear(&out);
}

/* One step of the clients: drains that end, load reports that are due,
 * requests after a release; then the daemon's tick. */
static void step_clients(struct run *r, uint64_t now)
{
    for (int c = 0; c < r->n; c++) {
        struct tenant *t = &r->t[c];
        if (t->release_at && now >= t->release_at) {
            t->release_at = 0;
            policy_release(&p, 0, c, mem(c)->lease, DRAIN, 0, now, &out);
            carry_out(r, now);
            policy_request(&p, 0, c, now, &out);
            carry_out(r, now);
        }
        if (!t->reported && policy_held_ns(&p, 0, c, now) >= REPORT_AFTER) {
            t->reported = true;
            policy_set_load(&p, 0, c, 1000);
        }
    }
    policy_tick(&p, now, &out);
    carry_out(r, now);
}

/* Bookkeeping for the step that starts at now, and the invariant that no
 * two measured-heavy clients hold the GPU together. */
static void account(struct run *r)
{
    int runners = 0, heavy = 0;

    for (int c = 0; c < r->n; c++) {
        runners += policy_is_running(&p, 0, c);
        heavy += holding(c) && measured_heavy(c);
    }
    if (heavy > 1)
        fprintf(stderr, "%d clients measured heavy hold the GPU together\n",
                heavy);
    assert_true(heavy <= 1);
    if (runners)
        r->busy_ns += r->step;
    if (runners > 1) {
        r->shared_ns += r->step;
        for (int c = 0; c < r->n; c++)
            if (policy_is_running(&p, 0, c) && !mem(c)->load_known)
                r->t[c].trial_ns += r->step;
    }
}

/* n heavy tenants from time 0 for `rounds` rounds of n quanta. */
static void run_heavy(struct run *r, int n, uint64_t tq, int rounds)
{
    uint64_t now = 0, end = (uint64_t)rounds * (uint64_t)n * tq;

    memset(r, 0, sizeof(*r));
    r->n = n;
    r->tq = tq;
    r->step = tq / 100;
    policy_start(&p, 1, tq, DRAIN_TIMEOUT); /* auto mode is the default */
    assert_int_equal(p.gpus[0].mode, SCHED_MODE_AUTO);
    for (int c = 0; c < n; c++)
        policy_join(&p, 0, c, c, 0);
    policy_actions_clear(&out);
    for (int c = 0; c < n; c++) {
        policy_request(&p, 0, c, 0, &out);
        carry_out(r, 0);
    }
    for (; now < end; now += r->step) {
        step_clients(r, now);
        account(r);
    }
    for (int c = 0; c < n; c++) {
        double share = (double)policy_held_ns(&p, 0, c, end) / (double)end;
        fprintf(stderr, "  %d tenants, TQ %llu ms: #%d %.2f %% (trial %llu ms)\n",
                n, (unsigned long long)(tq / MS), c, 100 * share,
                (unsigned long long)(r->t[c].trial_ns / MS));
    }
}

/* Each tenant within 3 % of 1/n, the GPU busy as in serial mode, and
 * trials that end at the first report. */
static void assert_serial_like(const struct run *r, uint64_t end)
{
    double fair = 1.0 / r->n, held_sum = 0;

    /* Of the held time: while trials co-run, each holder's clock runs. */
    for (int c = 0; c < r->n; c++)
        held_sum += (double)policy_held_ns(&p, 0, c, end);
    for (int c = 0; c < r->n; c++) {
        double share = (double)policy_held_ns(&p, 0, c, end) / held_sum;
        assert_true(share > fair * 0.97 && share < fair * 1.03);
        assert_true(r->t[c].trial_ns <= REPORT_AFTER + r->step);
        assert_true(r->t[c].reported);
    }
    /* Drains of DRAIN per quantum are the only idle time. */
    assert_true((double)r->busy_ns >= 0.98 * (double)end);
}

static void test_trial_until_first_report_then_alone(void **state)
{
    uint64_t tq = 100 * MS, trial = LOAD_FIRST_REPORT_NS, next;

    (void)state;
    policy_start(&p, 1, tq, DRAIN_TIMEOUT);
    policy_join(&p, 0, 0, 0, 0);
    policy_join(&p, 0, 1, 1, 0);
    policy_actions_clear(&out);
    policy_request(&p, 0, 0, 0, &out);
    policy_request(&p, 0, 1, 10 * MS, &out);
    assert_int_equal(out.n, 2); /* both granted: a trial beside it */
    policy_actions_clear(&out);
    /* Not at one quantum: neither can have been measured yet, and light
     * newcomers would take turns until they were. */
    next = policy_tick(&p, tq, &out);
    assert_int_equal(out.n, 0);
    /* The first's trial ends when its report is due at the latest: the
     * tick is asked for then, and the newest runner leaves. */
    assert_int_equal(next, trial);
    policy_tick(&p, trial, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, ACTION_DROP);
    assert_int_equal(out.list[0].client, 1);
    policy_actions_clear(&out);
    policy_release(&p, 0, 1, mem(1)->lease, 0, 0, trial + 1 * MS, &out);
    policy_request(&p, 0, 1, trial + 1 * MS, &out);
    assert_int_equal(out.n, 0); /* unmeasured past its trial: it waits */
    /* Still not measured: they take turns, never together. */
    for (uint64_t now = trial + 2 * MS; now < 4 * SEC; now += 1 * MS) {
        policy_tick(&p, now, &out);
        for (int i = 0; i < out.n; i++)
            if (out.list[i].kind == ACTION_DROP) {
                int c = out.list[i].client;
                policy_release(&p, 0, c, mem(c)->lease, 0, 0, now, &out);
                policy_request(&p, 0, c, now, &out);
            }
        policy_actions_clear(&out);
        assert_true(p.gpus[0].n_running <= 1);
    }
}

static void test_measured_light_clients_still_co_run(void **state)
{
    (void)state;
    policy_start(&p, 1, 100 * MS, DRAIN_TIMEOUT);
    for (int c = 0; c < 3; c++) {
        policy_join(&p, 0, c, c, 0);
        policy_set_load(&p, 0, c, 200);
    }
    policy_actions_clear(&out);
    for (int c = 0; c < 3; c++)
        policy_request(&p, 0, c, 0, &out);
    assert_int_equal(out.n, 3);
    policy_actions_clear(&out);
    assert_int_equal(policy_tick(&p, 10 * SEC, &out), 0);
    assert_int_equal(out.n, 0);
    assert_int_equal(p.gpus[0].n_running, 3);
}

/* Pods under core limits: a newcomer gets no trial beside a paced runner
 * (it would cost both more than the wait), and has the GPU once the runner
 * is dropped at its pace, within a slice. A measured light one still joins. */
static void test_no_trial_beside_paced_runners(void **state)
{
    uint64_t now;

    (void)state;
    policy_start(&p, 1, 30 * SEC, DRAIN_TIMEOUT);
    for (int c = 0; c < 3; c++)
        policy_join(&p, 0, c, c, 0);
    policy_set_core_limit(&p, 0, 0, 50, 0);
    policy_set_core_limit(&p, 0, 1, 60, 0);
    policy_set_core_limit(&p, 0, 2, 60, 0);
    policy_actions_clear(&out);
    policy_request(&p, 0, 0, 0, &out);
    policy_in_use(&p, 0, 0, mem(0)->lease, 0, 0);
    policy_request(&p, 0, 1, 10 * MS, &out);
    assert_int_equal(out.n, 1); /* client 0 only */
    assert_int_equal(out.list[0].client, 0);
    policy_actions_clear(&out);
    for (now = 11 * MS; mem(1)->state != MEMBER_HOLDING; now += 1 * MS) {
        assert_true(now <= p.window_ns / 10 + 2 * MS);
        policy_tick(&p, now, &out);
        for (int i = 0; i < out.n; i++)
            if (out.list[i].kind == ACTION_DROP)
                policy_release(&p, 0, 0, mem(0)->lease, DRAIN, 0, now, &out);
        policy_actions_clear(&out);
        assert_true(p.gpus[0].n_running <= 1);
    }
    policy_set_load(&p, 0, 2, 200);
    policy_request(&p, 0, 2, now, &out);
    assert_int_equal(mem(2)->state, MEMBER_HOLDING);
}

struct heavy_case {
    int tenants;
    uint64_t tq;
    int rounds;
};

static void test_heavy_tenants(void **state)
{
    const struct heavy_case *hc = *state;
    struct run r;

    run_heavy(&r, hc->tenants, hc->tq, hc->rounds);
    assert_serial_like(&r, (uint64_t)hc->rounds * (uint64_t)hc->tenants * hc->tq);
}

int main(void)
{
    static struct heavy_case cases[] = {
        {4, 100 * MS, 60},
        {8, 100 * MS, 60},
        {4, 30 * SEC, 40},
        {8, 30 * SEC, 40},
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trial_until_first_report_then_alone),
        cmocka_unit_test(test_measured_light_clients_still_co_run),
        cmocka_unit_test(test_no_trial_beside_paced_runners),
        cmocka_unit_test_prestate(test_heavy_tenants, &cases[0]),
        cmocka_unit_test_prestate(test_heavy_tenants, &cases[1]),
        cmocka_unit_test_prestate(test_heavy_tenants, &cases[2]),
        cmocka_unit_test_prestate(test_heavy_tenants, &cases[3]),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
