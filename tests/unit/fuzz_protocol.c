/* fuzz_protocol.c - a libFuzzer target for the wire protocol, and the same
 * target as a plain "replay" program that CTest runs over the committed cases.
 *
 * The input is a frame body (the bytes after the 4-byte length). Properties:
 *   - msg_decode never crashes, overreads or hangs on any input;
 *   - a body that decodes re-encodes to exactly the same bytes (the encoding
 *     is canonical), and decoding that re-encoding and encoding again gives
 *     identical bytes once more;
 *   - the same bytes fed to a frame_reader as a raw stream are consumed
 *     without crashing.
 *
 * Built with -DNVSHARE_FUZZ_REPLAY it has a main():
 *   fuzz_protocol_replay DIR|FILE...   runs every file through the target;
 *       a file named "<expect>-*.bin" must also decode with that result,
 *       where <expect> is ok, short, version, type, trailing or field;
 *   fuzz_protocol_replay --generate DIR   writes the seed cases. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t enc1[PROTO_MAX_FRAME + 4], enc2[PROTO_MAX_FRAME + 4];
static struct msg m1, m2;
static struct frame_reader reader;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int n1, n2;

    /* as a stream of frames */
    reader.len = size < sizeof(reader.buf) ? size : sizeof(reader.buf);
    memcpy(reader.buf, data, reader.len);
    while (frame_reader_next(&reader, &m1) == 1)
        ;

    /* as one body */
    if (msg_decode(data, size, &m1) != PROTO_OK)
        return 0;
    n1 = msg_encode(&m1, enc1, sizeof(enc1));
    if (n1 < 0) {
        fprintf(stderr, "decoded %s does not re-encode: %s\n",
                msg_type_name(m1.type), proto_strerror(n1));
        abort();
    }
    if ((size_t)n1 != size + 4 || memcmp(enc1 + 4, data, size) != 0) {
        fprintf(stderr, "%s: re-encoding differs from the input\n",
                msg_type_name(m1.type));
        abort();
    }
    if (msg_decode(enc1 + 4, (size_t)n1 - 4, &m2) != PROTO_OK)
        abort();
    n2 = msg_encode(&m2, enc2, sizeof(enc2));
    if (n2 != n1 || memcmp(enc1, enc2, (size_t)n1) != 0)
        abort();
    return 0;
}

#ifdef NVSHARE_FUZZ_REPLAY
#include <dirent.h>
#include <sys/stat.h>

#include "protocol_sample.h"

static const struct {
    const char *prefix;
    int code;
} expects[] = {
    {"ok-", PROTO_OK},
    {"short-", PROTO_E_SHORT},
    {"version-", PROTO_E_VERSION},
    {"type-", PROTO_E_TYPE},
    {"trailing-", PROTO_E_TRAILING},
    {"field-", PROTO_E_FIELD},
};

static uint8_t file_buf[4 * PROTO_MAX_FRAME];

/* Runs one file; returns 0 if it behaved as its name says. */
static int replay_file(const char *path)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    FILE *f = fopen(path, "rb");
    size_t size;
    int rc = 0;

    if (!f) {
        perror(path);
        return -1;
    }
    size = fread(file_buf, 1, sizeof(file_buf), f);
    fclose(f);
    LLVMFuzzerTestOneInput(file_buf, size);
    for (size_t i = 0; i < sizeof(expects) / sizeof(expects[0]); i++) {
        if (strncmp(base, expects[i].prefix, strlen(expects[i].prefix)) != 0)
            continue;
        int got = msg_decode(file_buf, size, &m1);
        if (got != expects[i].code) {
            fprintf(stderr, "%s: decoded as %d (%s), expected %d (%s)\n", base,
                    got, proto_strerror(got), expects[i].code,
                    proto_strerror(expects[i].code));
            rc = -1;
        }
    }
    return rc;
}

static int replay_path(const char *path, int *files)
{
    struct stat st;
    int rc = 0;

    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*files)++;
        return replay_file(path);
    }
    DIR *d = opendir(path);
    struct dirent *e;
    if (!d) {
        perror(path);
        return -1;
    }
    while ((e = readdir(d))) {
        char sub[4096];
        if (e->d_name[0] == '.' || !strstr(e->d_name, ".bin"))
            continue;
        snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
        if (replay_path(sub, files))
            rc = -1;
    }
    closedir(d);
    return rc;
}

