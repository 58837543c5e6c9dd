#!/usr/bin/env python3
"""k8s_dra_claims.py - several claims at once, on the driver, scheduler,
test kubelet and loopback API server of k8s_dra.py (same arguments), on a
node of two GPUs:

- a pod's claims on one GPU add up, and the Unprepare of one leaves the
  other's limits;
- a pod's claims on two GPUs: each GPU gets its own limits, and the
  Unprepare of one leaves the other's alone;
- a claim two pods share is one budget (a group in the scheduler): with
  the fake GPU, one pod alone takes 3 GiB and more than half of its
  compute, the other is refused what would take them past its memory, and
  together they stay within its compute;
- 20 claims prepared at once, one of them read 5 s late: the other 19 are
  ready within 1 s.

Each step prints PASS with what it measured, or FAIL and the logs."""
import json
import os
import subprocess
import threading
import time
import uuid

import dra_kubelet as k
import k8s_dra as t

UUID2 = "GPU-bbbb0000-0000-4000-8000-000000000002"
t.GPUS = "%s:16384,%s:16384" % (t.UUID, UUID2)
GIB = t.GIB


def prepared(plugin, claims):
    resp = plugin.prepare(claims)
    for c in claims:
        t.check(resp.claims[c[1]].error == "", "Prepare %s: %s" % (c[2], resp.claims[c[1]].error))
    return resp


def unprepared(plugin, claims):
    resp = plugin.unprepare(claims)
    for c in claims:
        t.check(resp.claims[c[1]].error == "", "Unprepare %s: %s" % (c[2], resp.claims[c[1]].error))


def several_claims(plugin):
    pod = str(uuid.uuid4())
    a = t.make_claim("a-big", pod, memory="4Gi", compute="25")
    b = t.make_claim("a-small", pod, memory="2Gi", compute="10")
    prepared(plugin, [a, b])
    t.check(t.pod_limits(pod) == (6 * GIB, 35), "two claims on gpu-0: %s" % (t.pod_limits(pod),))
    unprepared(plugin, [b])
    t.check(t.pod_limits(pod) == (4 * GIB, 25), "after Unprepare of one: %s" % (t.pod_limits(pod),))
    unprepared(plugin, [a])
    t.check(t.pod_limits(pod) == (0, 0), "after Unprepare of both: %s" % (t.pod_limits(pod),))
    print("PASS: a pod's claims of 4Gi/25 % and 2Gi/10 % on gpu-0: held to 6 GiB and 35 %; "
          "after Unprepare of the second, 4 GiB and 25 %; of both, none")

    pod = str(uuid.uuid4())
    a = t.make_claim("b-gpu0", pod, memory="4Gi", compute="25", device="gpu-0")
    b = t.make_claim("b-gpu1", pod, memory="2Gi", compute="10", device="gpu-1")
    prepared(plugin, [a, b])
    on = lambda: (t.pod_limits(pod, gpu=0), t.pod_limits(pod, gpu=1))
    t.check(on() == ((4 * GIB, 25), (2 * GIB, 10)), "claims on two GPUs: %s" % (on(),))
    unprepared(plugin, [b])
    t.check(on() == ((4 * GIB, 25), (0, 0)), "after Unprepare of gpu-1's: %s" % (on(),))
    prepared(plugin, [b])
    unprepared(plugin, [a])
    t.check(on() == ((0, 0), (2 * GIB, 10)), "after Unprepare of gpu-0's: %s" % (on(),))
    unprepared(plugin, [b])
    t.check(on() == ((0, 0), (0, 0)), "after Unprepare of both: %s" % (on(),))
    print("PASS: claims of 4Gi/25 % on gpu-0 and 2Gi/10 % on gpu-1: held to 4 GiB and 25 % on "
          "gpu-0 and 2 GiB and 10 % on gpu-1; after Unprepare of either, the other's alone")


