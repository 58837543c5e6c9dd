/* connection.c - the client thread: it owns the scheduler connection
 * (connecting and re-registering), reads the scheduler's messages and
 * turns those about locks into the gate's transitions (gate.h), gives idle
 * GPUs back, reports load and runs the swap callbacks. Memory messages and
 * connection events go to the observer that nvshare_client_start()
 * attached (the memory ledger); this file knows nothing else of it.
 *
 * Failure policy: a scheduler that is absent, dies or misbehaves opens the
 * gates (fail-open) or keeps them shut until it is back (fail-closed); a
 * pod with a core limit paces itself to it meanwhile (pace_while_away);
 * nothing here ever ends the process. */
#include "connection.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client_internal.h"
#include "clock.h"
#include "env.h"
#include "gate.h"
#include "log.h"
#include "protocol.h"
#include "sock.h"

/* nvshare_note_busy() totals, read by report_load(). */
static _Atomic uint64_t busy_total_ns[NVSHARE_MAX_GPUS];
static _Atomic uint64_t span_total_ns[NVSHARE_MAX_GPUS];

/* The scheduler's pace slice: a limited pod runs its share of each. */
#define PACE_SLICE_NS (200 * NS_PER_MS)

/* The connection's own state: the client thread's alone, but for fd,
 * which senders on every thread read under client.mu. */
static struct {
    int fd;
    int wake_fd; /* eventfd: stop request */
    pthread_t thread;
    const struct conn_observer *observer; /* set before the thread starts */
    struct msg_register reg;
    uint64_t idle_release_ns;
    uint64_t reconnect_ns;
    uint64_t retry_ns; /* after a refusal: doubles up to RETRY_MAX_NS */
    unsigned registrations;
    bool warned_absent;
    bool warned_refused; /* since the last registration */
    uint8_t core_limit;  /* the pod's, as the scheduler last told (percent;
                            0: none): paced to while it is away */
} conn = {.fd = -1, .wake_fd = -1};

/* What the client thread watches on each GPU for its reports and swaps. */
struct gpu_watch {
    uint64_t seen_submits; /* idle detection: submissions at last poll */
    uint64_t quiet_since;  /* when seen_submits last changed */
    bool complete_seen;    /* its work had completed at the last poll */
    bool swap_in_due;      /* a swap-out since the last swap-in moved bytes */
    uint64_t load_busy_ns, load_span_ns; /* totals at the last LOAD */
    uint64_t load_sent_at;               /* 0: no report yet */
};
static struct gpu_watch watch[NVSHARE_MAX_GPUS];

/* UPDATE_YIELD's terms (0: none); the shorter of the two settings
 * applies. Read by application threads, so atomic. */
static _Atomic uint64_t yield_idle_release_ns;
static _Atomic uint64_t yield_max_backlog_ns;