/* ---- seed generation ---------------------------------------------------- */

static const char *gen_dir;

static void put_file(const char *name, const uint8_t *body, size_t len)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s.bin", gen_dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(body, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static uint8_t enc[PROTO_MAX_FRAME + 8], enc_other[PROTO_MAX_FRAME + 8];

/* Where two encodings first differ after the frame's length: the offset
 * of the one field set differently in them. */
static size_t first_difference(int len, int other_len)
{
    size_t n = (size_t)(len < other_len ? len : other_len), i = 4;

    while (i < n && enc[i] == enc_other[i])
        i++;
    return i;
}

/* Writes enc[4 .. len) with width bytes at off replaced by value,
 * little-endian, as the case name. */
static void put_patched(const char *name, int len, size_t off, int width,
                        uint64_t value)
{
    for (int i = 0; i < width; i++)
        enc[off + (size_t)i] = (uint8_t)(value >> (8 * i));
    put_file(name, enc + 4, (size_t)len - 4);
}

/* A "field-" case: the typical sample of type with width bytes, at bytes
 * past the start of field (an integer lvalue of struct msg m), set to
 * value on the wire. Where the field starts is found by encoding it at 0
 * and at 1, so no wire layout is written out here. */
#define FIELD_CASE(name, type, field, at, width, value)                        \
    do {                                                                       \
        struct msg m;                                                          \
        int len, other;                                                        \
        sample(&m, type, SAMPLE_TYPICAL);                                      \
        m.field = 1;                                                           \
        other = msg_encode(&m, enc_other, sizeof(enc_other));                  \
        m.field = 0;                                                           \
        len = msg_encode(&m, enc, sizeof(enc));                                \
        size_t off = first_difference(len, other);                             \
        sample(&m, type, SAMPLE_TYPICAL);                                      \
        len = msg_encode(&m, enc, sizeof(enc));                                \
        if (len < 0 || other < 0 || off + (at) + (width) > (size_t)len)        \
            return 1;                                                          \
        put_patched(name, len, off + (at), width, value);                      \
    } while (0)

