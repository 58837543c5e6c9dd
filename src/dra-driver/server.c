/* server.c - the driver's one thread: two gRPC servers on one completion
 * queue, the DRA service on <plugin dir>/dra.sock and the registration
 * service on <registry dir>/gpu.nvshare.com-reg.sock (served in that
 * order: kubelet dials the DRA socket as soon as it sees the other), and
 * a tick every 100 ms that serves a socket again when it was deleted
 * (kubelet restarted and cleaned up), checks GPU health and the
 * ResourceSlice, and honours SIGTERM.
 *
 * Calls go through grpc_server.c and are unary. Registration is answered
 * on this thread; a Prepare or Unprepare is handed to the workers
 * (workers.h), and the one that ends its last claim answers it
 * (grpc_call_start_batch may be called from any thread), so that no API
 * read ever holds this thread. */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>

#include "env.h"
#include "log.h"
#include "service.h"
#include "workers.h"

#define HEALTH_EVERY_MS 1000

static struct driver *driver;
static struct endpoint endpoints[2]; /* the DRA service first */

static enum dra_method method_of(const struct rpc *rpc)
{
    return dra_method_from_path((const char *)GRPC_SLICE_START_PTR(
                                    rpc->details.method),
                                GRPC_SLICE_LENGTH(rpc->details.method));
}

static bool knows(const struct rpc *rpc)
{
    return method_of(rpc) != DRA_UNKNOWN;
}

static void finish(void *ctx, struct reply *reply)
{
    struct rpc *rpc = ctx;

    if (reply->status != GRPC_STATUS_OK)
        log_warn("%s: refused a call: %s", rpc->ep->what, reply->message);
    rpc_finish(rpc, reply, true);
    free(reply->data);
}

static void answer(struct rpc *rpc, const unsigned char *request, size_t len)
{
    dra_service_call(driver, method_of(rpc), request, len, finish, rpc);
}

int server_run(struct driver *d)
{
    long long slice_every =
        env_duration_ns("NVSHARE_DRA_SLICE_CHECK", 10000000000ULL) / 1000000;
    long long next_health = 0, next_slice = 0;
    bool slice_ok = false;
    struct endpoint *eps[2] = {&endpoints[0], &endpoints[1]};

    driver = d;
    server_setup();
    if (status_start(d) || workers_start())
        return 1;
    endpoints[0].what = "DRA service";
    snprintf(endpoints[0].path, sizeof(endpoints[0].path), "%s/dra.sock",
             d->plugin_dir);
    endpoints[1].what = "registration";
    snprintf(endpoints[1].path, sizeof(endpoints[1].path), "%s/%s-reg.sock",
             d->registry_dir, DRA_DRIVER_NAME);
    for (int e = 0; e < 2; e++) {
        endpoints[e].rpc_size = sizeof(struct rpc);
        endpoints[e].knows = knows;
        endpoints[e].answer = answer;
        endpoint_serve(&endpoints[e]);
    }
    while (!server_stop_signal) {
        long long now = now_ms();

        for (int e = 0; e < 2; e++)
            endpoint_check(&endpoints[e]);
        /* An unhealthy GPU leaves the slice at once. Otherwise the slice
         * is checked now and then, for kubelet deletes a node's slices
         * when it restarts; a failure is retried at the next check. */
        if (now >= next_health) {
            if (plugin_health_changed(&d->gpus))
                next_slice = 0, slice_ok = false;
            next_health = now + HEALTH_EVERY_MS;
        }
        if (now >= next_slice) {
            slice_ok = (slice_ok ? slice_check(d) : slice_publish(d)) == 0;
            next_slice = now_ms() + slice_every;
        }
        server_dispatch(SERVER_TICK_MS);
    }

    log_info("signal %d: shutting down", (int)server_stop_signal);
    /* The registration socket goes first: kubelet deregisters the driver
     * and stops calling it. */
    for (int e = 1; e >= 0; e--)
        endpoint_stop(&endpoints[e]);
    workers_stop(); /* the calls taken are answered; the drain sends them */
    status_stop();
    if (server_drain(eps, 2))
        return 1;
    nvml_close();
    log_info("stopped");
    return 0;
}
