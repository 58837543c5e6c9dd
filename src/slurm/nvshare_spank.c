/* nvshare_spank.c - nvshare_spank.so, the SPANK plugin that makes Slurm's
 * GPU shards limits nvshare enforces (docs/slurm.md).
 *
 * Slurm loads it in every context; it acts in two, both as root:
 *   - remote (slurmstepd), in task_init_privileged, before each task
 *     executes: a job with shards or GPUs becomes the pod slurm/<job id>,
 *     owned by the job's uid, with the memory quota and core limit its
 *     shards give (none for whole GPUs), set over the scheduler's control
 *     socket; the task's environment gets libnvshare preloaded and the pod's
 *     name. Without a scheduler the job is told so in one stderr line and,
 *     as on_error says, runs without nvshare or fails.
 *   - job_script (slurmd's epilog), once the job's processes are gone: the
 *     job's settings are removed, and its pod with them.
 *   - slurmd, at its start: a slurmd that died or restarted missed the
 *     epilogs of the jobs that ended meanwhile, so the settings of every
 *     slurm/<id> pod whose job has no slurmstepd on this node are removed.
 * A job without GPUs is left alone in both. Slurm supplies the spank_* and
 * slurm_* functions at load time; the export map keeps every other symbol
 * of this object (nvshare_common's, conn.c's) out of slurmstepd's way. */
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "ctl.h"
#include "shards.h"

SPANK_PLUGIN(nvshare, 1)

#define POD_NAMESPACE "slurm"

static void target_of(const struct shards_config *c, struct ctl_target *t)
{
    /* cppcheck-suppress ctuuninitvar ; snprintf only writes t->path */
    snprintf(t->path, sizeof(t->path), "%s/%s", c->sock_dir, CONTROL_SOCKET_NAME);
    t->dir_from = "sock_dir in plugstack.conf";
    t->timeout_ms = CTL_DEFAULT_TIMEOUT_MS;
}

/* One CTL_SET of the pod setting called name (as nvsharectl set names it);
 * 0, or -1 with the reason in err. */
static int set(const struct ctl_target *t, const char *name, uint64_t value,
               const char *pod, char err[CTL_ERR_LEN])
{
    struct msg_ctl_reply reply;

    if (ctl_set(t, MSG_CTL_SET, name, value, pod, NULL, &reply, err))
        return -1;
    if (reply.status) {
        snprintf(err, CTL_ERR_LEN, "the scheduler refused: %s", reply.text);
        return -1;
    }
    return 0;
}

/* The smallest GPU the scheduler manages: shards are cut alike on each. */
static int gpu_memory(const struct ctl_target *t, uint64_t *bytes,
                      char err[CTL_ERR_LEN])
{
    struct ctl_status st = {0};

    if (ctl_fetch_status(t, &st, err))
        return -1;
    *bytes = 0;
    for (int i = 0; i < st.n_gpus; i++)
        if (!*bytes || st.gpus[i].memory_total < *bytes)
            *bytes = st.gpus[i].memory_total;
    ctl_status_free(&st);
    if (!*bytes) {
        snprintf(err, CTL_ERR_LEN, "the scheduler at %s manages no GPU", t->path);
        return -1;
    }
    return 0;
}

/* The job's pod, owner and limits in the scheduler. */
static int declare_job(const struct shards_config *c, enum shards_job_kind kind,
                       unsigned shards, const char *pod, uid_t uid,
                       char err[CTL_ERR_LEN])
{
    struct ctl_target t;
    struct shards_limits limits;
    uint64_t memory = 0;

    target_of(c, &t);
    if (kind == SHARDS_SHARED && shards_need_gpu_memory(c) &&
        gpu_memory(&t, &memory, err))
        return -1;
    /* Root's processes may join any pod: a root job names no owner. */
    if (uid != 0 && set(&t, "owner", uid, pod, err))
        return -1;
    if (kind != SHARDS_SHARED)
        return 0;
    shards_limits(c, shards, memory, &limits);
    if (set(&t, "memory-limit", limits.memory, pod, err) ||
        set(&t, "core-limit", limits.core, pod, err))
        return -1;
    return 0;
}

/* LD_PRELOAD gains libnvshare ahead of what the job preloads already (an
 * srun inside a batch job inherits the batch step's). */
static int task_environment(spank_t sp, const struct shards_config *c,
                            const char *job)
{
    char preload[8192], old[4096];

    if (spank_getenv(sp, "LD_PRELOAD", old, sizeof(old)) != ESPANK_SUCCESS)
        old[0] = '\0';
    if (strstr(old, c->libnvshare))
        snprintf(preload, sizeof(preload), "%s", old);
    else if (old[0])
        snprintf(preload, sizeof(preload), "%s:%s", c->libnvshare, old);
    else
        snprintf(preload, sizeof(preload), "%s", c->libnvshare);
    if (spank_setenv(sp, "LD_PRELOAD", preload, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "NVSHARE_SOCK_DIR", c->sock_dir, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "NVSHARE_POD_NAMESPACE", POD_NAMESPACE, 1) !=
            ESPANK_SUCCESS ||
        spank_setenv(sp, "NVSHARE_POD_NAME", job, 1) != ESPANK_SUCCESS)
        return -1;
    return 0;
}

