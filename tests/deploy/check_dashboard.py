#!/usr/bin/env python3
"""deploy/grafana's dashboard against the scheduler's /metrics: every query
(panel targets and template variables) names at least one metric, and every
metric it names is a family the scheduler exports (its # TYPE lines, with
_bucket/_sum/_count for histograms), read from a live scheduler's /metrics.
With promtool, every query also parses as PromQL (as a recording rule).

    check_dashboard.py DASHBOARD SCHEDULER [PROMTOOL]
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def exported_families(sched):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/metrics"
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, NVSHARE_SOCK_DIR=work, NVSHARE_GPUS="GPU-dash-0:16384",
                   NVSHARE_STATE_FILE="", NVSHARE_METRICS_ADDR=f"127.0.0.1:{port}")
        proc = subprocess.Popen([sched], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 10
            while True:
                try:
                    text = urllib.request.urlopen(url, timeout=2).read().decode()
                    break
                except OSError:
                    if time.time() > deadline or proc.poll() is not None:
                        sys.exit(f"FAIL: no /metrics at {url}")
                    time.sleep(0.05)
        finally:
            proc.terminate()
            proc.wait()
    names = set()
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.add(m.group(1))
        if m.group(2) == "histogram":
            names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
    return names


def queries(dash):
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            yield "variable " + var["name"], var["query"]["query"]


def main():
    dash_path, sched = sys.argv[1], sys.argv[2]
    promtool = sys.argv[3] if len(sys.argv) > 3 else None
    dash = json.load(open(dash_path))
    exported = exported_families(sched)
    failed, named, n = False, set(), 0
    for where, expr in queries(dash):
        n += 1
        metrics = set(re.findall(r"\bnvshare_[a-z0-9_]+", expr))
        if not metrics:
            print(f"FAIL: {where}: '{expr}' names no nvshare metric")
            failed = True
        for m in sorted(metrics - exported):
            print(f"FAIL: {where}: {m} is not exported by the scheduler")
            failed = True
        named |= metrics
    print(f"  {n} queries name {len(named)} metrics; the scheduler exports "
          f"{len(exported)} names")
    if promtool:
        # Grafana's variables made concrete, label_values() aside (Grafana's
        # own function, not PromQL).
        rules = []
        for i, (where, expr) in enumerate(queries(dash)):
            if expr.startswith("label_values("):
                continue
            expr = expr.replace("$__rate_interval", "1m")
            expr = re.sub(r"\$\w+", ".*", expr)
            rules.append({"record": f"dashboard:query{i}", "expr": expr})
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
            f.flush()
            r = subprocess.run([promtool, "check", "rules", f.name],
                               capture_output=True, text=True)
        if r.returncode:
            print(f"FAIL: promtool does not parse a query:\n{r.stdout}{r.stderr}")
            failed = True
        else:
            print(f"  promtool parses all {len(rules)} PromQL queries")
    if failed:
        sys.exit(1)
    print("PASS: every dashboard query names metrics the scheduler exports")


main()
