/* server.c - the driver's one thread: two gRPC servers on one completion
 * queue, the DRA service on <plugin dir>/dra.sock and the registration
 * service on <registry dir>/gpu.nvshare.com-reg.sock (served in that
 * order: kubelet dials the DRA socket as soon as it sees the other), and
 * a tick every 100 ms that serves a socket again when it was deleted
 * (kubelet restarted and cleaned up), checks GPU health and the
 * ResourceSlice, and honours SIGTERM.
 *
 * Calls are unary and answered in the handler. A Prepare blocks the
 * thread while it reads claims from the API server: its time is bounded
 * (service.c), and kubelet sends one call per pod at a time. */
#include "server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "env.h"
#include "log.h"
#include "service.h"

#define TICK_MS 100
#define HEALTH_EVERY_MS 1000
#define DRAIN_TIMEOUT_S 5

struct tag {
    void (*handle)(struct tag *tag, bool ok);
};
#define CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

struct endpoint {
    const char *what;
    char path[PATH_MAX];
    grpc_server *server;
    struct tag shutdown_tag;
    bool stopping, listen_failing;
    ino_t inode;
};

struct rpc {
    struct tag step;
    struct endpoint *ep;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array metadata;
    grpc_byte_buffer *request, *response;
    grpc_slice status_message;
    int cancelled;
};

static struct driver *driver;
static grpc_completion_queue *cq;
static struct endpoint endpoints[2]; /* the DRA service first */
static int in_flight;
static volatile sig_atomic_t stop_signal;

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void grpc_log(gpr_log_func_args *args)
{
    log_debug("gRPC %s:%d: %.300s", args->file, args->line, args->message);
}

static void rpc_free(struct rpc *rpc)
{
    if (rpc->call)
        grpc_call_unref(rpc->call);
    grpc_call_details_destroy(&rpc->details);
    grpc_metadata_array_destroy(&rpc->metadata);
    if (rpc->request)
        grpc_byte_buffer_destroy(rpc->request);
    if (rpc->response)
        grpc_byte_buffer_destroy(rpc->response);
    grpc_slice_unref(rpc->status_message);
    free(rpc);
    in_flight--;
}

static void start_batch(struct rpc *rpc, const grpc_op *ops, size_t n)
{
    if (grpc_call_start_batch(rpc->call, ops, n, &rpc->step, NULL) != GRPC_CALL_OK) {
        log_error("gRPC refused a batch: dropping the call");
        grpc_call_cancel(rpc->call, NULL);
        rpc_free(rpc);
    }
}

static void on_finished(struct tag *tag, bool ok)
{
    (void)ok;
    rpc_free(CONTAINER_OF(tag, struct rpc, step));
}

static void finish(struct rpc *rpc, const struct dra_reply *reply, bool metadata_sent)
{
    grpc_op ops[4];
    size_t n = 0;

    memset(ops, 0, sizeof(ops));
    if (!metadata_sent)
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (reply->status == GRPC_STATUS_OK) {
        grpc_slice slice = grpc_slice_from_copied_buffer((const char *)reply->data, reply->len);
        rpc->response = grpc_raw_byte_buffer_create(&slice, 1);
        grpc_slice_unref(slice);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = rpc->response;
    }
    rpc->status_message = grpc_slice_from_copied_string(reply->message);
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = reply->status;
    ops[n++].data.send_status_from_server.status_details = &rpc->status_message;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &rpc->cancelled;
    rpc->step.handle = on_finished;
    start_batch(rpc, ops, n);
}

static enum dra_method method_of(const struct rpc *rpc)
{
    return dra_method_from_path((const char *)GRPC_SLICE_START_PTR(rpc->details.method),
                                GRPC_SLICE_LENGTH(rpc->details.method));
}

