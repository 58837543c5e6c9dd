/* test_accounts.c - pods as accounts: which actions attach, detach and
 * operator limits return; a declared limit only ever lowers the operator's;
 * who may join a plain-host pod (pods.c); and the precedence of a
 * Kubernetes pod's sources: annotation, operator's override, request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accounts.h"
#include "pods.h"

#define MiB (1ull << 20)

#define N_ACCOUNTS 64
static struct account accounts[N_ACCOUNTS];

static int setup(void **state)
{
    (void)state;
    memset(accounts, 0, sizeof(accounts));
    return 0;
}

static struct pod_id named(const char *ns, const char *name)
{
    struct pod_id id = {0};

    strcpy(id.pod_namespace, ns);
    strcpy(id.pod_name, name);
    return id;
}

static struct account_claim pod(const char *name, uint8_t core, uint64_t memory)
{
    struct account_claim claim = {.pod = named("ns", name),
                                  .core_declared = core,
                                  .memory_declared = memory};
    return claim;
}

static void test_new_account_is_reset_then_limited(void **state)
{
    struct account_claim claim = pod("a", 30, 512 * MiB);
    struct account_actions out = {0};

    (void)state;
    int a = account_attach(accounts, N_ACCOUNTS, &claim, &out);
    assert_int_equal(out.n, 2);
    assert_int_equal(out.list[0].kind, ACCOUNT_RESET);
    assert_int_equal(out.list[0].account, a);
    assert_int_equal(out.list[1].kind, ACCOUNT_LIMITS);
    assert_int_equal(out.list[1].core_limit[0], 30);
    assert_int_equal(out.list[1].memory_limit[0], 512 * MiB);
}

static void test_declarations_only_lower(void **state)
{
    struct account_claim claim = pod("a", 30, 0), other = pod("b", 0, 0);
    struct account_actions out = {0};

    (void)state;
    int a = account_attach(accounts, N_ACCOUNTS, &claim, &out);
    out.n = 0;
    /* the same declaration again: nothing to tell */
    assert_int_equal(account_attach(accounts, N_ACCOUNTS, &claim, &out), a);
    assert_int_equal(out.n, 0);
    assert_int_not_equal(account_attach(accounts, N_ACCOUNTS, &other, &out), a);
    out.n = 0;
    /* a higher declaration, or none, changes nothing */
    claim.core_declared = 90;
    assert_int_equal(account_attach(accounts, N_ACCOUNTS, &claim, &out), a);
    claim.core_declared = 0;
    assert_int_equal(account_attach(accounts, N_ACCOUNTS, &claim, &out), a);
    assert_int_equal(out.n, 0);
    /* a lower one lowers the pod's limit */
    claim.core_declared = 20;
    assert_int_equal(account_attach(accounts, N_ACCOUNTS, &claim, &out), a);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, ACCOUNT_LIMITS);
    assert_int_equal(out.list[0].core_limit[0], 20);
}

/* A declared priority (NVSHARE_PRIORITY) only lowers the pod's class: with
 * nothing set the class is normal, and a declared high leaves it there. */
static void test_declared_priority_only_lowers(void **state)
{
    struct account_claim claim = pod("a", 0, 0);
    struct account_actions out = {0};
    uint8_t source;

    (void)state;
    claim.priority_declared = PRIORITY_HIGH;
    int a = account_attach(accounts, N_ACCOUNTS, &claim, &out);
    assert_int_equal(out.list[1].priority, PRIORITY_NORMAL);
    assert_int_equal(priority_effective(&accounts[a].priority, &source),
                     PRIORITY_NORMAL);
    assert_int_equal(source, LIMIT_NONE);
    out.n = 0;
    account_set_runtime(accounts, a, POD_PRIORITY, -1, PRIORITY_HIGH, &out);
    assert_int_equal(out.list[0].priority, PRIORITY_HIGH);
    out.n = 0;
    claim.priority_declared = PRIORITY_LOW; /* a second process lowers it */
    assert_int_equal(account_attach(accounts, N_ACCOUNTS, &claim, &out), a);
    assert_int_equal(out.list[0].priority, PRIORITY_LOW);
    assert_int_equal(priority_effective(&accounts[a].priority, &source),
                     PRIORITY_LOW);
    assert_int_equal(source, LIMIT_DECLARED);
    out.n = 0;
    account_set_runtime(accounts, a, POD_MIN_SHARE, -1, 10, &out);
    assert_int_equal(out.list[0].min_share, 10);
}

