/* limits.c - what a claim consumed, as the operator's limits of its pods
 * in nvshare's scheduler (CTL_SET on the control socket, as nvsharectl
 * sends them), with the priority class its opaque configuration names. Operator limits hold whether the pod is connected or not,
 * survive the scheduler's restarts, and the pod's own environment can
 * only lower them. */
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
 * its value, for each pod of c, on one connection. */
static int send_all(const struct dra_claim *c, const char *const *keys,
                    const uint64_t *values, int n_keys, char err[DRA_ERR_LEN])
{
    char path[PATH_MAX];
    struct msg *m = calloc(1, sizeof(*m));
    int fd = -1, rc = -1, got;

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
        for (int k = 0; k < n_keys; k++) {
            memset(m, 0, sizeof(*m));
            m->type = MSG_CTL_SET;
            snprintf(m->u.set.name, sizeof(m->u.set.name), "%s", keys[k]);
            m->u.set.value = values[k];
            snprintf(m->u.set.target, sizeof(m->u.set.target), "uid:%s",
                     c->pods[p]);
            if ((got = msg_send(fd, m)) ||
                (got = msg_recv(fd, m, REPLY_TIMEOUT_MS))) {
                snprintf(err, DRA_ERR_LEN, "nvshare's scheduler: %s",
                         proto_strerror(got));
                goto out;
            }
            if (m->type != MSG_CTL_REPLY || m->u.reply.status) {
                snprintf(err, DRA_ERR_LEN, "nvshare's scheduler refused: %.200s",
                         m->type == MSG_CTL_REPLY ? m->u.reply.text
                                                  : "an unexpected answer");
                goto out;
            }
        }
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    free(m);
    return rc;
}

/* A pod's limit is per GPU: with shares of several GPUs it gets the
 * largest (the scheduler keeps one memory and one core limit a pod). A
 * share of the whole device sets none. */
static void claim_limits(const struct dra_claim *c, uint64_t *memory,
                         uint64_t *compute)
{
    *memory = *compute = 0;
    for (int s = 0; s < c->n_shares; s++) {
        if (c->shares[s].memory > *memory)
            *memory = c->shares[s].memory;
        if (c->shares[s].compute > *compute)
            *compute = c->shares[s].compute;
    }
    if (*compute >= 100)
        *compute = 0;
}

int limits_set(const struct dra_claim *c, char err[DRA_ERR_LEN])
{
    const char *keys[3];
    uint64_t values[3], memory, compute;
    int n = 0;

    claim_limits(c, &memory, &compute);
    if (memory) {
        keys[n] = "memory-limit";
        values[n++] = memory;
    }
    if (compute) {
        keys[n] = "core-limit";
        values[n++] = compute;
    }
    if (c->priority) {
        keys[n] = "priority";
        values[n++] = c->priority;
    }
    return n ? send_all(c, keys, values, n, err) : 0;
}

int limits_clear(const struct dra_claim *c, char err[DRA_ERR_LEN])
{
    static const char *const keys[3] = {"memory-limit", "core-limit", "priority"};
    static const uint64_t zeros[3] = {0, 0, 0};

    return send_all(c, keys, zeros, 3, err);
}
