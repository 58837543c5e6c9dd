/* test_quota.c - pod memory quotas arbitrated by the scheduler. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "quota.h"

#define MiB (1ull << 20)
#define MS 1000000ull

static struct quota q;
static struct quota_actions out;

static int setup(void **state)
{
    (void)state;
    /* Frees the previous test's tables and actions (none at first). */
    quota_destroy(&q);
    quota_actions_free(&out);
    quota_init(&q, 2);
    assert_true(quota_grow(&q, 64));
    /* Clients 0, 1, 2 are pod 7; client 3 is pod 8. */
    for (int c = 0; c < 3; c++)
        quota_join(&q, 0, c, 7, &out);
    quota_join(&q, 0, 3, 8, &out);
    quota_set_limit(&q, 0, 7, 1024 * MiB, &out);
    out.n = 0;
    return 0;
}

/* Requests need/want for client and returns the bytes granted (0: refused;
 * -1: parked, no answer yet). */
static int64_t ask(int client, uint64_t need, uint64_t want, uint64_t allocated,
                   uint64_t now)
{
    out.n = 0;
    quota_request(&q, 0, client, 42, need, want, allocated, now, &out);
    for (int i = 0; i < out.n; i++) {
        if (out.list[i].client != client)
            continue;
        if (out.list[i].kind == QUOTA_GRANT)
            return (int64_t)out.list[i].bytes;
        if (out.list[i].kind == QUOTA_REFUSE)
            return 0;
    }
    return -1;
}

static void test_grant_up_to_quota_exactly(void **state)
{
    (void)state;
    assert_int_equal(ask(0, 1024 * MiB, 1024 * MiB, 0, 0), 1024 * MiB);
    quota_report(&q, 0, 0, 1024 * MiB);      /* all allocated */
    assert_int_equal(ask(1, 1, 1, 0, 0), 0); /* one byte over */
    assert_int_equal(q.gpus[0].accounts[7].refused, 1);
}

static void test_want_is_trimmed_to_room(void **state)
{
    (void)state;
    assert_int_equal(ask(0, 1000 * MiB, 1000 * MiB, 0, 0), 1000 * MiB);
    /* needs 10, would like 64 for credit: gets the 24 that are left */
    assert_int_equal(ask(1, 10 * MiB, 64 * MiB, 0, 0), 24 * MiB);
}

static void test_other_pods_are_independent(void **state)
{
    (void)state;
    assert_int_equal(ask(0, 1024 * MiB, 1024 * MiB, 0, 0), 1024 * MiB);
    /* pod 8 has no quota */
    assert_int_equal(ask(3, 4096 * MiB, 4096 * MiB, 0, 0), 4096 * MiB);
}

static void test_unused_credit_is_reclaimed_for_a_peer(void **state)
{
    (void)state;
    /* client 0 holds 800 with 500 allocated: 300 credit */
    assert_int_equal(ask(0, 800 * MiB, 800 * MiB, 0, 0), 800 * MiB);
    quota_report(&q, 0, 0, 500 * MiB);
    /* client 1 needs 400: 224 free + 300 reclaimable */
    assert_int_equal(ask(1, 400 * MiB, 400 * MiB, 0, 1 * MS), -1);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, QUOTA_RECLAIM);
    assert_int_equal(out.list[0].client, 0);
    /* client 0 gives its credit back: client 1 is granted */
    out.n = 0;
    quota_return(&q, 0, 0, 300 * MiB, 500 * MiB, 2 * MS, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, QUOTA_GRANT);
    assert_int_equal(out.list[0].client, 1);
    assert_int_equal(out.list[0].seq, 42);
    assert_true(out.list[0].bytes >= 400 * MiB);
    assert_true(quota_account_held(&q, 0, 7) <= 1024 * MiB);
}

static void test_parked_request_is_refused_at_deadline(void **state)
{
    (void)state;
    assert_int_equal(ask(0, 800 * MiB, 800 * MiB, 0, 0), 800 * MiB);
    quota_report(&q, 0, 0, 500 * MiB);
    assert_int_equal(ask(1, 400 * MiB, 400 * MiB, 0, 0), -1);
    out.n = 0;
    assert_int_equal(quota_tick(&q, 50 * MS, &out), QUOTA_RECLAIM_TIMEOUT_NS);
    assert_int_equal(out.n, 0);
    quota_tick(&q, QUOTA_RECLAIM_TIMEOUT_NS, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, QUOTA_REFUSE);
    assert_int_equal(q.n_parked, 0);
}

