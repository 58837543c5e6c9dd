#!/usr/bin/env bash
# bench/soak.sh - a long run of mixed tenants under one scheduler: do shares
# hold, and does the scheduler stay flat (memory, fds) and alive? Not in CI.
#
#   [GPU=1] [DURATION=3600] [OUT=DIR] bash bench/soak.sh [BUILD_DIR]
#
# Without GPU: on the fake GPU (tests/fake), one device shared by every
# tenant (FAKE_CUDA_SHARED_GPU), fake_job through libnvshare; BUILD_DIR
# (default build) must hold a build with the tests (the fake driver). Use a
# build without NVSHARE_SANITIZE: AddressSanitizer's quarantine grows the
# RSS by design. With GPU=1: real CUDA jobs (bench/fixed_work.cu,
# bench/bursty.cu, bench/alloc_free.cu, built with nvcc), and the scheduler,
# libnvshare and nvsharectl built into BUILD_DIR (default build-gpu) with
# the tests off.
#
# One scheduler, serial mode, TQ 100 ms (SOAK_TQ), a fresh socket directory
# and its state file (NVSHARE_STATE_FILE) in OUT (default .bench/soak). The
# tenants, each a pod (NVSHARE_POD_NAME), restarted whenever they exit:
#   limited-20  core limit 20 % declared (NVSHARE_GPU_CORE_LIMIT)
#   limited-30  core limit 30 % set by the operator (nvsharectl), 15 % every
#               third minute (soak.py --flip)
#   free        no limit
#   mem         memory quota 1 GiB set by the operator; on the fake GPU a
#               job at 10 % that frees and allocates 256 MiB every ~0.3 s,
#               on a GPU cudaMalloc/cudaFree of 256 MiB back to back
#   churn       a job of 1 s at 10 %, a new one every 3 s (connect,
#               register, leave)
#   victim      a job at 10 %, SIGKILLed or SIGSTOPped for 3 s while it
#               holds the GPU, every 30 s in turn
# plus nvsharectl status and set calls every few seconds; bench/soak.py
# does the operator's part, samples every 10 s and judges (see there).
# Output: OUT/soak.log (the samples and the summary, also on stdout),
# OUT/sched.log, OUT/tenants.log (each tenant's exits).
#
# The shares are checked per 60 s window against their targets: a limit
# within +1/-3 points (the fake GPU loses host latency at each switch on a
# loaded machine: tests/hook/limits_fake.sh), the unlimited pod leaving the
# GPU idle at most 6 points; the RSS grows less than 10 % (or 2 MiB) after
# the first 5 minutes; the fds less the connections stay within 2 of the
# first sample.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-3600}
OUT=${OUT:-$TOP/.bench/soak}
TQ=${SOAK_TQ:-100ms}
UUID=GPU-fa4e0000-0000-0000-0000-000000000000

if [ "${GPU:-0}" = 1 ]; then
    BUILD=${1:-$TOP/build-gpu}
    source "$TOP/tests/gpu/lib.sh" # LIB, SCHED_BIN, CTL_BIN, gpu_build
    gpu_build nvshare nvshare-scheduler nvsharectl
    mkdir -p "$OUT/bin"
    for prog in fixed_work bursty alloc_free; do
        [ "$OUT/bin/$prog" -nt "$TOP/bench/$prog.cu" ] ||
            nvcc -O2 -o "$OUT/bin/$prog" "$TOP/bench/$prog.cu" || exit 1
    done
    sched_env=()
else
    BUILD=$(cd "${1:-$TOP/build}" && pwd)
    LIB=$BUILD/src/hook/libnvshare.so
    SCHED_BIN=$BUILD/src/scheduler/nvshare-scheduler
    CTL_BIN=$BUILD/src/ctl/nvsharectl
    FAKE_DIR=$BUILD/tests/fake/lib
    JOB=$BUILD/tests/fake/fake_job
    for f in "$LIB" "$SCHED_BIN" "$CTL_BIN" "$FAKE_DIR/libcuda.so.1" "$JOB"; do
        [ -e "$f" ] || { echo "soak.sh: $f missing: build $BUILD with the tests"; exit 1; }
    done
    sched_env=(NVSHARE_GPUS=$UUID:16384)
fi

