/* fetch.c - finds the schedulers and reads their statuses (plugin.h).
 *
 * The route is the API server's pod proxy to each DaemonSet pod's metrics
 * port: the user needs no network path to the nodes and no credentials of
 * theirs, and the API server checks one right, get on pods/proxy in the
 * nvshare namespace, which RBAC can grant alone (docs/kubernetes.md). A
 * Service would reach one pod at random; nodes/proxy reaches kubelet, not
 * the scheduler.
 *
 * One request per node, at most FETCH_IN_FLIGHT open at once from one
 * curl_multi, each with its own timeout and a body cut at FETCH_BODY_MAX:
 * 1,000 nodes cost the API server 32 proxied connections at a time and the
 * plugin at most 32 x 4 MiB. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "plugin.h"
#include "text.h"

#define DEFAULT_PORT 9402 /* where the pod names no "metrics" port */

long api_get_json(const struct kube *k, const char *path, cJSON **doc, char *err)
{
    struct kube_body body = {0};
    long status = kube_request(k, "GET", path, NULL, &body, err);

    *doc = NULL;
    if (status > 0 && body.data &&
        !(*doc = cJSON_ParseWithLength(body.data, body.len))) {
        snprintf(err, KUBE_ERR_LEN, "API server: an answer that is not JSON");
        status = -1;
    }
    kube_body_free(&body);
    return status;
}

void explain_status(long status, const char *what, char *err, size_t len)
{
    if (status == 401)
        snprintf(err, len,
                 "%s: the API server does not know you (401): check your "
                 "kubeconfig's credentials",
                 what);
    else if (status == 403)
        snprintf(err, len,
                 "%s: forbidden (403): you need the nvshare-viewer role "
                 "(docs/kubernetes.md, RBAC)",
                 what);
    else
        snprintf(err, len, "%s: the API server answered HTTP %ld", what, status);
}

/* The pod's "metrics" container port, else the default. */
static unsigned metrics_port(const cJSON *pod)
{
    const cJSON *containers =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
                                         "containers");
    const cJSON *c, *p;

    cJSON_ArrayForEach(c, containers)
    {
        const cJSON *ports = cJSON_GetObjectItemCaseSensitive(c, "ports");

        cJSON_ArrayForEach(p, ports)
        {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
            const cJSON *port =
                cJSON_GetObjectItemCaseSensitive(p, "containerPort");

            if (cJSON_IsString(name) && !strcmp(name->valuestring, "metrics") &&
                cJSON_IsNumber(port) && port->valuedouble >= 1 &&
                port->valuedouble <= 65535)
                return (unsigned)port->valuedouble;
        }
    }
    return DEFAULT_PORT;
}

/* A string field a path of keys down, if it fits len; else NULL. */
static const char *field(const cJSON *o, const char *a, const char *b, size_t len)
{
    const cJSON *s =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a),
                                         b);

    return cJSON_IsString(s) && strlen(s->valuestring) < len ? s->valuestring
                                                             : NULL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct node *)a)->name, ((const struct node *)b)->name);
}

/* Adds a page's scheduler pods, one per node (a second one, as in a
 * rolling update, is left out). */
static int add_pods(struct cluster *c, const cJSON *items, char *err)
{
    const cJSON *pod;

    cJSON_ArrayForEach(pod, items)
    {
        const char *name = field(pod, "metadata", "name", NAME_LEN);
        const char *node = field(pod, "spec", "nodeName", NAME_LEN);
        struct node *n;

        if (!name || !node)
            continue; /* not scheduled yet */
        for (n = c->nodes; n < c->nodes + c->n_nodes; n++)
            if (!strcmp(n->name, node))
                break;
        if (n < c->nodes + c->n_nodes)
            continue;
        if (c->n_nodes == FETCH_NODES_MAX) {
            snprintf(err, KUBE_ERR_LEN, "over %d scheduler pods: refused",
                     FETCH_NODES_MAX);
            return -1;
        }
        n = &c->nodes[c->n_nodes++];
        memset(n, 0, sizeof(*n));
        text_printable(node, n->name, sizeof(n->name));
        text_printable(name, n->sched_pod, sizeof(n->sched_pod));
        n->port = metrics_port(pod);
    }
    return 0;
}

