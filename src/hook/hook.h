/* hook.h - internals of libnvshare.so, the CUDA driver interposer.
 *
 * Its files in layers, bottom first: each calls only files below it, but
 * for the one inherent circle of the top (cuGetProcAddress hands out every
 * wrapper, itself included). tests/shape checks it.
 *   symbols.c       names and categories of every wrapped symbol
 *   driver.c        the real libcuda: handle, real entry points, helpers
 *   stats.c         NVSHARE_STATS counters
 *   context.c       the context registry and each thread's current GPU;
 *                   tells the modules above that registered (observers)
 *   collectives.c   which kernels are collectives (NCCL's), counted for
 *                   gang drains
 *   staging.c       the pinned ring and the host copies of swaps
 *   memory_pools.c  stream-ordered pools and graph memory: charged by what
 *                   they reserve
 *   ledger.c        the allocation map: what each live allocation was
 *                   charged, which are evictable
 *   backlog.c       bounding the GPU work a thread may have queued
 *   vmm.c           swappable device memory: ranges whose physical memory
 *                   goes and comes back
 *   vmm_async.c     ... for stream-ordered allocations, frees parked
 *   vmm_app.c       ... the application's own cuMemCreate memory (tokens)
 *   swap.c          moving evictable memory to the host and back (the
 *                   client's swap_out / swap_in / prepare_swap)
 *   allocations.c   the memory quota: claims around allocations and frees
 *   memory_paths.c  per-entry-point claims, frees and memory views
 *   client_start.c  starting the nvshare client, and its callbacks
 *   nvml.c          NVML memory queries under the quota
 *   wrappers.c      the generated wrappers (gate, count, forward)
 *   wrapper_table.c every wrapper's address, by symbol id
 *   proc_address.c  cuGetProcAddress wrappers (what runtimes resolve through)
 *   dlsym.c         dlsym() interposition
 *   init.c          library constructor */
#ifndef NVSHARE_HOOK_H
#define NVSHARE_HOOK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "entry_points.h"
#include "nvshare_client.h"

#define HOOK_EXPORT __attribute__((visibility("default")))
#define HOOK_TLS __thread __attribute__((tls_model("initial-exec")))
#define hook_unlikely(x) __builtin_expect(!!(x), 0)

/* ---- symbols.c ---------------------------------------------------------- */

extern const struct nvshare_symbol hook_symbols[NVSHARE_SYMBOL_COUNT];
extern void *const hook_wrappers[NVSHARE_SYMBOL_COUNT];

/* Index of the wrapped symbol with this exact exported name, or -1. */
int hook_symbol_by_name(const char *name);
/* The category (enum nvshare_category) of the wrapped symbols whose api
 * name is api ("cuMemAlloc"), or -1 if none is wrapped. */
int hook_api_category(const char *api);

/* ---- driver.c ----------------------------------------------------------- */

/* The real dlsym of libc (never our own), and a call to it. */
void *(*hook_real_dlsym_fn(void))(void *, const char *);
void *hook_real_dlsym(void *handle, const char *name);

extern _Atomic(void *) hook_real[NVSHARE_SYMBOL_COUNT];
/* Loads the driver once and returns hook_real[id] (NULL if it lacks it). */
void *hook_real_slow(int id);

static inline void *hook_real_fn(int id)
{
    void *fn = atomic_load_explicit(&hook_real[id], memory_order_relaxed);

    return hook_unlikely(fn == NULL) ? hook_real_slow(id) : fn;
}

/* The real entry point behind wrapper e, typed; NULL if the driver lacks it. */
#define HOOK_REAL(e) ((__typeof__(&e))hook_real_fn(NVSHARE_ID_##e))
/* Calls the real e, or fails like a driver that does not have it. */
#define HOOK_CALL_REAL(e, args)                                                \
    ({                                                                         \
        __typeof__(&e) real_ = HOOK_REAL(e);                                   \
        real_ ? real_ args : CUDA_ERROR_NOT_FOUND;                             \
    })

/* Index of the wrapped symbol whose real address is fn, or -1. */
int hook_symbol_by_real(const void *fn);

/* Driver functions libnvshare calls for itself (never wrapped), resolved
 * from the real libcuda at load. Any may be NULL with an old driver. */
