/* metrics.c - /metrics in the Prometheus text format (docs/operations.md).
 *
 * The text is rendered from the same views as nvsharectl status. The HTTP
 * server (libmicrohttpd, when the build found it) runs in its external
 * mode: its epoll fd is one more fd of the scheduler's event loop, so no
 * thread ever touches the scheduler's state and a scrape costs the loop
 * only the rendering. Without libmicrohttpd the rest of the scheduler is
 * the same; asking for metrics gets one line saying they are not built in. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "scheduler.h"

/* ---- rendering (libc only) ---------------------------------------------- */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the text format quotes it: names come from tenants'
 * declarations, so anything may be in them. */
static void put_label(FILE *f, const char *key, const char *value, bool first)
{
    fprintf(f, "%s%s=\"", first ? "" : ",", key);
    for (const char *c = value; *c; c++) {
        if (*c == '\\' || *c == '"')
            fprintf(f, "\\%c", *c);
        else if (*c == '\n')
            fputs("\\n", f);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

static double seconds(uint64_t ns)
{
    return (double)ns / 1e9;
}

static void histogram_lines(FILE *f, const char *name, const char *labels,
                            const struct histogram *h)
{
    uint64_t cumulative = 0;
    const char *sep = *labels ? "," : "";

    for (int i = 0; i < HISTOGRAM_BUCKETS; i++) {
        cumulative += h->bucket[i];
        fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep,
                seconds(histogram_bounds_ns[i]), (unsigned long long)cumulative);
    }
    fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
            (unsigned long long)h->count);
    const char *open = *labels ? "{" : "", *close = *labels ? "}" : "";
    fprintf(f, "%s_sum%s%s%s %.9f\n", name, open, labels, close, seconds(h->sum_ns));
    fprintf(f, "%s_count%s%s%s %llu\n", name, open, labels, close,
            (unsigned long long)h->count);
}

static uint64_t limit_of(const struct limit_setting *l)
{
    uint8_t source;

    return limit_effective(l, &source);
}

/* One pod on one GPU: per-pod series are per GPU, as quotas and limits are. */
struct pod_series {
    int account, gpu;
    char labels[3 * PROTO_NAME_MAX + 128];
};

/* The pods (accounts of a pod) with a client on each GPU. Clients in no pod
 * are an account each, with nothing to name them by across restarts: the
 * node-wide metrics count them. */
static struct pod_series *pod_series_list(const struct scheduler *s, int *n)
{
    struct pod_series *list = NULL;
    bool *seen = calloc((size_t)s->table_size * (size_t)s->n_gpus, sizeof(bool));
    int count = 0, size = 0;

    *n = 0;
    if (!seen)
        return NULL;
    for (int slot = 0; slot < s->table_size; slot++) {
        const struct client *c = s->clients[slot];
        if (!c->used || !c->registered || pod_id_empty(&s->accounts[c->account].pod))
            continue;
        for (int g = 0; g < s->n_gpus; g++) {
            bool *mark = &seen[(size_t)c->account * (size_t)s->n_gpus + (size_t)g];
            if (*mark || !policy_is_member(s->policy, g, slot))
                continue;
            if (count == size) {
                size = size ? 2 * size : 16;
                struct pod_series *grown = realloc(list, (size_t)size * sizeof(*list));
                if (!grown)
                    goto out;
                list = grown;
            }
            *mark = true;
            struct pod_series *p = &list[count++];
            const struct pod_id *id = &s->accounts[c->account].pod;
            FILE *f = fmemopen(p->labels, sizeof(p->labels), "w");
            p->account = c->account;
            p->gpu = g;
            if (!f) {
                count--;
                goto out;
            }
            put_label(f, "namespace", id->pod_namespace, true);
            put_label(f, "pod", id->pod_name, false);
            if (id->uid[0])
                put_label(f, "pod_uid", id->uid, false);
            put_label(f, "gpu", s->gpus[g].uuid, false);
            fprintf(f, ",index=\"%d\"", g);
            fclose(f);
        }
    }
out:
    free(seen);
    *n = count;
    return list;
}

