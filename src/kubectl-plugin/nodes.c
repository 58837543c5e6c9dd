/* nodes.c - kubectl nvshare nodes: each node's scheduler in a line: its
 * version, GPUs, quantum and mode, and the ones that do not answer. */
#include <string.h>

#include "json_out.h"
#include "plugin.h"

#define ROW "%-22s %-26s %4s %-10s %6s %7s\n"

/* The GPUs' mode, or "mixed". */
static const char *mode_of(const struct node *n)
{
    for (int g = 1; g < n->n_gpus; g++)
        if (strcmp(n->gpus[g].mode, n->gpus[0].mode))
            return "mixed";
    return n->n_gpus ? n->gpus[0].mode : "-";
}

static void node_text(const struct node *n)
{
    char name[24], version[28], gpus[8], tq[12] = "auto", clients[12];

    fit(name, n->name, 22);
    if (n->state != NODE_OK) {
        printf("%-22s not answering: %.40s\n", name, n->error);
        return;
    }
    fit(version, n->version[0] ? n->version : "-", 26);
    snprintf(gpus, sizeof(gpus), "%d", n->n_gpus);
    if (n->tq_ns)
        fmt_ns(n->tq_ns, tq, sizeof(tq));
    snprintf(clients, sizeof(clients), "%d", n->n_clients);
    printf(ROW, name, version, gpus, mode_of(n), tq, clients);
}

static void node_json(struct json_out *j, const struct node *n)
{
    json_begin_object(j, NULL);
    json_string(j, "node", n->name);
    json_string(j, "scheduler_pod", n->sched_pod);
    json_bool(j, "answered", n->state == NODE_OK);
    if (n->state != NODE_OK) {
        json_string(j, "error", n->error);
        json_end_object(j);
        return;
    }
    json_null(j, "error");
    json_string(j, "version", n->version);
    json_uint(j, "tq_ns", n->tq_ns);
    json_uint(j, "uptime_ns", n->uptime_ns);
    json_uint(j, "clients", (uint64_t)n->n_clients);
    json_begin_array(j, "gpus");
    for (int g = 0; g < n->n_gpus; g++) {
        json_begin_object(j, NULL);
        json_uint(j, "index", n->gpus[g].index);
        json_string(j, "uuid", n->gpus[g].uuid);
        json_string(j, "mode", n->gpus[g].mode);
        json_uint(j, "memory_total_bytes", n->gpus[g].memory_total);
        json_uint(j, "tq_ns", n->gpus[g].tq_ns);
        json_end_object(j);
    }
    json_end_array(j);
    json_end_object(j);
}

int cmd_nodes(const struct kube *k, const struct options *o)
{
    char err[KUBE_ERR_LEN];
    struct cluster c;
    int answering = 0;

    if (cluster_fetch(k, o, &c, err)) {
        fprintf(stderr, "kubectl nvshare: %s\n", err);
        return EXIT_FAILED;
    }
    if (o->json) {
        struct json_out j;

        json_init(&j, stdout);
        json_begin_array(&j, NULL);
        for (int m = 0; m < c.n_nodes; m++)
            node_json(&j, &c.nodes[m]);
        json_end_array(&j);
        putchar('\n');
    } else {
        printf(ROW, "NODE", "VERSION", "GPUS", "MODE", "TQ", "CLIENTS");
        for (int m = 0; m < c.n_nodes; m++)
            node_text(&c.nodes[m]);
    }
    for (int m = 0; m < c.n_nodes; m++)
        answering += c.nodes[m].state == NODE_OK;
    if (!c.n_nodes)
        fprintf(stderr, "kubectl nvshare: no nvshare scheduler pods in %s\n",
                o->nvshare_namespace);
    cluster_free(&c);
    return answering ? 0 : EXIT_FAILED;
}
