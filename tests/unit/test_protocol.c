/* test_protocol.c - the wire protocol: round trips of every message, exact
 * rejection codes for malformed bodies, frame_reader reassembly and the
 * blocking socket helpers.
 *
 * Malformed bodies are built byte by byte with the small builder below,
 * which knows the wire format independently of protocol.c; a golden-bytes
 * test pins the format itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"
#include "protocol_sample.h"

/* Every type that has an encoding; the reserved types have none. */
static const uint16_t all_types[] = {
#define PROTO_MSG(name, number, payload) MSG_##name,
#define PROTO_MSG_EMPTY(name, number) MSG_##name,
#include "protocol.def"
};
#define N_TYPES (sizeof(all_types) / sizeof(all_types[0]))

/* ---- field-by-field equality, from protocol.def -------------------------- */

static void assert_same(const char *field, uint64_t a, uint64_t b)
{
    if (a != b)
        fail_msg("%s: %" PRIu64 " != %" PRIu64, field, a, b);
}

#define PROTO_PAYLOAD(type, member)                                            \
    static void equal_payload_##member(const struct type *x,                   \
                                       const struct type *y)                   \
    {
#define PROTO_RECORD(type)                                                      \
    static void equal_record_##type(const struct type *x, const struct type *y) \
    {
#define PROTO_END() }
#define PROTO_FIELD(kind, name, bound)                                         \
    assert_same(#name, (uint64_t)x->name, (uint64_t)y->name);
#define PROTO_STR(name, size) assert_string_equal(x->name, y->name);
#define PROTO_COUNT(name, list) assert_same(#name, x->name, y->name);
#define PROTO_LIST(kind, name, count, capacity)                                \
    for (size_t i = 0; i < x->count; i++)                                      \
        assert_same(#name, x->name[i], y->name[i]);
#define PROTO_STR_LIST(name, count, capacity, size)                            \
    for (size_t i = 0; i < x->count; i++)                                      \
        assert_string_equal(x->name[i], y->name[i]);
#define PROTO_RECORD_LIST(record, name, count, capacity)                       \
    for (size_t i = 0; i < x->count; i++)                                      \
        equal_record_##record(&x->name[i], &y->name[i]);
#include "protocol.def"

/* Every field the type carries is equal. */
static void assert_msg_equal(const struct msg *a, const struct msg *b)
{
    assert_int_equal(a->type, b->type);
    switch (a->type) {
#define PROTO_MSG(name, number, payload)                                       \
    case MSG_##name:                                                           \
        equal_payload_##payload(&a->u.payload, &b->u.payload);                 \
        break;
#include "protocol.def"
    default: /* no payload */
        break;
    }
}

static uint8_t frame[PROTO_MAX_FRAME + 4];

/* Encodes a sample into the file-wide frame buffer; returns its length. */
static int encode_sample(uint16_t type, int variant, struct msg *m)
{
    int len;

    sample(m, type, variant);
    len = msg_encode(m, frame, sizeof(frame));
    assert_true(len >= PROTO_HEADER_LEN);
    return len;
}

/* ---- a byte builder that knows the wire format on its own --------------- */

struct bb {
    uint8_t b[2 * PROTO_MAX_FRAME]; /* room for a 0xffff-byte string */
    size_t n;
};

static void bb_uint(struct bb *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        b->b[b->n++] = (uint8_t)(v >> (8 * i));
}

static void bb_u8(struct bb *b, uint64_t v)
{
    bb_uint(b, v, 1);
}
static void bb_u16(struct bb *b, uint64_t v)
{
    bb_uint(b, v, 2);
}
static void bb_u32(struct bb *b, uint64_t v)
{
    bb_uint(b, v, 4);
}
static void bb_u64(struct bb *b, uint64_t v)
{
    bb_uint(b, v, 8);
}

/* A string of n bytes taken from s (which may hold NULs). */
static void bb_raw_str(struct bb *b, const char *s, size_t n)
{
    bb_u16(b, n);
    memcpy(b->b + b->n, s, n);
    b->n += n;
}

/* A string of n letters. */
static void bb_str_n(struct bb *b, size_t n)
{
    bb_u16(b, n);
    for (size_t i = 0; i < n; i++)
        b->b[b->n++] = 'x';
}

static void bb_head(struct bb *b, uint16_t version, uint16_t type)
{
    b->n = 0;
    bb_u16(b, version);
    bb_u16(b, type);
}

/* A REGISTER body with the given namespace length, core limit, oversub
 * setting and count; writes min(count, uuids) UUIDs. */
static void bb_register_ov(struct bb *b, size_t ns_len, uint8_t core,
                           uint8_t oversub, uint16_t count, int uuids)
{
    bb_head(b, PROTO_VERSION, MSG_REGISTER);
    bb_u32(b, 1);
    bb_str_n(b, ns_len);
    bb_str_n(b, 3);
    bb_str_n(b, 0);
    bb_str_n(b, 0); /* job_id */
    bb_u64(b, 0);
    bb_u8(b, core);
    bb_u8(b, oversub);
    bb_u16(b, count);
    for (int i = 0; i < uuids && i < count; i++)
        bb_str_n(b, 10);
    if (uuids >= count)
        bb_u8(b, PRIORITY_LOW); /* priority; else the caller ends the list */
}

static void bb_register(struct bb *b, size_t ns_len, uint8_t core,
                        uint16_t count, int uuids)
{
    bb_register_ov(b, ns_len, core, OVERSUB_NODE_DEFAULT, count, uuids);
}

/* A STATUS_GPU body in the given mode with n_running running ids and
 * n_waiting waiters (written as given, even past the limit), every waiter
 * with reason except the last, which has last_reason. */
static void bb_status_gpu(struct bb *b, uint8_t mode, uint16_t n_running,
                          uint16_t n_waiting, uint8_t reason, uint8_t last_reason)
{
    bb_head(b, PROTO_VERSION, MSG_CTL_STATUS_GPU);
    bb_u16(b, 0);   /* index */
    bb_str_n(b, 5); /* uuid */
    bb_str_n(b, 5); /* name */
    bb_u64(b, 0);   /* memory_total */
    bb_u8(b, mode);
    bb_u64(b, 0);            /* reserve */
    bb_u64(b, 0);            /* running_footprint */
    bb_u64(b, 0);            /* resident */
    bb_u64(b, 0);            /* switch_time_ns */
    bb_u8(b, 1);             /* switch_measured */
    bb_u64(b, 0);            /* tq_ns */
    bb_u8(b, QUANTUM_DRAIN); /* tq_reason */
    bb_u64(b, 0);            /* handover_mean_ns */
    bb_u64(b, 0);            /* switches */
    for (int i = 0; i < 8; i++)
        bb_u64(b, 0); /* swaps_out .. last_swap_in_ns */
    bb_u16(b, n_running);
    for (int i = 0; i < n_running; i++)
        bb_u64(b, (uint64_t)i + 1);
    bb_u16(b, n_waiting);
    bb_u32(b, 0); /* truncated_waiting */
    for (int i = 0; i < n_waiting; i++) {
        bb_u64(b, (uint64_t)i + 1000);
        bb_u8(b, i + 1 == n_waiting ? last_reason : reason);
    }
}

static void bb_status_client_mem(struct bb *b, uint8_t state, uint8_t core,
                                 uint8_t source, uint8_t mem_source,
                                 uint8_t wait_reason, uint64_t footprint,
                                 uint64_t evictable)
{
    bb_head(b, PROTO_VERSION, MSG_CTL_STATUS_CLIENT);
    bb_u64(b, 1);
    bb_u32(b, 2);
    bb_str_n(b, 1);
    bb_str_n(b, 1);
    bb_str_n(b, 1);
    bb_u16(b, 0);
    bb_u8(b, state);
    bb_u64(b, 0); /* held_ns */
    bb_u64(b, 0); /* wait_ns */
    bb_u64(b, 0); /* grants */
    bb_u64(b, 0); /* last_drain_ns */
    bb_u64(b, 0); /* last_preempt_ns */
    bb_u8(b, core);
    bb_u8(b, source);
    bb_u64(b, 0);         /* budget_ns */
    bb_u64(b, 0);         /* used_ns */
    bb_u8(b, 1);          /* throttled */
    bb_u64(b, 0);         /* mem_quota */
    bb_u8(b, mem_source); /* mem_quota_source */
    bb_u64(b, 0);         /* mem_allocated */
    bb_u64(b, 0);         /* pod_mem_held */
    bb_u64(b, 0);         /* pod_mem_peak */
    bb_u64(b, 0);         /* pod_mem_refused */
    bb_u64(b, footprint);
    bb_u64(b, evictable);
    bb_u8(b, 1);       /* oversubscribed */
    bb_u8(b, 0);       /* swapped_out */
    bb_u16(b, 0xffff); /* load_permille: not measured */
    bb_u8(b, wait_reason);
    bb_u32(b, 1000); /* uid */
    bb_u8(b, POD_SOURCE_CGROUP);
    bb_str_n(b, 36);            /* pod_uid */
    bb_str_n(b, 64);            /* container_id */
    bb_u8(b, PRIORITY_HIGH);    /* priority */
    bb_u8(b, LIMIT_RUNTIME);    /* priority_source */
    bb_u8(b, 10);               /* min_share */
    bb_u32(b, 1);               /* gang */
    bb_u8(b, IDLE_SWAP_OFF);    /* idle_swap */
    bb_u8(b, LIMIT_ANNOTATION); /* idle_swap_source */
    bb_u64(b, 1 << 20);         /* resident */
    bb_u64(b, 2 << 20);         /* parked */
    bb_u64(b, 3000000000ull);   /* idle_ns */
    bb_u64(b, 4);               /* swap_outs */
    bb_u64(b, 3);               /* swap_ins */
    bb_u64(b, 500000000ull);    /* swap_in_wait_ns */
    bb_str_n(b, 40);            /* wait_why */
    bb_str_n(b, 36);            /* group */
}

static void bb_status_client_full(struct bb *b, uint8_t state, uint8_t core,
                                  uint8_t source, uint8_t mem_source,
                                  uint8_t wait_reason)
{
    bb_status_client_mem(b, state, core, source, mem_source, wait_reason, 0, 0);
}

static void bb_status_client_wr(struct bb *b, uint8_t state, uint8_t core,
                                uint8_t source, uint8_t wait_reason)
{
    bb_status_client_full(b, state, core, source, LIMIT_NONE, wait_reason);
}

static void bb_status_client(struct bb *b, uint8_t state, uint8_t core,
                             uint8_t source)
{
    bb_status_client_wr(b, state, core, source, WAIT_NONE);
}

/* EVICT, PREPARE_SWAP or SWAPPED with the given direction. */
static void bb_swap(struct bb *b, uint16_t type, uint8_t direction)
{
    bb_head(b, PROTO_VERSION, type);
    bb_u8(b, 0);
    bb_u8(b, direction);
    bb_u64(b, 1 << 20);
    bb_u64(b, 1000);
}

static void bb_load(struct bb *b, uint16_t busy_permille)
{
    bb_head(b, PROTO_VERSION, MSG_LOAD);
    bb_u8(b, 0);
    bb_u16(b, busy_permille);
    bb_u64(b, 500000000);
}

/* MEM_UPDATE with the given allocated and evictable bytes. */
static void bb_mem_update(struct bb *b, uint64_t allocated, uint64_t evictable)
{
    bb_head(b, PROTO_VERSION, MSG_MEM_UPDATE);
    bb_u8(b, 0);
    bb_u32(b, 0); /* seq */
    bb_u64(b, 0); /* bytes */
    bb_u64(b, 0); /* extra */
    bb_u64(b, allocated);
    bb_u64(b, evictable);
    bb_u64(b, 0); /* quota */
    bb_u64(b, 0); /* pod_held */
}

static int decode_bb(const struct bb *b)
{
    static struct msg m;

    return msg_decode(b->b, b->n, &m);
}

/* ---- round trips ---------------------------------------------------------- */

/* How many types the codec encodes, found by asking it about every number
 * rather than from protocol.def, which the samples come from. */
static size_t codec_types(void)
{
    static uint8_t buf[PROTO_MAX_FRAME + 4];
    size_t n = 0;

    for (uint32_t type = 0; type <= UINT16_MAX; type++) {
        struct msg m = {.type = (uint16_t)type};

        if (msg_encode(&m, buf, sizeof(buf)) != PROTO_E_TYPE)
            n++;
    }
    return n;
}

static void test_round_trip_every_type(void **state)
{
    size_t tried = 0;

    (void)state;
    for (int variant = 0; variant < N_SAMPLES; variant++) {
        for (size_t t = 0; t < N_TYPES; t++) {
            struct msg in, out;
            int len = encode_sample(all_types[t], variant, &in);
            uint32_t body = (uint32_t)frame[0] | (uint32_t)frame[1] << 8 |
                            (uint32_t)frame[2] << 16 | (uint32_t)frame[3] << 24;

            assert_int_equal(body, (uint32_t)len - 4);
            memset(&out, 0xa5, sizeof(out));
            assert_int_equal(msg_decode(frame + 4, (size_t)len - 4, &out),
                             PROTO_OK);
            assert_msg_equal(&in, &out);
            tried++;
        }
    }
    /* every message, the day it is added to protocol.def */
    printf("round trip: %zu types x %d variants\n", N_TYPES, N_SAMPLES);
    assert_int_equal(N_TYPES, codec_types());
    assert_int_equal(tried, N_TYPES * N_SAMPLES);
}

/* Re-encoding what was decoded gives the same bytes: the encoding is
 * canonical, which is what the fuzz target relies on. */
static void test_encoding_is_canonical(void **state)
{
    static uint8_t again[PROTO_MAX_FRAME + 4];

    (void)state;
    for (int variant = 0; variant < N_SAMPLES; variant++) {
        for (size_t t = 0; t < N_TYPES; t++) {
            struct msg in, out;
            int len = encode_sample(all_types[t], variant, &in);

            assert_int_equal(msg_decode(frame + 4, (size_t)len - 4, &out), 0);
            assert_int_equal(msg_encode(&out, again, sizeof(again)), len);
            assert_memory_equal(frame, again, (size_t)len);
        }
    }
}

/* Pins the byte layout: little-endian length, version, type, fields. */
static void test_golden_bytes(void **state)
{
    static const uint8_t lock_ok[] = {
        25,          0,    0,    0,                            /* body length */
        1,           0,                                        /* version */
        MSG_LOCK_OK, 0,                                        /* type */
        3,                                                     /* gpu */
        0x04,        0x03, 0x02, 0x01,                         /* lease */
        0x88,        0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* drain_ns */
        0x98,        0x97, 0x96, 0x95, 0x94, 0x93, 0x92, 0x91, /* at_ns */
    };
    static const uint8_t reply[] = {
        12, 0,    0,    0,    1,    0, MSG_CTL_REPLY,
        0,  0xfe, 0xff, 0xff, 0xff, /* status -2 */
        2,  0,    'o',  'k',        /* string: u16 length, bytes, no NUL */
    };
    struct msg m = {.type = MSG_LOCK_OK};
    uint8_t buf[64];

    (void)state;
    m.u.lock.gpu = 3;
    m.u.lock.lease = 0x01020304;
    m.u.lock.drain_ns = 0x1122334455667788ull;
    m.u.lock.at_ns = 0x9192939495969798ull;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), sizeof(lock_ok));
    assert_memory_equal(buf, lock_ok, sizeof(lock_ok));

    memset(&m, 0, sizeof(m));
    m.type = MSG_CTL_REPLY;
    m.u.reply.status = -2;
    strcpy(m.u.reply.text, "ok");
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), sizeof(reply));
    assert_memory_equal(buf, reply, sizeof(reply));

    static const uint8_t swapped[] = {
        22,      0,    0,    0,    1,    0,    30,   0,    /* SWAPPED = 30 */
        2,                                                 /* gpu */
        SWAP_IN,                                           /* direction */
        0x08,    0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* bytes */
        0x18,    0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, /* duration_ns */
    };
    memset(&m, 0, sizeof(m));
    m.type = MSG_SWAPPED;
    m.u.swap.gpu = 2;
    m.u.swap.direction = SWAP_IN;
    m.u.swap.bytes = 0x0102030405060708ull;
    m.u.swap.duration_ns = 0x1112131415161718ull;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), sizeof(swapped));
    assert_memory_equal(buf, swapped, sizeof(swapped));

    static const uint8_t load[] = {
        15,   0,    0,    0,    1,    0,    31,   0,    /* LOAD = 31 */
        1,                                              /* gpu */
        0xe8, 0x03,                                     /* busy_permille */
        0x00, 0x65, 0xcd, 0x1d, 0x00, 0x00, 0x00, 0x00, /* span_ns 500 ms */
    };
    memset(&m, 0, sizeof(m));
    m.type = MSG_LOAD;
    m.u.load.gpu = 1;
    m.u.load.busy_permille = 1000;
    m.u.load.span_ns = 500000000ull;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), sizeof(load));
    assert_memory_equal(buf, load, sizeof(load));

    static const uint8_t wait[] = {
        37, 0, 0, 0, 1, 0, 21, 0, /* WAIT_FOR_MEM = 21 */
        0,                        /* gpu */
        1,  0, 0, 0, 0, 0, 0,  0, /* need */
        2,  0, 0, 0, 0, 0, 0,  0, /* free */
        3,  0, 0, 0, 0, 0, 0,  0, /* limit */
        4,  0, 0, 0, 0, 0, 0,  0, /* wait_ns */
    };
    memset(&m, 0, sizeof(m));
    m.type = MSG_WAIT_FOR_MEM;
    m.u.wait = (struct msg_wait){0, 1, 2, 3, 4};
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), sizeof(wait));
    assert_memory_equal(buf, wait, sizeof(wait));

    memset(&m, 0, sizeof(m));
    m.type = MSG_SCHED_ON;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_HEADER_LEN);
    assert_memory_equal(buf, ((uint8_t[]){4, 0, 0, 0, 1, 0, MSG_SCHED_ON, 0}),
                        PROTO_HEADER_LEN);
}

