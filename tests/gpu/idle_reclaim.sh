#!/usr/bin/env bash
# idle_reclaim.sh - the "notebook" case on a real GPU: an idle process's
# device memory goes to the host when another process needs it, and comes
# back intact, at the scheduler's default settings (no NVSHARE_* setting
# but the socket directory; clients log at info level for the swap lines).
#
# Process A (tests/gpu/idle_jobs.py holder) allocates X GiB of tensors
# filled from a seed, keeps their checksum and addresses, runs a few steps
# and goes idle; job B (idle_jobs.py worker, PyTorch) then starts and needs
# Y GiB, X + Y beyond the GPU's free memory. Per allocator:
#   native   no scheduler, no LD_PRELOAD: B must run out of memory (INFO,
#            not FAIL, if it fits); A's wake-up check runs here too;
#   solo     B alone under nvshare: its reference step time;
#   shared   A then B under nvshare (one scheduler at its defaults): B's
#            first step within idle-swap-after + A's swap-out + 1 s of its
#            launch; nvidia-smi shows A's memory gone while B runs (< 2 GiB,
#            >= 95 % of what it used idle); B's steps >= 99 % of solo; once
#            B ends A is woken: its next step waits at most its swap-in
#            + 100 ms, its tensors are bit-identical (checksum, and every
#            chunk equal to its pattern regenerated) at the same addresses.
# MODE=reclaim runs only "shared" with a short B, for the reclaim rows and
# A's data check, for every allocator in ALLOCATOR (default: all five).
#
# Settings (environment):
#   ALLOCATOR=default   A's allocator, or a list: default (PyTorch caching
#                       allocator), expandable (PYTORCH_CUDA_ALLOC_CONF=
#                       expandable_segments:True), async (backend:
#                       cudaMallocAsync), jax (XLA's pool, preallocated),
#                       cupy (CuPy's pool); B is PyTorch with the same
#                       PYTORCH_CUDA_ALLOC_CONF (default for jax and cupy)
#   MODE=full           full | reclaim
#   X_GIB, Y_GIB        A's and B's sizes; default from the GPU's free
#                       memory F (memory.total - memory.used):
#                       X = 0.57 F x SIZE_SCALE, Y = 0.71 F x SIZE_SCALE
#                       (80 and 100 GiB on an idle H200)
#   SIZE_SCALE=1        below 1, X + Y fit on the card: the scheduler is then
#                       given a virtual capacity (NVSHARE_GPUS=UUID:MiB,
#                       CAPACITY_MIB or computed) that B fits in only once
#                       A is out, native B cannot run out of memory (INFO),
#                       and jax runs with XLA_PYTHON_CLIENT_PREALLOCATE=false
#   CAPACITY_MIB        force a virtual capacity
#   STEPS_A=5 STEPS_B=40 (reclaim: 10) MATMULS_B=8 MATMUL_N_B=8192
#   IDLE_AFTER_S=10     idle-swap-after, when the scheduler does not report it
#   GPU                 nvidia-smi index or UUID (else CUDA_VISIBLE_DEVICES,
#                       else 0: lib.sh's gpu_target)
#   PYTHON=python3 BUILD=build-gpu OUT=results directory
# Runtime: about 1.5 min per allocator in full mode at the H200 defaults
# (SIZE_SCALE=0.25: ~1 min), ~40 s per allocator in reclaim mode.
# Results in $OUT/idle_reclaim (else a new directory under /tmp), kept.
# Exit status: 0 every row PASS or INFO, 1 a FAIL, 2 refused to run.
# usage: tests/gpu/idle_reclaim.sh   (from the repository root)
set -uo pipefail
source "$(dirname "$0")/lib.sh"

PYTHON=${PYTHON:-python3}
MODE=${MODE:-full}
SIZE_SCALE=${SIZE_SCALE:-1}
STEPS_A=${STEPS_A:-5}
MATMULS_B=${MATMULS_B:-8} MATMUL_N_B=${MATMUL_N_B:-8192}
IDLE_AFTER_S=${IDLE_AFTER_S:-10}
JOBS=$ROOT/tests/gpu/idle_jobs.py
case $MODE in
full) ALLOCATOR=${ALLOCATOR:-default} STEPS_B=${STEPS_B:-40} ;;
reclaim) ALLOCATOR=${ALLOCATOR:-default expandable async jax cupy} STEPS_B=${STEPS_B:-10} ;;
*) echo "idle_reclaim: MODE is full or reclaim" >&2; exit 2 ;;
esac
refuse() { echo "idle_reclaim: REFUSED: $*"; exit 2; }
for al in $ALLOCATOR; do
    [[ $al =~ ^(default|expandable|async|jax|cupy)$ ]] || refuse "unknown allocator '$al'"
