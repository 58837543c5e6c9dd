// spin.cu - a cudart program for hook_smoke.sh: launches `n` kernels that
// each add 1 to every element, checks the result, prints "ok <n>".
// Built twice: default stream legacy and --default-stream per-thread.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void add_one(int *v, int len)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len)
        v[i] += 1;
}

int main(int argc, char **argv)
{
    const int len = 1 << 20, n = argc > 1 ? atoi(argv[1]) : 1000;
    int *d, *h = (int *)calloc(len, sizeof(int));

    if (cudaMalloc(&d, len * sizeof(int)) != cudaSuccess)
        return 1;
    cudaMemset(d, 0, len * sizeof(int));
    for (int i = 0; i < n; i++)
        add_one<<<(len + 255) / 256, 256>>>(d, len);
    cudaMemcpy(h, d, len * sizeof(int), cudaMemcpyDeviceToHost);
    for (int i = 0; i < len; i++)
        if (h[i] != n) {
            printf("wrong result at %d: %d\n", i, h[i]);
            return 1;
        }
    printf("ok %d\n", n);
    return 0;
}
