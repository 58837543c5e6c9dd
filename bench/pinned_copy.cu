// pinned_copy.cu - the machine's pinned host <-> device copy bandwidth, the
// yardstick of bench/swap_speed.sh's swap rates.
//
//   pinned_copy [GIB] [REPS]     (default 4 GiB, best of 5)
//
// A cudaHostAlloc buffer of GIB and a device buffer of the same size;
// each repetition copies the whole buffer in 256 MiB cudaMemcpyAsync
// chunks on one stream, timed with events, host to device and then device
// to host. Prints the best repetition of each direction:
//   pinned_copy: 4.00 GiB, h2d 55.1 GB/s, d2h 54.8 GB/s (best of 5)
// GB/s are 10^9 bytes per second. Run natively (no libnvshare).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

static void must(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess) {
        fprintf(stderr, "pinned_copy: %s: %s\n", what, cudaGetErrorString(rc));
        exit(2);
    }
}

// Seconds one copy of the whole buffer takes, in CHUNK-sized pieces.
static double copy_s(char *dst, const char *src, size_t bytes,
                     cudaMemcpyKind kind, cudaStream_t s, cudaEvent_t a,
                     cudaEvent_t b)
{
    const size_t chunk = 256ull << 20;
    float ms = 0;

    must(cudaEventRecord(a, s), "cudaEventRecord");
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        must(cudaMemcpyAsync(dst + off, src + off, n, kind, s),
             "cudaMemcpyAsync");
    }
    must(cudaEventRecord(b, s), "cudaEventRecord");
    must(cudaEventSynchronize(b), "cudaEventSynchronize");
    must(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return ms / 1e3;
}

int main(int argc, char **argv)
{
    double gib = argc > 1 ? atof(argv[1]) : 4;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    size_t bytes = (size_t)(gib * (double)(1ull << 30));
    char *host, *dev;
    cudaStream_t s;
    cudaEvent_t a, b;
    double best_h2d = 1e30, best_d2h = 1e30;

    if (bytes == 0 || reps < 1) {
        fprintf(stderr, "usage: %s [GIB] [REPS]\n", argv[0]);
        return 2;
    }
    must(cudaHostAlloc((void **)&host, bytes, cudaHostAllocDefault),
         "cudaHostAlloc");
    must(cudaMalloc((void **)&dev, bytes), "cudaMalloc");
    memset(host, 0x5a, bytes);
    must(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
         "cudaStreamCreate");
    must(cudaEventCreate(&a), "cudaEventCreate");
    must(cudaEventCreate(&b), "cudaEventCreate");
    // Warm-up: the first copies pay for mappings and clocks.
    copy_s(dev, host, bytes, cudaMemcpyHostToDevice, s, a, b);
    copy_s(host, dev, bytes, cudaMemcpyDeviceToHost, s, a, b);
    for (int r = 0; r < reps; r++) {
        double h2d = copy_s(dev, host, bytes, cudaMemcpyHostToDevice, s, a, b);
        double d2h = copy_s(host, dev, bytes, cudaMemcpyDeviceToHost, s, a, b);
        best_h2d = h2d < best_h2d ? h2d : best_h2d;
        best_d2h = d2h < best_d2h ? d2h : best_d2h;
    }
    printf("pinned_copy: %.2f GiB, h2d %.1f GB/s, d2h %.1f GB/s (best of %d)\n",
           (double)bytes / (1ull << 30), (double)bytes / best_h2d / 1e9,
           (double)bytes / best_d2h / 1e9, reps);
    return 0;
}