/* Type numbers and enum values are wire values: pin them. */
static void test_wire_numbers(void **state)
{
    (void)state;
    assert_int_equal(MSG_REFUSED, 10);
    assert_int_equal(MSG_MEM_UPDATE, 20);
    assert_int_equal(MSG_WAIT_FOR_MEM, 21);
    assert_int_equal(MSG_MEM_AVAILABLE, 22);
    assert_int_equal(MSG_UPDATE_LIMIT, 23);
    assert_int_equal(MSG_UPDATE_CORE_LIMIT, 24);
    assert_int_equal(MSG_MEM_RESERVE, 25);
    assert_int_equal(MSG_MEM_RECLAIM, 28);
    assert_int_equal(MSG_EVICT, 29);
    assert_int_equal(MSG_SWAPPED, 30);
    assert_int_equal(MSG_LOAD, 31);
    assert_int_equal(MSG_PREPARE_SWAP, 32);
    assert_int_equal(MSG_UPDATE_YIELD, 33);
    assert_int_equal(MSG_CTL_STATUS, 100);
    assert_int_equal(MSG_CTL_STATUS_END, 106);
    assert_int_equal(MSG_CTL_STATUS_UNHOOKED, 107);
    assert_int_equal(IDENTITY_POD, 2);
    assert_int_equal(POD_QOS_BESTEFFORT, 3);
    assert_int_equal(MSG_CTL_SET, 111);
    assert_int_equal(MSG_CTL_RESET, 112);
    assert_int_equal(MSG_CTL_STATUS_SETTING, 109);
    assert_int_equal(MSG_CTL_STATUS_WITH_SETTINGS, 113);
    assert_int_equal(SETTING_SOURCE_DEFAULT, 0);
    assert_int_equal(SETTING_SOURCE_ENV, 1);
    assert_int_equal(SETTING_SOURCE_STATE_FILE, 2);
    assert_int_equal(SETTING_SOURCE_RUNTIME, 3);
    assert_int_equal(SWAP_OUT, 1);
    assert_int_equal(SWAP_IN, 2);
    assert_int_equal(SCHED_MODE_SERIAL, 0);
    assert_int_equal(SCHED_MODE_CONCURRENT, 1);
    assert_int_equal(SCHED_MODE_AUTO, 2);
    assert_int_equal(OVERSUB_OFF, 0);
    assert_int_equal(OVERSUB_ON, 1);
    assert_int_equal(OVERSUB_NODE_DEFAULT, 2);
    assert_int_equal(WAIT_NONE, 0);
    assert_int_equal(WAIT_LOCK, 1);
    assert_int_equal(WAIT_MEMORY, 2);
    assert_int_equal(WAIT_THROTTLED, 3);
    assert_int_equal(WAIT_PRIORITY, 4);
}

