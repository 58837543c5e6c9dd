"""idle_jobs.py - the processes of tests/gpu/idle_reclaim.sh.

    python3 idle_jobs.py holder --framework F --gib X --state-dir D [options]
    python3 idle_jobs.py worker --gib Y --steps N [options]
    python3 idle_jobs.py analyze --dir D --mode full|reclaim [options]

holder (process A, a "notebook"): allocates X GiB in equal chunks of
--chunk-mib filled with a known pattern (per chunk a normal distribution
from seed --seed + i: torch.randn with a generator, jax.random.normal,
cupy RandomState), keeps their device addresses and a position-weighted
checksum of their bits, runs --steps steps (each reads every chunk and
runs a few small matmuls) and goes idle. Idle, it writes D/idle (JSON:
pid, idle_ns, step_ms, ...) and polls for D/wake every 2 ms (no GPU work,
no CUDA call) for at most --timeout seconds. Once D/wake exists it runs one
more step, timed from the moment it saw the file (wake_step_ms: the step
plus whatever waited for the GPU and for the memory to come back), then
checks that the addresses are unchanged, that the checksum is the same and
that every chunk is bit-identical to its pattern regenerated from its seed.
Result: one line on stdout

  idle_jobs holder pid=.. framework=.. gib=.. chunks=.. step_ms=..
      wake_ns=.. wake_step_ms=.. ptrs=same|CHANGED checksum=same|CHANGED
      identical=N/M check=ok|FAILED

and the same as JSON in D/result. F: torch (PyTorch; its allocator is
PYTORCH_CUDA_ALLOC_CONF's), jax (XLA's BFC pool, preallocated unless
XLA_PYTHON_CLIENT_PREALLOCATE=false), cupy (CuPy's memory pool).

worker (process B, PyTorch): its time 0 is taken before `import torch`.
Allocates Y GiB in chunks (torch.empty: no kernel), zeroes them, then runs
N steps, each an in-place add on every chunk plus --matmuls bf16 matmuls
of --matmul-n. --first-step-file F is written once the first step ends.
Result line:

  idle_jobs worker pid=.. gib=.. start_ns=.. imported_ns=.. allocated_ns=..
      first_step_ns=.. end_ns=.. step_ms=.. (median of the steps after
      the first 3) step_ms_min=.. step_ms_max=.. check=ok

On out-of-memory (torch.cuda.OutOfMemoryError, or a CUDA error saying
"out of memory") it prints "idle_jobs worker ... oom=1 allocated_gib=.."
and exits 3. Times are CLOCK_REALTIME ns, comparable with `date +%s%N`.

analyze: reads what idle_reclaim.sh left in D (native/, solo/, shared/:
the jobs' outputs, the scheduler's log, nvsharectl status samples,
nvidia-smi readings) and prints the detail lines and then the rows of the
summary, "ROW<TAB>check<TAB>PASS|FAIL|INFO<TAB>detail"; it imports no
GPU framework, so it runs anywhere on a copy of the results.
"""
import argparse
import json
import os
import sys
import time

T0_NS = time.time_ns()  # before any heavy import: the worker's start
GiB = 1 << 30
SLICE = 32 << 20  # elements per checksum slice (128 MiB of float32)
MIX = 1000003


def log(msg):
    print(f"idle_jobs[{os.getpid()}] {msg}", file=sys.stderr, flush=True)


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
        f.write("\n")
    os.replace(tmp, path)


