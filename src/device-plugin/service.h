/* service.h - the v1beta1 DevicePlugin methods as bytes in, bytes out:
 * protobuf decoding, the allocation logic, protobuf encoding. gRPC itself
 * stays in server.c. */
#ifndef NVSHARE_DEVICE_PLUGIN_SERVICE_H
#define NVSHARE_DEVICE_PLUGIN_SERVICE_H

#include "grpc_server.h"
#include "plugin.h"

enum method {
    METHOD_OPTIONS,
    METHOD_LIST_AND_WATCH,
    METHOD_PREFERRED,
    METHOD_ALLOCATE,
    METHOD_PRE_START,
    METHOD_UNKNOWN
};

/* The method a gRPC path names, e.g. "/v1beta1.DevicePlugin/Allocate". */
enum method method_from_path(const char *path, size_t len);

/* Answers a unary method (and ListAndWatch's request) for resource r. */
void service_call(struct plugin *p, enum resource r, enum method m,
                  const unsigned char *request, size_t len, struct reply *out);

/* ListAndWatchResponse with every device of r, packed. */
void service_device_list(const struct plugin *p, enum resource r,
                         struct reply *out);

/* RegisterRequest for r, packed. */
void service_register_request(enum resource r, struct reply *out);

#endif
