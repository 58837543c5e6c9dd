/* oversub_test.c - swappable device memory through libnvshare, on the fake
 * driver (no scheduler: the client runs unscheduled).
 *
 * What libnvshare makes swappable ("converts"): cuMemAlloc_v2 and
 * cuMemAllocPitch_v2 of at least the VMM granularity (2 MiB) become an
 * address range backed by one physical allocation (vmm.c), sized and
 * charged rounded up to the granularity. The fake driver tells them apart:
 * cuMemRetainAllocationHandle succeeds only on a VMM mapping, and
 * cuPointerGetAttribute(RANGE_SIZE) is the mapping's rounded size.
 *
 *   oversub_test convert CONVERTED QUOTA
 *       cuMemAlloc_v2 and cuMemAllocPitch_v2 of >= 2 MiB are VMM ranges
 *       of the rounded size iff CONVERTED is 1, never managed memory;
 *       smaller ones, cuMemAllocManaged and pool allocations never are;
 *       libnvshare counts the converted bytes (rounded) and the
 *       application's managed ones as evictable, and "oversub-converted"
 *       the conversions; the quota (QUOTA bytes, NVSHARE_GPU_MEMORY_LIMIT)
 *       is enforced as for device memory on the rounded sizes, and
 *       cuMemGetInfo says so.
 *   oversub_test beyond BYTES OK
 *       one cuMemAlloc_v2 of BYTES succeeds iff OK is 1: without a
 *       scheduler converted memory is device memory, no more than the
 *       device has.
 *   oversub_test swap
 *       libnvshare's swap_out / swap_in (called directly, as the client
 *       does) move exactly the evictable allocations: converted ones are
 *       copied to the host and their physical memory released (the fake's
 *       free memory grows by their rounded sizes, an allocation that did
 *       not fit before fits), then mapped again at the same addresses and
 *       copied back intact (the fake's page tags say so); the
 *       application's own managed memory is prefetched to the host / the
 *       device; pools stay. They wait for the moves, return their bytes,
 *       leave the caller's current context as it was, work from a thread
 *       without a context, return 0 with nothing evictable, copy nothing
 *       twice, forget what was freed while out, and stay correct while
 *       another thread allocates and frees.
 *   oversub_test async
 *       cuMemAllocAsync (the default pool) of >= 2 MiB is converted too; a
 *       cuMemFreeAsync parks the block, still charged: the same size on
 *       the freeing stream gets it back at once, on another stream once
 *       the free is done, a bigger size does not; a swap-out releases the
 *       parked blocks without copying them and moves the live ones, which
 *       come back intact. (cuMemAllocFromPoolAsync stays in its pool.)
 *   oversub_test prepare
 *       prepare_swap (the client's callback for PREPARE_SWAP) makes the
 *       staging ring on a thread: waiting for it takes the fake's pinning
 *       time (FAKE_CUDA_PIN_GBPS, set low), and the swap-out after it
 *       pins nothing (it takes a fraction of that), intact; it also
 *       makes the host copy's pages ahead ("host-made-ahead"), once: a
 *       second prepare_swap finds the copy installed.
 *   oversub_test unprepared
 *       without prepare_swap, the first swap-out pins the ring itself
 *       (it takes the pinning time), the next one does not; a swap-out
 *       while the ring is being made ahead moves everything intact.
 *   oversub_test blank
 *       (run with NVSHARE_FAIL_CLOSED=1 and no scheduler: the gate stays
 *       closed) a converted allocation made while the process cannot
 *       submit holds no data: its swap-out only releases its physical
 *       memory and its swap-in only maps new memory, nothing copied.
 *   oversub_test prepare-exit
 *       the process exits while the ring is being pinned, cleanly.
 *   oversub_test swap-at-exit
 *       a swap-out after the driver shut down moves nothing.
 *   oversub_test capture
 *       while the application captures a graph in the global mode,
 *       another thread prepares, swaps out and swaps in (the client's
 *       thread does on PREPARE_SWAP, EVICT and a grant): everything
 *       moves intact, and the capture ends valid (libnvshare's own
 *       threads pin and wait in the relaxed mode).
 *   oversub_test contexts
 *       a context of the application's own, made before the primary one
 *       (so the staging buffers are pinned in it), and the primary hold
 *       32 MiB each: a swap moves both out and back intact (a run of the
 *       copy threads per context); once the first context is destroyed,
 *       the next swap pins new buffers in the primary one and moves its
 *       memory intact.
 *   oversub_test copy-fails
 *       a swap-out whose copies fail from the first, the 6th, 11th or
 *       16th of 16 on keeps all of its memory on the GPU, intact; the
 *       next one, with copies that work, moves it all out and back.
 * Prints one line per failed check and key=value results; exit 1 on any
 * failure. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "entry_points.h"
#include "check.h"
#include "fake_content.h"

#define MIB (1ull << 20)
#define GRANULE (2 * MIB)

static uint64_t rounded(uint64_t bytes)
{
    return (bytes + GRANULE - 1) / GRANULE * GRANULE;
}

/* libnvshare's test entries, found at run time (it is preloaded). */
static void *hook_entry(const char *name)
{
    void *fn = dlsym(RTLD_DEFAULT, name);

    if (fn == NULL) {
        printf("FAIL: libnvshare does not export %s\n", name);
        exit(1);
    }
    return fn;
}

static uint64_t hook_u64(const char *name, int gpu)
{
    return ((uint64_t(*)(int))hook_entry(name))(gpu);
}

