/* pb_strings.h - what protobuf-c's decoder does not check in strings;
 * shared by the device plugin and the DRA driver. */
#ifndef NVSHARE_PB_STRINGS_H
#define NVSHARE_PB_STRINGS_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

/* Whether a string field of the message (desc) in data, or of a message
 * inside it, holds a NUL byte. protobuf-c hands strings over NUL-terminated,
 * so "GPU-...-m1\0x" would decode as the valid ID "GPU-...-m1": the wire
 * bytes tell. Bytes that do not parse are the decoder's to refuse. */
bool pb_string_holds_nul(const ProtobufCMessageDescriptor *desc, const unsigned char *data,
                         size_t len);

#endif
