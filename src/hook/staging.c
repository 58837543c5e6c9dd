/* staging.c - the host side of a swap at link speed.
 *
 * A copy engine reaches the link's speed (~55 GB/s on an H200) only from
 * and to pinned host memory, and pinning runs at about 1.5 GB/s: a swap
 * that pinned its destination, or copied to plain memory (the driver then
 * stages through buffers of its own, ~1-6 GB/s), would put seconds per
 * GiB on the critical path of the process that waits for the room. So
 * every swap goes through pinned buffers made once per process
 * (PREPARE_SWAP, or the first swap), and the host copies are plain
 * memory.
 *
 * Each copy thread owns two of the buffers and moves the chunks it takes
 * through them in turn: while the engine fills one (swap-out) or empties
 * it (swap-in), the thread copies the other between pinned and plain
 * memory. No thread stands between the engine and the CPU copies: a swap
 * thread that queued every engine copy and handed every filled buffer on
 * was the limit (44-45 GB/s in and 47-49 out on an H200, against 52-53
 * both ways with each copy queued by the thread that copies its data).
 * Several threads, because one CPU copy into memory touched for the first
 * time (page faults, zeroing) is several times slower than the link.
 *
 * The buffers are made in one of the process's contexts (pinned memory
 * belongs to a context; CU_MEMHOSTALLOC_PORTABLE lets the others copy
 * through it) and forgotten with it. One swap uses them at a time. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL */
#endif

#include "cgroup_memory.h"
#include "host_memory.h"
#include "driver.h"
#include "staging.h"
#include "log.h"

#define STAGING_CHUNK (4ull << 20)
#define STAGING_MAX_THREADS 16
#define SLOTS_PER_THREAD 2
#define STAGING_SLOTS (STAGING_MAX_THREADS * SLOTS_PER_THREAD)
_Static_assert(sizeof(((struct staging_run *)0)->events) / sizeof(CUevent) ==
                   STAGING_SLOTS,
               "an event per slot");
/* Chunks queued ahead of the copy threads: a swap thread that walks the
 * allocations never lets them run dry, and holds 256 MiB of work at most. */
#define STAGING_QUEUE 64

struct chunk {
    struct staging_run *run;
    bool to_device;
    char *host;
    CUdeviceptr dev;
    uint64_t len;
};

/* A copy thread's slot. Only its thread reads or writes it. */
struct slot {
    bool engine;        /* the engine's copy of chunk is queued */
    struct chunk chunk; /* a swap-out's is done once copied to the host */
};

struct copier {
    int index;           /* its slots: index * SLOTS_PER_THREAD and on */
    int next;            /* the slot its next chunk takes */
    unsigned generation; /* of the run its slots serve */
    struct slot slots[SLOTS_PER_THREAD];
};

static struct {
    pthread_mutex_t lock;    /* the queue, the counts, the threads */
    pthread_cond_t work;     /* a chunk queued */
    pthread_cond_t progress; /* room in the queue, a run done, a ring made */
    pthread_mutex_t use;     /* one swap at a time */
    char *pinned;            /* threads x SLOTS_PER_THREAD x STAGING_CHUNK */
    CUcontext ctx;           /* where it was made */
    bool making;             /* a thread pins it now */
    struct chunk queue[STAGING_QUEUE];
    int first, queued;
    uint64_t unfinished; /* chunks of the run queued and not done */
    unsigned generation; /* of the run that uses the ring */
    int threads;
    struct copier copiers[STAGING_MAX_THREADS];
} ring = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .work = PTHREAD_COND_INITIALIZER,
          .progress = PTHREAD_COND_INITIALIZER,
          .use = PTHREAD_MUTEX_INITIALIZER};

static void failed(struct staging_run *r, CUresult rc)
{
    pthread_mutex_lock(&ring.lock);
    if (r->failures++ == 0)
        r->first_error = rc;
    pthread_mutex_unlock(&ring.lock);
}

static void chunk_done(void)
{
    pthread_mutex_lock(&ring.lock);
    if (--ring.unfinished == 0)
        pthread_cond_broadcast(&ring.progress);
    pthread_mutex_unlock(&ring.lock);
}

static char *slot_memory(const struct copier *me, int s)
{
    return ring.pinned +
           (size_t)(me->index * SLOTS_PER_THREAD + s) * STAGING_CHUNK;
}