static void prepare_swap(void)
{
    ((void (*)(int))hook_entry("nvshare_hook_prepare_swap"))(0);
}

static void wait_prepared(void)
{
    ((void (*)(int))hook_entry("nvshare_hook_wait_prepared"))(0);
}

static uint64_t swap_out(void)
{
    return hook_u64("nvshare_hook_swap_out", 0);
}

static uint64_t swap_in(void)
{
    return hook_u64("nvshare_hook_swap_in", 0);
}

static uint64_t managed_bytes(void)
{
    return hook_u64("nvshare_hook_managed_bytes", 0);
}

static uint64_t event(const char *name)
{
    return ((uint64_t(*)(const char *))hook_entry("nvshare_hook_event"))(name);
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double env_double(const char *name, double otherwise)
{
    const char *text = getenv(name);

    return text ? atof(text) : otherwise;
}

static bool is_managed(CUdeviceptr p)
{
    unsigned int managed = 0; /* the driver writes a bool */

    MUST(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
    return managed != 0;
}

/* Whether p is a VMM mapping (a converted allocation that is in). */
static bool is_vmm(CUdeviceptr p)
{
    CUmemGenericAllocationHandle handle;

    if (cuMemRetainAllocationHandle(&handle, (void *)(uintptr_t)p) != CUDA_SUCCESS)
        return false;
    MUST(cuMemRelease(handle));
    return true;
}

static uint64_t range_size(CUdeviceptr p)
{
    size_t size = 0;

    MUST(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p));
    return size;
}

/* Whether the driver has memory at p: the range starting there, of size. */
static bool mapped_at(CUdeviceptr p, uint64_t size)
{
    CUdeviceptr base = 0;
    size_t got = 0;

    return cuMemGetAddressRange_v2(&base, &got, p) == CUDA_SUCCESS &&
           base == p && got == size;
}

static int prefetched_to(CUdeviceptr p, size_t bytes)
{
    int where = 42;

    MUST(cuMemRangeGetAttribute(&where, sizeof(where),
                                CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION,
                                p, bytes));
    return where;
}

static uint64_t free_memory(void)
{
    size_t free_bytes, total;

    MUST(cuMemGetInfo_v2(&free_bytes, &total));
    return free_bytes;
}

/* Writes bytes at p: content to lose from here on. */
static void write_memory(CUdeviceptr p, uint64_t bytes)
{
    MUST(cuMemsetD8_v2(p, 0x5a, bytes));
    MUST(cuCtxSynchronize());
}

static CUcontext setup(void)
{
    CUcontext ctx;

    MUST(cuInit(0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, 0));
    MUST(cuCtxSetCurrent(ctx));
    return ctx;
}

/* A pool of the application's own: its allocations stay in it. */
static CUmemoryPool own_pool(void)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE,
                                         .id = 0}};
    CUmemoryPool pool;

    MUST(cuMemPoolCreate(&pool, &props));
    return pool;
}

/* ---- convert ------------------------------------------------------------ */

/* The allocation at p is converted (a VMM mapping of size, not managed)
 * iff want. */
static void expect_converted(const char *what, CUdeviceptr p, uint64_t size,
                             bool want)
{
    EXPECT(is_vmm(p) == want, "%s: a VMM mapping %d, want %d", what, is_vmm(p),
           want);
    EXPECT(!is_managed(p), "%s: managed memory", what);
    if (want)
        EXPECT(range_size(p) == size, "%s: a range of %llu bytes, want %llu",
               what, (unsigned long long)range_size(p), (unsigned long long)size);
}

