/* limits.c - what a pod's claims consumed, as the operator's limits of the
 * pod in nvshare's scheduler (CTL_SET on the control socket, as nvsharectl
 * sends them), with the priority class their opaque configuration names.
 * Operator limits hold whether the pod is connected or not, survive the
 * scheduler's restarts, and the pod's own environment can only lower
 * them. Every change of a claim sends its pods' limits whole, computed
 * from all the claims prepared on the node: a pod's second claim adds to
 * its first, and the Unprepare of one leaves the others'. Each GPU gets its
 * own (CTL_SET_GPU): a pod with 4Gi/25 % on one GPU and 2Gi/10 % on another
 * is held to each there. A claim reserved for several pods is a group on
 * each of its GPUs (CTL_SET_GROUP, named <claim UID>-<GPU index>): one
 * budget its pods draw on together there, so that one may use what the
 * others leave idle. */
#include "driver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "log.h"
#include "protocol.h"
#include "sock.h"

#define REPLY_TIMEOUT_MS 2000

/* Sends m (a CTL_SET or CTL_SET_GPU) on fd and reads the scheduler's
 * answer. */
static int send_setting(int fd, struct msg *m, char err[DRA_ERR_LEN])
{
    int got;

    if ((got = msg_send(fd, m)) || (got = msg_recv(fd, m, REPLY_TIMEOUT_MS))) {
        snprintf(err, DRA_ERR_LEN, "nvshare's scheduler: %s",
                 proto_strerror(got));
        return -1;
    }
    if (m->type != MSG_CTL_REPLY || m->u.reply.status) {
        snprintf(err, DRA_ERR_LEN, "nvshare's scheduler refused: %.200s",
                 m->type == MSG_CTL_REPLY ? m->u.reply.text
                                          : "an unexpected answer");
        return -1;
    }
    return 0;
}

/* What a pod is held to, by the driver's GPU index. */
struct pod_limits {
    uint64_t memory[PLUGIN_MAX_GPUS];  /* bytes; 0 = none */
    uint64_t compute[PLUGIN_MAX_GPUS]; /* percent; 0 = none */
    uint64_t priority;
};

/* Whether share sh of c is a group's budget rather than a part of each
 * pod's: c is reserved for several pods (at most a group's), and the share
 * is limited (a whole device sets no limit to share). More pods than a
 * group holds split it evenly, each at least 1 %, so that together they
 * stay within it. */
static bool grouped(const struct dra_claim *c, const struct dra_share *sh)
{
    return c->n_pods > 1 && c->n_pods <= PROTO_GROUP_MAX_MEMBERS &&
           sh->memory && sh->compute;
}

/* On each GPU, the sum of what the pod's claims consumed there, less the
 * groups' shares (the group holds the pod there: its clients are billed
 * to it). A share of a whole device sets no limit there, a sum of 100 % or
 * more no core limit; the priority is the highest its claims name. skip,
 * when not NULL, is left out: a claim being unprepared. */

static void pod_limits(const struct driver *d, const char *pod,
                       const struct dra_claim *skip, struct pod_limits *out)
{
    bool whole[PLUGIN_MAX_GPUS] = {false};

    memset(out, 0, sizeof(*out));
    for (int i = 0; i < d->n_claims; i++) {
        const struct dra_claim *c = &d->claims[i];
        int p = 0;

        while (p < c->n_pods && strcmp(c->pods[p], pod))
            p++;
        if (c == skip || p == c->n_pods)
            continue;
        for (int s = 0; s < c->n_shares; s++) {
            const struct dra_share *sh = &c->shares[s];
            unsigned part = sh->compute / (unsigned)c->n_pods;

            if (grouped(c, sh))
                continue;
            out->memory[sh->gpu] += sh->memory / (uint64_t)c->n_pods;
            out->compute[sh->gpu] += part ? part : 1;
            whole[sh->gpu] |= !sh->memory || !sh->compute;
        }
        if (c->priority > out->priority)
            out->priority = c->priority;
    }
    for (int g = 0; g < d->gpus.gpu_count; g++) {
        if (whole[g]) /* the scheduler keeps the device's own bounds */
            out->memory[g] = out->compute[g] = 0;
        if (out->compute[g] >= 100)
            out->compute[g] = 0;
    }
}

/* A pod's limits, whole, for the scheduler: each GPU's own (0 where it
 * has no claim: that removes one a claim left there), then no limit for
 * every GPU (one an older driver set goes, after the GPUs' own are in
 * force, so the pod is never without a limit) and its priority. The GPU
 * is named by its UUID: the scheduler's index need not be the driver's. */
