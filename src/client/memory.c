/* memory.c - the pod's memory ledger inside a process (nvshare_memory.h).
 *
 * Per GPU the process has `allocated` bytes and may have `credit`: bytes the
 * scheduler has already granted to this process that are not allocated yet.
 * A reservation that fits in the credit is local (one mutex, no syscall);
 * otherwise the process asks the scheduler for what it lacks plus some
 * slack, and the scheduler grants it only if the pod's total stays within
 * the quota. Freed bytes become credit again, so an allocate/free loop
 * stays local, up to a cap above which they go back at once; the scheduler
 * reclaims the rest when another process of the pod runs short.
 *
 * The scheduler "arbitrates" a GPU from the UPDATE_LIMIT it sends after
 * registration until the connection drops. Otherwise (no scheduler, or
 * between connections) each process enforces NVSHARE_GPU_MEMORY_LIMIT alone.
 *
 * Locking: ledger.mu guards everything here and is never held while
 * sending, because the client thread takes the connection lock first and
 * this lock second. */
#include "nvshare_memory.h"
#include "nvshare_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cgroup_memory.h"
#include "client_conn.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "protocol.h"

#define MiB (1ull << 20)
#define ANSWER_TIMEOUT_SEC 2

struct gpu_ledger {
    uint64_t allocated;
    uint64_t evictable;   /* of allocated: what a swap-out moves */
    uint64_t pending;     /* of evictable: told ahead by allocations that
                             wait for room, not on the GPU yet */
    uint64_t credit;      /* granted by the scheduler, not allocated */
    bool arbitrated;      /* the scheduler decides (see above) */
    bool awaiting_limit;  /* registered, its UPDATE_LIMIT not read yet */
    uint64_t quota;       /* the pod's, from the scheduler; 0 = none */
    uint64_t others_held; /* the pod's other processes, as last heard */
    bool dirty;           /* allocated changed since the last report */
    bool refusing;        /* in a burst of refusals: log once */
    /* Evictable bytes are reported as none while their host copy would
     * not fit the memory cgroup, since a swap-out past its limit has the
     * kernel kill the process (note_room). */
    bool held_back;
    /* The one request in flight for this GPU. */
    bool asking;
    uint32_t seq;
    bool answered;
    uint64_t granted;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t answered;
    bool connecting; /* the first connection attempt is under way */
    uint32_t next_seq;
    struct gpu_ledger gpus[NVSHARE_MAX_GPUS];
} ledger = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .answered = PTHREAD_COND_INITIALIZER,
};

static bool valid_gpu(int gpu)
{
    return gpu >= 0 && gpu < NVSHARE_MAX_GPUS;
}

/* Slack asked for beyond a need, and credit kept after frees: large enough
 * that steady allocate/free patterns stay local, small next to the quota so
 * a pod's processes do not strand much of it. */
static uint64_t slack(uint64_t quota)
{
    return quota / 16 < 64 * MiB ? quota / 16 : 64 * MiB;
}

static uint64_t credit_cap(uint64_t quota)
{
    return quota / 4 < 256 * MiB ? quota / 4 : 256 * MiB;
}

/* Whether allocations on g go through the scheduler: under a quota, and
 * when oversubscribed (the scheduler refuses memory that could never be
 * resident, and bounds what swapped-out clients leave on the host). Without
 * a quota, credit is sized as for a large one. */
static bool asks(const struct gpu_ledger *g, bool oversub)
{
    return g->arbitrated && (g->quota || oversub);
}

static uint64_t credit_basis(const struct gpu_ledger *g)
{
    return g->quota ? g->quota : 64ull << 30;
}

static void log_refusal(int gpu, struct gpu_ledger *g, uint64_t quota,
                        uint64_t used, uint64_t bytes)
{
    char q[32], u[32], b[32];

    if (g->refusing)
        return;
    g->refusing = true;
    format_size(quota, q, sizeof(q));
    format_size(used, u, sizeof(u));
    format_size(bytes, b, sizeof(b));
    log_warn("GPU memory quota exceeded on gpu %d (pod %s): limit %s, in use "
             "%s, "
             "requested %s: CUDA_ERROR_OUT_OF_MEMORY",
             gpu, client_settings()->pod_label, q, u, b);
}