static CUevent slot_event(const struct copier *me, const struct staging_run *r,
                          int s)
{
    return r->events[me->index * SLOTS_PER_THREAD + s];
}

/* A swap-out's copy to the host: nothing reads it before the swap-in, so
 * on x86-64 it bypasses the caches (non-temporal stores). Plain stores
 * first read every line they write: on an H200's host the first swap-out
 * of 1 GiB ran at 36-45 GB/s with them, 45-48 without. */
static void copy_to_host(char *host, const char *pinned, uint64_t len)
{
    uint64_t done = 0;

#if defined(__x86_64__)
    if (((uintptr_t)host | (uintptr_t)pinned) % 16 == 0) {
        __m128i *to = (__m128i *)host;
        const __m128i *from = (const __m128i *)pinned;
        for (; done + 64 <= len; done += 64, to += 4, from += 4) {
            __m128i a = _mm_load_si128(from), b = _mm_load_si128(from + 1);
            __m128i c = _mm_load_si128(from + 2), d = _mm_load_si128(from + 3);
            _mm_stream_si128(to, a);
            _mm_stream_si128(to + 1, b);
            _mm_stream_si128(to + 2, c);
            _mm_stream_si128(to + 3, d);
        }
        _mm_sfence(); /* ordered before the chunk counts as done */
    }
#endif
    memcpy(host + done, pinned + done, len - done);
}

/* Frees slot s: the engine's copy through it waited for, and a swap-out's
 * data moved on to its host copy. */
static void empty_slot(struct copier *me, int s)
{
    struct slot *slot = &me->slots[s];
    const struct chunk *c = &slot->chunk;

    if (!slot->engine)
        return;
    slot->engine = false;
    CUresult rc = c->run->drv->event_synchronize(slot_event(me, c->run, s));
    if (c->to_device) {
        if (rc != CUDA_SUCCESS)
            failed(c->run, rc);
        return;
    }
    if (rc == CUDA_SUCCESS)
        copy_to_host(c->host, slot_memory(me, s), c->len);
    else
        failed(c->run, rc);
    chunk_done();
}

/* Queues the engine's part of chunk c through slot s, after the CPU's
 * part of a swap-in. A swap-out's chunk is done when its slot is emptied. */
static void start_chunk(struct copier *me, int s, const struct chunk *c)
{
    struct staging_run *r = c->run;
    struct slot *slot = &me->slots[s];
    CUstream stream = r->streams[me->index % r->n_streams];
    char *pinned = slot_memory(me, s);
    CUresult rc;

    if (c->to_device) {
        memcpy(pinned, c->host, c->len);
        rc = HOOK_CALL_REAL(cuMemcpyHtoDAsync_v2,
                            (c->dev, pinned, c->len, stream));
    } else {
        rc = HOOK_CALL_REAL(cuMemcpyDtoHAsync_v2,
                            (pinned, c->dev, c->len, stream));
    }
    if (rc == CUDA_SUCCESS)
        rc = r->drv->event_record(slot_event(me, r, s), stream);
    if (rc != CUDA_SUCCESS) {
        failed(r, rc);
        chunk_done();
        return;
    }
    *slot = (struct slot){.engine = true, .chunk = *c};
    if (c->to_device)
        chunk_done();
}

/* The first chunk of a run this thread takes: the run before it waited
 * for its streams (and a swap-out chunk never outlives its run), so the
 * slots are free; its context is made current here, since one left
 * current from an earlier run may be gone. */
static bool begin_run(struct copier *me, const struct chunk *c)
{
    CUresult rc = HOOK_CALL_REAL(cuCtxSetCurrent, (c->run->ctx));

    if (rc != CUDA_SUCCESS) {
        failed(c->run, rc);
        chunk_done();
        return false;
    }
    for (int s = 0; s < SLOTS_PER_THREAD; s++)
        me->slots[s].engine = false;
    me->generation = c->run->generation;
    return true;
}

/* The slot of a swap-out chunk still to be copied to its host copy, or -1. */
static int pending_slot(const struct copier *me)
{
    for (int k = 0; k < SLOTS_PER_THREAD; k++) {
        int s = (me->next + k) % SLOTS_PER_THREAD;
        if (me->slots[s].engine && !me->slots[s].chunk.to_device)
            return s;
    }
    return -1;
}

