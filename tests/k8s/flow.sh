#!/usr/bin/env bash
# k8s_flow: issue 13's whole flow on one page, every piece real except the
# kubelet and the API server (loopback test peers) and the GPU (the fake
# driver): the scheduler, nvshare-pod-watcher, nvshare-device-plugin, the
# test kubelet (test_kubelet.py) and kubectl against fake_apiserver.py, and
# the pod's "container": fake_job with libnvshare preloaded, started with
# exactly the environment and mounts Allocate gave it, in a cgroup of its
# pod (a fixture under NVSHARE_PROC_ROOT). In order, each step timed and
# checked:
#   1. scheduler, watcher and plugin start;
#   2. the plugin registers both resources with the kubelet;
#   3. a pod asking for nvshare.com/gpu: 1 and nvshare.com/gpu-memory: 16
#      is created; the kubelet's GetPreferredAllocation + Allocate;
#   4. its container registers, identified by its cgroup, with the
#      request as its memory quota;
#   5. kubectl annotate gpu-core-limit=30: in status within 1 s, and the
#      process's share of the GPU over the next 3 compute windows <= 31.5 %;
#   6. the kubelet restarts: the plugin registers again within 1 s;
#   7. the pod is deleted: its settings leave status.
# Prints one page; fails if a step fails.
#
# usage: flow.sh SCHEDULER FAKE_JOB NVSHARECTL POD_WATCHER DEVICE_PLUGIN
#                PYTHON PB2_DIR LIBNVSHARE FAKE_CUDA_DIR
source "$(dirname "$0")/../integration/lib.sh" "$1" "$2"
JOB_BIN=$2 CTL_BIN=$3 WATCHER_BIN=$4 PLUGIN_BIN=$5 PYTHON=$6 PB2_DIR=$7 LIBNVSHARE=$8
FAKE_DIR=$9
HERE=$(cd "$(dirname "$0")" && pwd)
GPU_UUID=GPU-fa4e0000-0000-0000-0000-000000000000
GiB=1073741824
PIDS=()
declare -A took
trap 'kill "${PIDS[@]}" 2>/dev/null || true; wait "${PIDS[@]}" 2>/dev/null || true
      stop_scheduler; rm -rf "$WORK"' EXIT
T0=$(now_ns)
ms_since() { echo $(( ($(now_ns) - $1) / 1000000 )); }
ms_between() { echo $(( ($2 - $1) / 1000000 )); }
# say TEXT: one line of the page, stamped with the time since the start.
say() { printf '[%6.2f s] %s\n' "$(awk -v t="$(( $(now_ns) - T0 ))" 'BEGIN { print t / 1e9 }')" "$*"; }
step_fail() { # what went wrong; the logs that tell why
    say "FAIL: $*"
    for log in sched watcher plugin kubelet.err api; do
        [ -s "$WORK/$log.log" ] && { echo "--- $log.log" >&2; tail -n 15 "$WORK/$log.log" >&2; }
    done
    exit 1
}
mkdir -p "$WORK/proc" "$WORK/sa" "$WORK/kubelet" "$WORK/lib" "$WORK/trace"
ln -s "$LIBNVSHARE" "$WORK/lib/libnvshare.so"

# ---- 1. the node's daemons -------------------------------------------------
echo token >"$WORK/sa/token"
echo '[]' >"$WORK/pods.json"
"$PYTHON" "$HERE/fake_apiserver.py" "$WORK/port" "$WORK/sa/token" "$WORK/pods.json" \
    2>"$WORK/api.log" & PIDS+=($!)
wait_for test -s "$WORK/port" || step_fail "the API server did not start"
API=http://127.0.0.1:$(cat "$WORK/port")
printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {server: "%s"}\nusers:\n- name: t\n  user: {}\ncontexts:\n- name: fake\n  context: {cluster: fake, user: t, namespace: default}\ncurrent-context: fake\n' \
    "$API" >"$WORK/kubeconfig"