/* Every setting's name travels unchanged: the protocol does not judge
 * names or values, the scheduler does. */
static void test_ctl_set_names(void **state)
{
    static const char *const names[] = {"tq",         "anti-thrash",
                                        "core-limit", "memory-limit",
                                        "mode",       "switch-time"};
    static const uint64_t values[] = {30000000000ull,  1, 50, 4ull << 30,
                                      SCHED_MODE_AUTO, 0};
    uint8_t buf[1024];

    (void)state;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct msg in = {.type = MSG_CTL_SET}, out;
        int len;

        strcpy(in.u.set.name, names[i]);
        in.u.set.value = values[i];
        strcpy(in.u.set.target, !strcmp(names[i], "mode") ? "GPU-0" : "");
        len = msg_encode(&in, buf, sizeof(buf));
        assert_true(len > PROTO_HEADER_LEN);
        assert_int_equal(msg_decode(buf + 4, (size_t)len - 4, &out), PROTO_OK);
        assert_msg_equal(&in, &out);
    }
}

/* ---- rejection ------------------------------------------------------------ */

static void test_every_prefix_is_short(void **state)
{
    (void)state;
    for (int variant = 0; variant < N_SAMPLES; variant++) {
        for (size_t t = 0; t < N_TYPES; t++) {
            struct msg in, out;
            int len = encode_sample(all_types[t], variant, &in);

            for (size_t k = 0; k < (size_t)len - 4; k++) {
                int rc = msg_decode(frame + 4, k, &out);
                if (rc != PROTO_E_SHORT)
                    fail_msg("%s (variant %d): prefix of %zu of %d bytes gave "
                             "%d",
                             msg_type_name(all_types[t]), variant, k, len - 4,
                             rc);
            }
        }
    }
}