static void test_no_reclaim_when_it_cannot_help(void **state)
{
    (void)state;
    assert_int_equal(ask(0, 1000 * MiB, 1000 * MiB, 0, 0), 1000 * MiB);
    quota_report(&q, 0, 0, 990 * MiB);
    assert_int_equal(ask(1, 100 * MiB, 100 * MiB, 0, 0), 0); /* 24+10 < 100 */
}

static void test_leaving_client_frees_its_bytes(void **state)
{
    (void)state;
    assert_int_equal(ask(0, 1024 * MiB, 1024 * MiB, 0, 0), 1024 * MiB);
    out.n = 0;
    quota_leave(&q, 0, 1 * MS, &out);
    assert_int_equal(quota_account_held(&q, 0, 7), 0);
    assert_int_equal(ask(1, 1024 * MiB, 1024 * MiB, 0, 2 * MS), 1024 * MiB);
}

static void test_lowering_revokes_nothing(void **state)
{
    (void)state;
    assert_int_equal(ask(0, 800 * MiB, 800 * MiB, 0, 0), 800 * MiB);
    quota_report(&q, 0, 0, 800 * MiB);
    out.n = 0;
    quota_set_limit(&q, 0, 7, 512 * MiB, &out);
    /* every client of the pod is told, once, with what it is sent */
    assert_int_equal(out.n, 3);
    assert_int_equal(out.list[0].kind, QUOTA_LIMIT);
    assert_int_equal(out.list[0].quota, 512 * MiB);
    assert_int_equal(out.list[0].pod_held, 800 * MiB);
    assert_int_equal(ask(1, 1, 1, 0, 0), 0);
    /* frees bring the pod under the new quota: allocation works again */
    out.n = 0;
    quota_return(&q, 0, 0, 400 * MiB, 400 * MiB, 0, &out);
    assert_int_equal(ask(1, 100 * MiB, 100 * MiB, 0, 0), 100 * MiB);
    assert_int_equal(ask(1, 13 * MiB, 13 * MiB, 0, 0), 0);
}

static void test_raising_applies_to_next_request(void **state)
{
    (void)state;
    assert_int_equal(ask(0, 1024 * MiB, 1024 * MiB, 0, 0), 1024 * MiB);
    quota_report(&q, 0, 0, 1024 * MiB);
    assert_int_equal(ask(1, 1, 1, 0, 0), 0);
    quota_set_limit(&q, 0, 7, 2048 * MiB, &out);
    assert_int_equal(ask(1, 1024 * MiB, 1024 * MiB, 0, 0), 1024 * MiB);
}

static void test_peak_tracks_allocated_total(void **state)
{
    (void)state;
    quota_report(&q, 0, 0, 300 * MiB);
    quota_report(&q, 0, 1, 200 * MiB);
    quota_report(&q, 0, 0, 100 * MiB);
    assert_int_equal(q.gpus[0].accounts[7].peak, 500 * MiB);
    assert_int_equal(quota_account_allocated(&q, 0, 7), 300 * MiB);
}

/* Many racing requests at the boundary: the pod never holds more than its
 * quota, whatever the interleaving of requests, returns and departures. */
static void test_random_race_never_exceeds_quota(void **state)
{
    unsigned seed = 7;
    uint64_t now = 0;

    (void)state;
    for (int step = 0; step < 100000; step++) {
        int c = rand_r(&seed) % 3;
        struct quota_client *qc = &q.gpus[0].clients[c];
        uint64_t bytes = (uint64_t)(rand_r(&seed) % 300) * MiB;
        now += MS;
        out.n = 0;
        switch (rand_r(&seed) % 5) {
        case 0:
        case 1:
            quota_request(&q, 0, c, (uint32_t)step, bytes, bytes + 64 * MiB,
                          qc->allocated, now, &out);
            break;
        case 2:
            quota_return(&q, 0, c, bytes, qc->allocated / 2, now, &out);
            break;
        case 3:
            quota_tick(&q, now, &out);
            break;
        case 4:
            if (rand_r(&seed) % 50 == 0) {
                quota_leave(&q, c, now, &out);
                quota_join(&q, 0, c, 7, &out);
            }
            break;
        }
        assert_true(quota_account_held(&q, 0, 7) <= 1024 * MiB);
    }
}

