/* main.c - nvshare-scheduler: settings, sockets, signals, and the loop. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "env.h"
#include "log.h"
#include "parse.h"
#include "scheduler.h"
#include "sock.h"

#define DEFAULT_TQ_NS (30 * NS_PER_SEC)
#define DEFAULT_DRAIN_TIMEOUT_NS (10 * NS_PER_SEC)

static const char usage[] =
    "usage: nvshare-scheduler [--help | --version]\n"
    "\n"
    "The nvshare node daemon: time-slices each GPU of this node among the\n"
    "processes that run with libnvshare.so. Configured by the environment:\n"
    "\n"
    "  NVSHARE_SOCK_DIR        socket directory (default " DEFAULT_SOCK_DIR ")\n"
    "  NVSHARE_GPUS            UUID:MiB,... instead of NVML discovery\n"
    "  NVSHARE_TQ              time quantum, e.g. 30s, 100ms (default 30s)\n"
    "  NVSHARE_DRAIN_TIMEOUT   revoke a lock not released this long after\n"
    "                          DROP_LOCK (default 10s)\n"
    "  NVSHARE_ANTI_THRASH     on|off: take turns, or let clients run freely\n"
    "                          (default on)\n"
    "  NVSHARE_COMPUTE_WINDOW_MS  compute-limit accounting window, 100-60000\n"
    "                          (default 1000)\n"
    "  NVSHARE_QUOTA_CARRYOVER_PERCENT  share of a window's overshoot billed\n"
    "                          to the next one, 0-100 (default 100)\n"
    "  NVSHARE_SCHEDULING_MODE serial|concurrent|auto: one holder at a time,\n"
    "                          everyone whose memory fits, or co-run light\n"
    "                          clients that fit and time-slice the rest\n"
    "                          (default auto)\n"
    "  NVSHARE_MEMORY_RESERVE_PERCENT  of each GPU kept free, 0-50 (default 10)\n"
    "  NVSHARE_CONTEXT_OVERHEAD  a client's memory beyond its allocations\n"
    "                          where NVML cannot measure it (default 512Mi)\n"
    "  NVSHARE_SWITCH_TIME_MODE  auto|fixed: quantum of memory rotations\n"
    "                          (default auto: measured swap time x multiplier)\n"
    "  NVSHARE_SWITCH_TIME_FIXED  in fixed mode (default 60s)\n"
    "  NVSHARE_SWITCH_TIME_MULTIPLIER  in auto mode, 1-1000 (default 30)\n"
    "  NVSHARE_ENABLE_OVERSUB  1: clients that do not say otherwise get\n"
    "                          managed memory and can be swapped (default 0)\n"
    "  NVSHARE_OVERSUB_RATIO   oversubscribed clients of a GPU hold at most\n"
    "                          this x its capacity, 1-16 (default 2)\n"
    "  NVSHARE_DEBUG           1: log every scheduling decision\n"
    "\n"
    "Operate it with nvsharectl (see nvsharectl --help).\n";

static struct scheduler sched;

static void on_signal(struct event_loop *loop, int fd, void *data)
{
    struct signalfd_siginfo info;

    (void)data;
    if (read(fd, &info, sizeof(info)) == sizeof(info))
        log_info("signal %u: shutting down", info.ssi_signo);
    event_loop_stop(loop);
}

/* One line when a GPU's core limits start or stop being scaled (they sum
 * above 100 %): from then on pods get less than their limits, by design. */
static void log_limit_scaling(struct scheduler *s)
{
    for (int g = 0; g < s->n_gpus; g++) {
        unsigned sum = policy_limit_sum(s->policy, g);
        bool scaled = sum > 100;
        if (scaled == s->limits_scaled[g])
            continue;
        s->limits_scaled[g] = scaled;
        if (scaled)
            log_info("gpu %d: core limits sum to %u %%: scaled by 100/%u", g,
                     sum, sum);
        else
            log_info("gpu %d: core limits no longer scaled (sum %u %%)", g, sum);
    }
}

