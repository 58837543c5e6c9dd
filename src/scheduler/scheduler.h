/* scheduler.h - the daemon's state, shared by its connection handlers.
 *
 * The daemon is one event loop (event_loop.h) over: the client socket
 * (clients.c), the control socket (control.c) and a signalfd (main.c). All
 * decisions come from the pure policy (policy.h); this layer turns messages
 * into policy calls and policy actions into messages. */
#ifndef NVSHARE_SCHEDULER_H
#define NVSHARE_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "accounts.h"
#include "event_loop.h"
#include "gpus.h"
#include "identity.h"
#include "nvml_abi.h"
#include "policy.h"
#include "protocol.h"
#include "quota.h"
#include "state.h"

struct client {
    struct scheduler *sched;
    int slot; /* its number in the policy and the quota; never changes */
    bool used;
    bool registered;
    bool welcomed; /* REGISTER_OK sent: other messages may follow it */
    bool doomed;   /* close after the current batch of actions */
    int fd;
    uint64_t id;
    pid_t pid; /* from SO_PEERCRED, never from the message */
    uid_t uid;
    struct pod_identity identity; /* from its cgroup at registration */
    struct msg_register reg;      /* as declared: informational only */
    int n_gpus;
    int node_gpu[PROTO_MAX_GPUS]; /* client's GPU index -> node index, -1 */
    int account;                  /* its pod's (or its own) */
    int billed[PROTO_MAX_GPUS];   /* by client GPU index: the account it
                                      is billed to there, its group's
                                      (groups.h) or account */
    int gang;                     /* its job's number (policy_set_gang) */
    bool oversubscribed;          /* its device allocations are made managed */
    uint32_t asked_gpus;          /* node GPUs it has asked for, bit per GPU */
    uint32_t swap_in_due;        /* node GPUs it swapped out of: one SWAPPED(in)
                             each is expected */
    struct msg_yield yield_sent; /* the last UPDATE_YIELD (zero: none) */
    struct frame_reader *reader;
    uint64_t connected_at;  /* a slot is not held without registering */
    uint64_t partial_since; /* a frame begun and not finished since, or 0 */
};

/* Refusals of one uid, logged once per burst (clients_accept.c). */
struct refusal_note {
    uid_t uid;
    uint64_t logged_at; /* 0: slot unused */
    uint64_t unlogged;  /* refused since then */
};

/* A process that uses a GPU without having registered (unhooked.c). */
#define UNHOOKED_MAX 64 /* tracked per GPU; more are mentioned once */
struct unhooked_proc {
    pid_t pid;
    uint64_t used;  /* bytes, from NVML */
    uint64_t since; /* first seen */
    bool reported;  /* seen in two samples in a row: logged, listed */
    bool seen;      /* in the latest sample */
    struct pod_identity identity;
};

/* What only the metrics read (metrics.c). Client message types are below
 * 100; the control socket's are not counted. */
#define METRICS_MSG_TYPES 100
struct metrics_counters {
    uint64_t messages[METRICS_MSG_TYPES]; /* client messages, by type */
    struct histogram decision;            /* handling of one client message */
    uint64_t scrapes;                     /* requests for /metrics */
    uint64_t serve_ns; /* event-loop time in the HTTP server */
};
struct control_conn; /* control.c */

struct scheduler {
    struct event_loop *loop;
    struct policy *policy; /* read through the views of policy.h */
    struct quota quota;
    struct node_gpu gpus[POLICY_MAX_GPUS];
    int n_gpus;
    /* Tables by client slot or account number, table_size entries each,
     * grown together (scheduler_grow) when every slot is taken: no fixed
     * limit on clients. Clients are allocated one by one, so the pointers
     * the event loop holds stay valid as the table grows. */
    int table_size;
    struct client **clients;
    struct account *accounts;
    uint64_t next_client_id;
    uint64_t started_at;
    uid_t uid; /* the daemon's own: may use the control socket, as may root */
    struct node_state state; /* the operator's settings and pods (state.h) */
    const char *state_path;  /* NULL: not persisted */
    /* From the environment, else the defaults: what the state file's
     * values override, and what nvsharectl reset returns to. */
    uint64_t env_settings[SETTING_COUNT];
    /* Set with nvsharectl since this start; the state.set ones that are
     * not came from the state file (status tells them apart). */
    bool set_since_start[SETTING_COUNT];
    const char *proc_root;   /* NVSHARE_PROC_ROOT: where /proc/PID/cgroup is */
    uint64_t host_swap_auto; /* host-swap-budget auto: as the host's
                                meminfo gave it at start */
    bool declared_limits;    /* NVSHARE_DECLARED_LIMITS */
    uint8_t oversub_default; /* NVSHARE_ENABLE_OVERSUB of the daemon */
    unsigned oversub_ratio;  /* clients' memory <= this x capacity */
    uint64_t context_overhead;           /* assumed per client until measured */
    uint64_t *overhead[POLICY_MAX_GPUS]; /* by slot: measured */
    uint64_t *evictable[POLICY_MAX_GPUS]; /* by slot: reported */
    uint64_t *pending[POLICY_MAX_GPUS];   /* by slot: of evictable, not on
                                             the GPU yet (MEM_UPDATE) */
    bool limits_scaled[POLICY_MAX_GPUS];  /* core limits sum above 100 % */
    unsigned max_connections_per_uid;     /* 0: no limit */
    uint64_t refused;                     /* connections, since start */
    struct refusal_note refusals[8];      /* the uids refused lately */
    struct unhooked_proc unhooked[POLICY_MAX_GPUS][UNHOOKED_MAX];
    int n_unhooked[POLICY_MAX_GPUS];
    uint64_t unhooked_seen;  /* reported since start, for metrics */
    uint64_t stop_check_due; /* holders.c: next look at holders' state */
    struct metrics_counters counters;
    struct control_conn *control_conns; /* control.c: the open connections */
    uint64_t out_of_fds_logged_at; /* clients_note_out_of_fds's last line */
    uint64_t out_of_fds_unlogged;  /* connections closed since it */
    int yield_told; /* clients whose last UPDATE_YIELD was not all 0 */
};

