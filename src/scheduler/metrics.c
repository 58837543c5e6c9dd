/* metrics.c - /metrics in the Prometheus text format (docs/operations.md).
 *
 * The text is rendered from the same views as nvsharectl status. The HTTP
 * server (libmicrohttpd, when the build found it) runs in its external
 * mode: its epoll fd is one more fd of the scheduler's event loop, so no
 * thread ever touches the scheduler's state and a scrape costs the loop
 * only the rendering. Without libmicrohttpd the rest of the scheduler is
 * the same; asking for metrics gets one line saying they are not built in.
 *
 * A scrape with 100 pods is some 3,000 lines, on the event loop: they are
 * written with the few formatting functions below rather than printf, into
 * buffers kept for the next scrape (bench/metrics_scrape.sh). */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "scheduler.h"

/* ---- the text ------------------------------------------------------------ */

/* Buffers of finished scrapes, for the next ones: a scrape's text is a few
 * hundred KiB, which malloc would map and unmap each time. */
#define SPARE_TEXTS 4
static char *spare[SPARE_TEXTS];
static int n_spare;

void metrics_text_free(void *text)
{
    if (text && n_spare < SPARE_TEXTS)
        spare[n_spare++] = text;
    else
        free(text);
}

/* Grows by doubling; once memory runs out the rest of the rendering writes
 * nothing and the scrape fails whole, never with a truncated text. */
struct text {
    char *buf;
    size_t len, cap;
    bool failed;
};

static bool reserve(struct text *t, size_t n)
{
    if (t->failed)
        return false;
    if (t->len + n <= t->cap)
        return true;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + n)
        cap *= 2;
    char *buf = realloc(t->buf, cap);
    if (!buf) {
        t->failed = true;
        return false;
    }
    t->buf = buf;
    t->cap = malloc_usable_size(buf);
    return true;
}

static void put_n(struct text *t, const char *s, size_t n)
{
    if (reserve(t, n)) {
        memcpy(t->buf + t->len, s, n);
        t->len += n;
    }
}

static void put(struct text *t, const char *s)
{
    put_n(t, s, strlen(s));
}

