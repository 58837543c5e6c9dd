#!/usr/bin/env bash
# bench/modes.sh - scheduling modes on a real GPU: is `auto` within 2 % of
# the better fixed mode?
#
#   bench/modes.sh [--window SECONDS] [--warmup SECONDS] [--tq DURATION] [BUILD_DIR]
#
# Three pairs of jobs, each under a fresh scheduler in each mode (serial,
# concurrent, auto):
#   heavy        bench/fixed_work + bench/fixed_work   (both keep the GPU full)
#   bursty       bench/bursty + bench/bursty           (both light: ~100 us
#                                                       kernel, 300 us host)
#   light_heavy  bench/bursty + bench/fixed_work
# Both jobs of a pair run with libnvshare preloaded and count only the work
# that completes inside one common wall-clock window (--window FROM UNTIL of
# the programs), which opens --warmup seconds after they start, so start-up
# and the scheduler's first load measurements are excluded. Each program
# also runs alone under the scheduler over a window of the same length: its
# solo throughput, the 100 % of the table.
#
# Reported per pair and mode: each job's throughput as % of its solo, the
# aggregate (sum of the two %), and how much of the window both jobs ran at
# once (nvsharectl status --json sampled every second). Per pair: auto vs the
# better fixed mode (target: at most 2 % below it). For light_heavy: the
# light job's % of solo (target >= 45 %), and auto vs the better fixed mode
# among those that keep the light job at >= 45 % (concurrent may win on the
# aggregate by starving it; that comparison is shown for information).
#
# Time quantum: 500ms by default (--tq). The scheduler's default, 30 s, is
# longer than the window: one job would hold the GPU for all of it. 500 ms
# gives 40 quanta per 20 s window (one quantum = 2.5 % of a share, so the
# light job's 45 % is not decided by rounding) while a switch (~3 ms drain)
# costs ~0.6 %, and every hold is long enough for a load report (500 ms),
# which auto mode classifies clients by.
#
# BUILD_DIR defaults to build-gpu (configured with tests off when missing,
# as tests/gpu/ do; the needed targets are rebuilt). Results and every log
# go to $OUT/modes (default .bench/modes). Exit status: 0 when every
# target is met, 1 when one is missed or a job failed.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
WINDOW=${WINDOW:-20}
WARMUP=${WARMUP:-4}
TQ=${TQ:-500ms}
BUILD=$TOP/build-gpu
while [ $# -gt 0 ]; do
    case $1 in
    --window) WINDOW=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --tq) TQ=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "modes.sh: unknown option $1" >&2; exit 2 ;;
    *) BUILD=$1; shift ;;
    esac
done
[[ $WINDOW =~ ^[0-9]+$ && $WINDOW -ge 2 ]] || { echo "modes.sh: --window wants whole seconds >= 2" >&2; exit 2; }
[[ $WARMUP =~ ^[0-9]+$ && $WARMUP -ge 1 ]] || { echo "modes.sh: --warmup wants whole seconds >= 1" >&2; exit 2; }
OUT=${OUT:-$TOP/.bench}/modes
LOGS=$OUT/logs
BIN=$OUT/bin
rm -rf "$LOGS"
mkdir -p "$LOGS" "$BIN"
export NVSHARE_SOCK_DIR=$OUT/sock
# LIB, SCHED_BIN, CTL_BIN for this BUILD; sched_start / sched_stop.
source "$TOP/tests/gpu/lib.sh"
NVCC=${NVCC:-nvcc}
MODES=(serial concurrent auto)
PAIRS=(heavy bursty light_heavy)
declare -A PAIR_JOBS=([heavy]="fixed_work fixed_work" [bursty]="bursty bursty"
                      [light_heavy]="bursty fixed_work")
JOB_TIMEOUT=$((WARMUP + WINDOW + 60))
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

