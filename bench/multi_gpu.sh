#!/usr/bin/env bash
# bench/multi_gpu.sh - two data-parallel jobs share two real GPUs with a
# single-GPU job, in the default settings, measured from process start.
#
#   OUT=DIR bench/multi_gpu.sh [BUILD_DIR]        (needs two GPUs, PyTorch)
#
# Jobs are bench/ddp_job.py: A and B are 2-rank PyTorch DDP jobs over NCCL
# (torchrun, GPUs 0 and 1), S a single-GPU job of the same model on GPU 0.
# No job names itself to nvshare: the ranks of a torchrun job are one job
# by default (its MASTER_ADDR:MASTER_PORT). NCCL_NVLS_ENABLE=0 throughout.
#
#  1. Each job alone, natively (no libnvshare), MULTI_GPU_SECONDS (60) from
#     process start: the 100 % of each job. B is A's twin; A stands for it.
#     Then A alone under the scheduler: its ratio to native (printed).
#     MULTI_GPU_ALONE_ONLY=1 stops there.
#  2. A, B and S together under the scheduler, at each quantum of
#     MULTI_GPU_TQS (default "auto 1s 100ms"; auto is the default setting),
#     started at once, the same length. A job's progress is its steps over its
#     steps alone; the aggregate, their sum, is what running the jobs one
#     after the other would make 1. Targets: every process ends (no hang);
#     aggregate >= 0.95, from process start and from 25 s on (DDP's
#     start-up done); S's share of GPU 0's held time from 25 s on within
#     10 % of 1/3 (all three need GPU 0; before, S has it alone while the
#     DDP jobs start). DROP_LOCK -> LOCK_RELEASED p50/p99 per GPU from the
#     scheduler's log. At the default quantum, also: no drain revoked, and
#     no job's progress below its progress at TQ 1 s (the quantum before
#     auto; 0.349 / 0.361 / 0.445 of alone on two H100s) when both ran.
#  3. A pod over both GPUs: nvsharectl sets pod ddp-q to 4 GiB and 30 %.
#     Every rank reads 4 GiB as its GPU's memory and gets PyTorch's OOM
#     past it; nvidia-smi in the pod shows 4096 MiB on both GPUs. Then the
#     quota goes to 16 GiB (training needs more than 4) and the pod trains
#     for 50 s: each rank's GPU time (status' held_ns) from 25 s to 45 s is
#     30 % +- 3 of the time, on each GPU, and the step rate follows.
#     MULTI_GPU_POD=0 skips it.
# Prints one summary; exit status 0 when every target is met.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build-gpu}
OUT=${OUT:-$TOP/.bench}/multi_gpu
rm -rf "$OUT"; mkdir -p "$OUT"
export NVSHARE_SOCK_DIR=$OUT/sock NCCL_NVLS_ENABLE=0
source "$TOP/tests/gpu/lib.sh"
gpu_build nvshare nvshare-scheduler nvsharectl
RUN_S=${MULTI_GPU_SECONDS:-60}
JOB=$TOP/bench/ddp_job.py
trap 'sched_stop' EXIT
SUMMARY=$OUT/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
failed=0
[ "$(nvidia-smi -L | grep -c '^GPU')" -ge 2 ] || { echo "multi_gpu.sh needs two GPUs"; exit 2; }
nvidia-smi -L | tee -a "$SUMMARY"

