/* control_set.c - nvsharectl set and reset: a setting changed by name.
 *
 * A node setting is a run-time row of the settings table (settings.def):
 * its value is checked against the row's bounds, put in force by the row's
 * apply function below and kept in the state file, all alike. A pod's
 * settings (core limit, memory limit, priority, floor, owner, idle reclaim)
 * are kept per pod instead (pods.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "parse.h"
#include "scheduler.h"
#include "settings.h"

/* Puts a checked value of a run-time setting in force, on gpu (-1: every
 * GPU) where the setting is per GPU, and says what it did in text. */
typedef void setting_apply_fn(struct scheduler *s, uint64_t value, int gpu,
                              char *text, size_t len);

static void apply_tq(struct scheduler *s, uint64_t value, int gpu, char *text,
                     size_t len)
{
    char tq[32];

    (void)gpu;
    policy_set_tq(s->policy, value);
    format_duration(value, tq, sizeof(tq));
    if (value == POLICY_TQ_AUTO)
        snprintf(text, len,
                 "time quantum auto: per GPU, %d x its mean hand-over, "
                 "within 100ms-30s",
                 POLICY_TQ_DRAIN_MULTIPLE);
    else
        snprintf(text, len, "time quantum pinned at %s", tq);
}

static void apply_anti_thrash(struct scheduler *s, uint64_t value, int gpu,
                              char *text, size_t len)
{
    (void)gpu;
    policy_set_anti_thrash(s->policy, value, now_ns());
    clients_broadcast(s, value ? MSG_SCHED_ON : MSG_SCHED_OFF);
    snprintf(text, len, "anti-thrashing %s",
             value ? "on: clients take turns" : "off: clients run freely");
}

static void apply_mode(struct scheduler *s, uint64_t value, int gpu, char *text,
                       size_t len)
{
    policy_set_mode(s->policy, gpu, (enum sched_mode)value);
    if (gpu < 0)
        snprintf(text, len, "scheduling mode %s on every GPU",
                 sched_mode_names[value]);
    else
        snprintf(text, len, "scheduling mode %s on gpu %d",
                 sched_mode_names[value], gpu);
}

/* 0 is auto: the measured swap time x the multiplier. */
static void apply_switch_time(struct scheduler *s, uint64_t value, int gpu,
                              char *text, size_t len)
{
    char fixed[32];

    (void)gpu;
    policy_set_switch_time(s->policy, value, 0);
    format_duration(value, fixed, sizeof(fixed));
    snprintf(text, len, "switch time %s",
             value ? fixed : "auto (measured swap time x multiplier)");
}

static void apply_idle_swap_after(struct scheduler *s, uint64_t value, int gpu,
                                  char *text, size_t len)
{
    char after[32];

    (void)gpu;
    policy_set_idle_swap_after(s->policy, value);
    format_duration(value, after, sizeof(after));
    if (value)
        snprintf(text, len,
                 "idle clients keep their memory on the GPU for %s while "
                 "others need the room",
                 after);
    else
        snprintf(text,
                 len, "idle clients are swapped out as soon as others need the room");
}

/* 0 is auto: what the host had available at start, less a margin. */
static void apply_host_swap_budget(struct scheduler *s, uint64_t value, int gpu,
                                   char *text, size_t len)
{
    uint64_t budget = value ? value : s->host_swap_auto;
    char size[32];

    (void)gpu;
    policy_set_host_swap_budget(s->policy, budget);
    format_size(budget, size, sizeof(size));
    if (budget == POLICY_HOST_BUDGET_NONE)
        snprintf(text, len,
                 "host swap budget: none (auto, and the host's meminfo could "
                 "not be read)");
    else
        snprintf(text, len, "host swap budget %s%s", size,
                 value ? "" : " (auto: available at start, less a margin)");
}

static setting_apply_fn *const appliers[SETTING_COUNT] = {
#define SETTING(id, ...)
#define RUNTIME_SETTING(id, apply, ...) [SETTING_##id] = apply,
#include "settings.def"
};

