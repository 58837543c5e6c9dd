#!/usr/bin/env python3
"""k8s_device_plugin: a test kubelet against the real nvshare-device-plugin.

    k8s_device_plugin.py PLUGIN_BIN PB2_DIR [FAKE_NVML_DIR]

It speaks the device plugin API v1beta1 with python3-grpcio and messages
compiled from the plugin's own deviceplugin.proto (PB2_DIR): it serves
kubelet.sock's Registration service in a temporary directory, receives
Register from the plugin, dials the plugin, keeps ListAndWatch open, calls
GetPreferredAllocation and Allocate, restarts like kubelet does (deletes the
sockets), sends malformed requests and stops the plugin with SIGTERM. With
FAKE_NVML_DIR (the fake libnvidia-ml.so.1) it also checks NUMA nodes and
health read from NVML. Every wait is bounded; nothing leaves the loopback.
The kubelet's side (Kubelet, Endpoint) is test_kubelet.py, shared with
tests/k8s/flow.sh.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc

from test_kubelet import GPU, MEM, Endpoint, Kubelet, KubeletError, load_messages, next_update

PLUGIN, PB2_DIR = sys.argv[1], sys.argv[2]
FAKE_NVML_DIR = sys.argv[3] if len(sys.argv) > 3 else None
pb = load_messages(PB2_DIR)

GIB, MIB = 1 << 30, 1 << 20
UUID1 = "GPU-aaaa0000-0000-4000-8000-000000000001"
UUID2 = "GPU-aaaa0000-0000-4000-8000-000000000002"
WORK = tempfile.mkdtemp(prefix="nvshare-k8s.")
plugins = []


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    for p in plugins:
        if p.poll() is None:
            p.kill()
        with open(p.log_path) as f:
            sys.stderr.write("--- plugin log (last lines)\n" + "".join(f.readlines()[-30:]))
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


def start_plugin(kubelet_dir, name, **env):
    full = dict(os.environ, NVSHARE_KUBELET_DIR=kubelet_dir,
                NVSHARE_SOCK_DIR=os.path.join(WORK, "sock"),
                NVSHARE_LIB_DIR=os.path.join(WORK, "lib"), **env)
    log_path = os.path.join(WORK, name + ".log")
    p = subprocess.Popen([PLUGIN], env=full, stdout=open(log_path, "w"),
                         stderr=subprocess.STDOUT)
    p.log_path = log_path
    plugins.append(p)
    return p


def stop_plugin(p, kubelet_dir):
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        fail("the plugin did not exit within 10 s of SIGTERM")
    check(rc == 0, "the plugin exited %d after SIGTERM, not 0" % rc)
    with open(p.log_path) as f:
        log = f.read()
    check("AddressSanitizer" not in log and "runtime error" not in log,
          "sanitizer report in the plugin's log")
    for sock in ("nvshare-gpu.sock", "nvshare-gpu-memory.sock"):
        check(not os.path.exists(os.path.join(kubelet_dir, sock)),
              "%s left behind after SIGTERM" % sock)


def envs_of(response):
    return [dict(c.envs) for c in response.container_responses]


# The wire contract, field by field, from kubelet's v1beta1 API: both sides
# of this test share deviceplugin.proto, so a wrong number there would pass
# everything else and fail against a real kubelet.
WIRE_CONTRACT = {
    "DevicePluginOptions": {"pre_start_required": 1, "get_preferred_allocation_available": 2},
    "RegisterRequest": {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4},
    "ListAndWatchResponse": {"devices": 1},
    "Device": {"ID": 1, "health": 2, "topology": 3},
    "TopologyInfo": {"nodes": 1},
    "NUMANode": {"ID": 1},
    "PreStartContainerRequest": {"devices_ids": 1},
    "PreferredAllocationRequest": {"container_requests": 1},
    "ContainerPreferredAllocationRequest": {"available_deviceIDs": 1,
                                            "must_include_deviceIDs": 2,
                                            "allocation_size": 3},
    "PreferredAllocationResponse": {"container_responses": 1},
    "ContainerPreferredAllocationResponse": {"deviceIDs": 1},
    "AllocateRequest": {"container_requests": 1},
    "ContainerAllocateRequest": {"devices_ids": 1},
    "AllocateResponse": {"container_responses": 1},
    "ContainerAllocateResponse": {"envs": 1, "mounts": 2, "devices": 3, "annotations": 4,
                                  "cdi_devices": 5},
    "Mount": {"container_path": 1, "host_path": 2, "read_only": 3},
    "DeviceSpec": {"container_path": 1, "host_path": 2, "permissions": 3},
    "CDIDevice": {"name": 1},
}


def wire_contract():
    check(pb.DESCRIPTOR.package == "v1beta1", "package %s" % pb.DESCRIPTOR.package)
    for message, fields in WIRE_CONTRACT.items():
        got = {f.name: f.number for f in pb.DESCRIPTOR.message_types_by_name[message].fields}
        check(got == fields, "%s fields %s, want %s" % (message, got, fields))
    print("PASS: deviceplugin.proto matches the v1beta1 wire contract (%d messages)"
          % len(WIRE_CONTRACT))


def main_flow():
    kdir = os.path.join(WORK, "kubelet")
    os.makedirs(kdir)
    kubelet = Kubelet(kdir)
    plugin = start_plugin(kdir, "plugin", NVSHARE_GPUS="%s:81920,%s:40960" % (UUID1, UUID2),
                          NVSHARE_VIRTUAL_GPUS="4", NVSHARE_GPU_MEMORY_UNIT="1Gi")

    # Register: both resources, v1beta1, their own socket, preferred allocation on.
    regs = kubelet.expect_registrations()
    check(sorted(regs) == [GPU, MEM], "registered %s" % sorted(regs))
    for name, (_, req) in regs.items():
        check(req.version == "v1beta1", "version %r" % req.version)
        check(req.options.get_preferred_allocation_available, name + ": no preferred allocation")
        check(not req.options.pre_start_required, name + ": asks for PreStartContainer")
    gpu = Endpoint(kdir, regs[GPU][1].endpoint)
    mem = Endpoint(kdir, regs[MEM][1].endpoint)
    check(regs[GPU][1].endpoint != regs[MEM][1].endpoint, "both resources on one socket")
    print("PASS: Register for %s (%s) and %s (%s)" % (GPU, regs[GPU][1].endpoint, MEM,
                                                     regs[MEM][1].endpoint))

    options = gpu.call("GetDevicePluginOptions", pb.Empty(), pb.DevicePluginOptions)
    check(options.get_preferred_allocation_available, "GetDevicePluginOptions")

    # ListAndWatch: 4 virtual GPUs per GPU, 80 + 40 gpu-memory IDs of 1 GiB.
    gpu_stream, gpu_updates = gpu.list_and_watch()
    mem_stream, mem_updates = mem.list_and_watch()
    gpu_list = next_update(gpu_updates, "first gpu list")
    mem_list = next_update(mem_updates, "first gpu-memory list")
    gpu_ids = [d.ID for d in gpu_list.devices]
    mem_ids = [d.ID for d in mem_list.devices]
    check(gpu_ids == ["%s-v%d" % (u, k) for u in (UUID1, UUID2) for k in range(4)],
          "gpu devices %s" % gpu_ids)
    check(mem_ids == ["%s-m%d" % (UUID1, k) for k in range(80)] +
          ["%s-m%d" % (UUID2, k) for k in range(40)], "gpu-memory devices (%d)" % len(mem_ids))
    check(all(d.health == "Healthy" for d in list(gpu_list.devices) + list(mem_list.devices)),
          "a device is not Healthy")
    check(all(len(i) <= 63 for i in gpu_ids + mem_ids), "a device ID over 63 characters")
    check(not any(d.HasField("topology") for d in gpu_list.devices),
          "NUMA topology invented for NVSHARE_GPUS")
    print("PASS: ListAndWatch: %d virtual GPUs, %d gpu-memory IDs, all Healthy"
          % (len(gpu_ids), len(mem_ids)))

    # GetPreferredAllocation. gpu-memory: GPU1 has 70 of its 80 GiB allocated,
    # GPU2 none: a 4 GiB request goes to GPU2, all of it.
    mem_free = ["%s-m%d" % (UUID1, k) for k in range(70, 80)] + \
               ["%s-m%d" % (UUID2, k) for k in range(40)]
    pref = mem.call("GetPreferredAllocation", pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(available_deviceIDs=mem_free,
                                               allocation_size=4)]),
        pb.PreferredAllocationResponse)
    picked = list(pref.container_responses[0].deviceIDs)
    check(len(picked) == 4 and all(i.startswith(UUID2) for i in picked),
          "gpu-memory preferred %s, not 4 IDs of the least allocated GPU" % picked)
    # gpu: the least gpu-memory allocated GPU first (GPU2), then the other.
    for size, want in ((1, [UUID2]), (2, [UUID2, UUID1])):
        pref = gpu.call("GetPreferredAllocation", pb.PreferredAllocationRequest(
            container_requests=[pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=gpu_ids, allocation_size=size)]),
            pb.PreferredAllocationResponse)
        got = [i.rsplit("-", 1)[0] for i in pref.container_responses[0].deviceIDs]
        check(got == want, "gpu preferred GPUs %s for %d, want %s" % (got, size, want))
    # must_include is kept.
    pref = gpu.call("GetPreferredAllocation", pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(available_deviceIDs=gpu_ids,
                                               must_include_deviceIDs=[UUID1 + "-v3"],
                                               allocation_size=2)]),
        pb.PreferredAllocationResponse)
    got = list(pref.container_responses[0].deviceIDs)
    check(UUID1 + "-v3" in got and len(set(got)) == 2 and got[1].startswith(UUID2),
          "must_include: %s" % got)
    print("PASS: GetPreferredAllocation: least allocated gpu-memory GPU first, one GPU per "
          "virtual GPU, must_include kept")

    # Allocate, per resource, as kubelet calls it. A pod with gpu: 2 and 8Gi.
    resp = gpu.call("Allocate", pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=[UUID1 + "-v0", UUID2 + "-v1"]),
        pb.ContainerAllocateRequest(devices_ids=[UUID2 + "-v2"])]), pb.AllocateResponse)
    envs = envs_of(resp)
    check(len(envs) == 2, "Allocate answered %d containers of 2" % len(envs))
    check(envs[0].get("NVIDIA_VISIBLE_DEVICES") == UUID1 + "," + UUID2,
          "NVIDIA_VISIBLE_DEVICES=%r" % envs[0].get("NVIDIA_VISIBLE_DEVICES"))
    check(envs[1].get("NVIDIA_VISIBLE_DEVICES") == UUID2, "second container's GPU")
    check(envs[0].get("LD_PRELOAD") == "/usr/local/nvshare/lib/libnvshare.so",
          "LD_PRELOAD=%r" % envs[0].get("LD_PRELOAD"))
    check(envs[0].get("NVSHARE_SOCK_DIR") == "/var/run/nvshare", "NVSHARE_SOCK_DIR")
    # Default for a pod without gpu-memory: capacity / virtual GPUs of its
    # smallest GPU (40 GiB / 4).
    check(envs[0].get("NVSHARE_GPU_MEMORY_DEFAULT_LIMIT") == str(10 * GIB),
          "default limit %r" % envs[0].get("NVSHARE_GPU_MEMORY_DEFAULT_LIMIT"))
    check(envs[1].get("NVSHARE_GPU_MEMORY_DEFAULT_LIMIT") == str(10 * GIB), "default, GPU2")
    check("NVSHARE_ENABLE_OVERSUB" not in envs[0], "oversubscription on at ratio 1")
    mounts = {m.container_path: (m.host_path, m.read_only)
              for m in resp.container_responses[0].mounts}
    check(mounts == {"/usr/local/nvshare/lib": (os.path.join(WORK, "lib"), True),
                     "/var/run/nvshare": (os.path.join(WORK, "sock"), False)},
          "mounts %s" % mounts)
    mresp = mem.call("Allocate", pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=["%s-m%d" % (UUID2, k) for k in range(8)])]),
        pb.AllocateResponse)
    menvs = envs_of(mresp)[0]
    check(menvs == {"NVSHARE_GPU_MEMORY_LIMIT": str(8 * GIB)},
          "gpu-memory Allocate envs %s (8 GiB per GPU)" % menvs)
    check(not set(menvs) & set(envs[0]), "the two resources' envs share a name")
    print("PASS: Allocate: NVIDIA_VISIBLE_DEVICES=%s, LD_PRELOAD, NVSHARE_SOCK_DIR, mounts, "
          "NVSHARE_GPU_MEMORY_LIMIT=%s (8 GiB per GPU), default %s"
          % (envs[0]["NVIDIA_VISIBLE_DEVICES"], menvs["NVSHARE_GPU_MEMORY_LIMIT"],
             envs[0]["NVSHARE_GPU_MEMORY_DEFAULT_LIMIT"]))

    # Malformed requests: errors, not crashes.
    bad = grpc.StatusCode.INVALID_ARGUMENT
    garbage = b"\xff\xff\xff\xff\x0f\x0a\x99garbage"
    for ep, method in ((gpu, "Allocate"), (mem, "Allocate"), (gpu, "GetPreferredAllocation"),
                       (mem, "GetPreferredAllocation"), (gpu, "GetDevicePluginOptions")):
        check(ep.error(method, garbage, raw=True) == bad, "garbage on " + method)
    cases = [
        (gpu, "Allocate", pb.AllocateRequest(), "no containers"),
        (gpu, "Allocate", pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest()]), "a container without devices"),
        (gpu, "Allocate", pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=["GPU-nope-v0"])]), "unknown device"),
        (gpu, "Allocate", pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=[UUID1 + "-v4"])]), "index past N"),
        (gpu, "Allocate", pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=[UUID1 + "-m0"])]), "a memory ID as a GPU"),
        (mem, "Allocate", pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=[UUID1 + "-m80"])]), "memory index past"),
        (gpu, "GetPreferredAllocation", pb.PreferredAllocationRequest(), "no containers"),
        (gpu, "GetPreferredAllocation", pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=gpu_ids,
                                                   allocation_size=9)]), "size past available"),
        (gpu, "GetPreferredAllocation", pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=["x" * 5000],
                                                   allocation_size=1)]), "a 5000-byte ID"),
    ]
    for ep, method, request, what in cases:
        check(ep.error(method, request) == bad, "%s: %s" % (method, what))
    check(gpu.error("NoSuchMethod", pb.Empty()) == grpc.StatusCode.UNIMPLEMENTED,
          "an unknown method")
    check(plugin.poll() is None, "the plugin died on a malformed request")
    check(gpu_updates.empty() or gpu_updates.queue[0] is not None, "ListAndWatch ended")
    print("PASS: %d malformed requests refused with INVALID_ARGUMENT/UNIMPLEMENTED, plugin up"
          % (len(cases) + 6))

    # IDs kubelet never sends, each a limit or a device the pod was not
    # given: a NUL inside (it decoded as the ID before it), one ID named twice
    # or 50,000 times (50,000 GiB on an 80 GiB GPU), a second spelling of an
    # index.
    one = UUID1 + "-m1"
    forged = [
        ("a NUL inside an ID", [one + "\0-m79"]),
        ("an ID named twice", [one, UUID1 + "-m2", one]),
        ("an ID named 50,000 times", [one] * 50000),
        ("an index spelled with a leading zero", [one, UUID1 + "-m01"]),
    ]
    for what, ids in forged:
        for method, request, reply in (
                ("Allocate", pb.AllocateRequest(container_requests=[
                    pb.ContainerAllocateRequest(devices_ids=ids)]), pb.AllocateResponse),
                ("GetPreferredAllocation", pb.PreferredAllocationRequest(container_requests=[
                    pb.ContainerPreferredAllocationRequest(available_deviceIDs=ids,
                                                           allocation_size=1)]),
                 pb.PreferredAllocationResponse)):
            try:
                resp = mem.call(method, request, reply)
            except grpc.RpcError as e:
                check(e.code() == bad, "%s, %s: %s" % (method, what, e.code()))
                print("MEASURED: %s, %s: %s '%s'" % (method, what, e.code().name, e.details()))
                continue
            got = envs_of(resp) if method == "Allocate" else \
                [list(c.deviceIDs) for c in resp.container_responses]
            fail("%s, %s: accepted, answered %s" % (method, what, got))
    check(plugin.poll() is None, "the plugin died on a forged ID")
    print("PASS: %d requests with forged gpu-memory IDs refused with INVALID_ARGUMENT"
          % (2 * len(forged)))

    # Kubelet restarts: it deletes every socket in the directory and serves
    # kubelet.sock again. The plugin must serve and register again within 1 s.
    kubelet.stop()
    t0 = time.monotonic()
    for name in os.listdir(kdir):
        os.unlink(os.path.join(kdir, name))
    kubelet = Kubelet(kdir)
    regs = kubelet.expect_registrations(timeout=5)
    for name, (t, _) in sorted(regs.items()):
        print("MEASURED: %s registered again %.0f ms after its socket was deleted"
              % (name, (t - t0) * 1000))
        check(t - t0 < 1.0, "%s took %.3f s to register again" % (name, t - t0))
    check(next_update(gpu_updates, "old stream end", 5) is None, "the old ListAndWatch stayed")
    gpu.close()
    mem.close()
    gpu = Endpoint(kdir, regs[GPU][1].endpoint)
    gpu_stream, gpu_updates = gpu.list_and_watch()
    check(len(next_update(gpu_updates, "list after restart").devices) == 8,
          "devices after the restart")
    print("PASS: kubelet restart: served and registered again within 1 s")

    stop_plugin(plugin, kdir)
    gpu.close()
    kubelet.stop()
    print("PASS: SIGTERM: clean exit 0, sockets removed")


def big_node():
    """8 GPUs x 141 GiB at the largest ratio (4.0), default unit: the
    gpu-memory list stays well under gRPC's 4 MiB. Also packing."""
    kdir = os.path.join(WORK, "kubelet-big")
    os.makedirs(kdir)
    kubelet = Kubelet(kdir)
    uuids = ["GPU-bbbb0000-0000-4000-8000-00000000000%d" % i for i in range(8)]
    plugin = start_plugin(kdir, "plugin-big", NVSHARE_GPUS=",".join(u + ":144384" for u in uuids),
                          NVSHARE_GPU_MEMORY_OVERSUB_RATIO="4", NVSHARE_ALLOCATION_PACK="1")
    regs = kubelet.expect_registrations()
    mem = Endpoint(kdir, regs[MEM][1].endpoint)
    gpu = Endpoint(kdir, regs[GPU][1].endpoint)
    _, updates = mem.list_and_watch()
    lst = next_update(updates, "the big gpu-memory list")
    size = len(lst.SerializeToString())
    per_gpu = 141 * GIB * 4 // (256 * MIB)
    check(len(lst.devices) == 8 * per_gpu, "%d gpu-memory IDs, want %d" % (len(lst.devices),
                                                                          8 * per_gpu))
    print("MEASURED: ListAndWatch for 8 x 141 GiB at ratio 4, unit 256Mi: %d IDs, %d bytes "
          "(%.1f%% of 4 MiB)" % (len(lst.devices), size, 100.0 * size / (4 << 20)))
    check(size < 2 << 20, "the gpu-memory list is %d bytes" % size)
    # Packing: the GPU with the most virtual GPUs in use that has one free.
    avail = ["%s-v%d" % (u, k) for u in uuids for k in range(10)
             if not (u == uuids[3] and k < 7) and not (u == uuids[5] and k < 2)]
    pref = gpu.call("GetPreferredAllocation", pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(available_deviceIDs=avail, allocation_size=1)]),
        pb.PreferredAllocationResponse)
    check(pref.container_responses[0].deviceIDs[0].startswith(uuids[3]),
          "packing picked %s" % pref.container_responses[0].deviceIDs[0])
    print("PASS: packing prefers the fullest GPU")
    resp = gpu.call("Allocate", pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=[uuids[0] + "-v0"])]), pb.AllocateResponse)
    envs = envs_of(resp)[0]
    check(envs.get("NVSHARE_ENABLE_OVERSUB") == "1", "no oversubscription at ratio 4")
    check(envs.get("NVSHARE_GPU_MEMORY_DEFAULT_LIMIT") == str(141 * GIB * 4 // 10),
          "default limit at ratio 4: %s" % envs.get("NVSHARE_GPU_MEMORY_DEFAULT_LIMIT"))
    print("PASS: ratio 4: Allocate turns oversubscription on, default = capacity / 10")
    stop_plugin(plugin, kdir)
    mem.close()
    gpu.close()
    kubelet.stop()


def nvml_node():
    """GPUs, NUMA nodes and health from (the fake) NVML."""
    kdir = os.path.join(WORK, "kubelet-nvml")
    os.makedirs(kdir)
    lost_file = os.path.join(WORK, "lost")
    kubelet = Kubelet(kdir)
    plugin = start_plugin(kdir, "plugin-nvml", LD_LIBRARY_PATH=FAKE_NVML_DIR,
                          FAKE_CUDA_DEVICES="2", FAKE_CUDA_MEM_MB="16384",
                          FAKE_NVML_LOST=lost_file, NVSHARE_VIRTUAL_GPUS="2")
    regs = kubelet.expect_registrations()
    gpu = Endpoint(kdir, regs[GPU][1].endpoint)
    _, updates = gpu.list_and_watch()
    lst = next_update(updates, "the NVML gpu list")
    check(len(lst.devices) == 4, "%d devices from 2 fake GPUs" % len(lst.devices))
    numa = [[n.ID for n in d.topology.nodes] for d in lst.devices]
    check(numa == [[0], [0], [1], [1]], "NUMA nodes %s" % numa)
    lost_uuid = lst.devices[2].ID.rsplit("-", 1)[0]
    with open(lost_file, "w") as f:
        f.write(lost_uuid + "\n")
    t0 = time.monotonic()
    lst = next_update(updates, "the lost GPU's update", 5)
    health = [d.health for d in lst.devices]
    check(health == ["Healthy", "Healthy", "Unhealthy", "Unhealthy"], "health %s" % health)
    print("MEASURED: a lost GPU turned Unhealthy in ListAndWatch after %.0f ms"
          % ((time.monotonic() - t0) * 1000))
    check(gpu.error("Allocate", pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=[lost_uuid + "-v0"])])) ==
          grpc.StatusCode.INVALID_ARGUMENT, "Allocate on an unhealthy GPU")
    os.unlink(lost_file)
    lst = next_update(updates, "the GPU's recovery", 5)
    check(all(d.health == "Healthy" for d in lst.devices), "the GPU did not recover")
    print("PASS: NVML: NUMA topology, a lost GPU goes Unhealthy and back")
    stop_plugin(plugin, kdir)
    gpu.close()
    kubelet.stop()


try:
    wire_contract()
    main_flow()
    big_node()
    if FAKE_NVML_DIR:
        nvml_node()
    else:
        print("SKIP: NVML health and NUMA (no fake libnvidia-ml)")
except KubeletError as e:
    fail(str(e))
finally:
    for p in plugins:
        if p.poll() is None:
            p.kill()
    shutil.rmtree(WORK, ignore_errors=True)