static void on_request(struct tag *tag, bool ok)
{
    struct rpc *rpc = CONTAINER_OF(tag, struct rpc, step);
    struct dra_reply reply = {.status = GRPC_STATUS_INVALID_ARGUMENT};
    grpc_byte_buffer_reader reader;
    grpc_slice bytes;

    if (!ok || !rpc->request || !grpc_byte_buffer_reader_init(&reader, rpc->request)) {
        snprintf(reply.message, sizeof(reply.message), "no request message");
        finish(rpc, &reply, true);
        return;
    }
    bytes = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    dra_service_call(driver, method_of(rpc), GRPC_SLICE_START_PTR(bytes),
                     GRPC_SLICE_LENGTH(bytes), &reply);
    grpc_slice_unref(bytes);
    if (reply.status != GRPC_STATUS_OK)
        log_warn("%s: refused a call: %s", rpc->ep->what, reply.message);
    finish(rpc, &reply, true);
    free(reply.data);
}

static void accept_next(struct endpoint *ep);

static void on_call(struct tag *tag, bool ok)
{
    struct rpc *rpc = CONTAINER_OF(tag, struct rpc, step);
    grpc_op ops[2];

    if (!ok) { /* the server is shutting down */
        rpc_free(rpc);
        return;
    }
    accept_next(rpc->ep);
    if (method_of(rpc) == DRA_UNKNOWN) {
        struct dra_reply reply = {.status = GRPC_STATUS_UNIMPLEMENTED};
        snprintf(reply.message, sizeof(reply.message), "no such method");
        log_warn("%s: a call of an unknown method", rpc->ep->what);
        finish(rpc, &reply, false);
        return;
    }
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &rpc->request;
    rpc->step.handle = on_request;
    start_batch(rpc, ops, 2);
}

static void accept_next(struct endpoint *ep)
{
    struct rpc *rpc;

    if (ep->stopping || !ep->server || !(rpc = calloc(1, sizeof(*rpc))))
        return;
    in_flight++;
    rpc->ep = ep;
    rpc->status_message = grpc_empty_slice();
    grpc_call_details_init(&rpc->details);
    grpc_metadata_array_init(&rpc->metadata);
    rpc->step.handle = on_call;
    if (grpc_server_request_call(ep->server, &rpc->call, &rpc->details, &rpc->metadata, cq, cq,
                                 &rpc->step) != GRPC_CALL_OK) {
        log_error("%s: gRPC refused to accept calls", ep->what);
        rpc_free(rpc);
    }
}

static void serve(struct endpoint *ep);

static void on_shutdown(struct tag *tag, bool ok)
{
    struct endpoint *ep = CONTAINER_OF(tag, struct endpoint, shutdown_tag);

    (void)ok;
    grpc_server_destroy(ep->server);
    ep->server = NULL;
    ep->stopping = false;
    if (!stop_signal)
        serve(ep);
}

static void stop(struct endpoint *ep)
{
    if (!ep->server || ep->stopping)
        return;
    ep->stopping = true;
    grpc_server_shutdown_and_notify(ep->server, cq, &ep->shutdown_tag);
    grpc_server_cancel_all_calls(ep->server);
}

static void serve(struct endpoint *ep)
{
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    char address[PATH_MAX + 8];
    struct stat st;

    unlink(ep->path);
    ep->server = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(ep->server, cq, NULL);
    snprintf(address, sizeof(address), "unix:%s", ep->path);
    if (!grpc_server_add_http2_port(ep->server, address, creds)) {
        if (!ep->listen_failing)
            log_error("%s: cannot listen on %s (does the directory exist?); retrying every "
                      "%d ms", ep->what, ep->path, TICK_MS);
        ep->listen_failing = true;
        grpc_server_credentials_release(creds);
        grpc_server_destroy(ep->server);
        ep->server = NULL;
        return; /* the tick retries */
    }
    grpc_server_credentials_release(creds);
    ep->listen_failing = false;
    grpc_server_start(ep->server);
    ep->inode = stat(ep->path, &st) == 0 ? st.st_ino : 0;
    log_info("%s: serving on %s", ep->what, ep->path);
    accept_next(ep);
}

