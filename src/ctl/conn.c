/* conn.c - nvsharectl's side of the control socket.
 *
 * One connection per command: connect, send one request, read the reply
 * records until CTL_STATUS_END (or the one CTL_REPLY), close. Every reply
 * is awaited for at most t->timeout_ms, so a wedged scheduler produces an
 * error rather than a hung terminal. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "parse.h"
#include "sock.h"

/* Explains a failed connect(): the operator's next step depends on errno. */
static void explain_connect(const struct ctl_target *t, int e, char *err)
{
    if (e == EACCES || e == EPERM)
        snprintf(err, CTL_ERR_LEN,
                 "cannot reach the scheduler at %s: %s (the control socket is "
                 "for root and the scheduler's own user: run as one of them, "
                 "e.g. with sudo)",
                 t->path, strerror(e));
    else
        snprintf(err, CTL_ERR_LEN,
                 "cannot reach the scheduler at %s: %s (is nvshare-scheduler "
                 "running? %s)",
                 t->path, strerror(e), t->dir_from);
}

/* Explains a reply that did not come. A connection the scheduler closes
 * before answering is most often its refusal of a user who is neither root
 * nor its own: the socket's owner tells us whether that is likely. */
static void explain_recv(const struct ctl_target *t, int rc, bool first, char *err)
{
    struct stat sb;

    if (rc == PROTO_E_TIMEOUT) {
        snprintf(err, CTL_ERR_LEN,
                 "the scheduler at %s did not answer within %d ms", t->path,
                 t->timeout_ms);
    } else if (rc == PROTO_E_IO && first && getuid() != 0 &&
               stat(t->path, &sb) == 0 && sb.st_uid != getuid()) {
        snprintf(err, CTL_ERR_LEN,
                 "the scheduler at %s closed the connection: it serves only "
                 "root and its own user (uid %u); run as one of them, e.g. "
                 "with sudo",
                 t->path, (unsigned)sb.st_uid);
    } else if (rc == PROTO_E_IO) {
        snprintf(err, CTL_ERR_LEN,
                 "the scheduler at %s closed the connection before answering",
                 t->path);
    } else if (rc == PROTO_E_VERSION) {
        snprintf(err, CTL_ERR_LEN,
                 "the scheduler at %s speaks another protocol version than "
                 "nvsharectl (%d): use the nvsharectl of the same release",
                 t->path, PROTO_VERSION);
    } else {
        snprintf(err, CTL_ERR_LEN, "bad reply from the scheduler at %s: %s",
                 t->path, proto_strerror(rc));
    }
}

/* Connects and sends m. Returns the fd or -1. */
static int request(const struct ctl_target *t, const struct msg *m, char *err)
{
    int fd = unix_connect(t->path);
    int rc;

    if (fd < 0) {
        explain_connect(t, errno, err);
        return -1;
    }
    if ((rc = msg_send(fd, m)) != PROTO_OK) {
        snprintf(err, CTL_ERR_LEN, "cannot send to the scheduler at %s: %s",
                 t->path, proto_strerror(rc));
        close(fd);
        return -1;
    }
    return fd;
}

/* A refusal (CTL_REPLY with an error) in place of the expected record
 * carries the scheduler's reason; anything else is a protocol error. */
static int unexpected(const struct ctl_target *t, const struct msg *m, char *err)
{
    if (m->type == MSG_CTL_REPLY && m->u.reply.status)
        snprintf(err, CTL_ERR_LEN, "the scheduler refused: %.200s",
                 m->u.reply.text);
    else
        snprintf(err, CTL_ERR_LEN,
                 "bad reply from the scheduler at %s: unexpected %s", t->path,
                 msg_type_name(m->type));
    return -1;
}

static int read_status(const struct ctl_target *t, int fd,
                       struct ctl_status *st, char *err)
{
    struct msg *m = malloc(sizeof(*m));
    enum status_record r = RECORD_TAKEN;
    int got = PROTO_OK;
    bool first = true;

    if (!m) {
        snprintf(err, CTL_ERR_LEN, "out of memory");
        return -1;
    }
    while (r == RECORD_TAKEN &&
           (got = msg_recv(fd, m, t->timeout_ms)) == PROTO_OK) {
        r = ctl_status_take(st, m);
        first = false;
    }
    if (got != PROTO_OK)
        explain_recv(t, got, first, err);
    else if (r == RECORD_OUT_OF_PLACE)
        unexpected(t, m, err);
    else if (r == RECORD_NO_MEMORY)
        snprintf(err, CTL_ERR_LEN, "out of memory");
    free(m);
    return got == PROTO_OK && r == RECORD_END ? 0 : -1;
}

