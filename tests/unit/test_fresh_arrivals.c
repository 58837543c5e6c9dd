/* test_fresh_arrivals.c - a fresh arrival (a new job, a notebook's next
 * cell) beside busy jobs starts at once: the holder is cut short for it
 * after its slice, once per arrival, keeps the rest of its quantum, and
 * the busy jobs keep their throughput and their shares. Driven by a
 * synthetic clock, the last two by a simulation of the clients. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy_internal.h" /* checks the state it drives */
#include "policy_fixture.h"

#define US 1000ull
#define MS 1000000ull
#define SEC (1000 * MS)
#define TQ_PINNED (2 * SEC)
#define DRAIN_TIMEOUT (1 * SEC)
#define SLICE POLICY_FRESH_SLICE_NS
#define FLOOR POLICY_TQ_FLOOR_NS
#define DRAIN_OF_TEST (2 * MS) /* DROP to release in the tests by hand */

/* Serial (busy jobs run alone), auto TQ, sixteen clients, each its own
 * account. */
static int setup(void **state)
{
    (void)state;
    policy_start(&p, 1, POLICY_TQ_AUTO, DRAIN_TIMEOUT);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
    for (int c = 0; c < 16; c++)
        policy_join(&p, 0, c, c, 0);
    return 0;
}

/* Holder gives the GPU back at `at` after a DROP, and asks again at once
 * (a busy job); what the release granted is in `out`. */
static void release_and_ask_again(int holder, uint64_t at)
{
    struct policy_actions granted;

    release(holder, at);
    granted = out;
    request(holder, at);
    assert_int_equal(out.n, 0);
    out = granted;
}

/* Two busy jobs: client 0 from 0, client 1 from 1 ms, which arrives fresh
 * and has client 0 cut short after its slice. Returns when client 1 was
 * granted; client 0 waits, cut short, not fresh. */
static uint64_t two_busy_jobs(void)
{
    request(0, 0);
    request(1, 1 * MS);
    assert_true(mem(1)->fresh);
    assert_int_equal(tick(1 * MS), SLICE);
    tick(SLICE);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    release_and_ask_again(0, SLICE + 1 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1);
    assert_false(mem(0)->fresh);
    assert_true(mem(0)->cut_short);
    return SLICE + 1 * MS;
}

/* A fresh arrival beside a busy holder that has had its slice is granted
 * once the holder has drained. */
static void test_arrival_is_granted_within_the_slice(void **state)
{
    (void)state;
    uint64_t granted = two_busy_jobs();
    assert_int_equal(tick(granted), granted + FLOOR);

    request(2, granted + 50 * MS);
    assert_int_equal(p.gpus[0].queue[0], 2);
    tick(granted + 50 * MS);
    assert_int_equal(count(ACTION_DROP, 1), 1);
    assert_int_equal(out.n, 1);
    release_and_ask_again(1, granted + 52 * MS);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
    /* Client 1 keeps its turn, behind client 0 which was cut short before
     * it, and the rest of its quantum. */
    assert_int_equal(p.gpus[0].queue[0], 0);
    assert_int_equal(p.gpus[0].queue[1], 1);
    assert_int_equal(mem(1)->quantum_used_ns, 50 * MS);
}

/* A holder granted just before an arrival keeps its slice. */
static void test_holder_just_granted_keeps_its_slice(void **state)
{
    (void)state;
    uint64_t granted = two_busy_jobs();

    request(2, granted + 1 * MS);
    assert_int_equal(tick(granted + 1 * MS), granted + SLICE);
    assert_int_equal(out.n, 0);
    tick(granted + SLICE);
    assert_int_equal(count(ACTION_DROP, 1), 1);
    release_and_ask_again(1, granted + SLICE + DRAIN_OF_TEST);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
    /* It waited the rest of the slice and the drain. */
    assert_true(mem(2)->granted_at - (granted + 1 * MS) <= SLICE + DRAIN_OF_TEST);
}

/* A waiter that held the GPU a moment ago is not fresh: the holder keeps
 * its whole quantum for it. */
static void test_waiter_that_is_not_fresh_waits_the_quantum(void **state)
{
    (void)state;
    uint64_t granted = two_busy_jobs();

    assert_int_equal(tick(granted + 50 * MS), granted + FLOOR);
    assert_int_equal(out.n, 0);
    tick(granted + FLOOR);
    assert_int_equal(count(ACTION_DROP, 1), 1);
    assert_false(mem(1)->cut_short);
}

