/* main.c - nvshare-scheduler: settings, sockets, signals, and the loop. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "env.h"
#include "log.h"
#include "parse.h"
#include "host_memory.h"
#include "scheduler.h"
#include "settings.h"
#include "sock.h"

/* The usage text around the settings' lines, which settings.c writes from
 * its table (settings.def). The socket directory and NVSHARE_DEBUG are read
 * where they are used (env.c, log.c). */
static void print_usage(FILE *out)
{
    fputs(
        "usage: nvshare-scheduler [--log-format text|json] [--help | "
        "--version]\n"
        "\n"
        "  --log-format json       one JSON object per log line (time, level,\n"
        "                          component, pid, msg); also "
        "NVSHARE_LOG_FORMAT\n"
        "\n"
        "The nvshare node daemon: time-slices each GPU of this node among the\n"
        "processes that run with libnvshare.so. Configured by the "
        "environment:\n"
        "\n"
        "  NVSHARE_SOCK_DIR        socket directory (default " DEFAULT_SOCK_DIR
        ")\n",
        out);
    settings_usage(out);
    fputs("  NVSHARE_DEBUG           1: log every scheduling decision\n"
          "\n"
          "Where a setting comes from, first found wins: the state file (what\n"
          "nvsharectl set changed at run time), the environment, the default.\n"
          "'nvsharectl reset SETTING' forgets the run-time value.\n"
          "\n"
          "Operate it with nvsharectl (see nvsharectl --help).\n",
          out);
}

static void on_signal(struct event_loop *loop, int fd, void *data)
{
    struct signalfd_siginfo info;

    (void)data;
    if (read(fd, &info, sizeof(info)) == sizeof(info))
        log_info("signal %u: shutting down", info.ssi_signo);
    event_loop_stop(loop);
}

/* One line when a GPU's core limits start or stop being scaled (they sum
 * above 100 %): from then on pods get less than their limits, by design.
 * Clients coming and going flip it: the lines are theirs, all together. */
static void log_limit_scaling(struct scheduler *s)
{
    for (int g = 0; g < s->n_gpus; g++) {
        unsigned sum = policy_limit_sum(s->policy, g);
        bool scaled = sum > 100;
        if (scaled == s->limits_scaled[g])
            continue;
        s->limits_scaled[g] = scaled;
        if (scaled)
            log_uid_info(LOG_UID_ANY,
                         "gpu %d: core limits sum to %u %%: "
                         "scaled by 100/%u",
                         g, sum, sum);
        else
            log_uid_info(LOG_UID_ANY,
                         "gpu %d: core limits no longer scaled "
                         "(sum %u %%)",
                         g, sum);
    }
}

/* The earlier of two deadlines, 0 meaning none. */
static uint64_t earliest_of(uint64_t a, uint64_t b)
{
    return a && (!b || a < b) ? a : b;
}

static uint64_t on_tick(struct event_loop *loop, uint64_t now, void *data)
{
    struct scheduler *s = data;
    static struct policy_actions out; /* large: off the stack */
    uint64_t next, quota_next, stall_next, stop_next, idle_next, log_next,
        sample_next;

    (void)loop;
    /* A flood of warnings that stopped still shows, at its window's end. */
    log_next = log_flush_repeats();
    log_next = log_next ? now + log_next : 0;
    sample_next = footprint_sample_overheads(s, now);
    stall_next = clients_expire_stalled(s, now);
    idle_next = control_expire_idle(s, now);
    policy_actions_clear(&out);
    stop_next = holders_revoke_stopped(s, now, &out);
    clients_apply(s, &out);
    unsigned pods_top = pods_top_class(&s->state.pods),
             groups_top = groups_top_class(&s->state.groups);
    policy_expect_class(s->policy, pods_top > groups_top ? pods_top : groups_top);
    /* Clients doomed in this iteration (by a handler or by the ticks' own
     * sends) are closed here, like redis's asynchronous frees; their
     * departures pass locks on, so the ticks run again for the deadlines. */
    do {
        do {
            policy_actions_clear(&out);
            next = policy_tick(s->policy, now, &out);
            clients_apply(s, &out);
        } while (out.truncated);
        log_limit_scaling(s);
        struct quota_actions quota_out = {0};
        quota_next = quota_tick(&s->quota, now, &quota_out);
        clients_apply_quota(s, &quota_out);
    } while (clients_reap(s));
    return earliest_of(earliest_of(earliest_of(next, quota_next),
                                   earliest_of(stall_next, stop_next)),
                       earliest_of(earliest_of(metrics_tick(s, now), idle_next),
                                   earliest_of(sample_next, log_next)));
}

