/* backlog.c - bounding how much GPU work a thread may have queued.
 *
 * A preempted holder must drain everything it queued before the next
 * process may run, so the queue ahead of the GPU is the preemption latency.
 * Counting launches says little (a launch may take 1 us or 1 s of GPU
 * time), so the queue is measured instead, with events:
 *
 *   - Every `interval` gated stream submissions of a thread (a thread-local
 *     countdown: no atomics, no driver call in between) a mark is checked:
 *     an event is recorded on the stream of that submission.
 *   - Marks that completed are retired. The GPU time between two consecutive
 *     retired marks on the same stream, divided by the submissions between
 *     them, estimates the cost of one submission; `interval` is set so that
 *     one interval is a third of the budget (NVSHARE_MAX_BACKLOG_MS), within
 *     [1, NVSHARE_BACKLOG_CHECK_EVERY], growing at most twofold per mark.
 *   - If more than two marks are still pending, the thread waits for the
 *     oldest. So at most about three intervals, one budget, is queued.
 *   - The scheduler may ask for a shorter budget (UPDATE_YIELD: a lower
 *     class beside a higher one, whose drains must be short); then a
 *     submission longer than a third of it waits until one is left
 *     queued behind the running one, and the bound is the process's
 *     queue, not the thread's (see "The process's queue" below). It may
 *     also ask for none (the top class, which nobody preempts): marks
 *     would count the slices the GPU gives other contexts as its work,
 *     and split its requests.
 *
 * Empty kernels thus get checked every NVSHARE_BACKLOG_CHECK_EVERY launches
 * (an event record and query per few hundred launches), long kernels every
 * launch. Marks are per thread and follow the stream of the submission that
 * crossed the interval; work on other streams is bounded only by their own
 * marks. Nothing is recorded while the stream is being captured into a graph
 * (that work does not run), and stream capture is relaxed around our calls
 * so that they never invalidate an application's capture. A check that
 * falls in a capture sets the interval back to 1, and so does the launch of
 * a graph other than the thread's last: replays may cost anything (a whole
 * training step, where the eager warm-up's kernels took microseconds), so
 * their cost is measured afresh.
 *
 * Busy measure (for the scheduler's auto mode). The same checks report, per
 * thread, how much of the wall time since the thread's previous check its
 * work kept the GPU busy (nvshare_note_busy, for the GPU of the current
 * context):
 *
 *   span = now - previous check;
 *   busy = span if the mark recorded at the previous check is still
 *          pending: the queue never ran dry in between;
 *   else   the time from the previous check until a synchronization
 *          (cuCtxSynchronize, cuStreamSynchronize) returned that had found
 *          that mark pending, plus the time spent in later synchronizations
 *          of the span: waiting there is waiting for this thread's work.
 *
 * A thread that keeps its queue full comes out ~100 % busy, whether it
 * synchronizes now and then or not; one that runs a short kernel, waits for
 * it and works on the host comes out busy for about the time it waited.
 * Idle time counts as idle, however long (the span runs from check to
 * check). Nothing is done per launch: one event query and two atomic loads
 * per check, and two clock reads per synchronization. It is a lower bound:
 * work that completed unobserved between two checks (no synchronization
 * waited for it) counts as idle.
 *
 * What is measured is how busy the process keeps the GPU while it holds
 * it. A span during which the thread may have waited at a closed gate -
 * the GPU was drained (released) during it, or its gate was closed when it
 * began - is not reported: that wait is the scheduler's doing, and would
 * make a process that is throttled or time-sliced look idle. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "backlog.h"
#include "context.h"
#include "driver.h"
#include "stats.h"
#include "nvshare_client.h"
#include "log.h"
#include "parse.h"

#define MARKS 4 /* ring size: > the 3 a thread may have pending */

struct backlog {
    CUcontext ctx; /* the marks' context */
    CUevent marks[MARKS];
    CUstream streams[MARKS];  /* where each mark was recorded */
    int submissions[MARKS];   /* submissions ended by each mark */
    unsigned oldest, pending; /* ring of pending marks */
    int last_retired;         /* slot of the last retired mark, or -1 */
    int interval;
    bool one_behind; /* at most one mark pending beside the running one */
};