struct hook_driver {
    __typeof__(&cuDeviceGetCount) device_get_count;
    __typeof__(&cuDeviceGetUuid) device_get_uuid;
    __typeof__(&cuCtxGetCurrent) ctx_get_current;
    __typeof__(&cuCtxGetDevice) ctx_get_device;
    __typeof__(&cuEventCreate) event_create;
    __typeof__(&cuEventRecord) event_record;
    __typeof__(&cuEventQuery) event_query;
    __typeof__(&cuEventSynchronize) event_synchronize;
    __typeof__(&cuEventElapsedTime) event_elapsed;
    __typeof__(&cuEventDestroy) event_destroy;
    __typeof__(&cuStreamIsCapturing) stream_is_capturing;
    __typeof__(&cuStreamQuery) stream_query;
    __typeof__(&cuThreadExchangeStreamCaptureMode) exchange_capture_mode;
    __typeof__(&cuInit) init;
    __typeof__(&cuMemGetAddressRange_v2) mem_get_address_range;
    __typeof__(&cuArrayGetMemoryRequirements) array_requirements;
    __typeof__(&cuMipmappedArrayGetMemoryRequirements) mipmap_requirements;
    __typeof__(&cuDeviceGetMemPool) device_get_mem_pool;
    __typeof__(&cuDeviceGetDefaultMemPool) device_get_default_mem_pool;
    __typeof__(&cuMemPoolGetAttribute) mem_pool_get_attribute;
    __typeof__(&cuDeviceGetGraphMemAttribute) graph_mem_attribute;
    __typeof__(&cuDeviceGetAttribute) device_get_attribute;
    __typeof__(&cuStreamCreate) stream_create;
    __typeof__(&cuStreamDestroy_v2) stream_destroy;
    /* swap.c: pinned host copies of converted allocations */
    __typeof__(&cuMemHostAlloc) mem_host_alloc;
    __typeof__(&cuMemFreeHost) mem_free_host;
    /* vmm.c: address ranges and the physical memory behind them */
    __typeof__(&cuMemAddressReserve) mem_address_reserve;
    __typeof__(&cuMemAddressFree) mem_address_free;
    __typeof__(&cuMemMap) mem_map;
    __typeof__(&cuMemUnmap) mem_unmap;
    __typeof__(&cuMemSetAccess) mem_set_access;
    __typeof__(&cuMemGetAllocationGranularity) mem_get_granularity;
    __typeof__(&cuDeviceCanAccessPeer) device_can_access_peer;
    /* collectives.c: kernel names (CUDA 12.3+; declared here, as older
     * headers lack them) */
    CUresult (*func_get_name)(const char **name, CUfunction f);
    CUresult (*kernel_get_name)(const char **name, void *kernel);
};
/* Loads the driver once; NULL if libcuda.so.1 cannot be loaded. */
const struct hook_driver *hook_driver(void);

/* ---- client_start.c ---------------------------------------------------- */

enum hook_gating { HOOK_GATING_UNKNOWN, HOOK_GATING_ON, HOOK_GATING_OFF };
extern _Atomic int hook_gating;
/* The GPU of the calling thread's current context (0 with one GPU). */
extern HOOK_TLS int hook_current_gpu;

/* Starts the client if that has not been tried yet and CUDA is initialised.
 * Returns the resulting enum hook_gating. */
int hook_gating_start(void);
/* The GPU index (CUDA ordinal) of the device with this UUID
 * ("GPU-xxxxxxxx-..."), or -1. Initialises the driver if the process has
 * not (nvidia-smi never does). */
int hook_gpu_by_uuid(const char *uuid);

/* The GPU a submission from this thread goes to, or -1 if not gating. */
static inline int hook_submit_gpu(void)
{
    int state = atomic_load_explicit(&hook_gating, memory_order_relaxed);

    if (hook_unlikely(state != HOOK_GATING_ON))
        state = hook_gating_start();
    return state == HOOK_GATING_ON ? hook_current_gpu : -1;
}

/* ---- collectives.c ------------------------------------------------------ */

/* What is known of each launched function: a slot holds
 * (address << 1) | collective, 0 when free (user-space addresses leave the
 * top bit clear); open addressing from hook_kernel_slot(). */
#define HOOK_KERNEL_SLOTS 4096 /* a power of two; far more than NCCL has */
extern _Atomic uintptr_t hook_kernel_table[HOOK_KERNEL_SLOTS];

