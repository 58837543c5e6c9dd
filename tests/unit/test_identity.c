/* test_identity.c - a process's pod and container from its cgroup file
 * (identity.c): one fixture per layout under cgroup_cases/<pid>/cgroup,
 * read through identity_of_pid, and garbage that must give "unknown"
 * without a crash (the sanitizers watch the reads). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "identity.h"

#define UID "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
#define CTR "4f1d9c3e8a7b6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c"

struct fixture {
    int pid;
    const char *layout;
    enum identity_kind kind;
    enum pod_qos qos;
    const char *pod_uid, *container_id;
};

static const struct fixture fixtures[] = {
    {101, "v2 systemd containerd burstable", IDENTITY_POD, POD_QOS_BURSTABLE,
     UID, CTR},
    {102, "v2 systemd containerd guaranteed", IDENTITY_POD, POD_QOS_GUARANTEED,
     UID, CTR},
    {103, "v2 systemd CRI-O besteffort", IDENTITY_POD, POD_QOS_BESTEFFORT, UID,
     CTR},
    {104, "v2 cgroupfs burstable", IDENTITY_POD, POD_QOS_BURSTABLE, UID, CTR},
    {105, "v2 cgroupfs guaranteed", IDENTITY_POD, POD_QOS_GUARANTEED, UID, CTR},
    {106, "v1 cgroupfs besteffort", IDENTITY_POD, POD_QOS_BESTEFFORT, UID, CTR},
    {107, "v1 systemd docker, hybrid 0::/", IDENTITY_POD, POD_QOS_BURSTABLE,
     UID, CTR},
    {108, "v2 kind: kubelet.slice nesting", IDENTITY_POD, POD_QOS_BESTEFFORT,
     UID, CTR},
    {109, "v1 docker-in-docker /docker/<id>/kubepods", IDENTITY_POD,
     POD_QOS_BESTEFFORT, UID, CTR},
    {110, "v2 host user.slice", IDENTITY_HOST, POD_QOS_UNKNOWN, "", ""},
    {111, "v1 host system.slice", IDENTITY_HOST, POD_QOS_UNKNOWN, "", ""},
    {112, "v2 the pod's own cgroup", IDENTITY_POD, POD_QOS_BURSTABLE, UID, ""},
    {113, "v2 CRI-O conmon beside the container", IDENTITY_POD,
     POD_QOS_BESTEFFORT, UID, ""},
    {114, "v2 read from another cgroup namespace (systemd)", IDENTITY_POD,
     POD_QOS_BURSTABLE, UID, CTR},
    {115, "v1 + v2 hybrid", IDENTITY_POD, POD_QOS_BURSTABLE, UID, CTR},
    {116, "static pod (32-hex UID)", IDENTITY_POD, POD_QOS_BURSTABLE,
     "6f5902ac237024bdd0c176cb93063dc4", CTR},
    {117, "v2 read from another cgroup namespace (cgroupfs)", IDENTITY_POD,
     POD_QOS_BURSTABLE, UID, CTR},
    {118, "v2 root", IDENTITY_HOST, POD_QOS_UNKNOWN, "", ""},
};

/* Slurm's task/cgroup: host processes of job 4242. */
static const struct {
    int pid;
    const char *layout;
} slurm_fixtures[] = {
    {119, "v2 Slurm task"},
    {120, "v1 Slurm task, node-named root, hybrid 0::/"},
    {121, "v1 Slurm batch step beside slurmd's systemd unit"},
    {122, "v2 Slurm step's slurmstepd"},
};

static void expect(const struct fixture *f, const struct pod_identity *id,
                   enum identity_kind returned)
{
    if (returned != f->kind || id->kind != f->kind || id->qos != f->qos ||
        strcmp(id->pod_uid, f->pod_uid) ||
        strcmp(id->container_id, f->container_id) || id->slurm_job[0])
        fail_msg("%d (%s): got kind %d/%d qos %s uid '%s' container '%s' job "
                 "'%s'; "
                 "want kind %d qos %s uid '%s' container '%s', no job",
                 f->pid, f->layout, (int)returned, (int)id->kind,
                 pod_qos_name(id->qos), id->pod_uid, id->container_id,
                 id->slurm_job, (int)f->kind, pod_qos_name(f->qos), f->pod_uid,
                 f->container_id);
}

