#!/usr/bin/env python3
"""k8s_dra.py - nvshare-dra-driver end to end, without a cluster: the real
driver and scheduler, a test kubelet (dra_kubelet.py) and the loopback API
server (tests/k8s/fake_apiserver.py).

  k8s_dra.py DRIVER SCHEDULER NVSHARECTL PB2_DIR FAKE_APISERVER
             [FAKE_JOB LIBNVSHARE FAKE_CUDA_DIR]

With the last three (a build with the CUDA headers), the prepared claim's
"container" runs too: fake_job with exactly the CDI spec's environment
(its mounts resolved to their host paths), in a cgroup of its pod (a
fixture under NVSHARE_PROC_ROOT), on the fake GPU.

Each step prints PASS with what it measured, or FAIL and the logs."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

import grpc

import dra_kubelet as k

DRIVER, SCHED, CTL, PB2_DIR, FAKE_API = sys.argv[1:6]
JOB, LIBNVSHARE, FAKE_CUDA_DIR = (sys.argv[6:9] + [None] * 3)[:3]
k.load_messages(PB2_DIR)

GIB, MIB = 1 << 30, 1 << 20
NODE, NS = "node-a", "ml"
UUID = "GPU-bbbb0000-0000-4000-8000-000000000001"
GPUS = UUID + ":16384"  # the node's, for the scheduler and the driver
WORK = tempfile.mkdtemp(prefix="nvshare-dra.")
DIRS = {d: os.path.join(WORK, d)
        for d in ("sock", "ctl", "plugin", "registry", "cdi", "sa", "lib", "proc", "trace")}
procs = {}
api = None
DRIVER_ENV = {}  # a test's settings of the driver over start_driver()'s


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    for name, p in procs.items():
        if p.poll() is None:
            p.kill()
            p.wait()
        path = os.path.join(WORK, name + ".log")
        if os.path.exists(path):
            with open(path) as f:
                sys.stderr.write("--- %s log (last lines)\n%s" % (name, "".join(f.readlines()[-25:])))
    shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def wait_for(pred, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            fail("timed out waiting for " + what)
        time.sleep(0.01)


def start(name, argv, base=None, **env):
    """name's process, with env over base (the test's environment and the
    scheduler's socket directory unless given)."""
    full = dict(os.environ, NVSHARE_SOCK_DIR=DIRS["sock"]) if base is None else dict(base)
    full.update(env)
    procs[name] = subprocess.Popen(argv, env=full, stdout=open(os.path.join(WORK, name + ".log"), "a"),
                                   stderr=subprocess.STDOUT)
    return procs[name]


def stop(name, sig=signal.SIGTERM):
    p = procs.pop(name)
    p.send_signal(sig)
    try:
        return p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        fail("%s did not stop within 10 s of signal %d" % (name, sig))


class ControlRelay:
    """The driver's way to the scheduler's control socket: DIRS["ctl"]
    holds a relay of it (and a link to the clients' socket). With hold set,
    the scheduler's answers are kept from the driver, and held is set once
    one came: the scheduler has applied a setting the driver still waits
    to hear about."""

    def __init__(self):
        os.symlink(os.path.join(DIRS["sock"], "scheduler.sock"),
                   os.path.join(DIRS["ctl"], "scheduler.sock"))
        self.hold, self.held = False, threading.Event()
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(os.path.join(DIRS["ctl"], "control.sock"))
        self.listener.listen(16)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            conn, _ = self.listener.accept()
            real = socket.socket(socket.AF_UNIX)
            real.connect(os.path.join(DIRS["sock"], "control.sock"))
            threading.Thread(target=self.pump, args=(conn, real, False), daemon=True).start()
            threading.Thread(target=self.pump, args=(real, conn, True), daemon=True).start()

    def pump(self, src, dst, answers):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if answers and self.hold:
                    self.held.set()
                    continue
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def http(method, path, body=None):
    req = urllib.request.Request(api + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer test-token",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def slices():
    code, body = http("GET", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector="
                      "spec.nodeName%3D" + NODE + "%2Cspec.driver%3Dgpu.nvshare.com")
    check(code == 200, "listing slices: HTTP %d" % code)
    return body["items"]


def make_claim(name, pod_uid, memory="4Gi", compute="25", device="gpu-0", pool=NODE,
               driver="gpu.nvshare.com", allocated=True, params=None, more_pods=()):
    """A claim reserved for pod_uid and the pods more_pods names."""
    result = {"request": "gpu", "driver": driver, "pool": pool, "device": device,
              "shareID": str(uuid.uuid4())}
    caps = {}
    if memory is not None:
        caps["memory"] = memory
    if compute is not None:
        caps["computePercent"] = compute
    if caps:
        result["consumedCapacity"] = caps
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": NS},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvshare.com", "capacity": {"requests": caps}}}]}},
             "status": {"reservedFor": [{"resource": "pods", "name": "%s-pod%d" % (name, i), "uid": u}
                                        for i, u in enumerate((pod_uid,) + tuple(more_pods))]}}
    if allocated:
        claim["status"]["allocation"] = {"devices": {"results": [result]}}
    if params is not None:
        claim["status"]["allocation"]["devices"]["config"] = [{
            "source": "FromClaim", "requests": ["gpu"],
            "opaque": {"driver": "gpu.nvshare.com", "parameters": params}}]
    code, body = http("POST", "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims" % NS, claim)
    check(code == 201, "creating claim %s: HTTP %d" % (name, code))
    return (NS, body["metadata"]["uid"], name)