static int send_pod(int fd, struct msg *m, const struct plugin *gpus,
                    const char *pod, const struct pod_limits *l,
                    char err[DRA_ERR_LEN])
{
    static const char *const keys[3] = {"memory-limit", "core-limit", "priority"};
    const uint64_t values[3] = {0, 0, l->priority};

    for (int g = 0; g < gpus->gpu_count; g++) {
        for (int k = 0; k < 2; k++) {
            struct msg_ctl_set_gpu *set = &m->u.set_gpu;
            memset(m, 0, sizeof(*m));
            m->type = MSG_CTL_SET_GPU;
            snprintf(set->name, sizeof(set->name), "%s", keys[k]);
            set->value = k ? l->compute[g] : l->memory[g];
            snprintf(set->target, sizeof(set->target), "uid:%s", pod);
            snprintf(set->gpu, sizeof(set->gpu), "%s", gpus->gpus[g].uuid);
            if (send_setting(fd, m, err))
                return -1;
        }
    }
    for (int k = 0; k < 3; k++) {
        memset(m, 0, sizeof(*m));
        m->type = MSG_CTL_SET;
        snprintf(m->u.set.name, sizeof(m->u.set.name), "%s", keys[k]);
        m->u.set.value = values[k];
        snprintf(m->u.set.target, sizeof(m->u.set.target), "uid:%s", pod);
        if (send_setting(fd, m, err))
            return -1;
    }
    return 0;
}

/* c's group on GPU gpu: what its shares there consumed, its pods, its
 * priority; a name that removes it when gone (CTL_RESET of "group"). */
static int send_group(int fd, struct msg *m, const struct driver *d,
                      const struct dra_claim *c, int gpu, bool gone,
                      char err[DRA_ERR_LEN])
{
    char name[PROTO_GROUP_NAME_MAX];

    snprintf(name, sizeof(name), "%.40s-%d", c->uid, gpu);
    memset(m, 0, sizeof(*m));
    if (gone) {
        m->type = MSG_CTL_RESET;
        snprintf(m->u.set.name, sizeof(m->u.set.name), "group");
        snprintf(m->u.set.target, sizeof(m->u.set.target), "%s", name);
        int rc = send_setting(fd, m, err);
        /* Gone already (a retried Unprepare): nothing to remove. */
        return rc && !(m->type == MSG_CTL_REPLY && m->u.reply.status == ENOENT)
                   ? -1
                   : 0;
    }
    struct msg_ctl_set_group *g = &m->u.set_group;
    m->type = MSG_CTL_SET_GROUP;
    snprintf(g->name, sizeof(g->name), "%s", name);
    snprintf(g->gpu, sizeof(g->gpu), "%s", d->gpus.gpus[gpu].uuid);
    uint64_t compute = 0;
    for (int s = 0; s < c->n_shares; s++) {
        if (c->shares[s].gpu == gpu) {
            g->memory_limit += c->shares[s].memory;
            compute += c->shares[s].compute;
        }
    }
    g->core_limit = compute < 100 ? (uint8_t)compute : 0;
    g->priority = (uint8_t)c->priority;
    g->n_members = (uint16_t)c->n_pods;
    for (int p = 0; p < c->n_pods; p++)
        snprintf(g->members[p], sizeof(g->members[p]), "uid:%s", c->pods[p]);
    return send_setting(fd, m, err);
}

/* Sends c's groups, each GPU's once; gone: removes them. */
static int send_groups(int fd, struct msg *m, const struct driver *d,
                       const struct dra_claim *c, bool gone,
                       char err[DRA_ERR_LEN])
{
    bool sent[PLUGIN_MAX_GPUS] = {false};

    for (int s = 0; s < c->n_shares; s++) {
        int gpu = c->shares[s].gpu;
        if (!grouped(c, &c->shares[s]) || sent[gpu])
            continue;
        sent[gpu] = true;
        if (send_group(fd, m, d, c, gpu, gone, err))
            return -1;
    }
    return 0;
}

int limits_apply(const struct driver *d, const struct dra_claim *c,
                 const struct dra_claim *skip, char err[DRA_ERR_LEN])
{
    char path[PATH_MAX];
    struct msg *m = calloc(1, sizeof(*m));
    struct pod_limits limits;
    int fd = -1, rc = -1;

    if (!m) {
        snprintf(err, DRA_ERR_LEN, "out of memory");
        return -1;
    }
    if (socket_path(CONTROL_SOCKET_NAME, path, sizeof(path)) ||
        (fd = unix_connect(path)) < 0) {
        snprintf(err, DRA_ERR_LEN,
                 "nvshare's scheduler is unreachable at %.150s: %s", path,
                 strerror(errno));
        goto out;
    }
    /* A group before its pods' own limits lose its share, and removed
     * after they have it back: the pods are never without a limit. */
    if (c != skip && send_groups(fd, m, d, c, false, err))
        goto out;
    for (int p = 0; p < c->n_pods; p++) {
        pod_limits(d, c->pods[p], skip, &limits);
        if (send_pod(fd, m, &d->gpus, c->pods[p], &limits, err))
            goto out;
    }
    if (c == skip && send_groups(fd, m, d, c, true, err))
        goto out;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    free(m);
    return rc;
}