static void convert(bool want, uint64_t quota)
{
    CUdeviceptr plain, odd, pitched, small, small_pitched, managed, pooled,
        from_pool, p;
    size_t pitch = 0, small_pitch = 0;
    uint64_t charged, evictable, q;
    CUmemoryPool pool;

    setup();
    pool = own_pool();
    MUST(cuMemAlloc_v2(&plain, 8 * MIB));
    MUST(cuMemAlloc_v2(&odd, 3 * MIB)); /* 4 MiB converted */
    MUST(cuMemAllocPitch_v2(&pitched, &pitch, 1000, 3000, 4)); /* 4 MiB too */
    MUST(cuMemAlloc_v2(&small, MIB));
    MUST(cuMemAllocPitch_v2(&small_pitched, &small_pitch, 1000, 100, 4));
    MUST(cuMemAllocManaged(&managed, 4 * MIB, CU_MEM_ATTACH_GLOBAL));
    MUST(cuMemAllocAsync(&pooled, 2 * MIB, NULL));
    MUST(cuMemAllocFromPoolAsync(&from_pool, 2 * MIB, pool, NULL));
    EXPECT(pitch == 1024 && small_pitch == 1024,
           "cuMemAllocPitch_v2: pitches %zu and %zu, want 1024", pitch,
           small_pitch);
    expect_converted("cuMemAlloc_v2 8 MiB", plain, 8 * MIB, want);
    expect_converted("cuMemAlloc_v2 3 MiB", odd, 4 * MIB, want);
    expect_converted("cuMemAllocPitch_v2 1000 x 3000", pitched,
                     rounded(1024 * 3000), want);
    expect_converted("cuMemAlloc_v2 1 MiB", small, 0, false);
    expect_converted("cuMemAllocPitch_v2 1000 x 100", small_pitched, 0, false);
    expect_converted("cuMemAllocAsync", pooled, 2 * MIB, want);
    expect_converted("cuMemAllocFromPoolAsync", from_pool, 0, false);
    EXPECT(is_managed(managed) && !is_vmm(managed),
           "cuMemAllocManaged: not managed memory");
    evictable = want ? 8 * MIB + 4 * MIB + rounded(1024 * 3000) + 2 * MIB : 0;
    EXPECT(managed_bytes() == evictable + 4 * MIB,
           "libnvshare counts %llu evictable bytes, want %llu",
           (unsigned long long)managed_bytes(),
           (unsigned long long)(evictable + 4 * MIB));
    EXPECT(event("oversub-converted") == (want ? 4u : 0u),
           "%llu conversions counted, want %d",
           (unsigned long long)event("oversub-converted"), want ? 4 : 0);
    /* Charged: the rounded sizes when converted, the pools' 2 MiB each. */
    charged = (want ? evictable : 8 * MIB + 3 * MIB + 1024 * 3000 + 2 * MIB) +
              MIB + 1024 * 100 + 4 * MIB + 2 * MIB;
    EXPECT(free_memory() == quota - charged,
           "cuMemGetInfo says %llu free, want %llu",
           (unsigned long long)free_memory(),
           (unsigned long long)(quota - charged));
    MUST(cuMemFree_v2(plain));
    MUST(cuMemFree_v2(odd));
    MUST(cuMemFree_v2(pitched));
    MUST(cuMemFree_v2(small));
    MUST(cuMemFree_v2(small_pitched));
    MUST(cuMemFree_v2(managed));
    MUST(cuMemFreeAsync(pooled, NULL));
    MUST(cuMemFreeAsync(from_pool, NULL));
    MUST(cuMemPoolDestroy(pool));
    EXPECT(managed_bytes() == 0, "%llu evictable bytes left after the frees",
           (unsigned long long)managed_bytes());

    /* The quota, as for device memory. The default pool keeps 2 MiB, and
     * so does a converted stream-ordered free (parked for reuse) until an
     * allocation needs the room. */
    EXPECT(free_memory() == quota - 2 * MIB,
           "all freed, cuMemGetInfo says %llu free of %llu",
           (unsigned long long)free_memory(),
           (unsigned long long)quota - 2 * MIB);
    q = want ? quota : quota - 2 * MIB;
    EXPECT(cuMemAlloc_v2(&p, q + 1) == CUDA_ERROR_OUT_OF_MEMORY,
           "quota + 1 byte not refused");
    MUST(cuMemAlloc_v2(&p, q));
    expect_converted("the whole quota", p, q, want);
    EXPECT(free_memory() == 0, "quota used up, cuMemGetInfo says %llu free",
           (unsigned long long)free_memory());
    EXPECT(cuMemAlloc_v2(&small, 1) == CUDA_ERROR_OUT_OF_MEMORY,
           "one byte over the quota not refused");
    EXPECT(cuMemAllocPitch_v2(&small, &pitch, 16, 1, 4) ==
               CUDA_ERROR_OUT_OF_MEMORY,
           "a pitched row over the quota not refused");
    MUST(cuMemFree_v2(p));
    /* Rounded up to the granularity, and charged so: what is left of the
     * quota is 0 converted, the 1 MiB + 1 byte not asked for otherwise. */
    MUST(cuMemAlloc_v2(&p, q - MIB - 1));
    EXPECT(free_memory() == (want ? 0 : MIB + 1),
           "%llu bytes of %llu allocated, cuMemGetInfo says %llu free",
           (unsigned long long)(q - MIB - 1), (unsigned long long)q,
           (unsigned long long)free_memory());
    CUresult rc = cuMemAlloc_v2(&small, MIB);
    EXPECT((rc == CUDA_ERROR_OUT_OF_MEMORY) == want,
           "1 MiB in the rounding's room: %d", (int)rc);
    if (rc == CUDA_SUCCESS)
        MUST(cuMemFree_v2(small));
    MUST(cuMemFree_v2(p));
    /* The pitch is charged as returned: 1000-byte rows take 1024. */
    EXPECT(cuMemAllocPitch_v2(&p, &pitch, 1000, q / 1000, 4) ==
               CUDA_ERROR_OUT_OF_MEMORY,
           "pitched allocation over the quota not refused");
    MUST(cuMemAllocPitch_v2(&p, &pitch, 1000, q / 1024, 4));
    expect_converted("the whole quota, pitched", p, q, want);
    EXPECT(free_memory() == 0, "pitched quota used up, %llu free",
           (unsigned long long)free_memory());
    MUST(cuMemFree_v2(p));
    EXPECT(free_memory() == q, "all freed, cuMemGetInfo says %llu free of %llu",
           (unsigned long long)free_memory(), (unsigned long long)q);
    printf("converted=%llu\n", (unsigned long long)event("oversub-converted"));
}

/* ---- stream-ordered ------------------------------------------------------- */