def status():
    out = subprocess.run([CTL, "status", "--json"], env=dict(os.environ, NVSHARE_SOCK_DIR=DIRS["sock"]),
                         capture_output=True, text=True, timeout=10)
    check(out.returncode == 0, "nvsharectl status: " + out.stderr)
    return json.loads(out.stdout)


def pod_limits(pod_uid, with_priority=False, gpu=0):
    """The operator's memory and core limits of the pod on GPU gpu: its
    own there (the driver sets them GPU by GPU), else the pod's for every
    GPU."""
    for p in status()["pods"]:
        if p["pod_uid"] == pod_uid:
            own = [x for x in p["gpu_limits"] if x["gpu"] == gpu]
            limits = (own[0]["memory_limit_bytes"] if own and own[0]["memory_limit_bytes"] else p["memory_limit_bytes"],
                      own[0]["core_limit"] if own and own[0]["core_limit"] else p["core_limit"])
            return limits + (p["priority_class"],) if with_priority else limits
    return (0, 0, 0) if with_priority else (0, 0)


def claim_status(c):
    """The claim's status.devices, as the driver wrote them."""
    code, body = http("GET", "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s" % (c[0], c[2]))
    check(code == 200, "reading claim %s: HTTP %d" % (c[2], code))
    return body.get("status", {}).get("devices")


def claim_reads():
    return http("GET", "/admin/claim-reads")[1]


def start_driver():
    # the fake NVML, where there is one, names the GPU for its attributes
    nvml = dict(LD_LIBRARY_PATH=FAKE_CUDA_DIR, FAKE_CUDA_DEVICES=UUID) if FAKE_CUDA_DIR else {}
    return start("driver", [DRIVER], NODE_NAME=NODE, **nvml, NVSHARE_SOCK_DIR=DIRS["ctl"], NVSHARE_GPUS=GPUS,
                 NVSHARE_API_SERVER=api, NVSHARE_SA_DIR=DIRS["sa"],
                 NVSHARE_DRA_PLUGIN_DIR=DIRS["plugin"], NVSHARE_DRA_REGISTRY_DIR=DIRS["registry"],
                 NVSHARE_CDI_DIR=DIRS["cdi"], NVSHARE_DRA_SLICE_CHECK="200ms",
                 NVSHARE_LIB_DIR=DIRS["lib"], **DRIVER_ENV)


def register():
    """kubelet's side of registration: the DRA endpoint the driver names."""
    path = os.path.join(DIRS["registry"], "gpu.nvshare.com-reg.sock")
    check(k.wait_for_socket(path), "no registration socket " + path)
    # a killed driver's socket file stays until the new one replaces it:
    # kubelet retries, so does this
    deadline = time.monotonic() + 10
    while True:
        r = k.Registration(path)
        try:
            info = r.get_info()
            r.notify(True)
            return info
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
        finally:
            r.close()


