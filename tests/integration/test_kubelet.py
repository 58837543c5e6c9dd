#!/usr/bin/env python3
"""test_kubelet.py - the kubelet side of the device plugin API v1beta1, for
nvshare's tests: python3-grpcio and the messages compiled from the plugin's
own deviceplugin.proto (PB2_DIR, by protoc --python_out at build time).

As a module (k8s_device_plugin.py): Kubelet serves kubelet.sock's
Registration service and records each Register; Endpoint dials one of the
plugin's sockets as kubelet does. A broken expectation raises KubeletError.

As a program (tests/k8s/flow.sh drives it as a coprocess):

    test_kubelet.py PB2_DIR KUBELET_DIR

reads one command a line on stdin and answers one JSON line on stdout;
times are CLOCK_REALTIME nanoseconds (the shell's date +%s%N):
  registrations          {"nvshare.com/gpu": {"endpoint": E, "at_ns": T}, ...}
                         once both resources registered (10 s at most)
  allocate GPUS UNITS    GetPreferredAllocation + Allocate of GPUS virtual
                         GPUs and UNITS gpu-memory IDs from the devices the
                         plugin lists: {"devices": [...], "envs": {...},
                         "mounts": {container_path: host_path}}
  restart                kubelet's restart: stop serving, delete every socket
                         in KUBELET_DIR, serve again; {"deleted_ns": T0,
                         "registrations": ...} once the plugin came back
  quit
A failure answers {"error": "..."}. Every wait is bounded."""
import json
import os
import queue
import sys
import threading
import time
from concurrent import futures

import grpc

GPU, MEM = "nvshare.com/gpu", "nvshare.com/gpu-memory"
pb = None  # deviceplugin_pb2, once load_messages() ran


class KubeletError(Exception):
    pass


def load_messages(pb2_dir):
    global pb
    sys.path.insert(0, pb2_dir)
    import deviceplugin_pb2
    pb = deviceplugin_pb2
    return pb