static void test_operator_limit_cannot_be_lifted(void **state)
{
    struct account_claim claim = pod("a", 0, 0);
    struct account_actions out = {0};
    uint8_t source;

    struct pod record = {.core_limit = 20, .memory_limit = 1024 * MiB};

    (void)state;
    claim.record = &record;
    int a = account_attach(accounts, N_ACCOUNTS, &claim, &out);
    assert_int_equal(out.list[1].core_limit[0], 20);
    assert_int_equal(out.list[1].memory_limit[0], 1024 * MiB);
    /* a client declaring more gets the operator's */
    claim = pod("a", 100, 8192 * MiB);
    out.n = 0;
    assert_int_equal(account_attach(accounts, N_ACCOUNTS, &claim, &out), a);
    assert_int_equal(limit_effective(&accounts[a].core, &source), 20);
    assert_int_equal(source, LIMIT_RUNTIME);
    assert_int_equal(limit_effective(&accounts[a].memory, &source), 1024 * MiB);
    /* one declaring less lowers it */
    claim = pod("a", 10, 0);
    assert_int_equal(account_attach(accounts, N_ACCOUNTS, &claim, &out), a);
    assert_int_equal(limit_effective(&accounts[a].core, &source), 10);
    assert_int_equal(source, LIMIT_DECLARED);
    /* the operator raising the limit keeps the lower declaration */
    out.n = 0;
    account_set_runtime(accounts, a, POD_CORE_LIMIT, -1, 50, &out);
    assert_int_equal(out.list[0].core_limit[0], 10);
    /* and lowering it below wins */
    out.n = 0;
    account_set_runtime(accounts, a, POD_CORE_LIMIT, -1, 5, &out);
    assert_int_equal(out.list[0].core_limit[0], 5);
    assert_int_equal(limit_effective(&accounts[a].core, &source), 5);
    assert_int_equal(source, LIMIT_RUNTIME);
}

static void test_runtime_limit_removed_leaves_declared(void **state)
{
    struct account_claim claim = pod("a", 30, 512 * MiB);
    struct account_actions out = {0};
    uint8_t source;

    (void)state;
    int a = account_attach(accounts, N_ACCOUNTS, &claim, &out);
    out.n = 0;
    account_set_runtime(accounts, a, POD_MEMORY_LIMIT, -1, 256 * MiB, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].core_limit[0], 30);
    assert_int_equal(out.list[0].memory_limit[0], 256 * MiB);
    out.n = 0;
    account_set_runtime(accounts, a, POD_MEMORY_LIMIT, -1, 0, &out);
    assert_int_equal(out.list[0].memory_limit[0], 512 * MiB);
    assert_int_equal(limit_effective(&accounts[a].memory, &source), 512 * MiB);
    assert_int_equal(source, LIMIT_DECLARED);
}

/* A pod's limits on one GPU (its DRA claims' share there) hold on that
 * GPU; the ones for every GPU hold on the others. */
static void test_limits_per_gpu(void **state)
{
    struct account_claim claim = pod("a", 0, 0);
    struct account_actions out = {0};
    struct pod record = {.core_limit = 25, .memory_limit = 4096 * MiB};

    (void)state;
    record.gpu_core_limit[1] = 10;
    record.gpu_memory_limit[1] = 2048 * MiB;
    claim.record = &record;
    int a = account_attach(accounts, N_ACCOUNTS, &claim, &out);
    assert_int_equal(out.list[1].core_limit[0], 25);
    assert_int_equal(out.list[1].memory_limit[0], 4096 * MiB);
    assert_int_equal(out.list[1].core_limit[1], 10);
    assert_int_equal(out.list[1].memory_limit[1], 2048 * MiB);
    assert_int_equal(out.list[1].core_limit[2], 25);
    /* Removed on GPU 1: the pod's limit for every GPU holds there again. */
    record.gpu_core_limit[1] = 0;
    record.gpu_memory_limit[1] = 0;
    out.n = 0;
    account_set_pod(accounts, a, &record, &out);
    assert_int_equal(out.list[0].core_limit[1], 25);
    assert_int_equal(out.list[0].memory_limit[1], 4096 * MiB);
    /* A client without a pod is set GPU by GPU the same way. */
    struct account_claim none = {0};
    out.n = 0;
    int b = account_attach(accounts, N_ACCOUNTS, &none, &out);
    out.n = 0;
    account_set_runtime(accounts, b, POD_CORE_LIMIT, 0, 30, &out);
    assert_int_equal(out.list[0].core_limit[0], 30);
    assert_int_equal(out.list[0].core_limit[1], 0);
}

