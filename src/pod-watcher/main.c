/* nvshare-pod-watcher - tells the scheduler what the API server says of
 * this node's pods.
 *
 * A sidecar of the scheduler (same DaemonSet pod): it lists and watches the
 * pods with spec.nodeName=$NODE_NAME and sends the name, annotations and
 * gpu-memory request of each that has an nvshare.com/ annotation or
 * resource (once seen, until deleted) over the scheduler's control socket
 * (CTL_POD_FACTS, CTL_POD_GONE; a full list between CTL_POD_SYNC_BEGIN and
 * CTL_POD_SYNC_END). HTTP, TLS and JSON stay out of the scheduler, which
 * keeps the precedence of limits (pods.c, accounts.c).
 *
 * One watcher runs per node, so every request it makes is multiplied by
 * the cluster's node count: its pace is set by the API server, never by
 * the scheduler or by a failure.
 *   - It lists once per start and per 410 Gone (as a status or an ERROR
 *     event), then watches from the list's resourceVersion with bookmarks
 *     for WATCH_TIMEOUT_S. A watch that lasted WATCH_HEALTHY_NS is followed
 *     at once by the next, from the last resourceVersion; a shorter one (an
 *     empty 200, a 410, an error, a drop) and a failed list wait first: a
 *     back-off doubling from BACKOFF_MIN_NS to BACKOFF_MAX_NS, each wait
 *     between half and all of it at random so that a thousand nodes cut
 *     off together do not come back together; it halves again for each
 *     WATCH_HEALTHY_NS a watch lasts.
 *   - Reads are bounded (kube.h; LIST_PAGES_MAX pages a list): a server
 *     that never ends a list, an answer or a line costs an error line.
 *   - The scheduler is told from the pods cached here. Its connection
 *     lost, the watch goes on: every wait, the watch's too, wakes when the
 *     scheduler's socket closes, and the watcher reconnects (retrying
 *     within a second) and sends the cache whole. The scheduler keeps
 *     this connection open however quiet (control.c).
 * An annotation that does not parse is logged once and posted as an Event
 * on the pod; the scheduler keeps the value it had. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <cjson/cJSON.h>

#include "cli.h"
#include "clock.h"
#include "env.h"
#include "kube.h"
#include "log.h"
#include "pod_json.h"
#include "protocol.h"
#include "sock.h"

#define BACKOFF_MIN_NS (250 * NS_PER_MS)
#define BACKOFF_MAX_NS (60 * NS_PER_SEC)      /* the API server: as client-go */
#define SCHED_BACKOFF_MAX_NS (1 * NS_PER_SEC) /* the scheduler, local */
#define WATCH_TIMEOUT_S                                                        \
    300 /* one watch per 5 min when quiet; the token is
                               read again as often */
#define WATCH_HEALTHY_NS (30 * NS_PER_SEC)
#define LIST_PAGE 250    /* a node runs 110 pods by default */
#define LIST_PAGES_MAX 4 /* 1,000 pods: more is an endless continue token */
#define REPLY_TIMEOUT_MS 5000

