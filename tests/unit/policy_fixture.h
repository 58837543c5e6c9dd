/* policy_fixture.h - a policy with room for the tests' clients, and the
 * helpers the policy's tests share: each event starts from an empty `out`
 * and leaves the policy's answer there.
 *
 * Include after cmocka.h. The helpers without a GPU act on GPU 0, the only
 * one of most tests. */
#ifndef NVSHARE_POLICY_FIXTURE_H
#define NVSHARE_POLICY_FIXTURE_H

#include "policy_internal.h" /* the tests check the state they drive */

/* Client and account numbers the tests use stay below this; the tables
 * grow past it only where a test says so. */
#define TEST_TABLE_SIZE 512

/* count_on()'s wildcard for a GPU or a client. */
#define ANY (-1)

static struct policy p;
/* 100 KB: static, cleared before every event. */
static struct policy_actions out;

/* Starts p afresh, freeing the tables of the previous test's policy (a
 * zeroed static policy has none). */
static inline void policy_start(struct policy *p, int n_gpus, uint64_t tq_ns,
                                uint64_t drain_timeout_ns)
{
    policy_destroy(p);
    policy_init(p, n_gpus, tq_ns, drain_timeout_ns);
    assert_true(policy_grow(p, TEST_TABLE_SIZE));
}

static inline struct member *mem(int client)
{
    return &p.gpus[0].members[client];
}

static inline void request_on(int gpu, int client, uint64_t now)
{
    policy_actions_clear(&out);
    policy_request(&p, gpu, client, now, &out);
}

/* The client gives its current lease back. */
static inline void release_on(int gpu, int client, uint64_t now)
{
    policy_actions_clear(&out);
    policy_release(&p, gpu, client, p.gpus[gpu].members[client].lease, 0, 0,
                   now, &out);
}

static inline uint64_t tick(uint64_t now)
{
    policy_actions_clear(&out);
    return policy_tick(&p, now, &out);
}

/* How many actions of this kind `out` holds for client on gpu (either may
 * be ANY). */
static inline int count_on(enum action_kind kind, int gpu, int client)
{
    int n = 0;

    for (int i = 0; i < out.n; i++)
        n += out.list[i].kind == kind && (gpu == ANY || out.list[i].gpu == gpu) &&
             (client == ANY || out.list[i].client == client);
    return n;
}

static inline void request(int client, uint64_t now)
{
    request_on(0, client, now);
}

static inline void release(int client, uint64_t now)
{
    release_on(0, client, now);
}

static inline int count(enum action_kind kind, int client)
{
    return count_on(kind, ANY, client);
}

#endif
