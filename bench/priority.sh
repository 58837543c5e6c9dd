#!/usr/bin/env bash
# bench/priority.sh - priorities on a real GPU: a latency-critical inference
# service set `high` beside batch work set `low`, against native
# co-running, every ratio against solo runs of the same invocation.
#
#   OUT=/tmp/b bash bench/priority.sh [BUILD_DIR]    (default: build)
#
# Jobs (bench/priority_jobs.py, PyTorch, bf16): "light" inference, batch-64
# requests of a 12-layer 4096-wide MLP (~0.8 ms each) arriving at
# exponential 20 ms gaps ("lightg": each request one CUDA graph replay);
# "heavy" inference, the same model at batch 16384
# (10-20 ms of GPU work each); "train", an 8-layer 4096-wide MLP training
# loop at batch 16384 (short kernels); "k10", "k30", "k100": one bf16
# matmul per kernel of about 10, 30 or 100 ms.
#
# PAIRS name the runs: "light+train" starts both together; "light+train/train"
# starts train 4 s before the service, "light+train/light" the service 4 s
# before train. MODES (a run for each):
#  - native: both processes on the GPU at once, without nvshare;
#  - prio: nvshare in auto mode, the first job's pod set high and the
#    second's low with nvsharectl before they connect;
#  - before: prio with the binaries of BEFORE_BUILD (a build of an earlier
#    commit), to compare in the same run;
#  - serial, auto: nvshare without priorities;
#  - free: libnvshare loaded, the scheduler's anti-thrash off (what the
#    hook alone costs beside native).
# Every nvshare run is at the scheduler's and the client's default
# settings. Jobs measure the same window of SPAN_S (8) s from WARM_S (10)
# s after the first start (the service warms up and waits for it); late=1
# says a job warmed up after the window began. Printed per pair and mode:
# inference p50/p99 against its solo p99 + 2 ms; the other job's rate
# against solo and against what the inference leaves idle (solo rate x (1
# - the inference's solo busy fraction)), at least 90 % of it with prio,
# and from its process start to the window's end against solo's; for
# train + train each job's share of solo and the aggregate.
# ENV_1 and ENV_2 add VAR=VALUE words to the environment of job 1 or 2
# in the nvshare modes (for diagnostics: NVSHARE_MAX_BACKLOG_MS=0).
# Defaults: PAIRS="light+train/train light+train/light light+k10 light+k30
# light+k100", MODES="native prio" (the ordered pairs run natively once).
# Everything lands in $OUT/priority; REPORT_ONLY=1 prints the table from
# the files a run left there, running nothing.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build}
OUT=${OUT:-$TOP/.bench}/priority
# LIB, SCHED_BIN, CTL_BIN for this BUILD; sched_start / sched_stop.
source "$TOP/tests/gpu/lib.sh"
JOBS=$TOP/bench/priority_jobs.py
WARM_S=${WARM_S:-10} SPAN_S=${SPAN_S:-8}
mkdir -p "$OUT"
export NVSHARE_SOCK_DIR=$OUT/sock
trap 'sched_stop' EXIT

# with_build DIR CMD...: CMD with LIB, SCHED_BIN and CTL_BIN of build DIR.
with_build() {
    local dir=$1; shift
    LIB=$dir/src/hook/libnvshare.so SCHED_BIN=$dir/src/scheduler/nvshare-scheduler \
        CTL_BIN=$dir/src/ctl/nvsharectl "$@"
}

# run TAG MODE FIRST NAME... : the jobs, job i as pod NAME-i; FIRST (a
# name, or "" for together) starts 4 s before the other. The first job is
# the high-priority one in modes prio and before.
run() {
    local tag=$1 mode=$2 first=$3 pids=() i=0 start from until env=(); shift 3
    [ "$mode" = before ] && { with_build "$BEFORE_BUILD" run "$tag" prio "$first" "$@"; return; }
    start=$(date +%s%N)
    from=$(( start + WARM_S * 1000000000 )); until=$((from + SPAN_S * 1000000000))
    if [ "$mode" != native ]; then
        local sched_env=()
        [ "$mode" = serial ] && sched_env+=(NVSHARE_SCHEDULING_MODE=serial)
        [ "$mode" = free ] && sched_env+=(NVSHARE_ANTI_THRASH=off)
        sched_start "$OUT/$tag.sched.log" "${sched_env[@]}"
        if [ "$mode" = prio ]; then
            "$CTL_BIN" set priority "$1-1" high >/dev/null || exit 1
            "$CTL_BIN" set priority "$2-2" low >/dev/null || exit 1
        fi
        env=("LD_PRELOAD=$LIB")
    fi
    local names=("$@") idx=(1 2)
    [ "$#" = 1 ] && idx=(1)
    [ -n "$first" ] && [ "$first" = "${2:-}" ] && idx=(2 1)
    for i in "${idx[@]}"; do
        local name=${names[i - 1]}
        local job_env=()
        [ "$mode" != native ] && eval "job_env=(\${ENV_$i:-})"
        env "${env[@]}" "${job_env[@]}" NVSHARE_POD_NAME="$name-$i" \
            python3 "$JOBS" "$name" "$from" "$until" >"$OUT/$tag.$i.out" 2>"$OUT/$tag.$i.err" &
        pids+=($!)
        [ -n "$first" ] && [ "${#pids[@]}" = 1 ] && sleep 4
    done
    # Status in the middle of the window.
    [ "$mode" != native ] && sleep "$(awk -v t="$((from + SPAN_S * 500000000))" -v n="$(date +%s%N)" \
        'BEGIN { d = (t - n) / 1e9; print (d > 0 ? d : 0) }')" && "$CTL_BIN" status >"$OUT/$tag.status" 2>&1
    wait "${pids[@]}"
    [ "$mode" != native ] && sched_stop
    grep -h 'late=1' "$OUT/$tag".*.out >/dev/null && echo "warning: $tag: a job warmed up after the window began"
    return 0
}
val() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$2"; }

