/* init.c - libnvshare's load-time setup: reading the environment only.
 * Nothing here touches CUDA or the scheduler (see gating.c). */
#include "hook.h"
#include "log.h"

__attribute__((constructor)) static void hook_init(void)
{
    log_init("hook");
    hook_stats_init();
}
