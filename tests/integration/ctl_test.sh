#!/usr/bin/env bash
# ctl_test.sh SCHEDULER NVSHARECTL - nvsharectl against a real scheduler.
#
# Starts nvshare-scheduler in a temporary socket directory with two
# configured GPUs and checks every nvsharectl command: the table and JSON
# views (JSON keys against the example in docs/nvsharectl.md), settings and
# the scheduler's refusals, usage errors (exit 2), an absent scheduler and a
# silent one (exit 1). Where python3 is available, fake clients speaking the
# wire protocol hold and queue for a GPU, with hostile pod names, to check
# running clients, queues and wait reasons, load, swaps, draining, escaping
# and terminal sanitizing; then the scheduling mode and switch time settings.
set -euo pipefail

SCHED_BIN=$1
CTL_BIN=$2
DOC=$(cd "$(dirname "$0")/../.." && pwd)/docs/nvsharectl.md
WORK=$(mktemp -d /tmp/nvshare-ctl-test.XXXXXX)
SOCK_DIR=$WORK/sock
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; [ -f "$WORK/out" ] && sed 's/^/  out: /' "$WORK/out" >&2
         [ -f "$WORK/err" ] && sed 's/^/  err: /' "$WORK/err" >&2
         [ -f "$WORK/sched.log" ] && tail -n 20 "$WORK/sched.log" >&2; exit 1; }
pass() { echo "PASS: $*"; }

# wait_for CMD...: polls CMD every 20 ms for up to 10 s.
wait_for() {
    local deadline=$(( $(date +%s) + 10 ))
    until "$@"; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.02
    done
}

# ctl ARGS...: runs nvsharectl against the test scheduler; stdout in
# $WORK/out, stderr in $WORK/err, exit status in $RC.
ctl() { RC=0; NVSHARE_SOCK_DIR=$SOCK_DIR "$CTL_BIN" "$@" >"$WORK/out" 2>"$WORK/err" || RC=$?; }
expect_rc() { [ "$RC" -eq "$1" ] || fail "$2: exit status $RC, expected $1"; }
out_has() { grep -qF -- "$1" "$WORK/out" || fail "stdout lacks '$1'"; }
err_has() { grep -qF -- "$1" "$WORK/err" || fail "stderr lacks '$1'"; }

HAVE_PY=0
if command -v python3 >/dev/null && python3 -c 'import json, socket, struct' 2>/dev/null; then
    HAVE_PY=1
else
    echo "SKIP: python3 not found: JSON validation and fake-client checks are skipped"
fi

# doc_keys JSON [exact]: every key path in JSON appears in the example in
# docs/nvsharectl.md (and, with "exact", every documented one in JSON but
# the fields of items of lists that JSON leaves empty). The settings' names
# are keys too, as settings.*: the example shows a few of them, and a new
# setting is one row of settings.def, not one of the example as well.
doc_keys() {
    python3 - "$1" "$DOC" "${2:-}" <<'PY'
import json, re, sys
empty = set()
def keys(v, path=""):
    out = set()
    if isinstance(v, dict):
        for k, x in v.items():
            k = "*" if path == "settings." else k
            out |= {path + k} | keys(x, path + k + ".")
    elif isinstance(v, list) and v:
        out |= keys(v[0], path + "[].")
    elif isinstance(v, list):
        empty.add(path + "[].")
    return out
have = keys(json.load(open(sys.argv[1])))
in_empty = lambda k: any(k.startswith(e) for e in empty)
text = open(sys.argv[2]).read()
m = re.search(r"<!-- status-json-example -->\s*```json\n(.*?)```", text, re.S)
documented = keys(json.loads(m.group(1)))
assert have <= documented, f"not in the documented example: {sorted(have - documented)}"
if sys.argv[3] == "exact":
    missing = {k for k in documented - have if not in_empty(k)}
    assert not missing and have <= documented, f"documented but not printed: {sorted(missing)}"
PY
}

