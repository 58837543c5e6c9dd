/* grpc_server.c - see grpc_server.h. */
#include "grpc_server.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "log.h"

#define DRAIN_TIMEOUT_S 5

grpc_completion_queue *server_cq;
int server_in_flight;
volatile sig_atomic_t server_stop_signal;

long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct reply_block {
    struct reply_block *next;
    max_align_t data[];
};

static void scratch_free(struct reply *out)
{
    while (out->scratch) {
        struct reply_block *next = out->scratch->next;

        free(out->scratch);
        out->scratch = next;
    }
}

void reply_fail(struct reply *out, grpc_status_code status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(out->message, sizeof(out->message), fmt, ap);
    va_end(ap);
    out->status = status;
    free(out->data);
    out->data = NULL;
    out->len = 0;
    scratch_free(out);
}

void reply_pack(struct reply *out, const ProtobufCMessage *msg)
{
    out->len = protobuf_c_message_get_packed_size(msg);
    out->data = malloc(out->len ? out->len : 1);
    if (!out->data) {
        reply_fail(out, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    protobuf_c_message_pack(msg, out->data);
    out->status = GRPC_STATUS_OK;
    scratch_free(out);
}

void *reply_calloc(struct reply *out, size_t n, size_t size)
{
    struct reply_block *b = NULL;

    if (out->status == GRPC_STATUS_OK &&
        (!size || n <= (SIZE_MAX - sizeof(*b)) / size))
        b = calloc(1, sizeof(*b) + n * size);
    if (!b) {
        if (out->status == GRPC_STATUS_OK)
            reply_fail(out, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    b->next = out->scratch;
    out->scratch = b;
    return b->data;
}

grpc_byte_buffer *byte_buffer_from(const unsigned char *data, size_t len)
{
    grpc_slice slice = grpc_slice_from_copied_buffer((const char *)data, len);
    grpc_byte_buffer *buf = grpc_raw_byte_buffer_create(&slice, 1);

    grpc_slice_unref(slice);
    return buf;
}

/* ---- Calls --------------------------------------------------------------- */

void rpc_free(struct rpc *rpc)
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
    __atomic_sub_fetch(&server_in_flight, 1, __ATOMIC_RELAXED);
}

void rpc_start_batch(struct rpc *rpc, const grpc_op *ops, size_t n,
                     struct tag *tag)
{
    grpc_call_error e = grpc_call_start_batch(rpc->call, ops, n, tag, NULL);

    if (e != GRPC_CALL_OK) { /* a bug, not a peer's doing: say so, stay up */
        log_error("gRPC refused a batch (error %d): dropping the call", (int)e);
        grpc_call_cancel(rpc->call, NULL);
        rpc_free(rpc);
    }
}

static void on_finished(struct tag *tag, bool ok)
{
    (void)ok;
    rpc_free(CONTAINER_OF(tag, struct rpc, step));
}

void rpc_finish(struct rpc *rpc, const struct reply *reply, bool metadata_sent)
{
    grpc_op ops[4];
    size_t n = 0;

    memset(ops, 0, sizeof(ops));
    if (!metadata_sent)
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (reply->status == GRPC_STATUS_OK) {
        rpc->response = byte_buffer_from(reply->data, reply->len);
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
    rpc_start_batch(rpc, ops, n, &rpc->step);
}

static void on_request(struct tag *tag, bool ok)
{
    struct rpc *rpc = CONTAINER_OF(tag, struct rpc, step);
    struct reply reply = {.status = GRPC_STATUS_INVALID_ARGUMENT};
    grpc_byte_buffer_reader reader;
    grpc_slice bytes;

    if (!ok || !rpc->request) {
        snprintf(reply.message, sizeof(reply.message), "no request message");
        log_warn("%s: a call without a request message", rpc->ep->what);
        rpc_finish(rpc, &reply, true);
        return;
    }
    if (!grpc_byte_buffer_reader_init(&reader, rpc->request)) {
        snprintf(reply.message, sizeof(reply.message), "request cannot be read");
        rpc_finish(rpc, &reply, true);
        return;
    }
    bytes = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    rpc->ep->answer(rpc, GRPC_SLICE_START_PTR(bytes), GRPC_SLICE_LENGTH(bytes));
    grpc_slice_unref(bytes);
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
    if (!rpc->ep->knows(rpc)) {
        struct reply reply = {.status = GRPC_STATUS_UNIMPLEMENTED};
        snprintf(reply.message, sizeof(reply.message), "no such method");
        log_warn("%s: a call of an unknown method", rpc->ep->what);
        rpc_finish(rpc, &reply, false);
        return;
    }
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &rpc->request;
    rpc->step.handle = on_request;
    rpc_start_batch(rpc, ops, 2, &rpc->step);
}

static void accept_next(struct endpoint *ep)
{
    struct rpc *rpc;

    if (ep->stopping || !ep->server)
        return;
    rpc = calloc(1, ep->rpc_size);
    if (!rpc) {
        log_error("out of memory: %s accepts no more calls", ep->what);
        return;
    }
    __atomic_add_fetch(&server_in_flight, 1, __ATOMIC_RELAXED);
    rpc->ep = ep;
    rpc->status_message = grpc_empty_slice();
    grpc_call_details_init(&rpc->details);
    grpc_metadata_array_init(&rpc->metadata);
    rpc->step.handle = on_call;
    if (grpc_server_request_call(ep->server, &rpc->call, &rpc->details,
                                 &rpc->metadata, server_cq, server_cq,
                                 &rpc->step) != GRPC_CALL_OK) {
        log_error("%s: gRPC refused to accept calls", ep->what);
        rpc_free(rpc);
    }
}

/* ---- Endpoints ----------------------------------------------------------- */

static void on_shutdown(struct tag *tag, bool ok)
{
    struct endpoint *ep = CONTAINER_OF(tag, struct endpoint, shutdown_tag);

    (void)ok;
    grpc_server_destroy(ep->server);
    ep->server = NULL;
    ep->stopping = false;
    if (!server_stop_signal)
        endpoint_serve(ep);
}

void endpoint_stop(struct endpoint *ep)
{
    if (!ep->server || ep->stopping)
        return;
    ep->stopping = true;
    grpc_server_shutdown_and_notify(ep->server, server_cq, &ep->shutdown_tag);
    grpc_server_cancel_all_calls(ep->server);
}

void endpoint_serve(struct endpoint *ep)
{
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    char address[PATH_MAX + 8];
    struct stat st;

    unlink(ep->path);
    ep->shutdown_tag.handle = on_shutdown;
    ep->server = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(ep->server, server_cq, NULL);
    snprintf(address, sizeof(address), "unix:%s", ep->path);
    if (!grpc_server_add_http2_port(ep->server, address, creds)) {
        grpc_server_credentials_release(creds);
        if (!ep->listen_failing)
            log_error("%s: cannot listen on %s (does the directory exist?); "
                      "retrying every "
                      "%d ms",
                      ep->what, ep->path, SERVER_TICK_MS);
        ep->listen_failing = true;
        grpc_server_destroy(ep->server);
        ep->server = NULL;
        return; /* endpoint_check retries */
    }
    grpc_server_credentials_release(creds);
    ep->listen_failing = false;
    grpc_server_start(ep->server);
    ep->inode = stat(ep->path, &st) == 0 ? st.st_ino : 0;
    log_info("%s: serving on %s", ep->what, ep->path);
    accept_next(ep);
    if (ep->served)
        ep->served(ep);
}

bool endpoint_check(struct endpoint *ep)
{
    struct stat st;

    if (ep->stopping)
        return false;
    if (!ep->server) {
        endpoint_serve(ep);
        return false;
    }
    if (stat(ep->path, &st) == 0 && st.st_ino == ep->inode)
        return false;
    log_info("%s: socket %s was deleted (kubelet restarted?): serving again",
             ep->what, ep->path);
    endpoint_stop(ep); /* on_shutdown serves again */
    return true;
}

/* ---- The loop ------------------------------------------------------------ */

static void on_signal(int sig)
{
    server_stop_signal = sig;
}

/* gRPC's own lines (multi-line error trees, also from its threads) become
 * debug lines: what matters is in the binary's own one-line errors. */
static void grpc_log(gpr_log_func_args *args)
{
    log_debug("gRPC %s:%d: %.300s", args->file, args->line, args->message);
}

void server_setup(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    gpr_set_log_function(grpc_log);
    grpc_init();
    server_cq = grpc_completion_queue_create_for_next(NULL);
}

void server_dispatch(long ms)
{
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(ms, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(server_cq, deadline, NULL);

    if (ev.type == GRPC_OP_COMPLETE) {
        struct tag *tag = ev.tag;
        tag->handle(tag, ev.success != 0);
    }
}

static bool busy(struct endpoint *const *eps, int n)
{
    if (server_in_flight > 0)
        return true;
    for (int e = 0; e < n; e++)
        if (eps[e]->server)
            return true;
    return false;
}

int server_drain(struct endpoint *const *eps, int n)
{
    long long drain_until = now_ms() + DRAIN_TIMEOUT_S * 1000;

    while (busy(eps, n) && now_ms() < drain_until)
        server_dispatch(SERVER_TICK_MS);
    for (int e = 0; e < n; e++)
        unlink(eps[e]->path);
    if (busy(eps, n)) {
        log_error("%d calls still open after %d s: exiting without a clean "
                  "gRPC shutdown",
                  server_in_flight, DRAIN_TIMEOUT_S);
        return 1;
    }
    grpc_completion_queue_shutdown(server_cq);
    while (grpc_completion_queue_next(server_cq,
                                      gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
               .type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(server_cq);
    grpc_shutdown_blocking();
    return 0;
}
