// launch_overhead.cu - what an empty-kernel launch costs the host.
//
//   launch_overhead [LAUNCHES]
//
// Two numbers, each the mean over LAUNCHES launches on the legacy stream:
//   launch_us  back-to-back launches then one synchronize: launch
//              throughput, where the queue fills and the GPU sets the pace;
//   call_us    only the launch calls, in batches of 32 with a synchronize
//              (not timed) after each: the CPU cost of the launch path
//              itself, which is what an interposer adds to.
// Run it with and without libnvshare.so preloaded (bench/run.sh does, in
// alternation) to get the interposer's cost on the hot path.
#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void empty_kernel() {}

using clock_type = std::chrono::steady_clock;

static double ns_since(clock_type::time_point start)
{
    return (double)std::chrono::duration_cast<std::chrono::nanoseconds>(
               clock_type::now() - start).count();
}

int main(int argc, char **argv)
{
    long launches = argc > 1 ? atol(argv[1]) : 200000;

    empty_kernel<<<1, 1>>>(); // context creation and module load
    if (cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "launch_overhead: no usable GPU\n");
        return 1;
    }
    auto start = clock_type::now();
    for (long i = 0; i < launches; i++)
        empty_kernel<<<1, 1>>>();
    cudaDeviceSynchronize();
    double throughput_ns = ns_since(start);

    double call_ns = 0;
    for (long done = 0; done < launches; done += 32) {
        auto batch = clock_type::now();
        for (int i = 0; i < 32; i++)
            empty_kernel<<<1, 1>>>();
        call_ns += ns_since(batch);
        cudaDeviceSynchronize();
    }
    printf("launch_us=%.4f call_us=%.4f\n", throughput_ns / 1e3 / (double)launches,
           call_ns / 1e3 / (double)launches);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
