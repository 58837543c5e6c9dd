/* gate.c - the application threads' side of the client runtime, and the
 * one owner of the GPU locks' state: the per-GPU gates that
 * nvshare_submit_begin() reads, the per-thread in-flight marks, waiting at
 * a closed gate (REQ_LOCK), and giving a lock back exactly (membarrier,
 * then drain) when the connection thread says so (gate.h). It answers the
 * scheduler through the functions gate_start() installed, so it names no
 * file above it. See nvshare_client.h for the hot path and
 * client_internal.h for the locking. */
#include "gate.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client_internal.h"
#include "clock.h"
#include "log.h"

/* One GPU's lock, under client.mu. */
struct gpu_lock {
    bool held;
    bool requested;   /* REQ_LOCK sent, LOCK_OK not yet received */
    bool in_use_sent; /* LOCK_IN_USE sent under the current lease */
    uint32_t lease;
    uint64_t grants;
    /* Giving the lock back after DROP_LOCK, which the drain beat announces
     * (DRAINING) from drain_since on (0: not draining). */
    uint64_t drain_since;
    uint64_t beat_sent_at;
    /* A gang rank's drain (see gate_gang_drop_asked): DRAIN_POINT sent,
     * DRAIN_TO not received yet; then, while catch_up_to[gpu] is set,
     * launching up to the gang's drain point until catch_up_until. */
    bool agreeing;
    uint64_t catch_up_until;
    /* Its memory went to the host (EVICT): the gate stays shut, whatever
     * the mode, until all of it is back, since a kernel would find none. */
    bool memory_out;
    int waiters; /* application threads waiting at its gate */
};

static struct gpu_lock locks[NVSHARE_MAX_GPUS];
static struct gate_link to_scheduler;
/* Read by application threads before they take client.mu; NULL until the
 * first start. */
static void (*_Atomic before_lock_request)(int gpu);
static bool membarrier_ok;
/* eventfd: the connection thread has work for the gates: a catch-up
 * reached its drain point, or a thread waits for memory to come back. */
static int wake_fd = -1;
static pthread_cond_t beat = PTHREAD_COND_INITIALIZER; /* a drain began or
                                                          ended, or stop */
static pthread_t beat_thread;
static bool beat_running;

_Atomic int nvshare_gate_open[NVSHARE_MAX_GPUS];
__thread struct nvshare_thread *nvshare_self
    __attribute__((tls_model("initial-exec")));

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

static void gate_set(int gpu, bool open)
{
    atomic_store(&nvshare_gate_open[gpu], open ? 1 : 0);
}

/* Whether gpu goes without its lock: no scheduler (fail-open), scheduling
 * off, or a GPU the scheduler does not manage. With client.mu held. */
static bool lock_free(int gpu)
{
    if (!client.started)
        return true;
    if (!client.connected)
        return client.attempted && !client.fail_closed && !client.paced_shut;
    return !client.scheduling_on || !client.known[gpu];
}

/* Whether submissions on gpu may proceed without holding its lock. Called
 * with client.mu held. */
static bool runs_unscheduled(int gpu)
{
    return lock_free(gpu) && !locks[gpu].memory_out;
}

/* Whether the connection thread is to bring gpu's memory back by itself:
 * no lock will come, whose grant would. With client.mu held. */
static bool memory_wanted_locked(int gpu)
{
    return locks[gpu].memory_out && lock_free(gpu);
}

static void wake_connection(void)
{
    uint64_t one = 1;

    if (write(wake_fd, &one, sizeof(one)) != sizeof(one))
        log_debug("cannot wake the client thread: it looks on its tick");
}

static void gates_open_for_current_mode(void)
{
    for (int i = 0; i < client.n_gpus; i++)
        gate_set(i, runs_unscheduled(i) || locks[i].held);
}

void gate_mode_changed_locked(void)
{
    gates_open_for_current_mode();
    pthread_cond_broadcast(&client.changed);
}

static void request_lock_locked(int gpu)
{
    struct msg m = {.type = MSG_REQ_LOCK, .u.lock = {.gpu = (uint8_t)gpu}};

    if (locks[gpu].requested || locks[gpu].held)
        return;
    if (to_scheduler.send_locked(&m) == 0)
        locks[gpu].requested = true;
}

