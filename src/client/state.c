/* state.c - the state every layer of the client runtime reads
 * (client_internal.h), and the answers read from it alone. */
#include "client_internal.h"

#include <errno.h>
#include <time.h>

/* How long an allocation waits for the node's oversubscription default:
 * the bound quota reservations wait for the scheduler (memory.c). */
#define REGISTRATION_WAIT_SEC 2

struct client_state client = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .changed = PTHREAD_COND_INITIALIZER,
    .oversub_env = -1,
};

bool nvshare_oversub_enabled(void)
{
    bool on;

    pthread_mutex_lock(&client.mu);
    on = client.oversub_env >= 0 ? client.oversub_env : client.oversub_node;
    pthread_mutex_unlock(&client.mu);
    return on;
}

bool nvshare_oversub_for_allocation(void)
{
    struct timespec deadline;

    pthread_mutex_lock(&client.mu);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += REGISTRATION_WAIT_SEC;
    while (client.oversub_env < 0 && client.started && !client.attempted &&
           pthread_cond_timedwait(&client.changed, &client.mu, &deadline) !=
               ETIMEDOUT)
        ;
    bool on = client.oversub_env >= 0 ? client.oversub_env : client.oversub_node;
    pthread_mutex_unlock(&client.mu);
    return on;
}
