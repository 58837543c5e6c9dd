/* memory_test.c - the memory quota on every allocation path, on the fake
 * driver, with libnvshare preloaded and NVSHARE_GPU_MEMORY_LIMIT = QUOTA.
 *
 *   memory_test paths QUOTA  for each row of `paths` (one per exported ALLOC
 *                            entry point of entry_points.def; a test fails
 *                            if one is missing): QUOTA + the path's
 *                            granularity is refused with
 *                            CUDA_ERROR_OUT_OF_MEMORY (never another code),
 *                            exactly QUOTA succeeds, one granule more is
 *                            refused, the free gives everything back (half
 *                            and then all of it allocate again), and at each
 *                            step cuMemGetInfo(_v2), cuDeviceTotalMem(_v2)
 *                            and NVML v1 and v2 (through dlsym and linked)
 *                            say total = QUOTA, free = QUOTA - used.
 *   memory_test fork QUOTA   a fork()ed child has its own quota.
 *   memory_test hold QUOTA   allocates QUOTA, says "held", and holds it until
 *                            stdin closes (a second process for the script).
 * Prints one PASS/FAIL line per check group; exit 1 on any failure. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "entry_points.h"

/* ---- NVML, declared here as libnvshare does ---------------------------- */

#include "nvml_abi.h"

int nvmlInit_v2(void);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device);
int nvmlDeviceGetMemoryInfo(void *device, nvmlMemory_t *memory);
int nvmlDeviceGetMemoryInfo_v2(void *device, nvmlMemory_v2_t *memory);

static struct {
    void *device;
    __typeof__(&nvmlDeviceGetMemoryInfo) v1; /* via dlsym, as nvidia-smi */
    __typeof__(&nvmlDeviceGetMemoryInfo_v2) v2;
} nvml;

/* ---- checks -------------------------------------------------------------- */

static uint64_t quota;

/* Every way an application reads the GPU's memory says: total = quota,
 * free = quota - used. */
static void expect_view(const char *row, uint64_t used)
{
    size_t free_bytes = 0, total = 0;
    unsigned int free32 = 0, total32 = 0, total_mem32 = 0;
    size_t total_mem = 0;
    nvmlMemory_t m1[2];
    nvmlMemory_v2_t m2[2];

    MUST(cuMemGetInfo_v2(&free_bytes, &total));
    MUST(cuMemGetInfo(&free32, &total32));
    MUST(cuDeviceTotalMem_v2(&total_mem, 0));
    MUST(cuDeviceTotalMem(&total_mem32, 0));
    EXPECT(total == quota && free_bytes == quota - used,
           "%s: cuMemGetInfo_v2 total %zu free %zu, want %llu %llu", row, total,
           free_bytes, (unsigned long long)quota,
           (unsigned long long)(quota - used));
    EXPECT(total32 == quota && free32 == quota - used,
           "%s: cuMemGetInfo total %u free %u", row, total32, free32);
    EXPECT(total_mem == quota && total_mem32 == quota,
           "%s: cuDeviceTotalMem(_v2) %zu %u", row, total_mem, total_mem32);
    for (int route = 0; route < 2; route++) {
        m2[route].version = (unsigned int)sizeof(nvmlMemory_v2_t) | 2u << 24;
        if ((route ? nvmlDeviceGetMemoryInfo(nvml.device, &m1[route])
                   : nvml.v1(nvml.device, &m1[route])) != 0 ||
            (route ? nvmlDeviceGetMemoryInfo_v2(nvml.device, &m2[route])
                   : nvml.v2(nvml.device, &m2[route])) != 0) {
            EXPECT(0, "%s: NVML query failed", row);
            return;
        }
        EXPECT(m1[route].total == quota && m1[route].used == used &&
                   m1[route].free == quota - used,
               "%s: NVML v1 (%s) total %llu used %llu free %llu", row,
               route ? "linked" : "dlsym", m1[route].total, m1[route].used,
               m1[route].free);
        EXPECT(m2[route].total == quota && m2[route].used == used &&
                   m2[route].free == quota - used && m2[route].reserved == 0,
               "%s: NVML v2 (%s) total %llu reserved %llu used %llu free %llu",
               row, route ? "linked" : "dlsym", m2[route].total,
               m2[route].reserved, m2[route].used, m2[route].free);
    }
}

