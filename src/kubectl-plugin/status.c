/* status.c - a node's /status.json into fixed records (plugin.h).
 *
 * The document is render_json.c's (docs/nvsharectl.md); it comes from a
 * node, so nothing in it is trusted: every field read is checked for its
 * type and range, every string for its length and made printable, the
 * counts are capped, and a client's GPU must be one of the node's. The
 * first field that fails names the node's error and the node is shown as
 * answering badly, not half-read. Numbers are doubles in cJSON: exact up
 * to 2^53, which bytes and nanoseconds of a running scheduler stay under. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "plugin.h"
#include "text.h"

#define SCHEMA_VERSION 2 /* of render_json.c */

struct reader {
    struct node *n;
    bool bad;
};

static void bad(struct reader *r, const char *what, const char *key)
{
    if (r->bad)
        return;
    r->bad = true;
    snprintf(r->n->error, sizeof(r->n->error), "bad status: %s %.60s", what, key);
}

static uint64_t u64(struct reader *r, const cJSON *o, const char *key, double max)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > max ||
        v->valuedouble != floor(v->valuedouble)) {
        bad(r, "number", key);
        return 0;
    }
    return (uint64_t)v->valuedouble;
}

#define U64_MAX_DOUBLE 18446744073709549568.0 /* the last double below 2^64 */

static bool boolean(struct reader *r, const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsBool(v))
        bad(r, "boolean", key);
    return cJSON_IsTrue(v);
}

/* A string into buf (len bytes), printable; null is "" where allowed. */
static void str(struct reader *r, const cJSON *o, const char *key, char *buf,
                size_t len, bool nullable)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    buf[0] = '\0';
    if (nullable && cJSON_IsNull(v))
        return;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= len) {
        bad(r, "string", key);
        return;
    }
    text_printable(v->valuestring, buf, len);
}

/* An array of at most max items; its size in *n. */
static const cJSON *array(struct reader *r, const cJSON *o, const char *key,
                          int max, int *n)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);

    *n = 0;
    if (!cJSON_IsArray(a) || (*n = cJSON_GetArraySize(a)) > max) {
        bad(r, "array (or too long)", key);
        *n = 0;
        return NULL;
    }
    return a;
}

const struct st_gpu *status_gpu(const struct node *n, unsigned index)
{
    for (int i = 0; i < n->n_gpus; i++)
        if (n->gpus[i].index == index)
            return &n->gpus[i];
    return NULL;
}

static void read_gpu(struct reader *r, const cJSON *o, struct st_gpu *g)
{
    g->index = (unsigned)u64(r, o, "index", 65535);
    str(r, o, "uuid", g->uuid, sizeof(g->uuid), false);
    str(r, o, "mode", g->mode, sizeof(g->mode), false);
    g->memory_total = u64(r, o, "memory_total_bytes", U64_MAX_DOUBLE);
    g->reserve = u64(r, o, "reserve_bytes", U64_MAX_DOUBLE);
    g->running_footprint = u64(r, o, "running_footprint_bytes", U64_MAX_DOUBLE);
    g->tq_ns = u64(r, o, "tq_ns", U64_MAX_DOUBLE);
}

static void read_client(struct reader *r, const cJSON *o, struct st_client *c)
{
    const cJSON *load = cJSON_GetObjectItemCaseSensitive(o, "load_percent");

    c->client_id = u64(r, o, "client_id", U64_MAX_DOUBLE);
    c->pid = u64(r, o, "pid", 4294967295.0);
    str(r, o, "namespace", c->ns, sizeof(c->ns), false);
    str(r, o, "pod", c->pod, sizeof(c->pod), false);
    str(r, o, "pod_uid", c->pod_uid, sizeof(c->pod_uid), false);
    c->gpu = (unsigned)u64(r, o, "gpu_index", 65535);
    str(r, o, "state", c->state, sizeof(c->state), false);
    str(r, o, "wait_reason", c->wait_reason, sizeof(c->wait_reason), true);
    str(r, o, "wait_why", c->wait_why, sizeof(c->wait_why), true);
    str(r, o, "priority", c->priority, sizeof(c->priority), false);
    c->priority_class = (unsigned)u64(r, o, "priority_class", 255);
    c->core_limit = (unsigned)u64(r, o, "core_limit", 100);
    if (cJSON_IsNull(load))
        c->load_permille = -1;
    else if (cJSON_IsNumber(load) && load->valuedouble >= 0 &&
             load->valuedouble <= 100)
        c->load_permille = (int)lround(load->valuedouble * 10);
    else
        bad(r, "number", "load_percent");
    c->used_ns = u64(r, o, "used_ns", U64_MAX_DOUBLE);
    c->budget_ns = u64(r, o, "budget_ns", U64_MAX_DOUBLE);
    c->held_ns = u64(r, o, "held_ns", U64_MAX_DOUBLE);
    c->wait_ns = u64(r, o, "wait_ns", U64_MAX_DOUBLE);
    c->idle_ns = u64(r, o, "idle_ns", U64_MAX_DOUBLE);
    c->mem_quota = u64(r, o, "mem_quota_bytes", U64_MAX_DOUBLE);
    c->resident = u64(r, o, "resident_bytes", U64_MAX_DOUBLE);
    c->parked = u64(r, o, "parked_bytes", U64_MAX_DOUBLE);
    c->footprint = u64(r, o, "footprint_bytes", U64_MAX_DOUBLE);
    c->pod_mem_held = u64(r, o, "pod_mem_held_bytes", U64_MAX_DOUBLE);
    c->throttled = boolean(r, o, "throttled");
    c->swapped_out = boolean(r, o, "swapped_out");
}