rm -rf "$OUT/sock" "$OUT/trace" "$OUT"/*.log "$OUT"/state* "$OUT/device"
mkdir -p "$OUT/sock"
export NVSHARE_SOCK_DIR=$OUT/sock NVSHARE_STATE_FILE=$OUT/state
env "${sched_env[@]}" NVSHARE_SCHEDULING_MODE=serial NVSHARE_TQ="$TQ" "$SCHED_BIN" \
    >"$OUT/sched.log" 2>&1 &
SCHED_PID=$!
loops=()
trap 'kill "${loops[@]}" 2>/dev/null; kill "$SCHED_PID" 2>/dev/null' EXIT
for _ in $(seq 200); do
    [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && [ -S "$NVSHARE_SOCK_DIR/control.sock" ] && break
    sleep 0.05
done
"$CTL_BIN" set core-limit limited-30 30 >/dev/null && "$CTL_BIN" set memory-limit mem 1Gi >/dev/null ||
    { echo "soak.sh: the scheduler did not start:"; tail -n 20 "$OUT/sched.log"; exit 1; }

END_NS=$(( $(date +%s%N) + (DURATION + 2) * 1000000000 ))
now_ns() { date +%s%N; }

# job POD SECONDS|end KIND [VAR=VALUE...]: one job of the pod in the
# background, until the end of the soak or for SECONDS; its pid in $!.
job() {
    local pod=$1 span=$2 kind=$3 from until; shift 3
    from=$(now_ns)
    if [ "$span" = end ]; then until=$END_NS; else until=$((from + span * 1000000000)); fi
    if [ "${GPU:-0}" = 1 ]; then
        local cmd
        case $kind in
        compute) cmd=("$OUT/bin/fixed_work" --window "$from" "$until") ;;
        light) cmd=("$OUT/bin/bursty" --window "$from" "$until") ;;
        memory) cmd=("$OUT/bin/alloc_free" 256 $(( (until - from) / 1000000 ))) ;;
        esac
        env "$@" NVSHARE_POD_NAME="$pod" LD_PRELOAD="$LIB" "${cmd[@]}" >/dev/null 2>>"$OUT/$pod.err" &
    else
        local mem=()
        [ "$kind" = memory ] && mem=(FAKE_JOB_MEM_MB=256 FAKE_JOB_MEM_CYCLE=40)
        mkdir -p "$OUT/trace/$pod"
        env "$@" "${mem[@]}" NVSHARE_POD_NAME="$pod" FAKE_CUDA_TRACE_DIR="$OUT/trace/$pod" \
            FAKE_CUDA_SHARED_GPU="$OUT/device" LD_LIBRARY_PATH="$FAKE_DIR" LD_PRELOAD="$LIB" \
            "$JOB" "$from" "$until" 2000 >/dev/null 2>>"$OUT/$pod.err" &
    fi
}

# tenant POD SECONDS|end PAUSE KIND [VAR=VALUE...]: runs the pod's jobs one
# after the other until the end, PAUSE seconds apart; logs each exit.
tenant() {
    local pod=$1 span=$2 pause=$3 kind=$4 child= rc; shift 4
    (
        trap 'kill $child 2>/dev/null; exit 0' TERM
        while [ "$(now_ns)" -lt $((END_NS - (pause + 1) * 1000000000)) ]; do
            job "$pod" "$span" "$kind" "$@"
            child=$!
            [ "$pod" = victim ] && echo "$child" >"$OUT/victim.pid"
            wait "$child"
            rc=$?
            echo "$(date -u +%T) $pod pid $child exited with status $rc" >>"$OUT/tenants.log"
            sleep "$pause"
        done
    ) 2>>"$OUT/tenants.log" &
    loops+=($!)
}

: >"$OUT/tenants.log"
tenant limited-20 end 1 compute NVSHARE_GPU_CORE_LIMIT=20
tenant limited-30 end 1 compute
tenant free end 1 compute
if [ "${GPU:-0}" = 1 ]; then
    tenant mem end 1 memory
    tenant churn 1 2 light NVSHARE_GPU_CORE_LIMIT=10
    mem_target=-
else
    tenant mem end 1 memory NVSHARE_GPU_CORE_LIMIT=10
    tenant churn 1 2 compute NVSHARE_GPU_CORE_LIMIT=10
    mem_target=10
fi
tenant victim end 1 compute NVSHARE_GPU_CORE_LIMIT=10

trace=()
[ "${GPU:-0}" = 1 ] || trace=(--trace-root "$OUT/trace")
python3 "$TOP/bench/soak.py" --ctl "$CTL_BIN" --sched-pid "$SCHED_PID" \
    --sched-log "$OUT/sched.log" --duration "$DURATION" --tq "$TQ" \
    --victim-pidfile "$OUT/victim.pid" "${trace[@]}" \
    --pod limited-20=20 --pod limited-30=30 --flip limited-30=15/30 \
    --pod mem=$mem_target --pod free=rest --pod churn=- --pod victim=- |
    tee "$OUT/soak.log"
status=${PIPESTATUS[0]}
echo "tenants: $(grep -c ' exited ' "$OUT/tenants.log") exits, $(grep -c ' exited with status [1-9]' "$OUT/tenants.log") of them not 0 (SIGKILLed victims: 137): $OUT/tenants.log" |
    tee -a "$OUT/soak.log"
exit "$status"