int control_find_gpu(const struct scheduler *s, const char *target)
{
    char *end;
    long index;

    if (!target[0])
        return -1;
    for (int g = 0; g < s->n_gpus; g++)
        if (!strcmp(target, s->gpus[g].uuid))
            return g;
    index = strtol(target, &end, 10);
    return *end == '\0' && index >= 0 && index < s->n_gpus ? (int)index : -2;
}

void control_apply_start(struct scheduler *s,
                         const uint64_t values[SETTING_COUNT])
{
    char text[PROTO_TEXT_MAX];

    for (int id = 0; id < SETTING_COUNT; id++)
        if (appliers[id])
            appliers[id](s, setting_state_value(values, id), -1, text,
                         sizeof(text));
}

/* Checks value and puts it in force on *gpu (-1: every GPU); 0, or an
 * errno value with reply's text saying why. */
static int apply_node(struct scheduler *s, enum setting_id id, uint64_t value,
                      const char *target, int *gpu, struct msg_ctl_reply *reply)
{
    *gpu = -1;
    if (setting_check_runtime(id, value, reply->text, sizeof(reply->text)))
        return EINVAL;
    if (settings_table[id].per_gpu && (*gpu = control_find_gpu(s, target)) == -2) {
        snprintf(reply->text, sizeof(reply->text),
                 "no GPU '%s' (give an index 0-%d or a UUID)", target,
                 s->n_gpus - 1);
        return ENOENT;
    }
    appliers[id](s, value, *gpu, reply->text, sizeof(reply->text));
    return 0;
}

/* A node setting from nvsharectl: kept across restarts, a per-GPU one
 * (the mode, the only one) GPU by GPU. */
static void set_node(struct scheduler *s, enum setting_id id,
                     const struct msg_ctl_set *set, struct msg_ctl_reply *reply)
{
    int gpu;

    if ((reply->status = apply_node(s, id, set->value, set->target, &gpu, reply)))
        return;
    if (settings_table[id].per_gpu) {
        state_set_mode(&s->state, gpu < 0 ? NULL : s->gpus[gpu].uuid,
                       (uint8_t)set->value);
    } else {
        s->state.set[id] = true;
        s->state.value[id] = set->value;
    }
    /* One GPU's mode is that GPU's (its status record), not the node's. */
    if (gpu < 0)
        s->set_since_start[id] = true;
    scheduler_save_state(s);
    log_info("%s", reply->text);
}

/* nvsharectl reset: the node setting is set to what the environment (else
 * the default) gave it at start, and the state file no longer holds it, so
 * the environment decides again at the next start. */
void control_reset(struct scheduler *s, const struct msg_ctl_set *set,
                   struct msg_ctl_reply *reply)
{
    int id = setting_find_runtime(set->name);
    char env[160], names[128];

    if (id < 0) {
        setting_runtime_names(names, sizeof(names));
        reply->status = EINVAL;
        snprintf(reply->text, sizeof(reply->text), "cannot reset '%.200s': %s",
                 set->name, names);
        return;
    }
    int gpu;
    reply->status = apply_node(s, id, setting_state_value(s->env_settings, id),
                               "", &gpu, reply);
    if (reply->status)
        return;
    s->state.set[id] = false;
    s->set_since_start[id] = false;
    if (settings_table[id].per_gpu)
        s->state.n_modes = 0;
    scheduler_save_state(s);
    setting_env_text(id, env, sizeof(env));
    size_t n = strlen(reply->text);
    snprintf(reply->text + n, sizeof(reply->text) - n,
             " (%s%s; no longer a run-time "
             "setting)",
             *env ? "from " : "the default", env);
    log_info("%s reset: %s", settings_table[id].name, reply->text);
}

/* ---- a pod's settings ---------------------------------------------------- */

int control_pod_find(const struct scheduler *s, const char *target,
                     struct pod_id *id, int *account, char *err, size_t err_len)
{
    const char *slash = strchr(target, '/');
    char *end;
    unsigned long long client = strtoull(target, &end, 10);