/* Freshness is the pod's (the account's): a process that reconnects, or
 * another process of a pod that has just run or runs now, is not fresh;
 * the pod is again once it has left the GPU alone for a second. */
static void test_new_client_of_a_busy_pod_is_not_fresh(void **state)
{
    (void)state;
    uint64_t granted = two_busy_jobs();

    policy_join(&p, 0, 8, 0, granted); /* client 0's pod: just ran */
    policy_join(&p, 0, 9, 1, granted); /* the holder's pod */
    request(8, granted + 10 * MS);
    request(9, granted + 10 * MS);
    assert_false(mem(8)->fresh);
    assert_false(mem(9)->fresh);
    assert_int_equal(tick(granted + 10 * MS), granted + FLOOR);
    /* Client 0's pod leaves the GPU: a second later it is new again. */
    policy_actions_clear(&out);
    policy_leave(&p, 0, granted + 11 * MS, &out);
    policy_leave(&p, 8, granted + 11 * MS, &out);
    policy_join(&p, 0, 10, 0, granted + 11 * MS);
    request(10, granted + 11 * MS + POLICY_FRESH_IDLE_NS);
    assert_true(mem(10)->fresh);
}

/* A quantum the operator pinned is never cut short: an arrival does not
 * come fresh under it, and one that came fresh before it was pinned cuts
 * nobody. */
static void test_pinned_quantum_is_never_cut(void **state)
{
    (void)state;
    request(0, 0);
    request(1, 1 * MS); /* fresh: it never held the GPU */
    assert_true(mem(1)->fresh);
    policy_set_tq(&p, TQ_PINNED);
    assert_int_equal(tick(50 * MS), TQ_PINNED);
    assert_int_equal(out.n, 0);
    request(2, 60 * MS);
    assert_false(mem(2)->fresh);
    assert_int_equal(tick(60 * MS), TQ_PINNED);
    assert_int_equal(out.n, 0);
}

/* Where hand-overs cost more the slice grows with the quantum (5 x the
 * mean hand-over), up to the TQ's floor. */
static void test_slice_grows_with_the_quantum(void **state)
{
    (void)state;
    assert_int_equal(pol_fresh_slice(FLOOR), SLICE);
    assert_int_equal(pol_fresh_slice(1100 * MS), 55 * MS);
    assert_int_equal(pol_fresh_slice(POLICY_TQ_CEILING_NS), FLOOR);
    /* Hand-overs of 4 ms: a quantum of 400 ms, a slice of 20 ms. */
    for (int i = 0; i < POLICY_HANDOVER_HISTORY; i++)
        pol_quantum_observe_handover(&p.gpus[0], 4 * MS);
    request(0, 0);
    request(2, 1 * MS);
    assert_int_equal(tick(1 * MS), 20 * MS);
}

/* Fresh arrivals one after another, each 1 ms after the previous one was
 * granted, each then busy: each cuts one holder short, once, after the
 * holder's slice from its grant, and those cut short wait in the order
 * they were cut: the busy job cut first goes first after the arrivals,
 * which cannot starve it. */
static void test_arrivals_in_a_row_do_not_starve_the_holder(void **state)
{
    (void)state;
    uint64_t now = two_busy_jobs() + 1 * MS;
    int holder = 1;

    for (int a = 2; a <= 6; a++) {
        request(a, now);
        uint64_t cut = mem(holder)->granted_at + SLICE;
        assert_int_equal(tick(now), cut);
        assert_int_equal(out.n, 0);
        tick(cut);
        assert_int_equal(count(ACTION_DROP, holder), 1);
        assert_int_equal(out.n, 1);
        release_and_ask_again(holder, cut + DRAIN_OF_TEST);
        assert_int_equal(count(ACTION_GRANT, a), 1);
        for (int i = 0; i < p.gpus[0].n_waiting; i++)
            assert_int_equal(p.gpus[0].queue[i], i);
        holder = a;
        now = mem(a)->granted_at + 1 * MS;
    }
    /* Nobody fresh waits: the last arrival keeps its quantum, then client
     * 0 has the rest of its own. */
    uint64_t granted = mem(6)->granted_at;
    assert_int_equal(tick(now), granted + FLOOR);
    tick(granted + FLOOR);
    release_and_ask_again(6, granted + FLOOR + DRAIN_OF_TEST);
    assert_int_equal(count(ACTION_GRANT, 0), 1);
    assert_int_equal(tick(mem(0)->granted_at),
                     mem(0)->granted_at + FLOOR - SLICE);
}