void nvshare_gate_wait(int gpu, struct nvshare_thread *self)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    for (;;) {
        /* Not in flight while waiting: a drain must not wait for us. */
        self->inflight_gpu = 0;
        void (*before)(int) = atomic_load(&before_lock_request);
        if (before) /* NULL before the first nvshare_client_start() */
            before(gpu);
        pthread_mutex_lock(&client.mu);
        while (!atomic_load(&nvshare_gate_open[gpu])) {
            if (gpu >= client.n_gpus || runs_unscheduled(gpu))
                break;
            if (client.connected)
                request_lock_locked(gpu);
            if (memory_wanted_locked(gpu))
                wake_connection();
            locks[gpu].waiters++;
            pthread_cond_wait(&client.changed, &client.mu);
            locks[gpu].waiters--;
        }
        /* The first submission under a new lease: tell the scheduler, so
         * that this thread's wake-up is not billed to the pod. */
        if (gpu < client.n_gpus && locks[gpu].held && !locks[gpu].in_use_sent) {
            struct msg m = {.type = MSG_LOCK_IN_USE,
                            .u.lock = {.gpu = (uint8_t)gpu,
                                       .lease = locks[gpu].lease,
                                       .at_ns = now_ns()}};
            locks[gpu].in_use_sent = true;
            to_scheduler.send_locked(&m);
        }
        pthread_mutex_unlock(&client.mu);
        self->inflight_gpu = gpu + 1;
        atomic_signal_fence(memory_order_seq_cst);
        /* The gate may have closed again between the unlock and the mark:
         * only a check after the mark is published is conclusive. */
        if (atomic_load(&nvshare_gate_open[gpu]) || gpu >= client.n_gpus)
            return;
        pthread_mutex_lock(&client.mu);
        bool free_run = runs_unscheduled(gpu);
        pthread_mutex_unlock(&client.mu);
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
    if (membarrier_ok)
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

uint64_t gate_submits_total(void)
{
    uint64_t sum = 0;

    for (struct nvshare_thread *t = atomic_load(&thread_list); t; t = t->next)
        sum += t->submits;
    return sum;
}

uint64_t gate_close_and_drain(int gpu, uint64_t *drained_at)
{
    uint64_t start;

    gate_set(gpu, false);
    wait_inflight(gpu);
    start = now_ns();
    client.ops.drain(gpu, client.ops.user);
    *drained_at = now_ns();
    return *drained_at - start;
}

/* Collective submissions made on each GPU since the process started, and
 * the count a gang rank catching up runs to (0: none); see
 * nvshare_collective_submitted(). */
static _Atomic uint64_t collectives[NVSHARE_MAX_GPUS];
static _Atomic uint64_t catch_up_to[NVSHARE_MAX_GPUS];

void nvshare_collective_submitted(int gpu)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    uint64_t n = atomic_fetch_add(&collectives[gpu], 1) + 1;
    uint64_t target = atomic_load(&catch_up_to[gpu]);
    if (__builtin_expect(target != 0 && n >= target, 0)) {
        /* The drain point: nothing more goes in until the drain. */
        gate_set(gpu, false);
        wake_connection();
    }
}

/* The first step of giving gpu back under lease: closes the gate, and the
 * drain beat starts. False if lease is not the current one (we already
 * released it). */
static bool begin_release(int gpu, uint32_t lease)
{
    pthread_mutex_lock(&client.mu);
    struct gpu_lock *g = &locks[gpu];
    bool current = g->held && g->lease == lease;
    if (current) {
        /* First thing: a process resumed after a stop may have lost the
         * lock long ago, and its threads run again from this moment. */
        gate_set(gpu, false);
        if (!g->drain_since)
            g->drain_since = g->beat_sent_at = now_ns();
        pthread_cond_signal(&beat);
    }
    pthread_mutex_unlock(&client.mu);
    return current;
}

/* Drains gpu and tells the scheduler, if lease is still the current one. */
static void finish_release(int gpu, uint32_t lease, const char *why)
{
    uint64_t drained_at, drain_ns = gate_close_and_drain(gpu, &drained_at);
    /* The GPU idles from drained_at on: the pod is billed up to there, not
     * for the message's way to the scheduler. */
    struct msg m = {.type = MSG_LOCK_RELEASED,
                    .u.lock = {.gpu = (uint8_t)gpu,
                               .lease = lease,
                               .drain_ns = drain_ns,
                               .at_ns = drained_at}};

    pthread_mutex_lock(&client.mu);
    struct gpu_lock *g = &locks[gpu];
    if (g->held && g->lease == lease) {
        g->held = false;
        g->drain_since = 0;
        g->agreeing = false;
        to_scheduler.send_locked(&m);
        log_debug("released gpu %d (%s), drain %.3f ms", gpu, why,
                  (double)drain_ns / 1e6);
    }
    gates_open_for_current_mode();
    pthread_cond_broadcast(&client.changed); /* waiters re-request */
    pthread_mutex_unlock(&client.mu);
}

void gate_drop_asked(int gpu, uint32_t lease, const char *why)
{
    if (begin_release(gpu, lease))
        finish_release(gpu, lease, why);
}