static void stream_ordered(void)
{
    CUstream s, other;
    CUdeviceptr a, b, again, c;
    uint64_t free_before, out, in;

    setup();
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    free_before = free_memory();
    MUST(cuMemAllocAsync(&a, 16 * MIB, s));
    MUST(cuMemAllocAsync(&b, 5 * MIB, s)); /* 6 MiB */
    expect_converted("cuMemAllocAsync 16 MiB", a, 16 * MIB, true);
    expect_converted("cuMemAllocAsync 5 MiB", b, 6 * MIB, true);
    write_memory(a, 16 * MIB);
    MUST(cuMemFreeAsync(b, s));
    EXPECT(free_memory() == free_before - 22 * MIB,
           "a parked block: %llu bytes free, want %llu",
           (unsigned long long)free_memory(),
           (unsigned long long)(free_before - 22 * MIB));
    MUST(cuMemAllocAsync(&again, 6 * MIB, s));
    EXPECT(again == b,
           "6 MiB on the freeing stream: 0x%llx, not the parked "
           "block 0x%llx",
           (unsigned long long)again, (unsigned long long)b);
    EXPECT(free_memory() == free_before - 22 * MIB,
           "the reused block charged again: %llu bytes free",
           (unsigned long long)free_memory());
    MUST(cuMemFreeAsync(again, s));
    /* Nothing is queued on s: the free is done, any stream may reuse it. */
    MUST(cuMemAllocAsync(&again, 6 * MIB, other));
    EXPECT(again == b,
           "6 MiB on another stream after the free was done: "
           "0x%llx, not 0x%llx",
           (unsigned long long)again, (unsigned long long)b);
    MUST(cuMemAllocAsync(&c, 8 * MIB, other)); /* bigger: a new block */
    EXPECT(c != b && range_size(c) == 8 * MIB, "8 MiB took the 6 MiB block");
    MUST(cuMemFreeAsync(again, other));
    MUST(cuMemFreeAsync(c, other));
    EXPECT(free_memory() == free_before - 30 * MIB,
           "two parked blocks: %llu bytes free, want %llu",
           (unsigned long long)free_memory(),
           (unsigned long long)(free_before - 30 * MIB));

    /* Parked blocks are released, not copied; the live one moves. */
    out = swap_out();
    EXPECT(out == 16 * MIB, "swap_out moved %llu bytes, want 16 MiB",
           (unsigned long long)out);
    EXPECT(free_memory() == free_before,
           "swapped out: %llu bytes free, want all %llu",
           (unsigned long long)free_memory(), (unsigned long long)free_before);
    EXPECT(!mapped_at(a, 16 * MIB) && !mapped_at(b, 6 * MIB) &&
               !mapped_at(c, 8 * MIB),
           "swapped out: memory still mapped");
    in = swap_in();
    EXPECT(in == 16 * MIB && lost_bytes(a) == 0 && mapped_at(a, 16 * MIB),
           "swap_in moved %llu bytes, %lld lost", (unsigned long long)in,
           lost_bytes(a));
    EXPECT(free_memory() == free_before - 16 * MIB,
           "swapped in: %llu bytes free, want %llu",
           (unsigned long long)free_memory(),
           (unsigned long long)(free_before - 16 * MIB));
    MUST(cuMemFreeAsync(a, s));
    MUST(cuStreamSynchronize(s));
    EXPECT(swap_out() == 0 && free_memory() == free_before,
           "all freed: a swap-out moved something or left memory held");
}

static void beyond(uint64_t bytes, bool want)
{
    CUdeviceptr p;
    CUresult rc;

    setup();
    rc = cuMemAlloc_v2(&p, bytes);
    EXPECT((rc == CUDA_SUCCESS) == want, "%llu bytes: %d, want %s",
           (unsigned long long)bytes, (int)rc, want ? "success" : "failure");
    printf("beyond=%d\n", (int)rc);
}

/* ---- swap --------------------------------------------------------------- */

static void *swap_from_thread(void *arg)
{
    uint64_t *bytes = arg;
    CUcontext ctx = (CUcontext)1;

    bytes[0] = swap_out();
    bytes[1] = swap_in();
    MUST(cuCtxGetCurrent(&ctx));
    EXPECT(ctx == NULL, "a thread without a context has one after a swap");
    return NULL;
}

static atomic_bool churning;

/* Allocates (converted) and frees while the main thread swaps. */
static void *churn(void *arg)
{
    CUcontext ctx = arg;
    long rounds = 0;

    MUST(cuCtxSetCurrent(ctx));
    while (atomic_load(&churning)) {
        CUdeviceptr p[4];

        for (int i = 0; i < 4; i++)
            MUST(cuMemAlloc_v2(&p[i], GRANULE));
        for (int i = 0; i < 4; i++)
            MUST(cuMemFree_v2(p[i]));
        rounds++;
    }
    printf("churn_rounds=%ld\n", rounds);
    return NULL;
}