struct watcher {
    struct kube kube;
    char node[PROTO_NAME_MAX];
    char selector[PROTO_NAME_MAX + 64]; /* URL-encoded fieldSelector */
    uint64_t memory_unit;
    struct watched_pod *pods; /* this node's, as last listed or watched */
    size_t n, cap;
    bool listed; /* pods holds a list: the scheduler may have it */
    char resource_version[64];
    int sched_fd;            /* control socket, -1 when not connected */
    uint64_t sched_retry_at; /* now_ns() when to connect again */
    uint64_t sched_backoff;
    bool sched_down; /* unreachable, said once: quiet until a sync */
    bool relist;     /* start, or 410 Gone: the resourceVersion is too old */
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

/* The wait before the next try, and the try after it waiting longer. */
static uint64_t backoff_next(uint64_t *backoff, uint64_t max)
{
    uint64_t wait = *backoff / 2 + (uint64_t)random() % (*backoff / 2 + 1);

    *backoff = *backoff > max / 2 ? max : *backoff * 2;
    return wait;
}

/* A watch that lasted calms the back-off: halved for each WATCH_HEALTHY_NS
 * of it, not reset by one, so that a server that alternates a good watch
 * with failures gets no more than two watches a WATCH_HEALTHY_NS. */
static void backoff_calm(uint64_t *backoff, uint64_t lasted)
{
    for (; lasted >= WATCH_HEALTHY_NS && *backoff > BACKOFF_MIN_NS;
         lasted -= WATCH_HEALTHY_NS)
        *backoff = *backoff / 2 < BACKOFF_MIN_NS ? BACKOFF_MIN_NS : *backoff / 2;
}

/* ---- the scheduler's control socket --------------------------------- */

static void sched_close(struct watcher *w)
{
    if (w->sched_fd >= 0)
        close(w->sched_fd);
    w->sched_fd = -1;
}

/* Sends m and awaits its CTL_REPLY. -1 (the connection closed, to be made
 * again) when the scheduler is gone; a refusal it explains is logged, not
 * fatal. */
static int sched_call(struct watcher *w, const struct msg *m)
{
    struct msg reply;
    int rc;

    if (w->sched_fd < 0)
        return -1;
    if ((rc = msg_send(w->sched_fd, m)) ||
        (rc = msg_recv(w->sched_fd, &reply, REPLY_TIMEOUT_MS))) {
        if (!w->sched_down)
            log_warn("scheduler connection lost (%s): reconnecting",
                     proto_strerror(rc));
        w->sched_down = true;
        sched_close(w);
        return -1;
    }
    if (reply.type == MSG_CTL_REPLY && reply.u.reply.status == EACCES) {
        /* Not root nor the scheduler's user: said once, tried again. */
        if (!w->sched_down)
            log_error("the scheduler refuses this watcher: %s",
                      reply.u.reply.text);
        w->sched_down = true;
        sched_close(w);
        return -1;
    }
    if (reply.type == MSG_CTL_REPLY && reply.u.reply.status)
        log_warn("scheduler refused %s: %s", msg_type_name(m->type),
                 reply.u.reply.text);
    return 0;
}

static int sched_send_pod(struct watcher *w, const struct watched_pod *p)
{
    struct msg m = {.type = MSG_CTL_POD_FACTS};

    m.u.facts = p->facts;
    return sched_call(w, &m);
}

/* Sends the whole cache, connecting first if need be. A failure is tried
 * again by sched_keep(), paced by a back-off of its own. */
static void sched_sync(struct watcher *w)
{
    char path[512];
    struct msg m = {.type = MSG_CTL_POD_SYNC_BEGIN};
    bool too_long = socket_path(CONTROL_SOCKET_NAME, path, sizeof(path)) != 0;
    size_t i = 0;

    if (w->sched_fd < 0 && too_long)
        errno = ENAMETOOLONG;
    else if (w->sched_fd < 0)
        w->sched_fd = unix_connect(path);
    if (w->sched_fd < 0 && !w->sched_down) {
        log_warn("cannot reach the scheduler at %s: %s (retrying every second)",
                 path, strerror(errno));
        w->sched_down = true;
    }
    if (sched_call(w, &m) == 0) {
        while (i < w->n && sched_send_pod(w, &w->pods[i]) == 0)
            i++;
        m.type = MSG_CTL_POD_SYNC_END;
        if (i == w->n && sched_call(w, &m) == 0) {
            log_info("scheduler at %s told of %zu pod(s)", path, w->n);
            w->sched_down = false;
            w->sched_backoff = BACKOFF_MIN_NS;
            return;
        }
    }
    w->sched_retry_at =
        now_ns() + backoff_next(&w->sched_backoff, SCHED_BACKOFF_MAX_NS);
}

/* Keeps the scheduler told: notices its end (it never writes unasked, so
 * a readable socket is a closed one) and, once the pods are listed,
 * connects again and sends the cache. */
static void sched_keep(struct watcher *w)
{
    struct pollfd pfd = {.fd = w->sched_fd, .events = POLLIN};

    if (w->sched_fd >= 0 && poll(&pfd, 1, 0) > 0) {
        log_warn("scheduler connection closed: reconnecting");
        sched_close(w);
        w->sched_retry_at = 0;
    }
    if (w->sched_fd < 0 && w->listed && now_ns() >= w->sched_retry_at)
        sched_sync(w);
}

/* How long sched_keep() has nothing to do, up to max: while connected,
 * until the socket is readable (its end); else until the next try. */
static uint64_t sched_idle_ns(const struct watcher *w, uint64_t now, uint64_t max)
{
    if (w->sched_fd >= 0 || !w->listed || w->sched_retry_at >= now + max)
        return max;
    return w->sched_retry_at > now ? w->sched_retry_at - now : 0;
}

static int ms_of(uint64_t ns)
{
    return (int)((ns + NS_PER_MS - 1) / NS_PER_MS);
}

/* Waits ns (less when stopping), keeping the scheduler told meanwhile. */
static void pause_for(struct watcher *w, uint64_t ns)
{
    uint64_t now = now_ns(), end = now + ns;

    for (; !stopping && now < end; now = now_ns()) {
        struct pollfd pfd = {.fd = w->sched_fd, .events = POLLIN};

        /* A signal ends the wait. */
        poll(&pfd, w->sched_fd >= 0, ms_of(sched_idle_ns(w, now, end - now)));
        sched_keep(w);
    }
}

/* ---- Events on pods -------------------------------------------------- */

/* Posts a Warning Event on the pod, as kubectl describe shows it. */
static void post_event(struct watcher *w, const struct msg_pod_facts *pod,
                       const char *reason, const char *message)
{
    char path[PROTO_NAME_MAX + 64], stamp[32], name[PROTO_NAME_MAX + 32];
    char err[KUBE_ERR_LEN];
    struct kube_body body = {0};
    struct timespec now;
    cJSON *e = cJSON_CreateObject(), *meta, *obj, *src;
    char *json;
    long status;

    clock_gettime(CLOCK_REALTIME, &now);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now.tv_sec));
    snprintf(name, sizeof(name), "%.200s.%llx", pod->pod_name,
             (unsigned long long)now.tv_sec * 1000000000ull +
                 (unsigned long long)now.tv_nsec);
    cJSON_AddStringToObject(e, "apiVersion", "v1");
    cJSON_AddStringToObject(e, "kind", "Event");
    meta = cJSON_AddObjectToObject(e, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON_AddStringToObject(meta, "namespace", pod->pod_namespace);
    obj = cJSON_AddObjectToObject(e, "involvedObject");
    cJSON_AddStringToObject(obj, "apiVersion", "v1");
    cJSON_AddStringToObject(obj, "kind", "Pod");
    cJSON_AddStringToObject(obj, "namespace", pod->pod_namespace);
    cJSON_AddStringToObject(obj, "name", pod->pod_name);
    cJSON_AddStringToObject(obj, "uid", pod->pod_uid);
    cJSON_AddStringToObject(e, "reason", reason);
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", "Warning");
    src = cJSON_AddObjectToObject(e, "source");
    cJSON_AddStringToObject(src, "component", "nvshare-pod-watcher");
    cJSON_AddStringToObject(src, "host", w->node);
    cJSON_AddStringToObject(e, "firstTimestamp", stamp);
    cJSON_AddStringToObject(e, "lastTimestamp", stamp);
    cJSON_AddNumberToObject(e, "count", 1);
    json = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    if (!json)
        return;
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events",
             pod->pod_namespace);
    status = kube_request(&w->kube, "POST", path, json, &body, err);
    if (status < 0)
        log_warn("cannot post event %s on pod %s/%s: %s", reason,
                 pod->pod_namespace, pod->pod_name, err);
    else if (status >= 300)
        log_warn("cannot post event %s on pod %s/%s: HTTP %ld", reason,
                 pod->pod_namespace, pod->pod_name, status);
    kube_body_free(&body);
    free(json);
}