export KUBECONFIG=$WORK/kubeconfig
kc() { kubectl --request-timeout=10s "$@" || step_fail "kubectl $* failed"; }

start_scheduler NVSHARE_GPUS=$GPU_UUID:16384 NVSHARE_TQ=100ms NVSHARE_PROC_ROOT="$WORK/proc" \
    NVSHARE_STATE_FILE="$WORK/state.conf"
env NODE_NAME=node-a NVSHARE_API_SERVER="$API" NVSHARE_SA_DIR="$WORK/sa" \
    "$WATCHER_BIN" >"$WORK/watcher.log" 2>&1 & PIDS+=($!)
# The kubelet, a coprocess: one command a line, one JSON answer a line.
coproc KUBELET { exec "$PYTHON" "$HERE/../integration/test_kubelet.py" "$PB2_DIR" \
    "$WORK/kubelet" 2>"$WORK/kubelet.err.log"; }
PIDS+=("$KUBELET_PID")
kubelet() { # command; sets REPLY to the answer
    echo "$1" >&"${KUBELET[1]}"
    IFS= read -r -t 20 REPLY <&"${KUBELET[0]}" || step_fail "the kubelet did not answer '$1'"
    [ "$(jq -r '.error // empty' <<<"$REPLY")" = "" ] || step_fail "kubelet: $(jq -r .error <<<"$REPLY")"
}
wait_for test -S "$WORK/kubelet/kubelet.sock" || step_fail "the kubelet did not serve"
PLUGIN_START=$(now_ns)
env NVSHARE_KUBELET_DIR="$WORK/kubelet" NVSHARE_LIB_DIR="$WORK/lib" \
    NVSHARE_GPUS=$GPU_UUID:16384 "$PLUGIN_BIN" >"$WORK/plugin.log" 2>&1 & PIDS+=($!)
say "1. scheduler, pod watcher (API server $API) and device plugin started in \$WORK (sock/, kubelet/, state.conf): PASS"

# ---- 2. registration ------------------------------------------------------
# reg_ms REGISTRATIONS RESOURCE FROM_NS: ms from FROM_NS to its Register.
reg_ms() { jq -r --arg r "$2" --argjson t "$3" '(.[$r].at_ns - $t) / 1e6 | floor' <<<"$1"; }
kubelet registrations
for r in gpu gpu-memory; do
    took[$r]=$(reg_ms "$REPLY" nvshare.com/$r "$PLUGIN_START")
done
say "2. kubelet got Register for nvshare.com/gpu ${took[gpu]} ms and nvshare.com/gpu-memory ${took[gpu-memory]} ms after the plugin started: PASS"

# ---- 3. a pod, and its devices --------------------------------------------
cat >"$WORK/trainer.json" <<'POD'
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "trainer", "namespace": "default"},
 "spec": {"nodeName": "node-a", "containers": [{"name": "main", "image": "trainer",
   "resources": {"limits": {"nvshare.com/gpu": "1", "nvshare.com/gpu-memory": "16"}}}]}}
POD
kc create --validate=false -f "$WORK/trainer.json" >/dev/null
POD_UID=$(kc get pod trainer -o 'jsonpath={.metadata.uid}')
kubelet "allocate 1 16"
ALLOC=$REPLY
say "3. pod default/trainer (uid $POD_UID) created; kubelet GetPreferredAllocation + Allocate: $(jq -r '.devices | join(", ")' <<<"$ALLOC")"
jq -r '.envs | to_entries | sort_by(.key)[] | "     env \(.key)=\(.value)"' <<<"$ALLOC"
jq -r '.mounts | to_entries[] | "     mount \(.value) -> \(.key)"' <<<"$ALLOC" | sed "s|$WORK|\$WORK|"
want_env() { [ "$(jq -r --arg k "$1" '.envs[$k] // ""' <<<"$ALLOC")" = "$2" ] ||
                 step_fail "Allocate gave $1=$(jq -r --arg k "$1" '.envs[$k]' <<<"$ALLOC"), not $2"; }
