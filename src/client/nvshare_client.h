/* nvshare_client.h - the runtime that lives inside every scheduled process.
 *
 * It connects to the node's scheduler, registers the process and the GPUs it
 * uses, and owns one lock per GPU. Its user (libnvshare's CUDA hooks, or the
 * simulated workloads of the tests) brackets every GPU submission with
 * nvshare_submit_begin()/nvshare_submit_end(); this header knows nothing of
 * CUDA.
 *
 * The hot path. While the process holds a GPU's lock, begin/end cost two
 * plain stores to a thread-local slot and one relaxed atomic load: no
 * syscall, no lock, no read-modify-write. The thread-local "in flight" mark
 * is what makes preemption exact: when the scheduler takes a GPU back, the
 * client closes the gate, issues membarrier(2) so that every thread of the
 * process has either published its mark or will see the closed gate, waits
 * for the marked submissions to return, and only then calls the user's drain
 * callback. No submission can slip in behind a drain.
 *
 * Failure policy. The client never exits, crashes or blocks the application
 * because of the scheduler: if it is missing, unreachable or restarts, the
 * gates open (one warning) and a background thread reconnects periodically;
 * NVSHARE_FAIL_CLOSED=1 makes submissions wait for the scheduler instead. */
#ifndef NVSHARE_CLIENT_H
#define NVSHARE_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVSHARE_MAX_GPUS 32

struct nvshare_client_ops {
    /* Called on the client's thread after the gate of gpu closed and every
     * in-flight submission returned. Must return once all work this process
     * submitted on gpu has completed. Required. */
    void (*drain)(int gpu, void *user);
    /* Non-blocking: true when all work this process submitted on gpu has
     * completed. Polled while gpu is held and no thread has submitted on it
     * for NVSHARE_IDLE_RELEASE (default 250ms): the lock is then given back
     * early. Optional; without it an idle holder keeps the lock until
     * preempted. */
    bool (*completed)(int gpu, void *user);
    /* Swappable memory (see nvshare_oversub_enabled). swap_out moves this
     * process's evictable memory on gpu to the host and returns once it is
     * there, with the bytes moved. swap_in moves it back to gpu, sets
     * *bytes to the bytes moved, and returns whether all of it is back:
     * what finds no room on the GPU stays on the host, and the next call
     * brings it. Called on the client thread: swap_out when the scheduler asks
     * for the room (never while gpu is held: after the drain), swap_in
     * before the gate opens after a swap_out (on a grant, or when a thread
     * waits while no scheduler is there), so no kernel of this process runs
     * before its memory is back. Optional: without them the process has
     * nothing to evict and says so. */
    uint64_t (*swap_out)(int gpu, void *user);
    bool (*swap_in)(int gpu, void *user, uint64_t *bytes);
    /* The scheduler may soon ask for swap_out on gpu: get ready in the
     * background (what a first swap_out would spend seconds on), and
     * return at once; swap_out must stay correct however far that got.
     * Called on the client thread. Optional. */
    void (*prepare_swap)(int gpu, void *user);
    void *user;
};

/* Identity and limits sent at registration. Fields left zero/empty are read
 * from the environment (NVSHARE_POD_NAMESPACE, NVSHARE_POD_NAME,
 * NVSHARE_CONTAINER_NAME). */
struct nvshare_client_config {
    const char *const *gpu_uuids; /* index i is "gpu i" in every call below */
    int n_gpus;
    struct nvshare_client_ops ops;
};

/* Starts the client. Returns 0, or -1 (with a log line) if the arguments are
 * unusable; a missing scheduler is not an error (see failure policy).
 * Calling it twice is an error. Safe to call from any thread. */
int nvshare_client_start(const struct nvshare_client_config *config);

/* Stops the client thread and closes the connection; held locks go back to
 * the scheduler with the connection. Gates are left open. */
void nvshare_client_stop(void);

/* ---- hot path ---------------------------------------------------------- */

/* One per application thread that ever submitted; owned by that thread,
 * read by the client thread. Never freed (threads come and go; slots of
 * exited threads are reused). */
struct nvshare_thread {
    volatile int inflight_gpu; /* gpu + 1 while submitting, else 0 */
    volatile uint64_t submits; /* submissions begun, for idle detection */
    _Atomic int in_use;
    struct nvshare_thread *next;
};

extern _Atomic int nvshare_gate_open[NVSHARE_MAX_GPUS];
extern __thread struct nvshare_thread *nvshare_self
    __attribute__((tls_model("initial-exec")));

struct nvshare_thread *nvshare_thread_register(void);
void nvshare_gate_wait(int gpu, struct nvshare_thread *self);

/* Marks the calling thread as submitting to gpu and waits until it may. */
static inline void nvshare_submit_begin(int gpu)
{
    struct nvshare_thread *self = nvshare_self;

    if (__builtin_expect(self == NULL, 0))
        self = nvshare_thread_register();
    self->inflight_gpu = gpu + 1;
    self->submits = self->submits + 1;
    atomic_signal_fence(memory_order_seq_cst); /* see membarrier above */
    if (__builtin_expect(!atomic_load_explicit(&nvshare_gate_open[gpu],
                                               memory_order_relaxed),
                         0))
        nvshare_gate_wait(gpu, self);
}

static inline void nvshare_submit_end(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    nvshare_self->inflight_gpu = 0;
}

/* Call after each collective submission on gpu (an NCCL kernel: one that
 * completes only once every rank of its job has made its own), before
 * nvshare_submit_end(). The client counts them: when a gang is preempted
 * its ranks agree to stop after the same collective, so that no drain
 * waits for a peer that the gate holds back (docs/protocol.md, Gang
 * drains). An atomic add and load. */
void nvshare_collective_submitted(int gpu);

/* ---- slow path and introspection ------------------------------------- */

/* Gives gpu back now if it is held (e.g. the application went idle). Waits
 * for in-flight submissions and calls the drain callback first. */
void nvshare_release(int gpu);

/* True once the scheduler has accepted the registration. */
bool nvshare_client_connected(void);

/* Number of times gpu's lock was granted to this process. */
uint64_t nvshare_lock_grants(int gpu);

/* Whether device allocations should be made evictable (managed memory) so
 * that the scheduler may swap this process out: NVSHARE_ENABLE_OVERSUB of
 * the process (0 or 1) if set, else the node's default that the scheduler
 * sent at registration (NVSHARE_ENABLE_OVERSUB of the daemon), else off. */
bool nvshare_oversub_enabled(void);

/* nvshare_oversub_enabled() for an allocation about to be made: a process
 * that did not set NVSHARE_ENABLE_OVERSUB first waits (at most 2 s) for the
 * first connection attempt to end, since REGISTER_OK carries the node's
 * default. Without the wait, an early allocation would stay device memory
 * in a process that is oversubscribed from then on. Never call it on the
 * client thread. */
bool nvshare_oversub_for_allocation(void);

/* The most GPU work the scheduler wants this process to keep queued, in
 * ns (0: no wish; its own NVSHARE_MAX_BACKLOG_MS applies): a lower class
 * beside a higher one keeps its drains short. A relaxed atomic load: read
 * it at backlog checks. */
uint64_t nvshare_max_backlog_ns(void);

/* How busy this process keeps gpu, for the scheduler's auto mode: of
 * span_ns of wall time, busy_ns had work of this process queued on gpu.
 * Two relaxed atomic adds: call it at backlog checks, not per launch. */
void nvshare_note_busy(int gpu, uint64_t busy_ns, uint64_t span_ns);

#endif