/* A bad annotation, once per value it takes: one line and an Event. */
static const struct annotation *annotation_of(const struct watched_pod *p,
                                              const char *key)
{
    return !strcmp(key, ANNOTATION_CORE_LIMIT)     ? &p->core
           : !strcmp(key, ANNOTATION_MEMORY_LIMIT) ? &p->memory
           : !strcmp(key, ANNOTATION_IDLE_SWAP)    ? &p->idle_swap
                                                   : &p->priority;
}

static void report_bad(struct watcher *w, const struct watched_pod *p,
                       const struct watched_pod *before, const char *key)
{
    const struct annotation *a = annotation_of(p, key);
    const struct annotation *was = before ? annotation_of(before, key) : NULL;
    char message[512];

    if (!a->bad || (was && was->bad && !strcmp(was->raw, a->raw)))
        return;
    snprintf(message, sizeof(message),
             "annotation %s=\"%s\" ignored: %s; the "
             "previous value stays in force",
             key, a->raw, a->why);
    log_warn("pod %s/%s: %s", p->facts.pod_namespace, p->facts.pod_name, message);
    post_event(w, &p->facts, "NvshareInvalidAnnotation", message);
}

/* What does not read well in a pod, said once per value it takes. */
static void report_problems(struct watcher *w, const struct watched_pod *p,
                            const struct watched_pod *before)
{
    report_bad(w, p, before, ANNOTATION_CORE_LIMIT);
    report_bad(w, p, before, ANNOTATION_MEMORY_LIMIT);
    report_bad(w, p, before, ANNOTATION_PRIORITY);
    report_bad(w, p, before, ANNOTATION_IDLE_SWAP);
    if (p->request_saturated && !(before && before->request_saturated))
        log_warn("pod %s/%s: its %s request overflows 64 bits at %llu bytes a "
                 "unit: taken as %llu bytes, more than any GPU",
                 p->facts.pod_namespace, p->facts.pod_name, RESOURCE_GPU_MEMORY,
                 (unsigned long long)w->memory_unit,
                 (unsigned long long)p->facts.memory_request);
}

