/* test_state.c - the state file: what is written parses back to the same
 * state; what does not parse is refused with its line; the file is replaced
 * atomically and a corrupt one is moved aside. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "state.h"

static struct node_state sample(void)
{
    struct node_state st = {0};
    struct pod_id team = {.pod_namespace = "team-a", .pod_name = "trainer"};
    struct pod_id odd = {.pod_namespace = "default", .pod_name = "my pod/=%"};
    struct pod_id k8s = {.uid = "0a1b2c3d-0000-4000-8000-000000000001"};
    struct pod_id batch = {.pod_namespace = "ml", .pod_name = "train"};
    struct pod_id notebook = {.pod_namespace = "ml", .pod_name = "notebook"};
    bool failed;

    st.set[SETTING_TQ] = true;
    st.value[SETTING_TQ] = 5 * NS_PER_SEC;
    st.set[SETTING_ANTI_THRASH] = true;
    st.value[SETTING_ANTI_THRASH] = 0;
    st.set[SETTING_SWITCH_TIME_FIXED] = true;
    st.value[SETTING_SWITCH_TIME_FIXED] = 0; /* auto */
    state_set_mode(&st, NULL, 0);
    state_set_mode(&st, "GPU-1234", 2);
    pods_set_limit(&st.pods, &team, POD_CORE_LIMIT, -1, 30, &failed);
    pods_set_limit(&st.pods, &team, POD_OWNER, -1, 1000, &failed);
    pods_set_limit(&st.pods, &team, POD_MEMORY_LIMIT, -1, 8ull << 30, &failed);
    pods_set_limit(&st.pods, &odd, POD_MEMORY_LIMIT, -1, 1000, &failed);
    pods_set_limit(&st.pods, &k8s, POD_CORE_LIMIT, -1, 20, &failed);
    pods_set_limit(&st.pods, &k8s, POD_CORE_LIMIT, 1, 10, &failed);
    pods_set_limit(&st.pods, &k8s, POD_MEMORY_LIMIT, 1, 2ull << 30, &failed);
    pods_set_limit(&st.pods, &batch, POD_PRIORITY, -1, PRIORITY_LOW, &failed);
    pods_set_limit(&st.pods, &batch, POD_MIN_SHARE, -1, 10, &failed);
    pods_set_limit(&st.pods, &notebook, POD_IDLE_SWAP, -1, IDLE_SWAP_OFF,
                   &failed);
    struct group claim = {.name = "3f2a-claim",
                          .gpu = 1,
                          .memory = 4ull << 30,
                          .core = 30,
                          .priority = PRIORITY_HIGH,
                          .n_members = 2,
                          .members = {k8s, odd}};
    char err[128];
    assert_int_equal(groups_set(&st.groups, &claim, err, sizeof(err)), 0);
    return st;
}

static void test_round_trip(void **state)
{
    struct node_state st = sample(), back = {0};
    char text[4096], again[4096], err[256];

    (void)state;
    state_format(&st, text, sizeof(text));
    assert_non_null(strstr(text, "\ntq 5s\n"));
    assert_non_null(strstr(text, "\nswitch-time auto\n"));
    assert_non_null(strstr(text, "\nmode serial\nmode auto GPU-1234\n"));
    assert_non_null(strstr(text, "pod team-a/trainer owner=1000 core-limit=30 "
                                 "memory-limit=8Gi\n"));
    assert_non_null(
        strstr(text, "pod default/my%20pod%2F%3D%25 memory-limit=1000\n"));
    /* A limit on one GPU (a DRA claim's share there) is kept too. */
    assert_non_null(strstr(text, "pod uid:0a1b2c3d-0000-4000-8000-000000000001 "
                                 "core-limit=20 core-limit@1=10 "
                                 "memory-limit@1=2Gi\n"));
    /* A priority alone is a setting: the pod is written, before it ever
     * connects. */
    assert_non_null(strstr(text, "pod ml/train priority=1 min-share=10\n"));
    /* So is idle reclaim off, kept across restarts. */
    assert_non_null(strstr(text, "pod ml/notebook idle-swap=off\n"));
    /* A group: its pods billed together on one GPU (groups.h). */
    assert_non_null(strstr(text, "group 3f2a-claim gpu=1 pods=uid:0a1b2c3d-"
                                 "0000-4000-8000-000000000001,default/my%20pod"
                                 "%2F%3D%25 memory-limit=4Gi core-limit=30 "
                                 "priority=3\n"));
    assert_int_equal(state_parse(text, &back, err, sizeof(err)), 0);
    assert_int_equal(back.groups.n, 1);
    state_format(&back, again, sizeof(again));
    assert_string_equal(text, again);
    struct pod_id odd = {.pod_namespace = "default", .pod_name = "my pod/=%"};
    assert_non_null(pods_find(&back.pods, &odd));
    pods_free(&st.pods);
    pods_free(&back.pods);
}

