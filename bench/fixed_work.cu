// fixed_work.cu - a compute-bound job: identical kernels of ~1 ms each.
//
//   fixed_work SECONDS [KERNEL_ITERS]
//   fixed_work --window FROM_NS UNTIL_NS [KERNEL_ITERS]
//
// Runs kernels that fill the GPU with dependent FMAs and prints how many
// completed per second. The first form runs for SECONDS (a solo baseline).
// The second runs until UNTIL_NS and counts only kernels that complete
// between FROM_NS and UNTIL_NS (CLOCK_REALTIME): tenants started one after
// the other are then measured over the same window, so start-up does not
// inflate their sum. With STEADY_FROM_NS set it also prints steady=<rate>
// over STEADY_FROM_NS..UNTIL_NS (start-up and first windows left out).
// It always prints first_kernel_ms=<ms> from the process's start to the end
// of its first kernel (what a job arriving at a busy GPU waits), and with
// RATE_EVERY_NS set, rates=<r1,r2,...>: kernels per second over each
// consecutive RATE_EVERY_NS from FROM_NS (fairness over windows).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

__global__ void fma_kernel(float *out, int iters)
{
    float a = threadIdx.x * 1e-3f, b = 0.999f, c = 1e-4f;
    for (int i = 0; i < iters; i++)
        a = fmaf(a, b, c);
    if (a == 42.0f) // never true; keeps the loop
        out[blockIdx.x] = a;
}

static long long realtime_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long long started = realtime_ns(), from, until;
    int iters = 100000, sms = 0;
    float *out;

    if (argc > 3 && !strcmp(argv[1], "--window")) {
        from = atoll(argv[2]);
        until = atoll(argv[3]);
        if (argc > 4)
            iters = atoi(argv[4]);
    } else {
        double seconds = argc > 1 ? atof(argv[1]) : 10;
        if (argc > 2)
            iters = atoi(argv[2]);
        from = 0; // set after warm-up
        until = (long long)(seconds * 1e9);
    }
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    if (cudaMalloc(&out, 4096 * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "fixed_work: no usable GPU\n");
        return 1;
    }
    int blocks = sms * 8;
    fma_kernel<<<blocks, 256>>>(out, iters);
    cudaDeviceSynchronize();
    double first_kernel_ms = (double)(realtime_ns() - started) / 1e6;
    if (from == 0) {
        from = realtime_ns();
        until += from;
    }

    const char *steady_env = getenv("STEADY_FROM_NS");
    long long steady_from = steady_env ? atoll(steady_env) : until;
    long kernels = 0, steady_kernels = 0;
    const char *every_env = getenv("RATE_EVERY_NS");
    long long every = every_env ? atoll(every_env) : 0;
    long per_window[64] = {0};
    int n_windows = every > 0 ? (int)((until - from) / every) : 0;
    n_windows = n_windows > 64 ? 64 : n_windows;
    // RUN_PAST_NS: go on that long past UNTIL (uncounted), so that a GPU
    // sampler's last sample in the window sees the same load throughout.
    const char *past_env = getenv("RUN_PAST_NS");
    long long run_until = until + (past_env ? atoll(past_env) : 0);
    while (realtime_ns() < run_until) {
        // Batches of 8 keep the queue short without a sync per kernel.
        for (int i = 0; i < 8; i++)
            fma_kernel<<<blocks, 256>>>(out, iters);
        cudaDeviceSynchronize();
        long long done = realtime_ns();
        if (done >= from && done <= until)
            kernels += 8;
        if (done >= steady_from && done <= until)
            steady_kernels += 8;
        if (done >= from && every > 0 && (done - from) / every < n_windows)
            per_window[(done - from) / every] += 8;
    }
    double seconds = (double)(until - from) / 1e9;
    printf("kernels=%ld seconds=%.3f rate=%.2f", kernels, seconds,
           kernels / seconds);
    if (steady_from < until)
        printf(" steady=%.2f", steady_kernels * 1e9 / (double)(until - steady_from));
    printf(" first_kernel_ms=%.1f", first_kernel_ms);
    for (int w = 0; w < n_windows; w++)
        printf("%s%.2f", w ? "," : " rates=", per_window[w] * 1e9 / (double)every);
    printf("\n");
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