/* ---- the pod cache ----------------------------------------------------- */

static struct watched_pod *find_pod(struct watcher *w, const char *uid)
{
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->pods[i].facts.pod_uid, uid))
            return &w->pods[i];
    return NULL;
}

static int add_pod(struct watched_pod **list, size_t *n, size_t *cap,
                   const struct watched_pod *p)
{
    if (*n == *cap) {
        size_t grown = *cap ? 2 * *cap : 64;
        struct watched_pod *l = realloc(*list, grown * sizeof(*l));
        if (!l)
            return -1;
        *list = l;
        *cap = grown;
    }
    (*list)[(*n)++] = *p;
    return 0;
}

/* A pod added or changed: cached, and the scheduler told if its facts
 * changed (if it is not reachable now, the next sync sends the cache).
 * Pods that never concerned nvshare are left out. */
static void pod_update(struct watcher *w, const struct watched_pod *p)
{
    struct watched_pod *old = find_pod(w, p->facts.pod_uid);

    if (!old && !p->concerns_nvshare)
        return;

    report_problems(w, p, old);
    if (old && !pod_facts_differ(old, p)) {
        *old = *p;
        return;
    }
    if (old)
        *old = *p;
    else if (add_pod(&w->pods, &w->n, &w->cap, p)) {
        log_error("out of memory: pod %s/%s not tracked",
                  p->facts.pod_namespace, p->facts.pod_name);
        return;
    }
    sched_send_pod(w, p);
}

