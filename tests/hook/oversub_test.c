/* oversub_test.c - oversubscription through libnvshare, on the fake driver
 * (no scheduler: the client runs unscheduled).
 *
 *   oversub_test convert MANAGED QUOTA
 *       cuMemAlloc_v2 and cuMemAllocPitch_v2 return managed memory iff
 *       MANAGED is 1 (cuPointerGetAttribute IS_MANAGED), cuMemAllocManaged
 *       always, a pool allocation never; the pitch is a multiple of 512;
 *       libnvshare counts the managed bytes; the quota (QUOTA bytes, from
 *       NVSHARE_GPU_MEMORY_LIMIT) is enforced exactly as for device memory.
 *   oversub_test beyond BYTES OK
 *       one cuMemAlloc_v2 of BYTES succeeds iff OK is 1 (managed memory may
 *       exceed the device's memory; device memory may not).
 *   oversub_test swap
 *       libnvshare's swap_out / swap_in (called directly, as the client
 *       does) move exactly the managed allocations: converted ones are
 *       copied to pinned host memory and their device pages discarded, then
 *       copied back intact (the fake's stamps say so), the application's
 *       own managed memory is prefetched to the host / the device; they
 *       wait for the moves, return their bytes, leave the caller's current
 *       context as it was, work from a thread without a context, return 0
 *       with nothing managed, copy nothing twice, and stay correct while
 *       another thread allocates and frees.
 *   oversub_test prepare
 *       after prepare_swap (the client's callback for PREPARE_SWAP) every
 *       converted allocation, and one made afterwards, has its pinned copy
 *       before the swap-out, which then pins nothing and restores the data
 *       intact; an allocation freed while its copy is made takes nothing
 *       with it; a swap-out during the preparation pins each allocation
 *       once in all.
 *   oversub_test prepare-behind
 *       a swap-out that comes while the copies are still being made does
 *       not pin: what the preparer has not reached is prefetched, and comes
 *       back intact; the next swap-out, once prepared, copies everything.
 *   oversub_test blank
 *       (run with NVSHARE_FAIL_CLOSED=1 and no scheduler: the gate stays
 *       closed) a converted allocation made while the process cannot
 *       submit holds no data: its swap-out only discards its pages and its
 *       swap-in only makes them again, nothing copied, nothing pinned.
 *   oversub_test prepare-exit
 *       the process exits while a pinned copy is being made, cleanly.
 * Prints one line per failed check and key=value results; exit 1 on any
 * failure. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "entry_points.h"
#include "check.h"


#define MIB (1ull << 20)

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
    uint64_t (*fn)(const char *) =
        (uint64_t(*)(const char *))dlsym(RTLD_DEFAULT, "nvshare_hook_event");

    return fn ? fn(name) : 0;
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool is_managed(CUdeviceptr p)
{
    unsigned int managed = 0; /* the driver writes a bool */

    MUST(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
    return managed != 0;
}

static int prefetched_to(CUdeviceptr p, size_t bytes)
{
    int where = 42;

    MUST(cuMemRangeGetAttribute(&where, sizeof(where),
                                CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION,
                                p, bytes));
    return where;
}

static CUcontext setup(void)
{
    CUcontext ctx;

    MUST(cuInit(0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, 0));
    MUST(cuCtxSetCurrent(ctx));
    return ctx;
}

/* ---- convert ------------------------------------------------------------ */