static void test_clients_without_pod_are_apart(void **state)
{
    struct account_claim none = {0};
    struct account_actions out = {0};

    (void)state;
    int a = account_attach(accounts, N_ACCOUNTS, &none, &out);
    out.n = 0; /* the list holds one call's actions */
    assert_int_not_equal(account_attach(accounts, N_ACCOUNTS, &none, &out), a);
    assert_int_equal(account_of_pod(accounts, N_ACCOUNTS, &none.pod), -1);
}

static void test_last_detach_resets(void **state)
{
    struct account_claim claim = pod("a", 0, 0);
    struct account_actions out = {0};

    (void)state;
    int a = account_attach(accounts, N_ACCOUNTS, &claim, &out);
    account_attach(accounts, N_ACCOUNTS, &claim, &out);
    out.n = 0;
    account_detach(accounts, a, &out);
    assert_int_equal(out.n, 0);
    account_detach(accounts, a, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].kind, ACCOUNT_RESET);
    assert_int_equal(out.list[0].account, a);
    assert_int_equal(account_of_pod(accounts, N_ACCOUNTS, &claim.pod), -1);
}

/* pods.c: a plain-host pod belongs to the uid that declared it first. */
static void test_pod_bound_to_first_uid(void **state)
{
    struct pod_table t = {0};
    struct pod_id id = named("ns", "victim");
    struct pod *p;
    uint32_t owner;

    (void)state;
    assert_int_equal(pods_join(&t, &id, 1000, &p, &owner), 0);
    assert_true(p->bound);
    assert_int_equal(p->owner, 1000);
    assert_int_equal(pods_join(&t, &id, 1001, &p, &owner), -1);
    assert_int_equal(owner, 1000);
    /* root may join any pod; the owner again too */
    assert_int_equal(pods_join(&t, &id, 0, &p, &owner), 0);
    assert_int_equal(pods_join(&t, &id, 1000, &p, &owner), 0);
    assert_int_equal(p->clients, 3);
    pods_free(&t);
}

static void test_unconfigured_pod_forgotten_configured_kept(void **state)
{
    struct pod_table t = {0};
    struct pod_id a = named("ns", "a"), b = named("ns", "b");
    struct pod *p;
    uint32_t owner;
    bool failed;

    (void)state;
    pods_join(&t, &a, 1000, &p, &owner);
    pods_leave(&t, &a);
    assert_null(pods_find(&t, &a));
    /* a limit set before the pod connects: the record outlives its
     * clients, and the first to declare it binds nothing */
    assert_non_null(pods_set_limit(&t, &b, POD_CORE_LIMIT, -1, 30, &failed));
    assert_int_equal(pods_join(&t, &b, 1000, &p, &owner), 0);
    pods_leave(&t, &b);
    p = pods_find(&t, &b);
    assert_non_null(p);
    assert_false(p->bound);
    /* removing its last setting forgets it */
    assert_null(pods_set_limit(&t, &b, POD_CORE_LIMIT, -1, 0, &failed));
    assert_false(failed);
    assert_null(pods_find(&t, &b));
    /* an owner alone is a setting, kept like a limit */
    assert_non_null(pods_set_limit(&t, &b, POD_OWNER, -1, 1000, &failed));
    assert_true(pod_configured(pods_find(&t, &b)));
    assert_null(pods_set_limit(&t, &b, POD_OWNER, -1, 0, &failed));
    pods_free(&t);
}

