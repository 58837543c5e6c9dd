/* identity.c - see identity.h. The parser walks the text in place, one
 * cgroup path component at a time, and copies only the UID and the
 * container ID once their lengths are checked: no line or component length
 * can overflow anything. */
#include "identity.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Far above any real cgroup file (a few hundred bytes, v1's a kilobyte or
 * two); what lies beyond is not read. */
#define CGROUP_FILE_MAX 16384

struct span {
    const char *p;
    size_t len;
};

static bool span_is(struct span s, const char *word)
{
    return s.len == strlen(word) && memcmp(s.p, word, s.len) == 0;
}

static bool span_ends_with(struct span s, const char *suffix)
{
    size_t n = strlen(suffix);

    return s.len >= n && memcmp(s.p + s.len - n, suffix, n) == 0;
}

static bool span_starts_with(struct span s, const char *prefix)
{
    size_t n = strlen(prefix);

    return s.len >= n && memcmp(s.p, prefix, n) == 0;
}

static bool all_hex(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)p[i]))
            return false;
    return true;
}

static void copy_lower(char *out, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (char)tolower((unsigned char)p[i]);
    out[n] = '\0';
}

/* A pod UID: 8-4-4-4-12 hex with '-' (cgroupfs) or '_' (systemd, which
 * reserves '-' for nesting), or a static pod's 32 hex. */
static bool parse_uid(struct span s, char out[PROTO_POD_UID_MAX])
{
    if (s.len == 32 && all_hex(s.p, 32)) {
        copy_lower(out, s.p, 32);
        return true;
    }
    if (s.len != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        bool separator = i == 8 || i == 13 || i == 18 || i == 23;
        char c = s.p[i];
        if (separator ? c != '-' && c != '_' : !isxdigit((unsigned char)c))
            return false;
    }
    copy_lower(out, s.p, 36);
    for (size_t i = 8; i <= 23; i += 5)
        out[i] = '-';
    return true;
}

/* "burstable" / "besteffort" as a cgroupfs directory or a slice suffix. */
static enum pod_qos qos_of_word(struct span s)
{
    if (span_is(s, "burstable"))
        return POD_QOS_BURSTABLE;
    if (span_is(s, "besteffort"))
        return POD_QOS_BESTEFFORT;
    return POD_QOS_UNKNOWN;
}

/* systemd: [<anything>-]kubepods[-burstable|-besteffort]-pod<uid>.slice */
static bool systemd_pod(struct span c, struct pod_identity *out)
{
    static const char *const classes[] = {"kubepods-burstable",
                                          "kubepods-besteffort", "kubepods"};
    static const enum pod_qos qos[] = {POD_QOS_BURSTABLE, POD_QOS_BESTEFFORT,
                                       POD_QOS_GUARANTEED};
    struct span stem, uid;
    const char *pod = NULL;

    if (!span_ends_with(c, ".slice"))
        return false;
    stem = (struct span){c.p, c.len - strlen(".slice")};
    for (const char *p = stem.p; p + 4 <= stem.p + stem.len; p++)
        if (memcmp(p, "-pod", 4) == 0)
            pod = p; /* the last one: the UID has none */
    if (!pod)
        return false;
    uid = (struct span){pod + 4, (size_t)(stem.p + stem.len - (pod + 4))};
    stem.len = (size_t)(pod - stem.p);
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
        if (span_ends_with(stem, classes[i]) && parse_uid(uid, out->pod_uid)) {
            out->qos = qos[i];
            return true;
        }
    }
    return false;
}

/* cgroupfs: kubepods/[burstable|besteffort/]pod<uid>. A reader in its own
 * cgroup namespace may see ".." where kubepods (or the QoS level) is: the
 * class is then what the path still shows. */
static bool cgroupfs_pod(struct span c, struct span parent,
                         struct span grandparent, struct pod_identity *out)
{
    enum pod_qos qos = qos_of_word(parent);

    if (!span_starts_with(c, "pod"))
        return false;
    if (qos != POD_QOS_UNKNOWN) {
        if (!span_is(grandparent, "kubepods") && !span_is(grandparent, ".."))
            return false;
    } else if (span_is(parent, "kubepods")) {
        qos = POD_QOS_GUARANTEED;
    } else if (!span_is(parent, "..")) {
        return false;
    }
    if (!parse_uid((struct span){c.p + 3, c.len - 3}, out->pod_uid))
        return false;
    out->qos = qos;
    return true;
}

/* The container's cgroup under its pod's: 64 hex (cgroupfs) or a runtime's
 * systemd scope. Anything else (crio-conmon-<id>.scope, a container's own
 * sub-cgroup) names no container. */
static void container_of(struct span c, struct pod_identity *out)
{
    static const char *const scopes[] = {"cri-containerd-", "crio-", "docker-"};

    out->container_id[0] = '\0';
    if (c.len == 64 && all_hex(c.p, 64)) {
        copy_lower(out->container_id, c.p, 64);
        return;
    }
    if (!span_ends_with(c, ".scope"))
        return;
    for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++) {
        size_t n = strlen(scopes[i]);
        if (c.len == n + 64 + strlen(".scope") &&
            span_starts_with(c, scopes[i]) && all_hex(c.p + n, 64)) {
            copy_lower(out->container_id, c.p + n, 64);
            return;
        }
    }
}