def shared_claim(plugin):
    pods = [str(uuid.uuid4()), str(uuid.uuid4())]
    c = t.make_claim("shared", pods[0], memory="4Gi", compute="30", more_pods=pods[1:])
    group = "%s-0" % c[1]
    prepared(plugin, [c])
    # no share of the claim is any one pod's: their group holds it
    for pod in pods:
        t.check(t.pod_limits(pod) == (0, 0), "a pod of the shared claim has limits of its own: %s"
                % (t.pod_limits(pod),))
    if not t.JOB:
        print("SKIP: the shared claim's processes on the fake GPU (no CUDA headers in this build)")
    else:
        with open(os.path.join(t.DIRS["cdi"], "gpu.nvshare.com-claim_%s.json" % c[1])) as f:
            spec = json.load(f)

        def clients():
            return [x for x in t.status()["clients"] if x["pod_uid"] in pods]

        def share_of(jobs):
            window = t.status()["node"]["window_ns"]
            start_ns = time.monotonic_ns()
            time.sleep(3 * window / 1e9 + 0.1)
            return [t.gpu_share(os.path.join(t.DIRS["trace"], "trace.%d" % j.pid), start_ns,
                                start_ns + 3 * window) for j in jobs]
        # pod 0 alone: 3 GiB of the claim's 4 (an even split refused it) and
        # all of its 30 %
        jobs = [t.start_container("job0", spec, pods[0], FAKE_JOB_MEM_MB="3072")]
        t.wait_for(lambda: [x["mem_allocated_bytes"] for x in clients()] == [3 * GIB],
                   "pod 0's process to allocate 3 GiB of the claim's 4")
        a = clients()[0]
        t.check(a["group"] == group and a["mem_quota_bytes"] == 4 * GIB and a["core_limit"] == 30,
                "pod 0's process is billed to %s, quota %d, core limit %d"
                % (a["group"], a["mem_quota_bytes"], a["core_limit"]))
        alone = share_of(jobs)[0]
        t.check(20 < alone <= 31.5, "GPU share %.1f %% of one pod alone under a 30 %% claim" % alone)
        # pod 1 cannot take 2 GiB beside pod 0's 3: together within 4
        probe = t.start_container("probe", spec, pods[1], FAKE_JOB_MEM_MB="2048")
        try:
            rc = probe.wait(timeout=20)
        except subprocess.TimeoutExpired:
            rc = None
        if rc is None:
            t.stop("probe")
        else:
            t.procs.pop("probe")
        t.check(rc == 1, "pod 1's 2 GiB beside pod 0's 3 GiB of a 4Gi claim: exit status %s" % rc)
        jobs.append(t.start_container("job1", spec, pods[1], FAKE_JOB_MEM_MB="512"))
        t.wait_for(lambda: len(clients()) == 2, "both pods' processes to register")
        both = share_of(jobs)
        for i in range(2):
            t.stop("job%d" % i)
        t.check(sum(both) <= 31.5 and min(both) >= 3,
                "GPU shares %.1f + %.1f %% under one 30 %% claim" % tuple(both))
        print("PASS: two pods' processes on one 4Gi/30 %% claim: one alone took 3 GiB and %.1f %%; "
              "the other was refused 2 GiB beside it; together %.1f + %.1f = %.1f %% of the GPU"
              % (alone, both[0], both[1], sum(both)))
    unprepared(plugin, [c])
    gone = subprocess.run([t.CTL, "reset", "group", group], capture_output=True, text=True,
                          env=dict(os.environ, NVSHARE_SOCK_DIR=t.DIRS["sock"]), timeout=10)
    t.check(gone.returncode == 1 and "no group" in gone.stderr,
            "the claim's group after its Unprepare: %s" % (gone.stdout + gone.stderr))
    print("PASS: a claim of 4Gi/30 % shared by two pods is one budget they draw on together; "
          "its Unprepare removes it")


def concurrent(endpoint):
    claims = [t.make_claim("many-%d" % i, str(uuid.uuid4()), memory="256Mi", compute="1",
                           device="gpu-%d" % (i % 2)) for i in range(20)]
    slow = claims[7]
    t.http("POST", "/admin/claim-fault?mode=slow&count=1&ms=5000&name=" + slow[2])
    ready, errors = {}, {}
    go = threading.Barrier(len(claims))
    t0 = [0.0]

    def kubelet(c):
        plugin = k.DRAPlugin(endpoint)  # a pod each, as kubelet sends them
        go.wait()
        t0[0] = t0[0] or time.monotonic()
        r = plugin.prepare([c]).claims[c[1]]
        ready[c[1]] = time.monotonic()
        errors[c[1]] = r.error
        plugin.close()
    threads = [threading.Thread(target=kubelet, args=(c,)) for c in claims]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    t.check(len(ready) == 20 and not any(errors.values()), "20 Prepares: %s" % errors)
    fast = [ready[c[1]] - t0[0] for c in claims if c is not slow]
    slow_s = ready[slow[1]] - t0[0]
    t.check(slow_s >= 4.5, "the delayed claim was ready after %.2f s: the delay did not apply"
            % slow_s)
    t.check(max(fast) < 1.0, "the other 19 were ready after %s s" % ["%.2f" % x for x in sorted(fast)])
    plugin = k.DRAPlugin(endpoint)
    unprepared(plugin, claims)
    plugin.close()
    print("PASS: 20 claims prepared at once, one read 5 s late: the other 19 ready within "
          "%.0f ms (the late one after %.2f s)" % (max(fast) * 1000, slow_s))


def main():
    t.setup()
    t.register()
    endpoint = os.path.join(t.DIRS["plugin"], "dra.sock")
    t.wait_for(lambda: len(t.slices()) == 1, "the ResourceSlice")
    names = [d["name"] for d in t.slices()[0]["spec"]["devices"]]
    t.check(names == ["gpu-0", "gpu-1"], "devices %s" % names)
    plugin = k.DRAPlugin(endpoint)
    several_claims(plugin)
    shared_claim(plugin)
    plugin.close()
    concurrent(endpoint)
    t.finish()
    print("PASS: k8s_dra_claims")


if __name__ == "__main__":
    t.run(main)
