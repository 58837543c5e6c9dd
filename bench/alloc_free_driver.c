/* alloc_free_driver.c - cuMemAlloc_v2 + cuMemFree_v2 pairs, driver API.
 *
 *   alloc_free_driver [MiB] [ROUNDS]
 *
 * The driver-API twin of alloc_free.cu, built with a C compiler against
 * cuda.h only, so that it also runs on the fake libcuda.so.1: under
 * callgrind it counts exactly the instructions libnvshare adds to an
 * allocation and a free (bench/README in docs/benchmarks.md). */
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>

int main(int argc, char **argv)
{
    size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
    long rounds = argc > 2 ? atol(argv[2]) : 10000;
    CUcontext ctx;
    CUdevice dev;
    CUdeviceptr p;

    if (cuInit(0) || cuDeviceGet(&dev, 0) ||
        cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "alloc_free_driver: no usable GPU\n");
        return 1;
    }
    for (long i = 0; i < rounds; i++) {
        if (cuMemAlloc(&p, bytes) != CUDA_SUCCESS) {
            fprintf(stderr,
                    "alloc_free_driver: cuMemAlloc failed in round %ld\n", i);
            return 1;
        }
        cuMemFree(p);
    }
    printf("rounds=%ld\n", rounds);
    return 0;
}
