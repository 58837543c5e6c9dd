/* gating_test.c - submissions through libnvshare, on the fake driver.
 *
 *   gating_test run N US      launches N kernels of US microseconds each on
 *                             the legacy stream and N on the per-thread one,
 *                             then synchronizes; prints the wall time and
 *                             how many launches libnvshare gated.
 *   gating_test backlog N US  launches N kernels without synchronizing and
 *                             prints how long the launches took and how much
 *                             work was still queued after the last one.
 *   gating_test capture N US  the same on a stream, right after capturing
 *                             300 kernels on it (as a CUDA graph is made
 *                             before its replays), after 1000 kernels of
 *                             1 us there (an eager warm-up of short kernels).
 *   gating_test graph N US    after the same warm-up, captures one kernel
 *                             and launches the graph N times.
 * Output is "key=value" words for the calling script to check. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "entry_points.h"

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t gated(const char *name)
{
    uint64_t (*gated_of)(const char *) =
        (uint64_t(*)(const char *))dlsym(RTLD_DEFAULT, "nvshare_hook_gated");

    return gated_of ? gated_of(name) : 0;
}

#define CHECK(call)                                                            \
    do {                                                                       \
        CUresult rc_ = (call);                                                 \
        if (rc_ != CUDA_SUCCESS) {                                             \
            fprintf(stderr, "%s failed: %d\n", #call, (int)rc_);               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* A stream on which 1000 kernels of 1 us ran: a thread's warm-up of short
 * kernels, which lengthens the interval between its backlog checks. */
static CUstream warmed_up_stream(CUmodule mod)
{
    CUfunction short_kernel;
    CUstream stream;

    CHECK(cuModuleGetFunction(&short_kernel, mod, "sleep_1us"));
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 1000; i++)
        CHECK(cuLaunchKernel(short_kernel, 1, 1, 1, 1, 1, 1, 0, stream, NULL,
                             NULL));
    CHECK(cuStreamSynchronize(stream));
    return stream;
}

int main(int argc, char **argv)
{
    CUcontext ctx;
    CUmodule mod;
    CUfunction kernel;
    CUstream stream = NULL;
    CUgraph graph;
    CUgraphExec exec = NULL;
    char name[64];
    int n;
    double start, launched, done;

    if (argc != 4) {
        fprintf(stderr, "usage: gating_test run|backlog|capture|graph N US\n");
        return 2;
    }
    n = atoi(argv[2]);
    snprintf(name, sizeof(name), "sleep_%sus", argv[3]);
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, "fake"));
    CHECK(cuModuleGetFunction(&kernel, mod, name));

    bool capture = strcmp(argv[1], "capture") == 0,
         replay = strcmp(argv[1], "graph") == 0;
    if (capture || replay) {
        stream = warmed_up_stream(mod);
        CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < (capture ? 300 : 1); i++)
            CHECK(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, NULL, NULL));
        CHECK(cuStreamEndCapture(stream, &graph));
        if (replay)
            CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    }

    start = now_ms();
    for (int i = 0; i < n; i++)
        CHECK(replay ? cuGraphLaunch(exec, stream)
                     : cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, NULL,
                                      NULL));
    if (strcmp(argv[1], "run") == 0)
        for (int i = 0; i < n; i++)
            CHECK(cuLaunchKernel_ptsz(kernel, 1, 1, 1, 1, 1, 1, 0, NULL, NULL,
                                      NULL));
    launched = now_ms();
    CHECK(cuCtxSynchronize());
    done = now_ms();
    printf("launch_ms=%.1f queued_ms=%.1f total_ms=%.1f gated=%llu "
           "gated_ptsz=%llu\n",
           launched - start, done - launched, done - start,
           (unsigned long long)gated("cuLaunchKernel"),
           (unsigned long long)gated("cuLaunchKernel_ptsz"));
    CHECK(cuDevicePrimaryCtxRelease_v2(0));
    return 0;
}
