/* top.c - kubectl nvshare top: every pod on every nvshare GPU, one row
 * per process and GPU with the numbers its node's `nvsharectl status
 * --json` gives, then totals per namespace; 80 columns; redrawn like top
 * on a terminal, or one JSON document. */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "json_out.h"
#include "plugin.h"

#define ROW "  %-19s %-9s %5s %5s %-6s %6s %7s %6s %5s\n"

static bool shown(const struct options *o, const struct st_client *c)
{
    return !o->namespace_ || !strcmp(o->namespace_, c->ns);
}

static void client_row(FILE *out, const struct st_client *c)
{
    char pod[NAME_LEN * 2 + 8], cut[24], load[8] = "-", limit[8] = "-";
    char res[12], parked[12], quota[12] = "-", idle[12] = "-";

    fmt_pod(c, pod, sizeof(pod));
    fit(cut, pod, 19);
    if (c->load_permille >= 0)
        snprintf(load, sizeof(load), "%.1f", c->load_permille / 10.0);
    if (c->core_limit && c->core_limit < 100)
        snprintf(limit, sizeof(limit), "%u%%", c->core_limit);
    fmt_bytes(c->resident, res, sizeof(res));
    fmt_bytes(c->parked, parked, sizeof(parked));
    if (c->mem_quota)
        fmt_bytes(c->mem_quota, quota, sizeof(quota));
    if (!strcmp(c->state, "idle"))
        fmt_ns(c->idle_ns, idle, sizeof(idle));
    fprintf(out, ROW, cut, client_doing(c), load, limit, c->priority, res,
            parked, quota, idle);
}

static void gpu_text(FILE *out, const struct options *o, const struct node *n,
                     const struct st_gpu *g)
{
    char name[24], mem[12], tq[12], uuid[24];

    fit(name, n->name, 22);
    fmt_bytes(g->memory_total, mem, sizeof(mem));
    fmt_ns(g->tq_ns, tq, sizeof(tq));
    fit(uuid, g->uuid, 20);
    fprintf(out, "%s GPU %u %s %s %s tq %s\n", name, g->index, uuid, mem,
            g->mode, tq);
    for (int i = 0; i < n->n_clients; i++)
        if (n->clients[i].gpu == g->index && shown(o, &n->clients[i]))
            client_row(out, &n->clients[i]);
    for (int i = 0; i < n->n_unhooked; i++) {
        const struct st_unhooked *u = &n->unhooked[i];

        if (u->gpu != g->index)
            continue;
        fmt_bytes(u->used, mem, sizeof(mem));
        fprintf(out, "  pid %u: %s without nvshare, %s %.24s\n",
                (unsigned)u->pid, mem, u->origin, u->pod_uid);
    }
}

/* Totals of one namespace; a pod's quota is counted once per GPU. */
struct ns_total {
    const char *ns;
    int pods;
    uint64_t load_permille, resident, parked, quota;
};

/* Whether client i of node n is the first of its pod on its GPU, and of
 * its pod anywhere before it in the cluster. */
static bool first_of(const struct cluster *c, int node, int i, bool same_gpu)
{
    const struct st_client *x = &c->nodes[node].clients[i];

    for (int m = 0; m <= node; m++) {
        const struct node *n = &c->nodes[m];
        int end = m == node ? i : n->n_clients;

        if (n->state != NODE_OK || (same_gpu && m != node))
            continue;
        for (int j = 0; j < end; j++)
            if (!strcmp(n->clients[j].ns, x->ns) &&
                !strcmp(n->clients[j].pod, x->pod) &&
                (!same_gpu || n->clients[j].gpu == x->gpu))
                return false;
    }
    return true;
}

static int totals(const struct cluster *c, const struct options *o,
                  struct ns_total **out)
{
    struct ns_total *t = NULL;
    int n_t = 0;

