#!/usr/bin/env bash
# nvshare_spank.so in a real single-node Slurm (slurmctld, slurmd and munged
# from Debian's packages, docs/slurm.md) with the real scheduler and the fake
# GPU (16 GiB) cut into 8 shards:
#  1. an sbatch job with --gres=shard:2 is the pod slurm/<job id> with 2/8 of
#     the GPU (4 GiB, 25 %) while it runs; its fake_job, preloaded with
#     libnvshare by the plugin, is billed to it and, alone on the GPU, uses
#     at most 26 % of its time (2 s of trace); an allocation above the
#     quota is refused, one below it granted; once the job ends its pod and
#     limits are gone;
#  2. with memory_per_shard=1Gi compute_per_shard=10, an srun job of 3
#     shards by another user gets 3 GiB, 30 % and that user as the pod's
#     owner; scancel removes them;
#  3. a --gres=gpu:1 job is preloaded, with no limit; a job without GPUs
#     gets neither nvshare's environment nor a pod;
#  4. four shard:2 jobs run at once, each at most 26 % and at least 15 % of
#     the GPU's time (the fake GPU's trace over 4 s; 20.4-24.0 % measured
#     with a build running beside), while a fifth waits in Slurm's queue;
#  5. slurmd killed (-9) while one shard job ends and another runs: when it
#     starts again, the ended job's limits are removed by the plugin (its
#     slurmd log says so), the running one's kept until it ends; likewise a
#     job whose slurmstepd was killed with slurmd and that slurmctld ended
#     when the node was set DOWN;
#  6. without a scheduler, a shard job gets one line on stderr and runs
#     unpreloaded (on_error=run) or does not run (on_error=fail).
# MODE linuxproc tracks jobs without cgroups: processes are billed to the pod
# the plugin declares for them. MODE cgroup runs proctrack/cgroup and
# task/cgroup: the scheduler reads the job from each process's cgroup, and
# the fake_job of test 1 declares another pod, to no avail.
# Skips (77) where Slurm cannot run here: not root, Slurm or munge not
# installed, a Slurm already running on this machine, or (cgroup) slurmd
# cannot use this host's cgroups. Stops every daemon it started.
#
# usage: slurm_shards.sh linuxproc|cgroup SCHEDULER NVSHARECTL NVSHARE_SPANK_SO
#                        LIBNVSHARE FAKE_JOB
set -euo pipefail
MODE=$1 SCHED=$2 CTL=$3 SPANK=$4 HOOK=$5 FAKE_JOB=$6
UUID=GPU-fa4e0000-0000-0000-0000-000000000000
MiB=1048576

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "slurmd and munged need root"
for tool in slurmctld slurmd munged munge srun sbatch squeue scancel sinfo python3; do
    command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/install-deps.sh test)"
done
pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null &&
    skip "a slurmctld or slurmd already runs on this machine"
[ -r /etc/munge/munge.key ] || skip "no /etc/munge/munge.key (the munge package makes it)"
NODE=$(hostname -s)
# Slurm's cgroups: left by slurmd (v1), removed by stop; someone else's
# would be removed too.
slurm_cgroups() {
    ls -d /sys/fs/cgroup/*/slurm /sys/fs/cgroup/*/slurm_"$NODE" \
        /sys/fs/cgroup/system.slice/slurmstepd.scope 2>/dev/null || true
}
if [ "$MODE" = cgroup ] && [ -n "$(slurm_cgroups)" ]; then
    skip "$(slurm_cgroups | head -n 1) exists: another Slurm's cgroups"
fi

D=$(mktemp -d /tmp/nvshare-slurm.XXXXXX)
chmod 755 "$D" # another user's job reads its release file here
export SLURM_CONF=$D/etc/slurm.conf
SOCK=$D/sock
SCHED_PID= CTLD_PID= SLURMD_PID= MUNGED_PID=

