/* protocol.h - the nvshare wire protocol, shared by libnvshare, the scheduler
 * and nvsharectl. Nothing else in the tree touches message bytes.
 *
 * A frame is a 4-byte little-endian body length followed by the body:
 *
 *     u16 version | u16 type | payload (fields in protocol.def's order)
 *
 * Integers are little-endian, strings are u16 length + bytes (no NUL), lists
 * are a u16 count + items. protocol.def describes every message once; the
 * structs below and the codec in protocol.c are generated from it, field by
 * field, so struct layout, padding and the compiler never leak onto the
 * wire. A frame
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
#define PROTO_HEADER_LEN 8 /* length + version + type */
#define PROTO_MAX_FRAME (64 * 1024)
#define PROTO_MAX_GPUS 32    /* GPUs one client may register */
#define PROTO_NAME_MAX 254   /* Kubernetes names are at most 253 bytes */
#define PROTO_SETTING_MAX 32 /* a setting's name in CTL_SET: "core-limit" */
#define PROTO_UUID_MAX 96    /* "GPU-<36>" and "MIG-GPU-<36>/<gi>/<ci>" */
#define PROTO_TEXT_MAX 512
#define PROTO_MAX_WAITERS 256     /* waiters listed per GPU in a status reply */
#define PROTO_POD_UID_MAX 37      /* a pod UID, 8-4-4-4-12 */
#define PROTO_CONTAINER_ID_MAX 65 /* a container ID, 64 hex */
#define PROTO_GROUP_NAME_MAX 64   /* a group's name: a claim UID is 36 */
#define PROTO_GROUP_MAX_MEMBERS 16 /* pods in one group */

#define CLIENT_SOCKET_NAME "scheduler.sock"
#define CONTROL_SOCKET_NAME "control.sock"
#define DEFAULT_SOCK_DIR "/var/run/nvshare"

/* MSG_REGISTER = 1, ...: protocol.def lists them with their meaning. */
enum msg_type {
#define PROTO_MSG(name, number, payload) MSG_##name = number,
#define PROTO_MSG_EMPTY(name, number) MSG_##name = number,
#define PROTO_MSG_RESERVED(name, number) MSG_##name = number,
#include "protocol.def"
};

