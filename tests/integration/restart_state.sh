#!/usr/bin/env bash
# Settings survive a crash: after nvsharectl set (time quantum, a GPU's
# mode, switch time, pod limits, priorities and a floor, for pods not
# connected yet too) and
# kill -9 of the scheduler, a new scheduler reads the state file before
# its first client; when the clients re-register, status shows the same
# settings and limits as before, and the limit is enforced again. A
# corrupt state file, or a directory in its place, is moved aside with one
# error, and the scheduler starts with defaults.
source "$(dirname "$0")/lib.sh" "$1" "$2"
CTL_BIN=$3
ctl() { "$CTL_BIN" "$@"; }
export NVSHARE_STATE_FILE=$WORK/state/state.conf NVSHARE_RECONNECT_INTERVAL=100ms
GPUS=GPU-sim-0:16384,GPU-sim-1:8192
start_scheduler NVSHARE_GPUS=$GPUS

ctl set tq 200ms >/dev/null
ctl set mode concurrent --gpu 1 >/dev/null
ctl set switch-time 5s >/dev/null
ctl set core-limit team/job 30 >/dev/null
ctl set memory-limit team/job 1Gi >/dev/null
ctl set core-limit later/pod 40 >/dev/null
ctl set priority team/job low >/dev/null
ctl set min-share team/job 10 >/dev/null
ctl set priority later/service high >/dev/null
ctl set owner later/service 4242 >/dev/null
grep -q "^pod team/job core-limit=30 memory-limit=1Gi priority=1 min-share=10$" "$NVSHARE_STATE_FILE" ||
    fail "the state file does not hold the pod's settings: $(cat "$NVSHARE_STATE_FILE")"
grep -q "^pod later/service owner=4242 priority=3$" "$NVSHARE_STATE_FILE" ||
    fail "the state file does not hold a priority and an owner: $(cat "$NVSHARE_STATE_FILE")"

until=$(( $(now_ns) + 12000000000 ))
NVSHARE_POD_NAMESPACE=team NVSHARE_POD_NAME=job \
    "$WORKLOAD_BIN" GPU-sim-0 "$until" 1000 "$WORK/trace" >/dev/null 2>"$WORK/job.err" & job=$!
wait_for log_has_at_least "registered:" 1 || fail "the job did not register"

# What must be the same after the restart: no counters, ids or times.
snapshot() {
    ctl status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({
    "tq": d["node"]["tq_ns"], "switch": d["node"]["switch_time_fixed_ns"],
    "anti_thrash": d["node"]["anti_thrash"],
    "modes": [g["mode"] for g in d["gpus"]],
    "pods": sorted((p["namespace"], p["pod"], p["owner_uid"], p["core_limit"],
                    p["memory_limit_bytes"], p["priority_class"], p["min_share_percent"],
                    p["clients"]) for p in d["pods"]),
    "clients": sorted((c["namespace"], c["pod"], c["gpu_index"], c["core_limit"],
                       c["core_limit_source"], c["mem_quota_bytes"], c["priority"],
                       c["priority_source"], c["min_share_percent"]) for c in d["clients"]),
}, sort_keys=True))'
}
snapshot >"$WORK/before"

kill -9 "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null || true; SCHED_PID=
killed=$(now_ns)
# 2 s without a scheduler (a restart as operators meet it): the pod paces
# itself to the limit the scheduler told it, rather than run unscheduled.
sleep 2
: >"$WORK/sched.log"
start_scheduler NVSHARE_GPUS=$GPUS
wait_for log_has_at_least "registered:" 1 || fail "the job did not re-register"
restarted=$(now_ns)
snapshot >"$WORK/after"
diff "$WORK/before" "$WORK/after" >&2 || fail "status differs after the restart"
grep -q "settings from it: tq switch-time" "$WORK/sched.log" ||
    fail "the scheduler did not say what it read from the state file"

# The 30 % limit holds again: the job's share over the 4 s after the
# restart (four windows) is at most 30 % + 1.5 points. The job ends by
# itself, so its trace is complete.
wait "$job" || fail "the job failed"
check "$until > $restarted + 4500000000" "the restart took too long to measure after it"
share=$(awk -v a=$((restarted + 500000000)) -v b=$((restarted + 4500000000)) \
    '$2 >= a && $3 <= b { held += $3 - $2 } END { printf "%.1f", 100 * held / (b - a) }' "$WORK/trace")
echo "  the 30 % pod ran ${share}% of the 4 s after the restart"
check "$share <= 31.5 && $share >= 20" "share $share% after the restart, limit 30%"
away=$(awk -v a=$((killed + 200000000)) -v b=$((killed + 1800000000)) \
    '$2 >= a && $3 <= b { held += $3 - $2 } END { printf "%.1f", 100 * held / (b - a) }' "$WORK/trace")
echo "  the 30 % pod ran ${away}% of the 1.6 s while the scheduler was away"
check "$away <= 33 && $away >= 15" "share $away% while the scheduler was away, limit 30%"
pass "every setting is in force again after kill -9 and a restart"

# A corrupt state file: one clear error, kept aside, defaults.
stop_scheduler
printf 'tq 200ms\npod team/job core-limit=300\n' >"$NVSHARE_STATE_FILE"
: >"$WORK/sched.log"
start_scheduler NVSHARE_GPUS=$GPUS
[ "$(log_count 'is corrupt (line 2: pod: cannot read .core-limit=300.): moved to')" = 1 ] ||
    fail "no clear error for a corrupt state file"
test -f "$NVSHARE_STATE_FILE.corrupt" || fail "the corrupt file was not kept aside"
ctl status --json | grep -q '"tq_ns": 0,' || fail "not started with defaults (tq auto)"
pass "a corrupt state file is moved aside and the scheduler starts with defaults"

# A directory in its place (issue 27: the scheduler exited with status 1).
stop_scheduler
rm -rf "$NVSHARE_STATE_FILE" "$NVSHARE_STATE_FILE.corrupt"
mkdir "$NVSHARE_STATE_FILE"
: >"$WORK/sched.log"
start_scheduler NVSHARE_GPUS=$GPUS
[ "$(log_count 'is corrupt (it is not a regular file): moved to')" = 1 ] ||
    fail "no clear error for a directory at the state file's path"
test -d "$NVSHARE_STATE_FILE.corrupt" || fail "the directory was not moved aside"
ctl set tq 300ms >/dev/null
grep -q "^tq 300ms$" "$NVSHARE_STATE_FILE" || fail "settings are not saved after a directory was moved aside"
pass "a directory at the state file's path is moved aside, and settings are saved again"