/* Lists the scheduler pods, a page at a time. */
static int list_schedulers(const struct kube *k, const struct options *o,
                           struct cluster *c, char *err)
{
    char path[2048], cont[1024] = "", what[300];
    char *sel = curl_easy_escape(NULL, o->selector, 0);
    char *node = o->node ? curl_easy_escape(NULL, o->node, 0) : NULL;
    int rc = -1;

    if (!(c->nodes = calloc(FETCH_NODES_MAX, sizeof(*c->nodes))) || !sel ||
        (o->node && !node)) {
        snprintf(err, KUBE_ERR_LEN, "out of memory");
        goto out;
    }
    snprintf(what, sizeof(what), "listing the nvshare schedulers (pods of %s)",
             o->nvshare_namespace);
    do {
        cJSON *doc;
        const char *next;
        long status;

        snprintf(path, sizeof(path),
                 "/api/v1/namespaces/%s/pods?labelSelector=%s&limit=%d%s%s%s%s",
                 o->nvshare_namespace, sel, FETCH_LIST_PAGE,
                 node ? "&fieldSelector=spec.nodeName%3D" : "",
                 node ? node : "", cont[0] ? "&continue=" : "", cont);
        status = api_get_json(k, path, &doc, err);
        if (status != 200) {
            if (status > 0)
                explain_status(status, what, err, KUBE_ERR_LEN);
            cJSON_Delete(doc);
            goto out;
        }
        if (add_pods(c, cJSON_GetObjectItemCaseSensitive(doc, "items"), err)) {
            cJSON_Delete(doc);
            goto out;
        }
        next = field(doc, "metadata", "continue", 512);
        cont[0] = '\0';
        if (next && *next) {
            char *e = curl_easy_escape(NULL, next, 0);
            snprintf(cont, sizeof(cont), "%s", e ? e : "");
            curl_free(e);
        }
        cJSON_Delete(doc);
    } while (cont[0]);
    qsort(c->nodes, (size_t)c->n_nodes, sizeof(*c->nodes), by_name);
    rc = 0;
out:
    curl_free(sel);
    curl_free(node);
    return rc;
}

/* One node's request. */
struct xfer {
    struct node *node;
    CURL *h;
    struct curl_slist *headers;
    char *body;
    size_t len;
    bool too_big;
};

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
    struct xfer *x = userdata;
    size_t add = size * n;
    char *grown;

    if (add > FETCH_BODY_MAX - x->len) {
        x->too_big = true;
        return 0; /* aborts the transfer */
    }
    if (!(grown = realloc(x->body, x->len + add + 1)))
        return 0;
    memcpy(grown + x->len, data, add);
    x->body = grown;
    x->len += add;
    x->body[x->len] = '\0';
    return add;
}

static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
    static const char name[] = "x-nvshare-version:";
    struct xfer *x = userdata;
    size_t len = size * n, skip = sizeof(name) - 1;
    char value[64];

    if (len > skip && len - skip < sizeof(value) &&
        !strncasecmp(data, name, skip)) {
        memcpy(value, data + skip, len - skip);
        value[len - skip] = '\0';
        value[strcspn(value, "\r\n")] = '\0';
        text_printable(value + strspn(value, " "), x->node->version,
                       sizeof(x->node->version));
    }
    return len;
}

static void node_failed(struct node *n, const char *fmt, const char *detail)
{
    char text[sizeof(n->error) + 64];

    snprintf(text, sizeof(text), fmt, detail);
    text[sizeof(n->error) - 1] = '\0';
    text_printable(text, n->error, sizeof(n->error));
    n->state = NODE_FAILED;
}

/* The API server's words for a failed proxy ("no endpoints", "connection
 * refused"), from its Status. */
