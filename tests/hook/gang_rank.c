/* gang_rank.c - one rank of a data-parallel job on the fake driver, for
 * gang grants. Each step launches four simulated kernels of KERNEL_US on
 * its device, synchronizes, then waits at a barrier that the job's ranks
 * share (a mapped file standing in for an NCCL all-reduce): a step ends
 * only when every rank has done its part. As NCCL's collective kernels
 * spin on the GPU until every rank arrives, a rank waits by launching
 * short kernels: it keeps its GPU busy (no idle release), and a rank whose
 * peer is gated burns its own quantum.
 *
 *   gang_rank DEVICE BARRIER_FILE RANKS FROM_REALTIME_NS UNTIL_REALTIME_NS
 *             [KERNEL_US]
 *
 * Prints steps=<steps completed between FROM and UNTIL> rate=<per second>.
 * RANKS 1: no barrier (a single-GPU job). A barrier that waits past UNTIL
 * ends the run: its peer has stopped. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

struct barrier {
    uint32_t arrived;
    uint32_t generation;
};

static long long realtime_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Returns 0 once every rank arrived, -1 if UNTIL passed first (or the
 * driver failed). */
static int barrier_wait(struct barrier *b, uint32_t ranks, long long until,
                        CUfunction spin)
{
    uint32_t generation = __atomic_load_n(&b->generation, __ATOMIC_ACQUIRE);

    if (__atomic_add_fetch(&b->arrived, 1, __ATOMIC_ACQ_REL) == ranks) {
        __atomic_store_n(&b->arrived, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&b->generation, 1, __ATOMIC_RELEASE);
        return 0;
    }
    while (__atomic_load_n(&b->generation, __ATOMIC_ACQUIRE) == generation) {
        if (realtime_ns() > until ||
            cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) ||
            cuCtxSynchronize())
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    CUcontext ctx;
    CUmodule mod;
    CUfunction kernel, spin;
    char name[32];
    long steps = 0;
    struct barrier *b = NULL;

    if (argc < 6) {
        fprintf(stderr, "usage: %s DEVICE BARRIER_FILE RANKS FROM_REALTIME_NS "
                        "UNTIL_REALTIME_NS [KERNEL_US]\n", argv[0]);
        return 2;
    }
    int device = atoi(argv[1]);
    uint32_t ranks = (uint32_t)atoi(argv[3]);
    long long from = atoll(argv[4]), until = atoll(argv[5]);
    snprintf(name, sizeof(name), "sleep_%dus", argc > 6 ? atoi(argv[6]) : 1000);
    if (ranks > 1) {
        int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
        if (fd < 0 || ftruncate(fd, sizeof(*b)) != 0 ||
            (b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED,
                      fd, 0)) == MAP_FAILED) {
            perror("gang_rank: barrier");
            return 1;
        }
        close(fd);
    }
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, device) ||
        cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, "fake") ||
        cuModuleGetFunction(&kernel, mod, name) ||
        cuModuleGetFunction(&spin, mod, "sleep_100us")) {
        fprintf(stderr, "gang_rank: the fake driver refused to start\n");
        return 1;
    }
    while (realtime_ns() < until) {
        for (int i = 0; i < 4; i++)
            if (cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL))
                return 1;
        cuCtxSynchronize();
        if (b && barrier_wait(b, ranks, until, spin) != 0)
            break;
        long long done = realtime_ns();
        if (done >= from && done <= until)
            steps++;
    }
    printf("steps=%ld rate=%.2f\n", steps, (double)steps * 1e9 / (double)(until - from));
    return 0;
}
