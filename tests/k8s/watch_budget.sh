#!/usr/bin/env bash
# k8s_watch_budget: what the pod watcher costs the API server. One watcher
# runs per node, so every request it makes is multiplied by the node count.
# Against the loopback API server (fake_apiserver.py, which counts each
# node's list pages and watches), for PERIOD seconds (60 unless
# NVSHARE_WATCH_BUDGET_S says), eight watchers at once, each on a node of
# its own:
#   - quiet: the server holds the watch open (it honours the watcher's
#     timeoutSeconds, 300): 1 list and 1 watch however long the scheduler's
#     control connection sits idle (it closed idle ones after 2 s, and the
#     watcher listed or watched again each time: 10 watches in 20 s), and
#     a scheduler restart midway costs no request either: the watcher
#     reconnects and re-sends its cache, timed here. One of its pods asks
#     for 100 x 2^30 units of gpu-memory: the scheduler learns 2^64-1
#     bytes, not the wrapped 10376293541461622784, and a warning says so.
#   - server-timeout: the server ends each watch well after 35 s: one
#     watch per 35 s, no list.
#   - under a fault each (and a scheduler each, as on a node): 410 as the
#     status, 410 as an ERROR event, an empty 200 watch, an endless
#     continue token, a 1 GiB list body, a 1 GiB watch line without a
#     newline. Each failure waits the back-off (250 ms
#     doubling to 60 s, each wait at least half of it): over the time
#     measured, at most BUDGET tries fit, each of one list (LIST_PAGES_MAX
#     pages at most) and one watch. Before: thousands a second; 1 GiB
#     bodies held whole; a line without end spun a core. Peak memory and
#     CPU time are printed and bounded.
# usage: watch_budget.sh SCHEDULER POD_WATCHER
source "$(dirname "$0")/../integration/lib.sh" "$1" ""
WATCHER_BIN=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PERIOD=${NVSHARE_WATCH_BUDGET_S:-60}
FAULTS=(server-timeout gone-status gone-event empty-watch endless-continue huge-list endless-line)
LIST_PAGES_MAX=4 # src/pod-watcher/main.c
RSS_MAX_MIB=64   # the watcher container's limit (deploy/): bodies of 16 MiB, lines of 8 MiB
declare -A PIDS=() # what -> its pid: a node's watcher, sched-NODE, api
trap 'stop_scheduler; for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
      for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

pod() { # uid name node gpu-memory-units containers
    local c='{"name":"c","image":"x","resources":{"limits":{"nvshare.com/gpu-memory":"'$4'"}}}'
    local all=$c i
    for (( i = 1; i < $5; i++ )); do all+=",$c"; done
    printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"default","uid":"%s"},"spec":{"nodeName":"%s","containers":[%s]}}' \
        "$2" "$1" "$3" "$all"
}
{
    echo "[$(pod q-1 trainer quiet 4 1), $(pod q-2 big quiet 1073741824 100)"
    for f in "${FAULTS[@]}"; do echo ", $(pod "$f-1" "trainer-$f" "$f" 4 1)"; done
    echo "]"
} >"$WORK/pods.json"
mkdir -p "$WORK/sa"
echo token >"$WORK/sa/token"
python3 "$HERE/fake_apiserver.py" "$WORK/port" "$WORK/sa/token" "$WORK/pods.json" \
    2>"$WORK/api.log" & PIDS[api]=$!
