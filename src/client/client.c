/* client.c - the client runtime's lifecycle and public API (see
 * nvshare_client.h for the contract): settings, start and stop, fork, and
 * the state that the gates (gate.c) and the connection thread
 * (connection.c) share. It also attaches the memory ledger (memory.c) to
 * the connection. */
#include "nvshare_client.h"
#include "client_internal.h"

#include <errno.h>
#include <stddef.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "env.h"
#include "log.h"
#include "protocol.h"

/* How long an allocation waits for the node's oversubscription default:
 * the bound quota reservations wait for the scheduler (memory.c). */
#define REGISTRATION_WAIT_SEC 2

struct client_state client = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .changed = PTHREAD_COND_INITIALIZER,
    .beat = PTHREAD_COND_INITIALIZER,
    .fd = -1,
    .wake_fd = -1,
    .catch_up_fd = -1,
    .oversub_env = -1,
};

/* ---- settings ------------------------------------------------------------ */

static struct client_settings settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

/* A multi-GPU job's ranks must be one job to the scheduler (gang grants),
 * or NCCL's collectives spin on a rank whose peer is gated. Launchers that
 * start one process per GPU name their rendezvous in the environment, and
 * only one job can listen at an address and port: torchrun (and
 * torch.distributed launched by hand) sets MASTER_ADDR and MASTER_PORT for
 * every rank. A loopback address is one per network namespace, and every
 * pod has its own (where torchrun's default, 127.0.0.1:29500, is common):
 * the namespace is named with it. Used when NVSHARE_JOB_ID is not set; the
 * scheduler scopes a job to the uid, so naming another tenant's rendezvous
 * joins nothing. */
static void job_from_launcher(char *dst, size_t len)
{
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    char netns[64] = "";

    if (env_int_range("WORLD_SIZE", 1, INT32_MAX, 1) <= 1 || !addr || !*addr ||
        !port || !*port)
        return;
    if (strncmp(addr, "127.", 4) == 0 || strcmp(addr, "localhost") == 0 ||
        strcmp(addr, "::1") == 0) {
        ssize_t n = readlink("/proc/self/ns/net", netns, sizeof(netns) - 1);
        netns[n > 0 ? n : 0] = '\0';
    }
    snprintf(dst, len, "torch:%s:%s%s%s", addr, port, *netns ? "@" : "", netns);
}

/* The application's settings, a row each, read in one loop. A variable
 * that is unset leaves its field as the rows before it made it; a value
 * that does not read is refused with a warning (env.h). */
enum client_kind { C_SIZE, C_INT, C_PRIORITY, C_SWITCH, C_DURATION, C_TEXT };

#define FIELD(f)                                                               \
    offsetof(struct client_settings, f),                                       \
        sizeof(((struct client_settings *)0)->f)

static const struct client_setting {
    const char *env;
    enum client_kind kind;
    size_t offset, size; /* the field of struct client_settings */
    long min, max;       /* C_INT */
    int64_t fallback;    /* where no row before set the field */
} client_table[] = {
    /* On Kubernetes the device plugin sets the DEFAULT for every pod with
     * a GPU and NVSHARE_GPU_MEMORY_LIMIT for pods that asked for
     * gpu-memory: kubelet merges the two resources' envs, so they cannot
     * share a name. The limit, after it, wins. */
    {"NVSHARE_GPU_MEMORY_DEFAULT_LIMIT", C_SIZE, FIELD(memory_limit), 0, 0, 0},
    {"NVSHARE_GPU_MEMORY_LIMIT", C_SIZE, FIELD(memory_limit), 0, 0, 0},
    {"NVSHARE_GPU_CORE_LIMIT", C_INT, FIELD(core_limit), 1, 100, 0},
    {"NVSHARE_PRIORITY", C_PRIORITY, FIELD(priority), 0, 0, PRIORITY_UNSET},
    {"NVSHARE_ENABLE_OVERSUB", C_SWITCH, FIELD(oversub), 0, 0, -1}, /* -1: unset */
    {"NVSHARE_FAIL_CLOSED", C_SWITCH, FIELD(fail_closed), 0, 0, 0},
    {"NVSHARE_IDLE_RELEASE", C_DURATION, FIELD(idle_release_ns), 0, 0,
     250 * NS_PER_MS},
    {"NVSHARE_RECONNECT_INTERVAL", C_DURATION, FIELD(reconnect_ns), 0, 0,
     NS_PER_SEC},
    {"NVSHARE_POD_NAMESPACE", C_TEXT, FIELD(pod_namespace), 0, 0, 0},
    {"NVSHARE_POD_NAME", C_TEXT, FIELD(pod_name), 0, 0, 0},
    {"NVSHARE_CONTAINER_NAME", C_TEXT, FIELD(container_name), 0, 0, 0},
    {"NVSHARE_JOB_ID", C_TEXT, FIELD(job_id), 0, 0, 0},
};

static int64_t field_get(const struct client_setting *r)
{
    const char *f = (const char *)&settings + r->offset;

    switch (r->size) {
    case 1:
        return *(const uint8_t *)f;
    case sizeof(int):
        return *(const int *)f;
    default:
        return (int64_t) * (const uint64_t *)f;
    }
}

