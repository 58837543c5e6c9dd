/* server.c - the plugin's one thread: gRPC servers for both resources and
 * the Register calls to kubelet, all on one completion queue, plus a tick
 * every 100 ms that notices a deleted socket (kubelet restarted: serve and
 * register again), polls GPU health and honours SIGTERM.
 *
 * Every operation in flight has a struct tag; its handler runs when the
 * queue reports the operation done. An RPC walks: request_call -> receive
 * the request -> answer and close. ListAndWatch stays open instead, and
 * resends the device list whenever a GPU's health changes. */
#include "server.h"

#include <errno.h>
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
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "log.h"
#include "service.h"

#define TICK_MS 100
#define REGISTER_RETRY_MS 250
#define REGISTER_TIMEOUT_S 5
#define HEALTH_EVERY_MS 1000
#define DRAIN_TIMEOUT_S 5

struct tag {
    void (*handle)(struct tag *tag, bool ok);
};
#define CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

struct endpoint {
    enum resource resource;
    char path[PATH_MAX];
    grpc_server *server;
    struct tag shutdown_tag;
    bool stopping;
    ino_t inode;
    struct rpc *watchers;
    bool registering;        /* a Register call is in flight */
    bool registered;
    long long register_at_ms; /* when to (re)try Register; 0: not due */
    bool register_failing;    /* the last Register failed: logged once */
    long long lost_at_ms;     /* when the socket was found gone */
    grpc_call *register_call;
    unsigned generation;      /* servings so far: a Register is for one */
    bool listen_failing;      /* logged once until it works */
};

struct rpc {
    struct tag step, closed;
    struct endpoint *ep;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array metadata;
    grpc_byte_buffer *request, *response;
    grpc_slice status_message;
    int cancelled;
    bool writing, dirty, close_seen; /* ListAndWatch only */
    struct rpc *next_watcher;
};

struct registration {
    struct tag done;
    struct endpoint *ep;
    unsigned generation;
    grpc_channel *channel;
    grpc_call *call;
    grpc_byte_buffer *request, *response;
    grpc_metadata_array initial, trailing;
    grpc_status_code status;
    grpc_slice details;
};

static struct plugin *plugin;
static grpc_completion_queue *cq;
static struct endpoint endpoints[RESOURCE_COUNT];
static int in_flight; /* rpcs and registrations not yet freed */
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

/* gRPC's own lines (multi-line error trees, also from its threads) become
 * debug lines: what matters is in the plugin's own one-line errors. */
static void grpc_log(gpr_log_func_args *args)
{
    log_debug("gRPC %s:%d: %.300s", args->file, args->line, args->message);
}

/* ---- RPCs ---------------------------------------------------------------- */

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

static void start_batch(struct rpc *rpc, const grpc_op *ops, size_t n, struct tag *tag)
{
    grpc_call_error e = grpc_call_start_batch(rpc->call, ops, n, tag, NULL);

    if (e != GRPC_CALL_OK) { /* a bug, not a peer's doing: say so, stay up */
        log_error("gRPC refused a batch (error %d): dropping the call", (int)e);
        grpc_call_cancel(rpc->call, NULL);
        rpc_free(rpc);
    }
}

static grpc_byte_buffer *to_buffer(const unsigned char *data, size_t len)
{
    grpc_slice slice = grpc_slice_from_copied_buffer((const char *)data, len);
    grpc_byte_buffer *buf = grpc_raw_byte_buffer_create(&slice, 1);

    grpc_slice_unref(slice);
    return buf;
}

static void on_finished(struct tag *tag, bool ok)
{
    (void)ok;
    rpc_free(CONTAINER_OF(tag, struct rpc, step));
}

/* Answers and closes the call: the message when status is OK, else the
 * status and its sentence. */