void gate_gang_drop_asked(int gpu, uint32_t lease)
{
    if (!begin_release(gpu, lease))
        return;
    /* Once the submissions in flight have returned the count stands still
     * (a collective is counted inside its submission). */
    wait_inflight(gpu);
    struct msg m = {.type = MSG_DRAIN_POINT,
                    .u.drain = {.gpu = (uint8_t)gpu,
                                .lease = lease,
                                .collectives = atomic_load(&collectives[gpu])}};
    pthread_mutex_lock(&client.mu);
    struct gpu_lock *g = &locks[gpu];
    if (g->held && g->lease == lease) {
        g->agreeing = true;
        g->catch_up_until = now_ns() + CATCH_UP_MAX_NS;
        to_scheduler.send_locked(&m);
    }
    pthread_mutex_unlock(&client.mu);
}

void gate_drain_to(int gpu, uint32_t lease, uint64_t target)
{
    pthread_mutex_lock(&client.mu);
    struct gpu_lock *g = &locks[gpu];
    if (!g->held || g->lease != lease || !g->agreeing) {
        pthread_mutex_unlock(&client.mu);
        return;
    }
    g->agreeing = false;
    uint64_t launched = atomic_load(&collectives[gpu]);
    if (launched < target) {
        /* Behind the gang: run on until our collective number target is
         * launched, or peers' collectives queued up to it never end. */
        log_debug("gpu %d: launching collectives %llu to %llu before the "
                  "drain",
                  gpu, (unsigned long long)launched + 1,
                  (unsigned long long)target);
        atomic_store(&catch_up_to[gpu], target);
        g->catch_up_until = now_ns() + CATCH_UP_MAX_NS;
        gate_set(gpu, true);
        pthread_cond_broadcast(&client.changed);
    }
    pthread_mutex_unlock(&client.mu);
    if (launched >= target)
        finish_release(gpu, lease, "preempted");
}

uint64_t gate_finish_catch_ups(void)
{
    uint64_t now = now_ns(), next = 0;

    for (int gpu = 0; gpu < client.n_gpus; gpu++) {
        uint64_t target = atomic_load(&catch_up_to[gpu]);
        pthread_mutex_lock(&client.mu);
        struct gpu_lock *g = &locks[gpu];
        if (!target && !g->agreeing) {
            pthread_mutex_unlock(&client.mu);
            continue;
        }
        uint32_t lease = g->lease;
        bool reached = target && atomic_load(&collectives[gpu]) >= target;
        bool late = now >= g->catch_up_until;
        if (reached || late) {
            atomic_store(&catch_up_to[gpu], 0);
            g->agreeing = false;
        } else if (!next || g->catch_up_until < next) {
            next = g->catch_up_until;
        }
        pthread_mutex_unlock(&client.mu);
        /* Revoked meanwhile, say: never wait for the scheduler for ever
         * with the gate shut. */
        if (late && !reached)
            log_warn("gpu %d: %s in %llu s: draining where it stands", gpu,
                     target ? "the collective where the gang agreed to stop "
                              "was not launched"
                            : "the scheduler named no drain point",
                     (unsigned long long)(CATCH_UP_MAX_NS / NS_PER_SEC));
        if (reached || late)
            finish_release(gpu, lease, "preempted");
    }
    return next ? next - now : 0;
}

/* Forgets agreements and catch-ups in progress (the lock is gone); with
 * client.mu held. */
static void forget_drains_locked(void)
{
    for (int gpu = 0; gpu < NVSHARE_MAX_GPUS; gpu++) {
        atomic_store(&catch_up_to[gpu], 0);
        locks[gpu].agreeing = false;
        locks[gpu].drain_since = 0;
    }
}

