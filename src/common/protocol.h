/* protocol.h - the nvshare wire protocol, shared by libnvshare, the scheduler
 * and nvsharectl. Nothing else in the tree touches message bytes.
 *
 * A frame is a 4-byte little-endian body length followed by the body:
 *
 *     u16 version | u16 type | payload (fields in the order listed below)
 *
 * Integers are little-endian, strings are u16 length + bytes (no NUL), lists
 * are a u16 count + items. Every field is encoded and decoded explicitly, so
 * struct layout, padding and the compiler never leak onto the wire. A frame
 * that does not decode exactly (short, trailing bytes, unknown type, strings
 * over their limit) is rejected as a whole.
 *
 * Two sockets speak it: the client socket (applications; any local user) and
 * the control socket (operators; root-only by default). Control messages are
 * refused on the client socket, which is what keeps an application from
 * changing the scheduler's settings. */
#ifndef NVSHARE_PROTOCOL_H
#define NVSHARE_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION 1
#define PROTO_HEADER_LEN 8        /* length + version + type */
#define PROTO_MAX_FRAME (64 * 1024)
#define PROTO_MAX_GPUS 32         /* GPUs one client may register */
#define PROTO_NAME_MAX 254        /* Kubernetes names are at most 253 bytes */
#define PROTO_UUID_MAX 96         /* "GPU-<36>" and "MIG-GPU-<36>/<gi>/<ci>" */
#define PROTO_TEXT_MAX 512
#define PROTO_MAX_WAITERS 256     /* waiters listed per GPU in a status reply */

#define CLIENT_SOCKET_NAME "scheduler.sock"
#define CONTROL_SOCKET_NAME "control.sock"
#define DEFAULT_SOCK_DIR "/var/run/nvshare"

enum msg_type {
    /* client socket: application <-> scheduler */
    MSG_REGISTER = 1,      /* client -> sched: who I am, which GPUs I use */
    MSG_REGISTER_OK,       /* sched -> client: accepted, id, per-GPU known */
    MSG_SCHED_ON,          /* sched -> client: take the lock before submitting */
    MSG_SCHED_OFF,         /* sched -> client: anti-thrashing off, run freely */
    MSG_REQ_LOCK,          /* client -> sched: I want to submit on gpu */
    MSG_LOCK_OK,           /* sched -> client: gpu is yours under lease */
    MSG_DROP_LOCK,         /* sched -> client: drain and give gpu back */
    MSG_LOCK_RELEASED,     /* client -> sched: drained; gpu is free */
    MSG_LOCK_IN_USE,       /* client -> sched: first submission under lease:
                              billing starts here, not at LOCK_OK */
    /* memory quotas (struct msg_mem) */
    MSG_MEM_UPDATE = 20,   /* client -> sched: bytes allocated */
    MSG_WAIT_FOR_MEM,      /* sched -> client: your REQ_LOCK waits for GPU
                              memory (struct msg_wait) */
    MSG_MEM_AVAILABLE,     /* sched -> client: room made; LOCK_OK follows */
    MSG_UPDATE_LIMIT,      /* sched -> client: the pod's quota changed */
    MSG_UPDATE_CORE_LIMIT, /* reserved: core limits are enforced by the
                              scheduler alone */
    MSG_MEM_RESERVE,       /* client -> sched: I need bytes (+extra) more */
    MSG_MEM_GRANT,         /* sched -> client: bytes granted, 0 = refused */
    MSG_MEM_RETURN,        /* client -> sched: I give back bytes of credit */
    MSG_MEM_RECLAIM,       /* sched -> client: give back your unused credit */
    /* memory-aware scheduling */
    MSG_EVICT,             /* sched -> client: move your evictable memory on
                              gpu to the host (struct msg_swap, gpu only) */
    MSG_SWAPPED,           /* client -> sched: a swap finished (msg_swap) */
    MSG_LOAD,              /* client -> sched: how busy it keeps gpu */
    MSG_PREPARE_SWAP,      /* sched -> client: an EVICT of gpu may come: get
                              ready for it (struct msg_swap, gpu only) */
    /* control socket: nvsharectl <-> scheduler */
    MSG_CTL_STATUS = 100,  /* ctl -> sched: send the status records */
    MSG_CTL_SET,           /* ctl -> sched: change a setting */
    MSG_CTL_REPLY,         /* sched -> ctl: result of CTL_SET */
    MSG_CTL_STATUS_NODE,   /* sched -> ctl: node-wide settings, counts */
    MSG_CTL_STATUS_GPU,    /* sched -> ctl: one per GPU */
    MSG_CTL_STATUS_CLIENT, /* sched -> ctl: one per (client, GPU) */
    MSG_CTL_STATUS_END,    /* sched -> ctl: no more records */
};

