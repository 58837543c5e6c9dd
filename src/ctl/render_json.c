/* render_json.c - `nvsharectl status --json`: the snapshot as one JSON
 * document for machines. The field names are a contract (documented with an
 * example in docs/nvsharectl.md): add fields, never rename or remove them,
 * and bump schema_version if a field ever changes meaning. Times are integer
 * nanoseconds, sizes integer bytes; no human-formatted strings. */
#include "ctl.h"
#include "json_out.h"

#define JSON_SCHEMA_VERSION 1

static void gpu_json(struct json_out *j, const struct msg_status_gpu *g)
{
    json_begin_object(j, NULL);
    json_uint(j, "index", g->index);
    json_string(j, "uuid", g->uuid);
    json_string(j, "name", g->name);
    json_uint(j, "memory_total_bytes", g->memory_total);
    if (g->holder_id)
        json_uint(j, "holder_client_id", g->holder_id);
    else
        json_null(j, "holder_client_id");
    json_bool(j, "draining", g->holder_draining);
    json_uint(j, "switches", g->switches);
    json_begin_array(j, "waiting_client_ids");
    for (int i = 0; i < g->n_waiting; i++)
        json_uint(j, NULL, g->waiting[i]);
    json_end_array(j);
    json_end_object(j);
}

static const char *gpu_uuid(const struct ctl_status *st, uint16_t index)
{
    for (int i = 0; i < st->n_gpus; i++)
        if (st->gpus[i].index == index)
            return st->gpus[i].uuid;
    return "";
}

static void client_json(struct json_out *j, const struct ctl_status *st,
                        const struct msg_status_client *c)
{
    json_begin_object(j, NULL);
    json_uint(j, "client_id", c->client_id);
    json_uint(j, "pid", c->pid);
    json_string(j, "namespace", c->pod_namespace);
    json_string(j, "pod", c->pod_name);
    json_string(j, "container", c->container_name);
    json_uint(j, "gpu_index", c->gpu);
    json_string(j, "gpu_uuid", gpu_uuid(st, c->gpu));
    json_string(j, "state", ctl_state_name(c->state));
    json_uint(j, "held_ns", c->held_ns);
    json_uint(j, "wait_ns", c->wait_ns);
    json_uint(j, "grants", c->grants);
    json_uint(j, "last_drain_ns", c->last_drain_ns);
    json_uint(j, "last_preempt_ns", c->last_preempt_ns);
    json_uint(j, "core_limit", c->core_limit);
    json_string(j, "core_limit_source", c->limit_source == LIMIT_RUNTIME ? "runtime"
                : c->limit_source == LIMIT_DECLARED ? "declared" : "none");
    json_uint(j, "budget_ns", c->budget_ns);
    json_uint(j, "used_ns", c->used_ns);
    json_bool(j, "throttled", c->throttled);
    json_uint(j, "mem_quota_bytes", c->mem_quota);
    json_string(j, "mem_quota_source", c->mem_quota_source == LIMIT_RUNTIME ? "runtime"
                : c->mem_quota_source == LIMIT_DECLARED ? "declared" : "none");
    json_uint(j, "mem_allocated_bytes", c->mem_allocated);
    json_uint(j, "pod_mem_held_bytes", c->pod_mem_held);
    json_uint(j, "pod_mem_peak_bytes", c->pod_mem_peak);
    json_uint(j, "pod_mem_refused", c->pod_mem_refused);
    json_end_object(j);
}

void render_json(FILE *out, const struct ctl_status *st)
{
    struct json_out j;

    json_init(&j, out);
    json_begin_object(&j, NULL);
    json_uint(&j, "schema_version", JSON_SCHEMA_VERSION);
    json_begin_object(&j, "node");
    json_uint(&j, "tq_ns", st->node.tq_ns);
    json_uint(&j, "window_ns", st->node.window_ns);
    json_bool(&j, "anti_thrash", st->node.anti_thrash);
    json_uint(&j, "uptime_ns", st->node.uptime_ns);
    json_uint(&j, "gpu_count", st->node.n_gpus);
    json_uint(&j, "client_count", st->node.n_clients);
    json_end_object(&j);
    json_begin_array(&j, "gpus");
    for (int i = 0; i < st->n_gpus; i++)
        gpu_json(&j, &st->gpus[i]);
    json_end_array(&j);
    json_begin_array(&j, "clients");
    for (int i = 0; i < st->n_clients; i++)
        client_json(&j, st, &st->clients[i]);
    json_end_array(&j);
    json_end_object(&j);
}
