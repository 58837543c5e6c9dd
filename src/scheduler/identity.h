/* identity.h - which pod and container a process belongs to, from the
 * kernel rather than from what the process says: its /proc/PID/cgroup.
 *
 * kubelet puts every container in a cgroup under "kubepods", one level per
 * QoS class (none for Guaranteed pods), one per pod, one per container.
 * The layouts understood (cgroup v2's "0::PATH" line, or v1's
 * "N:CONTROLLERS:PATH" lines, any of which may carry the path):
 *
 *   systemd driver   /kubepods.slice/kubepods-burstable.slice/
 *                    kubepods-burstable-pod<uid with _>.slice/
 *                    cri-containerd-<id>.scope   (crio-<id>.scope, docker-<id>.scope)
 *   cgroupfs driver  /kubepods/burstable/pod<uid>/<id>
 *
 * with "kubepods" anywhere below the root: kind and k3s nest it
 * (/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/
 * kubelet-kubepods-besteffort-pod<uid>.slice/...), docker-in-docker puts it
 * under /docker/<id>/, and a reader in its own cgroup namespace sees
 * "/../..". Anything else (/user.slice/..., /system.slice/..., /) is a host
 * process; one in a Slurm job's cgroup (task/cgroup, docs/slurm.md) is a
 * host process with the job's id:
 *
 *   cgroup v2        /system.slice/slurmstepd.scope/job_<id>/step_<s>/user/task_<t>
 *   cgroup v1        /slurm/uid_<uid>/job_<id>/step_<s>/task_<t>   (slurm_<node>/...)
 */
#ifndef NVSHARE_IDENTITY_H
#define NVSHARE_IDENTITY_H

#include <sys/types.h>

#include "protocol.h" /* enum identity_kind, enum pod_qos: they go on the wire */

#define IDENTITY_SLURM_JOB_MAX 16

struct pod_identity {
    enum identity_kind kind;
    enum pod_qos qos; /* IDENTITY_POD only */
    /* Lower-case, dashed 8-4-4-4-12 as in the pod's metadata.uid (a static
     * pod's 32-hex UID stays as kubelet wrote it). "" unless IDENTITY_POD. */
    char pod_uid[PROTO_POD_UID_MAX];
    /* 64 lower-case hex digits, "" when the process sits in the pod's
     * cgroup itself or the runtime's scope is not one of containerd's,
     * CRI-O's or docker's. */
    char container_id[PROTO_CONTAINER_ID_MAX];
    /* IDENTITY_HOST in a Slurm job's cgroup: the job id's digits, else "". */
    char slurm_job[IDENTITY_SLURM_JOB_MAX];
};

/* Parses the text of a /proc/PID/cgroup file (NUL-terminated; any size,
 * newline or not). Fills *out and returns out->kind; malformed text gives
 * IDENTITY_UNKNOWN, never a crash. */
enum identity_kind identity_parse_cgroup(const char *text,
                                         struct pod_identity *out);

/* Reads <proc_root>/<pid>/cgroup (proc_root NULL: "/proc"; tests point it
 * at fixtures, a containerised daemon at the host's /proc) and parses it.
 * IDENTITY_UNKNOWN when the file cannot be read (the process is gone, or
 * another PID namespace). */
enum identity_kind identity_of_pid(const char *proc_root, pid_t pid,
                                   struct pod_identity *out);

#endif