/* What a swap-out moves: the interposer updates evictable and allocated
 * at different moments of an allocation or a free, and evictable bytes are
 * never more than the allocated ones. */
static uint64_t evictable_bytes(const struct gpu_ledger *g)
{
    return g->evictable < g->allocated ? g->evictable : g->allocated;
}

/* What the scheduler is told with allocated. */
static uint64_t evictable_part(const struct gpu_ledger *g)
{
    return g->held_back ? 0 : evictable_bytes(g);
}

/* Of evictable_part, what MEM_UPDATE tells as pending: the scheduler
 * takes evictable memory that appears while this process does not run
 * as on the GPU, all but this. */
static uint64_t pending_part(const struct gpu_ledger *g)
{
    uint64_t evictable = evictable_part(g);

    return g->pending < evictable ? g->pending : evictable;
}

static void send_mem(uint16_t type, int gpu, uint32_t seq, uint64_t bytes,
                     uint64_t extra, uint64_t allocated, uint64_t evictable)
{
    struct msg m = {.type = type};

    m.u.mem = (struct msg_mem){.gpu = (uint8_t)gpu,
                               .seq = seq,
                               .bytes = bytes,
                               .extra = extra,
                               .allocated = allocated,
                               .evictable = evictable};
    conn_send(&m);
}

/* Waits for the answer to the request in flight; false on timeout or when
 * the scheduler went away meanwhile. Called and returns with ledger.mu. */
static bool await_answer(struct gpu_ledger *g)
{
    struct timespec deadline;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += ANSWER_TIMEOUT_SEC;
    while (g->arbitrated && !g->answered)
        if (pthread_cond_timedwait(&ledger.answered, &ledger.mu, &deadline) ==
            ETIMEDOUT)
            return false;
    return g->answered;
}

/* Asks the scheduler for what bytes lack of g's credit, plus slack, and
 * waits for the answer; false if there is none (see await_answer). Called
 * and returns with ledger.mu, which it drops while sending. */
static bool ask(int gpu, struct gpu_ledger *g, uint64_t bytes)
{
    uint64_t need = bytes - g->credit, extra = slack(credit_basis(g));

    g->asking = true;
    g->answered = false;
    g->seq = ++ledger.next_seq;
    uint32_t seq = g->seq;
    uint64_t allocated = g->allocated, evictable = evictable_part(g);
    pthread_mutex_unlock(&ledger.mu);
    send_mem(MSG_MEM_RESERVE, gpu, seq, need, extra, allocated, evictable);
    pthread_mutex_lock(&ledger.mu);
    bool answered = await_answer(g);
    g->asking = false;
    pthread_cond_broadcast(&ledger.answered);
    return answered;
}

/* Until the scheduler has taken a GPU over, or has been found missing, a
 * reservation waits (bounded): deciding alone in that window would let the
 * processes of a pod that start together each take the whole quota. */
static void await_arbitration(struct gpu_ledger *g)
{
    struct timespec deadline;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += ANSWER_TIMEOUT_SEC;
    while (!g->arbitrated && (ledger.connecting || g->awaiting_limit))
        if (pthread_cond_timedwait(&ledger.answered, &ledger.mu, &deadline) ==
            ETIMEDOUT)
            return;
}

/* Static enforcement: this process alone against NVSHARE_GPU_MEMORY_LIMIT. */
static int reserve_static(int gpu, struct gpu_ledger *g, uint64_t bytes)
{
    uint64_t limit = client_settings()->memory_limit;

    if (limit && (bytes > limit || g->allocated > limit - bytes)) {
        log_refusal(gpu, g, limit, g->allocated, bytes);
        return -1;
    }
    g->allocated += bytes;
    g->dirty = true;
    g->refusing = false;
    return 0;
}

