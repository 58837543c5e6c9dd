/* settings.c - the process's settings (client_conn.h): each environment
 * variable read once, at first use, from a table of rows. At the bottom of
 * the runtime: every other file may read them, and they call nothing of it. */
#include "client_conn.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "env.h"
#include "log.h"
#include "protocol.h"

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