HOOK_TLS int hook_backlog_countdown = 1;
HOOK_TLS CUgraphExec hook_backlog_graph;
static HOOK_TLS struct backlog *thread_backlog;

/* Busy measure, per thread: the span since the previous check. */
HOOK_TLS bool hook_busy_mark_live;        /* busy_mark not seen complete yet */
static HOOK_TLS CUevent busy_mark;        /* recorded at the previous check */
static HOOK_TLS uint64_t busy_span_start; /* the previous check, 0: none */
static HOOK_TLS uint64_t busy_until;      /* busy_mark seen pending until */
static HOOK_TLS uint64_t busy_sync_ns;    /* waited in syncs after that */
static HOOK_TLS uint64_t busy_releases;   /* releases[gpu] at span start */
static HOOK_TLS bool busy_gated;          /* the gate was closed then */
static _Atomic uint64_t releases[NVSHARE_MAX_GPUS]; /* drains so far */

/* The process's marks on one GPU, for the scheduler's short budget. */
#define PROCESS_MARKS 16
struct process_queue {
    CUcontext ctx; /* the marks' context */
    CUevent marks[PROCESS_MARKS];
    CUstream streams[PROCESS_MARKS];
    uint64_t order[PROCESS_MARKS];  /* when recorded (a count); 0: free */
    unsigned waited[PROCESS_MARKS]; /* threads waiting on it, unlocked */
    uint64_t recorded;              /* marks recorded so far */
};
static struct process_queue process_queues[NVSHARE_MAX_GPUS];
static pthread_mutex_t process_queue_lock = PTHREAD_MUTEX_INITIALIZER;

static double budget_ms = 5.0;
static int max_interval = 256;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static pthread_key_t backlog_key;

static void forget_busy_mark(void)
{
    busy_mark = NULL;
    hook_busy_mark_live = false;
}

static void free_backlog(void *arg)
{
    struct backlog *b = arg;
    const struct hook_driver *drv = hook_driver();

    if (b == thread_backlog) /* destructors run on the exiting thread */
        forget_busy_mark();

    for (int i = 0; i < MARKS && drv; i++)
        if (b->marks[i])
            drv->event_destroy(b->marks[i]);
    free(b);
}

static void read_config(void)
{
    char err[PARSE_ERR_LEN];
    const char *text;
    long value;

    if ((text = getenv("NVSHARE_MAX_BACKLOG_MS")) != NULL) {
        if (parse_int_range(text, 0, 60000, &value, err) == 0)
            budget_ms = (double)value;
        else
            log_warn("NVSHARE_MAX_BACKLOG_MS: %s", err);
    }
    if ((text = getenv("NVSHARE_BACKLOG_CHECK_EVERY")) != NULL) {
        if (parse_int_range(text, 1, 1 << 20, &value, err) == 0)
            max_interval = (int)value;
        else
            log_warn("NVSHARE_BACKLOG_CHECK_EVERY: %s", err);
    }
    pthread_key_create(&backlog_key, free_backlog);
}

/* This thread's marks for the current context, fresh ones if the thread
 * moved to another context. NULL if marks cannot be made. */
static struct backlog *backlog_for(const struct hook_driver *drv)
{
    struct backlog *b = thread_backlog;
    CUcontext ctx = NULL;