static void render_gpus(FILE *f, const struct scheduler *s)
{
    struct policy_gpu_view v[POLICY_MAX_GPUS];
    char labels[POLICY_MAX_GPUS][PROTO_NAME_MAX + 32];

    for (int g = 0; g < s->n_gpus; g++) {
        policy_view_gpu(s->policy, g, &v[g]);
        snprintf(labels[g], sizeof(labels[g]), "gpu=\"%s\",index=\"%d\"",
                 s->gpus[g].uuid, g);
    }
#define GPU_GAUGE(name, help, expr)                                            \
    family(f, name, "gauge", help);                                            \
    for (int g = 0; g < s->n_gpus; g++)                                        \
        fprintf(f, name "{%s} %llu\n", labels[g], (unsigned long long)(expr));
    GPU_GAUGE("nvshare_gpu_memory_capacity_bytes", "Memory of the GPU.",
              s->gpus[g].memory_total)
    GPU_GAUGE("nvshare_gpu_memory_reserve_bytes",
              "Memory kept free: never admitted against.",
              v[g].capacity - v[g].memory_limit)
    GPU_GAUGE("nvshare_gpu_running_footprint_bytes",
              "Footprints of the clients running on the GPU.",
              v[g].running_footprint)
    GPU_GAUGE("nvshare_gpu_resident_bytes",
              "Footprints that occupy the GPU now.", v[g].resident)
#undef GPU_GAUGE
    family(f, "nvshare_gpu_mode", "gauge",
           "Scheduling mode of the GPU: 1 for the mode in force, 0 for the others.");
    for (int g = 0; g < s->n_gpus; g++)
        for (int m = 0; sched_mode_names[m]; m++)
            fprintf(f, "nvshare_gpu_mode{%s,mode=\"%s\"} %d\n", labels[g],
                    sched_mode_names[m], v[g].mode == m);
    family(f, "nvshare_gpu_holder_changes_total", "counter",
           "Grants of the GPU to another client than the previous holder.");
    for (int g = 0; g < s->n_gpus; g++)
        fprintf(f, "nvshare_gpu_holder_changes_total{%s} %llu\n", labels[g],
                (unsigned long long)v[g].switches);
    family(f, "nvshare_gpu_swaps_total", "counter",
           "Swaps of clients' memory off (out) or back onto (in) the GPU.");
    for (int g = 0; g < s->n_gpus; g++)
        fprintf(f, "nvshare_gpu_swaps_total{%s,direction=\"out\"} %llu\n"
                   "nvshare_gpu_swaps_total{%s,direction=\"in\"} %llu\n",
                labels[g], (unsigned long long)v[g].swap_out.count, labels[g],
                (unsigned long long)v[g].swap_in.count);
    family(f, "nvshare_gpu_swapped_bytes_total", "counter", "Bytes the swaps moved.");
    for (int g = 0; g < s->n_gpus; g++)
        fprintf(f, "nvshare_gpu_swapped_bytes_total{%s,direction=\"out\"} %llu\n"
                   "nvshare_gpu_swapped_bytes_total{%s,direction=\"in\"} %llu\n",
                labels[g], (unsigned long long)v[g].swap_out.bytes, labels[g],
                (unsigned long long)v[g].swap_in.bytes);
    family(f, "nvshare_gpu_swap_seconds_total", "counter", "Time the swaps took.");
    for (int g = 0; g < s->n_gpus; g++)
        fprintf(f, "nvshare_gpu_swap_seconds_total{%s,direction=\"out\"} %.9f\n"
                   "nvshare_gpu_swap_seconds_total{%s,direction=\"in\"} %.9f\n",
                labels[g], seconds(v[g].swap_out.ns), labels[g],
                seconds(v[g].swap_in.ns));
}

