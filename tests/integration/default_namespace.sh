#!/usr/bin/env bash
# A pod without a namespace is default/<name>, as in Kubernetes, everywhere:
# a process with NVSHARE_POD_NAME=svc and no namespace and one with
# NVSHARE_POD_NAMESPACE=default are one pod; `set priority svc high` and
# `set core-limit default/svc 30` reach both; status lists one pod,
# default/svc; the state file keeps it as default/svc, and a state file
# written before (pod svc ...) is read as default/svc. Before, the two
# spellings were two pods and each setting reached one process.
source "$(dirname "$0")/lib.sh" "$1" "$2"
CTL_BIN=$3
ctl() { "$CTL_BIN" "$@"; }
export NVSHARE_STATE_FILE=$WORK/state.conf
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
until=$(( $(now_ns) + 20000000000 ))
NVSHARE_POD_NAME=svc "$WORKLOAD_BIN" GPU-sim-0 "$until" 1000 >/dev/null 2>&1 & a=$!
NVSHARE_POD_NAMESPACE=default NVSHARE_POD_NAME=svc "$WORKLOAD_BIN" GPU-sim-0 "$until" 1000 \
    >/dev/null 2>&1 & b=$!
trap 'kill $a $b 2>/dev/null || true; stop_scheduler; rm -rf "$WORK"' EXIT
wait_for log_has_at_least "registered:" 2 || fail "the two processes did not register"

ctl set priority svc high >/dev/null || fail "set priority svc high"
ctl set core-limit default/svc 30 >/dev/null || fail "set core-limit default/svc 30"
ctl status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
clients = [(c["namespace"], c["pod"], c["priority"], c["core_limit"]) for c in d["clients"]]
pods = sorted({(p["namespace"], p["pod"]) for p in d["pods"]})
print("  clients:", clients)
print("  pods:", pods)
assert all(c == ("default", "svc", "high", 30) for c in clients) and len(clients) == 2, clients
assert pods == [("default", "svc")], pods
' || fail "the two spellings are not one pod default/svc"
grep -q "^pod default/svc " "$NVSHARE_STATE_FILE" ||
    fail "the state file does not name default/svc: $(cat "$NVSHARE_STATE_FILE")"
kill $a $b; wait $a $b 2>/dev/null || true

# A state file of before: "pod svc" is default/svc.
stop_scheduler
printf 'pod svc core-limit=20\n' >"$NVSHARE_STATE_FILE"
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
ctl status --json | python3 -c '
import json, sys
pods = [(p["namespace"], p["pod"], p["core_limit"]) for p in json.load(sys.stdin)["pods"]]
print("  from an old state file:", pods)
assert pods == [("default", "svc", 20)], pods
' || fail "an old state file's pod svc is not default/svc"
pass "no namespace is default: one pod, whichever way it is named"
