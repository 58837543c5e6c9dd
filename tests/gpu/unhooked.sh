#!/usr/bin/env bash
# unhooked.sh - processes that escape libnvshare, on a real GPU and its
# NVML: a process with a CUDA context through libnvshare and one without
# LD_PRELOAD (python3 + ctypes on libcuda.so.1, no toolkit needed), each
# holding 256 MiB. nvsharectl status must list exactly the second as
# unhooked, with its pid and at least its 256 MiB as NVML counts it; the
# scheduler must warn about it once, and forget it once it exits. Only
# the GPU under test counts (lib.sh's gpu_target: CUDA_VISIBLE_DEVICES,
# else index 0): processes on the host's other GPUs are listed by the
# scheduler too, and left out here.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
gpu_target
gpu_work_dir
gpu_build nvshare nvshare-scheduler nvsharectl
export NVSHARE_SOCK_DIR=$WORK/sock
fail() { echo "FAIL: $*"; tail -n 20 "$WORK/sched.log"; kill $HOOKED $RAW 2>/dev/null; sched_stop; exit 1; }

cat >"$WORK/ctx.py" <<'PY'
# A CUDA context and 256 MiB on CUDA's device 0 (CUDA_VISIBLE_DEVICES: the
# GPU under test) for argv[1] seconds.
import ctypes, sys, time
cu = ctypes.CDLL("libcuda.so.1")
ctx, dev, ptr = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_uint64()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
assert cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(256 << 20)) == 0
time.sleep(float(sys.argv[1]))
PY
sched_start "$WORK/sched.log"
LD_PRELOAD=$LIB NVSHARE_POD_NAME=hooked python3 "$WORK/ctx.py" 30 &
HOOKED=$!
python3 "$WORK/ctx.py" 10 &
RAW=$!

# "<clients on the GPU> <pid>:<has 256 MiB>:<origin> ..." for the
# unhooked processes of the GPU under test.
status() {
    "$CTL_BIN" status --json | python3 -c 'import json, sys
s, uuid = json.load(sys.stdin), sys.argv[1]
print(sum(c["gpu_uuid"] == uuid for c in s["clients"]),
      *("%d:%d:%s" % (u["pid"], u["used_bytes"] >= 256 << 20, u["origin"])
        for u in s["unhooked"] if u["gpu_uuid"] == uuid))' "$GPU_UUID"
}
for _ in $(seq 300); do [[ "$(status)" == "1 $RAW:1:"* ]] && break; sleep 0.05; done
got=$(status)
[[ "$got" == "1 $RAW:1:"* ]] && [ "$(wc -w <<<"$got")" -eq 2 ] ||
    fail "status says '$got' for $GPU_UUID, not the hooked client and only pid $RAW unhooked"
"$CTL_BIN" status | sed -n '/without nvshare/,$p'
seen=$("$CTL_BIN" status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["node"]["unhooked_seen"])')
[ "$seen" = 1 ] || echo "note: the scheduler saw $seen unhooked processes on the host (other GPUs' count too)"
wait "$RAW"
for _ in $(seq 300); do [ "$(status)" = "1" ] && break; sleep 0.05; done
[ "$(status)" = "1" ] || fail "status says '$(status)' after pid $RAW exited"
kill "$HOOKED"; wait "$HOOKED" 2>/dev/null
sched_stop
[ "$(grep -c "warning.*pid $RAW uses it without nvshare" "$WORK/sched.log")" -eq 1 ] ||
    fail "not exactly one warning for pid $RAW"
grep -q "pid $HOOKED uses it without nvshare" "$WORK/sched.log" && fail "the hooked process was called unhooked"
grep "without nvshare" "$WORK/sched.log"
echo "PASS: the unhooked process on the real GPU was listed, warned about once, and went"