static void *copier_main(void *arg)
{
    struct copier *me = arg;
    int s;

    hook_thread_relax_capture();
    pthread_mutex_lock(&ring.lock);
    for (;;) {
        if (ring.queued == 0 && (s = pending_slot(me)) >= 0) {
            /* Nothing new: finish what the engine filled. */
            pthread_mutex_unlock(&ring.lock);
            empty_slot(me, s);
            pthread_mutex_lock(&ring.lock);
            continue;
        }
        if (ring.queued == 0) {
            pthread_cond_wait(&ring.work, &ring.lock);
            continue;
        }
        struct chunk c = ring.queue[ring.first];
        ring.first = (ring.first + 1) % STAGING_QUEUE;
        if (ring.queued-- == STAGING_QUEUE)
            pthread_cond_broadcast(&ring.progress);
        pthread_mutex_unlock(&ring.lock);
        if (me->generation == c.run->generation || begin_run(me, &c)) {
            s = me->next;
            me->next = (s + 1) % SLOTS_PER_THREAD;
            empty_slot(me, s);
            start_chunk(me, s, &c);
        }
        pthread_mutex_lock(&ring.lock);
    }
    return NULL;
}

/* A thread per CPU, up to STAGING_MAX_THREADS: the application's threads
 * wait for the swap meanwhile, and a copy into memory written for the
 * first time runs at about 2 GB/s per thread (faults, zeroing; 16 threads
 * reached 36 GB/s on an H200's host, 8 threads 24). */
static int host_threads(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int want = cpus > 1 ? (int)cpus : 1;

    return want < STAGING_MAX_THREADS ? want : STAGING_MAX_THREADS;
}

