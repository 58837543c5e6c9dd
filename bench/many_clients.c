/* many_clients.c - many connections to a scheduler from one process.
 *
 *   many_clients SOCKET_DIR N GPU_UUID [idle | pods]
 *
 * Opens N connections to SOCKET_DIR/scheduler.sock and registers each as a
 * client of GPU_UUID (speaking the protocol directly: the client runtime
 * is one connection per process), or with `idle` leaves them unregistered.
 * With `pods` client i declares the pod bench/pod-<i>: one pod each, as
 * the metrics endpoint's worst case.
 * Prints one line,
 *
 *   registered=<n> refused=<n> failed=<n>      (idle: connected=<n>)
 *
 * and then holds the connections open until it is killed. Used by
 * bench/many_clients.sh and tests/integration/many_clients.sh. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"
#include "sock.h"

/* 0 registered, 1 refused (REFUSED), -1 anything else. */
static int register_one(int fd, const char *uuid, int pod)
{
    struct msg m = {.type = MSG_REGISTER};

    if (pod >= 0) {
        snprintf(m.u.reg.pod_namespace, sizeof(m.u.reg.pod_namespace), "bench");
        snprintf(m.u.reg.pod_name, sizeof(m.u.reg.pod_name), "pod-%d", pod);
    }

    m.u.reg.pid = (uint32_t)getpid();
    m.u.reg.oversub = OVERSUB_NODE_DEFAULT;
    m.u.reg.n_gpus = 1;
    snprintf(m.u.reg.gpu_uuids[0], sizeof(m.u.reg.gpu_uuids[0]), "%s", uuid);
    int sent = msg_send(fd, &m);
    /* A refusal may close the socket under the send: read it anyway. */
    if (msg_recv(fd, &m, 5000) == PROTO_OK && m.type == MSG_REFUSED)
        return 1;
    return sent == PROTO_OK && m.type == MSG_REGISTER_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    char path[512];
    struct rlimit rl;
    int n, counts[3] = {0}; /* failed, registered, refused */
    bool idle, pods;

    if (argc < 4 || (n = atoi(argv[2])) < 1) {
        fprintf(stderr, "usage: %s SOCKET_DIR N GPU_UUID [idle | pods]\n",
                argv[0]);
        return 2;
    }
    idle = argc > 4 && !strcmp(argv[4], "idle");
    pods = argc > 4 && !strcmp(argv[4], "pods");
    snprintf(path, sizeof(path), "%s/%s", argv[1], CLIENT_SOCKET_NAME);
    /* One descriptor per connection. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < n; i++) {
        /* A full listen queue answers EAGAIN: a scheduler slowed down (a
         * loaded machine, a sanitizer build) accepts them a moment later. */
        int fd = -1;
        for (int tries = 0; fd < 0 && tries < 200; tries++) {
            if ((fd = unix_connect(path)) < 0 && errno != EAGAIN)
                break;
            if (fd < 0)
                nanosleep(&(struct timespec){0, 10000000}, NULL);
        }
        if (fd < 0) {
            if (counts[0]++ == 0)
                fprintf(stderr, "many_clients: connect: %s\n", strerror(errno));
            continue;
        }
        if (idle) {
            counts[1]++;
            continue;
        }
        int rc = register_one(fd, argv[3], pods ? i : -1);
        counts[rc + 1]++;
        if (rc)
            close(fd);
    }
    if (idle)
        printf("connected=%d failed=%d\n", counts[1], counts[0]);
    else
        printf("registered=%d refused=%d failed=%d\n", counts[1], counts[2],
               counts[0]);
    fflush(stdout);
    for (;;)
        pause();
}
