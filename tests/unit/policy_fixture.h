/* policy_fixture.h - a policy with room for the tests' clients.
 *
 * Include after cmocka.h and policy.h. */
#ifndef NVSHARE_POLICY_FIXTURE_H
#define NVSHARE_POLICY_FIXTURE_H

/* Client and account numbers the tests use stay below this; the tables
 * grow past it only where a test says so. */
#define TEST_TABLE_SIZE 512

/* Starts p afresh, freeing the tables of the previous test's policy (a
 * zeroed static policy has none). */
static inline void policy_start(struct policy *p, int n_gpus, uint64_t tq_ns,
                                uint64_t drain_timeout_ns)
{
    policy_destroy(p);
    policy_init(p, n_gpus, tq_ns, drain_timeout_ns);
    assert_true(policy_grow(p, TEST_TABLE_SIZE));
}

#endif