int conn_send_locked(const struct msg *m)
{
    if (conn.fd < 0)
        return -1;
    int rc = msg_send(conn.fd, m);
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

static void disconnect_locked(const char *why)
{
    if (conn.fd >= 0) {
        close(conn.fd);
        conn.fd = -1;
    }
    if (client.connected)
        log_warn("lost the scheduler (%s): %s", why,
                 client.fail_closed ? "GPU work waits until it is back"
                                    : "running unscheduled until it is back");
    client.connected = false;
    /* The next scheduler sends its own terms, from none. */
    atomic_store_explicit(&yield_idle_release_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&yield_max_backlog_ns, 0, memory_order_relaxed);
    gate_locks_lost_locked();
}

static void disconnect(const char *why)
{
    pthread_mutex_lock(&client.mu);
    disconnect_locked(why);
    pthread_mutex_unlock(&client.mu);
    conn.observer->disconnected();
}

/* The first attempt, or one after a loss, ended without a connection.
 * Called with client.mu, releases it. */
static void attempt_failed(void)
{
    client.attempted = true;
    gate_mode_changed_locked();
    pthread_mutex_unlock(&client.mu);
    conn.observer->disconnected();
}

/* Sends REGISTER on fd and reads the answer into *m: 0 (REGISTER_OK or
 * REFUSED) or a proto_error. */
static int register_on(int fd, struct msg *m)
{
    int rc, received;

    *m = (struct msg){.type = MSG_REGISTER, .u.reg = conn.reg};
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
    conn.fd = fd;
    client.connected = true;
    client.scheduling_on = ok->scheduling_on;
    client.oversub_node = ok->oversub_default;
    for (int i = 0; i < client.n_gpus; i++) {
        client.known[i] = ok->gpu_known[i];
        if (!client.known[i])
            log_warn("the scheduler does not manage GPU %s: it runs "
                     "unscheduled",
                     conn.reg.gpu_uuids[i]);
    }
    log_info("registered with the scheduler as client %llu%s",
             (unsigned long long)ok->client_id,
             conn.registrations++ ? " (reconnected)" : "");
    /* A scheduler that did not swap us out awaits no swap-in. */
    for (int i = 0; i < client.n_gpus; i++)
        watch[i].swap_in_due = false;
    conn.warned_absent = false;
    conn.warned_refused = false;
    conn.retry_ns = 0; /* the next refusal waits reconnect_ns first */
    gate_mode_changed_locked();
    for (int i = 0; i < client.n_gpus; i++)
        managed[i] = client.known[i];
    pthread_mutex_unlock(&client.mu);
    conn.observer->registered(client.n_gpus, managed);
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

    conn.retry_ns = conn.retry_ns ? 2 * conn.retry_ns : conn.reconnect_ns;
    if (conn.retry_ns > RETRY_MAX_NS)
        conn.retry_ns = RETRY_MAX_NS;
    if (conn.warned_refused)
        return;
    conn.warned_refused = true;
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
        return conn.reconnect_ns;
    fd = unix_connect(path);
    if (fd < 0) {
        pthread_mutex_lock(&client.mu);
        if (!conn.warned_absent)
            log_warn("no scheduler at %s (%s): %s; retrying every %.1fs", path,
                     strerror(errno),
                     client.fail_closed ? "GPU work waits for it (fail-closed)"
                                        : "running unscheduled (fail-open)",
                     (double)conn.reconnect_ns / 1e9);
        conn.warned_absent = true;
        attempt_failed();
        return conn.reconnect_ns;
    }
    rc = register_on(fd, &m);
    pthread_mutex_lock(&client.mu);
    if (rc || m.type == MSG_REFUSED) {
        refused_locked(path, rc, &m);
        uint64_t wait = conn.retry_ns;
        close(fd);
        attempt_failed();
        return wait;
    }
    registered(fd, &m.u.reg_ok);
    return conn.reconnect_ns;
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
        if (client.known[i])
            gate_close_and_drain(i, &drained_at);
    }
    pthread_mutex_lock(&client.mu);
    gate_mode_changed_locked();
    pthread_mutex_unlock(&client.mu);
}

/* ---- memory-aware scheduling ------------------------------------------- */

/* With tell, answers the scheduler (SWAPPED); logs a swap told or one
 * that moved bytes. */
static void report_swap(int gpu, enum swap_direction direction, uint64_t bytes,
                        uint64_t duration_ns, bool tell)
{
    struct msg m = {.type = MSG_SWAPPED};

    m.u.swap =
        (struct msg_swap){(uint8_t)gpu, (uint8_t)direction, bytes, duration_ns};
    if (tell)
        conn_send(&m);
    if (!tell && bytes == 0)
        return;
    log_info("gpu %d: swapped %s %.1f MiB in %.3f s (%.1f GB/s)", gpu,
             direction == SWAP_OUT ? "out" : "in", (double)bytes / (1 << 20),
             (double)duration_ns / 1e9,
             duration_ns ? (double)bytes / (double)duration_ns : 0.0);
}

/* EVICT: the scheduler needs the room. The gate is closed (the lock went
 * back before), so nothing of ours runs while the memory moves. A process
 * without swap callbacks answers with 0 bytes: it has nothing evictable;
 * so does one whose host copy its memory cgroup could not take, after the
 * ledger has reported its memory as staying. */
static void swap_out(int gpu)
{
    uint64_t start = now_ns(), bytes = 0;

    /* Even when no byte moves (a second EVICT, or only blank allocations
     * whose pages are discarded), what is out must come back before the
     * gate opens, in every mode: from now on, should the scheduler go. */
    gate_memory_out(gpu);
    if (client.ops.swap_out && conn.observer->swap_out_fits(gpu))
        bytes = client.ops.swap_out(gpu, client.ops.user);
    watch[gpu].swap_in_due = watch[gpu].swap_in_due || bytes > 0;
    report_swap(gpu, SWAP_OUT, bytes, now_ns() - start, true);
}

/* Before the gate opens: memory that went out comes back, with one
 * explicit copy rather than page faults under the first kernels. False
 * while some of it found no room on the GPU: it stays on the host, and
 * the next call brings the rest. */