# ---- start the scheduler ----------------------------------------------------
# Idle clients are swapped out at once: the fake clients' swaps below
# follow each other without waiting out idle-swap-after.
NVSHARE_SOCK_DIR=$SOCK_DIR NVSHARE_GPUS=GPU-test-0:16384,GPU-test-1:8192 \
    NVSHARE_TQ=2s NVSHARE_IDLE_SWAP_AFTER=0 "$SCHED_BIN" >"$WORK/sched.log" 2>&1 &
PIDS+=($!)
wait_for test -S "$SOCK_DIR/control.sock" || fail "the scheduler did not create its control socket"

# ---- status -------------------------------------------------------------------
ctl status
expect_rc 0 "status"
out_has "TQ 2s"
out_has "anti-thrash on"
out_has "GPU-test-0"
out_has "GPU-test-1"
out_has "16.00 GiB"
out_has "8.00 GiB"
out_has "clients 0"
out_has "switch time auto (swap time x 30)   memory reserve 10%   oversubscription on by default"
out_has "GPU 0  GPU-test-0  configured by NVSHARE_GPUS"
out_has "  mode         auto"
out_has "  memory       16.00 GiB capacity, 1.60 GiB reserve, 0 B running, 0 B resident"
out_has "  quantum      2s (pinned)"
out_has "  switch time  1m00s (not measured yet), 0 switches"
out_has "  swaps        none"
out_has "  running      none"
out_has "  waiting      none"
out_has "no clients registered"
pass "status shows both GPUs, TQ 2s and the memory-aware settings"

ctl --sock-dir "$SOCK_DIR" status
expect_rc 0 "status with --sock-dir"
NVSHARE_SOCK_DIR=/nonexistent "$CTL_BIN" status --sock-dir "$SOCK_DIR" >/dev/null \
    || fail "--sock-dir after the command"
pass "--sock-dir before and after the command"

# ---- status --json ------------------------------------------------------------
ctl status --json
expect_rc 0 "status --json"
cp "$WORK/out" "$WORK/status.json"
if [ "$HAVE_PY" = 1 ]; then
    python3 -m json.tool "$WORK/status.json" >/dev/null || fail "status --json is not valid JSON"
    python3 - "$WORK/status.json" "$DOC" <<'PY' || fail "status --json fields"
import json, re, sys
doc = json.load(open(sys.argv[1]))
assert doc["schema_version"] == 2
n = doc["node"]
assert n["tq_ns"] == 2_000_000_000 and n["anti_thrash"] is True
assert n["gpu_count"] == 2 and n["client_count"] == 0 and n["uptime_ns"] > 0
assert n["switch_time_fixed_ns"] is None and n["switch_multiplier"] == 30, n
assert n["reserve_percent"] == 10 and n["oversub_default"] is True, n
g = doc["gpus"]
assert [x["uuid"] for x in g] == ["GPU-test-0", "GPU-test-1"]
assert [x["index"] for x in g] == [0, 1]
assert g[0]["memory_total_bytes"] == 16384 << 20 and g[1]["memory_total_bytes"] == 8192 << 20
assert g[0]["reserve_bytes"] == (16384 << 20) // 100 * 10, g[0]
nothing = {"count": 0, "bytes": 0, "total_ns": 0, "last_ns": 0}
for x in g:
    assert x["mode"] == "auto" and x["switches"] == 0, x
    assert x["running_footprint_bytes"] == 0 and x["resident_bytes"] == 0, x
    assert x["switch_time_ns"] == 60_000_000_000 and x["switch_time_measured"] is False, x
    assert x["swaps"] == {"out": nothing, "in": nothing}, x
    assert x["running_client_ids"] == [] and x["waiting"] == [], x
    assert x["waiting_truncated"] == 0 and x["waiting_client_ids"] == [], x
    assert "holder_client_id" not in x and "draining" not in x, x
assert doc["clients"] == []
PY
    doc_keys "$WORK/status.json" || fail "status --json fields against docs/nvsharectl.md"
    pass "status --json is valid JSON with the documented fields"
fi

# ---- set mode serial (the fake clients below take turns) ---------------------
ctl set mode serial
expect_rc 0 "set mode serial"
out_has "scheduling mode serial on every GPU"
ctl status
[ "$(grep -c '^  mode         serial$' "$WORK/out")" -eq 2 ] || fail "both GPUs should be serial"
pass "set mode serial on every GPU"

