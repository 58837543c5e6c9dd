/* pb_strings.h - what protobuf-c's decoder does not check (NUL bytes in
 * strings), and the checks of kubelet's requests built on it; shared by the
 * device plugin and the DRA driver. */
#ifndef NVSHARE_PB_STRINGS_H
#define NVSHARE_PB_STRINGS_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

/* Whether a string field of the message (desc) in data, or of a message
 * inside it, holds a NUL byte. protobuf-c hands strings over NUL-terminated,
 * so "GPU-...-m1\0x" would decode as the valid ID "GPU-...-m1": the wire
 * bytes tell. Bytes that do not parse are the decoder's to refuse. */
bool pb_string_holds_nul(const ProtobufCMessageDescriptor *desc,
                         const unsigned char *data, size_t len);

/* Whether data decodes as the message desc, for requests whose content
 * does not matter (Empty, InfoRequest). */
bool pb_decodes(const ProtobufCMessageDescriptor *desc,
                const unsigned char *data, size_t len);

/* Why kubelet's request (desc, in data) cannot be used, or NULL: it did not
 * decode ("request does not decode"), count_flaw (the caller's objection to
 * how many items it holds, or NULL), or nul_flaw where a string of it holds
 * a NUL byte. */
const char *pb_request_flaw(bool decoded, const char *count_flaw,
                            const char *nul_flaw,
                            const ProtobufCMessageDescriptor *desc,
                            const unsigned char *data, size_t len);

#endif
