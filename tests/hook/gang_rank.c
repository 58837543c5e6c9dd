/* gang_rank.c - one rank of a data-parallel job on the fake driver, for
 * gang grants. Each step launches four simulated kernels of KERNEL_US on
 * its device, then an all-reduce ("_Z29ncclDevKernel_AllReduce_200us") on the
 * same stream, then synchronizes its context. The all-reduce is the fake's
 * collective (FAKE_CUDA_COLLECTIVE, FAKE_CUDA_COLLECTIVE_RANKS, set by the
 * caller: docs/interposition.md): as NCCL's kernel, it starts only once
 * every rank has launched its own, so a rank whose peer is gated before its
 * all-reduce waits on the GPU - and so does any drain of its context.
 *
 *   gang_rank DEVICE RANKS FROM_REALTIME_NS UNTIL_REALTIME_NS [KERNEL_US]
 *
 * Prints steps=<steps completed between FROM and UNTIL> rate=<per second>.
 * RANKS 1: no all-reduce (a single-GPU job). Launches stop at UNTIL; a
 * rank's last all-reduce, whose peer may have stopped first, completes
 * when that peer exits (the fake's rule for a dead peer). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

static long long realtime_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    CUcontext ctx;
    CUmodule mod;
    CUfunction kernel, allreduce;
    char name[32];
    long steps = 0;

    if (argc < 5) {
        fprintf(stderr,
                "usage: %s DEVICE RANKS FROM_REALTIME_NS "
                "UNTIL_REALTIME_NS [KERNEL_US]\n",
                argv[0]);
        return 2;
    }
    int device = atoi(argv[1]);
    int ranks = atoi(argv[2]);
    long long from = atoll(argv[3]), until = atoll(argv[4]);
    snprintf(name, sizeof(name), "sleep_%dus", argc > 5 ? atoi(argv[5]) : 1000);
    if (ranks > 1 && (getenv("FAKE_CUDA_COLLECTIVE") == NULL ||
                      getenv("FAKE_CUDA_COLLECTIVE_RANKS") == NULL ||
                      atoi(getenv("FAKE_CUDA_COLLECTIVE_RANKS")) != ranks)) {
        /* The all-reduce would be an ordinary kernel: no coupling. */
        fprintf(stderr,
                "gang_rank: %d ranks need FAKE_CUDA_COLLECTIVE and "
                "FAKE_CUDA_COLLECTIVE_RANKS=%d\n",
                ranks, ranks);
        return 2;
    }
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, device) ||
        cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, "fake") ||
        cuModuleGetFunction(&kernel, mod, name) ||
        cuModuleGetFunction(&allreduce, mod, "_Z29ncclDevKernel_AllReduce_200us")) {
        fprintf(stderr, "gang_rank: the fake driver refused to start\n");
        return 1;
    }
    while (realtime_ns() < until) {
        for (int i = 0; i < 4; i++)
            if (cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL))
                return 1;
        if (ranks > 1 &&
            cuLaunchKernel(allreduce, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL))
            return 1;
        if (cuCtxSynchronize())
            return 1;
        long long done = realtime_ns();
        if (done >= from && done <= until)
            steps++;
    }
    printf("steps=%ld rate=%.2f\n", steps,
           (double)steps * 1e9 / (double)(until - from));
    return 0;
}