    for (int m = 0; m < c->n_nodes; m++)
        for (int i = 0; i < c->nodes[m].n_clients; i++) {
            const struct st_client *x = &c->nodes[m].clients[i];
            int k = 0;

            if (c->nodes[m].state != NODE_OK || !shown(o, x))
                continue;
            while (k < n_t && strcmp(t[k].ns, x->ns))
                k++;
            if (k == n_t) {
                struct ns_total *grown =
                    realloc(t, (size_t)(n_t + 1) * sizeof(*t));
                if (!grown)
                    break;
                t = grown;
                t[n_t++] = (struct ns_total){.ns = x->ns};
            }
            t[k].pods += first_of(c, m, i, false);
            t[k].load_permille +=
                x->load_permille > 0 ? (uint64_t)x->load_permille : 0;
            t[k].resident += x->resident;
            t[k].parked += x->parked;
            if (first_of(c, m, i, true))
                t[k].quota += x->mem_quota;
        }
    *out = t;
    return n_t;
}

static void render_text(FILE *out, const struct cluster *c,
                        const struct options *o)
{
    int answering = 0, n_t;
    struct ns_total *t;

    for (int m = 0; m < c->n_nodes; m++)
        answering += c->nodes[m].state == NODE_OK;
    fprintf(out, "%d nvshare nodes, %d answering\n", c->n_nodes, answering);
    fprintf(out, ROW, "POD", "DOING", "GPU%", "LIMIT", "PRIO", "ON-GPU",
            "SWAPPED", "QUOTA", "IDLE");
    for (int m = 0; m < c->n_nodes; m++) {
        const struct node *n = &c->nodes[m];

        if (n->state != NODE_OK) {
            fprintf(out, "%.22s not answering: %.40s\n", n->name, n->error);
            continue;
        }
        for (int g = 0; g < n->n_gpus; g++)
            gpu_text(out, o, n, &n->gpus[g]);
    }
    n_t = totals(c, o, &t);
    if (n_t)
        fprintf(out, "\n%-24s %5s %7s %7s %7s %7s\n", "NAMESPACE", "PODS",
                "GPU%", "ON-GPU", "SWAPPED", "QUOTA");
    for (int k = 0; k < n_t; k++) {
        char ns[32], res[12], parked[12], quota[12];

        fit(ns, t[k].ns[0] ? t[k].ns : "default", 24);
        fmt_bytes(t[k].resident, res, sizeof(res));
        fmt_bytes(t[k].parked, parked, sizeof(parked));
        fmt_bytes(t[k].quota, quota, sizeof(quota));
        fprintf(out, "%-24s %5d %7.1f %7s %7s %7s\n", ns, t[k].pods,
                (double)t[k].load_permille / 10.0, res, parked, quota);
    }
    free(t);
}

static void client_json(struct json_out *j, const struct st_client *c)
{
    json_begin_object(j, NULL);
    json_string(j, "namespace", c->ns);
    json_string(j, "pod", c->pod);
    json_uint(j, "client_id", c->client_id);
    json_uint(j, "pid", c->pid);
    json_string(j, "state", c->state);
    json_string(j, "doing", client_doing(c));
    json_string_or_null(j, "wait_reason", c->wait_reason);
    if (c->load_permille >= 0)
        json_decimal(j, "load_percent", (uint64_t)c->load_permille, 1);
    else
        json_null(j, "load_percent");
    json_uint(j, "core_limit", c->core_limit);
    json_uint(j, "used_ns", c->used_ns);
    json_uint(j, "budget_ns", c->budget_ns);
    json_string(j, "priority", c->priority);
    json_uint(j, "priority_class", c->priority_class);
    json_uint(j, "resident_bytes", c->resident);
    json_uint(j, "parked_bytes", c->parked);
    json_uint(j, "mem_quota_bytes", c->mem_quota);
    json_uint(j, "idle_ns", c->idle_ns);
    json_bool(j, "throttled", c->throttled);
    json_bool(j, "swapped_out", c->swapped_out);
    json_end_object(j);
}