PAIRS=${PAIRS:-light+train/train light+train/light light+k10 light+k30 light+k100}
MODES=${MODES:-native prio}
[ -z "${REPORT_ONLY:-}" ] && [[ " $MODES " == *" before "* ]] && [ ! -x "${BEFORE_BUILD:-}/src/scheduler/nvshare-scheduler" ] &&
    { echo "mode before needs BEFORE_BUILD, a build of the earlier commit"; exit 2; }
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
solos=$(for pair in $PAIRS; do p=${pair%/*}; echo "${p//+/ }"; done | tr ' ' '\n' | sort -u)
[ -n "${REPORT_ONLY:-}" ] && solos="" PAIRS_RUN="" || PAIRS_RUN=$PAIRS
for name in $solos; do run "solo.$name" native "" "$name"; done
for pair in $PAIRS_RUN; do
    jobs=${pair%/*} first=""
    [ "$jobs" != "$pair" ] && first=${pair#*/}
    for mode in $MODES; do
        # Natively the order makes no difference: one run per pair.
        [ "$mode" = native ] && [ -n "$first" ] && [ -e "$OUT/${jobs}.native.1.out" ] && continue
        # shellcheck disable=SC2086 # a pair is two names
        run "${pair//\//.first-}.$mode" "$mode" "$first" ${jobs//+/ }
        [ "$mode" = native ] && [ -n "$first" ] &&
            for i in 1 2; do cp "$OUT/${pair//\//.first-}.native.$i.out" "$OUT/$jobs.native.$i.out"; done
    done
done

# ---- the table ------------------------------------------------------------
echo "== priorities, $device, $(date -u +%Y-%m-%dT%H:%MZ), ${SPAN_S} s windows, default settings"
failed=0
for pair in $PAIRS; do
    jobs=${pair%/*}; a=${jobs%+*}; b=${jobs#*+}
    if [ "$a" = "$b" ]; then
        s=$(val steps_per_s "$OUT/solo.$a.1.out")
        for mode in $MODES; do
            f=$OUT/${pair//\//.first-}.$mode
            [ "$mode" = native ] && f=$OUT/$jobs.native
            awk -v m="$mode" -v a="$(val steps_per_s "$f.1.out")" -v b="$(val steps_per_s "$f.2.out")" -v s="$s" '
                BEGIN { if (a == "" || b == "" || s <= 0) { printf "  %-7s no result\n", m; exit 1 }
                        printf "  %-7s first %5.1f%% of solo, second %5.1f%%, aggregate %5.1f%%\n",
                            m, 100 * a / s, 100 * b / s, 100 * (a + b) / s }' || failed=1
        done
        continue
    fi
    solo=$OUT/solo.$a.1.out
    bound=$(awk -v p="$(val p99_ms "$solo")" 'BEGIN { printf "%.2f", p + 2 }')
    printf '%s: %s solo p50 %s ms, p99 %s ms, busy %s; bound %s ms; %s solo %s/s\n' "$pair" \
        "$a" "$(val p50_ms "$solo")" "$(val p99_ms "$solo")" "$(val busy "$solo")" "$bound" \
        "$b" "$(val steps_per_s "$OUT/solo.$b.1.out")"
    for mode in $MODES; do
        f=$OUT/${pair//\//.first-}.$mode
        [ "$mode" = native ] && f=$OUT/$jobs.native
        awk -v m="$mode" -v p50="$(val p50_ms "$f.1.out")" -v p99="$(val p99_ms "$f.1.out")" \
            -v bound="$bound" -v t="$(val steps_per_s "$f.2.out")" \
            -v ts="$(val steps_per_s "$OUT/solo.$b.1.out")" -v busy="$(val busy "$solo")" \
            -v fs="$(val from_start_per_s "$f.2.out")" \
            -v fss="$(val from_start_per_s "$OUT/solo.$b.1.out")" '
            BEGIN {
                if (p99 == "" || t == "" || ts <= 0) { printf "  %-7s no result\n", m; exit 1 }
                left = 100 * t / (ts * (1 - busy))
                verdict = ""
                if (m == "prio" && p99 > bound) verdict = verdict " MISSED(p99 over solo + 2 ms)"
                if (m == "prio" && left < 90) verdict = verdict " MISSED(under 90% of idle)"
                printf "  %-7s inference p50 %7.2f ms  p99 %7.2f ms | other %7.2f/s = %5.1f%% of solo, %5.1f%% of what inference leaves; from its start %5.1f%% of solo%s\n",
                    m, p50, p99, t, 100 * t / ts, left, (fss > 0 ? 100 * fs / fss : 0), verdict
                exit verdict != ""
            }' || failed=1
    done
done
exit $failed
