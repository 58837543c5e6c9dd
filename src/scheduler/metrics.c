/* metrics.c - the /metrics text, in the Prometheus text format
 * (docs/operations.md); metrics_http.c serves it.
 *
 * The text is rendered from the same views as nvsharectl status. A scrape
 * with 100 pods is some 3,000 lines, on the event loop: they are written
 * with the few formatting functions below rather than printf, into buffers
 * kept for the next scrape (bench/metrics_scrape.sh). */
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

void metrics_text_free_spares(void)
{
    while (n_spare)
        free(spare[--n_spare]);
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
static void histogram_lines(struct text *t, const char *name,
                            const char *labels, const struct histogram *h)
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

/* The account's limit in force on gpu: its limits on single GPUs (a DRA
 * claim's, a group's) take the place of the one for every GPU there. */
static uint64_t core_on(const struct account *a, int gpu)
{
    uint8_t source;

    return account_core_on(a, gpu, &source);
}

static uint64_t memory_on(const struct account *a, int gpu)
{
    uint8_t source;

    return account_memory_on(a, gpu, &source);
}

/* One pod on one GPU: per-pod series are per GPU, as quotas and limits are. */
struct pod_series {
    int account, gpu;
    struct policy_account_stats stats;
    uint64_t budget_ns;
    uint64_t resident, parked; /* its clients' on the GPU, summed */
    uint64_t idle_ns; /* while all its clients are idle: the shortest */
    bool busy;        /* one of them holds or waits */
    char labels[3 * PROTO_NAME_MAX + 2 * PROTO_GROUP_NAME_MAX + 128];
};

/* A client of the pod on p's GPU. */
static void pod_series_add(struct pod_series *p,
                           const struct policy_member_view *v)
{
    bool idle = v->state == MEMBER_IDLE;

    p->resident += v->resident;
    p->parked += v->parked;
    p->busy |= !idle;
    if (idle && (!p->idle_ns || v->idle_ns < p->idle_ns))
        p->idle_ns = v->idle_ns;
}

/* The labels of a pod's account on gpu, into p->labels. */
static void pod_labels(const struct scheduler *s, const struct account *a,
                       const char *group, int gpu, struct pod_series *p)
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
    if (group[0])
        put_label(&t, "group", group, false);
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
    /* By account and GPU: its series' position + 1, 0 while it has none. */
    int *seen = calloc((size_t)s->table_size * (size_t)s->n_gpus, sizeof(int));
    int count = 0, size = 0;

    *n = 0;
    if (!seen)
        return NULL;
    for (int slot = 0; slot < s->table_size; slot++) {
        const struct client *c = s->clients[slot];
        if (!c->used || !c->registered ||
            pod_id_empty(&s->accounts[c->account].pod))
            continue;
        for (int g = 0; g < s->n_gpus; g++) {
            int *mark = &seen[(size_t)c->account * (size_t)s->n_gpus + (size_t)g];
            struct policy_member_view v;
            if (!policy_view_member(s->policy, g, slot, now, &v))
                continue;
            if (*mark) {
                pod_series_add(&list[*mark - 1], &v);
                continue;
            }
            if (count == size) {
                size = size ? 2 * size : 16;
                struct pod_series *grown =
                    realloc(list, (size_t)size * sizeof(*list));
                if (!grown) {
                    free(list);
                    free(seen);
                    return NULL;
                }
                list = grown;
            }
            struct pod_series *p = &list[count++];
            *mark = count;
            /* A group's pods each show the group's budget, usage and
             * memory on its GPU: what they are held to together. */
            int billed = client_account_on(c, g);
            *p = (struct pod_series){.account = billed, .gpu = g};
            pod_series_add(p, &v);
            policy_view_account(s->policy, g, billed, now, &p->stats);
            p->budget_ns = policy_budget_ns(s->policy, g, billed);
            pod_labels(s, &s->accounts[c->account], s->accounts[billed].group,
                       g, p);
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

/* A family of one sample, without labels. */
static void single(struct text *t, const char *name, const char *type,
                   const char *help, uint64_t v)
{
    family(t, name, type, help);
    sample_u64(t, name, "", v);
}

static void render_node(struct text *t, const struct scheduler *s)
{
    const struct metrics_counters *m = &s->counters;

    single(t, "nvshare_clients", "gauge", "Registered clients.",
           (uint64_t)clients_count(s));
    single(t, "nvshare_gangs", "gauge",
           "Jobs spanning several GPUs, whose GPUs are granted together.",
           gangs_count(s));
    single(t, "nvshare_unregistered_connections", "gauge",
           "Connections that have not registered yet.",
           (uint64_t)clients_pending(s));
    single(t, "nvshare_refused_connections_total",
           "counter", "Client connections refused (per-uid connection limit, or out of memory).",
           s->refused);
    single(t, "nvshare_log_lines_suppressed_total",
           "counter", "Log lines about clients suppressed by the per-uid and global rate limits.",
           log_suppressed_total());
    single(t, "nvshare_unhooked_processes", "gauge",
           "Processes using a GPU without libnvshare, now.",
           (uint64_t)unhooked_count(s));
    single(t, "nvshare_unhooked_processes_seen_total", "counter",
           "Processes seen using a GPU without libnvshare.", s->unhooked_seen);
    struct policy_settings_view settings;
    policy_view_settings(s->policy, &settings);
    single(t, "nvshare_host_swap_parked_bytes", "gauge",
           "Memory of swapped-out clients in host memory, all GPUs.",
           settings.parked);
    single(t, "nvshare_host_swap_budget_bytes", "gauge",
           "The most memory swapped-out clients may keep in host memory "
           "(host-swap-budget; 2^64-1: no budget).",
           settings.host_swap_budget);
    family(t, "nvshare_messages_total", "counter",
           "Client messages handled, by type.");
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
           "Time the event loop took to handle one client message: decision "
           "and "
           "the messages it sends.");
    histogram_lines(t, "nvshare_decision_seconds", "", &m->decision);
    single(t, "nvshare_metrics_scrapes_total", "counter",
           "Requests for /metrics, this one included.", m->scrapes);
    family(t, "nvshare_metrics_serve_seconds_total", "counter",
           "Event-loop time spent serving HTTP (accepting, parsing, rendering, "
           "sending), up to the previous event.");
    sample_seconds(t, "nvshare_metrics_serve_seconds_total", "", m->serve_ns);
}

/* Each GPU's view and labels, made once for all its families. */
struct gpu_series {
    struct policy_gpu_view v[POLICY_MAX_GPUS];
    char labels[POLICY_MAX_GPUS][PROTO_UUID_MAX + 32];
    char swap_labels[POLICY_MAX_GPUS][2][PROTO_UUID_MAX + 64];
};

static void gpu_series_fill(const struct scheduler *s, struct gpu_series *gs)
{
    static const char *const direction[2] = {"direction=\"out\"",
                                             "direction=\"in\""};

    for (int g = 0; g < s->n_gpus; g++) {
        policy_view_gpu(s->policy, g, &gs->v[g]);
        snprintf(gs->labels[g], sizeof(gs->labels[g]),
                 "gpu=\"%s\",index=\"%d\"", s->gpus[g].uuid, g);
        for (int d = 0; d < 2; d++)
            snprintf(gs->swap_labels[g][d], sizeof(gs->swap_labels[g][d]),
                     "%.*s,%s", (int)strnlen(gs->labels[g], PROTO_UUID_MAX + 31),
                     gs->labels[g], direction[d]);
    }
}

/* One family at a time, as the format wants: every GPU's line of it. */
#define PER_GPU(name, type, help, sample_fn, ...)                              \
    family(t, name, type, help);                                               \
    for (int g = 0; g < s->n_gpus; g++)                                        \
        sample_fn(t, name, gs->labels[g], __VA_ARGS__);
#define PER_SWAP(name, help, sample_fn, field)                                 \
    family(t, name, "counter", help);                                          \
    for (int g = 0; g < s->n_gpus; g++) {                                      \
        sample_fn(t, name, gs->swap_labels[g][0], gs->v[g].swap_out.field);    \
        sample_fn(t, name, gs->swap_labels[g][1], gs->v[g].swap_in.field);     \
    }

static void render_gpu_memory(struct text *t, const struct scheduler *s,
                              const struct gpu_series *gs)
{
    PER_GPU("nvshare_gpu_memory_capacity_bytes", "gauge", "Memory of the GPU.",
            sample_u64, s->gpus[g].memory_total)
    /* cppcheck-suppress uninitvar ; the loop above fills v[0 .. n_gpus) */
    PER_GPU("nvshare_gpu_memory_reserve_bytes", "gauge",
            "Memory kept free: never admitted against.", sample_u64,
            gs->v[g].capacity - gs->v[g].memory_limit)
    PER_GPU("nvshare_gpu_running_footprint_bytes", "gauge",
            "Footprints of the clients running on the GPU.", sample_u64,
            gs->v[g].running_footprint)
    PER_GPU("nvshare_gpu_resident_bytes", "gauge",
            "Footprints that occupy the GPU now.", sample_u64, gs->v[g].resident)
}

static void render_gpu_scheduling(struct text *t, const struct scheduler *s,
                                  const struct gpu_series *gs)
{
    family(t, "nvshare_gpu_mode",
           "gauge", "Scheduling mode of the GPU: 1 for the mode in force, 0 for the others.");
    for (int g = 0; g < s->n_gpus; g++) {
        for (int m = 0; sched_mode_names[m]; m++) {
            char mode_labels[PROTO_UUID_MAX + 64];
            snprintf(mode_labels, sizeof(mode_labels), "%.*s,mode=\"%s\"",
                     (int)strnlen(gs->labels[g], PROTO_UUID_MAX + 31),
                     gs->labels[g], sched_mode_names[m]);
            sample_u64(t, "nvshare_gpu_mode", mode_labels, gs->v[g].mode == m);
        }
    }
    PER_GPU("nvshare_gpu_time_quantum_seconds", "gauge",
            "The time quantum in force: pinned, or auto from the hand-overs.",
            sample_seconds, gs->v[g].quantum_ns)
    PER_GPU("nvshare_gpu_time_quantum_pinned", "gauge",
            "1 where the operator pinned the time quantum, 0 where it is auto.",
            sample_u64, gs->v[g].quantum_reason == QUANTUM_PINNED)
    PER_GPU("nvshare_gpu_handover_mean_seconds",
            "gauge", "Mean cost of the GPU's last 128 hand-overs, the GPU idle between holders (0: none yet).",
            sample_seconds, gs->v[g].handover_mean_ns)
    PER_GPU("nvshare_gpu_holder_changes_total", "counter",
            "Grants of the GPU to another client than the previous holder.",
            sample_u64, gs->v[g].switches)
}

static void render_gpu_swaps(struct text *t, const struct scheduler *s,
                             const struct gpu_series *gs)
{
    PER_SWAP("nvshare_gpu_swaps_total",
             "Swaps of clients' memory off (out) or back onto (in) the GPU.",
             sample_u64, count)
    PER_SWAP("nvshare_gpu_swapped_bytes_total", "Bytes the swaps moved.",
             sample_u64, bytes)
    PER_SWAP("nvshare_gpu_swap_seconds_total", "Time the swaps took.",
             sample_seconds, ns)
}
#undef PER_GPU
#undef PER_SWAP

static void render_gpus(struct text *t, const struct scheduler *s)
{
    struct gpu_series gs;

    gpu_series_fill(s, &gs);
    render_gpu_memory(t, s, &gs);
    render_gpu_scheduling(t, s, &gs);
    render_gpu_swaps(t, s, &gs);
}

/* The class in force (normal where nothing set one). */
static unsigned priority_of(const struct account *a)
{
    uint8_t source;

    return priority_effective(&a->priority, &source);
}

/* One family at a time, as the format wants: every pod's line of it. */
#define PER_POD(name, type, help, sample_fn, ...)                              \
    family(t, name, type, help);                                               \
    for (int i = 0; i < n; i++) {                                              \
        const struct pod_series *p = &list[i];                                 \
        const struct account *a = &s->accounts[p->account];                    \
        const struct quota_account *q =                                        \
            &s->quota.gpus[p->gpu].accounts[p->account];                       \
        (void)a, (void)q;                                                      \
        sample_fn(t, name, p->labels, __VA_ARGS__);                            \
    }

static void render_pod_memory(struct text *t, const struct scheduler *s,
                              const struct pod_series *list, int n)
{
    PER_POD("nvshare_pod_memory_quota_bytes", "gauge",
            "The pod's memory quota in force on the GPU (0: none).", sample_u64,
            memory_on(a, p->gpu))
    PER_POD("nvshare_pod_memory_used_bytes", "gauge",
            "Memory the pod's clients have allocated on the GPU.", sample_u64,
            quota_account_allocated(&s->quota, p->gpu, p->account))
    PER_POD("nvshare_pod_memory_peak_bytes", "gauge",
            "The most memory the pod had allocated on the GPU at once.",
            sample_u64, q->peak)
    PER_POD("nvshare_pod_allocations_refused_total",
            "counter", "The pod's allocation requests refused (quota or oversubscription).",
            sample_u64, q->refused)
}

/* What each pod may have of the GPU's time: its limit, share, class, floor. */
static void render_pod_limits(struct text *t, const struct scheduler *s,
                              const struct pod_series *list, int n)
{
    struct policy_settings_view settings;

    policy_view_settings(s->policy, &settings);
    PER_POD("nvshare_pod_core_limit_ratio",
            "gauge", "The pod's core limit in force, as a fraction of the GPU's time (1: none).",
            sample_ratio,
            core_on(a, p->gpu) % 100 ? (double)core_on(a, p->gpu) / 100 : 1.0)
    PER_POD("nvshare_pod_core_share_ratio", "gauge",
            "The fraction of each window the pod's limit buys now, after "
            "scaling "
            "limits that sum above 100 % (1: unlimited).",
            sample_ratio,
            p->budget_ns && settings.window_ns
                ? (double)p->budget_ns / (double)settings.window_ns
                : 1.0)
    PER_POD("nvshare_pod_priority",
            "gauge", "The pod's priority class in force: 1 low, 2 normal, 3 high, up to 9.",
            sample_u64, (uint64_t)priority_of(a))
    PER_POD("nvshare_pod_min_share_ratio", "gauge",
            "The pod's floor: the fraction of each window it gets under a "
            "busier "
            "higher class (0: none).",
            sample_ratio, (double)a->min_share / 100)
}

/* What each pod had of the GPU's time, and how long it waited for it. */
static void render_pod_time(struct text *t, const struct scheduler *s,
                            const struct pod_series *list, int n)
{
    PER_POD("nvshare_pod_gpu_seconds_total",
            "counter", "GPU time billed to the pod (co-running clients share the wall time).",
            sample_seconds, p->stats.billed_ns)
    PER_POD("nvshare_pod_throttled_seconds_total", "counter",
            "Time the pod was held back by its core limit.", sample_seconds,
            p->stats.throttled_ns)
    PER_POD("nvshare_pod_preemptions_total", "counter",
            "Requests to the pod's clients to give the GPU back (DROP).",
            sample_u64, p->stats.preemptions)
    family(t, "nvshare_pod_lock_wait_seconds",
           "histogram", "Time the pod's clients waited from asking for the GPU to getting it.");
    for (int i = 0; i < n; i++)
        histogram_lines(t, "nvshare_pod_lock_wait_seconds", list[i].labels,
                        &list[i].stats.lock_wait);
    family(t, "nvshare_pod_drain_seconds", "histogram",
           "Time the pod's clients took from DROP to giving the GPU back.");
    for (int i = 0; i < n; i++)
        histogram_lines(t, "nvshare_pod_drain_seconds", list[i].labels,
                        &list[i].stats.drain);
}
/* What each pod keeps on the GPU and in host memory, and its swaps. */
static void render_pod_swaps(struct text *t, const struct scheduler *s,
                             const struct pod_series *list, int n)
{
    PER_POD("nvshare_pod_resident_bytes", "gauge",
            "Memory of the pod's clients on the GPU now.", sample_u64,
            p->resident)
    PER_POD("nvshare_pod_parked_bytes", "gauge",
            "Memory of the pod's clients swapped out to host memory.",
            sample_u64, p->parked)
    PER_POD("nvshare_pod_idle_seconds", "gauge",
            "While none of the pod's clients holds or waits for the GPU: "
            "since the last of them gave it back (0 otherwise).",
            sample_seconds, p->busy ? 0 : p->idle_ns)
    PER_POD("nvshare_pod_swap_outs_total", "counter",
            "Swap-outs of the pod's clients' memory.", sample_u64,
            p->stats.swap_outs)
    PER_POD("nvshare_pod_swap_ins_total", "counter",
            "Swap-ins of the pod's clients' memory.", sample_u64,
            p->stats.swap_ins)
    PER_POD("nvshare_pod_swap_in_wait_seconds_total", "counter",
            "Time the pod's clients waited for their memory to come back, "
            "from the grant to the swap-in's end.",
            sample_seconds, p->stats.swap_in_wait_ns)
}
#undef PER_POD

static void render_pods(struct text *t, const struct scheduler *s, uint64_t now)
{
    int n;
    struct pod_series *list = pod_series_list(s, now, &n);

    render_pod_memory(t, s, list, n);
    render_pod_limits(t, s, list, n);
    render_pod_time(t, s, list, n);
    render_pod_swaps(t, s, list, n);
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
