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

static uint64_t on_tick(struct event_loop *loop, uint64_t now, void *data)
{
    struct scheduler *s = data;
    struct policy_actions out = {0};
    struct quota_actions quota_out = {0};
    uint64_t next, quota_next;

    (void)loop;
    next = policy_tick(&s->policy, now, &out);
    clients_apply(s, &out);
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

static int setup(void)
{
    char err[256], tq[32];
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
    policy_init(&sched.policy, sched.n_gpus,
                env_duration_ns("NVSHARE_TQ", DEFAULT_TQ_NS),
                env_duration_ns("NVSHARE_DRAIN_TIMEOUT", DEFAULT_DRAIN_TIMEOUT_NS));
    sched.policy.anti_thrash = env_switch("NVSHARE_ANTI_THRASH", true);
    quota_init(&sched.quota, sched.n_gpus);
    policy_set_window(&sched.policy,
                      (uint64_t)env_int_range("NVSHARE_COMPUTE_WINDOW_MS", 100,
                                              60000, 1000) * NS_PER_MS,
                      (unsigned)env_int_range("NVSHARE_QUOTA_CARRYOVER_PERCENT",
                                              0, 100, 100));
    format_duration(sched.policy.tq_ns, tq, sizeof(tq));
    log_info("time quantum %s, anti-thrashing %s", tq,
             sched.policy.anti_thrash ? "on" : "off");
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