/* Up to want threads. ring.lock held. */
static void start_copiers_locked(int want)
{
    sigset_t all, old;
    pthread_attr_t attr;

    /* Signals stay the application's threads' business. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (ring.threads < want) {
        pthread_t t;
        struct copier *me = &ring.copiers[ring.threads];
        *me = (struct copier){.index = ring.threads};
        if (pthread_create(&t, &attr, copier_main, me) != 0)
            break;
        ring.threads++;
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* One thread pins at a time: a swap that comes while PREPARE_SWAP's
 * thread pins waits for those buffers rather than pinning more. */
bool staging_make(CUcontext ctx)
{
    const struct hook_driver *drv = hook_driver();
    int want = host_threads();
    void *pinned = NULL;
    CUresult rc = CUDA_ERROR_NOT_SUPPORTED;

    pthread_mutex_lock(&ring.lock);
    while (ring.making)
        pthread_cond_wait(&ring.progress, &ring.lock);
    if (ring.pinned != NULL) {
        bool threads = ring.threads > 0;
        pthread_mutex_unlock(&ring.lock);
        return threads;
    }
    ring.making = true;
    /* Buffers for every thread there is: a ring made again (its context
     * went) may find more threads than CPUs online now. */
    if (want < ring.threads)
        want = ring.threads;
    pthread_mutex_unlock(&ring.lock);
    if (drv && drv->mem_host_alloc)
        rc = drv->mem_host_alloc(&pinned,
                                 (size_t)want * SLOTS_PER_THREAD * STAGING_CHUNK,
                                 CU_MEMHOSTALLOC_PORTABLE);
    if (rc != CUDA_SUCCESS)
        log_debug("swap: no pinned staging buffers (%d): copies go through "
                  "the driver's",
                  (int)rc);
    pthread_mutex_lock(&ring.lock);
    ring.making = false;
    if (rc == CUDA_SUCCESS) {
        ring.pinned = pinned;
        ring.ctx = ctx;
        start_copiers_locked(want);
    }
    bool made = ring.pinned != NULL && ring.threads > 0;
    pthread_cond_broadcast(&ring.progress);
    pthread_mutex_unlock(&ring.lock);
    return made;
}

void staging_context_destroyed(CUcontext ctx)
{
    pthread_mutex_lock(&ring.use);
    pthread_mutex_lock(&ring.lock);
    if (ring.pinned && ring.ctx == ctx) {
        ring.pinned = NULL; /* the driver frees it with its context */
        ring.ctx = NULL;
    }
    pthread_mutex_unlock(&ring.lock);
    pthread_mutex_unlock(&ring.use);
}

/* ---- one swap's copies in one context ----------------------------------- */

void staging_begin(struct staging_run *r, const struct hook_driver *drv,
                   CUcontext ctx, CUstream *streams, int n_streams)
{
    *r = (struct staging_run){.drv = drv,
                              .ctx = ctx,
                              .streams = streams,
                              .n_streams = n_streams};
}

/* The ring for this run, made if need be, at its first copy. */
static bool use_ring(struct staging_run *r)
{
    const struct hook_driver *drv = r->drv;

    r->tried = true;
    if (!drv->event_create || !drv->event_record || !drv->event_synchronize ||
        !drv->event_destroy || !staging_make(r->ctx))
        return false;
    pthread_mutex_lock(&ring.use);
    pthread_mutex_lock(&ring.lock);
    bool ready = ring.pinned != NULL && ring.threads > 0;
    pthread_mutex_unlock(&ring.lock);
    for (int i = 0; ready && i < STAGING_SLOTS; i++) {
        /* The copies' order per slot is all that counts. */
        if (drv->event_create(&r->events[i], CU_EVENT_DISABLE_TIMING) !=
            CUDA_SUCCESS) {
            while (i-- > 0)
                drv->event_destroy(r->events[i]);
            ready = false;
        }
    }
    if (!ready) {
        pthread_mutex_unlock(&ring.use);
    } else {
        pthread_mutex_lock(&ring.lock);
        r->generation = ++ring.generation;
        pthread_mutex_unlock(&ring.lock);
    }
    r->ring = ready;
    return ready;
}

/* Without the ring: copies to or from plain memory, staged by the driver. */
static void direct(struct staging_run *r, bool to_device, CUdeviceptr dev,
                   char *host, uint64_t bytes)
{
    CUstream stream = r->streams[r->next_stream++ % (unsigned)r->n_streams];
    CUresult rc =
        to_device
            ? HOOK_CALL_REAL(cuMemcpyHtoDAsync_v2, (dev, host, bytes, stream))
            : HOOK_CALL_REAL(cuMemcpyDtoHAsync_v2, (host, dev, bytes, stream));

    if (rc != CUDA_SUCCESS)
        failed(r, rc);
}

void staging_copy(struct staging_run *r, bool to_device, CUdeviceptr dev,
                  void *host, uint64_t bytes)
{
    if (!r->tried)
        use_ring(r);
    if (!r->ring) {
        direct(r, to_device, dev, host, bytes);
        return;
    }
    pthread_mutex_lock(&ring.lock);
    for (uint64_t at = 0; at < bytes && r->failures == 0; at += STAGING_CHUNK) {
        while (ring.queued == STAGING_QUEUE)
            pthread_cond_wait(&ring.progress, &ring.lock);
        ring.queue[(ring.first + ring.queued++) % STAGING_QUEUE] =
            (struct chunk){.run = r,
                           .to_device = to_device,
                           .host = (char *)host + at,
                           .dev = dev + at,
                           .len = bytes - at < STAGING_CHUNK ? bytes - at
                                                             : STAGING_CHUNK};
        ring.unfinished++;
        pthread_cond_signal(&ring.work);
    }
    pthread_mutex_unlock(&ring.lock);
}

CUresult staging_end(struct staging_run *r)
{
    if (r->ring) {
        pthread_mutex_lock(&ring.lock);
        while (ring.unfinished > 0)
            pthread_cond_wait(&ring.progress, &ring.lock);
        pthread_mutex_unlock(&ring.lock);
    }
    for (int i = 0; i < r->n_streams; i++) {
        CUresult rc = HOOK_CALL_REAL(cuStreamSynchronize, (r->streams[i]));
        if (rc != CUDA_SUCCESS)
            failed(r, rc);
    }
    if (r->ring) {
        for (int i = 0; i < STAGING_SLOTS; i++)
            r->drv->event_destroy(r->events[i]);
        pthread_mutex_unlock(&ring.use);
    }
    return r->failures ? r->first_error : CUDA_SUCCESS;
}

/* The child has none of the parent's threads, and its pinned memory is
 * not the driver's (a child starts CUDA afresh): it makes its own ring.
 * The locks may have been held by the parent's threads. */
static void forget_ring_in_child(void)
{
    pthread_mutex_init(&ring.lock, NULL);
    pthread_cond_init(&ring.work, NULL);
    pthread_cond_init(&ring.progress, NULL);
    pthread_mutex_init(&ring.use, NULL);
    ring.pinned = NULL;
    ring.ctx = NULL;
    ring.making = false;
    ring.threads = ring.first = ring.queued = 0;
    ring.unfinished = 0;
}

__attribute__((constructor)) static void register_ring_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_ring_in_child);
}

