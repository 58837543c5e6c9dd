#!/usr/bin/env bash
# Pod memory quotas arbitrated by the scheduler: two processes of one pod
# racing at the boundary 1000 times never hold more than the quota
# together; a killed process's bytes come back; run-time changes with
# nvsharectl apply to the next allocation and never revoke; status shows the
# pod's quota, usage, peak and refusals.
source "$(dirname "$0")/lib.sh" "$1" "$2"
ALLOC_BIN=$2
CTL_BIN=$3
ctl() { "$CTL_BIN" "$@"; }
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
export NVSHARE_POD_NAMESPACE=team NVSHARE_POD_NAME=trainer

# 1. Race: quota 1000 MiB, each process asks for 600 MiB 1000 times, both
# starting at the same instant and holding each grant for 1 ms.
go=$(( $(now_ns) + 1000000000 ))
NVSHARE_GPU_MEMORY_LIMIT=1000Mi "$ALLOC_BIN" GPU-sim-0 race 1000 600 "$WORK/a.trace" "$go" >"$WORK/a.out" & a=$!
NVSHARE_GPU_MEMORY_LIMIT=1000Mi "$ALLOC_BIN" GPU-sim-0 race 1000 600 "$WORK/b.trace" "$go" >"$WORK/b.out" & b=$!
wait "$a" "$b" || fail "a racer failed"
echo "  racer a: $(cat "$WORK/a.out"), racer b: $(cat "$WORK/b.out")"
# The racers ran at the same time: each one's first holding began before
# the other's last one ended.
a_first=$(head -n 1 "$WORK/a.trace" | cut -d' ' -f1); a_last=$(tail -n 1 "$WORK/a.trace" | cut -d' ' -f2)
b_first=$(head -n 1 "$WORK/b.trace" | cut -d' ' -f1); b_last=$(tail -n 1 "$WORK/b.trace" | cut -d' ' -f2)
[ "$a_first" -lt "$b_last" ] && [ "$b_first" -lt "$a_last" ] || fail "the racers did not run at the same time"
refused=$(( $(field refused "$WORK/a.out") + $(field refused "$WORK/b.out") ))
waited=$(( $(field waited "$WORK/a.out") + $(field waited "$WORK/b.out") ))
# Two 600 MiB holdings of different processes must never overlap in time.
overlaps=$( { sed 's/$/ a/' "$WORK/a.trace"; sed 's/$/ b/' "$WORK/b.trace"; } | sort -k1,1n |
    awk '{ if (NR > 1 && $1 < end && $3 != who) bad++; if ($2 > end) { end = $2; who = $3 } } END { print bad + 0 }')
[ "$overlaps" = 0 ] || fail "$overlaps times both processes held 600 MiB of a 1000 MiB quota"
pass "racing processes of one pod never exceed its quota (running together: $refused refused, $waited waited over 1 ms; no overlap)"

# 2. Processes of a pod that start together and allocate at once: the
# first reservations wait for the scheduler instead of each deciding alone.
for i in 1 2 3; do
    NVSHARE_GPU_MEMORY_LIMIT=1000Mi "$ALLOC_BIN" GPU-sim-0 hold 600 1 >"$WORK/start.a" 2>/dev/null &
    p1=$!
    NVSHARE_GPU_MEMORY_LIMIT=1000Mi "$ALLOC_BIN" GPU-sim-0 hold 600 1 >"$WORK/start.b" 2>/dev/null &
    p2=$!
    wait "$p1" "$p2" || true
    held=$(cat "$WORK/start.a" "$WORK/start.b" | grep -c '^held' || true)
    [ "$held" = 1 ] || fail "two processes starting together held $held x 600 MiB of 1000 MiB"
done
pass "processes starting together cannot each take the quota"