static bool bring_memory_back(int gpu)
{
    if (!gate_memory_is_out(gpu))
        return true;
    uint64_t start = now_ns(), bytes = 0;
    bool back = !client.ops.swap_in ||
                client.ops.swap_in(gpu, client.ops.user, &bytes);
    /* The scheduler waits for a swap-in only after a swap-out of more
     * than 0 bytes (docs/protocol.md); after blank ones it would log the
     * answer as unsolicited. */
    report_swap(gpu, SWAP_IN, bytes, now_ns() - start, watch[gpu].swap_in_due);
    watch[gpu].swap_in_due = false;
    if (back)
        gate_memory_back(gpu);
    return back;
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
 * process may submit; until then the scheduler gives it a trial beside
 * others (LOAD_FIRST_REPORT_NS). Later reports come every LOAD_REPORT_NS. */
#define LOAD_SKIP_NS (500 * NS_PER_MS)
#define LOAD_FIRST_NS (250 * NS_PER_MS)
#define LOAD_REPORT_NS (500 * NS_PER_MS)
_Static_assert(LOAD_SKIP_NS + LOAD_FIRST_NS < LOAD_FIRST_REPORT_NS,
               "the first report comes within the scheduler's trial");

/* Tells the scheduler how busy this process kept each GPU it held since
 * the last report (auto mode co-runs light clients only). */
static void report_load(void)
{
    uint64_t now = now_ns();

    for (int i = 0; i < client.n_gpus; i++) {
        struct gpu_watch *g = &watch[i];
        if (!client.known[i])
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
    gate_locks_lost_locked();
    pthread_mutex_unlock(&client.mu);
}

static void handle_lock_ok(int gpu, uint32_t lease)
{
    if (!bring_memory_back(gpu)) {
        gate_lock_declined(gpu, lease);
        return;
    }
    watch[gpu].quiet_since = now_ns();
    watch[gpu].seen_submits = gate_submits_total();
    gate_lock_granted(gpu, lease);
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
        gate_drop_asked(gpu, m->u.lock.lease, "preempted");
        return 0;
    case MSG_DROP_GANG_LOCK:
        gate_gang_drop_asked(gpu, m->u.lock.lease);
        return 0;
    case MSG_DRAIN_TO:
        gate_drain_to(gpu, m->u.drain.lease, m->u.drain.collectives);
        return 0;
    case MSG_UPDATE_LIMIT:
    case MSG_MEM_GRANT:
    case MSG_MEM_RECLAIM:
        conn.observer->message(m);
        return 0;
    case MSG_UPDATE_YIELD:
        atomic_store_explicit(&yield_idle_release_ns,
                              m->u.yield.idle_release_ns, memory_order_relaxed);
        atomic_store_explicit(&yield_max_backlog_ns, m->u.yield.max_backlog_ns,
                              memory_order_relaxed);
        return 0;
    case MSG_UPDATE_CORE_LIMIT:
        conn.core_limit = m->u.core.percent;
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
    uint8_t limit = conn.core_limit;
    bool pacing = !client.connected && client.attempted &&
                  !client.fail_closed && limit > 0 && limit < 100;
    if (!pacing || now >= slice_start + PACE_SLICE_NS) {
        if (client.paced_shut) {
            client.paced_shut = false;
            gate_mode_changed_locked();
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
    uint64_t terms =
        atomic_load_explicit(&yield_idle_release_ns, memory_order_relaxed);

    return terms && terms < conn.idle_release_ns ? terms : conn.idle_release_ns;
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
        struct gpu_watch *g = &watch[i];
        bool idle = false;
        uint32_t lease;
        pthread_mutex_lock(&client.mu);
        if (gate_held_locked(i, &lease)) {
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
        pthread_mutex_unlock(&client.mu);
        if (!idle || !client.ops.completed(i, client.ops.user))
            continue;
        if (g->complete_seen)
            gate_drop_asked(i, lease, "idle");
        uint32_t current;
        pthread_mutex_lock(&client.mu);
        gate_held_locked(i, &current);
        pthread_mutex_unlock(&client.mu);
        g->complete_seen = g->seen_submits == submits && current == lease;
    }
}

/* Runs what is due while away or behind (pacing, catch-ups) and returns
 * how long the thread may sleep: until the next reconnection, pace slice
 * or catch-up, or half the idle release time while connected. */
static int next_wake_ms(uint64_t now, uint64_t next_connect)
{
    /* A lender's short idle release is polled for only while it holds a
     * GPU: between its requests it wakes no more than any client. */
    uint64_t idle = gate_holds_any() ? idle_release_ns() : conn.idle_release_ns;
    int timeout_ms = (int)(idle / 2 / NS_PER_MS) + 1;

    if (conn.fd < 0) {
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
    int got = frame_reader_fill(reader, conn.fd);

    while (got >= 0 && (got = frame_reader_next(reader, &m)) > 0)
        if (handle_message(&m))
            got = PROTO_E_TYPE;
    if (got < 0) {
        disconnect(proto_strerror(got));
        *next_connect = now_ns() + conn.reconnect_ns;
    }
}

static void *conn_thread(void *arg)
{
    struct frame_reader *reader = malloc(sizeof(*reader));
    uint64_t next_connect = 0;

    (void)arg;
    if (!reader)
        return NULL;
    for (;;) {
        struct pollfd fds[3] = {{.fd = conn.wake_fd, .events = POLLIN},
                                {.fd = -1, .events = POLLIN},
                                {.fd = gate_wake_fd(), .events = POLLIN}};
        uint64_t now = now_ns();

        if (conn.fd < 0 && now >= next_connect) {
            uint64_t wait = try_connect();
            reader->len = 0;
            next_connect = now + wait;
        }
        fds[1].fd = conn.fd;
        int rc = poll(fds, 3, next_wake_ms(now, next_connect));
        if (rc < 0 && errno != EINTR)
            break;
        if (fds[0].revents)
            break; /* nvshare_client_stop() */
        if (fds[2].revents) {
            uint64_t count;
            if (read(gate_wake_fd(), &count, sizeof(count)) < 0)
                log_debug("gate wake-up: %s", strerror(errno));
        }
        if (fds[1].revents)
            read_messages(reader, &next_connect);
        for (int gpu = 0; gpu < client.n_gpus; gpu++)
            if (gate_memory_wanted(gpu))
                bring_memory_back(gpu);
        if (client.connected) {
            release_idle_gpus();
            conn.observer->tick(client.n_gpus);
            report_load();
        }
    }
    free(reader);
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------ */

/* Identity and limits as registration declares them. */
static void declare(struct msg_register *reg, const struct client_settings *s)
{
    reg->memory_limit = s->memory_limit;
    reg->core_limit = s->core_limit;
    reg->priority = s->priority;
    reg->oversub = s->oversub < 0 ? OVERSUB_NODE_DEFAULT
                   : s->oversub   ? OVERSUB_ON
                                  : OVERSUB_OFF;
    memcpy(reg->pod_namespace, s->pod_namespace, sizeof(reg->pod_namespace));
    memcpy(reg->pod_name, s->pod_name, sizeof(reg->pod_name));
    memcpy(reg->container_name, s->container_name, sizeof(reg->container_name));
    memcpy(reg->job_id, s->job_id, sizeof(reg->job_id));
}

int conn_start(const struct nvshare_client_config *config,
               const struct conn_observer *observer)
{
    const struct client_settings *s = client_settings();

    conn.observer = observer;
    memset(&conn.reg, 0, sizeof(conn.reg));
    for (int i = 0; i < config->n_gpus; i++)
        snprintf(conn.reg.gpu_uuids[i], PROTO_UUID_MAX, "%s",
                 config->gpu_uuids[i]);
    conn.reg.n_gpus = (uint16_t)config->n_gpus;
    declare(&conn.reg, s);
    conn.idle_release_ns = s->idle_release_ns;
    conn.reconnect_ns = s->reconnect_ns;
    conn.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (conn.wake_fd < 0)
        return -1;
    if (pthread_create(&conn.thread, NULL, conn_thread, NULL) != 0) {
        close(conn.wake_fd);
        conn.wake_fd = -1;
        return -1;
    }
    return 0;
}

int conn_stop(void)
{
    uint64_t one = 1;

    if (write(conn.wake_fd, &one, sizeof(one)) != sizeof(one))
        return -1;
    pthread_join(conn.thread, NULL);
    pthread_mutex_lock(&client.mu);
    if (conn.fd >= 0)
        close(conn.fd);
    close(conn.wake_fd);
    conn.fd = conn.wake_fd = -1;
    client.connected = false;
    pthread_mutex_unlock(&client.mu);
    return 0;
}

void conn_after_fork(void)
{
    if (conn.fd >= 0)
        close(conn.fd);
    if (conn.wake_fd >= 0)
        close(conn.wake_fd);
    conn.fd = conn.wake_fd = -1;
    memset(watch, 0, sizeof(watch));
}

uint64_t nvshare_max_backlog_ns(void)
{
    return atomic_load_explicit(&yield_max_backlog_ns, memory_order_relaxed);
}

void nvshare_note_busy(int gpu, uint64_t busy_ns, uint64_t span_ns)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    atomic_fetch_add_explicit(&busy_total_ns[gpu], busy_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&span_total_ns[gpu], span_ns, memory_order_relaxed);
}