static inline size_t hook_kernel_slot(CUfunction f)
{
    return (size_t)(((uintptr_t)f >> 4) * 0x9e3779b97f4a7c15ull >> 52) &
           (HOOK_KERNEL_SLOTS - 1);
}

void hook_kernel_launched_slow(int gpu, CUfunction f);

/* After kernel f was launched on gpu, while the submission is in flight:
 * counts it if it is a collective (nvshare_collective_submitted). */
static inline void hook_kernel_launched(int gpu, CUfunction f)
{
    uintptr_t slot = atomic_load_explicit(&hook_kernel_table[hook_kernel_slot(f)],
                                          memory_order_relaxed);

    if (hook_unlikely(slot != (uintptr_t)f << 1))
        hook_kernel_launched_slow(gpu, f);
}

/* ---- context.c ---------------------------------------------------------- */

/* Who hears of contexts, registered at load (before any CUDA call): made
 * (created or retained: client_start.c starts the client), destroying and
 * destroyed (gone: NULL if the driver refused; swap.c and its ring). */
struct hook_context_observer {
    void (*made)(void);
    void (*destroying)(void);
    void (*destroyed)(CUcontext gone);
};
void hook_context_observe(const struct hook_context_observer *observer);
/* The client tracks count GPUs: with more than one, each thread's current
 * GPU is followed. */
void hook_context_track_gpus(int count);

/* Runs fn(drv, ctx, arg) on every context this process created or retained
 * on gpu, with ctx pushed on the calling thread (the previous current
 * context is current again afterwards) and stream capture relaxed. The
 * registry lock is held throughout, so no context dies meanwhile. Stops
 * early when fn returns false; returns false then. */
bool hook_for_each_context(int gpu,
                           bool (*fn)(const struct hook_driver *drv,
                                      CUcontext ctx, void *arg),
                           void *arg);
/* Whether ctx is a context this process created or retained and has not
 * destroyed or released. */
bool hook_context_live(CUcontext ctx);
/* One of this process's contexts on gpu, or NULL. Alive while the caller
 * holds swap_pins_pause() (a destruction waits for it). */
CUcontext hook_first_context(int gpu);

/* ---- backlog.c ---------------------------------------------------------- */

extern HOOK_TLS int hook_backlog_countdown;
extern HOOK_TLS CUgraphExec hook_backlog_graph; /* the last one launched */
void hook_backlog_check(CUstream stream, int pt_flags);
/* What the thread submits next is new work: measure its cost afresh. */
void hook_backlog_restart(void);

/* Busy measurement (backlog.c) around the SYNC wrappers (cuCtxSynchronize,
 * cuStreamSynchronize): the time a thread waits there is time its work kept
 * the GPU busy. begin: before the real call, whether the mark of the
 * thread's last backlog check is still pending (then the wait proves it
 * pending up to the end); a thread-local load when there is no such mark. */
extern HOOK_TLS bool hook_busy_mark_live;
bool hook_busy_sync_begin(void);
void hook_busy_sync_end(uint64_t start_ns, bool mark_pending);
/* The drain of gpu began: spans around it are not reported. */
void hook_busy_released(int gpu);

static inline uint64_t hook_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* After each gated stream submission: every so many, check the backlog. */
static inline void hook_backlog_tick(CUstream stream, int pt_flags)
{
    if (hook_unlikely(--hook_backlog_countdown <= 0))
        hook_backlog_check(stream, pt_flags);
}

/* After a graph launch: a graph other than the last one may cost anything
 * (a whole training step where the eager warm-up's kernels took
 * microseconds), so its first launch is checked. */
static inline void hook_backlog_graph_tick(CUgraphExec graph, CUstream stream,
                                           int pt_flags)
{
    if (hook_unlikely(graph != hook_backlog_graph)) {
        hook_backlog_graph = graph;
        hook_backlog_restart();
    }
    hook_backlog_tick(stream, pt_flags);
}

static inline CUstream config_stream(const CUlaunchConfig *config)
{
    return config ? config->hStream : NULL;
}

/* ---- ledger.c, allocations.c, memory_pools.c, memory_paths.c, vmm*.c --- */

/* What the output of an allocation names, so that a free of the same value
 * finds it: the same number can be a pointer and an array handle. */
enum mem_kind { MEM_NOTHING, MEM_DEVPTR, MEM_ARRAY, MEM_MIPMAP, MEM_VMM };