/* One hand-over per arrival: an arrival that had a holder cut for it, then
 * was passed over, cuts nobody granted since; it may cut a holder that
 * held when it asked. */
static void test_an_arrival_cuts_once(void **state)
{
    struct member waiter = {.present = true,
                            .state = MEMBER_WAITING,
                            .wait_reason = WAIT_LOCK,
                            .fresh = true,
                            .since = 100 * MS};
    struct member held_before = {.granted_at = 90 * MS},
                  granted_since = {.granted_at = 110 * MS};

    (void)state;
    assert_true(pol_cuts_short(&p, &waiter, &granted_since));
    waiter.fresh_cut = true;
    assert_false(pol_cuts_short(&p, &waiter, &granted_since));
    assert_true(pol_cuts_short(&p, &waiter, &held_before));
    waiter.wait_reason = WAIT_MEMORY;
    assert_false(pol_cuts_short(&p, &waiter, &held_before));
}

/* Where light clients share the GPU, an arrival that needs it alone cuts
 * short every holder that held it when it asked, each after its slice:
 * one hand-over. */
static void test_arrival_cuts_every_holder_that_held(void **state)
{
    (void)state;
    policy_set_mode(&p, 0, SCHED_MODE_AUTO);
    policy_set_load(&p, 0, 0, 100);
    policy_set_load(&p, 0, 1, 100);
    policy_set_load(&p, 0, 2, 900); /* heavy: it runs alone */
    request(0, 0);
    request(1, 48 * MS);
    assert_int_equal(count(ACTION_GRANT, 1), 1); /* beside client 0 */
    request(2, 50 * MS);
    assert_int_equal(tick(50 * MS), 48 * MS + SLICE);
    assert_int_equal(count(ACTION_DROP, 0), 1);
    assert_int_equal(out.n, 1);
    tick(48 * MS + SLICE);
    assert_int_equal(count(ACTION_DROP, 1), 1);
    release(0, 54 * MS);
    release(1, 55 * MS);
    assert_int_equal(count(ACTION_GRANT, 2), 1);
}

/* Two GPUs: a gang (client 0 on GPU 0, client 1 on GPU 1) and single-GPU
 * clients 4 (GPU 1), 5 and 6 (GPU 0), as in test_gang.c. */
static int setup_gang(void **state)
{
    static const int gang[] = {0, 0, -1, -1, -1, -1, -1};
    static const int gpu[] = {0, 1, 0, 0, 1, 0, 0};

    (void)state;
    policy_start(&p, 2, POLICY_TQ_AUTO, DRAIN_TIMEOUT);
    policy_set_mode(&p, -1, SCHED_MODE_SERIAL);
    for (int c = 0; c < 7; c++) {
        if (gang[c] >= 0)
            policy_set_gang(&p, c, gang[c]);
        policy_join(&p, gpu[c], c, c, 0);
        p.gpus[gpu[c]].members[c].requested = gang[c] >= 0;
    }
    p.gangs_spanning = 1;
    return 0;
}

/* An arrival passed over after its cut (a gang that waited longer took
 * the GPU) cuts nobody granted since: it waits the gang's quantum. */
static void test_arrival_passed_over_cuts_no_more(void **state)
{
    (void)state;
    request_on(0, 5, 0);
    request_on(1, 4, 0);
    /* The gang has had a turn just before: it does not arrive fresh. */
    p.gpus[0].ran_until[0] = p.gpus[1].ran_until[1] = 1;
    request_on(0, 0, 1 * MS);
    request_on(1, 1, 1 * MS);
    request_on(0, 6, 99 * MS); /* fresh */
    tick(99 * MS);
    assert_int_equal(count_on(ACTION_DROP, 0, 5), 1);
    tick(FLOOR); /* client 4's quantum ends */
    assert_int_equal(count_on(ACTION_DROP, 1, 4), 1);
    release_on(0, 5, FLOOR + 2 * MS);
    release_on(1, 4, FLOOR + 2 * MS);
    /* The gang waited longer than client 6, and its quantum: it goes. */
    assert_int_equal(count_on(ACTION_GRANT, 0, 0), 1);
    assert_int_equal(count_on(ACTION_GRANT, 1, 1), 1);
    assert_true(p.gpus[0].members[6].fresh_cut);
    assert_int_equal(tick(FLOOR + 3 * MS), FLOOR + 2 * MS + FLOOR);
    assert_int_equal(out.n, 0);
}

/* ---- a simulation of busy jobs and notebook cells ----------------------- */

