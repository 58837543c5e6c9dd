"""kernel_trace.py - a job's own kernels, as the GPU timed them, for benchmarks.

    python3 kernel_trace.py TRACE SCHED_LOG FROM_NS UNTIL_NS

TRACE holds one "START_NS END_NS" line per kernel of one job (CLOCK_REALTIME;
bench/matmul.py's KERNEL_TRACE, from CUPTI). Prints, for FROM_NS..UNTIL_NS:

  kernel_busy=  the fraction in which one of the job's kernels ran;
  held=         the fraction covered by the job's turns, each from its
                first kernel's start to its last kernel's end;
  turns=        how many turns that window overlaps.

held is the GPU time that a limit caps, seen from the job: the GPU's own
timestamps of its kernels. Whatever the job's turns contain besides its
kernels is the job's: its host's gaps, and the GPU's wake-up from idle,
which delays the first kernel of a turn and lengthens the gaps after the
job's syncs (bench/compute_limits.sh says by how much).

Turns end where the scheduler's debug log (SCHED_LOG, NVSHARE_DEBUG=1) says
the job released the GPU: at each release, the longest gap between kernels
that overlaps the logged millisecond (widened by 0.2 ms) is taken as the
gap between two turns. A gap's length alone does not tell: torch.compile's
host stalls 1.8 ms inside a turn, while a CUDA graph's next turn can start
1.3 ms after a long drain. The log only places the cuts; every duration
comes from the GPU's timestamps. A job that never released holds one turn.
"""
import calendar
import re
import sys
import time

RELEASE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z .* released lease ")
MARGIN_NS = 200_000


def releases(path):
    """Logged release times (ns, CLOCK_REALTIME, truncated to the ms)."""
    at = []
    with open(path) as log:
        for line in log:
            m = RELEASE.match(line)
            if m:
                seconds = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
                at.append(seconds * 1_000_000_000 + int(m.group(2)) * 1_000_000)
    return at


def ran(kernels):
    """The union of the kernels' spans, as sorted disjoint (start, end)."""
    merged = []
    for start, end in sorted(kernels):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def turns(spans, released):
    """spans grouped into turns: a cut at the longest gap near each release."""
    cuts = set()
    for at in released:
        lo, hi = at - MARGIN_NS, at + 1_000_000 + MARGIN_NS
        near = [(spans[i + 1][0] - spans[i][1], i) for i in range(len(spans) - 1)
                if spans[i][1] < hi and spans[i + 1][0] > lo]
        if near:
            cuts.add(max(near)[1])
    grouped, first = [], 0
    for i in range(len(spans)):
        if i in cuts or i == len(spans) - 1:
            grouped.append((spans[first][0], spans[i][1]))
            first = i + 1
    return grouped


def inside(spans, lo, hi):
    return sum(max(0, min(end, hi) - max(start, lo)) for start, end in spans)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("\n\n")[1])
    trace, log, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with open(trace) as f:
        spans = ran(tuple(map(int, line.split()[:2])) for line in f if line.strip())
    held = turns(spans, releases(log))
    overlapping = sum(1 for start, end in held if end > lo and start < hi)
    print(f"kernel_busy={inside(spans, lo, hi) / (hi - lo):.5f} "
          f"held={inside(held, lo, hi) / (hi - lo):.5f} turns={overlapping}")


if __name__ == "__main__":
    main()
