/* protocol_sample.h - a sample of every message, generated from
 * protocol.def, for the protocol's tests: test_protocol.c round-trips
 * them and fuzz_protocol.c writes them as its seed cases. A message added
 * to protocol.def gets samples the day it is added, nothing by hand.
 *
 * Static functions in a header: each test program includes it once. */
#ifndef NVSHARE_PROTOCOL_SAMPLE_H
#define NVSHARE_PROTOCOL_SAMPLE_H

#include <stdint.h>
#include <string.h>

#include "protocol.h"

/* Each message comes in three variants: typical values (distinct in each
 * field, so that two fields swapped on the wire show, with the top bit of
 * each value set), every value at its largest (strings at their longest
 * legal length, lists at their capacity, list items counting down from
 * the largest value), and all zero (empty strings and lists). */
enum { SAMPLE_TYPICAL, SAMPLE_MAX, SAMPLE_ZERO, N_SAMPLES };

/* A value for field number seed (item i of it, for a list) of a payload:
 * bytes wide, at most bound. */
static uint64_t sample_value(int variant, int bytes, uint64_t bound,
                             unsigned seed, unsigned item)
{
    uint64_t all = bytes == 8 ? UINT64_MAX : (1ull << (8 * bytes)) - 1;
    uint64_t max = bound < all ? bound : all;
    uint64_t pattern = 0x8877665544332211ull >> (64 - 8 * bytes);

    switch (variant) {
    case SAMPLE_MAX:
        return max - (max == UINT64_MAX ? item : item % (max + 1));
    case SAMPLE_ZERO:
        return 0;
    }
    if (max < all) /* a bounded field: anywhere in 1..max */
        return max ? 1 + (seed + item) % max : 0;
    return (pattern + (seed + item) * 0x0101010101010101ull) & all;
}

/* A string of the variant's length whose bytes run through 1..255. */
static void sample_str(char *dst, size_t size, int variant, unsigned seed)
{
    size_t len = variant == SAMPLE_MAX    ? size - 1
                 : variant == SAMPLE_ZERO ? 0
                                          : 1 + seed % (size - 1);

    for (size_t i = 0; i < len; i++)
        dst[i] = (char)(1 + (seed * 31 + i) % 255);
    dst[len] = '\0';
}

static uint16_t sample_count(size_t capacity, int variant, unsigned seed)
{
    if (variant == SAMPLE_MAX)
        return (uint16_t)capacity;
    return variant == SAMPLE_ZERO ? 0 : (uint16_t)(1 + seed % (capacity - 1));
}

#define SAMPLE_BYTES_U8 1
#define SAMPLE_BYTES_U16 2
#define SAMPLE_BYTES_U32 4
#define SAMPLE_BYTES_U64 8
#define SAMPLE_BYTES_I32 4
#define SAMPLE_BOUND_ANY UINT64_MAX
#define SAMPLE_BOUND_UPTO(max) ((uint64_t)(max))
#define SAMPLE_BOUND_UPTO_FIELD(field) (m->field)
#define SAMPLE_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* sample_payload_<member>(m, variant) and sample_record_<type>(m, variant,
 * seed, item) fill every row in order, so a bound's field is set first. */
#define PROTO_PAYLOAD(type, member)                                            \
    static void sample_payload_##member(struct type *m, int variant)           \
    {                                                                          \
        unsigned seed = 0, item = 0;
#define PROTO_RECORD(type)                                                     \
    static void sample_record_##type(struct type *m, int variant,              \
                                     unsigned seed, unsigned item)             \
    {
#define PROTO_END() }
#define PROTO_FIELD(kind, name, bound)                                         \
    m->name = (PROTO_CTYPE_##kind)sample_value(variant, SAMPLE_BYTES_##kind,   \
                                               SAMPLE_BOUND_##bound, seed++,   \
                                               item);
#define PROTO_STR(name, size) sample_str(m->name, size, variant, seed++);
#define PROTO_COUNT(name, list)                                                \
    m->name = sample_count(SAMPLE_NELEM(m->list), variant, seed++);
#define PROTO_LIST(kind, name, count, capacity)                                \
    for (unsigned i = 0; i < m->count; i++)                                    \
        m->name[i] = (PROTO_CTYPE_##kind)sample_value(variant,                 \
                                                      SAMPLE_BYTES_##kind,     \
                                                      UINT64_MAX, seed, i);    \
    seed++;
#define PROTO_STR_LIST(name, count, capacity, size)                            \
    for (unsigned i = 0; i < m->count; i++)                                    \
        sample_str(m->name[i], size, variant, seed + i);                       \
    seed++;
#define PROTO_RECORD_LIST(record, name, count, capacity)                       \
    for (unsigned i = 0; i < m->count; i++)                                    \
        sample_record_##record(&m->name[i], variant, seed + i, i);             \
    seed++;
#include "protocol.def"

/* A message of the given type, filled as the variant says. */
static void sample(struct msg *m, uint16_t type, int variant)
{
    memset(m, 0, sizeof(*m));
    m->type = type;
    switch (type) {
#define PROTO_MSG(name, number, payload)                                       \
    case MSG_##name:                                                           \
        sample_payload_##payload(&m->u.payload, variant);                      \
        break;
#include "protocol.def"
    default: /* no payload */
        break;
    }
}

#endif
