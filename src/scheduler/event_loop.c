/* event_loop.c - epoll back end for event_loop.h.
 *
 * Registrations live in a table indexed by fd, so a handler that removes
 * another fd (a client killed while its events are still pending in this
 * batch) simply makes that fd's pending event a no-op. */
#include "event_loop.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "clock.h"

#define MAX_BATCH 64

struct registration {
    fd_handler handler;
    void *data;
};

struct event_loop {
    int epfd;
    bool stop;
    tick_handler tick;
    void *tick_data;
    struct registration *regs;
    int n_regs;
};

struct event_loop *event_loop_create(tick_handler tick, void *tick_data)
{
    struct event_loop *loop = calloc(1, sizeof(*loop));

    if (!loop)
        return NULL;
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0) {
        free(loop);
        return NULL;
    }
    loop->tick = tick;
    loop->tick_data = tick_data;
    return loop;
}

void event_loop_destroy(struct event_loop *loop)
{
    close(loop->epfd);
    free(loop->regs);
    free(loop);
}

int event_loop_add(struct event_loop *loop, int fd, fd_handler handler, void *data)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

    if (fd >= loop->n_regs) {
        int n = fd * 2 + 16;
        struct registration *regs =
            realloc(loop->regs, (size_t)n * sizeof(*regs));
        if (!regs)
            return -1;
        for (int i = loop->n_regs; i < n; i++)
            regs[i] = (struct registration){0};
        loop->regs = regs;
        loop->n_regs = n;
    }
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -1;
    loop->regs[fd] = (struct registration){handler, data};
    return 0;
}

void event_loop_remove(struct event_loop *loop, int fd)
{
    if (fd < 0 || fd >= loop->n_regs)
        return;
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
    loop->regs[fd] = (struct registration){0};
}

void event_loop_stop(struct event_loop *loop)
{
    loop->stop = true;
}

void event_loop_run(struct event_loop *loop)
{
    uint64_t deadline = loop->tick(loop, now_ns(), loop->tick_data);

    while (!loop->stop) {
        struct epoll_event events[MAX_BATCH];
        int timeout = -1;

        if (deadline) {
            uint64_t now = now_ns();
            /* Round up: waking early would spin until the deadline. */
            timeout = deadline <= now
                          ? 0
                          : (int)((deadline - now + NS_PER_MS - 1) / NS_PER_MS);
        }
        int n = epoll_wait(loop->epfd, events, MAX_BATCH, timeout);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd < loop->n_regs && loop->regs[fd].handler)
                loop->regs[fd].handler(loop, fd, loop->regs[fd].data);
        }
        deadline = loop->tick(loop, now_ns(), loop->tick_data);
    }
}