# ---- fake clients: running, queue, load, swaps, draining, hostile names ------
if [ "$HAVE_PY" = 1 ]; then
    cat >"$WORK/fake_clients.py" <<'PY'
# Two clients on GPU-test-0: A (oversubscribed) holds the lock and never
# releases it, reports a load of 23.4 % and one swap each way; B waits.
# The swaps are real: the scheduler counts only those it asked for. A runs
# with 1 GiB of managed memory and goes idle; C, oversubscribed too, needs
# 13 GiB, which does not fit beside it, so A is evicted (SWAPPED out) and C
# runs, then leaves; A gets the GPU back (SWAPPED in) and frees its memory;
# B queues behind it.
# A's names contain JSON metacharacters and broken UTF-8 (a terminal escape
# would be refused at registration).
import os, socket, struct, sys, time
sock_dir, ready = sys.argv[1], sys.argv[2]
GiB = 1 << 30
def frame(t, payload): body = struct.pack("<HH", 1, t) + payload; return struct.pack("<I", len(body)) + body
def s(b): return struct.pack("<H", len(b)) + b
def recv(c):
    n = struct.unpack("<I", c.recv(4, socket.MSG_WAITALL))[0]
    body = c.recv(n, socket.MSG_WAITALL); return struct.unpack("<HH", body[:4])[1], body[4:]
def until(c, t):  # the payload of the next message of type t
    while True:
        typ, payload = recv(c)
        if typ == t: return payload
def lease(payload): return struct.unpack("<I", payload[1:5])[0]
def lock(t, lease=0): return frame(t, struct.pack("<BIQQ", 0, lease, 0, 0))
def mem(t, seq=0, nbytes=0, allocated=0, evictable=0):
    return frame(t, struct.pack("<BIQQQQQQ", 0, seq, nbytes, 0, allocated, evictable, 0, 0))
def client(ns, pod, ctr, oversub):
    c = socket.socket(socket.AF_UNIX); c.connect(os.path.join(sock_dir, "scheduler.sock"))
    c.sendall(frame(1, struct.pack("<I", os.getpid()) + s(ns) + s(pod) + s(ctr) + s(b"") +
                    struct.pack("<QBBH", 0, 0, oversub, 1) + s(b"GPU-test-0") + b"\x00"))
    assert recv(c)[0] == 2, "no REGISTER_OK"
    return c
