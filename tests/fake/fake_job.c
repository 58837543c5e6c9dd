/* fake_job.c - a compute-bound job on the fake GPU, for `make demo` on
 * machines without one. Written against the CUDA driver API and linked to
 * the fake libcuda.so.1, so with libnvshare preloaded it goes through the
 * same interposition, gating and drain as a real application.
 *
 *   fake_job FROM_REALTIME_NS UNTIL_REALTIME_NS [KERNEL_US]
 *
 * Launches simulated kernels of KERNEL_US (default 1000) four at a time,
 * synchronizing after each four, until UNTIL; prints rate=<kernels per
 * second> counting those completed between FROM and UNTIL (like
 * bench/fixed_work.cu --window, so jobs started one by one compare), and
 * first_launch=<CLOCK_MONOTONIC ns> of its first launch, the moment it
 * asks for the GPU, to compare with the fake driver's trace, and
 * first_kernel_ms=<ms> from the process's start to the end of its first
 * kernels, what a user waits for at arrival.
 *
 * FAKE_JOB_MEM_MB=<n> allocates n MiB with cuMemAlloc_v2 first (managed
 * memory when libnvshare oversubscribes), for memory-aware scheduling.
 * FAKE_JOB_MEM_CYCLE=<k> also frees and allocates it again after every k
 * batches of kernels, for a pod whose memory comes and goes
 * (bench/soak.sh); a refused allocation is retried at the next cycle.
 * FAKE_JOB_WRITE=1 writes it (cuMemsetD8) after each allocation, so that
 * it has content to lose. With FAKE_JOB_MEM_MB it prints, at its end,
 * lost_bytes=<n> (fake_cuda_lost_bytes of the allocation: 0 when its
 * content is intact, -1 if the fake knows no memory there) and
 * address_kept=<1|0> (the driver still has an allocation of at least
 * that size starting at its address), what a swap test checks.
 *
 * FAKE_JOB_DELAY_MS=<ms> makes it wait that long after its allocation,
 * before its first kernel, without any CUDA call: a job's CPU work (data
 * loading) while its memory is on the GPU, before it has ever asked for
 * the GPU.
 *
 * FAKE_JOB_IDLE_MS=<ms> makes it pause once, after its first batch of
 * kernels, without any CUDA call, then go on: a process whose memory a
 * scheduler may swap out meanwhile and must bring back intact.
 *
 * FAKE_JOB_EVERY_MS=<ms> makes it a service: requests arrive at random
 * (Poisson, that mean gap, the same sequence every run) and each launches
 * its four kernels and synchronizes; arrivals=<CLOCK_MONOTONIC ns,...>
 * lists when each request launched its first kernel (its arrival, or the
 * end of the previous request if that ran past it), so that a test can
 * pair each with its first kernel in the fake driver's trace.
 *
 * FAKE_JOB_HANDOFF=1 has a second thread launch the last two kernels of
 * each four while the first waits, as PyTorch launches a training step's
 * backward from its autograd thread. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

static long long clock_ns(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The fake driver's record of what memory lost its content (memory.c). */
long long fake_cuda_lost_bytes(CUdeviceptr ptr);

static long long realtime_ns(void)
{
    return clock_ns(CLOCK_REALTIME);
}

/* The kernels of each four launched by the second thread, with
 * FAKE_JOB_HANDOFF=1. */
static struct {
    CUcontext ctx;
    CUfunction kernel;
    sem_t go, done;
    bool failed;
} handoff;

