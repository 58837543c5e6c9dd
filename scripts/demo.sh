#!/usr/bin/env bash
# make demo: an unprivileged scheduler and three jobs sharing one GPU through
# libnvshare.so, the third limited to 20 % of the GPU's time; then a pod's
# memory quota refusing an allocation over it, and a high-priority job
# arriving while a low-priority one holds the GPU with a 30 s quantum.
#
# With an NVIDIA GPU (and nvcc) the jobs are real CUDA programs
# (bench/fixed_work.cu); without one they run on the fake GPU of the tests
# (tests/fake: a simulated libcuda.so.1), through the very same
# interposition, gating and drain. Without the CUDA headers libnvshare is not
# built and the jobs are client-runtime simulations.
set -euo pipefail

BUILD=${1:-build}
TOP=$(cd "$(dirname "$0")/.." && pwd)
case $BUILD in /*) BIN=$BUILD ;; *) BIN=$TOP/$BUILD ;; esac
DEMO=${NVSHARE_DEMO_DIR:-$TOP/.demo} # the tests run it elsewhere
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
    allocates= # the quota part needs a job that allocates: the fake GPU's
elif [ -f "$LIB" ] && [ -x "$BIN/tests/fake/fake_job" ]; then
    gpu=GPU-fa4e0000-0000-0000-0000-000000000000
    export NVSHARE_GPUS=$gpu:16384
    echo "== no GPU here: jobs run on the fake GPU ($gpu) under libnvshare"
    job() { LD_LIBRARY_PATH=$BIN/tests/fake/lib LD_PRELOAD=$LIB "$BIN/tests/fake/fake_job" "$1" "$2"; }
    unit=kernels/s work="fake-GPU kernels it completed per second"
    allocates=1 # FAKE_JOB_MEM_MB
else
    gpu=GPU-sim-0000
    export NVSHARE_GPUS=$gpu:16384
    echo "== libnvshare not built (no CUDA headers): jobs are client-runtime simulations"
    # Compute-bound like the other jobs: every unit keeps the GPU busy.
    job() { SIM_BUSY_PERMILLE=1000 "$BIN/tests/integration/sim_workload" "$gpu" "$2" 1000 - "$1" |
            awk -v s=$(( ($2 - $1) / 1000000 )) '{ sub(/.*measured_ms=/, ""); printf "rate=%.2f\n", 1000 * $1 / s }'; }
    unit="GPU ms/s" work="milliseconds of simulated GPU work it did per second (1000: the whole GPU)"
    allocates=
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
   in turn (lock), or, once their pod has used its core limit in the current
   1 s window, wait 'throttled': job-3, at 20 %, is held back most of each
   window, so a snapshot may catch it either way. Client tables: STATE,
   LOAD (how busy it keeps the GPU), HELD (time held in all), LIMIT (core
   limit), USED/WINDOW (its pod's time in the current window); the POD
   table: each pod's owner, limits, priority and floor. docs/nvsharectl.md
   explains every column of both.)
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

echo
echo "== memory quota: pod demo/small may hold 1Gi of GPU memory"
"$BIN/src/ctl/nvsharectl" set memory-limit demo/small 1Gi
if [ -n "$allocates" ]; then
    alloc() { # MiB
        window 0 0
        FAKE_JOB_MEM_MB=$1 NVSHARE_POD_NAMESPACE=demo NVSHARE_POD_NAME=small \
            job "$from" "$((until + 200000000))" >/dev/null 2>"$DEMO/small-$1.err"
    }
    alloc 512 && echo "   a 512 MiB allocation of demo/small: granted"
    if alloc 2048; then
        echo "   a 2048 MiB allocation of demo/small: granted (it should have been refused)"
    else
        echo "   a 2048 MiB allocation of demo/small: refused (CUDA_ERROR_OUT_OF_MEMORY); libnvshare said:"
        grep "quota exceeded" "$DEMO/small-2048.err" | sed 's/^[^]]*] /     /' || true
    fi
else
    echo "   (the allocating job runs on the fake GPU only; here the quota is set,"
    echo "   and an allocation of demo/small over it would be refused)"
fi

echo
echo "== priority: demo/batch (low) holds the GPU with a 30 s quantum; demo/service (high) arrives"
"$BIN/src/ctl/nvsharectl" set tq 30s >/dev/null
"$BIN/src/ctl/nvsharectl" set priority demo/batch low >/dev/null
# On a plain host a pod's privileges go to the user named its owner.
"$BIN/src/ctl/nvsharectl" set owner demo/service "$(id -u)" >/dev/null 2>&1 || true
"$BIN/src/ctl/nvsharectl" set priority demo/service high >/dev/null
window 0 5
NVSHARE_POD_NAMESPACE=demo NVSHARE_POD_NAME=batch job "$from" "$until" \
    >"$DEMO/batch.out" 2>"$DEMO/batch.err" &
batch=$!
sleep 1.5 # batch is well into its 30 s quantum
window 0 1
NVSHARE_POD_NAMESPACE=demo NVSHARE_POD_NAME=service job "$from" "$until" \
    >"$DEMO/service.out" 2>"$DEMO/service.err"
first=$(sed -n 's/.*first_kernel_ms=\([0-9.]*\).*/\1/p' "$DEMO/service.out")
if [ -n "$first" ]; then
    echo "   demo/service's first kernel completed $first ms after it started, while"
    echo "   demo/batch held the GPU with 28 s of its quantum left: a higher class"
    echo "   takes the GPU at once"
else
    echo "   demo/service ran at once beside demo/batch's 30 s quantum (the simulated"
    echo "   jobs do not time their first kernel)"
fi
wait $batch