static bool job_number(struct span s, char out[IDENTITY_SLURM_JOB_MAX])
{
    size_t n = s.len - strlen("job_");

    if (!span_starts_with(s, "job_") || n == 0 || n >= IDENTITY_SLURM_JOB_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s.p[4 + i]))
            return false;
    memcpy(out, s.p + 4, n);
    out[n] = '\0';
    return true;
}

/* Slurm's task/cgroup: v2 .../slurmstepd.scope/job_<id>/..., v1
 * /slurm[_<node>]/uid_<uid>/job_<id>/... */
static bool slurm_job(struct span c, struct span parent,
                      struct span grandparent, struct pod_identity *out)
{
    if (span_is(parent, "slurmstepd.scope"))
        return job_number(c, out->slurm_job);
    if (!span_starts_with(parent, "uid_") ||
        !(span_is(grandparent, "slurm") ||
          span_starts_with(grandparent, "slurm_")))
        return false;
    return job_number(c, out->slurm_job);
}

/* One cgroup path (not NUL-terminated). The innermost pod wins: a node
 * nested in a container (kind, docker-in-docker) is itself below a host
 * path. */
static enum identity_kind parse_path(struct span path, struct pod_identity *out)
{
    struct span parent = {"", 0}, grandparent = {"", 0};
    const char *p = path.p, *end = path.p + path.len;
    bool pod = false, after_pod = false;

    while (p < end) {
        struct span c = {p, 0};
        while (p < end && *p != '/')
            p++;
        c.len = (size_t)(p - c.p);
        if (p < end)
            p++;
        if (c.len == 0)
            continue;
        if (after_pod)
            container_of(c, out);
        after_pod = false;
        if (systemd_pod(c, out) || cgroupfs_pod(c, parent, grandparent, out)) {
            pod = after_pod = true;
            out->container_id[0] = '\0';
        } else if (!out->slurm_job[0]) {
            slurm_job(c, parent, grandparent, out);
        }
        grandparent = parent;
        parent = c;
    }
    return pod ? IDENTITY_POD : IDENTITY_HOST;
}

enum identity_kind identity_parse_cgroup(const char *text,
                                         struct pod_identity *out)
{
    struct pod_identity best = {.kind = IDENTITY_UNKNOWN};

    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        const char *line_end = eol ? eol : line + strlen(line);
        const char *first = memchr(line, ':', (size_t)(line_end - line));
        const char *second =
            first ? memchr(first + 1, ':', (size_t)(line_end - first - 1)) : NULL;
        struct pod_identity id = {0};

        /* "<hierarchy id>:<controllers>:/<path>" */
        bool well_formed = first && first > line && second &&
                           second + 1 < line_end && second[1] == '/';
        for (const char *d = line; well_formed && d < first; d++)
            well_formed = isdigit((unsigned char)*d);
        const char *path = second ? second + 1 : NULL;
        line = eol ? eol + 1 : NULL;
        if (!well_formed)
            continue;
        id.kind = parse_path((struct span){path, (size_t)(line_end - path)}, &id);
        /* A pod beats the host; a pod with its container beats one without;
         * a Slurm job's line beats the v1 controllers Slurm left alone. */
        if (id.kind > best.kind ||
            (id.kind == IDENTITY_POD && !best.container_id[0] &&
             id.container_id[0]) ||
            (id.kind == IDENTITY_HOST && best.kind == IDENTITY_HOST &&
             !best.slurm_job[0] && id.slurm_job[0]))
            best = id;
    }
    if (best.kind == IDENTITY_POD) {
        best.slurm_job[0] = '\0';
    } else {
        best.qos = POD_QOS_UNKNOWN;
        best.pod_uid[0] = best.container_id[0] = '\0';
    }
    *out = best;
    return best.kind;
}

enum identity_kind identity_of_pid(const char *proc_root, pid_t pid,
                                   struct pod_identity *out)
{
    char path[4096], text[CGROUP_FILE_MAX + 1];
    size_t have = 0;
    ssize_t n;
    int fd;

    *out = (struct pod_identity){.kind = IDENTITY_UNKNOWN};
    if (snprintf(path, sizeof(path), "%s/%d/cgroup",
                 proc_root ? proc_root : "/proc", (int)pid) >= (int)sizeof(path))
        return IDENTITY_UNKNOWN;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return IDENTITY_UNKNOWN;
    while (have < CGROUP_FILE_MAX &&
           ((n = read(fd, text + have, CGROUP_FILE_MAX - have)) > 0 ||
            (n < 0 && errno == EINTR)))
        if (n > 0)
            have += (size_t)n;
    close(fd);
    text[have] = '\0';
    return identity_parse_cgroup(text, out);
}