enum swap_direction {
    SWAP_OUT = 1, /* device -> host */
    SWAP_IN = 2,  /* host -> device */
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

/* A client's first LOAD comes within this much of its GPU time (time it
 * may submit): auto mode's trial of an unmeasured client lasts as long. */
#define LOAD_FIRST_REPORT_NS 1000000000ull /* 1 s */

/* Why the scheduler refused a connection (REFUSED). */
enum refused_reason {
    REFUSED_UID_LIMIT = 1, /* its uid has max-connections-per-uid already */
    REFUSED_NO_MEMORY = 2, /* the scheduler could not grow its tables */
    REFUSED_BAD_NAME = 3,  /* a name in its REGISTER has a control character */
};

/* Why a client waits (status). */
enum wait_reason {
    WAIT_NONE = 0,
    WAIT_LOCK = 1,      /* the GPU is held exclusively (mode, load) */
    WAIT_MEMORY = 2,    /* its footprint does not fit beside the running set */
    WAIT_THROTTLED = 3, /* its pod used its compute budget for this window */
    WAIT_PRIORITY = 4   /* a client of a higher priority class wants the GPU */
};

/* Why a GPU's time quantum is what it is (status). */
enum quantum_reason {
    QUANTUM_PINNED = 0, /* the operator set it: nvsharectl set tq, NVSHARE_TQ */
    QUANTUM_FLOOR = 1,  /* auto: hand-overs are cheap (or not measured yet) */
    QUANTUM_DRAIN = 2,  /* auto: a multiple of the mean hand-over */
    QUANTUM_CEILING = 3, /* auto: hand-overs so slow that the cap applies */
};

/* Priority classes of pods (nvsharectl set priority, the nvshare.com/priority
 * annotation, NVSHARE_PRIORITY): a higher class preempts a lower one at
 * once. Any integer from PRIORITY_LOWEST to PRIORITY_HIGHEST is a class; 0
 * means not set (normal). */
enum priority_class {
    PRIORITY_UNSET = 0,
    PRIORITY_LOW = 1,
    PRIORITY_NORMAL = 2,
    PRIORITY_HIGH = 3,
    PRIORITY_LOWEST = 1,
    PRIORITY_HIGHEST = 9,
};

/* Whether a pod's idle memory may be swapped out for others (nvsharectl set
 * idle-swap, the nvshare.com/idle-swap annotation); unset is on. */
enum idle_swap {
    IDLE_SWAP_UNSET = 0,
    IDLE_SWAP_OFF = 1,
    IDLE_SWAP_ON = 2,
};


enum limit_source {
    LIMIT_NONE = 0,
    LIMIT_DECLARED = 1,   /* NVSHARE_GPU_CORE_LIMIT at registration */
    LIMIT_RUNTIME = 2,    /* nvsharectl */
    LIMIT_ANNOTATION = 3, /* the pod's nvshare.com/gpu-*-limit annotation */
    LIMIT_REQUEST = 4,    /* the pod's nvshare.com/gpu-memory request */
};

/* CTL_STATUS_SETTING: where a scheduler setting's value comes from. */
enum setting_source {
    SETTING_SOURCE_DEFAULT = 0,
    SETTING_SOURCE_ENV = 1,        /* its NVSHARE_... variable */
    SETTING_SOURCE_STATE_FILE = 2, /* set with nvsharectl before this start */
    SETTING_SOURCE_RUNTIME = 3,    /* set with nvsharectl since this start */
};

/* CTL_POD_FACTS: annotations the watcher could not read (kept as they
 * were). */
enum pod_fact_unreadable {
    POD_FACT_CORE_UNREADABLE = 1,
    POD_FACT_MEMORY_UNREADABLE = 2,
    POD_FACT_PRIORITY_UNREADABLE = 4,
    POD_FACT_IDLE_SWAP_UNREADABLE = 8,
    POD_FACT_UNREADABLE_ALL = 15,
};

/* Where the pod a client is billed to comes from. */
enum pod_source {
    POD_SOURCE_NONE = 0,     /* none: billed on its own */
    POD_SOURCE_DECLARED = 1, /* a plain host: the name it declared, bound to
                                the uid that declared it first */
    POD_SOURCE_CGROUP = 2,   /* a Kubernetes node: the pod UID in its cgroup */
};

enum client_gpu_state {
    CLIENT_IDLE = 0,
    CLIENT_WAITING,
    CLIENT_HOLDING,
    CLIENT_DRAINING,
};

/* Where a process comes from, as its /proc/PID/cgroup tells
 * (src/scheduler/identity.h). */
enum identity_kind {
    IDENTITY_UNKNOWN = 0, /* no cgroup file, or nothing in it could be read */
    IDENTITY_HOST = 1,    /* a process outside kubelet's cgroups */
    IDENTITY_POD = 2,
};

enum pod_qos {
    POD_QOS_UNKNOWN = 0,
    POD_QOS_GUARANTEED = 1,
    POD_QOS_BURSTABLE = 2,
    POD_QOS_BESTEFFORT = 3,
};

/* The payload structs (struct msg_register, ...), one member per row of
 * protocol.def in wire order, with the C type of its kind. */
#define PROTO_CTYPE_U8 uint8_t
#define PROTO_CTYPE_U16 uint16_t
#define PROTO_CTYPE_U32 uint32_t
#define PROTO_CTYPE_U64 uint64_t
#define PROTO_CTYPE_I32 int32_t

#define PROTO_PAYLOAD(type, member) struct type {
#define PROTO_RECORD(type) struct type {
#define PROTO_END()                                                            \
    }                                                                          \
    ;
#define PROTO_FIELD(kind, name, bound) PROTO_CTYPE_##kind name;
#define PROTO_STR(name, size) char name[size];
#define PROTO_COUNT(name, list) uint16_t name;
#define PROTO_LIST(kind, name, count, capacity)                                \
    PROTO_CTYPE_##kind name[capacity];
#define PROTO_STR_LIST(name, count, capacity, size) char name[capacity][size];
#define PROTO_RECORD_LIST(record, name, count, capacity)                       \
    struct record name[capacity];
#include "protocol.def"

/* A message: its type, and in u the payload protocol.def says it carries
 * (u.reg for REGISTER, u.lock for the lock messages, ...). */
struct msg {
    uint16_t type;
    union {
#define PROTO_PAYLOAD(type, member) struct type member;
#include "protocol.def"
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

/* enum sched_mode's names, indexed by mode and NULL-terminated: the one
 * spelling that nvsharectl, the scheduler's settings and its replies use. */
extern const char *const sched_mode_names[];
const char *sched_mode_name(uint8_t mode); /* "unknown" if out of range */
/* "guaranteed", "burstable", "besteffort"; "unknown" otherwise. */
const char *pod_qos_name(uint8_t qos);

/* Encodes m as a whole frame into buf. Returns the frame length or a
 * negative proto_error. */
int msg_encode(const struct msg *m, uint8_t *buf, size_t cap);

/* Decodes one frame body (the bytes after the 4-byte length). */
int msg_decode(const uint8_t *body, size_t len, struct msg *out);

/* Socket I/O (protocol_io.c). Blocking helpers for sockets owned by one thread at a time. msg_send
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