static void convert(bool want, uint64_t quota)
{
    CUdeviceptr plain, pitched, managed, pooled, p;
    size_t pitch = 0, free_bytes, total;
    uint64_t pitched_bytes;

    setup();
    MUST(cuMemAlloc_v2(&plain, 8 * MIB));
    MUST(cuMemAllocPitch_v2(&pitched, &pitch, 1000, 100, 4));
    MUST(cuMemAllocManaged(&managed, 4 * MIB, CU_MEM_ATTACH_GLOBAL));
    MUST(cuMemAllocAsync(&pooled, 2 * MIB, NULL));
    pitched_bytes = (uint64_t)pitch * 100;
    EXPECT(is_managed(plain) == want, "cuMemAlloc_v2: managed %d, want %d",
           is_managed(plain), want);
    EXPECT(is_managed(pitched) == want,
           "cuMemAllocPitch_v2: managed %d, want %d", is_managed(pitched), want);
    EXPECT(pitch == 1024, "cuMemAllocPitch_v2: pitch %zu, want 1024", pitch);
    EXPECT(is_managed(managed), "cuMemAllocManaged: not managed");
    EXPECT(!is_managed(pooled), "cuMemAllocAsync: managed");
    EXPECT(managed_bytes() == (want ? 8 * MIB + pitched_bytes : 0) + 4 * MIB,
           "libnvshare counts %llu managed bytes",
           (unsigned long long)managed_bytes());
    MUST(cuMemFree_v2(plain));
    MUST(cuMemFree_v2(pitched));
    MUST(cuMemFree_v2(managed));
    MUST(cuMemFreeAsync(pooled, NULL));
    EXPECT(managed_bytes() == 0, "%llu managed bytes left after the frees",
           (unsigned long long)managed_bytes());

    /* The quota, exactly as for device memory (the pool keeps 2 MiB). */
    quota -= 2 * MIB;
    EXPECT(cuMemAlloc_v2(&p, quota + 1) == CUDA_ERROR_OUT_OF_MEMORY,
           "quota + 1 byte not refused");
    MUST(cuMemAlloc_v2(&p, quota));
    EXPECT(is_managed(p) == want, "the whole quota: managed %d", is_managed(p));
    MUST(cuMemGetInfo_v2(&free_bytes, &total));
    EXPECT(free_bytes == 0, "quota used up, cuMemGetInfo says %zu free",
           free_bytes);
    EXPECT(cuMemAlloc_v2(&pitched, 1) == CUDA_ERROR_OUT_OF_MEMORY,
           "one byte over the quota not refused");
    EXPECT(cuMemAllocPitch_v2(&pitched, &pitch, 16, 1, 4) ==
               CUDA_ERROR_OUT_OF_MEMORY,
           "a pitched row over the quota not refused");
    MUST(cuMemFree_v2(p));
    /* The pitch is charged as returned: 1000-byte rows take 1024. */
    EXPECT(cuMemAllocPitch_v2(&p, &pitch, 1000, quota / 1000, 4) ==
               CUDA_ERROR_OUT_OF_MEMORY,
           "pitched allocation over the quota not refused");
    MUST(cuMemAllocPitch_v2(&p, &pitch, 1000, quota / 1024, 4));
    EXPECT(is_managed(p) == want, "pitched quota: managed %d", is_managed(p));
    MUST(cuMemFree_v2(p));
    MUST(cuMemGetInfo_v2(&free_bytes, &total));
    EXPECT(free_bytes == quota, "all freed, cuMemGetInfo says %zu free of %llu",
           free_bytes, (unsigned long long)quota);
    printf("converted=%llu\n", (unsigned long long)event("oversub-converted"));
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

/* The fake's transfer rate: the test sets FAKE_CUDA_SWAP_GBPS (prefetches)
 * and FAKE_CUDA_COPY_GBPS (copies) to the same value. */
static double gbps(void)
{
    const char *text = getenv("FAKE_CUDA_SWAP_GBPS");

    return text ? atof(text) : 10.0;
}

/* Bytes of the allocation at p whose content the fake has lost (discarded
 * and not copied back from a copy of its own), from the fake driver. */
static long long lost_bytes(CUdeviceptr p)
{
    long long (*fn)(CUdeviceptr) =
        (long long (*)(CUdeviceptr))dlsym(RTLD_DEFAULT, "fake_cuda_lost_bytes");

    if (fn == NULL) {
        printf("FAIL: the fake driver does not export fake_cuda_lost_bytes\n");
        exit(1);
    }
    return fn(p);
}

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

static volatile bool churning;

/* Allocates and frees managed memory while the main thread swaps. */
static void *churn(void *arg)
{
    CUcontext ctx = arg;
    long rounds = 0;

    MUST(cuCtxSetCurrent(ctx));
    while (churning) {
        CUdeviceptr p[4];

        for (int i = 0; i < 4; i++)
            MUST(cuMemAlloc_v2(&p[i], MIB));
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
    CUdeviceptr a, b, d, pooled;
    size_t pitch;
    uint64_t want, out, in, thread_bytes[2];
    double t0, out_ms, in_ms, min_ms;
    pthread_t thread;

    EXPECT(swap_out() == 0 && swap_in() == 0,
           "a swap with nothing managed moved something");
    MUST(cuMemAlloc_v2(&a, 16 * MIB)); /* converted */
    MUST(cuMemAllocManaged(&b, 8 * MIB, CU_MEM_ATTACH_GLOBAL));
    MUST(cuMemAllocPitch_v2(&d, &pitch, 4000, 256, 4)); /* converted */
    MUST(cuMemAllocAsync(&pooled, 3 * MIB, NULL));      /* stays put */
    prepare_swap(); /* as the scheduler does before any EVICT */
    wait_prepared();
    want = 16 * MIB + 8 * MIB + (uint64_t)pitch * 256;
    /* The moves run on several streams: at least the largest one. */
    min_ms = (double)(16 * MIB) / (gbps() * 1e6);

    t0 = now_ms();
    out = swap_out();
    out_ms = now_ms() - t0;
    EXPECT(out == want, "swap_out moved %llu bytes, want %llu",
           (unsigned long long)out, (unsigned long long)want);
    EXPECT(out_ms >= 0.9 * min_ms,
           "swap_out returned after %.1f ms, before its moves (%.1f ms)",
           out_ms, min_ms);
    EXPECT(lost_bytes(a) == (long long)(16 * MIB) &&
               lost_bytes(d) == (long long)(pitch * 256),
           "swap_out: converted memory not discarded (%lld, %lld lost)",
           lost_bytes(a), lost_bytes(d));
    EXPECT(prefetched_to(b, 8 * MIB) == CU_DEVICE_CPU,
           "swap_out: the application's managed memory not on the host");
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
    EXPECT(prefetched_to(a, 16 * MIB) == 0 && prefetched_to(b, 8 * MIB) == 0 &&
               prefetched_to(d, pitch * 256) == 0,
           "swap_in: not all on gpu 0");
    MUST(cuCtxGetCurrent(&current));
    EXPECT(current == ctx, "swap_in changed the current context");

    /* From a thread with no context, like the client's. */
    pthread_create(&thread, NULL, swap_from_thread, thread_bytes);
    pthread_join(thread, NULL);
    EXPECT(thread_bytes[0] == want && thread_bytes[1] == want,
           "from another thread: %llu out, %llu in",
           (unsigned long long)thread_bytes[0],
           (unsigned long long)thread_bytes[1]);

    /* A freed allocation is not moved; one freed while out is not
     * restored either. */
    MUST(cuMemFree_v2(b));
    out = swap_out();
    EXPECT(out == want - 8 * MIB, "after a free, swap_out moved %llu",
           (unsigned long long)out);
    MUST(cuMemFree_v2(d));
    in = swap_in();
    EXPECT(in == 16 * MIB && lost_bytes(a) == 0,
           "after a free while out, swap_in moved %llu (%lld lost)",
           (unsigned long long)in, lost_bytes(a));
    MUST(cuMemAllocPitch_v2(&d, &pitch, 4000, 256, 4));

    /* Concurrent allocations and frees on another thread. */
    churning = true;
    pthread_create(&thread, NULL, churn, ctx);
    for (int i = 0; i < 10; i++) {
        out = swap_out();
        in = swap_in();
        EXPECT(out >= want - 8 * MIB && out <= want - 8 * MIB + 4 * MIB &&
                   in >= want - 8 * MIB && in <= want - 8 * MIB + 4 * MIB,
               "swap %d during churn: %llu out, %llu in", i,
               (unsigned long long)out, (unsigned long long)in);
    }
    churning = false;
    pthread_join(thread, NULL);

    MUST(cuMemFree_v2(a));
    MUST(cuMemFree_v2(d));
    MUST(cuMemFreeAsync(pooled, NULL));
    EXPECT(swap_out() == 0, "a swap after every free moved something");
    printf("swap_bytes=%llu out_ms=%.1f in_ms=%.1f swap_outs=%llu "
           "swap_out_bytes=%llu\n",
           (unsigned long long)want, out_ms, in_ms,
           (unsigned long long)event("swap-outs"),
           (unsigned long long)event("swap-out-bytes"));
}

/* ---- prepare -------------------------------------------------------------- */


static void prepare(void)
{
    CUdeviceptr a, b, d, later, freed, raced;
    size_t pitch;
    uint64_t want, out;
    double t0, out_ms;

    setup();
    MUST(cuMemAlloc_v2(&a, 16 * MIB)); /* converted */
    MUST(cuMemAllocManaged(&b, 8 * MIB, CU_MEM_ATTACH_GLOBAL));
    MUST(cuMemAllocPitch_v2(&d, &pitch, 4000, 256, 4)); /* converted */
    EXPECT(event("swap-pinned-ahead") == 0,
           "pinned copies made before anyone asked");

    prepare_swap();
    prepare_swap(); /* idempotent */
    wait_prepared();
    EXPECT(event("swap-pinned-ahead") == 2,
           "%llu pinned copies made ahead, want 2 (the converted ones)",
           (unsigned long long)event("swap-pinned-ahead"));
    /* Asked once, this GPU prepares what comes later too. */
    MUST(cuMemAlloc_v2(&later, 8 * MIB));
    wait_prepared();
    EXPECT(event("swap-pinned-ahead") == 3,
           "an allocation after PREPARE_SWAP was not prepared (%llu ahead)",
           (unsigned long long)event("swap-pinned-ahead"));
    /* Freed while its copy may be in the making: the copy goes too. */
    MUST(cuMemAlloc_v2(&freed, 32 * MIB));
    MUST(cuMemFree_v2(freed));
    wait_prepared();
    uint64_t ahead = event("swap-pinned-ahead");

    want = 16 * MIB + 8 * MIB + (uint64_t)pitch * 256 + 8 * MIB;
    t0 = now_ms();
    out = swap_out();
    out_ms = now_ms() - t0;
    EXPECT(out == want, "swap_out moved %llu bytes, want %llu",
           (unsigned long long)out, (unsigned long long)want);
    uint64_t unpinned = event("swap-unpinned");
    EXPECT(unpinned == 0,
           "the prepared swap-out found %llu allocations without a copy",
           (unsigned long long)unpinned);
    EXPECT(lost_bytes(a) == (long long)(16 * MIB) &&
               lost_bytes(later) == (long long)(8 * MIB),
           "swap_out: converted memory not discarded");
    EXPECT(swap_in() == want, "swap_in did not bring everything back");
    EXPECT(lost_bytes(a) == 0 && lost_bytes(d) == 0 && lost_bytes(later) == 0,
           "prepared copies: data not restored intact (%lld, %lld, %lld lost)",
           lost_bytes(a), lost_bytes(d), lost_bytes(later));

    /* A swap-out while a copy is being made does not pin the same
     * allocation again: one copy per allocation. */
    MUST(cuMemAlloc_v2(&raced, 64 * MIB)); /* its copy starts now */
    out = swap_out();
    EXPECT(out == want + 64 * MIB, "swap_out during a preparation moved %llu",
           (unsigned long long)out);
    wait_prepared();
    EXPECT(event("swap-pinned-ahead") == ahead + 1, "64 MiB pinned %llu times",
           (unsigned long long)(event("swap-pinned-ahead") - ahead));
    EXPECT(swap_in() == want + 64 * MIB && lost_bytes(raced) == 0,
           "the allocation swapped out during its preparation lost data");

    MUST(cuMemFree_v2(a));
    MUST(cuMemFree_v2(b));
    MUST(cuMemFree_v2(d));
    MUST(cuMemFree_v2(later));
    MUST(cuMemFree_v2(raced));
    printf("pinned_ahead=%llu unpinned=%llu prepared_out_ms=%.1f\n",
           (unsigned long long)ahead, (unsigned long long)unpinned, out_ms);
}

static void prepare_behind(void)
{
    enum { N = 4 };
    CUdeviceptr p[N];

    setup();
    for (int i = 0; i < N; i++)
        MUST(cuMemAlloc_v2(&p[i], 64 * MIB));
    prepare_swap();
    EXPECT(swap_out() == N * 64 * MIB, "the swap-out behind the preparer "
                                       "did not move everything");
    EXPECT(event("swap-unpinned") >= 1,
           "the swap-out found every copy made (%llu unpinned)",
           (unsigned long long)event("swap-unpinned"));
    EXPECT(swap_in() == N * 64 * MIB, "swap_in did not bring everything back");
    for (int i = 0; i < N; i++)
        EXPECT(lost_bytes(p[i]) == 0, "allocation %d lost %lld bytes", i,
               lost_bytes(p[i]));

    uint64_t unpinned = event("swap-unpinned");
    wait_prepared();
    EXPECT(swap_out() == N * 64 * MIB && event("swap-unpinned") == unpinned,
           "the prepared swap-out did not copy everything");
    for (int i = 0; i < N; i++)
        EXPECT(lost_bytes(p[i]) == (long long)(64 * MIB),
               "allocation %d was not copied out and discarded", i);
    EXPECT(swap_in() == N * 64 * MIB, "swap_in did not bring everything back");
    for (int i = 0; i < N; i++) {
        EXPECT(lost_bytes(p[i]) == 0, "allocation %d lost %lld bytes", i,
               lost_bytes(p[i]));
        MUST(cuMemFree_v2(p[i]));
    }
    printf("unpinned=%llu\n", (unsigned long long)unpinned);
}

static void blank(void)
{
    CUdeviceptr p;

    setup();
    MUST(cuMemAlloc_v2(&p, 64 * MIB));
    EXPECT(swap_out() == 0, "a blank allocation was copied out");
    EXPECT(lost_bytes(p) == (long long)(64 * MIB),
           "its pages were not discarded");
    EXPECT(swap_in() == 0, "a blank allocation was copied in");
    EXPECT(event("swap-unpinned") == 0, "a blank allocation was prefetched");
    MUST(cuMemFree_v2(p));
}

/* Exits (returning from main) while the preparer pins 256 MiB. */
static void prepare_exit(void)
{
    CUdeviceptr p;

    setup();
    MUST(cuMemAlloc_v2(&p, 256 * MIB));
    prepare_swap();
}

/* A swap-out that meets a driver already shut down (the process exits)
 * moves nothing and warns about nothing: oversub.sh checks stderr. */
static void swap_at_exit(void)
{
    CUdeviceptr b;
    void (*deinitialize)(void) =
        (void (*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_deinitialize");

    setup();
    MUST(cuMemAllocManaged(&b, 8 * MIB, CU_MEM_ATTACH_GLOBAL));
    EXPECT(deinitialize != NULL, "the fake driver cannot shut down");
    if (deinitialize)
        deinitialize();
    EXPECT(swap_out() == 0,
           "a swap-out moved memory after the driver shut down");
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "convert") == 0)
        convert(atoi(argv[2]) != 0, strtoull(argv[3], NULL, 10));
    else if (argc == 4 && strcmp(argv[1], "beyond") == 0)
        beyond(strtoull(argv[2], NULL, 10), atoi(argv[3]) != 0);
    else if (argc == 2 && strcmp(argv[1], "swap") == 0)
        swap();
    else if (argc == 2 && strcmp(argv[1], "prepare") == 0)
        prepare();
    else if (argc == 2 && strcmp(argv[1], "prepare-behind") == 0)
        prepare_behind();
    else if (argc == 2 && strcmp(argv[1], "blank") == 0)
        blank();
    else if (argc == 2 && strcmp(argv[1], "prepare-exit") == 0)
        prepare_exit();
    else if (argc == 2 && strcmp(argv[1], "swap-at-exit") == 0)
        swap_at_exit();
    else {
        fprintf(stderr, "usage: oversub_test convert MANAGED QUOTA | "
                        "beyond BYTES OK | swap | prepare | prepare-behind | "
                        "blank | prepare-exit | swap-at-exit\n");
        return 2;
    }
    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
