/* check.h - the assertions of the interposition test programs. They run
 * under LD_PRELOAD against the fake driver, where cmocka's process model
 * does not fit: each failed EXPECT is counted and printed, the program
 * reports PASS or FAIL at the end; MUST stops at a driver call that
 * failed, since nothing after it would mean anything. */
#ifndef NVSHARE_TEST_CHECK_H
#define NVSHARE_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int failures __attribute__((unused)); /* a test may use MUST only */

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            printf("FAIL: " __VA_ARGS__);                                      \
            printf("\n");                                                      \
        }                                                                      \
    } while (0)

#define MUST(call)                                                             \
    do {                                                                       \
        CUresult rc_ = (call);                                                 \
        if (rc_ != CUDA_SUCCESS) {                                             \
            printf("FAIL: %s: %d\n", #call, (int)rc_);                         \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#endif