static void put_u64(struct text *t, uint64_t v)
{
    char digits[20];
    int n = 0;

    do {
        digits[sizeof(digits) - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put_n(t, digits + sizeof(digits) - n, (size_t)n);
}

/* Nanoseconds as seconds, exactly: 1.500000000. */
static void put_seconds(struct text *t, uint64_t ns)
{
    char frac[10] = ".";
    uint64_t rest = ns % 1000000000ull;

    put_u64(t, ns / 1000000000ull);
    for (int i = 9; i >= 1; i--, rest /= 10)
        frac[i] = (char)('0' + rest % 10);
    put_n(t, frac, sizeof(frac));
}


static void family(struct text *t, const char *name, const char *type,
                   const char *help)
{
    put(t, "# HELP ");
    put(t, name);
    put(t, " ");
    put(t, help);
    put(t, "\n# TYPE ");
    put(t, name);
    put(t, " ");
    put(t, type);
    put(t, "\n");
}

/* A label value as the text format quotes it: names come from tenants'
 * declarations, so anything may be in them. */
static void put_label(struct text *t, const char *key, const char *value,
                      bool first)
{
    if (!first)
        put(t, ",");
    put(t, key);
    put(t, "=\"");
    for (const char *c = value; *c;) {
        size_t plain = strcspn(c, "\\\"\n");
        put_n(t, c, plain);
        c += plain;
        if (*c) {
            put(t, *c == '\n' ? "\\n" : *c == '"' ? "\\\"" : "\\\\");
            c++;
        }
    }
    put(t, "\"");
}

/* `name{labels} ` (no braces without labels); the value follows. */
static void sample(struct text *t, const char *name, const char *labels)
{
    put(t, name);
    if (*labels) {
        put(t, "{");
        put(t, labels);
        put(t, "}");
    }
    put(t, " ");
}

static void sample_u64(struct text *t, const char *name, const char *labels,
                       uint64_t v)
{
    sample(t, name, labels);
    put_u64(t, v);
    put(t, "\n");
}

static void sample_seconds(struct text *t, const char *name, const char *labels,
                           uint64_t ns)
{
    sample(t, name, labels);
    put_seconds(t, ns);
    put(t, "\n");
}

static void sample_ratio(struct text *t, const char *name, const char *labels,
                         double v)
{
    char s[32];

    sample(t, name, labels);
    put_n(t, s, (size_t)snprintf(s, sizeof(s), "%g\n", v));
}

/* The bucket bounds' le labels, formatted once. */
static const char *bound_label(int i)
{
    static char labels[HISTOGRAM_BUCKETS][32];

    if (!labels[i][0])
        snprintf(labels[i], sizeof(labels[i]), "le=\"%g\"",
                 (double)histogram_bounds_ns[i] / 1e9);
    return labels[i];
}

/* name is the family's: its lines are name_bucket, name_sum, name_count. */
static void histogram_lines(struct text *t, const char *name, const char *labels,
                            const struct histogram *h)
{
    uint64_t cumulative = 0;

    for (int i = 0; i <= HISTOGRAM_BUCKETS; i++) {
        cumulative = i < HISTOGRAM_BUCKETS ? cumulative + h->bucket[i] : h->count;
        put(t, name);
        put(t, "_bucket{");
        if (*labels) {
            put(t, labels);
            put(t, ",");
        }
        put(t, i < HISTOGRAM_BUCKETS ? bound_label(i) : "le=\"+Inf\"");
        put(t, "} ");
        put_u64(t, cumulative);
        put(t, "\n");
    }
    for (int line = 0; line < 2; line++) {
        put(t, name);
        put(t, line ? "_count" : "_sum");
        if (*labels) {
            put(t, "{");
            put(t, labels);
            put(t, "}");
        }
        put(t, " ");
        if (line)
            put_u64(t, h->count);
        else
            put_seconds(t, h->sum_ns);
        put(t, "\n");
    }
}

/* ---- the metrics ----------------------------------------------------------- */

static uint64_t limit_of(const struct limit_setting *l)
{
    uint8_t source;

    return limit_effective(l, &source);
}

/* One pod on one GPU: per-pod series are per GPU, as quotas and limits are. */
struct pod_series {
    int account, gpu;
    struct policy_account_stats stats;
    uint64_t budget_ns;
    char labels[3 * PROTO_NAME_MAX + 128];
};

/* The labels of a pod's account on gpu, into p->labels. */
static void pod_labels(const struct scheduler *s, const struct account *a,
                       int gpu, struct pod_series *p)
{
    const struct pod_id *id = &a->pod;
    struct text t = {0};

    put_label(&t, "namespace", id->pod_namespace, true);
    put_label(&t, "pod", id->pod_name, false);
    if (id->uid[0])
        put_label(&t, "pod_uid", id->uid, false);
    put_label(&t, "gpu", s->gpus[gpu].uuid, false);
    put(&t, ",index=\"");
    put_u64(&t, (uint64_t)gpu);
    put(&t, "\"");
    /* A plain host's pod set without an owner has a share per uid. */
    if (!id->uid[0]) {
        put(&t, ",uid=\"");
        put_u64(&t, a->member);
        put(&t, "\"");
    }
    /* Escaping at most doubles names that fit the protocol's fields. */
    snprintf(p->labels, sizeof(p->labels), "%.*s", t.failed ? 0 : (int)t.len,
             t.failed ? "" : t.buf);
    free(t.buf);
}

/* The pods (accounts of a pod) with a client on each GPU. Clients in no pod
 * are an account each, with nothing to name them by across restarts: the
 * node-wide metrics count them. NULL with *n = 0 if memory ran out. */
static struct pod_series *pod_series_list(const struct scheduler *s,
                                          uint64_t now, int *n)
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
                if (!grown) {
                    free(list);
                    free(seen);
                    return NULL;
                }
                list = grown;
            }
            *mark = true;
            struct pod_series *p = &list[count++];
            p->account = c->account;
            p->gpu = g;
            policy_view_account(s->policy, g, c->account, now, &p->stats);
            p->budget_ns = policy_budget_ns(s->policy, g, c->account);
            pod_labels(s, &s->accounts[c->account], g, p);
        }
    }
    free(seen);
    *n = count;
    return list;
}

/* Jobs spanning several GPUs now (gang numbers are below table_size). */
static uint64_t gangs_count(const struct scheduler *s)
{
    uint64_t n = 0;
    bool *seen = calloc((size_t)s->table_size, sizeof(*seen));

    for (int i = 0; seen && i < s->table_size; i++) {
        int gang = s->clients[i]->used ? policy_gang(s->policy, i) : -1;
        if (gang >= 0 && gang < s->table_size && !seen[gang]) {
            seen[gang] = true;
            n++;
        }
    }
    free(seen);
    return n;
}

