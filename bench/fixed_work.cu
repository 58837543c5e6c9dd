// fixed_work.cu - a compute-bound job: identical kernels of ~1 ms each.
//
//   fixed_work SECONDS [KERNEL_ITERS]
//
// Runs kernels that fill the GPU with dependent FMAs until SECONDS have
// passed and prints how many completed (the job's throughput). Shares and
// aggregate efficiency are these counts relative to a solo run.
#include <cstdio>
#include <cstdlib>
#include <chrono>

__global__ void fma_kernel(float *out, int iters)
{
    float a = threadIdx.x * 1e-3f, b = 0.999f, c = 1e-4f;
    for (int i = 0; i < iters; i++)
        a = fmaf(a, b, c);
    if (a == 42.0f) // never true; keeps the loop
        out[blockIdx.x] = a;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    int iters = argc > 2 ? atoi(argv[2]) : 100000;
    int sms = 0;
    float *out;

    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    if (cudaMalloc(&out, 4096 * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "fixed_work: no usable GPU\n");
        return 1;
    }
    int blocks = sms * 8;
    fma_kernel<<<blocks, 256>>>(out, iters);
    cudaDeviceSynchronize();

    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::duration<double>(seconds);
    long kernels = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        // Batches of 8 keep the queue short without a sync per kernel.
        for (int i = 0; i < 8; i++)
            fma_kernel<<<blocks, 256>>>(out, iters);
        cudaDeviceSynchronize();
        kernels += 8;
    }
    double elapsed = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start).count();
    printf("kernels=%ld seconds=%.3f rate=%.2f\n", kernels, elapsed,
           kernels / elapsed);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