/* Holds an exclusive lock on <dir>/scheduler.lock for the process lifetime,
 * so a second scheduler cannot steal the sockets of a running one. */
static int lock_sock_dir(void)
{
    char path[256];
    int fd;

    if (socket_path("scheduler.lock", path, sizeof(path)))
        return -1;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_error("cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        log_error("another scheduler is running with socket directory %s",
                  env_sock_dir());
        close(fd);
        return -1;
    }
    return fd;
}

static int listen_on(struct scheduler *s, const char *name, mode_t mode,
                     fd_handler handler)
{
    char path[256];
    int fd;

    if (socket_path(name, path, sizeof(path))) {
        log_error("socket path too long: %s/%s", env_sock_dir(), name);
        return -1;
    }
    fd = unix_listen(path, mode);
    if (fd < 0 || event_loop_add(s->loop, fd, handler, s) < 0) {
        log_error("cannot listen on %s: %s", path, strerror(errno));
        return -1;
    }
    log_info("listening on %s", path);
    return fd;
}

/* The state file's settings replace the environment's: they are what the
 * operator set last. Where the environment said otherwise, one warning
 * says so, and how to let the environment's value apply again. */
static void apply_state_settings(const struct scheduler *s,
                                 uint64_t v[SETTING_COUNT])
{
    const struct node_state *st = &s->state;
    char env[160], value[32];

    for (int id = 0; id < SETTING_COUNT; id++) {
        if (!st->set[id])
            continue;
        setting_env_text(id, env, sizeof(env));
        if (*env && setting_state_value(v, id) != st->value[id]) {
            setting_format(id, st->value[id], value, sizeof(value));
            log_warn("%s is overridden by the state file's %s %s (set with "
                     "nvsharectl): "
                     "'nvsharectl reset %s' lets the environment's value apply",
                     env, settings_table[id].name, value,
                     settings_table[id].name);
        }
    }
    state_overlay(st, v);
}

static void warn_mode_override(const struct scheduler *s, int gpu, uint8_t mode)
{
    char env[160];

    setting_env_text(SETTING_SCHEDULING_MODE, env, sizeof(env));
    if (*env && mode != s->env_settings[SETTING_SCHEDULING_MODE])
        log_warn(
            "%s is overridden on gpu %d by the state file's mode %s (set with "
            "nvsharectl): 'nvsharectl reset mode' lets the environment's value "
            "apply",
            env, gpu, sched_mode_names[mode]);
}

static void apply_state_modes(struct scheduler *s)
{
    const struct node_state *st = &s->state;

    for (int i = 0; i < st->n_modes; i++) {
        int g = 0;
        while (g < s->n_gpus && strcmp(s->gpus[g].uuid, st->modes[i].uuid))
            g++;
        if (g < s->n_gpus) {
            policy_set_mode(s->policy, g, (enum sched_mode)st->modes[i].mode);
            warn_mode_override(s, g, st->modes[i].mode);
        } else
            log_warn("state file: GPU %s is not on this node: its mode is kept "
                     "for when it is",
                     st->modes[i].uuid);
    }
}

