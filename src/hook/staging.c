/* staging.c - the host side of a swap at link speed.
 *
 * A copy engine reaches the link's speed (~55 GB/s on an H200) only from
 * and to pinned host memory, and pinning runs at about 1.5 GB/s: a swap
 * that pinned its destination, or copied to plain memory (the driver then
 * stages through buffers of its own, ~1-6 GB/s), would put seconds per
 * GiB on the critical path of the process that waits for the room. So
 * every swap goes through one ring of pinned buffers per process, made
 * once (PREPARE_SWAP, or the first swap), and the host copies are plain
 * memory: the copy engine fills a buffer while copy threads move the
 * ones it filled before into their place (swap-out), or fill buffers
 * ahead of it (swap-in). Several threads, because one CPU copy into
 * memory touched for the first time (page faults, zeroing) is several
 * times slower than the link.
 *
 * The ring is made in one of the process's contexts (pinned memory
 * belongs to a context; CU_MEMHOSTALLOC_PORTABLE lets the others copy
 * through it) and forgotten with it. One swap uses it at a time. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL */
#endif

#include "cgroup_memory.h"
#include "host_memory.h"
#include "driver.h"
#include "staging.h"
#include "log.h"

#define STAGING_CHUNK (4ull << 20)
#define STAGING_SLOTS 32 /* 128 MiB pinned: two copies per thread */
_Static_assert(sizeof(((struct staging_run *)0)->events) / sizeof(CUevent) ==
                   STAGING_SLOTS,
               "an event per slot");
#define STAGING_MAX_THREADS 16

enum slot_state {
    SLOT_FREE,
    SLOT_DMA,    /* the copy engine's part is queued (event recorded) */
    SLOT_CPU,    /* a copy thread has it */
    SLOT_FILLED, /* swap-in: the host data is in it, the copy not queued */
};

struct slot {
    enum slot_state state;
    bool to_device;
    char *host;      /* the host copy's part */
    CUdeviceptr dev; /* swap-in: where it goes */
    uint64_t len;
};

static struct {
    pthread_mutex_t lock; /* the slots, the queue, the threads */
    pthread_cond_t changed;
    pthread_mutex_t use; /* one swap at a time */
    char *pinned;        /* STAGING_SLOTS x STAGING_CHUNK, or NULL */
    CUcontext ctx;       /* where it was made */
    bool making;         /* a thread pins it now */
    struct slot slots[STAGING_SLOTS];
    int queue[STAGING_SLOTS], first, queued; /* for the copy threads, FIFO */
    int threads;
} ring = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .changed = PTHREAD_COND_INITIALIZER,
          .use = PTHREAD_MUTEX_INITIALIZER};

static void *copier_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ring.lock);
    for (;;) {
        while (ring.queued == 0)
            pthread_cond_wait(&ring.changed, &ring.lock);
        int i = ring.queue[ring.first];
        ring.first = (ring.first + 1) % STAGING_SLOTS;
        ring.queued--;
        struct slot *s = &ring.slots[i];
        char *pinned = ring.pinned + (size_t)i * STAGING_CHUNK;
        pthread_mutex_unlock(&ring.lock);
        if (s->to_device)
            memcpy(pinned, s->host, s->len);
        else
            memcpy(s->host, pinned, s->len);
        pthread_mutex_lock(&ring.lock);
        s->state = s->to_device ? SLOT_FILLED : SLOT_FREE;
        pthread_cond_broadcast(&ring.changed);
    }
    return NULL;
}

/* A thread per CPU, up to STAGING_MAX_THREADS: the application's threads
 * wait for the swap meanwhile, and a copy into memory written for the
 * first time runs at about 2 GB/s per thread (faults, zeroing; 16 threads
 * reached 36 GB/s on an H200's host, 8 threads 24). ring.lock held. */
static int host_threads(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int want = cpus > 1 ? (int)cpus : 1;

    return want < STAGING_MAX_THREADS ? want : STAGING_MAX_THREADS;
}

