/* client.c - the scheduler connection and per-GPU locks inside an
 * application (see nvshare_client.h for the contract).
 *
 * Threads. Application threads only touch the socket on the slow path (to
 * send REQ_LOCK) and otherwise read their gate. One client thread owns
 * everything else: connecting and re-registering, reading the scheduler's
 * messages, draining on DROP_LOCK, giving idle GPUs back. All shared state
 * below is guarded by state.mu, except the gates (atomics) and the
 * per-thread slots (single writer).
 *
 * Failure policy: a scheduler that is absent, dies or misbehaves opens the
 * gates (fail-open) or keeps them shut until it is back (fail-closed);
 * nothing here ever ends the process. */
#include "nvshare_client.h"
#include "client_internal.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "env.h"
#include "log.h"
#include "protocol.h"
#include "sock.h"

/* How long an allocation waits for the node's oversubscription default:
 * the bound quota reservations wait for the scheduler (memory.c). */
#define REGISTRATION_WAIT_SEC 2

_Atomic int nvshare_gate_open[NVSHARE_MAX_GPUS];
__thread struct nvshare_thread *nvshare_self
    __attribute__((tls_model("initial-exec")));

struct gpu_lock {
    bool known;       /* the scheduler manages this GPU */
    bool held;
    bool requested;   /* REQ_LOCK sent, LOCK_OK not yet received */
    bool in_use_sent; /* LOCK_IN_USE sent under the current lease */
    uint32_t lease;
    uint64_t grants;
    uint64_t seen_submits; /* idle detection: submissions at last poll */
    uint64_t quiet_since;  /* when seen_submits last changed */
    bool swapped_out;      /* its memory went to the host on EVICT */
    uint64_t load_busy_ns, load_span_ns; /* totals at the last LOAD */
    uint64_t load_sent_at; /* 0: no report yet */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t changed; /* connection, scheduling or a lock changed */
    bool started;
    bool attempted;   /* the first connection attempt has finished */
    bool connected;   /* registered with the scheduler */
    bool scheduling_on;
    bool warned_absent;
    unsigned registrations;
    bool fail_closed;
    bool membarrier_ok;
    int fd;
    int wake_fd;      /* eventfd: stop request */
    pthread_t thread;
    int n_gpus;
    char uuids[NVSHARE_MAX_GPUS][PROTO_UUID_MAX];
    struct gpu_lock gpus[NVSHARE_MAX_GPUS];
    struct nvshare_client_ops ops;
    uint64_t idle_release_ns;
    uint64_t reconnect_ns;
    struct msg_register reg;
    int oversub_env;   /* NVSHARE_ENABLE_OVERSUB: 0, 1, or -1 (unset) */
    bool oversub_node; /* the scheduler's default, from REGISTER_OK */
} state = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .changed = PTHREAD_COND_INITIALIZER,
    .fd = -1,
    .wake_fd = -1,
    .oversub_env = -1,
};

/* nvshare_note_busy() totals, read by report_load(). */
static _Atomic uint64_t busy_total_ns[NVSHARE_MAX_GPUS];
static _Atomic uint64_t span_total_ns[NVSHARE_MAX_GPUS];

/* Per-thread slots: a lock-free list that only grows; slots of exited
 * threads are reused, so its length is the peak number of threads. */
static struct nvshare_thread *_Atomic thread_list;
static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;

static void thread_exit(void *slot)
{
    struct nvshare_thread *t = slot;

    t->inflight_gpu = 0;
    atomic_store(&t->in_use, 0);
}

static void make_thread_key(void)
{
    pthread_key_create(&thread_key, thread_exit);
}

struct nvshare_thread *nvshare_thread_register(void)
{
    struct nvshare_thread *t;

    pthread_once(&thread_key_once, make_thread_key);
    for (t = atomic_load(&thread_list); t; t = t->next) {
        int free_slot = 0;
        if (atomic_compare_exchange_strong(&t->in_use, &free_slot, 1))
            break;
    }
    if (!t) {
        static struct nvshare_thread shared_fallback;
        t = calloc(1, sizeof(*t));
        /* Out of memory: share one slot. Marks of threads using it may be
         * lost, which can only let a submission race a drain; never fail
         * the application over it. */
        if (!t)
            return nvshare_self = &shared_fallback;
        atomic_store(&t->in_use, 1);
        t->next = atomic_load(&thread_list);
        while (!atomic_compare_exchange_weak(&thread_list, &t->next, t))
            ;
    }
    pthread_setspecific(thread_key, t);
    nvshare_self = t;
    return t;
}