want_env NVIDIA_VISIBLE_DEVICES $GPU_UUID
want_env NVSHARE_GPU_MEMORY_LIMIT $((4 * GiB))
want_env LD_PRELOAD /usr/local/nvshare/lib/libnvshare.so
say "   PASS"

# ---- 4. the container ------------------------------------------------------
# Its environment is Allocate's alone, with the mounts' container paths
# resolved to their host paths (this test has no mount namespace), plus what
# the container runtime and the fake driver need: the GPU named by
# NVIDIA_VISIBLE_DEVICES is the one the fake driver shows.
mapfile -t CONTAINER_ENV < <(jq -r '.mounts as $m | .envs | to_entries[] | .value as $v |
    ([$m | to_entries[] | select(.key as $k | $v | startswith($k))][0]) as $hit |
    "\(.key)=\(if $hit then $hit.value + ($v | ltrimstr($hit.key)) else $v end)"' <<<"$ALLOC")
CGROUP="0::/kubepods.slice/kubepods-pod${POD_UID//-/_}.slice/cri-containerd-$(printf '7%.0s' $(seq 64)).scope"
env -i PATH="$PATH" "${CONTAINER_ENV[@]}" FAKE_CUDA_DEVICES=$GPU_UUID LD_LIBRARY_PATH="$FAKE_DIR" \
    FAKE_CUDA_TRACE_DIR="$WORK/trace" sh -c 'mkdir -p "$1/$$" && printf "%s\n" "$2" >"$1/$$/cgroup" &&
    exec "$3" "$4" "$5"' job "$WORK/proc" "$CGROUP" "$JOB_BIN" "$(now_ns)" \
    "$(( $(now_ns) + 120000000000 ))" >"$WORK/job.out" 2>"$WORK/job.err" & JOB=$!
PIDS+=("$JOB")
# "key=value ..." of the pod's client in status, or "".
client() {
    "$CTL_BIN" status --json 2>/dev/null | jq -r --arg u "$POD_UID" '.clients[] |
        select(.pod_uid == $u) | "pod=\(.namespace)/\(.pod) pod_source=\(.pod_source) core_limit=\(.core_limit)(\(.core_limit_source)) mem_quota=\(.mem_quota_bytes)(\(.mem_quota_source)) pid=\(.pid)"'
}
has() { client | grep -q -- "$1"; }
started=$(now_ns)
wait_for has "pod=default/trainer pod_source=cgroup .* mem_quota=$((4 * GiB))(request) pid=$JOB" ||
    step_fail "the container is not default/trainer by its cgroup with its request: '$(client)'"
registered=$(now_ns)
say "4. container pid $JOB (fake_job + LD_PRELOAD=\$WORK/lib/libnvshare.so) registered $(ms_between "$started" "$registered") ms after its start"
say "   status: $(client)"
say "   PASS"

# ---- 5. an annotation, applied and enforced -------------------------------
# share FROM TO: percent of [FROM, TO) (CLOCK_REALTIME) the process held the
# fake GPU (its kernels, and host gaps under 3 ms between them), from the
# driver's trace (CLOCK_MONOTONIC).
MONO_OFFSET=$("$PYTHON" -c 'import time; print(time.monotonic_ns() - time.time_ns())')
share() {
    awk -v a="$(($1 + MONO_OFFSET))" -v b="$(($2 + MONO_OFFSET))" '
        function add(s, e) { if (s < a) s = a; if (e > b) e = b; if (e > s) held += e - s }
        { if (n++ && $2 - to < 3e6) { if ($3 > to) to = $3 } else { if (n > 1) add(from, to); from = $2; to = $3 } }
        END { if (n) add(from, to); printf "%.1f", 100 * held / (b - a) }' "$WORK/trace/trace.$JOB"
}
WINDOW_NS=$("$CTL_BIN" status --json | jq .node.window_ns)
annotate_at=$(now_ns)
kc annotate pod trainer nvshare.com/gpu-core-limit=30 >/dev/null
returned=$(now_ns)
until has "core_limit=30(annotation)"; do
    [ "$(ms_since "$returned")" -lt 5000 ] || step_fail "the annotation never applied: '$(client)'"
done
applied=$(now_ns)
before=$(share "$registered" "$annotate_at")
say "5. kubectl annotate pod trainer nvshare.com/gpu-core-limit=30: in status $(ms_between "$returned" "$applied") ms after kubectl returned ($(ms_between "$annotate_at" "$returned") ms in kubectl)"
[ "$(ms_between "$returned" "$applied")" -le 1000 ] || step_fail "the annotation took over 1 s"
# Three whole compute windows: their budgets, however the windows fall.
until_ns=$((applied + 3 * WINDOW_NS))
while [ "$(now_ns)" -lt $((until_ns + 100000000)) ]; do sleep 0.1; done
after=$(share "$applied" "$until_ns")
windows=$(for k in 0 1 2; do
              echo "$(share $((applied + k * WINDOW_NS)) $((applied + (k + 1) * WINDOW_NS)))"
          done | paste -sd/)
say "   GPU share: ${before} % before (no limit); after, ${after} % over $((3 * WINDOW_NS / 1000000)) ms (${windows} % a window), cap 31.5 %"
# A cap. Below 30 is no failure: the window in which the limit arrives was
# already spent, and its overshoot is billed to the next (carryover); the
# floor only shows the process still runs.
awk -v s="$after" 'BEGIN { exit !(s <= 31.5 && s >= 10) }' || step_fail "share ${after} % under a 30 % limit: outside 10-31.5 %"
say "   PASS"

# ---- 6. the kubelet restarts ----------------------------------------------
kubelet restart
deleted=$(jq .deleted_ns <<<"$REPLY")
for r in gpu gpu-memory; do
    took[$r]=$(reg_ms "$(jq .registrations <<<"$REPLY")" nvshare.com/$r "$deleted")
done
say "6. kubelet restarted (its sockets deleted): plugin registered again, nvshare.com/gpu ${took[gpu]} ms, nvshare.com/gpu-memory ${took[gpu-memory]} ms later"
[ "${took[gpu]}" -lt 1000 ] && [ "${took[gpu-memory]}" -lt 1000 ] ||
    step_fail "the plugin took over 1 s to register again"
kubelet "allocate 1 16"
say "   the new sockets serve Allocate ($(jq -r '.devices[0]' <<<"$REPLY")): PASS"

# ---- 7. the pod is deleted -------------------------------------------------
deleted_at=$(now_ns)
kc delete pod trainer --wait=false >/dev/null
gone() { "$CTL_BIN" status --json | jq -e --arg u "$POD_UID" '
    ([.pods[] | select(.pod_uid == $u and (.annotation_core_limit > 0 or .memory_request_bytes > 0))]
     | length == 0) and ([.clients[] | select(.pod_uid == $u and
        (.core_limit_source == "annotation" or .mem_quota_source == "request"))] | length == 0)' >/dev/null; }
wait_for gone || step_fail "the deleted pod's settings stayed: '$(client)'"
say "7. kubectl delete pod trainer: its settings left status $(ms_since "$deleted_at") ms later"
say "   status: $(client) (Allocate's env, which may only lower)"
kill "$JOB"; wait "$JOB" 2>/dev/null || true
grep -q "AddressSanitizer\|runtime error" "$WORK"/*.log && step_fail "a sanitizer report"
say "   PASS"
pass "the whole flow: plugin registered, pod allocated, process identified by cgroup, annotation applied and enforced, kubelet restarted, plugin re-registered, pod deleted"
