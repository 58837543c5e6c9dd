/* clients.c - a client's messages: checked (order, GPU, bounds), handed to
 * the policy; and its departure.
 *
 * The other jobs of the client socket have their own files: accepting and
 * refusing connections (clients_accept.c), registration
 * (clients_register.c), memory requests (clients_memory.c), and carrying
 * out the policy's actions (clients_actions.c). Each of them calls this
 * file's neighbours below it and clients_table.c at the bottom, never
 * this one, which is on top.
 *
 * A client that breaks the protocol (undecodable frame, wrong version,
 * message out of order, GPU index it did not register) loses its connection
 * with one log line saying why; its locks pass on exactly as if it had
 * died. The daemon and every other client carry on.
 *
 * Every line that a client's behaviour causes is charged to its uid
 * (log_uid_*: see log.h), so that no tenant, looping connect, REGISTER and
 * a bad message, can flood the log; lines about the daemon itself are
 * not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients_internal.h"
#include "clock.h"
#include "log.h"
#include "scheduler.h"

static void close_client(struct scheduler *s, struct client *c,
                         struct policy_actions *out)
{
    if (c->registered) {
        log_uid_info(c->uid, "client %llu (pid %d, pod %s) left",
                     (unsigned long long)c->id, (int)c->pid, client_pod(c));
        pods_leave(&s->state.pods, &s->accounts[c->account].pod);
    }
    event_loop_remove(s->loop, c->fd);
    close(c->fd);
    free(c->reader);
    struct quota_actions quota_out = {0};
    struct account_actions account_out = {0};
    int slot = c->slot;

    c->welcomed = false; /* its socket is closed: tell it nothing more */
    policy_leave(s->policy, slot, now_ns(), out);
    quota_leave(&s->quota, slot, now_ns(), &quota_out);
    if (c->registered) {
        client_leave_groups(s, c);
        account_detach(s->accounts, c->account, &account_out);
    }
    clients_apply_accounts(s, &account_out);
    footprint_forget(s, slot);
    s->yield_told -= c->yield_sent.idle_release_ns ||
                     c->yield_sent.max_backlog_ns;
    uint32_t gpus = clients_gpu_mask(c);
    *c = (struct client){.slot = slot, .fd = -1};
    clients_apply_quota(s, &quota_out);
    clients_retell_yield(s, gpus);
}

/* Sending the departures' actions may doom more clients: the loop runs
 * until none is left, each pass a plain scan, never a recursion. */
bool clients_reap(struct scheduler *s)
{
    static struct policy_actions out; /* large: off the stack */
    bool closed = false, again = true;

    while (again) {
        again = false;
        for (int i = 0; i < s->table_size; i++) {
            if (!s->clients[i]->used || !s->clients[i]->doomed)
                continue;
            policy_actions_clear(&out);
            close_client(s, s->clients[i], &out);
            clients_apply(s, &out);
            closed = again = true;
        }
    }
    return closed;
}

/* Bounds of what a client says (docs/protocol.md, "Bounds"): no client
 * holds more than CLIENT_BYTES_PER_CAPACITY x its GPU's capacity (managed
 * memory may exceed the GPU, never by that much), or 1 PiB where the
 * capacity is not known; no drain or swap lasts a day. A report beyond
 * them is a protocol violation: a value that no process can have would
 * otherwise overflow the sums of footprints and quotas. A request beyond
 * them (MEM_RESERVE: an application may ask for anything) is refused.
 * The bound of bytes is client_bytes_bound (clients_table.c). */
#define CLIENT_DURATION_MAX_NS (86400ull * 1000000000ull)

/* Whether value is within bound; if not, dooms c with one log line. */
static bool within(struct client *c, const struct msg *m, const char *field,
                   uint64_t value, uint64_t bound)
{
    if (value <= bound)
        return true;
    log_uid_warn(c->uid,
                 "client %llu (pid %d): %s %s %llu is above the bound %llu: "
                 "disconnecting",
                 (unsigned long long)c->id, (int)c->pid, msg_type_name(m->type),
                 field, (unsigned long long)value, (unsigned long long)bound);
    c->doomed = true;
    return false;
}

/* The numbers of a client's message, against the bounds above. */
static bool in_bounds(const struct scheduler *s, struct client *c, int gpu,
                      const struct msg *m)
{
    uint64_t bytes = client_bytes_bound(s, gpu);

    switch (m->type) {
    case MSG_MEM_UPDATE:
    case MSG_MEM_RESERVE:
        return within(c, m, "allocated", m->u.mem.allocated, bytes);
    case MSG_MEM_RETURN:
        return within(c, m, "allocated", m->u.mem.allocated, bytes) &&
               within(c, m, "bytes", m->u.mem.bytes, bytes);
    case MSG_LOCK_RELEASED:
        return within(c, m, "drain_ns", m->u.lock.drain_ns,
                      CLIENT_DURATION_MAX_NS);
    case MSG_SWAPPED:
        return within(c, m, "bytes", m->u.swap.bytes, bytes) &&
               within(c, m, "duration_ns", m->u.swap.duration_ns,
                      CLIENT_DURATION_MAX_NS);
    case MSG_LOAD:
        return within(c, m, "span_ns", m->u.load.span_ns, CLIENT_DURATION_MAX_NS);
    default:
        return true;
    }
}

