/* fake.h - internals of the fake CUDA driver (libcuda.so.1 for tests).
 *
 * The fake simulates a driver well enough for libnvshare's tests and for the
 * CUDA runtime's bootstrap: devices with UUIDs and memory (one device's
 * memory shared by a test's processes, shared_gpu.c), contexts, streams
 * with virtual timelines, events, kernels with a simulated duration, stream
 * capture into graphs, NCCL-like collective kernels that wait for every
 * rank of a job, and VMM with the driver's rules and a model of what each
 * page of memory holds, so that a swap that loses data shows (memory.c).
 * See docs/interposition.md for the environment it reads.
 *
 * All state is behind one lock (fake_lock); waits happen outside it. The
 * library is linked -Bsymbolic so that its calls to itself are never diverted
 * to a preloaded interposer, and it never looks itself up with dlsym. */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "entry_points.h"

#define FAKE_MAX_DEVICES 16

/* A collective kernel queued on a stream (collective.c): it starts once
 * every rank of the job has launched its seq-th collective. seq 0: none. */
struct fake_coll {
    uint64_t seq;      /* this process's seq-th collective, from 1 */
    uint64_t ready_ns; /* when its stream reached it */
    uint64_t duration_ns;
    const char *what; /* traced as, once its start is known */
};

struct fake_stream {
    struct fake_ctx *ctx;
    /* End of the last work queued, CLOCK_MONOTONIC; while coll is
     * unresolved, the end is unknown and after_ns of ordinary work waits
     * behind the collective instead. */
    uint64_t busy_until_ns;
    struct fake_coll coll;
    uint64_t after_ns;
    /* Between cuStreamBeginCapture and cuStreamEndCapture: work launched
     * on it is captured, not run; its durations add up to the graph's. */
    bool capturing;
    bool global; /* begun in CU_STREAM_CAPTURE_MODE_GLOBAL */
    uint64_t captured_ns;
    struct fake_stream *next; /* in ctx->streams */
};

/* A stream's end while a collective on it waits for its peers. */
#define FAKE_UNRESOLVED UINT64_MAX

struct fake_ctx {
    int dev;
    struct fake_stream legacy;
    struct fake_stream *streams; /* created and per-thread streams */
};

extern pthread_mutex_t fake_lock;

/* The file FAKE_CUDA_SHARED_GPU names, mapped by every process that names
 * it (shared_gpu.c): the shared device's "busy until" (timeline.c), its
 * memory in use by all processes, and who has a context on which device
 * with how much memory, which the fake NVML lists as its running
 * processes. A slot is free when pid is 0; one whose pid is dead is
 * reaped (its memory given back) by the next process that needs memory,
 * a slot or the free amount. */
#define FAKE_SHARED_MAX_PROCS 64
struct fake_shared_gpu {
    _Atomic uint64_t busy_until_ns;
    _Atomic uint64_t used[FAKE_MAX_DEVICES]; /* bytes, all processes */
    struct {
        _Atomic int32_t pid;      /* 0: free, -1: being reaped */
        _Atomic uint32_t devices; /* bit d: a context on device d */
        _Atomic uint64_t used;    /* bytes of device memory, all devices */
        _Atomic uint64_t used_on[FAKE_MAX_DEVICES];
    } procs[FAKE_SHARED_MAX_PROCS];
};
/* The mapping, or NULL without FAKE_CUDA_SHARED_GPU (or if it failed). */
struct fake_shared_gpu *fake_shared_gpu_map(void);
/* This process has a context on dev: the fake NVML lists it. */
void fake_shared_gpu_join(int dev);
/* Takes bytes of dev's memory, node-wide: false if the processes' sum
 * would pass FAKE_CUDA_MEM_MB. Always true without the file. */
bool fake_shared_gpu_take(int dev, uint64_t bytes);
void fake_shared_gpu_give(int dev, uint64_t bytes);
/* *used: dev's memory held by all processes; false without the file. */
bool fake_shared_gpu_used(int dev, uint64_t *used);
/* The process exited: no such pid, or a zombie (collective.c). */
bool fake_pid_gone(int32_t pid);

/* uuids.c: the devices named by FAKE_CUDA_DEVICES; returns the count. */
int fake_read_uuids(CUuuid uuids[FAKE_MAX_DEVICES]);

/* memory.c: every live allocation, by what the driver handed out. */
enum fake_mem_kind {
    FAKE_MEM_LINEAR, /* cuMemAlloc, pitch, managed, mapped external, pool */
    FAKE_MEM_IPC,    /* opened from a handle: another process's memory */
    FAKE_MEM_ARRAY,
    FAKE_MEM_MIPMAP,
    FAKE_MEM_VMM,
};
struct fake_pool;
/* Records an allocation of size on dev and returns its handle in *out.
 * physical: it takes device memory (CUDA_ERROR_OUT_OF_MEMORY if there is
 * not enough). pool: the pool it came from (its memory is the pool's). */
