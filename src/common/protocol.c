/* protocol.c - encoders and decoders for every message, generated from
 * protocol.def. Each payload gets one put_ and one get_ function that walk
 * its rows in wire order; a row's bound is checked in both directions by the
 * same expression, so the encoder never writes what the decoder refuses.
 * A decoder reports the first fault in wire order; an encoder reports
 * PROTO_E_FIELD for any field out of range before PROTO_E_SPACE, which is
 * what msg_send relies on to retry only frames that are merely large. */
#include "protocol.h"

#include <string.h>

struct writer {
    uint8_t *p;
    size_t cap, len;
    int err;
};

struct reader {
    const uint8_t *p;
    size_t len, pos;
    int err;
};

static void put_bytes(struct writer *w, const void *src, size_t n)
{
    if (w->err)
        return;
    if (w->cap - w->len < n) {
        w->err = PROTO_E_SPACE;
        return;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void put_uint(struct writer *w, uint64_t v, int bytes)
{
    uint8_t le[8];

    for (int i = 0; i < bytes; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    put_bytes(w, le, (size_t)bytes);
}

static void put_u16(struct writer *w, uint16_t v)
{
    put_uint(w, v, 2);
}
static void put_u32(struct writer *w, uint32_t v)
{
    put_uint(w, v, 4);
}

static void put_str(struct writer *w, const char *s, size_t max)
{
    size_t n = strnlen(s, max);

    if (n >= max) { /* the decoder could not hold it with its NUL */
        w->err = PROTO_E_FIELD;
        return;
    }
    put_u16(w, (uint16_t)n);
    put_bytes(w, s, n);
}

static uint64_t get_uint(struct reader *r, int bytes)
{
    uint64_t v = 0;

    if (r->err)
        return 0;
    if (r->len - r->pos < (size_t)bytes) {
        r->err = PROTO_E_SHORT;
        return 0;
    }
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
    r->pos += (size_t)bytes;
    return v;
}

static uint16_t get_u16(struct reader *r)
{
    return (uint16_t)get_uint(r, 2);
}

static void get_str(struct reader *r, char *dst, size_t max)
{
    size_t n = get_u16(r);

    dst[0] = '\0';
    if (r->err)
        return;
    if (n >= max) {
        r->err = PROTO_E_FIELD;
        return;
    }
    if (r->len - r->pos < n) {
        r->err = PROTO_E_SHORT;
        return;
    }
    memcpy(dst, r->p + r->pos, n);
    dst[n] = '\0';
    if (strlen(dst) != n) /* embedded NUL */
        r->err = PROTO_E_FIELD;
    r->pos += n;
}

static uint16_t get_count(struct reader *r, uint16_t max)
{
    uint16_t n = get_u16(r);

    if (n > max && !r->err)
        r->err = PROTO_E_FIELD;
    return r->err ? 0 : n;
}

/* ---- the codec, from protocol.def ------------------------------------- */

#define PROTO_BYTES_U8 1
#define PROTO_BYTES_U16 2
#define PROTO_BYTES_U32 4
#define PROTO_BYTES_U64 8
#define PROTO_BYTES_I32 4

/* A row's bound as the largest value allowed; m is the payload being
 * encoded or decoded, whose earlier fields are already in place. */
#define PROTO_BOUND_ANY UINT64_MAX
#define PROTO_BOUND_UPTO(max) ((uint64_t)(max))
#define PROTO_BOUND_UPTO_FIELD(field) (m->field)

#define PROTO_NELEM(a) (sizeof(a) / sizeof((a)[0]))

static void put_checked(struct writer *w, uint64_t v, int bytes, uint64_t max)
{
    if (v > max)
        w->err = PROTO_E_FIELD; /* overrides PROTO_E_SPACE: see the top */
    put_uint(w, v, bytes);
}

static uint64_t get_checked(struct reader *r, int bytes, uint64_t max)
{
    uint64_t v = get_uint(r, bytes);

    if (v > max && !r->err)
        r->err = PROTO_E_FIELD;
    return v;
}

/* Lists stop at the array's capacity even when the count is over it (the
 * count has already failed the encoding): the items past it do not exist. */
#define PROTO_EACH(count, capacity)                                            \
    for (size_t i = 0; i < m->count && i < (capacity); i++)

#define PROTO_PAYLOAD(type, member)                                            \
    static void put_##member(struct writer *w, const struct msg *msg)          \
    {                                                                          \
        const struct type *m = &msg->u.member;
#define PROTO_RECORD(type)                                                     \
    static void put_##type(struct writer *w, const struct type *m)             \
    {
#define PROTO_END() }
#define PROTO_FIELD(kind, name, bound)                                         \
    put_checked(w, (uint64_t)m->name, PROTO_BYTES_##kind, PROTO_BOUND_##bound);
#define PROTO_STR(name, size) put_str(w, m->name, size);
#define PROTO_COUNT(name, list)                                                \
    put_checked(w, m->name, 2, PROTO_NELEM(m->list));
#define PROTO_LIST(kind, name, count, capacity)                                \
    PROTO_EACH(count, capacity) put_uint(w, m->name[i], PROTO_BYTES_##kind);
#define PROTO_STR_LIST(name, count, capacity, size)                            \
    PROTO_EACH(count, capacity) put_str(w, m->name[i], size);
#define PROTO_RECORD_LIST(record, name, count, capacity)                       \
    PROTO_EACH(count, capacity) put_##record(w, &m->name[i]);
#include "protocol.def"

/* get_count answers 0 for a count over the capacity, so item loops stay
 * inside the arrays. */
#define PROTO_PAYLOAD(type, member)                                            \
    static void get_##member(struct reader *r, struct msg *msg)                \
    {                                                                          \
        struct type *m = &msg->u.member;
#define PROTO_RECORD(type)                                                     \
    static void get_##type(struct reader *r, struct type *m)                   \
    {
#define PROTO_END() }
#define PROTO_FIELD(kind, name, bound)                                         \
    m->name = (PROTO_CTYPE_##kind)get_checked(r, PROTO_BYTES_##kind,           \
                                              PROTO_BOUND_##bound);
#define PROTO_STR(name, size) get_str(r, m->name, size);
#define PROTO_COUNT(name, list) m->name = get_count(r, PROTO_NELEM(m->list));
#define PROTO_LIST(kind, name, count, capacity)                                \
    for (size_t i = 0; i < m->count; i++)                                      \
        m->name[i] = (PROTO_CTYPE_##kind)get_uint(r, PROTO_BYTES_##kind);
#define PROTO_STR_LIST(name, count, capacity, size)                            \
    for (size_t i = 0; i < m->count; i++)                                      \
        get_str(r, m->name[i], size);
#define PROTO_RECORD_LIST(record, name, count, capacity)                       \
    for (size_t i = 0; i < m->count; i++)                                      \
        get_##record(r, &m->name[i]);
#include "protocol.def"

/* ---- dispatch --------------------------------------------------------- */

static void put_nothing(struct writer *w, const struct msg *msg)
{
    (void)w, (void)msg;
}

static void get_nothing(struct reader *r, struct msg *msg)
{
    (void)r, (void)msg;
}

/* Each message's payload codec by wire type; none for a type that is not
 * on the wire (unknown or reserved). */
static const struct codec {
    void (*put)(struct writer *w, const struct msg *msg);
    void (*get)(struct reader *r, struct msg *msg);
} codecs[] = {
#define PROTO_MSG(name, number, payload)                                       \
    [number] = {put_##payload, get_##payload},
#define PROTO_MSG_EMPTY(name, number) [number] = {put_nothing, get_nothing},
#include "protocol.def"
};

static const struct codec *codec_of(uint16_t type)
{
    return type < PROTO_NELEM(codecs) && codecs[type].put ? &codecs[type] : NULL;
}

static const char *const type_names[] = {
#define PROTO_MSG(name, number, payload) [number] = #name,
#define PROTO_MSG_EMPTY(name, number) [number] = #name,
#define PROTO_MSG_RESERVED(name, number) [number] = #name,
#include "protocol.def"
};

const char *msg_type_name(uint16_t type)
{
    if (type < sizeof(type_names) / sizeof(type_names[0]) && type_names[type])
        return type_names[type];
    return "UNKNOWN";
}

const char *const sched_mode_names[] = {
    [SCHED_MODE_SERIAL] = "serial",
    [SCHED_MODE_CONCURRENT] = "concurrent",
    [SCHED_MODE_AUTO] = "auto",
    NULL,
};

const char *sched_mode_name(uint8_t mode)
{
    return mode <= SCHED_MODE_AUTO ? sched_mode_names[mode] : "unknown";
}

const char *pod_qos_name(uint8_t qos)
{
    switch (qos) {
    case POD_QOS_GUARANTEED:
        return "guaranteed";
    case POD_QOS_BURSTABLE:
        return "burstable";
    case POD_QOS_BESTEFFORT:
        return "besteffort";
    }
    return "unknown";
}

const char *proto_strerror(int err)
{
    switch (err) {
    case PROTO_OK:
        return "ok";
    case PROTO_E_SHORT:
        return "truncated message";
    case PROTO_E_VERSION:
        return "unsupported protocol version";
    case PROTO_E_TYPE:
        return "unknown message type";
    case PROTO_E_TRAILING:
        return "trailing bytes after message";
    case PROTO_E_FIELD:
        return "field out of range";
    case PROTO_E_SPACE:
        return "message too large";
    case PROTO_E_IO:
        return "connection closed";
    case PROTO_E_TIMEOUT:
        return "timed out";
    }
    return "unknown error";
}

int msg_encode(const struct msg *m, uint8_t *buf, size_t cap)
{
    struct writer w = {.p = buf, .cap = cap};
    const struct codec *codec = codec_of(m->type);

    put_u32(&w, 0); /* length, patched below */
    put_u16(&w, PROTO_VERSION);
    put_u16(&w, m->type);
    if (!codec)
        return PROTO_E_TYPE;
    codec->put(&w, m);
    if (w.err)
        return w.err;
    if (w.len - 4 > PROTO_MAX_FRAME)
        return PROTO_E_SPACE;
    uint32_t body = (uint32_t)(w.len - 4);
    for (int i = 0; i < 4; i++)
        buf[i] = (uint8_t)(body >> (8 * i));
    return (int)w.len;
}

int msg_decode(const uint8_t *body, size_t len, struct msg *out)
{
    struct reader r = {.p = body, .len = len};
    uint16_t version = get_u16(&r);
    const struct codec *codec;

    out->type = get_u16(&r);
    if (r.err)
        return r.err;
    if (version != PROTO_VERSION)
        return PROTO_E_VERSION;
    codec = codec_of(out->type);
    if (!codec)
        return PROTO_E_TYPE;
    codec->get(&r, out);
    if (r.err)
        return r.err;
    return r.pos == r.len ? PROTO_OK : PROTO_E_TRAILING;
}
