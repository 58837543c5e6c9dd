/* test_unhooked.c - which of NVML's processes unhooked.c reports: not a
 * client, not the scheduler, not an invisible pid; only once seen in two
 * samples in a row; once however often it is seen (and however many times
 * one sample lists it); forgotten when a sample lacks it. The "processes"
 * are children of the test, which pause until it ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scheduler.h"

#define N_CHILDREN (UNHOOKED_MAX + 2)

static struct scheduler sched;
#define N_SLOTS 16
static struct client slots[N_SLOTS];
static struct client *slot_table[N_SLOTS];
static pid_t children[N_CHILDREN];

static int setup(void **state)
{
    (void)state;
    memset(&sched, 0, sizeof(sched));
    memset(slots, 0, sizeof(slots));
    for (int i = 0; i < N_SLOTS; i++)
        slot_table[i] = &slots[i];
    sched.clients = slot_table;
    sched.table_size = N_SLOTS;
    sched.n_gpus = 2;
    for (int i = 0; i < N_CHILDREN; i++) {
        if ((children[i] = fork()) == 0) {
            pause();
            _exit(0);
        }
        if (children[i] < 0)
            return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < N_CHILDREN; i++) {
        kill(children[i], SIGKILL);
        waitpid(children[i], NULL, 0);
    }
    return 0;
}

/* One sample of gpu listing pids (each with 1 MiB per position). */
static void sample(int gpu, const pid_t *pids, unsigned n)
{
    nvmlProcessInfo_t procs[N_CHILDREN + 4] = {0};

    for (unsigned i = 0; i < n; i++)
        procs[i] = (nvmlProcessInfo_t){(unsigned)pids[i], (i + 1ull) << 20, 0, 0};
    unhooked_observe(&sched, gpu, procs, n, 0);
}

static void test_twice_in_a_row_then_once(void **state)
{
    pid_t a = children[0];

    (void)state;
    sample(0, &a, 1);
    assert_int_equal(unhooked_count(&sched), 0); /* may still be connecting */
    assert_int_equal(sched.unhooked_seen, 0);
    sample(0, &a, 1);
    assert_int_equal(unhooked_count(&sched), 1);
    assert_int_equal(sched.unhooked_seen, 1);
    assert_int_equal(sched.unhooked[0][0].pid, a);
    assert_true(sched.unhooked[0][0].used == 1 << 20);
    sample(0, &a, 1);
    assert_int_equal(sched.unhooked_seen, 1); /* reported once */
    sample(0, NULL, 0);
    assert_int_equal(unhooked_count(&sched), 0);
    assert_int_equal(sched.n_unhooked[0], 0);
    sample(0, &a, 1);
    sample(0, NULL, 0); /* gone before its second sample: never reported */
    sample(0, &a, 1);
    assert_int_equal(unhooked_count(&sched), 0);
    assert_int_equal(sched.unhooked_seen, 1);
    sample(0, NULL, 0);
}

static void test_clients_self_and_invisible_are_not_unhooked(void **state)
{
    pid_t pids[] = {children[1], getpid(), 0, 0x3ffffff0, children[2]};

    (void)state;
    slots[7] = (struct client){.used = true, .pid = children[1]};
    slots[9] = (struct client){.used = true, .pid = children[2]}; /* connecting */
    sample(1, pids, 5);
    sample(1, pids, 5);
    assert_int_equal(unhooked_count(&sched), 0);
    assert_int_equal(sched.n_unhooked[1], 0);
    slots[9].used = false; /* it left, and its process goes on */
    sample(1, pids, 5);
    sample(1, pids, 5);
    assert_int_equal(unhooked_count(&sched), 1);
    assert_int_equal(sched.unhooked[1][0].pid, children[2]);
    slots[7].used = false;
    sample(1, NULL, 0);
}

/* Compute and graphics lists name a process twice; GPUs keep their own. */
static void test_duplicates_and_gpus(void **state)
{
    pid_t pids[] = {children[3], children[3], children[4]};

    (void)state;
    uint64_t before = sched.unhooked_seen;
    sample(0, pids, 3);
    sample(1, pids + 2, 1);
    sample(0, pids, 3);
    sample(1, pids + 2, 1);
    assert_int_equal(sched.n_unhooked[0], 2);
    assert_int_equal(sched.n_unhooked[1], 1);
    assert_int_equal(unhooked_count(&sched), 3);
    assert_true(sched.unhooked_seen == before + 3);
    sample(0, NULL, 0);
    sample(1, NULL, 0);
}

/* Beyond UNHOOKED_MAX a GPU's extra processes are not tracked. */
static void test_more_than_tracked(void **state)
{
    (void)state;
    sample(0, children, N_CHILDREN);
    sample(0, children, N_CHILDREN);
    assert_int_equal(sched.n_unhooked[0], UNHOOKED_MAX);
    assert_int_equal(unhooked_count(&sched), UNHOOKED_MAX);
    sample(0, children + 2, N_CHILDREN - 2); /* two go: room for two more */
    sample(0, children + 2, N_CHILDREN - 2);
    assert_int_equal(sched.n_unhooked[0], UNHOOKED_MAX);
    sample(0, NULL, 0);
    assert_int_equal(unhooked_count(&sched), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twice_in_a_row_then_once),
        cmocka_unit_test(test_clients_self_and_invisible_are_not_unhooked),
        cmocka_unit_test(test_duplicates_and_gpus),
        cmocka_unit_test(test_more_than_tracked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
