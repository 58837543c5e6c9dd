#!/usr/bin/env bash
# Log lines: an RFC 3339 UTC timestamp with milliseconds and a level on every
# line; --log-format json (and NVSHARE_LOG_FORMAT=json) gives one valid JSON
# object per line with time, level, component, pid and msg; 1000 identical
# warnings take a bounded number of lines and say how many were folded; a
# text line stays one line, its control characters escaped; lines charged
# to many uids stay within the budget of all, and none goes uncounted.
#
#   log_format.sh SCHEDULER WORKLOAD LOG_FLOOD
source "$(dirname "$0")/lib.sh"
FLOOD_BIN=$3
STAMP='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'

run_workload() {
    "$WORKLOAD_BIN" GPU-sim-0 $(( $(now_ns) + 300000000 )) >/dev/null 2>&1 ||
        fail "the workload failed"
}

# ---- text: timestamp, component, pid, level on every line -------------------
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
run_workload
stop_scheduler
lines=$(wc -l <"$WORK/sched.log")
[ "$lines" -ge 5 ] || fail "expected several log lines, got $lines"
bad=$(grep -Evc "^$STAMP nvshare\[scheduler [0-9]+\] (error|warning|info|debug): " \
      "$WORK/sched.log" || true)
[ "$bad" = 0 ] || fail "$bad of $lines lines lack the timestamp/level prefix"
grep -q 'registered' "$WORK/sched.log" || fail "the message text changed"
pass "text: all $lines lines are '<RFC 3339 ms UTC> nvshare[scheduler PID] LEVEL: '"

# ---- json: --log-format json ------------------------------------------------
"$SCHED_BIN" --log-format nonsense >/dev/null 2>"$WORK/bad.err" &&
    fail "--log-format nonsense was accepted"
grep -q 'must be text or json' "$WORK/bad.err" || fail "no clear error for a bad format"
NVSHARE_DEBUG=1 NVSHARE_GPUS=GPU-sim-0:16384 "$SCHED_BIN" --log-format json \
    >"$WORK/json.log" 2>&1 &
SCHED_PID=$!
wait_for test -S "$NVSHARE_SOCK_DIR/scheduler.sock" || fail "scheduler did not start"
run_workload
stop_scheduler
python3 - "$WORK/json.log" "$STAMP" <<'PY' || fail "json log lines are not valid"
import json, re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
assert len(lines) >= 5, f"only {len(lines)} lines"
pids = set()
for line in lines:
    o = json.loads(line)
    assert set(o) == {"time", "level", "component", "pid", "msg"}, o
    assert re.fullmatch(sys.argv[2], o["time"]), o["time"]
    assert o["level"] in ("error", "warning", "info", "debug"), o
    assert o["component"] == "scheduler", o
    pids.add(o["pid"])
assert len(pids) == 1, pids
assert any("registered" in json.loads(l)["msg"] for l in lines)
PY
pass "json: every line of the scheduler is a JSON object with the five fields"

NVSHARE_LOG_FORMAT=json "$FLOOD_BIN" 0 2>"$WORK/escape.log"
python3 - "$WORK/escape.log" <<'PY' || fail "escaping: $(cat "$WORK/escape.log")"
import json, sys
o = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
want = 'escapes: "quoted" back\\slash tab\tnew\nline esc\x1b[2J rlo\u202e bad\ufffd byte'
assert o["msg"] == want, repr(o["msg"])
assert o["component"] == "log-flood"
PY
pass "json: quotes, backslashes, control characters and broken UTF-8 escaped"

"$FLOOD_BIN" 0 2>"$WORK/text-escape.log"
[ "$(wc -l <"$WORK/text-escape.log")" = 1 ] ||
    fail "text: a message with a newline took $(wc -l <"$WORK/text-escape.log") lines: $(cat -v "$WORK/text-escape.log")"
grep -Eq "^$STAMP nvshare\[log-flood [0-9]+\] info: " "$WORK/text-escape.log" &&
    grep -qF 'escapes: "quoted" back\slash tab\tnew\nline esc\x1b[2J rlo\u202e bad\xff byte' \
        "$WORK/text-escape.log" || fail "text: not escaped: $(cat -v "$WORK/text-escape.log")"
pass "text: newline, tab, ESC, a bidirectional override and broken UTF-8 escaped in one line"

# ---- rate limit ---------------------------------------------------------------
"$FLOOD_BIN" 1000 2>"$WORK/flood.log"
warnings=$(grep -c 'the same warning again' "$WORK/flood.log" || true)
[ "$warnings" -ge 1 ] && [ "$warnings" -le 3 ] ||
    fail "1000 identical warnings took $warnings lines: $(head -n 5 "$WORK/flood.log")"
grep -Eq "^$STAMP nvshare\[log-flood [0-9]+\] warning: the same warning again \(repeated 999 times in [0-9]+ s\)$" \
    "$WORK/flood.log" || fail "no repeat count: $(cat "$WORK/flood.log")"
pass "1000 identical warnings: $warnings lines, the last with the count"

# ---- lines charged to uids ------------------------------------------------------
# 1000 uids, more than the table holds (64), 30 lines each: the global budget
# (log.h: 200 at once) bounds what is printed, and every line is either
# printed or counted in a report, whichever uid's slot was forgotten.
"$FLOOD_BIN" uids 1000 30 2>"$WORK/uids.log"
python3 - "$WORK/uids.log" <<'PY' || fail "uid budgets: $(tail -n 5 "$WORK/uids.log")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
printed = sum(1 for l in lines if re.search(r"warning: uid \d+: line \d+$", l))
counted = 0
for l in lines:
    m = re.search(r"warning: (?:uid \d+: )?(\d+) lines about (?:its clients|clients of all uids) suppressed", l)
    counted += int(m.group(1)) if m else 0
reports = sum(1 for l in lines if "suppressed in the last" in l)
print(f"  30,000 lines of 1000 uids: {printed} printed, {counted} counted in {reports} report(s), {len(lines)} lines in all")
assert printed <= 210, printed
assert printed + counted == 30000, (printed, counted)
assert reports <= 65, reports
PY
pass "1000 uids x 30 lines: bounded by the budget of all uids, every line printed or counted"
