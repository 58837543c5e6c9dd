// alloc_free.cu - cudaMalloc + cudaFree of a fixed size, back to back.
//
//   alloc_free [MiB] [ROUNDS]
//
// Prints the mean time of one cudaMalloc + cudaFree pair in microseconds.
// Run natively and with libnvshare.so under a quota (bench/run.sh does) to
// get the cost of memory accounting on the allocation path.
#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv)
{
    size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
    long rounds = argc > 2 ? atol(argv[2]) : 2000;
    void *p;

    if (cudaMalloc(&p, bytes) != cudaSuccess || cudaFree(p) != cudaSuccess) {
        fprintf(stderr, "alloc_free: no usable GPU\n");
        return 1;
    }
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < rounds; i++) {
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            fprintf(stderr, "alloc_free: cudaMalloc failed in round %ld\n", i);
            return 1;
        }
        cudaFree(p);
    }
    double us = std::chrono::duration<double, std::micro>(
                    std::chrono::steady_clock::now() - start).count();
    printf("pair_us=%.3f\n", us / (double)rounds);
    return 0;
}