done

gpu_results_dir idle_reclaim

gpu_target
read -r TOTAL_MIB USED_MIB <<<"$(gpu_mem total used)"
[[ ${TOTAL_MIB:-} =~ ^[0-9]+$ && ${USED_MIB:-} =~ ^[0-9]+$ ]] || refuse "cannot read the GPU's memory from nvidia-smi"
FREE_MIB=$((TOTAL_MIB - USED_MIB))
calc() { awk "BEGIN { $1 }"; }
X_GIB=${X_GIB:-$(calc "printf \"%.1f\", $FREE_MIB / 1024 * 0.57 * $SIZE_SCALE")}
Y_GIB=${Y_GIB:-$(calc "printf \"%.1f\", $FREE_MIB / 1024 * 0.71 * $SIZE_SCALE")}
X_MIB=$(calc "printf \"%d\", $X_GIB * 1024") Y_MIB=$(calc "printf \"%d\", $Y_GIB * 1024")
echo "== idle_reclaim: mode $MODE, allocators: $ALLOCATOR; A $X_GIB GiB, B $Y_GIB GiB; GPU $TOTAL_MIB MiB, $USED_MIB used, $FREE_MIB free"
echo "== results and logs: $RES"

# --- preconditions ------------------------------------------------------------
"$PYTHON" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
    refuse "needs PyTorch with CUDA ($PYTHON -c 'import torch')"
{ [ "$X_MIB" -ge 1024 ] && [ "$Y_MIB" -ge 1024 ]; } || refuse "A and B need at least 1 GiB each (X_GIB=$X_GIB, Y_GIB=$Y_GIB)"
# Per process beyond its tensors: context, cuBLAS, allocator slack.
CTX_MIB=2048
[ $((X_MIB + CTX_MIB)) -lt "$FREE_MIB" ] || refuse "A alone ($X_MIB MiB + $CTX_MIB) does not fit in $FREE_MIB MiB free"
[ $((Y_MIB + 2 * CTX_MIB)) -lt "$FREE_MIB" ] ||
    refuse "B ($Y_MIB MiB) and two contexts do not fit in $FREE_MIB MiB free, even with A swapped out"
host_mib=$(awk '/^MemAvailable:/ { printf "%d", $2 / 1024 }' /proc/meminfo)
[ "$host_mib" -ge $((X_MIB + 16384)) ] ||
    refuse "A swapped out needs $X_MIB MiB of host memory + 16 GiB margin; $host_mib MiB available (lower SIZE_SCALE or X_GIB)"
if [ -n "$(gpu_apps)" ]; then
    echo "== warning: other processes use the GPU:"; gpu_apps | sed 's/^/     pid, MiB: /'
fi
CAP_ENV=()
if [ -n "${CAPACITY_MIB:-}" ] || [ $((X_MIB + Y_MIB + 2 * CTX_MIB)) -le "$FREE_MIB" ]; then
    # Admitted = 90 % of the capacity (default reserve): B and both
    # contexts' overhead fit in it, A and B together do not.
    CAPACITY_MIB=${CAPACITY_MIB:-$(calc "printf \"%d\", ($Y_MIB + 2 * $CTX_MIB) / 0.9 + 1")}
    [ "$CAPACITY_MIB" -lt "$FREE_MIB" ] || refuse "the virtual capacity ($CAPACITY_MIB MiB) is not below the free memory"
    CAP_ENV=(NVSHARE_GPUS="$GPU_UUID:$CAPACITY_MIB")
    echo "== X + Y fit on the card: under nvshare the scheduler gets a virtual capacity of $CAPACITY_MIB MiB (${CAP_ENV[*]})"
else
    admitted=$((TOTAL_MIB * 90 / 100))
    [ $((Y_MIB + 2 * 512)) -le "$admitted" ] ||
        refuse "B ($Y_MIB MiB + contexts) exceeds what the scheduler admits ($admitted MiB, 90 % of $TOTAL_MIB)"
    echo "== X + Y exceed the free memory: the scheduler admits against the card (NVML), at its defaults"
fi

gpu_build nvshare nvshare-scheduler nvsharectl

