/* pb_strings.c - see pb_strings.h. */
#include "pb_strings.h"

#include <stdint.h>
#include <string.h>

/* A varint at *p, or false past end. */
static bool varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char b = *(*p)++;

        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

bool pb_string_holds_nul(const ProtobufCMessageDescriptor *desc,
                         const unsigned char *data, size_t len)
{
    const unsigned char *p = data, *end = data + len;
    uint64_t key, n;

    while (p < end) {
        if (!varint(&p, end, &key))
            return false;
        switch (key & 7) {
        case PROTOBUF_C_WIRE_TYPE_VARINT:
            if (!varint(&p, end, &n))
                return false;
            break;
        case PROTOBUF_C_WIRE_TYPE_64BIT:
        case PROTOBUF_C_WIRE_TYPE_32BIT:
            n = (key & 7) == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
            if (n > (size_t)(end - p))
                return false;
            p += n;
            break;
        case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
            const ProtobufCFieldDescriptor *f;

            if (!varint(&p, end, &n) || n > (size_t)(end - p))
                return false;
            f = key >> 3 <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(desc,
                                                              (unsigned)(key >> 3))
                    : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, n))
                return true;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                pb_string_holds_nul(f->descriptor, p, n))
                return true;
            p += n;
            break;
        }
        default:
            return false;
        }
    }
    return false;
}

const char *pb_request_flaw(bool decoded, const char *count_flaw,
                            const char *nul_flaw,
                            const ProtobufCMessageDescriptor *desc,
                            const unsigned char *data, size_t len)
{
    if (!decoded)
        return "request does not decode";
    if (count_flaw)
        return count_flaw;
    return pb_string_holds_nul(desc, data, len) ? nul_flaw : NULL;
}

bool pb_decodes(const ProtobufCMessageDescriptor *desc,
                const unsigned char *data, size_t len)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, data);

    if (!m)
        return false;
    protobuf_c_message_free_unpacked(m, NULL);
    return true;
}
