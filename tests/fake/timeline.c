/* timeline.c - streams, events and launches on virtual timelines.
 *
 * Each stream has a timeline: work queued on it starts when the stream's
 * previous work ends (or now, if it is idle) and lasts its simulated
 * duration. Nothing executes; synchronize calls sleep until the timeline
 * reaches the end of the work, and queries answer CUDA_ERROR_NOT_READY until
 * then, so the host sees the timing a GPU would give it.
 *
 * With FAKE_CUDA_TRACE_DIR set, every piece of work is appended to
 * $FAKE_CUDA_TRACE_DIR/trace.<pid> as "<what> <start_ns> <end_ns>" in
 * CLOCK_MONOTONIC, one write(2) per line, so a test can check that the work
 * of two processes never overlapped. Transfers (managed memory prefetches)
 * add their size: "prefetch_host <start_ns> <end_ns> <bytes>".
 *
 * With FAKE_CUDA_SHARED_GPU naming a file, the processes that name the same
 * file share one device: work starts only when the device has finished the
 * work queued before it by any of them (one atomic "busy until" in the
 * mapped file). Without it each process has a GPU of its own, so running
 * beside others costs nothing; with it two busy processes that run at once
 * each get about half, as on a real GPU. The same file holds the device's
 * memory and who has a context on it (shared_gpu.c).
 *
 * A collective kernel (collective.c, FAKE_CUDA_COLLECTIVE) cannot be placed
 * on the timeline when it is launched: it starts when the job's last rank
 * launches its own. So a stream may hold one unresolved collective, and
 * the ordinary work queued behind it is only summed (after_ns): it runs
 * right after the collective, whenever that ends. Whatever needs the
 * stream's end (synchronizations, queries, event records, the context's
 * end) first tries to resolve the collective; while it cannot, queries and
 * events answer CUDA_ERROR_NOT_READY and synchronizations poll, sleeping
 * outside fake_lock between looks. Limits of the fake: a second collective
 * launched on a stream whose first is unresolved waits in the launch until
 * the first resolves (a real launch would return); a collective and the
 * work behind it take no time of a FAKE_CUDA_SHARED_GPU device; the work
 * behind one is not traced (the collective is, once it resolves). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fake.h"

struct fake_event {
    uint64_t at_ns; /* when the stream reaches the event */
    bool recorded;
    /* Recorded behind an unresolved collective (coll.seq != 0): the event
     * is reached after_ns after the collective ends. */
    struct fake_coll coll;
    uint64_t after_ns;
};

static __thread struct fake_stream *per_thread_stream;
static __thread CUstreamCaptureMode capture_mode;
static int trace_fd = -1;
static pthread_once_t trace_once = PTHREAD_ONCE_INIT;