# --- process control ------------------------------------------------------------
gpu_cleanup_at_exit

# wait_file PATH SECONDS PID: until PATH exists; 1 if PID died or time ran out.
wait_file() {
    local deadline=$(($(date +%s) + $2))
    while [ ! -f "$1" ]; do
        kill -0 "$3" 2>/dev/null || { [ -f "$1" ] && return 0; echo "   pid $3 exited before $1 appeared"; return 1; }
        [ "$(date +%s)" -lt "$deadline" ] || { echo "   no $1 after $2 s"; return 1; }
        sleep 0.05
    done
}
# wait_pid PID SECONDS RCFILE [SAMPLES]: waits for PID (a child), writes its
# exit status; kills it after SECONDS. With SAMPLES, appends "ns status-json"
# every 0.25 s meanwhile.
wait_pid() {
    local pid=$1 deadline=$(($(date +%s) + $2)) rcfile=$3 samples=${4:-} last=0 now
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "   pid $pid still running after $2 s: killed"
            kill "$pid" 2>/dev/null; sleep 1; kill -9 "$pid" 2>/dev/null
            break
        fi
        now=$(date +%s%N)
        if [ -n "$samples" ] && [ $((now - last)) -ge 250000000 ]; then
            sample "$samples"; last=$now
        fi
        sleep 0.05
    done
    wait "$pid"; echo $? >"$rcfile"
}
sample() { # FILE: one "ns json" line of nvsharectl status --json
    local doc
    doc=$("$CTL_BIN" status --json 2>/dev/null | tr -d '\n') && echo "$(date +%s%N) $doc" >>"$1"
}

# allocator_env NAME -> FW (A's framework), ENV (A's environment) and
# B_CONF (B's PYTORCH_CUDA_ALLOC_CONF: A's when A is PyTorch, else none)
allocator_env() {
    local conf=
    FW=torch ENV=()
    case $1 in
    expandable) conf=expandable_segments:True ;;
    async) conf=backend:cudaMallocAsync ;;
    jax)
        FW=jax
        [ "${#CAP_ENV[@]}" -eq 0 ] || ENV=(XLA_PYTHON_CLIENT_PREALLOCATE=false) ;;
    cupy) FW=cupy ;;
    esac
    [ -z "$conf" ] || ENV=(PYTORCH_CUDA_ALLOC_CONF="$conf")
    B_CONF=$conf
}

# start_a DIR PRELOAD(0/1): A in the background, its pid in A_PID; waits
# until it is idle. 1 if it is not.
start_a() {
    local dir=$1 pre=()
    [ "$2" = 1 ] && pre=(LD_PRELOAD="$LIB" NVSHARE_LOG_LEVEL=info)
    env -u PYTORCH_CUDA_ALLOC_CONF "${ENV[@]}" "${pre[@]}" NVSHARE_POD_NAMESPACE=idle-reclaim NVSHARE_POD_NAME=a \
        "$PYTHON" "$JOBS" holder --framework "$FW" --gib "$X_GIB" --steps "$STEPS_A" \
        --state-dir "$dir" --timeout 900 >"$dir/a.out" 2>"$dir/a.err" &
    A_PID=$!
    PIDS+=("$A_PID")
    wait_file "$dir/idle" 300 "$A_PID" || { tail -n 5 "$dir/a.err" | sed 's/^/      /'; return 1; }
    echo "   A (pid $A_PID, $FW) idle: $(cut -c1-200 "$dir/idle")"
}
# run_b DIR PRELOAD SECONDS [SAMPLES]: B in the foreground (bounded).
run_b() {
    local dir=$1 pre=()
    [ "$2" = 1 ] && pre=(LD_PRELOAD="$LIB" NVSHARE_LOG_LEVEL=info)
    date +%s%N >"$dir/b.launch_ns"
    env -u PYTORCH_CUDA_ALLOC_CONF ${B_CONF:+PYTORCH_CUDA_ALLOC_CONF="$B_CONF"} "${pre[@]}" \
        NVSHARE_POD_NAMESPACE=idle-reclaim NVSHARE_POD_NAME=b \
        "$PYTHON" "$JOBS" worker --gib "$Y_GIB" --steps "$STEPS_B" --matmuls "$MATMULS_B" \
        --matmul-n "$MATMUL_N_B" --first-step-file "$dir/b.first" >"$dir/b.out" 2>"$dir/b.err" &
    B_PID=$!
    PIDS+=("$B_PID")
    # While B runs: once its first step is done, A's memory per nvidia-smi.
    if [ -n "${A_PID:-}" ]; then
        local deadline=$(($(date +%s) + $3))
        while kill -0 "$B_PID" 2>/dev/null && [ ! -f "$dir/b.first" ] && [ "$(date +%s)" -lt "$deadline" ]; do
            [ -z "${4:-}" ] || sample "$4"
            sleep 0.2
        done
        if [ -f "$dir/b.first" ]; then
            for _ in 1 2 3; do gpu_app_mib "$A_PID" >>"$dir/smi_during"; done
            [ -z "${4:-}" ] || sample "$4"
        fi
    fi
    wait_pid "$B_PID" "$3" "$dir/b.rc" "${4:-}"
    echo "   B: $(grep -h '^idle_jobs worker' "$dir/b.out" | cut -c1-240) (rc $(cat "$dir/b.rc"))"
}
# wake_a DIR: tells A, waits for its check (bounded).
wake_a() {
    touch "$1/wake"
    wait_pid "$A_PID" 300 "$1/a.rc"
    echo "   A: $(grep -h '^idle_jobs holder' "$1/a.out" || echo "no result (rc $(cat "$1/a.rc"))")"
}