/* Lock messages name a GPU by its index in the client's REGISTER list. */
struct msg_lock {
    uint8_t gpu;
    uint32_t lease;    /* LOCK_OK, DROP_LOCK, LOCK_RELEASED; 0 in REQ_LOCK */
    uint64_t drain_ns; /* LOCK_RELEASED: measured drain time; else 0 */
};

/* One layout for every memory message; a message uses the fields its
 * comment in enum msg_type names and leaves the others zero:
 *   MEM_UPDATE   gpu, allocated, evictable
 *   MEM_RESERVE  gpu, seq, bytes (needed), extra (wanted beyond), allocated,
 *                evictable
 *   MEM_GRANT    gpu, seq, bytes (granted; 0 = refused), quota, pod_held
 *   MEM_RETURN   gpu, bytes (credit given back), allocated, evictable
 *   MEM_RECLAIM  gpu
 *   UPDATE_LIMIT gpu, quota (0 = none), pod_held
 * evictable is the part of allocated that a swap-out really moves off the
 * GPU (managed memory); the rest stays resident while the client is
 * swapped out. It is never more than allocated. */
struct msg_mem {
    uint8_t gpu;
    uint32_t seq;
    uint64_t bytes;
    uint64_t extra;
    uint64_t allocated;
    uint64_t evictable;
    uint64_t quota;
    uint64_t pod_held;
};

/* WAIT_FOR_MEM: need = the client's footprint, free = room left beside
 * the running set, limit = capacity minus the reserve, wait_ns = time until
 * the running set is due to rotate (0: not known). MEM_AVAILABLE: wait_ns =
 * how long it waited; the rest zero. */
struct msg_wait {
    uint8_t gpu;
    uint64_t need;
    uint64_t free;
    uint64_t limit;
    uint64_t wait_ns;
};

enum swap_direction {
    SWAP_OUT = 1, /* device -> host */
    SWAP_IN = 2,  /* host -> device */
};

struct msg_swap {
    uint8_t gpu;
    uint8_t direction;    /* enum swap_direction; 0 in EVICT, PREPARE_SWAP */
    uint64_t bytes;       /* moved */
    uint64_t duration_ns;
};

/* busy_permille of span_ns of wall time had the client's work queued. */
struct msg_load {
    uint8_t gpu;
    uint16_t busy_permille; /* 0 .. 1000 */
    uint64_t span_ns;
};

enum sched_mode {
    SCHED_MODE_SERIAL = 0,     /* one holder at a time */
    SCHED_MODE_CONCURRENT = 1, /* everyone whose memory fits runs */
    SCHED_MODE_AUTO = 2,       /* co-run light clients that fit, time-slice
                                  the rest */
};

enum oversub_setting {
    OVERSUB_OFF = 0,
    OVERSUB_ON = 1,
    OVERSUB_NODE_DEFAULT = 2, /* the process did not say */
};

/* Why a client waits (status). */
enum wait_reason {
    WAIT_NONE = 0,
    WAIT_LOCK = 1,     /* the GPU is held exclusively (mode, load) */
    WAIT_MEMORY = 2,   /* its footprint does not fit beside the running set */
    WAIT_THROTTLED = 3 /* its pod used its compute budget for this window */
};

struct msg_register {
    uint32_t pid; /* informational: the scheduler uses SO_PEERCRED */
    char pod_namespace[PROTO_NAME_MAX];
    char pod_name[PROTO_NAME_MAX];
    char container_name[PROTO_NAME_MAX];
    uint64_t memory_limit; /* bytes; 0 = none declared */
    uint8_t core_limit;    /* percent 1-100; 0 = none declared */
    uint8_t oversub;       /* enum oversub_setting */
    uint16_t n_gpus;
    char gpu_uuids[PROTO_MAX_GPUS][PROTO_UUID_MAX];
};