static void *drain_beat(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&client.mu);
    while (beat_running) {
        uint64_t now = now_ns(), due = 0;
        for (int gpu = 0; gpu < client.n_gpus; gpu++) {
            struct gpu_lock *g = &locks[gpu];
            if (!g->drain_since)
                continue;
            if (now - g->beat_sent_at >= DRAIN_BEAT_NS) {
                struct msg m = {.type = MSG_DRAINING,
                                .u.lock = {.gpu = (uint8_t)gpu,
                                           .lease = g->lease}};
                to_scheduler.send_locked(&m);
                g->beat_sent_at = now;
            }
            if (!due || g->beat_sent_at + DRAIN_BEAT_NS < due)
                due = g->beat_sent_at + DRAIN_BEAT_NS;
        }
        if (!due) {
            pthread_cond_wait(&beat, &client.mu);
            continue;
        }
        /* CLOCK_REALTIME for the condition variable: only the length of
         * the wait matters. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t wait = due - now;
        until.tv_sec += (time_t)(wait / NS_PER_SEC);
        until.tv_nsec += (long)(wait % NS_PER_SEC);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&beat, &client.mu, &until);
    }
    pthread_mutex_unlock(&client.mu);
    return NULL;
}

void nvshare_release(int gpu)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&client.mu);
    bool held = gpu < client.n_gpus && locks[gpu].held;
    uint32_t lease = locks[gpu].lease;
    pthread_mutex_unlock(&client.mu);
    if (held)
        gate_drop_asked(gpu, lease, "released by the application");
}

void gate_lock_granted(int gpu, uint32_t lease)
{
    pthread_mutex_lock(&client.mu);
    struct gpu_lock *g = &locks[gpu];
    g->held = true;
    g->requested = false;
    g->in_use_sent = false;
    g->lease = lease;
    g->grants++;
    gate_set(gpu, true);
    pthread_cond_broadcast(&client.changed);
    pthread_mutex_unlock(&client.mu);
}

void gate_lock_declined(int gpu, uint32_t lease)
{
    struct msg m = {.type = MSG_LOCK_RELEASED,
                    .u.lock = {.gpu = (uint8_t)gpu,
                               .lease = lease,
                               .at_ns = now_ns()}};

    pthread_mutex_lock(&client.mu);
    locks[gpu].requested = false;
    to_scheduler.send_locked(&m);
    pthread_cond_broadcast(&client.changed); /* waiters re-request */
    pthread_mutex_unlock(&client.mu);
}

void gate_memory_out(int gpu)
{
    pthread_mutex_lock(&client.mu);
    locks[gpu].memory_out = true;
    gates_open_for_current_mode();
    pthread_mutex_unlock(&client.mu);
}

void gate_memory_back(int gpu)
{
    pthread_mutex_lock(&client.mu);
    locks[gpu].memory_out = false;
    gate_mode_changed_locked();
    pthread_mutex_unlock(&client.mu);
}

bool gate_memory_is_out(int gpu)
{
    pthread_mutex_lock(&client.mu);
    bool out = locks[gpu].memory_out;
    pthread_mutex_unlock(&client.mu);
    return out;
}

bool gate_memory_wanted(int gpu)
{
    pthread_mutex_lock(&client.mu);
    bool wanted = memory_wanted_locked(gpu) && locks[gpu].waiters > 0;
    pthread_mutex_unlock(&client.mu);
    return wanted;
}

void gate_locks_lost_locked(void)
{
    for (int i = 0; i < client.n_gpus; i++) {
        locks[i].held = false;
        locks[i].requested = false;
    }
    forget_drains_locked();
    gate_mode_changed_locked();
}

bool gate_held_locked(int gpu, uint32_t *lease)
{
    *lease = locks[gpu].lease;
    return locks[gpu].held;
}

bool gate_holds_any(void)
{
    bool held = false;

    pthread_mutex_lock(&client.mu);
    for (int i = 0; i < client.n_gpus && !held; i++)
        held = locks[i].held;
    pthread_mutex_unlock(&client.mu);
    return held;
}

uint64_t nvshare_lock_grants(int gpu)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return 0;
    pthread_mutex_lock(&client.mu);
    uint64_t grants = locks[gpu].grants;
    pthread_mutex_unlock(&client.mu);
    return grants;
}

int gate_wake_fd(void)
{
    return wake_fd;
}

/* ---- lifecycle ------------------------------------------------------------ */

int gate_start(const struct gate_link *l)
{
    to_scheduler = *l;
    atomic_store(&before_lock_request, l->before_lock_request);
    membarrier_ok = syscall(SYS_membarrier,
                            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    if (!membarrier_ok)
        log_debug("membarrier unavailable: preemption uses a fence");
    wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return wake_fd < 0 ? -1 : 0;
}

bool gate_start_beat(void)
{
    beat_running = pthread_create(&beat_thread, NULL, drain_beat, NULL) == 0;
    return beat_running;
}

void gate_stop(void)
{
    pthread_mutex_lock(&client.mu);
    bool running = beat_running;
    beat_running = false;
    pthread_cond_signal(&beat);
    pthread_mutex_unlock(&client.mu);
    if (running)
        pthread_join(beat_thread, NULL);
    pthread_mutex_lock(&client.mu);
    if (wake_fd >= 0)
        close(wake_fd);
    wake_fd = -1;
    for (int i = 0; i < NVSHARE_MAX_GPUS; i++)
        gate_set(i, true);
    pthread_mutex_unlock(&client.mu);
}

void gate_after_fork(void)
{
    pthread_cond_init(&beat, NULL);
    beat_running = false;
    forget_drains_locked();
    if (wake_fd >= 0)
        close(wake_fd);
    wake_fd = -1;
    memset(locks, 0, sizeof(locks));
    for (int i = 0; i < NVSHARE_MAX_GPUS; i++)
        gate_set(i, false); /* slow path: runs_unscheduled() says go */
}
