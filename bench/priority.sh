#!/usr/bin/env bash
# bench/priority.sh - priorities on a real GPU: an inference service beside
# training, side by side with native co-running and nvshare without
# priorities, every ratio against solo runs of the same invocation.
#
#   OUT=/tmp/b bash bench/priority.sh [BUILD_DIR]    (default: build)
#
# Jobs (bench/priority_jobs.py, PyTorch, bf16): "light" inference, batch-64
# requests of a 12-layer 4096-wide MLP (~0.8 ms each) arriving at
# exponential 20 ms gaps; "heavy" inference, the same model at batch 16384
# (10-20 ms of GPU work each); "train", an 8-layer 4096-wide MLP training
# loop at batch 16384. Pairs: light + train, heavy + train, train + train.
# Each pair runs
#  - native: both processes on the GPU at once, without nvshare;
#  - serial, auto: nvshare without priorities;
#  - prio: nvshare in auto mode, the inference (or the first train) pod set
#    high and the other low with nvsharectl before they connect.
# Every nvshare run is at the scheduler's and the client's default
# settings. Every run starts its processes together, warms them up, and
# measures a 10 s window from 12 s after the start; a job that warmed up
# late says late=1. Printed per pair and mode: inference p50/p99 against
# its solo p99 + 2 ms (issue 32); training's steps/s against solo and
# against what the inference leaves idle (solo train rate x (1 - the
# inference's solo busy fraction)), at least 90 % of it with prio; for
# train + train each job's share of solo and the aggregate.
# PAIRS (default "light+train heavy+train train+train") and MODES (default
# "native serial auto prio") choose the runs: 15 runs of ~23 s, about 6
# minutes, at the defaults. Everything lands in $OUT/priority.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build}
OUT=${OUT:-$TOP/.bench}/priority
# LIB, SCHED_BIN, CTL_BIN for this BUILD; sched_start / sched_stop.
source "$TOP/tests/gpu/lib.sh"
JOBS=$TOP/bench/priority_jobs.py
WARM_S=12 SPAN_S=10
mkdir -p "$OUT"
export NVSHARE_SOCK_DIR=$OUT/sock
trap 'sched_stop' EXIT

# run TAG MODE NAME... : the jobs together, job i as pod NAME-i; the first
# job is the high-priority one in mode prio.
run() {
    local tag=$1 mode=$2 pids=() i=0 from until; shift 2
    from=$(( $(date +%s%N) + WARM_S * 1000000000 )); until=$((from + SPAN_S * 1000000000))
    local env=()
    if [ "$mode" != native ]; then
        local sched_env=()
        [ "$mode" = serial ] && sched_env+=(NVSHARE_SCHEDULING_MODE=serial)
        sched_start "$OUT/$tag.sched.log" "${sched_env[@]}"
        if [ "$mode" = prio ]; then
            "$CTL_BIN" set priority "$1-1" high >/dev/null || exit 1
            "$CTL_BIN" set priority "$2-2" low >/dev/null || exit 1
        fi
        env=("LD_PRELOAD=$LIB")
    fi
    for name in "$@"; do
        i=$((i + 1))
        env "${env[@]}" NVSHARE_POD_NAME="$name-$i" \
            python3 "$JOBS" "$name" "$from" "$until" >"$OUT/$tag.$i.out" 2>"$OUT/$tag.$i.err" &
        pids+=($!)
    done
    wait "${pids[@]}"
    [ "$mode" != native ] && sched_stop
    grep -h 'late=1' "$OUT/$tag".*.out >/dev/null && echo "warning: $tag: a job warmed up after the window began"
    return 0
}
val() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$2"; }

device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
for name in light heavy train; do run "solo.$name" native "$name"; done
PAIRS=${PAIRS:-light+train heavy+train train+train}
MODES=${MODES:-native serial auto prio}
for pair in $PAIRS; do
    for mode in $MODES; do
        # shellcheck disable=SC2086 # a pair is two names
        run "$pair.$mode" "$mode" ${pair//+/ }
    done
done

# ---- the table ------------------------------------------------------------
echo "== priorities, $device, $(date -u +%Y-%m-%dT%H:%MZ), ${SPAN_S} s windows, default settings"
train_solo=$(val steps_per_s "$OUT/solo.train.1.out")
failed=0
for infer in light heavy; do
    case " $PAIRS " in *" $infer+train "*) ;; *) continue ;; esac
    solo=$OUT/solo.$infer.1.out
    bound=$(awk -v p="$(val p99_ms "$solo")" 'BEGIN { printf "%.2f", p + 2 }')
    printf '%s inference + train: solo p50 %s ms, p99 %s ms, busy %s; bound %s ms\n' \
        "$infer" "$(val p50_ms "$solo")" "$(val p99_ms "$solo")" "$(val busy "$solo")" "$bound"
    for mode in $MODES; do
        f=$OUT/$infer+train.$mode
        awk -v m="$mode" -v p50="$(val p50_ms "$f.1.out")" -v p99="$(val p99_ms "$f.1.out")" \
            -v b="$bound" -v t="$(val steps_per_s "$f.2.out")" -v ts="$train_solo" \
            -v busy="$(val busy "$solo")" -v infer="$infer" '
            BEGIN {
                if (p99 == "" || t == "" || ts <= 0) { printf "  %-7s no result\n", m; exit 1 }
                left = 100 * t / (ts * (1 - busy))
                verdict = ""
                if (m == "prio" && p99 > b) verdict = verdict " FAIL(p99 over solo + 2 ms)"
                if (m == "prio" && left < 90) verdict = verdict " FAIL(training under 90% of idle)"
                printf "  %-7s inference p50 %7.2f ms  p99 %7.2f ms | training %6.2f steps/s = %5.1f%% of solo, %5.1f%% of what inference leaves%s\n",
                    m, p50, p99, t, 100 * t / ts, left, verdict
                exit verdict != ""
            }' || failed=1
    done
done
case " $PAIRS " in *" train+train "*) ;; *) exit $failed ;; esac
echo "train (high) + train (low): solo $train_solo steps/s"
for mode in $MODES; do
    f=$OUT/train+train.$mode
    awk -v m="$mode" -v a="$(val steps_per_s "$f.1.out")" -v b="$(val steps_per_s "$f.2.out")" -v s="$train_solo" '
        BEGIN {
            if (a == "" || b == "" || s <= 0) { printf "  %-7s no result\n", m; exit 1 }
            verdict = (m == "prio" && (100 * a / s < 95 || 100 * (a + b) / s < 98)) ? " FAIL" : ""
            printf "  %-7s first %5.1f%% of solo, second %5.1f%%, aggregate %5.1f%%%s\n",
                m, 100 * a / s, 100 * b / s, 100 * (a + b) / s, verdict
            exit verdict != ""
        }' || failed=1
done
exit $failed