static void test_fixtures(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
        struct pod_identity id;
        enum identity_kind kind =
            identity_of_pid(CGROUP_CASES, fixtures[i].pid, &id);
        expect(&fixtures[i], &id, kind);
    }
}

static void test_missing_process_is_unknown(void **state)
{
    struct pod_identity id = {.kind = IDENTITY_POD};

    (void)state;
    assert_int_equal(identity_of_pid(CGROUP_CASES, 99999, &id), IDENTITY_UNKNOWN);
    assert_int_equal(id.kind, IDENTITY_UNKNOWN);
    assert_string_equal(id.pod_uid, "");
}

/* Text that is not a cgroup file, or is one cut short or stretched. */
static void test_garbage_is_unknown(void **state)
{
    static const char *const garbage[] = {
        "",
        "\n",
        "\n\n\n",
        "hello",
        "0:",
        "0::",
        "0::\n",
        "::/kubepods\n",
        "x::/kubepods/pod" UID "/" CTR "\n",
        "0:memory\n",
        "0:memory:kubepods\n",
        ":::::::\n",
        "0::relative/path\n",
        "\xff\xfe\x00",
    };
    struct pod_identity id;

    (void)state;
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
        if (identity_parse_cgroup(garbage[i], &id) != IDENTITY_UNKNOWN ||
            id.kind != IDENTITY_UNKNOWN || id.pod_uid[0] || id.container_id[0])
            fail_msg("garbage %zu ('%s') gave kind %d", i, garbage[i],
                     (int)id.kind);
}

/* Almost a pod: each is a host path, not a pod with a wrong UID. */
static void test_near_misses_are_host(void **state)
{
    static const char *const near[] = {
        "0::/kubepods/burstable/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f90/" CTR, /* short */
        "0::/kubepods/burstable/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f9012/" CTR,
        "0::/kubepods/burstable/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f9zz/" CTR,
        "0::/kubepods/burstable/pod1b2c3d4e:5f60-7182-93a4-b5c6d7e8f901/" CTR,
        "0::/home/burstable/pod" UID "/" CTR, /* no kubepods above */
        "0::/kubepods.slice/kubepods-burstable.slice/pod" UID ".slice",
        "0::/system.slice/kubepods-fake-pod" UID ".service",
        "0::/kubepods.slice/kubepods-burstable.slice/"
        "kubepods-burstable-pod.slice",
    };
    struct pod_identity id;

    (void)state;
    for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++)
        if (identity_parse_cgroup(near[i], &id) != IDENTITY_HOST || id.pod_uid[0])
            fail_msg("'%s' gave kind %d uid '%s'", near[i], (int)id.kind,
                     id.pod_uid);
}

static void test_slurm_fixtures(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(slurm_fixtures) / sizeof(slurm_fixtures[0]);
         i++) {
        struct pod_identity id;
        enum identity_kind kind =
            identity_of_pid(CGROUP_CASES, slurm_fixtures[i].pid, &id);
        if (kind != IDENTITY_HOST || strcmp(id.slurm_job, "4242") ||
            id.pod_uid[0])
            fail_msg("%d (%s): got kind %d job '%s' uid '%s'; want a host "
                     "process of "
                     "job 4242",
                     slurm_fixtures[i].pid, slurm_fixtures[i].layout, (int)kind,
                     id.slurm_job, id.pod_uid);
    }
}

