/* test_accounts.c - pods as accounts: which actions attach, detach and
 * run-time limits return, and the values they carry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "accounts.h"

#define MiB (1ull << 20)

#define N_ACCOUNTS 64
static struct account accounts[N_ACCOUNTS];

static int setup(void **state)
{
    (void)state;
    memset(accounts, 0, sizeof(accounts));
    return 0;
}

static struct msg_register pod(const char *name, uint8_t core, uint64_t memory)
{
    struct msg_register reg = {.core_limit = core, .memory_limit = memory};

    strcpy(reg.pod_namespace, "ns");
    strcpy(reg.pod_name, name);
    return reg;
}

static void test_new_account_is_reset_then_limited(void **state)
{
    struct msg_register reg = pod("a", 30, 512 * MiB);
    struct account_actions out = {0};

    (void)state;
    int a = account_attach(accounts, N_ACCOUNTS, &reg, &out);
    assert_int_equal(out.n, 2);
    assert_int_equal(out.list[0].kind, ACCOUNT_RESET);
    assert_int_equal(out.list[0].account, a);
    assert_int_equal(out.list[1].kind, ACCOUNT_LIMITS);
    assert_int_equal(out.list[1].core_limit, 30);
    assert_int_equal(out.list[1].memory_limit, 512 * MiB);
}

static void test_pod_shares_one_account(void **state)
{
    struct msg_register reg = pod("a", 30, 0), other = pod("b", 0, 0);
    struct account_actions out = {0};

    (void)state;
    int a = account_attach(accounts, N_ACCOUNTS, &reg, &out);
    out.n = 0;
    /* the same declaration again: nothing to tell */
    assert_int_equal(account_attach(accounts, N_ACCOUNTS, &reg, &out), a);
    assert_int_equal(out.n, 0);
    assert_int_not_equal(account_attach(accounts, N_ACCOUNTS, &other, &out), a);
    /* a different declaration updates the pod's limits */
    out.n = 0;
    reg.core_limit = 40;
    assert_int_equal(account_attach(accounts, N_ACCOUNTS, &reg, &out), a);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, ACCOUNT_LIMITS);
    assert_int_equal(out.list[0].core_limit, 40);
}

static void test_runtime_limit_wins_and_falls_back(void **state)
{
    struct msg_register reg = pod("a", 30, 512 * MiB);
    struct account_actions out = {0};
    uint8_t source;

    (void)state;
    int a = account_attach(accounts, N_ACCOUNTS, &reg, &out);
    out.n = 0;
    account_set_runtime(accounts, a, false, 2048 * MiB, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].core_limit, 30);
    assert_int_equal(out.list[0].memory_limit, 2048 * MiB);
    assert_int_equal(limit_effective(&accounts[a].memory, &source), 2048 * MiB);
    assert_int_equal(source, LIMIT_RUNTIME);
    out.n = 0;
    account_set_runtime(accounts, a, false, 0, &out);
    assert_int_equal(out.list[0].memory_limit, 512 * MiB);
    assert_int_equal(limit_effective(&accounts[a].memory, &source), 512 * MiB);
    assert_int_equal(source, LIMIT_DECLARED);
}

static void test_last_detach_resets(void **state)
{
    struct msg_register reg = pod("a", 0, 0);
    struct account_actions out = {0};

    (void)state;
    int a = account_attach(accounts, N_ACCOUNTS, &reg, &out);
    account_attach(accounts, N_ACCOUNTS, &reg, &out);
    out.n = 0;
    account_detach(accounts, a, &out);
    assert_int_equal(out.n, 0);
    account_detach(accounts, a, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, ACCOUNT_RESET);
    assert_int_equal(out.list[0].account, a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_new_account_is_reset_then_limited, setup),
        cmocka_unit_test_setup(test_pod_shares_one_account, setup),
        cmocka_unit_test_setup(test_runtime_limit_wins_and_falls_back, setup),
        cmocka_unit_test_setup(test_last_detach_resets, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