#define DRAIN (2 * MS)      /* DROP to release: the holder's queued work */
#define GAP (300 * US)      /* grant to first submission: the hand-over */
#define CELL_WORK (10 * MS) /* GPU time of a cell */
#define N_ARRIVALS 20
#define RUN_END (8 * SEC)
#define WINDOW (5 * SEC)
#define MAX_SPANS 4096

/* What a client does next, at its `at`. */
enum pending { NONE, SUBMIT, RELEASE };

struct client {
    bool busy; /* else a notebook: a cell now and then */
    enum pending pending;
    uint64_t at;
    uint64_t work_left; /* of its cell */
    uint64_t ran_from;  /* its first submission of this hold; 0: none */
    bool arriving;      /* its cell asked, not granted yet */
    uint64_t asked_at;
};

/* Up to three busy jobs, then the notebooks, each back after ten cells. */
#define FIRST_NOTEBOOK 3
#define N_NOTEBOOKS 10
#define N_CLIENTS (FIRST_NOTEBOOK + N_NOTEBOOKS)
static struct client clients[N_CLIENTS];
/* GPU time each client used: from its first submission of a hold to its
 * release. */
static struct {
    int client;
    uint64_t from, to;
} spans[MAX_SPANS];
static int n_spans;
static uint64_t worst_wait; /* of a cell, from its arrival to its grant */
/* Cells arrive 250 ms apart, give or take 100 ms; every fourth one
 * sooner, 1 ms after the first grant to a busy job since the previous
 * cell arrived: just after a holder's grant, the worst case. */
static uint64_t arrivals[N_ARRIVALS];
static int arrived;
static bool timed; /* the next cell's time follows a grant */

/* Carries out the policy's answer, as the clients would. */
static void answer(uint64_t now)
{
    for (int i = 0; i < out.n; i++) {
        struct client *cl = &clients[out.list[i].client];
        if (out.list[i].kind == ACTION_GRANT) {
            if (cl->arriving && now - cl->asked_at > worst_wait)
                worst_wait = now - cl->asked_at;
            cl->arriving = false;
            if (cl->busy && arrived % 4 == 3 && !timed &&
                now + 1 * MS < arrivals[arrived]) {
                arrivals[arrived] = now + 1 * MS;
                timed = true;
            }
            cl->pending = SUBMIT;
            cl->at = now + GAP;
        } else if (out.list[i].kind == ACTION_DROP &&
                   !(cl->pending == RELEASE && cl->at < now + DRAIN)) {
            cl->pending = RELEASE;
            cl->at = now + DRAIN;
        }
    }
}

static void ask(int c, uint64_t now)
{
    request(c, now);
    answer(now);
}

/* A notebook's cell arrives. */
static void cell(int c, uint64_t now)
{
    assert_int_equal(mem(c)->state, MEMBER_IDLE);
    clients[c].work_left = CELL_WORK;
    clients[c].arriving = true;
    clients[c].asked_at = now;
    ask(c, now);
}

/* Client c's pending event, at now. */
static void step(int c, uint64_t now)
{
    struct client *cl = &clients[c];
    enum pending what = cl->pending;

    cl->pending = NONE;
    if (what == SUBMIT) {
        /* A cell gives the GPU back unasked when its work is done. */
        cl->ran_from = now;
        policy_in_use(&p, 0, c, mem(c)->lease, now, now);
        if (!cl->busy) {
            cl->pending = RELEASE;
            cl->at = now + cl->work_left;
        }
        return;
    }
    bool asked_back = mem(c)->state == MEMBER_DRAINING;
    uint64_t from = cl->ran_from ? cl->ran_from : now;
    assert_true(n_spans < MAX_SPANS);
    spans[n_spans].client = c;
    spans[n_spans].from = from;
    spans[n_spans++].to = now;
    cl->ran_from = 0;
    cl->work_left = cl->work_left > now - from ? cl->work_left - (now - from) : 0;
    release(c, now);
    answer(now);
    if (cl->busy || (asked_back && cl->work_left))
        ask(c, now);
}

/* GPU time client c used in [from, to). */
static uint64_t used_in(int c, uint64_t from, uint64_t to)
{
    uint64_t sum = 0;

    for (int i = 0; i < n_spans; i++) {
        uint64_t a = spans[i].from > from ? spans[i].from : from;
        uint64_t b = spans[i].to < to ? spans[i].to : to;
        if (spans[i].client == c && b > a)
            sum += b - a;
    }
    return sum;
}