/* The operator's state, before any client can register. */
static int load_state(struct scheduler *s)
{
    const char *path = setting_text(SETTING_STATE_FILE);
    char text[256];
    size_t n = 0, pods = 0;

    if (!path)
        path = STATE_DEFAULT_PATH;
    if (!*path) {
        log_info(
            "state file: none (NVSHARE_STATE_FILE is empty): settings made "
            "at run time are lost on restart");
        return 0;
    }
    if (state_load(path, &s->state) < 0)
        return -1;
    /* Written back at once: a state file that cannot be written is found
     * now, with one line, not at the operator's first change. */
    if (state_save(path, &s->state) < 0) {
        log_warn("settings made at run time will not survive a restart "
                 "(set NVSHARE_STATE_FILE to a writable path)");
        return 0;
    }
    s->state_path = path;
    for (int id = 0; id < SETTING_COUNT && n < sizeof(text); id++)
        if (s->state.set[id])
            n += (size_t)snprintf(text + n, sizeof(text) - n, " %s",
                                  settings_table[id].name);
    for (size_t i = 0; i < s->state.pods.n; i++)
        pods += pod_configured(&s->state.pods.list[i]);
    log_info("state file %s: %zu pod(s) with limits; settings from it:%s", path,
             pods, n ? text : " none");
    return 0;
}

/* The policy, with its settings from the environment (settings.def) and the
 * state file. */
static int configure_policy(struct scheduler *s)
{
    uint64_t v[SETTING_COUNT];

    if (settings_load(v) < 0 || load_state(s) < 0)
        return -1;
    memcpy(s->env_settings, v, sizeof(s->env_settings));
    apply_state_settings(s, v);
    /* Only the policy knows its layout: the daemon holds it by pointer. */
    s->policy = calloc(1, policy_size());
    if (!s->policy) {
        log_error("out of memory");
        return -1;
    }
    policy_init(s->policy, s->n_gpus, v[SETTING_TQ], v[SETTING_DRAIN_TIMEOUT]);
    policy_set_window(s->policy, v[SETTING_COMPUTE_WINDOW_MS] * NS_PER_MS,
                      (unsigned)v[SETTING_QUOTA_CARRYOVER_PERCENT]);
    /* The multiplier; the fixed switch time (0: measure it) is a run-time
     * setting's. */
    policy_set_switch_time(s->policy, 0,
                           (unsigned)v[SETTING_SWITCH_TIME_MULTIPLIER]);
    s->proc_root = setting_text(SETTING_PROC_ROOT);
    if (s->proc_root && !*s->proc_root)
        s->proc_root = NULL;
    s->host_swap_auto = host_swap_budget_auto(s->proc_root);
    /* tq, anti-thrash, mode, switch time, idle reclaim: as nvsharectl set
     * puts them in force (nobody has joined yet: nothing to drop); then the
     * GPUs' own modes. */
    control_apply_start(s, v);
    apply_state_modes(s);
    policy_set_reserve(s->policy, (unsigned)v[SETTING_MEMORY_RESERVE_PERCENT]);
    s->context_overhead = v[SETTING_CONTEXT_OVERHEAD];
    s->oversub_default = v[SETTING_ENABLE_OVERSUB];
    s->oversub_ratio = (unsigned)v[SETTING_OVERSUB_RATIO];
    s->declared_limits = v[SETTING_DECLARED_LIMITS];
    s->max_connections_per_uid = (unsigned)v[SETTING_MAX_CONNECTIONS_PER_UID];
    for (int i = 0; i < s->n_gpus; i++)
        policy_set_capacity(s->policy, i, s->gpus[i].memory_total);
    settings_log(v);
    return 0;
}

/* Every client holds a descriptor: a soft limit of 1024 would refuse
 * clients long before anything else runs out. */
static void raise_fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            log_warn("cannot raise the descriptor limit: %s", strerror(errno));
    }
}

/* The GPUs to schedule, each logged once: without any there is nothing to
 * do, and saying so beats a daemon that waits for ever. */