/* ---- gates ------------------------------------------------------------- */

static void set_gate(int gpu, bool open)
{
    atomic_store(&nvshare_gate_open[gpu], open ? 1 : 0);
}

/* Whether submissions on gpu may proceed without holding its lock. Called
 * with state.mu held. */
static bool runs_unscheduled(int gpu)
{
    if (!state.started)
        return true;
    if (!state.connected)
        return state.attempted && !state.fail_closed;
    return !state.scheduling_on || !state.gpus[gpu].known;
}

static void open_gates_for_current_mode(void)
{
    for (int i = 0; i < state.n_gpus; i++)
        set_gate(i, runs_unscheduled(i) || state.gpus[i].held);
}

static int send_locked(const struct msg *m)
{
    if (state.fd < 0)
        return -1;
    int rc = msg_send(state.fd, m);
    if (rc)
        log_debug("sending %s failed: %s", msg_type_name(m->type),
                  proto_strerror(rc));
    return rc;
}

int client_send(const struct msg *m)
{
    pthread_mutex_lock(&state.mu);
    int rc = send_locked(m);
    pthread_mutex_unlock(&state.mu);
    return rc;
}

static void request_lock_locked(int gpu)
{
    struct msg m = {.type = MSG_REQ_LOCK, .u.lock = {.gpu = (uint8_t)gpu}};

    if (state.gpus[gpu].requested || state.gpus[gpu].held)
        return;
    if (send_locked(&m) == 0)
        state.gpus[gpu].requested = true;
}

void nvshare_gate_wait(int gpu, struct nvshare_thread *self)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    for (;;) {
        /* Not in flight while waiting: a drain must not wait for us. */
        self->inflight_gpu = 0;
        memory_flush(gpu);
        pthread_mutex_lock(&state.mu);
        while (!atomic_load(&nvshare_gate_open[gpu])) {
            if (gpu >= state.n_gpus || runs_unscheduled(gpu))
                break;
            if (state.connected)
                request_lock_locked(gpu);
            pthread_cond_wait(&state.changed, &state.mu);
        }
        /* The first submission under a new lease: tell the scheduler, so
         * that this thread's wake-up is not billed to the pod. */
        if (gpu < state.n_gpus && state.gpus[gpu].held &&
            !state.gpus[gpu].in_use_sent) {
            struct msg m = {.type = MSG_LOCK_IN_USE,
                            .u.lock = {.gpu = (uint8_t)gpu,
                                       .lease = state.gpus[gpu].lease}};
            state.gpus[gpu].in_use_sent = true;
            send_locked(&m);
        }
        pthread_mutex_unlock(&state.mu);
        self->inflight_gpu = gpu + 1;
        atomic_signal_fence(memory_order_seq_cst);
        /* The gate may have closed again between the unlock and the mark:
         * only a check after the mark is published is conclusive. */
        if (atomic_load(&nvshare_gate_open[gpu]) || gpu >= state.n_gpus)
            return;
        pthread_mutex_lock(&state.mu);
        bool free_run = runs_unscheduled(gpu);
        pthread_mutex_unlock(&state.mu);
        if (free_run)
            return;
    }
}

/* After a gate closed: makes sure no application thread is still inside a
 * submission to gpu. membarrier() forces every running thread through a
 * full barrier, so each has either published its in-flight mark (which we
 * then see) or will read the closed gate. */
static void wait_inflight(int gpu)
{
    if (state.membarrier_ok)
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    else
        atomic_thread_fence(memory_order_seq_cst);
    for (struct nvshare_thread *t = atomic_load(&thread_list); t; t = t->next)
        for (int spins = 0; t->inflight_gpu == gpu + 1; spins++) {
            /* Most submissions return in microseconds; a synchronous copy
             * may take far longer, so back off rather than spin. */
            if (spins < 100)
                sched_yield();
            else
                nanosleep(&(struct timespec){.tv_nsec = 50000}, NULL);
        }
}