static void pod_delete(struct watcher *w, const struct watched_pod *p)
{
    struct watched_pod *old = find_pod(w, p->facts.pod_uid);
    struct msg m = {.type = MSG_CTL_POD_GONE};

    if (!old)
        return;
    log_info("pod %s/%s deleted", p->facts.pod_namespace, p->facts.pod_name);
    *old = w->pods[--w->n];
    snprintf(m.u.facts.pod_uid, sizeof(m.u.facts.pod_uid), "%s",
             p->facts.pod_uid);
    sched_call(w, &m);
}

/* ---- list ------------------------------------------------------------- */

/* Reads a non-2xx response's Status message for the log. */
static void status_text(const struct kube_body *b, char *out, size_t len)
{
    cJSON *s = b->data ? cJSON_Parse(b->data) : NULL;
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(s, "message");

    snprintf(out, len, "%s",
             cJSON_IsString(msg) ? msg->valuestring : "no message");
    cJSON_Delete(s);
}

/* A list in progress: the pods so far, and where the next page starts. */
struct listing {
    struct watched_pod *list;
    size_t n, cap;
    char rv[64];
    char cont[1024]; /* the continue token: empty after the last page */
};

/* One page of the list, parsed into *doc (NULL if it is not JSON: take_page
 * says so). -1, with a line, if the API server did not answer it. */
static int get_page(struct watcher *w, const struct listing *l, cJSON **doc)
{
    char path[2048], err[KUBE_ERR_LEN], why[256];
    struct kube_body body = {0};

    snprintf(path, sizeof(path), "/api/v1/pods?fieldSelector=%s&limit=%d%s%s",
             w->selector, LIST_PAGE, l->cont[0] ? "&continue=" : "", l->cont);
    long status = kube_request(&w->kube, "GET", path, NULL, &body, err);
    if (status != 200) {
        if (status < 0)
            log_warn("cannot list pods: %s", err);
        else {
            status_text(&body, why, sizeof(why));
            log_warn("cannot list pods: HTTP %ld: %s", status, why);
        }
        kube_body_free(&body);
        return -1;
    }
    *doc = cJSON_ParseWithLength(body.data, body.len);
    kube_body_free(&body);
    return 0;
}

/* Adds a page's pods (those that concern nvshare, or did) to l, and takes
 * its resourceVersion and continue token. 0 or -1. */
static int take_page(struct watcher *w, const cJSON *doc, struct listing *l)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(doc, "items");
    const cJSON *item, *c = cJSON_GetObjectItemCaseSensitive(meta, "continue");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");

    if (!cJSON_IsArray(items) || !cJSON_IsString(v) ||
        strlen(v->valuestring) >= sizeof(l->rv) ||
        (cJSON_IsString(c) && strlen(c->valuestring) >= sizeof(l->cont))) {
        log_warn("cannot list pods: the answer is not a PodList (or its "
                 "resourceVersion or continue token is over %zu bytes)",
                 sizeof(l->rv) - 1);
        return -1;
    }
    snprintf(l->rv, sizeof(l->rv), "%s", v->valuestring);
    snprintf(l->cont, sizeof(l->cont), "%s",
             cJSON_IsString(c) ? c->valuestring : "");
    cJSON_ArrayForEach(item, items)
    {
        struct watched_pod p, *old;
        if (pod_from_json(item, w->memory_unit, &p) == 0 &&
            ((old = find_pod(w, p.facts.pod_uid)) || p.concerns_nvshare)) {
            report_problems(w, &p, old);
            if (add_pod(&l->list, &l->n, &l->cap, &p)) {
                log_error("out of memory listing pods");
                return -1;
            }
        }
    }
    return 0;
}

/* Lists this node's pods, page by page, into a fresh cache. The previous
 * cache tells which problems were already reported. 0 or -1. */
