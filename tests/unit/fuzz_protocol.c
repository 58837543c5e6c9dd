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

static void fill(char *dst, size_t len)
{
    memset(dst, 'n', len);
    dst[len] = '\0';
}

static void sample(struct msg *m, uint16_t type, int big)
{
    memset(m, 0, sizeof(*m));
    m->type = type;
    switch (type) {
    case MSG_REGISTER:
        m->u.reg.pid = 1234;
        strcpy(m->u.reg.pod_namespace, "default");
        strcpy(m->u.reg.pod_name, "pod");
        m->u.reg.core_limit = 50;
        m->u.reg.oversub = big ? OVERSUB_NODE_DEFAULT : OVERSUB_ON;
        m->u.reg.memory_limit = 4ull << 30;
        m->u.reg.n_gpus = big ? PROTO_MAX_GPUS : 1;
        for (int i = 0; i < m->u.reg.n_gpus; i++)
            big ? fill(m->u.reg.gpu_uuids[i], PROTO_UUID_MAX - 1)
                : (void)strcpy(m->u.reg.gpu_uuids[i], "GPU-0");
        if (big)
            fill(m->u.reg.container_name, PROTO_NAME_MAX - 1);
        break;
    case MSG_REGISTER_OK:
        m->u.reg_ok.client_id = 9;
        m->u.reg_ok.oversub_default = 1;
        m->u.reg_ok.n_gpus = big ? PROTO_MAX_GPUS : 1;
        m->u.reg_ok.gpu_known[0] = 1;
        break;
    case MSG_REQ_LOCK: case MSG_LOCK_OK: case MSG_DROP_LOCK:
    case MSG_LOCK_RELEASED: case MSG_LOCK_IN_USE: case MSG_DRAINING:
        m->u.lock.gpu = 1;
        m->u.lock.lease = 7;
        m->u.lock.drain_ns = big ? UINT64_MAX : 0;
        m->u.lock.at_ns = big ? UINT64_MAX : 0;
        break;
    case MSG_MEM_UPDATE: case MSG_UPDATE_LIMIT: case MSG_MEM_RESERVE:
    case MSG_MEM_GRANT: case MSG_MEM_RETURN: case MSG_MEM_RECLAIM:
        m->u.mem.gpu = 1;
        m->u.mem.seq = 5;
        m->u.mem.bytes = big ? UINT64_MAX : 64ull << 20;
        m->u.mem.allocated = big ? UINT64_MAX : 6ull << 30;
        m->u.mem.evictable = big ? UINT64_MAX : 5ull << 30;
        m->u.mem.quota = 4ull << 30;
        break;
    case MSG_WAIT_FOR_MEM: case MSG_MEM_AVAILABLE:
        m->u.wait.gpu = 1;
        m->u.wait.need = big ? UINT64_MAX : 12ull << 30;
        m->u.wait.free = 3ull << 30;
        m->u.wait.limit = 76ull << 30;
        m->u.wait.wait_ns = big ? UINT64_MAX : 4000000000ull;
        break;
    case MSG_EVICT: case MSG_PREPARE_SWAP: case MSG_SWAPPED:
        m->u.swap.gpu = 1;
        m->u.swap.direction = type != MSG_SWAPPED ? 0 : big ? SWAP_IN : SWAP_OUT;
        m->u.swap.bytes = big ? UINT64_MAX : 6ull << 30;
        m->u.swap.duration_ns = 450000000ull;
        break;
    case MSG_UPDATE_CORE_LIMIT:
        m->u.core.percent = big ? 100 : 30;
        break;
    case MSG_LOAD:
        m->u.load.gpu = 1;
        m->u.load.busy_permille = big ? 1000 : 437;
        m->u.load.span_ns = big ? UINT64_MAX : 500000000ull;
        break;
    case MSG_CTL_SET:
    case MSG_CTL_RESET:
        if (big)
            fill(m->u.set.name, PROTO_SETTING_MAX - 1);
        else
            strcpy(m->u.set.name, "tq");
        m->u.set.value = big ? SCHED_MODE_AUTO : 30000000000ull;
        if (big)
            fill(m->u.set.target, PROTO_NAME_MAX - 1);
        break;
    case MSG_CTL_REPLY:
        m->u.reply.status = -22;
        big ? fill(m->u.reply.text, PROTO_TEXT_MAX - 1)
            : (void)strcpy(m->u.reply.text, "ok");
        break;
    case MSG_CTL_STATUS_NODE:
        m->u.node.tq_ns = 30000000000ull;
        m->u.node.n_gpus = 2;
        m->u.node.switch_multiplier = 4;
        m->u.node.reserve_percent = 10;
        m->u.node.oversub_default = 1;
        m->u.node.n_unhooked = 1;
        m->u.node.unhooked_seen = big ? UINT64_MAX : 3;
        break;
    case MSG_CTL_STATUS_UNHOOKED:
        m->u.unhooked.pid = 4242;
        m->u.unhooked.used = big ? UINT64_MAX : 300ull << 20;
        m->u.unhooked.origin = IDENTITY_POD;
        m->u.unhooked.qos = big ? POD_QOS_BESTEFFORT : POD_QOS_BURSTABLE;
        strcpy(m->u.unhooked.pod_uid, "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
        if (big)
            fill(m->u.unhooked.container_id, PROTO_CONTAINER_ID_MAX - 1);
        break;
    case MSG_CTL_STATUS_GPU:
        strcpy(m->u.gpu.uuid, "GPU-0");
        strcpy(m->u.gpu.name, "H100");
        m->u.gpu.mode = big ? SCHED_MODE_AUTO : SCHED_MODE_CONCURRENT;
        m->u.gpu.reserve = 8ull << 30;
        m->u.gpu.switch_time_ns = 2000000000ull;
        m->u.gpu.switch_measured = 1;
        m->u.gpu.swaps_out = 3;
        m->u.gpu.swap_out_bytes = big ? UINT64_MAX : 18ull << 30;
        m->u.gpu.n_running = big ? PROTO_MAX_WAITERS : 1;
        for (int i = 0; i < m->u.gpu.n_running; i++)
            m->u.gpu.running[i] = (uint64_t)i + 100;
        m->u.gpu.n_waiting = big ? PROTO_MAX_WAITERS : 2;
        m->u.gpu.truncated_waiting = big ? 7 : 0;
        for (int i = 0; i < m->u.gpu.n_waiting; i++) {
            m->u.gpu.waiting[i].client_id = (uint64_t)i + 1;
            m->u.gpu.waiting[i].reason = (uint8_t)(WAIT_THROTTLED - i % 4);
        }
        break;
    case MSG_CTL_STATUS_CLIENT:
        m->u.client.client_id = 3;
        m->u.client.state = CLIENT_HOLDING;
        m->u.client.core_limit = 30;
        m->u.client.limit_source = LIMIT_DECLARED;
        m->u.client.budget_ns = 300000000ull;
        m->u.client.footprint = 5ull << 30;
        m->u.client.evictable = 4ull << 30;
        m->u.client.oversubscribed = 1;
        m->u.client.load_permille = big ? 0xffff : 250;
        m->u.client.wait_reason = big ? WAIT_THROTTLED : WAIT_NONE;
        if (big)
            fill(m->u.client.pod_name, PROTO_NAME_MAX - 1);
        break;
    default:
        break;
    }
}

static int generate(void)
{
    /* every message the wire carries; reserved types get their own case */
    static const uint16_t types[] = {
#define PROTO_MSG(name, number, payload) MSG_##name,
#define PROTO_MSG_EMPTY(name, number) MSG_##name,
#include "protocol.def"
    };
    static uint8_t buf[PROTO_MAX_FRAME + 8];
    struct msg m;
    char name[128];

    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        for (int big = 0; big <= 1; big++) {
            int len;
            sample(&m, types[t], big);
            len = msg_encode(&m, buf, sizeof(buf));
            if (len < 0)
                return 1;
            snprintf(name, sizeof(name), "ok-%s-%s", msg_type_name(types[t]),
                     big ? "max" : "typical");
            put_file(name, buf + 4, (size_t)len - 4);
            if (big)
                continue;
            /* mutants of the typical encoding */
            snprintf(name, sizeof(name), "short-%s", msg_type_name(types[t]));
            put_file(name, buf + 4, (size_t)(len - 4) / 2);
            buf[len] = 0;
            snprintf(name, sizeof(name), "trailing-%s", msg_type_name(types[t]));
            put_file(name, buf + 4, (size_t)len - 3);
            buf[4] = 2;
            snprintf(name, sizeof(name), "version-%s", msg_type_name(types[t]));
            put_file(name, buf + 4, (size_t)len - 4);
        }
    }
    /* field mutants, patched at known offsets of typical encodings */
    static const uint8_t unnamed[] = {1, 0, 19, 0}; /* between the ranges */
    put_file("type-19", unnamed, sizeof(unnamed));
    static const uint8_t unused[] = {1, 0, MSG_PREPARE_SWAP + 1, 0}; /* first unused */
    put_file("type-after-PREPARE_SWAP", unused, sizeof(unused));
    static const uint8_t zero[] = {1, 0, 0, 0};
    put_file("type-zero", zero, sizeof(zero));
    static const uint8_t ffff[] = {1, 0, 0xff, 0xff, 0, 0};
    put_file("type-ffff", ffff, sizeof(ffff));

    int len;
    sample(&m, MSG_REGISTER, 0);
    len = msg_encode(&m, buf, sizeof(buf));
    /* body: ver 2, type 2, pid 4, "default" 2+7, "pod" 2+3, "" 2 (container),
     * "" 2 (job), mem 8, then core_limit 1, oversub 1, GPU count 2 */
    size_t core = 4 + 4 + 9 + 5 + 2 + 2 + 8;
    buf[4 + core] = 101;
    put_file("field-REGISTER-core-limit-101", buf + 4, (size_t)len - 4);
    buf[4 + core] = 50;
    buf[4 + core + 1] = OVERSUB_NODE_DEFAULT + 1;
    put_file("field-REGISTER-oversub-3", buf + 4, (size_t)len - 4);
    buf[4 + core + 1] = OVERSUB_ON;
    buf[4 + core + 2] = PROTO_MAX_GPUS + 1; /* count, no items follow */
    put_file("field-REGISTER-too-many-gpus", buf + 4, (size_t)len - 4);
    buf[4 + core + 2] = 1;
    buf[4 + 8 + 2 + 3] = '\0'; /* inside "default" */
    put_file("field-REGISTER-embedded-nul", buf + 4, (size_t)len - 4);
    buf[4 + 8 + 2 + 3] = 'a';
    buf[4 + 8] = 0xfe; /* namespace length 254 */
    put_file("field-REGISTER-name-too-long", buf + 4, (size_t)len - 4);

    sample(&m, MSG_CTL_STATUS_CLIENT, 0);
    len = msg_encode(&m, buf, sizeof(buf));
    /* body: ver/type 4, id 8, pid 4, three empty strings 6, gpu 2 */
    size_t st = 4 + 8 + 4 + 6 + 2;
    buf[4 + st] = CLIENT_DRAINING + 1;
    put_file("field-CTL_STATUS_CLIENT-state", buf + 4, (size_t)len - 4);
    buf[4 + st] = CLIENT_HOLDING;
    /* then held, wait, grants, last_drain, last_preempt (5 x 8), core_limit */
    buf[4 + st + 1 + 40] = 101;
    put_file("field-CTL_STATUS_CLIENT-core-limit-101", buf + 4, (size_t)len - 4);
    buf[4 + st + 1 + 40] = 30;
    buf[4 + st + 1 + 41] = LIMIT_REQUEST + 1;
    put_file("field-CTL_STATUS_CLIENT-limit-source", buf + 4, (size_t)len - 4);
    buf[4 + st + 1 + 41] = LIMIT_DECLARED;
    /* wait_reason is followed by uid, pod_source, pod_uid, container_id,
     * priority, priority_source, min_share and gang */
    size_t wait_reason = (size_t)len - 4 - 3 - (2 + strlen(m.u.client.container_id)) -
                         (2 + strlen(m.u.client.pod_uid)) - 1 - 4 - 1;
    buf[wait_reason] = WAIT_PRIORITY + 1;
    put_file("field-CTL_STATUS_CLIENT-wait-reason", buf + 4, (size_t)len - 4);

    sample(&m, MSG_CTL_STATUS_GPU, 0);
    len = msg_encode(&m, buf, sizeof(buf));
    /* body: ver/type 4, index 2, "GPU-0" 2+5, "H100" 2+4, memory_total 8,
     * then mode; it ends with n_running u16 + running ids (u64 each),
     * n_waiting u16, truncated_waiting u32 and waiters (u64 id, u8 reason) */
    size_t mode = 4 + 2 + 7 + 6 + 8;
    size_t waiters = 2 + 4 + 9 * (size_t)m.u.gpu.n_waiting;
    size_t running = 2 + 8 * (size_t)m.u.gpu.n_running;
    buf[4 + mode] = SCHED_MODE_AUTO + 1;
    put_file("field-CTL_STATUS_GPU-mode", buf + 4, (size_t)len - 4);
    buf[4 + mode] = m.u.gpu.mode;
    buf[len - 1] = WAIT_PRIORITY + 1; /* the last waiter's reason */
    put_file("field-CTL_STATUS_GPU-waiter-reason", buf + 4, (size_t)len - 4);
    buf[len - 1] = m.u.gpu.waiting[m.u.gpu.n_waiting - 1].reason;
    buf[len - waiters] = (uint8_t)((PROTO_MAX_WAITERS + 1) & 0xff);
    buf[len - waiters + 1] = (uint8_t)((PROTO_MAX_WAITERS + 1) >> 8);
    put_file("field-CTL_STATUS_GPU-too-many-waiters", buf + 4, (size_t)len - 4);
    buf[len - waiters] = (uint8_t)m.u.gpu.n_waiting;
    buf[len - waiters + 1] = 0;
    buf[len - waiters - running] = (uint8_t)((PROTO_MAX_WAITERS + 1) & 0xff);
    buf[len - waiters - running + 1] = (uint8_t)((PROTO_MAX_WAITERS + 1) >> 8);
    put_file("field-CTL_STATUS_GPU-too-many-running", buf + 4, (size_t)len - 4);

    sample(&m, MSG_CTL_STATUS_UNHOOKED, 0);
    len = msg_encode(&m, buf, sizeof(buf));
    /* body: ver/type 4, gpu 2, pid 4, used 8, seen_ns 8, then origin, qos */
    size_t origin = 4 + 2 + 4 + 8 + 8;
    buf[4 + origin] = IDENTITY_POD + 1;
    put_file("field-CTL_STATUS_UNHOOKED-origin", buf + 4, (size_t)len - 4);
    buf[4 + origin] = IDENTITY_POD;
    buf[4 + origin + 1] = POD_QOS_BESTEFFORT + 1;
    put_file("field-CTL_STATUS_UNHOOKED-qos", buf + 4, (size_t)len - 4);

    sample(&m, MSG_SWAPPED, 0);
    len = msg_encode(&m, buf, sizeof(buf));
    /* body: ver/type 4, gpu 1, direction 1 */
    buf[4 + 5] = SWAP_IN + 1;
    put_file("field-SWAPPED-direction-3", buf + 4, (size_t)len - 4);

    sample(&m, MSG_LOAD, 0);
    len = msg_encode(&m, buf, sizeof(buf));
    /* body: ver/type 4, gpu 1, busy_permille u16 */
    buf[4 + 5] = 1001 & 0xff;
    buf[4 + 6] = 1001 >> 8;
    put_file("field-LOAD-busy-1001", buf + 4, (size_t)len - 4);

    sample(&m, MSG_MEM_UPDATE, 0);
    len = msg_encode(&m, buf, sizeof(buf));
    /* body: ver/type 4, gpu 1, seq 4, bytes 8, extra 8, allocated 8, then
     * evictable u64: its top byte set puts it over allocated's 6 GiB */
    buf[4 + 33 + 7] = 0xff;
    put_file("field-MEM_UPDATE-evictable-over-allocated", buf + 4,
             (size_t)len - 4);

    sample(&m, MSG_REFUSED, 0);
    len = msg_encode(&m, buf, sizeof(buf));
    /* body: ver/type 4, then reason u8 */
    buf[4 + 4] = REFUSED_BAD_NAME + 1;
    put_file("field-REFUSED-reason-4", buf + 4, (size_t)len - 4);
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