    if (drv->ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == NULL)
        return NULL;
    if (b != NULL && b->ctx == ctx)
        return b;
    forget_busy_mark(); /* its event is destroyed below */
    if (b == NULL) {
        b = calloc(1, sizeof(*b));
        if (b == NULL)
            return NULL;
        thread_backlog = b;
        pthread_setspecific(backlog_key, b);
    }
    for (int i = 0; i < MARKS; i++) {
        if (b->marks[i])
            drv->event_destroy(b->marks[i]);
        b->marks[i] = NULL;
    }
    *b = (struct backlog){.ctx = ctx, .last_retired = -1, .interval = 1};
    for (int i = 0; i < MARKS; i++)
        if (drv->event_create(&b->marks[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS)
            return NULL;
    return b;
}

/* The budget in force: NVSHARE_MAX_BACKLOG_MS, or the scheduler's shorter
 * wish (a lower class beside a higher one: its drains must be short);
 * 0: unbounded. *wished: the scheduler's wish applies (a short budget, or
 * none for the top class). */
static double budget_now_ms(bool *wished)
{
    uint64_t wish_ns = nvshare_max_backlog_ns();
    double wish = (double)wish_ns / 1e6;

    if (wish_ns == UINT64_MAX) { /* the top class: nobody preempts it */
        *wished = true;
        return 0;
    }
    *wished = wish > 0 && (budget_ms <= 0 || wish < budget_ms);
    return *wished ? wish : budget_ms;
}

/* From the GPU time between the last retired mark and this one, the
 * interval that makes one a third of the budget. Only marks on the same
 * stream measure anything (across streams the difference of two events is
 * not the time of the work between them). The interval shrinks at once but
 * at most doubles per mark, so one odd measurement cannot open the bound. */
static void adapt_interval(const struct hook_driver *drv, struct backlog *b,
                           unsigned slot)
{
    int grown = b->interval * 2 < max_interval ? b->interval * 2 : max_interval;
    float gpu_ms = 0;

    if (b->last_retired >= 0 && b->streams[b->last_retired] == b->streams[slot] &&
        drv->event_elapsed(&gpu_ms, b->marks[b->last_retired], b->marks[slot]) ==
            CUDA_SUCCESS &&
        gpu_ms > 0) {
        bool wished;
        double fit = budget_now_ms(&wished) / 3 / (gpu_ms / b->submissions[slot]);

        b->interval = fit < 1 ? 1 : fit > grown ? grown : (int)fit;
        /* One submission alone is over a third of the scheduler's
         * budget: queue one behind the running one, not two. */
        b->one_behind = wished && fit < 1;
    } else {
        b->interval = grown;
    }
    b->last_retired = (int)slot;
}

/* Marks a thread's bound allows pending: two, one beside the running
 * submission when each is over a third of the scheduler's budget. */
static unsigned allowed_pending(const struct backlog *b)
{
    return b->one_behind ? 1u : 2u;
}

/* Retires completed marks; with more than `allowed` pending, waits for the
 * oldest. */
static void retire(const struct hook_driver *drv, struct backlog *b,
                   unsigned allowed)
{
    while (b->pending > 0) {
        CUevent oldest = b->marks[b->oldest];
        CUresult rc = drv->event_query(oldest);

        if (rc == CUDA_ERROR_NOT_READY) {
            if (b->pending <= allowed)
                return;
            uint64_t start = hook_now_ns();

            rc = drv->event_synchronize(oldest);
            hook_count(&hook_stat_events[HOOK_EV_BACKLOG_WAITS], 1);
            hook_count(&hook_stat_events[HOOK_EV_BACKLOG_WAIT_US],
                       (hook_now_ns() - start) / 1000);
        }
        if (rc == CUDA_SUCCESS)
            adapt_interval(drv, b, b->oldest);
        else
            b->last_retired = -1; /* failed: measure afresh */
        b->oldest = (b->oldest + 1) % MARKS;
        b->pending--;
    }
}

/* ---- the process's queue --------------------------------------------------
 *
 * Beside a higher class the bound is the process's, not each thread's:
 * PyTorch launches a training step's backward from its autograd thread and
 * the rest from the caller's, on the same stream, and at each hand-off
 * the marks of both were pending - three or four kernels ahead of the GPU
 * where one behind the running one was meant, and the high pod's first
 * kernel waited for them. So under the scheduler's budget every check
 * also records a mark in one table per GPU, and waits while more than the
 * thread's allowance is pending there on the stream of the submission,
 * whoever recorded them. Only that stream's marks count: they are work
 * this thread's submission queues behind anyway. A mark on another stream
 * may wait for work this very thread is about to submit (the other half
 * of a collective, what a host function waits for), and waiting for it
 * could hang the application. The table belongs to one context; a thread
 * in another context of the same GPU keeps its own bound. The lock is
 * taken once per check, never per launch, and dropped while waiting. */

/* Frees the completed marks; returns how many marks on stream are pending
 * and sets *oldest to the earliest of them. */
static unsigned pending_on(const struct hook_driver *drv,
                           struct process_queue *q, CUstream stream, int *oldest)
{
    unsigned n = 0;

    *oldest = -1;
    for (int i = 0; i < PROCESS_MARKS; i++) {
        if (q->order[i] == 0)
            continue;
        if (drv->event_query(q->marks[i]) != CUDA_ERROR_NOT_READY) {
            q->order[i] = 0;
            continue;
        }
        if (q->streams[i] != stream)
            continue;
        n++;
        if (*oldest < 0 || q->order[i] < q->order[*oldest])
            *oldest = i;
    }
    return n;
}

static bool anyone_waits(const struct process_queue *q)
{
    for (int i = 0; i < PROCESS_MARKS; i++)
        if (q->waited[i] > 0)
            return true;
    return false;
}

/* Makes q the table of ctx unless it serves another live context or a
 * thread waits on one of its marks. */
static void claim_process_queue(const struct hook_driver *drv,
                                struct process_queue *q, CUcontext ctx)
{
    if (q->ctx == ctx || anyone_waits(q) ||
        (q->ctx != NULL && hook_context_live(q->ctx)))
        return;
    /* The old context is gone, and its events with it. */
    *q = (struct process_queue){.ctx = ctx};
    for (int i = 0; i < PROCESS_MARKS; i++)
        if (drv->event_create(&q->marks[i], CU_EVENT_DISABLE_TIMING) !=
            CUDA_SUCCESS) {
            while (i-- > 0)
                drv->event_destroy(q->marks[i]);
            *q = (struct process_queue){0};
            return;
        }
}

/* A slot to record in: free, and nobody waits on its last record (a new
 * one would make that wait for other work). -1 if none. */
static int free_slot(const struct process_queue *q)
{
    for (int i = 0; i < PROCESS_MARKS; i++)
        if (q->order[i] == 0 && q->waited[i] == 0)
            return i;
    return -1;
}

/* Records a mark of the process's queue on stream and waits while more
 * than `allowed` are pending on that stream. false: this thread has no
 * table, or it is full (its own bound applies). */
static bool bound_process_queue(const struct hook_driver *drv, CUcontext ctx,
                                CUstream stream, unsigned allowed)
{
    int gpu = hook_current_gpu, oldest, slot = -1;

    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return false;
    struct process_queue *q = &process_queues[gpu];
    pthread_mutex_lock(&process_queue_lock);
    claim_process_queue(drv, q, ctx);
    if (q->ctx == ctx) {
        pending_on(drv, q, stream, &oldest); /* frees what completed */
        slot = free_slot(q);
        if (slot >= 0 &&
            drv->event_record(q->marks[slot], stream) == CUDA_SUCCESS) {
            q->order[slot] = ++q->recorded;
            q->streams[slot] = stream;
            hook_count(&hook_stat_events[HOOK_EV_PROCESS_MARKS], 1);
        } else {
            slot = -1;
        }
    }
    while (slot >= 0 && pending_on(drv, q, stream, &oldest) > allowed) {
        uint64_t start = hook_now_ns();

        q->waited[oldest]++;
        pthread_mutex_unlock(&process_queue_lock);
        CUresult rc = drv->event_synchronize(q->marks[oldest]);
        hook_count(&hook_stat_events[HOOK_EV_BACKLOG_WAITS], 1);
        hook_count(&hook_stat_events[HOOK_EV_BACKLOG_WAIT_US],
                   (hook_now_ns() - start) / 1000);
        pthread_mutex_lock(&process_queue_lock);
        q->waited[oldest]--;
        if (rc != CUDA_SUCCESS)
            break;
    }
    pthread_mutex_unlock(&process_queue_lock);
    return slot >= 0;
}

/* ---- busy measure --------------------------------------------------------- */

static bool mark_pending(const struct hook_driver *drv)
{
    return busy_mark != NULL && drv != NULL && drv->event_query != NULL &&
           drv->event_query(busy_mark) == CUDA_ERROR_NOT_READY;
}

bool hook_busy_sync_begin(void)
{
    if (mark_pending(hook_driver()))
        return true;
    hook_busy_mark_live = false; /* complete: later syncs only add waits */
    return false;
}

void hook_busy_sync_end(uint64_t start_ns, bool was_pending)
{
    uint64_t now = hook_now_ns();

    if (busy_span_start == 0) /* no check yet: nothing to report it with */
        return;
    if (!was_pending) {
        busy_sync_ns += now - start_ns;
        return;
    }
    /* The mark was pending when the wait began: the queue was not empty
     * from the previous check up to now. */
    busy_until = now;
    if (!mark_pending(hook_driver()))
        hook_busy_mark_live = false;
}

void hook_busy_released(int gpu)
{
    if (gpu >= 0 && gpu < NVSHARE_MAX_GPUS)
        atomic_fetch_add_explicit(&releases[gpu], 1, memory_order_relaxed);
}

/* Reports the span since this thread's previous check (see the top). */
static void report_busy(const struct hook_driver *drv, uint64_t now)
{
    int gpu = hook_current_gpu;
    uint64_t span, busy,
        released = atomic_load_explicit(&releases[gpu], memory_order_relaxed);
    bool gated =
        !atomic_load_explicit(&nvshare_gate_open[gpu], memory_order_relaxed);

    if (busy_span_start != 0 && (busy_gated || released != busy_releases)) {
        hook_count(&hook_stat_events[HOOK_EV_BUSY_SKIPPED], 1);
    } else if (busy_span_start != 0 && now > busy_span_start) {
        span = now - busy_span_start;
        if (hook_busy_mark_live && mark_pending(drv))
            busy = span;
        else
            busy = (busy_until > busy_span_start ? busy_until - busy_span_start
                                                 : 0) +
                   busy_sync_ns;
        if (busy > span)
            busy = span;
        nvshare_note_busy(gpu, busy, span);
        hook_count(&hook_stat_events[HOOK_EV_BUSY_NS], busy);
        hook_count(&hook_stat_events[HOOK_EV_BUSY_SPAN_NS], span);
    }
    forget_busy_mark();
    busy_span_start = busy_until = now;
    busy_sync_ns = 0;
    busy_releases = released;
    busy_gated = gated;
}

void hook_backlog_restart(void)
{
    if (thread_backlog != NULL)
        thread_backlog->interval = 1;
    hook_backlog_countdown = 1;
}

void hook_backlog_check(CUstream stream, int pt_flags)
{
    const struct hook_driver *drv = hook_driver();
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    struct backlog *b;

    bool wished;
    double budget;

    pthread_once(&config_once, read_config);
    budget = budget_now_ms(&wished);
    /* Unbounded at the scheduler's wish: look again now and then, the
     * wish may change. */
    hook_backlog_countdown = budget > 0 || wished ? max_interval : INT_MAX;
    if (budget <= 0 || drv == NULL || drv->ctx_get_current == NULL ||
        drv->event_create == NULL || drv->event_record == NULL ||
        drv->event_query == NULL || drv->event_synchronize == NULL ||
        drv->event_elapsed == NULL || drv->event_destroy == NULL ||
        drv->stream_is_capturing == NULL || drv->exchange_capture_mode == NULL)
        return;
    hook_count(&hook_stat_events[HOOK_EV_BACKLOG_CHECKS], 1);
    if (pt_flags && stream == NULL)
        stream = CU_STREAM_PER_THREAD; /* a _ptsz call's default stream */
    drv->exchange_capture_mode(&mode);
    report_busy(drv, hook_now_ns());
    if (drv->stream_is_capturing(stream, &capture) != CUDA_SUCCESS ||
        capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        /* Captured work does not run: nothing to mark. The replays that
         * follow are measured afresh; kept, an eager warm-up's interval of
         * short kernels (or max_interval's countdown) left hundreds of them
         * unbounded (a PyTorch CUDA graph queued 8 replays, 44 ms). */
        hook_backlog_restart();
    } else if ((b = backlog_for(drv)) != NULL) {
        /* retire() leaves at most MARKS - 1 pending, so the ring has room. */
        unsigned slot = (b->oldest + b->pending) % MARKS;

        if (drv->event_record(b->marks[slot], stream) == CUDA_SUCCESS) {
            b->streams[slot] = stream;
            b->submissions[slot] = b->interval;
            b->pending++;
            busy_mark = b->marks[slot];
            hook_busy_mark_live = true;
        }
        /* Under the scheduler's budget the process's queue is bounded;
         * the thread's marks then only measure. */
        if (wished && bound_process_queue(drv, b->ctx, stream, allowed_pending(b)))
            retire(drv, b, MARKS - 1);
        else
            retire(drv, b, allowed_pending(b));
        hook_backlog_countdown = b->interval;
    }
    drv->exchange_capture_mode(&mode);
}