def gpu_share(trace, start_ns, end_ns):
    """Percent of [start, end) (CLOCK_MONOTONIC) the process held the fake
    GPU: its kernels, and host gaps under 3 ms between them (flow.sh's)."""
    spans = []
    with open(trace) as f:
        for line in f:
            fields = line.split()
            s, e = int(fields[1]), int(fields[2])
            if spans and s - spans[-1][1] < 3000000:
                spans[-1][1] = max(spans[-1][1], e)
            else:
                spans.append([s, e])
    held = sum(max(0, min(e, end_ns) - max(s, start_ns)) for s, e in spans)
    return 100.0 * held / (end_ns - start_ns)


def start_container(name, spec, pod_uid, **extra):
    """A claim's container: fake_job named name with the CDI spec's
    environment (its mounts resolved to their host paths) and extra over
    it, in a cgroup of pod_uid, on the fake GPU."""
    edits = spec["devices"][0]["containerEdits"]
    mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
    env = {"PATH": os.environ["PATH"]}
    for line in edits["env"]:
        key, value = line.split("=", 1)
        for inside, host in mounts.items():
            if value.startswith(inside):
                value = host + value[len(inside):]
        env[key] = value
    env.update(FAKE_CUDA_DEVICES=UUID, LD_LIBRARY_PATH=FAKE_CUDA_DIR,
               FAKE_CUDA_TRACE_DIR=DIRS["trace"], **extra)
    cgroup = "0::/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope" % (
        pod_uid.replace("-", "_"), "7" * 64)
    now = time.time_ns()
    return start(name, ["sh", "-c", 'mkdir -p "$1/$$" && printf "%s\n" "$2" >"$1/$$/cgroup" && '
                        'exec "$3" "$4" "$5"', "job", DIRS["proc"], cgroup, JOB, str(now),
                        str(now + 120 * 10**9)], base=env)