uint64_t fake_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void fake_wait_until(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000u),
                          (long)(t_ns % 1000000000u)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void open_trace(void)
{
    const char *dir = getenv("FAKE_CUDA_TRACE_DIR");
    char path[4096];

    if (dir == NULL)
        return;
    snprintf(path, sizeof(path), "%s/trace.%d", dir, (int)getpid());
    trace_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* bytes: 0 for a kernel (not printed). */
static void trace(const char *what, uint64_t start, uint64_t end, uint64_t bytes)
{
    char line[256];
    int len;

    pthread_once(&trace_once, open_trace);
    if (trace_fd < 0)
        return;
    if (bytes > 0)
        len = snprintf(line, sizeof(line), "%s %llu %llu %llu\n", what,
                       (unsigned long long)start, (unsigned long long)end,
                       (unsigned long long)bytes);
    else
        len = snprintf(line, sizeof(line), "%s %llu %llu\n", what,
                       (unsigned long long)start, (unsigned long long)end);
    if (write(trace_fd, line, (size_t)len) != len)
        perror("fake libcuda: trace");
}

/* When work that is ready at `start` begins on a device shared with other
 * processes, which is then busy with it for duration_ns. */
static uint64_t queue_on_shared_gpu(uint64_t start, uint64_t duration_ns)
{
    struct fake_shared_gpu *shared = fake_shared_gpu_map();

    if (shared == NULL)
        return start;
    uint64_t busy = atomic_load(&shared->busy_until_ns), begin;
    do {
        begin = busy > start ? busy : start;
    } while (!atomic_compare_exchange_weak(&shared->busy_until_ns, &busy,
                                           begin + duration_ns));
    return begin;
}

/* The stream a handle names. Lock held. */
static struct fake_stream *resolve_locked(CUstream handle, bool pt)
{
    struct fake_ctx *ctx = fake_current();

    if (handle == CU_STREAM_PER_THREAD || (handle == NULL && pt)) {
        if (ctx == NULL)
            return NULL;
        if (per_thread_stream == NULL || per_thread_stream->ctx != ctx) {
            per_thread_stream = calloc(1, sizeof(*per_thread_stream));
            if (per_thread_stream == NULL)
                return NULL;
            per_thread_stream->ctx = ctx;
            per_thread_stream->next = ctx->streams;
            ctx->streams = per_thread_stream;
        }
        return per_thread_stream;
    }
    if (handle == NULL || handle == CU_STREAM_LEGACY)
        return ctx ? &ctx->legacy : NULL;
    return (struct fake_stream *)handle;
}

bool fake_stream_settle_locked(struct fake_stream *s)
{
    uint64_t end;

    if (s->coll.seq == 0)
        return true;
    if (!fake_collective_end(&s->coll, &end))
        return false;
    trace(s->coll.what, end - s->coll.duration_ns, end, 0);
    s->busy_until_ns = end + s->after_ns;
    s->coll.seq = 0;
    s->after_ns = 0;
    return true;
}

CUresult fake_submit_bytes(CUstream stream, bool pt, uint64_t duration_ns,
                           const char *what, uint64_t bytes)
{
    struct fake_stream *s;
    uint64_t start, now = fake_now_ns();

    pthread_mutex_lock(&fake_lock);
    if ((s = resolve_locked(stream, pt)) == NULL) {
        pthread_mutex_unlock(&fake_lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (s->capturing) {
        s->captured_ns += duration_ns;
        pthread_mutex_unlock(&fake_lock);
        return CUDA_SUCCESS;
    }
    if (!fake_stream_settle_locked(s)) {
        s->after_ns += duration_ns;
        pthread_mutex_unlock(&fake_lock);
        return CUDA_SUCCESS;
    }
    start = queue_on_shared_gpu(s->busy_until_ns > now ? s->busy_until_ns : now,
                                duration_ns);
    s->busy_until_ns = start + duration_ns;
    pthread_mutex_unlock(&fake_lock);
    trace(what, start, start + duration_ns, bytes);
    return CUDA_SUCCESS;
}

CUresult fake_submit(CUstream stream, bool pt, uint64_t duration_ns,
                     const char *what)
{
    return fake_submit_bytes(stream, pt, duration_ns, what, 0);
}

/* A collective: it waits for its peers (collective.c) once its stream
 * reaches it. */
static CUresult submit_collective(CUstream stream, bool pt,
                                  uint64_t duration_ns, const char *what)
{
    struct fake_stream *s;
    unsigned round = 0;

    for (;;) {
        pthread_mutex_lock(&fake_lock);
        if ((s = resolve_locked(stream, pt)) == NULL) {
            pthread_mutex_unlock(&fake_lock);
            return CUDA_ERROR_INVALID_CONTEXT;
        }
        if (fake_stream_settle_locked(s))
            break;
        /* One unresolved collective per stream (see the top). */
        pthread_mutex_unlock(&fake_lock);
        fake_collective_pause(&round);
    }
    uint64_t now = fake_now_ns();
    uint64_t ready = s->busy_until_ns > now ? s->busy_until_ns : now;
    s->coll = (struct fake_coll){fake_collective_arrive(ready), ready,
                                 duration_ns, what};
    s->after_ns = 0;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

/* ---- streams ----------------------------------------------------------- */

CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    struct fake_ctx *ctx = fake_current();
    struct fake_stream *s;

    (void)flags;
    if (ctx == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fake_lock);
    s->ctx = ctx;
    s->next = ctx->streams;
    ctx->streams = s;
    pthread_mutex_unlock(&fake_lock);
    *phStream = (CUstream)s;
    return CUDA_SUCCESS;
}

/* Streams stay on their context's list (a destroyed stream's work still
 * counts for cuCtxSynchronize); they are reclaimed with nothing. */
CUresult cuStreamDestroy_v2(CUstream hStream)
{
    (void)hStream;
    return CUDA_SUCCESS;
}

/* The end of the stream's work, FAKE_UNRESOLVED while a collective on it
 * waits for its peers (then *coll, *after: what the end will follow). */
static uint64_t stream_end(CUstream handle, bool pt, CUresult *rc,
                           struct fake_coll *coll, uint64_t *after)
{
    struct fake_stream *s;
    uint64_t end = 0;

    pthread_mutex_lock(&fake_lock);
    s = resolve_locked(handle, pt);
    if (s != NULL) {
        if (fake_stream_settle_locked(s)) {
            end = s->busy_until_ns;
        } else {
            end = FAKE_UNRESOLVED;
            if (coll)
                *coll = s->coll, *after = s->after_ns;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    *rc = s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    return end;
}

static CUresult stream_synchronize(CUstream handle, bool pt)
{
    CUresult rc;
    uint64_t end;
    unsigned round = 0;

    if (fake_unsafe_call_refused())
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    while ((end = stream_end(handle, pt, &rc, NULL, NULL)) == FAKE_UNRESOLVED)
        fake_collective_pause(&round);
    if (rc == CUDA_SUCCESS)
        fake_wait_until(end);
    return rc;
}

static CUresult stream_query(CUstream handle, bool pt)
{
    CUresult rc;
    uint64_t end = stream_end(handle, pt, &rc, NULL, NULL);

    if (rc == CUDA_SUCCESS && fake_now_ns() < end)
        rc = CUDA_ERROR_NOT_READY;
    return rc;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    return stream_synchronize(hStream, false);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_synchronize(hStream, true);
}

CUresult cuStreamQuery(CUstream hStream)
{
    return stream_query(hStream, false);
}

CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    return stream_query(hStream, true);
}

/* Capture: the stream's launches are left out until the capture ends, and
 * the graph it makes is a duration: a launch of its executable queues that
 * much work. The legacy stream cannot be captured, as on a real driver.
 * Graphs and executables are never freed (tests make a few). */
struct fake_graph {
    uint64_t duration_ns;
};

/* Captures begun in the global mode, and whether a potentially unsafe
 * call made meanwhile by a thread in the global mode invalidated them: as
 * on a real driver, that call fails, and so does the capture's end. */
static int global_captures;
static bool captures_invalidated;

bool fake_unsafe_call_refused(void)
{
    bool refused;

    if (capture_mode != CU_STREAM_CAPTURE_MODE_GLOBAL)
        return false;
    pthread_mutex_lock(&fake_lock);
    refused = global_captures > 0;
    captures_invalidated = captures_invalidated || refused;
    pthread_mutex_unlock(&fake_lock);
    return refused;
}

/* Starts or ends the capture on hStream; *captured_ns: what it captured. */
static CUresult set_capturing(CUstream hStream, bool capturing, bool global,
                              uint64_t *captured_ns)
{
    struct fake_stream *s;
    CUresult rc = CUDA_SUCCESS;

    pthread_mutex_lock(&fake_lock);
    s = resolve_locked(hStream, false);
    if (s == NULL)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else if (s == &s->ctx->legacy)
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    else if (s->capturing == capturing)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    else {
        s->capturing = capturing;
        *captured_ns = s->captured_ns;
        s->captured_ns = 0;
        if (capturing && global)
            global_captures++;
        if (!capturing && s->global) {
            global_captures--;
            if (captures_invalidated)
                rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
            captures_invalidated = captures_invalidated && global_captures > 0;
        }
        s->global = capturing && global;
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    uint64_t none;

    return set_capturing(hStream, true, mode == CU_STREAM_CAPTURE_MODE_GLOBAL,
                         &none);
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    struct fake_graph *g = calloc(1, sizeof(*g));
    CUresult rc;

    if (g == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((rc = set_capturing(hStream, false, false, &g->duration_ns)) !=
        CUDA_SUCCESS) {
        free(g);
        return rc;
    }
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    struct fake_graph *exec = malloc(sizeof(*exec));

    (void)flags;
    if (exec == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *exec = *(struct fake_graph *)hGraph;
    *phGraphExec = (CUgraphExec)exec;
    return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return fake_submit(hStream, false,
                       ((struct fake_graph *)hGraphExec)->duration_ns, "graph");
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return fake_submit(hStream, true,
                       ((struct fake_graph *)hGraphExec)->duration_ns, "graph");
}

static CUresult is_capturing(CUstream hStream, bool pt,
                             CUstreamCaptureStatus *status)
{
    struct fake_stream *s;

    pthread_mutex_lock(&fake_lock);
    s = resolve_locked(hStream, pt);
    *status = s != NULL && s->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                        : CU_STREAM_CAPTURE_STATUS_NONE;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *status)
{
    return is_capturing(hStream, false, status);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *status)
{
    return is_capturing(hStream, true, status);
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUstreamCaptureMode previous = capture_mode;

    capture_mode = *mode;
    *mode = previous;
    return CUDA_SUCCESS;
}

/* ---- events ------------------------------------------------------------ */

CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
    struct fake_event *e = calloc(1, sizeof(*e));

    (void)flags;
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
    free(hEvent);
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent hEvent, CUstream hStream, bool pt)
{
    struct fake_event *e = (struct fake_event *)hEvent;
    struct fake_coll coll = {0};
    CUresult rc;
    uint64_t after = 0, end = stream_end(hStream, pt, &rc, &coll, &after);
    uint64_t now = fake_now_ns();

    if (rc == CUDA_SUCCESS) {
        pthread_mutex_lock(&fake_lock);
        e->at_ns = end > now ? end : now;
        e->coll = coll; /* seq 0 unless end is FAKE_UNRESOLVED */
        e->after_ns = after;
        e->recorded = true;
        pthread_mutex_unlock(&fake_lock);
    }
    return rc;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, false);
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, true);
}

/* When the event is reached (0 if never recorded), FAKE_UNRESOLVED while
 * the collective it follows waits for its peers. */
static uint64_t event_at(struct fake_event *e)
{
    uint64_t at, end;

    pthread_mutex_lock(&fake_lock);
    if (e->recorded && e->coll.seq != 0 && fake_collective_end(&e->coll, &end)) {
        e->at_ns = end + e->after_ns;
        e->coll.seq = 0;
    }
    at = !e->recorded ? 0 : e->coll.seq != 0 ? FAKE_UNRESOLVED : e->at_ns;
    pthread_mutex_unlock(&fake_lock);
    return at;
}

CUresult cuEventQuery(CUevent hEvent)
{
    return fake_now_ns() >= event_at((struct fake_event *)hEvent)
               ? CUDA_SUCCESS
               : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    uint64_t at;
    unsigned round = 0;

    if (fake_unsafe_call_refused())
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    while ((at = event_at((struct fake_event *)hEvent)) == FAKE_UNRESOLVED)
        fake_collective_pause(&round);
    fake_wait_until(at);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime_v2(float *ms, CUevent hStart, CUevent hEnd)
{
    struct fake_event *start = (struct fake_event *)hStart;
    struct fake_event *end = (struct fake_event *)hEnd;

    if (!start->recorded || !end->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    if (cuEventQuery(hStart) != CUDA_SUCCESS || cuEventQuery(hEnd) != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)((double)((int64_t)(end->at_ns - start->at_ns)) / 1e6);
    return CUDA_SUCCESS;
}

/* ---- launches ---------------------------------------------------------- */

static CUresult launch(CUfunction f, CUstream stream, bool pt)
{
    if (fake_function_is_collective(f) && fake_collective_enabled())
        return submit_collective(stream, pt, fake_function_duration_ns(f),
                                 fake_function_name(f));
    return fake_submit(stream, pt, fake_function_duration_ns(f),
                       fake_function_name(f));
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX,
                        unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                        CUstream hStream, void **kernelParams, void **extra)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX,
        (void)blockDimY, (void)blockDimZ, (void)sharedMemBytes,
        (void)kernelParams, (void)extra;
    return launch(f, hStream, false);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                             unsigned int gridDimY, unsigned int gridDimZ,
                             unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes,
                             CUstream hStream, void **kernelParams, void **extra)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX,
        (void)blockDimY, (void)blockDimZ, (void)sharedMemBytes,
        (void)kernelParams, (void)extra;
    return launch(f, hStream, true);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                          void **kernelParams, void **extra)
{
    (void)kernelParams, (void)extra;
    return launch(f, config ? config->hStream : NULL, false);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                               void **kernelParams, void **extra)
{
    (void)kernelParams, (void)extra;
    return launch(f, config ? config->hStream : NULL, true);
}
