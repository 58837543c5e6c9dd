/* ledger.c - the allocation map: what libnvshare charged for each live
 * allocation, keyed by its output (pointer or handle), and which of them
 * are evictable (the application's cuMemAllocManaged, and device
 * allocations made by vmm.c while memory is swappable: "converted"), with
 * the context they were made in, so that swap.c can move them off the GPU
 * and back. The bottom of the memory side: claims (allocations.c), the
 * swappable kinds (vmm*.c) and swaps read and write it; it calls none of
 * them. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "nvshare_memory.h"

/* ---- the allocation map: (kind, pointer or handle) -> (gpu, bytes) ---- */

#define MAP_BUCKETS 4096 /* chains stay short up to ~10^5 live allocations */

struct mem_entry {
    uint64_t key;
    enum mem_kind kind;
    struct mem_record rec;
    struct mem_entry *next;
};

static struct mem_entry *buckets[MAP_BUCKETS];
static uint64_t managed_bytes[NVSHARE_MAX_GPUS]; /* under map_lock */
/* Evictable bytes outside the map (mem_evictable_extra), and of those the
 * ones not on the GPU yet (pending). */
static uint64_t extra_bytes[NVSHARE_MAX_GPUS];   /* under map_lock */
static uint64_t pending_bytes[NVSHARE_MAX_GPUS]; /* under map_lock */
/* Of the managed bytes, those not on the GPU after a swap: converted
 * allocations swapped out (mem_slot_out), and the application's own memory
 * (mem_app_out). The scheduler hears them as pending too: one that meets
 * this process anew (it restarted while the memory was out) must not count
 * them as on the GPU, or it would have a running job wait for room that
 * is there. */
static uint64_t out_bytes[NVSHARE_MAX_GPUS];     /* under map_lock */
static uint64_t app_out_bytes[NVSHARE_MAX_GPUS]; /* under map_lock */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

static struct mem_entry **bucket_of(enum mem_kind kind, uint64_t key)
{
    uint64_t h = (key ^ ((uint64_t)kind << 56)) * 0x9e3779b97f4a7c15ull;

    return &buckets[h >> 52]; /* top 12 bits: MAP_BUCKETS = 4096 */
}
_Static_assert(MAP_BUCKETS == 1 << 12, "bucket_of takes 12 bits");

static bool counts_managed(const struct mem_record *rec)
{
    return rec->managed && rec->gpu >= 0 && rec->gpu < NVSHARE_MAX_GPUS;
}

/* The scheduler counts what is not managed as resident while this process
 * is swapped out: tell the ledger in the same order as the map changes.
 * Map lock held. */
static void managed_changed(int gpu)
{
    nvshare_mem_set_evictable(gpu, managed_bytes[gpu] + extra_bytes[gpu],
                              pending_bytes[gpu] + out_bytes[gpu] +
                                  app_out_bytes[gpu]);
}

/* A record leaves the managed bytes, or joins them again. Map lock held. */
static void managed_add(const struct mem_record *rec, bool add)
{
    uint64_t out = rec->swap.out ? rec->bytes : 0;

    if (add) {
        managed_bytes[rec->gpu] += rec->bytes;
        out_bytes[rec->gpu] += out;
    } else {
        managed_bytes[rec->gpu] -= rec->bytes;
        out_bytes[rec->gpu] -= out;
    }
    managed_changed(rec->gpu);
}

void mem_slot_out(int gpu, uint64_t bytes, struct mem_swap_slot *slot, bool out)
{
    if (slot->out == out)
        return;
    slot->out = out;
    if (out)
        out_bytes[gpu] += bytes;
    else
        out_bytes[gpu] -= bytes;
    managed_changed(gpu);
}

void mem_app_out(int gpu, uint64_t bytes)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&map_lock);
    app_out_bytes[gpu] = bytes;
    managed_changed(gpu);
    pthread_mutex_unlock(&map_lock);
}

void mem_evictable_extra(int gpu, uint64_t bytes, bool add, bool pending)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&map_lock);
    if (add)
        extra_bytes[gpu] += bytes;
    else
        extra_bytes[gpu] -= bytes;
    if (pending && add)
        pending_bytes[gpu] += bytes;
    else if (pending)
        pending_bytes[gpu] -= bytes;
    managed_changed(gpu);
    pthread_mutex_unlock(&map_lock);
}

bool mem_map_put(enum mem_kind kind, uint64_t key, const struct mem_record *rec)
{
    struct mem_entry *e = malloc(sizeof(*e)), **head;

    if (e == NULL)
        return false;
    pthread_mutex_lock(&map_lock);
    head = bucket_of(kind, key);
    *e = (struct mem_entry){key, kind, *rec, *head};
    *head = e;
    if (counts_managed(rec))
        managed_add(rec, true);
    pthread_mutex_unlock(&map_lock);
    return true;
}

