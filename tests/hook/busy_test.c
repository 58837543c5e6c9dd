/* busy_test.c - the busy measure libnvshare reports for the scheduler's
 * auto mode, on the fake driver, with NVSHARE_STATS=1 (the totals are read
 * back through nvshare_hook_event).
 *
 *   busy_test full MS             kernels of 500 us back to back, never
 *                                 synchronizing: the queue never runs dry
 *   busy_test batches MS          kernels of 1000 us four at a time, then
 *                                 cuCtxSynchronize (fake_job's pattern): the
 *                                 GPU is busy all the time as well
 *   busy_test bursty MS K_US H_US one kernel of K_US, cuCtxSynchronize, H_US
 *                                 of host sleep, repeated: busy about
 *                                 K_US / (K_US + H_US) of the time
 * each for MS milliseconds of wall time. Prints busy_ns, span_ns,
 * ratio = busy_ns / span_ns and how many spans were skipped because the
 * thread may have waited at a closed gate in them. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "entry_points.h"
#include "check.h"


static uint64_t event(const char *name)
{
    uint64_t (*fn)(const char *) =
        (uint64_t(*)(const char *))dlsym(RTLD_DEFAULT, "nvshare_hook_event");

    if (fn == NULL) {
        printf("FAIL: libnvshare does not export nvshare_hook_event\n");
        exit(1);
    }
    return fn(name);
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static CUfunction kernel(long us)
{
    static CUmodule mod;
    CUfunction f;
    char name[32];

    if (mod == NULL)
        MUST(cuModuleLoadData(&mod, "fake"));
    snprintf(name, sizeof(name), "sleep_%ldus", us);
    MUST(cuModuleGetFunction(&f, mod, name));
    return f;
}

static void launch(CUfunction f)
{
    MUST(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
}

int main(int argc, char **argv)
{
    CUcontext ctx;
    double until;
    uint64_t busy, span;

    if (argc < 3) {
        fprintf(stderr,
                "usage: busy_test full|batches|bursty MS [K_US H_US]\n");
        return 2;
    }
    MUST(cuInit(0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, 0));
    MUST(cuCtxSetCurrent(ctx));
    until = now_ms() + atof(argv[2]);
    if (strcmp(argv[1], "full") == 0) {
        CUfunction f = kernel(500);

        while (now_ms() < until)
            launch(f);
    } else if (strcmp(argv[1], "batches") == 0) {
        CUfunction f = kernel(1000);

        while (now_ms() < until) {
            for (int i = 0; i < 4; i++)
                launch(f);
            MUST(cuCtxSynchronize());
        }
    } else if (strcmp(argv[1], "bursty") == 0 && argc == 5) {
        CUfunction f = kernel(atol(argv[3]));
        long host_us = atol(argv[4]);
        struct timespec host = {host_us / 1000000, host_us % 1000000 * 1000};

        while (now_ms() < until) {
            launch(f);
            MUST(cuCtxSynchronize());
            nanosleep(&host, NULL);
        }
    } else {
        fprintf(stderr, "busy_test: unknown mode %s\n", argv[1]);
        return 2;
    }
    busy = event("busy-ns");
    span = event("busy-span-ns");
    printf("busy_ns=%llu span_ns=%llu ratio=%.3f skipped=%llu\n",
           (unsigned long long)busy, (unsigned long long)span,
           span ? (double)busy / (double)span : -1.0,
           (unsigned long long)event("busy-spans-skipped"));
    MUST(cuCtxSynchronize());
    return 0;
}
