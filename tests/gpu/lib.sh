# shellcheck shell=bash disable=SC2034 # variables for the tests that source it
# tests/gpu/lib.sh - shared preamble of the GPU tests; sourced, not run.
#
#   source "$(dirname "$0")/lib.sh"
#   gpu_work_dir                  # WORK: a temporary directory, removed at exit
#   gpu_build TARGET...           # configure $BUILD (tests off) and build TARGETs
#   sched_start LOG [VAR=VALUE...]  # a scheduler in $NVSHARE_SOCK_DIR, both
#                                 # sockets up (exits with its log if not)
#   sched_stop
#   gpu_target                    # the GPU under test (below); exits 2 if none
#   gpu_mem FIELD...              # its memory.FIELD (total, used, free), MiB
#   gpu_apps                      # "pid used_MiB" of each process on it
#   gpu_app_mib PID               # PID's used MiB on it (0 if not listed)
#   poll_until SECONDS CMD...     # CMD every 0.2 s until it holds; 1 if never
#   verdict NAME OK DETAIL        # a PASS/FAIL row; OK=0 sets FAILED=1
#   idle_holder NS GIB            # idle_jobs.py holder as pod NS/a (A_PID),
#                                 # its state in $RES/a; returns once idle
#   idle_worker NS GIB STEPS      # its worker as pod NS/b (B_PID), the
#                                 # first step noted in $RES/b.first
#
# gpu_target picks the GPU: $GPU (an nvidia-smi index or UUID) if set, else
# the first entry of CUDA_VISIBLE_DEVICES (an index or a UUID, or a UUID's
# prefix, as CUDA reads it), else index 0. An index is nvidia-smi's (PCI
# order), which is CUDA's on a host of identical GPUs. It sets GPU_INDEX
# (NVML's index), GPU_UUID and GPU_NAME and exports
# CUDA_VISIBLE_DEVICES=$GPU_UUID, so that CUDA's device 0 is that GPU and
# the other GPUs of the host, busy or not, are none of the test's business:
# per-GPU queries go through nvidia-smi -i $GPU_UUID and per-process ones
# are filtered by its UUID.
#
# Sets ROOT (the repository), BUILD (${BUILD:-$ROOT/build-gpu}), LIB
# (libnvshare.so), SCHED_BIN and CTL_BIN. Sourcing sets no shell options:
# each test keeps its own (set -uo pipefail, or -euo).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
LIB=$BUILD/src/hook/libnvshare.so
SCHED_BIN=$BUILD/src/scheduler/nvshare-scheduler
CTL_BIN=$BUILD/src/ctl/nvsharectl
# A test's settings must not outlive it in /var/lib/nvshare (the machine is
# shared by the next run): schedulers started here keep no state file.
export NVSHARE_STATE_FILE=

gpu_work_dir() {
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
}

gpu_build() {
    cmake -S "$ROOT" -B "$BUILD" -DNVSHARE_BUILD_TESTS=OFF >/dev/null || exit 1
    cmake --build "$BUILD" -j --target "$@" >/dev/null || exit 1
}