static void release(struct scheduler *s, struct client *c, int gpu,
                    const struct msg_lock *lock, struct policy_actions *out)
{
    int slot = c->slot;
    struct policy_member_view m = {0};
    uint64_t now = now_ns();

    policy_view_member(s->policy, gpu, slot, now, &m);
    bool preempted = m.state == MEMBER_DRAINING;
    uint32_t lease_before = m.lease;

    policy_release(s->policy, gpu, slot, lock->lease, lock->drain_ns,
                   lock->at_ns, now, out);
    policy_view_member(s->policy, gpu, slot, now, &m);
    /* Benchmarks read preemption latency from these lines. */
    if (preempted && lock->lease == lease_before)
        log_debug("gpu %d: client %llu released lease %u: preempt %.3f ms, "
                  "drain %.3f ms",
                  gpu, (unsigned long long)c->id, lock->lease,
                  (double)m.last_preempt_ns / 1e6, (double)lock->drain_ns / 1e6);
}

/* Why a message breaks the protocol, for its one log line. One buffer: one
 * call per log line. */
static char violation[160];

/* The node GPU a client message names, or -1 with violation said (none,
 * or not one it may use). */
static int message_gpu(const struct client *c, const struct msg *m)
{
    int index;

    switch (m->type) {
    case MSG_MEM_RESERVE:
    case MSG_MEM_RETURN:
    case MSG_MEM_UPDATE:
        index = m->u.mem.gpu;
        break;
    case MSG_REQ_LOCK:
    case MSG_LOCK_RELEASED:
    case MSG_LOCK_IN_USE:
    case MSG_DRAINING:
        index = m->u.lock.gpu;
        break;
    case MSG_DRAIN_POINT:
        index = m->u.drain.gpu;
        break;
    case MSG_SWAPPED:
        index = m->u.swap.gpu;
        break;
    case MSG_LOAD:
        index = m->u.load.gpu;
        break;
    default:
        snprintf(violation, sizeof(violation), "is not a message a client sends");
        return -1;
    }
    if (index >= c->n_gpus)
        snprintf(violation, sizeof(violation),
                 "names GPU index %d, but it "
                 "registered %d GPU(s)",
                 index, c->n_gpus);
    else if (c->node_gpu[index] < 0)
        snprintf(violation, sizeof(violation),
                 "names GPU index %d (%s), which "
                 "this scheduler does not manage",
                 index, c->reg.gpu_uuids[index]);
    else
        return c->node_gpu[index];
    return -1;
}

/* Swaps faster than this are not measurements: no link between a GPU and
 * its host moves a terabyte a second. */
#define SWAP_BYTES_PER_NS_MAX 1000

/* Whether a SWAPPED answers what the scheduler asked: a swap-out its EVICT
 * (and once), a swap-in a swap-out of more than 0 bytes (docs/protocol.md,
 * "Swapping in"), at a speed a machine can have. Anything else would enter
 * the GPU's swap statistics and set its switch time: it is ignored, with
 * a line charged to the client's uid. */
static bool swap_solicited(struct scheduler *s, struct client *c, int gpu,
                           const struct msg_swap *swap)
{
    struct policy_member_view m = {0};
    const char *why = NULL;
    bool out = swap->direction == SWAP_OUT;

    policy_view_member(s->policy, gpu, c->slot, now_ns(), &m);
    if (out && !m.evicting)
        why = "no EVICT asked for it";
    else if (!out && !(c->swap_in_due >> gpu & 1))
        why = "it swapped nothing out since its last swap-in";
    else if (swap->bytes / SWAP_BYTES_PER_NS_MAX > swap->duration_ns)
        why = "faster than any GPU's link to its host";
    if (why) {
        log_uid_warn(c->uid,
                     "gpu %d: client %llu (pid %d): SWAPPED %s of %llu "
                     "bytes in %llu ns ignored: %s",
                     gpu, (unsigned long long)c->id, (int)c->pid,
                     out ? "out" : "in", (unsigned long long)swap->bytes,
                     (unsigned long long)swap->duration_ns, why);
        return false;
    }
    if (out && swap->bytes)
        c->swap_in_due |= 1u << gpu;
    else if (!out)
        c->swap_in_due &= ~(1u << gpu);
    return true;
}

/* REQ_LOCK: its first for a GPU makes its context count in the footprint. */
static void request(struct scheduler *s, struct client *c, int gpu,
                    struct policy_actions *out)
{
    log_debug("gpu %d: client %llu requests the lock", gpu,
              (unsigned long long)c->id);
    if (!(c->asked_gpus >> gpu & 1)) {
        c->asked_gpus |= 1u << gpu;
        footprint_update(s, gpu, c->slot);
    }
    policy_request(s->policy, gpu, c->slot, now_ns(), out);
}