/* Issue 27: the owner the operator named is kept, so after a restart the
 * first uid to reconnect does not own the pod; a first join's binding is
 * not written (it bound a pod nobody set), and a pod set with no owner
 * binds no one after the restart either. */
static void test_owner_survives_a_restart(void **state)
{
    struct node_state st = {0}, back = {0};
    struct pod_id vip = {.pod_namespace = "prod", .pod_name = "vip"};
    struct pod_id open = {.pod_namespace = "prod", .pod_name = "open"};
    char text[1024], err[256];
    struct pod *p;
    uint32_t owner;
    bool failed;

    (void)state;
    pods_set_limit(&st.pods, &vip, POD_PRIORITY, -1, PRIORITY_HIGH, &failed);
    pods_set_limit(&st.pods, &vip, POD_OWNER, -1, 1000, &failed);
    pods_set_limit(&st.pods, &open, POD_MEMORY_LIMIT, -1, 1ull << 30, &failed);
    assert_int_equal(pods_join(&st.pods, &open, 2000, &p, &owner), 0);
    state_format(&st, text, sizeof(text));
    assert_non_null(strstr(text, "pod prod/vip owner=1000 priority=3\n"));
    assert_non_null(strstr(text, "pod prod/open memory-limit=1Gi\n"));
    assert_int_equal(state_parse(text, &back, err, sizeof(err)), 0);
    /* the squatter reconnects first: refused, and gets nothing of vip */
    assert_int_equal(pods_join(&back.pods, &vip, 2000, &p, &owner), -1);
    assert_int_equal(owner, 1000);
    assert_int_equal(pods_join(&back.pods, &vip, 1000, &p, &owner), 0);
    assert_true(pod_privileged(p, pod_member(p, 1000)));
    assert_int_equal(pods_join(&back.pods, &open, 2000, &p, &owner), 0);
    assert_false(p->bound);
    assert_int_equal(pods_join(&back.pods, &open, 1000, &p, &owner), 0);
    /* an owner alone is a setting; owner=0, an older scheduler's record of
     * root joining first, names no one; a pod written without a namespace
     * (before one was required) is in default */
    pods_free(&back.pods);
    memset(&back, 0, sizeof(back));
    assert_int_equal(state_parse("pod a owner=7\npod b owner=0 core-limit=5\n",
                                 &back, err, sizeof(err)),
                     0);
    struct pod_id a = {.pod_namespace = "default", .pod_name = "a"};
    struct pod_id b = {.pod_namespace = "default", .pod_name = "b"};
    assert_int_equal(pods_find(&back.pods, &a)->owner, 7);
    assert_false(pods_find(&back.pods, &b)->bound);
    pods_free(&st.pods);
    pods_free(&back.pods);
}

static void test_pods_without_limits_are_not_written(void **state)
{
    struct node_state st = {0};
    struct pod_id id = {.pod_name = "idle"};
    struct pod *p;
    uint32_t owner;
    char text[1024];

    (void)state;
    pods_join(&st.pods, &id, 1000, &p, &owner);
    state_format(&st, text, sizeof(text));
    assert_null(strstr(text, "idle"));
    pods_free(&st.pods);
}

static void expect_refused(const char *text, const char *why)
{
    struct node_state st = {0};
    char err[256];

    assert_int_equal(state_parse(text, &st, err, sizeof(err)), -1);
    if (!strstr(err, why))
        fail_msg("'%s': expected '%s' in '%s'", text, why, err);
    pods_free(&st.pods);
}

static void test_bad_lines_are_refused_with_their_number(void **state)
{
    (void)state;
    expect_refused("tq 5s\nbogus 1\n", "line 2: unknown setting 'bogus'");
    expect_refused("tq 0\n", "line 1");
    expect_refused("tq 2h\n", "time quantum must be between");
    expect_refused("compute-window-ms 100\n", "not a run-time setting");
    expect_refused("mode sideways\n", "mode must be");
    expect_refused("pod a core-limit=101\n", "cannot read 'core-limit=101'");
    expect_refused("pod a\n", "pod without a setting");
    expect_refused("pod a core-limit=5\npod a core-limit=6\n", "listed twice");
    expect_refused("pod a%zz core-limit=5\n", "pod: expected");
    expect_refused("pod uid:x owner=5 core-limit=5\n", "cannot read 'owner=5'");
    expect_refused("pod a owner=4294967295\n",
                   "cannot read 'owner=4294967295'");
    expect_refused("tq 5s 6s\n", "takes one value");
}