int nvshare_mem_reserve(int gpu, uint64_t bytes)
{
    struct gpu_ledger *g;
    int rc = 0;

    if (!valid_gpu(gpu))
        return 0;
    bool oversub = nvshare_oversub_enabled();
    pthread_mutex_lock(&ledger.mu);
    g = &ledger.gpus[gpu];
    await_arbitration(g);
    for (;;) {
        if (!g->arbitrated) {
            rc = reserve_static(gpu, g, bytes);
            break;
        }
        if (!asks(g, oversub) || g->credit >= bytes) {
            g->credit -= asks(g, oversub) ? bytes : 0;
            g->allocated += bytes;
            g->dirty = true;
            g->refusing = false;
            break;
        }
        if (g->asking) { /* another thread's request may bring enough */
            pthread_cond_wait(&ledger.answered, &ledger.mu);
            continue;
        }
        if (!ask(gpu, g, bytes)) {
            if (g->arbitrated) {
                /* The scheduler is alive but silent: decide alone rather
                 * than hang the application. */
                log_warn("the scheduler did not answer a memory request in "
                         "%ds: deciding with the static limit",
                         ANSWER_TIMEOUT_SEC);
                rc = reserve_static(gpu, g, bytes);
                break;
            }
            continue; /* it went away: the static path decides */
        }
        if (g->granted == 0) {
            log_refusal(gpu, g, g->quota,
                        g->others_held + g->allocated + g->credit, bytes);
            rc = -1;
            break;
        }
        g->credit += g->granted; /* loop: take it, unless a peer thread did */
    }
    pthread_mutex_unlock(&ledger.mu);
    return rc;
}

void nvshare_mem_release(int gpu, uint64_t bytes)
{
    uint64_t give_back = 0, allocated, evictable;

    if (!valid_gpu(gpu))
        return;
    bool oversub = nvshare_oversub_enabled();
    pthread_mutex_lock(&ledger.mu);
    struct gpu_ledger *g = &ledger.gpus[gpu];
    if (bytes > g->allocated)
        bytes = g->allocated;
    g->allocated -= bytes;
    g->dirty = true;
    if (asks(g, oversub)) {
        g->credit += bytes;
        if (g->credit > credit_cap(credit_basis(g))) {
            give_back = g->credit - credit_cap(credit_basis(g));
            g->credit -= give_back;
        }
    }
    allocated = g->allocated;
    evictable = evictable_part(g);
    pthread_mutex_unlock(&ledger.mu);
    if (give_back)
        send_mem(MSG_MEM_RETURN, gpu, 0, give_back, 0, allocated, evictable);
}

void nvshare_mem_set_evictable(int gpu, uint64_t bytes, uint64_t pending)
{
    if (!valid_gpu(gpu))
        return;
    pthread_mutex_lock(&ledger.mu);
    struct gpu_ledger *g = &ledger.gpus[gpu];
    g->dirty = g->dirty || g->evictable != bytes || g->pending != pending;
    g->evictable = bytes;
    g->pending = pending;
    pthread_mutex_unlock(&ledger.mu);
}

bool nvshare_mem_view(int gpu, uint64_t *quota, uint64_t *used)
{
    if (!valid_gpu(gpu))
        return false;
    uint64_t static_limit = client_settings()->memory_limit;
    pthread_mutex_lock(&ledger.mu);
    struct gpu_ledger *g = &ledger.gpus[gpu];
    await_arbitration(g);
    *quota = g->arbitrated ? g->quota : static_limit;
    /* Our own credit is free memory for us, so it is not "used". */
    *used = (g->arbitrated ? g->others_held : 0) + g->allocated;
    pthread_mutex_unlock(&ledger.mu);
    return *quota != 0;
}

uint64_t nvshare_mem_allocated(int gpu)
{
    if (!valid_gpu(gpu))
        return 0;
    pthread_mutex_lock(&ledger.mu);
    uint64_t allocated = ledger.gpus[gpu].allocated;
    pthread_mutex_unlock(&ledger.mu);
    return allocated;
}

/* ---- the client thread's side --------------------------------------------- */

/* Records the pod's total as the scheduler saw it, so that what the other
 * processes hold can be told apart from ours. */
static void note_pod(struct gpu_ledger *g, uint64_t quota, uint64_t pod_held,
                     uint64_t our_held_then)
{
    g->quota = quota;
    g->others_held = pod_held > our_held_then ? pod_held - our_held_then : 0;
}

