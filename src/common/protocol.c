/* protocol.c - explicit encoders and decoders for every message in
 * protocol.h. Each message has one put_ and one get_ function listing its
 * fields in wire order; keeping the two next to each other is what keeps
 * them in agreement. */
#include "protocol.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct writer {
    uint8_t *p;
    size_t cap, len;
    int err;
};

struct reader {
    const uint8_t *p;
    size_t len, pos;
    int err;
};

static void put_bytes(struct writer *w, const void *src, size_t n)
{
    if (w->err)
        return;
    if (w->cap - w->len < n) {
        w->err = PROTO_E_SPACE;
        return;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void put_uint(struct writer *w, uint64_t v, int bytes)
{
    uint8_t le[8];

    for (int i = 0; i < bytes; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    put_bytes(w, le, (size_t)bytes);
}

static void put_u8(struct writer *w, uint8_t v) { put_uint(w, v, 1); }
static void put_u16(struct writer *w, uint16_t v) { put_uint(w, v, 2); }
static void put_u32(struct writer *w, uint32_t v) { put_uint(w, v, 4); }
static void put_u64(struct writer *w, uint64_t v) { put_uint(w, v, 8); }

static void put_str(struct writer *w, const char *s, size_t max)
{
    size_t n = strnlen(s, max);

    if (n >= max) { /* the decoder could not hold it with its NUL */
        w->err = PROTO_E_FIELD;
        return;
    }
    put_u16(w, (uint16_t)n);
    put_bytes(w, s, n);
}

static uint64_t get_uint(struct reader *r, int bytes)
{
    uint64_t v = 0;

    if (r->err)
        return 0;
    if (r->len - r->pos < (size_t)bytes) {
        r->err = PROTO_E_SHORT;
        return 0;
    }
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
    r->pos += (size_t)bytes;
    return v;
}

static uint8_t get_u8(struct reader *r) { return (uint8_t)get_uint(r, 1); }
static uint16_t get_u16(struct reader *r) { return (uint16_t)get_uint(r, 2); }
static uint32_t get_u32(struct reader *r) { return (uint32_t)get_uint(r, 4); }
static uint64_t get_u64(struct reader *r) { return get_uint(r, 8); }

static void get_str(struct reader *r, char *dst, size_t max)
{
    size_t n = get_u16(r);

    dst[0] = '\0';
    if (r->err)
        return;
    if (n >= max) {
        r->err = PROTO_E_FIELD;
        return;
    }
    if (r->len - r->pos < n) {
        r->err = PROTO_E_SHORT;
        return;
    }
    memcpy(dst, r->p + r->pos, n);
    dst[n] = '\0';
    if (strlen(dst) != n) /* embedded NUL */
        r->err = PROTO_E_FIELD;
    r->pos += n;
}

static uint16_t get_count(struct reader *r, uint16_t max)
{
    uint16_t n = get_u16(r);

    if (n > max && !r->err)
        r->err = PROTO_E_FIELD;
    return r->err ? 0 : n;
}

/* ---- one put_/get_ pair per payload ---------------------------------- */

static void put_register(struct writer *w, const struct msg_register *m)
{
    if (m->core_limit > 100)
        w->err = PROTO_E_FIELD;
    put_u32(w, m->pid);
    put_str(w, m->pod_namespace, sizeof(m->pod_namespace));
    put_str(w, m->pod_name, sizeof(m->pod_name));
    put_str(w, m->container_name, sizeof(m->container_name));
    put_u64(w, m->memory_limit);
    put_u8(w, m->core_limit);
    if (m->oversub > OVERSUB_NODE_DEFAULT)
        w->err = PROTO_E_FIELD;
    put_u8(w, m->oversub);
    if (m->n_gpus > PROTO_MAX_GPUS) {
        w->err = PROTO_E_FIELD;
        return;
    }
    put_u16(w, m->n_gpus);
    for (int i = 0; i < m->n_gpus; i++)
        put_str(w, m->gpu_uuids[i], sizeof(m->gpu_uuids[i]));
}

static void get_register(struct reader *r, struct msg_register *m)
{
    m->pid = get_u32(r);
    get_str(r, m->pod_namespace, sizeof(m->pod_namespace));
    get_str(r, m->pod_name, sizeof(m->pod_name));
    get_str(r, m->container_name, sizeof(m->container_name));
    m->memory_limit = get_u64(r);
    m->core_limit = get_u8(r);
    m->oversub = get_u8(r);
    if ((m->core_limit > 100 || m->oversub > OVERSUB_NODE_DEFAULT) && !r->err)
        r->err = PROTO_E_FIELD;
    m->n_gpus = get_count(r, PROTO_MAX_GPUS);
    for (int i = 0; i < m->n_gpus; i++)
        get_str(r, m->gpu_uuids[i], sizeof(m->gpu_uuids[i]));
}

static void put_register_ok(struct writer *w, const struct msg_register_ok *m)
{
    put_u64(w, m->client_id);
    put_u8(w, m->scheduling_on);
    put_u8(w, m->oversub_default);
    if (m->n_gpus > PROTO_MAX_GPUS) {
        w->err = PROTO_E_FIELD;
        return;
    }
    put_u16(w, m->n_gpus);
    for (int i = 0; i < m->n_gpus; i++)
        put_u8(w, m->gpu_known[i]);
}

static void get_register_ok(struct reader *r, struct msg_register_ok *m)
{
    m->client_id = get_u64(r);
    m->scheduling_on = get_u8(r);
    m->oversub_default = get_u8(r);
    m->n_gpus = get_count(r, PROTO_MAX_GPUS);
    for (int i = 0; i < m->n_gpus; i++)
        m->gpu_known[i] = get_u8(r);
}

static void put_lock(struct writer *w, const struct msg_lock *m)
{
    put_u8(w, m->gpu);
    put_u32(w, m->lease);
    put_u64(w, m->drain_ns);
}

static void get_lock(struct reader *r, struct msg_lock *m)
{
    m->gpu = get_u8(r);
    m->lease = get_u32(r);
    m->drain_ns = get_u64(r);
}

static void put_mem(struct writer *w, const struct msg_mem *m)
{
    put_u8(w, m->gpu);
    put_u32(w, m->seq);
    put_u64(w, m->bytes);
    put_u64(w, m->extra);
    if (m->evictable > m->allocated)
        w->err = PROTO_E_FIELD;
    put_u64(w, m->allocated);
    put_u64(w, m->evictable);
    put_u64(w, m->quota);
    put_u64(w, m->pod_held);
}

static void get_mem(struct reader *r, struct msg_mem *m)
{
    m->gpu = get_u8(r);
    m->seq = get_u32(r);
    m->bytes = get_u64(r);
    m->extra = get_u64(r);
    m->allocated = get_u64(r);
    m->evictable = get_u64(r);
    if (m->evictable > m->allocated && !r->err)
        r->err = PROTO_E_FIELD;
    m->quota = get_u64(r);
    m->pod_held = get_u64(r);
}

static void put_wait(struct writer *w, const struct msg_wait *m)
{
    put_u8(w, m->gpu);
    put_u64(w, m->need);
    put_u64(w, m->free);
    put_u64(w, m->limit);
    put_u64(w, m->wait_ns);
}

static void get_wait(struct reader *r, struct msg_wait *m)
{
    m->gpu = get_u8(r);
    m->need = get_u64(r);
    m->free = get_u64(r);
    m->limit = get_u64(r);
    m->wait_ns = get_u64(r);
}

static void put_swap(struct writer *w, const struct msg_swap *m)
{
    if (m->direction > SWAP_IN)
        w->err = PROTO_E_FIELD;
    put_u8(w, m->gpu);
    put_u8(w, m->direction);
    put_u64(w, m->bytes);
    put_u64(w, m->duration_ns);
}

static void get_swap(struct reader *r, struct msg_swap *m)
{
    m->gpu = get_u8(r);
    m->direction = get_u8(r);
    m->bytes = get_u64(r);
    m->duration_ns = get_u64(r);
    if (m->direction > SWAP_IN && !r->err)
        r->err = PROTO_E_FIELD;
}

static void put_load(struct writer *w, const struct msg_load *m)
{
    if (m->busy_permille > 1000)
        w->err = PROTO_E_FIELD;
    put_u8(w, m->gpu);
    put_u16(w, m->busy_permille);
    put_u64(w, m->span_ns);
}

static void get_load(struct reader *r, struct msg_load *m)
{
    m->gpu = get_u8(r);
    m->busy_permille = get_u16(r);
    m->span_ns = get_u64(r);
    if (m->busy_permille > 1000 && !r->err)
        r->err = PROTO_E_FIELD;
}

static void put_ctl_set(struct writer *w, const struct msg_ctl_set *m)
{
    put_u16(w, m->key);
    put_u64(w, m->value);
    put_str(w, m->target, sizeof(m->target));
}

static void get_ctl_set(struct reader *r, struct msg_ctl_set *m)
{
    m->key = get_u16(r);
    m->value = get_u64(r);
    get_str(r, m->target, sizeof(m->target));
}

static void put_ctl_reply(struct writer *w, const struct msg_ctl_reply *m)
{
    put_u32(w, (uint32_t)m->status);
    put_str(w, m->text, sizeof(m->text));
}

static void get_ctl_reply(struct reader *r, struct msg_ctl_reply *m)
{
    m->status = (int32_t)get_u32(r);
    get_str(r, m->text, sizeof(m->text));
}

static void put_status_node(struct writer *w, const struct msg_status_node *m)
{
    put_u64(w, m->tq_ns);
    put_u64(w, m->window_ns);
    put_u8(w, m->anti_thrash);
    put_u16(w, m->n_gpus);
    put_u16(w, m->n_clients);
    put_u64(w, m->uptime_ns);
    put_u64(w, m->switch_time_fixed_ns);
    put_u16(w, m->switch_multiplier);
    put_u8(w, m->reserve_percent);
    put_u8(w, m->oversub_default);
}

static void get_status_node(struct reader *r, struct msg_status_node *m)
{
    m->tq_ns = get_u64(r);
    m->window_ns = get_u64(r);
    m->anti_thrash = get_u8(r);
    m->n_gpus = get_u16(r);
    m->n_clients = get_u16(r);
    m->uptime_ns = get_u64(r);
    m->switch_time_fixed_ns = get_u64(r);
    m->switch_multiplier = get_u16(r);
    m->reserve_percent = get_u8(r);
    m->oversub_default = get_u8(r);
}

static void put_status_gpu(struct writer *w, const struct msg_status_gpu *m)
{
    put_u16(w, m->index);
    put_str(w, m->uuid, sizeof(m->uuid));
    put_str(w, m->name, sizeof(m->name));
    put_u64(w, m->memory_total);
    if (m->mode > SCHED_MODE_AUTO)
        w->err = PROTO_E_FIELD;
    put_u8(w, m->mode);
    put_u64(w, m->reserve);
    put_u64(w, m->running_footprint);
    put_u64(w, m->resident);
    put_u64(w, m->switch_time_ns);
    put_u8(w, m->switch_measured);
    put_u64(w, m->switches);
    put_u64(w, m->swaps_out);
    put_u64(w, m->swaps_in);
    put_u64(w, m->swap_out_bytes);
    put_u64(w, m->swap_in_bytes);
    put_u64(w, m->swap_out_ns);
    put_u64(w, m->swap_in_ns);
    put_u64(w, m->last_swap_out_ns);
    put_u64(w, m->last_swap_in_ns);
    if (m->n_running > PROTO_MAX_WAITERS || m->n_waiting > PROTO_MAX_WAITERS) {
        w->err = PROTO_E_FIELD;
        return;
    }
    put_u16(w, m->n_running);
    for (int i = 0; i < m->n_running; i++)
        put_u64(w, m->running[i]);
    put_u16(w, m->n_waiting);
    put_u32(w, m->truncated_waiting);
    for (int i = 0; i < m->n_waiting; i++) {
        if (m->waiting[i].reason > WAIT_THROTTLED)
            w->err = PROTO_E_FIELD;
        put_u64(w, m->waiting[i].client_id);
        put_u8(w, m->waiting[i].reason);
    }
}

static void get_status_gpu(struct reader *r, struct msg_status_gpu *m)
{
    m->index = get_u16(r);
    get_str(r, m->uuid, sizeof(m->uuid));
    get_str(r, m->name, sizeof(m->name));
    m->memory_total = get_u64(r);
    m->mode = get_u8(r);
    if (m->mode > SCHED_MODE_AUTO && !r->err)
        r->err = PROTO_E_FIELD;
    m->reserve = get_u64(r);
    m->running_footprint = get_u64(r);
    m->resident = get_u64(r);
    m->switch_time_ns = get_u64(r);
    m->switch_measured = get_u8(r);
    m->switches = get_u64(r);
    m->swaps_out = get_u64(r);
    m->swaps_in = get_u64(r);
    m->swap_out_bytes = get_u64(r);
    m->swap_in_bytes = get_u64(r);
    m->swap_out_ns = get_u64(r);
    m->swap_in_ns = get_u64(r);
    m->last_swap_out_ns = get_u64(r);
    m->last_swap_in_ns = get_u64(r);
    m->n_running = get_count(r, PROTO_MAX_WAITERS);
    for (int i = 0; i < m->n_running; i++)
        m->running[i] = get_u64(r);
    m->n_waiting = get_count(r, PROTO_MAX_WAITERS);
    m->truncated_waiting = get_u32(r);
    for (int i = 0; i < m->n_waiting; i++) {
        m->waiting[i].client_id = get_u64(r);
        m->waiting[i].reason = get_u8(r);
        if (m->waiting[i].reason > WAIT_THROTTLED && !r->err)
            r->err = PROTO_E_FIELD;
    }
}

static void put_status_client(struct writer *w,
                              const struct msg_status_client *m)
{
    put_u64(w, m->client_id);
    put_u32(w, m->pid);
    put_str(w, m->pod_namespace, sizeof(m->pod_namespace));
    put_str(w, m->pod_name, sizeof(m->pod_name));
    put_str(w, m->container_name, sizeof(m->container_name));
    if (m->state > CLIENT_DRAINING || m->core_limit > 100 ||
        m->limit_source > LIMIT_RUNTIME || m->mem_quota_source > LIMIT_RUNTIME)
        w->err = PROTO_E_FIELD;
    put_u16(w, m->gpu);
    put_u8(w, m->state);
    put_u64(w, m->held_ns);
    put_u64(w, m->wait_ns);
    put_u64(w, m->grants);
    put_u64(w, m->last_drain_ns);
    put_u64(w, m->last_preempt_ns);
    put_u8(w, m->core_limit);
    put_u8(w, m->limit_source);
    put_u64(w, m->budget_ns);
    put_u64(w, m->used_ns);
    put_u8(w, m->throttled);
    put_u64(w, m->mem_quota);
    put_u8(w, m->mem_quota_source);
    put_u64(w, m->mem_allocated);
    put_u64(w, m->pod_mem_held);
    put_u64(w, m->pod_mem_peak);
    put_u64(w, m->pod_mem_refused);
    if (m->evictable > m->footprint)
        w->err = PROTO_E_FIELD;
    put_u64(w, m->footprint);
    put_u64(w, m->evictable);
    put_u8(w, m->oversubscribed);
    put_u8(w, m->swapped_out);
    put_u16(w, m->load_permille);
    if (m->wait_reason > WAIT_THROTTLED)
        w->err = PROTO_E_FIELD;
    put_u8(w, m->wait_reason);
}

static void get_status_client(struct reader *r, struct msg_status_client *m)
{
    m->client_id = get_u64(r);
    m->pid = get_u32(r);
    get_str(r, m->pod_namespace, sizeof(m->pod_namespace));
    get_str(r, m->pod_name, sizeof(m->pod_name));
    get_str(r, m->container_name, sizeof(m->container_name));
    m->gpu = get_u16(r);
    m->state = get_u8(r);
    if (m->state > CLIENT_DRAINING && !r->err)
        r->err = PROTO_E_FIELD;
    m->held_ns = get_u64(r);
    m->wait_ns = get_u64(r);
    m->grants = get_u64(r);
    m->last_drain_ns = get_u64(r);
    m->last_preempt_ns = get_u64(r);
    m->core_limit = get_u8(r);
    m->limit_source = get_u8(r);
    m->budget_ns = get_u64(r);
    m->used_ns = get_u64(r);
    m->throttled = get_u8(r);
    m->mem_quota = get_u64(r);
    m->mem_quota_source = get_u8(r);
    m->mem_allocated = get_u64(r);
    m->pod_mem_held = get_u64(r);
    m->pod_mem_peak = get_u64(r);
    m->pod_mem_refused = get_u64(r);
    m->footprint = get_u64(r);
    m->evictable = get_u64(r);
    if (m->evictable > m->footprint && !r->err)
        r->err = PROTO_E_FIELD;
    m->oversubscribed = get_u8(r);
    m->swapped_out = get_u8(r);
    m->load_permille = get_u16(r);
    m->wait_reason = get_u8(r);
    if (m->wait_reason > WAIT_THROTTLED && !r->err)
        r->err = PROTO_E_FIELD;
    if ((m->core_limit > 100 || m->limit_source > LIMIT_RUNTIME ||
         m->mem_quota_source > LIMIT_RUNTIME) && !r->err)
        r->err = PROTO_E_FIELD;
}

/* ---- dispatch --------------------------------------------------------- */

static const char *const type_names[] = {
    [MSG_REGISTER] = "REGISTER",
    [MSG_REGISTER_OK] = "REGISTER_OK",
    [MSG_SCHED_ON] = "SCHED_ON",
    [MSG_SCHED_OFF] = "SCHED_OFF",
    [MSG_REQ_LOCK] = "REQ_LOCK",
    [MSG_LOCK_OK] = "LOCK_OK",
    [MSG_DROP_LOCK] = "DROP_LOCK",
    [MSG_LOCK_RELEASED] = "LOCK_RELEASED",
    [MSG_LOCK_IN_USE] = "LOCK_IN_USE",
    [MSG_MEM_UPDATE] = "MEM_UPDATE",
    [MSG_WAIT_FOR_MEM] = "WAIT_FOR_MEM",
    [MSG_MEM_AVAILABLE] = "MEM_AVAILABLE",
    [MSG_UPDATE_LIMIT] = "UPDATE_LIMIT",
    [MSG_UPDATE_CORE_LIMIT] = "UPDATE_CORE_LIMIT",
    [MSG_MEM_RESERVE] = "MEM_RESERVE",
    [MSG_MEM_GRANT] = "MEM_GRANT",
    [MSG_MEM_RETURN] = "MEM_RETURN",
    [MSG_MEM_RECLAIM] = "MEM_RECLAIM",
    [MSG_EVICT] = "EVICT",
    [MSG_SWAPPED] = "SWAPPED",
    [MSG_LOAD] = "LOAD",
    [MSG_PREPARE_SWAP] = "PREPARE_SWAP",
    [MSG_CTL_STATUS] = "CTL_STATUS",
    [MSG_CTL_SET] = "CTL_SET",
    [MSG_CTL_REPLY] = "CTL_REPLY",
    [MSG_CTL_STATUS_NODE] = "CTL_STATUS_NODE",
    [MSG_CTL_STATUS_GPU] = "CTL_STATUS_GPU",
    [MSG_CTL_STATUS_CLIENT] = "CTL_STATUS_CLIENT",
    [MSG_CTL_STATUS_END] = "CTL_STATUS_END",
};

const char *msg_type_name(uint16_t type)
{
    if (type < sizeof(type_names) / sizeof(type_names[0]) && type_names[type])
        return type_names[type];
    return "UNKNOWN";
}

const char *proto_strerror(int err)
{
    switch (err) {
    case PROTO_OK: return "ok";
    case PROTO_E_SHORT: return "truncated message";
    case PROTO_E_VERSION: return "unsupported protocol version";
    case PROTO_E_TYPE: return "unknown message type";
    case PROTO_E_TRAILING: return "trailing bytes after message";
    case PROTO_E_FIELD: return "field out of range";
    case PROTO_E_SPACE: return "message too large";
    case PROTO_E_IO: return "connection closed";
    case PROTO_E_TIMEOUT: return "timed out";
    }
    return "unknown error";
}

int msg_encode(const struct msg *m, uint8_t *buf, size_t cap)
{
    struct writer w = {.p = buf, .cap = cap};

    put_u32(&w, 0); /* length, patched below */
    put_u16(&w, PROTO_VERSION);
    put_u16(&w, m->type);
    switch (m->type) {
    case MSG_REGISTER: put_register(&w, &m->u.reg); break;
    case MSG_REGISTER_OK: put_register_ok(&w, &m->u.reg_ok); break;
    case MSG_REQ_LOCK:
    case MSG_LOCK_OK:
    case MSG_DROP_LOCK:
    case MSG_LOCK_RELEASED:
    case MSG_LOCK_IN_USE: put_lock(&w, &m->u.lock); break;
    case MSG_MEM_UPDATE:
    case MSG_UPDATE_LIMIT:
    case MSG_MEM_RESERVE:
    case MSG_MEM_GRANT:
    case MSG_MEM_RETURN:
    case MSG_MEM_RECLAIM: put_mem(&w, &m->u.mem); break;
    case MSG_WAIT_FOR_MEM:
    case MSG_MEM_AVAILABLE: put_wait(&w, &m->u.wait); break;
    case MSG_EVICT:
    case MSG_PREPARE_SWAP:
    case MSG_SWAPPED: put_swap(&w, &m->u.swap); break;
    case MSG_LOAD: put_load(&w, &m->u.load); break;
    case MSG_CTL_SET: put_ctl_set(&w, &m->u.set); break;
    case MSG_CTL_REPLY: put_ctl_reply(&w, &m->u.reply); break;
    case MSG_CTL_STATUS_NODE: put_status_node(&w, &m->u.node); break;
    case MSG_CTL_STATUS_GPU: put_status_gpu(&w, &m->u.gpu); break;
    case MSG_CTL_STATUS_CLIENT: put_status_client(&w, &m->u.client); break;
    case MSG_SCHED_ON:
    case MSG_SCHED_OFF:
    case MSG_CTL_STATUS:
    case MSG_CTL_STATUS_END: break;
    default: return PROTO_E_TYPE;
    }
    if (w.err)
        return w.err;
    if (w.len - 4 > PROTO_MAX_FRAME)
        return PROTO_E_SPACE;
    uint32_t body = (uint32_t)(w.len - 4);
    for (int i = 0; i < 4; i++)
        buf[i] = (uint8_t)(body >> (8 * i));
    return (int)w.len;
}

int msg_decode(const uint8_t *body, size_t len, struct msg *out)
{
    struct reader r = {.p = body, .len = len};
    uint16_t version = get_u16(&r);

    out->type = get_u16(&r);
    if (r.err)
        return r.err;
    if (version != PROTO_VERSION)
        return PROTO_E_VERSION;
    switch (out->type) {
    case MSG_REGISTER: get_register(&r, &out->u.reg); break;
    case MSG_REGISTER_OK: get_register_ok(&r, &out->u.reg_ok); break;
    case MSG_REQ_LOCK:
    case MSG_LOCK_OK:
    case MSG_DROP_LOCK:
    case MSG_LOCK_RELEASED:
    case MSG_LOCK_IN_USE: get_lock(&r, &out->u.lock); break;
    case MSG_MEM_UPDATE:
    case MSG_UPDATE_LIMIT:
    case MSG_MEM_RESERVE:
    case MSG_MEM_GRANT:
    case MSG_MEM_RETURN:
    case MSG_MEM_RECLAIM: get_mem(&r, &out->u.mem); break;
    case MSG_WAIT_FOR_MEM:
    case MSG_MEM_AVAILABLE: get_wait(&r, &out->u.wait); break;
    case MSG_EVICT:
    case MSG_PREPARE_SWAP:
    case MSG_SWAPPED: get_swap(&r, &out->u.swap); break;
    case MSG_LOAD: get_load(&r, &out->u.load); break;
    case MSG_CTL_SET: get_ctl_set(&r, &out->u.set); break;
    case MSG_CTL_REPLY: get_ctl_reply(&r, &out->u.reply); break;
    case MSG_CTL_STATUS_NODE: get_status_node(&r, &out->u.node); break;
    case MSG_CTL_STATUS_GPU: get_status_gpu(&r, &out->u.gpu); break;
    case MSG_CTL_STATUS_CLIENT: get_status_client(&r, &out->u.client); break;
    case MSG_SCHED_ON:
    case MSG_SCHED_OFF:
    case MSG_CTL_STATUS:
    case MSG_CTL_STATUS_END: break;
    default: return PROTO_E_TYPE;
    }
    if (r.err)
        return r.err;
    return r.pos == r.len ? PROTO_OK : PROTO_E_TRAILING;
}

/* ---- sockets ------------------------------------------------------------ */

static int send_all(int fd, const uint8_t *buf, size_t len);

/* Lock messages are sent from application threads, whose stacks may be
 * small: frames are encoded on a small stack buffer and only the rare large
 * one (registration, status records) goes to the heap. */
int msg_send(int fd, const struct msg *m)
{
    uint8_t small[512];
    int len = msg_encode(m, small, sizeof(small));

    if (len != PROTO_E_SPACE)
        return len < 0 ? len : send_all(fd, small, (size_t)len);
    uint8_t *big = malloc(PROTO_MAX_FRAME + 4);
    if (!big)
        return PROTO_E_SPACE;
    len = msg_encode(m, big, PROTO_MAX_FRAME + 4);
    int rc = len < 0 ? len : send_all(fd, big, (size_t)len);
    free(big);
    return rc;
}

static int send_all(int fd, const uint8_t *buf, size_t len)
{
    size_t off = 0;

    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, 1000) <= 0)
                return PROTO_E_IO;
            continue;
        }
        if (n <= 0)
            return PROTO_E_IO;
        off += (size_t)n;
    }
    return PROTO_OK;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads exactly n bytes before the deadline (-1: none). */
