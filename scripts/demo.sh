#!/usr/bin/env bash
# make demo: an unprivileged scheduler and three jobs sharing one GPU through
# libnvshare.so, the third limited to 20 % of the GPU's time.
#
# With an NVIDIA GPU (and nvcc) the jobs are real CUDA programs
# (bench/fixed_work.cu); without one they run on the fake GPU of the tests
# (tests/fake: a simulated libcuda.so.1), through the very same
# interposition, gating and drain. Without the CUDA headers libnvshare is not
# built and the jobs are client-runtime simulations.
set -euo pipefail

BUILD=${1:-build}
TOP=$(cd "$(dirname "$0")/.." && pwd)
BIN=$TOP/$BUILD
DEMO=$TOP/.demo
LIB=$BIN/src/hook/libnvshare.so
export NVSHARE_SOCK_DIR=$DEMO/sock
export NVSHARE_STATE_FILE=$DEMO/state.conf # what nvsharectl sets survives a restart
rm -rf "$DEMO"; mkdir -p "$DEMO"

if command -v nvidia-smi >/dev/null && command -v nvcc >/dev/null && [ -f "$LIB" ] &&
   gpu=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | head -n 1) && [ -n "$gpu" ]; then
    echo "== GPU $gpu: real CUDA jobs (bench/fixed_work.cu) under libnvshare"
    nvcc -O2 -o "$DEMO/fixed_work" "$TOP/bench/fixed_work.cu"
    job() { LD_PRELOAD=$LIB "$DEMO/fixed_work" --window "$1" "$2"; }
    unit=kernels/s work="CUDA kernels it completed per second"
elif [ -f "$LIB" ] && [ -x "$BIN/tests/fake/fake_job" ]; then
    gpu=GPU-fa4e0000-0000-0000-0000-000000000000
    export NVSHARE_GPUS=$gpu:16384
    echo "== no GPU here: jobs run on the fake GPU ($gpu) under libnvshare"
    job() { LD_LIBRARY_PATH=$BIN/tests/fake/lib LD_PRELOAD=$LIB "$BIN/tests/fake/fake_job" "$1" "$2"; }
    unit=kernels/s work="fake-GPU kernels it completed per second"
else
    gpu=GPU-sim-0000
    export NVSHARE_GPUS=$gpu:16384
    echo "== libnvshare not built (no CUDA headers): jobs are client-runtime simulations"
    # Compute-bound like the other jobs: every unit keeps the GPU busy.
    job() { SIM_BUSY_PERMILLE=1000 "$BIN/tests/integration/sim_workload" "$gpu" "$2" 1000 - "$1" |
            awk -v s=$(( ($2 - $1) / 1000000 )) '{ sub(/.*measured_ms=/, ""); printf "rate=%.2f\n", 1000 * $1 / s }'; }
    unit="GPU ms/s" work="milliseconds of simulated GPU work it did per second (1000: the whole GPU)"
fi
rate() { sed -n 's/.*rate=\([0-9.]*\).*/\1/p' "$1"; }
window() { from=$(( $(date +%s%N) + $1 * 1000000000 )); until=$(( from + $2 * 1000000000 )); }

"$BIN/src/scheduler/nvshare-scheduler" >"$DEMO/scheduler.log" 2>&1 &
sched=$!
trap 'kill $sched 2>/dev/null; wait $sched 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$NVSHARE_SOCK_DIR/control.sock" ] && break; sleep 0.05; done
"$BIN/src/ctl/nvsharectl" set tq 500ms >/dev/null
echo "== scheduler running (pid $sched, sockets in $NVSHARE_SOCK_DIR, TQ 500ms)"

echo "== solo baseline: one job alone for 3 s"
window 1 3
NVSHARE_POD_NAME=solo job "$from" "$until" >"$DEMO/solo.out" 2>"$DEMO/solo.err"
solo=$(rate "$DEMO/solo.out")

echo "== three jobs for 8 s: job-1 and job-2 unlimited, job-3 limited to 20 %"
window 2 6
pids=()
for i in 1 2 3; do
    limit=; [ $i = 3 ] && limit=20
    NVSHARE_POD_NAMESPACE=demo NVSHARE_POD_NAME=job-$i NVSHARE_GPU_CORE_LIMIT=$limit \
        job "$from" "$until" >"$DEMO/job-$i.out" 2>"$DEMO/job-$i.err" &
    pids+=($!)
done
for t in 3 6; do
    sleep 3
    echo; echo "== nvsharectl status (t=${t}s)"
    "$BIN/src/ctl/nvsharectl" status || true
    [ $t = 6 ] || cat <<'EOF'
   (GPU 0's 'running' client holds the GPU now; 'waiting' ones queue for it
   in turn (lock), and job-3 waits 'throttled' once it has used its 20 % of
   a 1 s window. Client tables: STATE, LOAD (how busy it keeps the GPU),
   HELD (time held in all), LIMIT (core limit), USED/WINDOW (its pod's time
   in the current window); docs/nvsharectl.md explains every column.)
EOF
done
wait "${pids[@]}"

echo; echo "== result (measured over the same 6 s, against the solo run)"
echo "   job: the demo job (pod demo/job-N); limit: its NVSHARE_GPU_CORE_LIMIT"
echo "   $unit: $work"
echo "   of solo: that rate against the solo run's, i.e. the job's share of the GPU"
echo "   total: the three together; near 100 % means they took turns (time"
echo "   slicing) and kept the GPU busy, with job-3 held to about 20 %"
echo
printf "%-8s %6s %14s %10s\n" job limit "$unit" "of solo"
total=0
for i in 1 2 3; do
    r=$(rate "$DEMO/job-$i.out"); limit=-; [ $i = 3 ] && limit=20%
    total=$(awk -v a="$total" -v b="$r" 'BEGIN { print a + b }')
    awk -v j="job-$i" -v l="$limit" -v r="$r" -v s="$solo" \
        'BEGIN { printf "%-8s %6s %14.1f %9.1f%%\n", j, l, r, 100 * r / s }'
done
awk -v t="$total" -v s="$solo" 'BEGIN { printf "%-8s %6s %14.1f %9.1f%%  (the GPU kept busy)\n", "total", "", t, 100 * t / s }'