struct msg_register_ok {
    uint64_t client_id;
    uint8_t scheduling_on;
    uint8_t oversub_default; /* for clients that did not say */
    uint16_t n_gpus;
    uint8_t gpu_known[PROTO_MAX_GPUS]; /* 0: scheduler does not manage it */
};

enum ctl_key {
    CTL_SET_TQ = 1,          /* value: nanoseconds */
    CTL_SET_ANTI_THRASH = 2, /* value: 0 or 1 */
    CTL_SET_CORE_LIMIT = 3,  /* target: pod or client; value: 1-100, 0 = drop
                                the run-time limit (back to the declared one) */
    CTL_SET_MEMORY_LIMIT = 4, /* target: pod or client; value: bytes, 0 = drop
                                 the run-time limit */
    CTL_SET_MODE = 5,        /* target: GPU index or UUID, "" = every GPU;
                                value: enum sched_mode */
    CTL_SET_SWITCH_TIME = 6, /* value: nanoseconds, 0 = auto (measured) */
};

enum limit_source {
    LIMIT_NONE = 0,
    LIMIT_DECLARED = 1, /* NVSHARE_GPU_CORE_LIMIT at registration */
    LIMIT_RUNTIME = 2,  /* nvsharectl or the pod annotation */
};

struct msg_ctl_set {
    uint16_t key;
    uint64_t value;
    char target[PROTO_NAME_MAX]; /* pod or client, for per-client settings */
};

struct msg_ctl_reply {
    int32_t status; /* 0 on success, else an errno value */
    char text[PROTO_TEXT_MAX];
};

struct msg_status_node {
    uint64_t tq_ns;
    uint64_t window_ns; /* compute-limit accounting window */
    uint8_t anti_thrash;
    uint16_t n_gpus;
    uint16_t n_clients;
    uint64_t uptime_ns;
    uint64_t switch_time_fixed_ns; /* 0: auto */
    uint16_t switch_multiplier;    /* auto: swap time x this */
    uint8_t reserve_percent;
    uint8_t oversub_default;
};

struct status_waiter {
    uint64_t client_id;
    uint8_t reason; /* enum wait_reason */
};

struct msg_status_gpu {
    uint16_t index;
    char uuid[PROTO_UUID_MAX];
    char name[PROTO_NAME_MAX];
    uint64_t memory_total;   /* capacity the scheduler admits against */
    uint8_t mode;            /* enum sched_mode */
    uint64_t reserve;        /* kept free: NVSHARE_MEMORY_RESERVE_PERCENT */
    uint64_t running_footprint;
    uint64_t resident;       /* footprints that occupy the GPU now */
    uint64_t switch_time_ns; /* rotation quantum for memory waits */
    uint8_t switch_measured; /* derived from measured swaps */
    uint64_t switches;       /* grants that followed another holder */
    uint64_t swaps_out, swaps_in;
    uint64_t swap_out_bytes, swap_in_bytes;
    uint64_t swap_out_ns, swap_in_ns;           /* totals */
    uint64_t last_swap_out_ns, last_swap_in_ns; /* the latest swap */
    uint16_t n_running;
    uint64_t running[PROTO_MAX_WAITERS];
    uint16_t n_waiting; /* in queue order; truncated_waiting says how many
                           more were left out */
    uint32_t truncated_waiting;
    struct status_waiter waiting[PROTO_MAX_WAITERS];
};

enum client_gpu_state {
    CLIENT_IDLE = 0,
    CLIENT_WAITING,
    CLIENT_HOLDING,
    CLIENT_DRAINING,
};

