/* server.c - the plugin's one thread: gRPC servers for both resources and
 * the Register calls to kubelet, all on one completion queue, plus a tick
 * every 100 ms that notices a deleted socket (kubelet restarted: serve and
 * register again), polls GPU health and honours SIGTERM.
 *
 * The calls go through grpc_server.c; ListAndWatch stays open instead of
 * being answered, and resends the device list whenever a GPU's health
 * changes. */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "log.h"
#include "service.h"

#define REGISTER_RETRY_MS 250
#define REGISTER_TIMEOUT_S 5
#define HEALTH_EVERY_MS 1000

struct endpoint_of_resource {
    struct endpoint base;
    enum resource resource;
    struct watch *watchers;
    bool registering; /* a Register call is in flight */
    bool registered;
    long long register_at_ms; /* when to (re)try Register; 0: not due */
    bool register_failing;    /* the last Register failed: logged once */
    long long lost_at_ms;     /* when the socket was found gone */
    grpc_call *register_call;
    unsigned generation; /* servings so far: a Register is for one */
};
#define RESOURCE_EP(ep) CONTAINER_OF(ep, struct endpoint_of_resource, base)

/* Each call: any may turn out to be a ListAndWatch, which stays open, so
 * every one is allocated this big (rpc_size). */
struct watch {
    struct rpc rpc;
    struct tag closed;
    bool writing, dirty, close_seen;
    struct watch *next_watcher;
};

struct registration {
    struct tag done;
    struct endpoint_of_resource *ep;
    unsigned generation;
    grpc_channel *channel;
    grpc_call *call;
    grpc_byte_buffer *request, *response;
    grpc_metadata_array initial, trailing;
    grpc_status_code status;
    grpc_slice details;
};

static struct plugin *plugin;
static struct endpoint_of_resource endpoints[RESOURCE_COUNT];

/* ---- ListAndWatch -------------------------------------------------------- */

static void watch_write(struct watch *w);

static void watcher_unlink(struct watch *w)
{
    for (struct watch **p = &RESOURCE_EP(w->rpc.ep)->watchers; *p;
         p = &(*p)->next_watcher) {
        if (*p == w) {
            *p = w->next_watcher;
            return;
        }
    }
}

static void on_watch_written(struct tag *tag, bool ok)
{
    struct watch *w = CONTAINER_OF(tag, struct watch, rpc.step);

    w->writing = false;
    grpc_byte_buffer_destroy(w->rpc.response);
    w->rpc.response = NULL;
    if (w->close_seen) {
        rpc_free(&w->rpc);
        return;
    }
    if (ok && w->dirty)
        watch_write(w);
}

static void on_watch_closed(struct tag *tag, bool ok)
{
    struct watch *w = CONTAINER_OF(tag, struct watch, closed);

    (void)ok;
    log_info("%s: kubelet closed ListAndWatch", w->rpc.ep->what);
    w->close_seen = true;
    watcher_unlink(w);
    if (!w->writing)
        rpc_free(&w->rpc);
}

static void watch_write(struct watch *w)
{
    struct reply list;
    grpc_op op;

    service_device_list(plugin, RESOURCE_EP(w->rpc.ep)->resource, &list);
    w->dirty = false;
    if (list.status != GRPC_STATUS_OK) {
        log_error("cannot build the device list: %s", list.message);
        return;
    }
    memset(&op, 0, sizeof(op));
    w->rpc.response = byte_buffer_from(list.data, list.len);
    free(list.data);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = w->rpc.response;
    w->writing = true;
    w->rpc.step.handle = on_watch_written;
    if (grpc_call_start_batch(w->rpc.call, &op, 1, &w->rpc.step, NULL) !=
        GRPC_CALL_OK) {
        log_error("gRPC refused a ListAndWatch update");
        grpc_byte_buffer_destroy(w->rpc.response);
        w->rpc.response = NULL;
        w->writing = false;
    }
}

/* Keeps the call open: the list now, again on every change, until kubelet
 * goes away (the close batch completes). */
static void watch(struct watch *w)
{
    struct endpoint_of_resource *ep = RESOURCE_EP(w->rpc.ep);
    grpc_op op;

    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &w->rpc.cancelled;
    w->closed.handle = on_watch_closed;
    w->next_watcher = ep->watchers;
    ep->watchers = w;
    if (grpc_call_start_batch(w->rpc.call, &op, 1, &w->closed, NULL) !=
        GRPC_CALL_OK) {
        log_error("gRPC refused to watch a ListAndWatch call");
        watcher_unlink(w);
        grpc_call_cancel(w->rpc.call, NULL);
        rpc_free(&w->rpc);
        return;
    }
    log_info("%s: kubelet opened ListAndWatch", ep->base.what);
    watch_write(w);
}

static enum method method_of(const struct rpc *rpc)
{
    return method_from_path((const char *)GRPC_SLICE_START_PTR(rpc->details.method),
                            GRPC_SLICE_LENGTH(rpc->details.method));
}

static bool knows(const struct rpc *rpc)
{
    return method_of(rpc) != METHOD_UNKNOWN;
}

static void answer(struct rpc *rpc, const unsigned char *request, size_t len)
{
    enum method m = method_of(rpc);
    struct reply reply;

    service_call(plugin, RESOURCE_EP(rpc->ep)->resource, m, request, len, &reply);
    if (reply.status != GRPC_STATUS_OK)
        log_warn("%s: refused a request: %s", rpc->ep->what, reply.message);
    if (m == METHOD_LIST_AND_WATCH && reply.status == GRPC_STATUS_OK) {
        free(reply.data);
        watch(CONTAINER_OF(rpc, struct watch, rpc));
        return;
    }
    rpc_finish(rpc, &reply, true);
    free(reply.data);
}

