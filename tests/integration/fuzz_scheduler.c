/* fuzz_scheduler.c - random client traffic against a live scheduler: the
 * fuzzer of the codec (tests/unit/fuzz_protocol.c) stops at decoding; this
 * one drives the daemon's handlers, policy and quota arbiter.
 *
 *   fuzz_scheduler SOCKET_DIR SEED SECONDS
 *
 * Keeps CONNECTIONS clients registered (on the two GPUs the test's
 * scheduler manages and one it does not) and sends, for SECONDS, random
 * sequences of well-framed client messages with random fields (zero, small,
 * near the GPU's capacity, huge, the lease last granted), a few messages of
 * the wrong direction and a few frames with random bytes changed. A
 * connection the scheduler closes is opened and registered again. Then it
 * closes them all and checks that a well-behaved client registers and gets
 * the lock. The same seed makes the same random choices (what the daemon
 * answers, and when, still varies). Exit 0 if it did; the
 * test script checks that the daemon lives and that nvsharectl status
 * answers. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"
#include "sock.h"

#define CONNECTIONS 8
#define GPUS 3 /* GPU-sim-0, GPU-sim-1 (managed), GPU-unmanaged */

static const char *const uuids[GPUS] = {"GPU-sim-0", "GPU-sim-1",
                                        "GPU-unmanaged"};

struct conn {
    int fd;
    struct frame_reader reader;
    uint32_t lease[GPUS]; /* the latest LOCK_OK or DROP_LOCK */
};

static char path[256];
static uint64_t rng_state;
static unsigned long long sent, mutated, reopened;