static void expect_refused(const char *row, const char *what, CUresult rc)
{
    EXPECT(rc == CUDA_ERROR_OUT_OF_MEMORY,
           "%s: %s returned %d, want CUDA_ERROR_OUT_OF_MEMORY (2)", row, what,
           (int)rc);
}

/* ---- the allocation paths ------------------------------------------------ */

/* What one allocation left behind, for its free. */
struct slot {
    CUdeviceptr ptr;
    CUarray array;
    CUmipmappedArray mipmap;
    CUmemGenericAllocationHandle vmm;
};

static CUmemoryPool device_pool, own_pool;
static CUexternalMemory external;

static CUdevice dev0;

static CUmemAllocationProp device_prop(void)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED};

    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev0;
    return prop;
}

static CUresult alloc_linear(uint64_t n, struct slot *s)
{
    return cuMemAlloc_v2(&s->ptr, n);
}

static CUresult alloc_managed(uint64_t n, struct slot *s)
{
    return cuMemAllocManaged(&s->ptr, n, CU_MEM_ATTACH_GLOBAL);
}

/* Rows of 1024 bytes, which the fake pitches to exactly 1024. */
static CUresult alloc_pitch(uint64_t n, struct slot *s)
{
    size_t pitch;

    return cuMemAllocPitch_v2(&s->ptr, &pitch, 1024, n / 1024, 4);
}

static CUresult alloc_async(uint64_t n, struct slot *s)
{
    return cuMemAllocAsync(&s->ptr, n, NULL);
}

static CUresult alloc_async_ptsz(uint64_t n, struct slot *s)
{
    return cuMemAllocAsync_ptsz(&s->ptr, n, NULL);
}

static CUresult alloc_from_pool(uint64_t n, struct slot *s)
{
    if (own_pool == NULL) {
        CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED};

        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = dev0;
        MUST(cuMemPoolCreate(&own_pool, &props));
    }
    return cuMemAllocFromPoolAsync(&s->ptr, n, own_pool, NULL);
}

static CUresult alloc_from_pool_ptsz(uint64_t n, struct slot *s)
{
    return cuMemAllocFromPoolAsync_ptsz(&s->ptr, n, device_pool, NULL);
}

static CUresult alloc_vmm(uint64_t n, struct slot *s)
{
    CUmemAllocationProp prop = device_prop();

    return cuMemCreate(&s->vmm, n, &prop, 0);
}

/* 8-bit, one channel, rows of 64 KiB: the fake pads nothing. */
static CUresult alloc_array(uint64_t n, struct slot *s)
{
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 65536,
                               .Height = n / 65536,
                               .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                               .NumChannels = 1};

    return cuArrayCreate_v2(&s->array, &d);
}

static CUresult alloc_array3d(uint64_t n, struct slot *s)
{
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 64,  /* 16-byte texels: 64 KiB */
                                 .Height = 64, /* per slice */
                                 .Depth = n / 65536,
                                 .Format = CU_AD_FORMAT_FLOAT,
                                 .NumChannels = 4};

    return cuArray3DCreate_v2(&s->array, &d);
}

/* One level of 8-bit texels in rows of 64 KiB: exactly the descriptor's
 * size (the level arithmetic itself is the same as for arrays). */
static CUresult alloc_mipmap(uint64_t n, struct slot *s)
{
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 65536,
                                 .Height = n / 65536,
                                 .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                 .NumChannels = 1};

    return cuMipmappedArrayCreate(&s->mipmap, &d, 1);
}

