#!/usr/bin/env bash
# cluster_three_nodes: kubectl-nvshare against a loopback API server
# (fake_apiserver.py) with 3 nodes, each a real scheduler on a simulated
# GPU (NVSHARE_GPUS) with pods sharing it (sim_workload), reached through
# the server's pod proxy to each scheduler's /status.json. The plugin reads
# a kubeconfig with a token, as from a workstation. Checked:
#   - top -o json lists every pod of every node with the numbers its
#     node's `nvsharectl status --json` gives, and the text view fits 80
#     columns;
#   - why names the reason: a pod throttled at its core limit (n1), one
#     waiting behind a high-priority one (n2), one waiting for memory and
#     who holds it (n3), one on a node without nvshare (n4);
#   - nodes lists the three schedulers with their version;
#   - a user without the rights gets the RBAC message, exit 1;
#   - a stopped scheduler (n3) shows as not answering, the others listed.
source "$(dirname "$0")/../integration/lib.sh" "$1" "$2"
CTL_BIN=$3 PLUGIN_BIN=$4
HERE=$(cd "$(dirname "$0")" && pwd)
API_PID= SCHEDS=() JOBS=()
cleanup() {
    for p in "${JOBS[@]}" "${SCHEDS[@]}" $API_PID; do kill "$p" 2>/dev/null || true; done
    for p in "${JOBS[@]}" "${SCHEDS[@]}" $API_PID; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
fail_cluster() {
    echo "FAIL: $*" >&2
    for f in "$WORK"/*.log "$WORK"/out; do [ -f "$f" ] && { echo "== $f" >&2; tail -n 15 "$f" >&2; }; done
    exit 1
}

# ---- ports, schedulers --------------------------------------------------
read -r P1 P2 P3 < <(python3 -c 'import socket
s=[socket.socket() for _ in range(3)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
GiB=1073741824
start_node() { # node port gpu-mib [env...]
    mkdir -p "$WORK/$1"
    env NVSHARE_SOCK_DIR="$WORK/$1" NVSHARE_STATE_FILE= NVSHARE_GPUS="GPU-$1:$3" \
        NVSHARE_METRICS_ADDR="127.0.0.1:$2" NVSHARE_SCHEDULING_MODE=serial "${@:4}" \
        "$SCHED_BIN" >>"$WORK/sched-$1.log" 2>&1 &
    SCHEDS+=($!)
    wait_for test -S "$WORK/$1/scheduler.sock" || fail_cluster "scheduler $1 did not start"
}
start_node n1 "$P1" 16384
start_node n2 "$P2" 16384
# n3 co-runs what fits, and never rotates a running set for a waiter here
start_node n3 "$P3" 16384 NVSHARE_SCHEDULING_MODE=concurrent \
    NVSHARE_SWITCH_TIME_MODE=fixed NVSHARE_SWITCH_TIME_FIXED=1h
ctl() { NVSHARE_SOCK_DIR=$WORK/$1 "$CTL_BIN" "${@:2}"; }
ctl n2 set priority team-b/urgent high >/dev/null || fail_cluster "set priority"

until=$(( $(now_ns) + 120000000000 ))
job() { # node namespace pod env...
    env NVSHARE_SOCK_DIR="$WORK/$1" NVSHARE_POD_NAMESPACE="$2" NVSHARE_POD_NAME="$3" \
        "${@:4}" "$WORKLOAD_BIN" "GPU-$1" "$until" >>"$WORK/jobs.log" 2>&1 &
    JOBS+=($!)
}
job n1 team-a limited NVSHARE_GPU_CORE_LIMIT=20
job n1 team-a free
job n2 team-b urgent
job n2 team-b batch
job n3 team-c big SIM_MEMORY_MB=12288 NVSHARE_ENABLE_OVERSUB=1
n3_says() { ctl n3 status --json | grep -q "$1"; }
wait_for n3_says '"resident_bytes": [1-9]' || fail_cluster "team-c/big did not allocate"
job n3 team-c waiter SIM_MEMORY_MB=12288 NVSHARE_ENABLE_OVERSUB=1

# ---- the API server: the scheduler pods and the workloads' pods ---------
mkdir -p "$WORK/sa"
echo token-1 >"$WORK/sa/token"
sched_pod() { # node port
    printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nvshare-%s","namespace":"nvshare-system","labels":{"app.kubernetes.io/name":"nvshare"}},"spec":{"nodeName":"%s","containers":[{"name":"scheduler","ports":[{"name":"metrics","containerPort":%s}]}]},"status":{"podIP":"127.0.0.1"}}' "$1" "$1" "$2"
}
app_pod() { # namespace name node
    printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"%s","uid":"uid-%s"},"spec":{"nodeName":"%s","containers":[{"name":"main"}]}}' "$2" "$1" "$2" "$3"
}
{
    echo "[$(sched_pod n1 "$P1"), $(sched_pod n2 "$P2"), $(sched_pod n3 "$P3"),"
    echo "$(app_pod team-a limited n1), $(app_pod team-a free n1),"
    echo "$(app_pod team-b urgent n2), $(app_pod team-b batch n2),"
    echo "$(app_pod team-c big n3), $(app_pod team-c waiter n3), $(app_pod team-d cpu n4)]"
} >"$WORK/pods.json"
python3 "$HERE/fake_apiserver.py" "$WORK/port" "$WORK/sa/token" "$WORK/pods.json" \
    2>"$WORK/api.log" & API_PID=$!
wait_for test -s "$WORK/port" || fail_cluster "the API server did not start"
cat >"$WORK/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: "http://127.0.0.1:$(cat "$WORK/port")"}
users:
- name: tester
  user: {token: token-1}
contexts:
- name: fake
  context: {cluster: fake, user: tester, namespace: team-a}
current-context: fake
KC
export KUBECONFIG=$WORK/kubeconfig
plugin() { "$PLUGIN_BIN" "$@"; }

# ---- top: every pod of every node, with its node's numbers ---------------
wait_for n3_says '"wait_reason": "memory"' || fail_cluster "team-c/waiter does not wait for memory"
compare() { # node
    ctl "$1" status --json >"$WORK/status-$1.json" || return 1
    plugin top --node "$1" -o json >"$WORK/top-$1.json" || return 1
    python3 - "$WORK/status-$1.json" "$WORK/top-$1.json" <<'PY'
import json, sys
status, top = (json.load(open(f)) for f in sys.argv[1:3])
fields = ("namespace", "pod", "pid", "core_limit", "priority", "priority_class",
          "mem_quota_bytes", "resident_bytes", "parked_bytes")
want = {c["client_id"]: {f: c[f] for f in fields} for c in status["clients"]}
node, = top["nodes"]
got = {c["client_id"]: {f: c[f] for f in fields}
       for g in node["gpus"] for c in g["clients"]}
if want != got or not want:
    print("status:", want, "\ntop:   ", got, file=sys.stderr)
    sys.exit(1)
PY
}
for n in n1 n2 n3; do
    wait_for compare "$n" 2>"$WORK/out" || fail_cluster "top's numbers for $n are not its status's"
done
pass "top -o json: every client of n1-n3 with its node's status numbers"
plugin top --once >"$WORK/out" || fail_cluster "top failed"
for pod in team-a/limited team-a/free team-b/urgent team-b/batch team-c/big team-c/waiter; do
    grep -q "$pod" "$WORK/out" || fail_cluster "top does not list $pod"
done
grep -q "^3 nvshare nodes, 3 answering" "$WORK/out" || fail_cluster "top's node count"
grep -q "^team-b " "$WORK/out" || fail_cluster "top has no total for team-b"
awk 'length > 80 { exit 1 }' "$WORK/out" || fail_cluster "top is wider than 80 columns"
pass "top: six pods on three nodes, totals per namespace, 80 columns"

# ---- why ----------------------------------------------------------------
why_is() { # reason pod [args]
    plugin why "${@:2}" -o json >"$WORK/out" 2>&1 &&
        grep -q "\"reason\": \"$1\"" "$WORK/out"
}
wait_for why_is throttled limited || fail_cluster "why limited: not throttled"
pass "why: team-a/limited is throttled at its core limit (the context's namespace)"
wait_for why_is waiting-priority batch -n team-b || fail_cluster "why batch: not behind priority"
grep -q "behind team-b/urgent (priority high)" "$WORK/out" ||
    fail_cluster "why batch does not name team-b/urgent"
pass "why: team-b/batch waits behind team-b/urgent (high)"
wait_for why_is waiting-memory waiter -n team-c || fail_cluster "why waiter: not memory"
grep -q "held by team-c/big: 1[0-9.]*Gi" "$WORK/out" || fail_cluster "why waiter: who holds it"
pass "why: team-c/waiter waits for memory held by team-c/big"
why_is not-nvshare-node cpu -n team-d || fail_cluster "why cpu: not an nvshare node"
pass "why: team-d/cpu is not on an nvshare node"
plugin why limited | awk 'length > 80 { exit 1 }' || fail_cluster "why is wider than 80"
plugin why nosuch >"$WORK/out" 2>&1 && fail_cluster "why of no pod succeeded"
grep -q "no pod team-a/nosuch" "$WORK/out" || fail_cluster "why of no pod: message"

# ---- nodes, RBAC ---------------------------------------------------------
plugin nodes >"$WORK/out" || fail_cluster "nodes failed"
[ "$(grep -cE '^n[123] +[0-9][^ ]* +1 (serial|concurrent) ' "$WORK/out")" = 3 ] ||
    fail_cluster "nodes: not three schedulers with version, GPUs and mode"
awk 'length > 80 { exit 1 }' "$WORK/out" || fail_cluster "nodes is wider than 80 columns"
sed -i 's/token: token-1/token: no-rights/' "$KUBECONFIG"
plugin top --once >"$WORK/out" 2>&1 && fail_cluster "top without rights succeeded"
grep -q "forbidden (403): you need the nvshare-viewer role" "$WORK/out" ||
    fail_cluster "top without rights: no RBAC message"
sed -i 's/token: no-rights/token: token-1/' "$KUBECONFIG"
pass "nodes lists three schedulers; without the rights, the RBAC message"

# ---- a stopped scheduler --------------------------------------------------
kill "${SCHEDS[2]}"; wait "${SCHEDS[2]}" 2>/dev/null || true
plugin top --once >"$WORK/out" || fail_cluster "top failed with n3 stopped"
grep -q "^n3 not answering: HTTP 503" "$WORK/out" || fail_cluster "n3 is not shown as not answering"
grep -q "team-a/limited" "$WORK/out" && grep -q "team-b/batch" "$WORK/out" ||
    fail_cluster "the answering nodes are not listed"
plugin nodes >"$WORK/out" || fail_cluster "nodes failed with n3 stopped"
grep -q "^n3 .*not answering" "$WORK/out" || fail_cluster "nodes: n3 answers"
pass "a stopped scheduler is not answering; the other nodes are listed"