/* The claim of a client of uid for pod id, as clients.c makes it. */
static int join(struct pod_table *t, const struct pod_id *id, uint32_t uid,
                struct account_actions *out)
{
    struct account_claim claim = {.pod = *id};
    struct pod *p;
    uint32_t owner;

    if (pods_join(t, id, uid, &p, &owner) < 0)
        return -1;
    claim.member = pod_member(p, uid);
    claim.record = p;
    out->n = 0;
    return account_attach(accounts, N_ACCOUNTS, &claim, out);
}

/* Issue 27: the operator set prod/vip (priority high, a 30 % floor, a
 * 1 GiB quota) before it ran, without naming its owner; uid 2000 declares
 * it first. The squatter is held to the pod's limits but gets neither its
 * priority nor its floor; the owner's (uid 1000) processes share one
 * account, so the 1 GiB holds for all of them, whoever came first. Once
 * the operator names uid 1000, its share gets the privileges and the
 * squatter's next process is billed on its own. */
static void test_squatter_gets_limits_not_privileges(void **state)
{
    struct pod_table t = {0};
    struct pod_id vip = named("prod", "vip");
    struct account_actions out = {0};
    bool failed;

    (void)state;
    pods_set_limit(&t, &vip, POD_PRIORITY, -1, PRIORITY_HIGH, &failed);
    pods_set_limit(&t, &vip, POD_MIN_SHARE, -1, 30, &failed);
    pods_set_limit(&t, &vip, POD_MEMORY_LIMIT, -1, 1024 * MiB, &failed);

    int squatter = join(&t, &vip, 2000, &out);
    assert_int_equal(out.list[1].kind, ACCOUNT_LIMITS);
    assert_int_equal(out.list[1].priority, PRIORITY_NORMAL);
    assert_int_equal(out.list[1].min_share, 0);
    assert_int_equal(out.list[1].memory_limit[0], 1024 * MiB);

    int first = join(&t, &vip, 1000, &out);
    assert_int_not_equal(first, squatter);
    assert_int_equal(out.list[1].memory_limit[0], 1024 * MiB);
    assert_int_equal(out.list[1].priority, PRIORITY_NORMAL);
    assert_int_equal(join(&t, &vip, 1000, &out), first);
    assert_int_equal(accounts[first].refs, 2);

    /* root's processes are no squatters */
    int root = join(&t, &vip, 0, &out);
    assert_int_equal(out.list[1].priority, PRIORITY_HIGH);
    assert_int_equal(out.list[1].min_share, 30);
    assert_int_not_equal(root, first);

    /* the operator names the owner */
    struct pod *p = pods_set_limit(&t, &vip, POD_OWNER, -1, 1000, &failed);
    out.n = 0;
    account_set_pod(accounts, first, p, &out);
    assert_int_equal(out.list[0].priority, PRIORITY_HIGH);
    assert_int_equal(out.list[0].min_share, 30);
    out.n = 0;
    account_set_pod(accounts, squatter, p, &out);
    assert_int_equal(out.list[0].priority, PRIORITY_NORMAL);
    assert_int_equal(out.list[0].min_share, 0);
    assert_int_equal(join(&t, &vip, 2000, &out), -1);
    assert_int_equal(join(&t, &vip, 1000, &out), first);
    assert_int_equal(join(&t, &vip, 0, &out), first);
    assert_int_equal(p->clients, 6);
    pods_free(&t);
}

/* With the owner named before the pod runs, a squatter that comes first
 * is billed on its own and the owner's processes get everything. A pod
 * bound by its first join loses that binding to the operator's first
 * setting: the first comer may be the squatter. */
