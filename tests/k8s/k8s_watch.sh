#!/usr/bin/env bash
# k8s_watch: the pod watcher carries a pod's annotations from the API server
# to its running process. A loopback API server (fake_apiserver.py) and the
# real kubectl, scheduler and nvsharectl; a sim_workload whose cgroup (a
# fixture under NVSHARE_PROC_ROOT) names it as the pod. Checked:
#   - a core-limit annotation applies within 1 s of kubectl's return
#     (measured and printed); the gpu-memory request is the memory limit
#     until a memory annotation overrides it;
#   - a bad value keeps the previous limit, is logged once and posted as an
#     Event;
#   - nvsharectl set overrides until the next annotation change; removing
#     the annotation reverts to the next source (the declared limit);
#   - nvshare.com/priority sets the pod's class, an operator's priority
#     overrides it until the next change, removing it leaves normal;
#   - a rotated token is used from the next connection; a dropped watch, a
#     410 as status and as an ERROR event are recovered from;
#   - after a scheduler + watcher restart and a scheduler restart alone the
#     annotation holds again (the state file keeps the operator's limit);
#   - deleting the pod drops its settings; pods of other nodes, and pods
#     with no nvshare.com/ annotation or resource, never come.
source "$(dirname "$0")/../integration/lib.sh" "$1" "$2"
CTL_BIN=$3 WATCHER_BIN=$4
HERE=$(cd "$(dirname "$0")" && pwd)
ctl() { "$CTL_BIN" "$@"; }
POD_UID=1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901
OTHER_UID=9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a
PLAIN_UID=2a3b4c5d-6e7f-4081-9203-a4b5c6d7e8f9
GiB=1073741824
WATCHER_PID= API_PID= JOB=
trap 'stop_watcher; [ -n "$JOB" ] && kill "$JOB" 2>/dev/null; [ -n "$API_PID" ] &&
      kill "$API_PID" 2>/dev/null; stop_scheduler; rm -rf "$WORK"' EXIT
fail_k8s() { tail -n 20 "$WORK/watcher.log" >&2 || true; fail "$@"; }

# ---- the API server, with this node's pod and another node's -------------
mkdir -p "$WORK/sa" "$WORK/proc"
echo token-1 >"$WORK/sa/token"
pod_json() { # uid name node annotation-value
    printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"default","uid":"%s","annotations":{"nvshare.com/gpu-core-limit":"%s"}},"spec":{"nodeName":"%s","containers":[{"name":"main","image":"x","resources":{"limits":{"nvshare.com/gpu-memory":"4"},"requests":{"nvshare.com/gpu-memory":"4"}}}]}}' "$2" "$1" "$4" "$3"
}
plain='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","uid":"'$PLAIN_UID'"},"spec":{"nodeName":"node-a","containers":[{"name":"web","image":"x"}]}}'
echo "[$(pod_json $POD_UID trainer node-a 50), $(pod_json $OTHER_UID elsewhere node-b 10), $plain]" >"$WORK/pods.json"
python3 "$HERE/fake_apiserver.py" "$WORK/port" "$WORK/sa/token" "$WORK/pods.json" \
    2>"$WORK/api.log" & API_PID=$!
wait_for test -s "$WORK/port" || fail "the API server did not start"
API=http://127.0.0.1:$(cat "$WORK/port")
admin() { python3 - "$API/admin/$1" "${2:-GET}" <<'PY'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], method=sys.argv[2], data=b"" if sys.argv[2] == "POST" else None)
print(urllib.request.urlopen(req, timeout=5).read().decode())
PY
}
cat >"$WORK/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: "$API"
users:
- name: test
  user: {}
contexts:
- name: fake
  context:
    cluster: fake
    user: test
    namespace: default
current-context: fake
KC
export KUBECONFIG=$WORK/kubeconfig
kc() { kubectl --request-timeout=10s "$@" >/dev/null || fail "kubectl $* failed"; }

start_watcher() {
    env NODE_NAME=node-a NVSHARE_API_SERVER="$API" NVSHARE_SA_DIR="$WORK/sa" \
        NVSHARE_DEBUG=0 "$WATCHER_BIN" >>"$WORK/watcher.log" 2>&1 &
    WATCHER_PID=$!
}
stop_watcher() {
    if [ -n "$WATCHER_PID" ]; then
        kill "$WATCHER_PID" 2>/dev/null || true
        wait "$WATCHER_PID" 2>/dev/null || true
        WATCHER_PID=
    fi
}
watcher_count() { grep -c -- "$1" "$WORK/watcher.log" || true; }
watcher_has() { [ "$(watcher_count "$1")" -ge "$2" ]; }

