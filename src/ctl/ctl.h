/* ctl.h - nvsharectl's internals: one status snapshot, the calls that fill
 * it or change a setting over the control socket, and its two renderings.
 *
 * Functions that can fail return 0 or -1 and, on -1, leave one sentence in
 * err (the parse.h convention); main.c decides the exit code and where the
 * sentence goes. Nothing here prints except the renderers. */
#ifndef NVSHARE_CTL_H
#define NVSHARE_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "protocol.h"

#define CTL_ERR_LEN 768
#define CTL_DEFAULT_TIMEOUT_MS 5000

/* Where and how to reach the scheduler. */
struct ctl_target {
    char path[256];       /* the control socket */
    const char *dir_from; /* "NVSHARE_SOCK_DIR=..." or "--sock-dir ...", for errors */
    int timeout_ms;       /* for each reply */
};

/* Everything one CTL_STATUS returned, in the order it came. */
struct ctl_status {
    struct msg_status_node node;
    struct msg_status_setting *settings; /* if asked for: every setting */
    int n_settings, cap_settings;
    struct msg_status_gpu *gpus;
    int n_gpus;
    struct msg_status_client *clients;
    int n_clients, cap_clients;
    struct msg_status_pod *pods; /* connected, or with an operator's limit */
    int n_pods, cap_pods;
    struct msg_status_unhooked *unhooked; /* node.n_unhooked of them */
    int n_unhooked;
};

int ctl_fetch_status(const struct ctl_target *t, struct ctl_status *st,
                     char err[CTL_ERR_LEN]);
/* The status with every setting of the scheduler's (CTL_STATUS_SETTING),
 * which a scheduler older than those records does not answer. */
int ctl_fetch_status_settings(const struct ctl_target *t, struct ctl_status *st,
                              char err[CTL_ERR_LEN]);
void ctl_status_free(struct ctl_status *st);

/* Sends one CTL_SET or CTL_RESET (type) of the setting called name
 * (subject: a pod or client for per-pod settings, a GPU for per-GPU ones,
 * else ""). Returns 0 with the scheduler's reply in *reply (whose status
 * may still say it refused), or -1 if there was no reply. */
int ctl_set(const struct ctl_target *t, uint16_t type, const char *name,
            uint64_t value, const char *subject, const char *gpu,
            struct msg_ctl_reply *reply, char err[CTL_ERR_LEN]);

/* The record of client_id on GPU index gpu, or NULL. */
const struct msg_status_client *ctl_status_client(const struct ctl_status *st,
                                                  uint64_t client_id,
                                                  uint16_t gpu);

/* Names of wire enums as nvsharectl prints them (tables and JSON alike);
 * "unknown" for a value this nvsharectl does not know. */
const char *ctl_state_name(uint8_t state);
const char *ctl_wait_reason_name(uint8_t reason); /* enum wait_reason; "none" */
const char *ctl_origin_name(uint8_t origin); /* enum identity_kind: "pod", "host" */
const char *ctl_quantum_reason_name(uint8_t reason); /* enum quantum_reason */
/* enum setting_source: "default", "environment", "state-file", "runtime" */
const char *ctl_setting_source_name(uint8_t source);
/* A GPU's time quantum and why: "320ms (auto: 100 x mean hand-over 3.2ms)",
 * "100ms (auto: floor)", "2s (pinned)". */
void ctl_quantum_label(const struct msg_status_gpu *g, char *buf, size_t len);

/* load_permille of a client whose load is not measured yet. */
#define CTL_LOAD_UNMEASURED 0xffff

/* render_table.c: the human view. */
void render_table(FILE *out, const struct ctl_status *st);
/* A malloc'd copy of text fit for a terminal: control characters and broken
 * UTF-8 replaced by '?' (names come from any local user). */
char *ctl_printable(const char *text);
/* "namespace/pod", "pod", "uid:<pod-uid>" or "-" for no pod. */
void ctl_pod_name_label(const char *pod_namespace, const char *pod_name,
                        const char *pod_uid, char *buf, size_t len);

/* render_top.c: one frame of `nvsharectl top`, fitted to width x height.
 * The history holds the statuses of the last few windows, from which each
 * client's share is measured: add each status to it before rendering. */
struct top_history;
struct top_history *top_history_new(void);
void top_history_free(struct top_history *h);
void top_history_add(struct top_history *h, const struct ctl_status *st);
void render_top(FILE *out, const struct ctl_status *st,
                const struct top_history *h, int width, int height);

/* render_table.c: `status --settings`, a line per setting. */
void render_settings(FILE *out, const struct ctl_status *st);

/* render_json.c: one JSON document, documented in docs/nvsharectl.md. */
void render_json(FILE *out, const struct ctl_status *st);


#endif
