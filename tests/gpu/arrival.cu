// arrival.cu - for arrivals.sh: a process whose memory stays resident and
// that uses the GPU now and then, like an interactive user.
//
//   arrival N IDLE_MS
//
// Allocates 64 MiB, runs one kernel on it (context, module, memory all
// set up), then N times: sleeps IDLE_MS (no CUDA call), launches one short
// kernel that adds 1 to every element and waits for it; the latency of
// each is from just before the launch (its request for the GPU) to the end
// of the wait. Checks the result and prints
//   arrival n=N idle_ms=IDLE_MS latencies_ms=l1,l2,... check=ok
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>

#include <cuda_runtime.h>

__global__ void add_one(int *v, int len)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len)
        v[i] += 1;
}

static double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    const int len = 16 << 20; // 64 MiB of int
    int n = argc > 1 ? atoi(argv[1]) : 20;
    int idle_ms = argc > 2 ? atoi(argv[2]) : 2500;
    int *d, h = 0;

    if (n < 1 || n > 10000 || idle_ms < 0) {
        fprintf(stderr, "usage: %s N IDLE_MS\n", argv[0]);
        return 2;
    }
    if (cudaMalloc(&d, len * sizeof(int)) != cudaSuccess ||
        cudaMemset(d, 0, len * sizeof(int)) != cudaSuccess) {
        fprintf(stderr, "arrival: no usable GPU\n");
        return 2;
    }
    add_one<<<(len + 255) / 256, 256>>>(d, len);
    if (cudaDeviceSynchronize() != cudaSuccess)
        return 2;
    printf("arrival n=%d idle_ms=%d latencies_ms=", n, idle_ms);
    for (int i = 0; i < n; i++) {
        usleep((useconds_t)idle_ms * 1000);
        double t0 = now_ms();
        add_one<<<(len + 255) / 256, 256>>>(d, len);
        cudaError_t rc = cudaDeviceSynchronize();
        double t1 = now_ms();
        if (rc != cudaSuccess) {
            fprintf(stderr, "arrival: %s\n", cudaGetErrorString(rc));
            return 1;
        }
        printf("%s%.3f", i ? "," : "", t1 - t0);
        fflush(stdout);
    }
    cudaMemcpy(&h, d + len - 1, sizeof(h), cudaMemcpyDeviceToHost);
    printf(" check=%s\n", h == n + 1 ? "ok" : "WRONG");
    return h == n + 1 ? 0 : 1;
}