static int discover_gpus(struct scheduler *s)
{
    char err[256];

    s->n_gpus = gpus_discover(setting_text(SETTING_GPUS), s->gpus,
                              POLICY_MAX_GPUS, err, sizeof(err));
    if (s->n_gpus < 0) {
        log_error("%s", err);
        return -1;
    }
    if (s->n_gpus == 0) {
        log_error(
            "no GPUs found (no NVIDIA driver?); set NVSHARE_GPUS=UUID:MiB "
            "to schedule configured GPUs");
        return -1;
    }
    for (int i = 0; i < s->n_gpus; i++) {
        char size[32];
        format_size(s->gpus[i].memory_total, size, sizeof(size));
        log_info("gpu %d: %s (%s, %s)", i, s->gpus[i].uuid, s->gpus[i].name,
                 size);
    }
    return 0;
}

/* SIGINT and SIGTERM arrive as events of the loop, so that the loop ends
 * between two handlers and never inside one. */
static int watch_signals(struct scheduler *s)
{
    sigset_t mask;
    int sfd;

    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0 || event_loop_add(s->loop, sfd, on_signal, NULL) < 0) {
        log_error("signalfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The loop and what it listens on: the sockets last, once everything a
 * client's first message needs is in place. */
static int open_loop(struct scheduler *s)
{
    if (mkdir(env_sock_dir(), 0755) < 0 && errno != EEXIST) {
        log_error("cannot create %s: %s", env_sock_dir(), strerror(errno));
        return -1;
    }
    if (lock_sock_dir() < 0)
        return -1;
    s->loop = event_loop_create(on_tick, s);
    if (!s->loop) {
        log_error("event loop: %s", strerror(errno));
        return -1;
    }
    if (watch_signals(s) < 0 ||
        listen_on(s, CLIENT_SOCKET_NAME, 0666, clients_on_listen) < 0 ||
        listen_on(s, CONTROL_SOCKET_NAME, 0600, control_on_listen) < 0)
        return -1;
    const char *metrics_addr = setting_text(SETTING_METRICS_ADDR);
    if (metrics_addr && !strcmp(metrics_addr, "off"))
        return 0;
    return metrics_start(s, metrics_addr);
}

static int setup(struct scheduler *s)
{
    if (discover_gpus(s) < 0)
        return -1;
    quota_init(&s->quota, s->n_gpus);
    if (configure_policy(s) < 0)
        return -1;
    raise_fd_limit();
    if (unix_keep_spare() < 0)
        log_warn("no spare file descriptor (%s): out of them, the scheduler "
                 "would spin on a pending connection",
                 strerror(errno));
    s->started_at = now_ns();
    s->uid = getuid();
    if (!scheduler_grow(s, SCHEDULER_INITIAL_TABLE_SIZE)) {
        log_error("out of memory");
        return -1;
    }
    return open_loop(s);
}

int main(int argc, char **argv)
{
    /* Static: it is large (the GPUs' quotas, the state), and starts zeroed. */
    static struct scheduler sched;
    char path[256];

    log_init("scheduler", LOG_INFO);
    for (int i = 1; i < argc; i++) {
        const char *format = NULL;

        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            cli_print_version("nvshare-scheduler");
            return 0;
        }
        if (!strncmp(argv[i], "--log-format=", 13))
            format = argv[i] + 13;
        else if (!strcmp(argv[i], "--log-format"))
            format = i + 1 < argc ? argv[++i] : "";
        if (!format) {
            fprintf(stderr,
                    "nvshare-scheduler: unknown argument '%s' (see "
                    "nvshare-scheduler --help)\n",
                    argv[i]);
            return CLI_EXIT_USAGE;
        }
        if (log_set_format(format) < 0) {
            fprintf(stderr, "nvshare-scheduler: --log-format must be text or json%s%s%s\n",
                    *format ? ", not '" : "", format, *format ? "'" : "");
            return CLI_EXIT_USAGE;
        }
    }
    if (setup(&sched) < 0)
        return 1;
    event_loop_run(sched.loop);
    metrics_stop();
    if (!socket_path(CLIENT_SOCKET_NAME, path, sizeof(path)))
        unlink(path);
    if (!socket_path(CONTROL_SOCKET_NAME, path, sizeof(path)))
        unlink(path);
    return 0;
}