struct msg_status_client {
    uint64_t client_id;
    uint32_t pid;
    char pod_namespace[PROTO_NAME_MAX];
    char pod_name[PROTO_NAME_MAX];
    char container_name[PROTO_NAME_MAX];
    uint16_t gpu;             /* scheduler's GPU index */
    uint8_t state;            /* enum client_gpu_state */
    uint64_t held_ns;         /* total time held, including the current hold */
    uint64_t wait_ns;         /* current wait, 0 when not waiting */
    uint64_t grants;          /* times the lock was granted */
    uint64_t last_drain_ns;   /* drain time reported with the last release */
    uint64_t last_preempt_ns; /* DROP_LOCK sent to LOCK_RELEASED received */
    uint8_t core_limit;       /* percent; 0 = unlimited */
    uint8_t limit_source;     /* enum limit_source */
    uint64_t budget_ns;       /* per window after scaling; 0 = unlimited */
    uint64_t used_ns;         /* billed in the current window (the pod's) */
    uint8_t throttled;
    uint64_t mem_quota;       /* the pod's on this GPU; 0 = none */
    uint8_t mem_quota_source; /* enum limit_source */
    uint64_t mem_allocated;   /* this client's */
    uint64_t pod_mem_held;    /* the pod's allocated + credit (quota usage) */
    uint64_t pod_mem_peak;    /* the pod's highest allocated total */
    uint64_t pod_mem_refused; /* allocations refused for the pod */
    uint64_t footprint;       /* allocated + credit + context overhead */
    uint64_t evictable;       /* of the footprint, what a swap-out moves;
                                 the rest stays on the GPU while swapped out */
    uint8_t oversubscribed;   /* its device allocations are made managed */
    uint8_t swapped_out;
    uint16_t load_permille;   /* busy fraction; 0xffff = not measured yet */
    uint8_t wait_reason;      /* enum wait_reason */
};

struct msg {
    uint16_t type;
    union {
        struct msg_register reg;
        struct msg_register_ok reg_ok;
        struct msg_lock lock;
        struct msg_mem mem;
        struct msg_wait wait;
        struct msg_swap swap;
        struct msg_load load;
        struct msg_ctl_set set;
        struct msg_ctl_reply reply;
        struct msg_status_node node;
        struct msg_status_gpu gpu;
        struct msg_status_client client;
    } u;
};

enum proto_error {
    PROTO_OK = 0,
    PROTO_E_SHORT = -1,    /* fewer bytes than the fields need */
    PROTO_E_VERSION = -2,  /* speaks another protocol version */
    PROTO_E_TYPE = -3,     /* unknown message type */
    PROTO_E_TRAILING = -4, /* bytes left after the last field */
    PROTO_E_FIELD = -5,    /* a field is out of range (string too long, ...) */
    PROTO_E_SPACE = -6,    /* the encoding does not fit the buffer */
    PROTO_E_IO = -7,       /* the peer closed or the socket failed */
    PROTO_E_TIMEOUT = -8,
};

const char *proto_strerror(int err);
const char *msg_type_name(uint16_t type);

/* Encodes m as a whole frame into buf. Returns the frame length or a
 * negative proto_error. */
int msg_encode(const struct msg *m, uint8_t *buf, size_t cap);

/* Decodes one frame body (the bytes after the 4-byte length). */
int msg_decode(const uint8_t *body, size_t len, struct msg *out);

/* Blocking helpers for sockets owned by one thread at a time. msg_send
 * writes the whole frame (MSG_NOSIGNAL: a dead peer is an error, not a
 * SIGPIPE in the host application). msg_recv waits at most timeout_ms
 * (-1: forever; 0: only what is already queued) for a whole frame. After
 * PROTO_E_TIMEOUT part of a frame may have been consumed: close the
 * connection. */
int msg_send(int fd, const struct msg *m);
int msg_recv(int fd, struct msg *out, int timeout_ms);

/* Accumulates bytes from a non-blocking socket and yields whole frames.
 * The event loop owns one per connection. */
struct frame_reader {
    uint8_t buf[PROTO_MAX_FRAME + 4];
    size_t len;
};

/* Reads what the socket has. Returns 1 if data was read, 0 on EAGAIN,
 * PROTO_E_IO on EOF or error. */
int frame_reader_fill(struct frame_reader *r, int fd);

/* Pops the next whole frame into out. Returns 1 if a message was produced,
 * 0 if more bytes are needed, a negative proto_error if the stream is bad. */
int frame_reader_next(struct frame_reader *r, struct msg *out);

#endif