static void start_copiers_locked(void)
{
    int want = host_threads();
    sigset_t all, old;
    pthread_attr_t attr;

    /* Signals stay the application's threads' business. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (ring.threads < want) {
        pthread_t t;
        if (pthread_create(&t, &attr, copier_main, NULL) != 0)
            break;
        ring.threads++;
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* One thread pins at a time: a swap that comes while PREPARE_SWAP's
 * thread pins waits for that ring rather than pinning a second. */
bool staging_make(CUcontext ctx)
{
    const struct hook_driver *drv = hook_driver();
    void *pinned = NULL;
    CUresult rc = CUDA_ERROR_NOT_SUPPORTED;

    pthread_mutex_lock(&ring.lock);
    while (ring.making)
        pthread_cond_wait(&ring.changed, &ring.lock);
    if (ring.pinned != NULL) {
        bool threads = ring.threads > 0;
        pthread_mutex_unlock(&ring.lock);
        return threads;
    }
    ring.making = true;
    pthread_mutex_unlock(&ring.lock);
    if (drv && drv->mem_host_alloc)
        rc = drv->mem_host_alloc(&pinned, STAGING_SLOTS * STAGING_CHUNK,
                                 CU_MEMHOSTALLOC_PORTABLE);
    if (rc != CUDA_SUCCESS)
        log_debug("swap: no pinned staging ring (%d): copies go through the "
                  "driver's buffers",
                  (int)rc);
    pthread_mutex_lock(&ring.lock);
    ring.making = false;
    if (rc == CUDA_SUCCESS) {
        ring.pinned = pinned;
        ring.ctx = ctx;
        start_copiers_locked();
    }
    bool made = ring.pinned != NULL && ring.threads > 0;
    pthread_cond_broadcast(&ring.changed);
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

static void failed(struct staging_run *r, CUresult rc)
{
    if (r->failures++ == 0)
        r->first_error = rc;
}

static CUstream next_stream(struct staging_run *r)
{
    return r->streams[r->next_stream++ % (unsigned)r->n_streams];
}

/* Gives slot i to the copy threads. ring.lock held. */
static void hand_over_locked(int i)
{
    ring.slots[i].state = SLOT_CPU;
    ring.queue[(ring.first + ring.queued++) % STAGING_SLOTS] = i;
    pthread_cond_broadcast(&ring.changed);
}

/* Queues what the copy engine finished or may start now. ring.lock held. */
static void pump_locked(struct staging_run *r)
{
    for (int i = 0; i < STAGING_SLOTS; i++) {
        struct slot *s = &ring.slots[i];
        if (s->state == SLOT_DMA && !s->to_device &&
            r->drv->event_query(r->events[i]) == CUDA_SUCCESS) {
            hand_over_locked(i);
        } else if (s->state == SLOT_FILLED) {
            CUstream stream = next_stream(r);
            CUresult rc =
                HOOK_CALL_REAL(cuMemcpyHtoDAsync_v2,
                               (s->dev, ring.pinned + (size_t)i * STAGING_CHUNK,
                                s->len, stream));
            if (rc == CUDA_SUCCESS)
                rc = r->drv->event_record(r->events[i], stream);
            if (rc != CUDA_SUCCESS)
                failed(r, rc);
            s->state = SLOT_DMA;
        }
    }
}

/* Waits for slot j's copy on the engine. ring.lock held; dropped
 * meanwhile (only this thread changes a slot in SLOT_DMA). */
static void wait_engine_locked(struct staging_run *r, int j)
{
    pthread_mutex_unlock(&ring.lock);
    CUresult rc = r->drv->event_synchronize(r->events[j]);
    pthread_mutex_lock(&ring.lock);
    if (rc != CUDA_SUCCESS) {
        failed(r, rc);
        ring.slots[j].state = SLOT_FREE;
    } else if (ring.slots[j].to_device) {
        ring.slots[j].state = SLOT_FREE;
    }
}

/* The slot after i whose copy to the host the engine ends first (slots
 * are taken in turn), or -1. ring.lock held. */
static int next_copy_out_locked(int i)
{
    for (int k = 1; k < STAGING_SLOTS; k++) {
        int j = (i + k) % STAGING_SLOTS;
        if (ring.slots[j].state == SLOT_DMA && !ring.slots[j].to_device)
            return j;
    }
    return -1;
}

/* Brings slot i to SLOT_FREE. ring.lock held. */
static void drain_slot_locked(struct staging_run *r, int i)
{
    struct slot *s = &ring.slots[i];
    int j;

    while (s->state != SLOT_FREE) {
        if (s->state == SLOT_DMA) {
            wait_engine_locked(r, i);
        } else if (s->state == SLOT_CPU && (j = next_copy_out_locked(i)) >= 0) {
            /* While a thread copies slot i, each slot the engine fills
             * goes to an idle thread as it is filled, not when slot i is
             * done: at a swap-out's start all but one thread would
             * wait a whole 4 MiB copy. */
            wait_engine_locked(r, j);
        } else if (s->state == SLOT_CPU) {
            pthread_cond_wait(&ring.changed, &ring.lock);
        }
        pump_locked(r);
    }
}

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
    if (!drv->event_create || !drv->event_record || !drv->event_query ||
        !drv->event_synchronize || !drv->event_destroy || !staging_make(r->ctx))
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
    if (!ready)
        pthread_mutex_unlock(&ring.use);
    r->ring = ready;
    return ready;
}

/* Without the ring: copies to or from plain memory, staged by the driver. */
static void direct(struct staging_run *r, bool to_device, CUdeviceptr dev,
                   char *host, uint64_t bytes)
{
    CUresult rc = to_device ? HOOK_CALL_REAL(cuMemcpyHtoDAsync_v2,
                                             (dev, host, bytes, next_stream(r)))
                            : HOOK_CALL_REAL(cuMemcpyDtoHAsync_v2,
                                             (host, dev, bytes, next_stream(r)));

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
        int i = (int)(r->next_slot++ % STAGING_SLOTS);
        struct slot *s = &ring.slots[i];
        drain_slot_locked(r, i);
        *s = (struct slot){.to_device = to_device,
                           .host = (char *)host + at,
                           .dev = dev + at,
                           .len = bytes - at < STAGING_CHUNK ? bytes - at
                                                             : STAGING_CHUNK};
        if (to_device) {
            hand_over_locked(i);
        } else {
            CUresult rc = HOOK_CALL_REAL(cuMemcpyDtoHAsync_v2,
                                         (ring.pinned + (size_t)i * STAGING_CHUNK,
                                          s->dev, s->len, r->streams[0]));
            if (rc == CUDA_SUCCESS)
                rc = r->drv->event_record(r->events[i], r->streams[0]);
            if (rc != CUDA_SUCCESS) {
                failed(r, rc);
                break;
            }
            s->state = SLOT_DMA;
        }
        pump_locked(r);
    }
    pthread_mutex_unlock(&ring.lock);
}