# --- one allocator --------------------------------------------------------------
FAILED=0
ALL_ROWS=()
run_allocator() {
    local al=$1 dir=$RES/$1
    allocator_env "$al"
    mkdir -p "$dir/native" "$dir/solo" "$dir/shared"
    echo
    echo "== allocator $al: A is $FW (${ENV[*]:-defaults}), B is PyTorch (PYTORCH_CUDA_ALLOC_CONF=${B_CONF:-unset})"
    if [ "$MODE" = full ]; then
        echo "-- native: A idle, then B"
        A_PID=
        if start_a "$dir/native" 0; then
            gpu_app_mib "$A_PID" >"$dir/native/smi_before"
            run_b "$dir/native" 0 300
            wake_a "$dir/native"
        fi
        kill_jobs

        echo "-- nvshare: B alone"
        export NVSHARE_SOCK_DIR=$dir/solo/sock
        sched_start "$dir/solo/sched.log" "${CAP_ENV[@]}"
        A_PID=
        run_b "$dir/solo" 1 300
        "$CTL_BIN" status --json >"$dir/solo/final.json" 2>/dev/null
        kill_jobs; sched_stop
    fi

    echo "-- nvshare: A idle, then B"
    export NVSHARE_SOCK_DIR=$dir/shared/sock
    sched_start "$dir/shared/sched.log" "${CAP_ENV[@]}"
    A_PID=
    if start_a "$dir/shared" 1; then
        for _ in 1 2 3; do gpu_app_mib "$A_PID" >>"$dir/shared/smi_before"; done
        sample "$dir/shared/samples"
        echo "   A uses $(sort -n "$dir/shared/smi_before" | tail -n 1) MiB per nvidia-smi; B starts"
        run_b "$dir/shared" 1 $((IDLE_AFTER_S + 180)) "$dir/shared/samples"
        echo "   A once B's first step was done: $(tr '\n' ' ' <"$dir/shared/smi_during" 2>/dev/null) MiB"
        wake_a "$dir/shared"
        "$CTL_BIN" status --json >"$dir/shared/final.json" 2>/dev/null
    fi
    kill_jobs; sched_stop

    local line k r detail
    while IFS= read -r line; do
        if [[ $line == ROW$'\t'* ]]; then
            IFS=$'\t' read -r _ k r detail <<<"$line"
            [ "$r" = FAIL ] && FAILED=1
            ALL_ROWS+=("$(printf '%-62s %-5s %s' "$k" "$r" "$detail")")
        else
            echo "$line"
        fi
    done < <("$PYTHON" "$JOBS" analyze --dir "$dir" --mode "$MODE" --label "$al" \
        --uuid "$GPU_UUID" --idle-after "$IDLE_AFTER_S")
}

for al in $ALLOCATOR; do
    run_allocator "$al"
done

echo
echo "== summary ($GPU_NAME, A $X_GIB GiB, B $Y_GIB GiB${CAP_ENV[*]:+, ${CAP_ENV[*]}}, mode $MODE)"
printf '%-62s %-5s %s\n' check result detail
printf '%s\n' "${ALL_ROWS[@]}"
echo "logs: $RES"
exit "$FAILED"