static void swap(void)
{
    CUcontext ctx = setup(), current;
    CUdeviceptr a, b, d, pooled, probe;
    CUmemoryPool pool;
    size_t pitch;
    uint64_t converted, want, out, in, thread_bytes[2], free_in, probe_bytes;
    double t0, out_ms, in_ms, min_ms;
    pthread_t thread;

    EXPECT(swap_out() == 0 && swap_in() == 0,
           "a swap with nothing evictable moved something");
    MUST(cuMemAlloc_v2(&a, 16 * MIB)); /* converted */
    MUST(cuMemAllocManaged(&b, 8 * MIB, CU_MEM_ATTACH_GLOBAL));
    MUST(cuMemAllocPitch_v2(&d, &pitch, 4000, 700, 4)); /* converted, 4 MiB */
    pool = own_pool();
    MUST(cuMemAllocFromPoolAsync(&pooled, 3 * MIB, pool, NULL)); /* stays */
    EXPECT(range_size(d) == 4 * MIB, "the pitched allocation takes %llu",
           (unsigned long long)range_size(d));
    write_memory(a, 16 * MIB);
    write_memory(d, (uint64_t)pitch * 700);
    EXPECT(lost_bytes(a) == 0 && lost_bytes(d) == 0,
           "written memory counted lost before any swap");
    converted = 16 * MIB + 4 * MIB;
    want = converted + 8 * MIB;
    /* Not room for the probe now; once the converted memory is out, yes. */
    free_in = free_memory();
    probe_bytes = free_in / GRANULE * GRANULE + GRANULE;
    EXPECT(cuMemAlloc_v2(&probe, probe_bytes) == CUDA_ERROR_OUT_OF_MEMORY,
           "%llu bytes fit beside the swapped-in memory (%llu free)",
           (unsigned long long)probe_bytes, (unsigned long long)free_in);
    /* The copies out run on at most 4 streams at FAKE_CUDA_COPY_GBPS: a
     * swap that waits for them takes at least this long. */
    min_ms =
        (double)converted / 4 / (env_double("FAKE_CUDA_COPY_GBPS", 50) * 1e6);

    t0 = now_ms();
    out = swap_out();
    out_ms = now_ms() - t0;
    EXPECT(out == want, "swap_out moved %llu bytes, want %llu",
           (unsigned long long)out, (unsigned long long)want);
    EXPECT(out_ms >= 0.9 * min_ms,
           "swap_out returned after %.1f ms, before its copies (%.1f ms)",
           out_ms, min_ms);
    EXPECT(free_memory() == free_in + converted,
           "swap_out: %llu bytes free, want %llu (physical memory released)",
           (unsigned long long)free_memory(),
           (unsigned long long)(free_in + converted));
    EXPECT(!mapped_at(a, 16 * MIB) && !mapped_at(d, 4 * MIB),
           "swap_out: converted memory still mapped");
    EXPECT(lost_bytes(a) == (long long)(16 * MIB),
           "swap_out: %lld bytes of 16 MiB unmapped", lost_bytes(a));
    EXPECT(prefetched_to(b, 8 * MIB) == CU_DEVICE_CPU,
           "swap_out: the application's managed memory not on the host");
    EXPECT(mapped_at(pooled, 3 * MIB), "swap_out: the pool allocation moved");
    if (cuMemAlloc_v2(&probe, probe_bytes) == CUDA_SUCCESS)
        MUST(cuMemFree_v2(probe));
    else
        EXPECT(0, "%llu bytes do not fit while swapped out",
               (unsigned long long)probe_bytes);
    /* Only the prefetch, which is idempotent, is repeated. */
    EXPECT(swap_out() == 8 * MIB, "a second swap_out copied converted memory "
                                  "again");
    MUST(cuCtxGetCurrent(&current));
    EXPECT(current == ctx, "swap_out changed the current context");

    t0 = now_ms();
    in = swap_in();
    in_ms = now_ms() - t0;
    EXPECT(in == want, "swap_in moved %llu bytes, want %llu",
           (unsigned long long)in, (unsigned long long)want);
    EXPECT(in_ms >= 0.9 * min_ms, "swap_in returned after %.1f ms", in_ms);
    EXPECT(lost_bytes(a) == 0 && lost_bytes(d) == 0,
           "swap_in: converted memory not restored intact (%lld, %lld lost)",
           lost_bytes(a), lost_bytes(d));
    EXPECT(mapped_at(a, 16 * MIB) && mapped_at(d, 4 * MIB) && is_vmm(a),
           "swap_in: not mapped again at the same addresses");
    EXPECT(free_memory() == free_in, "swap_in: %llu bytes free, want %llu",
           (unsigned long long)free_memory(), (unsigned long long)free_in);
    EXPECT(prefetched_to(b, 8 * MIB) == 0,
           "swap_in: the application's managed memory not on gpu 0");
    MUST(cuCtxGetCurrent(&current));
    EXPECT(current == ctx, "swap_in changed the current context");
    EXPECT(swap_in() == 8 * MIB, "a second swap_in copied converted memory "
                                 "again");
    EXPECT(lost_bytes(a) == 0 && lost_bytes(d) == 0,
           "a second swap_in lost content");

    /* From a thread with no context, like the client's. */
    pthread_create(&thread, NULL, swap_from_thread, thread_bytes);
    pthread_join(thread, NULL);
    EXPECT(thread_bytes[0] == want && thread_bytes[1] == want,
           "from another thread: %llu out, %llu in",
           (unsigned long long)thread_bytes[0],
           (unsigned long long)thread_bytes[1]);
    EXPECT(lost_bytes(a) == 0 && lost_bytes(d) == 0,
           "swapped from another thread: content lost");

    /* A freed allocation is not moved; one freed while out is not
     * restored either, and gives its address range back. */
    MUST(cuMemFree_v2(b));
    out = swap_out();
    EXPECT(out == converted, "after a free, swap_out moved %llu",
           (unsigned long long)out);
    MUST(cuMemFree_v2(d));
    EXPECT(lost_bytes(d) == -1, "the range freed while out is still known");
    in = swap_in();
    EXPECT(in == 16 * MIB && lost_bytes(a) == 0,
           "after a free while out, swap_in moved %llu (%lld lost)",
           (unsigned long long)in, lost_bytes(a));
    EXPECT(lost_bytes(d) == -1 && !mapped_at(d, 4 * MIB),
           "swap_in brought back memory freed while out");
    EXPECT(free_memory() == free_in + 4 * MIB,
           "after the free while out: %llu bytes free, want %llu",
           (unsigned long long)free_memory(),
           (unsigned long long)(free_in + 4 * MIB));
    MUST(cuMemAllocPitch_v2(&d, &pitch, 4000, 700, 4));
    write_memory(d, (uint64_t)pitch * 700);

    /* Concurrent allocations and frees on another thread. */
    atomic_store(&churning, true);
    pthread_create(&thread, NULL, churn, ctx);
    for (int i = 0; i < 10; i++) {
        out = swap_out();
        in = swap_in();
        EXPECT(out >= converted && out <= converted + 4 * GRANULE &&
                   in >= converted && in <= converted + 4 * GRANULE,
               "swap %d during churn: %llu out, %llu in", i,
               (unsigned long long)out, (unsigned long long)in);
    }
    atomic_store(&churning, false);
    pthread_join(thread, NULL);
    EXPECT(lost_bytes(a) == 0 && lost_bytes(d) == 0,
           "swaps during churn lost content (%lld, %lld)", lost_bytes(a),
           lost_bytes(d));
    EXPECT(mapped_at(a, 16 * MIB) && mapped_at(d, 4 * MIB),
           "swaps during churn moved an address");

    MUST(cuMemFree_v2(a));
    MUST(cuMemFree_v2(d));
    MUST(cuMemFreeAsync(pooled, NULL));
    MUST(cuMemPoolDestroy(pool));
    EXPECT(swap_out() == 0, "a swap after every free moved something");
    printf("swap_bytes=%llu out_ms=%.1f in_ms=%.1f swap_outs=%llu "
           "swap_out_bytes=%llu\n",
           (unsigned long long)want, out_ms, in_ms,
           (unsigned long long)event("swap-outs"),
           (unsigned long long)event("swap-out-bytes"));
}

