#!/usr/bin/env bash
# Gang grants end to end on the fake driver with two GPUs: two data-parallel
# jobs, each a rank per GPU, and a single-GPU job on GPU 0, at TQ 100 ms.
# Every step of a rank ends with an all-reduce kernel on its stream (the
# fake's collective, FAKE_CUDA_COLLECTIVE: a file per job) that, as NCCL's,
# runs only once both ranks have launched theirs. So a rank preempted after
# launching its all-reduce cannot drain until its peer launches its own: a
# gang's ranks must agree on where to stop, or the drain waits for the
# scheduler's revocation. Job a names itself with NVSHARE_JOB_ID; job b's
# ranks carry only torchrun's environment (MASTER_ADDR, MASTER_PORT,
# WORLD_SIZE), which makes them one job too.
#
#  - No deadlock: every job progresses, every process ends on time, and
#    the scheduler revokes nobody: every drain ended by itself (without the
#    ranks' agreement a drain after an all-reduce waits for the 10 s drain
#    timeout: seen 1-3 times in every 20 s run).
#  - Fair shares. Every job needs GPU 0, so each is owed a third of it: a
#    job's progress is its step rate over its rate alone (same scheduler,
#    same machine, at once), and its share is its progress over the sum of
#    the three; each share is within 5 % of 1/3. The sum (how busy GPU 0
#    is kept) is printed.
#  - Status shows the gangs: the ranks of a job share a gang number, the
#    two jobs have different ones, the single-GPU job none; and a process
#    weighs (its footprint) only on the GPU it uses.
#  - Two torchrun launches in two network namespaces that both rendezvous
#    at 127.0.0.1 and one port are two jobs (where unshare -n is allowed).
# (The same jobs with one lock per GPU and no gangs cannot even be compared:
# their ranks' drains wait for each other's collectives, 10 s each.)
#
# usage: gangs_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR GANG_RANK NVSHARECTL
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 RANK=$4 CTL=$5
source "$(dirname "$0")/lib.sh"
UUID1=GPU-fa4e0000-0000-0000-0000-000000000001
SECONDS_MEASURED=${GANGS_SECONDS:-20}

for s in shared solo2 solo1; do
    start_scheduler_in "$WORK/$s" NVSHARE_GPUS=$UUID:16384,$UUID1:16384 NVSHARE_TQ=100ms
done
await_schedulers "$WORK"/*/

# Ranks go in pids, which lib.sh kills at exit: a failed run leaves no rank
# behind (one may be waiting for its peer).
pids=() names=() PREFIX=()
# rank SCENARIO JOB DEVICE RANKS [JOB_ID]: starts one rank (under the
# command in PREFIX, if any).
rank() {
    local dir=$WORK/$1 job_env=()
    case ${5:-} in
    "") ;;
    torch:*) job_env=(MASTER_ADDR=127.0.0.1 MASTER_PORT="${5#torch:}" WORLD_SIZE=2) ;;
    *) job_env=(NVSHARE_JOB_ID="$5") ;;
    esac
    [ "$4" = 1 ] || job_env+=(FAKE_CUDA_COLLECTIVE="$dir/$2.collective"
                              FAKE_CUDA_COLLECTIVE_RANKS="$4")
    "${PREFIX[@]}" env "${job_env[@]}" NVSHARE_SOCK_DIR="$dir" FAKE_CUDA_DEVICES=2 \
        LD_LIBRARY_PATH="$FAKE_DIR" LD_PRELOAD="$LIB" \
        "$RANK" "$3" "$4" "$from" "$until" \
        >"$dir/$2.$3.out" 2>"$dir/$2.$3.err" &
    pids+=($!) names+=("$1/$2.$3")
    echo $! >"$dir/$2.$3.pid"
}

# A second of warm-up before the measurement: processes start one by one.
from=$(( $(date +%s%N) + 1000000000 ))
until=$(( from + SECONDS_MEASURED * 1000000000 ))
rank shared a 0 2 job-a; rank shared a 1 2 job-a
rank shared b 0 2 torch:29400; rank shared b 1 2 torch:29400
rank shared s 0 1
rank solo2 a 0 2 job-a; rank solo2 a 1 2 job-a
rank solo1 s 0 1

# Status while they run, once every rank has asked for its GPU.
sleep 3
NVSHARE_SOCK_DIR=$WORK/shared "$CTL" status --json >"$WORK/status.json"
python3 - "$WORK/status.json" "$(cat "$WORK/shared/a.0.pid")" "$(cat "$WORK/shared/a.1.pid")" \
    "$(cat "$WORK/shared/b.0.pid")" "$(cat "$WORK/shared/b.1.pid")" "$(cat "$WORK/shared/s.0.pid")" <<'PY' \
    || { echo "FAIL: status does not show the gangs"; exit 1; }
import json, sys
doc = json.load(open(sys.argv[1]))
a0, a1, b0, b1, s = (int(x) for x in sys.argv[2:])
gangs = {}
for c in doc["clients"]:
    gangs.setdefault(c["pid"], set()).add(c["gang"])
print("  gangs by pid:", {pid: sorted(g, key=str) for pid, g in gangs.items()})
one = lambda pid: gangs[pid].pop() if len(gangs[pid]) == 1 else "mixed"
ga0, ga1, gb0, gb1, gs = one(a0), one(a1), one(b0), one(b1), one(s)
assert ga0 == ga1 and isinstance(ga0, int), "job a's ranks"
assert gb0 == gb1 and isinstance(gb0, int), "job b's ranks"
assert ga0 != gb0, "two jobs, one gang"
assert gs is None, "the single-GPU job is in a gang"
# Every process registers both GPUs and uses one: no context is counted
# on the other.
for c in doc["clients"]:
    own = {a0: 0, a1: 1, b0: 0, b1: 1, s: 0}[c["pid"]]
    if c["gpu_index"] != own:
        assert c["footprint_bytes"] == 0, f"pid {c['pid']} weighs {c['footprint_bytes']} on GPU {c['gpu_index']}"
    else:
        assert c["footprint_bytes"] > 0, f"pid {c['pid']} weighs nothing on its GPU"
PY
echo "PASS: status shows each job's ranks in one gang, the single-GPU job in none, a footprint only where a process runs"

deadline=$(( until + 5000000000 ))
for i in "${!pids[@]}"; do
    pid=${pids[$i]}
    while kill -0 "$pid" 2>/dev/null; do
        [ "$(date +%s%N)" -lt $deadline ] ||
            { echo "FAIL: a rank hangs (${names[$i]}, 5 s after the end)"; exit 1; }
        sleep 0.1
    done
    wait "$pid" || { echo "FAIL: a rank failed"; cat "$WORK"/*/*.err; exit 1; }