# wait_for SECONDS CMD...: polls CMD every 50 ms.
wait_for() {
    local deadline=$(( $(date +%s) + $1 )); shift
    until "$@"; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# Jobs first, while munged still vouches for their messages; slurmstepd
# outlives slurmd (its parent is init), so ours are awaited by their
# environment, which names this cluster's slurm.conf.
stop() {
    set +e
    local pid
    if [ -n "$CTLD_PID" ]; then
        scancel --quiet $(squeue -h -o %i 2>/dev/null) 2>/dev/null
        wait_for 30 queue_empty
    fi
    for pid in $SLURMD_PID $CTLD_PID $SCHED_PID; do kill -TERM "$pid" 2>/dev/null; done
    for pid in $SLURMD_PID $CTLD_PID $SCHED_PID; do wait "$pid" 2>/dev/null; done
    wait_for 10 no_stepd || kill -KILL $(our_stepd) 2>/dev/null
    if [ "$MODE" = cgroup ]; then
        for dir in $(slurm_cgroups); do
            find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
        done
        [ -z "$(slurm_cgroups)" ] || echo "  left Slurm's cgroups: $(slurm_cgroups)"
    fi
    if [ -n "$MUNGED_PID" ]; then
        kill -TERM "$MUNGED_PID"
        wait_for 10 not_running "$MUNGED_PID"
    fi
    rm -rf "$D"
}
queue_empty() { [ -z "$(squeue -h 2>/dev/null)" ]; }
our_stepd() {
    local pid
    for pid in $(pgrep -x slurmstepd); do
        grep -qzx "SLURM_CONF=$SLURM_CONF" "/proc/$pid/environ" 2>/dev/null && echo "$pid"
    done
}
no_stepd() { [ -z "$(our_stepd)" ]; }
not_running() { ! kill -0 "$1" 2>/dev/null; }
trap stop EXIT

fail() {
    echo "FAIL: $*" >&2
    for log in "$D"/log/slurmd.log "$D"/sched.log; do
        [ -f "$log" ] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
    done
    exit 1
}
pass() { echo "PASS: $*"; }

# pod FIELD ID: a field of pod slurm/ID in nvsharectl status --json, or
# "absent".
pod() {
    "$CTL" --sock-dir "$SOCK" status --json | python3 -c '
import json, sys
field, job = sys.argv[1], sys.argv[2]
pods = [p for p in json.load(sys.stdin)["pods"] if p["namespace"] == "slurm" and p["pod"] == job]
print(pods[0].get(field) if pods else "absent")' "$1" "$2"
}
pod_is() { [ "$(pod "$1" "$2")" = "$3" ]; }
pod_absent() { pod_is clients "$1" absent; }

# occupancy DIR SPAN_NS: the percentage of SPAN_NS from its first kernel
# that a job occupied the fake GPU (its kernels, and host gaps under 3 ms
# between them), from the fake driver's traces in DIR.
occupancy() {
    cat "$1"/trace.* | awk '{ print $2, $3 }' | sort -n | awk -v span="$2" '
        function add(   hi) { hi = to < t0 + span ? to : t0 + span; if (hi > from) held += hi - from }
        NR == 1 { t0 = $1; from = $1; to = $2; next }
        { if ($1 - to < 3e6) { if ($2 > to) to = $2 } else { add(); from = $1; to = $2 } }
        END { add(); printf "%.2f\n", 100 * held / span }'
}
# traced DIR NS: DIR's traces span NS from the first kernel.
traced() {
    cat "$1"/trace.* 2>/dev/null | awk -v ns="$2" '
        NR == 1 || $2 < first { first = $2 } $3 > last { last = $3 }
        END { exit !(NR > 0 && last - first >= ns) }'
}

plugstack() { echo "required $D/nvshare_spank.so sock_dir=$SOCK libnvshare=$HOOK $*" \
                  >"$D/etc/plugstack.conf"; }

# Serial, 100 ms quanta: as tests/hook/limits_fake.sh measures limits.
start_scheduler() {
    env NVSHARE_SCHEDULING_MODE=serial NVSHARE_TQ=100ms NVSHARE_SOCK_DIR="$SOCK" NVSHARE_STATE_FILE= NVSHARE_METRICS_ADDR=off NVSHARE_GPUS=$UUID:16384 "$SCHED" >>"$D/sched.log" 2>&1 &
    SCHED_PID=$!
    wait_for 10 test -S "$SOCK/control.sock" || fail "the scheduler did not start"
}

# ---- a one-node cluster: the fake GPU as gpu:1, cut into 8 shards --------
mkdir -p "$D"/{etc,state,spool,log,sock}
mknod "$D/nvidia0" c 195 0 2>/dev/null || : >"$D/nvidia0"
cat >"$SLURM_CONF" <<EOF
ClusterName=nvshare-test
SlurmctldHost=$NODE
SlurmUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
ProctrackType=proctrack/$MODE
TaskPlugin=task/$([ "$MODE" = cgroup ] && echo cgroup || echo none)
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu,shard
SlurmdParameters=config_overrides
MailProg=/bin/true
ReturnToService=2
PlugStackConfig=$D/etc/plugstack.conf
NodeName=$NODE CPUs=8 RealMemory=1000 Gres=gpu:1,shard:8 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
printf 'Name=gpu File=%s\nName=shard Count=8\n' "$D/nvidia0" >"$D/etc/gres.conf"
echo "CgroupPlugin=autodetect" >"$D/etc/cgroup.conf"
# Installed as Slurm's manual says: a new file, never one rewritten in place.
cp "$SPANK" "$D/nvshare_spank.so"
plugstack shards_per_gpu=8

if ! munge -n </dev/null >/dev/null 2>&1; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged || skip "munged does not start here"
    MUNGED_PID=$(cat /run/munge/munged.pid)
    wait_for 10 sh -c 'munge -n </dev/null >/dev/null 2>&1' || fail "munged does not answer"
fi
start_scheduler
started=$(date +%s%N)
slurmctld -D >"$D/log/slurmctld.out" 2>&1 </dev/null & CTLD_PID=$!
slurmd -D >"$D/log/slurmd.out" 2>&1 </dev/null & SLURMD_PID=$!
node_idle() {
    if ! kill -0 "$SLURMD_PID" 2>/dev/null && [ "$MODE" = cgroup ]; then
        skip "slurmd cannot use this host's cgroups: $(grep -m1 fatal "$D/log/slurmd.log")"
    fi
    kill -0 "$CTLD_PID" "$SLURMD_PID" 2>/dev/null || fail "slurmctld or slurmd exited"
    [ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ]
}
wait_for 60 node_idle || fail "the node did not become idle"
echo "  Slurm up in $(( ($(date +%s%N) - started) / 1000000 )) ms"

# ---- 1. sbatch --gres=shard:2: 4 GiB and 25 % while it runs ---------------
cat >"$D/job.sh" <<EOF
#!/bin/bash
env >"$D/env.\$SLURM_JOB_ID"
mkdir "$D/trace.\$SLURM_JOB_ID"
FAKE_JOB_MEM_MB=4200 "$FAKE_JOB" 0 0 && echo over=granted || echo over=refused
FAKE_CUDA_TRACE_DIR="$D/trace.\$SLURM_JOB_ID" FAKE_JOB_MEM_MB=3000 $([ "$MODE" = cgroup ] && echo NVSHARE_POD_NAME=elsewhere) "$FAKE_JOB" 0 \$(( \$(date +%s%N) + 120000000000 )) >/dev/null &
until [ -e "$D/release.\$SLURM_JOB_ID" ]; do sleep 0.05; done
kill \$!
EOF
a=$(sbatch --parsable --gres=shard:2 --output="$D/out.%j" "$D/job.sh") || fail "sbatch refused the job"
client_of() { # the clients of pod slurm/ID
    [ "$(pod clients "$1")" -ge 1 ] 2>/dev/null
}
wait_for 30 client_of "$a" || fail "job $a's fake_job was not billed to slurm/$a"
[ "$MODE" = linuxproc ] || [ "$(pod clients elsewhere)" = absent ] ||
    fail "job $a's fake_job was billed to the pod it declared, not its cgroup's"
memory=$(pod memory_limit_bytes "$a") core=$(pod core_limit "$a")
echo "  job $a (shard:2 of 8, 16 GiB GPU): memory_limit=$(( memory / MiB )) MiB core_limit=$core %"
[ "$memory" = $(( 4096 * MiB )) ] && [ "$core" = 25 ] ||
    fail "job $a has memory $memory, core $core; want 4 GiB and 25 %"
grep -qx "over=refused" "$D/out.$a" || fail "job $a: 4200 MiB of a 4 GiB quota: $(cat "$D/out.$a")"
grep -qx "LD_PRELOAD=$HOOK" "$D/env.$a" && grep -qx NVSHARE_POD_NAME="$a" "$D/env.$a" &&
    grep -qx NVSHARE_POD_NAMESPACE=slurm "$D/env.$a" || fail "job $a's environment lacks nvshare's"
wait_for 30 traced "$D/trace.$a" 2000000000 || fail "job $a's fake_job ran no 2 s of kernels"
alone=$(occupancy "$D/trace.$a" 2000000000)
echo "  job $a alone on the GPU: $alone % of its time over 2 s"
awk -v s="$alone" 'BEGIN { exit !(s <= 26) }' || fail "job $a used $alone % of the GPU's time"
touch "$D/release.$a"
ended=$(date +%s%N)
wait_for 30 pod_absent "$a" || fail "job $a ended; slurm/$a is still $(pod memory_limit_bytes "$a")"
pass "a shard:2 job is held to 4 GiB (4200 MiB refused) and 25 % ($alone % alone); its limits went" \
     "$(( ($(date +%s%N) - ended) / 1000000 )) ms after it was released"

# ---- 2. per-shard arguments, another user, scancel ------------------------
plugstack memory_per_shard=1Gi compute_per_shard=10
runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" srun --chdir=/tmp --gres=shard:3 \
    bash -c 'echo $SLURM_JOB_ID; exec sleep 300' >"$D/id.nobody" 2>"$D/nobody.err" &
srun_pid=$!
wait_for 30 test -s "$D/id.nobody" || fail "nobody's job did not start"
b=$(cat "$D/id.nobody")
wait_for 10 pod_is memory_limit_bytes "$b" $(( 3072 * MiB )) ||
    fail "job $b (shard:3, 1Gi per shard) has memory $(pod memory_limit_bytes "$b")"
owner=$(pod owner_uid "$b") core=$(pod core_limit "$b")
echo "  job $b (shard:3, 1Gi and 10 % per shard, uid 65534): memory_limit=3072 MiB core_limit=$core % owner=$owner"
[ "$core" = 30 ] && [ "$owner" = 65534 ] || fail "job $b: core $core owner $owner; want 30 %, 65534"
scancel "$b"
wait "$srun_pid" 2>/dev/null || true
wait_for 30 pod_absent "$b" || fail "job $b was cancelled; slurm/$b is still there"
pass "per-shard arguments give 3 GiB and 30 % to 3 shards, owned by the job's user; scancel removes them"

# ---- 3. whole GPU, no GPU -------------------------------------------------
srun --gres=gpu:1 env >"$D/env.gpu" || fail "the gpu:1 job failed"
grep -qx "LD_PRELOAD=$HOOK" "$D/env.gpu" || fail "the gpu:1 job was not preloaded"
gpu_job=$(sed -n 's/^SLURM_JOB_ID=//p' "$D/env.gpu")
pod_absent "$gpu_job" || fail "root's gpu:1 job got settings: $(pod memory_limit_bytes "$gpu_job")"
sets=$(grep -c "set to" "$D/sched.log" || true)
srun env >"$D/env.none" || fail "a job without GPUs failed"
grep -q "^NVSHARE_POD\|^LD_PRELOAD" "$D/env.none" && fail "a job without GPUs got nvshare's environment"
[ "$(grep -c "set to" "$D/sched.log" || true)" = "$sets" ] || fail "a job without GPUs changed a setting"
pass "a gpu:1 job is preloaded with no limit; a job without GPUs is left alone"

# ---- 4. four shard:2 jobs share the GPU at 25 % each; a fifth waits -------
plugstack shards_per_gpu=8
SPAN_NS=4000000000
cat >"$D/share.sh" <<EOF
#!/bin/bash
mkdir -p "$D/trace.\$SLURM_JOB_ID"; touch "$D/ready.\$SLURM_JOB_ID"
until [ -e "$D/go" ]; do sleep 0.02; done
from=\$(cat "$D/go")
FAKE_CUDA_TRACE_DIR="$D/trace.\$SLURM_JOB_ID" "$FAKE_JOB" \$from \$(( from + $SPAN_NS + 300000000 )) >/dev/null
EOF
jobs=()
for _ in 1 2 3 4 5; do
    jobs+=("$(sbatch --parsable --gres=shard:2 --output="$D/share.%j" "$D/share.sh")") ||
        fail "sbatch refused a shard:2 job"
done
all_ready() { local j; for j in "${jobs[@]:0:4}"; do [ -e "$D/ready.$j" ] || return 1; done; }
wait_for 60 all_ready || fail "four shard:2 jobs did not start together: $(squeue -h -o '%i %t %r')"
fifth=$(squeue -h -j "${jobs[4]}" -o '%t %r')
[ "${fifth%% *}" = PD ] || fail "a fifth shard:2 job on an 8-shard GPU is '$fifth', not pending"
date +%s%N >"$D/go.tmp" && mv "$D/go.tmp" "$D/go"
ran_out() { local j; for j in "${jobs[@]:0:4}"; do squeue -h -j "$j" | grep -q . && return 1; done; return 0; }
wait_for 60 ran_out || fail "the four jobs did not end"
scancel "${jobs[4]}"
line= bad=0
for j in "${jobs[@]:0:4}"; do
    share=$(occupancy "$D/trace.$j" "$SPAN_NS")
    line+=" $share%"
    awk -v s="$share" 'BEGIN { exit !(s <= 26 && s >= 15) }' || bad=1
done
echo "  four shard:2 jobs, GPU time over 4 s:$line (fifth job: $fifth)"
[ $bad = 0 ] || fail "a shard:2 job's share is outside 15-26 %:$line"
pass "four shard:2 jobs run at once at 25 % each; a fifth waits in Slurm's queue"

# ---- 5. slurmd killed: a job that ends meanwhile loses its limits at its start
# The epilog of a job that ends while slurmd is dead has no slurmd to run it:
# the plugin's init in the next slurmd removes what no slurmstepd holds.
cat >"$D/hold.sh" <<EOF
#!/bin/bash
until [ -e "$D/release.\$SLURM_JOB_ID" ]; do sleep 0.05; done
EOF
gone=$(sbatch --parsable --gres=shard:2 --output=/dev/null "$D/hold.sh") &&
    kept=$(sbatch --parsable --gres=shard:2 --output=/dev/null "$D/hold.sh") ||
    fail "sbatch refused a shard:2 job"
for j in "$gone" "$kept"; do
    wait_for 30 pod_is memory_limit_bytes "$j" $(( 4096 * MiB )) || fail "job $j got no limits"
done
kill -KILL "$SLURMD_PID"; wait "$SLURMD_PID" 2>/dev/null || true
touch "$D/release.$gone"
stepd_of() { pgrep -f "^slurmstepd: \[$1\." >/dev/null; }
no_stepd_of() { ! stepd_of "$1"; }
wait_for 30 no_stepd_of "$gone" || fail "job $gone's slurmstepd did not end"
stepd_of "$kept" || fail "job $kept's slurmstepd ended with slurmd"
pod_is memory_limit_bytes "$gone" $(( 4096 * MiB )) || fail "job $gone lost its limits with slurmd dead"
restarted=$(date +%s%N)
slurmd -D >>"$D/log/slurmd.out" 2>&1 </dev/null & SLURMD_PID=$!
wait_for 30 pod_absent "$gone" || fail "slurmd restarted; job $gone ended, slurm/$gone still has limits"
took=$(( ($(date +%s%N) - restarted) / 1000000 ))
grep -q "nvshare: job $gone no longer runs here: its limits are removed" "$D/log/slurmd.log" ||
    fail "job $gone's limits went, not at slurmd's start"
pod_is memory_limit_bytes "$kept" $(( 4096 * MiB )) ||
    fail "job $kept still runs; its limits are $(pod memory_limit_bytes "$kept")"
echo "  slurmd -9, job $gone ended, slurmd started: its limits went in $took ms; job $kept's stayed"
touch "$D/release.$kept"
wait_for 30 pod_absent "$kept" || fail "job $kept ended after slurmd's restart; slurm/$kept is still there"
wait_for 60 node_idle || fail "the node did not become idle after slurmd's restart"
# The node fails: slurmd and a job's slurmstepd are killed, slurmctld is told
# the node is down and ends the job without the node, whose epilog never
# runs. Only the plugin's init in the next slurmd removes the limits.
lost=$(sbatch --parsable --no-requeue --gres=shard:2 --output=/dev/null "$D/hold.sh") ||
    fail "sbatch refused a shard:2 job"
wait_for 30 pod_is memory_limit_bytes "$lost" $(( 4096 * MiB )) || fail "job $lost got no limits"
kill -KILL "$SLURMD_PID"; wait "$SLURMD_PID" 2>/dev/null || true
kill -KILL $(pgrep -f "^slurmstepd: \[$lost\.")
touch "$D/release.$lost"
scontrol update NodeName="$NODE" State=DOWN Reason="nvshare test: node failed"
job_ended() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }
wait_for 30 job_ended "$lost" || fail "the down node's job $lost is $(squeue -h -j "$lost" -o %T)"
pod_is memory_limit_bytes "$lost" $(( 4096 * MiB )) || fail "job $lost lost its limits with slurmd dead"
restarted=$(date +%s%N)
slurmd -D >>"$D/log/slurmd.out" 2>&1 </dev/null & SLURMD_PID=$!
wait_for 30 pod_absent "$lost" || fail "the node came back; failed job $lost still has limits"
took_failed=$(( ($(date +%s%N) - restarted) / 1000000 ))
grep -q "nvshare: job $lost no longer runs here: its limits are removed" "$D/log/slurmd.log" ||
    fail "job $lost's limits went, not at slurmd's start"