static void field_set(const struct client_setting *r, int64_t value)
{
    char *f = (char *)&settings + r->offset;

    switch (r->size) {
    case 1:
        *(uint8_t *)f = (uint8_t)value;
        break;
    case sizeof(int):
        *(int *)f = (int)value;
        break;
    default:
        *(uint64_t *)f = (uint64_t)value;
        break;
    }
}

/* The row's variable, read with the field's value as the fallback. */
static void read_row(const struct client_setting *r, const char *text)
{
    int64_t now = field_get(r);

    switch (r->kind) {
    case C_SIZE:
        field_set(r, (int64_t)env_size_bytes(r->env, (uint64_t)now));
        break;
    case C_INT:
        field_set(r, env_int_range(r->env, r->min, r->max, now));
        break;
    case C_PRIORITY:
        field_set(r, env_priority(r->env, (unsigned)now));
        break;
    case C_SWITCH:
        field_set(r, env_switch(r->env, now > 0));
        break;
    case C_DURATION:
        field_set(r, (int64_t)env_duration_ns(r->env, (uint64_t)now));
        break;
    case C_TEXT:
        snprintf((char *)&settings + r->offset, r->size, "%s", text);
        break;
    }
}

static void read_settings(void)
{
    struct client_settings *s = &settings;
    const size_t n = sizeof(client_table) / sizeof(client_table[0]);

    for (size_t i = 0; i < n; i++)
        if (client_table[i].kind != C_TEXT)
            field_set(&client_table[i], client_table[i].fallback);
    for (size_t i = 0; i < n; i++) {
        const char *text = getenv(client_table[i].env);
        if (text && *text)
            read_row(&client_table[i], text);
    }
    /* 0 is how the wire says "no limit": taken as the limit it reads as,
     * it would fail every allocation; taken silently, it hides a typo. */
    if (s->memory_limit == 0 && getenv("NVSHARE_GPU_MEMORY_LIMIT") &&
        *getenv("NVSHARE_GPU_MEMORY_LIMIT"))
        log_warn("ignoring NVSHARE_GPU_MEMORY_LIMIT=0: a limit must be above "
                 "0 (unset it for no limit)");
    /* No namespace means default, as in Kubernetes: the scheduler, status
     * and nvsharectl know the pod by that one name. */
    if (*s->pod_name && !*s->pod_namespace)
        snprintf(s->pod_namespace, sizeof(s->pod_namespace), "default");
    if (!*s->job_id)
        job_from_launcher(s->job_id, sizeof(s->job_id));
    if (*s->pod_name)
        snprintf(s->pod_label, sizeof(s->pod_label), "%.*s/%.*s",
                 PROTO_NAME_MAX - 1, s->pod_namespace, PROTO_NAME_MAX - 1,
                 s->pod_name);
    else
        snprintf(s->pod_label, sizeof(s->pod_label), "-");
}

const struct client_settings *client_settings(void)
{
    pthread_once(&settings_once, read_settings);
    return &settings;
}

/* Identity and limits as registration declares them. */
static void declare(struct msg_register *reg, const struct client_settings *s)
{
    reg->memory_limit = s->memory_limit;
    reg->core_limit = s->core_limit;
    reg->priority = s->priority;
    reg->oversub = s->oversub < 0 ? OVERSUB_NODE_DEFAULT
                   : s->oversub   ? OVERSUB_ON
                                  : OVERSUB_OFF;
    memcpy(reg->pod_namespace, s->pod_namespace, sizeof(reg->pod_namespace));
    memcpy(reg->pod_name, s->pod_name, sizeof(reg->pod_name));
    memcpy(reg->container_name, s->container_name, sizeof(reg->container_name));
    memcpy(reg->job_id, s->job_id, sizeof(reg->job_id));
}

/* ---- lifecycle ------------------------------------------------------------ */

/* In a forked child the client thread does not exist and the connection
 * belongs to the parent: start over, unscheduled until started again. */