static void memory_on_message(const struct msg *m)
{
    const struct msg_mem *mem = &m->u.mem;
    uint64_t give_back = 0, allocated = 0, evictable = 0;

    if (!valid_gpu(mem->gpu))
        return;
    pthread_mutex_lock(&ledger.mu);
    struct gpu_ledger *g = &ledger.gpus[mem->gpu];
    switch (m->type) {
    case MSG_UPDATE_LIMIT:
        if (!g->arbitrated) /* credit from a previous connection is void */
            g->credit = 0;
        g->arbitrated = true;
        g->awaiting_limit = false;
        pthread_cond_broadcast(&ledger.answered);
        note_pod(g, mem->quota, mem->pod_held, g->allocated + g->credit);
        /* A lower or new quota: give unused credit back to the pod. */
        give_back = g->quota ? g->credit : 0;
        g->credit -= give_back;
        g->refusing = false;
        break;
    case MSG_MEM_GRANT:
        if (!g->asking || mem->seq != g->seq)
            break; /* an answer to a request that timed out */
        g->answered = true;
        g->granted = mem->bytes;
        note_pod(g, mem->quota, mem->pod_held,
                 g->allocated + g->credit + mem->bytes);
        pthread_cond_broadcast(&ledger.answered);
        break;
    case MSG_MEM_RECLAIM:
        give_back = g->credit;
        g->credit = 0;
        break;
    }
    allocated = g->allocated;
    evictable = evictable_part(g);
    pthread_mutex_unlock(&ledger.mu);
    if (give_back)
        send_mem(MSG_MEM_RETURN, mem->gpu, 0, give_back, 0, allocated, evictable);
}

static void memory_expect_scheduler(void)
{
    pthread_mutex_lock(&ledger.mu);
    ledger.connecting = true;
    pthread_mutex_unlock(&ledger.mu);
}

static void memory_on_registered(int n_gpus, const uint8_t *managed)
{
    pthread_mutex_lock(&ledger.mu);
    ledger.connecting = false;
    for (int gpu = 0; gpu < n_gpus && gpu < NVSHARE_MAX_GPUS; gpu++)
        ledger.gpus[gpu].awaiting_limit = managed[gpu];
    pthread_cond_broadcast(&ledger.answered);
    pthread_mutex_unlock(&ledger.mu);
    /* The new scheduler knows nothing of us: tell it what we hold. Credit
     * of the previous connection is void until UPDATE_LIMIT arrives. A GPU
     * it does not manage is not its business: naming one is a protocol
     * error that would cost us the connection. */
    for (int gpu = 0; gpu < n_gpus && gpu < NVSHARE_MAX_GPUS; gpu++) {
        if (!managed[gpu])
            continue;
        pthread_mutex_lock(&ledger.mu);
        struct gpu_ledger *g = &ledger.gpus[gpu];
        g->credit = 0;
        g->dirty = false;
        uint64_t allocated = g->allocated, evictable = evictable_part(g);
        uint64_t pending = pending_part(g);
        pthread_mutex_unlock(&ledger.mu);
        send_mem(MSG_MEM_UPDATE, gpu, 0, 0, pending, allocated, evictable);
    }
}

static void memory_on_disconnected(void)
{
    pthread_mutex_lock(&ledger.mu);
    ledger.connecting = false;
    for (int gpu = 0; gpu < NVSHARE_MAX_GPUS; gpu++) {
        ledger.gpus[gpu].arbitrated = false;
        ledger.gpus[gpu].awaiting_limit = false;
        ledger.gpus[gpu].credit = 0;
    }
    pthread_cond_broadcast(&ledger.answered);
    pthread_mutex_unlock(&ledger.mu);
}

static void memory_flush(int gpu)
{
    pthread_mutex_lock(&ledger.mu);
    struct gpu_ledger *g = &ledger.gpus[gpu];
    bool send = g->arbitrated && g->dirty;
    uint64_t allocated = g->allocated, evictable = evictable_part(g);
    uint64_t pending = pending_part(g);
    g->dirty = false;
    pthread_mutex_unlock(&ledger.mu);
    if (send)
        send_mem(MSG_MEM_UPDATE, gpu, 0, 0, pending, allocated, evictable);
}