static void test_wrong_version(void **state)
{
    static const uint16_t versions[] = {0, 2, PROTO_VERSION + 1, 0x0100, 0xffff};

    (void)state;
    for (size_t t = 0; t < N_TYPES; t++) {
        struct msg in, out;
        int len = encode_sample(all_types[t], SAMPLE_TYPICAL, &in);

        for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++) {
            frame[4] = (uint8_t)versions[v];
            frame[5] = (uint8_t)(versions[v] >> 8);
            assert_int_equal(msg_decode(frame + 4, (size_t)len - 4, &out),
                             PROTO_E_VERSION);
        }
    }
}

static void test_unknown_type(void **state)
{
    /* MSG_UPDATE_YIELD + 1 (34) is the first unused client-socket number */
    static const uint16_t bad[] = {
        0,      MSG_DRAIN_TO + 1,
        19,     MSG_UPDATE_YIELD + 1,
        99,     MSG_CTL_STATUS_UNHOOKED + 1,
        0x0101, 0xffff,
    };
    struct bb b;
    struct msg m;
    uint8_t buf[64];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bb_head(&b, PROTO_VERSION, bad[i]);
        assert_int_equal(decode_bb(&b), PROTO_E_TYPE);
        bb_u64(&b, 0); /* with some payload as well */
        assert_int_equal(decode_bb(&b), PROTO_E_TYPE);
        memset(&m, 0, sizeof(m));
        m.type = bad[i];
        assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_TYPE);
        assert_string_equal(msg_type_name(bad[i]), "UNKNOWN");
    }
}

static void test_trailing_bytes(void **state)
{
    (void)state;
    for (int variant = 0; variant < N_SAMPLES; variant++) {
        for (size_t t = 0; t < N_TYPES; t++) {
            struct msg in, out;
            int len = encode_sample(all_types[t], variant, &in);

            frame[len] = 0;
            frame[len + 1] = 0;
            assert_int_equal(msg_decode(frame + 4, (size_t)len - 3, &out),
                             PROTO_E_TRAILING);
            assert_int_equal(msg_decode(frame + 4, (size_t)len - 2, &out),
                             PROTO_E_TRAILING);
        }
    }
}

static void test_string_too_long(void **state)
{
    struct bb b;
    struct msg m;
    uint8_t buf[2048];

    (void)state;
    /* decode: PROTO_NAME_MAX - 1 bytes fit, PROTO_NAME_MAX do not */
    bb_register(&b, PROTO_NAME_MAX - 1, 0, 0, 0);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_register(&b, PROTO_NAME_MAX, 0, 0, 0);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_register(&b, 0xffff, 0, 0, 0); /* longer than the body itself */
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    /* a UUID at its limit and one past it */
    bb_register(&b, 1, 0, 1, 0);
    bb_str_n(&b, PROTO_UUID_MAX - 1);
    bb_u8(&b, 0);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_register(&b, 1, 0, 1, 0);
    bb_str_n(&b, PROTO_UUID_MAX);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    /* CTL_REPLY text has its own, larger limit */
    bb_head(&b, PROTO_VERSION, MSG_CTL_REPLY);
    bb_u32(&b, 0);
    bb_str_n(&b, PROTO_TEXT_MAX - 1);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_head(&b, PROTO_VERSION, MSG_CTL_REPLY);
    bb_u32(&b, 0);
    bb_str_n(&b, PROTO_TEXT_MAX);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    /* encode: a field with no NUL in its array is refused, not overread */
    sample(&m, MSG_REGISTER, SAMPLE_TYPICAL);
    memset(m.u.reg.pod_name, 'p', sizeof(m.u.reg.pod_name));
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
    sample(&m, MSG_CTL_STATUS_GPU, SAMPLE_TYPICAL);
    memset(m.u.gpu.uuid, 'u', sizeof(m.u.gpu.uuid));
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
    sample(&m, MSG_CTL_REPLY, SAMPLE_TYPICAL);
    memset(m.u.reply.text, 't', sizeof(m.u.reply.text));
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
}