static void after_fork_in_child(void)
{
    pthread_mutex_init(&client.mu, NULL);
    pthread_cond_init(&client.changed, NULL);
    pthread_cond_init(&client.beat, NULL);
    client.beat_running = false;
    gate_forget_drains_locked();
    if (client.fd >= 0)
        close(client.fd);
    if (client.wake_fd >= 0)
        close(client.wake_fd);
    if (client.catch_up_fd >= 0)
        close(client.catch_up_fd);
    client.fd = client.wake_fd = client.catch_up_fd = -1;
    client.started = client.connected = client.attempted = false;
    memset(client.gpus, 0, sizeof(client.gpus));
    for (int i = 0; i < NVSHARE_MAX_GPUS; i++)
        gate_set(i, false); /* slow path: runs_unscheduled() says go */
    memory_observer.after_fork();
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

/* The GPUs, callbacks and settings of a start, and the registration they
 * make. Called with client.mu held. */
static void configure(const struct nvshare_client_config *config)
{
    const struct client_settings *s = client_settings();

    client.n_gpus = config->n_gpus;
    client.ops = config->ops;
    memset(&client.reg, 0, sizeof(client.reg));
    for (int i = 0; i < config->n_gpus; i++) {
        snprintf(client.uuids[i], PROTO_UUID_MAX, "%s", config->gpu_uuids[i]);
        snprintf(client.reg.gpu_uuids[i], PROTO_UUID_MAX, "%s",
                 config->gpu_uuids[i]);
    }
    client.reg.n_gpus = (uint16_t)config->n_gpus;
    declare(&client.reg, s);
    client.oversub_env = s->oversub;
    client.fail_closed = s->fail_closed;
    client.idle_release_ns = s->idle_release_ns;
    client.reconnect_ns = s->reconnect_ns;
}

int nvshare_client_start(const struct nvshare_client_config *config)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

    if (!config || !config->ops.drain || config->n_gpus < 1 ||
        config->n_gpus > NVSHARE_MAX_GPUS) {
        log_error("nvshare_client_start: need 1-%d GPUs and a drain callback",
                  NVSHARE_MAX_GPUS);
        return -1;
    }
    pthread_mutex_lock(&client.mu);
    if (client.started) {
        pthread_mutex_unlock(&client.mu);
        log_error("nvshare_client_start: already started");
        return -1;
    }
    configure(config);
    client.membarrier_ok = syscall(SYS_membarrier,
                                   MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
                                   0) == 0;
    if (!client.membarrier_ok)
        log_debug("membarrier unavailable: preemption uses a fence");
    client.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    client.catch_up_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    client.started = true;
    conn_observe(&memory_observer);
    memory_observer.connecting();
    gates_open_for_current_mode(); /* closed until the first attempt */
    pthread_once(&atfork_once, register_atfork);
    if (client.wake_fd < 0 || client.catch_up_fd < 0 ||
        pthread_create(&client.thread, NULL, conn_thread, NULL) != 0) {
        log_error("cannot start the client thread: running unscheduled");
        client.started = false;
        gates_open_for_current_mode();
        pthread_mutex_unlock(&client.mu);
        memory_observer.disconnected();
        return -1;
    }
    /* Without the beat a long drain is revoked sooner: no reason to fail. */
    client.beat_running =
        pthread_create(&client.beat_thread, NULL, gate_drain_beat, NULL) == 0;
    if (!client.beat_running)
        log_warn("cannot start the drain beat thread: drains longer than 1 s "
                 "may be revoked");
    pthread_mutex_unlock(&client.mu);
    return 0;
}

void nvshare_client_stop(void)
{
    uint64_t one = 1;

    pthread_mutex_lock(&client.mu);
    if (!client.started) {
        pthread_mutex_unlock(&client.mu);
        return;
    }
    pthread_mutex_unlock(&client.mu);
    if (write(client.wake_fd, &one, sizeof(one)) != sizeof(one))
        return;
    pthread_join(client.thread, NULL);
    pthread_mutex_lock(&client.mu);
    bool beat = client.beat_running;
    client.beat_running = false;
    pthread_cond_signal(&client.beat);
    pthread_mutex_unlock(&client.mu);
    if (beat)
        pthread_join(client.beat_thread, NULL);
    pthread_mutex_lock(&client.mu);
    if (client.fd >= 0)
        close(client.fd);
    close(client.wake_fd);
    close(client.catch_up_fd);
    client.fd = client.wake_fd = client.catch_up_fd = -1;
    client.started = client.connected = false;
    for (int i = 0; i < NVSHARE_MAX_GPUS; i++)
        gate_set(i, true);
    pthread_cond_broadcast(&client.changed);
    pthread_mutex_unlock(&client.mu);
}

bool nvshare_client_connected(void)
{
    pthread_mutex_lock(&client.mu);
    bool connected = client.connected;
    pthread_mutex_unlock(&client.mu);
    return connected;
}

uint64_t nvshare_lock_grants(int gpu)
{
    if (gpu < 0 || gpu >= NVSHARE_MAX_GPUS)
        return 0;
    pthread_mutex_lock(&client.mu);
    uint64_t grants = client.gpus[gpu].grants;
    pthread_mutex_unlock(&client.mu);
    return grants;
}

/* ---- oversubscription ------------------------------------------------- */

bool nvshare_oversub_enabled(void)
{
    bool on;

    pthread_mutex_lock(&client.mu);
    on = client.oversub_env >= 0 ? client.oversub_env : client.oversub_node;
    pthread_mutex_unlock(&client.mu);
    return on;
}

bool nvshare_oversub_for_allocation(void)
{
    struct timespec deadline;

    pthread_mutex_lock(&client.mu);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += REGISTRATION_WAIT_SEC;
    while (client.oversub_env < 0 && client.started && !client.attempted &&
           pthread_cond_timedwait(&client.changed, &client.mu, &deadline) !=
               ETIMEDOUT)
        ;
    bool on = client.oversub_env >= 0 ? client.oversub_env : client.oversub_node;
    pthread_mutex_unlock(&client.mu);
    return on;
}
