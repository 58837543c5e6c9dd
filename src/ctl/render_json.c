/* render_json.c - `nvsharectl status --json`: the snapshot as one JSON
 * document for machines. The field names are a contract (documented with an
 * example in docs/nvsharectl.md): add fields freely; removing one or
 * changing its meaning bumps schema_version. Times are integer nanoseconds,
 * sizes integer bytes; no human-formatted strings. Enums are their names
 * (ctl_*_name), never their wire numbers. */
#include "status_json.h"
#include "json_out.h"
#include "parse.h"

#define JSON_SCHEMA_VERSION                                                    \
    2 /* 2: memory-aware scheduling; the GPU's
                                 holder_client_id and draining gave way to
                                 running_client_ids */

static void swap_json(struct json_out *j, const char *key, uint64_t count,
                      uint64_t bytes, uint64_t total_ns, uint64_t last_ns)
{
    json_begin_object(j, key);
    json_uint(j, "count", count);
    json_uint(j, "bytes", bytes);
    json_uint(j, "total_ns", total_ns);
    json_uint(j, "last_ns", last_ns);
    json_end_object(j);
}

static void gpu_json(struct json_out *j, const struct msg_status_gpu *g)
{
    json_begin_object(j, NULL);
    json_uint(j, "index", g->index);
    json_string(j, "uuid", g->uuid);
    json_string(j, "name", g->name);
    json_uint(j, "memory_total_bytes", g->memory_total);
    json_string(j, "mode", sched_mode_name(g->mode));
    json_uint(j, "reserve_bytes", g->reserve);
    json_uint(j, "running_footprint_bytes", g->running_footprint);
    json_uint(j, "resident_bytes", g->resident);
    json_uint(j, "switch_time_ns", g->switch_time_ns);
    json_bool(j, "switch_time_measured", g->switch_measured);
    json_uint(j, "tq_ns", g->tq_ns);
    json_string(j, "tq_reason", ctl_quantum_reason_name(g->tq_reason));
    json_uint(j, "handover_mean_ns", g->handover_mean_ns);
    json_uint(j, "switches", g->switches);
    json_begin_object(j, "swaps");
    swap_json(j, "out", g->swaps_out, g->swap_out_bytes, g->swap_out_ns,
              g->last_swap_out_ns);
    swap_json(j, "in", g->swaps_in, g->swap_in_bytes, g->swap_in_ns,
              g->last_swap_in_ns);
    json_end_object(j);
    json_begin_array(j, "running_client_ids");
    for (int i = 0; i < g->n_running; i++)
        json_uint(j, NULL, g->running[i]);
    json_end_array(j);
    json_begin_array(j, "waiting");
    for (int i = 0; i < g->n_waiting; i++) {
        json_begin_object(j, NULL);
        json_uint(j, "client_id", g->waiting[i].client_id);
        json_string(j, "reason", ctl_wait_reason_name(g->waiting[i].reason));
        json_end_object(j);
    }
    json_end_array(j);
    json_uint(j, "waiting_truncated", g->truncated_waiting);
    json_begin_array(j, "waiting_client_ids");
    for (int i = 0; i < g->n_waiting; i++)
        json_uint(j, NULL, g->waiting[i].client_id);
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

static void unhooked_json(struct json_out *j, const struct ctl_status *st,
                          const struct msg_status_unhooked *u)
{
    json_begin_object(j, NULL);
    json_uint(j, "pid", u->pid);
    json_uint(j, "gpu_index", u->gpu);
    json_string(j, "gpu_uuid", gpu_uuid(st, u->gpu));
    json_uint(j, "used_bytes", u->used);
    json_uint(j, "seen_ns", u->seen_ns);
    json_string(j, "origin", ctl_origin_name(u->origin));
    json_string(j, "pod_uid", u->pod_uid);
    json_string(j, "qos", u->origin == IDENTITY_POD ? pod_qos_name(u->qos) : "");
    json_string(j, "container_id", u->container_id);
    json_end_object(j);
}

static const char *limit_source_name(uint8_t source)
{
    switch (source) {
    case LIMIT_DECLARED:
        return "declared";
    case LIMIT_RUNTIME:
        return "runtime";
    case LIMIT_ANNOTATION:
        return "annotation";
    case LIMIT_REQUEST:
        return "request";
    }
    return "none";
}

static void client_json(struct json_out *j, const struct ctl_status *st,
                        const struct msg_status_client *c)
{
    char priority[16];

    json_begin_object(j, NULL);
    json_uint(j, "client_id", c->client_id);
    json_uint(j, "pid", c->pid);
    json_string(j, "namespace", c->pod_namespace);
    json_string(j, "pod", c->pod_name);
    json_string(j, "container", c->container_name);
    json_uint(j, "uid", c->uid);
    json_string(j, "pod_source",
                c->pod_source == POD_SOURCE_CGROUP     ? "cgroup"
                : c->pod_source == POD_SOURCE_DECLARED ? "declared"
                                                       : "none");
    json_string(j, "pod_uid", c->pod_uid);
    json_string(j, "container_id", c->container_id);
    json_uint(j, "gpu_index", c->gpu);
    json_string(j, "gpu_uuid", gpu_uuid(st, c->gpu));
    if (c->gang)
        json_uint(j, "gang", c->gang - 1);
    else
        json_null(j, "gang");
    json_string(j, "state", ctl_state_name(c->state));
    json_uint(j, "held_ns", c->held_ns);
    json_uint(j, "wait_ns", c->wait_ns);
    json_uint(j, "grants", c->grants);
    json_uint(j, "last_drain_ns", c->last_drain_ns);
    json_uint(j, "last_preempt_ns", c->last_preempt_ns);
    json_uint(j, "core_limit", c->core_limit);
    json_string(j, "core_limit_source", limit_source_name(c->limit_source));
    json_uint(j, "budget_ns", c->budget_ns);
    json_uint(j, "used_ns", c->used_ns);
    json_bool(j, "throttled", c->throttled);
    json_uint(j, "mem_quota_bytes", c->mem_quota);
    json_string(j, "mem_quota_source", limit_source_name(c->mem_quota_source));
    format_priority(c->priority, priority, sizeof(priority));
    json_string(j, "priority", priority);
    json_uint(j, "priority_class", c->priority);
    json_string(j, "priority_source", limit_source_name(c->priority_source));
    json_uint(j, "min_share_percent", c->min_share);
    json_uint(j, "mem_allocated_bytes", c->mem_allocated);
    json_uint(j, "pod_mem_held_bytes", c->pod_mem_held);
    json_uint(j, "pod_mem_peak_bytes", c->pod_mem_peak);
    json_uint(j, "pod_mem_refused", c->pod_mem_refused);
    json_uint(j, "footprint_bytes", c->footprint);
    json_uint(j, "evictable_bytes", c->evictable);
    json_uint(j, "non_evictable_bytes", c->footprint - c->evictable);
    json_bool(j, "oversubscribed", c->oversubscribed);
    json_bool(j, "swapped_out", c->swapped_out);
    if (c->load_permille == CTL_LOAD_UNMEASURED)
        json_null(j, "load_percent");
    else
        json_decimal(j, "load_percent", c->load_permille, 1);
    if (c->state == CLIENT_WAITING && c->wait_reason != WAIT_NONE)
        json_string(j, "wait_reason", ctl_wait_reason_name(c->wait_reason));
    else
        json_null(j, "wait_reason");
    json_string_or_null(j, "wait_why", c->wait_why);
    json_string_or_null(j, "group", c->group);
    json_bool(j, "idle_swap", c->idle_swap != IDLE_SWAP_OFF);
    json_string(j, "idle_swap_source", limit_source_name(c->idle_swap_source));
    json_uint(j, "resident_bytes", c->resident);
    json_uint(j, "parked_bytes", c->parked);
    json_uint(j, "idle_ns", c->idle_ns);
    json_uint(j, "swap_outs", c->swap_outs);
    json_uint(j, "swap_ins", c->swap_ins);
    json_uint(j, "swap_in_wait_ns", c->swap_in_wait_ns);
    json_end_object(j);
}

/* An operator's or annotation's idle reclaim: "off", "on", "" when unset. */
static const char *idle_swap_name(uint8_t idle_swap)
{
    return idle_swap == IDLE_SWAP_OFF  ? "off"
           : idle_swap == IDLE_SWAP_ON ? "on"
                                       : "";
}

static void pod_json(struct json_out *j, const struct msg_status_pod *p)
{
    json_begin_object(j, NULL);
    json_string(j, "namespace", p->pod_namespace);
    json_string(j, "pod", p->pod_name);
    json_string(j, "pod_uid", p->pod_uid);
    if (p->bound)
        json_uint(j, "owner_uid", p->owner);
    else
        json_null(j, "owner_uid");
    json_uint(j, "core_limit", p->core_limit);
    json_uint(j, "memory_limit_bytes", p->memory_limit);
    json_uint(j, "annotation_core_limit", p->annotation_core_limit);
    json_uint(j, "annotation_memory_limit_bytes", p->annotation_memory_limit);
    json_uint(j, "memory_request_bytes", p->memory_request);
    json_uint(j, "priority_class", p->priority);
    json_uint(j, "annotation_priority_class", p->annotation_priority);
    json_uint(j, "min_share_percent", p->min_share);
    json_string(j, "idle_swap", idle_swap_name(p->idle_swap));
    json_string(j, "annotation_idle_swap",
                idle_swap_name(p->annotation_idle_swap));
    json_begin_array(j, "gpu_limits");
    for (int i = 0; i < p->n_gpu_limits; i++) {
        json_begin_object(j, NULL);
        json_uint(j, "gpu", p->gpu_limits[i].gpu);
        json_uint(j, "core_limit", p->gpu_limits[i].core_limit);
        json_uint(j, "memory_limit_bytes", p->gpu_limits[i].memory_limit);
        json_end_object(j);
    }
    json_end_array(j);
    json_uint(j, "clients", p->clients);
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
    json_uint(&j, "unregistered_connections", st->node.n_pending);
    json_uint(&j, "refused_connections", st->node.refused);
    if (st->node.switch_time_fixed_ns)
        json_uint(&j, "switch_time_fixed_ns", st->node.switch_time_fixed_ns);
    else
        json_null(&j, "switch_time_fixed_ns");
    json_uint(&j, "switch_multiplier", st->node.switch_multiplier);
    json_uint(&j, "reserve_percent", st->node.reserve_percent);
    json_bool(&j, "oversub_default", st->node.oversub_default);
    json_uint(&j, "unhooked_seen", st->node.unhooked_seen);
    json_end_object(&j);
    json_begin_object(&j, "settings");
    for (int i = 0; i < st->n_settings; i++) {
        json_begin_object(&j, st->settings[i].name);
        json_string(&j, "value", st->settings[i].value);
        json_string(&j, "source",
                    ctl_setting_source_name(st->settings[i].source));
        json_end_object(&j);
    }
    json_end_object(&j);
    json_begin_array(&j, "gpus");
    for (int i = 0; i < st->n_gpus; i++)
        gpu_json(&j, &st->gpus[i]);
    json_end_array(&j);
    json_begin_array(&j, "clients");
    for (int i = 0; i < st->n_clients; i++)
        client_json(&j, st, &st->clients[i]);
    json_end_array(&j);
    json_begin_array(&j, "pods");
    for (int i = 0; i < st->n_pods; i++)
        pod_json(&j, &st->pods[i]);
    json_end_array(&j);
    json_begin_array(&j, "unhooked");
    for (int i = 0; i < st->n_unhooked; i++)
        unhooked_json(&j, st, &st->unhooked[i]);
    json_end_array(&j);
    json_end_object(&j);
}
