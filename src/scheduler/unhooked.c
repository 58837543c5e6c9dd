/* unhooked.c - processes that use a managed GPU without libnvshare.
 *
 * A tenant can unset LD_PRELOAD or link CUDA statically and run unscheduled
 * and unlimited. NVML lists every process with a context on a GPU; one
 * that is not a client's (nor the scheduler's) escaped the hook. Each is
 * logged once when it appears (pid, GPU, memory, and its pod and container
 * from its cgroup: identity.c), once when it goes, listed in status and
 * counted.
 *
 * It must be seen in two samples in a row (2 s apart) before it counts: a
 * hooked process creates its context while libnvshare connects, and hooked
 * processes reconnect after a scheduler restart; neither has escaped.
 *
 * Pids compare as thread-group ids: SO_PEERCRED gives the connecting
 * process's, NVML the process's, so a client's other threads are the
 * client. NVML's pids are the host's: this needs the scheduler in the
 * host's PID namespace (as the clients' SO_PEERCRED pids already do). A pid
 * the scheduler cannot see is skipped rather than guessed at. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "parse.h"
#include "scheduler.h"

static bool is_client(const struct scheduler *s, pid_t pid)
{
    /* Connected and not yet registered counts: it is on its way in. */
    for (int slot = 0; slot < s->table_size; slot++)
        if (s->clients[slot]->used && s->clients[slot]->pid == pid)
            return true;
    return false;
}

static bool visible(pid_t pid)
{
    return kill(pid, 0) == 0 || errno == EPERM;
}

/* "pod <uid> (burstable), container <12 hex>", "host process", ... */
static void origin_label(const struct unhooked_proc *u, char *buf, size_t len)
{
    const struct pod_identity *id = &u->identity;

    switch (id->kind) {
    case IDENTITY_POD:
        snprintf(buf, len, "pod %s (%s), container %.12s", id->pod_uid,
                 pod_qos_name(id->qos),
                 id->container_id[0] ? id->container_id : "unknown");
        return;
    case IDENTITY_HOST:
        snprintf(buf, len, "host process");
        return;
    case IDENTITY_UNKNOWN:
        break;
    }
    snprintf(buf, len, "origin unknown: /proc/%d/cgroup unreadable", (int)u->pid);
}

static struct unhooked_proc *find(struct scheduler *s, int gpu, pid_t pid)
{
    for (int i = 0; i < s->n_unhooked[gpu]; i++)
        if (s->unhooked[gpu][i].pid == pid)
            return &s->unhooked[gpu][i];
    return NULL;
}

static void report(struct scheduler *s, int gpu, struct unhooked_proc *u)
{
    char used[32], origin[192];

    u->reported = true;
    s->unhooked_seen++;
    format_size(u->used, used, sizeof(used));
    origin_label(u, origin, sizeof(origin));
    log_warn("gpu %d: pid %d uses it without nvshare (%s, %s): not scheduled, "
             "not limited",
             gpu, (int)u->pid, used, origin);
}

void unhooked_observe(struct scheduler *s, int gpu,
                      const nvmlProcessInfo_t *procs, unsigned n, uint64_t now)
{
    static bool full_logged[POLICY_MAX_GPUS];
    struct unhooked_proc *list = s->unhooked[gpu];
    pid_t self = getpid();

    for (int i = 0; i < s->n_unhooked[gpu]; i++)
        list[i].seen = false;
    for (unsigned i = 0; i < n; i++) {
        pid_t pid = (pid_t)procs[i].pid;
        struct unhooked_proc *u = find(s, gpu, pid);

        if (u && u->seen)
            continue; /* listed as compute and graphics */
        if (pid <= 0 || pid == self || is_client(s, pid) || !visible(pid))
            continue;
        if (!u) {
            if (s->n_unhooked[gpu] == UNHOOKED_MAX) {
                if (!full_logged[gpu])
                    log_warn("gpu %d: more than %d processes use it without "
                             "nvshare: the others are not tracked",
                             gpu, UNHOOKED_MAX);
                full_logged[gpu] = true;
                continue;
            }
            u = &list[s->n_unhooked[gpu]++];
            *u = (struct unhooked_proc){.pid = pid, .since = now};
            identity_of_pid(NULL, pid, &u->identity);
            u->seen = true;
            u->used = procs[i].usedGpuMemory;
            continue;
        }
        u->seen = true;
        u->used = procs[i].usedGpuMemory;
        if (!u->reported)
            report(s, gpu, u);
    }
    for (int i = 0; i < s->n_unhooked[gpu];) {
        if (list[i].seen) {
            i++;
            continue;
        }
        if (list[i].reported)
            log_info("gpu %d: pid %d no longer uses it without nvshare", gpu,
                     (int)list[i].pid);
        list[i] = list[--s->n_unhooked[gpu]];
        full_logged[gpu] = false;
    }
}

int unhooked_count(const struct scheduler *s)
{
    int n = 0;

    for (int g = 0; g < s->n_gpus; g++)
        for (int i = 0; i < s->n_unhooked[g]; i++)
            n += s->unhooked[g][i].reported;
    return n;
}