    memset(id, 0, sizeof(*id));
    *account = -1;
    if (*target && !*end) {
        for (int i = 0; i < s->table_size; i++) {
            const struct client *c = s->clients[i];
            if (c->used && c->registered && c->id == client) {
                *account = c->account;
                *id = s->accounts[c->account].pod;
                return 0;
            }
        }
        snprintf(err, err_len, "no client with id %llu", client);
        return -1;
    }
    if (!strncmp(target, "uid:", 4) && target[4] &&
        strlen(target + 4) < sizeof(id->uid)) {
        snprintf(id->uid, sizeof(id->uid), "%s", target + 4);
    } else if (slash ? slash > target && slash[1] &&
                           (size_t)(slash - target) < sizeof(id->pod_namespace) &&
                           strlen(slash + 1) < sizeof(id->pod_name)
                     : *target && strlen(target) < sizeof(id->pod_name)) {
        if (slash)
            memcpy(id->pod_namespace, target, (size_t)(slash - target));
        snprintf(id->pod_name, sizeof(id->pod_name), "%s",
                 slash ? slash + 1 : target);
        pod_id_default_namespace(id);
        /* A Kubernetes pod the watcher named is set by its UID. */
        for (size_t i = 0; i < s->state.pods.n; i++) {
            const struct pod_id *p = &s->state.pods.list[i].id;
            if (p->uid[0] && !strcmp(p->pod_namespace, id->pod_namespace) &&
                !strcmp(p->pod_name, id->pod_name))
                *id = *p;
        }
    } else {
        snprintf(err, err_len,
                 "'%s' is not a pod: give namespace/pod, pod, "
                 "uid:<pod-uid> or a client id from nvsharectl status",
                 target);
        return -1;
    }
    *account = account_of_pod(s->accounts, s->table_size, id);
    return 0;
}

/* A pod's settings, by the names nvsharectl set gives them. */
struct pod_setting_row {
    const char *name;
    enum pod_setting which;
    const char *label;
    uint64_t max; /* 0: any */
    const char *range;
};

static const struct pod_setting_row pod_settings[] = {
    {"core-limit", POD_CORE_LIMIT, "core limit", 100, "1-100 %"},
    {"memory-limit", POD_MEMORY_LIMIT, "memory limit", 0, ""},
    {"priority", POD_PRIORITY, "priority", PRIORITY_HIGHEST,
     "high, normal, low or 1-9"},
    {"min-share", POD_MIN_SHARE, "min share", 100, "1-100 %"},
    {"owner", POD_OWNER, "owner", UINT32_MAX - 1,
     "a uid other than root's (root's processes may join any pod)"},
    {"idle-swap", POD_IDLE_SWAP, "idle swap", IDLE_SWAP_ON, "off or on"},
};

/* The value of a per-pod setting as people read it. */
static void format_pod_setting(enum pod_setting which, uint64_t value,
                               char *buf, size_t len)
{
    switch (which) {
    case POD_MEMORY_LIMIT:
        format_size(value, buf, len);
        break;
    case POD_PRIORITY:
        format_priority((unsigned)value, buf, len);
        break;
    case POD_OWNER:
        snprintf(buf, len, "uid %u", (unsigned)value);
        break;
    case POD_IDLE_SWAP:
        snprintf(buf, len, "%s", value == IDLE_SWAP_OFF ? "off" : "on");
        break;
    default:
        snprintf(buf, len, "%u%%", (unsigned)value);
        break;
    }
}

/* The setting in force for the account (a limit: on gpu, -1 for every
 * GPU), and where it comes from. */