static CUresult alloc_graph_node(uint64_t n, struct slot *s)
{
    CUDA_MEM_ALLOC_NODE_PARAMS params = {.bytesize = n};
    CUgraphNode node;

    params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params.poolProps.location.id = dev0;
    (void)s;
    return cuGraphAddMemAllocNode(&node, NULL, NULL, 0, &params);
}

/* The fake's convention: an IPC handle carries the size it opens. */
static CUipcMemHandle ipc_handle(uint64_t n)
{
    CUipcMemHandle handle = {{0}};

    memcpy(handle.reserved, &n, sizeof(n));
    return handle;
}

static CUresult alloc_ipc(uint64_t n, struct slot *s)
{
    return cuIpcOpenMemHandle_v2(&s->ptr, ipc_handle(n),
                                 CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
}

static CUresult alloc_ipc_v1(uint64_t n, struct slot *s)
{
    return cuIpcOpenMemHandle(&s->ptr, ipc_handle(n),
                              CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
}

static CUresult alloc_external(uint64_t n, struct slot *s)
{
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC desc = {.size = n};

    if (external == NULL) {
        CUDA_EXTERNAL_MEMORY_HANDLE_DESC h = {.size = 1ull << 40};

        MUST(cuImportExternalMemory(&external, &h));
    }
    return cuExternalMemoryGetMappedBuffer(&s->ptr, external, &desc);
}

static CUresult free_linear(struct slot *s)
{
    return cuMemFree_v2(s->ptr);
}

static CUresult free_async_trim(struct slot *s)
{
    CUresult rc = cuMemFreeAsync(s->ptr, NULL);

    return rc != CUDA_SUCCESS ? rc : cuMemPoolTrimTo(device_pool, 0);
}

static CUresult free_async_ptsz_trim(struct slot *s)
{
    CUresult rc = cuMemFreeAsync_ptsz(s->ptr, NULL);

    return rc != CUDA_SUCCESS ? rc : cuMemPoolTrimTo(device_pool, 0);
}

/* Destroying the pool gives its whole reservation back. */
static CUresult free_destroy_pool(struct slot *s)
{
    CUresult rc = cuMemFreeAsync(s->ptr, NULL);

    if (rc == CUDA_SUCCESS)
        rc = cuMemPoolDestroy(own_pool);
    own_pool = NULL;
    return rc;
}

static CUresult free_vmm(struct slot *s)
{
    return cuMemRelease(s->vmm);
}

static CUresult free_array(struct slot *s)
{
    return cuArrayDestroy(s->array);
}

static CUresult free_mipmap(struct slot *s)
{
    return cuMipmappedArrayDestroy(s->mipmap);
}

static CUresult free_graph(struct slot *s)
{
    (void)s;
    return cuDeviceGraphMemTrim(dev0);
}

static CUresult free_ipc(struct slot *s)
{
    return cuIpcCloseMemHandle(s->ptr);
}

struct path {
    const char *entry;    /* the exported symbol under test */
    uint64_t granularity; /* the smallest step of this path's sizes */
    CUresult (*alloc)(uint64_t bytes, struct slot *s);
    CUresult (*release)(struct slot *s);
};

static const struct path paths[] = {
    {"cuMemAlloc_v2", 1, alloc_linear, free_linear},
    {"cuMemAllocManaged", 1, alloc_managed, free_linear},
    {"cuMemAllocPitch_v2", 1024, alloc_pitch, free_linear},
    {"cuMemAllocAsync", 1, alloc_async, free_async_trim},
    {"cuMemAllocAsync_ptsz", 1, alloc_async_ptsz, free_async_ptsz_trim},
    {"cuMemAllocFromPoolAsync", 1, alloc_from_pool, free_destroy_pool},
    {"cuMemAllocFromPoolAsync_ptsz", 1, alloc_from_pool_ptsz,
     free_async_ptsz_trim},
    {"cuMemCreate", 2 << 20, alloc_vmm, free_vmm},
    {"cuArrayCreate_v2", 65536, alloc_array, free_array},
    {"cuArray3DCreate_v2", 65536, alloc_array3d, free_array},
    {"cuMipmappedArrayCreate", 65536, alloc_mipmap, free_mipmap},
    {"cuGraphAddMemAllocNode", 1, alloc_graph_node, free_graph},
    {"cuIpcOpenMemHandle_v2", 1, alloc_ipc, free_ipc},
    {"cuIpcOpenMemHandle", 1, alloc_ipc_v1, free_ipc},
    {"cuExternalMemoryGetMappedBuffer", 1, alloc_external, free_linear},
};

/* ALLOC entry points that charge nothing themselves, and why. */
static const char *const not_charged[] = {
    "cuMemPoolCreate",                /* its allocations are (pool rows) */
    "cuMemImportFromShareableHandle", /* size unknown until mapped: a gap */
};

static void check_every_alloc_has_a_row(void)
{
    static const struct nvshare_symbol facts[NVSHARE_SYMBOL_COUNT] = {
#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    NVSHARE_FACTS(e, api, since, pt, cat)
#include "entry_points.def"
#undef NVSHARE_SYMBOL
    };

    for (int i = 0; i < NVSHARE_SYMBOL_COUNT; i++) {
        bool covered = false;

        if (facts[i].category != NVSHARE_CAT_ALLOC)
            continue;
        for (size_t r = 0; r < sizeof(paths) / sizeof(paths[0]); r++)
            covered |= strcmp(paths[r].entry, facts[i].name) == 0;
        for (size_t r = 0; r < sizeof(not_charged) / sizeof(not_charged[0]); r++)
            covered |= strcmp(not_charged[r], facts[i].name) == 0;
        EXPECT(covered, "%s: ALLOC entry point without a test row",
               facts[i].name);
    }
}

static void check_path(const struct path *p)
{
    struct slot a = {0}, b = {0};
    int before = failures;
    CUresult rc;

    expect_view(p->entry, 0);
    expect_refused(p->entry, "quota + one granule",
                   p->alloc(quota + p->granularity, &a));
    expect_view(p->entry, 0);
    rc = p->alloc(quota, &a);
    EXPECT(rc == CUDA_SUCCESS, "%s: exactly the quota: %d", p->entry, (int)rc);
    expect_view(p->entry, quota);
    expect_refused(p->entry, "one granule at the quota",
                   p->alloc(p->granularity, &b));
    rc = p->release(&a);
    EXPECT(rc == CUDA_SUCCESS, "%s: free: %d", p->entry, (int)rc);
    expect_view(p->entry, 0);
    MUST(p->alloc(quota / 2, &a));
    expect_view(p->entry, quota / 2);
    MUST(p->release(&a));
    MUST(p->alloc(quota, &a));
    MUST(p->release(&a));
    expect_view(p->entry, 0);
    printf("%s: %s\n", failures == before ? "PASS" : "FAIL", p->entry);
}

/* The pitch the driver picks is charged, not the width asked for: rows of
 * 1000 bytes pitched to 1024 fill the quota exactly, and rows of 1025
 * pitched to 1536 overflow it although 1025 * height alone would fit. */
static void check_pitch_is_measured(void)
{
    CUdeviceptr ptr;
    size_t pitch;
    int before = failures;

    MUST(cuMemAllocPitch_v2(&ptr, &pitch, 1000, quota / 1024, 4));
    expect_view("pitch 1000", quota);
    MUST(cuMemFree_v2(ptr));
    expect_refused("pitch 1025", "rows padded over the quota",
                   cuMemAllocPitch_v2(&ptr, &pitch, 1025, quota / 1536 + 1, 4));
    expect_view("pitch 1025", 0);
    printf("%s: pitch charged as returned\n",
           failures == before ? "PASS" : "FAIL");
}

/* Freed pool memory stays the pool's until trimmed, and is reused. With
 * oversub on, a freed block (swappable, parked for reuse) also gives way
 * to an allocation that needs the room. */
static void check_pool_keeps_memory(void)
{
    const char *oversub = getenv("NVSHARE_ENABLE_OVERSUB");
    CUdeviceptr ptr, other;
    int before = failures;

    MUST(cuMemAllocAsync(&ptr, quota, NULL));
    MUST(cuMemFreeAsync(ptr, NULL));
    expect_view("pool after free", quota);
    if (oversub && strcmp(oversub, "1") == 0) {
        MUST(cuMemAlloc_v2(&other, 1));
        MUST(cuMemFree_v2(other));
        expect_view("a parked block given way", 0);
    } else {
        expect_refused("pool after free", "cuMemAlloc_v2 while the pool holds it",
                       cuMemAlloc_v2(&other, 1));
    }
    MUST(cuMemAllocAsync(&ptr, quota, NULL));
    MUST(cuMemFreeAsync(ptr, NULL));
    MUST(cuMemPoolTrimTo(device_pool, 0));
    expect_view("pool after trim", 0);
    MUST(cuMemAlloc_v2(&other, quota));
    MUST(cuMemFree_v2(other));
    printf("%s: pools are charged what they reserve\n",
           failures == before ? "PASS" : "FAIL");
}

static void setup(void)
{
    void *lib;
    CUcontext ctx;

    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev0, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev0));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuDeviceGetMemPool(&device_pool, dev0));
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (lib == NULL || nvmlInit_v2() != 0 ||
        nvmlDeviceGetHandleByIndex_v2(0, &nvml.device) != 0) {
        printf("FAIL: no fake libnvidia-ml.so.1\n");
        exit(1);
    }
    nvml.v1 = (__typeof__(nvml.v1))dlsym(lib, "nvmlDeviceGetMemoryInfo");
    nvml.v2 = (__typeof__(nvml.v2))dlsym(lib, "nvmlDeviceGetMemoryInfo_v2");
}