/* tables.c */
/* Grows every table indexed by client slot or account, the pure modules'
 * included, to table_size. Returns false if memory ran out; the tables
 * keep their old size, and each is valid. */
bool scheduler_grow(struct scheduler *s, int table_size);
#define SCHEDULER_INITIAL_TABLE_SIZE 64 /* doubles as clients arrive */

/* clients*.c: the client socket (clients.c says which file does what) */
void clients_on_listen(struct event_loop *loop, int fd, void *data);
/* Carry out the pure modules' actions. A client that cannot be sent to is
 * only marked doomed; clients_reap() closes it. */
void clients_apply(struct scheduler *s, const struct policy_actions *actions);
/* Carries out the quota's actions and frees their list. */
void clients_apply_quota(struct scheduler *s, struct quota_actions *actions);
/* clients_table.c: the account c is billed to on node GPU g. */
int client_account_on(const struct client *c, int g);
/* clients_groups.c: the groups (s->state.groups) changed: every client whose billing on a
 * GPU they change is moved, what it holds and runs going with it. */
void clients_regroup(struct scheduler *s);
/* Whether a free account is left, growing the tables if not: a group's
 * account is one more than its clients' own (tables.c). */
bool scheduler_account_room(struct scheduler *s);
/* Tells the clients of the node GPUs in gpus (a bit each) whose
 * UPDATE_YIELD terms changed: a client joined or left them, or a class
 * changed (UINT32_MAX: every GPU). */
void clients_retell_yield(struct scheduler *s, uint32_t gpus);
/* The node GPUs c uses, a bit each. */
uint32_t clients_gpu_mask(const struct client *c);
void clients_apply_accounts(struct scheduler *s,
                            const struct account_actions *actions);
void clients_broadcast(struct scheduler *s, uint16_t type);
/* Closes the doomed clients, and those their departure dooms. Called once
 * per event-loop iteration, so no handler sees a client vanish under it.
 * Returns whether it closed any (their departures changed the policy). */
bool clients_reap(struct scheduler *s);
/* Dooms connections that stall: not registered, or in the middle of a
 * frame, CLIENT_STALL_NS after they started (up to CLIENT_STALL_BATCH_NS
 * early, with others). Returns when the next one would be due (0: none
 * pending). */
#define CLIENT_STALL_NS 2000000000ull      /* 2 s */
#define CLIENT_STALL_BATCH_NS 100000000ull /* 100 ms */
uint64_t clients_expire_stalled(struct scheduler *s, uint64_t now);
int clients_count(const struct scheduler *s);
/* Connections that have not registered yet. */
int clients_pending(const struct scheduler *s);

/* footprints.c */
/* Recomputes the client's footprint on node gpu and tells the policy. */
void footprint_update(struct scheduler *s, int gpu, int slot);
/* Samples running clients' context overheads, and the unhooked processes,
 * from NVML, every 2 s. Returns when the next sample is due (0: never,
 * NVML cannot tell): a deadline of its own, so that a quiet node, where
 * nothing else wakes the loop, is sampled too. */
uint64_t footprint_sample_overheads(struct scheduler *s, uint64_t now);
/* Forgets a slot's measurements and reports before it is reused. */
void footprint_forget(struct scheduler *s, int slot);

/* pod_facts.c */
/* Carries out a pod watcher's CTL_POD_* message and describes the result
 * in reply. */
void pod_facts_handle(struct scheduler *s, const struct msg *m,
                      struct msg_ctl_reply *reply);