CUresult fake_mem_new(enum fake_mem_kind kind, int dev, uint64_t size,
                      bool physical, struct fake_pool *pool,
                      unsigned long long *out);
/* Removes the allocation handle of kind; returns its size and pool. */
CUresult fake_mem_delete(enum fake_mem_kind kind, uint64_t handle,
                         uint64_t *size, struct fake_pool **pool);
/* Takes / gives back device memory (pools grow and shrink with these). */
bool fake_mem_take(int dev, uint64_t bytes);
void fake_mem_give(int dev, uint64_t bytes);

/* pools.c: an allocation of a pool was freed. */
void fake_pool_freed(struct fake_pool *pool, uint64_t size);

/* device.c */
int fake_device_count(void);
bool fake_initialized(void);
uint64_t fake_memory_total(int dev);
/* CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: 1 unless
 * FAKE_CUDA_CONCURRENT_MANAGED=0. */
bool fake_concurrent_managed_access(void);

/* context.c: the calling thread's current context, NULL if none. */
struct fake_ctx *fake_current(void);
/* The latest end of the work queued on any stream of ctx, FAKE_UNRESOLVED
 * while a collective on one of them waits for its peers. Lock held. */
uint64_t fake_ctx_busy_until_locked(struct fake_ctx *ctx);

/* collective.c (FAKE_CUDA_COLLECTIVE, FAKE_CUDA_COLLECTIVE_RANKS) */
/* Collectives are coupled across processes (both variables are set and the
 * shared file could be mapped); otherwise they are ordinary kernels. Maps
 * the file and takes this process's slot on first call. */
bool fake_collective_enabled(void);
/* This process launched its next collective, which its stream reaches at
 * ready_ns; returns its seq (1, 2, ...). Lock held (seqs follow launches). */
uint64_t fake_collective_arrive(uint64_t ready_ns);
/* Whether every rank launched c's seq-th collective (or exited); if so,
 * *end is when c ends. Never waits. */
bool fake_collective_end(const struct fake_coll *c, uint64_t *end);
/* The pause between two looks at an unresolved collective (lock not held);
 * *round counts the looks of one wait, from 0. */
void fake_collective_pause(unsigned *round);

/* timeline.c */
uint64_t fake_now_ns(void);
void fake_wait_until(uint64_t t_ns);
/* A collective's end is known now (or there was none): busy_until_ns is
 * the stream's end. Otherwise false. Lock held. */
bool fake_stream_settle_locked(struct fake_stream *s);
/* Queues duration_ns of work on stream (pt: a _ptsz call, whose NULL stream
 * is the per-thread one) and traces it as `what`. */
CUresult fake_submit(CUstream stream, bool pt, uint64_t duration_ns,
                     const char *what);
/* The same for a transfer of bytes, traced "<what> <start> <end> <bytes>". */
CUresult fake_submit_bytes(CUstream stream, bool pt, uint64_t duration_ns,
                           const char *what, uint64_t bytes);
/* A potentially unsafe call (pinning, synchronizing) from a thread in the
 * global capture mode while a global capture runs: refused, and the
 * capture invalidated (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). */
bool fake_unsafe_call_refused(void);

/* module.c: the simulated duration of a kernel. */
uint64_t fake_function_duration_ns(CUfunction f);
const char *fake_function_name(CUfunction f);
/* Its name starts with "ncclDevKernel_" (whether or not collectives are
 * coupled: see fake_collective_enabled). */
bool fake_function_is_collective(CUfunction f);

/* Per-thread variants the fake exports that are not in entry_points.def
 * (cuda.h declares them only under CUDA_API_PER_THREAD_DEFAULT_STREAM). */
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
CUresult cuStreamQuery_ptsz(CUstream hStream);
CUresult cuStreamIsCapturing_ptsz(CUstream hStream,
                                  CUstreamCaptureStatus *captureStatus);
/* Not in the table either (the _v2 prefetch's per-thread variant is). */
CUresult cuMemRangeGetAttribute(void *data, size_t dataSize,
                                CUmem_range_attribute attribute,
                                CUdeviceptr devPtr, size_t count);
#if CUDA_VERSION < 12030
/* CUDA 12.3 added it; the fake exports it whatever headers it is built
 * with, as libnvshare looks kernels' names up through it. */
CUresult cuFuncGetName(const char **name, CUfunction hfunc);
#endif

#endif