/* ---- the staging ring ------------------------------------------------------ */

/* The ring's pinning at FAKE_CUDA_PIN_GBPS: two 4 MiB buffers per copy
 * thread, a thread per CPU up to 16 (staging.c). */
static double pin_ms(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double threads = cpus < 1 ? 1 : cpus > 16 ? 16 : (double)cpus;

    return threads * 8 * MIB / (env_double("FAKE_CUDA_PIN_GBPS", 2) * 1e6);
}

static void prepare(void)
{
    CUdeviceptr a;
    double t0, prepare_ms, out_ms, in_ms;

    setup();
    MUST(cuMemAlloc_v2(&a, 32 * MIB));
    write_memory(a, 32 * MIB);

    t0 = now_ms();
    prepare_swap();
    prepare_swap(); /* one ring */
    wait_prepared();
    prepare_ms = now_ms() - t0;
    EXPECT(prepare_ms >= 0.9 * pin_ms(),
           "prepare_swap took %.1f ms, not the pinning's %.1f ms", prepare_ms,
           pin_ms());
    EXPECT(event("host-made-ahead") == 32 * MIB,
           "prepare_swap made %llu bytes of host copies ahead, want 32 MiB",
           (unsigned long long)event("host-made-ahead"));
    prepare_swap(); /* the copy made is the allocation's: none is made again */
    wait_prepared();
    EXPECT(event("host-made-ahead") == 32 * MIB,
           "a second prepare_swap made %llu bytes of host copies in all: the "
           "first copy was not installed",
           (unsigned long long)event("host-made-ahead"));

    t0 = now_ms();
    EXPECT(swap_out() == 32 * MIB, "the prepared swap-out did not move 32 MiB");
    out_ms = now_ms() - t0;
    EXPECT(out_ms < 0.5 * pin_ms(),
           "the prepared swap-out took %.1f ms: it pinned (%.1f ms)", out_ms,
           pin_ms());
    EXPECT(lost_bytes(a) == (long long)(32 * MIB), "32 MiB not released");
    t0 = now_ms();
    EXPECT(swap_in() == 32 * MIB, "swap_in did not bring 32 MiB back");
    in_ms = now_ms() - t0;
    EXPECT(in_ms < 0.5 * pin_ms(), "the swap-in took %.1f ms: it pinned", in_ms);
    EXPECT(lost_bytes(a) == 0 && mapped_at(a, 32 * MIB),
           "prepared swap: %lld bytes lost", lost_bytes(a));
    MUST(cuMemFree_v2(a));
    printf("prepare_ms=%.1f prepared_out_ms=%.1f in_ms=%.1f pin_ms=%.1f\n",
           prepare_ms, out_ms, in_ms, pin_ms());
}

static void unprepared(void)
{
    CUdeviceptr a;
    double t0, first_ms, next_ms;

    setup();
    MUST(cuMemAlloc_v2(&a, 32 * MIB));
    write_memory(a, 32 * MIB);

    /* The first swap-out makes the ring. */
    t0 = now_ms();
    EXPECT(swap_out() == 32 * MIB, "the first swap-out did not move 32 MiB");
    first_ms = now_ms() - t0;
    EXPECT(first_ms >= 0.9 * pin_ms(),
           "the unprepared swap-out took %.1f ms, less than pinning (%.1f ms)",
           first_ms, pin_ms());
    EXPECT(swap_in() == 32 * MIB && lost_bytes(a) == 0,
           "the unprepared swap lost %lld bytes", lost_bytes(a));
    /* The ring stays. */
    t0 = now_ms();
    EXPECT(swap_out() == 32 * MIB, "the second swap-out did not move 32 MiB");
    next_ms = now_ms() - t0;
    EXPECT(next_ms < 0.5 * pin_ms(),
           "the second swap-out took %.1f ms: it pinned", next_ms);
    EXPECT(swap_in() == 32 * MIB && lost_bytes(a) == 0,
           "the second swap lost %lld bytes", lost_bytes(a));
    MUST(cuMemFree_v2(a));
    printf("first_out_ms=%.1f next_out_ms=%.1f pin_ms=%.1f\n", first_ms,
           next_ms, pin_ms());
}

