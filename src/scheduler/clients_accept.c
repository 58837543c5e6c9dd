/* clients_accept.c - who holds a client slot: connections accepted or
 * refused (the per-uid limit, memory), and closed when they stall before
 * registering or in the middle of a frame. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clients_internal.h"
#include "clock.h"
#include "log.h"
#include "scheduler.h"
#include "sock.h"

/* When c stalls (0: it does not): a connection that sends half a frame or
 * never registers would otherwise hold its slot, and its buffer, forever. */
static uint64_t stall_due(const struct client *c)
{
    if (!c->registered)
        return c->connected_at + CLIENT_STALL_NS;
    return c->partial_since ? c->partial_since + CLIENT_STALL_NS : 0;
}

uint64_t clients_expire_stalled(struct scheduler *s, uint64_t now)
{
    const struct client *first_unregistered = NULL;
    int unregistered = 0;
    uint64_t next = 0;

    for (int i = 0; i < s->table_size; i++) {
        struct client *c = s->clients[i];
        uint64_t due;
        if (!c->used || c->doomed || (due = stall_due(c)) == 0)
            continue;
        /* Those due within a batch go together: a flood of connections
         * made over a second then takes a few wake-ups, not one each. */
        if (now + CLIENT_STALL_BATCH_NS < due) {
            if (next == 0 || due < next)
                next = due;
            continue;
        }
        c->doomed = true;
        if (c->registered) {
            log_uid_warn(c->uid,
                         "client %llu (pid %d): a frame unfinished for "
                         "%.1f s: disconnecting",
                         (unsigned long long)c->id, (int)c->pid,
                         (double)CLIENT_STALL_NS / 1e9);
        } else if (unregistered++ == 0) {
            first_unregistered = c;
        }
    }
    /* A line per batch, not per connection. */
    if (unregistered)
        log_warn("%d connection(s) not registered for %.1f s (the first from "
                 "pid %d, uid %u): disconnecting",
                 unregistered, (double)CLIENT_STALL_NS / 1e9,
                 (int)first_unregistered->pid, (unsigned)first_unregistered->uid);
    return next;
}

/* A refused process retries (with a back-off), so a flood of them would
 * flood the log: a uid's first refusal is logged, then at most one line
 * every REFUSAL_LOG_NS with how many followed. */
#define REFUSAL_LOG_NS (10 * NS_PER_SEC)

static void log_refusals(const struct refusal_note *n, uint64_t now)
{
    log_warn("refused %llu more connection(s) of uid %u in the last %.0f s",
             (unsigned long long)n->unlogged, (unsigned)n->uid,
             (double)(now - n->logged_at) / 1e9);
}

static void note_refusal(struct scheduler *s, uid_t uid, const char *why)
{
    struct refusal_note *n = NULL, *oldest = &s->refusals[0];
    uint64_t now = now_ns();
    size_t count = sizeof(s->refusals) / sizeof(s->refusals[0]);

    s->refused++;
    for (size_t i = 0; i < count && !n; i++) {
        struct refusal_note *r = &s->refusals[i];
        if (r->logged_at && r->uid == uid)
            n = r;
        else if (r->logged_at < oldest->logged_at)
            oldest = r;
    }
    if (!n) {
        if (oldest->logged_at && oldest->unlogged)
            log_refusals(oldest, now);
        n = oldest;
        *n = (struct refusal_note){.uid = uid};
    }
    if (n->logged_at && now - n->logged_at < REFUSAL_LOG_NS) {
        n->unlogged++;
        return;
    }
    if (n->unlogged)
        log_refusals(n, now);
    else
        log_warn("refusing connections of uid %u: %s", (unsigned)uid, why);
    n->logged_at = now;
    n->unlogged = 0;
}

void clients_note_out_of_fds(struct scheduler *s, const char *socket_name)
{
    uint64_t now = now_ns();
    struct rlimit rl = {0};

    s->refused++;
    if (s->out_of_fds_logged_at &&
        now - s->out_of_fds_logged_at < REFUSAL_LOG_NS) {
        s->out_of_fds_unlogged++;
        return;
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if (s->out_of_fds_unlogged)
        log_warn("out of file descriptors: closed %llu more new connection(s) "
                 "unserved in the last %.0f s",
                 (unsigned long long)s->out_of_fds_unlogged,
                 (double)(now - s->out_of_fds_logged_at) / 1e9);
    log_warn("out of file descriptors (limit %llu): closed a new connection on "
             "%s unserved",
             (unsigned long long)rl.rlim_cur, socket_name);
    s->out_of_fds_logged_at = now;
    s->out_of_fds_unlogged = 0;
}

/* Tells the process why before closing, so that it says so once and backs
 * off rather than retrying blindly. */
static void refuse(struct scheduler *s, int fd, uid_t uid, uint8_t reason)
{
    struct msg m = {.type = MSG_REFUSED};
    char why[128];

    m.u.refused =
        (struct msg_refused){reason, (uint32_t)uid, s->max_connections_per_uid};
    if (reason == REFUSED_UID_LIMIT)
        snprintf(why, sizeof(why),
                 "it has %u connections already "
                 "(NVSHARE_MAX_CONNECTIONS_PER_UID)",
                 s->max_connections_per_uid);
    else
        snprintf(why, sizeof(why), "out of memory for another client");
    msg_send(fd, &m); /* best effort: it is closed either way */
    close(fd);
    note_refusal(s, uid, why);
}

/* Root and the daemon's own uid are trusted (see settings.c); any other
 * uid may hold max_connections_per_uid connections. */
static bool uid_at_limit(const struct scheduler *s, uid_t uid)
{
    unsigned n = 0;

    if (!s->max_connections_per_uid || uid == 0 || uid == s->uid)
        return false;
    for (int i = 0; i < s->table_size; i++)
        n += s->clients[i]->used && s->clients[i]->uid == uid;
    return n >= s->max_connections_per_uid;
}

/* A free slot, growing the tables when every one is taken; NULL if memory
 * ran out. */
static struct client *free_slot(struct scheduler *s)
{
    int size = s->table_size;

    for (int i = 0; i < size; i++)
        if (!s->clients[i]->used)
            return s->clients[i];
    if (!scheduler_grow(s, 2 * size))
        return NULL;
    log_info("client tables grown to %d slots", s->table_size);
    return s->clients[size];
}

void clients_on_listen(struct event_loop *loop, int fd, void *data)
{
    struct scheduler *s = data;
    int cfd = unix_accept(fd);
    struct client *c;
    pid_t pid;
    uid_t uid;

    if (cfd < 0) {
        if (errno == EMFILE)
            clients_note_out_of_fds(s, CLIENT_SOCKET_NAME);
        return;
    }
    if (unix_peer(cfd, &pid, &uid)) {
        log_warn("refusing a client: %s", strerror(errno));
        close(cfd);
        return;
    }
    if (uid_at_limit(s, uid)) {
        refuse(s, cfd, uid, REFUSED_UID_LIMIT);
        return;
    }
    c = free_slot(s);
    if (!c) {
        refuse(s, cfd, uid, REFUSED_NO_MEMORY);
        return;
    }
    int slot = c->slot;
    *c = (struct client){.sched = s, .slot = slot, .fd = cfd, .pid = pid, .uid = uid};
    c->reader = malloc(sizeof(*c->reader));
    if (!c->reader || event_loop_add(loop, cfd, client_on_readable, c)) {
        log_warn("refusing a client: %s", strerror(errno));
        free(c->reader);
        close(cfd);
        c->fd = -1;
        return;
    }
    c->reader->len = 0;
    c->connected_at = now_ns();
    c->used = true;
}