def chunk_plan(gib, chunk_mib):
    """Equal chunks of float32 covering gib: (count, elements per chunk)."""
    per = (chunk_mib << 20) // 4
    total = int(gib * GiB) // 4
    count = max(1, -(-total // per))
    return count, per


# --- frameworks for the holder -------------------------------------------
class Torch:
    name = "torch"

    def __init__(self):
        import torch
        self.t = torch
        if not torch.cuda.is_available():
            raise SystemExit("idle_jobs: torch sees no GPU")
        self.dev = torch.device("cuda")
        self.w = None
        n = 2048
        self.a = torch.randn(n, n, device=self.dev, dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device=self.dev, dtype=torch.bfloat16)

    def pattern(self, seed, n):
        g = self.t.Generator(device=self.dev)
        g.manual_seed(seed)
        return self.t.randn(n, generator=g, device=self.dev, dtype=self.t.float32)

    def ptr(self, x):
        return x.data_ptr()

    def sync(self):
        self.t.cuda.synchronize()

    def checksum(self, x):
        t = self.t
        if self.w is None:
            self.w = t.arange(SLICE, device=self.dev, dtype=t.int64) * 2 + 1
        bits = x.view(t.int32)
        acc = t.zeros((), device=self.dev, dtype=t.int64)
        for j, a in enumerate(range(0, bits.numel(), SLICE)):
            v = bits[a:a + SLICE].to(t.int64)
            s = (v * self.w[:v.numel()]).sum()
            acc = acc * MIX + s + j  # int64 arithmetic wraps
        return int(acc.item()) & (2**64 - 1)

    def identical(self, x, seed):
        return bool(self.t.equal(x.view(self.t.int32),
                                 self.pattern(seed, x.numel()).view(self.t.int32)))

    def step(self, chunks):
        t = self.t
        acc = t.zeros((), device=self.dev, dtype=t.float32)
        for c in chunks:
            acc += c.sum()
        for _ in range(4):
            self.a = t.tanh(self.a @ self.b / 64)
        self.sync()
        return float(acc)


class Jax:
    name = "jax"

    def __init__(self):
        import jax
        import jax.numpy as jnp
        self.jax, self.jnp = jax, jnp
        if jax.devices()[0].platform != "gpu":
            raise SystemExit("idle_jobs: jax sees no GPU")
        lax = jax.lax

        def gen(seed, n):
            return jax.random.normal(jax.random.PRNGKey(seed), (n,), jnp.float32)

        def csum(x):
            bits = lax.bitcast_convert_type(x, jnp.uint32)
            w = lax.iota(jnp.uint32, x.shape[0]) * jnp.uint32(2) + jnp.uint32(1)
            return jnp.sum(bits * w, dtype=jnp.uint32)

        def same(x, seed):
            y = gen(seed, x.shape[0])
            return jnp.all(lax.bitcast_convert_type(x, jnp.uint32)
                           == lax.bitcast_convert_type(y, jnp.uint32))

        self._gen = jax.jit(gen, static_argnums=1)
        self._csum = jax.jit(csum)
        self._same = jax.jit(same)
        self._sum = jax.jit(jnp.sum)
        self.a = jnp.ones((2048, 2048), jnp.bfloat16)
        self._mm = jax.jit(lambda a: jnp.tanh(a @ a / 64))

    def pattern(self, seed, n):
        return self._gen(seed, n).block_until_ready()

    def ptr(self, x):
        return x.unsafe_buffer_pointer()

    def sync(self):
        self.a.block_until_ready()

    def checksum(self, x):
        return int(self._csum(x))

    def identical(self, x, seed):
        return bool(self._same(x, seed))

    def step(self, chunks):
        acc = 0.0
        sums = [self._sum(c) for c in chunks]
        for _ in range(4):
            self.a = self._mm(self.a)
        self.a.block_until_ready()
        for s in sums:
            acc += float(s)
        return acc


class Cupy:
    name = "cupy"

    def __init__(self):
        import cupy as cp
        self.cp = cp
        cp.cuda.runtime.getDeviceCount()
        self.w = None
        self.a = cp.ones((2048, 2048), dtype=cp.float32)

    def pattern(self, seed, n):
        return self.cp.random.RandomState(seed).standard_normal(n, dtype=self.cp.float32)

    def ptr(self, x):
        return x.data.ptr

    def sync(self):
        self.cp.cuda.Device().synchronize()

    def checksum(self, x):
        cp = self.cp
        if self.w is None:
            self.w = cp.arange(SLICE, dtype=cp.uint64) * 2 + 1
        bits = x.view(cp.uint32)
        acc = 0
        for j, a in enumerate(range(0, bits.size, SLICE)):
            v = bits[a:a + SLICE].astype(cp.uint64)
            s = int((v * self.w[:v.size]).sum(dtype=cp.uint64))
            acc = (acc * MIX + s + j) % 2**64
        return acc

    def identical(self, x, seed):
        cp = self.cp
        return bool(cp.array_equal(x.view(cp.uint32), self.pattern(seed, x.size).view(cp.uint32)))

    def step(self, chunks):
        cp = self.cp
        sums = [c.sum() for c in chunks]
        for _ in range(4):
            self.a = cp.tanh(self.a @ self.a / 2048)
        self.sync()
        return float(sum(float(s) for s in sums))


FRAMEWORKS = {"torch": Torch, "jax": Jax, "cupy": Cupy}


# --- analysis (no GPU framework) -------------------------------------------
def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def read_json(path):
    try:
        return json.loads(read(path))
    except ValueError:
        return None


def fields(text, prefix):
    """key=value words of the last line of text starting with prefix."""
    out = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            out = dict(w.split("=", 1) for w in line.split()[len(prefix.split()):] if "=" in w)
    return out


def duration_s(text):
    """A setting's value as the scheduler writes it (10s, 500ms, 1m, off)."""
    import re
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ns|us|ms|s|m|h)\s*", text or "")
    if not m:
        return None
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return float(m.group(1)) * scale[m.group(2)]


def log_time_ns(line):
    """The RFC 3339 UTC stamp that starts a text log line, as ns."""
    import datetime
    stamp = line.split(" ", 1)[0]
    try:
        t = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return None
    t = t.replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp()) * 10**9 + t.microsecond * 1000