runs=$((2 + ${#PAIRS[@]} * ${#MODES[@]}))
est=$((runs * (WARMUP + WINDOW + 2) + 30))
say "== modes.sh: ${#PAIRS[@]} pairs x ${#MODES[@]} modes + 2 solos = $runs runs of ${WARMUP} s warm-up + ${WINDOW} s window, TQ $TQ"
say "== estimated duration: ~$((est / 60)) min $((est % 60)) s (builds included); results in $OUT"

# --- build ------------------------------------------------------------------
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$TOP" -B "$BUILD" -DNVSHARE_BUILD_TESTS=OFF >"$LOGS/cmake.log" 2>&1 ||
        { cat "$LOGS/cmake.log"; exit 1; }
fi
cmake --build "$BUILD" -j --target nvshare nvshare-scheduler nvsharectl >"$LOGS/build.log" 2>&1 ||
    { tail -n 30 "$LOGS/build.log"; exit 1; }
for prog in fixed_work bursty; do
    "$NVCC" -O2 -o "$BIN/$prog" "$TOP/bench/$prog.cu"
done
say "== device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 || echo unknown)"

# --- helpers ----------------------------------------------------------------
start_scheduler() { # LOGNAME MODE
    sched_start "$LOGS/$1.sched.log" NVSHARE_TQ="$TQ" NVSHARE_SCHEDULING_MODE="$2"
}
stop_scheduler() { sched_stop; }
SAMPLER=
stop_sampler() {
    [ -n "$SAMPLER" ] || return 0
    kill "$SAMPLER" 2>/dev/null || true
    wait "$SAMPLER" 2>/dev/null || true
    SAMPLER=
}
JOB_PIDS=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    for p in "${JOB_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    stop_sampler
    stop_scheduler
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# sample_status DIR FROM UNTIL: nvsharectl status --json once a second
# inside the window, one file per sample.
sample_status() {
    local dir=$1 from=$2 until=$3 n=0 now
    mkdir -p "$dir"
    while now=$(date +%s%N); [ "$now" -lt "$until" ]; do
        if [ "$now" -ge "$from" ]; then
            n=$((n + 1))
            "$CTL_BIN" status --json >"$dir/$n.json" 2>/dev/null || rm -f "$dir/$n.json"
        fi
        sleep 1
    done
}

# corun_summary DIR: "X/Y" samples in which 2+ clients ran at once, and the
# GPU's mode, from the sampled JSON; "n/a" when the fields are not there.
corun_summary() {
    python3 - "$1" <<'PY'
import glob, json, sys
both = total = 0
modes = set()
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    try:
        with open(path) as f:
            gpu = json.load(f)["gpus"][0]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        continue
    running = gpu.get("running_client_ids")
    if not isinstance(running, list):
        continue
    total += 1
    both += len(running) >= 2
    if "mode" in gpu:
        modes.add(str(gpu["mode"]))
print(f"{both}/{total}" if total else "n/a", ",".join(sorted(modes)) or "?")
PY
}

val() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$2" | tail -n 1; }

declare -A RATE CORUN SEEN_MODE
FAILED=0

# run_case NAME MODE PROG... : the programs at once, one common window.
# Sets RATE[NAME.i] (i from 0) and CORUN[NAME].
run_case() {
    local name=$1 mode=$2; shift 2
    local progs=("$@") i from until
    start_scheduler "$name" "$mode"
    from=$(( $(date +%s%N) + WARMUP * 1000000000 ))
    until=$(( from + WINDOW * 1000000000 ))
    JOB_PIDS=()
    for i in "${!progs[@]}"; do
        NVSHARE_POD_NAMESPACE=modes NVSHARE_POD_NAME="$name-$i" LD_PRELOAD=$LIB \
            timeout "$JOB_TIMEOUT" "$BIN/${progs[$i]}" --window "$from" "$until" \
            >"$LOGS/$name.$i.out" 2>"$LOGS/$name.$i.err" &
        JOB_PIDS+=($!)
    done
    sample_status "$LOGS/$name.status" "$from" "$until" &
    SAMPLER=$!
    for i in "${!JOB_PIDS[@]}"; do
        if ! wait "${JOB_PIDS[$i]}"; then
            echo "modes.sh: $name: ${progs[$i]} (job $i) failed; last lines of $LOGS/$name.$i.err:"
            tail -n 5 "$LOGS/$name.$i.err" | sed 's/^/    /'
            FAILED=1
        fi
    done
    JOB_PIDS=()
    stop_sampler
    stop_scheduler
    for i in "${!progs[@]}"; do
        RATE[$name.$i]=$(val rate "$LOGS/$name.$i.out")
        [ -n "${RATE[$name.$i]}" ] || { RATE[$name.$i]=0; FAILED=1; }
    done
    read -r "CORUN[$name]" "SEEN_MODE[$name]" < <(corun_summary "$LOGS/$name.status")
}

# --- solos ------------------------------------------------------------------
declare -A SOLO
done_runs=0
progress() { done_runs=$((done_runs + 1)); echo "   [$done_runs/$runs] $*"; }
for prog in fixed_work bursty; do
    run_case "solo_$prog" auto "$prog"
    SOLO[$prog]=${RATE[solo_$prog.0]}
    progress "solo $prog: ${SOLO[$prog]}/s"
    awk -v s="${SOLO[$prog]}" 'BEGIN { exit !(s > 0) }' ||
        { echo "modes.sh: no solo throughput for $prog; see $LOGS"; exit 1; }
done
say "solo (alone under the scheduler, ${WINDOW} s): fixed_work ${SOLO[fixed_work]} kernels/s, bursty ${SOLO[bursty]} steps/s"

# --- pairs ------------------------------------------------------------------
declare -A PCT_A PCT_B AGG
for pair in "${PAIRS[@]}"; do
    read -r -a progs <<<"${PAIR_JOBS[$pair]}"
    for mode in "${MODES[@]}"; do
        run_case "$pair.$mode" "$mode" "${progs[@]}"
        PCT_A[$pair.$mode]=$(awk -v r="${RATE[$pair.$mode.0]}" -v s="${SOLO[${progs[0]}]}" 'BEGIN { printf "%.2f", 100 * r / s }')
        PCT_B[$pair.$mode]=$(awk -v r="${RATE[$pair.$mode.1]}" -v s="${SOLO[${progs[1]}]}" 'BEGIN { printf "%.2f", 100 * r / s }')
        AGG[$pair.$mode]=$(awk -v a="${PCT_A[$pair.$mode]}" -v b="${PCT_B[$pair.$mode]}" 'BEGIN { printf "%.2f", a + b }')
        progress "$pair, $mode: ${PCT_A[$pair.$mode]} % + ${PCT_B[$pair.$mode]} % = ${AGG[$pair.$mode]} %"
    done
done

# --- table ------------------------------------------------------------------
say ""
say "throughput as % of each job's solo, ${WINDOW} s common window, TQ $TQ"
say "$(printf '%-12s %-11s %-22s %-22s %10s  %s' pair mode "job A" "job B" aggregate "both running (samples; mode seen)")"
for pair in "${PAIRS[@]}"; do
    read -r -a progs <<<"${PAIR_JOBS[$pair]}"
    for mode in "${MODES[@]}"; do
        k=$pair.$mode
        say "$(printf '%-12s %-11s %-22s %-22s %9s%%  %s' "$pair" "$mode" \
            "${progs[0]} ${PCT_A[$k]} %" "${progs[1]} ${PCT_B[$k]} %" "${AGG[$k]}" \
            "${CORUN[$k]} (${SEEN_MODE[$k]})")"
    done
done

# --- verdicts ---------------------------------------------------------------
say ""
verdict() { # LABEL OK(1 pass, 0 fail, else shown as is) DETAIL
    local r=PASS
    case $2 in 1) ;; 0) r=FAIL; FAILED=1 ;; *) r=$2 ;; esac
    say "$(printf '%-48s %-5s %s' "$1" "$r" "$3")"
}
# best_fixed PAIR [MIN_LIGHT]: the fixed mode with the higher aggregate
# (among those whose job A reaches MIN_LIGHT % when given).
best_fixed() {
    local pair=$1 min=${2:-} best='' m
    for m in serial concurrent; do
        if [ -n "$min" ] && ! awk -v a="${PCT_A[$pair.$m]}" -v t="$min" 'BEGIN { exit !(a >= t) }'; then
            continue
        fi
        if [ -z "$best" ] || awk -v a="${AGG[$pair.$m]}" -v b="${AGG[$pair.$best]}" 'BEGIN { exit !(a > b) }'; then
            best=$m
        fi
    done
    echo "$best"
}
compare_auto() { # PAIR BEST LABEL [info]
    local pair=$1 best=$2 label=$3 diff ok
    diff=$(awk -v a="${AGG[$pair.auto]}" -v b="${AGG[$pair.$best]}" 'BEGIN { printf "%+.2f", 100 * (a / b - 1) }')
    ok=$(awk -v d="$diff" 'BEGIN { print (d >= -2) ? 1 : 0 }')
    [ -z "${4:-}" ] || ok=info
    verdict "$label" "$ok" "auto vs best fixed: $diff % (auto ${AGG[$pair.auto]} %, $best ${AGG[$pair.$best]} %; target >= -2 %)"
}
for pair in "${PAIRS[@]}"; do
    [ "$pair" = light_heavy ] && continue
    compare_auto "$pair" "$(best_fixed "$pair")" "$pair: auto vs best fixed"