/* A swap-out while the preparer is still pinning: everything moves, intact. */
static void prepare_behind(void)
{
    CUdeviceptr a;

    setup();
    MUST(cuMemAlloc_v2(&a, 32 * MIB));
    write_memory(a, 32 * MIB);
    prepare_swap();
    EXPECT(swap_out() == 32 * MIB, "the swap-out behind the preparer did not "
                                   "move 32 MiB");
    EXPECT(lost_bytes(a) == (long long)(32 * MIB), "32 MiB not released");
    EXPECT(swap_in() == 32 * MIB && lost_bytes(a) == 0,
           "the swap behind the preparer lost %lld bytes", lost_bytes(a));
    wait_prepared();
    EXPECT(swap_out() == 32 * MIB && swap_in() == 32 * MIB && lost_bytes(a) == 0,
           "the swap after the preparer lost %lld bytes", lost_bytes(a));
    MUST(cuMemFree_v2(a));
}

/* A swap-out while the preparer makes the host copies (the ring pinned,
 * a 256 MiB copy being made): the preparer gives way and the swap-out
 * takes what it made, so nothing is made after the swap-out returned.
 * Where the swap lands (during the pin, the copies, or after them) is the
 * machine's timing; that the preparer is done by then is not. */
static void prepare_race(void)
{
    const uint64_t bytes = 256 * MIB;
    const uint64_t past_pin_ns = (uint64_t)(pin_ms() * 1e6) + 2000000;
    const struct timespec past_pin = {.tv_sec = (time_t)(past_pin_ns / 1000000000),
                                      .tv_nsec = (long)(past_pin_ns % 1000000000)};
    uint64_t made;
    CUdeviceptr a;

    setup();
    MUST(cuMemAlloc_v2(&a, bytes));
    write_memory(a, bytes);
    prepare_swap();
    nanosleep(&past_pin, NULL);
    EXPECT(swap_out() == bytes, "the swap-out beside the preparer did not move "
                                "256 MiB");
    made = event("host-made-ahead");
    wait_prepared();
    EXPECT(event("host-made-ahead") == made,
           "the preparer went on after the swap-out: %llu bytes made ahead "
           "when it returned, %llu in all",
           (unsigned long long)made,
           (unsigned long long)event("host-made-ahead"));
    EXPECT(swap_in() == bytes && lost_bytes(a) == 0,
           "the swap beside the preparer lost %lld bytes", lost_bytes(a));
    MUST(cuMemFree_v2(a));
    printf("made_ahead_mib=%llu\n", (unsigned long long)(made >> 20));
}

static void blank(void)
{
    CUdeviceptr p;
    uint64_t free_in;

    setup();
    MUST(cuMemAlloc_v2(&p, 32 * MIB));
    EXPECT(is_vmm(p), "not converted");
    free_in = free_memory();
    EXPECT(swap_out() == 0, "a blank allocation was copied out");
    EXPECT(!mapped_at(p, 32 * MIB) && free_memory() == free_in + 32 * MIB,
           "a blank allocation's physical memory was not released");
    EXPECT(swap_in() == 0, "a blank allocation was copied in");
    EXPECT(mapped_at(p, 32 * MIB) && is_vmm(p) && free_memory() == free_in,
           "a blank allocation was not mapped again");
    EXPECT(event("swap-out-bytes") == 0 && event("swap-in-bytes") == 0,
           "a blank allocation counts as %llu bytes out, %llu in",
           (unsigned long long)event("swap-out-bytes"),
           (unsigned long long)event("swap-in-bytes"));
    MUST(cuMemFree_v2(p));
}

/* Exits (returning from main) while the preparer pins the ring. */
static void prepare_exit(void)
{
    CUdeviceptr p;

    setup();
    MUST(cuMemAlloc_v2(&p, 8 * MIB));
    prepare_swap();
}

/* A swap-out that meets a driver already shut down (the process exits)
 * moves nothing and warns about nothing: oversub.sh checks stderr. */
