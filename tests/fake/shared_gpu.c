/* shared_gpu.c - one fake GPU shared by the processes of a test.
 *
 * With FAKE_CUDA_SHARED_GPU naming a file, the processes that name it map
 * it (struct fake_shared_gpu): the device's "busy until", which timeline.c
 * queues every process's work behind, and a slot per process with a
 * context or device memory, which the fake NVML lists as a real one lists
 * the processes on a GPU. Device memory is then the node's, not each
 * process's: a take that would bring a device's sum over all processes
 * past FAKE_CUDA_MEM_MB fails, and cuMemGetInfo shows what the others
 * hold, as on a real GPU. So a test sees that the memory one process swaps
 * out is memory another one can get, and that two cannot hold more than
 * the device has.
 *
 * Nothing is locked between processes. A device's sum (used[dev]) is what
 * the limit is checked against, grown by compare-and-swap; a slot's counts
 * are written by its owner only, except when it is reaped. A process gives
 * its memory back at exit, as its driver would. A killed one leaves its
 * slot and its memory behind until another process reaps it: whoever would
 * be refused memory, reads how much is free or needs a slot first gives
 * back what dead pids held. A reaper marks the slot -1 while it subtracts,
 * so that only one of them does. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake.h"

static struct fake_shared_gpu *shared; /* NULL: a device of our own */
static pthread_once_t shared_once = PTHREAD_ONCE_INIT;
static int shared_slot = -1;
/* Its own: contexts are made and memory taken with fake_lock held. */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;

#define REAPING (-1)

static void map_shared_gpu(void)
{
    const char *path = getenv("FAKE_CUDA_SHARED_GPU");
    int fd;

    if (path == NULL)
        return;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(*shared)) != 0) {
        perror("fake libcuda: FAKE_CUDA_SHARED_GPU");
    } else {
        void *map = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
                         MAP_SHARED, fd, 0);
        if (map == MAP_FAILED)
            perror("fake libcuda: FAKE_CUDA_SHARED_GPU");
        else
            shared = map;
    }
    if (fd >= 0)
        close(fd);
}

struct fake_shared_gpu *fake_shared_gpu_map(void)
{
    pthread_once(&shared_once, map_shared_gpu);
    return shared;
}

/* Gives back what slot i held while it was pid's and frees it, unless
 * another process got there first. */
static void reap(int i, int32_t pid)
{
    if (!atomic_compare_exchange_strong(&shared->procs[i].pid, &pid, REAPING))
        return;
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        atomic_fetch_sub(&shared->used[d],
                         atomic_exchange(&shared->procs[i].used_on[d], 0));
    atomic_store(&shared->procs[i].used, 0);
    atomic_store(&shared->procs[i].devices, 0);
    atomic_store(&shared->procs[i].pid, 0);
}

static void reap_dead(void)
{
    for (int i = 0; i < FAKE_SHARED_MAX_PROCS; i++) {
        int32_t pid = atomic_load(&shared->procs[i].pid);
        if (pid > 0 && fake_pid_gone(pid))
            reap(i, pid);
    }
}

static void leave_shared_gpu(void)
{
    pthread_mutex_lock(&slot_lock);
    if (shared_slot >= 0)
        reap(shared_slot, (int32_t)getpid());
    shared_slot = -1;
    pthread_mutex_unlock(&slot_lock);
}

/* This process's slot, taken on first use; -1 if all are taken. */
static int slot(void)
{
    int32_t me = (int32_t)getpid();

    pthread_mutex_lock(&slot_lock);
    if (shared_slot < 0)
        reap_dead();
    for (int i = 0; i < FAKE_SHARED_MAX_PROCS && shared_slot < 0; i++) {
        int32_t was = 0;
        if (atomic_compare_exchange_strong(&shared->procs[i].pid, &was, me)) {
            shared_slot = i;
            atexit(leave_shared_gpu);
        }
    }
    pthread_mutex_unlock(&slot_lock);
    return shared_slot;
}

void fake_shared_gpu_join(int dev)
{
    int i;

    if (fake_shared_gpu_map() != NULL && (i = slot()) >= 0)
        atomic_fetch_or(&shared->procs[i].devices, 1u << dev);
}

bool fake_shared_gpu_take(int dev, uint64_t bytes)
{
    uint64_t total = fake_memory_total(dev), was;
    bool reaped = false;
    int i;

    if (fake_shared_gpu_map() == NULL)
        return true;
    was = atomic_load(&shared->used[dev]);
    for (;;) {
        if (was + bytes <= total) {
            if (atomic_compare_exchange_weak(&shared->used[dev], &was,
                                             was + bytes))
                break;
        } else if (reaped) {
            return false;
        } else {
            reap_dead();
            reaped = true;
            was = atomic_load(&shared->used[dev]);
        }
    }
    /* Counted in the sum first: if this process dies in between, the sum
     * keeps bytes nobody holds rather than going below what others hold.
     * Without a slot (all taken) nobody could give them back: refused. */
    if ((i = slot()) < 0) {
        atomic_fetch_sub(&shared->used[dev], bytes);
        return false;
    }
    atomic_fetch_add(&shared->procs[i].used_on[dev], bytes);
    atomic_fetch_add(&shared->procs[i].used, bytes);
    return true;
}

void fake_shared_gpu_give(int dev, uint64_t bytes)
{
    int i;

    if (fake_shared_gpu_map() == NULL)
        return;
    pthread_mutex_lock(&slot_lock);
    i = shared_slot;
    pthread_mutex_unlock(&slot_lock);
    if (i < 0)
        return; /* left at exit: all it held went back then */
    atomic_fetch_sub(&shared->procs[i].used_on[dev], bytes);
    atomic_fetch_sub(&shared->procs[i].used, bytes);
    atomic_fetch_sub(&shared->used[dev], bytes);
}

bool fake_shared_gpu_used(int dev, uint64_t *used)
{
    if (fake_shared_gpu_map() == NULL)
        return false;
    reap_dead();
    *used = atomic_load(&shared->used[dev]);
    return true;
}