static uint64_t on_tick(struct event_loop *loop, uint64_t now, void *data)
{
    struct scheduler *s = data;
    static struct policy_actions out; /* large: off the stack */
    struct quota_actions quota_out = {0};
    uint64_t next, quota_next;

    (void)loop;
    footprint_sample_overheads(s, now);
    do {
        policy_actions_clear(&out);
        next = policy_tick(s->policy, now, &out);
        clients_apply(s, &out);
    } while (out.truncated);
    log_limit_scaling(s);
    quota_next = quota_tick(&s->quota, now, &quota_out);
    clients_apply_quota(s, &quota_out);
    return next && (!quota_next || next < quota_next) ? next : quota_next;
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

static int listen_on(const char *name, mode_t mode, fd_handler handler)
{
    char path[256];
    int fd;

    if (socket_path(name, path, sizeof(path))) {
        log_error("socket path too long: %s/%s", env_sock_dir(), name);
        return -1;
    }
    fd = unix_listen(path, mode);
    if (fd < 0 || event_loop_add(sched.loop, fd, handler, &sched) < 0) {
        log_error("cannot listen on %s: %s", path, strerror(errno));
        return -1;
    }
    log_info("listening on %s", path);
    return fd;
}

static const char *const mode_names[] = {"serial", "concurrent", "auto"};

/* Modes, memory reserve, switch time and oversubscription from the
 * environment. */
static int configure_memory_aware(void)
{
    const char *mode = getenv("NVSHARE_SCHEDULING_MODE");
    const char *switch_mode = getenv("NVSHARE_SWITCH_TIME_MODE");
    enum sched_mode chosen = SCHED_MODE_AUTO;
    char size[32];

    if (mode && *mode) {
        int i = 0;
        while (i < 3 && strcmp(mode, mode_names[i]))
            i++;
        if (i == 3) {
            log_error("NVSHARE_SCHEDULING_MODE: '%s' is not serial, concurrent "
                      "or auto", mode);
            return -1;
        }
        chosen = (enum sched_mode)i;
    }
    policy_set_mode(sched.policy, -1, chosen);
    unsigned reserve = (unsigned)env_int_range("NVSHARE_MEMORY_RESERVE_PERCENT",
                                               0, 50, POLICY_RESERVE_PERCENT);
    policy_set_reserve(sched.policy, reserve);
    sched.context_overhead = env_size_bytes("NVSHARE_CONTEXT_OVERHEAD", 512ull << 20);
    if (switch_mode && *switch_mode && strcmp(switch_mode, "auto") &&
        strcmp(switch_mode, "fixed")) {
        log_error("NVSHARE_SWITCH_TIME_MODE: '%s' is not auto or fixed",
                  switch_mode);
        return -1;
    }
    bool fixed = switch_mode && !strcmp(switch_mode, "fixed");
    policy_set_switch_time(
        sched.policy,
        fixed ? env_duration_ns("NVSHARE_SWITCH_TIME_FIXED", 60 * NS_PER_SEC) : 0,
        (unsigned)env_int_range("NVSHARE_SWITCH_TIME_MULTIPLIER", 1, 1000,
                                POLICY_SWITCH_MULTIPLIER));
    sched.oversub_default = env_switch("NVSHARE_ENABLE_OVERSUB", false);
    sched.oversub_ratio = (unsigned)env_int_range("NVSHARE_OVERSUB_RATIO", 1, 16, 2);
    for (int i = 0; i < sched.n_gpus; i++)
        policy_set_capacity(sched.policy, i, sched.gpus[i].memory_total);
    format_size(sched.context_overhead, size, sizeof(size));
    log_info("scheduling mode %s, memory reserve %u%%, context overhead %s "
             "until measured, switch time %s, oversubscription %s by default",
             mode_names[chosen], reserve, size,
             fixed ? "fixed" : "auto", sched.oversub_default ? "on" : "off");
    return 0;
}

/* The policy, with its settings from the environment. */
static int configure_policy(void)
{
    struct policy_settings_view settings;
    char tq[32];

    /* Only the policy knows its layout: the daemon holds it by pointer. */
    sched.policy = calloc(1, policy_size());
    if (!sched.policy) {
        log_error("out of memory");
        return -1;
    }
    policy_init(sched.policy, sched.n_gpus,
                env_duration_ns("NVSHARE_TQ", DEFAULT_TQ_NS),
                env_duration_ns("NVSHARE_DRAIN_TIMEOUT", DEFAULT_DRAIN_TIMEOUT_NS));
    /* Nobody has joined yet: nothing to drop. */
    policy_set_anti_thrash(sched.policy, env_switch("NVSHARE_ANTI_THRASH", true), 0);
    policy_set_window(sched.policy,
                      (uint64_t)env_int_range("NVSHARE_COMPUTE_WINDOW_MS", 100,
                                              60000, 1000) * NS_PER_MS,
                      (unsigned)env_int_range("NVSHARE_QUOTA_CARRYOVER_PERCENT",
                                              0, 100, 100));
    if (configure_memory_aware() < 0)
        return -1;
    policy_view_settings(sched.policy, &settings);
    format_duration(settings.tq_ns, tq, sizeof(tq));
    log_info("time quantum %s, anti-thrashing %s", tq,
             settings.anti_thrash ? "on" : "off");
    return 0;
}

static int setup(void)
{
    char err[256];
    sigset_t mask;
    int sfd;

    sched.n_gpus = gpus_discover(sched.gpus, POLICY_MAX_GPUS, err, sizeof(err));
    if (sched.n_gpus < 0) {
        log_error("%s", err);
        return -1;
    }
    if (sched.n_gpus == 0) {
        log_error("no GPUs found (no NVIDIA driver?); set NVSHARE_GPUS=UUID:MiB "
                  "to schedule configured GPUs");
        return -1;
    }
    for (int i = 0; i < sched.n_gpus; i++) {
        char size[32];
        format_size(sched.gpus[i].memory_total, size, sizeof(size));
        log_info("gpu %d: %s (%s, %s)", i, sched.gpus[i].uuid,
                 sched.gpus[i].name, size);
    }
    quota_init(&sched.quota, sched.n_gpus);
    if (configure_policy() < 0)
        return -1;
    sched.started_at = now_ns();
    sched.uid = getuid();
    for (int i = 0; i < POLICY_MAX_CLIENTS; i++)
        sched.clients[i].fd = -1;

    if (mkdir(env_sock_dir(), 0755) < 0 && errno != EEXIST) {
        log_error("cannot create %s: %s", env_sock_dir(), strerror(errno));
        return -1;
    }
    if (lock_sock_dir() < 0)
        return -1;
    sched.loop = event_loop_create(on_tick, &sched);
    if (!sched.loop) {
        log_error("event loop: %s", strerror(errno));
        return -1;
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0 || event_loop_add(sched.loop, sfd, on_signal, NULL) < 0) {
        log_error("signalfd: %s", strerror(errno));
        return -1;
    }
    if (listen_on(CLIENT_SOCKET_NAME, 0666, clients_on_listen) < 0 ||
        listen_on(CONTROL_SOCKET_NAME, 0600, control_on_listen) < 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    char path[256];

    log_init("scheduler");
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        puts("nvshare-scheduler " NVSHARE_VERSION);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "nvshare-scheduler: unknown argument '%s'\n\n%s", argv[1],
                usage);
        return 2;
    }
    if (setup() < 0)
        return 1;
    event_loop_run(sched.loop);
    if (!socket_path(CLIENT_SOCKET_NAME, path, sizeof(path)))
        unlink(path);
    if (!socket_path(CONTROL_SOCKET_NAME, path, sizeof(path)))
        unlink(path);
    return 0;
}
