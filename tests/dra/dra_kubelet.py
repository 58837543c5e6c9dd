#!/usr/bin/env python3
"""dra_kubelet.py - the kubelet side of DRA for nvshare's tests: plugin
registration (kubelet calls GetInfo and NotifyRegistrationStatus on the
driver's registration socket) and the DRA node service (kubelet calls
NodePrepareResources and NodeUnprepareResources on the endpoint the driver
named), in v1 or v1beta1. python3-grpcio, with the messages compiled from
the driver's own .proto files (PB2_DIR, protoc --python_out at build time).

WIRE_CONTRACT holds the field numbers of the upstream protos
(k8s.io/kubelet pkg/apis/pluginregistration/v1 and pkg/apis/dra/v1, as
docs/dra.md cites them): check_wire_contract() holds the project's files
to them."""
import os
import sys
import time

import grpc

reg = None  # pluginregistration_pb2
dra = None  # dra_pb2

WIRE_CONTRACT = {
    "pluginregistration": {
        "InfoRequest": {},
        "PluginInfo": {"type": 1, "name": 2, "endpoint": 3, "supported_versions": 4},
        "RegistrationStatus": {"plugin_registered": 1, "error": 2},
        "RegistrationStatusResponse": {},
    },
    "dra": {
        "Claim": {"namespace": 1, "uid": 2, "name": 3},
        "NodePrepareResourcesRequest": {"claims": 1},
        "NodePrepareResourcesResponse": {"claims": 1},
        "NodePrepareResourceResponse": {"devices": 1, "error": 2},
        "Device": {"request_names": 1, "pool_name": 2, "device_name": 3,
                   "cdi_device_ids": 4, "share_id": 5},
        "NodeUnprepareResourcesRequest": {"claims": 1},
        "NodeUnprepareResourcesResponse": {"claims": 1},
        "NodeUnprepareResourceResponse": {"error": 1},
    },
}
DRA_PACKAGES = {"v1": "k8s.io.kubelet.pkg.apis.dra.v1",
                "v1beta1": "k8s.io.kubelet.pkg.apis.dra.v1beta1"}


def load_messages(pb2_dir):
    global reg, dra
    sys.path.insert(0, pb2_dir)
    import dra_pb2
    import pluginregistration_pb2
    reg, dra = pluginregistration_pb2, dra_pb2


def check_wire_contract():
    """None, or what differs from the upstream field numbers."""
    for module, messages in (("pluginregistration", reg), ("dra", dra)):
        for name, fields in WIRE_CONTRACT[module].items():
            desc = messages.DESCRIPTOR.message_types_by_name.get(name)
            if desc is None:
                return "%s.%s missing" % (module, name)
            got = {f.name: f.number for f in desc.fields}
            if got != fields:
                return "%s.%s fields %s, want %s" % (module, name, got, fields)
    # the response maps are keyed by string (the claim UID)
    entry = dra.NodePrepareResourcesResponse.DESCRIPTOR.fields_by_name["claims"].message_type
    if entry.fields_by_name["key"].type != entry.fields_by_name["key"].TYPE_STRING:
        return "NodePrepareResourcesResponse.claims is not keyed by string"
    if reg.DESCRIPTOR.package != "pluginregistration":
        return "registration package %s" % reg.DESCRIPTOR.package
    return None


def _unary(channel, path, request, response_class, timeout):
    call = channel.unary_unary(path, request_serializer=lambda m: m if isinstance(m, bytes)
                               else m.SerializeToString(),
                               response_deserializer=response_class.FromString)
    return call(request, timeout=timeout)


class Registration:
    """kubelet's plugin watcher for one registration socket."""

    def __init__(self, socket_path):
        self.channel = grpc.insecure_channel("unix:" + socket_path)

    def get_info(self, timeout=5.0):
        return _unary(self.channel, "/pluginregistration.Registration/GetInfo",
                      reg.InfoRequest(), reg.PluginInfo, timeout)

    def notify(self, registered, error="", timeout=5.0):
        return _unary(self.channel, "/pluginregistration.Registration/NotifyRegistrationStatus",
                      reg.RegistrationStatus(plugin_registered=registered, error=error),
                      reg.RegistrationStatusResponse, timeout)

    def close(self):
        self.channel.close()


class DRAPlugin:
    """kubelet's connection to a registered driver's endpoint."""

    def __init__(self, endpoint, version="v1"):
        self.channel = grpc.insecure_channel("unix:" + endpoint)
        self.service = "/%s.DRAPlugin/" % DRA_PACKAGES[version]

    def prepare(self, claims, timeout=45.0):
        """claims: [(namespace, uid, name)] or raw bytes; the response."""
        req = claims if isinstance(claims, bytes) else dra.NodePrepareResourcesRequest(
            claims=[dra.Claim(namespace=n, uid=u, name=c) for n, u, c in claims])
        return _unary(self.channel, self.service + "NodePrepareResources", req,
                      dra.NodePrepareResourcesResponse, timeout)

    def unprepare(self, claims, timeout=45.0):
        req = claims if isinstance(claims, bytes) else dra.NodeUnprepareResourcesRequest(
            claims=[dra.Claim(namespace=n, uid=u, name=c) for n, u, c in claims])
        return _unary(self.channel, self.service + "NodeUnprepareResources", req,
                      dra.NodeUnprepareResourcesResponse, timeout)

    def close(self):
        self.channel.close()


def wait_for_socket(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
