/* init.c - libnvshare's load-time setup: reading the environment only.
 * Nothing here touches CUDA or the scheduler (see client_start.c). */
#include "stats.h"
#include "log.h"

__attribute__((constructor)) static void hook_init(void)
{
    hook_stats_init();
    /* The application's stderr is its own: warnings and errors only, unless
     * NVSHARE_LOG_LEVEL asks for more or NVSHARE_STATS for the counts. */
    log_init("hook", hook_stats_enabled ? LOG_INFO : LOG_WARN);
}
