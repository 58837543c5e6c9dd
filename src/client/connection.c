/* connection.c - the client thread: it owns the scheduler connection
 * (connecting and re-registering), reads the scheduler's messages, drains
 * on DROP_LOCK (a gang rank after agreeing where: gate.c), gives idle GPUs
 * back, reports load and runs the swap callbacks. Memory messages and
 * connection events go to the observer that nvshare_client_start()
 * attached (the memory ledger); this file knows nothing else of it.
 *
 * Failure policy: a scheduler that is absent, dies or misbehaves opens the
 * gates (fail-open) or keeps them shut until it is back (fail-closed); a
 * pod with a core limit paces itself to it meanwhile (pace_while_away);
 * nothing here ever ends the process. */
#include "client_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "env.h"
#include "log.h"
#include "protocol.h"
#include "sock.h"

/* nvshare_note_busy() totals, read by report_load(). */
static _Atomic uint64_t busy_total_ns[NVSHARE_MAX_GPUS];
static _Atomic uint64_t span_total_ns[NVSHARE_MAX_GPUS];

/* The scheduler's pace slice: a limited pod runs its share of each. */
#define PACE_SLICE_NS (200 * NS_PER_MS)

/* Set by nvshare_client_start() before the client thread exists; read by
 * application threads at a closed gate, so atomic. */
static const struct conn_observer *_Atomic observer;

void conn_observe(const struct conn_observer *o)
{
    observer = o;
}

void conn_before_lock_request(int gpu)
{
    const struct conn_observer *o = observer;

    if (o) /* NULL before the first nvshare_client_start() */
        o->before_lock_request(gpu);
}

int conn_send_locked(const struct msg *m)
{
    if (client.fd < 0)
        return -1;
    int rc = msg_send(client.fd, m);
    if (rc)
        log_debug("sending %s failed: %s", msg_type_name(m->type),
                  proto_strerror(rc));
    return rc;
}

int conn_send(const struct msg *m)
{
    pthread_mutex_lock(&client.mu);
    int rc = conn_send_locked(m);
    pthread_mutex_unlock(&client.mu);
    return rc;
}

/* ---- connection ---------------------------------------------------------- */

/* No lock is held or requested any more (the connection went, or
 * scheduling went off): the gates follow the mode, and waiters look again.
 * Called with client.mu held. */
static void forget_locks_locked(void)
{
    for (int i = 0; i < client.n_gpus; i++) {
        client.gpus[i].held = false;
        client.gpus[i].requested = false;
    }
    gate_forget_drains_locked();
    gates_open_for_current_mode();
    pthread_cond_broadcast(&client.changed);
}

static void disconnect_locked(const char *why)
{
    if (client.fd >= 0) {
        close(client.fd);
        client.fd = -1;
    }
    if (client.connected)
        log_warn("lost the scheduler (%s): %s", why,
                 client.fail_closed ? "GPU work waits until it is back"
                                    : "running unscheduled until it is back");
    client.connected = false;
    /* The next scheduler sends its own terms, from none. */
    atomic_store_explicit(&client.yield_idle_release_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&client.yield_max_backlog_ns, 0, memory_order_relaxed);
    forget_locks_locked();
}

static void disconnect(const char *why)
{
    pthread_mutex_lock(&client.mu);
    disconnect_locked(why);
    pthread_mutex_unlock(&client.mu);
    observer->disconnected();
}

/* The first attempt, or one after a loss, ended without a connection.
 * Called with client.mu, releases it. */
static void attempt_failed(void)
{
    client.attempted = true;
    gates_open_for_current_mode();
    pthread_cond_broadcast(&client.changed);
    pthread_mutex_unlock(&client.mu);
    observer->disconnected();
}

/* Sends REGISTER on fd and reads the answer into *m: 0 (REGISTER_OK or
 * REFUSED) or a proto_error. */
static int register_on(int fd, struct msg *m)
{
    int rc, received;

    *m = (struct msg){.type = MSG_REGISTER, .u.reg = client.reg};
    m->u.reg.pid = (uint32_t)getpid();
    rc = msg_send(fd, m);
    /* A refusal is sent at once and the socket closed, maybe under our
     * send: what was sent before the close can still be read. */
    received = msg_recv(fd, m, 5000);
    if (received == 0 && m->type == MSG_REFUSED)
        return 0;
    if (rc == 0)
        rc = received;
    if (rc == 0 && m->type != MSG_REGISTER_OK)
        rc = PROTO_E_TYPE;
    if (rc == 0 && m->u.reg_ok.n_gpus != client.n_gpus)
        rc = PROTO_E_FIELD;
    return rc;
}