static void render_pods(FILE *f, const struct scheduler *s, uint64_t now)
{
    int n;
    struct pod_series *list = pod_series_list(s, &n);
    struct policy_account_stats *st = n ? calloc((size_t)n, sizeof(*st)) : NULL;
    uint64_t window_ns;

    if (n && !st) {
        free(list);
        return;
    }
    {
        struct policy_settings_view sv;
        policy_view_settings(s->policy, &sv);
        window_ns = sv.window_ns;
    }
    for (int i = 0; i < n; i++)
        policy_view_account(s->policy, list[i].gpu, list[i].account, now, &st[i]);
#define POD_LINES(name, type, help, fmt, expr)                                 \
    family(f, name, type, help);                                               \
    for (int i = 0; i < n; i++) {                                              \
        const struct pod_series *p = &list[i];                                 \
        const struct account *a = &s->accounts[p->account];                    \
        const struct quota_account *q = &s->quota.gpus[p->gpu].accounts[p->account]; \
        (void)a, (void)q;                                                      \
        fprintf(f, name "{%s} " fmt "\n", p->labels, expr);                    \
    }
    POD_LINES("nvshare_pod_memory_quota_bytes", "gauge",
              "The pod's memory quota in force on the GPU (0: none).", "%llu",
              (unsigned long long)limit_of(&a->memory))
    POD_LINES("nvshare_pod_memory_used_bytes", "gauge",
              "Memory the pod's clients have allocated on the GPU.", "%llu",
              (unsigned long long)quota_account_allocated(&s->quota, p->gpu, p->account))
    POD_LINES("nvshare_pod_memory_peak_bytes", "gauge",
              "The most memory the pod had allocated on the GPU at once.", "%llu",
              (unsigned long long)q->peak)
    POD_LINES("nvshare_pod_allocations_refused_total", "counter",
              "The pod's allocation requests refused (quota or oversubscription).",
              "%llu", (unsigned long long)q->refused)
    POD_LINES("nvshare_pod_core_limit_ratio", "gauge",
              "The pod's core limit in force, as a fraction of the GPU's time (1: none).",
              "%g", limit_of(&a->core) % 100
                        ? (double)limit_of(&a->core) / 100 : 1.0)
    POD_LINES("nvshare_pod_core_share_ratio", "gauge",
              "The fraction of each window the pod's limit buys now, after "
              "scaling limits that sum above 100 % (1: unlimited).",
              "%g", policy_budget_ns(s->policy, p->gpu, p->account) && window_ns
                        ? (double)policy_budget_ns(s->policy, p->gpu, p->account) /
                              (double)window_ns
                        : 1.0)
    POD_LINES("nvshare_pod_gpu_seconds_total", "counter",
              "GPU time billed to the pod (co-running clients share the wall time).",
              "%.9f", seconds(st[i].billed_ns))
    POD_LINES("nvshare_pod_throttled_seconds_total", "counter",
              "Time the pod was held back by its core limit.", "%.9f",
              seconds(st[i].throttled_ns))
    POD_LINES("nvshare_pod_preemptions_total", "counter",
              "Requests to the pod's clients to give the GPU back (DROP).", "%llu",
              (unsigned long long)st[i].preemptions)
#undef POD_LINES
    family(f, "nvshare_pod_lock_wait_seconds", "histogram",
           "Time the pod's clients waited from asking for the GPU to getting it.");
    for (int i = 0; i < n; i++)
        histogram_lines(f, "nvshare_pod_lock_wait_seconds", list[i].labels,
                        &st[i].lock_wait);
    family(f, "nvshare_pod_drain_seconds", "histogram",
           "Time the pod's clients took from DROP to giving the GPU back.");
    for (int i = 0; i < n; i++)
        histogram_lines(f, "nvshare_pod_drain_seconds", list[i].labels, &st[i].drain);
    free(st);
    free(list);
}

static void render_node(FILE *f, const struct scheduler *s)
{
    const struct metrics_counters *m = &s->counters;

    family(f, "nvshare_clients", "gauge", "Registered clients.");
    fprintf(f, "nvshare_clients %d\n", clients_count(s));
    family(f, "nvshare_unregistered_connections", "gauge",
           "Connections that have not registered yet.");
    fprintf(f, "nvshare_unregistered_connections %d\n", clients_pending(s));
    family(f, "nvshare_refused_connections_total", "counter",
           "Client connections refused (per-uid connection limit).");
    fprintf(f, "nvshare_refused_connections_total %llu\n",
            (unsigned long long)s->refused);
    family(f, "nvshare_unhooked_processes", "gauge",
           "Processes using a GPU without libnvshare, now.");
    fprintf(f, "nvshare_unhooked_processes %d\n", unhooked_count(s));
    family(f, "nvshare_unhooked_processes_seen_total", "counter",
           "Processes seen using a GPU without libnvshare.");
    fprintf(f, "nvshare_unhooked_processes_seen_total %llu\n",
            (unsigned long long)s->unhooked_seen);
    family(f, "nvshare_messages_total", "counter", "Client messages handled, by type.");
    for (int t = 0; t < METRICS_MSG_TYPES; t++)
        if (m->messages[t])
            fprintf(f, "nvshare_messages_total{type=\"%s\"} %llu\n",
                    msg_type_name((uint16_t)t), (unsigned long long)m->messages[t]);
    family(f, "nvshare_decision_seconds", "histogram",
           "Time the event loop took to handle one client message: decision and "
           "the messages it sends.");
    histogram_lines(f, "nvshare_decision_seconds", "", &m->decision);
    family(f, "nvshare_metrics_scrapes_total", "counter",
           "Requests for /metrics, this one included.");
    fprintf(f, "nvshare_metrics_scrapes_total %llu\n", (unsigned long long)m->scrapes);
    family(f, "nvshare_metrics_serve_seconds_total", "counter",
           "Event-loop time spent serving HTTP (accepting, parsing, rendering, "
           "sending), up to the previous event.");
    fprintf(f, "nvshare_metrics_serve_seconds_total %.9f\n", seconds(m->serve_ns));
}