pids=()
# ddp NAME PORT "ARGS" [VAR=VALUE...]: a 2-rank DDP job on GPUs 0 and 1.
ddp() {
    local name=$1 port=$2 args; read -ra args <<<"$3"; shift 3
    env "$@" python3 -m torch.distributed.run --nnodes 1 --nproc-per-node 2 \
        --master-addr 127.0.0.1 --master-port "$port" "$JOB" "${args[@]}" \
        >"$OUT/$name.out" 2>"$OUT/$name.err" &
    pids+=($!)
}
# single NAME ARG [VAR=VALUE...]: the job on GPU 0 alone, no DDP.
single() {
    local name=$1 arg=$2; shift 2
    env "$@" python3 "$JOB" "$arg" >"$OUT/$name.out" 2>"$OUT/$name.err" &
    pids+=($!)
}
# finish NAME: waits for the jobs started, up to a minute past the window;
# kills and fails what is left (a hang).
finish() {
    local deadline=$(( $(date +%s) + RUN_S + 60 ))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.5; done
        if kill -0 "$pid" 2>/dev/null; then
            say "$1: FAIL a job hangs (pid $pid)"; failed=1
            pkill -KILL -P "$pid"; kill -KILL "$pid"
        fi
        wait "$pid" || { say "$1: a job failed (pid $pid), see $OUT/$1.*.err"; failed=1; }
    done
    pids=()
}

echo "== 1. each job alone, natively, ${RUN_S} s from process start"
from=$(date +%s%N); echo "$from" >"$OUT/alone.A.from"
ddp alone.A 29500 $(( from + RUN_S * 1000000000 )); finish alone
from=$(date +%s%N); echo "$from" >"$OUT/alone.S.from"
single alone.S $(( from + RUN_S * 1000000000 )); finish alone
echo "== 1b. A alone under the scheduler (a gang holding both GPUs)"
sched_start "$OUT/gang_alone.sched.log"
from=$(date +%s%N); echo "$from" >"$OUT/gang_alone.A.from"
ddp gang_alone.A 29505 $(( from + RUN_S * 1000000000 )) LD_PRELOAD="$LIB"; finish gang_alone
sched_stop

[ -n "${MULTI_GPU_ALONE_ONLY:-}" ] ||
for tq in ${MULTI_GPU_TQS:-auto 1s 100ms}; do
    echo "== 2. A, B and S together, TQ $tq"
    if [ "$tq" = auto ]; then sched_start "$OUT/shared.$tq.sched.log"
    else sched_start "$OUT/shared.$tq.sched.log" NVSHARE_TQ="$tq"; fi
    from=$(date +%s%N); until=$(( from + RUN_S * 1000000000 ))
    for j in A B S; do echo "$from" >"$OUT/shared.$tq.$j.from"; done
    ddp "shared.$tq.A" 29501 "$until" LD_PRELOAD="$LIB"
    ddp "shared.$tq.B" 29502 "$until" LD_PRELOAD="$LIB"
    single "shared.$tq.S" "$until" LD_PRELOAD="$LIB"
    sleep 20
    "$CTL_BIN" status >"$OUT/shared.$tq.status" 2>&1
    finish "shared.$tq"
    sched_stop
done

if [ -z "${MULTI_GPU_ALONE_ONLY:-}" ] && [ "${MULTI_GPU_POD:-1}" != 0 ]; then
echo "== 3. a pod over both GPUs: 4 GiB and 30 % from nvsharectl"
sched_start "$OUT/pod.sched.log"
"$CTL_BIN" set memory-limit ddp-q 4Gi && "$CTL_BIN" set core-limit ddp-q 30 || failed=1
POD=(LD_PRELOAD="$LIB" NVSHARE_POD_NAME=ddp-q)
ddp pod.quota 29503 "--quota $(( 4 << 30 ))" "${POD[@]}"; RUN_S=0 finish pod.quota
# Both ranks print to one file: count the words, not the lines.
quota_ok=$(grep -o 'quota ok' "$OUT/pod.quota.out" | wc -l)
say "pod quota: $quota_ok of 2 ranks read 4 GiB and got OOM past it"
[ "$quota_ok" = 2 ] || failed=1
env "${POD[@]}" nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits \
    >"$OUT/pod.smi" 2>"$OUT/pod.smi.err"
