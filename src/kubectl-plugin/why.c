/* why.c - kubectl nvshare why POD: one answer in plain words, from the
 * scheduler of the pod's node (plugin.h).
 *
 * The pod's node comes from the API server; its scheduler's status names
 * the pod's processes (by pod UID where the scheduler read it from the
 * cgroup, else by namespace and name) and, per GPU, who else runs there.
 * Each process gets a line; the answer is the most pressing of them, in
 * this order: a process without the hook, waiting for memory, waiting
 * behind a higher priority, throttled, waiting its turn, running, swapped
 * out, idle. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json_out.h"
#include "plugin.h"

#define LINE 80
#define HOLDERS_SHOWN 5 /* who holds a GPU's memory, largest first */

enum reason {
    R_NOT_HOOKED,
    R_MEMORY,
    R_PRIORITY,
    R_THROTTLED,
    R_TURN,
    R_RUNNING,
    R_SWAPPED,
    R_IDLE,
    R_NOT_CONNECTED, /* no process of the pod seen by the scheduler */
    R_NOT_NVSHARE,   /* its node runs no nvshare scheduler */
    R_NOT_ANSWERING, /* its node's scheduler does not answer */
    R_NOT_SCHEDULED, /* no node yet */
};

static const char *const reason_names[] = {
    "not-hooked",    "waiting-memory",   "waiting-priority", "throttled",
    "waiting-turn",  "running",          "swapped-out",      "idle",
    "not-connected", "not-nvshare-node", "not-answering",    "not-scheduled",
};

/* The answer, built a line at a time. */
struct answer {
    char pod[NAME_LEN * 2 + 2], node[NAME_LEN];
    enum reason reason;
    char lines[64][LINE + 1];
    int n_lines;
};