static void finish(struct rpc *rpc, const struct reply *reply, bool metadata_sent)
{
    grpc_op ops[4];
    size_t n = 0;

    memset(ops, 0, sizeof(ops));
    if (!metadata_sent)
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (reply->status == GRPC_STATUS_OK) {
        rpc->response = to_buffer(reply->data, reply->len);
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
    start_batch(rpc, ops, n, &rpc->step);
}

static void watch_write(struct rpc *rpc);

static void watcher_unlink(struct rpc *rpc)
{
    for (struct rpc **w = &rpc->ep->watchers; *w; w = &(*w)->next_watcher) {
        if (*w == rpc) {
            *w = rpc->next_watcher;
            return;
        }
    }
}

static void on_watch_written(struct tag *tag, bool ok)
{
    struct rpc *rpc = CONTAINER_OF(tag, struct rpc, step);

    rpc->writing = false;
    grpc_byte_buffer_destroy(rpc->response);
    rpc->response = NULL;
    if (rpc->close_seen) {
        rpc_free(rpc);
        return;
    }
    if (ok && rpc->dirty)
        watch_write(rpc);
}

static void on_watch_closed(struct tag *tag, bool ok)
{
    struct rpc *rpc = CONTAINER_OF(tag, struct rpc, closed);

    (void)ok;
    log_info("%s: kubelet closed ListAndWatch", resource_names[rpc->ep->resource]);
    rpc->close_seen = true;
    watcher_unlink(rpc);
    if (!rpc->writing)
        rpc_free(rpc);
}

static void watch_write(struct rpc *rpc)
{
    struct reply list;
    grpc_op op;

    service_device_list(plugin, rpc->ep->resource, &list);
    rpc->dirty = false;
    if (list.status != GRPC_STATUS_OK) {
        log_error("cannot build the device list: %s", list.message);
        return;
    }
    memset(&op, 0, sizeof(op));
    rpc->response = to_buffer(list.data, list.len);
    free(list.data);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = rpc->response;
    rpc->writing = true;
    rpc->step.handle = on_watch_written;
    if (grpc_call_start_batch(rpc->call, &op, 1, &rpc->step, NULL) != GRPC_CALL_OK) {
        log_error("gRPC refused a ListAndWatch update");
        grpc_byte_buffer_destroy(rpc->response);
        rpc->response = NULL;
        rpc->writing = false;
    }
}

/* Keeps the call open: the list now, again on every change, until kubelet
 * goes away (the close batch completes). */
static void watch(struct rpc *rpc)
{
    grpc_op op;

    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &rpc->cancelled;
    rpc->closed.handle = on_watch_closed;
    rpc->next_watcher = rpc->ep->watchers;
    rpc->ep->watchers = rpc;
    if (grpc_call_start_batch(rpc->call, &op, 1, &rpc->closed, NULL) != GRPC_CALL_OK) {
        log_error("gRPC refused to watch a ListAndWatch call");
        watcher_unlink(rpc);
        grpc_call_cancel(rpc->call, NULL);
        rpc_free(rpc);
        return;
    }
    log_info("%s: kubelet opened ListAndWatch", resource_names[rpc->ep->resource]);
    watch_write(rpc);
}

static void on_request(struct tag *tag, bool ok)
{
    struct rpc *rpc = CONTAINER_OF(tag, struct rpc, step);
    enum method m = method_from_path((const char *)GRPC_SLICE_START_PTR(rpc->details.method),
                                     GRPC_SLICE_LENGTH(rpc->details.method));
    struct reply reply = {.status = GRPC_STATUS_INVALID_ARGUMENT};
    grpc_byte_buffer_reader reader;
    grpc_slice bytes;

    if (!ok || !rpc->request) {
        snprintf(reply.message, sizeof(reply.message), "no request message");
        log_warn("%s: a call without a request message", resource_names[rpc->ep->resource]);
        finish(rpc, &reply, true);
        return;
    }
    if (!grpc_byte_buffer_reader_init(&reader, rpc->request)) {
        snprintf(reply.message, sizeof(reply.message), "request cannot be read");
        finish(rpc, &reply, true);
        return;
    }
    bytes = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    service_call(plugin, rpc->ep->resource, m, GRPC_SLICE_START_PTR(bytes),
                 GRPC_SLICE_LENGTH(bytes), &reply);
    grpc_slice_unref(bytes);
    if (reply.status != GRPC_STATUS_OK)
        log_warn("%s: refused a request: %s", resource_names[rpc->ep->resource], reply.message);
    if (m == METHOD_LIST_AND_WATCH && reply.status == GRPC_STATUS_OK) {
        free(reply.data);
        watch(rpc);
        return;
    }
    finish(rpc, &reply, true);
    free(reply.data);
}

static void accept_next(struct endpoint *ep);

static void on_call(struct tag *tag, bool ok)
{
    struct rpc *rpc = CONTAINER_OF(tag, struct rpc, step);
    grpc_op ops[2];
    enum method m;

    if (!ok) { /* the server is shutting down */
        rpc_free(rpc);
        return;
    }
    accept_next(rpc->ep);
    m = method_from_path((const char *)GRPC_SLICE_START_PTR(rpc->details.method),
                         GRPC_SLICE_LENGTH(rpc->details.method));
    if (m == METHOD_UNKNOWN) {
        struct reply reply = {.status = GRPC_STATUS_UNIMPLEMENTED};
        snprintf(reply.message, sizeof(reply.message), "no such method");
        log_warn("%s: a call of an unknown method", resource_names[rpc->ep->resource]);
        finish(rpc, &reply, false);
        return;
    }
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &rpc->request;
    rpc->step.handle = on_request;
    start_batch(rpc, ops, 2, &rpc->step);
}

static void accept_next(struct endpoint *ep)
{
    struct rpc *rpc;

    if (ep->stopping || !ep->server)
        return;
    rpc = calloc(1, sizeof(*rpc));
    if (!rpc) {
        log_error("out of memory: %s accepts no more calls", resource_names[ep->resource]);
        return;
    }
    in_flight++;
    rpc->ep = ep;
    rpc->status_message = grpc_empty_slice();
    grpc_call_details_init(&rpc->details);
    grpc_metadata_array_init(&rpc->metadata);
    rpc->step.handle = on_call;
    if (grpc_server_request_call(ep->server, &rpc->call, &rpc->details, &rpc->metadata, cq, cq,
                                 &rpc->step) != GRPC_CALL_OK) {
        log_error("%s: gRPC refused to accept calls", resource_names[ep->resource]);
        rpc_free(rpc);
    }
}

/* ---- Register ------------------------------------------------------------ */

static void on_registered(struct tag *tag, bool ok)
{
    struct registration *reg = CONTAINER_OF(tag, struct registration, done);
    struct endpoint *ep = reg->ep;

    ep->registering = false;
    ep->register_call = NULL;
    if (reg->generation != ep->generation) {
        /* For a socket since deleted: serve() has asked for a new one. */
    } else if (ok && reg->status == GRPC_STATUS_OK) {
        ep->registered = true;
        if (ep->lost_at_ms)
            log_info("%s: registered again %lld ms after its socket was deleted",
                     resource_names[ep->resource], now_ms() - ep->lost_at_ms);
        else
            log_info("%s: registered with kubelet", resource_names[ep->resource]);
        ep->lost_at_ms = 0;
        ep->register_failing = false;
        ep->register_at_ms = 0;
    } else if (!stop_signal) {
        char *why = grpc_slice_to_c_string(reg->details);
        /* One line per failure streak: kubelet may be down for minutes. */
        if (!ep->register_failing)
            log_warn("%s: Register failed (status %d: %s); retrying every %d ms",
                     resource_names[ep->resource], (int)reg->status, why, REGISTER_RETRY_MS);
        gpr_free(why);
        ep->register_failing = true;
        ep->register_at_ms = now_ms() + REGISTER_RETRY_MS;
    }
    grpc_call_unref(reg->call);
    grpc_channel_destroy(reg->channel);
    grpc_byte_buffer_destroy(reg->request);
    if (reg->response)
        grpc_byte_buffer_destroy(reg->response);
    grpc_metadata_array_destroy(&reg->initial);
    grpc_metadata_array_destroy(&reg->trailing);
    grpc_slice_unref(reg->details);
    free(reg);
    in_flight--;
}

static void start_register(struct endpoint *ep)
{
    struct registration *reg = calloc(1, sizeof(*reg));
    grpc_channel_credentials *creds;
    char target[PATH_MAX + 16];
    struct reply msg;
    grpc_op ops[6];
    gpr_timespec deadline;

    if (!reg)
        return;
    service_register_request(ep->resource, &msg);
    if (msg.status != GRPC_STATUS_OK) {
        free(reg);
        return;
    }
    in_flight++;
    ep->registering = true;
    reg->ep = ep;
    reg->generation = ep->generation;
    reg->done.handle = on_registered;
    reg->details = grpc_empty_slice();
    grpc_metadata_array_init(&reg->initial);
    grpc_metadata_array_init(&reg->trailing);
    reg->request = to_buffer(msg.data, msg.len);
    free(msg.data);
    snprintf(target, sizeof(target), "unix:%s/kubelet.sock", plugin->kubelet_dir);
    creds = grpc_insecure_credentials_create();
    reg->channel = grpc_channel_create(target, creds, NULL);
    grpc_channel_credentials_release(creds);
    deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                            gpr_time_from_seconds(REGISTER_TIMEOUT_S, GPR_TIMESPAN));
    reg->call = grpc_channel_create_call(reg->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                         grpc_slice_from_static_string(
                                             "/v1beta1.Registration/Register"),
                                         NULL, deadline, NULL);
    ep->register_call = reg->call;
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = reg->request;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &reg->initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &reg->response;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &reg->trailing;
    ops[5].data.recv_status_on_client.status = &reg->status;
    ops[5].data.recv_status_on_client.status_details = &reg->details;
    if (grpc_call_start_batch(reg->call, ops, 6, &reg->done, NULL) != GRPC_CALL_OK) {
        log_error("gRPC refused the Register call");
        reg->status = GRPC_STATUS_INTERNAL;
        on_registered(&reg->done, false);
    }
}

