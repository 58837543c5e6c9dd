#!/usr/bin/env bash
# make demo: an unprivileged scheduler and sample jobs sharing a GPU.
#
# On a node with NVIDIA GPUs the scheduler manages the real ones (NVML);
# elsewhere it manages a simulated one. The jobs are simulated workloads
# built on the client runtime: each "computes" in 1 ms units while it holds
# the GPU's lock, which is exactly what the scheduler arbitrates.
set -euo pipefail

BUILD=${1:-build}
TOP=$(cd "$(dirname "$0")/.." && pwd)
BIN=$TOP/$BUILD
DEMO=$TOP/.demo
JOBS=3
SECONDS_PER_RUN=6
export NVSHARE_SOCK_DIR=$DEMO/sock

rm -rf "$DEMO"; mkdir -p "$DEMO"
if command -v nvidia-smi >/dev/null && gpu=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | head -n 1) && [ -n "$gpu" ]; then
    echo "== GPU found: $gpu (jobs are simulated on its lock)"
else
    export NVSHARE_GPUS=GPU-demo-0000:16384
    gpu=GPU-demo-0000
    echo "== no GPU here: the scheduler manages a simulated one ($gpu)"
fi

NVSHARE_TQ=500ms "$BIN/src/scheduler/nvshare-scheduler" >"$DEMO/scheduler.log" 2>&1 &
sched=$!
trap 'kill $sched 2>/dev/null; wait $sched 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$NVSHARE_SOCK_DIR/control.sock" ] && break; sleep 0.05; done
echo "== scheduler running (pid $sched, sockets in $NVSHARE_SOCK_DIR, TQ 500ms)"

start=$(date +%s%N)
until=$(( start + SECONDS_PER_RUN * 1000000000 ))
pids=()
for i in $(seq 1 $JOBS); do
    NVSHARE_POD_NAMESPACE=demo NVSHARE_POD_NAME=job-$i \
        "$BIN/tests/integration/sim_workload" "$gpu" "$until" >"$DEMO/job-$i.out" 2>"$DEMO/job-$i.err" &
    pids+=($!)
done

for t in 2 4; do
    sleep 2
    echo; echo "== nvsharectl status (t=${t}s)"
    "$BIN/src/ctl/nvsharectl" status || true
done
wait "${pids[@]}"

echo; echo "== result: $JOBS jobs on one GPU for ${SECONDS_PER_RUN}s"
printf "%-8s %10s %8s %8s\n" job "held ms" share grants
total=0
for i in $(seq 1 $JOBS); do
    held=$(sed -n 's/.*held_ms=\([0-9.]*\).*/\1/p' "$DEMO/job-$i.out")
    total=$(awk "BEGIN { print $total + $held }")
done
for i in $(seq 1 $JOBS); do
    held=$(sed -n 's/.*held_ms=\([0-9.]*\).*/\1/p' "$DEMO/job-$i.out")
    grants=$(sed -n 's/.*grants=\([0-9]*\).*/\1/p' "$DEMO/job-$i.out")
    awk -v j="job-$i" -v h="$held" -v t="$total" -v g="$grants" \
        'BEGIN { printf "%-8s %10.1f %7.1f%% %8d\n", j, h, 100 * h / t, g }'
done
awk -v t="$total" -v w="$SECONDS_PER_RUN" \
    'BEGIN { printf "%-8s %10.1f %7.1f%% of the GPU'"'"'s time\n", "total", t, t / (w * 10) }'