static void read_unhooked(struct reader *r, const cJSON *o, struct st_unhooked *u)
{
    u->pid = u64(r, o, "pid", 4294967295.0);
    u->gpu = (unsigned)u64(r, o, "gpu_index", 65535);
    u->used = u64(r, o, "used_bytes", U64_MAX_DOUBLE);
    str(r, o, "origin", u->origin, sizeof(u->origin), false);
    str(r, o, "pod_uid", u->pod_uid, sizeof(u->pod_uid), false);
    str(r, o, "container_id", u->container_id, sizeof(u->container_id), false);
}

/* Each item of a checked array into a calloc'd table of size items. */
#define READ_ALL(r, doc, key, max, table, count, fn)                           \
    do {                                                                       \
        const cJSON *a_ = array(r, doc, key, max, &(count)), *it_;             \
        int i_ = 0;                                                            \
        if (!((table) = calloc((size_t)(count) + 1, sizeof(*(table))))) {      \
            bad(r, "out of memory for", key);                                  \
            break;                                                             \
        }                                                                      \
        cJSON_ArrayForEach(it_, a_)                                            \
        {                                                                      \
            if (!cJSON_IsObject(it_))                                          \
                bad(r, "item of", key);                                        \
            fn(r, it_, &(table)[i_++]);                                        \
        }                                                                      \
    } while (0)

int status_parse(struct node *n, const char *text, size_t len)
{
    cJSON *doc = cJSON_ParseWithLength(text, len);
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(doc, "node");
    struct reader r = {n, false};
    uint64_t schema;

    if (!cJSON_IsObject(doc) || !cJSON_IsObject(node)) {
        snprintf(n->error, sizeof(n->error), "bad status: not the document");
        cJSON_Delete(doc);
        return -1;
    }
    schema = u64(&r, doc, "schema_version", 1000);
    if (!r.bad && schema != SCHEMA_VERSION) {
        snprintf(n->error, sizeof(n->error),
                 "status schema %u: this kubectl-nvshare reads %d (upgrade it)",
                 (unsigned)schema, SCHEMA_VERSION);
        r.bad = true;
    }
    n->tq_ns = u64(&r, node, "tq_ns", U64_MAX_DOUBLE);
    n->uptime_ns = u64(&r, node, "uptime_ns", U64_MAX_DOUBLE);
    READ_ALL(&r, doc, "gpus", STATUS_GPUS_MAX, n->gpus, n->n_gpus, read_gpu);
    READ_ALL(&r, doc, "clients", STATUS_CLIENTS_MAX, n->clients, n->n_clients,
             read_client);
    READ_ALL(&r, doc, "unhooked", STATUS_UNHOOKED_MAX, n->unhooked,
             n->n_unhooked, read_unhooked);
    for (int i = 0; !r.bad && i < n->n_clients; i++)
        if (!status_gpu(n, n->clients[i].gpu))
            bad(&r, "client on an unknown GPU:", n->clients[i].pod);
    for (int i = 0; !r.bad && i < n->n_unhooked; i++)
        if (!status_gpu(n, n->unhooked[i].gpu))
            bad(&r, "process on an unknown GPU:", "unhooked");
    cJSON_Delete(doc);
    if (r.bad)
        status_free(n);
    return r.bad ? -1 : 0;
}

void status_free(struct node *n)
{
    free(n->gpus);
    free(n->clients);
    free(n->unhooked);
    n->gpus = NULL;
    n->clients = NULL;
    n->unhooked = NULL;
    n->n_gpus = n->n_clients = n->n_unhooked = 0;
}