static void render_node(struct text *t, const struct scheduler *s)
{
    const struct metrics_counters *m = &s->counters;

    family(t, "nvshare_clients", "gauge", "Registered clients.");
    sample_u64(t, "nvshare_clients", "", (uint64_t)clients_count(s));
    family(t, "nvshare_gangs", "gauge",
           "Jobs spanning several GPUs, whose GPUs are granted together.");
    sample_u64(t, "nvshare_gangs", "", gangs_count(s));
    family(t, "nvshare_unregistered_connections", "gauge",
           "Connections that have not registered yet.");
    sample_u64(t, "nvshare_unregistered_connections", "", (uint64_t)clients_pending(s));
    family(t, "nvshare_refused_connections_total", "counter",
           "Client connections refused (per-uid connection limit, or out of memory).");
    sample_u64(t, "nvshare_refused_connections_total", "", s->refused);
    family(t, "nvshare_log_lines_suppressed_total", "counter",
           "Log lines about clients suppressed by the per-uid and global rate limits.");
    sample_u64(t, "nvshare_log_lines_suppressed_total", "", log_suppressed_total());
    family(t, "nvshare_unhooked_processes", "gauge",
           "Processes using a GPU without libnvshare, now.");
    sample_u64(t, "nvshare_unhooked_processes", "", (uint64_t)unhooked_count(s));
    family(t, "nvshare_unhooked_processes_seen_total", "counter",
           "Processes seen using a GPU without libnvshare.");
    sample_u64(t, "nvshare_unhooked_processes_seen_total", "", s->unhooked_seen);
    family(t, "nvshare_messages_total", "counter", "Client messages handled, by type.");
    for (int type = 0; type < METRICS_MSG_TYPES; type++) {
        if (!m->messages[type])
            continue;
        put(t, "nvshare_messages_total{type=\"");
        put(t, msg_type_name((uint16_t)type));
        put(t, "\"} ");
        put_u64(t, m->messages[type]);
        put(t, "\n");
    }
    family(t, "nvshare_decision_seconds", "histogram",
           "Time the event loop took to handle one client message: decision and "
           "the messages it sends.");
    histogram_lines(t, "nvshare_decision_seconds", "", &m->decision);
    family(t, "nvshare_metrics_scrapes_total", "counter",
           "Requests for /metrics, this one included.");
    sample_u64(t, "nvshare_metrics_scrapes_total", "", m->scrapes);
    family(t, "nvshare_metrics_serve_seconds_total", "counter",
           "Event-loop time spent serving HTTP (accepting, parsing, rendering, "
           "sending), up to the previous event.");
    sample_seconds(t, "nvshare_metrics_serve_seconds_total", "", m->serve_ns);
}