/* The scheduler accepted us on fd. Called with client.mu, releases it. */
static void registered(int fd, const struct msg_register_ok *ok)
{
    uint8_t managed[NVSHARE_MAX_GPUS];

    client.attempted = true;
    client.fd = fd;
    client.connected = true;
    client.scheduling_on = ok->scheduling_on;
    client.oversub_node = ok->oversub_default;
    for (int i = 0; i < client.n_gpus; i++) {
        client.gpus[i].known = ok->gpu_known[i];
        if (!client.gpus[i].known)
            log_warn("the scheduler does not manage GPU %s: it runs "
                     "unscheduled",
                     client.uuids[i]);
    }
    log_info("registered with the scheduler as client %llu%s",
             (unsigned long long)ok->client_id,
             client.registrations++ ? " (reconnected)" : "");
    client.warned_absent = false;
    client.warned_refused = false;
    client.retry_ns = 0; /* the next refusal waits reconnect_ns first */
    gates_open_for_current_mode();
    pthread_cond_broadcast(&client.changed);
    for (int i = 0; i < client.n_gpus; i++)
        managed[i] = client.gpus[i].known;
    pthread_mutex_unlock(&client.mu);
    observer->registered(client.n_gpus, managed);
}

/* A refused or failed registration is retried after twice the previous
 * wait, from the reconnect interval up to this: thousands of refused
 * processes must not knock every second, nor each log every time. */
#define RETRY_MAX_NS (30 * NS_PER_SEC)

/* Says once, until the next registration, why the scheduler would not have
 * us; the wait before the next attempt doubles. With client.mu held. */
static void refused_locked(const char *path, int rc, const struct msg *m)
{
    const struct msg_refused *r = &m->u.refused;
    const char *meanwhile = client.fail_closed
                                ? "GPU work waits (fail-closed)"
                                : "running unscheduled (fail-open)";

    client.retry_ns = client.retry_ns ? 2 * client.retry_ns : client.reconnect_ns;
    if (client.retry_ns > RETRY_MAX_NS)
        client.retry_ns = RETRY_MAX_NS;
    if (client.warned_refused)
        return;
    client.warned_refused = true;
    if (rc)
        log_warn("scheduler at %s refused registration: %s; %s, retrying "
                 "with a back-off up to %.0f s",
                 path, proto_strerror(rc), meanwhile, (double)RETRY_MAX_NS / 1e9);
    else if (r->reason == REFUSED_UID_LIMIT)
        log_warn("scheduler at %s refused this process: uid %u has %u "
                 "connections already (NVSHARE_MAX_CONNECTIONS_PER_UID); %s, "
                 "retrying with a back-off up to %.0f s",
                 path, r->uid, r->limit, meanwhile, (double)RETRY_MAX_NS / 1e9);
    else if (r->reason == REFUSED_BAD_NAME)
        log_warn("scheduler at %s refused this process: a name it declares "
                 "(pod, namespace, container, NVSHARE_JOB_ID or GPU UUID) has "
                 "a control character; %s, retrying with a back-off up to "
                 "%.0f s",
                 path, meanwhile, (double)RETRY_MAX_NS / 1e9);
    else
        log_warn("scheduler at %s refused this process: it is out of memory; "
                 "%s, retrying with a back-off up to %.0f s",
                 path, meanwhile, (double)RETRY_MAX_NS / 1e9);
}

/* Connects and registers; returns how long to wait before the next
 * attempt should this one have failed. */
static uint64_t try_connect(void)
{
    char path[256];
    struct msg m;
    int fd, rc;

    if (socket_path(CLIENT_SOCKET_NAME, path, sizeof(path)))
        return client.reconnect_ns;
    fd = unix_connect(path);
    if (fd < 0) {
        pthread_mutex_lock(&client.mu);
        if (!client.warned_absent)
            log_warn("no scheduler at %s (%s): %s; retrying every %.1fs", path,
                     strerror(errno),
                     client.fail_closed ? "GPU work waits for it (fail-closed)"
                                        : "running unscheduled (fail-open)",
                     (double)client.reconnect_ns / 1e9);
        client.warned_absent = true;
        attempt_failed();
        return client.reconnect_ns;
    }
    rc = register_on(fd, &m);
    pthread_mutex_lock(&client.mu);
    if (rc || m.type == MSG_REFUSED) {
        refused_locked(path, rc, &m);
        uint64_t wait = client.retry_ns;
        close(fd);
        attempt_failed();
        return wait;
    }
    registered(fd, &m.u.reg_ok);
    return client.reconnect_ns;
}

