#!/usr/bin/env bash
# Processes that escape libnvshare are seen (issue 12, item 7): on one
# shared fake GPU, whose processes the fake NVML lists, a job runs through
# libnvshare and another runs against the fake libcuda without LD_PRELOAD.
# Status must list exactly the second as unhooked, with its pid and its
# memory; the scheduler's log must warn about it exactly once (and never
# about the hooked one), count it, and say once that it went when it exits,
# after which status lists none.
#
# usage: unhooked.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB NVSHARECTL
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4 CTL=$5
source "$(dirname "$0")/lib.sh"
DIR=$WORK/s
LOG=$DIR/sched.log
export FAKE_CUDA_SHARED_GPU=$WORK/gpu LD_LIBRARY_PATH=$FAKE_DIR NVSHARE_SOCK_DIR=$DIR
HOOKED= RAW=
fail() {
    echo "FAIL: $*" >&2
    tail -n 20 "$LOG" >&2
    kill $HOOKED $RAW 2>/dev/null
    exit 1
}

# ---- a quiet node: nothing but the unhooked process ----------------------
# No client, no /metrics, nobody asking: only the sampler's own deadline
# wakes the scheduler. The first look, after 5 s, must list the process.
QUIET=$WORK/quiet
start_scheduler_in "$QUIET"
await_schedulers "$QUIET"
now=$(date +%s%N)
FAKE_JOB_MEM_MB=128 "$JOB" "$now" $((now + 8000000000)) >/dev/null 2>&1 &
RAW=$!
sleep 5 # the quiet itself: any event would wake the sampler
got=$(NVSHARE_SOCK_DIR=$QUIET "$CTL" status --json | python3 -c 'import json, sys
s = json.load(sys.stdin)
print(s["node"]["unhooked_seen"], *(u["pid"] for u in s["unhooked"]))')
[ "$got" = "1 $RAW" ] || { LOG=$QUIET/sched.log; fail "first look after 5 s of quiet: '$got', not '1 $RAW'"; }
grep -q "pid $RAW uses it without nvshare" "$QUIET/sched.log" ||
    { LOG=$QUIET/sched.log; fail "the quiet scheduler did not log pid $RAW"; }
kill "$RAW"; wait "$RAW" 2>/dev/null || true; RAW=
echo "PASS: on a quiet node the unhooked job is listed and logged at the first look after 5 s"

start_scheduler_in "$DIR"
await_schedulers "$DIR"
now=$(date +%s%N)
LD_PRELOAD=$LIB NVSHARE_POD_NAME=hooked "$JOB" "$now" $((now + 30000000000)) >/dev/null 2>&1 &
HOOKED=$!
FAKE_JOB_MEM_MB=256 "$JOB" "$now" $((now + 10000000000)) >/dev/null 2>&1 &
RAW=$!

# "<clients> <unhooked_seen> <pid>:<gpu>:<used>:<origin> ..." from status.
status() {
    "$CTL" status --json | python3 -c 'import json, sys
s = json.load(sys.stdin)
print(len(s["clients"]), s["node"]["unhooked_seen"],
      *("%d:%d:%d:%s" % (u["pid"], u["gpu_index"], u["used_bytes"], u["origin"])
        for u in s["unhooked"]))'
}
want_prefix="1 1 $RAW:0:$((256 << 20)):"
for _ in $(seq 500); do [[ "$(status)" == "$want_prefix"* ]] && break; sleep 0.02; done
got=$(status)
[[ "$got" == "$want_prefix"* ]] && [ "$(wc -w <<<"$got")" -eq 3 ] ||
    fail "status says '$got', not the hooked client and only pid $RAW (256 MiB) unhooked"
"$CTL" status | grep -q "^$RAW  *0  *256" || fail "the table does not list pid $RAW"

# Gone once it exits: nothing listed, the count stays.
wait "$RAW" || fail "the unhooked job failed"
for _ in $(seq 500); do [ "$(status)" = "1 1" ] && break; sleep 0.02; done
[ "$(status)" = "1 1" ] || fail "status says '$(status)' after pid $RAW exited"
kill "$HOOKED"

warned=$(grep -c "warning.*pid $RAW uses it without nvshare" "$LOG" || true)
[ "$warned" -eq 1 ] || fail "$warned warnings for pid $RAW, not 1"
grep -q "pid $HOOKED uses it without nvshare" "$LOG" && fail "the hooked job was called unhooked"
gone=$(grep -c "pid $RAW no longer uses it without nvshare" "$LOG" || true)
[ "$gone" -eq 1 ] || fail "$gone lines saying pid $RAW went, not 1"
echo "PASS: the unhooked job was listed, warned about once, counted, and went"
