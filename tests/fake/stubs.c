/* stubs.c - a weak definition of every symbol libnvshare wraps.
 *
 * libnvshare resolves each of them from the driver, and the table test needs
 * each to exist with its own address. The ones the tests exercise have real
 * (strong) definitions in the other files, which the linker prefers; the
 * rest accept anything and succeed without doing anything. */
#include "fake.h"

/* A stub ignores its arguments by design. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define NVSHARE_SYMBOL(e, api, since, pt, cat, stream, params, args)           \
    __attribute__((weak)) CUresult e params                                    \
    {                                                                          \
        return CUDA_SUCCESS;                                                   \
    }
#include "entry_points.def"
#undef NVSHARE_SYMBOL
