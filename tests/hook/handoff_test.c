/* handoff_test.c - the process-wide bound of a lower class must not make
 * one thread wait for another thread's stream, on the fake GPU.
 *
 *   handoff_test present STOP_FILE  launches one kernel, then stays (a
 *                                   client of the GPU) until STOP_FILE
 *   handoff_test low GO_FILE        (libnvshare, a pod set low beside a
 *                                   higher one) see below
 *   handoff_test peer GO_FILE       the other rank of the collective,
 *                                   without libnvshare: launches its half
 *                                   once GO_FILE exists
 *
 * low: warms up until its backlog checks record marks in the process's
 * table (the scheduler's short budget is in force, NVSHARE_STATS=1's
 * "process-marks") and have measured its kernels. Then thread A launches
 * a collective and 1 ms kernels on stream 1: the collective completes only
 * when the peer launches its half, and A's own check waits for it once two
 * marks behind it are pending. Then thread B launches a 1 ms kernel on
 * stream 2 and, when that launch returns, creates GO_FILE. Had B's check
 * waited for stream 1's marks too, it would wait for the peer, which waits
 * for B. Prints "ok" when everything completed. Exits 1 on a driver
 * error. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "check.h"

static CUcontext ctx;
static CUmodule mod;
static const char *go_file;

static void launch(const char *name, CUstream stream)
{
    CUfunction f;

    MUST(cuModuleGetFunction(&f, mod, name));
    MUST(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, NULL, NULL));
}

static void wait_for_file(const char *path)
{
    const struct timespec tick = {0, 2000000};

    while (access(path, F_OK) != 0)
        nanosleep(&tick, NULL);
}

static uint64_t hook_event(const char *name)
{
    uint64_t (*event)(const char *) =
        (uint64_t(*)(const char *))dlsym(RTLD_DEFAULT, "nvshare_hook_event");

    return event ? event(name) : 0;
}

static uint64_t marks_before; /* recorded when A began */

static void *stream_two(void *arg)
{
    const struct timespec tick = {0, 1000000};
    CUstream stream;
    FILE *go;

    (void)arg;
    while (hook_event("process-marks") < marks_before + 2)
        nanosleep(&tick, NULL);
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    launch("sleep_1000us", stream);
    go = fopen(go_file, "w");
    if (go)
        fclose(go);
    MUST(cuStreamSynchronize(stream));
    return NULL;
}

int main(int argc, char **argv)
{
    CUstream stream;
    pthread_t thread;

    if (argc != 3) {
        fprintf(stderr, "usage: handoff_test present|low|peer FILE\n");
        return 2;
    }
    go_file = argv[2];
    MUST(cuInit(0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, 0));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuModuleLoadData(&mod, "fake"));
    if (strcmp(argv[1], "peer") == 0) {
        wait_for_file(go_file);
        launch("ncclDevKernel_AllReduce_1000us", NULL);
        MUST(cuCtxSynchronize());
        return 0;
    }
    launch("sleep_100us", NULL);
    MUST(cuCtxSynchronize());
    if (strcmp(argv[1], "present") == 0) {
        wait_for_file(go_file);
        return 0;
    }
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    /* Until the scheduler's short budget applies (the script's timeout
     * bounds the wait), and long enough for the checks to have measured
     * the kernels: then every launch is checked. */
    for (int i = 0; i < 8 || hook_event("process-marks") == 0; i++) {
        launch("sleep_1000us", stream);
        MUST(cuStreamSynchronize(stream));
    }
    marks_before = hook_event("process-marks");
    if (pthread_create(&thread, NULL, stream_two, NULL) != 0)
        return 1;
    /* Checked at every launch or every other one, A blocks in its own
     * check once two marks behind the collective are pending. */
    launch("ncclDevKernel_AllReduce_1000us", stream);
    for (int i = 0; i < 7; i++)
        launch("sleep_1000us", stream);
    pthread_join(thread, NULL);
    MUST(cuStreamSynchronize(stream));
    printf("ok\n");
    return 0;
}