static uint64_t pod_setting_effective(const struct account *a,
                                      enum pod_setting which, int gpu,
                                      uint8_t *source)
{
    switch (which) {
    case POD_CORE_LIMIT:
        return account_core_on(a, gpu, source);
    case POD_MEMORY_LIMIT:
        return account_memory_on(a, gpu, source);
    case POD_PRIORITY:
        return priority_effective(&a->priority, source);
    case POD_IDLE_SWAP:
        return idle_swap_effective(&a->idle_swap, source);
    case POD_MIN_SHARE:
        break;
    case POD_OWNER:
        *source = LIMIT_NONE;
        return 0;
    }
    *source = a->min_share ? LIMIT_RUNTIME : LIMIT_NONE;
    return a->min_share;
}

/* Whether the value and the pod fit the setting: 0, or an errno value with
 * the reason in reply. */
static int pod_setting_refused(const struct pod_setting_row *row,
                               const struct msg_ctl_set *set,
                               const struct pod_id *id,
                               struct msg_ctl_reply *reply)
{
    if (row->max && set->value > row->max) {
        snprintf(reply->text, sizeof(reply->text),
                 "%s must be %s (or 0 to remove it)", row->label, row->range);
        return EINVAL;
    }
    if (row->which == POD_OWNER && (pod_id_empty(id) || id->uid[0])) {
        snprintf(reply->text, sizeof(reply->text),
                 "%.200s has no owner to name: "
                 "%s",
                 set->target,
                 id->uid[0] ? "a Kubernetes pod is its cgroup's"
                            : "the client is in no pod");
        return EINVAL;
    }
    return 0;
}

/* Puts the pod's new setting in force on its connected shares: every share
 * of the pod (accounts.h), by the record, since which of them get its
 * privileges depends on its owner; a client in no pod through its own
 * account. */
static void pod_setting_apply(struct scheduler *s, const struct pod_id *id,
                              const struct pod *record, int account,
                              enum pod_setting which, int gpu, uint64_t value)
{
    struct account_actions out = {0};

    if (pod_id_empty(id)) {
        account_set_runtime(s->accounts, account, which, gpu, value, &out);
        clients_apply_accounts(s, &out);
        return;
    }
    for (int i = 0; i < s->table_size; i++) {
        if (!s->accounts[i].refs || !pod_id_equal(&s->accounts[i].pod, id))
            continue;
        out.n = 0;
        account_set_pod(s->accounts, i, record, &out);
        clients_apply_accounts(s, &out);
    }
}

/* The reply to a pod setting: what is in force now and why. */
static void pod_setting_reply(const struct pod_setting_row *row,
                              const struct msg_ctl_set *set, int gpu,
                              const struct pod_id *id, const struct pod *record,
                              bool connected, uint64_t limit, uint8_t source,
                              struct msg_ctl_reply *reply)
{
    char value[32], name[2 * PROTO_NAME_MAX + 24];
    size_t n;

    if (pod_id_empty(id))
        snprintf(name, sizeof(name), "client %s (in no pod: until it leaves)",
                 set->target);
    else
        pod_id_format(id, name, sizeof(name));
    if (gpu >= 0) {
        n = strlen(name);
        snprintf(name + n, sizeof(name) - n, " on gpu %d", gpu);
    }
    format_pod_setting(row->which, set->value ? set->value : limit, value,
                       sizeof(value));
    if (set->value)
        snprintf(reply->text, sizeof(reply->text), "%s of %.200s set to %s%s",
                 row->label, name, value, connected ? "" : " (not connected)");
    else
        snprintf(reply->text, sizeof(reply->text), "%s of %.200s removed",
                 row->label, name);
    if (source == LIMIT_DECLARED) {
        n = strlen(reply->text);
        format_pod_setting(row->which, limit, value, sizeof(value));
        snprintf(reply->text + n, sizeof(reply->text) - n,
                 "; its clients declared %s, which holds", value);
    }
    bool privilege =
        row->which == POD_MIN_SHARE ||
        (row->which == POD_PRIORITY && set->value > PRIORITY_NORMAL) ||
        (row->which == POD_IDLE_SWAP && set->value == IDLE_SWAP_OFF);
    n = strlen(reply->text);
    if (set->value && privilege && record && !record->id.uid[0] &&
        !record->owner_named)
        snprintf(reply->text + n, sizeof(reply->text) - n,
                 "; with no owner named, only root's processes get it "
                 "(nvsharectl set owner)");
    else if (set->value && row->which == POD_OWNER)
        snprintf(reply->text + n,
                 sizeof(reply->text) - n, ": other uids' processes (root's aside) are billed on their own");
}

