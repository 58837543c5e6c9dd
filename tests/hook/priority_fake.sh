#!/usr/bin/env bash
# Priorities through the whole product path on one shared fake device:
# fake_job processes with libnvshare preloaded, the real scheduler in
# serial mode with a TQ of 30 s, so that without priorities a job that
# arrives waits for the holder's whole quantum.
#
#  1. A pod set to high (before it connects, by nvsharectl) arrives while a
#     low pod holds the GPU: its first kernel completes within 50 ms of its
#     first launch (DROP_LOCK at once, not after the TQ); the low pod runs
#     only in the high one's idle gaps (it lends the GPU after 1 ms idle:
#     at most 10 % of the high one's span goes to the low one's kernels),
#     and resumes after it exits.
#  2. The same without priorities, in the same run: the arriving job waits
#     for the holder (more than 1 s), which shows the test can fail.
#  3. NVSHARE_PRIORITY=high in the low pod's environment does not raise it:
#     status shows it low, set by the operator; the high pod shows high.
#
# usage: priority_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB NVSHARECTL
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4 CTL=$5
source "$(dirname "$0")/lib.sh"
failed=0

for s in prio plain; do
    start_scheduler_in "$WORK/$s" NVSHARE_TQ=30s NVSHARE_SCHEDULING_MODE=serial
done
await_schedulers "$WORK/prio" "$WORK/plain"
ctl() { NVSHARE_SOCK_DIR=$WORK/$1 "$CTL" "${@:2}"; }
ctl prio set priority batch low >/dev/null
ctl prio set priority service high >/dev/null

# job SCENARIO POD SECONDS [VAR=VALUE...]: a job of POD on the scenario's
# device for SECONDS, traced into SCENARIO/POD.
job() {
    local dir=$WORK/$1 pod=$2 from
    from=$(date +%s%N)
    mkdir -p "$dir/$pod"
    env NVSHARE_SOCK_DIR="$dir" NVSHARE_POD_NAME="$pod" FAKE_CUDA_SHARED_GPU="$dir/device" \
        FAKE_CUDA_TRACE_DIR="$dir/$pod" LD_LIBRARY_PATH="$FAKE_DIR" LD_PRELOAD="$LIB" \
        "${@:4}" "$JOB" "$from" $((from + $3 * 1000000000)) >"$dir/$pod.out" 2>/dev/null
}

# holding SCENARIO POD: the pod's client holds the GPU.
holding() { ctl "$1" status --json | tr -d '\n' | grep -q "\"pod\": \"$2\"[^}]*\"state\": \"holding\""; }

pids=()
for s in prio plain; do
    job $s batch 4 NVSHARE_PRIORITY=high &
    pids+=($!)
done
for s in prio plain; do
    for _ in $(seq 250); do holding $s batch && break; sleep 0.02; done
    holding $s batch || { echo "FAIL: $s: the batch job never held the GPU"; exit 1; }
done
sleep 0.5 # the batch job is well into its 30 s quantum
job prio service 1 &
pids+=($!)
job plain service 1 &
pids+=($!)
for _ in $(seq 100); do holding prio service && break; sleep 0.02; done
ctl prio status --json >"$WORK/status.json"
wait "${pids[@]}"

# latency SCENARIO: first kernel end of the service job - its first launch, ms
latency() {
    local first
    first=$(sed -n 's/^first_launch=//p' "$WORK/$1/service.out")
    sort -k2 -n "$WORK/$1"/service/trace.* | awk -v f="$first" 'NR == 1 { printf "%.1f", ($3 - f) / 1e6 }'
}
prio_ms=$(latency prio)
plain_ms=$(latency plain)
echo "first kernel after its launch: high priority ${prio_ms} ms, without priorities ${plain_ms} ms"
awk -v x="$prio_ms" 'BEGIN { exit !(x <= 50) }' ||
    { echo "FAIL: the high-priority job waited ${prio_ms} ms (over 50 ms)"; failed=1; }
awk -v x="$plain_ms" 'BEGIN { exit !(x >= 1000) }' ||
    { echo "FAIL: without priorities the job did not wait for the holder (${plain_ms} ms)"; failed=1; }

# Class isolation: batch kernels between the service's first and last run
# only in its idle gaps, a small part of its span.
read -r s_from s_to < <(cat "$WORK/prio"/service/trace.* | awk '
    NR == 1 || $2 < lo { lo = $2 } $3 > hi { hi = $3 } END { print lo, hi }')
read -r inside inside_pct < <(cat "$WORK/prio"/batch/trace.* | awk -v lo="$s_from" -v hi="$s_to" '
    $3 > lo && $2 < hi { n++; t += $3 - $2 } END { printf "%d %.1f\n", n, 100 * t / (hi - lo) }')
after=$(cat "$WORK/prio"/batch/trace.* | awk -v hi="$s_to" '$2 > hi' | wc -l)
echo "batch kernels within the service's span: $inside ($inside_pct % of it)"
awk -v p="$inside_pct" 'BEGIN { exit !(p <= 10) }' ||
    { echo "FAIL: batch kernels took $inside_pct % of the high-priority job's span"; failed=1; }
[ "$after" -gt 0 ] || { echo "FAIL: the batch job did not resume after the high-priority one"; failed=1; }

python3 - "$WORK/status.json" <<'PY' || failed=1
import json, sys
clients = {c["pod"]: c for c in json.load(open(sys.argv[1]))["clients"]}
b, s = clients["batch"], clients["service"]
ok = (b["priority"], b["priority_source"], s["priority"]) == ("low", "runtime", "high")
print(("" if ok else "FAIL: ") + f"batch {b['priority']} ({b['priority_source']}, declared high), "
      f"service {s['priority']}; batch waits for {b['wait_reason']}")
sys.exit(0 if ok and b["wait_reason"] == "priority" else 1)
PY

[ "$failed" = 0 ] && echo "PASS: a high-priority job preempts a low one at once; lower classes wait"
exit "$failed"
