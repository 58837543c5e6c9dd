#!/usr/bin/env python3
"""k8s_dra_status.py - the claims' device status and its request budget,
on the driver, scheduler, test kubelet and loopback API server of
k8s_dra.py (same arguments), the driver allowed 20 status writes a second:

- 100 claims prepared in one call: Prepare answers before their status is
  written, the writes come at most 20 + 20 in any second (the burst and
  the rate), so they take 4 s at least, and every claim gets its entry;
- the API server failing a claim's status 4 times: the writes back off,
  each pause at least half of a doubling 200 ms, and the fifth lands;
- the API server without the status subresource (404): the driver says
  so once and writes none for the claims prepared after.

Each step prints PASS with what it measured, or FAIL and the logs."""
import os
import time
import uuid

import dra_kubelet as k
import k8s_dra as t

QPS = 20
t.GPUS = t.UUID + ":65536"  # room for 100 claims of 256Mi
t.DRIVER_ENV = {"NVSHARE_DRA_STATUS_QPS": str(QPS)}


def writes():
    return t.http("GET", "/admin/status-writes")[1]


def prepared(plugin, claims):
    resp = plugin.prepare(claims)
    for c in claims:
        t.check(resp.claims[c[1]].error == "", "Prepare %s: %s" % (c[2], resp.claims[c[1]].error))


def budget(plugin):
    claims = [t.make_claim("many-%d" % i, str(uuid.uuid4()), memory="256Mi", compute="1")
              for i in range(100)]
    t0 = time.monotonic()
    prepared(plugin, claims)
    prep_s = time.monotonic() - t0
    t.wait_for(lambda: len(writes()) >= 100, "100 status writes", timeout=60)
    got = writes()
    times = [w[0] for w in got]
    t.check(len(got) == 100 and all(w[1] == 200 for w in got), "writes %s" % got)
    most = max(sum(1 for x in times if s <= x < s + 1.0) for s in times)
    span = times[-1] - times[0]
    t.check(most <= 2 * QPS + 1, "%d status writes in one second: over %d" % (most, 2 * QPS + 1))
    # the first burst comes at once, the other 80 at 20 a second
    t.check(span >= (100 - QPS) / QPS - 0.2, "100 writes in %.2f s: no rate" % span)
    t.check(prep_s < span, "Prepare took %.2f s, the writes %.2f s: Prepare waited for them"
            % (prep_s, span))
    missing = [c[2] for c in claims if not t.claim_status(c)]
    t.check(not missing, "claims without status: %s" % missing)
    plugin.unprepare(claims)
    print("PASS: 100 claims prepared in %.0f ms; their status written in %.2f s, at most %d "
          "writes in any second (budget %d/s, burst %d)" % (prep_s * 1000, span, most, QPS, QPS))


def backoff(plugin):
    before = len(writes())
    t.http("POST", "/admin/status-fault?mode=error&count=4")
    c = t.make_claim("flaky-status", str(uuid.uuid4()), memory="1Gi", compute="5")
    prepared(plugin, [c])
    t.wait_for(lambda: t.claim_status(c), "the status after 4 failures", timeout=30)
    got = writes()[before:]
    t.check([w[1] for w in got] == [500] * 4 + [200], "writes %s" % got)
    gaps = [b[0] - a[0] for a, b in zip(got, got[1:])]
    for i, gap in enumerate(gaps):
        t.check(gap >= 0.1 * 2 ** i * 0.95, "pause %d after a failure: %.3f s, under %.2f s"
                % (i + 1, gap, 0.1 * 2 ** i))
    plugin.unprepare([c])
    print("PASS: status failing 4 times: written at the 5th try, pauses %s s"
          % ["%.2f" % g for g in gaps])


def absent(plugin):
    before = len(writes())
    t.http("POST", "/admin/status-fault?mode=absent&count=1")
    a = t.make_claim("no-status-a", str(uuid.uuid4()), memory="1Gi", compute="5")
    prepared(plugin, [a])
    log = os.path.join(t.WORK, "driver.log")
    t.wait_for(lambda: "does not take device status" in open(log).read(), "the driver to give up")
    b = t.make_claim("no-status-b", str(uuid.uuid4()), memory="1Gi", compute="5")
    # the driver stops before it says so: a Prepare after the line queues none
    prepared(plugin, [b])
    got = writes()[before:]
    t.check([w[1] for w in got] == [404], "writes after the 404: %s" % got)
    t.check(open(log).read().count("does not take device status") == 1, "said more than once")
    plugin.unprepare([a, b])
    print("PASS: a server without the status subresource (404): the driver says so once and "
          "writes no more (%d write in all)" % len(got))


def main():
    t.setup()
    t.register()
    endpoint = os.path.join(t.DIRS["plugin"], "dra.sock")
    t.wait_for(lambda: len(t.slices()) == 1, "the ResourceSlice")
    plugin = k.DRAPlugin(endpoint)
    budget(plugin)
    backoff(plugin)
    absent(plugin)
    plugin.close()
    t.finish()
    print("PASS: k8s_dra_status")


if __name__ == "__main__":
    t.run(main)