static void *backward_thread(void *arg)
{
    (void)arg;
    handoff.failed = cuCtxSetCurrent(handoff.ctx) != CUDA_SUCCESS;
    for (;;) {
        sem_wait(&handoff.go);
        for (int i = 0; i < 2 && !handoff.failed; i++)
            handoff.failed = cuLaunchKernel(handoff.kernel, 1, 1, 1, 1, 1, 1, 0,
                                            NULL, NULL, NULL) != CUDA_SUCCESS;
        sem_post(&handoff.done);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long long from, until;
    char name[32];
    CUcontext ctx;
    CUmodule mod;
    CUfunction kernel;
    long kernels = 0;
    long long first_launch = 0, first_done = 0;
    long long started = clock_ns(CLOCK_MONOTONIC);

    if (argc < 3) {
        fprintf(stderr,
                "usage: %s FROM_REALTIME_NS UNTIL_REALTIME_NS [KERNEL_US]\n",
                argv[0]);
        return 2;
    }
    from = atoll(argv[1]);
    until = atoll(argv[2]);
    snprintf(name, sizeof(name), "sleep_%dus", argc > 3 ? atoi(argv[3]) : 1000);
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) ||
        cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, "fake") ||
        cuModuleGetFunction(&kernel, mod, name)) {
        fprintf(stderr, "fake_job: the fake driver refused to start\n");
        return 1;
    }
    const char *mem_mb = getenv("FAKE_JOB_MEM_MB");
    const char *cycle_env = getenv("FAKE_JOB_MEM_CYCLE");
    long cycle = cycle_env ? atol(cycle_env) : 0, batches = 0;
    const char *write_env = getenv("FAKE_JOB_WRITE");
    bool write = write_env && atoi(write_env);
    size_t mem_bytes = mem_mb ? (size_t)atoll(mem_mb) << 20 : 0;
    CUdeviceptr memory = 0;
    if (mem_mb && (cuMemAlloc(&memory, mem_bytes) ||
                   (write && cuMemsetD8(memory, 1, mem_bytes)))) {
        fprintf(stderr, "fake_job: %s MiB refused\n", mem_mb);
        return 1;
    }
    const char *delay_env = getenv("FAKE_JOB_DELAY_MS");
    long long delay_ns = delay_env ? (long long)(atof(delay_env) * 1e6) : 0;
    struct timespec delay = {delay_ns / 1000000000, delay_ns % 1000000000};
    while (delay_ns > 0 && nanosleep(&delay, &delay) == -1 && errno == EINTR)
        ;
    const char *idle_env = getenv("FAKE_JOB_IDLE_MS");
    long long idle_ns = idle_env ? (long long)(atof(idle_env) * 1e6) : 0;
    const char *handoff_env = getenv("FAKE_JOB_HANDOFF");
    int own_kernels = 4;
    if (handoff_env && atoi(handoff_env)) {
        pthread_t thread;
        handoff.ctx = ctx;
        handoff.kernel = kernel;
        sem_init(&handoff.go, 0, 0);
        sem_init(&handoff.done, 0, 0);
        if (pthread_create(&thread, NULL, backward_thread, NULL) == 0) {
            pthread_detach(thread);
            own_kernels = 2;
        }
    }
    const char *every_env = getenv("FAKE_JOB_EVERY_MS");
    double every_ns = every_env ? atof(every_env) * 1e6 : 0;
    unsigned short seed[3] = {1, 2, 3};
    long long next_arrival = clock_ns(CLOCK_MONOTONIC);
    if (every_ns > 0)
        printf("arrivals=");
    while (realtime_ns() < until) {
        if (every_ns > 0) {
            next_arrival += (long long)(-every_ns * log(1 - erand48(seed)));
            if (until - realtime_ns() < next_arrival - clock_ns(CLOCK_MONOTONIC))
                break;
            struct timespec at = {next_arrival / 1000000000,
                                  next_arrival % 1000000000};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) ==
                   EINTR)
                ;
            printf("%s%lld", first_launch ? "," : "", clock_ns(CLOCK_MONOTONIC));
        }
        if (!first_launch)
            first_launch = clock_ns(CLOCK_MONOTONIC);
        if (mem_mb && cycle > 0 && ++batches % cycle == 0) {
            if (memory)
                cuMemFree(memory);
            memory = 0;
            if (cuMemAlloc(&memory, mem_bytes))
                memory = 0;
            else if (write && cuMemsetD8(memory, 1, mem_bytes))
                return 1;
        }
        for (int i = 0; i < own_kernels; i++)
            if (cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL))
                return 1;
        if (own_kernels < 4) {
            sem_post(&handoff.go);
            while (sem_wait(&handoff.done) == -1 && errno == EINTR)
                ;
            if (handoff.failed)
                return 1;
        }
        cuCtxSynchronize();
        if (!first_done) {
            first_done = clock_ns(CLOCK_MONOTONIC);
            struct timespec idle = {idle_ns / 1000000000, idle_ns % 1000000000};
            while (idle_ns > 0 && nanosleep(&idle, &idle) == -1 && errno == EINTR)
                ;
        }
        long long done = realtime_ns();
        if (done >= from && done <= until)
            kernels += 4;
    }
    if (every_ns > 0)
        printf("\n");
    printf("rate=%.2f\nfirst_launch=%lld\nfirst_kernel_ms=%.1f\n",
           (double)kernels * 1e9 / (double)(until - from), first_launch,
           first_done ? (double)(first_done - started) / 1e6 : -1.0);
    if (memory) {
        CUdeviceptr base = 0;
        size_t size = 0;
        bool kept = cuMemGetAddressRange(&base, &size, memory) == CUDA_SUCCESS &&
                    base == memory && size >= mem_bytes;
        printf("lost_bytes=%lld\naddress_kept=%d\n",
               fake_cuda_lost_bytes(memory), kept);
    }
    return 0;
}
