/* sim_workload.c - a test application built on the client runtime. It
 * "computes" by sleeping inside a submission, one work unit at a time, and
 * reports what it got.
 *
 *   sim_workload GPU-UUID[,GPU-UUID] UNTIL_REALTIME_NS [UNIT_US] [TRACE]
 *                [MEASURE_FROM_REALTIME_NS]
 *
 * Runs from now until UNTIL (CLOCK_REALTIME, so that a test can give all its
 * workloads the same end), submitting units of UNIT_US microseconds
 * (default 1000) on each listed GPU in turn. Prints one line:
 *
 *   units=<n> held_ms=<total time inside submissions> grants=<n>
 *   first_unit_ns=<CLOCK_REALTIME of the first unit's start>
 *
 * With TRACE, appends "<gpu uuid> <start_ns> <end_ns>" (CLOCK_REALTIME) per
 * unit to that file so a test can check that holders never overlap.
 *
 * With MEASURE_FROM, also reports measured_ms: the time inside submissions
 * between MEASURE_FROM and UNTIL. Over a whole number of compute-limit
 * windows this is phase-independent: a limited job's budget lands in the
 * measurement whether it is spent at the start or the end of a window.
 *
 * SIM_LINGER_MS=<n> keeps the process connected and idle for n ms after
 * its last unit (to test that an idle holder gives the GPU back).
 *
 * Memory-aware scheduling: SIM_MEMORY_MB=<n> allocates n MiB on the first
 * GPU before the first unit; with NVSHARE_ENABLE_OVERSUB=1 that memory is
 * evictable, and a swap "moves" it by sleeping SIM_SWAP_MS (default 50)
 * and appends "swap_out|swap_in <start_ns> <end_ns>" to TRACE.
 * SIM_SWAP_IN_SHORT=<n>: the first n swap-ins find no room and leave the
 * memory out (traced as swap_in_short).
 * SIM_DRAIN_MS=<n> makes every drain take n ms (a long drain, which the
 * client announces with DRAINING).
 * SIM_BUSY_PERMILLE=<n> reports each unit as n/1000 busy (how busy the
 * process keeps the GPU, for auto mode). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvshare_client.h"
#include "nvshare_memory.h"

static uint64_t realtime_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t drain_ns;

/* The sleep inside a submission is synchronous "GPU work": by the time a
 * submission returns its work is done, so there is nothing left to drain,
 * unless SIM_DRAIN_MS says to take that long. */
static void drain(int gpu, void *user)
{
    struct timespec t = {.tv_sec = (time_t)(drain_ns / 1000000000ull),
                         .tv_nsec = (long)(drain_ns % 1000000000ull)};

    (void)gpu;
    (void)user;
    while (drain_ns && nanosleep(&t, &t))
        ;
}

static FILE *trace;
static uint64_t memory_bytes, swap_ns = 50000000;
static unsigned long short_swap_ins;

static uint64_t swap(const char *what)
{
    uint64_t start = realtime_ns();
    struct timespec t = {.tv_sec = (time_t)(swap_ns / 1000000000ull),
                         .tv_nsec = (long)(swap_ns % 1000000000ull)};

    while (nanosleep(&t, &t))
        ;
    if (trace) {
        fprintf(trace, "%s %llu %llu\n", what, (unsigned long long)start,
                (unsigned long long)realtime_ns());
        fflush(trace);
    }
    return memory_bytes;
}

static uint64_t swap_out(int gpu, void *user)
{
    (void)gpu;
    (void)user;
    return swap("swap_out");
}

static bool swap_in(int gpu, void *user, uint64_t *bytes)
{
    (void)gpu;
    (void)user;
    if (short_swap_ins > 0) {
        short_swap_ins--;
        swap("swap_in_short");
        *bytes = 0;
        return false;
    }
    *bytes = swap("swap_in");
    return true;
}

static bool completed(int gpu, void *user)
{
    (void)gpu;
    (void)user;
    return true;
}

