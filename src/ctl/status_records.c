/* status_records.c - a status snapshot built from the scheduler's records,
 * whoever carried them (status_json.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "status_json.h"

/* Appends item to a list that doubles as it grows. */
static int append(void *list, int *n, int *cap, size_t size, const void *item)
{
    char **items = list;

    if (*n == *cap) {
        int grown_cap = *cap ? 2 * *cap : 16;
        char *grown = realloc(*items, (size_t)grown_cap * size);
        if (!grown)
            return -1;
        *items = grown;
        *cap = grown_cap;
    }
    memcpy(*items + (size_t)(*n)++ * size, item, size);
    return 0;
}

/* The NODE record opens the status and says how many GPUs and unhooked
 * processes follow. */
static enum status_record take_node(const struct msg *m, struct ctl_status *st)
{
    if (m->type != MSG_CTL_STATUS_NODE)
        return RECORD_OUT_OF_PLACE;
    st->node = m->u.node;
    st->gpus = calloc(st->node.n_gpus ? st->node.n_gpus : 1, sizeof(*st->gpus));
    st->unhooked = calloc(st->node.n_unhooked ? st->node.n_unhooked : 1,
                          sizeof(*st->unhooked));
    return st->gpus && st->unhooked ? RECORD_TAKEN : RECORD_NO_MEMORY;
}

enum status_record ctl_status_take(struct ctl_status *st, const struct msg *m)
{
    bool gpus_done = st->n_gpus == st->node.n_gpus;
    bool unhooked_done = st->n_unhooked == st->node.n_unhooked;

    if (!st->gpus)
        return take_node(m, st);

    if (m->type == MSG_CTL_STATUS_SETTING && st->n_gpus == 0 &&
        st->n_clients == 0 && st->n_unhooked == 0 && st->n_pods == 0) {
        if (append(&st->settings, &st->n_settings, &st->cap_settings,
                   sizeof(*st->settings), &m->u.setting))
            return RECORD_NO_MEMORY;
    } else if (m->type == MSG_CTL_STATUS_GPU && st->n_clients == 0 && !gpus_done) {
        st->gpus[st->n_gpus++] = m->u.gpu;
    } else if (m->type == MSG_CTL_STATUS_CLIENT && gpus_done &&
               st->n_unhooked == 0 && st->n_pods == 0) {
        if (append(&st->clients, &st->n_clients, &st->cap_clients,
                   sizeof(*st->clients), &m->u.client))
            return RECORD_NO_MEMORY;
    } else if (m->type == MSG_CTL_STATUS_POD && gpus_done && unhooked_done) {
        if (append(&st->pods, &st->n_pods, &st->cap_pods, sizeof(*st->pods),
                   &m->u.pod))
            return RECORD_NO_MEMORY;
    } else if (m->type == MSG_CTL_STATUS_UNHOOKED && gpus_done && !unhooked_done) {
        st->unhooked[st->n_unhooked++] = m->u.unhooked;
    } else if (m->type == MSG_CTL_STATUS_END && gpus_done && unhooked_done) {
        return RECORD_END;
    } else {
        return RECORD_OUT_OF_PLACE;
    }
    return RECORD_TAKEN;
}

void ctl_status_free(struct ctl_status *st)
{
    free(st->settings);
    free(st->gpus);
    free(st->clients);
    free(st->pods);
    free(st->unhooked);
    memset(st, 0, sizeof(*st));
}

const struct msg_status_client *ctl_status_client(const struct ctl_status *st,
                                                  uint64_t client_id,
                                                  uint16_t gpu)
{
    for (int i = 0; i < st->n_clients; i++)
        if (st->clients[i].client_id == client_id && st->clients[i].gpu == gpu)
            return &st->clients[i];
    return NULL;
}

const char *ctl_state_name(uint8_t state)
{
    switch (state) {
    case CLIENT_IDLE:
        return "idle";
    case CLIENT_WAITING:
        return "waiting";
    case CLIENT_HOLDING:
        return "holding";
    case CLIENT_DRAINING:
        return "draining";
    }
    return "unknown";
}

const char *ctl_origin_name(uint8_t origin)
{
    switch (origin) {
    case IDENTITY_POD:
        return "pod";
    case IDENTITY_HOST:
        return "host";
    }
    return "unknown";
}

const char *ctl_wait_reason_name(uint8_t reason)
{
    switch (reason) {
    case WAIT_NONE:
        return "none";
    case WAIT_LOCK:
        return "lock";
    case WAIT_MEMORY:
        return "memory";
    case WAIT_THROTTLED:
        return "throttled";
    case WAIT_PRIORITY:
        return "priority";
    }
    return "unknown";
}

const char *ctl_quantum_reason_name(uint8_t reason)
{
    switch (reason) {
    case QUANTUM_PINNED:
        return "pinned";
    case QUANTUM_FLOOR:
        return "floor";
    case QUANTUM_DRAIN:
        return "drain";
    case QUANTUM_CEILING:
        return "ceiling";
    }
    return "unknown";
}

const char *ctl_setting_source_name(uint8_t source)
{
    switch (source) {
    case SETTING_SOURCE_DEFAULT:
        return "default";
    case SETTING_SOURCE_ENV:
        return "environment";
    case SETTING_SOURCE_STATE_FILE:
        return "state-file";
    case SETTING_SOURCE_RUNTIME:
        return "runtime";
    }
    return "unknown";
}