say "pod nvidia-smi memory.total (MiB): $(tr '\n' ';' <"$OUT/pod.smi")"
[ "$(grep -c ', 4096$' "$OUT/pod.smi")" = 2 ] || { say "  FAIL: want 4096 on both GPUs"; failed=1; }
# Training needs more than 4 GiB a rank: the operator raises the quota
# while the pod runs (its ranks are told at once).
"$CTL_BIN" set memory-limit ddp-q 16Gi || failed=1
from=$(date +%s%N); echo "$from" >"$OUT/pod.train.from"
(RUN_S=50; ddp pod.train 29504 $(( from + RUN_S * 1000000000 )) "${POD[@]}"
 sleep 25; "$CTL_BIN" status --json >"$OUT/pod.status1.json"; date +%s%N >"$OUT/pod.t1"
 sleep 20; "$CTL_BIN" status --json >"$OUT/pod.status2.json"; date +%s%N >"$OUT/pod.t2"
 RUN_S=50 finish pod.train)
sched_stop
fi

python3 - "$OUT" "$RUN_S" <<'PY' | tee -a "$SUMMARY" || failed=1
import datetime, json, os, re, statistics, sys
out, run_s = sys.argv[1], int(sys.argv[2])
# DDP's start-up (torchrun, NCCL, the model) takes 15-20 s on an H100 pair.
NS, STEADY_FROM = 1_000_000_000, 25
ok = True

def log(run):
    """A job's start (ns) and its rank 0's (ns, steps) records."""
    recs = [(int(t), int(s)) for s, t in
            re.findall(r"^steps (\d+) at (\d+)$", open(f"{out}/{run}.out").read(), re.M)]
    return int(open(f"{out}/{run}.from").read()), recs

def steps_by(recs, t):
    return max([s for ts, s in recs if ts <= t], default=0)

def measure(run, seconds=run_s):
    """Steps from process start to the end, and from STEADY_FROM s on."""
    start, recs = log(run)
    end = start + seconds * NS
    return steps_by(recs, end), steps_by(recs, end) - steps_by(recs, start + STEADY_FROM * NS)

alone = {job: measure(f"alone.{job}") for job in "AS"}
total, steady = measure("gang_alone.A")
print(f"A alone under the scheduler: {total / alone['A'][0]:.3f} of native from process "
      f"start, {steady / alone['A'][1]:.3f} from {STEADY_FROM} s on")
for job, (total, steady) in alone.items():
    print(f"alone {job}: {total} steps in {run_s} s from process start, "
          f"{steady / (run_s - STEADY_FROM):.1f} steps/s from {STEADY_FROM} s on")

def percentile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))] if v else float("nan")

