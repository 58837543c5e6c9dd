/* metrics_http.c - serves /metrics (metrics.c renders it) and /status.json
 * (status_http.c), with the same limits.
 *
 * The HTTP server (libmicrohttpd, when the build found it) runs in its
 * external mode: its epoll fd is one more fd of the scheduler's event loop,
 * so no thread ever touches the scheduler's state and a scrape costs the
 * loop only the rendering. Without libmicrohttpd the rest of the scheduler
 * is the same; asking for metrics gets one line saying they are not built
 * in. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "log.h"
#include "scheduler.h"

#ifdef NVSHARE_HAVE_MICROHTTPD
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

static struct MHD_Daemon *daemon_;

/* Slow clients. MHD's idle timeout is renewed by every byte: 40 clients
 * that each sent a byte of a request every 4 s held all of its connections,
 * and each scrape timed out (issue 27). A cap per address would not help: a
 * local scraper and a local attacker share 127.0.0.1. So, as on
 * scheduler.sock, time is bounded in total: a connection has 2 s to send its
 * request (from its start, or from its last answer when kept alive) and
 * 10 s to take its answer; a scraper needs milliseconds. Up to 255 slow
 * connections leave a scrape its place; beyond that the scrape waits in the
 * kernel's accept queue for one that expires, about 2 s per 256 ahead of it
 * (MHD stops accepting at its limit). Displacing the oldest connection for
 * a new one would answer at once, but attackers that reconnect when closed
 * displace each other (and a scraper) thousands of times a second. An
 * expired connection is shut down, not closed: MHD owns the fd and closes
 * it at the end of file that follows. */
#define HTTP_CONNECTIONS 256
#define HTTP_REQUEST_NS (2 * NS_PER_SEC)
#define HTTP_ANSWER_NS (10 * NS_PER_SEC)

enum http_state { HTTP_FREE, HTTP_WAITING, HTTP_ANSWERING, HTTP_EXPIRED };

static struct http_slot {
    enum http_state state;
    int fd;
    uint64_t deadline;
} slots[HTTP_CONNECTIONS];

static void set_state(struct http_slot *slot, enum http_state state)
{
    slot->state = state;
    slot->deadline =
        now_ns() + (state == HTTP_ANSWERING ? HTTP_ANSWER_NS : HTTP_REQUEST_NS);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **context,
                          enum MHD_ConnectionNotificationCode code)
{
    const union MHD_ConnectionInfo *info;
    struct http_slot *slot = slots;

    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (*context)
            ((struct http_slot *)*context)->state = HTTP_FREE;
        return;
    }
    info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    while (slot < slots + HTTP_CONNECTIONS && slot->state != HTTP_FREE)
        slot++;
    if (slot == slots + HTTP_CONNECTIONS) { /* MHD's limit is the table's */
        shutdown(info->connect_fd, SHUT_RDWR);
        return;
    }
    slot->fd = info->connect_fd;
    set_state(slot, HTTP_WAITING);
    *context = slot;
}

static struct http_slot *slot_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return info ? info->socket_context : NULL;
}

/* An answer sent (or abandoned): a kept-alive connection waits again. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_slot *slot = slot_of(conn);

    (void)cls, (void)state, (void)toe;
    if (slot && slot->state == HTTP_ANSWERING)
        set_state(slot, HTTP_WAITING);
}

/* Shuts down the connections past their deadline; the next deadline, or 0. */
static uint64_t expire_connections(uint64_t now)
{
    uint64_t next = 0;

    for (struct http_slot *slot = slots; slot < slots + HTTP_CONNECTIONS; slot++) {
        if (slot->state != HTTP_WAITING && slot->state != HTTP_ANSWERING)
            continue;
        if (slot->deadline <= now) {
            shutdown(slot->fd, SHUT_RDWR);
            slot->state = HTTP_EXPIRED;
        } else if (!next || slot->deadline < next) {
            next = slot->deadline;
        }
    }
    return next;
}

