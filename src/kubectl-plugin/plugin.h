/* plugin.h - kubectl-nvshare's internals: the nodes' statuses as read
 * through the API server, and the commands that show them.
 *
 * Each node's scheduler serves `nvsharectl status --json`'s document as
 * /status.json; the plugin finds the schedulers (the pods of the nvshare
 * DaemonSet) and reads each through the API server's pod proxy, at most
 * FETCH_IN_FLIGHT at once. A node is one of thousands and its answer is a
 * tenant's word: every answer is bounded in time and size, parsed into the
 * fixed records below with each field checked, and strings are escaped
 * before they are printed. A node that does not answer, or answers badly,
 * is one line saying so; the rest is shown. */
#ifndef NVSHARE_KUBECTL_PLUGIN_H
#define NVSHARE_KUBECTL_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kube.h"
#include "protocol.h"

#define EXIT_FAILED 1 /* the API server or every scheduler failed */
#define EXIT_USAGE 2

#define FETCH_IN_FLIGHT 32        /* requests open at once */
#define FETCH_BODY_MAX (4u << 20) /* a node's status: 4 MiB */
#define FETCH_TIMEOUT_MS 5000     /* a node's answer, by default */
#define FETCH_LIST_PAGE 500       /* scheduler pods per list request */
#define FETCH_NODES_MAX 20000     /* beyond Kubernetes' 5000 per cluster */
#define STATUS_CLIENTS_MAX 4096   /* per node, as PROTO's tables allow */
#define STATUS_GPUS_MAX 64
#define STATUS_UNHOOKED_MAX 1024

/* Sizes of the text fields: the scheduler's own (protocol.h). */
#define NAME_LEN PROTO_NAME_MAX

struct options {
    const char *nvshare_namespace; /* where the DaemonSet runs */
    const char *selector;          /* its pods' labels */
    const char *node;              /* only this node; NULL: all */
    const char *namespace_;        /* -n: only this namespace's pods */
    bool json;                     /* -o json */
    long timeout_ms;               /* per node */
    long interval_ms;              /* top's refresh; 0: once */
};

struct st_gpu {
    unsigned index;
    char uuid[PROTO_UUID_MAX], mode[16];
    uint64_t memory_total, reserve, running_footprint, tq_ns;
};

struct st_client {
    uint64_t client_id, pid;
    char ns[NAME_LEN], pod[NAME_LEN], pod_uid[PROTO_POD_UID_MAX];
    unsigned gpu;                    /* index */
    char state[16], wait_reason[16]; /* wait_reason "" when not waiting */
    char wait_why[PROTO_TEXT_MAX];
    char priority[16];
    unsigned priority_class, core_limit; /* core_limit 0 or 100: none */
    int load_permille;                   /* -1: not measured yet */
    uint64_t used_ns, budget_ns, held_ns, wait_ns, idle_ns;
    uint64_t mem_quota, resident, parked, footprint, pod_mem_held;
    bool throttled, swapped_out;
};

struct st_unhooked {
    uint64_t pid, used;
    unsigned gpu;
    char origin[16], pod_uid[PROTO_POD_UID_MAX];
    char container_id[PROTO_CONTAINER_ID_MAX];
};

enum node_state { NODE_PENDING, NODE_OK, NODE_FAILED };

/* One node: its scheduler pod, and what its status said. */
struct node {
    char name[NAME_LEN];      /* spec.nodeName */
    char sched_pod[NAME_LEN]; /* the DaemonSet's pod there */
    unsigned port;            /* its metrics port */
    enum node_state state;
    char error[KUBE_ERR_LEN]; /* NODE_FAILED: why, printable */
    char version[64];         /* X-Nvshare-Version */
    uint64_t tq_ns, uptime_ns;
    struct st_gpu *gpus;
    int n_gpus;
    struct st_client *clients;
    int n_clients;
    struct st_unhooked *unhooked;
    int n_unhooked;
};

struct cluster {
    struct node *nodes;
    int n_nodes;
    int max_in_flight; /* the most requests that were open at once */
};

/* kubeconfig.c: k from NVSHARE_API_SERVER or the in-cluster service
 * account (kube_config), else the kubeconfig kubectl would use (path and
 * context: --kubeconfig, --context; NULL for kubectl's), whose namespace
 * goes to ns (NAME_LEN bytes; left as it is where none is named). 0, or -1
 * with err. */
int plugin_kube(struct kube *k, const char *kubeconfig, const char *context,
                char *ns, char *err);
void plugin_kube_free(struct kube *k);

/* fetch.c: the scheduler pods (one per node: o->node's only, if set), then
 * each one's status. 0, or -1 with err when the schedulers could not be
 * listed; a node that fails is NODE_FAILED with its reason. */
int cluster_fetch(const struct kube *k, const struct options *o,
                  struct cluster *c, char *err);
void cluster_free(struct cluster *c);
/* A GET of path on the API server, its JSON body parsed into *doc (for
 * cJSON_Delete). The HTTP status, or -1 with err. */
struct cJSON;
long api_get_json(const struct kube *k, const char *path, struct cJSON **doc,
                  char *err);
/* Explains a refused request in words: who needs which right. */
void explain_status(long status, const char *what, char *err, size_t len);

/* status.c: a node's /status.json (len bytes) into n's records; 0, or -1
 * with n->error saying what was wrong. */
int status_parse(struct node *n, const char *text, size_t len);
void status_free(struct node *n);
/* The GPU of n with that index, or NULL. */
const struct st_gpu *status_gpu(const struct node *n, unsigned index);

/* format.c: small fixed-width renderings for 80 columns. */
/* in, cut to width bytes on a character boundary ('~' marks a cut); out
 * holds width + 1 bytes. */
void fit(char *out, const char *in, size_t width);
void fmt_bytes(uint64_t bytes, char *buf, size_t len); /* "3.0Gi", "0" */
void fmt_ns(uint64_t ns, char *buf, size_t len);       /* "250ms", "12s" */
void fmt_pod(const struct st_client *c, char *buf, size_t len); /* ns/pod */
/* "waiting: memory", "running", ...: what the client does, in a word. */
const char *client_doing(const struct st_client *c);

/* The commands, their arguments checked (main.c); the exit status. */
int cmd_top(const struct kube *k, const struct options *o);
int cmd_why(const struct kube *k, const struct options *o, const char *pod);
int cmd_nodes(const struct kube *k, const struct options *o);

#endif
