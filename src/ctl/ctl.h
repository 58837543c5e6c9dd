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
    struct msg_status_gpu *gpus;
    int n_gpus;
    struct msg_status_client *clients;
    int n_clients, cap_clients;
};

int ctl_fetch_status(const struct ctl_target *t, struct ctl_status *st,
                     char err[CTL_ERR_LEN]);
void ctl_status_free(struct ctl_status *st);

/* Sends one CTL_SET (subject: a pod or client for per-pod settings, else
 * ""). Returns 0 with the scheduler's reply in *reply (whose status may
 * still say it refused), or -1 if there was no reply. */
int ctl_set(const struct ctl_target *t, uint16_t key, uint64_t value,
            const char *subject, struct msg_ctl_reply *reply,
            char err[CTL_ERR_LEN]);

/* The (client, GPU) record of the client that holds gpu, or NULL. */
const struct msg_status_client *ctl_status_holder(const struct ctl_status *st,
                                                  const struct msg_status_gpu *gpu);
const char *ctl_state_name(uint8_t state);

/* render_table.c: the human view. */
void render_table(FILE *out, const struct ctl_status *st);

/* render_json.c: one JSON document, documented in docs/nvsharectl.md. */
void render_json(FILE *out, const struct ctl_status *st);


#endif
