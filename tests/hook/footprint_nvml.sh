#!/usr/bin/env bash
# A client's footprint uses the context overhead NVML measures: the
# scheduler discovers the (fake) GPU through NVML, a client allocates
# 1024 MiB and runs, NVML says its process uses 1792 MiB; its footprint must
# become 1792 MiB (allocations + 768 MiB measured overhead) instead of the
# 1536 MiB that the assumed 512 MiB overhead gives.
#
# usage: footprint_nvml.sh SCHEDULER FAKE_LIB_DIR SIM_WORKLOAD NVSHARECTL
set -euo pipefail
SCHED=$1 FAKE_DIR=$2 SIM=$3 CTL=$4
WORK=$(mktemp -d /tmp/nvshare-fpnvml.XXXXXX)
SCHED_PID= SIM_PID=
trap 'kill $SCHED_PID $SIM_PID 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$WORK/sched.log" >&2; exit 1; }
UUID=GPU-fa4e0000-0000-0000-0000-000000000000
MiB=1048576

export NVSHARE_SOCK_DIR=$WORK FAKE_NVML_PROCESSES=$WORK/procs
: >"$WORK/procs"
LD_LIBRARY_PATH=$FAKE_DIR NVSHARE_CONTEXT_OVERHEAD=512Mi "$SCHED" >"$WORK/sched.log" 2>&1 &
SCHED_PID=$!
for _ in $(seq 500); do [ -S "$WORK/scheduler.sock" ] && break; sleep 0.02; done
grep -q "$UUID" "$WORK/sched.log" || fail "the scheduler did not discover the fake GPU through NVML"

# The client outlives the checks however slow a loaded machine makes them
# (each is a status query and a python3 start); the trap stops it.
SIM_MEMORY_MB=1024 "$SIM" "$UUID" $(( $(date +%s%N) + 300000000000 )) >/dev/null 2>&1 &
SIM_PID=$!

footprint() {
    "$CTL" status --json | python3 -c 'import json, sys
c = json.load(sys.stdin)["clients"]
print(c[0]["footprint_bytes"] if c else 0)'
}
# Before NVML knows the process: the assumed overhead.
for _ in $(seq 500); do [ "$(footprint)" -eq $(( 1536 * MiB )) ] && break; sleep 0.02; done
[ "$(footprint)" -eq $(( 1536 * MiB )) ] || fail "footprint $(footprint), not 1536 MiB before measuring"
echo "$SIM_PID $(( 1792 * MiB ))" >"$WORK/procs"
# Sampled every 2 s while the client runs.
for _ in $(seq 300); do [ "$(footprint)" -eq $(( 1792 * MiB )) ] && break; sleep 0.02; done
[ "$(footprint)" -eq $(( 1792 * MiB )) ] ||
    fail "footprint $(footprint), not 1792 MiB after NVML measured 768 MiB of overhead"
echo "PASS: the footprint uses the context overhead NVML measures"