/* ---- Serving ------------------------------------------------------------- */

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
    ep->registered = false;
    grpc_server_shutdown_and_notify(ep->server, cq, &ep->shutdown_tag);
    grpc_server_cancel_all_calls(ep->server);
}

static void serve(struct endpoint *ep)
{
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    char address[PATH_MAX + 8];
    struct stat st;

    unlink(ep->path);
    ep->generation++;
    ep->server = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(ep->server, cq, NULL);
    snprintf(address, sizeof(address), "unix:%s", ep->path);
    if (!grpc_server_add_http2_port(ep->server, address, creds)) {
        grpc_server_credentials_release(creds);
        if (!ep->listen_failing)
            log_error("%s: cannot listen on %s (does the directory exist?); retrying every "
                      "%d ms", resource_names[ep->resource], ep->path, TICK_MS);
        ep->listen_failing = true;
        grpc_server_destroy(ep->server);
        ep->server = NULL;
        return; /* the tick retries */
    }
    grpc_server_credentials_release(creds);
    ep->listen_failing = false;
    grpc_server_start(ep->server);
    ep->inode = stat(ep->path, &st) == 0 ? st.st_ino : 0;
    log_info("%s: serving on %s", resource_names[ep->resource], ep->path);
    accept_next(ep);
    ep->register_at_ms = now_ms();
}

