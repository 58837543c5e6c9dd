/* test_host_memory.c - host-swap-budget auto, and the room for host copies
 * made ahead, from meminfo texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host_memory.h"

#define GiB (1ull << 30)

/* 64 GiB with 40 available: 10 % of 64 is the margin. */
static void test_margin_is_a_tenth_of_the_host(void **state)
{
    (void)state;
    assert_int_equal(host_swap_budget_of("MemTotal:       67108864 kB\n"
                                         "MemFree:         1000000 kB\n"
                                         "MemAvailable:   41943040 kB\n"),
                     40 * GiB - 64 * GiB / 10);
}

/* A small host keeps 2 GiB; one with less available gets no budget. */
static void test_margin_is_at_least_2gi(void **state)
{
    (void)state;
    assert_int_equal(host_swap_budget_of("MemTotal: 8388608 kB\n"
                                         "MemAvailable: 6291456 kB\n"),
                     4 * GiB);
    assert_int_equal(host_swap_budget_of("MemTotal: 8388608 kB\n"
                                         "MemAvailable: 1048576 kB\n"),
                     0);
}

/* Without both lines nothing is known: no budget is imposed. */
static void test_unknown_meminfo_sets_no_budget(void **state)
{
    (void)state;
    assert_true(host_swap_budget_of("MemTotal: 8388608 kB\n") ==
                HOST_SWAP_BUDGET_UNKNOWN);
    assert_true(host_swap_budget_of("") == HOST_SWAP_BUDGET_UNKNOWN);
    assert_true(host_swap_budget_auto("/nonexistent") == HOST_SWAP_BUDGET_UNKNOWN);
}

/* Copies made ahead come from free memory only: the page cache that
 * MemAvailable also counts stays. */
static void test_copies_ahead_use_free_memory_only(void **state)
{
    (void)state;
    assert_int_equal(host_free_room_of("MemTotal:       67108864 kB\n"
                                       "MemFree:        20971520 kB\n"
                                       "MemAvailable:   41943040 kB\n"),
                     20 * GiB - 64 * GiB / 10);
    assert_int_equal(host_free_room_of("MemTotal: 8388608 kB\n"
                                       "MemFree: 1048576 kB\n"
                                       "MemAvailable: 6291456 kB\n"),
                     0);
    assert_true(host_free_room_of("MemTotal: 8388608 kB\n"
                                  "MemAvailable: 6291456 kB\n") ==
                HOST_SWAP_BUDGET_UNKNOWN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_margin_is_a_tenth_of_the_host),
        cmocka_unit_test(test_margin_is_at_least_2gi),
        cmocka_unit_test(test_unknown_meminfo_sets_no_budget),
        cmocka_unit_test(test_copies_ahead_use_free_memory_only),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
