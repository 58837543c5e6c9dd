// swap_speed.cu - how fast libnvshare swaps a process's memory out and in
// on a real GPU, and whether the data survives.
//
//   swap_speed GIB ROUNDS [unprepared]
//
// Run with libnvshare preloaded and NVSHARE_ENABLE_OVERSUB=1 (there is no
// scheduler to make it the default): cudaMalloc's memory is then
// swappable device memory (VMM). Each round writes
// the whole buffer with a round-dependent pattern (so a swap-out that kept
// an old copy would be caught), checksums it on the GPU, calls libnvshare's
// swap_out and swap_in (nvshare_hook_swap_out/in: the client's callbacks,
// as an EVICT and the next grant run them), and checksums it again.
// Before the first round it prepares the swap-out as a PREPARE_SWAP does
// (nvshare_hook_prepare_swap: the client's callback; the scheduler sends it
// a switch time ahead of the EVICT) and waits until the pinned host copies
// exist, so that the first swap-out is measured as a prepared one; with
// "unprepared" it does not, and the first swap-out is the one an EVICT
// right after another process's arrival makes (no PREPARE_SWAP could
// come before it).
// Prints the preparation time, one line per round and a summary line:
//   swap_speed: <GiB> GiB, out first <GB/s>, out <GB/s> (median of the
//   later rounds), in <GB/s> (median), out/in <%>, checksums <ok>/<rounds>
// and PASS/FAIL against issue 10's targets: out first >= 35 GB/s (the
// copies were pinned ahead), out >= 35 GB/s, in >= 40 GB/s, out >= 70 % of
// in (the later rounds), every checksum intact. GB/s are 10^9 bytes per
// second.
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

static double now_s()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__device__ uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__global__ void fill(uint64_t *words, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        words[i] = mix(i ^ seed);
}

// Position-weighted sum: a word moved, lost or stale changes it.
__global__ void checksum(const uint64_t *words, size_t n,
                         unsigned long long *sum)
{
    uint64_t acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        acc += words[i] * (2 * i + 1);
    for (int off = 16; off > 0; off /= 2)
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(sum, (unsigned long long)acc);
}

static void must(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess) {
        fprintf(stderr, "swap_speed: %s: %s\n", what, cudaGetErrorString(rc));
        exit(2);
    }
}

static uint64_t sum_of(const uint64_t *words, size_t n, unsigned long long *sum)
{
    unsigned long long host = 0;

    must(cudaMemset(sum, 0, sizeof(*sum)), "cudaMemset");
    checksum<<<1024, 256>>>(words, n, sum);
    must(cudaMemcpy(&host, sum, sizeof(host), cudaMemcpyDeviceToHost),
         "checksum");
    return host;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv)
{
    typedef uint64_t (*swap_fn)(int);
    typedef void (*gpu_fn)(int);
    double gib = argc > 1 ? atof(argv[1]) : 6;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    size_t bytes = (size_t)(gib * (double)(1ull << 30)) / 8 * 8, n = bytes / 8;
    swap_fn swap_out = (swap_fn)dlsym(RTLD_DEFAULT, "nvshare_hook_swap_out");
    swap_fn swap_in = (swap_fn)dlsym(RTLD_DEFAULT, "nvshare_hook_swap_in");
    gpu_fn prepare_swap =
        (gpu_fn)dlsym(RTLD_DEFAULT, "nvshare_hook_prepare_swap");
    gpu_fn wait_prepared =
        (gpu_fn)dlsym(RTLD_DEFAULT, "nvshare_hook_wait_prepared");
    uint64_t *words;
    unsigned long long *sum;
    cudaPointerAttributes attr;
    std::vector<double> outs, ins;
    double first_out = 0;
    int intact = 0;

    bool prepared = !(argc > 3 && strcmp(argv[3], "unprepared") == 0);

    if (!swap_out || !swap_in || !prepare_swap || !wait_prepared ||
        rounds < 2) {
        fprintf(stderr, "usage: LD_PRELOAD=libnvshare.so "
                        "%s GIB ROUNDS(>=2) [unprepared]\n", argv[0]);
        return 2;
    }
    must(cudaMalloc(&words, bytes), "cudaMalloc");
    must(cudaMalloc(&sum, sizeof(*sum)), "cudaMalloc");
    must(cudaPointerGetAttributes(&attr, words), "cudaPointerGetAttributes");
    printf("memory: %s\n", attr.type == cudaMemoryTypeManaged
                               ? "managed"
                               : "device (swappable: VMM)");
    if (prepared) {
        double p0 = now_s();
        prepare_swap(0);
        wait_prepared(0);
        printf("prepare: the pinned staging ring (for %.2f GiB) made ahead in %.3f s\n",
               (double)bytes / (1 << 30), now_s() - p0);
    } else {
        printf("prepare: none; the first swap-out is unprepared (an arrival's)\n");
    }
    fflush(stdout);
    for (int r = 0; r < rounds; r++) {
        fill<<<1024, 256>>>(words, n, (uint64_t)r * 7919 + 1);
        uint64_t want = sum_of(words, n, sum);
        must(cudaDeviceSynchronize(), "fill");

        double t0 = now_s();
        uint64_t out = swap_out(0);
        double t1 = now_s();
        uint64_t in = swap_in(0);
        double t2 = now_s();
        uint64_t got = sum_of(words, n, sum);

        double out_gbps = (double)out / (t1 - t0) / 1e9;
        double in_gbps = (double)in / (t2 - t1) / 1e9;
        bool ok = got == want && out >= bytes && in >= bytes;
        intact += ok;
        if (r == 0)
            first_out = out_gbps;
        else
            outs.push_back(out_gbps);
        ins.push_back(in_gbps);
        printf("round %d: out %.2f GiB in %.3f s (%.1f GB/s), in %.2f GiB in "
               "%.3f s (%.1f GB/s), checksum %s\n",
               r + 1, (double)out / (1 << 30), t1 - t0, out_gbps,
               (double)in / (1 << 30), t2 - t1, in_gbps,
               ok ? "ok" : "WRONG");
        fflush(stdout);
    }
    double out_gbps = median(outs), in_gbps = median(ins);
    bool pass = first_out >= 35 && out_gbps >= 35 && in_gbps >= 40 &&
                out_gbps >= 0.7 * in_gbps && intact == rounds;
    printf("swap_speed: %.1f GiB, out first %.1f GB/s, out %.1f GB/s, in %.1f "
           "GB/s, out/in %.0f%%, checksums %d/%d ok: %s\n",
           gib, first_out, out_gbps, in_gbps,
           in_gbps > 0 ? 100 * out_gbps / in_gbps : 0.0, intact, rounds,
           pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}
