/* test_groups.c - account groups (groups.h): what a group may be, which
 * pods it bills on which GPU, and the account its clients share
 * (accounts.h): found by name, limited on its GPU alone, freed with its
 * last client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "accounts.h"
#include "groups.h"

#define GiB (1ull << 30)
#define N_ACCOUNTS 16

static struct group_table t;
static struct account accounts[N_ACCOUNTS];
static char err[256];

static int setup(void **state)
{
    (void)state;
    memset(&t, 0, sizeof(t));
    memset(accounts, 0, sizeof(accounts));
    return 0;
}

static struct pod_id uid(const char *u)
{
    struct pod_id id = {0};

    snprintf(id.uid, sizeof(id.uid), "%.36s", u);
    return id;
}

static struct group group(const char *name, int gpu, const char *a, const char *b)
{
    struct group g = {.gpu = gpu, .memory = 4 * GiB, .core = 30};

    snprintf(g.name, sizeof(g.name), "%s", name);
    g.members[g.n_members++] = uid(a);
    if (b)
        g.members[g.n_members++] = uid(b);
    return g;
}

static void test_members_are_billed_on_its_gpu_only(void **state)
{
    struct group g = group("claim-1", 0, "pod-a", "pod-b");
    struct pod_id a = uid("pod-a"), c = uid("pod-c"), none = {0};

    (void)state;
    assert_int_equal(groups_set(&t, &g, err, sizeof(err)), 0);
    assert_int_equal(groups_of(&t, &a, 0), 0);
    assert_int_equal(groups_of(&t, &a, 1), -1);
    assert_int_equal(groups_of(&t, &c, 0), -1);
    assert_int_equal(groups_of(&t, &none, 0), -1);
    /* Replaced by name: the same group, now on GPU 1. */
    g.gpu = 1;
    assert_int_equal(groups_set(&t, &g, err, sizeof(err)), 0);
    assert_int_equal(t.n, 1);
    assert_int_equal(groups_of(&t, &a, 0), -1);
    assert_int_equal(groups_of(&t, &a, 1), 0);
    assert_true(groups_remove(&t, "claim-1"));
    assert_false(groups_remove(&t, "claim-1"));
    assert_int_equal(groups_of(&t, &a, 1), -1);
}

static void test_bad_groups_are_refused(void **state)
{
    struct group g = group("claim-1", 0, "pod-a", "pod-b");
    struct group twice = group("claim-2", 0, "pod-c", "pod-c");
    struct group overlap = group("claim-3", 0, "pod-b", "pod-c");
    struct group elsewhere = group("claim-3", 1, "pod-b", "pod-c");
    struct group bad_name = group("a b", 0, "pod-d", NULL);
    struct group no_name = group("", 0, "pod-d", NULL);
    struct group over = group("claim-4", 0, "pod-d", NULL);
    struct group empty = group("claim-5", 0, "pod-d", NULL);

    (void)state;
    over.core = 101;
    empty.n_members = 0;
    assert_int_equal(groups_set(&t, &g, err, sizeof(err)), 0);
    assert_int_equal(groups_set(&t, &twice, err, sizeof(err)), -1);
    assert_int_equal(groups_set(&t, &overlap, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "pod-b"));
    assert_int_equal(groups_set(&t, &bad_name, err, sizeof(err)), -1);
    assert_int_equal(groups_set(&t, &no_name, err, sizeof(err)), -1);
    assert_int_equal(groups_set(&t, &over, err, sizeof(err)), -1);
    assert_int_equal(groups_set(&t, &empty, err, sizeof(err)), -1);
    assert_int_equal(t.n, 1);
    /* One group a pod per GPU: on another GPU it may be in another. */
    assert_int_equal(groups_set(&t, &elsewhere, err, sizeof(err)), 0);
    for (int i = t.n; i < GROUP_MAX; i++) {
        struct group more = group("x", 2, "pod-z", NULL);
        snprintf(more.name, sizeof(more.name), "more-%d", i);
        more.members[0] = uid(more.name);
        assert_int_equal(groups_set(&t, &more, err, sizeof(err)), 0);
    }
    struct group full = group("one-more", 2, "pod-y", NULL);
    assert_int_equal(groups_set(&t, &full, err, sizeof(err)), -1);
    assert_int_equal(t.n, GROUP_MAX);
}

static void test_clients_share_the_group_account(void **state)
{
    struct group g = group("claim-1", 2, "pod-a", "pod-b");
    struct account_actions out = {0};

    (void)state;
    int a = account_attach_group(accounts, N_ACCOUNTS, &g, &out);
    assert_int_equal(out.n, 2);
    assert_int_equal(out.list[0].kind, ACCOUNT_RESET);
    assert_int_equal(out.list[1].kind, ACCOUNT_LIMITS);
    /* Its limits on its GPU alone. */
    assert_int_equal(out.list[1].core_limit[2], 30);
    assert_int_equal(out.list[1].memory_limit[2], 4 * GiB);
    assert_int_equal(out.list[1].core_limit[0], 0);
    assert_int_equal(out.list[1].memory_limit[0], 0);
    out.n = 0;
    assert_int_equal(account_attach_group(accounts, N_ACCOUNTS, &g, &out), a);
    assert_int_equal(out.n, 0);
    assert_int_equal(account_of_group(accounts, N_ACCOUNTS, "claim-1"), a);
    /* No pod's account is the group's. */
    struct pod_id pod = uid("pod-a");
    assert_int_equal(account_of_pod(accounts, N_ACCOUNTS, &pod), -1);
    g.core = 50;
    g.memory = 6 * GiB;
    account_set_group(accounts, a, &g, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].core_limit[2], 50);
    assert_int_equal(out.list[0].memory_limit[2], 6 * GiB);
    out.n = 0;
    account_detach(accounts, a, &out);
    assert_int_equal(out.n, 0);
    account_detach(accounts, a, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, ACCOUNT_RESET);
    assert_int_equal(account_of_group(accounts, N_ACCOUNTS, "claim-1"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_members_are_billed_on_its_gpu_only, setup),
        cmocka_unit_test_setup(test_bad_groups_are_refused, setup),
        cmocka_unit_test_setup(test_clients_share_the_group_account, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
