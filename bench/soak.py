#!/usr/bin/env python3
"""bench/soak.py - the monitor and the operator of bench/soak.sh.

  soak.py --ctl NVSHARECTL --sched-pid PID --sched-log LOG --duration S
          --tq TQ --victim-pidfile F [--trace-root DIR]
          --pod NAME=TARGET... [--flip POD=LOW/HIGH] [--memory-limit POD=SIZE]

Runs for --duration seconds, on a tick of 0.5 s:
  - every 3 s `nvsharectl status`, every 5 s a `set` (tq to its value, or
    anti-thrash on): an operator's chatter, each must succeed;
  - the --flip pod's core limit goes to LOW for every third minute (minutes
    1, 4, 7...), to HIGH otherwise; windows are aligned to those minutes;
  - every 30 s, once the victim (its pid in --victim-pidfile) holds the GPU,
    alternately SIGKILL it or SIGSTOP it for 3 s (soak.sh restarts it);
  - every 10 s a sample line: the scheduler's RSS and open fds, its
    connections, each pod's share of the GPU in those 10 s.
Then a summary with PASS/FAIL (see check()); exits 1 on FAIL.

A pod's share: with --trace-root (the fake GPU), from the fake driver's
trace of each of its processes (TRACE_ROOT/POD/trace.PID): the time its
kernels occupied the device, gaps under 3 ms between them included (the
time it held the GPU, as tests/hook/limits_fake.sh counts it). Without
(a real GPU), from the scheduler's held_ns of its clients (serial mode:
one holder at a time, so held time is GPU time); a client that exits loses
its last second.

TARGET: a core limit in percent (the share must stay within +1/-3 points
of it in every 60 s window), `rest` (an unlimited pod: the GPU left idle
beside it, 100 minus every pod's share, at most 6 points) or `-` (reported,
not checked: pods that come and go).
"""
import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import time

SLOT_S = 10
WINDOW_SLOTS = 6  # 60 s windows
MERGE_GAP_NS = 3_000_000
LIMIT_OVER, LIMIT_UNDER, REST_IDLE = 1.0, 3.0, 6.0
RSS_GROWTH_PCT, RSS_GROWTH_KB, FD_DRIFT = 10.0, 2048, 2


def ctl(args, ctl_bin):
    try:
        r = subprocess.run([ctl_bin, *args], capture_output=True, text=True, timeout=10)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        return 124, "", "timed out"


class TraceShares:
    """Per pod, GPU time per 10 s slot from the fake driver's traces, read
    incrementally; files of dead processes are removed once read."""

    def __init__(self, root, t0_ns):
        self.root, self.t0 = root, t0_ns
        self.files = {}  # path -> [offset, from, to, pod]
        self.slots = collections.defaultdict(lambda: collections.defaultdict(float))

    def add(self, pod, a, b):
        while a < b:
            k = (a - self.t0) // (SLOT_S * 10**9)
            end = min(b, self.t0 + (k + 1) * SLOT_S * 10**9)
            if k >= 0:
                self.slots[pod][k] += (end - a) / 1e9
            a = end

    def poll(self, now_ns):
        for pod in os.listdir(self.root):
            for name in os.listdir(os.path.join(self.root, pod)):
                path = os.path.join(self.root, pod, name)
                st = self.files.setdefault(path, [0, None, None, pod])
                with open(path, "rb") as f:
                    f.seek(st[0])
                    data = f.read()
                end = data.rfind(b"\n") + 1
                st[0] += end
                for line in data[:end].split(b"\n")[:-1]:
                    fields = line.split()
                    a, b = int(fields[1]), int(fields[2])
                    if st[1] is not None and a - st[2] < MERGE_GAP_NS:
                        st[2] = max(st[2], b)
                        continue
                    if st[1] is not None:
                        self.add(pod, st[1], st[2])
                    st[1], st[2] = a, b
                if st[1] is not None and st[2] < now_ns - MERGE_GAP_NS:
                    self.add(pod, st[1], st[2])
                    st[1] = st[2] = None
                pid = int(name.split(".")[1])
                if end == len(data) and st[1] is None and not os.path.exists(f"/proc/{pid}"):
                    os.unlink(path)
                    del self.files[path]