int main(int argc, char **argv)
{
    const char *uuids[NVSHARE_MAX_GPUS];
    char *list;
    int n_gpus = 0;
    uint64_t until, unit_ns = 1000000, units = 0, held = 0, first = 0;
    uint64_t measure_from = 0, measured = 0;
    const char *memory_mb = getenv("SIM_MEMORY_MB"),
               *swap_ms = getenv("SIM_SWAP_MS");
    const char *busy = getenv("SIM_BUSY_PERMILLE");
    const char *drain_ms = getenv("SIM_DRAIN_MS");
    const char *short_env = getenv("SIM_SWAP_IN_SHORT");
    uint64_t busy_permille = busy ? strtoull(busy, NULL, 10) : 0;

    if (drain_ms)
        drain_ns = strtoull(drain_ms, NULL, 10) * 1000000ull;
    if (short_env)
        short_swap_ins = strtoul(short_env, NULL, 10);
    if (argc < 3) {
        fprintf(stderr,
                "usage: %s GPU[,GPU] UNTIL_REALTIME_NS [UNIT_US] [TRACE]\n",
                argv[0]);
        return 2;
    }
    list = strdup(argv[1]);
    for (char *save = NULL, *u = strtok_r(list, ",", &save);
         u && n_gpus < NVSHARE_MAX_GPUS; u = strtok_r(NULL, ",", &save))
        uuids[n_gpus++] = u;
    until = strtoull(argv[2], NULL, 10);
    if (argc > 3)
        unit_ns = strtoull(argv[3], NULL, 10) * 1000;
    if (argc > 5)
        measure_from = strtoull(argv[5], NULL, 10);
    if (argc > 4 && strcmp(argv[4], "-") && !(trace = fopen(argv[4], "a"))) {
        perror(argv[4]);
        return 1;
    }

    struct nvshare_client_config config = {
        .gpu_uuids = uuids,
        .n_gpus = n_gpus,
        .ops = {.drain = drain,
                .completed = completed,
                .swap_out = swap_out,
                .swap_in = swap_in},
    };
    if (swap_ms)
        swap_ns = strtoull(swap_ms, NULL, 10) * 1000000;
    if (nvshare_client_start(&config))
        return 1;
    if (memory_mb) {
        memory_bytes = strtoull(memory_mb, NULL, 10) << 20;
        if (nvshare_mem_reserve(0, memory_bytes)) {
            fprintf(stderr, "sim_workload: %s MiB refused\n", memory_mb);
            return 1;
        }
        /* Oversubscribed, it is all managed memory, as libnvshare's
         * converted allocations would be. */
        if (nvshare_oversub_enabled())
            nvshare_mem_set_evictable(0, memory_bytes, 0);
    }

    for (int gpu = 0;; gpu = (gpu + 1) % n_gpus) {
        nvshare_submit_begin(gpu);
        uint64_t start = realtime_ns();
        if (start >= until) {
            nvshare_submit_end();
            break;
        }
        struct timespec unit = {.tv_sec = 0, .tv_nsec = (long)unit_ns};
        while (nanosleep(&unit, &unit))
            ;
        uint64_t end = realtime_ns();
        nvshare_submit_end();
        if (busy)
            nvshare_note_busy(gpu, (end - start) * busy_permille / 1000,
                              end - start);
        if (!first)
            first = start;
        units++;
        held += end - start;
        if (measure_from && end > measure_from)
            measured += end - (start > measure_from ? start : measure_from);
        if (trace)
            fprintf(trace, "%s %llu %llu\n", uuids[gpu],
                    (unsigned long long)start, (unsigned long long)end);
        if (trace && memory_bytes)
            fflush(trace); /* swap lines are written on another thread */
    }
    uint64_t grants = 0;
    for (int gpu = 0; gpu < n_gpus; gpu++)
        grants += nvshare_lock_grants(gpu);
    const char *linger = getenv("SIM_LINGER_MS");
    if (linger)
        usleep((useconds_t)atoi(linger) * 1000);
    nvshare_client_stop();
    if (trace)
        fclose(trace);
    printf("units=%llu held_ms=%.1f grants=%llu first_unit_ns=%llu "
           "measured_ms=%.1f\n",
           (unsigned long long)units, (double)held / 1e6,
           (unsigned long long)grants, (unsigned long long)first,
           (double)measured / 1e6);
    free(list);
    return 0;
}
