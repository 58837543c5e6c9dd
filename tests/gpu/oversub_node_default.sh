#!/usr/bin/env bash
# oversub_node_default.sh - evictable memory is what is really evictable
# (issue 10, item 3), on a real GPU with PyTorch: the scheduler makes
# oversubscription the node default (NVSHARE_ENABLE_OVERSUB=1 on the
# daemon, not in the jobs) on a virtual 10 GiB capacity (9 GiB admitted),
# and two jobs (bench/memory_jobs.py) each allocate one 6 GiB tensor as
# their first CUDA allocation, then work for a few seconds.
# PASS when each job's 6 GiB is reported evictable (nvsharectl status
# --json, sampled every 200 ms), the memory resident on the GPU never
# exceeds what the scheduler admits, and both jobs finish with their data
# intact (memory_jobs.py's check=ok).
# The GPU: GPU= (an nvidia-smi index or UUID), else the first of
# CUDA_VISIBLE_DEVICES, else 0 (lib.sh's gpu_target).
# usage: OUT=DIR tests/gpu/oversub_node_default.sh   (BUILD=build-gpu)
set -uo pipefail
source "$(dirname "$0")/lib.sh"
gpu_target
gpu_build nvshare nvshare-scheduler nvsharectl
RESULTS=${OUT:-$(mktemp -d)}/oversub_node_default
rm -rf "$RESULTS"; mkdir -p "$RESULTS"
export NVSHARE_SOCK_DIR=$RESULTS/sock
trap 'sched_stop' EXIT
uuid=$GPU_UUID
sched_start "$RESULTS/sched.log" NVSHARE_ENABLE_OVERSUB=1 NVSHARE_GPUS="$uuid:10240"
pids=()
for j in 1 2; do
    CUDA_VISIBLE_DEVICES=$uuid LD_PRELOAD=$LIB python3 "$ROOT/bench/memory_jobs.py" \
        --gib 6 --chunk-mib 6144 --steps "${STEPS:-300}" --matmuls 4 \
        >"$RESULTS/job$j.out" 2>"$RESULTS/job$j.err" &
    pids+=($!)
done
while kill -0 "${pids[@]}" 2>/dev/null; do
    { "$CTL_BIN" status --json 2>/dev/null | tr -d '\n'; echo; } >>"$RESULTS/samples"
    sleep 0.2
done
ok=1
for j in 1 2; do
    wait "${pids[$((j - 1))]}" || ok=0
    grep -q "check=ok" "$RESULTS/job$j.out" || { echo "job $j: no check=ok"; ok=0; }
done
python3 - "$RESULTS/samples" <<'EOF' || ok=0
import json, sys
GiB = 1 << 30
evictable, worst_resident, limit = {}, 0, 0
for line in open(sys.argv[1]):
    try:
        st = json.loads(line)
    except ValueError:
        continue
    for c in st["clients"]:
        evictable[c["pid"]] = max(evictable.get(c["pid"], 0), c["evictable_bytes"])
    for g in st["gpus"]:
        limit = g["memory_total_bytes"] - g["reserve_bytes"]
        worst_resident = max(worst_resident, g["resident_bytes"])
print("evictable per job: %s GiB; most resident %.2f GiB of %.2f admitted"
      % ([round(v / GiB, 2) for v in evictable.values()], worst_resident / GiB, limit / GiB))
sys.exit(0 if len(evictable) == 2 and min(evictable.values()) >= 6 * GiB
         and worst_resident <= limit else 1)
EOF
grep -h "swapped out\|waiting for GPU memory" "$RESULTS"/job*.err | sed 's/^/  /' | head -6
[ $ok = 1 ] && echo "oversub_node_default: PASS" || echo "oversub_node_default: FAIL (logs in $RESULTS)"
[ $ok = 1 ]
