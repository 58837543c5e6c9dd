/* vmm_test.c - the fake driver's virtual memory management, the model
 * libnvshare's swap of VMM memory is tested against: a swap's steps keep
 * an allocation's address and content and free its device memory for
 * another process of the same FAKE_CUDA_SHARED_GPU; a step left out (no
 * copy back, no cuMemSetAccess) shows. Without libnvshare: this tests the
 * fake, so that the hook's tests can trust it.
 *
 * A second process (forked before either touches the driver) holds 40 of
 * the device's 64 MiB and swaps it out and in when told to through a pipe;
 * the first checks what it can allocate meanwhile, then kills it and gets
 * the memory the dead process held. */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "check.h"

#define MIB (1ull << 20)
#define HELD (40 * MIB)

long long fake_cuda_lost_bytes(CUdeviceptr ptr);

static const CUmemAllocationProp prop = {
    .type = CU_MEM_ALLOCATION_TYPE_PINNED,
    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
};
static const CUmemAccessDesc rw_access = {
    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
    .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
};

static void start(void)
{
    CUcontext ctx;

    MUST(cuInit(0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, 0));
    MUST(cuCtxSetCurrent(ctx));
}

/* Physical memory of size at va (reserved), accessible. */
static CUmemGenericAllocationHandle map_in(CUdeviceptr va, size_t size)
{
    CUmemGenericAllocationHandle h;

    MUST(cuMemCreate(&h, size, &prop, 0));
    MUST(cuMemMap(va, size, 0, h, 0));
    MUST(cuMemSetAccess(va, size, &rw_access, 1));
    return h;
}

static void map_out(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    MUST(cuMemUnmap(va, size));
    MUST(cuMemRelease(h));
}

static size_t free_memory(void)
{
    size_t free_bytes, total;

    MUST(cuMemGetInfo(&free_bytes, &total));
    return free_bytes;
}

/* The second process: each byte read from cmd is a step; it answers 'y'
 * (done, and all its checks passed so far) or 'n' on status. A swap-in
 * refused for want of memory is no failure: it can be tried again. */
static void holder(int cmd, int status)
{
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    void *host;
    char step;
    bool done;

    start();
    MUST(cuMemAddressReserve(&va, HELD, 0, 0, 0));
    h = map_in(va, HELD);
    MUST(cuMemsetD32(va, 7, HELD / 4));
    MUST(cuMemHostAlloc(&host, HELD, 0));
    while (read(cmd, &step, 1) == 1) {
        done = true;
        if (step == 'o') { /* swap out */
            MUST(cuMemcpyDtoHAsync(host, va, HELD, NULL));
            MUST(cuStreamSynchronize(NULL));
            map_out(va, HELD, h);
            EXPECT(fake_cuda_lost_bytes(va) == (long long)HELD,
                   "swapped out, %lld bytes lost", fake_cuda_lost_bytes(va));
        } else if (step == 'i' && cuMemCreate(&h, HELD, &prop, 0)) {
            done = false;
        } else if (step == 'i') { /* swap in, at the same address */
            MUST(cuMemMap(va, HELD, 0, h, 0));
            EXPECT(cuMemcpyHtoDAsync(va, host, HELD, NULL) ==
                       CUDA_ERROR_ILLEGAL_ADDRESS,
                   "a copy without cuMemSetAccess succeeded");
            MUST(cuMemSetAccess(va, HELD, &rw_access, 1));
            EXPECT(fake_cuda_lost_bytes(va) == (long long)HELD,
                   "fresh memory holds the content before the copy back");
            MUST(cuMemcpyHtoDAsync(va, host, HELD, NULL));
            MUST(cuStreamSynchronize(NULL));
            EXPECT(fake_cuda_lost_bytes(va) == 0,
                   "%lld bytes lost after swap-in", fake_cuda_lost_bytes(va));
        }
        if (write(status, done && !failures ? "y" : "n", 1) != 1)
            exit(1);
    }
    exit(failures != 0);
}

/* Tells the holder to take step; whether it went well. */
static bool holder_step(int cmd, int status, char step)
{
    char answer = 'n';

    return write(cmd, &step, 1) == 1 && read(status, &answer, 1) == 1 &&
           answer == 'y';
}

static void shared_memory(int cmd, int status, pid_t pid, const char *path)
{
    CUdeviceptr p;

    EXPECT(holder_step(cmd, status, 'h'), "the holder failed to start");
    unlink(path); /* both have mapped it: nothing to leave behind */
    EXPECT(free_memory() == 64 * MIB - HELD, "%zu free beside the holder",
           free_memory());
    EXPECT(cuMemAlloc(&p, HELD) == CUDA_ERROR_OUT_OF_MEMORY,
           "two processes hold more than the device");
    EXPECT(holder_step(cmd, status, 'o'), "the holder's swap-out failed");
    EXPECT(free_memory() == 64 * MIB, "%zu free once swapped out", free_memory());
    MUST(cuMemAlloc(&p, HELD));
    EXPECT(holder_step(cmd, status, 'i') == false,
           "the holder swapped in while its memory was taken");
    MUST(cuMemFree(p));
    EXPECT(holder_step(cmd, status, 'i'), "the holder's swap-in failed");
    EXPECT(cuMemAlloc(&p, HELD) == CUDA_ERROR_OUT_OF_MEMORY,
           "the holder's memory is free after its swap-in");
    /* A killed process gives its memory back at the next look. */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    MUST(cuMemAlloc(&p, HELD));
    MUST(cuMemFree(p));
}

