/* cudart_probe.c - the smallest CUDA runtime program: enough to make the
 * runtime bootstrap (dlopen libcuda, resolve its ~440 entry points). */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void)
{
    int count = -1;
    cudaError_t rc = cudaGetDeviceCount(&count);

    printf("cudaGetDeviceCount: %d (count %d)\n", (int)rc, count);
    return 0;
}
