// bursty.cu - a light, bursty job: a small kernel, then host work.
//
//   bursty SECONDS | bursty --window FROM_NS UNTIL_NS
//
// Each step launches a 16-block kernel (~100 us), waits for it, then spends
// 300 us on the host: the GPU is busy a fraction of the time. Prints steps
// per second, counted like fixed_work (see there for --window).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

__global__ void small_kernel(float *out, int iters)
{
    float a = threadIdx.x * 1e-3f;
    for (int i = 0; i < iters; i++)
        a = fmaf(a, 0.999f, 1e-4f);
    if (a == 42.0f)
        out[blockIdx.x] = a;
}

static long long realtime_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void host_work(long long ns)
{
    long long end = realtime_ns() + ns;
    while (realtime_ns() < end)
        ;
}

int main(int argc, char **argv)
{
    long long from = 0, until;
    float *out;

    if (argc > 3 && !strcmp(argv[1], "--window")) {
        from = atoll(argv[2]);
        until = atoll(argv[3]);
    } else {
        until = (long long)((argc > 1 ? atof(argv[1]) : 10) * 1e9);
    }
    if (cudaMalloc(&out, 64 * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "bursty: no usable GPU\n");
        return 1;
    }
    small_kernel<<<16, 256>>>(out, 50000);
    cudaDeviceSynchronize();
    if (from == 0) {
        from = realtime_ns();
        until += from;
    }
    // STEADY_FROM_NS: also print steady=<rate> from then on (see fixed_work).
    const char *steady_env = getenv("STEADY_FROM_NS");
    long long steady_from = steady_env ? atoll(steady_env) : until;
    long steps = 0, steady_steps = 0;
    // RUN_PAST_NS: go on that long past UNTIL (uncounted), so that a GPU
    // sampler's last sample in the window sees the same load throughout.
    const char *past_env = getenv("RUN_PAST_NS");
    long long run_until = until + (past_env ? atoll(past_env) : 0);
    while (realtime_ns() < run_until) {
        small_kernel<<<16, 256>>>(out, 50000);
        cudaDeviceSynchronize();
        host_work(300000);
        long long done = realtime_ns();
        if (done >= from && done <= until)
            steps++;
        if (done >= steady_from && done <= until)
            steady_steps++;
    }
    double seconds = (double)(until - from) / 1e9;
    printf("steps=%ld seconds=%.3f rate=%.2f", steps, seconds, steps / seconds);
    if (steady_from < until)
        printf(" steady=%.2f", steady_steps * 1e9 / (double)(until - steady_from));
    printf("\n");
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
