/* status_json.h - the status snapshot and its JSON document, shared by
 * nvsharectl (records read from the control socket) and the scheduler
 * (records made in process, served as /status.json), so that
 * `nvsharectl status --json` and kubectl-nvshare read one document. */
#ifndef NVSHARE_STATUS_JSON_H
#define NVSHARE_STATUS_JSON_H

#include <stdint.h>
#include <stdio.h>

#include "protocol.h"

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

/* Takes the next status record into st (zeroed before the first, which
 * must be NODE), in the order the scheduler sends them: SETTINGs (if asked
 * for), exactly n_gpus GPUs, CLIENTs, exactly n_unhooked UNHOOKEDs, PODs,
 * END. */
/* load_permille of a client whose load is not measured yet. */
#define CTL_LOAD_UNMEASURED 0xffff

enum status_record {
    RECORD_TAKEN,
    RECORD_END,
    RECORD_OUT_OF_PLACE,
    RECORD_NO_MEMORY
};
enum status_record ctl_status_take(struct ctl_status *st, const struct msg *m);
void ctl_status_free(struct ctl_status *st);

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
/* render_json.c: one JSON document, documented in docs/nvsharectl.md. */
void render_json(FILE *out, const struct ctl_status *st);

#endif