static void render_gpus(struct text *t, const struct scheduler *s)
{
    static const char *const direction[2] = {"direction=\"out\"", "direction=\"in\""};
    struct policy_gpu_view v[POLICY_MAX_GPUS];
    char labels[POLICY_MAX_GPUS][PROTO_UUID_MAX + 32];
    char swap_labels[POLICY_MAX_GPUS][2][PROTO_UUID_MAX + 64];

    for (int g = 0; g < s->n_gpus; g++) {
        policy_view_gpu(s->policy, g, &v[g]);
        snprintf(labels[g], sizeof(labels[g]), "gpu=\"%s\",index=\"%d\"",
                 s->gpus[g].uuid, g);
        for (int d = 0; d < 2; d++)
            snprintf(swap_labels[g][d], sizeof(swap_labels[g][d]), "%.*s,%s",
                     (int)strnlen(labels[g], PROTO_UUID_MAX + 31), labels[g],
                     direction[d]);
    }
#define PER_GPU(name, type, help, sample_fn, ...)                              \
    family(t, name, type, help);                                               \
    for (int g = 0; g < s->n_gpus; g++)                                        \
        sample_fn(t, name, labels[g], __VA_ARGS__);
#define PER_SWAP(name, help, sample_fn, field)                                 \
    family(t, name, "counter", help);                                          \
    for (int g = 0; g < s->n_gpus; g++) {                                      \
        sample_fn(t, name, swap_labels[g][0], v[g].swap_out.field);            \
        sample_fn(t, name, swap_labels[g][1], v[g].swap_in.field);             \
    }
    PER_GPU("nvshare_gpu_memory_capacity_bytes", "gauge", "Memory of the GPU.",
            sample_u64, s->gpus[g].memory_total)
    /* cppcheck-suppress uninitvar ; the loop above fills v[0 .. n_gpus) */
    PER_GPU("nvshare_gpu_memory_reserve_bytes", "gauge",
            "Memory kept free: never admitted against.", sample_u64,
            v[g].capacity - v[g].memory_limit)
    PER_GPU("nvshare_gpu_running_footprint_bytes", "gauge",
            "Footprints of the clients running on the GPU.", sample_u64,
            v[g].running_footprint)
    PER_GPU("nvshare_gpu_resident_bytes", "gauge",
            "Footprints that occupy the GPU now.", sample_u64, v[g].resident)
    family(t, "nvshare_gpu_mode", "gauge",
           "Scheduling mode of the GPU: 1 for the mode in force, 0 for the others.");
    for (int g = 0; g < s->n_gpus; g++) {
        for (int m = 0; sched_mode_names[m]; m++) {
            char mode_labels[PROTO_UUID_MAX + 64];
            snprintf(mode_labels, sizeof(mode_labels), "%.*s,mode=\"%s\"",
                     (int)strnlen(labels[g], PROTO_UUID_MAX + 31), labels[g],
                     sched_mode_names[m]);
            sample_u64(t, "nvshare_gpu_mode", mode_labels, v[g].mode == m);
        }
    }
    PER_GPU("nvshare_gpu_time_quantum_seconds", "gauge",
            "The time quantum in force: pinned, or auto from the hand-overs.",
            sample_seconds, v[g].quantum_ns)
    PER_GPU("nvshare_gpu_time_quantum_pinned", "gauge",
            "1 where the operator pinned the time quantum, 0 where it is auto.",
            sample_u64, v[g].quantum_reason == QUANTUM_PINNED)
    PER_GPU("nvshare_gpu_handover_mean_seconds", "gauge",
            "Mean cost of the GPU's last 128 hand-overs, the GPU idle between holders (0: none yet).",
            sample_seconds, v[g].handover_mean_ns)
    PER_GPU("nvshare_gpu_holder_changes_total", "counter",
            "Grants of the GPU to another client than the previous holder.",
            sample_u64, v[g].switches)
    PER_SWAP("nvshare_gpu_swaps_total",
             "Swaps of clients' memory off (out) or back onto (in) the GPU.",
             sample_u64, count)
    PER_SWAP("nvshare_gpu_swapped_bytes_total", "Bytes the swaps moved.",
             sample_u64, bytes)
    PER_SWAP("nvshare_gpu_swap_seconds_total", "Time the swaps took.",
             sample_seconds, ns)
#undef PER_GPU
#undef PER_SWAP
}

/* The class in force (normal where nothing set one). */
static unsigned priority_of(const struct account *a)
{
    uint8_t source;

    return priority_effective(&a->priority, &source);
}