/* No fixed limit: 1,500 clients of one pod (past the old 512 slots and the
 * old 1,024 actions a call could emit), the tables growing as they join;
 * a new quota reaches every one of them, and the pod's total is theirs. */
static void test_quota_of_1500_clients_reaches_them_all(void **state)
{
    enum { N = 1500, POD = 9 };
    int told = 0;

    (void)state;
    for (int c = 4; c < N; c++) {
        if (c == q.table_size)
            assert_true(quota_grow(&q, 2 * c));
        quota_join(&q, 1, c, POD, &out);
        quota_report(&q, 1, c, 1 * MiB);
    }
    out.n = 0;
    quota_set_limit(&q, 1, POD, 4096 * MiB, &out);
    assert_int_equal(out.lost, 0);
    assert_int_equal(out.n, N - 4);
    for (int i = 0; i < out.n; i++)
        told += out.list[i].kind == QUOTA_LIMIT &&
                out.list[i].quota == 4096 * MiB &&
                out.list[i].pod_held == (N - 4) * MiB;
    assert_int_equal(told, N - 4);
    assert_true(quota_account_held(&q, 1, POD) == (N - 4) * MiB);
}

/* A group (groups.h): client 3 of pod 8 moved to pod 7's account shares
 * its quota, with what it holds; moved back, it holds against 8 again. */
static void test_move_shares_the_quota(void **state)
{
    (void)state;
    assert_int_equal(ask(3, 768 * MiB, 768 * MiB, 0, 0), 768 * MiB);
    quota_report(&q, 0, 3, 768 * MiB); /* all allocated: no credit */
    out.n = 0;
    quota_move(&q, 0, 3, 7, &out);
    /* Everyone on pod 7's account is told its holding anew. */
    assert_int_equal(out.n, 4);
    for (int i = 0; i < out.n; i++) {
        assert_int_equal(out.list[i].kind, QUOTA_LIMIT);
        assert_int_equal(out.list[i].quota, 1024 * MiB);
        assert_int_equal(out.list[i].pod_held, 768 * MiB);
    }
    assert_int_equal(ask(0, 512 * MiB, 512 * MiB, 0, 0), 0);
    assert_int_equal(ask(0, 256 * MiB, 256 * MiB, 0, 0), 256 * MiB);
    quota_report(&q, 0, 0, 256 * MiB);
    out.n = 0;
    quota_move(&q, 0, 3, 8, &out);
    assert_int_equal(quota_account_held(&q, 0, 7), 256 * MiB);
    assert_int_equal(quota_account_held(&q, 0, 8), 768 * MiB);
    assert_int_equal(ask(1, 768 * MiB, 768 * MiB, 0, 0), 768 * MiB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_grant_up_to_quota_exactly, setup),
        cmocka_unit_test_setup(test_quota_of_1500_clients_reaches_them_all, setup),
        cmocka_unit_test_setup(test_want_is_trimmed_to_room, setup),
        cmocka_unit_test_setup(test_other_pods_are_independent, setup),
        cmocka_unit_test_setup(test_unused_credit_is_reclaimed_for_a_peer, setup),
        cmocka_unit_test_setup(test_parked_request_is_refused_at_deadline, setup),
        cmocka_unit_test_setup(test_no_reclaim_when_it_cannot_help, setup),
        cmocka_unit_test_setup(test_leaving_client_frees_its_bytes, setup),
        cmocka_unit_test_setup(test_lowering_revokes_nothing, setup),
        cmocka_unit_test_setup(test_raising_applies_to_next_request, setup),
        cmocka_unit_test_setup(test_peak_tracks_allocated_total, setup),
        cmocka_unit_test_setup(test_random_race_never_exceeds_quota, setup),
        cmocka_unit_test_setup(test_move_shares_the_quota, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