/* MHD_run, timed: what serving HTTP costs the event loop. */
static void serve(struct scheduler *s)
{
    uint64_t start = now_ns();

    MHD_run(daemon_);
    s->counters.serve_ns += now_ns() - start;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_size, void **state)
{
    struct scheduler *s = cls;
    struct http_slot *slot = slot_of(conn);
    struct MHD_Response *r;
    unsigned status = MHD_HTTP_OK;
    enum MHD_Result rc;
    bool json = !strcmp(url, "/status.json");
    void (*text_free)(void *) = json ? free : metrics_text_free;
    char *text = NULL;
    size_t len = 0;

    (void)version, (void)upload_data, (void)upload_size, (void)state;
    if (slot && slot->state == HTTP_WAITING)
        set_state(slot, HTTP_ANSWERING);
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (json) {
        if (!(text = status_json_render(s, &len)))
            status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    } else if (strcmp(url, "/metrics")) {
        status = MHD_HTTP_NOT_FOUND;
    } else if (s->counters.scrapes++, !(text = metrics_render(s, &len))) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (status != MHD_HTTP_OK) {
        static char body[] =
            "nvshare-scheduler serves /metrics and /status.json only\n";
        r = MHD_create_response_from_buffer(strlen(body), body,
                                            MHD_RESPMEM_PERSISTENT);
    } else {
        r = MHD_create_response_from_buffer_with_free_callback(len, text,
                                                               text_free);
    }
    if (!r) {
        text_free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type",
                            status != MHD_HTTP_OK ? "text/plain"
                            : json
                                ? "application/json"
                                : "text/plain; version=0.0.4; charset=utf-8");
    /* kubectl nvshare nodes shows it: the status has no version record. */
    if (json)
        MHD_add_response_header(r, "X-Nvshare-Version", nvshare_version);
    rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static void on_readable(struct event_loop *loop, int fd, void *data)
{
    (void)loop, (void)fd;
    serve(data);
}

/* addr is host:port, [v6-host]:port, or :port (every IPv4 interface). */
static int resolve(const char *addr, struct sockaddr_storage *sa)
{
    char host[128];
    const char *colon = strrchr(addr, ':');
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICHOST |
                                         AI_NUMERICSERV,
                             .ai_socktype = SOCK_STREAM},
                    *res;
    size_t n;

    if (!colon || !colon[1])
        return -1;
    n = (size_t)(colon - addr);
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    if (n >= sizeof(host))
        return -1;
    memcpy(host, addr, n);
    host[n] = '\0';
    if (!n)
        hints.ai_family = AF_INET;
    if (getaddrinfo(n ? host : NULL, colon + 1, &hints, &res))
        return -1;
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

int metrics_start(struct scheduler *s, const char *addr)
{
    struct sockaddr_storage sa;
    const union MHD_DaemonInfo *info;

    if (!addr)
        addr = METRICS_DEFAULT_ADDR;
    if (resolve(addr, &sa) < 0) {
        log_error("NVSHARE_METRICS_ADDR '%s' is not host:port (e.g. "
                  "127.0.0.1:9402, "
                  "[::1]:9402, :9402) or off",
                  addr);
        return -1;
    }
    /* MHD_USE_EPOLL without an internal thread: MHD_run, from our loop, does
     * the work its epoll fd announces. */
    daemon_ =
        MHD_start_daemon(MHD_USE_EPOLL |
                             (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
                         0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                         (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned)HTTP_CONNECTIONS, MHD_OPTION_NOTIFY_CONNECTION,
                         on_connection, NULL, MHD_OPTION_NOTIFY_COMPLETED,
                         on_completed, NULL, MHD_OPTION_END);
    if (!daemon_) {
        /* Not fatal: scheduling matters more than its metrics. */
        log_error("metrics: cannot listen on %s (%s): /metrics is off", addr,
                  strerror(errno));
        return 0;
    }
    info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info || event_loop_add(s->loop, info->epoll_fd, on_readable, s) < 0) {
        log_error("metrics: cannot watch the HTTP server: /metrics is off");
        MHD_stop_daemon(daemon_);
        daemon_ = NULL;
        return 0;
    }
    log_info("metrics on http://%s/metrics", addr);
    return 0;
}

uint64_t metrics_tick(struct scheduler *s, uint64_t now)
{
    MHD_UNSIGNED_LONG_LONG ms;
    uint64_t next;

    if (!daemon_)
        return 0;
    next = expire_connections(now);
    if (MHD_get_timeout(daemon_, &ms) != MHD_YES)
        return next;
    if (ms == 0) {
        /* Work that no fd event announces: a connection that can still
         * write (MHD's own epoll is edge-triggered). */
        serve(s);
        if (MHD_get_timeout(daemon_, &ms) != MHD_YES)
            return next;
    }
    return next && next < now + (uint64_t)ms * NS_PER_MS
               ? next
               : now + (uint64_t)ms * NS_PER_MS;
}

void metrics_stop(void)
{
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
    metrics_text_free_spares();
}
#else
int metrics_start(struct scheduler *s, const char *addr)
{
    (void)s;
    if (addr)
        log_warn("NVSHARE_METRICS_ADDR=%s: metrics are not built in (build "
                 "with "
                 "libmicrohttpd: scripts/install-deps.sh build)",
                 addr);
    return 0;
}

uint64_t metrics_tick(struct scheduler *s, uint64_t now)
{
    (void)s, (void)now;
    return 0;
}

void metrics_stop(void)
{
}
#endif
