#!/usr/bin/env bash
# /metrics against slow clients (issue 27): 40 connections that each send a
# byte of a request every 4 s, and reconnect when closed, must not keep a
# scrape from its answer. Before, they held all of the server's connections
# (each byte renewed the idle timeout) and every scrape timed out. Each
# scrape is timed while they run, past the 10 s idle timeout. Loopback only.
#
#   metrics_slow_clients.sh SCHED WORKLOAD
source "$(dirname "$0")/lib.sh" "$1" "$2"

port=$(python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_METRICS_ADDR=127.0.0.1:$port
wait_for log_has_at_least "metrics on http://127.0.0.1:$port/metrics" 1 ||
    fail "the scheduler does not serve /metrics"

# The scheduler's CPU time in clock ticks (utime + stime).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$SCHED_PID/stat"; }
cpu_before=$(cpu_ticks)
python3 - "$port" <<'PY' || fail "a scrape was not answered within 1 s beside 40 slow clients"
import select, socket, sys, threading, time

PORT, SLOW, BEAT, SECONDS = int(sys.argv[1]), 40, 4.0, 13.0
REQUEST = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4096
opened, stop = threading.Event(), threading.Event()
reconnects = 0


def slowloris():
    """SLOW connections, each sending one byte every BEAT seconds (staggered),
    each opened again as soon as the server closes it."""
    global reconnects
    conns = {}

    def open_one(i, first):
        global reconnects
        s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
        s.setblocking(False)
        conns[s] = [i, 0, time.monotonic() + (i * BEAT / SLOW if first else 0)]
        reconnects += not first

    for i in range(SLOW):
        open_one(i, True)
    opened.set()
    while not stop.is_set():
        readable, _, _ = select.select(list(conns), [], [], 0.02)
        for s in readable:  # only an end of file or a reset is expected
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                i = conns.pop(s)[0]
                s.close()
                open_one(i, False)
        now = time.monotonic()
        for s, c in list(conns.items()):
            if now >= c[2]:
                try:
                    s.send(REQUEST[c[1] % len(REQUEST):][:1])
                    c[1] += 1
                except OSError:
                    pass  # closed: select reports it
                c[2] += BEAT
    for s in conns:
        s.close()


def scrape():
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
    except OSError as e:
        return None, str(e)
    ok = reply.startswith(b"HTTP/1.") and b" 200 " in reply[:16] and b"nvshare_clients" in reply
    return time.monotonic() - t0, None if ok else "reply %r" % reply[:40]


attacker = threading.Thread(target=slowloris)
attacker.start()
if not opened.wait(10):
    sys.exit("the slow clients could not connect")
latencies, errors = [], []
end = time.monotonic() + SECONDS
while time.monotonic() < end:
    took, error = scrape()
    if error:
        errors.append(error)
    else:
        latencies.append(took)
    time.sleep(0.5)
stop.set()
attacker.join()
print("MEASURED: %d scrapes beside %d slow clients over %.0f s: %d answered, latency ms %s; "
      "%d failed (%s); the slow clients reconnected %d times"
      % (len(latencies) + len(errors), SLOW, SECONDS, len(latencies),
         " ".join("%.0f" % (t * 1000) for t in latencies), len(errors),
         "; ".join(sorted(set(errors))) or "none", reconnects))
sys.exit(0 if not errors and max(latencies) < 1.0 else 1)
PY
echo "MEASURED: the scheduler used $(( ($(cpu_ticks) - cpu_before) * 1000 / $(getconf CLK_TCK) )) ms of CPU meanwhile"
pass "every scrape beside 40 slow clients answered within 1 s"