static void rules(void)
{
    CUdeviceptr va, base;
    CUmemGenericAllocationHandle h, again;
    CUmemAllocationProp got;
    size_t size, before = free_memory();
    static uint64_t host[(4 * MIB) / sizeof(uint64_t)];
    int dev;

    EXPECT(cuMemAddressReserve(&va, MIB, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE,
           "a reservation of less than the granularity");
    MUST(cuMemAddressReserve(&va, 8 * MIB, 0, 0, 0));
    EXPECT(va % (2 * MIB) == 0, "reserved at %llx", (unsigned long long)va);
    EXPECT(free_memory() == before, "a reservation took memory");
    EXPECT(cuMemsetD8(va, 0, MIB) == CUDA_ERROR_INVALID_VALUE,
           "a memset of an unmapped address");
    EXPECT(cuMemcpyDtoH(host, va, sizeof(host)) == CUDA_ERROR_INVALID_VALUE,
           "a copy from an unmapped address");
    EXPECT(fake_cuda_lost_bytes(va) == 0, "nothing written, nothing lost");

    MUST(cuMemCreate(&h, 4 * MIB, &prop, 0));
    EXPECT(cuMemMap(va, 4 * MIB, 2 * MIB, h, 0) == CUDA_ERROR_INVALID_VALUE,
           "a map at an offset");
    EXPECT(cuMemMap(va, 2 * MIB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE,
           "a map of part of an allocation");
    EXPECT(cuMemMap(va + 6 * MIB, 4 * MIB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE,
           "a map past the reservation");
    MUST(cuMemMap(va + 2 * MIB, 4 * MIB, 0, h, 0));
    EXPECT(cuMemMap(va, 4 * MIB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE,
           "a map over a mapping");
    EXPECT(cuMemsetD8(va + 2 * MIB, 0, MIB) == CUDA_ERROR_ILLEGAL_ADDRESS,
           "a memset without access");
    MUST(cuMemSetAccess(va + 2 * MIB, 4 * MIB, &rw_access, 1));
    EXPECT(cuMemsetD8(va + MIB, 0, 2 * MIB) == CUDA_ERROR_INVALID_VALUE,
           "a memset partly unmapped");

    MUST(cuMemGetAddressRange(&base, &size, va + 5 * MIB));
    EXPECT(base == va + 2 * MIB && size == 4 * MIB, "the range of a mapping");
    MUST(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                               va + 3 * MIB));
    MUST(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                               va + 3 * MIB));
    MUST(cuPointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                               va + 2 * MIB));
    EXPECT(base == va + 2 * MIB && size == 4 * MIB && dev == 0,
           "the attributes of a mapping");
    MUST(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 3 * MIB)));
    EXPECT(again == h, "retained another handle");
    MUST(cuMemGetAllocationPropertiesFromHandle(&got, again));
    EXPECT(got.location.id == 0 && got.type == CU_MEM_ALLOCATION_TYPE_PINNED,
           "the properties of a handle");

    /* Written in its first page only: garbage copied out and back in the
     * second is no loss; the first page's content in the second is. */
    MUST(cuMemsetD8(va + 2 * MIB, 1, 1));
    MUST(cuMemcpyDtoH(host, va + 2 * MIB, sizeof(host)));
    MUST(cuMemUnmap(va + 2 * MIB, 4 * MIB));
    EXPECT(free_memory() == before - 4 * MIB, "freed while retained");
    MUST(cuMemRelease(again));
    EXPECT(free_memory() == before - 4 * MIB, "freed while a handle is held");
    MUST(cuMemRelease(h));
    EXPECT(free_memory() == before, "not freed once released and unmapped");
    EXPECT(fake_cuda_lost_bytes(va) == (long long)(2 * MIB),
           "unmapped: %lld bytes lost", fake_cuda_lost_bytes(va));
    h = map_in(va + 2 * MIB, 4 * MIB);
    MUST(cuMemcpyHtoD(va + 2 * MIB, host, sizeof(host)));
    EXPECT(fake_cuda_lost_bytes(va) == 0, "copied back: %lld bytes lost",
           fake_cuda_lost_bytes(va));
    MUST(cuMemcpyHtoD(va + 2 * MIB, host + (2 * MIB) / sizeof(uint64_t), 2 * MIB));
    EXPECT(fake_cuda_lost_bytes(va) == (long long)(2 * MIB),
           "garbage copied over written data: %lld bytes lost",
           fake_cuda_lost_bytes(va));

    EXPECT(cuMemAddressFree(va, 8 * MIB) == CUDA_ERROR_INVALID_VALUE,
           "a reservation freed while mapped");
    map_out(va + 2 * MIB, 4 * MIB, h);
    MUST(cuMemAddressFree(va, 8 * MIB));
    EXPECT(fake_cuda_lost_bytes(va) == -1, "a freed reservation is known");
}

int main(void)
{
    char path[] = "/tmp/fake_vmm_test.XXXXXX";
    int cmd[2], status[2], fd = mkstemp(path);
    pid_t pid;

    if (fd < 0 || pipe(cmd) || pipe(status)) {
        printf("FAIL: no temporary file or pipe\n");
        return 1;
    }
    close(fd);
    setenv("FAKE_CUDA_SHARED_GPU", path, 1);
    setenv("FAKE_CUDA_MEM_MB", "64", 1);
    if ((pid = fork()) == 0) {
        close(cmd[1]);
        close(status[0]);
        holder(cmd[0], status[1]);
    }
    close(cmd[0]);
    close(status[1]);
    start();
    shared_memory(cmd[1], status[0], pid, path);
    rules();
    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures != 0;
}