/* Scheduling switched on: everyone was running freely, so drain before
 * anyone is granted a lock. */
static void handle_sched_on(void)
{
    pthread_mutex_lock(&client.mu);
    client.scheduling_on = true;
    pthread_mutex_unlock(&client.mu);
    for (int i = 0; i < client.n_gpus; i++) {
        uint64_t drained_at;
        if (client.gpus[i].known)
            gate_close_and_drain(i, &drained_at);
    }
    pthread_mutex_lock(&client.mu);
    gates_open_for_current_mode();
    pthread_cond_broadcast(&client.changed);
    pthread_mutex_unlock(&client.mu);
}

/* ---- memory-aware scheduling ------------------------------------------- */

static void send_swapped(int gpu, enum swap_direction direction, uint64_t bytes,
                         uint64_t duration_ns)
{
    struct msg m = {.type = MSG_SWAPPED};

    m.u.swap =
        (struct msg_swap){(uint8_t)gpu, (uint8_t)direction, bytes, duration_ns};
    conn_send(&m);
    log_info("gpu %d: swapped %s %.1f MiB in %.3f s (%.1f GB/s)", gpu,
             direction == SWAP_OUT ? "out" : "in", (double)bytes / (1 << 20),
             (double)duration_ns / 1e9,
             duration_ns ? (double)bytes / (double)duration_ns : 0.0);
}

/* EVICT: the scheduler needs the room. The gate is closed (the lock went
 * back before), so nothing of ours runs while the memory moves. A process
 * without swap callbacks answers with 0 bytes: it has nothing evictable. */
static void swap_out(int gpu)
{
    uint64_t start = now_ns(), bytes = 0;

    if (client.ops.swap_out)
        bytes = client.ops.swap_out(gpu, client.ops.user);
    pthread_mutex_lock(&client.mu);
    /* Even when no byte moved (a second EVICT, or only blank allocations
     * whose pages were discarded), what is out must come back before the
     * gate opens. */
    client.gpus[gpu].swapped_out = true;
    client.gpus[gpu].swap_in_due = client.gpus[gpu].swap_in_due || bytes > 0;
    pthread_mutex_unlock(&client.mu);
    send_swapped(gpu, SWAP_OUT, bytes, now_ns() - start);
}

/* Before the gate opens on a grant: memory that went out comes back with
 * one explicit prefetch rather than page faults under the first kernels. */
static void swap_in_if_out(int gpu)
{
    pthread_mutex_lock(&client.mu);
    bool out = client.gpus[gpu].swapped_out;
    bool due = client.gpus[gpu].swap_in_due;
    client.gpus[gpu].swapped_out = client.gpus[gpu].swap_in_due = false;
    pthread_mutex_unlock(&client.mu);
    if (!out || !client.ops.swap_in)
        return;
    uint64_t start = now_ns();
    uint64_t bytes = client.ops.swap_in(gpu, client.ops.user);
    /* The scheduler waits for a swap-in only after a swap-out of more
     * than 0 bytes (docs/protocol.md); after blank ones it would log the
     * answer as unsolicited. */
    if (due)
        send_swapped(gpu, SWAP_IN, bytes, now_ns() - start);
}

static void log_memory_wait(const struct msg *m)
{
    const struct msg_wait *w = &m->u.wait;

    if (m->type == MSG_MEM_AVAILABLE) {
        log_info("gpu %d: memory available after waiting %.1f s", w->gpu,
                 (double)w->wait_ns / 1e9);
        return;
    }
    log_info("gpu %d: waiting for GPU memory: this process needs %.1f MiB, "
             "%.1f MiB of the %.1f MiB the scheduler admits are free; the "
             "running clients rotate in %.1f s at the latest",
             w->gpu, (double)w->need / (1 << 20), (double)w->free / (1 << 20),
             (double)w->limit / (1 << 20), (double)w->wait_ns / 1e9);
}

