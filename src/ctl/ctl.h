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
#include "status_json.h"

#define CTL_ERR_LEN 768
#define CTL_DEFAULT_TIMEOUT_MS 5000

/* Where and how to reach the scheduler. */
struct ctl_target {
    char path[256];       /* the control socket */
    const char *dir_from; /* "NVSHARE_SOCK_DIR=..." or "--sock-dir ...", for errors */
    int timeout_ms;       /* for each reply */
};

int ctl_fetch_status(const struct ctl_target *t, struct ctl_status *st,
                     char err[CTL_ERR_LEN]);
/* The status with every setting of the scheduler's (CTL_STATUS_SETTING),
 * which a scheduler older than those records does not answer. */
int ctl_fetch_status_settings(const struct ctl_target *t, struct ctl_status *st,
                              char err[CTL_ERR_LEN]);

/* Sends one CTL_SET or CTL_RESET (type) of the setting called name
 * (subject: a pod or client for per-pod settings, a GPU for per-GPU ones,
 * else ""). Returns 0 with the scheduler's reply in *reply (whose status
 * may still say it refused), or -1 if there was no reply. */
int ctl_set(const struct ctl_target *t, uint16_t type, const char *name,
            uint64_t value, const char *subject, const char *gpu,
            struct msg_ctl_reply *reply, char err[CTL_ERR_LEN]);

/* Sends one CTL_SET_GROUP; as ctl_set. */
int ctl_set_group(const struct ctl_target *t,
                  const struct msg_ctl_set_group *group,
                  struct msg_ctl_reply *reply, char err[CTL_ERR_LEN]);

/* A GPU's time quantum and why: "320ms (auto: 100 x mean hand-over 3.2ms)",
 * "100ms (auto: floor)", "2s (pinned)". */
void ctl_quantum_label(const struct msg_status_gpu *g, char *buf, size_t len);

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


#endif