def run_container(spec, pod_uid):
    """The claim's container, except that the tenant tries to raise both
    limits in it."""
    job = start_container("job", spec, pod_uid, NVSHARE_GPU_MEMORY_LIMIT=str(8 * GIB),
                          NVSHARE_GPU_CORE_LIMIT="80")

    def client():
        return next((c for c in status()["clients"] if c["pod_uid"] == pod_uid), None)
    wait_for(lambda: client() is not None, "the pod's process to register")
    c = client()
    check(c["pid"] == job.pid and c["pod_source"] == "cgroup", "client %s" % c)
    check(c["mem_quota_bytes"] == 4 * GIB and c["core_limit"] == 25,
          "the pod's process got quota %d and core limit %d (its env asked 8 GiB and 80 %%)"
          % (c["mem_quota_bytes"], c["core_limit"]))
    window = status()["node"]["window_ns"]
    start_ns = time.monotonic_ns()
    time.sleep(3 * window / 1e9 + 0.1)
    share = gpu_share(os.path.join(DIRS["trace"], "trace.%d" % job.pid), start_ns,
                      start_ns + 3 * window)
    stop("job")
    check(10 <= share <= 26.5, "GPU share %.1f %% under a 25 %% claim: outside 10-26.5 %%" % share)
    print("PASS: the pod's process (env raising both to 8 GiB and 80 %%) is held to the claim: quota "
          "%d MiB (%s), core limit %d%% (%s), GPU share %.1f %% over %d ms"
          % (c["mem_quota_bytes"] >> 20, c["mem_quota_source"], c["core_limit"],
             c["core_limit_source"], share, 3 * window // 1000000))


def cel_matches(expression, device, driver):
    """The DeviceClass selector's CEL, for the clauses deploy/dra uses:
    `device.driver == "..."` and `device.allowMultipleAllocations == true`
    joined by &&. Any other clause fails the test: extend this with it."""
    values = {"device.driver": driver,
              "device.allowMultipleAllocations": device.get("allowMultipleAllocations", False)}
    for clause in expression.split("&&"):
        lhs, _, rhs = (x.strip() for x in clause.partition("=="))
        check(lhs in values and rhs, "CEL clause the test cannot read: %r" % clause)
        want = {"true": True, "false": False}.get(rhs, rhs.strip('"'))
        if values[lhs] != want:
            return False
    return True


def deploy_matches(s):
    """deploy/dra's DeviceClass selects the published devices, and the
    example claim asks for the capacities they publish (an unknown key
    would make every device ineligible)."""
    try:
        import yaml
    except ImportError:
        print("SKIP: deploy/dra against the slice: no PyYAML")
        return
    deploy = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "dra")
    with open(os.path.join(deploy, "deviceclass.yaml")) as f:
        cls = yaml.safe_load(f)
    with open(os.path.join(deploy, "example.yaml")) as f:
        tmpl = next(d for d in yaml.safe_load_all(f) if d["kind"] == "ResourceClaimTemplate")
    for sel in cls["spec"]["selectors"]:
        for dev in s["spec"]["devices"]:
            check(cel_matches(sel["cel"]["expression"], dev, s["spec"]["driver"]),
                  "DeviceClass selector does not match %s" % dev["name"])
    for req in tmpl["spec"]["spec"]["devices"]["requests"]:
        asked = set(req["exactly"]["capacity"]["requests"])
        check(req["exactly"]["deviceClassName"] == cls["metadata"]["name"], "example's class")
        for dev in s["spec"]["devices"]:
            check(asked <= set(dev["capacity"]), "example asks %s, %s publishes %s"
                  % (asked, dev["name"], set(dev["capacity"])))
    print("PASS: deploy/dra's DeviceClass selects every published device; the example claim's "
          "capacities %s are published" % sorted(asked))
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("SKIP: kubectl over deploy/dra: no kubectl")
        return
    want = set()
    for name in sorted(os.listdir(deploy)):
        with open(os.path.join(deploy, name)) as f:
            for d in yaml.safe_load_all(f):
                group = d["apiVersion"].rpartition("/")[0]
                want.add("%s%s/%s" % (d["kind"].lower(), "." + group if group else "",
                                      d["metadata"]["name"]))
    kubeconfig = os.path.join(WORK, "kubeconfig")
    open(kubeconfig, "w").close()
    run = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "--cache-dir",
                          os.path.join(WORK, "kube-cache"), "--server", api, "--request-timeout",
                          "10s", "apply", "--dry-run=client", "--validate=false", "-o", "name",
                          "-f", deploy], capture_output=True, text=True, timeout=60)
    got = set(run.stdout.split())
    check(run.returncode == 0 and got == want, "kubectl apply --dry-run=client over deploy/dra: "
          "rc %d, got %s, want %s: %s" % (run.returncode, sorted(got), sorted(want), run.stderr))
    print("PASS: kubectl apply --dry-run=client reads deploy/dra as %d objects" % len(got))


def setup():
    """The loopback API server, the scheduler, the relay of its control
    socket and the driver: the relay."""
    global api
    for d in DIRS.values():
        os.makedirs(d)
    with open(os.path.join(DIRS["sa"], "token"), "w") as f:
        f.write("test-token\n")
    pods_file = os.path.join(WORK, "pods.json")
    with open(pods_file, "w") as f:
        f.write("[]")
    port_file = os.path.join(WORK, "port")
    start("apiserver", [sys.executable, FAKE_API, port_file, os.path.join(DIRS["sa"], "token"), pods_file])
    wait_for(lambda: os.path.exists(port_file), "the API server")
    api = "http://127.0.0.1:" + open(port_file).read().strip()

    why = k.check_wire_contract()
    check(why is None, "wire contract: %s" % why)
    print("PASS: dra.proto and pluginregistration.proto match the upstream field numbers")

    if LIBNVSHARE:
        os.symlink(LIBNVSHARE, os.path.join(DIRS["lib"], "libnvshare.so"))
    start("scheduler", [SCHED], NVSHARE_GPUS=GPUS, NVSHARE_TQ="100ms",
          NVSHARE_PROC_ROOT=DIRS["proc"])
    wait_for(lambda: os.path.exists(os.path.join(DIRS["sock"], "control.sock")), "the scheduler")
    relay = ControlRelay()
    start_driver()
    return relay


def finish():
    """Stops what setup started, and fails on a sanitizer's report."""
    check(stop("driver") == 0, "driver exit status")
    check(not os.path.exists(os.path.join(DIRS["plugin"], "dra.sock")), "dra.sock left behind")
    stop("scheduler")
    stop("apiserver")
    for name in ("driver", "scheduler", "job"):
        path = os.path.join(WORK, name + ".log")
        if os.path.exists(path):
            text = open(path).read()
            check("AddressSanitizer" not in text and "runtime error" not in text,
                  "a sanitizer report in %s.log" % name)
    shutil.rmtree(WORK, ignore_errors=True)