static int generate(void)
{
    /* every message the wire carries; reserved types get their own case */
    static const uint16_t types[] = {
#define PROTO_MSG(name, number, payload) MSG_##name,
#define PROTO_MSG_EMPTY(name, number) MSG_##name,
#include "protocol.def"
    };
    static const char *const variants[N_SAMPLES] =
        {[SAMPLE_TYPICAL] = "typical", [SAMPLE_MAX] = "max", [SAMPLE_ZERO] = "zero"};
    struct msg m;
    char name[128];

    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        for (int v = 0; v < N_SAMPLES; v++) {
            int len;
            sample(&m, types[t], v);
            len = msg_encode(&m, enc, sizeof(enc));
            if (len < 0)
                return 1;
            snprintf(name, sizeof(name), "ok-%s-%s", msg_type_name(types[t]),
                     variants[v]);
            put_file(name, enc + 4, (size_t)len - 4);
            if (v != SAMPLE_TYPICAL)
                continue;
            /* mutants of the typical encoding */
            snprintf(name, sizeof(name), "short-%s", msg_type_name(types[t]));
            put_file(name, enc + 4, (size_t)(len - 4) / 2);
            enc[len] = 0;
            snprintf(name, sizeof(name), "trailing-%s", msg_type_name(types[t]));
            put_file(name, enc + 4, (size_t)len - 3);
            enc[4] = 2;
            snprintf(name, sizeof(name), "version-%s", msg_type_name(types[t]));
            put_file(name, enc + 4, (size_t)len - 4);
        }
    }
    static const uint8_t unnamed[] = {1, 0, 19, 0}; /* between the ranges */
    put_file("type-19", unnamed, sizeof(unnamed));
    static const uint8_t unused[] = {1, 0, MSG_UPDATE_YIELD + 1,
                                     0}; /* first unused */
    put_file("type-after-UPDATE_YIELD", unused, sizeof(unused));
    static const uint8_t zero[] = {1, 0, 0, 0};
    put_file("type-zero", zero, sizeof(zero));
    static const uint8_t ffff[] = {1, 0, 0xff, 0xff, 0, 0};
    put_file("type-ffff", ffff, sizeof(ffff));

    /* fields out of range, one per case */
    FIELD_CASE("field-REGISTER-core-limit-101", MSG_REGISTER, u.reg.core_limit,
               0, 1, 101);
    FIELD_CASE("field-REGISTER-oversub-3", MSG_REGISTER, u.reg.oversub, 0, 1,
               OVERSUB_NODE_DEFAULT + 1);
    FIELD_CASE("field-REGISTER-too-many-gpus", MSG_REGISTER, u.reg.n_gpus, 0, 2,
               PROTO_MAX_GPUS + 1); /* items for the sample's count follow */
    /* a string's first byte at 0 changes its length: the case writes the
     * length (u16), or the first byte of the text after it */
    FIELD_CASE("field-REGISTER-name-too-long", MSG_REGISTER,
               u.reg.pod_namespace[0], 0, 2, PROTO_NAME_MAX);
    FIELD_CASE("field-REGISTER-embedded-nul", MSG_REGISTER,
               u.reg.pod_namespace[0], 2, 1, 0);
    FIELD_CASE("field-CTL_STATUS_CLIENT-state", MSG_CTL_STATUS_CLIENT,
               u.client.state, 0, 1, CLIENT_DRAINING + 1);
    FIELD_CASE("field-CTL_STATUS_CLIENT-core-limit-101", MSG_CTL_STATUS_CLIENT,
               u.client.core_limit, 0, 1, 101);
    FIELD_CASE("field-CTL_STATUS_CLIENT-limit-source", MSG_CTL_STATUS_CLIENT,
               u.client.limit_source, 0, 1, LIMIT_REQUEST + 1);
    FIELD_CASE("field-CTL_STATUS_CLIENT-wait-reason", MSG_CTL_STATUS_CLIENT,
               u.client.wait_reason, 0, 1, WAIT_PRIORITY + 1);
    FIELD_CASE("field-CTL_STATUS_GPU-mode", MSG_CTL_STATUS_GPU, u.gpu.mode, 0,
               1, SCHED_MODE_AUTO + 1);
    FIELD_CASE("field-CTL_STATUS_GPU-waiter-reason", MSG_CTL_STATUS_GPU,
               u.gpu.waiting[0].reason, 0, 1, WAIT_PRIORITY + 1);
    FIELD_CASE("field-CTL_STATUS_GPU-too-many-waiters", MSG_CTL_STATUS_GPU,
               u.gpu.n_waiting, 0, 2, PROTO_MAX_WAITERS + 1);
    FIELD_CASE("field-CTL_STATUS_GPU-too-many-running", MSG_CTL_STATUS_GPU,
               u.gpu.n_running, 0, 2, PROTO_MAX_WAITERS + 1);
    FIELD_CASE("field-CTL_STATUS_UNHOOKED-origin", MSG_CTL_STATUS_UNHOOKED,
               u.unhooked.origin, 0, 1, IDENTITY_POD + 1);
    FIELD_CASE("field-CTL_STATUS_UNHOOKED-qos", MSG_CTL_STATUS_UNHOOKED,
               u.unhooked.qos, 0, 1, POD_QOS_BESTEFFORT + 1);
    FIELD_CASE("field-CTL_STATUS_SETTING-source", MSG_CTL_STATUS_SETTING,
               u.setting.source, 0, 1, SETTING_SOURCE_RUNTIME + 1);
    FIELD_CASE("field-SWAPPED-direction-3", MSG_SWAPPED, u.swap.direction, 0, 1,
               SWAP_IN + 1);
    FIELD_CASE("field-LOAD-busy-1001", MSG_LOAD, u.load.busy_permille, 0, 2,
               1001);
    /* evictable's top byte set puts it over the sample's allocated */
    FIELD_CASE("field-MEM_UPDATE-evictable-over-allocated", MSG_MEM_UPDATE,
               u.mem.evictable, 7, 1, 0xff);
    FIELD_CASE("field-REFUSED-reason-4", MSG_REFUSED, u.refused.reason, 0, 1,
               REFUSED_BAD_NAME + 1);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0, rc = 0;

    if (argc == 3 && strcmp(argv[1], "--generate") == 0) {
        gen_dir = argv[2];
        return generate();
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE... | --generate DIR\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++)
        if (replay_path(argv[i], &files))
            rc = 1;
    printf("%d case(s) replayed, %s\n", files, rc ? "FAILED" : "all as expected");
    return files == 0 ? 1 : rc;
}
#endif