static uint64_t submits_total(void)
{
    uint64_t sum = 0;

    for (struct nvshare_thread *t = atomic_load(&thread_list); t; t = t->next)
        sum += t->submits;
    return sum;
}

/* Closes gpu's gate, waits out in-flight submissions and drains. Returns
 * the drain time. Called on the client thread without state.mu held. */
static uint64_t close_and_drain(int gpu)
{
    uint64_t start;

    set_gate(gpu, false);
    wait_inflight(gpu);
    start = now_ns();
    state.ops.drain(gpu, state.ops.user);
    return now_ns() - start;
}

/* Gives gpu back under lease (if it is still the current lease). */
static void release_lease(int gpu, uint32_t lease, const char *why)
{
    pthread_mutex_lock(&state.mu);
    bool current = state.gpus[gpu].held && state.gpus[gpu].lease == lease;
    pthread_mutex_unlock(&state.mu);
    if (!current)
        return; /* stale: we already released it */

    uint64_t drain_ns = close_and_drain(gpu);
    struct msg m = {.type = MSG_LOCK_RELEASED,
                    .u.lock = {.gpu = (uint8_t)gpu, .lease = lease,
                               .drain_ns = drain_ns}};

    pthread_mutex_lock(&state.mu);
    if (state.gpus[gpu].held && state.gpus[gpu].lease == lease) {
        state.gpus[gpu].held = false;
        send_locked(&m);
        log_debug("released gpu %d (%s), drain %.3f ms", gpu, why,
                  (double)drain_ns / 1e6);
    }
    open_gates_for_current_mode();
    pthread_cond_broadcast(&state.changed); /* waiters re-request */
    pthread_mutex_unlock(&state.mu);
}

void nvshare_release(int gpu)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&state.mu);
    bool held = gpu < state.n_gpus && state.gpus[gpu].held;
    uint32_t lease = state.gpus[gpu].lease;
    pthread_mutex_unlock(&state.mu);
    if (held)
        release_lease(gpu, lease, "released by the application");
}

/* ---- connection ---------------------------------------------------------- */

static void disconnect_locked(const char *why)
{
    if (state.fd >= 0) {
        close(state.fd);
        state.fd = -1;
    }
    if (state.connected)
        log_warn("lost the scheduler (%s): %s", why,
                 state.fail_closed ? "GPU work waits until it is back"
                                   : "running unscheduled until it is back");
    state.connected = false;
    for (int i = 0; i < state.n_gpus; i++) {
        state.gpus[i].held = false;
        state.gpus[i].requested = false;
    }
    open_gates_for_current_mode();
    pthread_cond_broadcast(&state.changed);
}

static void disconnect(const char *why)
{
    pthread_mutex_lock(&state.mu);
    disconnect_locked(why);
    pthread_mutex_unlock(&state.mu);
    memory_on_disconnected();
}