static void say(struct answer *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void say(struct answer *a, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    if (a->n_lines == (int)(sizeof(a->lines) / sizeof(a->lines[0])))
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    fit(a->lines[a->n_lines++], text, LINE);
}

static bool of_pod(const struct st_client *c, const char *ns, const char *pod,
                   const char *uid)
{
    if (c->pod_uid[0] && uid[0])
        return !strcmp(c->pod_uid, uid);
    return !strcmp(c->ns, ns) && !strcmp(c->pod, pod);
}

static bool running(const struct st_client *c)
{
    return !strcmp(c->state, "holding") || !strcmp(c->state, "draining");
}

/* A short name of another client: "ns/pod". */
static const char *who(const struct st_client *c, char *buf, size_t len)
{
    char full[NAME_LEN * 2 + 8];

    fmt_pod(c, full, sizeof(full));
    fit(buf, full, len - 1);
    return buf;
}

/* Who holds memory on GPU gpu, largest first: running clients and
 * processes without the hook. */
static void memory_holders(struct answer *a, const struct node *n,
                           const struct st_client *self)
{
    const struct st_client *top[HOLDERS_SHOWN] = {0};
    char name[40], size[12];

    for (int i = 0; i < n->n_clients; i++) {
        const struct st_client *c = &n->clients[i];

        if (c == self || c->gpu != self->gpu || !c->resident)
            continue;
        for (int k = 0; k < HOLDERS_SHOWN; k++)
            if (!top[k] || c->resident > top[k]->resident) {
                memmove(&top[k + 1], &top[k],
                        (HOLDERS_SHOWN - k - 1) * sizeof(top[0]));
                top[k] = c;
                break;
            }
    }
    for (int k = 0; k < HOLDERS_SHOWN && top[k]; k++) {
        fmt_bytes(top[k]->resident, size, sizeof(size));
        say(a, "    held by %s: %s (%s)", who(top[k], name, sizeof(name)), size,
            client_doing(top[k]));
    }
    for (int i = 0; i < n->n_unhooked; i++)
        if (n->unhooked[i].gpu == self->gpu) {
            fmt_bytes(n->unhooked[i].used, size, sizeof(size));
            say(a, "    held without nvshare by pid %u: %s (%s %s)",
                (unsigned)n->unhooked[i].pid, size, n->unhooked[i].origin,
                n->unhooked[i].pod_uid[0] ? n->unhooked[i].pod_uid : "");
        }
}

/* The running clients of c's GPU above c's priority (priority true) or
 * any (false). */
static void runners(struct answer *a, const struct node *n,
                    const struct st_client *self, bool priority)
{
    char name[40];
    int shown = 0;

    for (int i = 0; i < n->n_clients && shown < HOLDERS_SHOWN; i++) {
        const struct st_client *c = &n->clients[i];

        if (c == self || c->gpu != self->gpu || !running(c) ||
            (priority && c->priority_class <= self->priority_class))
            continue;
        say(a, "    behind %s (priority %s)", who(c, name, sizeof(name)),
            c->priority);
        shown++;
    }
}

static enum reason explain_client(struct answer *a, const struct node *n,
                                  const struct st_client *c)
{
    const struct st_gpu *g = status_gpu(n, c->gpu);
    char x[16], y[16];

    if (!strcmp(c->wait_reason, "memory")) {
        fmt_bytes(g->running_footprint, x, sizeof(x));
        fmt_bytes(g->memory_total - g->reserve, y, sizeof(y));
        say(a, "  pid %u waits for memory on GPU %u: %s of %s in use",
            (unsigned)c->pid, g->index, x, y);
        if (c->wait_why[0])
            say(a, "    scheduler: %s", c->wait_why);
        memory_holders(a, n, c);
        return R_MEMORY;
    }
    if (!strcmp(c->wait_reason, "priority")) {
        say(a, "  pid %u waits on GPU %u behind a higher priority (its own: %s)",
            (unsigned)c->pid, g->index, c->priority);
        runners(a, n, c, true);
        return R_PRIORITY;
    }
    if (!strcmp(c->wait_reason, "throttled") || c->throttled) {
        fmt_ns(c->used_ns, x, sizeof(x));
        fmt_ns(c->budget_ns, y, sizeof(y));
        say(a, "  pid %u is throttled at its core limit of %u%% on GPU %u:",
            (unsigned)c->pid, c->core_limit, g->index);
        say(a, "    it used %s of its %s this window", x, y);
        return R_THROTTLED;
    }
    if (!strcmp(c->state, "waiting")) {
        say(a, "  pid %u waits its turn on GPU %u (quantum %s)",
            (unsigned)c->pid, g->index, (fmt_ns(g->tq_ns, x, sizeof(x)), x));
        runners(a, n, c, false);
        return R_TURN;
    }
    if (running(c)) {
        snprintf(y, sizeof(y), c->load_permille >= 0 ? "%.1f%%" : "unmeasured",
                 c->load_permille / 10.0);
        say(a, "  pid %u runs on GPU %u: busy %s of the GPU's time%s",
            (unsigned)c->pid, g->index, y,
            c->core_limit && c->core_limit < 100 ? " (under its limit)" : "");
        return R_RUNNING;
    }
    fmt_ns(c->idle_ns, x, sizeof(x));
    if (c->swapped_out) {
        fmt_bytes(c->parked, y, sizeof(y));
        say(a, "  pid %u is swapped out as idle (for %s): %s in host memory",
            (unsigned)c->pid, x, y);
        say(a, "    it comes back at the process's next GPU call");
        return R_SWAPPED;
    }
    say(a, "  pid %u is idle on GPU %u for %s: it submits no GPU work",
        (unsigned)c->pid, g->index, x);
    return R_IDLE;
}

static void explain_node(struct answer *a, const struct node *n, const char *ns,
                         const char *pod, const char *uid)
{
    char size[16];
    bool any = false;

    a->reason = R_NOT_CONNECTED;
    for (int i = 0; i < n->n_unhooked; i++)
        if (uid[0] && !strcmp(n->unhooked[i].pod_uid, uid)) {
            fmt_bytes(n->unhooked[i].used, size, sizeof(size));
            say(a, "  pid %u uses GPU %u without libnvshare.so (%s): not hooked",
                (unsigned)n->unhooked[i].pid, n->unhooked[i].gpu, size);
            a->reason = R_NOT_HOOKED;
            any = true;
        }
    for (int i = 0; i < n->n_clients; i++)
        if (of_pod(&n->clients[i], ns, pod, uid)) {
            enum reason r = explain_client(a, n, &n->clients[i]);
            if (!any || r < a->reason)
                a->reason = r;
            any = true;
        }
    if (!any)
        say(a, "  no process of the pod uses nvshare yet: not started on the "
               "GPU, or runs without libnvshare.so (LD_PRELOAD)");
}

static const char *headline(enum reason r)
{
    switch (r) {
    case R_NOT_HOOKED:
        return "not hooked: a process uses the GPU without nvshare";
    case R_MEMORY:
        return "waiting for memory";
    case R_PRIORITY:
        return "waiting behind a higher priority";
    case R_THROTTLED:
        return "throttled at its core limit";
    case R_TURN:
        return "waiting its turn";
    case R_RUNNING:
        return "running";
    case R_SWAPPED:
        return "swapped out as idle";
    case R_IDLE:
        return "idle";
    case R_NOT_CONNECTED:
        return "not connected to nvshare";
    case R_NOT_NVSHARE:
        return "not on an nvshare node";
    case R_NOT_ANSWERING:
        return "its node's scheduler does not answer";
    case R_NOT_SCHEDULED:
        return "not scheduled on a node yet";
    }
    return "";
}

/* Reads the pod: its node and UID. The HTTP status, or -1 with err. */
static long read_pod(const struct kube *k, const char *ns, const char *pod,
                     char *node, char *uid, char *err)
{
    char path[600];
    cJSON *doc;
    const cJSON *v;
    long status;

    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns, pod);
    if ((status = api_get_json(k, path, &doc, err)) != 200) {
        cJSON_Delete(doc);
        return status;
    }
    v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "spec"),
                                         "nodeName");
    if (cJSON_IsString(v) && strlen(v->valuestring) < NAME_LEN)
        strcpy(node, v->valuestring);
    v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "metadata"),
                                         "uid");
    if (cJSON_IsString(v) && strlen(v->valuestring) < PROTO_POD_UID_MAX)
        strcpy(uid, v->valuestring);
    cJSON_Delete(doc);
    return status;
}