struct mem_claim;

/* What swap.c keeps of an evictable allocation, in the allocation map. */
struct mem_swap_slot {
    bool converted; /* made by vmm.c for swapping: device memory to the
                       application, at addresses that outlive its pages */
    bool out;       /* its data is in backing, its physical memory released */
    CUmemGenericAllocationHandle physical; /* converted: behind it, or 0 */
    void *backing; /* pinned host copy, from its preparation to its free */
    bool pageable; /* backing is plain host memory, only while out */
    bool blank_at_birth;      /* made while this process could not submit
                                 to its GPU (gate closed) */
    uint64_t grants_at_birth; /* nvshare_lock_grants() when it was made */
};

/* What the map knows of one live allocation. Managed ones (evictable) also
 * carry the context they were made in, where swap.c moves them. */
struct mem_record {
    int gpu;
    uint64_t bytes;
    bool managed;
    CUcontext ctx;
    struct mem_swap_slot swap;
};

/* How one allocation path differs from the plain pattern (charge the
 * requested bytes, remember them by the output). Every hook is optional. */
struct mem_path {
    /* Bytes the allocation really took, read after it succeeded. */
    uint64_t (*measure)(const struct mem_claim *claim);
    /* Frees what the driver allocated, when the measured bytes do not fit. */
    void (*undo)(const struct mem_claim *claim);
    /* Takes the charged bytes instead of the allocation map. */
    void (*commit)(const struct mem_claim *claim, uint64_t bytes);
    /* Runs last, on every outcome. */
    void (*finish)(const struct mem_claim *claim);
    /* Makes the allocation instead of the entry point's own driver
     * function (swappable memory: vmm.c instead). */
    CUresult (*allocate)(struct mem_claim *claim);
    /* The claim settled pools itself (and holds their lock). */
    bool settles_pools;
};

/* One allocation in flight: made before the driver call from its
 * arguments, settled after it. */
struct mem_claim {
    int gpu;                     /* -1: not device memory, not charged */
    uint64_t bytes;              /* charged before the call */
    enum mem_kind kind;          /* of the output, for the map */
    const void *out;             /* where the driver writes the output */
    const struct mem_path *path; /* NULL: the plain pattern */
    bool managed;                /* evictable (swap.c): managed memory, */
    bool converted;              /* ... or made by vmm.c */
    bool precharged; /* bytes already charged (a parked block reused) */
    CUmemGenericAllocationHandle physical; /* converted: behind it */
    union {
        struct {
            const size_t *pitch;
            size_t width, height;
            unsigned element;
        } pitch;
        struct {
            CUmemoryPool pool;
            CUstream stream;
            bool pt;
        } pool;
        struct {
            CUstream stream;
            bool pt;
            CUdeviceptr reused; /* a parked block's, or 0 */
        } async;
        CUdevice dev;
        const CUmemAllocationProp *prop; /* cuMemCreate's */
    } u;
};

/* A free in flight: the map entry is taken out before the driver call (so
 * that an address the driver reuses at once is never confused with it) and
 * put back if the free fails. after() runs on success for pools. */
struct mem_free {
    enum mem_kind kind;
    uint64_t key;
    bool found;
    struct mem_record rec; /* what was found */
    void (*after)(const struct mem_free *f);
    CUmemoryPool pool;
    CUdevice dev;
    bool stream_ordered; /* cuMemFreeAsync: queued work may still use it */
    CUstream stream;     /* ... on this stream */
    bool pt;             /* ... of the per-thread default stream family */
    bool parked;         /* kept for reuse (vmm_async.c), still charged */
};

/* allocations.c */
int hook_alloc_gpu(void);
/* Bytes outside the allocation map that count as evictable (add), or no
 * longer: an allocation vmm.c makes that waits for room (so that the
 * scheduler admits this process, as a waiter for memory, only where they
 * fit) and stream-ordered frees parked for reuse (vmm_async.c). */
void mem_evictable_extra(int gpu, uint64_t bytes, bool add);
/* Whether ptr is the start of an allocation vmm.c made. */
bool mem_is_converted(CUdeviceptr ptr);
/* The allocation (kind, key) counts as evictable, or no longer. */
void mem_set_evictable(enum mem_kind kind, uint64_t key, bool evictable);
/* Whether a free is libnvshare's to make (what vmm.c made, a token of
 * vmm_app.c), and makes it in place of the entry point's driver function. */