static void try_connect(void)
{
    char path[256];
    struct msg m = {.type = MSG_REGISTER};
    int fd, rc;

    if (socket_path(CLIENT_SOCKET_NAME, path, sizeof(path)))
        return;
    fd = unix_connect(path);
    if (fd < 0) {
        pthread_mutex_lock(&state.mu);
        if (!state.warned_absent)
            log_warn("no scheduler at %s (%s): %s; retrying every %.1fs", path,
                     strerror(errno),
                     state.fail_closed ? "GPU work waits for it (fail-closed)"
                                       : "running unscheduled (fail-open)",
                     (double)state.reconnect_ns / 1e9);
        state.warned_absent = true;
        state.attempted = true;
        open_gates_for_current_mode();
        pthread_cond_broadcast(&state.changed);
        pthread_mutex_unlock(&state.mu);
        memory_on_disconnected();
        return;
    }
    m.u.reg = state.reg;
    m.u.reg.pid = (uint32_t)getpid();
    rc = msg_send(fd, &m);
    if (rc == 0)
        rc = msg_recv(fd, &m, 5000);
    if (rc == 0 && m.type != MSG_REGISTER_OK)
        rc = PROTO_E_TYPE;
    if (rc == 0 && m.u.reg_ok.n_gpus != state.n_gpus)
        rc = PROTO_E_FIELD;
    pthread_mutex_lock(&state.mu);
    state.attempted = true;
    if (rc) {
        log_warn("scheduler at %s refused registration: %s", path,
                 proto_strerror(rc));
        close(fd);
        open_gates_for_current_mode();
        pthread_cond_broadcast(&state.changed);
        pthread_mutex_unlock(&state.mu);
        memory_on_disconnected();
        return;
    }
    state.fd = fd;
    state.connected = true;
    state.scheduling_on = m.u.reg_ok.scheduling_on;
    state.oversub_node = m.u.reg_ok.oversub_default;
    for (int i = 0; i < state.n_gpus; i++) {
        state.gpus[i].known = m.u.reg_ok.gpu_known[i];
        if (!state.gpus[i].known)
            log_warn("the scheduler does not manage GPU %s: it runs unscheduled",
                     state.uuids[i]);
    }
    log_info("registered with the scheduler as client %llu%s",
             (unsigned long long)m.u.reg_ok.client_id,
             state.registrations++ ? " (reconnected)" : "");
    state.warned_absent = false;
    open_gates_for_current_mode();
    pthread_cond_broadcast(&state.changed);
    uint8_t managed[NVSHARE_MAX_GPUS];
    for (int i = 0; i < state.n_gpus; i++)
        managed[i] = state.gpus[i].known;
    pthread_mutex_unlock(&state.mu);
    memory_on_registered(state.n_gpus, managed);
}

/* Scheduling switched on: everyone was running freely, so drain before
 * anyone is granted a lock. */
static void handle_sched_on(void)
{
    pthread_mutex_lock(&state.mu);
    state.scheduling_on = true;
    pthread_mutex_unlock(&state.mu);
    for (int i = 0; i < state.n_gpus; i++)
        if (state.gpus[i].known)
            close_and_drain(i);
    pthread_mutex_lock(&state.mu);
    open_gates_for_current_mode();
    pthread_cond_broadcast(&state.changed);
    pthread_mutex_unlock(&state.mu);
}

/* ---- memory-aware scheduling ------------------------------------------- */

static void send_swapped(int gpu, enum swap_direction direction, uint64_t bytes,
                         uint64_t duration_ns)
{
    struct msg m = {.type = MSG_SWAPPED};

    m.u.swap = (struct msg_swap){(uint8_t)gpu, (uint8_t)direction, bytes,
                                 duration_ns};
    client_send(&m);
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

    if (state.ops.swap_out)
        bytes = state.ops.swap_out(gpu, state.ops.user);
    pthread_mutex_lock(&state.mu);
    /* Even when no byte moved (a second EVICT, or only blank allocations
     * whose pages were discarded), what is out must come back before the
     * gate opens. */
    state.gpus[gpu].swapped_out = true;
    pthread_mutex_unlock(&state.mu);
    send_swapped(gpu, SWAP_OUT, bytes, now_ns() - start);
}

/* Before the gate opens on a grant: memory that went out comes back with
 * one explicit prefetch rather than page faults under the first kernels. */
static void swap_in_if_out(int gpu)
{
    pthread_mutex_lock(&state.mu);
    bool out = state.gpus[gpu].swapped_out;
    state.gpus[gpu].swapped_out = false;
    pthread_mutex_unlock(&state.mu);
    if (!out || !state.ops.swap_in)
        return;
    uint64_t start = now_ns();
    uint64_t bytes = state.ops.swap_in(gpu, state.ops.user);
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
             "running clients rotate in %.1f s at the latest", w->gpu,
             (double)w->need / (1 << 20), (double)w->free / (1 << 20),
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

    for (int i = 0; i < state.n_gpus; i++) {
        struct gpu_lock *g = &state.gpus[i];
        uint64_t busy = atomic_load_explicit(&busy_total_ns[i], memory_order_relaxed);
        uint64_t span = atomic_load_explicit(&span_total_ns[i], memory_order_relaxed);
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
        client_send(&m);
    }
}