fracs = {}
for tq in [t for t in ("auto", "1s", "100ms") if os.path.exists(f"{out}/shared.{t}.A.out")]:
    frac = fracs[tq] = {}
    for job, ref in (("A", "A"), ("B", "A"), ("S", "S")):
        total, steady = measure(f"shared.{tq}.{job}")
        frac[job] = (total / alone[ref][0], steady / alone[ref][1])
    for i, view in enumerate(("from process start", f"from {STEADY_FROM} s on")):
        agg = sum(f[i] for f in frac.values())
        share = frac["S"][i] / agg if agg else 0
        verdict = "FAIL(aggregate < 0.95)" if agg < 0.95 else "ok"
        ok &= agg >= 0.95
        print(f"TQ {tq:>5} {view:>18}: A {frac['A'][i]:.3f} B {frac['B'][i]:.3f} "
              f"S {frac['S'][i]:.3f} of alone; aggregate {agg:.3f} {verdict}; "
              f"S's share of the progress {100 * share:.1f} %")
    # S's fair share: its part of GPU 0's held time once every job runs (S
    # has GPU 0 alone while the DDP jobs start up, which is no unfairness).
    # S is the client of GPU 0 that never reports a gang drain point.
    log_text = open(f"{out}/shared.{tq}.sched.log").read()
    start = int(open(f"{out}/shared.{tq}.S.from").read())
    lo, hi = start + STEADY_FROM * NS, start + run_s * NS
    ranks = set(re.findall(r"gpu \d+: client (\d+) stopped after collective", log_text))
    granted, held0 = {}, {}
    for line in log_text.splitlines():
        m = re.match(r"(\S+)Z .* debug: gpu 0: (?:lease \d+ to client (\d+)|client (\d+) released)", line)
        if not m:
            continue
        t = int(datetime.datetime.fromisoformat(m.group(1)).replace(
            tzinfo=datetime.timezone.utc).timestamp() * NS)
        if m.group(2):
            granted[m.group(2)] = t
        elif m.group(3) in granted:
            a, b = max(granted.pop(m.group(3)), lo), min(t, hi)
            held0[m.group(3)] = held0.get(m.group(3), 0) + max(0, b - a)
    total = sum(held0.values())
    s_share = sum(v for c, v in held0.items() if c not in ranks) / total if total else 0
    bad = abs(3 * s_share - 1) > 0.10
    ok &= not bad
    print(f"TQ {tq:>5} gpu 0 from {STEADY_FROM} s on: S held {100 * s_share:.1f} % of the "
          f"held time, the gangs' ranks {100 * (1 - s_share):.1f} % "
          f"{'FAIL(off 1/3 by > 10 %)' if bad else 'ok'}")
    by_gpu = {}
    for gpu, ms in re.findall(r"gpu (\d+): client \d+ released lease \d+: preempt ([\d.]+) ms",
                              open(f"{out}/shared.{tq}.sched.log").read()):
        by_gpu.setdefault(int(gpu), []).append(float(ms))
    for gpu, v in sorted(by_gpu.items()):
        print(f"TQ {tq:>5} gpu {gpu}: DROP_LOCK -> LOCK_RELEASED {len(v)} preemptions, "
              f"p50 {statistics.median(v):.2f} ms, p99 {percentile(v, 0.99):.2f} ms")
    if tq == "auto":
        revoked = log_text.count("lock revoked")
        ok &= revoked == 0
        status = open(f"{out}/shared.auto.status").read()
        quanta = re.findall(r"^  quantum +(.*)$", status, re.M)
        print(f"TQ  auto: {revoked} drains revoked {'ok' if revoked == 0 else 'FAIL'}; "
              f"quantum at 20 s: {'; '.join(quanta) or 'not shown'}")

if "auto" in fracs and "1s" in fracs:
    for job in "ABS":
        worse = fracs["auto"][job][0] < fracs["1s"][job][0]
        ok &= not worse
        print(f"job {job} from process start: auto {fracs['auto'][job][0]:.3f}, "
              f"TQ 1 s {fracs['1s'][job][0]:.3f} of alone "
              f"{'FAIL(below TQ 1 s)' if worse else 'ok'}")

if not os.path.exists(f"{out}/pod.t2"):
    sys.exit(0 if ok else 1)
t1, t2 = (int(open(f"{out}/pod.t{i}").read()) for i in (1, 2))
held = [{(c["gpu_index"], c["pid"]): c["held_ns"]
         for c in json.load(open(f"{out}/pod.status{i}.json"))["clients"] if c["pod"] == "ddp-q"}
        for i in (1, 2)]
# Each rank registers both GPUs and uses one: judge the GPU it used.
for key in sorted(k for k, v in held[1].items() if v):
    share = (held[1][key] - held[0].get(key, 0)) / (t2 - t1)
    bad = abs(share - 0.30) > 0.03
    ok &= not bad
    print(f"pod ddp-q (30 %) gpu {key[0]} pid {key[1]}: {100 * share:.1f} % of GPU time "
          f"{'FAIL' if bad else 'ok'}")
_, recs = log("pod.train")
rate = (steps_by(recs, t2) - steps_by(recs, t1)) / ((t2 - t1) / NS)
print(f"pod ddp-q training: {rate:.1f} steps/s = "
      f"{100 * rate / (alone['A'][1] / (run_s - STEADY_FROM)):.1f} % of A alone")
sys.exit(0 if ok else 1)
PY
exit $failed