# 3. A killed holder's bytes come back to the pod.
NVSHARE_GPU_MEMORY_LIMIT=1000Mi "$ALLOC_BIN" GPU-sim-0 hold 800 60 >"$WORK/hold.out" & holder=$!
wait_for grep -q held "$WORK/hold.out" || fail "holder did not allocate"
out=$(NVSHARE_GPU_MEMORY_LIMIT=1000Mi "$ALLOC_BIN" GPU-sim-0 try 800)
[ "$out" = refused ] || fail "800 MiB granted while another process holds 800 of 1000"
kill -9 "$holder"; wait "$holder" 2>/dev/null || true
out=$(NVSHARE_GPU_MEMORY_LIMIT=1000Mi "$ALLOC_BIN" GPU-sim-0 try 800)
[ "$out" = ok ] || fail "the killed process's memory was not released ($out)"
pass "a killed process's memory is released"

# 3b. The device plugin's default for pods without nvshare.com/gpu-memory
# holds only where NVSHARE_GPU_MEMORY_LIMIT is unset.
[ "$(NVSHARE_GPU_MEMORY_DEFAULT_LIMIT=1000Mi "$ALLOC_BIN" GPU-sim-0 try 1200)" = refused ] ||
    fail "NVSHARE_GPU_MEMORY_DEFAULT_LIMIT not applied"
[ "$(NVSHARE_GPU_MEMORY_DEFAULT_LIMIT=1000Mi NVSHARE_GPU_MEMORY_LIMIT=2000Mi \
     "$ALLOC_BIN" GPU-sim-0 try 1200)" = ok ] ||
    fail "NVSHARE_GPU_MEMORY_DEFAULT_LIMIT overrode NVSHARE_GPU_MEMORY_LIMIT"
pass "NVSHARE_GPU_MEMORY_DEFAULT_LIMIT applies where NVSHARE_GPU_MEMORY_LIMIT is unset"

# 4. Run-time changes by the operator, whose quota the pod's processes do
# not declare: raise, lower below usage (no revocation), remove.
ctl set memory-limit team/trainer 1000Mi >/dev/null
"$ALLOC_BIN" GPU-sim-0 hold 700 60 >"$WORK/hold.out" & holder=$!
wait_for grep -q held "$WORK/hold.out" || fail "holder did not allocate"
[ "$("$ALLOC_BIN" GPU-sim-0 try 400)" = refused ] ||
    fail "the operator's quota did not hold for a process that declares none"
ctl set memory-limit team/trainer 2Gi | grep -q "set to 2.00 GiB" || fail "raise refused"
[ "$("$ALLOC_BIN" GPU-sim-0 try 1000)" = ok ] ||
    fail "raised quota not applied to the next allocation"
# A process declaring more than the operator allows gets the operator's.
[ "$(NVSHARE_GPU_MEMORY_LIMIT=8Gi "$ALLOC_BIN" GPU-sim-0 try 1400)" = refused ] ||
    fail "a declared limit lifted the operator's quota"
ctl set memory-limit team/trainer 512Mi >/dev/null
[ "$("$ALLOC_BIN" GPU-sim-0 try 1)" = refused ] ||
    fail "allocation granted above a lowered quota"
kill -0 "$holder" || fail "lowering the quota hurt the holder"
ctl status | grep -q "512.00 MiB" || fail "status does not show the quota"
ctl status --json >"$WORK/status.json"; grep -q "\"pod_mem_refused\": [1-9]" "$WORK/status.json" || fail "status does not count refusals: $(grep -E "pod_mem_refused|\"pod\"|\"pid\"" "$WORK/status.json" | tr -s " " | tr "\n" " ")"
ctl set memory-limit team/trainer none | grep -q "memory limit of team/trainer removed; its clients declared 8.00 GiB, which holds" ||
    fail "removing the operator's quota"
set +e
ctl set memory-limit team/trainer 4Gx 2>/dev/null; [ $? = 2 ] || fail "bad size accepted"
set -e
kill "$holder"; wait "$holder" 2>/dev/null || true
pass "run-time quota changes apply to the next allocation and revoke nothing"
