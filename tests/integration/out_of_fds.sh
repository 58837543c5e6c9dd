#!/usr/bin/env bash
# The scheduler out of file descriptors (found by bench/soak.sh's probes):
#  - control connections that send nothing are closed after 2 s (they held
#    their descriptor for good);
#  - at its RLIMIT_NOFILE, a pending connection is closed unserved, once,
#    with a warning, instead of spinning the event loop on the readable
#    listening socket (a core at 100 % before);
#  - once descriptors are free again, nvsharectl and clients are served.
# usage: out_of_fds.sh SCHEDULER WORKLOAD NVSHARECTL
source "$(dirname "$0")/lib.sh"
CTL=$3
LIMIT=40

start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
wait_for test -S "$NVSHARE_SOCK_DIR/control.sock" || fail "no control socket"
prlimit --pid "$SCHED_PID" --nofile=$LIMIT:$LIMIT || fail "prlimit"

# 50 idle control connections: more than the scheduler's descriptors, so
# some stay pending. Its CPU time over the next second, then its fds once
# the idle ones should have been closed.
python3 - "$NVSHARE_SOCK_DIR/control.sock" "$SCHED_PID" >"$WORK/probe.out" <<'EOF' || fail "probe: $(cat "$WORK/probe.out")"
import os, socket, sys, time
path, pid = sys.argv[1], int(sys.argv[2])
def cpu_s():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
base = len(os.listdir(f"/proc/{pid}/fd"))
conns = []
for _ in range(50):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    conns.append(s)
time.sleep(0.3)
before = cpu_s()
time.sleep(1)
print(f"cpu={cpu_s() - before:.2f} base={base}")
deadline = time.time() + 5
while time.time() < deadline and len(os.listdir(f"/proc/{pid}/fd")) > base:
    time.sleep(0.05)
print(f"fds={len(os.listdir(f'/proc/{pid}/fd'))}")
EOF
cpu=$(field cpu "$WORK/probe.out")
check "$cpu < 0.3" "the scheduler spun at its descriptor limit: ${cpu} s of CPU in 1 s"
log_has_at_least "out of file descriptors (limit $LIMIT): closed a new connection on control.sock unserved" 1 ||
    fail "no warning about the descriptor limit"
check "$(field fds "$WORK/probe.out") <= $(field base "$WORK/probe.out")" \
    "idle control connections were not closed: fds $(field fds "$WORK/probe.out"), $(field base "$WORK/probe.out") before"
log_has_at_least "control: [0-9]* connection(s) sent no request for 2.0 s: disconnecting" 1 ||
    fail "no line about the idle control connections"
pass "at the limit: ${cpu} s of CPU in 1 s, one warning; idle control connections closed"

"$CTL" status >/dev/null || fail "nvsharectl status after the descriptors were freed"
"$WORKLOAD_BIN" GPU-sim-0 $(( $(now_ns) + 200000000 )) >"$WORK/w.out" 2>"$WORK/w.err" ||
    fail "a client after the descriptors were freed: $(cat "$WORK/w.err")"
[ "$(field grants "$WORK/w.out")" -ge 1 ] && ! grep -q "no scheduler\|refused" "$WORK/w.err" ||
    fail "a client after the descriptors were freed was not scheduled: $(cat "$WORK/w.out" "$WORK/w.err")"
"$CTL" status --json | grep -q '"refused_connections": [1-9]' ||
    fail "the connections closed unserved are not counted as refused"
pass "served again afterwards; the closed ones counted as refused"
