/* state.h - what the operator set at run time, kept across restarts.
 *
 * Every `nvsharectl set` (time quantum, anti-thrashing, mode, switch time,
 * a pod's core or memory limit, priority, min share or owner, for pods not
 * connected yet too) changes the
 * node state, and the scheduler rewrites NVSHARE_STATE_FILE at once, like
 * redis's CONFIG REWRITE: a temporary file, fsync, rename. It is read back
 * before the first client is accepted, so after a crash every setting is in
 * force again when the clients re-register. The format is the settings'
 * own text, a line each, so it parses with setting_parse and nothing else:
 *
 *   tq 5s
 *   anti-thrash off
 *   switch-time auto
 *   mode serial                     every GPU
 *   mode auto GPU-1b2c...           one GPU, after the line for all
 *   pod team-a/trainer owner=1000 core-limit=30 memory-limit=8Gi
 *                                   owner: the uid the operator named
 *   pod uid:6f1e... core-limit=20   a Kubernetes pod, by UID
 *   pod batch/train priority=1 min-share=10   a class and a floor
 *   group 3f2a... gpu=0 pods=uid:6f1e...,uid:9c0d... memory-limit=4Gi
 *     core-limit=30                 pods billed together on GPU 0
 *                                   (groups.h; one line)
 *
 * Parsing and formatting are pure (state_parse, state_format), so unit
 * tests drive them on strings; state_load and state_save do the file. */
#ifndef NVSHARE_STATE_H
#define NVSHARE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "groups.h"
#include "pods.h"
#include "policy.h" /* POLICY_MAX_GPUS */
#include "settings.h"

struct gpu_mode {
    char uuid[PROTO_UUID_MAX];
    uint8_t mode; /* enum sched_mode */
};

struct node_state {
    /* Settings changed at run time; a set bit overrides the environment.
     * SETTING_SWITCH_TIME_FIXED of 0 means auto. */
    bool set[SETTING_COUNT];
    uint64_t value[SETTING_COUNT];
    struct gpu_mode modes[POLICY_MAX_GPUS]; /* per-GPU modes, after "mode" */
    int n_modes;
    struct pod_table pods;     /* only pods with a limit are written */
    struct group_table groups; /* every one is written */
};

/* Writes the state as text: at most len bytes with the NUL; returns the
 * length it needed (as snprintf does). */
size_t state_format(const struct node_state *st, char *buf, size_t len);

/* Parses text into st (which must be empty). 0, or -1 with the line number
 * and what is wrong in err. */
int state_parse(const char *text, struct node_state *st, char *err, size_t len);

/* Records a per-GPU mode, or with uuid NULL the mode of every GPU (which
 * forgets the per-GPU ones). */
void state_set_mode(struct node_state *st, const char *uuid, uint8_t mode);

/* v, the environment's values (settings_load), with st's run-time settings
 * over them: the values in force. A switch time of 0 (auto) makes the
 * switch time mode auto, another fixed. */
void state_overlay(const struct node_state *st, uint64_t v[SETTING_COUNT]);

/* Reads path into st (empty). A missing file is an empty state. A file that
 * does not parse, or something else than a file (a directory), is renamed
 * to path.corrupt (one error line says why and where it went) and st stays
 * empty: the scheduler starts with defaults. Returns -1 only when the file
 * exists and cannot be read at all. */
int state_load(const char *path, struct node_state *st);

/* Writes st to path atomically (path.tmp, made anew rather than written
 * through whatever is at that name; fsync, rename, fsync of the directory),
 * creating the directory. 0, or -1 with one error line. */
int state_save(const char *path, const struct node_state *st);

#endif
