#!/usr/bin/env bash
# bench/heavy_tenants.sh - many heavy tenants in the default mode (auto)
# against serial mode, on a real GPU, measured from process start.
#
#   OUT=DIR bench/heavy_tenants.sh [BUILD_DIR]
#
# Tenants are bench/fixed_work (kernels that fill the GPU, a sync every 8)
# with libnvshare preloaded; each counts the kernels that complete between
# the moment the tenants are started and the common end, so start-up is
# part of what is measured. The 100 % is one tenant alone, measured the
# same way over the same length.
#   TQ 100 ms: 4 tenants for 20 s and 8 for 32 s (4 s of GPU each, 40
#              quanta), serial then auto: aggregate (sum of % of solo)
#              within 1 point of serial's, each tenant within 3 % of 1/N
#              of the aggregate.
#   TQ 30 s:   4 tenants for 20 s: aggregate no more than 1 point below
#              serial's, and no two clients measured heavy in one running
#              set (nvsharectl status --json sampled every 100 ms).
# Prints one summary table; exit status 0 when every target is met.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build-gpu}
OUT=${OUT:-$TOP/.bench}/heavy_tenants
rm -rf "$OUT"; mkdir -p "$OUT"
export NVSHARE_SOCK_DIR=$OUT/sock
source "$TOP/tests/gpu/lib.sh"
NVCC=${NVCC:-nvcc}
gpu_build nvshare nvshare-scheduler nvsharectl
"$NVCC" -O2 -o "$OUT/fixed_work" "$TOP/bench/fixed_work.cu" || exit 1
trap 'sched_stop' EXIT
SUMMARY=$OUT/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
failed=0

# run NAME N SECONDS MODE TQ: N tenants under a fresh scheduler.
run() {
    local name=$1 n=$2 seconds=$3 mode=$4 tq=$5 from until pids=()
    local mode_env=(); [ "$mode" = default ] || mode_env=(NVSHARE_SCHEDULING_MODE=$mode)
    sched_start "$OUT/$name.sched.log" "${mode_env[@]}" NVSHARE_TQ="$tq"
    from=$(date +%s%N); until=$(( from + seconds * 1000000000 ))
    for j in $(seq "$n"); do
        LD_PRELOAD=$LIB "$OUT/fixed_work" --window "$from" "$until" >"$OUT/$name.$j.out" 2>&1 &
        pids+=($!)
    done
    if [ "${SAMPLE:-}" = 1 ]; then
        while kill -0 "${pids[@]}" 2>/dev/null; do
            { "$CTL_BIN" status --json 2>/dev/null | tr -d '\n'; echo; } >>"$OUT/$name.samples"
            sleep 0.1
        done
    fi
    wait "${pids[@]}" || { echo "$name: a tenant failed"; failed=1; }
    sched_stop
}

rate() { sed -n 's/.*rate=\([0-9.]*\).*/\1/p' "$1"; }
# aggregate NAME: sum of the tenants' rates as % of solo.
aggregate() {
    cat "$OUT/$1".*.out | sed -n 's/.*rate=\([0-9.]*\).*/\1/p' |
        awk -v s="$SOLO" '{ t += $1 } END { printf "%.2f", 100 * t / s }'
}
shares() { # the tenants' % of the aggregate, and whether each is within 3 % of 1/N
    local n=$2
    cat "$OUT/$1".*.out | sed -n 's/.*rate=\([0-9.]*\).*/\1/p' |
        awk -v n="$n" '{ r[NR] = $1; t += $1 } END {
            ok = 1
            for (i = 1; i <= NR; i++) { s = 100 * r[i] / t; printf "%.1f ", s
                if (s < 0.97 * 100 / n || s > 1.03 * 100 / n) ok = 0 }
            printf "%s", ok ? "ok" : "FAIL" }'
}

run solo 1 20 default 100ms
SOLO=$(rate "$OUT/solo.1.out")
say "== heavy tenants from process start; solo $SOLO kernels/s ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
say "| TQ | tenants | seconds | serial aggregate | auto aggregate | auto - serial | auto shares (% of aggregate) |"
say "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
for spec in "4 20" "8 32"; do
    set -- $spec
    run serial$1 "$1" "$2" serial 100ms
    run auto$1 "$1" "$2" default 100ms
    s=$(aggregate serial$1) a=$(aggregate auto$1) sh=$(shares auto$1 "$1")
    d=$(awk -v a="$a" -v s="$s" 'BEGIN { printf "%+.2f", a - s }')
    awk -v d="$d" 'BEGIN { exit !(d <= 1 && d >= -1) }' || failed=1
    [[ $sh == *FAIL ]] && failed=1
    say "| 100 ms | $1 | $2 | $s | $a | $d | $sh |"
done
run serial4_30s 4 20 serial 30s
SAMPLE=1 run auto4_30s 4 20 default 30s
s=$(aggregate serial4_30s) a=$(aggregate auto4_30s)
d=$(awk -v a="$a" -v s="$s" 'BEGIN { printf "%+.2f", a - s }')
awk -v d="$d" 'BEGIN { exit !(d >= -1) }' || failed=1
pairs=$(python3 "$TOP/tests/hook/running_sets.py" "$OUT/auto4_30s.samples")
[[ $pairs == heavy_pairs=0\ * ]] || failed=1
say "| 30 s | 4 | 20 | $s | $a | $d | $pairs (samples every 100 ms) |"
[ $failed = 0 ] && say "PASS: auto mode with heavy tenants is as full and as fair as serial" ||
    say "FAIL: a target was missed (logs in $OUT)"
exit $failed