bool mem_map_take(enum mem_kind kind, uint64_t key, struct mem_record *rec)
{
    struct mem_entry **link, *found = NULL;

    pthread_mutex_lock(&map_lock);
    for (link = bucket_of(kind, key); *link; link = &(*link)->next)
        if ((*link)->key == key && (*link)->kind == kind) {
            found = *link;
            *link = found->next;
            if (counts_managed(&found->rec))
                managed_add(&found->rec, false);
            break;
        }
    pthread_mutex_unlock(&map_lock);
    if (found == NULL)
        return false;
    *rec = found->rec;
    free(found);
    return true;
}

uint64_t mem_managed_bytes(int gpu)
{
    uint64_t bytes;

    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return 0;
    pthread_mutex_lock(&map_lock);
    bytes = managed_bytes[gpu];
    pthread_mutex_unlock(&map_lock);
    return bytes;
}

void mem_for_each_managed(int gpu, CUcontext ctx,
                          void (*fn)(CUdeviceptr ptr, uint64_t bytes,
                                     struct mem_swap_slot *slot, void *arg),
                          void (*done)(void *arg), void *arg)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&map_lock);
    for (int b = 0; b < MAP_BUCKETS && managed_bytes[gpu] > 0; b++)
        for (struct mem_entry *e = buckets[b]; e; e = e->next)
            if (e->kind == MEM_DEVPTR && e->rec.managed && e->rec.gpu == gpu &&
                e->rec.ctx == ctx)
                fn((CUdeviceptr)e->key, e->rec.bytes, &e->rec.swap, arg);
    done(arg);
    pthread_mutex_unlock(&map_lock);
}

void mem_for_each_managed_on_gpu(int gpu,
                                 void (*fn)(CUdeviceptr ptr, uint64_t bytes,
                                            CUcontext ctx,
                                            struct mem_swap_slot *slot, void *arg),
                                 void *arg)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return;
    pthread_mutex_lock(&map_lock);
    for (int b = 0; b < MAP_BUCKETS && managed_bytes[gpu] > 0; b++)
        for (struct mem_entry *e = buckets[b]; e; e = e->next)
            if (e->kind == MEM_DEVPTR && e->rec.managed && e->rec.gpu == gpu)
                fn((CUdeviceptr)e->key, e->rec.bytes, e->rec.ctx, &e->rec.swap,
                   arg);
    pthread_mutex_unlock(&map_lock);
}

bool mem_with_managed(int gpu, CUdeviceptr ptr, uint64_t bytes,
                      bool (*fn)(CUcontext ctx, struct mem_swap_slot *slot,
                                 void *arg),
                      void *arg)
{
    bool result = false;

    pthread_mutex_lock(&map_lock);
    for (struct mem_entry *e = *bucket_of(MEM_DEVPTR, ptr); e; e = e->next)
        if (e->key == ptr && e->kind == MEM_DEVPTR) {
            if (e->rec.managed && e->rec.gpu == gpu && e->rec.bytes == bytes)
                result = fn(e->rec.ctx, &e->rec.swap, arg);
            break;
        }
    pthread_mutex_unlock(&map_lock);
    return result;
}

bool mem_is_converted(CUdeviceptr ptr)
{
    bool converted = false;

    pthread_mutex_lock(&map_lock);
    for (struct mem_entry *e = *bucket_of(MEM_DEVPTR, ptr); e; e = e->next)
        if (e->key == ptr && e->kind == MEM_DEVPTR) {
            converted = e->rec.swap.converted;
            break;
        }
    pthread_mutex_unlock(&map_lock);
    return converted;
}

void mem_set_evictable(enum mem_kind kind, uint64_t key, bool evictable)
{
    pthread_mutex_lock(&map_lock);
    for (struct mem_entry *e = *bucket_of(kind, key); e; e = e->next)
        if (e->key == key && e->kind == kind) {
            if (e->rec.managed != evictable && e->rec.gpu >= 0 &&
                e->rec.gpu < NVSHARE_MAX_GPUS) {
                e->rec.managed = evictable;
                managed_add(&e->rec, evictable);
            }
            break;
        }
    pthread_mutex_unlock(&map_lock);
}

/* A forked child does not own its parent's allocations: forget them
 * without giving anything back (the parent still holds them). The nodes
 * are leaked on purpose: the lock may have been held mid-update. */
static void forget_allocations_in_child(void)
{
    pthread_mutex_init(&map_lock, NULL);
    memset(buckets, 0, sizeof(buckets));
    memset(managed_bytes, 0, sizeof(managed_bytes));
    memset(extra_bytes, 0, sizeof(extra_bytes));
    memset(pending_bytes, 0, sizeof(pending_bytes));
    memset(out_bytes, 0, sizeof(out_bytes));
    memset(app_out_bytes, 0, sizeof(app_out_bytes));
}

__attribute__((constructor)) static void register_memory_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_allocations_in_child);
}