CUresult staging_end(struct staging_run *r)
{
    if (r->ring) {
        pthread_mutex_lock(&ring.lock);
        for (int i = 0; i < STAGING_SLOTS; i++)
            drain_slot_locked(r, i);
        pthread_mutex_unlock(&ring.lock);
        for (int i = 0; i < STAGING_SLOTS; i++)
            r->drv->event_destroy(r->events[i]);
        pthread_mutex_unlock(&ring.use);
    }
    for (int i = 0; i < r->n_streams; i++) {
        CUresult rc = HOOK_CALL_REAL(cuStreamSynchronize, (r->streams[i]));
        if (rc != CUDA_SUCCESS)
            failed(r, rc);
    }
    return r->failures ? r->first_error : CUDA_SUCCESS;
}

/* The child has none of the parent's threads, and its pinned memory is
 * not the driver's (a child starts CUDA afresh): it makes its own ring.
 * The locks may have been held by the parent's threads. */
static void forget_ring_in_child(void)
{
    pthread_mutex_init(&ring.lock, NULL);
    pthread_cond_init(&ring.changed, NULL);
    pthread_mutex_init(&ring.use, NULL);
    ring.pinned = NULL;
    ring.ctx = NULL;
    ring.threads = ring.first = ring.queued = 0;
    memset(ring.slots, 0, sizeof(ring.slots));
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
    char *host;    /* mapped at its first step */
    uint64_t next; /* bytes handed out as steps */
    int in_flight; /* steps being made */
    bool made_any; /* a step succeeded */
};

struct prefault {
    pthread_mutex_t lock;
    const struct staging_host_copy *copies;
    struct ahead *ahead;
    size_t n, copy; /* the copy the next step is in */
    uint64_t room;  /* what the host may still give */
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
    while (!pf->stop && pf->copy < pf->n) {
        const struct staging_host_copy *c = &pf->copies[pf->copy];
        struct ahead *a = &pf->ahead[pf->copy];
        uint64_t step = c->bytes - a->next;

        if (step > prefault_step)
            step = prefault_step;
        if (step == 0) {
            pf->copy++;
        } else if (step > pf->room) {
            pf->stop = true;
        } else if (a->host == NULL && a->next == 0 &&
                   (a->host = staging_host_alloc(c->bytes)) == NULL) {
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
                          .n = n,
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
