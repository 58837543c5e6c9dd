/* client.c - the client runtime's lifecycle and public API (see
 * nvshare_client.h for the contract): start and stop, fork. The top of
 * the runtime (client_internal.h draws the layers): it starts the gates
 * and the connection thread, installs in the gate how it sends, and
 * attaches the memory ledger (memory.c) to the connection. */
#include "nvshare_client.h"

#include "client_internal.h"
#include "connection.h"
#include "gate.h"
#include "log.h"

/* In a forked child the client thread does not exist and the connection
 * belongs to the parent: start over, unscheduled until started again. */
static void after_fork_in_child(void)
{
    pthread_mutex_init(&client.mu, NULL);
    pthread_cond_init(&client.changed, NULL);
    gate_after_fork();
    conn_after_fork();
    client.started = client.connected = client.attempted = false;
    for (int i = 0; i < NVSHARE_MAX_GPUS; i++)
        client.known[i] = false;
    memory_observer.after_fork();
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

int nvshare_client_start(const struct nvshare_client_config *config)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
    const struct gate_link link = {
        .send_locked = conn_send_locked,
        .before_lock_request = memory_observer.before_lock_request,
    };

    if (!config || !config->ops.drain || config->n_gpus < 1 ||
        config->n_gpus > NVSHARE_MAX_GPUS) {
        log_error("nvshare_client_start: need 1-%d GPUs and a drain callback",
                  NVSHARE_MAX_GPUS);
        return -1;
    }
    pthread_mutex_lock(&client.mu);
    if (client.started) {
        pthread_mutex_unlock(&client.mu);
        log_error("nvshare_client_start: already started");
        return -1;
    }
    const struct client_settings *s = client_settings();
    client.n_gpus = config->n_gpus;
    client.ops = config->ops;
    client.oversub_env = s->oversub;
    client.fail_closed = s->fail_closed;
    int gate_rc = gate_start(&link);
    client.started = true;
    memory_observer.connecting();
    gate_mode_changed_locked(); /* closed until the first attempt */
    pthread_once(&atfork_once, register_atfork);
    if (gate_rc || conn_start(config, &memory_observer)) {
        log_error("cannot start the client thread: running unscheduled");
        client.started = false;
        gate_mode_changed_locked();
        pthread_mutex_unlock(&client.mu);
        memory_observer.disconnected();
        return -1;
    }
    /* Without the beat a long drain is revoked sooner: no reason to fail. */
    if (!gate_start_beat())
        log_warn("cannot start the drain beat thread: drains longer than 1 s "
                 "may be revoked");
    pthread_mutex_unlock(&client.mu);
    return 0;
}

void nvshare_client_stop(void)
{
    pthread_mutex_lock(&client.mu);
    bool started = client.started;
    pthread_mutex_unlock(&client.mu);
    if (!started || conn_stop())
        return;
    gate_stop();
    pthread_mutex_lock(&client.mu);
    client.started = false;
    pthread_cond_broadcast(&client.changed);
    pthread_mutex_unlock(&client.mu);
}

bool nvshare_client_connected(void)
{
    pthread_mutex_lock(&client.mu);
    bool connected = client.connected;
    pthread_mutex_unlock(&client.mu);
    return connected;
}