a = client(b'team "a"\\x', b"pod-[31mred\xff-\xc3\xa9", b"main", 1)
b = client(b"default", b"pod-b", b"", 2)
c = client(b"default", b"pod-c", b"", 1)
a.sendall(mem(20, allocated=GiB, evictable=GiB))                  # MEM_UPDATE
a.sendall(lock(5))                                                # REQ_LOCK
a.sendall(lock(8, lease(until(a, 6))))                            # LOCK_OK, LOCK_RELEASED
c.sendall(mem(20, allocated=13 * GiB, evictable=13 * GiB))
c.sendall(lock(5))
until(a, 29)                                                      # EVICT
a.sendall(frame(30, struct.pack("<BBQQ", 0, 1, GiB, 1_020_000_000)))  # SWAPPED out
until(c, 6)
c.close()
a.sendall(lock(5))
until(a, 6)
a.sendall(frame(30, struct.pack("<BBQQ", 0, 2, GiB, 270_000_000)))   # SWAPPED in
a.sendall(mem(27, nbytes=GiB))                                    # MEM_RETURN: frees it
b.sendall(lock(5))
a.sendall(frame(31, struct.pack("<BHQ", 0, 234, 1_000_000_000)))  # LOAD
time.sleep(0.1)  # lets B's REQ_LOCK be queued before we report ready
open(ready, "w").close()
time.sleep(3600)
PY
    python3 "$WORK/fake_clients.py" "$SOCK_DIR" "$WORK/ready" >"$WORK/fake.log" 2>&1 &
    PIDS+=($!)
    wait_for test -e "$WORK/ready" || { cat "$WORK/fake.log" >&2; fail "fake clients did not start"; }
    wait_for eval 'ctl status; grep -q "clients 2" "$WORK/out"' || fail "status does not count 2 clients"
    ctl status
    grep -q $'\033' "$WORK/out" && fail "a pod name put an escape sequence on the terminal"
    POD_A='team "a"\\x/pod-\[31mred\?-é'
    grep -qE "^  running      1 $POD_A\$" "$WORK/out" || fail "GPU 0: client 1 running, with its pod"
    out_has "  waiting      2 default/pod-b (lock)"
    out_has "  swaps        1 out (1.00 GiB, last 1.02s), 1 in (1.00 GiB, last 270ms)"
    [ "$(grep -c '^  running      none$' "$WORK/out")" -eq 1 ] || fail "GPU 1 runs nobody"
    grep -qE "^1 +[0-9]+ +$POD_A +main +0 +normal +holding +23% " "$WORK/out" || fail "client 1 row"
    grep -qE '^2 +[0-9]+ +default/pod-b +- +0 +normal +waiting:lock +- ' "$WORK/out" || fail "client 2 row"
    grep -qE '^CLIENT +GPU +LIMIT +USED/WINDOW +FOOTPRINT +EVICTABLE +NON-EVICTABLE +ALLOCATED +FLAGS +POD MEM$' "$WORK/out" \
        || fail "the limits and memory table"
    grep -qE '^1 +0 +- .* oversub +0 B \(peak 1.00 GiB\)$' "$WORK/out" || fail "client 1 memory row"
    grep -qE '^2 +0 +- .* B +oversub +0 B \(peak 0 B\)$' "$WORK/out" || fail "client 2 memory row"
    awk 'length > 120 && !/pod-/ { exit 1 }' "$WORK/out" || fail "a line without names is over 120 columns"
    pass "status shows running clients, the queue with reasons, load, swaps and sanitized names"

    ctl status --json
    python3 - "$WORK/out" <<'PY' || fail "status --json with clients"
import json, sys
doc = json.load(open(sys.argv[1]))
g0, g1 = doc["gpus"]
assert g0["mode"] == "serial" and g0["running_client_ids"] == [1], g0
assert g0["waiting"] == [{"client_id": 2, "reason": "lock"}] and g0["waiting_truncated"] == 0, g0
assert g0["waiting_client_ids"] == [2], g0
assert g0["swaps"]["out"] == {"count": 1, "bytes": 1 << 30, "total_ns": 1_020_000_000,
                              "last_ns": 1_020_000_000}, g0
assert g0["swaps"]["in"] == {"count": 1, "bytes": 1 << 30, "total_ns": 270_000_000,
                             "last_ns": 270_000_000}, g0
assert g1["running_client_ids"] == [] and g1["waiting"] == [], g1
a, b = doc["clients"]
assert a["namespace"] == 'team "a"\\x', a
assert a["pod"] == "pod-[31mred\ufffd-\u00e9", a
assert a["state"] == "holding" and a["grants"] == 2 and a["gpu_uuid"] == "GPU-test-0"
assert a["load_percent"] == 23.4 and a["wait_reason"] is None, a
assert a["oversubscribed"] is True and a["swapped_out"] is False, a
assert a["evictable_bytes"] + a["non_evictable_bytes"] == a["footprint_bytes"], a
assert g0["running_footprint_bytes"] == a["footprint_bytes"], (g0, a)
assert a["swap_outs"] == 1 and a["swap_ins"] == 1 and a["parked_bytes"] == 0, a
assert a["resident_bytes"] == a["footprint_bytes"] and a["idle_ns"] == 0, a
assert a["idle_swap"] is True and a["idle_swap_source"] == "none" and a["wait_why"] is None, a
assert b["state"] == "waiting" and b["wait_ns"] > 0 and b["container"] == ""
assert b["wait_reason"] == "lock" and b["load_percent"] is None and b["oversubscribed"] is True, b
PY
    doc_keys "$WORK/out" exact || fail "status --json fields against docs/nvsharectl.md"
    pass "status --json escapes names and lists holder and queue"
fi

