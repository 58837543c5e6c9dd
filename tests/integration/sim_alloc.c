/* sim_alloc.c - a test application that allocates "device memory" through
 * the client runtime's ledger, as libnvshare does for every allocation.
 *
 *   sim_alloc GPU race N MiB TRACE [START_REALTIME_NS]
 *                                    from START on (so that racers really
 *                                    race), N times: reserve MiB, and if
 *                                    granted hold it for 1 ms, append
 *                                    "<start_ns> <end_ns>" of the holding
 *                                    to TRACE, then release it. Prints
 *                                    granted=<n> refused=<n> waited=<n>
 *                                    (grants that took over 1 ms: the
 *                                    scheduler held them until the other
 *                                    racer gave memory back).
 *   sim_alloc GPU hold MiB SECONDS   reserve MiB, print "held", sleep.
 *   sim_alloc GPU try MiB...         reserve each size in turn, printing
 *                                    ok or refused; keep what was granted.
 *
 * Identity and limits come from the environment (NVSHARE_POD_NAME,
 * NVSHARE_GPU_MEMORY_LIMIT, ...), as for a real application. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvshare_client.h"
#include "nvshare_memory.h"

#define MiB (1ull << 20)

static void drain(int gpu, void *user)
{
    (void)gpu;
    (void)user;
}

static unsigned long long monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull +
           (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *uuids[1];

    if (argc < 4) {
        fprintf(stderr, "usage: %s GPU race|hold|try ...\n", argv[0]);
        return 2;
    }
    uuids[0] = argv[1];
    struct nvshare_client_config config = {.gpu_uuids = uuids,
                                           .n_gpus = 1,
                                           .ops = {.drain = drain}};
    /* No waiting for the scheduler here: like an application, the first
     * reservation may come while the client is still connecting. */
    if (nvshare_client_start(&config))
        return 1;

    if (!strcmp(argv[2], "race") && (argc == 6 || argc == 7)) {
        long n = atol(argv[3]);
        uint64_t bytes = strtoull(argv[4], NULL, 10) * MiB;
        FILE *trace = fopen(argv[5], "w");
        long granted = 0, refused = 0, waited = 0;
        if (!trace)
            return 1;
        if (argc == 7) {
            struct timespec at = {.tv_sec = (time_t)(strtoull(argv[6], NULL, 10) /
                                                     1000000000ull),
                                  .tv_nsec = (long)(strtoull(argv[6], NULL, 10) %
                                                    1000000000ull)};
            while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL))
                ;
        }
        for (long i = 0; i < n; i++) {
            unsigned long long asked = monotonic_ns();
            if (nvshare_mem_reserve(0, bytes)) {
                refused++;
                continue;
            }
            unsigned long long start = monotonic_ns();
            waited += start - asked > 1000000ull;
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
            unsigned long long end = monotonic_ns();
            nvshare_mem_release(0, bytes);
            fprintf(trace, "%llu %llu\n", start, end);
            granted++;
        }
        fclose(trace);
        printf("granted=%ld refused=%ld waited=%ld\n", granted, refused, waited);
    } else if (!strcmp(argv[2], "hold") && argc == 5) {
        if (nvshare_mem_reserve(0, strtoull(argv[3], NULL, 10) * MiB))
            return 1;
        printf("held\n");
        fflush(stdout);
        sleep((unsigned)atoi(argv[4]));
    } else if (!strcmp(argv[2], "try")) {
        for (int i = 3; i < argc; i++)
            printf("%s%s",
                   nvshare_mem_reserve(0, strtoull(argv[i], NULL, 10) * MiB)
                       ? "refused"
                       : "ok",
                   i + 1 < argc ? " " : "\n");
    } else {
        fprintf(stderr, "%s: bad command\n", argv[0]);
        return 2;
    }
    nvshare_client_stop();
    return 0;
}