static int list_pods(struct watcher *w)
{
    struct listing l = {0};
    int pages = 0;

    do {
        if (++pages > LIST_PAGES_MAX) {
            log_warn("cannot list pods: more than %d pages of %d (a continue "
                     "token "
                     "that never ends?)",
                     LIST_PAGES_MAX, LIST_PAGE);
            free(l.list);
            return -1;
        }
        cJSON *doc = NULL;
        int rc = get_page(w, &l, &doc) < 0 ? -1 : take_page(w, doc, &l);
        cJSON_Delete(doc);
        if (rc < 0) {
            free(l.list);
            return -1;
        }
    } while (l.cont[0]);
    free(w->pods);
    w->pods = l.list;
    w->n = l.n;
    w->cap = l.cap;
    w->listed = true;
    snprintf(w->resource_version, sizeof(w->resource_version), "%s", l.rv);
    log_info("listed %zu pod(s) on node %s at resourceVersion %s", l.n, w->node,
             l.rv);
    return 0;
}

/* ---- watch ------------------------------------------------------------ */

static int on_event(void *ctx, const char *line, size_t len)
{
    struct watcher *w = ctx;
    cJSON *e = cJSON_ParseWithLength(line, len);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(e, "object");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    struct watched_pod p;
    int stop = 0;

    if (!cJSON_IsString(type) || !cJSON_IsObject(obj)) {
        log_warn("watch: an event that is not one: ignored");
    } else if (!strcmp(type->valuestring, "ERROR")) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(obj, "message");
        if (cJSON_IsNumber(code) && code->valueint == 410) {
            log_info("watch: resourceVersion %s is too old (410 Gone): listing "
                     "again",
                     w->resource_version);
            w->relist = true;
        } else {
            log_warn("watch: error event: %s",
                     cJSON_IsString(msg) ? msg->valuestring : "?");
        }
        stop = 1;
    } else {
        if (cJSON_IsString(rv) &&
            strlen(rv->valuestring) < sizeof(w->resource_version))
            snprintf(w->resource_version, sizeof(w->resource_version), "%s",
                     rv->valuestring);
        if (!strcmp(type->valuestring, "BOOKMARK")) {
            log_debug("watch: bookmark at resourceVersion %s",
                      w->resource_version);
        } else if (pod_from_json(obj, w->memory_unit, &p)) {
            log_warn("watch: a pod without a UID or name: ignored");
        } else if (!strcmp(type->valuestring, "DELETED")) {
            pod_delete(w, &p);
        } else {
            pod_update(w, &p);
        }
    }
    cJSON_Delete(e);
    return stop || stopping;
}

/* Between the watch's reads: the watch goes on whatever became of the
 * scheduler, and its wait wakes for the scheduler's socket too. */
static int on_tick(void *ctx, int *fd, int *timeout_ms)
{
    struct watcher *w = ctx;

    sched_keep(w);
    *fd = w->sched_fd;
    *timeout_ms = ms_of(sched_idle_ns(w, now_ns(), NS_PER_SEC));
    return stopping;
}

/* One watch, from resource_version: how long it lasted (a 410 sets relist
 * as well). */
static uint64_t watch_pods(struct watcher *w)
{
    char path[2048], err[KUBE_ERR_LEN], why[256];
    struct kube_body body = {0};
    struct kube_stream_calls calls = {on_event, on_tick, w};
    uint64_t started = now_ns();
    long status;

    snprintf(path, sizeof(path),
             "/api/v1/pods?watch=1&allowWatchBookmarks=true"
             "&fieldSelector=%s&resourceVersion=%s&timeoutSeconds=%d",
             w->selector, w->resource_version, WATCH_TIMEOUT_S);
    status = kube_stream(&w->kube, path, &calls, &body, err);
    if (status == 410) {
        log_info("watch: resourceVersion %s is too old (410 Gone): listing "
                 "again",
                 w->resource_version);
        w->relist = true;
    } else if (status == -1) {
        log_warn("%s", err);
    } else if (status >= 0 && status != 200) {
        status_text(&body, why, sizeof(why));
        log_warn("cannot watch pods: HTTP %ld: %s", status, why);
    }
    kube_body_free(&body);
    return now_ns() - started;
}