def main():
    relay = setup()

    # 1. registration
    info = register()
    endpoint = os.path.join(DIRS["plugin"], "dra.sock")
    check(info.type == "DRAPlugin" and info.name == "gpu.nvshare.com", "PluginInfo %s" % info)
    check(info.endpoint == endpoint, "endpoint %s, want %s" % (info.endpoint, endpoint))
    check(list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"],
          "versions %s" % list(info.supported_versions))
    print("PASS: registration: GetInfo names DRAPlugin gpu.nvshare.com at %s, v1 first" % endpoint)

    # 2. the ResourceSlice
    wait_for(lambda: len(slices()) == 1, "the ResourceSlice")
    s = slices()[0]
    node_uid = str(uuid.uuid5(uuid.NAMESPACE_DNS, NODE))
    attributes = {"uuid": {"string": UUID}, "index": {"int": 0}}
    if FAKE_CUDA_DIR:  # the fake NVML's, its "580.159.04" made semver
        attributes.update(productName={"string": "Fake GPU"},
                          driverVersion={"version": "580.159.4"},
                          cudaComputeCapability={"version": "9.0.0"})
    check(s["metadata"]["generateName"] == NODE + "-gpu.nvshare.com-", "generateName")
    check(s["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": NODE,
                                                "uid": node_uid, "controller": True}],
          "ownerReferences %s" % s["metadata"].get("ownerReferences"))
    want_spec = {"driver": "gpu.nvshare.com", "nodeName": NODE,
                 "pool": {"name": NODE, "generation": s["spec"]["pool"]["generation"],
                          "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "allowMultipleAllocations": True,
                              "attributes": attributes,
                              "capacity": {
                                  "memory": {"value": "16Gi", "requestPolicy": {
                                      "default": "1Gi", "validRange": {
                                          "min": "256Mi", "max": "16Gi", "step": "256Mi"}}},
                                  "computePercent": {"value": "100", "requestPolicy": {
                                      "default": "10", "validRange": {
                                          "min": "1", "max": "100", "step": "1"}}}}}]}
    check(s["spec"] == want_spec, "slice spec:\n%s\nwant\n%s" % (json.dumps(s["spec"], indent=1),
                                                              json.dumps(want_spec, indent=1)))
    first_gen = s["spec"]["pool"]["generation"]
    deploy_matches(s)
    print("PASS: ResourceSlice %s: gpu-0, 16Gi in 256Mi steps and 100%%, shareable, owned by the "
          "Node; attributes %s" % (s["metadata"]["name"], sorted(attributes)))

    # 3. Prepare 4Gi / 25 %
    plugin = k.DRAPlugin(endpoint)
    pod1 = str(uuid.uuid4())
    c1 = make_claim("trainer-gpu", pod1)
    t0 = time.monotonic()
    resp = plugin.prepare([c1])
    prep_ms = (time.monotonic() - t0) * 1000
    r1 = resp.claims[c1[1]]
    check(r1.error == "", "Prepare error: " + r1.error)
    check(len(r1.devices) == 1, "devices %s" % r1.devices)
    dev = r1.devices[0]
    cdi_id = "k8s.gpu.nvshare.com/claim=%s-gpu-0-0" % c1[1]
    check(dev.pool_name == NODE and dev.device_name == "gpu-0" and list(dev.request_names) == ["gpu"]
          and list(dev.cdi_device_ids) == [cdi_id] and dev.share_id, "device %s" % dev)
    check(prep_ms < 1000, "Prepare took %.0f ms" % prep_ms)
    mem, core = pod_limits(pod1)
    check((mem, core) == (4 * GIB, 25), "scheduler limits of the pod: %d bytes, %d%%" % (mem, core))
    spec_path = os.path.join(DIRS["cdi"], "gpu.nvshare.com-claim_%s.json" % c1[1])
    with open(spec_path) as f:
        spec = json.load(f)
    check(spec["kind"] == "k8s.gpu.nvshare.com/claim" and spec["cdiVersion"] == "0.5.0",
          "CDI kind/version %s" % spec)
    env = spec["devices"][0]["containerEdits"]["env"]
    for want in ("NVIDIA_VISIBLE_DEVICES=" + UUID, "LD_PRELOAD=/usr/local/nvshare/lib/libnvshare.so",
                 "NVSHARE_SOCK_DIR=/var/run/nvshare"):
        check(want in env, "CDI env lacks %s: %s" % (want, env))
    # a container may hold several claims: no one spec states the limits
    check(not any(e.startswith(("NVSHARE_GPU_MEMORY_LIMIT=", "NVSHARE_GPU_CORE_LIMIT="))
                  for e in env), "CDI env states a limit: %s" % env)
    mounts = {m["containerPath"]: m["hostPath"] for m in spec["devices"][0]["containerEdits"]["mounts"]}
    check(mounts == {"/usr/local/nvshare/lib": DIRS["lib"], "/var/run/nvshare": DIRS["ctl"]},
          "CDI mounts %s" % mounts)
    print("PASS: Prepare of a 4Gi/25%% claim in %.1f ms: scheduler holds pod %s to %d MiB and %d%%; "
          "CDI %s with LD_PRELOAD" % (prep_ms, pod1[:8], mem >> 20, core, cdi_id))
    wait_for(lambda: claim_status(c1), "the claim's device status")
    want = [{"driver": "gpu.nvshare.com", "pool": NODE, "device": "gpu-0", "shareID": dev.share_id,
             "data": {"memoryLimitBytes": 4 * GIB, "coreLimitPercent": 25}}]
    check(claim_status(c1) == want, "claim status %s, want %s" % (claim_status(c1), want))
    print("PASS: the claim's status.devices states its limits: %s" % want[0]["data"])

    if JOB:
        run_container(spec, pod1)
    else:
        print("SKIP: the pod's process on the fake GPU (no CUDA headers in this build)")

    # 4. idempotent, in both API versions, from the checkpoint
    reads = claim_reads()
    for version in ("v1", "v1beta1"):
        again = k.DRAPlugin(endpoint, version).prepare([c1]).claims[c1[1]]
        check(again.error == "" and list(again.devices[0].cdi_device_ids) == [cdi_id],
              "Prepare again (%s): %s" % (version, again))
    check(claim_reads() == reads, "a prepared claim was read again from the API server")
    os.unlink(spec_path)
    plugin.prepare([c1])
    check(os.path.exists(spec_path), "a lost CDI spec was not written again")
    print("PASS: Prepare again (v1 and v1beta1) returns the same CDI device without reading the "
          "API server; a lost CDI spec is written again")

    # 5. bad claims beside a good one, each with its own error
    pod2 = str(uuid.uuid4())
    good = make_claim("second", pod2, memory="4096Mi", compute="30",
                      params={"apiVersion": "gpu.nvshare.com/v1", "kind": "GpuConfig",
                              "priority": "high"})
    bad = {
        "unknown": (NS, str(uuid.uuid4()), "no-such-claim"),
        "unallocated": make_claim("unallocated", str(uuid.uuid4()), allocated=False),
        "other driver": make_claim("other-driver", str(uuid.uuid4()), driver="gpu.nvidia.com"),
        "other node": make_claim("other-node", str(uuid.uuid4()), pool="node-b"),
        "no such GPU": make_claim("no-gpu", str(uuid.uuid4()), device="gpu-7"),
        "bad quantity": make_claim("bad-quantity", str(uuid.uuid4()), memory="lots"),
        # too big beside claim 1 alone: the call's claims run in any order
        "over capacity": make_claim("too-big", str(uuid.uuid4()), memory="14Gi", compute="10"),
        "bad config": make_claim("bad-config", str(uuid.uuid4()), memory="1Gi",
                                 params={"priorty": "high"}),
        "replaced": (NS, str(uuid.uuid4()), "trainer-gpu"),
        "malformed name": (NS, str(uuid.uuid4()), "../../x"),
    }
    order = [good] + list(bad.values())
    resp = plugin.prepare(order)
    check(set(resp.claims.keys()) == {c[1] for c in order}, "not every claim answered")
    check(resp.claims[good[1]].error == "", "the good claim failed: " + resp.claims[good[1]].error)
    for what, c in bad.items():
        err = resp.claims[c[1]].error
        check(err != "" and not resp.claims[c[1]].devices, "%s: no error" % what)
        print("  %-15s -> %s" % (what, err))
    check(pod_limits(pod2, True) == (4 * GIB, 30, 3), "second pod's limits %s"
          % (pod_limits(pod2, True),))
    print("PASS: %d bad claims each get an error, the good one beside them is prepared: a second pod "
          "on gpu-0 with its own limits (4096Mi = 4 GiB, 30%%) and its opaque config's priority high"
          % len(bad))

    # 6. malformed protobuf, a 100-claim request; the driver keeps serving
    try:
        plugin.prepare(b"\xff\xff\xff")
        fail("malformed protobuf got an answer")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "malformed: %s" % e.code())
    many = [(NS, str(uuid.uuid4()), "missing-%d" % i) for i in range(100)]
    t0 = time.monotonic()
    resp = plugin.prepare(many)
    many_ms = (time.monotonic() - t0) * 1000
    check(len(resp.claims) == 100 and all(r.error for r in resp.claims.values()), "100 claims")
    try:
        plugin.prepare([(NS, "u%d" % i, "c") for i in range(1025)])
        fail("a 1025-claim request got an answer")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "1025 claims: %s" % e.code())
    # a UID with a NUL would decode as its prefix: claim 1's
    uid_nul = c1[1].encode() + b"\x00y"
    claim = b"\x0a\x02" + NS.encode() + b"\x12" + bytes([len(uid_nul)]) + uid_nul + b"\x1a\x01c"
    raw = b"\x0a" + bytes([len(claim)]) + claim
    check(k.dra.NodeUnprepareResourcesRequest.FromString(raw).claims[0].uid == c1[1] + "\x00y",
          "the NUL request is not what it means to be")
    try:
        plugin.unprepare(raw)
        fail("a claim UID holding a NUL byte got an answer")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "NUL: %s" % e.code())
    check(pod_limits(pod1) == (4 * GIB, 25), "a NUL-truncated UID unprepared claim 1")
    check(register().name == "gpu.nvshare.com", "driver stopped serving")
    print("PASS: malformed protobuf, a UID holding a NUL, 1025 claims -> INVALID_ARGUMENT; 100 unknown claims -> 100 "
          "errors in %.0f ms; still serving" % many_ms)

    # 7. a failing API server: retried with back-off, then an error per claim
    pod3 = str(uuid.uuid4())
    c3 = make_claim("flaky", pod3, memory="1Gi", compute="5")
    http("POST", "/admin/claim-fault?mode=error&count=2")
    t0 = time.monotonic()
    r3 = plugin.prepare([c3]).claims[c3[1]]
    retry_ms = (time.monotonic() - t0) * 1000
    check(r3.error == "", "two failures then success: " + r3.error)
    c4 = make_claim("broken", str(uuid.uuid4()), memory="1Gi", compute="5")
    http("POST", "/admin/claim-fault?mode=error&count=3")
    t0 = time.monotonic()
    r4 = plugin.prepare([c4]).claims[c4[1]]
    fail_ms = (time.monotonic() - t0) * 1000
    check("HTTP 500" in r4.error, "three failures: " + r4.error)
    http("POST", "/admin/claim-fault?mode=error&count=0")
    print("PASS: API server failing twice: prepared after retries in %.0f ms; failing 3 times: "
          "'%s' in %.0f ms" % (retry_ms, r4.error, fail_ms))

    # 8. kubelet deleted the slice: it comes back
    name = slices()[0]["metadata"]["name"]
    http("DELETE", "/apis/resource.k8s.io/v1/resourceslices/" + name)
    t0 = time.monotonic()
    wait_for(lambda: len(slices()) == 1, "the slice to come back")
    print("PASS: a deleted ResourceSlice is published again within %.0f ms"
          % ((time.monotonic() - t0) * 1000))

    # 9. a failure in the middle of a Prepare (the CDI spec cannot be
    # written) undoes the limits already set
    pod5 = str(uuid.uuid4())
    c5 = make_claim("no-cdi", pod5, memory="1Gi", compute="5")
    os.rename(DIRS["cdi"], DIRS["cdi"] + ".away")
    open(DIRS["cdi"], "w").close()
    r5 = plugin.prepare([c5]).claims[c5[1]]
    os.unlink(DIRS["cdi"])
    os.rename(DIRS["cdi"] + ".away", DIRS["cdi"])
    check("CDI" in r5.error or "cannot write" in r5.error, "CDI failure: " + r5.error)
    check(pod_limits(pod5) == (0, 0), "limits left by a failed Prepare: %s" % (pod_limits(pod5),))
    print("PASS: a Prepare whose CDI spec cannot be written fails ('%s') and leaves no limits" % r5.error)

    # 10. the driver killed in the middle of a Prepare: the scheduler has
    # applied its first limit, the driver has not heard so. After a
    # restart, the Unprepare kubelet sends undoes it.
    pod6 = str(uuid.uuid4())
    c6 = make_claim("killed", pod6, memory="2Gi", compute="20")
    relay.hold = True
    kill_plugin = k.DRAPlugin(endpoint)
    pending = kill_plugin.channel.unary_unary(
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=k.dra.NodePrepareResourcesResponse.FromString).future(
        k.dra.NodePrepareResourcesRequest(claims=[k.dra.Claim(namespace=c6[0], uid=c6[1], name=c6[2])]),
        timeout=30)
    check(relay.held.wait(10), "the Prepare's first limit never reached the scheduler")
    stop("driver", signal.SIGKILL)
    relay.hold = False
    try:
        pending.result()
        fail("a Prepare answered although the driver was killed")
    except grpc.RpcError:
        pass
    kill_plugin.close()
    check(pod_limits(pod6)[0] == 2 * GIB, "the limit the scheduler applied: %s" % (pod_limits(pod6),))
    start_driver()
    register()
    plugin.close()
    plugin = k.DRAPlugin(endpoint)
    r6 = plugin.unprepare([c6]).claims[c6[1]]
    check(r6.error == "" and pod_limits(pod6) == (0, 0),
          "after a kill mid-Prepare and an Unprepare: %s, limits %s" % (r6.error, pod_limits(pod6)))
    print("PASS: driver killed mid-Prepare (memory limit sent, no answer): after its restart, "
          "Unprepare removes it (2 GiB -> none)")

    # 11. restart: the checkpoint keeps the claims, the slice is replaced
    plugin.close()
    gen_before = slices()[0]["spec"]["pool"]["generation"]
    check(stop("driver") == 0, "driver exit status")
    start_driver()
    register()
    wait_for(lambda: len(slices()) == 1 and slices()[0]["spec"]["pool"]["generation"] > gen_before,
             "the slice republished at a higher generation")
    plugin = k.DRAPlugin(endpoint)
    reads = claim_reads()
    again = plugin.prepare([c1]).claims[c1[1]]
    check(again.error == "" and claim_reads() == reads, "after restart: %s" % again)
    print("PASS: after a restart: slice generation %d -> %d (one slice), claim 1 still prepared"
          % (first_gen, slices()[0]["spec"]["pool"]["generation"]))

    # 12. Unprepare
    for c, pod in ((c1, pod1), (good, pod2), (c3, pod3)):
        r = plugin.unprepare([c]).claims[c[1]]
        check(r.error == "", "Unprepare: " + r.error)
        check(pod_limits(pod, True) == (0, 0, 0), "limits left after Unprepare: %s"
              % (pod_limits(pod, True),))
    check(not os.path.exists(spec_path), "CDI spec left after Unprepare")
    r = plugin.unprepare([c1, (NS, str(uuid.uuid4()), "never")])
    check(all(x.error == "" for x in r.claims.values()), "Unprepare again / unknown")
    with open(os.path.join(DIRS["plugin"], "checkpoint.json")) as f:
        check(json.load(f)["claims"] == [], "checkpoint not empty")
    print("PASS: Unprepare removes the limits, the CDI spec and the checkpoint entry; again, "
          "or of an unknown claim, succeeds")

    plugin.close()
    finish()
    print("PASS: k8s_dra_driver")


def run(test_main):
    """test_main, with any bug of the test failing it too: fail() stops
    what it started."""
    try:
        test_main()
    except Exception as e:
        fail("%s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    run(main)
