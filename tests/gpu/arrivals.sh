#!/usr/bin/env bash
# arrivals.sh - an interactive process beside busy jobs on a real GPU: how
# long its kernel waits once it wants the GPU again, native against
# nvshare (scheduler and client at their defaults), and what busy jobs
# keep of the GPU.
#
#  (1) Beside BUSY_COUNTS (default "1 3") busy jobs (bench/fixed_work.cu,
#      ~1 ms kernels back to back), tests/gpu/arrival.cu: a process whose
#      64 MiB stay resident, that N (20) times idles IDLE_MS (2500: more
#      than 2 s) and then launches one short kernel, timed from just before
#      the launch to its end. Native (no scheduler, no LD_PRELOAD: the
#      driver time-slices) and nvshare, each with fresh jobs. PASS when
#      nvshare's p99 <= native's p99 + SLACK_MS (10); p50s printed too.
#  (2) FAIR_JOBS (4) busy jobs under nvshare over the same FAIR_S (20) s
#      window, against one alone natively for FAIR_S: PASS when their
#      aggregate is >= 99 % of solo, and when in each 5 s window it is
#      within +-3 % of solo (each job's share per window is printed).
# Settings: N IDLE_MS BUSY_COUNTS SLACK_MS FAIR_JOBS FAIR_S, GPU (else
# CUDA_VISIBLE_DEVICES, else 0), BUILD=build-gpu, OUT=results directory
# ($OUT/arrivals, else a new one under /tmp; kept).
# Runtime: (N x IDLE_MS + ~15 s) per busy count and mode (~4.5 min at the
# defaults for (1)), ~1 min for (2). Exit status: 0 all PASS, 1 a FAIL,
# 2 could not run.
# usage: tests/gpu/arrivals.sh   (from the repository root)
set -uo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-20} IDLE_MS=${IDLE_MS:-2500} BUSY_COUNTS=${BUSY_COUNTS:-1 3} SLACK_MS=${SLACK_MS:-10}
FAIR_JOBS=${FAIR_JOBS:-4} FAIR_S=${FAIR_S:-20}
WINDOW_NS=5000000000
gpu_results_dir arrivals
gpu_target
gpu_build nvshare nvshare-scheduler nvsharectl
nvcc -O2 -o "$RES/fixed_work" "$ROOT/bench/fixed_work.cu" || exit 2
nvcc -O2 -o "$RES/arrival" "$ROOT/tests/gpu/arrival.cu" || exit 2
echo "== arrivals: $N arrivals after ${IDLE_MS} ms idle beside $BUSY_COUNTS busy job(s); $FAIR_JOBS busy jobs for ${FAIR_S} s; results in $RES"
[ -z "$(gpu_apps)" ] || echo "== warning: other processes use the GPU; timings may suffer"

gpu_cleanup_at_exit

FAILED=0
ROWS=()
row() { # CHECK OK(1/0/INFO) DETAIL
    local r=PASS
    case $2 in 1) ;; 0) r=FAIL; FAILED=1 ;; *) r=$2 ;; esac
    ROWS+=("$(printf '%-46s %-5s %s' "$1" "$r" "$3")")
}
# pct P FILE-of-numbers -> the nearest-rank percentile
pct() { sort -g "$2" | awk -v p="$1" '{ v[NR] = $1 } END { if (!NR) { print "nan"; exit } i = int(p * NR + 0.999999); if (i < 1) i = 1; print v[i] }'; }

# --- (1) arrivals beside busy jobs --------------------------------------------
arrivals_run() { # MODE BUSY -> $RES/MODE-BUSY/lat (one latency per line)
    local mode=$1 busy=$2 dir=$RES/$1-$2 pre=() i secs rc
    mkdir -p "$dir"
    if [ "$mode" = nvshare ]; then
        export NVSHARE_SOCK_DIR=$dir/sock
        sched_start "$dir/sched.log"
        pre=(LD_PRELOAD="$LIB")
    fi
    secs=$(( N * (IDLE_MS + 100) / 1000 + 15 ))
    for i in $(seq 1 "$busy"); do
        env "${pre[@]}" "$RES/fixed_work" "$secs" >"$dir/busy$i.out" 2>"$dir/busy$i.err" &
        PIDS+=($!)
    done
    sleep 3 # the busy jobs are up and hold the GPU
    timeout -k 5 $((secs + 60)) env "${pre[@]}" "$RES/arrival" "$N" "$IDLE_MS" >"$dir/arrival.out" 2>"$dir/arrival.err"
    rc=$?
    kill_jobs
    sched_stop
    sed -n 's/.*latencies_ms=\([0-9.,]*\).*/\1/p' "$dir/arrival.out" | tr ',' '\n' | sed '/^$/d' >"$dir/lat"
    if [ "$rc" -ne 0 ] || ! grep -q 'check=ok' "$dir/arrival.out"; then
        echo "   $mode, $busy busy: arrival exited $rc: $(tail -c 300 "$dir/arrival.out") $(tail -n 3 "$dir/arrival.err")"
        return 1
    fi
    echo "   $mode, $busy busy: p50 $(pct 0.5 "$dir/lat") ms, p99 $(pct 0.99 "$dir/lat") ms, max $(sort -g "$dir/lat" | tail -n 1) ms ($(wc -l <"$dir/lat") arrivals)"
}
for busy in $BUSY_COUNTS; do
    echo "== (1) $busy busy job(s)"
    ok=1
    arrivals_run native "$busy" || ok=0
    arrivals_run nvshare "$busy" || ok=0
    nat=$RES/native-$busy/lat nvs=$RES/nvshare-$busy/lat
    if [ "$ok" = 1 ]; then
        np99=$(pct 0.99 "$nat") sp99=$(pct 0.99 "$nvs")
        row "(1) first kernel, $busy busy: nvshare p99" \
            "$(awk -v s="$sp99" -v n="$np99" -v k="$SLACK_MS" 'BEGIN { print (s <= n + k) ? 1 : 0 }')" \
            "nvshare p50 $(pct 0.5 "$nvs") / p99 $sp99 ms; native p50 $(pct 0.5 "$nat") / p99 $np99 ms (target <= native p99 + $SLACK_MS ms)"
    else
        row "(1) first kernel, $busy busy" 0 "a run failed: see $RES/*-$busy/"
    fi