static uint64_t rnd(void)
{
    /* xorshift64*: reproducible from the seed. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t below(uint64_t n)
{
    return rnd() % n;
}

/* A value where handlers' edge cases are. */
static uint64_t any_u64(void)
{
    switch (below(8)) {
    case 0:
        return 0;
    case 1:
        return 1 + below(64);
    case 2:
        return (16ull << 30) + below(3) - 1; /* the capacity */
    case 3:
        return below(16ull << 30); /* fits */
    case 4:
        return 1ull << below(64);
    case 5:
        return UINT64_MAX - below(2);
    case 6:
        return (64 * (16ull << 30)) + below(3) - 1; /* the bound */
    default:
        return rnd();
    }
}

/* Mostly what a client could say; else where handlers' edge cases are
 * (most of which close the connection, so they must not dominate). */
static uint64_t plausible_u64(void)
{
    return below(10) ? below(16ull << 30) : any_u64();
}

static long long monotonic_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static struct msg registration(int n_gpus)
{
    struct msg m = {.type = MSG_REGISTER};

    m.u.reg.n_gpus = (uint16_t)n_gpus;
    for (int i = 0; i < n_gpus; i++)
        strcpy(m.u.reg.gpu_uuids[i], uuids[i]);
    snprintf(m.u.reg.pod_name, sizeof(m.u.reg.pod_name), "fuzz-%d",
             (int)below(4));
    m.u.reg.memory_limit = below(3) ? 0 : any_u64();
    m.u.reg.core_limit = (uint8_t)(below(3) ? 0 : below(101));
    m.u.reg.oversub = (uint8_t)below(3);
    return m;
}

/* Opens and registers c; -1 if the scheduler does not answer. */
static int open_conn(struct conn *c)
{
    struct msg reg = registration(GPUS), reply;

    memset(c, 0, sizeof(*c));
    c->fd = unix_connect(path);
    if (c->fd < 0 || msg_send(c->fd, &reg) || msg_recv(c->fd, &reply, 5000) ||
        reply.type != MSG_REGISTER_OK) {
        fprintf(stderr, "fuzz_scheduler: cannot register: %s\n", strerror(errno));
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

/* Reads what the scheduler sent c; remembers leases. Returns -1 when the
 * scheduler closed the connection (or its stream is bad). */
static int read_conn(struct conn *c)
{
    struct msg m;
    int rc = frame_reader_fill(&c->reader, c->fd);

    while (rc >= 0 && (rc = frame_reader_next(&c->reader, &m)) > 0)
        if ((m.type == MSG_LOCK_OK || m.type == MSG_DROP_LOCK) &&
            m.u.lock.gpu < GPUS)
            c->lease[m.u.lock.gpu] = m.u.lock.lease;
    return rc < 0 ? -1 : 0;
}

static const uint16_t client_types[] = {
    MSG_REQ_LOCK,    MSG_REQ_LOCK,   MSG_LOCK_RELEASED, MSG_LOCK_RELEASED,
    MSG_LOCK_IN_USE, MSG_DRAINING,   MSG_MEM_UPDATE,    MSG_MEM_RESERVE,
    MSG_MEM_RESERVE, MSG_MEM_RETURN, MSG_SWAPPED,       MSG_LOAD,
};
static const uint16_t odd_types[] = {
    MSG_REGISTER, MSG_LOCK_OK,    MSG_DROP_LOCK, MSG_MEM_GRANT,
    MSG_EVICT,    MSG_CTL_STATUS, MSG_CTL_SET,   MSG_SCHED_ON,
};

/* A control message on the client socket is refused whatever it names. */
static const char *const setting_names[] = {"tq", "mode", "core-limit", "bogus"};

static struct msg random_message(const struct conn *c)
{
    struct msg m = {0};
    bool odd = below(50) == 0;
    /* Mostly the managed GPUs: naming another is a violation. */
    uint8_t gpu = (uint8_t)(below(40) ? below(GPUS - 1) : below(256));

    m.type =
        odd ? odd_types[below(sizeof(odd_types) / sizeof(odd_types[0]))]
            : client_types[below(sizeof(client_types) / sizeof(client_types[0]))];
    switch (m.type) {
    case MSG_REGISTER:
        m = registration(1 + (int)below(GPUS));
        break;
    case MSG_REQ_LOCK:
    case MSG_LOCK_RELEASED:
    case MSG_LOCK_IN_USE:
    case MSG_DRAINING:
    case MSG_LOCK_OK:
    case MSG_DROP_LOCK:
        m.u.lock.gpu = gpu;
        m.u.lock.lease = gpu < GPUS && below(4) ? c->lease[gpu] : (uint32_t)rnd();
        m.u.lock.drain_ns = plausible_u64();
        break;
    case MSG_MEM_UPDATE:
    case MSG_MEM_RESERVE:
    case MSG_MEM_RETURN:
    case MSG_MEM_GRANT:
        m.u.mem.gpu = gpu;
        m.u.mem.seq = (uint32_t)below(1000);
        m.u.mem.bytes = plausible_u64();
        m.u.mem.extra = plausible_u64();
        m.u.mem.allocated = plausible_u64();
        m.u.mem.evictable = m.u.mem.allocated ? below(m.u.mem.allocated) : 0;
        break;
    case MSG_SWAPPED:
    case MSG_EVICT:
        m.u.swap.gpu = gpu;
        m.u.swap.direction = (uint8_t)(below(10) ? 1 + below(SWAP_IN) : 0);
        m.u.swap.bytes = plausible_u64();
        m.u.swap.duration_ns = plausible_u64();
        break;
    case MSG_LOAD:
        m.u.load.gpu = gpu;
        m.u.load.busy_permille = (uint16_t)below(1001);
        m.u.load.span_ns = plausible_u64();
        break;
    case MSG_CTL_SET:
        snprintf(m.u.set.name, sizeof(m.u.set.name), "%s",
                 setting_names[below(sizeof(setting_names) /
                                     sizeof(setting_names[0]))]);
        m.u.set.value = any_u64();
        break;
    default:
        break;
    }
    return m;
}

/* Sends one random message on c, sometimes with bytes of its frame
 * changed. A full socket buffer skips it rather than blocking. */
static void send_random(struct conn *c)
{
    uint8_t frame[PROTO_MAX_FRAME + 4];
    struct msg m = random_message(c);
    int len = msg_encode(&m, frame, sizeof(frame));

    if (len < 0)
        return;
    if (below(50) == 0 && len > 8) {
        for (uint64_t n = 1 + below(3); n; n--)
            frame[8 + below((uint64_t)len - 8)] = (uint8_t)rnd();
        mutated++;
    }
    if (send(c->fd, frame, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) == len)
        sent++;
}

/* A client that follows the protocol registers and is granted the GPU. */
static int well_behaved_client_is_served(void)
{
    struct conn c;
    struct msg m = {.type = MSG_REQ_LOCK}, reply;
    long long deadline = monotonic_ms() + 5000;
    int rc;

    if (open_conn(&c) || msg_send(c.fd, &m)) {
        printf("FAIL: a well-behaved client could not register and ask\n");
        return 1;
    }
    do
        rc = msg_recv(c.fd, &reply, 1000);
    while ((rc == 0 && reply.type != MSG_LOCK_OK) ||
           (rc == PROTO_E_TIMEOUT && monotonic_ms() < deadline));
    close(c.fd);
    if (rc || reply.type != MSG_LOCK_OK) {
        printf("FAIL: a well-behaved client was not granted the GPU (%s)\n",
               proto_strerror(rc));
        return 1;
    }
    printf("ok: a well-behaved client is granted the GPU afterwards\n");
    return 0;
}

int main(int argc, char **argv)
{
    struct conn conns[CONNECTIONS];

    if (argc != 4) {
        fprintf(stderr, "usage: %s SOCKET_DIR SEED SECONDS\n", argv[0]);
        return 2;
    }
    snprintf(path, sizeof(path), "%s/%s", argv[1], CLIENT_SOCKET_NAME);
    rng_state = strtoull(argv[2], NULL, 10) | 1;
    long long until = monotonic_ms() + 1000 * atoll(argv[3]);

    for (int i = 0; i < CONNECTIONS; i++)
        if (open_conn(&conns[i]))
            return 1;
    while (monotonic_ms() < until) {
        struct conn *c = &conns[below(CONNECTIONS)];
        if (read_conn(c)) {
            close(c->fd);
            reopened++;
            if (open_conn(c))
                return 1;
        }
        for (uint64_t n = 1 + below(8); n; n--)
            send_random(c);
        if (below(64) == 0)
            usleep(1000); /* let the daemon's ticks and deadlines run */
    }
    for (int i = 0; i < CONNECTIONS; i++)
        close(conns[i].fd);
    printf("ok: %llu messages sent (%llu with bytes changed); the scheduler "
           "closed %llu connections\n",
           sent, mutated, reopened);
    return well_behaved_client_is_served();
}
