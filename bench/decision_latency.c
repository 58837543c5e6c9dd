/* decision_latency.c - how long one scheduling decision takes.
 *
 *   decision_latency [GPUS] [CLIENTS_PER_GPU] [EVENTS]
 *
 * Drives the pure policy (the same code the daemon runs) with a random
 * stream of the events the daemon feeds it - lock requests, releases,
 * load reports, footprint changes, swaps, ticks - on GPUS GPUs of 80 GiB in
 * auto mode with CLIENTS_PER_GPU clients each, and times every call.
 * Prints the median, p99 and maximum per call against the target (50 us
 * with 64 clients per GPU). Socket I/O is not included: this is the
 * decision, not the round trip. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "policy.h"

#define GiB (1ull << 30)
#define MS 1000000ull

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static struct policy *p;
static struct policy_actions out;

/* GPUS GPUs of 80 GiB with CLIENTS_PER_GPU clients each, of 1-4 GiB, one in
 * three of them heavy. */
static bool setup(int gpus, int per_gpu)
{
    policy_init(p, gpus, 100 * MS, 10000 * MS);
    if (!policy_grow(p, gpus * per_gpu))
        return false;
    policy_set_switch_time(p, 1000 * MS, 0);
    for (int g = 0; g < gpus; g++) {
        policy_set_capacity(p, g, 80 * GiB);
        for (int i = 0; i < per_gpu; i++) {
            int c = g * per_gpu + i;
            /* Each a job of its own, as the daemon numbers a process
             * alone: the gang census runs, no gang spans GPUs. */
            policy_set_gang(p, c, c);
            policy_join(p, g, c, c, 0);
            uint64_t bytes = (1 + (uint64_t)(c % 4)) * GiB;
            policy_set_footprint(p, g, c, bytes, bytes, bytes);
            policy_set_load(p, g, c, c % 3 ? 200 : 900);
        }
    }
    return true;
}

/* One event of the given kind for client c of gpu g; m: its state before. */
static void feed(int kind, int g, int c, const struct policy_member_view *m,
                 uint64_t now, unsigned *seed)
{
    switch (kind) {
    case 0:
    case 1:
    case 2:
        policy_request(p, g, c, now, &out);
        break;
    case 3:
        policy_release(p, g, c, m->lease, 100000, 0, now, &out);
        break;
    case 4:
        policy_set_load(p, g, c, (unsigned)(rand_r(seed) % 1000));
        break;
    case 5: {
        uint64_t bytes = (1 + (uint64_t)(rand_r(seed) % 8)) * GiB;
        policy_set_footprint(p, g, c, bytes, bytes, bytes);
        break;
    }
    case 6:
        if (m->evicting)
            policy_swapped(p, g, c, SWAP_OUT, m->footprint, 100 * MS, now, &out);
        break;
    default:
        policy_tick(p, now, &out);
        break;
    }
}

int main(int argc, char **argv)
{
    int gpus = argc > 1 ? atoi(argv[1]) : 1;
    int per_gpu = argc > 2 ? atoi(argv[2]) : 64;
    int events = argc > 3 ? atoi(argv[3]) : 200000;
    uint64_t *lat = malloc(sizeof(uint64_t) * (size_t)events);
    unsigned seed = 42;
    uint64_t now = 0;

    p = calloc(1, policy_size());
    if (!lat || !p || gpus < 1 || gpus > POLICY_MAX_GPUS || per_gpu < 1) {
        fprintf(stderr, "usage: %s [GPUS 1-%d] [CLIENTS_PER_GPU] [EVENTS]\n",
                argv[0], POLICY_MAX_GPUS);
        return 2;
    }
    if (!setup(gpus, per_gpu)) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int e = 0; e < events; e++) {
        int c = rand_r(&seed) % (gpus * per_gpu), g = c / per_gpu;
        int kind = rand_r(&seed) % 8;
        struct policy_member_view m;

        policy_view_member(p, g, c, now, &m); /* every client is a member */
        now += (uint64_t)(rand_r(&seed) % 200) * 1000; /* up to 200 us apart */
        policy_actions_clear(&out);
        uint64_t start = mono_ns();
        feed(kind, g, c, &m, now, &seed);
        lat[e] = mono_ns() - start;
    }
    qsort(lat, (size_t)events, sizeof(lat[0]), cmp_u64);
    double p50 = (double)lat[events / 2] / 1e3,
           p99 = (double)lat[events * 99 / 100] / 1e3;
    double max = (double)lat[events - 1] / 1e3;
    printf("gpus=%d clients_per_gpu=%d events=%d p50_us=%.2f p99_us=%.2f "
           "max_us=%.2f "
           "target_us=50 %s\n",
           gpus, per_gpu, events, p50, p99, max, p99 < 50 ? "ok" : "OVER");
    free(lat);
    policy_destroy(p);
    free(p);
    return 0;
}