# ---- set tq -------------------------------------------------------------------
ctl set tq 100ms
expect_rc 0 "set tq 100ms"
out_has "time quantum pinned at 100ms"
ctl status
out_has "TQ 100ms"
pass "set tq 100ms"

if [ "$HAVE_PY" = 1 ]; then
    # A never answers DROP_LOCK: once its 100 ms are up it is draining.
    wait_for eval 'ctl status; grep -qE "^  running      1 .* \(draining\)$" "$WORK/out"' \
        || fail "the holder is not shown draining after TQ ran out"
    grep -qE '^1 .* draining ' "$WORK/out" || fail "client 1 is not shown draining"
    pass "a holder past its TQ with a waiter is shown draining"
fi

ctl set tq 0s
expect_rc 2 "set tq 0s"
err_has "nvsharectl: duration '0s' must be greater than zero"
err_has "usage: nvsharectl set tq <duration>"
ctl set tq 500
expect_rc 2 "set tq 500"
err_has "nvsharectl: duration '500' needs a unit: ns, us, ms, s, m or h, e.g. 500ms, 2s"
# The usage error shows the synopsis of the setting given, not all nine.
synopses=$(grep -c '^\(usage:\|      \) nvsharectl set' "$WORK/err" || true)
[ "$synopses" = 1 ] || fail "set tq's usage error shows $synopses synopses"
ctl set memory-limit team/job 4GB
expect_rc 2 "set memory-limit 4GB"
err_has "unknown unit 'GB': Kubernetes quantities: 4G = 4x10^9 bytes, 4Gi = 4x2^30 bytes"
err_has "usage: nvsharectl set memory-limit <pod"
ctl set tq abc
expect_rc 2 "set tq abc"
err_has "nvsharectl: invalid duration 'abc'"
ctl set tq 4x
expect_rc 2 "set tq 4x"
err_has "nvsharectl: invalid duration '4x': unknown unit 'x'"
ctl set tq 2h
expect_rc 1 "set tq 2h"
err_has "nvsharectl: time quantum must be between 1ms and 1h"
ctl set tq
expect_rc 2 "set tq without a value"
ctl status
out_has "TQ 100ms"
pass "bad and refused TQs: exit 2 locally, exit 1 from the scheduler, TQ unchanged"

ctl set tq auto
expect_rc 0 "set tq auto"
out_has "time quantum auto: per GPU, 100 x its mean hand-over, within 100ms-30s"
ctl status
out_has "TQ auto"
out_has "  quantum      100ms (auto: floor"
ctl status --json
grep -q '"tq_reason": "floor"' "$WORK/out" || fail "status --json lacks the quantum's reason"
ctl set tq 100ms
expect_rc 0 "set tq 100ms again"
pass "set tq auto returns to the default; status shows each GPU's quantum and why"

# ---- anti-thrash ----------------------------------------------------------------
ctl anti-thrash off
expect_rc 0 "anti-thrash off"
out_has "anti-thrashing off"
ctl status
out_has "anti-thrash off"
ctl set anti-thrash on
expect_rc 0 "set anti-thrash on"
ctl status
out_has "anti-thrash on"
ctl anti-thrash maybe
expect_rc 2 "anti-thrash maybe"
err_has "expected on or off"
pass "anti-thrash off/on"