/* Start-up (context and library initialization, first touch of memory)
 * keeps the GPU busy in any job: measuring it would make light jobs look
 * heavy, so the first LOAD_SKIP_NS of measured GPU time is not reported.
 * The first report follows LOAD_FIRST_NS later, within the first second of
 * GPU time whatever the TQ, since the time is counted only while this
 * process may submit; until then the scheduler gives it a trial of one
 * quantum beside others. Later reports come every LOAD_REPORT_NS. */
#define LOAD_SKIP_NS (500 * NS_PER_MS)
#define LOAD_FIRST_NS (250 * NS_PER_MS)
#define LOAD_REPORT_NS (500 * NS_PER_MS)

/* Tells the scheduler how busy this process kept each GPU it held since
 * the last report (auto mode co-runs light clients only). */
static void report_load(void)
{
    uint64_t now = now_ns();

    for (int i = 0; i < client.n_gpus; i++) {
        struct gpu_lock *g = &client.gpus[i];
        if (!g->known)
            continue; /* the scheduler would take it for a protocol error */
        uint64_t busy =
            atomic_load_explicit(&busy_total_ns[i], memory_order_relaxed);
        uint64_t span =
            atomic_load_explicit(&span_total_ns[i], memory_order_relaxed);
        bool first = g->load_sent_at == 0;
        if (first && span < LOAD_SKIP_NS) {
            g->load_busy_ns = busy;
            g->load_span_ns = span;
            continue;
        }
        uint64_t d_busy = busy - g->load_busy_ns, d_span = span - g->load_span_ns;
        /* Spans are measured per submitting thread: several threads can
         * add up to more than the wall time, and busy time with them. */
        if (first ? d_span < LOAD_FIRST_NS
                  : now - g->load_sent_at < LOAD_REPORT_NS ||
                        d_span < LOAD_REPORT_NS / 5)
            continue;
        g->load_busy_ns = busy;
        g->load_span_ns = span;
        g->load_sent_at = now;
        uint64_t permille = d_busy >= d_span ? 1000 : d_busy * 1000 / d_span;
        struct msg m = {.type = MSG_LOAD};
        m.u.load = (struct msg_load){(uint8_t)i, (uint16_t)permille, d_span};
        conn_send(&m);
    }
}

static void handle_sched_off(void)
{
    pthread_mutex_lock(&client.mu);
    client.scheduling_on = false;
    forget_locks_locked();
    pthread_mutex_unlock(&client.mu);
}

static void handle_lock_ok(int gpu, uint32_t lease)
{
    swap_in_if_out(gpu);
    pthread_mutex_lock(&client.mu);
    client.gpus[gpu].held = true;
    client.gpus[gpu].requested = false;
    client.gpus[gpu].in_use_sent = false;
    client.gpus[gpu].lease = lease;
    client.gpus[gpu].grants++;
    client.gpus[gpu].quiet_since = now_ns();
    client.gpus[gpu].seen_submits = gate_submits_total();
    gate_set(gpu, true);
    pthread_cond_broadcast(&client.changed);
    pthread_mutex_unlock(&client.mu);
}

/* The GPU index a scheduler message names, or -1 where it names none. */
static int message_gpu(const struct msg *m)
{
    switch (m->type) {
    case MSG_LOCK_OK:
    case MSG_DROP_LOCK:
    case MSG_DROP_GANG_LOCK:
        return m->u.lock.gpu;
    case MSG_DRAIN_TO:
        return m->u.drain.gpu;
    case MSG_UPDATE_LIMIT:
    case MSG_MEM_GRANT:
    case MSG_MEM_RECLAIM:
        return m->u.mem.gpu;
    case MSG_EVICT:
    case MSG_PREPARE_SWAP:
        return m->u.swap.gpu;
    case MSG_WAIT_FOR_MEM:
    case MSG_MEM_AVAILABLE:
        return m->u.wait.gpu;
    default:
        return -1;
    }
}

/* Returns 0, or -1 if the message breaks the protocol (an unknown type, or
 * a GPU index beyond those it registered). */