class Kubelet:
    """kubelet.sock's Registration service: records each Register."""

    def __init__(self, kubelet_dir):
        self.path = os.path.join(kubelet_dir, "kubelet.sock")
        self.registered = queue.Queue()
        handler = grpc.method_handlers_generic_handler("v1beta1.Registration", {
            "Register": grpc.unary_unary_rpc_method_handler(
                self.register, request_deserializer=pb.RegisterRequest.FromString,
                response_serializer=pb.Empty.SerializeToString)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port("unix:" + self.path)
        self.server.start()

    def register(self, request, context):
        self.registered.put((time.monotonic(), time.time_ns(), request))
        return pb.Empty()

    def expect_registrations(self, timeout=10.0):
        """Both resources' Register calls: {resource: (monotonic time,
        request)}; the realtime of each is in self.realtime_ns."""
        got = {}
        self.realtime_ns = {}
        deadline = time.monotonic() + timeout
        while len(got) < 2:
            try:
                t, ns, req = self.registered.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise KubeletError("the plugin registered only %s" % sorted(got))
            got[req.resource_name] = (t, req)
            self.realtime_ns[req.resource_name] = ns
        return got

    def stop(self):
        self.server.stop(0).wait()


class Endpoint:
    """The plugin's socket for one resource, dialed as kubelet does."""

    def __init__(self, kubelet_dir, endpoint):
        self.channel = grpc.insecure_channel("unix:" + os.path.join(kubelet_dir, endpoint))

    def call(self, method, request, response_type, raw=False):
        stub = self.channel.unary_unary(
            "/v1beta1.DevicePlugin/" + method,
            request_serializer=(lambda b: b) if raw else (lambda m: m.SerializeToString()),
            response_deserializer=response_type.FromString)
        return stub(request, timeout=5)

    def error(self, method, request, raw=False):
        """The status code of a call that must fail."""
        try:
            self.call(method, request, pb.Empty, raw)
        except grpc.RpcError as e:
            return e.code()
        raise KubeletError("%s accepted a bad request %r" % (method, request))

    def list_and_watch(self):
        """Keeps ListAndWatch open; the lists it sends arrive on the queue,
        and None when the stream ends."""
        updates = queue.Queue()
        stream = self.channel.unary_stream(
            "/v1beta1.DevicePlugin/ListAndWatch",
            request_serializer=pb.Empty.SerializeToString,
            response_deserializer=pb.ListAndWatchResponse.FromString)(pb.Empty())

        def pump():
            try:
                for response in stream:
                    updates.put(response)
            except grpc.RpcError:
                pass
            updates.put(None)
        threading.Thread(target=pump, daemon=True).start()
        return stream, updates

    def close(self):
        self.channel.close()


def next_update(updates, what, timeout=10.0):
    try:
        return updates.get(timeout=timeout)
    except queue.Empty:
        raise KubeletError("no ListAndWatch update: " + what)


class Node:
    """kubelet's device manager for the coprocess: the registered plugin's
    endpoints with ListAndWatch open, and the devices it last listed."""

    def __init__(self, kubelet_dir):
        self.dir = kubelet_dir
        self.kubelet = Kubelet(kubelet_dir)
        self.endpoints = {}

    def registrations(self):
        regs = self.kubelet.expect_registrations()
        for ep in self.endpoints.values():
            ep[0].close()
        self.endpoints = {}
        for name, (_, req) in regs.items():
            ep = Endpoint(self.dir, req.endpoint)
            _, updates = ep.list_and_watch()
            self.endpoints[name] = (ep, updates, next_update(updates, name + "'s first list"))
        return {name: {"endpoint": req.endpoint, "at_ns": self.kubelet.realtime_ns[name]}
                for name, (_, req) in regs.items()}

    def latest(self, name):
        """The newest device list of NAME's ListAndWatch."""
        ep, updates, devices = self.endpoints[name]
        while not updates.empty():
            update = updates.get()
            if update is None:
                raise KubeletError(name + "'s ListAndWatch ended")
            devices = update
        self.endpoints[name] = (ep, updates, devices)
        return ep, devices

    def allocate_one(self, name, size):
        ep, devices = self.latest(name)
        available = [d.ID for d in devices.devices if d.health == "Healthy"]
        pref = ep.call("GetPreferredAllocation", pb.PreferredAllocationRequest(
            container_requests=[pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, allocation_size=size)]),
            pb.PreferredAllocationResponse)
        ids = list(pref.container_responses[0].deviceIDs)
        if len(ids) != size:
            raise KubeletError("%s: %d preferred devices for %d" % (name, len(ids), size))
        resp = ep.call("Allocate", pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=ids)]), pb.AllocateResponse)
        return ids, resp.container_responses[0]

    def allocate(self, gpus, units):
        """Both resources for one container, as kubelet merges them."""
        answer = {"devices": [], "envs": {}, "mounts": {}}
        for name, size in ((GPU, gpus), (MEM, units)):
            ids, container = self.allocate_one(name, size)
            answer["devices"] += ids if name == GPU else ["%d x %s" % (len(ids), name)]
            answer["envs"].update(container.envs)
            answer["mounts"].update({m.container_path: m.host_path for m in container.mounts})
        return answer

    def restart(self):
        self.kubelet.stop()
        deleted_ns = time.time_ns()
        for name in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, name))
        self.kubelet = Kubelet(self.dir)
        return {"deleted_ns": deleted_ns, "registrations": self.registrations()}


def serve(kubelet_dir):
    node = Node(kubelet_dir)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        try:
            if words[0] == "registrations":
                answer = node.registrations()
            elif words[0] == "allocate":
                answer = node.allocate(int(words[1]), int(words[2]))
            elif words[0] == "restart":
                answer = node.restart()
            else:
                answer = {"error": "unknown command " + words[0]}
        except (KubeletError, grpc.RpcError, IndexError, ValueError) as e:
            answer = {"error": "%s: %s" % (words[0], e)}
        print(json.dumps(answer), flush=True)
    node.kubelet.stop()


if __name__ == "__main__":
    load_messages(sys.argv[1])
    serve(sys.argv[2])