/* Returns 0, or -1 if the message breaks the protocol. */
static int handle_message(const struct msg *m)
{
    int gpu = m->u.lock.gpu;

    switch (m->type) {
    case MSG_SCHED_ON:
        handle_sched_on();
        return 0;
    case MSG_SCHED_OFF:
        pthread_mutex_lock(&state.mu);
        state.scheduling_on = false;
        for (int i = 0; i < state.n_gpus; i++) {
            state.gpus[i].held = false;
            state.gpus[i].requested = false;
        }
        open_gates_for_current_mode();
        pthread_cond_broadcast(&state.changed);
        pthread_mutex_unlock(&state.mu);
        return 0;
    case MSG_LOCK_OK:
        if (gpu >= state.n_gpus)
            return -1;
        swap_in_if_out(gpu);
        pthread_mutex_lock(&state.mu);
        state.gpus[gpu].held = true;
        state.gpus[gpu].requested = false;
        state.gpus[gpu].in_use_sent = false;
        state.gpus[gpu].lease = m->u.lock.lease;
        state.gpus[gpu].grants++;
        state.gpus[gpu].quiet_since = now_ns();
        state.gpus[gpu].seen_submits = submits_total();
        set_gate(gpu, true);
        pthread_cond_broadcast(&state.changed);
        pthread_mutex_unlock(&state.mu);
        return 0;
    case MSG_DROP_LOCK:
        if (gpu >= state.n_gpus)
            return -1;
        release_lease(gpu, m->u.lock.lease, "preempted");
        return 0;
    case MSG_UPDATE_LIMIT:
    case MSG_MEM_GRANT:
    case MSG_MEM_RECLAIM:
        if (m->u.mem.gpu >= state.n_gpus)
            return -1;
        memory_on_message(m);
        return 0;
    case MSG_EVICT:
        if (m->u.swap.gpu >= state.n_gpus)
            return -1;
        swap_out(m->u.swap.gpu);
        return 0;
    case MSG_PREPARE_SWAP:
        if (m->u.swap.gpu >= state.n_gpus)
            return -1;
        if (state.ops.prepare_swap)
            state.ops.prepare_swap(m->u.swap.gpu, state.ops.user);
        return 0;
    case MSG_WAIT_FOR_MEM:
    case MSG_MEM_AVAILABLE:
        if (m->u.wait.gpu >= state.n_gpus)
            return -1;
        log_memory_wait(m);
        return 0;
    default:
        log_warn("unexpected %s from the scheduler", msg_type_name(m->type));
        return -1;
    }
}

/* Gives back GPUs nobody has submitted to for idle_release_ns once their
 * work has completed. */
static void release_idle_gpus(void)
{
    uint64_t now = now_ns(), submits = submits_total();

    if (!state.ops.completed)
        return;
    for (int i = 0; i < state.n_gpus; i++) {
        pthread_mutex_lock(&state.mu);
        struct gpu_lock *g = &state.gpus[i];
        bool idle = false;
        uint32_t lease = g->lease;
        if (g->held) {
            /* submits counts every GPU: any activity keeps all held, which
             * errs on the side of keeping a busy process's locks. */
            if (submits != g->seen_submits) {
                g->seen_submits = submits;
                g->quiet_since = now;
            } else {
                idle = now - g->quiet_since >= state.idle_release_ns;
            }
        }
        pthread_mutex_unlock(&state.mu);
        if (idle && state.ops.completed(i, state.ops.user))
            release_lease(i, lease, "idle");
    }
}

