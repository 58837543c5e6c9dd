#!/usr/bin/env bash
# The attacks of issue 12, made by a second local user (uid 65534) against
# the pod of another (uid 65533, its owner as the operator named it), and
# refused:
#   - declaring the victim's pod name gets none of its quota, budget or
#     limits: the impostor is billed on its own (one warning line);
#   - declaring lower limits for the victim's pod changes nothing for it;
#   - a process that declares no limits, or higher ones, still gets the
#     operator's limits (unsetting the environment lifts nothing);
#   - the control socket refuses the tenant: it cannot set limits;
#   - a Kubernetes process is its cgroup's pod, whatever it declares.
# And issue 27's: the operator sets a pod before it runs without naming its
# owner, and uid 65534 declares it first. It is held to the pod's limits
# but gets neither its priority nor its floor; the owner's processes share
# the pod's quota; once the operator names the owner, the squatter is
# billed on its own, also after a restart (the owner is in the state file).
source "$(dirname "$0")/lib.sh" "$1" "$2"
ALLOC_BIN=$3
CTL_BIN=$4
ctl() { "$CTL_BIN" "$@"; }
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed"
# The second user reaches the socket and the test programs.
chmod 755 "$WORK"
PROC=$WORK/proc
STATE=$WORK/state/state.conf
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_PROC_ROOT="$PROC" NVSHARE_STATE_FILE="$STATE"
# Whatever ends the test, no program it started outlives it.
PIDS=()
stop_programs() {
    [ "${#PIDS[@]}" = 0 ] || { kill "${PIDS[@]}" 2>/dev/null; wait "${PIDS[@]}" 2>/dev/null; } || true
    PIDS=()
}
trap 'stop_programs; stop_scheduler; rm -rf "$WORK"' EXIT
# The fixture proc root holds the cgroup file of every client: a plain
# host's, or a Kubernetes pod's.
# Starts a program with a cgroup file written before it execs (so the
# scheduler reads it at registration), as uid $AS (root unless set). Only in
# a subshell (& or $(...)): it execs, so that $! is the program's pid.
run_as() { # cgroup-line program args...
    local line=$1; shift
    exec sh -c 'mkdir -p "$0/$$" && printf "%s\n" "$1" >"$0/$$/cgroup" && shift && exec "$@"' \
        "$PROC" "$line" ${AS:+setpriv --reuid=$AS --regid=$AS --clear-groups} "$@"
}
HOST=0::/user.slice/user-0.slice/session-1.scope
json() { ctl status --json; }

# The operator's limits for the victim's pod, and its owner, set before it
# runs.
ctl set memory-limit prod/victim 2Gi >/dev/null
ctl set core-limit prod/victim 20 >/dev/null
ctl set owner prod/victim 65533 >/dev/null
export NVSHARE_POD_NAMESPACE=prod NVSHARE_POD_NAME=victim

# The victim (uid 65533) holds 600 MiB.
AS=65533 run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 hold 600 30 >"$WORK/victim.out" & victim=$!
PIDS+=("$victim")
wait_for grep -q held "$WORK/victim.out" || fail "the victim did not allocate"

# (a) An impostor of uid 65534 declares the victim's pod and holds 1300 MiB.
AS=65534 run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 hold 1300 30 >"$WORK/impostor.out" & impostor=$!
PIDS+=("$impostor")
wait_for grep -q held "$WORK/impostor.out" || fail "the impostor did not allocate"
[ "$(log_count 'declares pod prod/victim, which belongs to uid 65533: billed on its own')" = 1 ] ||
    fail "the impostor was not logged once"
# The pod's next 600 MiB (root's: root may join any pod) still fit its 2 GiB
# (600 + 600): the impostor's 1300 MiB are not the pod's.
[ "$(run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 try 600)" = ok ] ||
    fail "the impostor's memory counted against the victim's quota"
pass "a second user declaring the pod holds none of its quota"

# (b) and (c) Another impostor declares 1 % and 1 MiB for the pod: the
# victim's limits do not move, and the impostors are not in its account.
AS=65534 NVSHARE_GPU_CORE_LIMIT=1 NVSHARE_GPU_MEMORY_LIMIT=1Mi \
    run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 hold 1 30 >"$WORK/lowerer.out" & lowerer=$!
PIDS+=("$lowerer")
wait_for grep -q held "$WORK/lowerer.out" || fail "the second impostor did not register"
json >"$WORK/status.json"
python3 - "$WORK/status.json" <<'PY' || fail "the impostors reached the victim's pod"
import json, sys
doc = json.load(open(sys.argv[1]))
victim = [c for c in doc["clients"] if c["uid"] == 65533]
others = [c for c in doc["clients"] if c["uid"] == 65534]
assert victim and len(others) == 2, doc["clients"]
for c in victim:
    assert (c["namespace"], c["pod"], c["pod_source"]) == ("prod", "victim", "declared"), c
    assert c["core_limit"] == 20 and c["mem_quota_bytes"] == 2 << 30, c
for c in others:
    assert c["pod"] == "" and c["pod_source"] == "none", c
pod = [p for p in doc["pods"] if p["pod"] == "victim"]
assert len(pod) == 1 and pod[0]["owner_uid"] == 65533 and pod[0]["clients"] == len(victim), pod
PY
pass "its limits stay the operator's and its budget is its clients' alone"

# A process of the pod that declares nothing, or more, gets the operator's.
unset NVSHARE_GPU_CORE_LIMIT NVSHARE_GPU_MEMORY_LIMIT
[ "$(run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 try 1500)" = refused ] ||
    fail "a process without limits in its environment lifted the pod's quota"