static void test_embedded_nul(void **state)
{
    struct bb b;

    (void)state;
    bb_head(&b, PROTO_VERSION, MSG_CTL_SET);
    bb_raw_str(&b, "tq", 2);
    bb_u64(&b, 1);
    bb_raw_str(&b, "ab\0cd", 5);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    bb_head(&b, PROTO_VERSION, MSG_CTL_SET);
    bb_raw_str(&b, "tq", 2);
    bb_u64(&b, 1);
    bb_raw_str(&b, "abcd\0", 5); /* a trailing NUL counts too */
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    bb_head(&b, PROTO_VERSION, MSG_CTL_SET);
    bb_raw_str(&b, "tq", 2);
    bb_u64(&b, 1);
    bb_raw_str(&b, "abcd", 4);
    assert_int_equal(decode_bb(&b), PROTO_OK);

    /* in a list item */
    bb_register(&b, 1, 0, 1, 0);
    bb_raw_str(&b, "GPU-\0", 5);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
}

static void test_list_count_over_limit(void **state)
{
    struct bb b;
    struct msg m;
    uint8_t buf[PROTO_MAX_FRAME];

    (void)state;
    bb_register(&b, 1, 0, PROTO_MAX_GPUS, PROTO_MAX_GPUS);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_register(&b, 1, 0, PROTO_MAX_GPUS + 1, PROTO_MAX_GPUS + 1);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_register(&b, 1, 0, 0xffff, 0);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    bb_head(&b, PROTO_VERSION, MSG_REGISTER_OK);
    bb_u64(&b, 1);
    bb_u8(&b, 1);
    bb_u8(&b, 1); /* oversub_default */
    bb_u16(&b, PROTO_MAX_GPUS);
    for (int i = 0; i < PROTO_MAX_GPUS; i++)
        bb_u8(&b, 1);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_head(&b, PROTO_VERSION, MSG_REGISTER_OK);
    bb_u64(&b, 1);
    bb_u8(&b, 1);
    bb_u8(&b, 1);
    bb_u16(&b, PROTO_MAX_GPUS + 1);
    for (int i = 0; i < PROTO_MAX_GPUS + 1; i++)
        bb_u8(&b, 1);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    /* STATUS_GPU: running and waiting lists, each up to the limit */
    bb_status_gpu(&b, SCHED_MODE_SERIAL, PROTO_MAX_WAITERS, PROTO_MAX_WAITERS,
                  WAIT_LOCK, WAIT_LOCK);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_status_gpu(&b, SCHED_MODE_SERIAL, 0, PROTO_MAX_WAITERS + 1, WAIT_LOCK,
                  WAIT_LOCK);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_status_gpu(&b, SCHED_MODE_SERIAL, PROTO_MAX_WAITERS + 1, 0, WAIT_LOCK,
                  WAIT_LOCK);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    /* the encoder refuses the same counts */
    sample(&m, MSG_REGISTER, SAMPLE_TYPICAL);
    m.u.reg.n_gpus = PROTO_MAX_GPUS + 1;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
    sample(&m, MSG_REGISTER_OK, SAMPLE_TYPICAL);
    m.u.reg_ok.n_gpus = PROTO_MAX_GPUS + 1;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
    sample(&m, MSG_CTL_STATUS_GPU, SAMPLE_TYPICAL);
    m.u.gpu.n_waiting = PROTO_MAX_WAITERS + 1;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
    sample(&m, MSG_CTL_STATUS_GPU, SAMPLE_TYPICAL);
    m.u.gpu.n_running = PROTO_MAX_WAITERS + 1;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
}

static void test_core_limit_over_100(void **state)
{
    struct bb b;

    (void)state;
    bb_register(&b, 1, 0, 0, 0);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_register(&b, 1, 100, 0, 0);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_register(&b, 1, 101, 0, 0);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_register(&b, 1, 255, 0, 0);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
}

static void test_client_state_out_of_range(void **state)
{
    struct bb b;

    (void)state;
    for (int s = CLIENT_IDLE; s <= CLIENT_DRAINING; s++) {
        bb_status_client(&b, (uint8_t)s, 0, LIMIT_NONE);
        assert_int_equal(decode_bb(&b), PROTO_OK);
    }
    bb_status_client(&b, CLIENT_DRAINING + 1, 0, LIMIT_NONE);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_status_client(&b, 0xff, 0, LIMIT_NONE);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
}

/* STATUS_CLIENT's core_limit, limit_source and mem_quota_source are
 * range-checked too. */
static void test_client_limit_fields_out_of_range(void **state)
{
    struct bb b;

    (void)state;
    bb_status_client(&b, CLIENT_HOLDING, 100, LIMIT_RUNTIME);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_status_client(&b, CLIENT_HOLDING, 101, LIMIT_DECLARED);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_status_client(&b, CLIENT_HOLDING, 50, LIMIT_REQUEST + 1);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_status_client_full(&b, CLIENT_HOLDING, 50, LIMIT_DECLARED, LIMIT_RUNTIME,
                          WAIT_NONE);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_status_client_full(&b, CLIENT_HOLDING, 50, LIMIT_DECLARED,
                          LIMIT_REQUEST + 1, WAIT_NONE);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
}

/* ---- range checks of the memory-aware scheduling fields ---------------- */

/* REGISTER's oversub is an enum oversub_setting: 0-2. */
static void test_oversub_out_of_range(void **state)
{
    struct bb b;
    struct msg m;
    uint8_t buf[8192];

    (void)state;
    for (int v = OVERSUB_OFF; v <= OVERSUB_NODE_DEFAULT; v++) {
        bb_register_ov(&b, 1, 50, (uint8_t)v, 1, 1);
        assert_int_equal(decode_bb(&b), PROTO_OK);
    }
    bb_register_ov(&b, 1, 50, 3, 1, 1);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_register_ov(&b, 1, 50, 0xff, 1, 1);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    sample(&m, MSG_REGISTER, SAMPLE_TYPICAL);
    m.u.reg.oversub = 3;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
}

/* EVICT, PREPARE_SWAP and SWAPPED carry 0 (EVICT, PREPARE_SWAP), SWAP_OUT
 * or SWAP_IN. */
static void test_swap_direction_out_of_range(void **state)
{
    static const uint16_t types[] = {MSG_EVICT, MSG_PREPARE_SWAP, MSG_SWAPPED};
    struct bb b;
    struct msg m;
    uint8_t buf[256];

    (void)state;
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        for (int d = 0; d <= SWAP_IN; d++) {
            bb_swap(&b, types[t], (uint8_t)d);
            assert_int_equal(decode_bb(&b), PROTO_OK);
        }
        bb_swap(&b, types[t], 3);
        assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
        bb_swap(&b, types[t], 0xff);
        assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

        sample(&m, types[t], SAMPLE_TYPICAL);
        m.u.swap.direction = 3;
        assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
    }
}

/* A memory message's evictable bytes are part of its allocated bytes, and a
 * status record's evictable bytes part of its footprint. */
