/* limits.c - what a pod's claims consumed, as the operator's limits of the
 * pod in nvshare's scheduler (CTL_SET on the control socket, as nvsharectl
 * sends them), with the priority class their opaque configuration names.
 * Operator limits hold whether the pod is connected or not, survive the
 * scheduler's restarts, and the pod's own environment can only lower
 * them. Every change of a claim sends its pods' limits whole, computed
 * from all the claims prepared on the node: a pod's second claim adds to
 * its first, and the Unprepare of one leaves the others'. */
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

/* One CTL_SET of each pod setting keys names (as nvsharectl set does) to
 * its value, for one pod, on fd. */
static int send_pod(int fd, struct msg *m, const char *pod,
                    const char *const *keys, const uint64_t *values, int n_keys,
                    char err[DRA_ERR_LEN])
{
    int got;

    for (int k = 0; k < n_keys; k++) {
        memset(m, 0, sizeof(*m));
        m->type = MSG_CTL_SET;
        snprintf(m->u.set.name, sizeof(m->u.set.name), "%s", keys[k]);
        m->u.set.value = values[k];
        snprintf(m->u.set.target, sizeof(m->u.set.target), "uid:%s", pod);
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
    }
    return 0;
}

/* What a pod is held to: for each GPU, the sum of what its claims consumed
 * there, a claim reserved by several pods split evenly among them (so
 * that together they stay within it). The scheduler keeps one memory and
 * one core limit a pod, for each GPU it uses: the pod gets the largest of
 * its GPUs' sums. A share of a whole device, or a sum of 100 % or more,
 * sets no core limit; the priority is the highest its claims name.
 * skip, when not NULL, is left out: a claim being unprepared. */
static void pod_limits(const struct driver *d, const char *pod,
                       const struct dra_claim *skip, uint64_t out[3])
{
    uint64_t memory[PLUGIN_MAX_GPUS] = {0}, compute[PLUGIN_MAX_GPUS] = {0};
    bool whole[PLUGIN_MAX_GPUS] = {false};

    out[0] = out[1] = out[2] = 0;
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

            memory[sh->gpu] += sh->memory / (uint64_t)c->n_pods;
            compute[sh->gpu] += part ? part : 1;
            whole[sh->gpu] |= !sh->memory || !sh->compute;
        }
        if (c->priority > out[2])
            out[2] = c->priority;
    }
    for (int g = 0; g < d->gpus.gpu_count; g++) {
        if (whole[g])
            continue; /* the scheduler keeps the device's own bounds */
        if (memory[g] > out[0])
            out[0] = memory[g];
        if (compute[g] > out[1])
            out[1] = compute[g];
    }
    if (out[1] >= 100)
        out[1] = 0;
}

int limits_apply(const struct driver *d, const struct dra_claim *c,
                 const struct dra_claim *skip, char err[DRA_ERR_LEN])
{
    static const char *const keys[3] = {"memory-limit", "core-limit", "priority"};
    char path[PATH_MAX];
    struct msg *m = calloc(1, sizeof(*m));
    uint64_t values[3];
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
    for (int p = 0; p < c->n_pods; p++) {
        pod_limits(d, c->pods[p], skip, values);
        if (send_pod(fd, m, c->pods[p], keys, values, 3, err))
            goto out;
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    free(m);
    return rc;
}