SCHED=
sched_start() {
    local log=$1; shift
    rm -rf "$NVSHARE_SOCK_DIR"
    env NVSHARE_DEBUG=1 "$@" "$SCHED_BIN" >"$log" 2>&1 &
    SCHED=$!
    for _ in $(seq 200); do
        [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && [ -S "$NVSHARE_SOCK_DIR/control.sock" ] && return 0
        kill -0 "$SCHED" 2>/dev/null || break
        sleep 0.05
    done
    echo "the scheduler did not start:"; tail -n 20 "$log"; exit 1
}

sched_stop() {
    [ -n "$SCHED" ] || return 0
    kill "$SCHED" 2>/dev/null || true
    wait "$SCHED" 2>/dev/null || true
    SCHED=
}

# gpu_results_dir NAME: RES, where a script keeps its results and logs:
# $OUT/NAME (emptied first), else a new directory under /tmp; kept.
gpu_results_dir() {
    if [ -n "${OUT:-}" ]; then
        RES=$OUT/$1
        rm -rf "$RES"
        mkdir -p "$RES"
    else
        RES=$(mktemp -d "/tmp/nvshare-$1.XXXXXX")
    fi
    RES=$(cd "$RES" && pwd)
}

# Jobs a script starts in the background (PIDS+=($!)): kill_jobs stops
# them (TERM, KILL after 5 s) and forgets them; gpu_cleanup_at_exit stops
# them and the scheduler when the script ends, however it ends.
PIDS=()
kill_jobs() {
    local p alive
    [ "${#PIDS[@]}" -gt 0 ] || return 0
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for _ in $(seq 50); do
        alive=0
        for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null; done
    PIDS=()
}
gpu_cleanup_at_exit() {
    trap 'kill_jobs; sched_stop' EXIT
    trap 'exit 130' INT TERM
}

GPU_INDEX='' GPU_UUID='' GPU_NAME=''
gpu_target() {
    local want=${GPU:-${CUDA_VISIBLE_DEVICES:-0}} table idx uuid name
    want=${want%%,*}
    want=${want// /}
    if [[ $want == MIG-* ]]; then
        echo "gpu_target: $want is a MIG instance; give a whole GPU" >&2
        exit 2
    fi
    table=$(nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader) || {
        echo "gpu_target: nvidia-smi --query-gpu failed" >&2
        exit 2
    }
    while IFS=, read -r idx uuid name; do
        idx=${idx// /} uuid=${uuid// /} name=${name# }
        if [ "$want" = "$idx" ] || { [[ $want == GPU-* ]] && [[ $uuid == "$want"* ]]; }; then
            GPU_INDEX=$idx GPU_UUID=$uuid GPU_NAME=$name
            export CUDA_VISIBLE_DEVICES=$GPU_UUID
            echo "== GPU under test: index $GPU_INDEX, $GPU_UUID ($GPU_NAME)"
            return 0
        fi
    done <<<"$table"
    echo "gpu_target: no GPU '$want' (GPU=${GPU:-}, CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}); nvidia-smi lists:" >&2
    echo "$table" >&2
    exit 2
}

gpu_mem() { # FIELD... -> the values, MiB, one line, space-separated
    local q=() f
    for f in "$@"; do q+=("memory.$f"); done
    nvidia-smi -i "$GPU_UUID" --query-gpu="$(IFS=,; echo "${q[*]}")" --format=csv,noheader,nounits |
        tr -d ' ' | tr ',' ' '
}

gpu_apps() {
    nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits 2>/dev/null |
        tr -d ' ' | awk -F, -v u="$GPU_UUID" '$2 == u { print $1, $3 }'
}

gpu_app_mib() { # PID
    gpu_apps | awk -v p="$1" '$1 == p { m += $2 } END { print m + 0 }'
}

poll_until() {
    local end=$(($(date +%s) + $1)); shift
    until "$@"; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.2
    done
}

FAILED=0
verdict() {
    printf '%-58s %s  %s\n' "$1" "$([ "$2" = 1 ] && echo PASS || echo FAIL)" "$3"
    [ "$2" = 1 ] || FAILED=1
}

# The processes of tests/gpu/idle_jobs.py, preloaded, logging at info to
# $RES/{a,b}.{out,err}; both in PIDS.
idle_holder() {
    mkdir -p "$RES/a"
    NVSHARE_POD_NAMESPACE=$1 NVSHARE_POD_NAME=a LD_PRELOAD=$LIB NVSHARE_LOG_LEVEL=info \
        python3 "$ROOT/tests/gpu/idle_jobs.py" holder --gib "$2" --steps 20 \
        --state-dir "$RES/a" --timeout 300 >"$RES/a.out" 2>"$RES/a.err" &
    A_PID=$!
    PIDS+=("$A_PID")
    poll_until 120 test -f "$RES/a/idle" || { tail -n 5 "$RES/a.err"; return 1; }
}
idle_worker() {
    NVSHARE_POD_NAMESPACE=$1 NVSHARE_POD_NAME=b LD_PRELOAD=$LIB NVSHARE_LOG_LEVEL=info \
        python3 "$ROOT/tests/gpu/idle_jobs.py" worker --gib "$2" --steps "$3" \
        --first-step-file "$RES/b.first" >"$RES/b.out" 2>"$RES/b.err" &
    B_PID=$!
    PIDS+=("$B_PID")
}