static void test_named_owner_before_the_pod_runs(void **state)
{
    struct pod_table t = {0};
    struct pod_id vip = named("prod", "vip"), job = named("team", "job");
    struct account_actions out = {0};
    bool failed;

    (void)state;
    pods_set_limit(&t, &vip, POD_OWNER, -1, 1000, &failed);
    pods_set_limit(&t, &vip, POD_PRIORITY, -1, PRIORITY_HIGH, &failed);
    pods_set_limit(&t, &vip, POD_MIN_SHARE, -1, 30, &failed);
    assert_int_equal(join(&t, &vip, 2000, &out), -1);
    int a = join(&t, &vip, 1000, &out);
    assert_int_equal(out.list[1].priority, PRIORITY_HIGH);
    assert_int_equal(out.list[1].min_share, 30);
    assert_int_equal(join(&t, &vip, 1000, &out), a);

    assert_true(join(&t, &job, 2000, &out) >= 0);
    assert_true(pods_find(&t, &job)->bound);
    pods_set_limit(&t, &job, POD_PRIORITY, -1, PRIORITY_HIGH, &failed);
    assert_false(pods_find(&t, &job)->bound);
    assert_true(join(&t, &job, 1000, &out) >= 0);
    assert_int_equal(out.list[1].priority, PRIORITY_NORMAL);
    pods_free(&t);
}

static void test_kubernetes_pod_is_its_uid(void **state)
{
    struct pod_table t = {0};
    struct pod_id k8s = {.uid = "0a1b2c3d-0000-4000-8000-000000000001"};
    struct pod_id named_too = k8s;
    struct pod *p;
    uint32_t owner;

    (void)state;
    strcpy(named_too.pod_name, "trainer");
    assert_true(pod_id_equal(&k8s, &named_too));
    /* never bound: the kernel names it, whoever runs in it */
    assert_int_equal(pods_join(&t, &k8s, 1000, &p, &owner), 0);
    assert_int_equal(pods_join(&t, &k8s, 1001, &p, &owner), 0);
    assert_false(p->bound);
    /* a plain-host pod of the same name is another pod */
    struct pod_id plain = named("", "trainer");
    assert_false(pod_id_equal(&k8s, &plain));
    pods_free(&t);
}

static struct msg_pod_facts facts(const char *uid, uint8_t core,
                                  uint64_t memory, uint64_t request)
{
    struct msg_pod_facts f = {.core_limit = core,
                              .memory_limit = memory,
                              .memory_request = request};

    strcpy(f.pod_uid, uid);
    strcpy(f.pod_namespace, "ns");
    strcpy(f.pod_name, "trainer");
    return f;
}

static struct pod_id uid_only(const char *uid)
{
    struct pod_id id = {0};

    strcpy(id.uid, uid);
    return id;
}

/* annotation > operator's override and request > declared (only lowers) >
 * none, each step down as the one above goes. */
static void test_precedence_of_sources(void **state)
{
    struct limit_setting l = {0};
    uint8_t source;

    (void)state;
    assert_int_equal(limit_effective(&l, &source), 0);
    assert_int_equal(source, LIMIT_NONE);
    l.request = 4096 * MiB;
    assert_int_equal(limit_effective(&l, &source), 4096 * MiB);
    assert_int_equal(source, LIMIT_REQUEST);
    /* the annotation wins over the request, higher or lower */
    l.annotation = 8192 * MiB;
    assert_int_equal(limit_effective(&l, &source), 8192 * MiB);
    assert_int_equal(source, LIMIT_ANNOTATION);
    /* an operator's override in force wins over both */
    l.runtime = 1024 * MiB;
    assert_int_equal(limit_effective(&l, &source), 1024 * MiB);
    assert_int_equal(source, LIMIT_RUNTIME);
    /* a declaration only lowers */
    l.declared = 2048 * MiB;
    assert_int_equal(limit_effective(&l, &source), 1024 * MiB);
    l.declared = 512 * MiB;
    assert_int_equal(limit_effective(&l, &source), 512 * MiB);
    assert_int_equal(source, LIMIT_DECLARED);
    /* and stands alone when nothing else is set */
    l = (struct limit_setting){.declared = 512 * MiB};
    assert_int_equal(limit_effective(&l, &source), 512 * MiB);
    assert_int_equal(source, LIMIT_DECLARED);
}