static int handle_message(const struct msg *m)
{
    int gpu = message_gpu(m);

    if (gpu >= client.n_gpus)
        return -1;
    switch (m->type) {
    case MSG_SCHED_ON:
        handle_sched_on();
        return 0;
    case MSG_SCHED_OFF:
        handle_sched_off();
        return 0;
    case MSG_LOCK_OK:
        handle_lock_ok(gpu, m->u.lock.lease);
        return 0;
    case MSG_DROP_LOCK:
        gate_release_lease(gpu, m->u.lock.lease, "preempted");
        return 0;
    case MSG_DROP_GANG_LOCK:
        gate_agree_drain_point(gpu, m->u.lock.lease);
        return 0;
    case MSG_DRAIN_TO:
        gate_drain_to(gpu, m->u.drain.lease, m->u.drain.collectives);
        return 0;
    case MSG_UPDATE_LIMIT:
    case MSG_MEM_GRANT:
    case MSG_MEM_RECLAIM:
        observer->message(m);
        return 0;
    case MSG_UPDATE_YIELD:
        atomic_store_explicit(&client.yield_idle_release_ns,
                              m->u.yield.idle_release_ns, memory_order_relaxed);
        atomic_store_explicit(&client.yield_max_backlog_ns,
                              m->u.yield.max_backlog_ns, memory_order_relaxed);
        return 0;
    case MSG_UPDATE_CORE_LIMIT:
        pthread_mutex_lock(&client.mu);
        client.core_limit = m->u.core.percent;
        pthread_mutex_unlock(&client.mu);
        return 0;
    case MSG_EVICT:
        swap_out(gpu);
        return 0;
    case MSG_PREPARE_SWAP:
        if (client.ops.prepare_swap)
            client.ops.prepare_swap(gpu, client.ops.user);
        return 0;
    case MSG_WAIT_FOR_MEM:
    case MSG_MEM_AVAILABLE:
        log_memory_wait(m);
        return 0;
    default:
        log_warn("unexpected %s from the scheduler", msg_type_name(m->type));
        return -1;
    }
}

/* While the scheduler is away (a restart), a pod it told a core limit of
 * paces itself to it: its gates open for that share of each pace slice
 * and shut, drained, for the rest, so that it never runs over its limit
 * unscheduled. Pods without a limit run freely (fail-open). Returns when
 * it must be called again (0: not pacing). */
static uint64_t pace_while_away(uint64_t now)
{
    static uint64_t slice_start;
    uint64_t shut_at, drained_at;

    pthread_mutex_lock(&client.mu);
    uint8_t limit = client.core_limit;
    bool pacing = !client.connected && client.attempted &&
                  !client.fail_closed && limit > 0 && limit < 100;
    if (!pacing || now >= slice_start + PACE_SLICE_NS) {
        if (client.paced_shut) {
            client.paced_shut = false;
            gates_open_for_current_mode();
            pthread_cond_broadcast(&client.changed);
        }
        slice_start = now;
    }
    shut_at = slice_start + PACE_SLICE_NS * limit / 100;
    if (!pacing || client.paced_shut || now < shut_at) {
        bool shut = client.paced_shut;
        pthread_mutex_unlock(&client.mu);
        return !pacing ? 0 : shut ? slice_start + PACE_SLICE_NS : shut_at;
    }
    client.paced_shut = true;
    int n = client.n_gpus;
    pthread_mutex_unlock(&client.mu);
    for (int i = 0; i < n; i++)
        gate_close_and_drain(i, &drained_at);
    return slice_start + PACE_SLICE_NS;
}

/* How long a held GPU stays held without submissions: the client's own
 * setting, or the scheduler's shorter one (UPDATE_YIELD: a class above
 * others lends the GPU between its requests). */
static uint64_t idle_release_ns(void)
{
    uint64_t terms = atomic_load_explicit(&client.yield_idle_release_ns,
                                          memory_order_relaxed);

    return terms && terms < client.idle_release_ns ? terms
                                                   : client.idle_release_ns;
}

/* Gives back GPUs nobody has submitted to for idle_release_ns() once their
 * work has completed, and had completed at the poll before, with no
 * submission in between: a busy thread that synchronizes after each batch
 * of kernels has just completed its work at times, and must not lose the
 * GPU between two batches. */
static void release_idle_gpus(void)
{
    uint64_t now = now_ns(), submits = gate_submits_total();

    if (!client.ops.completed)
        return;
    for (int i = 0; i < client.n_gpus; i++) {
        pthread_mutex_lock(&client.mu);
        struct gpu_lock *g = &client.gpus[i];
        bool idle = false;
        uint32_t lease = g->lease;
        if (g->held) {
            /* submits counts every GPU: any activity keeps all held, which
             * errs on the side of keeping a busy process's locks. */
            if (submits != g->seen_submits) {
                g->seen_submits = submits;
                g->quiet_since = now;
                g->complete_seen = false;
            } else {
                idle = now - g->quiet_since >= idle_release_ns();
            }
        }
        bool complete_before = g->complete_seen;
        pthread_mutex_unlock(&client.mu);
        if (!idle || !client.ops.completed(i, client.ops.user))
            continue;
        if (complete_before)
            gate_release_lease(i, lease, "idle");
        pthread_mutex_lock(&client.mu);
        g->complete_seen = g->seen_submits == submits && g->lease == lease;
        pthread_mutex_unlock(&client.mu);
    }
}