bool mem_free_is_ours(const struct mem_free *f);
CUresult mem_free_ours(struct mem_free *f);

struct staging_run;
/* vmm_app.c: the application's own VMM, behind tokens while swappable. */
bool vmm_app_is_token(uint64_t handle);
CUresult vmm_app_create(int gpu, CUmemGenericAllocationHandle *handle,
                        uint64_t size, const CUmemAllocationProp *prop);
CUresult vmm_app_release(uint64_t token);
/* Whether releasing token ends the application's hold (no retain left):
 * only then does the quota get its bytes back. */
bool vmm_app_last_ref(uint64_t token);
/* A swap of gpu: begin locks the application's VMM until end; queue puts
 * the copies of what moves on run (and, in, maps it again first), and
 * returns their bytes; end settles them once run's copies were waited
 * for (copied: all succeeded). */
void vmm_app_swap_begin(void);
uint64_t vmm_app_queue(int gpu, bool to_device, struct staging_run *run);
void vmm_app_swap_end(int gpu, bool to_device, bool copied);
/* Calls add(host, bytes, arg) with the host copy of each mapping a
 * swap-out of gpu would copy, made (not filled) where it had none. */
void vmm_app_host_copies(int gpu,
                         void (*add)(void *host, uint64_t bytes, void *arg),
                         void *arg);

/* vmm.c: ranges whose physical memory can go and come back (all return
 * the driver's error; vmm_allocate waits for room the scheduler makes). */
uint64_t vmm_granularity(int gpu); /* 0: no virtual memory management */
/* Whether an allocation of bytes on gpu is made swappable now:
 * nvshare_oversub_for_allocation(), the driver has virtual memory
 * management, and bytes is at least its granularity. */
bool hook_oversub(int gpu, uint64_t bytes);
uint64_t vmm_rounded(int gpu, uint64_t bytes);
CUresult vmm_allocate(int gpu, uint64_t bytes, CUdeviceptr *va,
                      CUmemGenericAllocationHandle *physical);
CUresult vmm_back(int gpu, CUdeviceptr va, uint64_t bytes,
                  CUmemGenericAllocationHandle *physical);
CUresult vmm_create(int gpu, uint64_t bytes, const CUmemAllocationProp *prop,
                    CUmemGenericAllocationHandle *physical);
/* What vmm_create calls on a full GPU before it waits: frees memory this
 * process keeps, returns its bytes (vmm_async.c installs it). */
void vmm_on_full_release(uint64_t (*release)(int gpu));
/* Whether an allocation of this process waits for room: the process that
 * needs memory, not the one that will give it, so no host copies of its
 * are made ahead. */
bool vmm_room_awaited(void);
CUresult vmm_create_waiting(int gpu, uint64_t bytes,
                            const CUmemAllocationProp *prop,
                            CUmemGenericAllocationHandle *physical);
CUresult vmm_unback(CUdeviceptr va, uint64_t bytes,
                    CUmemGenericAllocationHandle *physical);
CUresult vmm_free(CUdeviceptr va, uint64_t bytes,
                  CUmemGenericAllocationHandle *physical);
/* vmm_async.c: stream-ordered allocations made by vmm.c, their frees
 * parked for reuse. */
bool vmm_async_wanted(int gpu, uint64_t bytes, CUstream stream, bool pt);
/* Takes a parked block of about bytes usable on stream now. */
bool vmm_async_reuse(int gpu, uint64_t bytes, CUstream stream, bool pt,
                     CUdeviceptr *va, uint64_t *block_bytes,
                     CUmemGenericAllocationHandle *physical);
/* Parks a block freed on stream (false: it could not be, free it now). */
bool vmm_async_park(int gpu, CUdeviceptr va, uint64_t bytes,
                    CUmemGenericAllocationHandle physical, CUstream stream,
                    bool pt);
uint64_t vmm_async_parked(int gpu);
/* Frees gpu's parked blocks and gives their charge back; their bytes. */
uint64_t vmm_async_drain(int gpu);
/* cuMemPoolTrimTo(pool): a default pool's trim frees its parked blocks. */
void vmm_async_pool_trimmed(CUmemoryPool pool);
/* Bytes of live managed allocations on gpu. */
uint64_t mem_managed_bytes(int gpu);
/* Calls fn(ptr, bytes, slot, arg) for each live managed allocation of gpu
 * made in ctx, then done(arg), all with the allocation map locked: a free
 * or an allocation on another thread waits until done returns, so nothing
 * fn was given is freed or replaced before then. fn and done must not
 * allocate or free through libnvshare. */