/* ---- Register ------------------------------------------------------------ */

static void on_registered(struct tag *tag, bool ok)
{
    struct registration *reg = CONTAINER_OF(tag, struct registration, done);
    struct endpoint_of_resource *ep = reg->ep;

    ep->registering = false;
    ep->register_call = NULL;
    if (reg->generation != ep->generation) {
        /* For a socket since deleted: served() has asked for a new one. */
    } else if (ok && reg->status == GRPC_STATUS_OK) {
        ep->registered = true;
        if (ep->lost_at_ms)
            log_info("%s: registered again %lld ms after its socket was "
                     "deleted",
                     ep->base.what, now_ms() - ep->lost_at_ms);
        else
            log_info("%s: registered with kubelet", ep->base.what);
        ep->lost_at_ms = 0;
        ep->register_failing = false;
        ep->register_at_ms = 0;
    } else if (!server_stop_signal) {
        char *why = grpc_slice_to_c_string(reg->details);
        /* One line per failure streak: kubelet may be down for minutes. */
        if (!ep->register_failing)
            log_warn("%s: Register failed (status %d: %s); retrying every %d "
                     "ms",
                     ep->base.what, (int)reg->status, why, REGISTER_RETRY_MS);
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
    __atomic_sub_fetch(&server_in_flight, 1, __ATOMIC_RELAXED);
}

static void start_register(struct endpoint_of_resource *ep)
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
    __atomic_add_fetch(&server_in_flight, 1, __ATOMIC_RELAXED);
    ep->registering = true;
    reg->ep = ep;
    reg->generation = ep->generation;
    reg->done.handle = on_registered;
    reg->details = grpc_empty_slice();
    grpc_metadata_array_init(&reg->initial);
    grpc_metadata_array_init(&reg->trailing);
    reg->request = byte_buffer_from(msg.data, msg.len);
    free(msg.data);
    snprintf(target, sizeof(target), "unix:%s/kubelet.sock", plugin->kubelet_dir);
    creds = grpc_insecure_credentials_create();
    reg->channel = grpc_channel_create(target, creds, NULL);
    grpc_channel_credentials_release(creds);
    deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                     gpr_time_from_seconds(REGISTER_TIMEOUT_S, GPR_TIMESPAN));
    reg->call = grpc_channel_create_call(reg->channel, NULL,
                                         GRPC_PROPAGATE_DEFAULTS, server_cq,
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
    if (grpc_call_start_batch(reg->call, ops, 6, &reg->done, NULL) !=
        GRPC_CALL_OK) {
        log_error("gRPC refused the Register call");
        reg->status = GRPC_STATUS_INTERNAL;
        on_registered(&reg->done, false);
    }
}

/* ---- Serving ------------------------------------------------------------- */

/* A new socket: kubelet is to be told of it, by a Register of its own. */
static void served(struct endpoint *base)
{
    struct endpoint_of_resource *ep = RESOURCE_EP(base);

    ep->generation++;
    ep->register_at_ms = now_ms();
}

/* ---- The tick ------------------------------------------------------------ */

static void check_socket(struct endpoint_of_resource *ep, long long now)
{
    if (!endpoint_check(&ep->base))
        return;
    ep->lost_at_ms = now;
    ep->registered = false;
    if (ep->register_call)
        grpc_call_cancel(ep->register_call, NULL);
}

static void check_register(struct endpoint_of_resource *ep, long long now)
{
    if (!ep->base.server || ep->base.stopping || ep->registering ||
        ep->registered || !ep->register_at_ms || now < ep->register_at_ms)
        return;
    start_register(ep);
}

static void check_health(void)
{
    if (!plugin_health_changed(plugin))
        return;
    for (int r = 0; r < RESOURCE_COUNT; r++) {
        for (struct watch *w = endpoints[r].watchers; w; w = w->next_watcher) {
            w->dirty = true;
            if (!w->writing)
                watch_write(w);
        }
    }
}

int server_run(struct plugin *p)
{
    struct endpoint *eps[RESOURCE_COUNT];
    long long next_health = 0;

    plugin = p;
    server_setup();
    for (int r = 0; r < RESOURCE_COUNT; r++) {
        struct endpoint_of_resource *ep = &endpoints[r];
        ep->resource = (enum resource)r;
        ep->base.what = resource_names[r];
        ep->base.rpc_size = sizeof(struct watch);
        ep->base.knows = knows;
        ep->base.answer = answer;
        ep->base.served = served;
        snprintf(ep->base.path, sizeof(ep->base.path), "%s/%s", p->kubelet_dir,
                 resource_sockets[r]);
        eps[r] = &ep->base;
        endpoint_serve(&ep->base);
    }
    while (!server_stop_signal) {
        long long now = now_ms();

        for (int r = 0; r < RESOURCE_COUNT; r++) {
            check_socket(&endpoints[r], now);
            check_register(&endpoints[r], now);
        }
        if (now >= next_health) {
            check_health();
            next_health = now + HEALTH_EVERY_MS;
        }
        server_dispatch(SERVER_TICK_MS);
    }

    log_info("signal %d: shutting down", (int)server_stop_signal);
    for (int r = 0; r < RESOURCE_COUNT; r++) {
        if (endpoints[r].register_call)
            grpc_call_cancel(endpoints[r].register_call, NULL);
        endpoint_stop(&endpoints[r].base);
    }
    if (server_drain(eps, RESOURCE_COUNT))
        return 1;
    nvml_close();
    log_info("stopped");
    return 0;
}