static void node_json(struct json_out *j, const struct options *o,
                      const struct node *n)
{
    json_begin_object(j, NULL);
    json_string(j, "node", n->name);
    json_string(j, "scheduler_pod", n->sched_pod);
    json_bool(j, "answered", n->state == NODE_OK);
    if (n->state == NODE_OK)
        json_null(j, "error");
    else
        json_string(j, "error", n->error);
    json_begin_array(j, "gpus");
    for (int g = 0; g < n->n_gpus; g++) {
        const struct st_gpu *gpu = &n->gpus[g];

        json_begin_object(j, NULL);
        json_uint(j, "index", gpu->index);
        json_string(j, "uuid", gpu->uuid);
        json_string(j, "mode", gpu->mode);
        json_uint(j, "memory_total_bytes", gpu->memory_total);
        json_uint(j, "tq_ns", gpu->tq_ns);
        json_begin_array(j, "clients");
        for (int i = 0; i < n->n_clients; i++)
            if (n->clients[i].gpu == gpu->index && shown(o, &n->clients[i]))
                client_json(j, &n->clients[i]);
        json_end_array(j);
        json_begin_array(j, "unhooked");
        for (int i = 0; i < n->n_unhooked; i++) {
            const struct st_unhooked *u = &n->unhooked[i];
            if (u->gpu != gpu->index)
                continue;
            json_begin_object(j, NULL);
            json_uint(j, "pid", u->pid);
            json_uint(j, "used_bytes", u->used);
            json_string(j, "pod_uid", u->pod_uid);
            json_end_object(j);
        }
        json_end_array(j);
        json_end_object(j);
    }
    json_end_array(j);
    json_end_object(j);
}

static void render_json_doc(FILE *out, const struct cluster *c,
                            const struct options *o, uint64_t took_ms)
{
    struct json_out j;
    struct ns_total *t;
    int n_t = totals(c, o, &t);

    json_init(&j, out);
    json_begin_object(&j, NULL);
    json_uint(&j, "took_ms", took_ms);
    json_uint(&j, "max_in_flight", (uint64_t)c->max_in_flight);
    json_begin_array(&j, "nodes");
    for (int m = 0; m < c->n_nodes; m++)
        node_json(&j, o, &c->nodes[m]);
    json_end_array(&j);
    json_begin_array(&j, "namespaces");
    for (int k = 0; k < n_t; k++) {
        json_begin_object(&j, NULL);
        json_string(&j, "namespace", t[k].ns);
        json_uint(&j, "pods", (uint64_t)t[k].pods);
        json_decimal(&j, "load_percent", t[k].load_permille, 1);
        json_uint(&j, "resident_bytes", t[k].resident);
        json_uint(&j, "parked_bytes", t[k].parked);
        json_uint(&j, "mem_quota_bytes", t[k].quota);
        json_end_object(&j);
    }
    json_end_array(&j);
    json_end_object(&j);
    fputc('\n', out);
    free(t);
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One fetch and its rendering; the exit status. */
static int once(const struct kube *k, const struct options *o, bool redraw)
{
    char err[KUBE_ERR_LEN];
    struct cluster c;
    uint64_t start = now_ms();
    int answering = 0, rc;

    if (cluster_fetch(k, o, &c, err)) {
        fprintf(stderr, "kubectl nvshare: %s\n", err);
        return EXIT_FAILED;
    }
    for (int m = 0; m < c.n_nodes; m++)
        answering += c.nodes[m].state == NODE_OK;
    if (redraw)
        fputs("\033[H\033[2J", stdout);
    if (o->json)
        render_json_doc(stdout, &c, o, now_ms() - start);
    else
        render_text(stdout, &c, o);
    fflush(stdout);
    if (!c.n_nodes)
        fprintf(stderr, "kubectl nvshare: no nvshare scheduler pods in %s\n",
                o->nvshare_namespace);
    rc = c.n_nodes && !answering ? EXIT_FAILED : 0;
    cluster_free(&c);
    return rc;
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int cmd_top(const struct kube *k, const struct options *o)
{
    struct termios saved, raw;
    bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    int rc = 0;

    if (!o->interval_ms || !tty)
        return once(k, o, false);
    /* Keys without Enter, so that q quits as in top. */
    tcgetattr(STDIN_FILENO, &saved);
    raw = saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!stop) {
        struct pollfd in = {.fd = STDIN_FILENO, .events = POLLIN};
        char key;

        rc = once(k, o, true);
        if (poll(&in, 1, (int)o->interval_ms) > 0 &&
            (read(STDIN_FILENO, &key, 1) != 1 || key == 'q'))
            break;
    }
    tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    return rc;
}