SCHED_ENV=(NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_TQ=100ms NVSHARE_PROC_ROOT="$WORK/proc"
           NVSHARE_STATE_FILE="$WORK/state.conf")
start_scheduler "${SCHED_ENV[@]}"
start_watcher
wait_for log_has_at_least "pod default/trainer (uid $POD_UID)" 1 ||
    fail_k8s "the scheduler never learnt the pod's name"

# ---- the pod's process: its cgroup names the pod -------------------------
export NVSHARE_RECONNECT_INTERVAL=100ms
NVSHARE_GPU_CORE_LIMIT=90 sh -c 'mkdir -p "$1/$$" &&
    printf "0::/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%064d.scope\n" \
        "$(echo "$2" | tr - _)" 7 >"$1/$$/cgroup" && exec "$3" GPU-sim-0 "$4"' \
    job "$WORK/proc" "$POD_UID" "$WORKLOAD_BIN" "$(( $(now_ns) + 120000000000 ))" \
    >/dev/null 2>"$WORK/job.err" & JOB=$!

# "core source memory source namespace/pod" of the pod's client, or "".
limits() {
    ctl status --json 2>/dev/null | python3 -c '
import json, sys
for c in json.load(sys.stdin)["clients"]:
    if c["pod_uid"] == sys.argv[1]:
        print(c["core_limit"], c["core_limit_source"], c["mem_quota_bytes"],
              c["mem_quota_source"], c["namespace"] + "/" + c["pod"])
        break' "$POD_UID" 2>/dev/null # the scheduler may be restarting
}
has_limits() { [ "$(limits)" = "$*" ]; }
expect() { # what, then the limits
    local what=$1; shift
    wait_for has_limits "$@" || fail_k8s "$what: limits are '$(limits)', not '$*'"
}
expect "annotation 50 % and the request of 4 units of 256Mi" \
    50 annotation $GiB request default/trainer
ctl status | grep -q "default/trainer" || fail "the table does not name the pod"
ctl status --json | grep -q "$OTHER_UID" && fail "a pod of another node was listed"
ctl status --json | grep -q "$PLAIN_UID" && fail "a pod without nvshare resources or annotations was listed"

# ---- an annotation change reaches the running process within 1 s ---------
kc annotate pod trainer nvshare.com/gpu-core-limit=30 --overwrite
t0=$(now_ns)
until has_limits 30 annotation $GiB request default/trainer; do
    [ $(( $(now_ns) - t0 )) -lt 5000000000 ] || fail_k8s "the annotation of 30 % never applied"
done
ms=$(( ($(now_ns) - t0) / 1000000 ))
echo "  kubectl annotate to the limit in nvsharectl status --json: ${ms} ms"
[ "$ms" -le 1000 ] || fail "the annotation took ${ms} ms to apply"

# ---- a bad value: the previous limit holds; one line, one Event ----------
kc annotate pod trainer nvshare.com/gpu-core-limit=abc --overwrite
event_posted() { admin events | grep -q NvshareInvalidAnnotation; }
wait_for event_posted || fail_k8s "no Event for the bad annotation"
# Other updates of the pod (and the memory annotation that shows they were
# read) report the same bad value no more.
kc annotate pod trainer team=ml
kc annotate pod trainer nvshare.com/gpu-memory-limit=2Gi
expect "a bad core value beside a memory annotation" 30 annotation $((2 * GiB)) annotation default/trainer
[ "$(admin events | grep -o NvshareInvalidAnnotation | wc -l)" = 1 ] || fail "the Event was repeated"
[ "$(watcher_count 'gpu-core-limit="abc" ignored')" = 1 ] || fail_k8s "the bad value was not logged once"

# ---- the operator overrides until the next annotation change --------------
ctl set core-limit default/trainer 70 >/dev/null || fail "nvsharectl set on the pod failed"
expect "the operator's override" 70 runtime $((2 * GiB)) annotation default/trainer
kc annotate pod trainer nvshare.com/gpu-core-limit=40 --overwrite
expect "a new annotation after the override" 40 annotation $((2 * GiB)) annotation default/trainer
log_has_at_least "core-limit annotation changed: the operator's override ends" 1 ||
    fail "the end of the override was not logged"