/* Almost a Slurm job: a host process with no job. */
static void test_slurm_near_misses(void **state)
{
    static const char *const near[] = {
        "0::/system.slice/slurmstepd.scope/system", /* slurmstepd's own */
        "0::/system.slice/slurmstepd.scope/job_/step_0",
        "0::/system.slice/slurmstepd.scope/job_12x/step_0",
        "0::/system.slice/slurmstepd.scope/job_12345678901234567/step_0",
        "0::/system.slice/other.scope/job_42/step_0",
        "4:memory:/slurm/job_42/step_0",          /* no uid level */
        "4:memory:/slurmfoo/uid_0/job_42/step_0", /* not Slurm's root */
        "4:memory:/slurm/user_0/job_42/step_0",
        "0::/user.slice/job_42",
    };
    struct pod_identity id;

    (void)state;
    for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++)
        if (identity_parse_cgroup(near[i], &id) != IDENTITY_HOST ||
            id.slurm_job[0])
            fail_msg("'%s' gave kind %d job '%s'", near[i], (int)id.kind,
                     id.slurm_job);
    /* A pod is the kernel's word: a job's cgroup inside one names no job. */
    assert_int_equal(identity_parse_cgroup("0::/kubepods/pod" UID "/" CTR
                                           "/system.slice/slurmstepd.scope/"
                                           "job_7/step_0",
                                           &id),
                     IDENTITY_POD);
    assert_string_equal(id.slurm_job, "");
}

/* A container ID that is not 64 hex digits names no container. */
static void test_bad_container_ids(void **state)
{
    static const char *const bad[] = {
        "0::/kubepods/burstable/pod" UID "/" CTR "0",
        "0::/kubepods/burstable/pod" UID "/abc",
        "0::/kubepods.slice/kubepods-pod" UID ".slice/cri-containerd-" CTR,
        "0::/kubepods.slice/kubepods-pod" UID ".slice/cri-containerd-abc.scope",
        "0::/kubepods.slice/kubepods-pod" UID ".slice/runc-" CTR ".scope",
    };
    struct pod_identity id;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (identity_parse_cgroup(bad[i], &id) != IDENTITY_POD ||
            strcmp(id.pod_uid, UID) || id.container_id[0])
            fail_msg("'%s' gave kind %d container '%s'", bad[i], (int)id.kind,
                     id.container_id);
}

/* A megabyte-long line, upper-case hex, no final newline, many lines. */
static void test_long_and_odd_text(void **state)
{
    size_t n = 1 << 20;
    char *text = malloc(n + 256);
    struct pod_identity id;

    (void)state;
    assert_non_null(text);
    memcpy(text, "0::/", 4);
    memset(text + 4, 'a', n - 4);
    strcpy(text + n, "\n3:memory:/KUBEPODS/pod" UID "/" CTR);
    /* Directory names are case-sensitive: KUBEPODS is not kubepods. */
    assert_int_equal(identity_parse_cgroup(text, &id), IDENTITY_HOST);
    strcpy(text + n,
           "\n3:memory:/kubepods/pod1B2C3D4E-5F60-7182-93A4-B5C6D7E8F901/"
           "4F1D9C3E8A7B6D5C4B3A29180F7E6D5C4B3A29180F7E6D5C4B3A29180F7E6D5C");
    assert_int_equal(identity_parse_cgroup(text, &id), IDENTITY_POD);
    assert_string_equal(id.pod_uid, UID);
    assert_string_equal(id.container_id, CTR);
    memset(text, '/', n);
    text[n] = '\0';
    text[0] = '0';
    text[1] = ':';
    text[2] = ':';
    assert_int_equal(identity_parse_cgroup(text, &id), IDENTITY_HOST);
    free(text);
}

static void test_qos_names(void **state)
{
    (void)state;
    assert_string_equal(pod_qos_name(POD_QOS_GUARANTEED), "guaranteed");
    assert_string_equal(pod_qos_name(POD_QOS_BURSTABLE), "burstable");
    assert_string_equal(pod_qos_name(POD_QOS_BESTEFFORT), "besteffort");
    assert_string_equal(pod_qos_name(42), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_missing_process_is_unknown),
        cmocka_unit_test(test_garbage_is_unknown),
        cmocka_unit_test(test_near_misses_are_host),
        cmocka_unit_test(test_slurm_fixtures),
        cmocka_unit_test(test_slurm_near_misses),
        cmocka_unit_test(test_bad_container_ids),
        cmocka_unit_test(test_long_and_odd_text),
        cmocka_unit_test(test_qos_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
