/* vmm_app_test.c - the application's own VMM (PyTorch's expandable
 * segments: cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess)
 * swapped out and back through libnvshare's test entries, on the fake
 * driver, with NVSHARE_ENABLE_OVERSUB=1 and no scheduler.
 *
 * Checks: cuMemCreate hands out a token that every handle-taking entry
 * point accepts (map, properties, retain, release); a swap-out copies the
 * mapped content and gives the physical memory back (cuMemGetInfo); a
 * swap-in maps new memory at the same addresses with the same access and
 * the content intact (the fake's tags); an unmap and release while out
 * forget the allocation; an exported allocation is pinned (no longer
 * evictable, not moved). Prints PASS or the failures. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "entry_points.h"
#include "check.h"
#include "fake_content.h"

#define MIB (1ull << 20)

static uint64_t hook_u64(const char *name)
{
    uint64_t (*fn)(int) = (uint64_t(*)(int))dlsym(RTLD_DEFAULT, name);

    if (fn == NULL) {
        printf("FAIL: libnvshare does not export %s\n", name);
        exit(1);
    }
    return fn(0);
}

static size_t free_bytes(void)
{
    size_t free_b, total;

    MUST(cuMemGetInfo_v2(&free_b, &total));
    return free_b;
}

static CUmemAllocationProp on_gpu0(void)
{
    return (CUmemAllocationProp){.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE,
                                              .id = 0}};
}

/* A segment as PyTorch makes one: reserve, create, map, allow. */
static CUmemGenericAllocationHandle segment(CUdeviceptr va, size_t size)
{
    CUmemAllocationProp prop = on_gpu0();
    CUmemAccessDesc rw = {.location = prop.location,
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle h;

    MUST(cuMemCreate(&h, size, &prop, 0));
    MUST(cuMemMap(va, size, 0, h, 0));
    MUST(cuMemSetAccess(va, size, &rw, 1));
    MUST(cuMemsetD8_v2(va, 7, size)); /* content to lose */
    return h;
}

int main(void)
{
    CUcontext ctx;
    CUdeviceptr va, vb;
    CUmemGenericAllocationHandle a, b, retained;
    CUmemAllocationProp prop;
    size_t before;
    int fd;

    MUST(cuInit(0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, 0));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuMemAddressReserve(&va, 16 * MIB, 0, 0, 0));
    MUST(cuMemAddressReserve(&vb, 16 * MIB, 0, 0, 0));
    a = segment(va, 16 * MIB);
    b = segment(vb, 16 * MIB);
    EXPECT(hook_u64("nvshare_hook_managed_bytes") == 32 * MIB,
           "%llu bytes evictable, want 32 MiB",
           (unsigned long long)hook_u64("nvshare_hook_managed_bytes"));
    MUST(cuMemGetAllocationPropertiesFromHandle(&prop, a));
    EXPECT(prop.location.id == 0, "properties of the token: device %d",
           prop.location.id);
    MUST(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)(va + MIB)));
    EXPECT(retained == a, "retain gave another handle than cuMemCreate's");
    MUST(cuMemRelease(retained));

    before = free_bytes();
    EXPECT(hook_u64("nvshare_hook_swap_out") == 32 * MIB, "swap_out moved %llu",
           (unsigned long long)hook_u64("nvshare_hook_swap_out"));
    EXPECT(free_bytes() == before + 32 * MIB,
           "swap_out gave back %zu bytes, want 32 MiB", free_bytes() - before);
    EXPECT(lost_bytes(va) == (long long)(16 * MIB),
           "while out, %lld bytes unmapped, want 16 MiB", lost_bytes(va));
    /* PyTorch frees a segment while its process is out: forgotten. */
    MUST(cuMemUnmap(vb, 16 * MIB));
    MUST(cuMemRelease(b));

    EXPECT(hook_u64("nvshare_hook_swap_in") == 16 * MIB, "swap_in moved %llu",
           (unsigned long long)hook_u64("nvshare_hook_swap_in"));
    EXPECT(lost_bytes(va) == 0, "after swap_in, %lld bytes lost", lost_bytes(va));
    EXPECT(free_bytes() == before + 16 * MIB,
           "after swap_in, %zu bytes free, want %zu", free_bytes(),
           (size_t)(before + 16 * MIB));
    MUST(cuMemsetD8_v2(va, 9, 16 * MIB)); /* mapped, with access */

    /* Exported: it leaves the process and stays where it is. */
    MUST(cuMemExportToShareableHandle(&fd, a,
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                      0));
    EXPECT(hook_u64("nvshare_hook_managed_bytes") == 0,
           "an exported allocation is still counted evictable");
    EXPECT(hook_u64("nvshare_hook_swap_out") == 0,
           "an exported allocation was swapped out");
    MUST(cuMemUnmap(va, 16 * MIB));
    MUST(cuMemRelease(a));
    MUST(cuMemAddressFree(va, 16 * MIB));
    MUST(cuMemAddressFree(vb, 16 * MIB));
    EXPECT(free_bytes() == before + 32 * MIB, "%zu bytes free at the end",
           free_bytes());
    printf(failures ? "FAIL\n" : "PASS\n");
    return failures ? 1 : 0;
}
