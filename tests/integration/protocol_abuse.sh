#!/usr/bin/env bash
# Malformed and out-of-order messages close only the offending connection,
# and say why; no name a client declares can forge a log line; one uid
# looping connect, REGISTER, bad message cannot flood the log.
source "$(dirname "$0")/lib.sh" "$1" /dev/null
ABUSE_BIN=$2
STAMP='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
"$ABUSE_BIN" "$NVSHARE_SOCK_DIR" || fail "protocol abuse"
kill -0 "$SCHED_PID" || fail "the scheduler died"
pass "misbehaving clients are disconnected; the daemon carries on"

# ---- forgery: every line is the scheduler's, the name shows escaped -----------
bad=$(grep -Evc "^$STAMP nvshare\[scheduler $SCHED_PID\] (error|warning|info|debug): " \
      "$WORK/sched.log" || true)
[ "$bad" = 0 ] || fail "$bad line(s) not written by the scheduler: $(grep -Ev "^$STAMP nvshare\[scheduler $SCHED_PID\]" "$WORK/sched.log" | head -n 3)"
! grep -Eq "^$STAMP nvshare\[scheduler 1\] error: FORGED" "$WORK/sched.log" ||
    fail "a forged error line: $(grep 'FORGED' "$WORK/sched.log")"
grep -qF 'declares a name with a control character ("x\n2026-11-27T00:00:00.000Z nvshare[scheduler 1] error: FORGED: \x1b[2J"): registration refused' \
    "$WORK/sched.log" || fail "no escaped line for the refused name: $(grep FORGED "$WORK/sched.log")"
pass "a forged pod name is refused, and shows escaped in one line"

# ---- the real reason, not 'out of order' --------------------------------------
grep -qF 'REQ_LOCK names GPU index 5, but it registered 1 GPU(s): disconnecting' \
    "$WORK/sched.log" || fail "a bad GPU index is not logged as such: $(grep 'REQ_LOCK' "$WORK/sched.log")"
! grep -q 'out of order' "$WORK/sched.log" || fail "'out of order' for: $(grep 'out of order' "$WORK/sched.log")"
grep -q 'SWAPPED out of 1073741824 bytes in 1000 ns ignored: no EVICT asked for it' \
    "$WORK/sched.log" || fail "no line for the unsolicited SWAPPED"
pass "a bad GPU index and an unsolicited SWAPPED are logged as what they are"

# ---- flood: one uid, connect + REGISTER + bad message in a loop ---------------
# Budget (log.h): 20 lines at once, then 1 a second, and one line with the
# count per 10 s. 6 s of flood: at most 26 lines and the count; 60 allows
# for a slow machine and the daemon's own lines.
stop_scheduler
mv "$WORK/sched.log" "$WORK/abuse.log"
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_DEBUG=0
lines0=$(wc -l <"$WORK/sched.log")
bytes0=$(wc -c <"$WORK/sched.log")
"$ABUSE_BIN" "$NVSHARE_SOCK_DIR" flood 6 || fail "the flood did not run"
lines=$(( $(wc -l <"$WORK/sched.log") - lines0 ))
bytes=$(( $(wc -c <"$WORK/sched.log") - bytes0 ))
echo "flood: the log grew by $lines lines, $bytes bytes in 6 s"
[ "$lines" -le 60 ] && [ "$bytes" -le 12000 ] ||
    fail "the flood wrote $lines lines, $bytes bytes (at most 60 lines, 12000 bytes)"
# The count comes 10 s after the first line suppressed, without another line.
deadline=$(( $(date +%s) + 20 ))
until grep -Eq 'warning: uid [0-9]+: [0-9]+ lines about its clients suppressed in the last 1[0-9] s' \
        "$WORK/sched.log"; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "no count of the suppressed lines"
    sleep 0.2
done
grep -E 'lines about its clients suppressed' "$WORK/sched.log"
kill -0 "$SCHED_PID" || fail "the scheduler died"
pass "a flood of 6 s wrote $lines lines ($bytes bytes) and one count of what it suppressed"