class HeldShares:
    """Per pod, GPU time per slot from the deltas of the clients' held_ns."""

    def __init__(self):
        self.held = {}
        self.slots = collections.defaultdict(lambda: collections.defaultdict(float))

    def sample(self, status, slot):
        held = {}
        for c in status.get("clients", []):
            key = (c["client_id"], c["gpu_index"])
            held[key] = c["held_ns"]
            self.slots[c["pod"] or "-"][slot] += (c["held_ns"] - self.held.get(key, 0)) / 1e9
        self.held = held


def proc_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def proc_cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log_kinds(path):
    """error and warning lines of the scheduler's log, by kind (the message
    with its numbers and quoted names blanked)."""
    kinds = collections.Counter()
    with open(path, errors="replace") as f:
        for line in f:
            # After the timestamp the log's lines begin with.
            m = re.search(r"nvshare\[\S+ \d+\] (error|warning): (.*)", line)
            if m:
                msg = re.sub(r"'[^']*'", "'*'", m.group(2))
                msg = re.sub(r"\d+(\.\d+)?", "N", msg)
                kinds[f"{m.group(1)}: {msg[:90]}"] += 1
    return kinds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--sched-pid", type=int, required=True)
    ap.add_argument("--sched-log", required=True)
    ap.add_argument("--duration", type=int, required=True)
    ap.add_argument("--tq", required=True)
    ap.add_argument("--victim-pidfile", required=True)
    ap.add_argument("--trace-root")
    ap.add_argument("--pod", action="append", default=[])
    ap.add_argument("--flip")
    opts = ap.parse_args()

    targets = dict(p.split("=", 1) for p in opts.pod)
    flip_pod, flip = None, None
    if opts.flip:
        flip_pod, levels = opts.flip.split("=")
        flip = tuple(int(x) for x in levels.split("/"))
    pods = list(targets)
    t0_mono = time.monotonic_ns()
    shares = TraceShares(opts.trace_root, t0_mono) if opts.trace_root else HeldShares()
    samples, errors = [], collections.Counter()
    flip_level, stopped_until, victim_acts, sched_died = None, None, 0, False
    tick = 0

    def target_of(pod, window):
        if pod == flip_pod:
            return flip[0] if window % 3 == 1 else flip[1]
        return targets[pod]

    print(f"# every {SLOT_S} s: time, scheduler RSS (KiB), open fds, connections "
          f"(clients+unregistered), each pod's share of the GPU in the slot (%)", flush=True)
    print("#   t     rss  fds conn  " + "  ".join(f"{p:>10}" for p in pods), flush=True)
    while True:
        tick += 1
        time.sleep(max(0.0, t0_mono / 1e9 + tick * 0.5 - time.monotonic()))
        t = tick * 0.5
        if not os.path.exists(f"/proc/{opts.sched_pid}"):
            sched_died = True
            print(f"# {t:.0f} s: the scheduler is gone", flush=True)
            break
        if flip_pod:
            want = target_of(flip_pod, int(t // 60))
            if want != flip_level:
                rc, _, err = ctl(["set", "core-limit", flip_pod, str(want)], opts.ctl)
                if rc:
                    errors[f"set core-limit: {err.strip()}"] += 1
                flip_level = want
        if t % 3 == 0:
            rc, _, err = ctl(["status"], opts.ctl)
            if rc:
                errors[f"status: {err.strip()}"] += 1
        if t % 5 == 0:
            args = ["set", "tq", opts.tq] if t % 10 else ["set", "anti-thrash", "on"]
            rc, _, err = ctl(args, opts.ctl)
            if rc:
                errors[f"{' '.join(args[:2])}: {err.strip()}"] += 1
        if stopped_until and t >= stopped_until[1]:
            resume(stopped_until[0])
            stopped_until = None
        if t % 30 == 15 and not stopped_until:
            done, stopped_until = victim_action(opts, victim_acts, t)
            victim_acts += done
        if t % SLOT_S == 0:
            slot = int(t // SLOT_S) - 1
            rss = proc_rss_kb(opts.sched_pid)
            fds = len(os.listdir(f"/proc/{opts.sched_pid}/fd"))
            rc, out, err = ctl(["status", "--json"], opts.ctl)
            status = json.loads(out) if rc == 0 else {}
            if rc:
                errors[f"status --json: {err.strip()}"] += 1
            node = status.get("node", {})
            conns = node.get("client_count", 0) + node.get("unregistered_connections", 0)
            if opts.trace_root:
                shares.poll(time.monotonic_ns())
            elif rc == 0:
                shares.sample(status, slot)
            samples.append((t, rss, fds, conns, proc_cpu_s(opts.sched_pid)))
            # The trace's last slot is complete once its intervals close:
            # print the one before.
            show = slot - 1 if opts.trace_root else slot
            cells = "  ".join(f"{100 * shares.slots[p].get(show, 0) / SLOT_S:10.2f}" for p in pods)
            print(f"{t:5.0f} {rss:7d} {fds:4d} {conns:4d}  {cells}", flush=True)
        elif not opts.trace_root and t % 1 == 0:
            # Held time every second: a client that exits loses at most 1 s.
            rc, out, _ = ctl(["status", "--json"], opts.ctl)
            if rc == 0:
                shares.sample(json.loads(out), int(t // SLOT_S))
        if t >= opts.duration:
            break
    if stopped_until:
        resume(stopped_until[0])
    if opts.trace_root:
        time.sleep(0.1)
        shares.poll(time.monotonic_ns() + 10**9)
    sys.exit(summary(opts, pods, target_of, shares, samples, errors, victim_acts, sched_died))


def resume(pid):
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def victim_action(opts, n, t):
    """Waits up to 3 s for the victim to hold the GPU, then SIGKILLs it
    (even n) or SIGSTOPs it for 3 s (odd n). Returns (1 if done, and for a
    stop (pid, when to SIGCONT it))."""
    try:
        pid = int(open(opts.victim_pidfile).read())
    except (OSError, ValueError):
        return 0, None
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        rc, out, _ = ctl(["status", "--json"], opts.ctl)
        if rc == 0 and any(c["pid"] == pid and c["state"] == "holding"
                           for c in json.loads(out).get("clients", [])):
            if n % 2 == 0:
                os.kill(pid, signal.SIGKILL)
                print(f"# {t:.0f} s: SIGKILL the victim {pid} while it holds the GPU", flush=True)
                return 1, None
            os.kill(pid, signal.SIGSTOP)
            print(f"# {t:.0f} s: SIGSTOP the victim {pid} while it holds the GPU, 3 s", flush=True)
            return 1, (pid, t + 3)
        time.sleep(0.05)
    print(f"# {t:.0f} s: the victim did not hold the GPU within 3 s", flush=True)
    return 0, None


def summary(opts, pods, target_of, shares, samples, errors, victim_acts, sched_died):
    failed = []
    print("\n== soak summary")
    if not samples:
        print("no samples")
        return 1
    rss = [s[1] for s in samples]
    fds = [s[2] for s in samples]
    # The baseline: the first sample after 5 minutes (half the run if shorter).
    base_t = min(300, opts.duration / 2)
    base = next(s for s in samples if s[0] >= base_t or s is samples[-1])
    growth = rss[-1] - base[1]
    rss_ok = growth < RSS_GROWTH_KB or growth < base[1] * RSS_GROWTH_PCT / 100
    print(f"scheduler RSS KiB: first {rss[0]}, at {base[0]:.0f} s {base[1]}, last {rss[-1]}, "
          f"max {max(rss)}: growth after {base[0]:.0f} s {growth:+d} KiB "
          f"({100 * growth / base[1]:+.1f} %) {'ok' if rss_ok else 'FAIL'}")
    rss_ok or failed.append("RSS growth")
    # fds less connections: what the scheduler holds besides its clients.
    own = [s[2] - s[3] for s in samples]
    drift = max(abs(x - own[0]) for x in own)
    fd_ok = drift <= FD_DRIFT
    print(f"scheduler fds: first {fds[0]}, last {fds[-1]}, max {max(fds)}; less its connections: "
          f"first {own[0]}, last {own[-1]}, min {min(own)}, max {max(own)} "
          f"(drift {drift}, allowed {FD_DRIFT}) {'ok' if fd_ok else 'FAIL'}")
    fd_ok or failed.append("fd drift")
    cpu = samples[-1][4] - samples[0][4]
    print(f"scheduler CPU: {cpu:.1f} s in {samples[-1][0] - samples[0][0]:.0f} s "
          f"({100 * cpu / max(1, samples[-1][0] - samples[0][0]):.2f} % of a core)")
    print(f"scheduler alive throughout: {'no, FAIL' if sched_died else 'yes'}")
    sched_died and failed.append("scheduler died")

    # Windows of 60 s, the first left out (start-up).
    slots = len(samples)
    windows = range(1, slots // WINDOW_SLOTS)
    share = {p: [100 * sum(shares.slots[p].get(w * WINDOW_SLOTS + i, 0)
                           for i in range(WINDOW_SLOTS)) / (SLOT_S * WINDOW_SLOTS)
                 for w in windows] for p in pods}
    if not windows:
        print("shares: not checked, no 60 s window after the first (DURATION < 120)")
        failed.append("too short to check shares")
    print(f"shares per 60 s window ({len(windows)} windows, the first minute left out); "
          f"limits +{LIMIT_OVER:g}/-{LIMIT_UNDER:g} points, unlimited: GPU idle <= {REST_IDLE:g} points")
    print(f"  {'pod':<12} {'target':>8} {'mean':>7} {'worst':>7}  check")
    for p in pods:
        if not share[p]:
            continue
        mean = sum(share[p]) / len(share[p])
        if target_of(p, 1) == "-":
            print(f"  {p:<12} {'-':>8} {mean:7.2f} {'':>7}  (not checked)")
            continue
        if target_of(p, 1) == "rest":
            idle = [100 - sum(share[q][i] for q in pods) for i in range(len(windows))]
            worst = max(idle)
            ok = worst <= REST_IDLE
            print(f"  {p:<12} {'rest':>8} {mean:7.2f} {'':>7}  GPU idle beside it: mean "
                  f"{sum(idle) / len(idle):.2f}, worst {worst:.2f} {'ok' if ok else 'FAIL'}")
        else:
            errs = [share[p][i] - int(target_of(p, w)) for i, w in enumerate(windows)]
            worst = max(errs, key=abs)
            ok = all(-LIMIT_UNDER <= e <= LIMIT_OVER for e in errs)
            tgt = "/".join(sorted({str(target_of(p, w)) for w in windows}, key=int))
            print(f"  {p:<12} {tgt:>8} {mean:7.2f} {worst:+7.2f}  error (share - target) "
                  f"mean {sum(errs) / len(errs):+.2f} {'ok' if ok else 'FAIL'}")
        ok or failed.append(f"share of {p}")
    print(f"victim: {victim_acts} SIGKILL/SIGSTOP while holding")
    print("operator calls failed: " + (", ".join(f"{k} x{v}" for k, v in errors.items()) or "none"))
    errors and failed.append("operator calls")
    kinds = log_kinds(opts.sched_log)
    print(f"scheduler log: {sum(kinds.values())} error/warning lines" + (":" if kinds else ""))
    for kind, n in kinds.most_common():
        print(f"  {n:6d}  {kind}")
    print("PASS" if not failed else "FAIL: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    main()
