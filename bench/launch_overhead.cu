// launch_overhead.cu - host time per empty-kernel launch.
//
//   launch_overhead [LAUNCHES]
//
// Launches LAUNCHES empty kernels back to back on the legacy stream and
// synchronizes; prints the mean host time per launch in microseconds. Run
// it with and without libnvshare.so preloaded (bench/run.sh does, in
// alternation) to get the interposer's cost on the hot path.
#include <cstdio>
#include <cstdlib>
#include <chrono>

__global__ void empty_kernel() {}

int main(int argc, char **argv)
{
    long launches = argc > 1 ? atol(argv[1]) : 200000;

    empty_kernel<<<1, 1>>>(); // context creation and module load
    if (cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "launch_overhead: no usable GPU\n");
        return 1;
    }
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < launches; i++)
        empty_kernel<<<1, 1>>>();
    cudaDeviceSynchronize();
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - start).count();
    printf("launch_us=%.4f\n", (double)ns / 1e3 / (double)launches);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