/* ---- host copies ---------------------------------------------------------- */

void *staging_host_alloc(uint64_t bytes)
{
    void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    if (p == MAP_FAILED)
        return NULL;
    /* Huge pages: a fault per 2 MiB instead of per 4 KiB on the way out. */
    madvise(p, (size_t)bytes, MADV_HUGEPAGE);
    return p;
}

/* Kept for the next swap-out, whose copy then writes pages that exist
 * (about twice as fast as new ones), unless the kernel needed them
 * meanwhile: MADV_FREE lets it take them back without writing them
 * anywhere, and the next copy overwrites whatever is left. */
void staging_host_retire(void *p, uint64_t bytes)
{
    if (p)
        madvise(p, (size_t)bytes, MADV_FREE);
}

void staging_host_free(void *p, uint64_t bytes)
{
    if (p)
        munmap(p, (size_t)bytes);
}

/* ---- host copies made ahead ----------------------------------------------- */

/* The first swap-out writes host memory that does not exist yet: its page
 * faults and zeroing, not the link, set its pace (27 GB/s for 64 GiB on
 * an H200 host, against 48 GB/s into pages that exist). A PREPARE_SWAP
 * says a swap may come (the process is idle, or its GPU oversubscribed),
 * so the preparer makes new host copies then, for the allocations that
 * have none, in steps that the copy threads' number of threads take in
 * turn (one 32 GiB allocation spreads over all of them).
 *
 * A copy made ahead is lazily free (MADV_FREE) from the moment its pages
 * exist: the kernel takes them back, without writing them anywhere, as
 * soon as anything else needs the memory, so they cost the host nothing
 * it needs; the swap-out's first write keeps the pages that are still
 * there. They are made only from free memory above the margin that
 * `host-swap-budget auto` keeps, never at the cost of the page cache.
 * Each copy is private to the preparer until install() hands it to its
 * allocation (which may have been freed or swapped meanwhile: the copy is
 * then dropped), so nothing the application or a swap owns is ever
 * marked free. */

struct ahead {
    char *host;    /* mapped before the threads start */
    uint64_t next; /* bytes handed out as steps */
    int in_flight; /* steps being made */
    bool made_any; /* a step succeeded */
};

struct prefault {
    pthread_mutex_t lock;
    const struct staging_host_copy *copies;
    struct ahead *ahead;
    size_t copy;     /* the copy the next step is in */
    size_t n_mapped; /* copies mapped: the first ones the room reaches */
    uint64_t room;   /* what the host may still give */
    bool (*stop_asked)(void);
    bool stop; /* no room, or no MADV_POPULATE_WRITE */
    bool unsupported;
    uint64_t populated; /* bytes made */
};

static const uint64_t prefault_step = 64ull << 20;

/* Copy i has no step left to hand out nor in flight: it goes to its
 * allocation, lazily free, or away. pf->lock held; dropped meanwhile. */
static void finish_copy(struct prefault *pf, size_t i)
{
    const struct staging_host_copy *c = &pf->copies[i];
    struct ahead *a = &pf->ahead[i];
    char *host = a->host;

    if (host == NULL)
        return;
    a->host = NULL;
    pthread_mutex_unlock(&pf->lock);
    if (!a->made_any || madvise(host, (size_t)c->bytes, MADV_FREE) != 0 ||
        !c->install(c, host))
        munmap(host, (size_t)c->bytes);
    pthread_mutex_lock(&pf->lock);
}

