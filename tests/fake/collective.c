/* collective.c - NCCL-like collective kernels coupled across processes.
 *
 * An NCCL collective kernel, once its stream reaches it, spins on the GPU
 * until every rank of the job has launched the matching collective: one
 * rank's stream (and whatever synchronizes with it, a preempting drain
 * included) waits for the slowest rank's launch. The fake reproduces that
 * so that the tests can show what gating one rank does to another.
 *
 * With FAKE_CUDA_COLLECTIVE naming a file and FAKE_CUDA_COLLECTIVE_RANKS=N
 * (N >= 2), a kernel with "ncclDevKernel_" in its name (NCCL's, mangled
 * or not) is a collective: the k-th
 * one a process launches (k from 1, per process, whatever its stream)
 * starts when its stream reaches it and every one of the N processes that
 * map the file has launched its k-th, at the latest of the times their
 * streams reached theirs; it then runs its duration ("_<N>us", as every
 * kernel). Until then its end is unknown (timeline.c). A rank that exited
 * (its pid is gone, or a zombie) counts as arrived, as NCCL would abort the
 * collective rather than hang: a test never waits on a dead peer. Without
 * the variables a collective is an ordinary kernel.
 *
 * The file has a slot per process that maps it (taken at cuInit, never
 * given back: a dead pid in a slot is a peer that left), written only by
 * its owner: its pid, how many collectives it launched and, for the last
 * COLL_RING of them, when its stream reached each. Nothing is locked
 * between processes. A job uses a fresh file: slots of an earlier run
 * would count as ranks that left. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fake.h"

#define COLL_MAX_PROCS 64
#define COLL_RING 256 /* a rank more than this far ahead: its time is lost */
/* Waits poll: first every 100 us (a step's peer usually arrives within a
 * kernel or two), backing off to every 2 ms (a peer held at its gate may
 * take a quantum or a drain timeout) so that waiting costs little CPU. */
#define COLL_PAUSE_MIN_NS 100000
#define COLL_PAUSE_MAX_NS 2000000
/* How often peers that have not arrived are checked for having exited. */
#define COLL_GONE_CHECK_NS 10000000

struct coll_file {
    struct {
        _Atomic int32_t pid;
        _Atomic uint64_t launched;
        _Atomic uint64_t ready_ns[COLL_RING]; /* [k % COLL_RING] */
    } procs[COLL_MAX_PROCS];
};

static struct coll_file *file;
static int slot = -1;
static int ranks;
/* Under fake_lock (fake_collective_end is called with it held). */
static bool left[COLL_MAX_PROCS];
static uint64_t gone_checked_ns;
static pthread_once_t coll_once = PTHREAD_ONCE_INIT;

static void map_file(void)
{
    const char *path = getenv("FAKE_CUDA_COLLECTIVE");
    const char *n = getenv("FAKE_CUDA_COLLECTIVE_RANKS");
    int32_t me = (int32_t)getpid();
    struct coll_file *map;
    int fd;

    if (path == NULL || n == NULL || (ranks = atoi(n)) < 2)
        return;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(*file)) != 0) {
        perror("fake libcuda: FAKE_CUDA_COLLECTIVE");
        if (fd >= 0)
            close(fd);
        return;
    }
    map = mmap(NULL, sizeof(*file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        perror("fake libcuda: FAKE_CUDA_COLLECTIVE");
        return;
    }
    for (int i = 0; i < COLL_MAX_PROCS; i++) {
        int32_t free_pid = 0;
        if (atomic_compare_exchange_strong(&map->procs[i].pid, &free_pid, me)) {
            slot = i;
            file = map;
            return;
        }
    }
    fprintf(stderr, "fake libcuda: FAKE_CUDA_COLLECTIVE: no free slot; "
                    "collectives are ordinary kernels\n");
    munmap(map, sizeof(*file));
}

bool fake_collective_enabled(void)
{
    pthread_once(&coll_once, map_file);
    return file != NULL;
}

uint64_t fake_collective_arrive(uint64_t ready_ns)
{
    uint64_t k = atomic_load(&file->procs[slot].launched) + 1;

    atomic_store_explicit(&file->procs[slot].ready_ns[k % COLL_RING], ready_ns,
                          memory_order_relaxed);
    atomic_store_explicit(&file->procs[slot].launched, k, memory_order_release);
    return k;
}

/* The process has exited: no such pid, or a zombie its parent has not
 * reaped yet (kill(2) still finds those). */
bool fake_pid_gone(int32_t pid)
{
    char path[64], buf[512];
    const char *state;
    ssize_t len;
    int fd;

    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return errno == ENOENT;
    len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
        return false;
    buf[len] = '\0';
    state = strrchr(buf, ')'); /* the command name may hold anything */
    return state && (state[1] == ' ') && (state[2] == 'Z' || state[2] == 'X');
}

bool fake_collective_end(const struct fake_coll *c, uint64_t *end)
{
    uint64_t start = c->ready_ns, now = fake_now_ns();
    int arrived = 0, departed = 0;
    bool check_gone = now - gone_checked_ns >= COLL_GONE_CHECK_NS;

    for (int i = 0; i < COLL_MAX_PROCS; i++) {
        int32_t pid = atomic_load(&file->procs[i].pid);
        if (pid == 0)
            break; /* slots are taken in order */
        uint64_t n =
            atomic_load_explicit(&file->procs[i].launched, memory_order_acquire);
        if (n >= c->seq) {
            arrived++;
            if (n - c->seq < COLL_RING) {
                uint64_t t =
                    atomic_load_explicit(&file->procs[i].ready_ns[c->seq % COLL_RING],
                                         memory_order_relaxed);
                if (t > start)
                    start = t;
            }
        } else {
            if (!left[i] && check_gone)
                left[i] = fake_pid_gone(pid);
            departed += left[i];
        }
    }
    if (check_gone)
        gone_checked_ns = now;
    if (arrived + departed < ranks)
        return false;
    *end = start + c->duration_ns;
    return true;
}

void fake_collective_pause(unsigned *round)
{
    long ns = COLL_PAUSE_MIN_NS << (*round < 5 ? *round : 5);
    struct timespec ts = {0, ns < COLL_PAUSE_MAX_NS ? ns : COLL_PAUSE_MAX_NS};

    ++*round;
    nanosleep(&ts, NULL);
}