done
# light_heavy: the better fixed mode on the aggregate may get there by
# starving the light job (concurrent); auto is held to the better fixed
# mode among those that keep the light job at >= 45 % of its solo.
for mode in "${MODES[@]}"; do
    ok=$(awk -v a="${PCT_A[light_heavy.$mode]}" 'BEGIN { print (a >= 45) ? 1 : 0 }')
    [ "$mode" = auto ] || ok=info
    verdict "light_heavy, $mode: light job's share" "$ok" "bursty ${PCT_A[light_heavy.$mode]} % of solo beside fixed_work (target >= 45 %)"
done
best=$(best_fixed light_heavy)
fair=$(best_fixed light_heavy 45)
if [ -n "$fair" ]; then
    [ "$fair" = "$best" ] || compare_auto light_heavy "$best" "light_heavy: auto vs best fixed (aggregate)" info
    compare_auto light_heavy "$fair" "light_heavy: auto vs best fixed keeping light"
else
    say "light_heavy: no fixed mode keeps the light job at >= 45 %; held to the best on the aggregate"
    compare_auto light_heavy "$best" "light_heavy: auto vs best fixed"
fi
say ""
say "logs (scheduler, each job, nvsharectl samples): $LOGS"
[ "$FAILED" = 0 ] || say "modes.sh: a target was missed or a job failed"
exit "$FAILED"