static void print(const struct answer *a, bool json)
{
    if (json) {
        struct json_out j;

        json_init(&j, stdout);
        json_begin_object(&j, NULL);
        json_string(&j, "pod", a->pod);
        json_string(&j, "node", a->node);
        json_string(&j, "reason", reason_names[a->reason]);
        json_string(&j, "summary", headline(a->reason));
        json_begin_array(&j, "details");
        for (int i = 0; i < a->n_lines; i++)
            json_string(&j, NULL, a->lines[i] + strspn(a->lines[i], " "));
        json_end_array(&j);
        json_end_object(&j);
        putchar('\n');
        return;
    }
    {
        char head[NAME_LEN * 3 + 100], line[LINE + 1];

        snprintf(head, sizeof(head), "%s: %s", a->pod, headline(a->reason));
        fit(line, head, LINE);
        puts(line);
        for (int i = 0; i < a->n_lines; i++)
            puts(a->lines[i]);
    }
}

int cmd_why(const struct kube *k, const struct options *o, const char *pod)
{
    struct answer *a = calloc(1, sizeof(*a));
    char err[KUBE_ERR_LEN], uid[PROTO_POD_UID_MAX] = "", what[300];
    struct options on_node = *o;
    struct cluster c;
    long status;
    int rc = 0;

    if (!a)
        return EXIT_FAILED;
    snprintf(a->pod, sizeof(a->pod), "%s/%s", o->namespace_, pod);
    status = read_pod(k, o->namespace_, pod, a->node, uid, err);
    if (status == 404) {
        fprintf(stderr, "kubectl nvshare: no pod %s\n", a->pod);
        free(a);
        return EXIT_FAILED;
    }
    if (status != 200) {
        if (status > 0) {
            snprintf(what, sizeof(what), "reading pod %.200s", a->pod);
            explain_status(status, what, err, sizeof(err));
        }
        fprintf(stderr, "kubectl nvshare: %s\n", err);
        free(a);
        return EXIT_FAILED;
    }
    on_node.node = a->node;
    if (!a->node[0]) {
        a->reason = R_NOT_SCHEDULED;
    } else if (cluster_fetch(k, &on_node, &c, err)) {
        fprintf(stderr, "kubectl nvshare: %s\n", err);
        free(a);
        return EXIT_FAILED;
    } else {
        if (!c.n_nodes) {
            a->reason = R_NOT_NVSHARE;
            say(a, "  node %s runs no nvshare scheduler (no pod of %s there)",
                a->node, o->nvshare_namespace);
        } else if (c.nodes[0].state != NODE_OK) {
            a->reason = R_NOT_ANSWERING;
            say(a, "  node %s: %s", a->node, c.nodes[0].error);
            rc = EXIT_FAILED;
        } else {
            explain_node(a, &c.nodes[0], o->namespace_, pod, uid);
        }
        cluster_free(&c);
    }
    print(a, o->json);
    free(a);
    return rc;
}