static void proxy_failed(struct node *n, long status, const char *body, size_t len)
{
    cJSON *doc = cJSON_ParseWithLength(body, len);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(doc, "message");
    char what[80];

    if (status == 401 || status == 403) {
        explain_status(status, "reading the scheduler", n->error,
                       sizeof(n->error));
        n->state = NODE_FAILED;
    } else if (cJSON_IsString(msg)) {
        snprintf(what, sizeof(what), "HTTP %ld: %%.140s", status);
        node_failed(n, what, msg->valuestring);
    } else {
        snprintf(what, sizeof(what), "HTTP %ld%%s", status);
        node_failed(n, what, "");
    }
    cJSON_Delete(doc);
}

static void finish(struct xfer *x, CURLcode rc)
{
    struct node *n = x->node;
    long status = 0;

    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
    if (x->too_big)
        node_failed(n, "an answer over %s: refused", "4 MiB");
    else if (rc != CURLE_OK)
        node_failed(n, "no answer: %s", curl_easy_strerror(rc));
    else if (status != 200)
        proxy_failed(n, status, x->body ? x->body : "", x->len);
    else if (status_parse(n, x->body ? x->body : "", x->len) == 0)
        n->state = NODE_OK;
    else
        n->state = NODE_FAILED;
}

static int start(CURLM *m, const struct kube *k, const struct options *o,
                 struct xfer *x)
{
    char path[1024], err[KUBE_ERR_LEN];

    snprintf(path, sizeof(path),
             "/api/v1/namespaces/%s/pods/%s:%u/proxy/status.json",
             o->nvshare_namespace, x->node->sched_pod, x->node->port);
    if (!(x->h = kube_handle(k, path, &x->headers, err))) {
        node_failed(x->node, "%s", err);
        return -1;
    }
    curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, o->timeout_ms);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    if (curl_multi_add_handle(m, x->h) != CURLM_OK) {
        node_failed(x->node, "%s", "cannot start a request");
        return -1;
    }
    return 0;
}

static void done(CURLM *m, struct xfer *x)
{
    curl_multi_remove_handle(m, x->h);
    curl_easy_cleanup(x->h);
    curl_slist_free_all(x->headers);
    free(x->body);
    memset(x, 0, sizeof(*x));
}

static void fetch_statuses(const struct kube *k, const struct options *o,
                           struct cluster *c)
{
    CURLM *m = curl_multi_init();
    struct xfer *xs = calloc(FETCH_IN_FLIGHT, sizeof(*xs));
    int next = 0, open = 0;

    if (!m || !xs) {
        for (int i = 0; i < c->n_nodes; i++)
            node_failed(&c->nodes[i], "%s", "out of memory");
        goto out;
    }
    curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)FETCH_IN_FLIGHT);
    while (next < c->n_nodes || open) {
        CURLMsg *msg;
        int running, left;

        for (struct xfer *x = xs; x < xs + FETCH_IN_FLIGHT && next < c->n_nodes;
             x++) {
            if (x->node)
                continue;
            x->node = &c->nodes[next++];
            if (start(m, k, o, x) == 0)
                open++;
            else
                done(m, x);
        }
        if (open > c->max_in_flight)
            c->max_in_flight = open;
        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        while ((msg = curl_multi_info_read(m, &left))) {
            struct xfer *x;

            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            finish(x, msg->data.result);
            done(m, x);
            open--;
        }
        if (open && curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK)
            break;
    }
out:
    for (int i = 0; xs && i < FETCH_IN_FLIGHT; i++)
        if (xs[i].node) {
            node_failed(xs[i].node, "%s", "the requests failed");
            done(m, &xs[i]);
        }
    free(xs);
    curl_multi_cleanup(m);
}

int cluster_fetch(const struct kube *k, const struct options *o,
                  struct cluster *c, char *err)
{
    memset(c, 0, sizeof(*c));
    if (list_schedulers(k, o, c, err))
        return -1;
    fetch_statuses(k, o, c);
    return 0;
}

void cluster_free(struct cluster *c)
{
    for (int i = 0; i < c->n_nodes; i++)
        status_free(&c->nodes[i]);
    free(c->nodes);
    memset(c, 0, sizeof(*c));
}