static void test_evictable_over_total(void **state)
{
    static const uint16_t types[] = {MSG_MEM_UPDATE, MSG_MEM_RESERVE,
                                     MSG_MEM_RETURN};
    struct bb b;
    struct msg m;
    uint8_t buf[2048];

    (void)state;
    bb_mem_update(&b, 6ull << 30, 6ull << 30);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_mem_update(&b, 6ull << 30, 0);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_mem_update(&b, 6ull << 30, (6ull << 30) + 1);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    for (size_t t = 0; t < 3; t++) {
        sample(&m, types[t], SAMPLE_TYPICAL);
        m.u.mem.evictable = m.u.mem.allocated + 1;
        assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
    }

    bb_status_client_mem(&b, CLIENT_IDLE, 0, LIMIT_NONE, LIMIT_NONE, WAIT_NONE,
                         7ull << 30, 7ull << 30);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_status_client_mem(&b, CLIENT_IDLE, 0, LIMIT_NONE, LIMIT_NONE, WAIT_NONE,
                         7ull << 30, (7ull << 30) + 1);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    sample(&m, MSG_CTL_STATUS_CLIENT, SAMPLE_TYPICAL);
    m.u.client.evictable = m.u.client.footprint + 1;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
}

/* LOAD's busy_permille is 0-1000. */
static void test_load_permille_out_of_range(void **state)
{
    struct bb b;
    struct msg m;
    uint8_t buf[256];

    (void)state;
    bb_load(&b, 0);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_load(&b, 1000);
    assert_int_equal(decode_bb(&b), PROTO_OK);
    bb_load(&b, 1001);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_load(&b, 0xffff);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    sample(&m, MSG_LOAD, SAMPLE_TYPICAL);
    m.u.load.busy_permille = 1001;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
}

/* STATUS_GPU's mode is an enum sched_mode: 0-2. */
static void test_status_gpu_mode_out_of_range(void **state)
{
    struct bb b;
    struct msg m;
    uint8_t buf[PROTO_MAX_FRAME];

    (void)state;
    for (int mode = SCHED_MODE_SERIAL; mode <= SCHED_MODE_AUTO; mode++) {
        bb_status_gpu(&b, (uint8_t)mode, 1, 1, WAIT_LOCK, WAIT_LOCK);
        assert_int_equal(decode_bb(&b), PROTO_OK);
    }
    bb_status_gpu(&b, 3, 1, 1, WAIT_LOCK, WAIT_LOCK);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_status_gpu(&b, 0xff, 0, 0, WAIT_LOCK, WAIT_LOCK);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    sample(&m, MSG_CTL_STATUS_GPU, SAMPLE_TYPICAL);
    m.u.gpu.mode = 3;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
}

/* Every waiter's reason is an enum wait_reason: 0-4, the last one too. */
static void test_waiter_reason_out_of_range(void **state)
{
    struct bb b;
    struct msg m;
    uint8_t buf[PROTO_MAX_FRAME];

    (void)state;
    for (int r = WAIT_NONE; r <= WAIT_PRIORITY; r++) {
        bb_status_gpu(&b, SCHED_MODE_AUTO, 0, 3, (uint8_t)r, (uint8_t)r);
        assert_int_equal(decode_bb(&b), PROTO_OK);
    }
    bb_status_gpu(&b, SCHED_MODE_AUTO, 0, 1, 0, 5);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_status_gpu(&b, SCHED_MODE_AUTO, 2, 3, WAIT_MEMORY, 5);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_status_gpu(&b, SCHED_MODE_AUTO, 2, 3, 0xff, WAIT_LOCK);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    sample(&m, MSG_CTL_STATUS_GPU, SAMPLE_TYPICAL);
    m.u.gpu.waiting[m.u.gpu.n_waiting - 1].reason = 5;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
    /* a bad reason past n_waiting is not sent, so not judged */
    sample(&m, MSG_CTL_STATUS_GPU, SAMPLE_TYPICAL);
    m.u.gpu.waiting[m.u.gpu.n_waiting].reason = 5;
    assert_true(msg_encode(&m, buf, sizeof(buf)) > 0);
}

/* STATUS_CLIENT's wait_reason: 0-4. */
static void test_client_wait_reason_out_of_range(void **state)
{
    struct bb b;
    struct msg m;
    uint8_t buf[8192];

    (void)state;
    for (int r = WAIT_NONE; r <= WAIT_PRIORITY; r++) {
        bb_status_client_wr(&b, CLIENT_WAITING, 0, LIMIT_NONE, (uint8_t)r);
        assert_int_equal(decode_bb(&b), PROTO_OK);
    }
    bb_status_client_wr(&b, CLIENT_WAITING, 0, LIMIT_NONE, 5);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);
    bb_status_client_wr(&b, CLIENT_WAITING, 0, LIMIT_NONE, 0xff);
    assert_int_equal(decode_bb(&b), PROTO_E_FIELD);

    sample(&m, MSG_CTL_STATUS_CLIENT, SAMPLE_TYPICAL);
    m.u.client.wait_reason = 5;
    assert_int_equal(msg_encode(&m, buf, sizeof(buf)), PROTO_E_FIELD);
}

static void test_encode_too_small_buffer(void **state)
{
    static uint8_t buf[PROTO_MAX_FRAME + 4 + 16];

    (void)state;
    for (int variant = 0; variant < N_SAMPLES; variant++) {
        for (size_t t = 0; t < N_TYPES; t++) {
            struct msg in;
            int len = encode_sample(all_types[t], variant, &in);

            for (int cap = 0; cap < len; cap++) {
                /* never writes past cap */
                memset(buf, 0x5a, (size_t)len + 16);
                assert_int_equal(msg_encode(&in, buf, (size_t)cap),
                                 PROTO_E_SPACE);
                for (int i = cap; i < len + 16; i++)
                    assert_int_equal(buf[i], 0x5a);
            }
            assert_int_equal(msg_encode(&in, buf, (size_t)len), len);
        }
    }
}

static void test_strerror_and_names(void **state)
{
    (void)state;
    for (int e = PROTO_E_TIMEOUT; e <= PROTO_OK; e++)
        assert_string_not_equal(proto_strerror(e), "unknown error");
    assert_string_equal(proto_strerror(PROTO_E_TIMEOUT - 1), "unknown error");
    assert_string_equal(proto_strerror(1), "unknown error");
    for (size_t t = 0; t < N_TYPES; t++)
        assert_string_not_equal(msg_type_name(all_types[t]), "UNKNOWN");
    assert_string_equal(msg_type_name(MSG_LOCK_OK), "LOCK_OK");
    assert_string_equal(msg_type_name(0), "UNKNOWN");
    assert_string_equal(msg_type_name(0xffff), "UNKNOWN");
}

/* ---- frame_reader ---------------------------------------------------------- */

struct pair {
    int tx, rx;
};

static int pair_setup(void **state)
{
    int sv[2];
    struct pair *p = malloc(sizeof(*p));

    if (!p || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        free(p);
        return -1;
    }
    p->tx = sv[0];
    p->rx = sv[1];
    *state = p;
    return 0;
}

