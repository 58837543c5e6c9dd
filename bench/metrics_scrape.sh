#!/usr/bin/env bash
# bench/metrics_scrape.sh - what a /metrics scrape costs the scheduler's
# event loop with CLIENTS registered clients, each in a pod of its own (the
# most series per client).
#
#   bench/metrics_scrape.sh [BUILD_DIR] [CLIENTS] [SCRAPES]
#
# bench/many_clients registers CLIENTS (default 100) clients of one
# configured GPU, each declaring pod bench/pod-<i>; then SCRAPES (default
# 200) scrapes are made one after the other with curl. The scheduler counts
# the event-loop time it spends in the HTTP server (accepting, parsing,
# rendering, sending: nvshare_metrics_serve_seconds_total) and the scrapes:
# their ratio is the cost per scrape (target: under 1 ms). That is wall
# time, which on a busy machine includes the loop being preempted (curl
# runs beside it); the scheduler's CPU time per scrape (from
# /proc/PID/schedstat: the clients are idle, so the scrapes are all it
# does) is printed too. Also the size of a scrape and curl's median and
# slowest round trip.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build}
N=${2:-100}
SCRAPES=${3:-200}
WORK=$(mktemp -d)
export NVSHARE_SOCK_DIR=$WORK/sock NVSHARE_STATE_FILE=
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port/metrics
NVSHARE_GPUS=GPU-bench-0:81920 NVSHARE_MAX_CONNECTIONS_PER_UID=0 \
    NVSHARE_METRICS_ADDR=127.0.0.1:$port \
    "$BUILD/src/scheduler/nvshare-scheduler" >"$WORK/sched.log" 2>&1 &
sched=$!
clients=
trap 'kill $clients $sched 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do grep -q "metrics on" "$WORK/sched.log" && break; sleep 0.05; done
"$BUILD/bench/many_clients" "$NVSHARE_SOCK_DIR" "$N" GPU-bench-0 pods >"$WORK/clients.out" &
clients=$!
for _ in $(seq 600); do grep -qs registered= "$WORK/clients.out" && break; sleep 0.05; done
cat "$WORK/clients.out"

value() { awk -v m="$1" '$1 == m { print $2 }' "$WORK/m.txt"; }
curl -sf "$url" >"$WORK/m.txt"
serve0=$(value nvshare_metrics_serve_seconds_total)
scrapes0=$(value nvshare_metrics_scrapes_total)
cpu0=$(cut -d' ' -f1 "/proc/$sched/schedstat")
for _ in $(seq "$SCRAPES"); do
    curl -sf -o /dev/null -w '%{time_total}\n' "$url"
done >"$WORK/times"
cpu1=$(cut -d' ' -f1 "/proc/$sched/schedstat")
curl -sf "$url" >"$WORK/m.txt"
serve1=$(value nvshare_metrics_serve_seconds_total)
scrapes1=$(value nvshare_metrics_scrapes_total)
echo "series: $(grep -vc '^#' "$WORK/m.txt"), bytes: $(wc -c <"$WORK/m.txt")"
awk -v a="$serve0" -v b="$serve1" -v n=$(( scrapes1 - scrapes0 )) \
    'BEGIN { printf "event loop per scrape: %.3f ms (%d scrapes)\n", (b - a) * 1000 / n, n }'
awk -v a="$cpu0" -v b="$cpu1" -v n="$SCRAPES" \
    'BEGIN { printf "scheduler CPU per scrape: %.3f ms\n", (b - a) / 1e6 / n }'
sort -n "$WORK/times" | awk '{ t[NR] = $1 } END {
    printf "curl round trip: median %.3f ms, max %.3f ms\n", t[int((NR + 1) / 2)] * 1000, t[NR] * 1000 }'