static void test_comments_and_blank_lines(void **state)
{
    struct node_state st = {0};
    char err[256];

    (void)state;
    assert_int_equal(state_parse("# hello\n\n  \ntq 100ms\r\n", &st, err,
                                 sizeof(err)),
                     0);
    assert_true(st.set[SETTING_TQ]);
    assert_int_equal(st.value[SETTING_TQ], 100 * NS_PER_MS);
}

/* The values in force: the state's over the environment's; its switch
 * time decides the switch time mode as well. */
static void test_overlay_over_the_environment(void **state)
{
    struct node_state st = {0};
    uint64_t v[SETTING_COUNT];
    char err[128];

    (void)state;
    for (int id = 0; id < SETTING_COUNT; id++)
        v[id] = settings_table[id].fallback;
    v[SETTING_SWITCH_TIME_MODE] = SWITCH_TIME_FIXED;
    v[SETTING_SWITCH_TIME_FIXED] = 45 * NS_PER_SEC;
    assert_int_equal(state_parse("tq 2s\nswitch-time auto\n", &st, err,
                                 sizeof(err)),
                     0);
    state_overlay(&st, v);
    assert_int_equal(v[SETTING_TQ], 2 * NS_PER_SEC);
    assert_int_equal(v[SETTING_SWITCH_TIME_MODE], SWITCH_TIME_AUTO);
    assert_int_equal(v[SETTING_SWITCH_TIME_FIXED],
                     settings_table[SETTING_SWITCH_TIME_FIXED].fallback);
    assert_int_equal(setting_state_value(v, SETTING_SWITCH_TIME_FIXED), 0);
    assert_int_equal(v[SETTING_ANTI_THRASH], 1); /* not in the state */

    memset(&st, 0, sizeof(st));
    assert_int_equal(state_parse("switch-time 30s\n", &st, err, sizeof(err)), 0);
    state_overlay(&st, v);
    assert_int_equal(v[SETTING_SWITCH_TIME_MODE], SWITCH_TIME_FIXED);
    assert_int_equal(setting_state_value(v, SETTING_SWITCH_TIME_FIXED),
                     30 * NS_PER_SEC);
}

static void test_save_and_load(void **state)
{
    char dir[] = "/tmp/nvshare-state.XXXXXX", path[256], aside[300];
    struct node_state st = sample(), back = {0};
    struct stat info;
    FILE *f;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/sub/state.conf", dir);
    assert_int_equal(state_save(path, &st), 0);
    assert_int_equal(stat(path, &info), 0);
    assert_int_equal(info.st_mode & 0777, 0600);
    assert_int_equal(state_load(path, &back), 0);
    assert_true(back.set[SETTING_TQ]);
    assert_int_equal(back.pods.n, 5);
    pods_free(&back.pods);
    memset(&back, 0, sizeof(back));

    /* a corrupt file: moved aside, and the state is empty */
    f = fopen(path, "w");
    fputs("tq 5s\npod \n", f);
    fclose(f);
    assert_int_equal(state_load(path, &back), 0);
    assert_false(back.set[SETTING_TQ]);
    assert_int_equal(back.pods.n, 0);
    snprintf(aside, sizeof(aside), "%s.corrupt", path);
    assert_int_equal(stat(aside, &info), 0);
    assert_int_not_equal(stat(path, &info), 0);
    /* a missing file is an empty state */
    assert_int_equal(state_load(path, &back), 0);
    unlink(aside);
    snprintf(aside, sizeof(aside), "%s/sub", dir);
    rmdir(aside);
    rmdir(dir);
    pods_free(&st.pods);
}

/* A directory where the file should be (issue 27), or a FIFO: moved aside
 * like a corrupt file, not a reason to stop or hold up the scheduler. */
static void test_a_directory_is_moved_aside(void **state)
{
    char dir[] = "/tmp/nvshare-state.XXXXXX", path[256], aside[300];
    struct node_state back = {0};
    struct stat info;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/state.conf", dir);
    snprintf(aside, sizeof(aside), "%s.corrupt", path);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(state_load(path, &back), 0);
    assert_int_equal(back.pods.n, 0);
    assert_int_equal(stat(aside, &info), 0);
    assert_true(S_ISDIR(info.st_mode));
    assert_int_not_equal(stat(path, &info), 0);
    rmdir(aside);
    /* nor a FIFO, which would block the start-up on open */
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(state_load(path, &back), 0);
    assert_int_equal(stat(aside, &info), 0);
    assert_true(S_ISFIFO(info.st_mode));
    unlink(aside);
    rmdir(dir);
}

/* A symlink planted at the temporary file's name is not written through:
 * its target keeps its content, and the state file is a file of its own. */