void mem_for_each_managed(int gpu, CUcontext ctx,
                          void (*fn)(CUdeviceptr ptr, uint64_t bytes,
                                     struct mem_swap_slot *slot, void *arg),
                          void (*done)(void *arg), void *arg);
/* Calls fn(ptr, bytes, ctx, slot, arg) for each live managed allocation of
 * gpu, whatever its context, with the map locked (same rules as above). */
void mem_for_each_managed_on_gpu(int gpu,
                                 void (*fn)(CUdeviceptr ptr, uint64_t bytes,
                                            CUcontext ctx,
                                            struct mem_swap_slot *slot, void *arg),
                                 void *arg);
/* If the live managed allocation at ptr is on gpu and has exactly bytes:
 * returns fn(ctx, slot, arg), called with the map locked. Else false. */
bool mem_with_managed(int gpu, CUdeviceptr ptr, uint64_t bytes,
                      bool (*fn)(CUcontext ctx, struct mem_swap_slot *slot,
                                 void *arg),
                      void *arg);
/* ledger.c: the map's entries. put returns false if there was no memory
 * to remember it; take, whether (kind, key) was there. */
bool mem_map_put(enum mem_kind kind, uint64_t key, const struct mem_record *rec);
bool mem_map_take(enum mem_kind kind, uint64_t key, struct mem_record *rec);
/* allocations.c: the claims and frees of the ALLOC and FREE wrappers. */
bool mem_claim_reserve(struct mem_claim *claim);
CUresult mem_claim_refused(struct mem_claim *claim);
CUresult mem_claim_settle(struct mem_claim *claim, CUresult rc);
void mem_free_take(struct mem_free *f);
void mem_free_settle(struct mem_free *f, CUresult rc);

/* memory_pools.c: pool and graph memory charged by what is reserved. */
extern _Atomic bool mem_pools_in_use;
void mem_pools_settle(int gpu);
void mem_pool_created(CUmemoryPool pool, int gpu);
struct mem_claim mem_pool_claim(CUmemoryPool pool, int gpu, size_t bytes,
                                CUstream stream, bool pt, CUdeviceptr *out);
void mem_pool_after_trim(const struct mem_free *f);
void mem_pool_after_destroy(const struct mem_free *f);
struct mem_claim mem_graph_claim(int gpu, uint64_t bytes);
void mem_graph_after_trim(const struct mem_free *f);

/* memory_paths.c: one function per ALLOC / FREE / INFO / EXPORT entry
 * point, with the entry point's own parameters. */
#define MEM_DECLARE_ALLOC(e, params) struct mem_claim mem_claim_##e params;
#define MEM_DECLARE_FREE(e, params) struct mem_free mem_free_##e params;
#define MEM_DECLARE_INFO(e, params) void mem_view_##e params;
#define MEM_DECLARE_EXPORT(e, params) void mem_export_refused_##e params;
#define MEM_DECLARE_SUBMIT(e, params)
#define MEM_DECLARE_KERNEL(e, params)
#define MEM_DECLARE_GRAPH(e, params)
#define MEM_DECLARE_SUBMIT_SYNC(e, params)
#define MEM_DECLARE_SYNC(e, params)
#define MEM_DECLARE_OTHER(e, params)
#define MEM_DECLARE_CTX(e, params)
#define MEM_DECLARE_VMM(e, params)
#define MEM_DECLARE_LOOKUP(e, params)
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    MEM_DECLARE_##cat(e, params)
#include "entry_points.def"
#undef NVSHARE_SYMBOL

/* ---- swap.c ------------------------------------------------------------- */

/* nvshare_client_ops swap_out / swap_in (contracts in nvshare_client.h):
 * move every managed allocation of gpu to the host / back to gpu on
 * private streams of its context, wait, and return the bytes moved. Call
 * the real driver only (never gated), on any thread. */
uint64_t hook_swap_out(int gpu, void *user);
uint64_t hook_swap_in(int gpu, void *user);
/* nvshare_client_ops prepare_swap: makes staging.c's ring on a background
 * thread, so that no swap-out pins. */
