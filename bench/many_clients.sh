#!/usr/bin/env bash
# bench/many_clients.sh - the scheduler with 1,000 registered clients on one
# GPU: how long `nvsharectl status` takes and how much memory it holds.
#
#   bench/many_clients.sh [BUILD_DIR] [CLIENTS]
#
# bench/many_clients registers CLIENTS (default 1000) connections as
# clients of one configured GPU and keeps them open; then 20 runs of
# `nvsharectl status` (the whole table, to /dev/null) are timed. Prints
# the median and the slowest run (target: under 50 ms) and the scheduler's
# VmRSS before the clients came and with them.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build}
N=${2:-1000}
WORK=$(mktemp -d)
export NVSHARE_SOCK_DIR=$WORK/sock
NVSHARE_GPUS=GPU-bench-0:81920 NVSHARE_MAX_CONNECTIONS_PER_UID=0 \
    "$BUILD/src/scheduler/nvshare-scheduler" >"$WORK/sched.log" 2>&1 &
sched=$!
clients=
trap 'kill $clients $sched 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -S "$NVSHARE_SOCK_DIR/control.sock" ] && break; sleep 0.05; done
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$sched/status"; }
rss_before=$(rss_kib)
"$BUILD/bench/many_clients" "$NVSHARE_SOCK_DIR" "$N" GPU-bench-0 >"$WORK/clients.out" &
clients=$!
for _ in $(seq 600); do grep -q registered= "$WORK/clients.out" && break; sleep 0.05; done
cat "$WORK/clients.out"
"$BUILD/src/ctl/nvsharectl" status | sed -n 1p
for _ in $(seq 20); do
    start=$(date +%s%N)
    "$BUILD/src/ctl/nvsharectl" status >/dev/null
    echo $(( ($(date +%s%N) - start) / 1000 ))
done | sort -n | awk -v n="$N" -v before="$(rss_kib)" -v b="$rss_before" '
    { t[NR] = $1 }
    END {
        printf "clients=%d status_median_ms=%.1f status_max_ms=%.1f target_ms=50 %s\n",
               n, t[int((NR + 1) / 2)] / 1000, t[NR] / 1000, t[NR] < 50000 ? "ok" : "OVER"
        printf "scheduler_rss_kib_before=%d scheduler_rss_kib_with_clients=%d\n", b, before
    }'