wait_for test -s "$WORK/port" || fail "the API server did not start"
API=http://127.0.0.1:$(cat "$WORK/port")
admin() { python3 -c 'import sys, urllib.request
req = urllib.request.Request(sys.argv[1], method=sys.argv[2], data=b"" if sys.argv[2] == "POST" else None)
print(urllib.request.urlopen(req, timeout=10).read().decode())' "$API/admin/$1" "${2:-GET}"; }
for f in "${FAULTS[@]}"; do admin "fault?node=$f&mode=$f" POST >/dev/null; done

start_watcher() { # node socket-directory
    # ASan's quarantine would keep 256 MiB of freed bodies: the bound is on
    # what the watcher holds.
    env NODE_NAME="$1" NVSHARE_API_SERVER="$API" NVSHARE_SA_DIR="$WORK/sa" \
        NVSHARE_SOCK_DIR="$2" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16" \
        "$WATCHER_BIN" >"$WORK/watcher-$1.log" 2>&1 &
    PIDS[$1]=$!
}
wlog_count() { grep -c -- "$2" "$WORK/watcher-$1.log" || true; }
wlog_has() { [ "$(wlog_count "$1" "$2")" -ge "$3" ]; }
fail_w() { tail -n 20 "$WORK/watcher-$1.log" >&2; fail "$2"; }

SCHED_ENV=(NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_STATE_FILE="$WORK/state.conf"
           NVSHARE_METRICS_ADDR=off)
start_scheduler "${SCHED_ENV[@]}"
for f in "${FAULTS[@]}"; do
    env NVSHARE_SOCK_DIR="$WORK/sock-$f" NVSHARE_GPUS=GPU-sim-0:16384 \
        NVSHARE_STATE_FILE="$WORK/state-$f.conf" NVSHARE_METRICS_ADDR=off \
        "$SCHED_BIN" >"$WORK/sched-$f.log" 2>&1 &
    PIDS[sched-$f]=$!
done
for f in "${FAULTS[@]}"; do
    wait_for test -S "$WORK/sock-$f/control.sock" || fail "the scheduler of $f did not start"
done
t0=$(now_ns)
start_watcher quiet "$NVSHARE_SOCK_DIR"
for f in "${FAULTS[@]}"; do start_watcher "$f" "$WORK/sock-$f"; done

# ---- quiet: the pods reach the scheduler, the overflow saturated ---------
wait_for wlog_has quiet "told of 2 pod(s)" 1 || fail_w quiet "the scheduler was never told"
wait_for log_has_at_least "gpu-memory request 18446744073709551615 bytes" 1 ||
    fail "the scheduler did not learn the saturated request"
log_has_at_least "10376293541461622784" 1 && fail "the request wrapped"
wlog_has quiet "request overflows 64 bits" 1 || fail_w quiet "no warning for the overflow"
echo "  100 x 2^30 units of 256 MiB: the scheduler learns 18446744073709551615 bytes, with a warning"

# ---- quiet: idle past the scheduler's idle limit, then its restart ------
sleep $(( PERIOD / 3 ))
[ "$(wlog_count quiet "told of")" = 1 ] || fail_w quiet "the watcher re-sent its list unasked"
kill -9 "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null || true; SCHED_PID=
start_scheduler "${SCHED_ENV[@]}"
t1=$(now_ns)
wait_for wlog_has quiet "told of 2 pod(s)" 2 || fail_w quiet "the restarted scheduler was never told"
resync_ms=$(( ($(now_ns) - t1) / 1000000 ))
echo "  scheduler restart: its socket up to the whole list sent: ${resync_ms} ms"
[ "$resync_ms" -le 2000 ] || fail "the restarted scheduler waited ${resync_ms} ms for the list"

# ---- the rest of the period, then the counts ------------------------------
left=$(( t0 + PERIOD * 1000000000 - $(now_ns) ))
[ "$left" -le 0 ] || sleep "$(awk -v ns="$left" 'BEGIN { printf "%.3f", ns / 1e9 }')"
declare -A RSS=() CPU=()
for n in quiet "${FAULTS[@]}"; do
    RSS[$n]=$(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/${PIDS[$n]}/status")
    CPU[$n]=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' \
              "/proc/${PIDS[$n]}/stat")
done
elapsed=$(awk -v ns="$(( $(now_ns) - t0 ))" 'BEGIN { printf "%.1f", ns / 1e9 }')
admin counts >"$WORK/counts.json"
# Tries that fit in the time measured: the first at once, then one per
# back-off wait at its shortest (half of 250 ms, 500 ms, ... up to 60 s).
BUDGET=$(awk -v t="$elapsed" 'BEGIN { d = 0.25; n = 1
    for (s = d / 2; s <= t; s += d / 2) { n++; d = d * 2 > 60 ? 60 : d * 2 }
    print n }')
get() { python3 -c 'import json, sys
print(json.load(open(sys.argv[1])).get(sys.argv[2], {}).get(sys.argv[3], 0))' \
    "$WORK/counts.json" "$1" "$2"; }

echo "  over ${elapsed} s (back-off budget: ${BUDGET} tries):"
printf '  %-17s %6s %8s %9s %8s\n' node lists watches "peak MiB" "CPU s"
for n in quiet "${FAULTS[@]}"; do
    printf '  %-17s %6s %8s %9s %8s\n' "$n" "$(get "$n" lists)" "$(get "$n" watches)" \
        "${RSS[$n]}" "${CPU[$n]}"
done
ok=1
expect() { # node what lowest highest
    local v; v=$(get "$1" "$2")
    if [ "$v" -lt "$3" ] || [ "$v" -gt "$4" ]; then
        echo "FAIL: $1: $v $2, not $3 to $4" >&2; tail -n 5 "$WORK/watcher-$1.log" >&2; ok=
    fi
}
expect quiet lists 1 1
expect quiet watches 1 1
expect server-timeout lists 1 1
expect server-timeout watches 1 "$(awk -v t="$elapsed" 'BEGIN { print 1 + int(t / 35) }')"
expect gone-status lists 2 "$BUDGET"
expect gone-status watches 2 "$BUDGET"
expect gone-event lists 2 "$BUDGET"
expect gone-event watches 2 "$BUDGET"
expect empty-watch lists 1 1
expect empty-watch watches 2 "$BUDGET"
expect endless-continue lists $(( 2 * LIST_PAGES_MAX )) $(( BUDGET * LIST_PAGES_MAX ))
expect endless-continue watches 0 0
expect huge-list lists 2 "$BUDGET"
expect huge-list watches 0 0
expect endless-line lists 1 1
expect endless-line watches 2 "$BUDGET"
[ -n "$ok" ] || fail "requests over the budget (or the fault never seen)"

[ "$(wlog_count quiet "told of")" = 2 ] || fail_w quiet "the watcher re-sent its list unasked"
log_has_at_least "sent no request for" 1 && fail "the scheduler closed the watcher's idle connection"
wlog_has endless-continue "more than $LIST_PAGES_MAX pages of 250" 1 ||
    fail_w endless-continue "no error line for the endless list"
wlog_has huge-list "an answer over 16 MiB: refused" 1 || fail_w huge-list "no error line for the huge list"
wlog_has endless-line "a watch event (a line) over 8 MiB: refused" 1 ||
    fail_w endless-line "no error line for the endless line"
for n in huge-list endless-line; do
    [ "${RSS[$n]}" -le "$RSS_MAX_MIB" ] || fail_w "$n" "$n: peak memory ${RSS[$n]} MiB"
done
check "${CPU[endless-line]} < $PERIOD / 4" "the endless line took ${CPU[endless-line]} s of CPU"
pass "quiet: 1 list, 1 watch in ${elapsed} s, restart re-sent in ${resync_ms} ms; faults within ${BUDGET} tries, peak memory under ${RSS_MAX_MIB} MiB"
