/* grpc_server.h - the gRPC C core server plumbing the device plugin and the
 * DRA driver share: one thread, one completion queue, unary calls answered
 * from bytes, unix-socket endpoints served again when kubelet deletes
 * their file, and a drain on SIGTERM. What each binary serves stays in it.
 *
 * Every operation in flight has a struct tag; its handler runs when the
 * queue reports the operation done. A call walks: request_call -> receive
 * the request -> the endpoint's answer -> rpc_finish. */
#ifndef NVSHARE_GRPC_SERVER_H
#define NVSHARE_GRPC_SERVER_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <grpc/grpc.h>
#include <grpc/status.h>
#include <protobuf-c/protobuf-c.h>

/* How often each binary's loop wakes: a deleted socket is served again
 * within a tick. */
#define SERVER_TICK_MS 100

struct tag {
    void (*handle)(struct tag *tag, bool ok);
};
#define CONTAINER_OF(ptr, type, member)                                        \
    ((type *)((char *)(ptr)-offsetof(type, member)))

/* A method's answer as bytes: the packed message, or a status and why.
 * A method starts from a zeroed reply and ends with reply_pack or
 * reply_fail, which free what reply_calloc gave it. */
struct reply {
    grpc_status_code status;
    char message[256];   /* why, when status is not OK */
    unsigned char *data; /* malloc'd packed response */
    size_t len;
    struct reply_block *scratch; /* what the answer is built in */
};

void reply_fail(struct reply *out, grpc_status_code status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void reply_pack(struct reply *out, const ProtobufCMessage *msg);
/* n zeroed items of size to build the answer in, valid until the reply is
 * packed or failed; NULL, with out failed, when memory ran out (or out
 * already failed). */
void *reply_calloc(struct reply *out, size_t n, size_t size);

struct endpoint;

/* One call. A binary that keeps more per call starts its own struct with
 * this one and names its size in the endpoint. */
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

struct endpoint {
    const char *what; /* names the endpoint in log lines */
    char path[PATH_MAX];
    size_t rpc_size;
    /* Whether the call's method is served: an unknown one is refused
     * before its request is read. */
    bool (*knows)(const struct rpc *rpc);
    /* Answers the request: rpc_finish, or keeps the call open. */
    void (*answer)(struct rpc *rpc, const unsigned char *request, size_t len);
    void (*served)(struct endpoint *ep); /* optional: the socket is new */
    grpc_server *server;
    struct tag shutdown_tag;
    bool stopping, listen_failing;
    ino_t inode;
};

extern grpc_completion_queue *server_cq;
/* Calls, and a binary's own client calls, not yet freed; changed with
 * __atomic ops, for a call may end on another thread (the DRA workers). */
extern int server_in_flight;
extern volatile sig_atomic_t server_stop_signal;

long long now_ms(void);
grpc_byte_buffer *byte_buffer_from(const unsigned char *data, size_t len);

void rpc_free(struct rpc *rpc);
/* Starts ops on the call with tag; a refused batch drops the call. */
void rpc_start_batch(struct rpc *rpc, const grpc_op *ops, size_t n,
                     struct tag *tag);
/* Answers and closes the call: the message when status is OK, else the
 * status and its sentence. */
void rpc_finish(struct rpc *rpc, const struct reply *reply, bool metadata_sent);

/* Listens on ep->path afresh; on failure the next endpoint_check retries. */
void endpoint_serve(struct endpoint *ep);
void endpoint_stop(struct endpoint *ep);
/* Serves ep again when it is down or its file was deleted or replaced;
 * true when it found the file gone. */
bool endpoint_check(struct endpoint *ep);

/* SIGTERM and SIGINT set server_stop_signal; gRPC's log goes to ours. */
void server_setup(void);
/* Runs the handler of one completed operation, waiting at most ms. */
void server_dispatch(long ms);
/* After endpoint_stop on every endpoint: waits for the calls to end,
 * removes the sockets and shuts gRPC down; nonzero when calls stayed open. */
int server_drain(struct endpoint *const *eps, int n);

#endif