done

# --- (2) busy jobs' aggregate and its steadiness --------------------------------
echo "== (2) $FAIR_JOBS busy jobs under nvshare vs one alone"
mkdir -p "$RES/fair"
"$RES/fixed_work" "$FAIR_S" >"$RES/fair/solo.out" 2>&1
solo=$(sed -n 's/.*rate=\([0-9.]*\).*/\1/p' "$RES/fair/solo.out")
export NVSHARE_SOCK_DIR=$RES/fair/sock
sched_start "$RES/fair/sched.log"
from=$(( $(date +%s%N) + 4000000000 ))
until=$(( from + FAIR_S * 1000000000 ))
for i in $(seq 1 "$FAIR_JOBS"); do
    timeout -k 5 $((FAIR_S + 60)) env RATE_EVERY_NS=$WINDOW_NS LD_PRELOAD="$LIB" \
        "$RES/fixed_work" --window "$from" "$until" >"$RES/fair/job$i.out" 2>"$RES/fair/job$i.err" &
    PIDS+=($!)
done
for p in "${PIDS[@]}"; do wait "$p"; done
PIDS=()
sched_stop
fair=$(python3 - "$RES/fair" "$FAIR_JOBS" "${solo:-0}" <<'PY'
import re, sys
d, n, solo = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rates, windows = [], []
for i in range(1, n + 1):
    try:
        text = open(f"{d}/job{i}.out").read()
    except OSError:
        text = ""
    m = re.search(r"rate=([0-9.]+)", text)
    w = re.search(r"rates=([0-9.,]+)", text)
    rates.append(float(m.group(1)) if m else 0.0)
    windows.append([float(x) for x in w.group(1).split(",")] if w else [])
agg = sum(rates)
nw = min((len(w) for w in windows), default=0)
per = [sum(w[k] for w in windows) for k in range(nw)]
dev = [100 * (p / solo - 1) for p in per] if solo else []
shares = [" ".join("%.2f" % (w[k] / per[k]) if per[k] else "-" for w in windows) for k in range(nw)]
print(f"agg_pct={100 * agg / solo if solo else 0:.2f}")
print(f"jobs_ok={sum(r > 0 for r in rates)}")
print(f"windows={nw}")
print(f"window_ok={int(nw > 0 and all(abs(x) <= 3 for x in dev))}")
print("window_dev=" + ",".join("%+.1f" % x for x in dev))
print("shares=" + " | ".join(shares))
PY
)
declare -A F
while IFS='=' read -r k v; do F[$k]=$v; done <<<"$fair"
echo "   solo ${solo:-?} kernels/s; aggregate ${F[agg_pct]:-?} % of solo; per 5 s window ${F[window_dev]:-?} %"
echo "   shares per window (1/$FAIR_JOBS each): ${F[shares]:-?}"
if [ -z "$solo" ] || [ "${F[jobs_ok]:-0}" != "$FAIR_JOBS" ]; then
    row "(2) $FAIR_JOBS busy jobs" 0 "solo '${solo:-none}', ${F[jobs_ok]:-0}/$FAIR_JOBS jobs reported; see $RES/fair/"
else
    row "(2) $FAIR_JOBS busy jobs: aggregate >= 99 % of solo" \
        "$(awk -v a="${F[agg_pct]}" 'BEGIN { print (a >= 99) ? 1 : 0 }')" "${F[agg_pct]} %"
    row "(2) $FAIR_JOBS busy jobs: each 5 s window within +-3 %" "${F[window_ok]}" \
        "${F[windows]} windows, vs solo: ${F[window_dev]} %"
fi

echo
echo "== summary ($GPU_NAME)"
printf '%-46s %-5s %s\n' check result detail
printf '%s\n' "${ROWS[@]}"
echo "logs: $RES"
exit "$FAILED"