static void *client_thread(void *arg)
{
    struct frame_reader *reader = malloc(sizeof(*reader));
    uint64_t next_connect = 0;

    (void)arg;
    if (!reader)
        return NULL;
    for (;;) {
        struct pollfd fds[2] = {{.fd = state.wake_fd, .events = POLLIN},
                                {.fd = -1, .events = POLLIN}};
        uint64_t now = now_ns();
        int timeout_ms;

        if (state.fd < 0 && now >= next_connect) {
            try_connect();
            reader->len = 0;
            next_connect = now + state.reconnect_ns;
        }
        fds[1].fd = state.fd;
        timeout_ms = (int)(state.idle_release_ns / 2 / NS_PER_MS) + 1;
        if (state.fd < 0) {
            uint64_t wait = next_connect > now ? next_connect - now : 0;
            timeout_ms = (int)(wait / NS_PER_MS) + 1;
        }
        int rc = poll(fds, 2, timeout_ms);
        if (rc < 0 && errno != EINTR)
            break;
        if (fds[0].revents)
            break; /* nvshare_client_stop() */
        if (fds[1].revents) {
            struct msg m;
            int got = frame_reader_fill(reader, state.fd);
            while (got >= 0 && (got = frame_reader_next(reader, &m)) > 0)
                if (handle_message(&m))
                    got = PROTO_E_TYPE;
            if (got < 0) {
                disconnect(proto_strerror(got));
                next_connect = now_ns() + state.reconnect_ns;
            }
        }
        if (state.connected) {
            release_idle_gpus();
            memory_report(state.n_gpus);
            report_load();
        }
    }
    free(reader);
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------ */

static char pod_label[2 * PROTO_NAME_MAX];
static pthread_once_t pod_label_once = PTHREAD_ONCE_INIT;

static void make_pod_label(void)
{
    const char *ns = getenv("NVSHARE_POD_NAMESPACE");
    const char *pod = getenv("NVSHARE_POD_NAME");

    if (pod && *pod)
        snprintf(pod_label, sizeof(pod_label), "%s/%s", ns && *ns ? ns : "default",
                 pod);
    else
        snprintf(pod_label, sizeof(pod_label), "-");
}

const char *client_pod_name(void)
{
    pthread_once(&pod_label_once, make_pod_label);
    return pod_label;
}

static void copy_env(char *dst, size_t len, const char *name)
{
    const char *value = getenv(name);

    snprintf(dst, len, "%s", value ? value : "");
}

static void read_declared_limits(struct msg_register *reg)
{
    reg->memory_limit = env_size_bytes("NVSHARE_GPU_MEMORY_LIMIT", 0);
    reg->core_limit = (uint8_t)env_int_range("NVSHARE_GPU_CORE_LIMIT", 1, 100, 0);
    const char *oversub = getenv("NVSHARE_ENABLE_OVERSUB");
    state.oversub_env = oversub && *oversub
                            ? env_switch("NVSHARE_ENABLE_OVERSUB", false) : -1;
    reg->oversub = state.oversub_env < 0 ? OVERSUB_NODE_DEFAULT
                   : state.oversub_env ? OVERSUB_ON : OVERSUB_OFF;
    copy_env(reg->pod_namespace, sizeof(reg->pod_namespace),
             "NVSHARE_POD_NAMESPACE");
    copy_env(reg->pod_name, sizeof(reg->pod_name), "NVSHARE_POD_NAME");
    copy_env(reg->container_name, sizeof(reg->container_name),
             "NVSHARE_CONTAINER_NAME");
}

/* In a forked child the client thread does not exist and the connection
 * belongs to the parent: start over, unscheduled until started again. */
static void after_fork_in_child(void)
{
    pthread_mutex_init(&state.mu, NULL);
    pthread_cond_init(&state.changed, NULL);
    if (state.fd >= 0)
        close(state.fd);
    if (state.wake_fd >= 0)
        close(state.wake_fd);
    state.fd = state.wake_fd = -1;
    state.started = state.connected = state.attempted = false;
    memset(state.gpus, 0, sizeof(state.gpus));
    for (int i = 0; i < NVSHARE_MAX_GPUS; i++)
        set_gate(i, false); /* slow path: runs_unscheduled() says go */
    memory_after_fork();
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

int nvshare_client_start(const struct nvshare_client_config *config)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

    if (!config || !config->ops.drain || config->n_gpus < 1 ||
        config->n_gpus > NVSHARE_MAX_GPUS) {
        log_error("nvshare_client_start: need 1-%d GPUs and a drain callback",
                  NVSHARE_MAX_GPUS);
        return -1;
    }
    pthread_mutex_lock(&state.mu);
    if (state.started) {
        pthread_mutex_unlock(&state.mu);
        log_error("nvshare_client_start: already started");
        return -1;
    }
    state.n_gpus = config->n_gpus;
    state.ops = config->ops;
    memset(&state.reg, 0, sizeof(state.reg));
    for (int i = 0; i < config->n_gpus; i++) {
        snprintf(state.uuids[i], PROTO_UUID_MAX, "%s", config->gpu_uuids[i]);
        snprintf(state.reg.gpu_uuids[i], PROTO_UUID_MAX, "%s",
                 config->gpu_uuids[i]);
    }
    state.reg.n_gpus = (uint16_t)config->n_gpus;
    read_declared_limits(&state.reg);
    state.fail_closed = env_switch("NVSHARE_FAIL_CLOSED", false);
    state.idle_release_ns = env_duration_ns("NVSHARE_IDLE_RELEASE",
                                            250 * NS_PER_MS);
    state.reconnect_ns = env_duration_ns("NVSHARE_RECONNECT_INTERVAL",
                                         NS_PER_SEC);
    state.membarrier_ok =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
                0) == 0;
    if (!state.membarrier_ok)
        log_debug("membarrier unavailable: preemption uses a fence");
    state.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    state.started = true;
    memory_expect_scheduler();
    open_gates_for_current_mode(); /* closed until the first attempt */
    pthread_once(&atfork_once, register_atfork);
    if (state.wake_fd < 0 ||
        pthread_create(&state.thread, NULL, client_thread, NULL) != 0) {
        log_error("cannot start the client thread: running unscheduled");
        state.started = false;
        open_gates_for_current_mode();
        pthread_mutex_unlock(&state.mu);
        memory_on_disconnected();
        return -1;
    }
    pthread_mutex_unlock(&state.mu);
    return 0;
}

