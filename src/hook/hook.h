/* hook.h - what every file of libnvshare.so shares: the CUDA driver API and the
 * wrapped symbols (entry_points.h), and the attributes of exports and
 * thread-locals. hot_path.h is what a wrapper runs per submission; each
 * other header is one module's (the module map is in CMakeLists.txt). */
#ifndef NVSHARE_HOOK_HOOK_H
#define NVSHARE_HOOK_HOOK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "entry_points.h"
#include "nvshare_client.h" /* NVSHARE_MAX_GPUS, the gate */

#define HOOK_EXPORT __attribute__((visibility("default")))
#define HOOK_TLS __thread __attribute__((tls_model("initial-exec")))
#define hook_unlikely(x) __builtin_expect(!!(x), 0)

static inline uint64_t hook_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