static void test_a_planted_tmp_symlink_is_not_followed(void **state)
{
    char dir[] = "/tmp/nvshare-state.XXXXXX", path[256], tmp[300], victim[300];
    struct node_state st = sample(), back = {0};
    char text[64] = "";
    struct stat info;
    FILE *f;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/state.conf", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    f = fopen(victim, "w");
    fputs("precious\n", f);
    fclose(f);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(state_save(path, &st), 0);
    f = fopen(victim, "r");
    assert_non_null(fgets(text, sizeof(text), f));
    fclose(f);
    assert_string_equal(text, "precious\n");
    assert_int_equal(lstat(path, &info), 0);
    assert_true(S_ISREG(info.st_mode));
    assert_int_equal(state_load(path, &back), 0);
    assert_int_equal(back.pods.n, st.pods.n);
    unlink(path);
    unlink(tmp);
    unlink(victim);
    rmdir(dir);
    pods_free(&st.pods);
    pods_free(&back.pods);
}

/* Seconds to start with a state file of n pods, as the scheduler does:
 * load it and write it back (the best of three runs, so a busy machine's
 * pauses do not count). A plain host's pod and a Kubernetes pod in turn,
 * as a node of many pods would have them. */
static double start_seconds(size_t n)
{
    char dir[] = "/tmp/nvshare-state.XXXXXX", path[256];
    double best = 1e9;
    FILE *f;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/state.conf", dir);
    f = fopen(path, "w");
    for (size_t i = 0; i < n; i++)
        fprintf(f,
                i % 2 ? "pod team-%zu/job-%zu core-limit=30\n"
                      : "pod uid:6f1e2d3c-4b5a-4978-%012zu memory-limit=1Gi\n",
                i, i);
    fclose(f);
    for (int run = 0; run < 3; run++) {
        struct node_state st = {0};
        uint64_t start = now_ns();
        assert_int_equal(state_load(path, &st), 0);
        assert_int_equal(state_save(path, &st), 0);
        double s = (double)(now_ns() - start) / NS_PER_SEC;
        assert_int_equal(st.pods.n, n);
        best = s < best ? s : best;
        pods_free(&st.pods);
    }
    unlink(path);
    rmdir(dir);
    return best;
}

static void too_slow(int sig)
{
    static const char msg[] = "FAIL: 100,000 pods still loading after 20 s\n";

    (void)sig;
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
        _exit(2);
    _exit(1);
}

/* Loading pod lines was quadratic (issue 27: 10k pods 1.2 s, 30k 14.3 s,
 * 100k not serving after 62 s): every line looked its pod up in a list.
 * 100k pods load and are written back in well under a second (5 s allowed
 * for a loaded, sanitized CI machine), and 10 times the pods take about 10
 * times as long (30 allowed; a quadratic load takes 100). */
static void test_many_pods_load_in_linear_time(void **state)
{
    (void)state;
    signal(SIGALRM, too_slow);
    alarm(20);
    double small = start_seconds(10000), large = start_seconds(100000);
    alarm(0);
    printf("state: 10,000 pods loaded and saved in %.3f s, 100,000 in %.3f s "
           "(x%.1f)\n",
           small, large, large / small);
    assert_true(large < 5.0);
    assert_true(large < 30 * (small > 0.005 ? small : 0.005));
}

/* A group line that groups_set would refuse is a corrupt line, as an
 * unreadable pod's is. */
static void test_bad_group_lines_are_refused(void **state)
{
    static const char *const bad[] = {
        "group g1 pods=uid:a\n",                      /* no GPU */
        "group g1 gpu=0\n",                           /* no pod */
        "group g1 gpu=0 pods=uid:a,uid:a\n",          /* twice */
        "group g1 gpu=0 pods=uid:a core-limit=101\n", /* over 100 */
        "group g1 gpu=32 pods=uid:a\n",               /* no such index */
        "group g/1 gpu=0 pods=uid:a\n",               /* bad name */
        "group g1 gpu=0 pods=uid:a\ngroup g1 gpu=1 pods=uid:b\n", /* twice */
        "group g1 gpu=0 pods=uid:a\ngroup g2 gpu=0 pods=uid:a\n", /* overlap */
    };
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct node_state st = {0};
        assert_int_equal(state_parse(bad[i], &st, err, sizeof(err)), -1);
        pods_free(&st.pods);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_owner_survives_a_restart),
        cmocka_unit_test(test_pods_without_limits_are_not_written),
        cmocka_unit_test(test_bad_lines_are_refused_with_their_number),
        cmocka_unit_test(test_comments_and_blank_lines),
        cmocka_unit_test(test_overlay_over_the_environment),
        cmocka_unit_test(test_save_and_load),
        cmocka_unit_test(test_a_directory_is_moved_aside),
        cmocka_unit_test(test_a_planted_tmp_symlink_is_not_followed),
        cmocka_unit_test(test_many_pods_load_in_linear_time),
        cmocka_unit_test(test_bad_group_lines_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