def samples(path):
    """(ns, status document) for each 'ns json' line of an nvsharectl sampler."""
    out = []
    for line in read(path).splitlines():
        ns, _, doc = line.partition(" ")
        try:
            out.append((int(ns), json.loads(doc)))
        except ValueError:
            continue
    return out


def gpu_swaps(doc, uuid):
    """{'out': (count, bytes, total_ns, last_ns), 'in': ...} of the GPU, or None."""
    for g in (doc or {}).get("gpus", []):
        if uuid and g.get("uuid") != uuid:
            continue
        try:
            return {d: tuple(int(g["swaps"][d][k]) for k in ("count", "bytes", "total_ns", "last_ns"))
                    for d in ("out", "in")}
        except (KeyError, TypeError, ValueError):
            return None
    return None


def client_swaps(err_text):
    """(ns of the log line, direction, MiB, seconds) from a client's log."""
    import re
    out = []
    for line in err_text.splitlines():
        m = re.search(r"swapped (out|in) ([0-9.]+) MiB in ([0-9.]+) s", line)
        if m:
            out.append((log_time_ns(line), m.group(1), float(m.group(2)), float(m.group(3))))
    return out


def sched_events(log_text, pid):
    """From the scheduler's log: the client ids of pid, and the times (ns)
    of EVICTs sent to them and of their SWAPPED out/in (with bytes, ms)."""
    import re
    ids = set()
    for line in log_text.splitlines():
        m = re.search(r"client (\d+) registered: pid (\d+)", line)
        if m and int(m.group(2)) == pid:
            ids.add(m.group(1))
    evicts, swapped = [], []
    for line in log_text.splitlines():
        m = re.search(r"gpu \d+: client (\d+) swaps out", line)
        if m and m.group(1) in ids:
            evicts.append(log_time_ns(line))
        m = re.search(r"gpu \d+: client (\d+) swapped (out|in) (\d+) bytes in ([0-9.]+) ms", line)
        if m and m.group(1) in ids:
            swapped.append((log_time_ns(line), m.group(2), int(m.group(3)), float(m.group(4))))
    return ids, evicts, swapped