static void swap_at_exit(void)
{
    CUdeviceptr a, b;
    void (*deinitialize)(void) =
        (void (*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_deinitialize");

    setup();
    MUST(cuMemAlloc_v2(&a, 8 * MIB));
    write_memory(a, 8 * MIB);
    MUST(cuMemAllocManaged(&b, 8 * MIB, CU_MEM_ATTACH_GLOBAL));
    EXPECT(deinitialize != NULL, "the fake driver cannot shut down");
    if (deinitialize)
        deinitialize();
    EXPECT(swap_out() == 0,
           "a swap-out moved memory after the driver shut down");
    EXPECT(lost_bytes(a) == 0, "a failed swap-out released written memory");
}

static void contexts(void)
{
    CUcontext own, primary, popped;
    CUdeviceptr a, b;

    MUST(cuInit(0));
    MUST(cuCtxCreate_v2(&own, 0, 0)); /* current */
    MUST(cuMemAlloc_v2(&b, 32 * MIB));
    write_memory(b, 32 * MIB);
    MUST(cuCtxPopCurrent_v2(&popped));
    primary = setup();
    MUST(cuMemAlloc_v2(&a, 32 * MIB));
    write_memory(a, 32 * MIB);
    EXPECT(swap_out() == 64 * MIB && !mapped_at(a, 32 * MIB) &&
               !mapped_at(b, 32 * MIB),
           "a swap-out did not move both contexts' memory");
    EXPECT(swap_in() == 64 * MIB && lost_bytes(a) == 0 && lost_bytes(b) == 0,
           "a swap of two contexts lost %lld and %lld bytes", lost_bytes(a),
           lost_bytes(b));
    MUST(cuCtxPushCurrent_v2(own));
    MUST(cuMemFree_v2(b));
    MUST(cuCtxPopCurrent_v2(&popped));
    MUST(cuCtxDestroy_v2(own));
    MUST(cuCtxSetCurrent(primary));
    EXPECT(swap_out() == 32 * MIB && swap_in() == 32 * MIB && lost_bytes(a) == 0,
           "the swap after the buffers' context went lost %lld bytes",
           lost_bytes(a));
    MUST(cuMemFree_v2(a));
}

static void *swaps_beside_capture(void *arg)
{
    uint64_t *moved = arg;

    prepare_swap();
    wait_prepared();
    moved[0] = swap_out();
    moved[1] = swap_in();
    return NULL;
}

static void capture(void)
{
    uint64_t moved[2] = {0, 0};
    CUdeviceptr a;
    CUstream stream;
    CUgraph graph;
    pthread_t thread;

    setup();
    MUST(cuMemAlloc_v2(&a, 32 * MIB));
    write_memory(a, 32 * MIB);
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    pthread_create(&thread, NULL, swaps_beside_capture, moved);
    pthread_join(thread, NULL);
    EXPECT(cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS,
           "the swaps invalidated the application's graph capture");
    EXPECT(moved[0] == 32 * MIB && moved[1] == 32 * MIB && lost_bytes(a) == 0,
           "swaps beside a capture moved %llu out, %llu in, lost %lld bytes",
           (unsigned long long)moved[0], (unsigned long long)moved[1],
           lost_bytes(a));
    MUST(cuStreamDestroy(stream));
    MUST(cuMemFree_v2(a));
}

/* Copies of a swap-out fail part of the way (a device lost meanwhile). */
static void copy_fails(void)
{
    void (*fail_after)(long) =
        (void (*)(long))dlsym(RTLD_DEFAULT, "fake_cuda_fail_copies_after");
    CUdeviceptr a;

    setup();
    MUST(cuMemAlloc_v2(&a, 64 * MIB)); /* 16 of staging.c's 4 MiB chunks */
    write_memory(a, 64 * MIB);
    EXPECT(fail_after != NULL, "the fake driver cannot fail copies");
    if (fail_after == NULL)
        return;
    for (long after = 0; after < 16; after += 5) {
        fail_after(after);
        EXPECT(swap_out() == 0, "a swap-out whose copy %ld failed moved memory",
               after + 1);
        EXPECT(lost_bytes(a) == 0 && mapped_at(a, 64 * MIB),
               "a swap-out whose copy %ld failed lost %lld bytes", after + 1,
               lost_bytes(a));
    }
    fail_after(-1);
    EXPECT(swap_out() == 64 * MIB && !mapped_at(a, 64 * MIB),
           "the swap-out after the failures did not move 64 MiB");
    EXPECT(swap_in() == 64 * MIB && lost_bytes(a) == 0,
           "the swap after the failures lost %lld bytes", lost_bytes(a));
    MUST(cuMemFree_v2(a));
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "convert") == 0)
        convert(atoi(argv[2]) != 0, strtoull(argv[3], NULL, 10));
    else if (argc == 4 && strcmp(argv[1], "beyond") == 0)
        beyond(strtoull(argv[2], NULL, 10), atoi(argv[3]) != 0);
    else if (argc == 2 && strcmp(argv[1], "async") == 0)
        stream_ordered();
    else if (argc == 2 && strcmp(argv[1], "swap") == 0)
        swap();
    else if (argc == 2 && strcmp(argv[1], "prepare") == 0)
        prepare();
    else if (argc == 2 && strcmp(argv[1], "copy-fails") == 0)
        copy_fails();
    else if (argc == 2 && strcmp(argv[1], "capture") == 0)
        capture();
    else if (argc == 2 && strcmp(argv[1], "contexts") == 0)
        contexts();
    else if (argc == 2 && strcmp(argv[1], "unprepared") == 0)
        unprepared();
    else if (argc == 2 && strcmp(argv[1], "prepare-behind") == 0)
        prepare_behind();
    else if (argc == 2 && strcmp(argv[1], "prepare-race") == 0)
        prepare_race();
    else if (argc == 2 && strcmp(argv[1], "blank") == 0)
        blank();
    else if (argc == 2 && strcmp(argv[1], "prepare-exit") == 0)
        prepare_exit();
    else if (argc == 2 && strcmp(argv[1], "swap-at-exit") == 0)
        swap_at_exit();
    else {
        fprintf(stderr, "usage: oversub_test convert CONVERTED QUOTA | "
                        "beyond BYTES OK | swap | prepare | unprepared | "
                        "prepare-behind | prepare-race | blank | "
                        "prepare-exit | swap-at-exit | copy-fails | capture | "
                        "contexts\n");
        return 2;
    }
    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