/* Persists s->state, if a state file is configured (state.c writes it). */
static inline void scheduler_save_state(const struct scheduler *s)
{
    if (s->state_path)
        state_save(s->state_path, &s->state);
}
/* unhooked.c */
/* One NVML sample of gpu's processes (compute and graphics; a pid may
 * appear twice): the ones that are neither a client nor the scheduler
 * become, or stay, unhooked. */
void unhooked_observe(struct scheduler *s, int gpu,
                      const nvmlProcessInfo_t *procs, unsigned n, uint64_t now);
/* How many unhooked processes status lists (those reported). */
int unhooked_count(const struct scheduler *s);
/* holders.c */
/* Whether the process is stopped (SIGSTOP, ptrace): state T or t. */
bool process_stopped(pid_t pid);
/* Revokes, into out, the GPUs of stopped processes that run where someone
 * waits or that drain; looks every 250 ms while any such runner exists.
 * Returns when to look next (0: at the next tick). */
uint64_t holders_revoke_stopped(struct scheduler *s, uint64_t now,
                                struct policy_actions *out);

/* metrics.c, metrics_http.c */
/* Serves /metrics and /status.json on addr (host:port; NULL: the default, and silence where
 * the build has no HTTP server). A bad address is an error (-1); an address
 * that cannot be bound only turns metrics off (one line). */
int metrics_start(struct scheduler *s, const char *addr);
/* Runs the HTTP server's timeouts; returns its next deadline (0: none). */
uint64_t metrics_tick(struct scheduler *s, uint64_t now);
void metrics_stop(void);
/* The metrics text (*len bytes, for metrics_text_free()), or NULL if
 * memory ran out. */
char *metrics_render(struct scheduler *s, size_t *len);
void metrics_text_free(void *text);
/* Frees the buffers metrics_text_free() kept for the next scrapes. */
void metrics_text_free_spares(void);
/* A client message of type was handled in ns. */
void metrics_note_message(struct scheduler *s, uint16_t type, uint64_t ns);
/* Counts a connection closed unserved for want of file descriptors
 * (unix_accept) as refused; one line per REFUSAL_LOG_NS says so. */
void clients_note_out_of_fds(struct scheduler *s, const char *socket_name);

/* control.c */
void control_on_listen(struct event_loop *loop, int fd, void *data);
/* The status records (CTL_STATUS_NODE ... CTL_STATUS_END), each handed to
 * emit: onto the control socket for nvsharectl, into a document for
 * /status.json (status_http.c). Nonzero from emit stops and is returned. */
struct status_sink {
    int (*emit)(void *ctx, const struct msg *m);
    void *ctx;
};
int control_status(struct scheduler *s, const struct status_sink *out,
                   bool with_settings);
/* status_http.c: `nvsharectl status --json`'s document (with the settings),
 * malloc'd, *len bytes; NULL if memory ran out. */
char *status_json_render(struct scheduler *s, size_t *len);
/* control_set.c: nvsharectl set and reset; the reply says what was done,
 * or why not (an errno value in its status). */
void control_set(struct scheduler *s, const struct msg_ctl_set *set,
                 struct msg_ctl_reply *reply);
/* A pod's core or memory limit on one GPU (nvsharectl set --gpu). */
void control_set_gpu(struct scheduler *s, const struct msg_ctl_set_gpu *set,
                     struct msg_ctl_reply *reply);
void control_reset(struct scheduler *s, const struct msg_ctl_set *set,
                   struct msg_ctl_reply *reply);
/* The pod named by target: "uid:<pod-uid>", "namespace/pod", "pod" (in
 * namespace default, as kubectl reads it), or a client id (its pod;
 * *account is set too, since a client with no pod is limited through its
 * own account). 0, or -1 with err. */
int control_pod_find(const struct scheduler *s, const char *target,
                     struct pod_id *id, int *account, char *err, size_t err_len);
/* The GPU named by target (index or UUID), -1 for "" (every GPU), or -2. */
int control_find_gpu(const struct scheduler *s, const char *target);
/* control_group.c: a group set (CTL_SET_GROUP) or removed (CTL_RESET of
 * "group"). */
void control_set_group(struct scheduler *s, const struct msg_ctl_set_group *set,
                       struct msg_ctl_reply *reply);
void control_reset_group(struct scheduler *s, const char *name,
                         struct msg_ctl_reply *reply);
/* At start: every run-time setting put in force by its apply function, as
 * nvsharectl set would (values as settings_load and the state file give
 * them). */
void control_apply_start(struct scheduler *s,
                         const uint64_t values[SETTING_COUNT]);
/* Closes control connections that sent no request for CONTROL_IDLE_NS
 * (up to CLIENT_STALL_BATCH_NS early, with others), the pod watcher's
 * excepted (control.c): nvsharectl sends its request as soon as it
 * connects, and one left open would hold a file descriptor for good.
 * Returns when the next one would be due (0: none). */
#define CONTROL_IDLE_NS CLIENT_STALL_NS
uint64_t control_expire_idle(struct scheduler *s, uint64_t now);

#endif