void nvshare_client_stop(void)
{
    uint64_t one = 1;

    pthread_mutex_lock(&state.mu);
    if (!state.started) {
        pthread_mutex_unlock(&state.mu);
        return;
    }
    pthread_mutex_unlock(&state.mu);
    if (write(state.wake_fd, &one, sizeof(one)) != sizeof(one))
        return;
    pthread_join(state.thread, NULL);
    pthread_mutex_lock(&state.mu);
    if (state.fd >= 0)
        close(state.fd);
    close(state.wake_fd);
    state.fd = state.wake_fd = -1;
    state.started = state.connected = false;
    for (int i = 0; i < NVSHARE_MAX_GPUS; i++)
        set_gate(i, true);
    pthread_cond_broadcast(&state.changed);
    pthread_mutex_unlock(&state.mu);
}

bool nvshare_client_connected(void)
{
    pthread_mutex_lock(&state.mu);
    bool connected = state.connected;
    pthread_mutex_unlock(&state.mu);
    return connected;
}

uint64_t nvshare_lock_grants(int gpu)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return 0;
    pthread_mutex_lock(&state.mu);
    uint64_t grants = state.gpus[gpu].grants;
    pthread_mutex_unlock(&state.mu);
    return grants;
}

/* ---- oversubscription and load ----------------------------------------- */

void nvshare_note_busy(int gpu, uint64_t busy_ns, uint64_t span_ns)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    atomic_fetch_add_explicit(&busy_total_ns[gpu], busy_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&span_total_ns[gpu], span_ns, memory_order_relaxed);
}

bool nvshare_oversub_enabled(void)
{
    bool on;

    pthread_mutex_lock(&state.mu);
    on = state.oversub_env >= 0 ? state.oversub_env : state.oversub_node;
    pthread_mutex_unlock(&state.mu);
    return on;
}

bool nvshare_oversub_for_allocation(void)
{
    struct timespec deadline;

    pthread_mutex_lock(&state.mu);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += REGISTRATION_WAIT_SEC;
    while (state.oversub_env < 0 && state.started && !state.attempted &&
           pthread_cond_timedwait(&state.changed, &state.mu, &deadline) !=
               ETIMEDOUT)
        ;
    bool on = state.oversub_env >= 0 ? state.oversub_env : state.oversub_node;
    pthread_mutex_unlock(&state.mu);
    return on;
}
