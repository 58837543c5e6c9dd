#!/usr/bin/env python3
"""fake_apiserver.py - a loopback Kubernetes API server for nvshare's tests.

Speaks the part of the API that nvshare-pod-watcher and kubectl use, the
way the real server does: discovery (/api, /apis, /api/v1), pods (create with
a server-made uid, get, list with fieldSelector spec.nodeName, watch as a chunked stream of JSON
lines with BOOKMARK events, merge and strategic-merge PATCH, DELETE) and
POST of events. Watches from a compacted resourceVersion get 410 Gone as
the HTTP status; /admin/gone-event sends it as an ERROR event instead.
The watcher's requests need "Authorization: Bearer T", T being the token
file's current content. kubectl's go without (client-go sends no bearer
token to a plain-http server), so they are told apart by User-Agent.

Test controls, loopback only (POST unless said):
  /admin/drop        close every open watch abruptly (no final chunk)
  /admin/compact     compact history and drop the watches: those that
                     resume from before now get 410
  /admin/gone-event  send an ERROR 410 event on one watch (open or next)
  /admin/fault?node=N&mode=M
                     from now on, every list or watch of node N's pods
                     fails as M says (FAULTS below)
  GET /admin/events  events posted so far (JSON list)
  GET /admin/auth    Authorization headers of the watch requests, in order
  GET /admin/watches number of watch requests served
  GET /admin/counts  requests per node: {"N": {"lists": pages listed,
                     "watches": watches begun}}
  /admin/claim-fault?mode=M&count=N[&name=C][&ms=T]
                     the next N reads of a ResourceClaim (of claim C only,
                     if named) answer as M says: "error" (HTTP 500) or
                     "slow" (after T ms, default 2000); count 0 ends it
  /admin/status-fault?mode=M&count=N
                     the next N writes of a claim's status answer as M
                     says: "error" (HTTP 500) or "absent" (404 without
                     details: no status subresource); count 0 ends it
  GET /admin/status-writes
                     [monotonic seconds, HTTP status] of every write of a
                     claim's status so far

Pods of a namespace are listed with labelSelector (k=v,...),
fieldSelector spec.nodeName=N, limit and continue. The pod proxy
(/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH, for kubectl-nvshare)
forwards to the pod's status.podIP:PORT, answering 503 with the reason as
the real server does when that fails; a pod annotated
test.nvshare.com/answer is a simulated node whose answer is made here
(ANSWERS). A bearer token "no-rights" is refused (403) the namespaced
list and the proxy, as RBAC would.
  GET /admin/proxy   {"requests": n, "max_in_flight": n} of the proxy

DRA (resource.k8s.io/v1, for nvshare-dra-driver): ResourceClaims (create
with a server-made uid, status included; get; delete; server-side apply of
status.devices, entries keyed by driver, pool, device and shareID), ResourceSlices
(create with generateName, list with fieldSelector spec.nodeName and
spec.driver, get, delete) and GET of a Node, made up with a stable uid.

  fake_apiserver.py PORT_FILE TOKEN_FILE PODS_JSON
writes the port it listens on to PORT_FILE once it accepts connections.
It stops when its parent (the test) is gone."""
import json
import os
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

BOOKMARK_EVERY_S = 1.0
FAULT_BYTES = 1 << 30   # a huge list body, a watch line that never ends
SERVER_TIMEOUT_S = 35   # server-timeout's, above the watcher's 30 s
FAULTS = {
    "gone-status": "every watch answers 410 Gone",
    "gone-event": "every watch sends an ERROR 410 event and ends",
    "empty-watch": "every watch is a 200 that ends at once, empty",
    "endless-continue": "every list page is empty and names a next one",
    "huge-list": "every list answers a 1 GiB PodList",
    "endless-line": "every watch sends 1 GiB without a newline",
    "server-timeout": "no fault: every watch ends well after %d s at most"
                      % SERVER_TIMEOUT_S,
}