/* A per-pod setting from the operator: it holds whether or not the pod is
 * connected, survives restarts, and a client's declaration can only lower
 * it. 0 removes it. On a plain host, the owner decides which of the pod's
 * shares (accounts.h) get its priority and floor. A core or memory limit
 * on gpu (-1: every GPU) takes the place of the one for every GPU there. */
static void set_pod(struct scheduler *s, const struct pod_setting_row *row,
                    const struct msg_ctl_set *set, int gpu,
                    struct msg_ctl_reply *reply)
{
    bool failed = false;
    const struct pod *record = NULL;
    struct pod_id id;
    uint8_t source = LIMIT_NONE;
    uint64_t limit = set->value;
    int account;

    if (control_pod_find(s, set->target, &id, &account, reply->text,
                         sizeof(reply->text))) {
        reply->status = ENOENT;
        return;
    }
    if ((reply->status = pod_setting_refused(row, set, &id, reply)))
        return;
    if (!pod_id_empty(&id)) {
        record = pods_set_limit(&s->state.pods, &id, row->which, gpu,
                                set->value, &failed);
        if (failed) {
            reply->status = ENOMEM;
            snprintf(reply->text, sizeof(reply->text), "out of memory");
            return;
        }
        scheduler_save_state(s);
    }
    if (account >= 0) {
        pod_setting_apply(s, &id, record, account, row->which, gpu, set->value);
        limit = pod_setting_effective(&s->accounts[account], row->which, gpu,
                                      &source);
    }
    pod_setting_reply(row, set, gpu, &id, record, account >= 0, limit, source,
                      reply);
    log_info("%s", reply->text);
}

void control_set(struct scheduler *s, const struct msg_ctl_set *set,
                 struct msg_ctl_reply *reply)
{
    int id = setting_find_runtime(set->name);

    if (id >= 0) {
        set_node(s, id, set, reply);
        return;
    }
    for (size_t i = 0; i < sizeof(pod_settings) / sizeof(pod_settings[0]); i++) {
        if (!strcmp(set->name, pod_settings[i].name)) {
            set_pod(s, &pod_settings[i], set, -1, reply);
            return;
        }
    }
    reply->status = ENOTSUP;
    snprintf(reply->text, sizeof(reply->text), "unknown setting '%.200s'",
             set->name);
}

void control_set_gpu(struct scheduler *s, const struct msg_ctl_set_gpu *set_gpu,
                     struct msg_ctl_reply *reply)
{
    struct msg_ctl_set set = {.value = set_gpu->value};
    int gpu = control_find_gpu(s, set_gpu->gpu);

    memcpy(set.name, set_gpu->name, sizeof(set.name));
    memcpy(set.target, set_gpu->target, sizeof(set.target));
    if (strcmp(set.name, "core-limit") && strcmp(set.name, "memory-limit")) {
        reply->status = ENOTSUP;
        snprintf(reply->text, sizeof(reply->text),
                 "'%.200s' is not set per GPU: core-limit and memory-limit are",
                 set.name);
        return;
    }
    if (gpu < 0) {
        reply->status = ENOENT;
        snprintf(reply->text, sizeof(reply->text),
                 "no GPU '%s' (give an index 0-%d or a UUID)", set_gpu->gpu,
                 s->n_gpus - 1);
        return;
    }
    for (size_t i = 0; i < sizeof(pod_settings) / sizeof(pod_settings[0]); i++)
        if (!strcmp(set.name, pod_settings[i].name))
            set_pod(s, &pod_settings[i], &set, gpu, reply);
}