char *metrics_render(struct scheduler *s, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);

    if (!f)
        return NULL;
    render_node(f, s);
    render_gpus(f, s);
    render_pods(f, s, now_ns());
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void metrics_note_message(struct scheduler *s, uint16_t type, uint64_t ns)
{
    if (type < METRICS_MSG_TYPES)
        s->counters.messages[type]++;
    histogram_observe(&s->counters.decision, ns);
}

/* ---- the HTTP server ----------------------------------------------------- */

#ifdef NVSHARE_HAVE_MICROHTTPD
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

static struct MHD_Daemon *daemon_;

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
    struct MHD_Response *r;
    unsigned status = MHD_HTTP_OK;
    enum MHD_Result rc;
    char *text = NULL;
    size_t len = 0;

    (void)version, (void)upload_data, (void)upload_size, (void)state;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (strcmp(url, "/metrics")) {
        status = MHD_HTTP_NOT_FOUND;
    } else if (s->counters.scrapes++, !(text = metrics_render(s, &len))) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (status != MHD_HTTP_OK) {
        static char body[] = "nvshare-scheduler serves /metrics only\n";
        r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_PERSISTENT);
    } else {
        r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    }
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", status == MHD_HTTP_OK
                            ? "text/plain; version=0.0.4; charset=utf-8"
                            : "text/plain");
    rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static void on_readable(struct event_loop *loop, int fd, void *data)
{
    (void)loop, (void)fd;
    serve(data);
}

/* addr is host:port, [v6-host]:port, or :port (every interface). */
static int resolve(const char *addr, struct sockaddr_storage *sa, socklen_t *sa_len)
{
    char host[128];
    const char *colon = strrchr(addr, ':');
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV,
                             .ai_socktype = SOCK_STREAM}, *res;
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
    if (getaddrinfo(n ? host : NULL, colon + 1, &hints, &res))
        return -1;
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *sa_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int metrics_start(struct scheduler *s, const char *addr)
{
    struct sockaddr_storage sa;
    socklen_t sa_len;
    const union MHD_DaemonInfo *info;

    if (!addr)
        addr = METRICS_DEFAULT_ADDR;
    if (resolve(addr, &sa, &sa_len) < 0) {
        log_error("NVSHARE_METRICS_ADDR '%s' is not host:port (e.g. 127.0.0.1:9402, "
                  "[::1]:9402, :9402) or off", addr);
        return -1;
    }
    /* MHD_USE_EPOLL without an internal thread: MHD_run, from our loop, does
     * the work its epoll fd announces. */
    daemon_ = MHD_start_daemon(
        MHD_USE_EPOLL | (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0), 0, NULL,
        NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_CONNECTION_LIMIT, 32u,
        MHD_OPTION_END);
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

    if (!daemon_ || MHD_get_timeout(daemon_, &ms) != MHD_YES)
        return 0;
    if (ms == 0) {
        /* Work without an fd event (a connection timed out). */
        serve(s);
        if (MHD_get_timeout(daemon_, &ms) != MHD_YES)
            return 0;
    }
    return now + (uint64_t)ms * NS_PER_MS;
}

void metrics_stop(void)
{
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}
#else
int metrics_start(struct scheduler *s, const char *addr)
{
    (void)s;
    if (addr)
        log_warn("NVSHARE_METRICS_ADDR=%s: metrics are not built in (build with "
             "libmicrohttpd: scripts/install-deps.sh build)", addr);
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