/* Runs what is due while away or behind (pacing, catch-ups) and returns
 * how long the thread may sleep: until the next reconnection, pace slice
 * or catch-up, or half the idle release time while connected. */
/* Whether this process holds some GPU. */
static bool holds_any(void)
{
    bool held = false;

    pthread_mutex_lock(&client.mu);
    for (int i = 0; i < client.n_gpus && !held; i++)
        held = client.gpus[i].held;
    pthread_mutex_unlock(&client.mu);
    return held;
}

static int next_wake_ms(uint64_t now, uint64_t next_connect)
{
    /* A lender's short idle release is polled for only while it holds a
     * GPU: between its requests it wakes no more than any client. */
    uint64_t idle = holds_any() ? idle_release_ns() : client.idle_release_ns;
    int timeout_ms = (int)(idle / 2 / NS_PER_MS) + 1;

    if (client.fd < 0) {
        uint64_t wait = next_connect > now ? next_connect - now : 0;
        timeout_ms = (int)(wait / NS_PER_MS) + 1;
    }
    uint64_t pace_due = pace_while_away(now);
    if (pace_due) {
        uint64_t pace_ms = (pace_due > now ? pace_due - now : 0) / NS_PER_MS + 1;
        if (pace_ms < (uint64_t)timeout_ms)
            timeout_ms = (int)pace_ms;
    }
    uint64_t catch_up_left = gate_finish_catch_ups();
    uint64_t catch_up_ms = catch_up_left / NS_PER_MS + 1;
    if (catch_up_left && catch_up_ms < (uint64_t)timeout_ms)
        timeout_ms = (int)catch_up_ms;
    return timeout_ms;
}

/* Handles what the scheduler sent; a message that breaks the protocol, or
 * a lost connection, disconnects until *next_connect. */
static void read_messages(struct frame_reader *reader, uint64_t *next_connect)
{
    struct msg m;
    int got = frame_reader_fill(reader, client.fd);

    while (got >= 0 && (got = frame_reader_next(reader, &m)) > 0)
        if (handle_message(&m))
            got = PROTO_E_TYPE;
    if (got < 0) {
        disconnect(proto_strerror(got));
        *next_connect = now_ns() + client.reconnect_ns;
    }
}

void *conn_thread(void *arg)
{
    struct frame_reader *reader = malloc(sizeof(*reader));
    uint64_t next_connect = 0;

    (void)arg;
    if (!reader)
        return NULL;
    for (;;) {
        struct pollfd fds[3] = {{.fd = client.wake_fd, .events = POLLIN},
                                {.fd = -1, .events = POLLIN},
                                {.fd = client.catch_up_fd, .events = POLLIN}};
        uint64_t now = now_ns();

        if (client.fd < 0 && now >= next_connect) {
            uint64_t wait = try_connect();
            reader->len = 0;
            next_connect = now + wait;
        }
        fds[1].fd = client.fd;
        int rc = poll(fds, 3, next_wake_ms(now, next_connect));
        if (rc < 0 && errno != EINTR)
            break;
        if (fds[0].revents)
            break; /* nvshare_client_stop() */
        if (fds[2].revents) {
            uint64_t count;
            if (read(client.catch_up_fd, &count, sizeof(count)) < 0)
                log_debug("catch-up wake-up: %s", strerror(errno));
        }
        if (fds[1].revents)
            read_messages(reader, &next_connect);
        if (client.connected) {
            release_idle_gpus();
            observer->tick(client.n_gpus);
            report_load();
        }
    }
    free(reader);
    return NULL;
}

uint64_t nvshare_max_backlog_ns(void)
{
    return atomic_load_explicit(&client.yield_max_backlog_ns,
                                memory_order_relaxed);
}

void nvshare_note_busy(int gpu, uint64_t busy_ns, uint64_t span_ns)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    atomic_fetch_add_explicit(&busy_total_ns[gpu], busy_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&span_total_ns[gpu], span_ns, memory_order_relaxed);
}