void hook_prepare_swap(int gpu, void *user);
/* Around the destruction of a context: the ring is not being made in it
 * meanwhile (waits for the pin in progress). */
void swap_pins_pause(void);
void swap_pins_resume(void);

/* ---- staging.c ---------------------------------------------------------- */

/* One swap's copies in one context, through the ring when there is one. */
struct staging_run {
    const struct hook_driver *drv;
    CUstream *streams;
    int n_streams;
    unsigned next_stream;
    CUcontext ctx; /* current, where the ring is made if need be */
    bool tried;    /* the ring was asked for (at the first copy) */
    bool ring;     /* false: plain copies, staged by the driver */
    CUevent events[32];
    uint64_t next_slot;
    int failures;
    CUresult first_error;
};
/* Makes the process's ring in ctx (current), once; whether there is one. */
bool staging_make(CUcontext ctx);
/* ctx is gone, and with it the ring if it was made there. */
void staging_context_destroyed(CUcontext ctx);
/* Begins a run on streams of ctx, the current context (one run uses the
 * ring at a time). */
void staging_begin(struct staging_run *r, const struct hook_driver *drv,
                   CUcontext ctx, CUstream *streams, int n_streams);
/* Queues the copy of bytes between device memory and a host copy. */
void staging_copy(struct staging_run *r, bool to_device, CUdeviceptr dev,
                  void *host, uint64_t bytes);
/* Waits for every copy of the run and ends it: the first error, if any. */
CUresult staging_end(struct staging_run *r);
/* Host copies: plain memory, huge pages where the kernel has them;
 * retired while their allocation is on the GPU, freed with it. */
void *staging_host_alloc(uint64_t bytes);
void staging_host_retire(void *p, uint64_t bytes);
void staging_host_free(void *p, uint64_t bytes);
/* Makes the pages of host copies now, ahead of a swap-out that would
 * otherwise fault them in (as far as the host's margin allows, and until
 * stop() says so); the bytes made. */
struct staging_host_copy {
    void *host;
    uint64_t bytes;
};
uint64_t staging_host_prefault(struct staging_host_copy *copies, size_t n,
                               bool (*stop)(void));

/* ---- nvml.c ------------------------------------------------------------- */

/* libnvshare's NVML wrapper of that exact name, or NULL. */
void *hook_nvml_wrapper(const char *name);

/* ---- stats.c ------------------------------------------------------------ */

extern bool hook_stats_enabled;
extern _Atomic uint64_t hook_stat_calls[NVSHARE_SYMBOL_COUNT];
extern _Atomic uint64_t hook_stat_gated[NVSHARE_SYMBOL_COUNT];

enum hook_event {
    HOOK_EV_DLSYM_SUBSTITUTED, /* dlsym answered with a wrapper */
    HOOK_EV_PROC_SUBSTITUTED,  /* cuGetProcAddress answered with a wrapper */
    HOOK_EV_PROC_UNMAPPED,     /* ... with a wrapped API we could not map */
    HOOK_EV_BACKLOG_CHECKS,
    HOOK_EV_BACKLOG_WAITS,
    HOOK_EV_BACKLOG_WAIT_US,
    HOOK_EV_PROCESS_MARKS,     /* marks in the process's table (backlog.c) */
    HOOK_EV_BUSY_NS,           /* busy time reported (nvshare_note_busy) */
    HOOK_EV_BUSY_SPAN_NS,      /* ... of this much wall time */
    HOOK_EV_BUSY_SKIPPED,      /* spans not reported: a gate wait possible */
    HOOK_EV_OVERSUB_CONVERTED, /* device allocations made by vmm.c */
    HOOK_EV_SWAP_OUTS,
    HOOK_EV_SWAP_OUT_BYTES,
    HOOK_EV_SWAP_OUT_US,
    HOOK_EV_SWAP_INS,
    HOOK_EV_SWAP_IN_BYTES,
    HOOK_EV_SWAP_IN_US,
    HOOK_EV_HOST_MADE_AHEAD, /* bytes of host copies made by PREPARE_SWAP */
    HOOK_EV_COUNT
};
extern _Atomic uint64_t hook_stat_events[HOOK_EV_COUNT];

void hook_stats_init(void);

static inline void hook_count(_Atomic uint64_t *counter, uint64_t n)
{
    if (hook_unlikely(hook_stats_enabled))
        atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

#endif
