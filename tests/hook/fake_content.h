/* fake_content.h - what the fake driver says of device memory's content,
 * for the swap tests (tests/fake/memory.c: the content model). */
#ifndef NVSHARE_TEST_FAKE_CONTENT_H
#define NVSHARE_TEST_FAKE_CONTENT_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>

/* Bytes of the reservation holding p whose written content the fake has
 * lost (unmapped, or holding other content), -1 if it knows no memory
 * there. */
static inline long long lost_bytes(CUdeviceptr p)
{
    long long (*fn)(CUdeviceptr) =
        (long long (*)(CUdeviceptr))dlsym(RTLD_DEFAULT, "fake_cuda_lost_bytes");

    if (fn == NULL) {
        printf("FAIL: the fake driver does not export fake_cuda_lost_bytes\n");
        exit(1);
    }
    return fn(p);
}

#endif
