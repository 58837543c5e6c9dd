#!/usr/bin/env bash
# /metrics as a real Prometheus sees it: promtool accepts the endpoint's
# text, a prometheus server scrapes it, and the per-pod series it stores
# hold what nvsharectl status --json says (the pod's core limit and memory
# quota). Loopback only.
#
#   metrics_prometheus.sh SCHED WORKLOAD NVSHARECTL PROMETHEUS PROMTOOL
source "$(dirname "$0")/lib.sh" "$1" "$2"
CTL_BIN=$3 PROMETHEUS=$4 PROMTOOL=$5
ctl() { "$CTL_BIN" "$@"; }
PROM_PID= JOBS=()
cleanup() {
    for pid in $PROM_PID "${JOBS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait $PROM_PID "${JOBS[@]}" 2>/dev/null || true
    stop_scheduler
    rm -rf "$WORK"
}
trap cleanup EXIT

# Two loopback ports nobody listens on now.
read -r sched_port prom_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
url=http://127.0.0.1:$sched_port/metrics

start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_TQ=100ms \
    NVSHARE_METRICS_ADDR=127.0.0.1:$sched_port
wait_for log_has_at_least "metrics on $url" 1 || fail "the scheduler does not serve $url"
ctl set core-limit team/job 20 >/dev/null
ctl set memory-limit team/job 2Gi >/dev/null
until=$(( $(now_ns) + 60000000000 ))
for pod in job other; do
    NVSHARE_POD_NAMESPACE=team NVSHARE_POD_NAME=$pod \
        "$WORKLOAD_BIN" GPU-sim-0 "$until" >/dev/null 2>&1 &
    JOBS+=($!)
done
wait_for log_has_at_least "registered:" 2 || fail "the workloads did not register"

scraped() { curl -sf "$url" >"$WORK/metrics.txt"; }
throttled() {
    scraped && awk '/^nvshare_pod_throttled_seconds_total\{namespace="team",pod="job",/ && $2 > 0 { f = 1 }
                    END { exit !f }' "$WORK/metrics.txt"
}
wait_for throttled || fail "the 20 % pod's throttled seconds never grew"
"$PROMTOOL" check metrics <"$WORK/metrics.txt" >"$WORK/promtool.out" 2>&1 ||
    { cat "$WORK/promtool.out" >&2; fail "promtool check metrics rejects /metrics"; }
for family in nvshare_clients nvshare_messages_total nvshare_decision_seconds_bucket \
        nvshare_gpu_memory_capacity_bytes nvshare_gpu_mode nvshare_gpu_holder_changes_total \
        nvshare_gpu_swaps_total nvshare_pod_memory_quota_bytes nvshare_pod_core_share_ratio \
        nvshare_pod_gpu_seconds_total nvshare_pod_lock_wait_seconds_bucket \
        nvshare_pod_preemptions_total nvshare_pod_drain_seconds_count; do
    grep -q "^$family[{ ]" "$WORK/metrics.txt" || fail "/metrics has no $family"
done
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$sched_port/" | grep -q 404 ||
    fail "a path other than /metrics is not a 404"

cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: nvshare
    static_configs:
      - targets: ['127.0.0.1:$sched_port']
EOF
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" >"$WORK/prometheus.log" 2>&1 &
PROM_PID=$!

# query PROMQL: the value of its first series, or nothing.
query() {
    curl -sf "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
        python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")'
}
has_series() { [ -n "$(query "$1" 2>/dev/null)" ]; }
wait_for has_series 'nvshare_pod_core_limit_ratio{namespace="team",pod="job"}' ||
    { tail -n 5 "$WORK/prometheus.log" >&2; fail "prometheus never stored a scrape of the pod's series"; }
[ "$(query 'up{job="nvshare"}')" = 1 ] || fail "prometheus does not see the target up"

# What status says of the pod, against what prometheus stored.
ctl status --json >"$WORK/status.json"
read -r core quota < <(python3 -c '
import json, sys
c = [c for c in json.load(open(sys.argv[1]))["clients"] if c["pod"] == "job"][0]
print(c["core_limit"], c["mem_quota_bytes"])' "$WORK/status.json")
[ "$core" = 20 ] && [ "$quota" = $((2 << 30)) ] || fail "status shows core $core, quota $quota"
stored_core=$(query 'nvshare_pod_core_limit_ratio{namespace="team",pod="job"} * 100')
stored_quota=$(query 'nvshare_pod_memory_quota_bytes{namespace="team",pod="job"}')
check "$stored_core == $core" "prometheus stored a core limit of $stored_core %, status says $core %"
check "$stored_quota == $quota" "prometheus stored a quota of $stored_quota bytes, status says $quota"
pass "promtool accepts /metrics; prometheus scraped it and stores the pod's core limit ($core %) and quota ($quota bytes) that status shows"
