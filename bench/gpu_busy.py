"""gpu_busy.py - the GPU's own record of when it ran kernels, for benchmarks.

    python3 gpu_busy.py sample FILE [GPU]      (until killed)
    python3 gpu_busy.py busy FILE FROM_NS UNTIL_NS
    python3 gpu_busy.py onset FILE FROM_NS
    python3 gpu_busy.py worst FILE FROM_NS UNTIL_NS SECONDS

`sample` appends NVML's utilization samples of GPU (default 0) to FILE, one
"dev TIMESTAMP_US PERCENT" line each: the percent of the sample's period in
which one or more kernels ran, as the driver measures it. The timestamps
are CLOCK_REALTIME microseconds (the first line, "clock NOW_US", lets a
reader check that). It reads the driver's sample buffer every 0.5 s, so no
sample is missed.

`busy` prints the fraction of FROM_NS..UNTIL_NS (CLOCK_REALTIME) in which the
GPU ran kernels: each sample covers the time since the one before it, and
counts by its overlap with the window. The driver truncates each sample to
a whole percent (on the H100, 200 ms samples; a lone compute-bound job at
99.x % reads 99 throughout), so a sample above 0 counts as half a percent
more: uncorrected, a job held to 10 % read 0.45 point low against its work
and one held to 90 % 0.46 point high, relative to the same job alone.

FILE may instead hold bench/gpm_busy.c's "gpm TIMESTAMP_US PERCENT" lines:
percents of the GPU's own activity counters, exact rather than whole, read
as they are (no half-percent correction). The other commands read either.

`onset` prints when the GPU first ran kernels after FROM_NS (ns, within
its first busy sample); `worst` the busy fraction of the busiest window of
SECONDS within FROM_NS..UNTIL_NS, one window starting at each sample.

A benchmark that measures one job at a time reads that job's share of GPU
time from it, independently of both the job (no CUDA events, which count
the gaps a gate leaves in a queue) and the scheduler (whose billing is what
is being checked). A sample that straddles an edge of the window is exact
only if the GPU did the same before and after the edge inside it: start
the job after an idle gap and keep it running past UNTIL_NS.

Uses libnvidia-ml through ctypes: no Python package beyond the standard
library is needed.
"""
import ctypes
import sys
import time

NVML_GPU_UTILIZATION_SAMPLES = 1


class Sample(ctypes.Structure):
    # nvmlSample_t: the value is a union of 8 bytes; utilization samples
    # are unsigned ints (NVML_VALUE_TYPE_UNSIGNED_INT) in its first 4.
    _fields_ = [("timestamp_us", ctypes.c_ulonglong), ("value", ctypes.c_uint),
                ("pad", ctypes.c_uint)]


def sample(path, gpu):
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    if nvml.nvmlInit_v2() != 0:
        sys.exit("gpu_busy: nvmlInit failed")
    device = ctypes.c_void_p()
    if nvml.nvmlDeviceGetHandleByIndex_v2(gpu, ctypes.byref(device)) != 0:
        sys.exit(f"gpu_busy: no GPU {gpu}")
    last_seen = ctypes.c_ulonglong(0)
    buf = (Sample * 1024)()
    with open(path, "a", buffering=1) as out:
        out.write(f"clock {time.time_ns() // 1000}\n")
        while True:
            count, value_type = ctypes.c_uint(len(buf)), ctypes.c_int()
            rc = nvml.nvmlDeviceGetSamples(device, NVML_GPU_UTILIZATION_SAMPLES,
                                           last_seen, ctypes.byref(value_type),
                                           ctypes.byref(count), buf)
            if rc == 0:
                for s in buf[:count.value]:
                    if s.timestamp_us > last_seen.value:
                        out.write(f"dev {s.timestamp_us} {s.value}\n")
                        last_seen.value = s.timestamp_us
            elif rc != 13:  # NVML_ERROR_NOT_FOUND: no new sample yet
                sys.exit(f"gpu_busy: nvmlDeviceGetSamples returned {rc}")
            time.sleep(0.5)


def samples(path):
    """(end_us, percent) of each sample, percent corrected for truncation
    where it is a whole one."""
    out = []
    for line in open(path):
        fields = line.split()
        if fields[0] in ("dev", "gpm"):
            t, percent = float(fields[1]), float(fields[2])
            if fields[0] == "dev" and 0 < percent < 100:
                percent += 0.5  # the middle of what a truncated value stands for
            out.append((t, percent))
    return out


def busy_fraction(points, lo, hi):
    """Fraction of lo..hi (us) in which kernels ran; None if not covered."""
    covered = ran = 0.0
    for (previous, _), (t, percent) in zip(points, points[1:]):
        overlap = min(t, hi) - max(previous, lo)
        if overlap > 0:
            covered += overlap
            ran += overlap * percent / 100
    return ran / covered if covered >= 0.99 * (hi - lo) else None


def busy(path, from_ns, until_ns):
    fraction = busy_fraction(samples(path), from_ns / 1000, until_ns / 1000)
    if fraction is None:
        sys.exit("gpu_busy: the samples do not cover the window")
    print(f"{fraction:.5f}")


def onset(path, from_ns):
    """When the GPU first ran kernels after FROM_NS: within the first busy
    sample, as if its busy time came at its end."""
    points = samples(path)
    for (previous, _), (t, percent) in zip(points, points[1:]):
        if t * 1000 > from_ns and percent > 0:
            print(int((t - (t - previous) * percent / 100) * 1000))
            return
    sys.exit("gpu_busy: the GPU never ran kernels after FROM_NS")


def worst(path, from_ns, until_ns, seconds):
    """The busiest window of SECONDS within FROM_NS..UNTIL_NS, one starting
    at each sample's start."""
    points = samples(path)
    lo, hi, span = from_ns / 1000, until_ns / 1000, seconds * 1e6
    fractions = [busy_fraction(points, t, t + span) for t, _ in points
                 if lo <= t and t + span <= hi]
    fractions = [f for f in fractions if f is not None]
    if not fractions:
        sys.exit("gpu_busy: no whole window")
    print(f"{max(fractions):.5f}")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "sample":
        sample(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    elif len(sys.argv) == 5 and sys.argv[1] == "busy":
        busy(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "onset":
        onset(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 6 and sys.argv[1] == "worst":
        worst(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)