static int recv_exact(int fd, uint8_t *dst, size_t n, int64_t deadline)
{
    size_t off = 0;

    while (off < n) {
        int wait = -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            wait = left > 0 ? (int)left : 0; /* 0: take what is queued */
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(&p, 1, wait);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0)
            return PROTO_E_TIMEOUT;
        if (rc < 0)
            return PROTO_E_IO;
        ssize_t got = recv(fd, dst + off, n - off, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0)
            return PROTO_E_IO;
        off += (size_t)got;
    }
    return PROTO_OK;
}

int msg_recv(int fd, struct msg *out, int timeout_ms)
{
    uint8_t header[4], *body;
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    uint32_t len = 0;
    int rc;

    rc = recv_exact(fd, header, 4, deadline);
    if (rc)
        return rc;
    for (int i = 0; i < 4; i++)
        len |= (uint32_t)header[i] << (8 * i);
    if (len > PROTO_MAX_FRAME)
        return PROTO_E_SPACE;
    body = malloc(len ? len : 1);
    if (!body)
        return PROTO_E_SPACE;
    rc = recv_exact(fd, body, len, deadline);
    if (rc == 0)
        rc = msg_decode(body, len, out);
    free(body);
    return rc;
}

int frame_reader_fill(struct frame_reader *r, int fd)
{
    for (;;) {
        ssize_t n = recv(fd, r->buf + r->len, sizeof(r->buf) - r->len,
                         MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return PROTO_E_IO;
        r->len += (size_t)n;
        return 1;
    }
}

int frame_reader_next(struct frame_reader *r, struct msg *out)
{
    uint32_t len = 0;
    int rc;

    if (r->len < 4)
        return 0;
    for (int i = 0; i < 4; i++)
        len |= (uint32_t)r->buf[i] << (8 * i);
    if (len > PROTO_MAX_FRAME)
        return PROTO_E_SPACE;
    if (r->len < 4 + (size_t)len)
        return 0;
    rc = msg_decode(r->buf + 4, len, out);
    r->len -= 4 + (size_t)len;
    memmove(r->buf, r->buf + 4 + len, r->len);
    return rc ? rc : 1;
}