# Simulated nodes' answers (test.nvshare.com/answer), for kubectl-nvshare.
ANSWERS = {
    "ok": "a valid status: one GPU, a running pod and a waiting one",
    "slow": "the same after 3 s",
    "huge": "64 MiB of JSON",
    "bad": "not JSON",
    "evil": "JSON with wrong types, control characters, a client on no GPU",
    "refused": "503, as when the pod does not listen",
}
MIB_OF_SPACES = b" " * (1 << 20)
proxy_stats = {"requests": 0, "in_flight": 0, "max_in_flight": 0}

lock = threading.Condition()
pods = {}            # (namespace, name) -> pod
history = []         # (rv, type, pod) in order
rv = 100
compacted = 0        # watches from an rv below this get 410
posted_events = []
auth_seen = []
watches = 0
watch_sockets = set()
gone_pending = False  # /admin/gone-event: the next watch to look sends it
faults = {}          # node -> mode (FAULTS)
counts = {}          # node -> {"lists": n, "watches": n}
token_file = None
claims = {}          # (namespace, name) -> ResourceClaim
slices = {}          # name -> ResourceSlice
claim_fault = {"mode": None, "count": 0, "name": None, "ms": 2000}
claim_reads = 0
status_fault = {"mode": None, "count": 0}
status_writes = []   # [monotonic seconds, HTTP status]
DRA = "/apis/resource.k8s.io/v1"


def next_rv():
    global rv
    rv += 1
    return rv


def record(kind, pod):
    """A change, under lock: stamped, kept for watches, announced."""
    pod["metadata"]["resourceVersion"] = str(next_rv())
    history.append((rv, kind, json.loads(json.dumps(pod))))
    lock.notify_all()


def merge(target, patch):
    """RFC 7386 merge patch; for metadata.annotations a strategic merge is
    the same."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            merge(target[k], v)
        else:
            target[k] = v


def count(node, what):
    """A request of node's pods, under lock."""
    per = counts.setdefault(node or "", {"lists": 0, "watches": 0})
    per[what] += 1


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason,
            "code": code}


DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [
                 {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": g, "versions": [{"groupVersion": g + "/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": g + "/v1", "version": "v1"}}
        for g in ("apps", "rbac.authorization.k8s.io", "resource.k8s.io")]},
    # What kubectl maps deploy/dra's objects with (k8s_dra_driver).
    "/apis/apps/v1": {"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
        {"name": "daemonsets", "singularName": "daemonset", "namespaced": True,
         "kind": "DaemonSet", "verbs": ["create", "get", "list", "patch"]}]},
    "/apis/rbac.authorization.k8s.io/v1": {
        "kind": "APIResourceList", "groupVersion": "rbac.authorization.k8s.io/v1", "resources": [
            {"name": n, "singularName": n[:-1], "namespaced": False, "kind": k,
             "verbs": ["create", "get", "list", "patch"]}
            for n, k in (("clusterroles", "ClusterRole"),
                         ("clusterrolebindings", "ClusterRoleBinding"))]},
    "/apis/resource.k8s.io/v1": {
        "kind": "APIResourceList", "groupVersion": "resource.k8s.io/v1", "resources": [
            {"name": n, "singularName": n[:-1], "namespaced": ns, "kind": k,
             "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
            for n, k, ns in (("deviceclasses", "DeviceClass", False),
                             ("resourceclaims", "ResourceClaim", True),
                             ("resourceclaimtemplates", "ResourceClaimTemplate", True),
                             ("resourceslices", "ResourceSlice", False))]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True,
         "kind": "Pod", "shortNames": ["po"],
         "verbs": ["create", "delete", "get", "list", "patch", "update",
                   "watch"]},
        {"name": "events", "singularName": "event", "namespaced": True,
         "kind": "Event", "shortNames": ["ev"],
         "verbs": ["create", "get", "list"]},
        {"name": "serviceaccounts", "singularName": "serviceaccount", "namespaced": True,
         "kind": "ServiceAccount", "verbs": ["create", "get", "list"]}]},
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, body, ctype="application/json"):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def authorized(self):
        with open(token_file) as f:
            current = f.read().strip()
        given = self.headers.get("Authorization", "")
        if given in ("Bearer " + current, "Bearer no-rights") or \
                self.headers.get("User-Agent", "").startswith("kubectl/"):
            return True
        self.reply(401, status(401, "Unauthorized", "Unauthorized"))
        return False

    def pod_path(self, path):
        """(namespace, name) of /api/v1/namespaces/NS/pods/NAME, else None."""
        p = path.split("/")
        if len(p) == 7 and p[1:4] == ["api", "v1", "namespaces"] and p[5] == "pods":
            return p[4], p[6]
        return None

    def do_GET(self):
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path.startswith("/admin/"):
            with lock:
                what = {"/admin/events": posted_events, "/admin/auth": auth_seen,
                        "/admin/watches": watches, "/admin/counts": counts,
                        "/admin/claim-reads": claim_reads,
                        "/admin/status-writes": status_writes,
                        "/admin/proxy": proxy_stats}.get(url.path)
            return self.reply(200 if what is not None else 404, what)
        if url.path in DISCOVERY:
            return self.reply(200, DISCOVERY[url.path])
        if not self.authorized():
            return
        if url.path.startswith(DRA) or url.path.startswith("/api/v1/nodes/"):
            return self.dra_get(url.path, q)
        p = url.path.split("/")
        if len(p) == 6 and p[1:4] == ["api", "v1", "namespaces"] and p[5] == "pods":
            return self.list_namespace(p[4], q)
        if len(p) >= 9 and p[1:4] == ["api", "v1", "namespaces"] and p[5] == "pods" \
                and p[7] == "proxy":
            with lock:
                proxy_stats["requests"] += 1
                proxy_stats["in_flight"] += 1
                proxy_stats["max_in_flight"] = max(proxy_stats["max_in_flight"],
                                                   proxy_stats["in_flight"])
            try:
                return self.proxy(p[4], p[6], "/" + "/".join(p[8:]))
            finally:
                with lock:
                    proxy_stats["in_flight"] -= 1
        key = self.pod_path(url.path)
        if key:
            with lock:
                pod = pods.get(key)
            if pod is None:
                return self.reply(404, status(404, "NotFound", 'pods "%s" not found' % key[1]))
            return self.reply(200, pod)
        if url.path == "/api/v1/pods":
            node = None
            sel = q.get("fieldSelector", "")
            if sel.startswith("spec.nodeName="):
                node = sel.split("=", 1)[1]
            if q.get("watch") in ("1", "true"):
                return self.watch(node, q)
            with lock:
                count(node, "lists")
                fault = faults.get(node)
                items = [p for p in pods.values()
                         if node is None or p["spec"].get("nodeName") == node]
                body = {"kind": "PodList", "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(rv)}, "items": items}
            if fault == "endless-continue":
                page = int(q.get("continue", "page-0").split("-")[-1]) + 1
                body["items"] = []
                body["metadata"]["continue"] = "page-%d" % page
            elif fault == "huge-list":
                return self.huge_list(body)
            return self.reply(200, body)
        self.reply(404, status(404, "NotFound", "the server could not find the requested resource"))

    def rbac_refused(self):
        if self.headers.get("Authorization", "") != "Bearer no-rights":
            return False
        self.reply(403, status(403, "Forbidden", "forbidden: no rights"))
        return True

    def list_namespace(self, namespace, q):
        """A page of the namespace's pods matching the selectors."""
        if self.rbac_refused():
            return
        labels = dict(kv.split("=", 1) for kv in q.get("labelSelector", "").split(",")
                      if "=" in kv)
        node = q.get("fieldSelector", "").partition("spec.nodeName=")[2] or None
        with lock:
            items = [p for (ns, _), p in sorted(pods.items()) if ns == namespace and
                     (node is None or p["spec"].get("nodeName") == node) and
                     all(p["metadata"].get("labels", {}).get(k) == v
                         for k, v in labels.items())]
        start = int(q.get("continue") or 0)
        limit = int(q.get("limit") or 0) or len(items)
        meta = {"resourceVersion": str(rv)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        self.reply(200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta,
                         "items": items[start:start + limit]})

    def proxy(self, namespace, name_port, path):
        """The pod proxy: to the pod's IP and port, or a simulated answer."""
        if self.rbac_refused():
            return
        name, _, port = name_port.partition(":")
        with lock:
            pod = pods.get((namespace, name))
        if pod is None:
            return self.reply(404, status(404, "NotFound", 'pods "%s" not found' % name))
        answer = pod["metadata"].get("annotations", {}).get("test.nvshare.com/answer")
        if answer:
            return self.simulated(answer, pod["spec"].get("nodeName", ""))
        import http.client
        conn = http.client.HTTPConnection(pod.get("status", {}).get("podIP", "127.0.0.1"),
                                          int(port or 80), timeout=10)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            data = r.read()
        except OSError as e:
            return self.reply(503, status(503, "ServiceUnavailable",
                                          "error trying to reach service: %s" % e))
        finally:
            conn.close()
        self.send_response(r.status)
        for h in ("Content-Type", "X-Nvshare-Version"):
            if r.getheader(h):
                self.send_header(h, r.getheader(h))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def simulated(self, answer, node):
        if answer == "slow":
            time.sleep(3)
        if answer in ("ok", "slow"):
            return self.reply(200, sim_status(node))
        if answer == "refused":
            return self.reply(503, status(503, "ServiceUnavailable",
                                          "error trying to reach service: connection refused"))
        if answer == "huge":
            self.send_response(200)
            self.send_header("Content-Length", str(64 << 20))
            self.end_headers()
            try:
                for _ in range(64):  # until the reader gives up
                    self.wfile.write(MIB_OF_SPACES)
            except OSError:
                pass
            return
        if answer == "bad":
            data = b"\x1b[2J<html>not json"
        else:  # evil
            doc = sim_status(node)
            doc["clients"][0]["pod"] = "\x1b]0;owned\x07" + "x" * 300
            doc["clients"][1]["gpu_index"] = 7
            doc["gpus"][0]["memory_total_bytes"] = "lots"
            data = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def huge_list(self, body):
        """A PodList of FAULT_BYTES, sent as fast as it is read."""
        head = json.dumps(body)[:-1].encode() + b', "padding": "'
        tail = b'"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(FAULT_BYTES))
        self.end_headers()
        try:
            self.wfile.write(head)
            self.stream_filler(FAULT_BYTES - len(head) - len(tail))
            self.wfile.write(tail)
        except OSError:
            self.close_connection = True

    def stream_filler(self, n, chunked=False):
        block = b"x" * (1 << 20)
        while n > 0:
            part = block[:n]
            if chunked:
                self.chunk(part)
            else:
                self.wfile.write(part)
            n -= len(part)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, node, q):
        global watches, gone_pending
        since = int(q.get("resourceVersion") or 0)
        timeout = float(q.get("timeoutSeconds") or 1800)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        with lock:
            watches += 1
            count(node, "watches")
            fault = faults.get(node)
            auth_seen.append(self.headers.get("Authorization", ""))
            if since < compacted or fault == "gone-status":
                return self.reply(410, status(410, "Expired",
                                              "too old resource version: %d (%d)" % (since, compacted)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        if fault in ("gone-event", "empty-watch", "endless-line"):
            return self.faulty_watch(fault)
        if fault == "server-timeout":
            timeout = min(timeout, SERVER_TIMEOUT_S)
        sock = self.connection
        with lock:
            watch_sockets.add(sock)
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + BOOKMARK_EVERY_S
        try:
            while True:
                with lock:
                    lock.wait(0.1)
                    if sock not in watch_sockets:
                        # Dropped: no final chunk, as a broken connection.
                        self.close_connection = True
                        sock.shutdown(socket.SHUT_RDWR)
                        return
                    gone, gone_pending = gone_pending, False
                    out = [(r, t, p) for r, t, p in history if r > since
                           and (node is None or p["spec"].get("nodeName") == node)]
                    last = rv
                now = time.monotonic()
                if gone:
                    self.chunk(json.dumps({"type": "ERROR", "object": status(
                        410, "Expired", "too old resource version")}).encode() + b"\n")
                    break
                for r, t, p in out:
                    self.chunk(json.dumps({"type": t, "object": p}).encode() + b"\n")
                    since = r
                if bookmarks and now >= next_bookmark:
                    since = max(since, last)
                    self.chunk(json.dumps({"type": "BOOKMARK", "object": {
                        "kind": "Pod", "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(since)}}}).encode() + b"\n")
                    next_bookmark = now + BOOKMARK_EVERY_S
                if now >= deadline:
                    break
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            with lock:
                watch_sockets.discard(sock)

    def faulty_watch(self, fault):
        try:
            if fault == "gone-event":
                self.chunk(json.dumps({"type": "ERROR", "object": status(
                    410, "Expired", "too old resource version")}).encode() + b"\n")
            elif fault == "endless-line":
                self.stream_filler(FAULT_BYTES, chunked=True)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def do_PATCH(self):
        patch = self.body()
        if not self.authorized():
            return
        path = urlparse(self.path).path
        ctype = self.headers.get("Content-Type", "")
        if path.startswith(DRA):
            code, body = self.dra_apply_status(path, ctype, patch)
            with lock:
                status_writes.append([time.monotonic(), code])
            return self.reply(code, body)
        key = self.pod_path(path)
        if not key or "merge-patch" not in ctype:
            return self.reply(415, status(415, "UnsupportedMediaType", ctype))
        with lock:
            pod = pods.get(key)
            if pod is None:
                return self.reply(404, status(404, "NotFound", 'pods "%s" not found' % key[1]))
            merge(pod, patch)
            record("MODIFIED", pod)
            body = json.loads(json.dumps(pod))
        self.reply(200, body)

    def do_DELETE(self):
        self.body()
        if not self.authorized():
            return
        path = urlparse(self.path).path
        if path.startswith(DRA):
            return self.dra_delete(path)
        key = self.pod_path(path)
        with lock:
            pod = pods.pop(key, None) if key else None
            if pod is None:
                return self.reply(404, status(404, "NotFound", "not found"))
            record("DELETED", pod)
            body = json.loads(json.dumps(pod))
        self.reply(200, body)

    def do_POST(self):
        global compacted, gone_pending
        url = urlparse(self.path)
        path = url.path
        body = self.body()
        if path.startswith("/admin/"):
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            if path == "/admin/fault" and q.get("mode") not in FAULTS:
                return self.reply(400, {"modes": FAULTS})
            with lock:
                if path == "/admin/drop":
                    watch_sockets.clear()
                elif path == "/admin/compact":
                    # and drop: a bookmark sent in between would carry the
                    # new resourceVersion, and no 410 would come
                    compacted = next_rv()
                    watch_sockets.clear()
                elif path == "/admin/gone-event":
                    gone_pending = True
                elif path == "/admin/fault":
                    faults[q.get("node", "")] = q["mode"]
                elif path == "/admin/status-fault":
                    status_fault.update(mode=q.get("mode"), count=int(q.get("count", 1)))
                elif path == "/admin/claim-fault":
                    claim_fault.update(mode=q.get("mode"), count=int(q.get("count", 1)),
                                       name=q.get("name"), ms=int(q.get("ms", 2000)))
                lock.notify_all()
            return self.reply(200, {})
        if not self.authorized():
            return
        if path.startswith(DRA):
            return self.dra_create(path, body)
        p = path.split("/")
        if len(p) == 6 and p[1:4] == ["api", "v1", "namespaces"] and p[5] == "pods":
            return self.create_pod(p[4], body)
        if len(p) == 6 and p[1:4] == ["api", "v1", "namespaces"] and p[5] == "events":
            event = body
            with lock:
                posted_events.append(event)
            event.setdefault("metadata", {})["resourceVersion"] = str(rv)
            return self.reply(201, event)
        self.reply(404, status(404, "NotFound", path))

    def create_pod(self, namespace, pod):
        """As the real server: the uid is the server's, whatever was sent."""
        m = pod.setdefault("metadata", {})
        m["namespace"] = namespace
        m["uid"] = str(uuid.uuid4())
        m["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with lock:
            key = (namespace, m.get("name", ""))
            if key in pods:
                return self.reply(409, status(409, "AlreadyExists",
                                              'pods "%s" already exists' % key[1]))
            pods[key] = pod
            record("ADDED", pod)
            body = json.loads(json.dumps(pod))
        self.reply(201, body)

    # ---- DRA ------------------------------------------------------------
    def dra_get(self, path, q):
        global claim_reads
        p = path.split("/")
        if p[1:4] == ["api", "v1", "nodes"] and len(p) == 5:
            return self.reply(200, {"kind": "Node", "apiVersion": "v1", "metadata": {
                "name": p[4], "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, p[4]))}})
        if len(p) == 8 and p[6] == "resourceclaims":
            with lock:
                claim_reads += 1
                fault = claim_fault["mode"] if claim_fault["count"] > 0 and \
                    claim_fault["name"] in (None, p[7]) else None
                if fault:
                    claim_fault["count"] -= 1
                slow_s = claim_fault["ms"] / 1000.0
                claim = claims.get((p[5], p[7]))
            if fault == "error":
                return self.reply(500, status(500, "InternalError", "injected"))
            if fault == "slow":
                time.sleep(slow_s)
            if claim is None:
                return self.reply(404, status(404, "NotFound",
                                              'resourceclaims "%s" not found' % p[7]))
            return self.reply(200, claim)
        if path == DRA + "/resourceslices":
            want = dict(kv.split("=", 1) for kv in q.get("fieldSelector", "").split(",") if kv)
            with lock:
                items = [x for x in slices.values()
                         if all(x["spec"].get(k.split(".")[1]) == v for k, v in want.items())]
                body = {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                        "metadata": {"resourceVersion": str(rv)}, "items": items}
            return self.reply(200, body)
        if len(p) == 6 and p[4] == "resourceslices":
            with lock:
                x = slices.get(p[5])
            return self.reply(200, x) if x else self.reply(404, status(404, "NotFound", p[5]))
        self.reply(404, status(404, "NotFound", path))

    def dra_create(self, path, obj):
        p = path.split("/")
        m = obj.setdefault("metadata", {})
        m["uid"] = str(uuid.uuid4())
        with lock:
            m["resourceVersion"] = str(next_rv())
            if len(p) == 7 and p[6] == "resourceclaims":
                m["namespace"] = p[5]
                claims[(p[5], m.get("name", ""))] = obj
            elif path == DRA + "/resourceslices":
                if not m.get("name"):
                    m["name"] = m.get("generateName", "") + uuid.uuid4().hex[:5]
                slices[m["name"]] = obj
            else:
                return self.reply(404, status(404, "NotFound", path))
        self.reply(201, obj)

    def dra_apply_status(self, path, ctype, patch):
        """A server-side apply of a claim's status.devices: (code, body)."""
        p = path.split("/")
        if len(p) != 9 or p[6] != "resourceclaims" or p[8] != "status" or \
                "fieldManager=" not in self.path:
            return 404, status(404, "NotFound", path)
        if ctype != "application/apply-patch+yaml":
            return 415, status(415, "UnsupportedMediaType", ctype)
        with lock:
            fault = status_fault["mode"] if status_fault["count"] > 0 else None
            if fault:
                status_fault["count"] -= 1
            if fault == "error":
                return 500, status(500, "InternalError", "injected")
            if fault == "absent":
                return 404, status(404, "NotFound", "the server could not find the "
                                   "requested resource")
            claim = claims.get((p[5], p[7]))
            if claim is None:
                body = status(404, "NotFound", 'resourceclaims "%s" not found' % p[7])
                body["details"] = {"name": p[7], "group": "resource.k8s.io",
                                   "kind": "resourceclaims"}
                return 404, body
            if patch.get("metadata", {}).get("uid") not in (None, claim["metadata"]["uid"]):
                return 409, status(409, "Conflict", "Precondition failed: UID")
            have = claim.setdefault("status", {}).setdefault("devices", [])
            keys = ("driver", "pool", "device", "shareID")
            for dev in patch.get("status", {}).get("devices", []):
                have[:] = [d for d in have if any(d.get(k) != dev.get(k) for k in keys)]
                have.append(dev)
            claim["metadata"]["resourceVersion"] = str(next_rv())
            return 200, json.loads(json.dumps(claim))

    def dra_delete(self, path):
        p = path.split("/")
        with lock:
            if len(p) == 8 and p[6] == "resourceclaims":
                x = claims.pop((p[5], p[7]), None)
            elif len(p) == 6 and p[4] == "resourceslices":
                x = slices.pop(p[5], None)
            else:
                x = None
        self.reply(200, x) if x else self.reply(404, status(404, "NotFound", path))


def sim_status(node):
    """A simulated node's /status.json (render_json.c's fields)."""
    def client(i, pod, state, reason, limit, prio, resident):
        return {"client_id": i, "pid": 1000 + i, "namespace": "sim", "pod": pod,
                "container": "main", "uid": 1000, "pod_source": "declared",
                "pod_uid": "", "container_id": "", "gpu_index": 0,
                "gpu_uuid": "GPU-" + node, "gang": None, "state": state,
                "held_ns": 0, "wait_ns": 0, "grants": 1, "last_drain_ns": 0,
                "last_preempt_ns": 0, "core_limit": limit,
                "core_limit_source": "runtime", "budget_ns": 0, "used_ns": 0,
                "throttled": False, "mem_quota_bytes": 1 << 30,
                "mem_quota_source": "runtime", "priority": prio,
                "priority_class": 2, "priority_source": "none",
                "min_share_percent": 0, "mem_allocated_bytes": resident,
                "pod_mem_held_bytes": resident, "pod_mem_peak_bytes": resident,
                "pod_mem_refused": 0, "footprint_bytes": resident,
                "evictable_bytes": 0, "non_evictable_bytes": resident,
                "oversubscribed": False, "swapped_out": False, "load_percent": 50,
                "wait_reason": reason, "wait_why": None, "idle_swap": True,
                "idle_swap_source": "none", "resident_bytes": resident,
                "parked_bytes": 0, "idle_ns": 0, "swap_outs": 0, "swap_ins": 0,
                "swap_in_wait_ns": 0}
    return {"schema_version": 2,
            "node": {"tq_ns": 0, "window_ns": 1000000000, "anti_thrash": True,
                     "uptime_ns": 1000, "gpu_count": 1, "client_count": 2},
            "settings": {},
            "gpus": [{"index": 0, "uuid": "GPU-" + node, "name": "sim",
                      "memory_total_bytes": 16 << 30, "mode": "auto",
                      "reserve_bytes": 1 << 30, "running_footprint_bytes": 1 << 30,
                      "resident_bytes": 1 << 30, "tq_ns": 100000000}],
            "clients": [client(1, node + "-a", "holding", None, 40, "normal", 1 << 30),
                        client(2, node + "-b", "waiting", "lock", 100, "normal", 0)],
            "pods": [], "unhooked": []}


def main():
    global token_file
    port_file, token_file, pods_file = sys.argv[1:4]
    with open(pods_file) as f, lock:
        for pod in json.load(f):
            m = pod["metadata"]
            pods[(m["namespace"], m["name"])] = pod
            record("ADDED", pod)
    # socketserver's backlog of 5 drops connections a real server takes:
    # a dropped SYN is sent again after 1 s (20 claims read
    # at once, kubectl-nvshare's 32 requests)
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    parent = os.getppid()
    while os.getppid() == parent:  # self-stopping when the test is gone
        time.sleep(0.5)


if __name__ == "__main__":
    main()