static void test_annotation_change_ends_override(void **state)
{
    struct pod_table t = {0};
    struct msg_pod_facts f = facts("6f1e", 30, 0, 256 * MiB);
    struct pod_id id = uid_only("6f1e");
    unsigned dropped;
    bool failed;

    (void)state;
    struct pod *p = pods_learn(&t, &f, &dropped);
    assert_non_null(p);
    assert_string_equal(p->id.pod_name, "trainer");
    assert_int_equal(p->annotation_core, 30);
    assert_int_equal(p->memory_request, 256 * MiB);
    /* the operator overrides the annotation */
    p = pods_set_limit(&t, &id, POD_CORE_LIMIT, -1, 50, &failed);
    assert_int_equal(p->core_limit, 50);
    /* the same facts again (a re-list, a status change): it holds */
    p = pods_learn(&t, &f, &dropped);
    assert_int_equal(dropped, 0);
    assert_int_equal(p->core_limit, 50);
    /* an unreadable annotation changes nothing */
    f.core_limit = 0;
    f.unreadable = POD_FACT_CORE_UNREADABLE;
    p = pods_learn(&t, &f, &dropped);
    assert_int_equal(dropped, 0);
    assert_int_equal(p->core_limit, 50);
    assert_int_equal(p->annotation_core, 30);
    /* a new annotation ends the override */
    f.core_limit = 40;
    f.unreadable = 0;
    p = pods_learn(&t, &f, &dropped);
    assert_int_equal(dropped, POD_FACT_CORE_UNREADABLE);
    assert_int_equal(p->core_limit, 0);
    assert_int_equal(p->annotation_core, 40);
    /* and so does its removal: the next source is in force */
    p = pods_set_limit(&t, &id, POD_CORE_LIMIT, -1, 50, &failed);
    f.core_limit = 0;
    p = pods_learn(&t, &f, &dropped);
    assert_int_equal(dropped, POD_FACT_CORE_UNREADABLE);
    assert_int_equal(p->core_limit, 0);
    assert_int_equal(p->annotation_core, 0);
    pods_free(&t);
}

/* The highest class any pod was given, by the operator or an annotation,
 * follows every change: a holder of a lower class prepares for a
 * preemption by a pod that has no process yet. */
static void test_pods_top_class(void **state)
{
    struct pod_table t = {0};
    struct msg_pod_facts f = facts("9c3d", 0, 0, 0);
    struct pod_id svc = named("prod", "svc"), low = named("prod", "batch");
    unsigned dropped;
    bool failed;

    (void)state;
    assert_int_equal(pods_top_class(&t), 0);
    pods_set_limit(&t, &low, POD_PRIORITY, -1, PRIORITY_LOW, &failed);
    assert_int_equal(pods_top_class(&t), PRIORITY_LOW);
    pods_set_limit(&t, &svc, POD_PRIORITY, -1, PRIORITY_HIGH, &failed);
    assert_int_equal(pods_top_class(&t), PRIORITY_HIGH);
    f.priority = 7;
    pods_learn(&t, &f, &dropped);
    assert_int_equal(pods_top_class(&t), 7);
    struct pod_id uid = uid_only("9c3d");
    pods_set_limit(&t, &uid, POD_PRIORITY, -1, PRIORITY_LOW, &failed);
    /* The operator's class, not the annotation's, as in force. */
    assert_int_equal(pods_top_class(&t), PRIORITY_HIGH);
    f.priority = PRIORITY_NORMAL; /* the annotation changed */
    pods_learn(&t, &f, &dropped);
    assert_int_equal(pods_top_class(&t), PRIORITY_HIGH);
    pods_set_limit(&t, &svc, POD_PRIORITY, -1, 0, &failed); /* forgotten */
    assert_null(pods_find(&t, &svc));
    assert_int_equal(pods_top_class(&t), PRIORITY_NORMAL);
    pods_gone(&t, &uid);
    assert_int_equal(pods_top_class(&t), PRIORITY_LOW);
    pods_free(&t);
    assert_int_equal(pods_top_class(&t), 0);
}

/* Idle reclaim: on unless set; the annotation's off holds until the
 * operator says on, which the annotation's next change ends; a squatter's
 * share of a plain-host pod set off is swapped like anyone. */