# Removing the annotations falls back: the declared 90 %, the request.
kc annotate pod trainer nvshare.com/gpu-core-limit- nvshare.com/gpu-memory-limit-
expect "annotations removed" 90 declared $GiB request default/trainer

# ---- the priority annotation, and the operator's override of it ------------
priority() {
    ctl status --json 2>/dev/null | python3 -c '
import json, sys
for c in json.load(sys.stdin)["clients"]:
    if c["pod_uid"] == sys.argv[1]:
        print(c["priority"], c["priority_source"])
        break' "$POD_UID" 2>/dev/null
}
has_priority() { [ "$(priority)" = "$*" ]; }
kc annotate pod trainer nvshare.com/priority=high --overwrite
wait_for has_priority high annotation || fail_k8s "priority is '$(priority)', not the annotation's high"
ctl set priority default/trainer low >/dev/null || fail "nvsharectl set priority on the pod failed"
wait_for has_priority low runtime || fail_k8s "priority is '$(priority)', not the operator's low"
kc annotate pod trainer nvshare.com/priority=normal --overwrite
wait_for has_priority normal annotation || fail_k8s "priority is '$(priority)' after a new annotation"
log_has_at_least "priority annotation changed: the operator's override ends" 1 ||
    fail "the end of the priority override was not logged"
kc annotate pod trainer nvshare.com/priority-
wait_for has_priority normal none || fail_k8s "priority is '$(priority)' without an annotation"

# ---- token rotation, dropped watches, 410 as a status and as an event -----
echo token-2 >"$WORK/sa/token.new" && mv "$WORK/sa/token.new" "$WORK/sa/token"
admin drop POST >/dev/null
rotated() { admin auth | grep -q '"Bearer token-2"\]$'; }
wait_for rotated || fail_k8s "the rotated token was not used"
kc annotate pod trainer nvshare.com/gpu-core-limit=35 --overwrite
expect "after a dropped watch" 35 annotation $GiB request default/trainer
admin compact POST >/dev/null
wait_for watcher_has "too old (410 Gone): listing again" 1 || fail_k8s "410 as status not seen"
kc annotate pod trainer nvshare.com/gpu-core-limit=45 --overwrite
expect "after a 410 status" 45 annotation $GiB request default/trainer
admin gone-event POST >/dev/null
wait_for watcher_has "too old (410 Gone): listing again" 2 || fail_k8s "410 as event not seen"
kc annotate pod trainer nvshare.com/gpu-core-limit=55 --overwrite
expect "after a 410 event" 55 annotation $GiB request default/trainer
grep -q '"Bearer token-1"' <(admin auth) || fail "the first token was never used"

# ---- restarts: the API server and the state file restore everything -----
ctl set memory-limit default/trainer 3Gi >/dev/null || fail "memory-limit set failed"
expect "an operator's memory limit" 55 annotation $((3 * GiB)) runtime default/trainer
stop_watcher
kill -9 "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null || true; SCHED_PID=
: >"$WORK/sched.log"
start_scheduler "${SCHED_ENV[@]}"
start_watcher
expect "after a scheduler and watcher restart" 55 annotation $((3 * GiB)) runtime default/trainer
kill -9 "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null || true; SCHED_PID=
: >"$WORK/sched.log"
start_scheduler "${SCHED_ENV[@]}"
expect "after a scheduler restart alone" 55 annotation $((3 * GiB)) runtime default/trainer

# ---- a deleted pod's settings go, the operator's included ---------------
grep -q "uid:$POD_UID" "$WORK/state.conf" || fail "the operator's limit was not persisted"
kc delete pod trainer --wait=false
wait_for log_has_at_least "was deleted: its settings are dropped" 1 || fail_k8s "deletion not seen"
expect "the pod deleted" 90 declared 0 none default/trainer
grep -q "uid:$POD_UID" "$WORK/state.conf" && fail "the deleted pod's limit is still persisted"
pass "annotations apply within 1 s (${ms} ms), bad values are reported and ignored, overrides, fallbacks, re-lists, restarts and deletion behave"