static int fetch_status(const struct ctl_target *t, uint16_t type,
                        struct ctl_status *st, char err[CTL_ERR_LEN])
{
    struct msg req = {.type = type};
    int fd, rc;

    memset(st, 0, sizeof(*st));
    fd = request(t, &req, err);
    if (fd < 0)
        return -1;
    rc = read_status(t, fd, st, err);
    close(fd);
    if (rc)
        ctl_status_free(st);
    return rc;
}

int ctl_fetch_status(const struct ctl_target *t, struct ctl_status *st,
                     char err[CTL_ERR_LEN])
{
    return fetch_status(t, MSG_CTL_STATUS, st, err);
}

int ctl_fetch_status_settings(const struct ctl_target *t, struct ctl_status *st,
                              char err[CTL_ERR_LEN])
{
    return fetch_status(t, MSG_CTL_STATUS_WITH_SETTINGS, st, err);
}

/* Sends m, a request CTL_REPLY answers, and reads the reply into *reply
 * (m is overwritten). 0, or -1 with err. */
static int exchange(const struct ctl_target *t, struct msg *m,
                    struct msg_ctl_reply *reply, char err[CTL_ERR_LEN])
{
    int fd = request(t, m, err), got;

    if (fd < 0)
        return -1;
    got = msg_recv(fd, m, t->timeout_ms);
    close(fd);
    if (got != PROTO_OK) {
        explain_recv(t, got, true, err);
        return -1;
    }
    if (m->type != MSG_CTL_REPLY) {
        unexpected(t, m, err);
        return -1;
    }
    *reply = m->u.reply;
    return 0;
}

int ctl_set(const struct ctl_target *t, uint16_t type, const char *name,
            uint64_t value, const char *subject, const char *gpu,
            struct msg_ctl_reply *reply, char err[CTL_ERR_LEN])
{
    struct msg *m = calloc(1, sizeof(*m));
    int rc = -1;

    if (!m) {
        snprintf(err, CTL_ERR_LEN, "out of memory");
        return -1;
    }
    /* CTL_SET_GPU is CTL_SET's fields and the GPU. */
    char *m_name = gpu ? m->u.set_gpu.name : m->u.set.name;
    char *m_target = gpu ? m->u.set_gpu.target : m->u.set.target;
    m->type = gpu ? MSG_CTL_SET_GPU : type;
    *(gpu ? &m->u.set_gpu.value : &m->u.set.value) = value;
    if (strlen(name) >= sizeof(m->u.set.name)) {
        snprintf(err, CTL_ERR_LEN, "no setting is called '%.200s'", name);
        goto out;
    }
    strcpy(m_name, name);
    if (strlen(subject) >= sizeof(m->u.set.target)) {
        snprintf(err, CTL_ERR_LEN, "'%s' is too long for a pod name", subject);
        goto out;
    }
    strcpy(m_target, subject);
    if (gpu && strlen(gpu) >= sizeof(m->u.set_gpu.gpu)) {
        snprintf(err, CTL_ERR_LEN, "'%.200s' is too long for a GPU", gpu);
        goto out;
    }
    if (gpu)
        strcpy(m->u.set_gpu.gpu, gpu);
    rc = exchange(t, m, reply, err);
out:
    free(m);
    return rc;
}

int ctl_set_group(const struct ctl_target *t,
                  const struct msg_ctl_set_group *group,
                  struct msg_ctl_reply *reply, char err[CTL_ERR_LEN])
{
    struct msg *m = calloc(1, sizeof(*m));
    int rc;

    if (!m) {
        snprintf(err, CTL_ERR_LEN, "out of memory");
        return -1;
    }
    m->type = MSG_CTL_SET_GROUP;
    m->u.set_group = *group;
    rc = exchange(t, m, reply, err);
    free(m);
    return rc;
}

void ctl_quantum_label(const struct msg_status_gpu *g, char *buf, size_t len)
{
    char tq[32], mean[32];

    format_duration(g->tq_ns, tq, sizeof(tq));
    format_duration(g->handover_mean_ns, mean, sizeof(mean));
    if (g->tq_reason == QUANTUM_PINNED)
        snprintf(buf, len, "%s (pinned)", tq);
    else if (!g->handover_mean_ns)
        snprintf(buf, len, "%s (auto: floor, no hand-over yet)", tq);
    else if (g->tq_reason == QUANTUM_DRAIN)
        snprintf(buf, len, "%s (auto: 100 x mean hand-over %s)", tq, mean);
    else
        snprintf(buf, len, "%s (auto: %s; mean hand-over %s)", tq,
                 ctl_quantum_reason_name(g->tq_reason), mean);
}