def analyze(a):
    d = a.dir
    rows = []
    tag = f"[{a.label}] " if a.label else ""

    def row(check, ok, detail):
        r = ok if isinstance(ok, str) else ("PASS" if ok else "FAIL")
        rows.append(f"ROW\t{tag}{check}\t{r}\t{detail}")

    def say(msg):
        print(f"   {tag}{msg}")

    def rel(ns, t0):
        return "?" if ns is None or t0 is None else f"{(int(ns) - t0) / 1e9:+.3f} s"

    # --- native ------------------------------------------------------------
    if a.mode == "full":
        nb = fields(read(f"{d}/native/b.out"), "idle_jobs worker")
        na = read_json(f"{d}/native/result") or {}
        rc = read(f"{d}/native/b.rc").strip()
        if nb.get("oom") == "1":
            row("native: B out of memory beside idle A", True,
                f"B got {nb.get('allocated_gib', '?')} of {nb.get('gib', '?')} GiB, then "
                f"{nb.get('error', 'OOM')} (A holds {na.get('gib', 0):.1f} GiB)")
        elif rc == "0":
            row("native: B out of memory beside idle A", "INFO",
                f"B fit natively ({nb.get('gib', '?')} GiB beside A's {na.get('gib', 0):.1f} GiB): "
                "X + Y did not exceed the free memory; nothing to reclaim")
        else:
            row("native: B out of memory beside idle A", False,
                f"B exited {rc or '?'} without an out-of-memory line; see {d}/native/b.err")
        row("native: A intact after idling (the check itself)", na.get("check") == "ok",
            f"check={na.get('check', 'no result')} identical={na.get('identical', '?')}/"
            f"{na.get('chunks', '?')} wake step {na.get('wake_step_ms', 0):.1f} ms "
            f"(steps {na.get('step_ms', 0):.1f} ms)")

    # --- solo B under nvshare ------------------------------------------------
    solo = fields(read(f"{d}/solo/b.out"), "idle_jobs worker")
    if a.mode == "full":
        if solo.get("check") == "ok":
            say(f"solo B under nvshare: first step {(int(solo['first_step_ns']) - int(solo['start_ns'])) / 1e9:.3f} s "
                f"after its start, steps {solo['step_ms']} ms median "
                f"({solo['step_ms_min']}..{solo['step_ms_max']})")
        else:
            row("nvshare: B alone (the solo reference)", False,
                f"no result (rc {read(f'{d}/solo/b.rc').strip() or '?'}); see {d}/solo/b.err")

    # --- A idle, B arrives, under nvshare --------------------------------------
    sh = f"{d}/shared"
    idle = read_json(f"{sh}/idle") or {}
    res = read_json(f"{sh}/result") or {}
    b = fields(read(f"{sh}/b.out"), "idle_jobs worker")
    launch = read(f"{sh}/b.launch_ns").strip()
    launch = int(launch) if launch.isdigit() else None
    a_pid = int(idle.get("pid", 0))
    final = read_json(f"{sh}/final.json")
    smp = samples(f"{sh}/samples")
    settings = ((final or (smp[-1][1] if smp else {})) or {}).get("settings", {})
    idle_after = None
    for key in ("idle-swap-after", "idle-swap", "idle_swap_after"):
        v = settings.get(key, {}).get("value") if isinstance(settings.get(key), dict) else None
        if v is not None:
            idle_after = duration_s(v)
            say(f"scheduler setting {key} = {v}")
            break
    if idle_after is None:
        idle_after = a.idle_after
        say(f"idle-swap-after: {idle_after:g} s (assumed: the scheduler does not report it)")

    ids, evicts, sw = sched_events(read(f"{sh}/sched.log"), a_pid)
    a_swaps = client_swaps(read(f"{sh}/a.err"))
    out_s = in_s = None
    out_src = in_src = "none"
    # The scheduler's totals: only A swaps in this phase.
    tot = gpu_swaps(final, a.uuid)
    if tot and tot["out"][0]:
        out_s = tot["out"][2] / tot["out"][0] / 1e9
        out_src = f"nvsharectl ({tot['out'][0]} swap-out(s), {tot['out'][1] / GiB:.2f} GiB)"
    if tot and tot["in"][0]:
        in_s = tot["in"][3] / 1e9
        in_src = f"nvsharectl ({tot['in'][0]} swap-in(s), {tot['in'][1] / GiB:.2f} GiB)"
    for _, direction, mib, sec in a_swaps:
        if direction == "out" and out_s is None:
            out_s, out_src = sec, f"A's log ({mib / 1024:.2f} GiB)"
        if direction == "in" and in_s is None:
            in_s, in_src = sec, f"A's log ({mib / 1024:.2f} GiB)"
    for _, direction, nbytes, ms in sw:
        if direction == "out" and out_s is None:
            out_s, out_src = ms / 1e3, f"scheduler log ({nbytes / GiB:.2f} GiB)"
        if direction == "in" and in_s is None:
            in_s, in_src = ms / 1e3, f"scheduler log ({nbytes / GiB:.2f} GiB)"
    for direction, sec, src in (("out", out_s, out_src), ("in", in_s, in_src)):
        if sec is not None:
            gib = (tot[direction][1] / max(tot[direction][0], 1) / GiB) if tot and tot[direction][0] else None
            rate = f", {gib * GiB / sec / 1e9:.1f} GB/s" if gib and sec else ""
            say(f"swap-{direction} of A: {sec:.3f} s{rate} [{src}]")
        else:
            say(f"swap-{direction} of A: none reported")

    t0 = launch
    swapped_seen = [ns for ns, doc in smp for c in doc.get("clients", [])
                    if c.get("pid") == a_pid and c.get("swapped_out")]
    say(f"timeline from B's launch (t=0): A idle {rel(idle.get('idle_ns'), t0)}; "
        f"B imported torch {rel(b.get('imported_ns'), t0)}; EVICT to A "
        f"{rel(evicts[0] if evicts else None, t0)}; A swapped out (first sample) "
        f"{rel(swapped_seen[0] if swapped_seen else None, t0)}; B allocated "
        f"{rel(b.get('allocated_ns'), t0)}; B first step ends {rel(b.get('first_step_ns'), t0)}; "
        f"B ends {rel(b.get('end_ns'), t0)}; A woken {rel(res.get('wake_ns'), t0)}")
    if a_swaps:
        say("A's swap log lines: " + "; ".join(
            f"{d_} {mib / 1024:.2f} GiB in {sec:.3f} s at {rel(ns, t0)}" for ns, d_, mib, sec in a_swaps))

    b_ok = b.get("check") == "ok"
    if a.mode == "full" or not b_ok:
        if b_ok and launch:
            first = (int(b["first_step_ns"]) - launch) / 1e9
            bound = idle_after + (out_s or 0) + 1.0
            row("nvshare: B's first step after idle-swap-after + swap-out + 1 s",
                first <= bound and out_s is not None,
                f"{first:.3f} s after its launch; bound {idle_after:g} + "
                f"{'?' if out_s is None else f'{out_s:.3f}'} + 1 = {bound:.3f} s"
                + ("" if out_s is not None else " (no swap-out of A reported)"))
        else:
            row("nvshare: B ran beside idle A", False,
                f"B: {read(f'{sh}/b.out').strip()[-200:] or 'no result'} (rc {read(f'{sh}/b.rc').strip() or '?'}); see {sh}/b.err")

    # nvidia-smi: A's memory before (idle, resident) and while swapped out.
    def mibs(path):
        return [int(x) for x in read(path).split() if x.isdigit()]
    before, during = mibs(f"{sh}/smi_before"), mibs(f"{sh}/smi_during")
    if before and during:
        bmax, dmin = max(before), min(during)
        frac = (bmax - dmin) / bmax if bmax else 0.0
        row("nvshare: A's memory gone while swapped out (< 2 GiB)", dmin < 2048,
            f"nvidia-smi: A used {bmax} MiB idle, {dmin} MiB while B ran (samples {during})")
        # What stays is A's context (~0.5-1 GiB): below 40 GiB that alone
        # can be over 5 %, and the 2 GiB row above is the check.
        small = frac < 0.95 and dmin < 2048 and bmax < 40 * 1024
        row("nvshare: >= 95 % of idle A's device memory reclaimed",
            "INFO" if small else frac >= 0.95,
            f"{100 * frac:.1f} % ({bmax - dmin} of {bmax} MiB)"
            + ("; A is too small to judge: its context alone is over 5 %" if small else ""))
    else:
        row("nvshare: A's memory reclaimed (nvidia-smi)", False,
            f"no nvidia-smi reading of A (pid {a_pid}): before {before}, during {during}")

    if a.mode == "full":
        if b_ok and solo.get("check") == "ok":
            ratio = float(solo["step_ms"]) / float(b["step_ms"])
            row("nvshare: B's steps >= 99 % of its solo speed", ratio >= 0.99,
                f"{100 * ratio:.1f} %: step {b['step_ms']} ms vs solo {solo['step_ms']} ms (medians)")
        if res:
            extra = res["wake_step_ms"] - res["step_ms"]
            bound = (in_s or 0) * 1000 + 100
            row("nvshare: A's next step waits <= swap-in + 100 ms",
                extra <= bound and in_s is not None,
                f"wake step {res['wake_step_ms']:.1f} ms = step {res['step_ms']:.1f} ms + {extra:.1f} ms; "
                f"bound {'?' if in_s is None else f'{in_s * 1000:.1f}'} + 100 ms"
                + ("" if in_s is not None else " (no swap-in of A reported)"))
    if res:
        row("nvshare: A's tensors bit-identical, addresses unchanged", res.get("check") == "ok",
            f"checksum {'same' if res.get('checksum_same') else 'CHANGED'} ({res.get('checksum')}), "
            f"identical {res.get('identical')}/{res.get('chunks')} chunks, addresses {res.get('ptrs')}")
    else:
        row("nvshare: A woke and checked its data", False,
            f"no result from A; see {sh}/a.err")
    for r in rows:
        print(r)
    return 0