done

if grep -q "lock revoked" "$WORK/shared/sched.log"; then
    grep "lock revoked" "$WORK/shared/sched.log"
    echo "FAIL: a drain did not end by itself"; exit 1
fi
echo "PASS: every drain ended by itself (no revocation)"

rate() { sed -n 's/.*rate=\([0-9.]*\).*/\1/p' "$1"; }
solo2=$(rate "$WORK/solo2/a.0.out") solo1=$(rate "$WORK/solo1/s.0.out")
echo "alone: a 2-GPU job $solo2 steps/s, the 1-GPU job $solo1 steps/s"
# Progress: a job's rate over its rate alone (rank 0's steps: a step ends
# for both ranks at once).
pa=$(awk -v r="$(rate "$WORK/shared/a.0.out")" -v x="$solo2" 'BEGIN { print r / x }')
pb=$(awk -v r="$(rate "$WORK/shared/b.0.out")" -v x="$solo2" 'BEGIN { print r / x }')
ps=$(awk -v r="$(rate "$WORK/shared/s.0.out")" -v x="$solo1" 'BEGIN { print r / x }')
awk -v a="$pa" -v b="$pb" -v s="$ps" 'BEGIN {
    t = a + b + s
    printf "  GPU 0 kept %.1f%% busy; shares a %.2f%% b %.2f%% single %.2f%% (fair 33.33%%)\n",
           100 * t, 100 * a / t, 100 * b / t, 100 * s / t }'
ok=$(awk -v a="$pa" -v b="$pb" -v s="$ps" 'BEGIN {
    t = a + b + s; f = t / 3
    print (a >= 0.95 * f && a <= 1.05 * f && b >= 0.95 * f && b <= 1.05 * f &&
           s >= 0.95 * f && s <= 1.05 * f && a > 0 && b > 0 && s > 0) }')
[ "$ok" = 1 ] || { echo "FAIL: a job's progress is not within 5 % of its fair share"; exit 1; }
echo "PASS: two 2-GPU jobs and a 1-GPU job share two GPUs without deadlock, each within 5 % of its fair share"

# Two launches, each in a network namespace of its own (two pods), both at
# torchrun's loopback rendezvous: two jobs. Were they one, a rank on GPU 0
# and one on GPU 1 would make a gang.
if ! unshare -n true 2>/dev/null; then
    echo "SKIP: unshare -n is not allowed here: network namespaces not checked"
    exit 0
fi
start_scheduler_in "$WORK/netns" NVSHARE_GPUS=$UUID:16384,$UUID1:16384
await_schedulers "$WORK/netns"
pids=() names=()
from=$(date +%s%N) until=$(( $(date +%s%N) + 3000000000 ))
rank netns p 0 1 torch:29400
PREFIX=(unshare -n)
rank netns q 1 1 torch:29400
PREFIX=()
# Once both have asked for their GPU (a gang is known from requests).
for _ in $(seq 100); do
    NVSHARE_SOCK_DIR=$WORK/netns "$CTL" status --json >"$WORK/netns.json"
    python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["clients"]
sys.exit(sum(x["grants"] > 0 for x in c) < 2)' "$WORK/netns.json" && break
    sleep 0.05
done
python3 - "$WORK/netns.json" <<'PY' || { echo "FAIL: two launches in two network namespaces are one job"; exit 1; }
import json, sys
clients = json.load(open(sys.argv[1]))["clients"]
assert len({c["pid"] for c in clients}) == 2, "both processes registered"
assert all(c["gang"] is None for c in clients), [(c["pid"], c["gang"]) for c in clients]
PY
for pid in "${pids[@]}"; do wait "$pid"; done
echo "PASS: two launches at 127.0.0.1:29400 in two network namespaces are two jobs"
