/* gpm_busy.c - the GPU's busy time from its own counters, for benchmarks.
 *
 *   gpm_busy FILE [GPU] [PERIOD_MS]      (until killed; GPU 0, 200 ms)
 *
 * Appends one "gpm END_US PERCENT" line per period to FILE: the percent of
 * the period (since the line before) in which the GPU's compute engine was
 * active, from NVML's GPU performance monitoring (GPM) counters
 * (NVML_GPM_METRIC_GRAPHICS_UTIL; Hopper and later). END_US is
 * CLOCK_REALTIME in microseconds, as bench/gpu_busy.py reads it.
 *
 * Why beside gpu_busy.py's utilization samples: those are whole percents,
 * truncated. A GPU busy 99.9 % of a sample reads 99 (taken as 99.5), and
 * every share of a job measured against that job alone is divided by it:
 * a share of 90 % would read 0.36 point high. A counter ratio has no such
 * step. Exits with 2 where the GPU has no GPM, so that a benchmark can
 * fall back to the samples.
 *
 * The period is a pace slice of the scheduler's default window (and NVML's
 * own sample period): a limited pod's GPU time repeats every slice, and a
 * period that does not divide it aliases. With 150 ms periods a pod held
 * to 25 % read 29 % in its busiest second, which no second of it was.
 *
 * A sample taken less than about 100 ms after the one before can return
 * that one again (seen on the H100 with 99.x ms periods): the period then
 * reads 0 % busy however busy the GPU was. Such a repeat is recognised by
 * the ratio from the sample before the last, which it leaves unchanged to
 * the bit, and skipped: the next line covers both periods, from the last
 * sample written. A "gpm-repeat END_US" line records each. The GPU idle or
 * fully busy through two periods looks the same, and skipping costs nothing
 * there: the next line has the same ratio over both. Never two in a row,
 * so that no line spans more than two periods.
 *
 * NVML is reached through dlopen, as everywhere in nvshare; nvml.h (CUDA's
 * headers) gives the types. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nvml.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *nvml;

static void *nvml_symbol(const char *name)
{
    void *f = dlsym(nvml, name);
    if (!f) {
        fprintf(stderr, "gpm_busy: libnvidia-ml has no %s\n", name);
        exit(2);
    }
    return f;
}

/* The percent of from..to in which the compute engine was active; -1 if
 * NVML cannot tell. */
static double busy_percent(__typeof__(nvmlGpmMetricsGet) *metrics_get,
                           nvmlGpmSample_t from, nvmlGpmSample_t to)
{
    static nvmlGpmMetricsGet_t query; /* 13 KB: not on the stack */

    query.version = NVML_GPM_METRICS_GET_VERSION;
    query.numMetrics = 1;
    query.sample1 = from;
    query.sample2 = to;
    query.metrics[0].metricId = NVML_GPM_METRIC_GRAPHICS_UTIL;
    if (metrics_get(&query) != NVML_SUCCESS ||
        query.metrics[0].nvmlReturn != NVML_SUCCESS)
        return -1;
    return query.metrics[0].value;
}

static unsigned long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000ull + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: gpm_busy FILE [GPU] [PERIOD_MS]\n");
        return 1;
    }
    unsigned gpu = argc > 2 ? (unsigned)atoi(argv[2]) : 0;
    long period_ms = argc > 3 ? atol(argv[3]) : 200;

    nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!nvml) {
        fprintf(stderr, "gpm_busy: %s\n", dlerror());
        return 2;
    }
    __typeof__(nvmlInit_v2) *init = nvml_symbol("nvmlInit_v2");
    __typeof__(nvmlDeviceGetHandleByIndex_v2) *get_handle =
        nvml_symbol("nvmlDeviceGetHandleByIndex_v2");
    __typeof__(nvmlGpmQueryDeviceSupport) *query_support =
        nvml_symbol("nvmlGpmQueryDeviceSupport");
    __typeof__(nvmlGpmSampleAlloc) *sample_alloc =
        nvml_symbol("nvmlGpmSampleAlloc");
    __typeof__(nvmlGpmSampleGet) *sample_get = nvml_symbol("nvmlGpmSampleGet");
    __typeof__(nvmlGpmMetricsGet) *metrics_get =
        nvml_symbol("nvmlGpmMetricsGet");

    nvmlDevice_t device;
    nvmlGpmSupport_t support = {.version = NVML_GPM_SUPPORT_VERSION};
    if (init() != NVML_SUCCESS || get_handle(gpu, &device) != NVML_SUCCESS) {
        fprintf(stderr, "gpm_busy: no GPU %u\n", gpu);
        return 2;
    }
    if (query_support(device, &support) != NVML_SUCCESS ||
        !support.isSupportedDevice) {
        fprintf(stderr, "gpm_busy: GPU %u has no GPM counters\n", gpu);
        return 2;
    }
    /* older: the sample of the line before the last; last: of the last
     * line; next: the one being taken. */
    nvmlGpmSample_t older, last, next;
    if (sample_alloc(&older) != NVML_SUCCESS ||
        sample_alloc(&last) != NVML_SUCCESS ||
        sample_alloc(&next) != NVML_SUCCESS ||
        sample_get(device, last) != NVML_SUCCESS) {
        fprintf(stderr, "gpm_busy: cannot take a GPM sample\n");
        return 2;
    }
    FILE *out = fopen(argv[1], "a");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    setvbuf(out, NULL, _IOLBF, 0);
    /* The first line only marks where the first period begins. */
    fprintf(out, "gpm %llu 0\n", now_us());

    struct timespec due;
    clock_gettime(CLOCK_MONOTONIC, &due);
    double last_percent = -1; /* older to last; none yet */
    bool skipped = false;     /* the sample before this one */
    for (;;) {
        due.tv_nsec += period_ms * 1000000;
        due.tv_sec += due.tv_nsec / 1000000000;
        due.tv_nsec %= 1000000000;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL);
        if (sample_get(device, next) != NVML_SUCCESS) {
            fprintf(stderr, "gpm_busy: cannot take a GPM sample\n");
            return 1;
        }
        unsigned long long at = now_us();
        double percent;
        if (!skipped && last_percent >= 0 &&
            busy_percent(metrics_get, older, next) == last_percent) {
            fprintf(out, "gpm-repeat %llu\n", at);
            skipped = true;
            continue;
        }
        skipped = false;
        percent = busy_percent(metrics_get, last, next);
        if (percent < 0) {
            fprintf(stderr, "gpm_busy: cannot read the utilization counter\n");
            return 1;
        }
        fprintf(out, "gpm %llu %.4f\n", at, percent);
        nvmlGpmSample_t spare = older;
        older = last;
        last = next;
        next = spare;
        last_percent = percent;
    }
}