static void check_socket(struct endpoint *ep)
{
    struct stat st;

    if (ep->stopping)
        return;
    if (!ep->server) {
        serve(ep);
        return;
    }
    if (stat(ep->path, &st) == 0 && st.st_ino == ep->inode)
        return;
    log_info("%s: socket %s was deleted (kubelet restarted?): serving again", ep->what,
             ep->path);
    stop(ep); /* on_shutdown serves again */
}

static bool health_changed(void)
{
    bool changed = false;

    for (int g = 0; g < driver->gpus.gpu_count; g++) {
        struct plugin_gpu *gpu = &driver->gpus.gpus[g];
        bool healthy = nvml_healthy(gpu->uuid);

        if (healthy != gpu->healthy) {
            log_warn("GPU %s is now %s", gpu->uuid, healthy ? "healthy" : "unhealthy");
            gpu->healthy = healthy;
            changed = true;
        }
    }
    return changed;
}

static void dispatch(long ms)
{
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(ms, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(cq, deadline, NULL);

    if (ev.type == GRPC_OP_COMPLETE) {
        struct tag *tag = ev.tag;
        tag->handle(tag, ev.success != 0);
    }
}

int server_run(struct driver *d)
{
    long long slice_every = env_duration_ns("NVSHARE_DRA_SLICE_CHECK", 10000000000ULL) / 1000000;
    long long next_health = 0, next_slice = 0, drain_until;
    bool slice_ok = false;
    struct sigaction sa;

    driver = d;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    gpr_set_log_function(grpc_log);
    grpc_init();
    cq = grpc_completion_queue_create_for_next(NULL);
    endpoints[0].what = "DRA service";
    snprintf(endpoints[0].path, sizeof(endpoints[0].path), "%s/dra.sock", d->plugin_dir);
    endpoints[1].what = "registration";
    snprintf(endpoints[1].path, sizeof(endpoints[1].path), "%s/%s-reg.sock", d->registry_dir,
             DRA_DRIVER_NAME);
    for (int e = 0; e < 2; e++) {
        endpoints[e].shutdown_tag.handle = on_shutdown;
        serve(&endpoints[e]);
    }
    while (!stop_signal) {
        long long now = now_ms();

        for (int e = 0; e < 2; e++)
            check_socket(&endpoints[e]);
        /* An unhealthy GPU leaves the slice at once. Otherwise the slice
         * is checked now and then, for kubelet deletes a node's slices
         * when it restarts; a failure is retried at the next check. */
        if (now >= next_health) {
            if (health_changed())
                next_slice = 0, slice_ok = false;
            next_health = now + HEALTH_EVERY_MS;
        }
        if (now >= next_slice) {
            slice_ok = (slice_ok ? slice_check(d) : slice_publish(d)) == 0;
            next_slice = now_ms() + slice_every;
        }
        dispatch(TICK_MS);
    }

    log_info("signal %d: shutting down", (int)stop_signal);
    /* The registration socket goes first: kubelet deregisters the driver
     * and stops calling it. */
    for (int e = 1; e >= 0; e--)
        stop(&endpoints[e]);
    drain_until = now_ms() + DRAIN_TIMEOUT_S * 1000;
    while ((in_flight > 0 || endpoints[0].server || endpoints[1].server) &&
           now_ms() < drain_until)
        dispatch(TICK_MS);
    for (int e = 0; e < 2; e++)
        unlink(endpoints[e].path);
    if (in_flight > 0 || endpoints[0].server || endpoints[1].server) {
        log_error("%d calls still open after %d s: exiting without a clean gRPC shutdown",
                  in_flight, DRAIN_TIMEOUT_S);
        return 1;
    }
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    grpc_shutdown_blocking();
    nvml_close();
    log_info("stopped");
    return 0;
}