/* ---- main ---------------------------------------------------------------- */

static int configure(struct watcher *w)
{
    const char *node = getenv("NODE_NAME");

    memset(w, 0, sizeof(*w));
    w->sched_fd = -1;
    w->sched_backoff = BACKOFF_MIN_NS;
    w->relist = true;
    if (!node || !*node || strlen(node) >= sizeof(w->node)) {
        log_error("NODE_NAME is not set: give it the node's name (the downward "
                  "API's spec.nodeName)");
        return -1;
    }
    snprintf(w->node, sizeof(w->node), "%s", node);
    /* Node names are DNS names: only '=' needs escaping. */
    snprintf(w->selector, sizeof(w->selector), "spec.nodeName%%3D%s", node);
    w->memory_unit = env_size_bytes("NVSHARE_GPU_MEMORY_UNIT", 256ull << 20);
    return kube_config(&w->kube);
}

static void print_usage(FILE *out)
{
    fputs(
        "usage: nvshare-pod-watcher [--help | --version]\n"
        "\n"
        "Watches this node's pods at the API server and tells the nvshare\n"
        "scheduler their annotations and gpu-memory requests. Runs beside the\n"
        "scheduler (same pod); configured by the environment:\n"
        "\n"
        "  NODE_NAME               this node's name (required; the downward\n"
        "                          API's spec.nodeName)\n"
        "  KUBERNETES_SERVICE_HOST the API server (set in every pod), with\n"
        "  KUBERNETES_SERVICE_PORT its port (default 443)\n"
        "  NVSHARE_API_SERVER      the API server's URL instead\n"
        "  NVSHARE_SA_DIR          the service account's token and CA "
        "(default\n"
        "                          " KUBE_SA_DIR ")\n"
        "  NVSHARE_GPU_MEMORY_UNIT one nvshare.com/gpu-memory device (default\n"
        "                          256Mi; as the device plugin's)\n"
        "  NVSHARE_SOCK_DIR        the scheduler's socket directory (default\n"
        "                          " DEFAULT_SOCK_DIR ")\n"
        "  NVSHARE_LOG_FORMAT      text (default) or json\n",
        out);
}

int main(int argc, char **argv)
{
    static struct watcher w;
    uint64_t backoff = BACKOFF_MIN_NS;
    struct sigaction sa = {.sa_handler = on_signal};
    int rc = cli_standard_args(argc, argv, "nvshare-pod-watcher", print_usage);

    if (rc >= 0)
        return rc;
    log_init("pod-watcher", LOG_INFO);
    if (configure(&w))
        return 1;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    srandom((unsigned)(getpid() ^ now_ns()));
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
        log_error("cannot initialise libcurl");
        return 1;
    }
    log_info("watching pods of node %s at %s, scheduler at %s", w.node,
             w.kube.api, env_sock_dir());
    while (!stopping) {
        if (w.relist) {
            if (list_pods(&w)) {
                pause_for(&w, backoff_next(&backoff, BACKOFF_MAX_NS));
                continue;
            }
            w.relist = false;
            sched_sync(&w); /* the scheduler gets the new list whole */
        }
        uint64_t lasted = watch_pods(&w);
        backoff_calm(&backoff, lasted);
        if (lasted < WATCH_HEALTHY_NS)
            pause_for(&w, backoff_next(&backoff, BACKOFF_MAX_NS));
    }
    log_info("stopping");
    sched_close(&w);
    free(w.pods);
    curl_global_cleanup();
    return 0;
}