static void test_idle_swap_sources(void **state)
{
    struct pod_table t = {0};
    struct msg_pod_facts f = facts("7a2b", 0, 0, 0);
    struct pod_id id = uid_only("7a2b"), vip = named("prod", "vip");
    struct account_actions out = {0};
    unsigned dropped;
    uint8_t source;
    bool failed;

    (void)state;
    f.idle_swap = IDLE_SWAP_OFF;
    struct pod *p = pods_learn(&t, &f, &dropped);
    int a = join(&t, &id, 1000, &out);
    assert_false(out.list[1].idle_swap);
    assert_int_equal(idle_swap_effective(&accounts[a].idle_swap, &source),
                     IDLE_SWAP_OFF);
    assert_int_equal(source, LIMIT_ANNOTATION);
    p = pods_set_limit(&t, &id, POD_IDLE_SWAP, -1, IDLE_SWAP_ON, &failed);
    out.n = 0;
    account_set_pod(accounts, a, p, &out);
    assert_true(out.list[0].idle_swap);
    f.idle_swap = 0; /* the annotation goes: the operator's on ends */
    p = pods_learn(&t, &f, &dropped);
    assert_int_equal(dropped, POD_FACT_IDLE_SWAP_UNREADABLE);
    out.n = 0;
    account_set_pod(accounts, a, p, &out);
    assert_true(out.list[0].idle_swap);
    assert_int_equal(idle_swap_effective(&accounts[a].idle_swap, &source),
                     IDLE_SWAP_ON);
    assert_int_equal(source, LIMIT_NONE);

    pods_set_limit(&t, &vip, POD_IDLE_SWAP, -1, IDLE_SWAP_OFF, &failed);
    join(&t, &vip, 2000, &out);
    assert_true(out.list[1].idle_swap);
    join(&t, &vip, 0, &out);
    assert_false(out.list[1].idle_swap);
    pods_free(&t);
}

static void test_first_facts_keep_persisted_override(void **state)
{
    struct pod_table t = {0};
    struct msg_pod_facts f = facts("6f1e", 30, 0, 0);
    struct pod_id id = uid_only("6f1e");
    unsigned dropped;
    bool failed;

    (void)state;
    /* as the state file leaves it after a restart */
    pods_set_limit(&t, &id, POD_CORE_LIMIT, -1, 50, &failed);
    struct pod *p = pods_learn(&t, &f, &dropped);
    assert_int_equal(dropped, 0);
    assert_int_equal(p->core_limit, 50);
    pods_free(&t);
}

static void test_pod_gone_and_relist(void **state)
{
    struct pod_table t = {0};
    struct msg_pod_facts a = facts("aaaa", 30, 0, 0), b = facts("bbbb", 20, 0, 0);
    struct pod_id ida = uid_only("aaaa"), idb = uid_only("bbbb");
    struct pod *p;
    unsigned dropped;
    uint32_t owner;
    bool failed;

    (void)state;
    pods_learn(&t, &a, &dropped);
    pods_learn(&t, &b, &dropped);
    /* a listed pod is kept without clients or limits */
    assert_int_equal(t.n, 2);
    /* deleted with an operator's limit: the limit goes with it */
    pods_set_limit(&t, &ida, POD_CORE_LIMIT, -1, 50, &failed);
    assert_true(pods_gone(&t, &ida));
    assert_null(pods_find(&t, &ida));
    /* deleted with a client still billed: kept, with no settings */
    assert_int_equal(pods_join(&t, &idb, 1000, &p, &owner), 0);
    assert_false(pods_gone(&t, &idb));
    p = pods_find(&t, &idb);
    assert_non_null(p);
    assert_int_equal(p->annotation_core, 0);
    assert_false(p->listed);
    pods_leave(&t, &idb);
    assert_null(pods_find(&t, &idb));
    /* a re-list: what it names is fresh, the rest stale */
    pods_learn(&t, &a, &dropped);
    pods_learn(&t, &b, &dropped);
    pods_mark_stale(&t);
    pods_learn(&t, &b, &dropped);
    assert_true(pod_gone_after_relist(pods_find(&t, &ida)));
    assert_false(pod_gone_after_relist(pods_find(&t, &idb)));
    /* a connected pod the watcher never named stays, a named one goes */
    struct pod_id idc = uid_only("cccc");
    assert_int_equal(pods_join(&t, &idc, 0, &p, &owner), 0);
    assert_int_equal(pods_join(&t, &ida, 0, &p, &owner), 0);
    pods_mark_stale(&t);
    assert_false(pod_gone_after_relist(pods_find(&t, &idc)));
    assert_true(pod_gone_after_relist(pods_find(&t, &ida)));
    pods_free(&t);
}

