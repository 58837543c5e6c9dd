#!/usr/bin/env bash
# cluster_thousand_nodes: kubectl-nvshare against 1,000 simulated nodes,
# the loopback API server answering for each scheduler pod
# (fake_apiserver.py, test.nvshare.com/answer). Checked:
#   - top completes within 10 s with at most 32 requests in flight (as the
#     plugin counts them and as the server saw them), one request per node;
#   - a slow node times out, a huge answer is cut at 4 MiB, one that is not
#     JSON and one with wrong types and terminal escapes are refused, a 503
#     is reported: each node as not answering with its reason, never
#     printed raw; the 995 others are listed;
#   - every command has --help that fits 80 columns, and a bad argument
#     exits 2 before any request.
set -euo pipefail
PLUGIN_BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/nvshare-cluster.XXXXXX)
API_PID=
trap 'if [ -n "$API_PID" ]; then kill "$API_PID"; wait "$API_PID" 2>/dev/null || true; fi; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$WORK/out" ] && head -c 3000 "$WORK/out" >&2; exit 1; }
pass() { echo "PASS: $*"; }
wait_for() {
    local deadline=$(( $(date +%s) + 10 ))
    until "$@"; do [ "$(date +%s)" -lt "$deadline" ] || return 1; sleep 0.02; done
}
plugin() { "$PLUGIN_BIN" "$@"; }

# ---- the command line: no server needed -----------------------------------
for cmd in "" top why nodes; do
    plugin $cmd --help >"$WORK/out" || fail "$cmd --help failed"
    awk 'length > 80 { exit 1 }' "$WORK/out" || fail "$cmd --help is wider than 80"
done
bad_usage() {
    if plugin "$@" >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
    [ "$rc" = 2 ] || fail "'$*' exited $rc, not 2"
    grep -q "^kubectl nvshare: " "$WORK/out" || fail "'$*': no message"
}
bad_usage
bad_usage frob
bad_usage top --bogus
bad_usage top -o yaml
bad_usage top --interval 0s
bad_usage top -n a -A
bad_usage why
bad_usage why a b
bad_usage why 'Bad/Name'
bad_usage why a --node n1
bad_usage nodes extra
bad_usage nodes --request-timeout forever
pass "--help of every command fits 80 columns; bad arguments exit 2"

# ---- 1,000 nodes -----------------------------------------------------------
mkdir -p "$WORK/sa"
echo token-1 >"$WORK/sa/token"
python3 - "$WORK/pods.json" <<'PY'
import json, sys
special = {1: "slow", 2: "huge", 3: "bad", 4: "evil", 5: "refused"}
pods = [{"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "nvshare-%04d" % i, "namespace": "nvshare-system",
                      "labels": {"app.kubernetes.io/name": "nvshare"},
                      "annotations": {"test.nvshare.com/answer": special.get(i, "ok")}},
         "spec": {"nodeName": "n%04d" % i,
                  "containers": [{"name": "scheduler",
                                  "ports": [{"name": "metrics", "containerPort": 9402}]}]}}
        for i in range(1, 1001)]
json.dump(pods, open(sys.argv[1], "w"))
PY
python3 "$HERE/fake_apiserver.py" "$WORK/port" "$WORK/sa/token" "$WORK/pods.json" \
    2>"$WORK/api.log" & API_PID=$!
wait_for test -s "$WORK/port" || fail "the API server did not start"
API=http://127.0.0.1:$(cat "$WORK/port")
export NVSHARE_API_SERVER=$API NVSHARE_SA_DIR=$WORK/sa

start=$(date +%s%N)
plugin top -o json --request-timeout 1s >"$WORK/top.json" || fail "top failed"
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
python3 - "$WORK/top.json" "$API/admin/proxy" "$took_ms" <<'PY' || fail "top's answer"
import json, sys, urllib.request
top = json.load(open(sys.argv[1]))
proxy = json.load(urllib.request.urlopen(sys.argv[2], timeout=5))
took = int(sys.argv[3])
nodes = {n["node"]: n for n in top["nodes"]}
print("  1,000 nodes: %d ms, %d in flight at most (server: %d), %d requests"
      % (took, top["max_in_flight"], proxy["max_in_flight"], proxy["requests"]))
assert len(nodes) == 1000, len(nodes)
assert took < 10000, "took %d ms" % took
assert 1 <= top["max_in_flight"] <= 32 and proxy["max_in_flight"] <= 32, proxy
assert proxy["requests"] == 1000, proxy
want = {"n0001": "no answer: Timeout", "n0002": "an answer over 4 MiB",
        "n0003": "bad status: not the document", "n0004": "bad status:",
        "n0005": "HTTP 503: error trying to reach service"}
for node, error in want.items():
    n = nodes[node]
    assert not n["answered"] and n["error"].startswith(error), n
ok = [n for n in top["nodes"] if n["answered"]]
assert len(ok) == 995, len(ok)
for n in ok:
    pods = [c["pod"] for g in n["gpus"] for c in g["clients"]]
    assert pods == [n["node"] + "-a", n["node"] + "-b"], (n["node"], pods)
sim = [t for t in top["namespaces"] if t["namespace"] == "sim"]
assert sim and sim[0]["pods"] == 1990, sim
PY
pass "top -o json: 1,000 nodes in ${took_ms} ms, at most 32 in flight, 5 bad nodes reported"

plugin top --once --request-timeout 1s >"$WORK/out" || fail "top (text) failed"
grep -q "^1000 nvshare nodes, 995 answering" "$WORK/out" || fail "top's node count"
grep -q "^n0004 not answering: bad status" "$WORK/out" || fail "the evil node is not refused"
LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$WORK/out" && fail "a control character reached the output"
awk 'length > 80 { exit 1 }' "$WORK/out" || fail "top is wider than 80 columns"
plugin nodes --request-timeout 1s >"$WORK/out" || fail "nodes failed"
[ "$(grep -c 'not answering' "$WORK/out")" = 5 ] || fail "nodes: not 5 nodes not answering"
awk 'length > 80 { exit 1 }' "$WORK/out" || fail "nodes is wider than 80 columns"
pass "top and nodes as text: 80 columns, no control characters, 5 nodes not answering"
