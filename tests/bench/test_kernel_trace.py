"""bench/kernel_trace.py on synthetic traces and scheduler logs.

    python3 test_kernel_trace.py BENCH_DIR
"""
import os
import subprocess
import sys
import tempfile
import unittest

BENCH = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../bench")
sys.path.insert(0, BENCH)
import kernel_trace  # noqa: E402

MS = 1_000_000
# 2026-11-26T05:00:00.000Z in ns since the epoch.
T0 = 1795669200 * 1000 * MS


def log_line(at_ns, lease):
    ms = (at_ns - T0) // MS
    return (f"2026-11-26T05:00:{ms // 1000:02d}.{ms % 1000:03d}Z nvshare[scheduler 1] debug: "
            f"gpu 0: client 1 released lease {lease}: preempt 1.000 ms, drain 0.900 ms\n")


class Turns(unittest.TestCase):
    def test_release_cuts_the_gap_it_falls_in_not_a_longer_one(self):
        # Turn 1: 0-20 ms with a 1.8 ms host stall inside (8-9.8); released
        # at 20.05 ms; turn 2 starts 1.3 ms later (a long drain's next turn).
        spans = [(0, 8 * MS), (int(9.8 * MS), 20 * MS), (int(21.3 * MS), 40 * MS)]
        held = kernel_trace.turns(spans, [20 * MS])
        self.assertEqual(held, [(0, 20 * MS), (int(21.3 * MS), 40 * MS)])

    def test_no_release_one_turn(self):
        spans = [(0, 5), (10, 20), (100, 200)]
        self.assertEqual(kernel_trace.turns(spans, []), [(0, 200)])

    def test_overlapping_kernels_merge(self):
        self.assertEqual(kernel_trace.ran([(5, 9), (0, 6), (20, 30), (21, 25)]), [[0, 9], [20, 30]])

    def test_log_times_are_realtime_ns(self):
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write("2026-11-26T05:00:00.000Z nvshare[scheduler 1] info: listening\n")
            f.write(log_line(T0 + 1234 * MS, 7))
        try:
            self.assertEqual(kernel_trace.releases(f.name), [T0 + 1234 * MS])
        finally:
            os.unlink(f.name)


class Command(unittest.TestCase):
    def test_views_over_a_window(self):
        # Two 20 ms turns of 200 ms periods, kernels 90 % of each turn.
        kernels, releases = [], []
        for turn in range(2):
            start = T0 + turn * 200 * MS
            for k in range(10):
                kernels.append((start + 2 * k * MS, start + 2 * k * MS + int(1.8 * MS)))
            releases.append(start + int(20.05 * MS))
        with tempfile.TemporaryDirectory() as d:
            trace, log = os.path.join(d, "k"), os.path.join(d, "log")
            with open(trace, "w") as f:
                f.writelines(f"{lo} {hi}\n" for lo, hi in kernels)
            with open(log, "w") as f:
                f.writelines(log_line(at, i + 1) for i, at in enumerate(releases))
            out = subprocess.run([sys.executable, os.path.join(BENCH, "kernel_trace.py"), trace, log,
                                  str(T0), str(T0 + 400 * MS)], capture_output=True, text=True, check=True)
        # held: 2 x 19.8 ms (first kernel's start to last kernel's end).
        self.assertEqual(out.stdout.split(), ["kernel_busy=0.09000", "held=0.09900", "turns=2"])


if __name__ == "__main__":
    unittest.main()