/* SWAPPED. Returns NULL, or why it breaks the protocol. */
static const char *swapped(struct scheduler *s, struct client *c, int gpu,
                           const struct msg_swap *swap,
                           struct policy_actions *out)
{
    if (swap->direction == 0)
        return "without a direction";
    if (!swap_solicited(s, c, gpu, swap))
        return NULL;
    log_debug("gpu %d: client %llu swapped %s %llu bytes in %.3f ms", gpu,
              (unsigned long long)c->id,
              swap->direction == SWAP_OUT ? "out" : "in",
              (unsigned long long)swap->bytes, (double)swap->duration_ns / 1e6);
    policy_swapped(s->policy, gpu, c->slot, swap->direction, swap->bytes,
                   swap->duration_ns, now_ns(), out);
    return NULL;
}

/* A registered client's message about one of its GPUs. Returns NULL, or
 * why it breaks the protocol. */
static const char *handle_gpu_message(struct scheduler *s, struct client *c,
                                      int gpu, const struct msg *m,
                                      struct policy_actions *out)
{
    int slot = c->slot;

    switch (m->type) {
    case MSG_MEM_RESERVE:
    case MSG_MEM_RETURN:
    case MSG_MEM_UPDATE:
        client_handle_memory(s, c, gpu, m);
        return NULL;
    case MSG_LOCK_IN_USE:
        policy_in_use(s->policy, gpu, slot, m->u.lock.lease, m->u.lock.at_ns,
                      now_ns());
        return NULL;
    case MSG_DRAINING:
        policy_draining(s->policy, gpu, slot, m->u.lock.lease, now_ns());
        return NULL;
    case MSG_DRAIN_POINT:
        log_debug("gpu %d: client %llu stopped after collective %llu", gpu,
                  (unsigned long long)c->id,
                  (unsigned long long)m->u.drain.collectives);
        policy_drain_point(s->policy, gpu, slot, m->u.drain.lease,
                           m->u.drain.collectives, out);
        return NULL;
    case MSG_REQ_LOCK:
        request(s, c, gpu, out);
        return NULL;
    case MSG_LOCK_RELEASED:
        release(s, c, gpu, &m->u.lock, out);
        return NULL;
    case MSG_SWAPPED:
        return swapped(s, c, gpu, &m->u.swap, out);
    case MSG_LOAD:
        policy_set_load(s->policy, gpu, slot, m->u.load.busy_permille);
        return NULL;
    default:
        return "is not a message a client sends";
    }
}

/* Returns NULL, or why the message breaks the protocol. */
static const char *handle_message(struct scheduler *s, struct client *c,
                                  const struct msg *m, struct policy_actions *out)
{
    int gpu;

    if (m->type == MSG_REGISTER && c->registered)
        return "a second time";
    if (m->type == MSG_REGISTER) {
        client_register(s, c, &m->u.reg);
        return NULL;
    }
    if (!c->registered)
        return "before REGISTER";
    if ((gpu = message_gpu(c, m)) < 0)
        return violation;
    /* Out of bounds: c is doomed, and the log line said why. */
    if (!in_bounds(s, c, gpu, m))
        return NULL;
    return handle_gpu_message(s, c, gpu, m, out);
}

void client_on_readable(struct event_loop *loop, int fd, void *data)
{
    struct client *c = data;
    struct scheduler *s = c->sched;
    struct msg m;
    int rc;

    (void)loop;
    /* Doomed by another handler of this batch: its messages no longer
     * count, and the reaper closes it after the batch. */
    if (c->doomed)
        return;
    rc = frame_reader_fill(c->reader, fd);
    while (rc >= 0 && (rc = frame_reader_next(c->reader, &m)) > 0) {
        struct policy_actions out;
        uint64_t start = now_ns();
        const char *why;
        policy_actions_clear(&out);
        if ((why = handle_message(s, c, &m, &out))) {
            log_uid_warn(c->uid, "client %llu (pid %d): %s %s: disconnecting",
                         (unsigned long long)c->id, (int)c->pid,
                         msg_type_name(m.type), why);
            c->doomed = true;
        }
        clients_apply(s, &out);
        metrics_note_message(s, m.type, now_ns() - start);
        if (c->doomed)
            return;
    }
    if (rc < 0 && rc != PROTO_E_IO)
        log_uid_warn(c->uid,
                     "client %llu (pid %d): bad message (%s): disconnecting",
                     (unsigned long long)c->id, (int)c->pid, proto_strerror(rc));
    if (rc < 0)
        c->doomed = true;
    if (c->reader->len == 0)
        c->partial_since = 0;
    else if (c->partial_since == 0)
        c->partial_since = now_ns();
}