static void render_pods(struct text *t, const struct scheduler *s, uint64_t now)
{
    struct policy_settings_view settings;
    int n;
    struct pod_series *list = pod_series_list(s, now, &n);

    policy_view_settings(s->policy, &settings);
    /* One family at a time, as the format wants: every pod's line of it. */
#define PER_POD(name, type, help, sample_fn, ...)                              \
    family(t, name, type, help);                                               \
    for (int i = 0; i < n; i++) {                                              \
        const struct pod_series *p = &list[i];                                 \
        const struct account *a = &s->accounts[p->account];                    \
        const struct quota_account *q = &s->quota.gpus[p->gpu].accounts[p->account]; \
        (void)a, (void)q;                                                      \
        sample_fn(t, name, p->labels, __VA_ARGS__);                            \
    }
    PER_POD("nvshare_pod_memory_quota_bytes", "gauge",
            "The pod's memory quota in force on the GPU (0: none).", sample_u64,
            limit_of(&a->memory))
    PER_POD("nvshare_pod_memory_used_bytes", "gauge",
            "Memory the pod's clients have allocated on the GPU.", sample_u64,
            quota_account_allocated(&s->quota, p->gpu, p->account))
    PER_POD("nvshare_pod_memory_peak_bytes", "gauge",
            "The most memory the pod had allocated on the GPU at once.",
            sample_u64, q->peak)
    PER_POD("nvshare_pod_allocations_refused_total", "counter",
            "The pod's allocation requests refused (quota or oversubscription).",
            sample_u64, q->refused)
    PER_POD("nvshare_pod_core_limit_ratio", "gauge",
            "The pod's core limit in force, as a fraction of the GPU's time (1: none).",
            sample_ratio, limit_of(&a->core) % 100 ? (double)limit_of(&a->core) / 100
                                                  : 1.0)
    PER_POD("nvshare_pod_core_share_ratio", "gauge",
            "The fraction of each window the pod's limit buys now, after scaling "
            "limits that sum above 100 % (1: unlimited).",
            sample_ratio, p->budget_ns && settings.window_ns
                              ? (double)p->budget_ns / (double)settings.window_ns
                              : 1.0)
    PER_POD("nvshare_pod_priority", "gauge",
            "The pod's priority class in force: 1 low, 2 normal, 3 high, up to 9.",
            sample_u64, (uint64_t)priority_of(a))
    PER_POD("nvshare_pod_min_share_ratio", "gauge",
            "The pod's floor: the fraction of each window it gets under a busier "
            "higher class (0: none).",
            sample_ratio, (double)a->min_share / 100)
    PER_POD("nvshare_pod_gpu_seconds_total", "counter",
            "GPU time billed to the pod (co-running clients share the wall time).",
            sample_seconds, p->stats.billed_ns)
    PER_POD("nvshare_pod_throttled_seconds_total", "counter",
            "Time the pod was held back by its core limit.", sample_seconds,
            p->stats.throttled_ns)
    PER_POD("nvshare_pod_preemptions_total", "counter",
            "Requests to the pod's clients to give the GPU back (DROP).",
            sample_u64, p->stats.preemptions)
#undef PER_POD
    family(t, "nvshare_pod_lock_wait_seconds", "histogram",
           "Time the pod's clients waited from asking for the GPU to getting it.");
    for (int i = 0; i < n; i++)
        histogram_lines(t, "nvshare_pod_lock_wait_seconds", list[i].labels,
                        &list[i].stats.lock_wait);
    family(t, "nvshare_pod_drain_seconds", "histogram",
           "Time the pod's clients took from DROP to giving the GPU back.");
    for (int i = 0; i < n; i++)
        histogram_lines(t, "nvshare_pod_drain_seconds", list[i].labels,
                        &list[i].stats.drain);
    free(list);
}

char *metrics_render(struct scheduler *s, size_t *len)
{
    struct text t = {0};

    if (n_spare) {
        t.buf = spare[--n_spare];
        t.cap = malloc_usable_size(t.buf);
    }
    render_node(&t, s);
    render_gpus(&t, s);
    render_pods(&t, s, now_ns());
    if (t.failed) {
        free(t.buf);
        return NULL;
    }
    *len = t.len;
    return t.buf;
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
    slot->deadline = now_ns() + (state == HTTP_ANSWERING ? HTTP_ANSWER_NS : HTTP_REQUEST_NS);
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
    char *text = NULL;
    size_t len = 0;

    (void)version, (void)upload_data, (void)upload_size, (void)state;
    if (slot && slot->state == HTTP_WAITING)
        set_state(slot, HTTP_ANSWERING);
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
        r = MHD_create_response_from_buffer_with_free_callback(len, text,
                                                               metrics_text_free);
    }
    if (!r) {
        metrics_text_free(text);
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

/* addr is host:port, [v6-host]:port, or :port (every IPv4 interface). */
static int resolve(const char *addr, struct sockaddr_storage *sa)
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
        log_error("NVSHARE_METRICS_ADDR '%s' is not host:port (e.g. 127.0.0.1:9402, "
                  "[::1]:9402, :9402) or off", addr);
        return -1;
    }
    /* MHD_USE_EPOLL without an internal thread: MHD_run, from our loop, does
     * the work its epoll fd announces. */
    daemon_ = MHD_start_daemon(
        MHD_USE_EPOLL | (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0), 0, NULL,
        NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
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
    return next && next < now + (uint64_t)ms * NS_PER_MS ? next
                                                          : now + (uint64_t)ms * NS_PER_MS;
}

void metrics_stop(void)
{
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
    while (n_spare)
        free(spare[--n_spare]);
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