[ "$(NVSHARE_GPU_MEMORY_LIMIT=64Gi run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 try 1500)" = refused ] ||
    fail "a process declaring more lifted the pod's quota"
pass "unsetting or raising the environment lifts no limit"

# The tenant cannot reach the control socket.
RC=0; as_nobody "$CTL_BIN" set core-limit prod/victim 100 >/dev/null 2>&1 || RC=$?
[ "$RC" != 0 ] || fail "uid 65534 changed a limit through nvsharectl"
json >"$WORK/status.json"
grep -q '"core_limit": 20,' "$WORK/status.json" || fail "the limit moved"
pass "the tenant cannot use the control socket"

# On a Kubernetes node the cgroup names the pod, not the environment: a
# process of another pod declaring prod/victim is billed to its own pod.
UID_A=6f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9
CG="0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID_A//-/_}.slice/cri-containerd-$(printf 'ab%.0s' $(seq 32)).scope"
ctl set core-limit "uid:$UID_A" 35 >/dev/null
run_as "$CG" "$ALLOC_BIN" GPU-sim-0 hold 1 30 >"$WORK/k8s.out" & k8s=$!
PIDS+=("$k8s")
wait_for grep -q held "$WORK/k8s.out" || fail "the Kubernetes process did not register"
json >"$WORK/status.json"
python3 - "$WORK/status.json" "$UID_A" <<'PY' || fail "a Kubernetes process was billed as the pod it declared"
import json, sys
doc = json.load(open(sys.argv[1]))
k = [c for c in doc["clients"] if c["pod_uid"] == sys.argv[2]]
assert len(k) == 1, doc["clients"]
c = k[0]
assert c["pod_source"] == "cgroup" and c["pod"] == "" and c["core_limit"] == 35, c
assert c["container_id"] == "ab" * 32, c
PY
pass "a Kubernetes process is the pod of its cgroup, with that pod's limits"

stop_programs

# Issue 27. The operator sets prod/vip before it runs: priority high, a
# 30 % floor, 1 GiB; no owner named yet. uid 65534 declares it first.
ctl set priority prod/vip high >/dev/null
ctl set min-share prod/vip 30 >/dev/null
ctl set memory-limit prod/vip 1Gi >/dev/null
export NVSHARE_POD_NAMESPACE=prod NVSHARE_POD_NAME=vip
AS=65534 run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 hold 1 30 >"$WORK/squatter.out" & squatter=$!
PIDS+=("$squatter")
wait_for grep -q held "$WORK/squatter.out" || fail "the squatter did not register"
# The owner (uid 65533) runs two processes of the pod: 1000 MiB and 1000 MiB.
AS=65533 run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 hold 1000 30 >"$WORK/owner.out" & owner=$!
PIDS+=("$owner")
wait_for grep -q held "$WORK/owner.out" || fail "the owner did not allocate"
second=$(AS=65533 run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 try 1000)
echo "  the owner's second 1000 MiB under the pod's 1 GiB: $second"
# vip_status UID: "priority min-share mem-quota" of each client of UID in
# prod/vip, as status shows them.
vip_status() {
    ctl status --json | python3 -c '
import json, sys
doc = json.load(sys.stdin)
for c in doc["clients"]:
    if c["uid"] == int(sys.argv[1]) and c["pod"] == "vip":
        print(c["priority_class"], c["min_share_percent"], c["mem_quota_bytes"])' "$1"
}
echo "  squatter (uid 65534): priority, floor, quota: $(vip_status 65534)"
echo "  owner    (uid 65533): priority, floor, quota: $(vip_status 65533)"
[ "$(vip_status 65534)" = "2 0 1073741824" ] ||
    fail "the squatter got the pod's priority or floor, or escaped its quota"
[ "$second" = refused ] || fail "the owner's processes held 2000 MiB under a 1 GiB quota"
pass "a pod set with no owner gives the first comer its limits, not its privileges"

# The operator names the owner: its processes get the priority and the
# floor, the squatter's keep neither, and a new one is billed on its own.
ctl set owner prod/vip 65533 >/dev/null
echo "  once named, owner: $(vip_status 65533); squatter: $(vip_status 65534)"
[ "$(vip_status 65533)" = "3 30 1073741824" ] || fail "the named owner did not get the privileges"
[ "$(vip_status 65534)" = "2 0 1073741824" ] || fail "the squatter got the privileges"
(AS=65534 run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 try 1 >/dev/null)
[ "$(log_count 'declares pod prod/vip, which belongs to uid 65533: billed on its own')" = 1 ] ||
    fail "a squatter joined the pod after its owner was named"
grep -q "^pod prod/vip owner=65533 memory-limit=1Gi priority=3 min-share=30$" "$STATE" ||
    fail "the state file does not hold the owner: $(cat "$STATE")"
pass "the named owner alone gets the pod's priority and floor"

# After a restart the squatter reconnects first: still billed on its own.
stop_programs
stop_scheduler
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_PROC_ROOT="$PROC" NVSHARE_STATE_FILE="$STATE"
(AS=65534 run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 try 1 >/dev/null)
[ "$(log_count 'declares pod prod/vip, which belongs to uid 65533: billed on its own')" = 2 ] ||
    fail "after a restart, the first uid to connect took the pod"
[ "$(AS=65533 run_as "$HOST" "$ALLOC_BIN" GPU-sim-0 try 1)" = ok ] || fail "the owner could not run"
grep -q "client .* registered: pid [0-9]*, uid 65533, pod prod/vip (declared)" "$WORK/sched.log" ||
    fail "the owner is not in its pod after the restart"
pass "the owner survives a restart"