static int run_paths(void)
{
    check_every_alloc_has_a_row();
    for (size_t r = 0; r < sizeof(paths) / sizeof(paths[0]); r++)
        check_path(&paths[r]);
    check_pitch_is_measured();
    check_pool_keeps_memory();
    printf("%s: %zu paths, %d failures\n", failures ? "FAIL" : "PASS",
           sizeof(paths) / sizeof(paths[0]), failures);
    return failures ? 1 : 0;
}

/* The child of a process that holds its whole quota has a quota of its own
 * (the static limit is per process); the parent's is unchanged. */
static int run_fork(void)
{
    CUdeviceptr held, ptr;
    int status;
    pid_t child;

    MUST(cuMemAlloc_v2(&held, quota));
    child = fork();
    if (child == 0) {
        CUresult whole = cuMemAlloc_v2(&ptr, quota);
        CUresult more = cuMemAlloc_v2(&ptr, 1);

        printf("child: whole quota %d, one more %d\n", (int)whole, (int)more);
        _exit(whole == CUDA_SUCCESS && more == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1);
    }
    waitpid(child, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "the forked child could not use its own quota");
    expect_refused("parent after fork", "one more byte", cuMemAlloc_v2(&ptr, 1));
    MUST(cuMemFree_v2(held));
    MUST(cuMemAlloc_v2(&held, quota));
    printf("%s: fork\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}

static int run_hold(void)
{
    CUdeviceptr held;
    char buf[64];

    MUST(cuMemAlloc_v2(&held, quota));
    printf("held\n");
    fflush(stdout);
    while (fread(buf, 1, sizeof(buf), stdin) > 0)
        ;
    MUST(cuMemFree_v2(held));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: memory_test paths|fork|hold QUOTA_BYTES\n");
        return 2;
    }
    quota = strtoull(argv[2], NULL, 10);
    setup();
    if (strcmp(argv[1], "paths") == 0)
        return run_paths();
    if (strcmp(argv[1], "fork") == 0)
        return run_fork();
    return run_hold();
}