/* n_busy busy jobs (clients 0 .. n_busy - 1) from time 0, and N_ARRIVALS
 * cells of the notebooks from 1 s on, each notebook back after more than a
 * second; the daemon ticks after every event and when the policy asks. */
static void simulate(int n_busy)
{
    uint64_t lcg = 12345, next_tick = 0, now = 0;

    arrived = 0;
    timed = false;
    memset(clients, 0, sizeof(clients));
    n_spans = 0;
    worst_wait = 0;
    for (int a = 0; a < N_ARRIVALS; a++) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        arrivals[a] = 1 * SEC + (uint64_t)a * 250 * MS + (lcg >> 33) % (100 * MS);
    }
    for (int c = 0; c < n_busy; c++) {
        clients[c].busy = true;
        ask(c, c * US);
    }
    for (int events = 0;; events++) {
        uint64_t at = next_tick ? next_tick : UINT64_MAX;
        int who = -1;
        for (int c = 0; c < N_CLIENTS; c++)
            if (clients[c].pending != NONE && clients[c].at < at) {
                at = clients[c].at;
                who = c;
            }
        bool arrival = arrived < N_ARRIVALS && arrivals[arrived] < at;
        if (arrival)
            at = arrivals[arrived];
        if (at >= RUN_END)
            break;
        assert_true(at >= now);
        now = at;
        assert_true(events < 100000);
        if (arrival) {
            cell(FIRST_NOTEBOOK + arrived++ % N_NOTEBOOKS, at);
            timed = false;
        } else if (who >= 0)
            step(who, at);
        next_tick = tick(at);
        answer(at);
    }
    /* What runs at the end ran until then. */
    for (int c = 0; c < N_CLIENTS; c++)
        if (clients[c].ran_from && pol_running(mem(c))) {
            spans[n_spans].client = c;
            spans[n_spans].from = clients[c].ran_from;
            spans[n_spans++].to = RUN_END;
        }
}

/* Busy holders keep >= 99 % of what the cells leave them, each its fair
 * share within 3 points in every 5 s window, and no cell waits longer
 * than the slice and the holder's drain. */
static void check_busy_jobs_beside_cells(int n_busy)
{
    simulate(n_busy);
    assert_true(worst_wait <= SLICE + DRAIN);
    /* The first kernel within native + 10 ms. */
    assert_true(worst_wait + GAP <= 10 * MS);
    for (uint64_t from = 1 * SEC; from + WINDOW <= RUN_END; from += 100 * MS) {
        uint64_t to = from + WINDOW, busy = 0, cells = 0;
        for (int c = 0; c < N_CLIENTS; c++) {
            uint64_t used = used_in(c, from, to);
            if (c < n_busy)
                busy += used;
            else
                cells += used;
        }
        assert_true(cells >= N_ARRIVALS / 2 * CELL_WORK);
        assert_true(busy * 100 >= (WINDOW - cells) * 99);
        for (int c = 0; c < n_busy; c++) {
            uint64_t share = used_in(c, from, to) * 1000 / busy;
            uint64_t fair = 1000 / (uint64_t)n_busy;
            assert_true(share + 30 >= fair && share <= fair + 30);
        }
    }
}

static void test_cells_beside_one_busy_job(void **state)
{
    (void)state;
    check_busy_jobs_beside_cells(1);
}

static void test_cells_beside_three_busy_jobs(void **state)
{
    (void)state;
    check_busy_jobs_beside_cells(3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_arrival_is_granted_within_the_slice, setup),
        cmocka_unit_test_setup(test_holder_just_granted_keeps_its_slice, setup),
        cmocka_unit_test_setup(test_waiter_that_is_not_fresh_waits_the_quantum,
                               setup),
        cmocka_unit_test_setup(test_new_client_of_a_busy_pod_is_not_fresh, setup),
        cmocka_unit_test_setup(test_pinned_quantum_is_never_cut, setup),
        cmocka_unit_test_setup(test_slice_grows_with_the_quantum, setup),
        cmocka_unit_test_setup(test_arrivals_in_a_row_do_not_starve_the_holder,
                               setup),
        cmocka_unit_test_setup(test_an_arrival_cuts_once, setup),
        cmocka_unit_test_setup(test_arrival_cuts_every_holder_that_held, setup),
        cmocka_unit_test_setup(test_arrival_passed_over_cuts_no_more, setup_gang),
        cmocka_unit_test_setup(test_cells_beside_one_busy_job, setup),
        cmocka_unit_test_setup(test_cells_beside_three_busy_jobs, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