static void test_account_follows_pod_record(void **state)
{
    struct pod record = {.annotation_core = 30, .memory_request = 512 * MiB};
    struct account_claim claim = pod("a", 0, 0);
    struct account_actions out = {0};

    (void)state;
    claim.record = &record;
    int a = account_attach(accounts, N_ACCOUNTS, &claim, &out);
    assert_int_equal(out.list[1].core_limit[0], 30);
    assert_int_equal(out.list[1].memory_limit[0], 512 * MiB);
    out.n = 0;
    record.annotation_core = 0;
    record.annotation_memory = 1024 * MiB;
    account_set_pod(accounts, a, &record, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.list[0].core_limit[0], 0);
    assert_int_equal(out.list[0].memory_limit[0], 1024 * MiB);
    out.n = 0;
    account_set_pod(accounts, a, NULL, &out);
    assert_int_equal(out.list[0].memory_limit[0], 0);
}

/* pods.c's index over ids: after pods come and go in any order, each one
 * is found exactly while it has a record (a removal moves the last record
 * and shifts the index's probe chains). */
static void test_pod_index_survives_removals(void **state)
{
    enum { N = 3000 };
    static bool present[N];
    struct pod_table t = {0};
    struct pod_id id;
    bool failed;

    (void)state;
    memset(present, 0, sizeof(present));
    srand(27);
    for (int step = 0; step < 40000; step++) {
        int i = rand() % N;
        char name[16];
        snprintf(name, sizeof(name), "p%d", i);
        id = named(i % 3 ? "ns" : "", name);
        if (i % 5 == 0) {
            id = (struct pod_id){0};
            snprintf(id.uid, sizeof(id.uid), "uid-%d", i);
        }
        pods_set_limit(&t, &id, POD_CORE_LIMIT, -1, present[i] ? 0 : 10, &failed);
        assert_false(failed);
        present[i] = !present[i];
        if (step % 4000)
            continue;
        size_t n = 0;
        for (int j = 0; j < N; j++) {
            snprintf(name, sizeof(name), "p%d", j);
            id = named(j % 3 ? "ns" : "", name);
            if (j % 5 == 0) {
                id = (struct pod_id){0};
                snprintf(id.uid, sizeof(id.uid), "uid-%d", j);
            }
            struct pod *p = pods_find(&t, &id);
            assert_int_equal(p != NULL, present[j]);
            if (p)
                assert_true(pod_id_equal(&p->id, &id));
            n += present[j];
        }
        assert_int_equal(t.n, n);
    }
    pods_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_new_account_is_reset_then_limited, setup),
        cmocka_unit_test_setup(test_declarations_only_lower, setup),
        cmocka_unit_test_setup(test_declared_priority_only_lowers, setup),
        cmocka_unit_test_setup(test_operator_limit_cannot_be_lifted, setup),
        cmocka_unit_test_setup(test_runtime_limit_removed_leaves_declared, setup),
        cmocka_unit_test_setup(test_limits_per_gpu, setup),
        cmocka_unit_test_setup(test_clients_without_pod_are_apart, setup),
        cmocka_unit_test_setup(test_last_detach_resets, setup),
        cmocka_unit_test(test_pod_bound_to_first_uid),
        cmocka_unit_test(test_unconfigured_pod_forgotten_configured_kept),
        cmocka_unit_test_setup(test_squatter_gets_limits_not_privileges, setup),
        cmocka_unit_test_setup(test_named_owner_before_the_pod_runs, setup),
        cmocka_unit_test(test_kubernetes_pod_is_its_uid),
        cmocka_unit_test(test_precedence_of_sources),
        cmocka_unit_test(test_annotation_change_ends_override),
        cmocka_unit_test_setup(test_idle_swap_sources, setup),
        cmocka_unit_test(test_first_facts_keep_persisted_override),
        cmocka_unit_test(test_pod_gone_and_relist),
        cmocka_unit_test(test_pods_top_class),
        cmocka_unit_test_setup(test_account_follows_pod_record, setup),
        cmocka_unit_test(test_pod_index_survives_removals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