/* The next step, or false when there is none. pf->lock held. */
static bool next_step(struct prefault *pf, size_t *copy, char **at,
                      uint64_t *bytes)
{
    pf->stop = pf->stop || pf->stop_asked();
    while (!pf->stop && pf->copy < pf->n_mapped) {
        const struct staging_host_copy *c = &pf->copies[pf->copy];
        struct ahead *a = &pf->ahead[pf->copy];
        uint64_t step = c->bytes - a->next;

        if (step > prefault_step)
            step = prefault_step;
        if (step == 0) {
            pf->copy++;
        } else if (step > pf->room) {
            pf->stop = true;
        } else if (a->host == NULL) {
            pf->copy++;
        } else {
            *copy = pf->copy;
            *at = a->host + a->next;
            *bytes = step;
            a->next += step;
            a->in_flight++;
            pf->room -= step;
            return true;
        }
    }
    return false;
}

static void *prefault_main(void *arg)
{
    struct prefault *pf = arg;
    uint64_t bytes;
    size_t i;
    char *at;

    pthread_mutex_lock(&pf->lock);
    while (next_step(pf, &i, &at, &bytes)) {
        pthread_mutex_unlock(&pf->lock);
        bool made = madvise(at, (size_t)bytes, MADV_POPULATE_WRITE) == 0;
        bool unsupported = !made && errno == EINVAL;
        pthread_mutex_lock(&pf->lock);
        struct ahead *a = &pf->ahead[i];
        if (made) {
            pf->populated += bytes;
            a->made_any = true;
        }
        if (unsupported)
            pf->stop = pf->unsupported = true;
        /* Out of memory or room: the rest of this copy is not made. */
        if (!made || pf->stop)
            a->next = pf->copies[i].bytes;
        if (--a->in_flight == 0 && a->next == pf->copies[i].bytes)
            finish_copy(pf, i);
    }
    pthread_mutex_unlock(&pf->lock);
    return NULL;
}

uint64_t staging_host_make_ahead(const struct staging_host_copy *copies,
                                 size_t n, bool (*stop)(void), bool beside_work)
{
    struct prefault pf = {.lock = PTHREAD_MUTEX_INITIALIZER,
                          .copies = copies,
                          .stop_asked = stop};
    pthread_t threads[STAGING_MAX_THREADS];
    int want = host_threads(), started = 0;
    sigset_t all, old;

    if (beside_work)
        want = want / 4 > 1 ? want / 4 : 1;

    /* Within the memory cgroup too, from memory it has free: lazily free,
     * the copies would still push out its page cache. */
    struct cgroup_memory cgroup = cgroup_memory_now();
    uint64_t cgroup_room =
        cgroup.free > CGROUP_SWAP_MARGIN ? cgroup.free - CGROUP_SWAP_MARGIN : 0;
    pf.room = host_free_room_auto(NULL);
    if (pf.room != HOST_SWAP_BUDGET_UNKNOWN && cgroup_room < pf.room)
        pf.room = cgroup_room;
    if (n == 0 || pf.room == HOST_SWAP_BUDGET_UNKNOWN ||
        !(pf.ahead = calloc(n, sizeof(*pf.ahead))))
        return 0;
    /* Every copy the room allows is mapped before the threads start: an
     * mmap waits for all the page faults in flight, and made between
     * steps it held the threads up (20 MiB copies, as PyTorch's
     * expandable segments have them, were made at 3.9 GB/s on an H200's
     * host, against 23 GB/s for large ones). */
    for (uint64_t mapped = 0; pf.n_mapped < n && mapped < pf.room; pf.n_mapped++) {
        uint64_t bytes = copies[pf.n_mapped].bytes;
        pf.ahead[pf.n_mapped].host = staging_host_alloc(bytes);
        mapped += bytes;
    }
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (started < want &&
           pthread_create(&threads[started], NULL, prefault_main, &pf) == 0)
        started++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started == 0)
        prefault_main(&pf);
    for (int t = 0; t < started; t++)
        pthread_join(threads[t], NULL);
    /* Stopped early: what was begun and not handed on. */
    pthread_mutex_lock(&pf.lock);
    for (size_t i = 0; i < n; i++)
        finish_copy(&pf, i);
    pthread_mutex_unlock(&pf.lock);
    free(pf.ahead);
    pthread_mutex_destroy(&pf.lock);
    if (pf.unsupported)
        log_debug("host copies not made ahead: the kernel lacks "
                  "MADV_POPULATE_WRITE (Linux 5.14)");
    return pf.populated;
}
