/* clients_memory.c - a client's memory requests and reports (MEM_RESERVE,
 * MEM_RETURN, MEM_UPDATE), checked against oversubscription and the bounds
 * and handed to the quota arbiter. */
#include "clients_internal.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "scheduler.h"

/* Limits of oversubscription: a client's memory must fit on the GPU by
 * itself (memory that can never be resident all at once would page-fault
 * forever), and what all clients of the GPU hold together stays within
 * NVSHARE_OVERSUB_RATIO x capacity, which bounds the host memory that
 * swapped-out clients occupy. */
static bool oversub_allows(struct scheduler *s, const struct client *c, int gpu,
                           uint64_t need)
{
    int slot = c->slot;
    struct policy_gpu_view g;
    struct policy_member_view m = {0};
    char want[32], max[32];

    if (!c->oversubscribed)
        return true;
    policy_view_gpu(s->policy, gpu, &g);
    policy_view_member(s->policy, gpu, slot, now_ns(), &m);
    uint64_t limit = g.memory_limit, total = g.held;
    if (!g.capacity)
        return true;
    if (m.footprint + need > limit) {
        format_size(m.footprint + need, want, sizeof(want));
        format_size(limit, max, sizeof(max));
        log_uid_warn(c->uid,
                     "gpu %d: client %llu (pod %s): allocation refused: its "
                     "footprint would be %s, more than the %s this GPU admits "
                     "(capacity minus the reserve), even alone",
                     gpu, (unsigned long long)c->id, client_pod(c), want, max);
        return false;
    }
    if (total + need > g.capacity * s->oversub_ratio) {
        format_size(total + need, want, sizeof(want));
        format_size(g.capacity * s->oversub_ratio, max, sizeof(max));
        log_uid_warn(c->uid,
                     "gpu %d: client %llu (pod %s): allocation refused: "
                     "the GPU's clients would hold %s, more than "
                     "NVSHARE_OVERSUB_RATIO=%u x its capacity (%s)",
                     gpu, (unsigned long long)c->id, client_pod(c), want,
                     s->oversub_ratio, max);
        return false;
    }
    return true;
}


/* A MEM_RESERVE that would have the client hold more than the bound, in
 * all its grants together, cannot be granted. */
static bool reserve_possible(const struct scheduler *s, const struct client *c,
                             int gpu, uint64_t bytes)
{
    uint64_t bound = client_bytes_bound(s, gpu);
    uint64_t held = s->quota.gpus[gpu].clients[c->slot].held;
    char want[32], has[32];

    if (bytes <= bound && held <= bound - bytes)
        return true;
    format_size(bytes, want, sizeof(want));
    format_size(held, has, sizeof(has));
    log_uid_warn(c->uid,
                 "gpu %d: client %llu (pod %s): allocation of %s refused: "
                 "it holds %s, and no client may hold more than %d x the GPU's "
                 "capacity",
                 gpu, (unsigned long long)c->id, client_pod(c), want, has,
                 CLIENT_BYTES_PER_CAPACITY);
    return false;
}

void client_handle_memory(struct scheduler *s, struct client *c, int gpu,
                          const struct msg *m)
{
    struct quota_actions out = {0};
    int slot = c->slot;
    const struct msg_mem *mem = &m->u.mem;
    /* Credit wanted beyond the need: up to the GPU's capacity (the bound
     * where it is not known), which also keeps bytes + extra from
     * wrapping. */
    struct policy_gpu_view g;
    policy_view_gpu(s->policy, gpu, &g);
    uint64_t most = g.capacity ? g.capacity : client_bytes_bound(s, gpu);
    uint64_t room = mem->bytes < most ? most - mem->bytes : 0;
    uint64_t extra = mem->extra < room ? mem->extra : room;

    if (m->type == MSG_MEM_RESERVE && (!reserve_possible(s, c, gpu, mem->bytes) ||
                                       !oversub_allows(s, c, gpu, mem->bytes)))
        quota_refuse(&s->quota, gpu, slot, mem->seq, &out);
    else if (m->type == MSG_MEM_RESERVE)
        quota_request(&s->quota, gpu, slot, mem->seq, mem->bytes,
                      mem->bytes + extra, mem->allocated, now_ns(), &out);
    else if (m->type == MSG_MEM_RETURN)
        quota_return(&s->quota, gpu, slot, mem->bytes, mem->allocated, now_ns(),
                     &out);
    else
        quota_report(&s->quota, gpu, slot, mem->allocated);
    s->evictable[gpu][slot] = mem->evictable;
    /* Which evictable bytes are pending only MEM_UPDATE says, in extra
     * (MEM_RESERVE's is credit): the others leave them as it said. */
    if (m->type == MSG_MEM_UPDATE)
        s->pending[gpu][slot] = mem->extra;
    clients_apply_quota(s, &out);
    /* Grants and returns moved what other clients hold too. */
    for (int i = 0; i < s->table_size; i++)
        if (policy_is_member(s->policy, gpu, i))
            footprint_update(s, gpu, i);
}