static int pair_teardown(void **state)
{
    struct pair *p = *state;

    if (p->tx >= 0)
        close(p->tx);
    if (p->rx >= 0)
        close(p->rx);
    free(p);
    return 0;
}

static void write_all(int fd, const uint8_t *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        assert_true(n > 0);
        buf += n;
        len -= (size_t)n;
    }
}

/* Concatenates an encoding of every sample, in every variant, into stream;
 * returns its length and stores the messages in msgs. */
static size_t build_stream(uint8_t *stream, size_t cap, struct msg *msgs)
{
    size_t off = 0;

    for (int variant = 0; variant < N_SAMPLES; variant++) {
        for (size_t t = 0; t < N_TYPES; t++) {
            struct msg *m = &msgs[(size_t)variant * N_TYPES + t];
            int len = encode_sample(all_types[t], variant, m);

            assert_true(off + (size_t)len <= cap);
            memcpy(stream + off, frame, (size_t)len);
            off += (size_t)len;
        }
    }
    return off;
}

static void test_frame_reader_byte_by_byte(void **state)
{
    struct pair *p = *state;
    static uint8_t stream[32 * 1024];
    static struct msg msgs[N_SAMPLES * N_TYPES];
    struct frame_reader *r = calloc(1, sizeof(*r));
    size_t len = build_stream(stream, sizeof(stream), msgs);
    size_t next = 0, frame_end;
    struct msg out;

    assert_non_null(r);
    assert_int_equal(frame_reader_fill(r, p->rx), 0); /* nothing yet */
    assert_int_equal(frame_reader_next(r, &out), 0);
    for (size_t i = 0; i < len; i++) {
        write_all(p->tx, stream + i, 1);
        assert_int_equal(frame_reader_fill(r, p->rx), 1);
        frame_end = 0;
        for (size_t k = 0, off = 0; k <= next; k++) {
            uint32_t body = (uint32_t)stream[off] |
                            (uint32_t)stream[off + 1] << 8 |
                            (uint32_t)stream[off + 2] << 16 |
                            (uint32_t)stream[off + 3] << 24;
            off += 4 + body;
            frame_end = off;
        }
        if (i + 1 < frame_end) {
            assert_int_equal(frame_reader_next(r, &out), 0);
        } else {
            assert_int_equal(frame_reader_next(r, &out), 1);
            assert_msg_equal(&msgs[next], &out);
            assert_int_equal(frame_reader_next(r, &out), 0);
            next++;
        }
    }
    assert_int_equal(next, N_SAMPLES * N_TYPES);
    assert_int_equal(r->len, 0);
    free(r);
}

/* Every split of one frame into two reads. */
static void test_frame_reader_split_at_every_boundary(void **state)
{
    struct pair *p = *state;
    struct frame_reader *r = calloc(1, sizeof(*r));
    struct msg in, out;
    int len = encode_sample(MSG_REGISTER, SAMPLE_MAX, &in);

    assert_non_null(r);
    for (int k = 1; k < len; k++) {
        write_all(p->tx, frame, (size_t)k);
        assert_int_equal(frame_reader_fill(r, p->rx), 1);
        assert_int_equal(frame_reader_next(r, &out), 0);
        write_all(p->tx, frame + k, (size_t)(len - k));
        while (r->len < (size_t)len)
            assert_int_equal(frame_reader_fill(r, p->rx), 1);
        assert_int_equal(frame_reader_next(r, &out), 1);
        assert_msg_equal(&in, &out);
        assert_int_equal(r->len, 0);
    }
    free(r);
}

static void test_frame_reader_several_frames_in_one_read(void **state)
{
    struct pair *p = *state;
    static uint8_t stream[32 * 1024];
    static struct msg msgs[N_SAMPLES * N_TYPES];
    struct frame_reader *r = calloc(1, sizeof(*r));
    size_t len = build_stream(stream, sizeof(stream), msgs);
    struct msg out;

    assert_non_null(r);
    /* plus half of one more frame, which must wait */
    write_all(p->tx, stream, len);
    write_all(p->tx, stream, 6);
    while (r->len < len + 6)
        assert_int_equal(frame_reader_fill(r, p->rx), 1);
    for (size_t i = 0; i < N_SAMPLES * N_TYPES; i++) {
        assert_int_equal(frame_reader_next(r, &out), 1);
        assert_msg_equal(&msgs[i], &out);
    }
    assert_int_equal(frame_reader_next(r, &out), 0);
    assert_int_equal(r->len, 6);
    free(r);
}

static void test_frame_reader_errors(void **state)
{
    struct pair *p = *state;
    struct frame_reader *r = calloc(1, sizeof(*r));
    struct msg in, out;
    int len;

    assert_non_null(r);
    /* a length over the limit */
    static const uint8_t huge[] = {0x01, 0x00, 0x01, 0x00}; /* 64 KiB + 1 */
    write_all(p->tx, huge, sizeof(huge));
    assert_int_equal(frame_reader_fill(r, p->rx), 1);
    assert_int_equal(frame_reader_next(r, &out), PROTO_E_SPACE);
    r->len = 0;

    /* a bad body is reported with its code */
    len = encode_sample(MSG_LOCK_OK, SAMPLE_TYPICAL, &in);
    frame[4] = 9; /* version */
    write_all(p->tx, frame, (size_t)len);
    assert_int_equal(frame_reader_fill(r, p->rx), 1);
    assert_int_equal(frame_reader_next(r, &out), PROTO_E_VERSION);

    /* the largest frame the limit allows fills the buffer exactly */
    r->len = 0;
    static uint8_t big[PROTO_MAX_FRAME + 4];
    memset(big, 0, sizeof(big));
    big[0] = 0x00;
    big[1] = 0x00;
    big[2] = 0x01; /* 65536 = PROTO_MAX_FRAME */
    big[4] = PROTO_VERSION;
    big[6] = MSG_SCHED_ON;
    write_all(p->tx, big, sizeof(big));
    while (r->len < sizeof(big))
        assert_int_equal(frame_reader_fill(r, p->rx), 1);
    assert_int_equal(frame_reader_next(r, &out), PROTO_E_TRAILING);
    assert_int_equal(r->len, 0);

    /* EOF */
    close(p->tx);
    p->tx = -1;
    assert_int_equal(frame_reader_fill(r, p->rx), PROTO_E_IO);
    free(r);
}

/* ---- msg_send / msg_recv ------------------------------------------------- */