/* The step's variable, "" when unset. */
static const char *step_env(spank_t sp, const char *name, char *buf, int len)
{
    if (spank_getenv(sp, name, buf, len) != ESPANK_SUCCESS)
        buf[0] = '\0';
    return buf;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    char shards_text[32], gpus[256], job[16], pod[32], err[CTL_ERR_LEN];
    struct shards_config c;
    enum shards_job_kind kind;
    unsigned shards;
    uint32_t job_id;
    uid_t uid;

    if (shards_parse_args(&c, ac, av, err)) {
        slurm_error("nvshare: plugstack.conf: %s", err);
        return -1;
    }
    step_env(sp, "SLURM_SHARDS_ON_NODE", shards_text, sizeof(shards_text));
    if (!step_env(sp, "SLURM_STEP_GPUS", gpus, sizeof(gpus))[0])
        step_env(sp, "SLURM_JOB_GPUS", gpus, sizeof(gpus));
    if (shards_job_kind(shards_text, gpus, &kind, &shards, err)) {
        slurm_error("nvshare: %s", err);
        return -1;
    }
    if (kind == SHARDS_NO_GPU)
        return 0;
    if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
        slurm_error("nvshare: cannot read the job's id and uid from Slurm");
        return -1;
    }
    snprintf(job, sizeof(job), "%u", (unsigned)job_id);
    snprintf(pod, sizeof(pod), POD_NAMESPACE "/%s", job);
    if (declare_job(&c, kind, shards, pod, uid, err)) {
        slurm_error("nvshare: job %s: %s: %s", job, err,
                    c.fail_job
                        ? "the job fails (on_error=fail)"
                        : "it runs without nvshare's limits (on_error=run)");
        return c.fail_job ? -1 : 0;
    }
    if (task_environment(sp, &c, job)) {
        slurm_error("nvshare: job %s: cannot set the task's environment", job);
        return -1;
    }
    return 0;
}

/* Removes the job's settings, and its pod with them. */
static int forget_job(const struct ctl_target *t, uint32_t job_id,
                      char err[CTL_ERR_LEN])
{
    static const char *const keys[] = {"core-limit", "memory-limit", "owner"};
    char pod[32];

    snprintf(pod, sizeof(pod), POD_NAMESPACE "/%u", (unsigned)job_id);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (set(t, keys[i], 0, pod, err))
            return -1;
    return 0;
}

/* The epilog runs once per job and node, after its processes ended,
 * cancelled or not. Its failure would drain the node: it only logs. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
    char err[CTL_ERR_LEN];
    const char *gpus = getenv("SLURM_JOB_GPUS");
    struct shards_config c;
    struct ctl_target t;
    uint32_t job_id;

    if (!gpus || !gpus[0])
        return 0;
    if (shards_parse_args(&c, ac, av, err)) {
        slurm_error("nvshare: plugstack.conf: %s", err);
        return 0;
    }
    if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) {
        slurm_error("nvshare: epilog: cannot read the job's id from Slurm");
        return 0;
    }
    target_of(&c, &t);
    if (forget_job(&t, job_id, err))
        slurm_error("nvshare: job %u ended: its limits stay in the scheduler: "
                    "%s",
                    (unsigned)job_id, err);
    return 0;
}

/* Whether a slurmstepd of the job runs on this node. Each step's
 * slurmstepd, parented to init, holds the job's processes and outlives
 * slurmd; it titles itself "slurmstepd: [<job>.<step>]". The node itself
 * is asked, not slurmctld, which slurmd may not reach at its start and
 * whose view lags the node's (a cancelled job stays COMPLETING there). */
static bool stepd_runs(uint32_t job_id)
{
    static const char title[] = "slurmstepd: [";
    DIR *proc = opendir("/proc");
    struct dirent *e;
    bool found = false;

    if (!proc)
        return true; /* unknown: keep the job's settings */
    while (!found && (e = readdir(proc))) {
        char path[300], cmdline[64] = "";
        FILE *f;

        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        if (fgets(cmdline, sizeof(cmdline), f) &&
            !strncmp(cmdline, title, sizeof(title) - 1)) {
            char *end;
            unsigned long id = strtoul(cmdline + sizeof(title) - 1, &end, 10);
            found = *end == '.' && id == job_id;
        }
        fclose(f);
    }
    closedir(proc);
    return found;
}

/* slurmd's start: the settings of each slurm/<id> pod whose job no longer
 * runs here, left by an epilog that never ran, are removed. Logs only: a
 * failed init would keep slurmd from starting. */
static void forget_ended_jobs(int ac, char **av)
{
    char err[CTL_ERR_LEN];
    struct shards_config c;
    struct ctl_target t;
    struct ctl_status st = {0};

    if (shards_parse_args(&c, ac, av, err)) {
        slurm_error("nvshare: plugstack.conf: %s", err);
        return;
    }
    target_of(&c, &t);
    if (ctl_fetch_status(&t, &st, err)) {
        slurm_error("nvshare: slurmd start: cannot list the jobs' limits: %s",
                    err);
        return;
    }
    for (int i = 0; i < st.n_pods; i++) {
        const struct msg_status_pod *p = &st.pods[i];
        char *end;
        unsigned long job_id = strtoul(p->pod_name, &end, 10);

        if (strcmp(p->pod_namespace, POD_NAMESPACE) || !p->pod_name[0] ||
            *end || job_id > UINT32_MAX ||
            !(p->bound || p->core_limit || p->memory_limit) || stepd_runs(job_id))
            continue;
        if (forget_job(&t, job_id, err))
            slurm_error("nvshare: job %lu no longer runs here: its limits "
                        "stay: %s",
                        job_id, err);
        else
            slurm_info("nvshare: job %lu no longer runs here: its limits are "
                       "removed",
                       job_id);
    }
    ctl_status_free(&st);
}

/* Every context calls init; only slurmd's start has work. */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)sp;
    if (spank_context() == S_CTX_SLURMD)
        forget_ended_jobs(ac, av);
    return 0;
}