def combined(sums):
    acc = 0
    for s in sums:
        acc = (acc * MIX + s) % 2**64
    return acc


def holder(a):
    os.makedirs(a.state_dir, exist_ok=True)
    fw = FRAMEWORKS[a.framework]()
    count, per = chunk_plan(a.gib, a.chunk_mib)
    t = time.time_ns()
    chunks = [fw.pattern(a.seed + i, per) for i in range(count)]
    fw.sync()
    ptrs = [fw.ptr(c) for c in chunks]
    sums = [fw.checksum(c) for c in chunks]
    checksum = combined(sums)
    log(f"{fw.name}: {count} chunks of {per * 4 >> 20} MiB "
        f"({count * per * 4 / GiB:.2f} GiB) filled and summed in "
        f"{(time.time_ns() - t) / 1e9:.2f} s; checksum {checksum:016x}")
    steps = []
    for _ in range(a.steps):
        s = time.time_ns()
        fw.step(chunks)
        steps.append((time.time_ns() - s) / 1e6)
    med = sorted(steps)[len(steps) // 2]
    idle_ns = time.time_ns()
    idle = {"pid": os.getpid(), "framework": fw.name, "idle_ns": idle_ns,
            "gib": count * per * 4 / GiB, "chunks": count, "step_ms": med,
            "steps_ms": [round(x, 2) for x in steps], "checksum": f"{checksum:016x}",
            "first_ptr": f"{ptrs[0]:#x}"}
    write_json(os.path.join(a.state_dir, "idle"), idle)
    log(f"idle after {a.steps} steps (median {med:.1f} ms); waiting for "
        f"{a.state_dir}/wake")

    wake = os.path.join(a.state_dir, "wake")
    deadline = time.monotonic() + a.timeout
    while not os.path.exists(wake):
        if time.monotonic() > deadline:
            log(f"no {wake} after {a.timeout:.0f} s: exiting")
            return 4
        time.sleep(0.002)
    wake_ns = time.time_ns()
    fw.step(chunks)
    woke_ns = time.time_ns()
    wake_step_ms = (woke_ns - wake_ns) / 1e6

    ptrs_after = [fw.ptr(c) for c in chunks]
    sums_after = [fw.checksum(c) for c in chunks]
    checksum_after = combined(sums_after)
    identical = sum(fw.identical(c, a.seed + i) for i, c in enumerate(chunks))
    bad = [i for i in range(count) if sums[i] != sums_after[i]]
    moved = [i for i in range(count) if ptrs[i] != ptrs_after[i]]
    for i in bad[:5]:
        log(f"chunk {i} at {ptrs[i]:#x}: checksum {sums[i]:016x} became {sums_after[i]:016x}")
    for i in moved[:5]:
        log(f"chunk {i}: address {ptrs[i]:#x} became {ptrs_after[i]:#x}")
    ok = not bad and not moved and identical == count
    result = dict(idle, wake_ns=wake_ns, woke_ns=woke_ns, wake_step_ms=wake_step_ms,
                  ptrs="same" if not moved else "CHANGED",
                  checksum_after=f"{checksum_after:016x}",
                  checksum_same=checksum == checksum_after,
                  identical=identical, check="ok" if ok else "FAILED")
    write_json(os.path.join(a.state_dir, "result"), result)
    print(f"idle_jobs holder pid={os.getpid()} framework={fw.name} "
          f"gib={result['gib']:.2f} chunks={count} step_ms={med:.2f} "
          f"wake_ns={wake_ns} wake_step_ms={wake_step_ms:.2f} "
          f"ptrs={result['ptrs']} checksum={'same' if checksum == checksum_after else 'CHANGED'} "
          f"identical={identical}/{count} check={result['check']}", flush=True)
    return 0 if ok else 1


def is_oom(e):
    text = str(e).lower()
    return "out of memory" in text or "outofmemory" in type(e).__name__.lower()


def worker(a):
    import torch
    imported_ns = time.time_ns()
    if not torch.cuda.is_available():
        raise SystemExit("idle_jobs: torch sees no GPU")
    count, per = chunk_plan(a.gib, a.chunk_mib)
    chunks = []
    head = (f"idle_jobs worker pid={os.getpid()} gib={count * per * 4 / GiB:.2f} "
            f"start_ns={T0_NS} imported_ns={imported_ns}")
    try:
        for _ in range(count):
            chunks.append(torch.empty(per, dtype=torch.float32, device="cuda"))
        n = a.matmul_n
        x = torch.empty(n, n, dtype=torch.bfloat16, device="cuda")
        y = torch.empty(n, n, dtype=torch.bfloat16, device="cuda")
        z = torch.empty(n, n, dtype=torch.bfloat16, device="cuda")
        allocated_ns = time.time_ns()
        for c in chunks:
            c.zero_()
        x.normal_()
        y.normal_()
        torch.cuda.synchronize()
    except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
        if not is_oom(e):
            raise
        print(f"{head} oom=1 allocated_gib={len(chunks) * per * 4 / GiB:.2f} "
              f"error={type(e).__name__}", flush=True)
        log(f"out of memory after {len(chunks)} of {count} chunks: {str(e)[:300]}")
        return 3
    steps = []
    first_ns = None
    for i in range(a.steps):
        s = time.time_ns()
        for c in chunks:
            c.add_(1.0)
        for _ in range(a.matmuls):
            torch.matmul(x, y, out=z)
        torch.cuda.synchronize()
        e = time.time_ns()
        steps.append((e - s) / 1e6)
        if first_ns is None:
            first_ns = e
            if a.first_step_file:
                write_json(a.first_step_file, {"pid": os.getpid(), "first_step_ns": e})
    end_ns = time.time_ns()
    want = float(a.steps)
    bad = sum(1 for c in chunks if c.min().item() != want or c.max().item() != want)
    later = sorted(steps[3:] if len(steps) > 6 else steps)
    print(f"{head} allocated_ns={allocated_ns} first_step_ns={first_ns} end_ns={end_ns} "
          f"step_ms={later[len(later) // 2]:.3f} step_ms_min={later[0]:.3f} "
          f"step_ms_max={max(steps):.3f} first_step_ms={steps[0]:.3f} "
          f"check={'ok' if not bad else f'FAILED({bad}_chunks)'}", flush=True)
    return 0 if not bad else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("holder", help="process A: allocate, work, idle, wake, check")
    h.add_argument("--framework", choices=sorted(FRAMEWORKS), default="torch")
    h.add_argument("--gib", type=float, required=True)
    h.add_argument("--chunk-mib", type=int, default=1024)
    h.add_argument("--seed", type=int, default=1234)
    h.add_argument("--steps", type=int, default=5)
    h.add_argument("--state-dir", required=True)
    h.add_argument("--timeout", type=float, default=600.0,
                   help="seconds to wait for STATE_DIR/wake (default 600)")
    w = sub.add_parser("worker", help="process B: allocate, fixed steps")
    w.add_argument("--gib", type=float, required=True)
    w.add_argument("--chunk-mib", type=int, default=1024)
    w.add_argument("--steps", type=int, default=40)
    w.add_argument("--matmuls", type=int, default=8)
    w.add_argument("--matmul-n", type=int, default=8192)
    w.add_argument("--first-step-file")
    y = sub.add_parser("analyze", help="idle_reclaim.sh's rows from its files")
    y.add_argument("--dir", required=True)
    y.add_argument("--mode", choices=("full", "reclaim"), default="full")
    y.add_argument("--label", default="")
    y.add_argument("--uuid", default="", help="the GPU's UUID in status --json")
    y.add_argument("--idle-after", type=float, default=10.0,
                   help="idle-swap-after (s) if the scheduler does not report it")
    a = p.parse_args()
    if a.cmd == "analyze":
        return analyze(a)
    if a.gib <= 0 or a.chunk_mib <= 0:
        p.error("--gib and --chunk-mib must be positive")
    if a.cmd == "worker" and (a.steps < 1 or a.matmul_n < 1 or a.matmuls < 0):
        p.error("--steps and --matmul-n must be positive")
    return holder(a) if a.cmd == "holder" else worker(a)


if __name__ == "__main__":
    sys.exit(main())