/* ---- The tick ------------------------------------------------------------ */

static void check_socket(struct endpoint *ep, long long now)
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
    log_info("%s: socket %s was deleted (kubelet restarted?): serving again",
             resource_names[ep->resource], ep->path);
    ep->lost_at_ms = now;
    if (ep->register_call)
        grpc_call_cancel(ep->register_call, NULL);
    stop(ep); /* on_shutdown serves again */
}

static void check_register(struct endpoint *ep, long long now)
{
    if (!ep->server || ep->stopping || ep->registering || ep->registered ||
        !ep->register_at_ms || now < ep->register_at_ms)
        return;
    start_register(ep);
}

static void check_health(void)
{
    bool changed = false;

    for (int g = 0; g < plugin->gpu_count; g++) {
        struct plugin_gpu *gpu = &plugin->gpus[g];
        bool healthy = nvml_healthy(gpu->uuid);

        if (healthy != gpu->healthy) {
            log_warn("GPU %s is now %s", gpu->uuid, healthy ? "healthy" : "unhealthy");
            gpu->healthy = healthy;
            changed = true;
        }
    }
    if (!changed)
        return;
    for (int r = 0; r < RESOURCE_COUNT; r++) {
        for (struct rpc *w = endpoints[r].watchers; w; w = w->next_watcher) {
            w->dirty = true;
            if (!w->writing)
                watch_write(w);
        }
    }
}

static void dispatch(gpr_timespec deadline)
{
    grpc_event ev = grpc_completion_queue_next(cq, deadline, NULL);

    if (ev.type == GRPC_OP_COMPLETE) {
        struct tag *tag = ev.tag;
        tag->handle(tag, ev.success != 0);
    }
}

static gpr_timespec in_ms(long ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

int server_run(struct plugin *p)
{
    struct sigaction sa;
    long long next_health = 0, drain_until;

    plugin = p;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    gpr_set_log_function(grpc_log);
    grpc_init();
    cq = grpc_completion_queue_create_for_next(NULL);
    for (int r = 0; r < RESOURCE_COUNT; r++) {
        struct endpoint *ep = &endpoints[r];
        ep->resource = (enum resource)r;
        ep->shutdown_tag.handle = on_shutdown;
        snprintf(ep->path, sizeof(ep->path), "%s/%s", p->kubelet_dir, resource_sockets[r]);
        serve(ep);
    }
    while (!stop_signal) {
        long long now = now_ms();

        for (int r = 0; r < RESOURCE_COUNT; r++) {
            check_socket(&endpoints[r], now);
            check_register(&endpoints[r], now);
        }
        if (now >= next_health) {
            check_health();
            next_health = now + HEALTH_EVERY_MS;
        }
        dispatch(in_ms(TICK_MS));
    }

    log_info("signal %d: shutting down", (int)stop_signal);
    for (int r = 0; r < RESOURCE_COUNT; r++) {
        if (endpoints[r].register_call)
            grpc_call_cancel(endpoints[r].register_call, NULL);
        stop(&endpoints[r]);
    }
    drain_until = now_ms() + DRAIN_TIMEOUT_S * 1000;
    while ((in_flight > 0 || endpoints[0].server || endpoints[1].server) &&
           now_ms() < drain_until)
        dispatch(in_ms(TICK_MS));
    for (int r = 0; r < RESOURCE_COUNT; r++)
        unlink(endpoints[r].path);
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