static int64_t elapsed_ms(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (int64_t)(t1.tv_sec - t0->tv_sec) * 1000 +
           (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static void test_send_recv_round_trip(void **state)
{
    struct pair *p = *state;

    for (int variant = 0; variant < N_SAMPLES; variant++) {
        for (size_t t = 0; t < N_TYPES; t++) {
            struct msg in, out;

            sample(&in, all_types[t], variant);
            assert_int_equal(msg_send(p->tx, &in), PROTO_OK);
            assert_int_equal(msg_recv(p->rx, &out, 1000), PROTO_OK);
            assert_msg_equal(&in, &out);
        }
    }
    /* several queued, then received one at a time with no timeout */
    for (size_t t = 0; t < N_TYPES; t++) {
        struct msg in;
        sample(&in, all_types[t], SAMPLE_TYPICAL);
        assert_int_equal(msg_send(p->tx, &in), PROTO_OK);
    }
    for (size_t t = 0; t < N_TYPES; t++) {
        struct msg in, out;
        sample(&in, all_types[t], SAMPLE_TYPICAL);
        assert_int_equal(msg_recv(p->rx, &out, -1), PROTO_OK);
        assert_msg_equal(&in, &out);
    }
}

static void test_send_refuses_bad_message(void **state)
{
    struct pair *p = *state;
    struct msg m = {.type = 19}; /* no message has that number */

    assert_int_equal(msg_send(p->tx, &m), PROTO_E_TYPE);
    sample(&m, MSG_REGISTER, SAMPLE_TYPICAL);
    m.u.reg.n_gpus = PROTO_MAX_GPUS + 1;
    assert_int_equal(msg_send(p->tx, &m), PROTO_E_FIELD);
}

static void test_recv_timeout(void **state)
{
    struct pair *p = *state;
    struct timespec t0;
    struct msg out, in;
    int len;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(msg_recv(p->rx, &out, 50), PROTO_E_TIMEOUT);
    assert_true(elapsed_ms(&t0) >= 45);
    assert_true(elapsed_ms(&t0) < 1000);

    /* half a frame is still a timeout, not a message */
    len = encode_sample(MSG_LOCK_OK, SAMPLE_TYPICAL, &in);
    write_all(p->tx, frame, (size_t)len / 2);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(msg_recv(p->rx, &out, 50), PROTO_E_TIMEOUT);
    assert_true(elapsed_ms(&t0) >= 45);
    assert_true(elapsed_ms(&t0) < 1000);
}

/* A zero timeout takes a frame that is already queued rather than timing
 * out before looking at the socket. */
static void test_recv_zero_timeout_with_data_ready(void **state)
{
    struct pair *p = *state;
    struct msg in, out;

    sample(&in, MSG_SCHED_ON, SAMPLE_TYPICAL);
    assert_int_equal(msg_send(p->tx, &in), PROTO_OK);
    assert_int_equal(msg_recv(p->rx, &out, 0), PROTO_OK);
    assert_msg_equal(&in, &out);
}

static void test_recv_peer_closed(void **state)
{
    struct pair *p = *state;
    struct msg out, in;
    int len;

    /* closed mid-frame */
    len = encode_sample(MSG_CTL_STATUS_GPU, SAMPLE_TYPICAL, &in);
    write_all(p->tx, frame, (size_t)len - 1);
    close(p->tx);
    p->tx = -1;
    assert_int_equal(msg_recv(p->rx, &out, 1000), PROTO_E_IO);
    /* closed between frames, with and without a timeout */
    assert_int_equal(msg_recv(p->rx, &out, 1000), PROTO_E_IO);
    assert_int_equal(msg_recv(p->rx, &out, -1), PROTO_E_IO);
}

static void test_send_peer_closed(void **state)
{
    struct pair *p = *state;
    struct msg in;

    close(p->rx);
    p->rx = -1;
    sample(&in, MSG_REQ_LOCK, SAMPLE_TYPICAL);
    /* MSG_NOSIGNAL: an error, not SIGPIPE (which would end this test) */
    assert_int_equal(msg_send(p->tx, &in), PROTO_E_IO);
}

static void test_recv_oversized_and_bad_frames(void **state)
{
    struct pair *p = *state;
    static const uint8_t huge[] = {0x01, 0x00, 0x01, 0x00};
    struct msg in, out;
    int len;

    write_all(p->tx, huge, sizeof(huge));
    assert_int_equal(msg_recv(p->rx, &out, 1000), PROTO_E_SPACE);

    len = encode_sample(MSG_CTL_SET, SAMPLE_TYPICAL, &in);
    frame[6] = 77; /* type */
    write_all(p->tx, frame, (size_t)len);
    assert_int_equal(msg_recv(p->rx, &out, 1000), PROTO_E_TYPE);

    /* a zero-length body */
    static const uint8_t empty[] = {0, 0, 0, 0};
    write_all(p->tx, empty, sizeof(empty));
    assert_int_equal(msg_recv(p->rx, &out, 1000), PROTO_E_SHORT);
}

#define PAIR_TEST(f)                                                           \
    cmocka_unit_test_setup_teardown(f, pair_setup, pair_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_type),
        cmocka_unit_test(test_encoding_is_canonical),
        cmocka_unit_test(test_golden_bytes),
        cmocka_unit_test(test_wire_numbers),
        cmocka_unit_test(test_ctl_set_names),
        cmocka_unit_test(test_every_prefix_is_short),
        cmocka_unit_test(test_wrong_version),
        cmocka_unit_test(test_unknown_type),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_string_too_long),
        cmocka_unit_test(test_embedded_nul),
        cmocka_unit_test(test_list_count_over_limit),
        cmocka_unit_test(test_core_limit_over_100),
        cmocka_unit_test(test_client_state_out_of_range),
        cmocka_unit_test(test_client_limit_fields_out_of_range),
        cmocka_unit_test(test_oversub_out_of_range),
        cmocka_unit_test(test_swap_direction_out_of_range),
        cmocka_unit_test(test_load_permille_out_of_range),
        cmocka_unit_test(test_evictable_over_total),
        cmocka_unit_test(test_status_gpu_mode_out_of_range),
        cmocka_unit_test(test_waiter_reason_out_of_range),
        cmocka_unit_test(test_client_wait_reason_out_of_range),
        cmocka_unit_test(test_encode_too_small_buffer),
        cmocka_unit_test(test_strerror_and_names),
        PAIR_TEST(test_frame_reader_byte_by_byte),
        PAIR_TEST(test_frame_reader_split_at_every_boundary),
        PAIR_TEST(test_frame_reader_several_frames_in_one_read),
        PAIR_TEST(test_frame_reader_errors),
        PAIR_TEST(test_send_recv_round_trip),
        PAIR_TEST(test_send_refuses_bad_message),
        PAIR_TEST(test_recv_timeout),
        PAIR_TEST(test_recv_zero_timeout_with_data_ready),
        PAIR_TEST(test_recv_peer_closed),
        PAIR_TEST(test_send_peer_closed),
        PAIR_TEST(test_recv_oversized_and_bad_frames),
    };

    /* SIGPIPE is left at its default on purpose: msg_send must not raise it. */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