# ---- set mode -------------------------------------------------------------------
# mode_is MODE0 MODE1: status --json shows these modes for GPU 0 and 1.
mode_is() {
    ctl status --json
    [ "$(grep -o '"mode": "[a-z]*"' "$WORK/out" | sed 's/.*: "//; s/"$//' | xargs)" = "$*" ] \
        || fail "status --json modes, expected $*"
}
ctl set mode concurrent
expect_rc 0 "set mode concurrent"
out_has "scheduling mode concurrent on every GPU"
mode_is concurrent concurrent
ctl status
[ "$(grep -c '^  mode         concurrent$' "$WORK/out")" -eq 2 ] || fail "table: both GPUs concurrent"
ctl set mode serial --gpu 1
expect_rc 0 "set mode serial --gpu 1"
out_has "scheduling mode serial on gpu 1"
mode_is concurrent serial
ctl set mode --gpu=GPU-test-1 auto
expect_rc 0 "set mode --gpu=GPU-test-1 auto"
out_has "scheduling mode auto on gpu 1"
mode_is concurrent auto
ctl set --gpu 0 mode serial
expect_rc 0 "set --gpu 0 mode serial"
mode_is serial auto
ctl set mode bogus
expect_rc 2 "set mode bogus"
err_has "nvsharectl: unknown mode 'bogus' (serial, concurrent or auto)"
err_has "usage: nvsharectl set"
ctl set mode
expect_rc 2 "set mode without a mode"
ctl set mode auto --gpu
expect_rc 2 "set mode --gpu without a value"
err_has "option '--gpu' needs a GPU index or UUID"
ctl set mode auto --gpu 7
expect_rc 1 "set mode auto --gpu 7"
err_has "nvsharectl: no GPU '7'"
ctl set mode auto --gpu GPU-nope
expect_rc 1 "set mode auto --gpu GPU-nope"
ctl set tq 1s --gpu 0
expect_rc 2 "set tq --gpu"
err_has "option '--gpu' applies to 'set mode, set core-limit or set memory-limit' only"
mode_is serial auto
pass "set mode on every GPU and on one (index or UUID); bad modes and GPUs refused"

# ---- set switch-time ------------------------------------------------------------
ctl set switch-time 45s
expect_rc 0 "set switch-time 45s"
out_has "switch time 45s"
ctl status
out_has "switch time 45s (fixed)   memory reserve 10%"
[ "$(grep -c '^  switch time  45s (fixed), ' "$WORK/out")" -eq 2 ] || fail "table: both GPUs 45s (fixed)"
ctl status --json
if [ "$HAVE_PY" = 1 ]; then
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
assert d["node"]["switch_time_fixed_ns"] == 45_000_000_000, d["node"]
assert all(g["switch_time_ns"] == 45_000_000_000 and not g["switch_time_measured"] for g in d["gpus"])' \
        "$WORK/out" || fail "status --json: fixed switch time"
else
    out_has '"switch_time_fixed_ns": 45000000000'
fi
ctl set switch-time auto
expect_rc 0 "set switch-time auto"
out_has "switch time auto"
ctl status
out_has "switch time auto (swap time x 30)"
ctl status --json
out_has '"switch_time_fixed_ns": null'
ctl set switch-time 10ms
expect_rc 1 "set switch-time 10ms"
err_has "nvsharectl: switch time must be between 100ms and 1h, or auto"
ctl set switch-time 4x
expect_rc 2 "set switch-time 4x"
err_has "nvsharectl: switch time: invalid duration '4x': unknown unit 'x'"
ctl set switch-time 0
expect_rc 2 "set switch-time 0"
ctl set switch-time
expect_rc 2 "set switch-time without a value"
ctl status
out_has "switch time auto (swap time x 30)"
pass "set switch-time 45s and auto; bad values refused"

# ---- set priority, set min-share ------------------------------------------------
ctl set priority ml/service high
expect_rc 0 "set priority high"
out_has "priority of ml/service set to high (not connected)"
ctl set priority ml/batch 7
out_has "priority of ml/batch set to 7 (not connected)"
ctl set min-share ml/batch 10
out_has "min share of ml/batch set to 10% (not connected)"
ctl set priority ml/service urgent
expect_rc 2 "set priority urgent"
err_has "nvsharectl: priority must be high, normal, low or a class 1-9 (9 highest), not 'urgent' (or none)"
ctl set priority ml/service 10
expect_rc 2 "set priority 10"
ctl set min-share ml/batch 101
expect_rc 2 "set min-share 101"
ctl status --json
python3 - "$WORK/out" <<'PY' || fail "pods with a priority or a floor in status --json"
import json, sys
pods = {p["pod"]: p for p in json.load(open(sys.argv[1]))["pods"]}
assert pods["service"]["priority_class"] == 3 and pods["service"]["min_share_percent"] == 0, pods
assert pods["batch"]["priority_class"] == 7 and pods["batch"]["min_share_percent"] == 10, pods
PY
ctl status
grep -qE '^ml/service +- +- +- +high +- +- +0$' "$WORK/out" || fail "the pod table shows ml/service high"
ctl set priority ml/service none
out_has "priority of ml/service removed"
ctl set min-share ml/batch none
ctl set priority ml/batch none
pass "set priority and min-share, before the pod connects; bad values refused"

# ---- set idle-swap ----------------------------------------------------------------
ctl set idle-swap ml/notebook off
expect_rc 0 "set idle-swap off"
out_has "idle swap of ml/notebook set to off (not connected); with no owner named, only root's processes get it (nvsharectl set owner)"
ctl set idle-swap ml/notebook sometimes
expect_rc 2 "set idle-swap sometimes"
err_has "idle swap: off, on or none, not 'sometimes'"
ctl status --json
python3 - "$WORK/out" <<'PY' || fail "a pod with idle-swap off in status --json"
import json, sys
pods = {p["pod"]: p for p in json.load(open(sys.argv[1]))["pods"]}
assert pods["notebook"]["idle_swap"] == "off" and pods["notebook"]["annotation_idle_swap"] == "", pods
PY
ctl status
grep -qE '^ml/notebook +- +- +- +- +- +off +0$' "$WORK/out" || fail "the pod table shows ml/notebook off"
ctl set idle-swap ml/notebook none
out_has "idle swap of ml/notebook removed"
pass "set idle-swap off before the pod connects, and none; bad values refused"

# ---- set core-limit|memory-limit --gpu --------------------------------------------
ctl set core-limit ml/claims 30
ctl set core-limit ml/claims 25 --gpu 0
expect_rc 0 "set core-limit --gpu 0"
out_has "core limit of ml/claims on gpu 0 set to 25% (not connected)"
ctl set memory-limit ml/claims 2Gi --gpu 1
expect_rc 0 "set memory-limit --gpu 1"
ctl set core-limit ml/claims 10 --gpu 7
expect_rc 1 "set core-limit --gpu 7"
err_has "no GPU '7'"
ctl set priority ml/claims high --gpu 0
expect_rc 2 "set priority --gpu"
ctl status --json
python3 - "$WORK/out" <<'PY' || fail "a pod's limits per GPU in status --json"
import json, sys
pods = {p["pod"]: p for p in json.load(open(sys.argv[1]))["pods"]}
p = pods["claims"]
assert p["core_limit"] == 30 and p["memory_limit_bytes"] == 0, p
assert p["gpu_limits"] == [{"gpu": 0, "core_limit": 25, "memory_limit_bytes": 0},
                           {"gpu": 1, "core_limit": 0, "memory_limit_bytes": 2 << 30}], p
PY
ctl status
grep -qE '^ml/claims +- +30% gpu0:25% +gpu1:2.00 GiB ' "$WORK/out" || fail "the pod table shows ml/claims per GPU"
ctl set core-limit ml/claims none --gpu 0
ctl set memory-limit ml/claims none --gpu 1
ctl set core-limit ml/claims none
out_has "core limit of ml/claims removed"
pass "set core-limit and memory-limit on one GPU, shown per GPU; other settings and GPUs refused"

# ---- set owner ------------------------------------------------------------------
ctl set priority ml/vip high
out_has "priority of ml/vip set to high (not connected); with no owner named, only root's processes get it (nvsharectl set owner)"
ctl set owner ml/vip 4242
expect_rc 0 "set owner 4242"
out_has "owner of ml/vip set to uid 4242 (not connected): other uids' processes (root's aside) are billed on their own"
ctl status --json
python3 - "$WORK/out" <<'PY' || fail "the owner in status --json"
import json, sys
pods = {p["pod"]: p for p in json.load(open(sys.argv[1]))["pods"]}
assert pods["vip"]["owner_uid"] == 4242, pods
PY
if getent passwd nobody >/dev/null; then
    ctl set owner ml/vip nobody
    out_has "owner of ml/vip set to uid $(id -u nobody)"
fi
ctl set owner ml/vip root
expect_rc 2 "set owner root"
err_has "owner: root's processes may join any pod; name the user that runs it"
ctl set owner ml/vip no-such-user-27
expect_rc 2 "set owner of an unknown user"
err_has "owner: no user 'no-such-user-27' on this host"
ctl set owner uid:6f1e2d3c 1000
expect_rc 1 "set owner of a Kubernetes pod"
err_has "uid:6f1e2d3c has no owner to name: a Kubernetes pod is its cgroup's"
ctl set owner ml/vip none
out_has "owner of ml/vip removed"
ctl set priority ml/vip none
pass "set owner by name or uid; root, unknown users and Kubernetes pods refused"

# ---- watch --------------------------------------------------------------------
ctl watch --interval 100ms --count 3
expect_rc 0 "watch --count 3"
[ "$(grep -c '^Every 100ms' "$WORK/out")" -eq 3 ] || fail "watch did not draw 3 frames"
grep -q $'\033' "$WORK/out" && fail "watch cleared the screen of a non-terminal"
NVSHARE_SOCK_DIR=$SOCK_DIR "$CTL_BIN" watch --interval 100ms >"$WORK/watch.out" 2>&1 &
WATCH_PID=$!
wait_for grep -q "TQ 100ms" "$WORK/watch.out" || fail "watch drew nothing"
kill -INT "$WATCH_PID"
RC=0; wait "$WATCH_PID" || RC=$?
expect_rc 0 "watch after Ctrl-C"
ctl watch --interval 10ms
expect_rc 2 "watch --interval 10ms"
pass "watch redraws, plain when not a terminal, and ends on Ctrl-C"

# ---- usage ----------------------------------------------------------------------
for args in "--help" "-h" "help" "status --help" "set --help" "watch -h" \
            "anti-thrash --help" "help set"; do
    # shellcheck disable=SC2086
    ctl $args
    expect_rc 0 "nvsharectl $args"
    out_has "usage: nvsharectl"
done
ctl --version
expect_rc 0 "--version"
out_has "nvsharectl "
for args in "frobnicate" "" "status --bogus" "status extra" "set" "set foo 1" \
            "set mode" "set mode bogus" "set mode auto extra" "set switch-time" \
            "--timeout" "--timeout 0 status" "--sock-dir"; do
    # shellcheck disable=SC2086
    ctl $args
    expect_rc 2 "nvsharectl $args"
    err_has "usage: nvsharectl"
done
ctl frobnicate
err_has "nvsharectl: unknown command 'frobnicate'"
ctl help set
out_has "nvsharectl set mode serial|concurrent|auto [--gpu INDEX|UUID]"
out_has "nvsharectl set switch-time <duration>|auto"
ctl --help
out_has "set mode MODE [--gpu G]"
out_has "set switch-time D|auto"
pass "help and usage errors (exit 2)"

# ---- no scheduler, silent scheduler ---------------------------------------------
mkdir "$WORK/empty"
RC=0; NVSHARE_SOCK_DIR=$WORK/empty "$CTL_BIN" status >"$WORK/out" 2>"$WORK/err" || RC=$?
expect_rc 1 "status without a scheduler"
err_has "nvsharectl: cannot reach the scheduler at $WORK/empty/control.sock: "
err_has "is nvshare-scheduler running? NVSHARE_SOCK_DIR=$WORK/empty"
ctl --sock-dir "$WORK/empty" set tq 1s
expect_rc 1 "set without a scheduler"
err_has "cannot reach the scheduler"
pass "no scheduler: exit 1, 'cannot reach'"

if [ "$HAVE_PY" = 1 ]; then
    mkdir "$WORK/silent"
    python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
open(sys.argv[2], "w").close()
conns = []
while True: conns.append(s.accept()[0])
' "$WORK/silent/control.sock" "$WORK/silent/ready" &
    PIDS+=($!)
    wait_for test -e "$WORK/silent/ready" || fail "silent server did not start"
    ctl --sock-dir "$WORK/silent" --timeout 300ms status
    expect_rc 1 "status against a silent scheduler"
    err_has "did not answer within 300 ms"
    pass "a scheduler that does not answer: exit 1 after the timeout"
fi

kill -0 "${PIDS[0]}" || fail "the scheduler died"
echo "ALL PASS"