/* ---- host room for swap-outs ------------------------------------------- */

/* Holds g's evictable bytes back while its host copy would not fit the
 * cgroup's room with the margin to spare, and reports them again once it
 * would, logging each change. With ledger.mu. */
static void note_room(int gpu, struct gpu_ledger *g,
                      const struct cgroup_memory *room)
{
    uint64_t moves = evictable_bytes(g);
    bool short_of_room = moves && room->available != CGROUP_MEMORY_UNLIMITED &&
                         moves + CGROUP_SWAP_MARGIN > room->available;
    char m[32], a[32], k[32];

    if (short_of_room == g->held_back)
        return;
    g->held_back = short_of_room;
    g->dirty = true;
    format_size(moves, m, sizeof(m));
    format_size(room->available, a, sizeof(a));
    format_size(CGROUP_SWAP_MARGIN, k, sizeof(k));
    if (short_of_room)
        log_warn("gpu %d: %s of GPU memory will not be swapped out: this "
                 "process's memory cgroup has %s of host memory available, "
                 "and its host copy must leave %s; it counts as resident",
                 gpu, m, a, k);
    else
        log_info("gpu %d: %s of GPU memory swappable again: the memory "
                 "cgroup has room for its host copy",
                 gpu, m);
}

/* Every second, while anything is evictable: the cgroup's room for each
 * GPU's host copy. */
static void check_host_room(int n_gpus)
{
    static uint64_t last_check;
    uint64_t now = now_ns();
    bool any = false;

    if (now - last_check < NS_PER_SEC)
        return;
    last_check = now;
    pthread_mutex_lock(&ledger.mu);
    for (int gpu = 0; gpu < n_gpus && gpu < NVSHARE_MAX_GPUS; gpu++)
        any = any || ledger.gpus[gpu].evictable || ledger.gpus[gpu].held_back;
    pthread_mutex_unlock(&ledger.mu);
    if (!any)
        return;
    struct cgroup_memory room = cgroup_memory_now();
    pthread_mutex_lock(&ledger.mu);
    for (int gpu = 0; gpu < n_gpus && gpu < NVSHARE_MAX_GPUS; gpu++)
        note_room(gpu, &ledger.gpus[gpu], &room);
    pthread_mutex_unlock(&ledger.mu);
}

/* The last word before a swap-out, read now: the cgroup's room may have
 * gone since the last check. */
static bool memory_swap_out_fits(int gpu)
{
    if (!valid_gpu(gpu))
        return true;
    struct cgroup_memory room = cgroup_memory_now();

    pthread_mutex_lock(&ledger.mu);
    note_room(gpu, &ledger.gpus[gpu], &room);
    bool fits = !ledger.gpus[gpu].held_back;
    pthread_mutex_unlock(&ledger.mu);
    memory_flush(gpu);
    return fits;
}

static void memory_report(int n_gpus)
{
    /* Status, not control: a few reports a second are plenty, and a busy
     * allocation loop must not turn into a message per allocation. */
    static uint64_t last_report;
    uint64_t now = now_ns();

    if (now - last_report < 100 * NS_PER_MS)
        return;
    last_report = now;
    check_host_room(n_gpus);
    for (int gpu = 0; gpu < n_gpus && gpu < NVSHARE_MAX_GPUS; gpu++)
        memory_flush(gpu);
}

static void memory_after_fork(void)
{
    /* The child allocated nothing (CUDA does not survive fork) and the
     * parent's connection is not its own. */
    pthread_mutex_init(&ledger.mu, NULL);
    pthread_cond_init(&ledger.answered, NULL);
    memset(ledger.gpus, 0, sizeof(ledger.gpus));
}

const struct conn_observer memory_observer = {
    .connecting = memory_expect_scheduler,
    .registered = memory_on_registered,
    .disconnected = memory_on_disconnected,
    .message = memory_on_message,
    .tick = memory_report,
    .before_lock_request = memory_flush,
    .after_fork = memory_after_fork,
    .swap_out_fits = memory_swap_out_fits,
};