echo "  node failed, job $lost ended by slurmctld, slurmd started: its limits went in $took_failed ms"
wait_for 60 node_idle || fail "the node did not become idle after slurmd's restart"
! grep "its limits stay" "$D/log/slurmd.log" || fail "a job's limits were not removed"
pass "a job that ended while slurmd was dead loses its limits when slurmd starts ($took ms), a failed node's job too" \
     "($took_failed ms); a running job keeps them"

# ---- 6. no scheduler ------------------------------------------------------
kill -TERM "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null || true; SCHED_PID=
plugstack shards_per_gpu=8 on_error=run
srun --gres=shard:2 bash -c 'echo "ran preload=${LD_PRELOAD:-none}"' >"$D/run.out" 2>"$D/run.err" ||
    fail "on_error=run: the job failed: $(cat "$D/run.err")"
lines=$(grep -c "error: nvshare:" "$D/run.err" || true)
echo "  on_error=run: stdout '$(cat "$D/run.out")', stderr: $(cat "$D/run.err")"
[ "$(cat "$D/run.out")" = "ran preload=none" ] && [ "$lines" = 1 ] ||
    fail "on_error=run: $lines nvshare lines on stderr, stdout '$(cat "$D/run.out")'"
plugstack shards_per_gpu=8 on_error=fail
rc=0
srun --gres=shard:2 echo ran >"$D/fail.out" 2>"$D/fail.err" || rc=$?
lines=$(grep -c "error: nvshare:" "$D/fail.err" || true)
echo "  on_error=fail: srun exit $rc, stderr nvshare lines: $lines"
[ "$rc" != 0 ] && ! grep -q ran "$D/fail.out" && [ "$lines" = 1 ] ||
    fail "on_error=fail: exit $rc, stdout '$(cat "$D/fail.out")', $lines lines: $(cat "$D/fail.err")"
pass "without a scheduler: one stderr line, then the job runs unscheduled (on_error=run) or fails (on_error=fail)"
