/* service.h - the registration and DRA methods as bytes in, bytes out:
 * protobuf decoding, the claims' preparation, protobuf encoding. gRPC
 * itself stays in server.c. */
#ifndef NVSHARE_DRA_SERVICE_H
#define NVSHARE_DRA_SERVICE_H

#include "grpc_server.h"
#include "driver.h"

enum dra_method {
    DRA_GET_INFO,
    DRA_NOTIFY_REGISTRATION,
    DRA_PREPARE,
    DRA_UNPREPARE,
    DRA_UNKNOWN
};

/* The method a gRPC path names; v1 and v1beta1 of the DRA service alike. */
enum dra_method dra_method_from_path(const char *path, size_t len);

/* Takes a call's answer: *out is the caller's until it returns. */
typedef void dra_done_fn(void *ctx, struct reply *out);

/* Answers one unary call through done(ctx, ...): at once, or for Prepare
 * and Unprepare from the worker that ends its last claim. request is
 * read before this returns. */
void dra_service_call(struct driver *d, enum dra_method m,
                      const unsigned char *request, size_t len,
                      dra_done_fn *done, void *ctx);

#endif
