#!/usr/bin/env python3
"""k8s_manifests: deploy/ holds Kubernetes objects that fit together.

    check_deploy.py REPO KUBECTL SCHEDULER NVSHARECTL

- every YAML file of deploy/ parses, the chart's templates once their
  template actions are set aside;
- kubectl (the real client) reads deploy/manifests/ as Kubernetes objects:
  `kubectl apply --dry-run=client` against a loopback server that answers
  discovery (no OpenAPI schema can be had offline, so kubectl does not
  validate fields: the checks below do, with the API's field names for the
  DaemonSet's pod, containers, probes, mounts and host paths);
- the manifests fit together: the DaemonSet's selector, volumes, service
  account and RBAC, and the host paths that the environment hands to pods;
- every variable the containers set is one its binary documents: the
  scheduler's in its --help, the pod watcher's and device plugin's in
  docs/kubernetes.md; the real scheduler starts with the manifests'
  settings without a complaint, and its liveness probe passes against it;
- the chart and the manifests agree: CI cannot run Helm (no Debian
  package), so the manifests are the chart rendered by hand with the default
  values, and this compares each template with its manifest, field by field,
  reading `.Values` references in values.yaml. Names, labels and namespaces
  that Helm computes are not compared; the image is, and every `.Values`
  reference must exist (Helm renders a misspelt one as nothing).
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

REPO, KUBECTL, SCHEDULER, NVSHARECTL = sys.argv[1:5]
DEPLOY = os.path.join(REPO, "deploy")
MANIFESTS = os.path.join(DEPLOY, "manifests")
CHART = os.path.join(DEPLOY, "helm", "nvshare")
failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures += 1
    return ok


def load_manifests():
    docs = {}
    for name in sorted(os.listdir(MANIFESTS)):
        with open(os.path.join(MANIFESTS, name)) as f:
            docs[name] = [d for d in yaml.safe_load_all(f) if d is not None]
    return docs


# --- YAML syntax --------------------------------------------------------

def check_yaml_syntax():
    for root, _, files in os.walk(DEPLOY):
        if os.path.abspath(root) == os.path.abspath(os.path.join(CHART, "templates")):
            continue
        for name in files:
            if not name.endswith((".yaml", ".yml")):
                continue
            path = os.path.join(root, name)
            try:
                with open(path) as f:
                    list(yaml.safe_load_all(f))
                check(True, "YAML parses: " + os.path.relpath(path, REPO))
            except yaml.YAMLError as e:
                check(False, "YAML parses: %s: %s" % (os.path.relpath(path, REPO), e))


# --- kubectl against a loopback discovery server ---------------------------

def resource(name, kind, namespaced):
    return {"name": name, "singularName": kind.lower(), "namespaced": namespaced,
            "kind": kind, "verbs": ["create", "get", "list", "patch"]}


def group(name):
    gv = {"groupVersion": name + "/v1", "version": "v1"}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


DISCOVERY = {
    "/version": {"major": "1", "minor": "30", "gitVersion": "v1.30.0"},
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                             "serverAddress": "127.0.0.1"}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        resource("namespaces", "Namespace", False),
        resource("serviceaccounts", "ServiceAccount", True),
        resource("pods", "Pod", True),
        resource("events", "Event", True)]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1",
              "groups": [group("apps"), group("rbac.authorization.k8s.io")]},
    "/apis/apps/v1": {"kind": "APIResourceList", "groupVersion": "apps/v1",
                      "resources": [resource("daemonsets", "DaemonSet", True)]},
    "/apis/rbac.authorization.k8s.io/v1": {
        "kind": "APIResourceList", "groupVersion": "rbac.authorization.k8s.io/v1",
        "resources": [resource("clusterroles", "ClusterRole", False),
                      resource("clusterrolebindings", "ClusterRoleBinding", False),
                      resource("roles", "Role", True),
                      resource("rolebindings", "RoleBinding", True)]},
}


class Discovery(BaseHTTPRequestHandler):
    """Answers discovery; every object is absent (404), so apply creates."""

    def do_GET(self):
        body = DISCOVERY.get(self.path.split("?")[0])
        code = 200 if body else 404
        if not body:
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404, "message": "not found"}
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def check_kubectl(docs):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Discovery)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # An empty kubeconfig and a cache of its own: nothing of the user's
    # clusters is read, nothing is left in ~/.kube.
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = os.path.join(tmp, "kubeconfig")
        open(kubeconfig, "w").close()
        cmd = [KUBECTL, "--kubeconfig", kubeconfig, "--cache-dir", os.path.join(tmp, "cache"),
               "--server", "http://127.0.0.1:%d" % server.server_address[1],
               "--request-timeout", "10s", "apply", "--dry-run=client",
               "--validate=false", "-o", "name", "-f", MANIFESTS]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    server.shutdown()
    want = set()
    for objs in docs.values():
        for d in objs:
            group = d["apiVersion"].rpartition("/")[0]
            want.add("%s%s/%s" % (d["kind"].lower(), "." + group if group else "",
                                  d["metadata"]["name"]))
    got = set(run.stdout.split())
    check(run.returncode == 0 and got == want,
          "kubectl apply --dry-run=client reads the manifests as %s (rc %d, got %s%s)"
          % (sorted(want), run.returncode, sorted(got), run.stderr.strip()))


# --- the objects fit together ------------------------------------------

def objects(docs):
    return {(d["kind"], d["metadata"]["name"]): d for objs in docs.values() for d in objs}


def container(pod, name):
    return next(c for c in pod["containers"] if c["name"] == name)


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def check_objects(docs):
    objs = objects(docs)
    for key, d in objs.items():
        check(d.get("apiVersion") and d.get("kind") and d["metadata"].get("name"),
              "%s %s has apiVersion, kind and metadata.name" % key)
    daemonsets = {d["metadata"]["name"]: d for d in objs.values() if d["kind"] == "DaemonSet"}
    if not check(sorted(daemonsets) == ["nvshare", "nvshare-device-plugin"],
                 "DaemonSets nvshare and nvshare-device-plugin (%s)" % sorted(daemonsets)):
        return None
    for name, ds in daemonsets.items():
        labels = ds["spec"]["template"]["metadata"]["labels"]
        for other in daemonsets.values():
            selector = other["spec"]["selector"]["matchLabels"]
            matches = all(labels.get(k) == v for k, v in selector.items())
            check(matches == (other is ds), "%s's pods match the selector of %s only"
                  % (name, other["metadata"]["name"]))
    ds, plugin_ds = daemonsets["nvshare"], daemonsets["nvshare-device-plugin"]
    ns = ds["metadata"]["namespace"]
    check(plugin_ds["metadata"]["namespace"] == ns, "both DaemonSets in %s" % ns)
    pod = ds["spec"]["template"]["spec"]
    plugin_pod = plugin_ds["spec"]["template"]["spec"]
    check(pod.get("hostPID") is True, "hostPID: the scheduler sees clients' host pids")
    names = [c["name"] for c in pod["containers"]]
    inits = [c["name"] for c in pod.get("initContainers", [])]
    plugin_names = [c["name"] for c in plugin_pod["containers"]]
    if not (check(names == ["scheduler", "pod-watcher"],
                  "containers scheduler, pod-watcher (%s)" % names) and
            check(plugin_names == ["device-plugin"],
                  "the device plugin's DaemonSet runs it alone (%s)" % plugin_names) and
            check(inits == ["install-lib"], "init container install-lib (%s)" % inits)):
        return None
    # off the DRA driver's nodes (deploy/dra)
    terms = plugin_pod.get("affinity", {}).get("nodeAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    check(terms == [{"matchExpressions": [{"key": "nvshare.com/sharing", "operator": "NotIn",
                                           "values": ["dra"]}]}],
          "the device plugin keeps off nodes labelled nvshare.com/sharing=dra (%s)" % terms)

    check(("Namespace", ns) in objs, "the namespace %s is created" % ns)
    sa = pod.get("serviceAccountName")
    check(("ServiceAccount", sa) in objs and
          objs[("ServiceAccount", sa)]["metadata"].get("namespace") == ns,
          "service account %s/%s exists" % (ns, sa))
    roles = [d for d in objs.values() if d["kind"] == "ClusterRole"]
    bindings = [d for d in objs.values() if d["kind"] == "ClusterRoleBinding"]
    if check(len(roles) == 1 and len(bindings) == 1, "one ClusterRole, one binding"):
        rules = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"])))
                       for r in roles[0]["rules"])
        check(rules == [(("",), ("events",), ("create",)),
                        (("",), ("pods",), ("get", "list", "watch"))],
              "RBAC: pods get/list/watch and events create, nothing more (%s)" % rules)
        b = bindings[0]
        check(b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                               "kind": "ClusterRole", "name": roles[0]["metadata"]["name"]},
              "the binding names the ClusterRole")
        check(b["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
              "the binding names the DaemonSet's service account")

    # kubectl nvshare's Role: the scheduler pods' list and proxy, in their
    # namespace only, bound to the role.
    roles = [d for d in objs.values() if d["kind"] == "Role"]
    bindings = [d for d in objs.values() if d["kind"] == "RoleBinding"]
    if check(len(roles) == 1 and len(bindings) == 1, "one Role, one RoleBinding"):
        rules = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"])))
                       for r in roles[0]["rules"])
        check(rules == [(("",), ("pods",), ("list",)), (("",), ("pods/proxy",), ("get",))],
              "viewer RBAC: pods list and pods/proxy get, nothing more (%s)" % rules)
        check(roles[0]["metadata"].get("namespace") == ns and
              bindings[0]["metadata"].get("namespace") == ns,
              "the viewer Role and its binding are in %s" % ns)
        check(bindings[0]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                         "kind": "Role",
                                         "name": roles[0]["metadata"]["name"]},
              "the viewer binding names the viewer Role")
    sched = pod["containers"][0]
    port = [p["containerPort"] for p in sched.get("ports", []) if p.get("name") == "metrics"]
    addr = [e.get("value") for e in sched.get("env", []) if e["name"] == "NVSHARE_METRICS_ADDR"]
    check(port and addr == [":%d" % port[0]],
          "the scheduler serves /metrics on its metrics port, every interface (%s %s)"
          % (port, addr))

    for p in (pod, plugin_pod):
        check_host_paths(p)
    socks = {env_of(c).get("NVSHARE_SOCK_DIR") for c in pod["containers"] + plugin_pod["containers"]}
    check(len(socks) == 1, "one socket directory for all three (%s)" % socks)
    install = pod["initContainers"][0]
    volumes = {v["name"]: v for v in pod["volumes"]}
    lib_dir = env_of(container(plugin_pod, "device-plugin")).get("NVSHARE_LIB_DIR")
    script = " ".join(install["command"])
    check(any(volumes[m["name"]].get("hostPath", {}).get("path") == lib_dir and
              re.search(r"%s/libnvshare\.so(\s|$)" % re.escape(m["mountPath"]), script)
              for m in install["volumeMounts"]),
          "install-lib writes libnvshare.so to %s, NVSHARE_LIB_DIR of the device plugin"
          % lib_dir)
    for d in (ds, plugin_ds):
        check_fields(d)
    return [pod, plugin_pod]


def check_host_paths(pod):
    """Every volume is mounted; the paths the device plugin hands to pods
    as host paths, and where the scheduler and the watcher meet, are the
    same inside and out."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    used = set()
    for c in pod.get("initContainers", []) + pod["containers"]:
        for m in c.get("volumeMounts", []):
            used.add(m["name"])
            check(m["name"] in volumes, "%s mounts volume %s, which the pod has"
                  % (c["name"], m["name"]))
    check(used == set(volumes), "every volume is mounted (%s)" % sorted(set(volumes) - used))

    def mounted_from_host(c, path):
        return any(m["mountPath"] == path and
                   volumes[m["name"]].get("hostPath", {}).get("path") == path
                   for m in c.get("volumeMounts", []))

    for c in pod["containers"]:
        env = env_of(c)
        for var in ("NVSHARE_SOCK_DIR", "NVSHARE_KUBELET_DIR"):
            if var in env:
                check(mounted_from_host(c, env[var]),
                      "%s: %s=%s is the host's %s" % (c["name"], var, env[var], env[var]))
        if "NVSHARE_STATE_FILE" in env:
            d = os.path.dirname(env["NVSHARE_STATE_FILE"])
            check(mounted_from_host(c, d), "%s: the state file's directory %s is on the host"
                  % (c["name"], d))


# --- field names, where kubectl cannot check them offline ------------------

# The fields of the Kubernetes API (v1.30) for the parts of the DaemonSet
# that are written by hand: a misspelt field is silently dropped by the API
# server, and the chart would carry the same typo as the manifests.
FIELDS = {
    "DaemonSetSpec": "minReadySeconds revisionHistoryLimit selector template updateStrategy",
    "PodSpec": "activeDeadlineSeconds affinity automountServiceAccountToken containers "
               "dnsConfig dnsPolicy enableServiceLinks ephemeralContainers hostAliases "
               "hostIPC hostNetwork hostPID hostUsers hostname imagePullSecrets "
               "initContainers nodeName nodeSelector os overhead preemptionPolicy priority "
               "priorityClassName readinessGates resourceClaims restartPolicy "
               "runtimeClassName schedulerName schedulingGates securityContext "
               "serviceAccount serviceAccountName setHostnameAsFQDN shareProcessNamespace "
               "subdomain terminationGracePeriodSeconds tolerations "
               "topologySpreadConstraints volumes",
    "Container": "args command env envFrom image imagePullPolicy lifecycle livenessProbe "
                 "name ports readinessProbe resizePolicy resources restartPolicy "
                 "securityContext startupProbe stdin stdinOnce terminationMessagePath "
                 "terminationMessagePolicy tty volumeDevices volumeMounts workingDir",
    "EnvVar": "name value valueFrom",
    "VolumeMount": "mountPath mountPropagation name readOnly recursiveReadOnly subPath "
                   "subPathExpr",
    "Probe": "exec failureThreshold grpc httpGet initialDelaySeconds periodSeconds "
             "successThreshold tcpSocket terminationGracePeriodSeconds timeoutSeconds",
    "SecurityContext": "allowPrivilegeEscalation appArmorProfile capabilities privileged "
                       "procMount readOnlyRootFilesystem runAsGroup runAsNonRoot runAsUser "
                       "seLinuxOptions seccompProfile windowsOptions",
    "Toleration": "effect key operator tolerationSeconds value",
    "HostPathVolumeSource": "path type",
}
HOST_PATH_TYPES = {"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket",
                   "CharDevice", "BlockDevice"}


def check_fields(ds):
    def known(obj, kind, where):
        extra = set(obj) - set(FIELDS[kind].split())
        check(not extra, "%s: fields of a %s (%s)" % (where, kind, sorted(extra)))

    known(ds["spec"], "DaemonSetSpec", "DaemonSet.spec")
    pod = ds["spec"]["template"]["spec"]
    known(pod, "PodSpec", "pod")
    for t in pod.get("tolerations", []):
        known(t, "Toleration", "pod.tolerations")
    for v in pod["volumes"]:
        if "hostPath" in v:
            known(v["hostPath"], "HostPathVolumeSource", "volume " + v["name"])
            check(v["hostPath"].get("type", "") in HOST_PATH_TYPES,
                  "volume %s: hostPath type %s" % (v["name"], v["hostPath"].get("type")))
    for c in pod.get("initContainers", []) + pod["containers"]:
        known(c, "Container", c["name"])
        for e in c.get("env", []):
            known(e, "EnvVar", "%s env %s" % (c["name"], e["name"]))
        for m in c.get("volumeMounts", []):
            known(m, "VolumeMount", "%s volumeMount %s" % (c["name"], m["name"]))
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            if probe in c:
                known(c[probe], "Probe", "%s %s" % (c["name"], probe))
        if "securityContext" in c:
            known(c["securityContext"], "SecurityContext", c["name"] + " securityContext")


# --- environment: documented, and accepted by the scheduler ----------------

RUNTIME_ENV = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}


def check_env_documented(pod):
    usage = subprocess.run([SCHEDULER, "--help"], capture_output=True, text=True,
                           timeout=10).stdout
    with open(os.path.join(REPO, "docs", "kubernetes.md")) as f:
        k8s_doc = f.read()
    for c in pod["containers"]:
        for name in env_of(c):
            if name in RUNTIME_ENV:
                continue  # read by the NVIDIA container runtime
            if c["name"] == "scheduler":
                check(re.search(r"^\s+%s\s" % name, usage, re.M) is not None,
                      "scheduler: %s is in nvshare-scheduler --help" % name)
            else:
                check("`%s`" % name in k8s_doc,
                      "%s: %s is documented in docs/kubernetes.md" % (c["name"], name))


def check_scheduler_accepts(pod):
    scheduler = container(pod, "scheduler")
    env = {k: v for k, v in env_of(scheduler).items() if v is not None}
    with tempfile.TemporaryDirectory() as tmp:
        env.update(NVSHARE_SOCK_DIR=tmp, NVSHARE_STATE_FILE="",
                   NVSHARE_GPUS="GPU-00000000-0000-0000-0000-0000000000a1:1024")
        # The manifests' address on a port the kernel picks: a scheduler
        # already running here (make demo, another test) holds :9402.
        if "NVSHARE_METRICS_ADDR" in env:
            env["NVSHARE_METRICS_ADDR"] = env["NVSHARE_METRICS_ADDR"].rsplit(":", 1)[0] + ":0"
        full = dict(os.environ, **env)
        log_path = os.path.join(tmp, "log")
        with open(log_path, "w") as log:
            proc = subprocess.Popen([SCHEDULER], env=full, stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        text = ""
        while time.monotonic() < deadline and proc.poll() is None:
            with open(log_path) as f:
                text = f.read()
            if text.count("listening on") >= 2:
                break
            time.sleep(0.05)
        probe = scheduler["livenessProbe"]["exec"]["command"]
        path = os.path.dirname(os.path.abspath(NVSHARECTL)) + os.pathsep + full["PATH"]
        live = subprocess.run(probe, env=dict(full, PATH=path), capture_output=True,
                              text=True, timeout=30)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        with open(log_path) as f:
            text = f.read()
    started = text.count("listening on") >= 2
    complaints = [l for l in text.splitlines() if re.search(r"warn|error|ignoring", l, re.I)]
    check(started and not complaints,
          "nvshare-scheduler starts with the manifests' settings, no complaint%s"
          % ("" if started and not complaints else ":\n" + text))
    check(started and live.returncode == 0,
          "the scheduler's liveness probe %s passes (rc %d)%s"
          % (probe, live.returncode, live.stderr.strip()))


# --- the chart and the manifests agree -----------------------------------

VALUES_REF = re.compile(r"^\{\{-? *\.Values\.([\w.]+) *(\| *quote *)?-?\}\}$")


def values_get(values, path):
    for part in path.split("."):
        values = values.get(part) if isinstance(values, dict) else None
    return values


def read_template(path, values):
    """The template as YAML, its actions set aside: a line that is only an
    action becomes nothing, or a marker that names the values it renders
    (`toYaml .Values.X`, or `toYaml .` inside `with .Values.X`); an inline
    action becomes a quoted string for compare() to read. The lines of an
    `if .Values.X` block are kept only when X is true in values."""
    out, blocks = [], []  # blocks: ("with", X) or ("if", kept)
    with open(path) as f:
        for line in f:
            stripped = line.strip()
            indent = line[:len(line) - len(line.lstrip())]
            with_ = re.match(r"^\{\{- with \.Values\.([\w.]+) \}\}$", stripped)
            if_ = re.match(r"^\{\{- if \.Values\.([\w.]+) \}\}$", stripped)
            to_yaml = re.match(r"^\{\{- toYaml (\.|\.Values\.[\w.]+) \| nindent \d+ \}\}$",
                               stripped)
            context = next((b[1] for b in reversed(blocks) if b[0] == "with"), None)
            if with_:
                blocks.append(("with", with_.group(1)))
            elif if_:
                blocks.append(("if", bool(values_get(values, if_.group(1)))))
            elif stripped == "{{- end }}":
                blocks.pop()
            elif not all(b[1] for b in blocks if b[0] == "if"):
                continue
            elif to_yaml:
                source = context if to_yaml.group(1) == "." else to_yaml.group(1)[8:]
                # items of the list above (extraEnv), or a mapping's value
                above = [l for l in out if len(l) - len(l.lstrip()) <= len(indent)]
                item = "- " if above and above[-1].startswith(indent + "- ") else ""
                out.append('%s%s"__values__": "%s"\n' % (indent, item, source))
            elif re.match(r"^\{\{.*\}\}$", stripped):
                continue
            else:
                line = re.sub(r"\{\{ \. \}\}", "{{ .Values.%s }}" % context, line)
                # the whole value, where an action is part of it ("-dra")
                line = re.sub(r"^(\s*(?:- )?[\w.-]+: )(\{\{.*\S)\s*$",
                              lambda m: "%s'%s'\n" % (m.group(1), m.group(2).replace("'", "''")),
                              line)
                if not re.match(r"^\s*(?:- )?[\w.-]+: '", line):
                    line = re.sub(r"(\{\{.*?\}\})", lambda m: "'%s'" % m.group(1), line)
                out.append(line)
    return [d for d in yaml.safe_load_all("".join(out)) if d is not None]


def rendered_value(tmpl, values):
    """What a field that only values.yaml fills holds by default; True for
    any other field."""
    if isinstance(tmpl, dict) and set(tmpl) == {"__values__"}:
        return values_get(values, tmpl["__values__"])
    ref = VALUES_REF.match(tmpl) if isinstance(tmpl, str) else None
    return values_get(values, ref.group(1)) if ref else True


def compare(tmpl, real, values, where, diffs):
    """Records in diffs where real differs from tmpl rendered with values."""
    if isinstance(tmpl, str) and tmpl.startswith("{{"):
        ref = VALUES_REF.match(tmpl)
        if not ref:
            return  # a name or label Helm computes
        want = values_get(values, ref.group(1))
        if ref.group(2):
            want = str(want)
        if want != real:
            diffs.append("%s: chart %r, manifests %r" % (where, want, real))
        return
    if isinstance(tmpl, dict) and "__values__" in tmpl:
        want = values_get(values, tmpl["__values__"])
        if want != real and not (not want and real is None):
            diffs.append("%s: chart %r (values.yaml), manifests %r" % (where, want, real))
        return
    if where.endswith((".labels", ".matchLabels")):
        return  # Helm's labels; the selector is checked on the manifests
    if isinstance(tmpl, dict) and isinstance(real, dict):
        for key in tmpl.keys() | real.keys():
            if key not in real:
                # rendered inside `with`: absent when the value is empty
                if not rendered_value(tmpl[key], values):
                    continue
                diffs.append("%s.%s: only in the chart" % (where, key))
            elif key not in tmpl:
                diffs.append("%s.%s: only in the manifests" % (where, key))
            else:
                compare(tmpl[key], real[key], values, "%s.%s" % (where, key), diffs)
        return
    if isinstance(tmpl, list) and isinstance(real, list):
        expanded = []
        for item in tmpl:  # extraEnv and the like: spliced into the list
            if isinstance(item, dict) and set(item) == {"__values__"}:
                expanded += values_get(values, item["__values__"]) or []
            else:
                expanded.append(item)
        if len(expanded) != len(real):
            diffs.append("%s: %d items in the chart, %d in the manifests"
                         % (where, len(expanded), len(real)))
            return
        for i, (t, r) in enumerate(zip(expanded, real)):
            name = r.get("name", i) if isinstance(r, dict) else i
            compare(t, r, values, "%s[%s]" % (where, name), diffs)
        return
    if tmpl != real:
        diffs.append("%s: chart %r, manifests %r" % (where, tmpl, real))


MISSING = object()

# Values no template reads yet, on purpose.
RESERVED_VALUES = {"metrics.port"}


def leaves(tree, prefix=""):
    if not isinstance(tree, dict) or not tree:
        return [prefix[1:]]
    return [l for k, v in tree.items() for l in leaves(v, "%s.%s" % (prefix, k))]


def check_values_used(values):
    """Every .Values reference of the templates is in values.yaml (Helm
    renders a misspelt one as nothing), and every value is used."""
    text = ""
    for root, _, files in os.walk(os.path.join(CHART, "templates")):
        for name in files:
            with open(os.path.join(root, name)) as f:
                text += f.read()
    refs = set(re.findall(r"\.Values\.([\w.]*\w)", text))
    for ref in sorted(refs):
        found = values
        for part in ref.split("."):
            found = found.get(part, MISSING) if isinstance(found, dict) else MISSING
        check(found is not MISSING, "values.yaml has .Values.%s" % ref)
    unused = [l for l in leaves(values) if l not in RESERVED_VALUES and
              not any(l == r or l.startswith(r + ".") for r in refs)]
    check(not unused, "every value of values.yaml is used (%s)" % unused)


# The chart's variants: the values each sets over values.yaml, and the
# plain YAML it renders, with the defaults otherwise: deploy/manifests/,
# without the device plugin's DaemonSet where it is off, and deploy/dra/
# (but its example) where the DRA driver is on.
VARIANTS = {
    "device plugin only (the defaults)": {},
    "DRA only": {"devicePlugin": {"enabled": False}, "dra": {"enabled": True}},
    "both": {"dra": {"enabled": True}},
}
DEVICE_PLUGIN_DS = ("DaemonSet", "nvshare-device-plugin")
DRA_FILES = ("daemonset.yaml", "rbac.yaml", "deviceclass.yaml")


def overlay(values, over):
    out = dict(values)
    for k, v in over.items():
        out[k] = overlay(values.get(k, {}), v) if isinstance(v, dict) else v
    return out


def template_name(tmpl):
    """The name Helm gives an object, with the release "nvshare"."""
    name = re.sub(r'\{\{ printf "%s([\w-]*)" \(include "nvshare.fullname" \.\) \}\}',
                  r"nvshare\1", tmpl["metadata"]["name"])
    return name.replace('{{ include "nvshare.fullname" . }}', "nvshare")


def check_variant(what, values, expected):
    templates = os.path.join(CHART, "templates")
    rendered = set()
    for name in sorted(os.listdir(templates)):
        if not name.endswith(".yaml"):
            continue
        try:
            objs = read_template(os.path.join(templates, name), values)
        except yaml.YAMLError as e:
            check(False, "%s: template %s parses once its actions are set aside: %s"
                  % (what, name, e))
            continue
        for t in objs:
            key = (t["kind"], template_name(t))
            rendered.add(key)
            if not check(key in expected, "%s: %s %s of %s is in the plain YAML"
                         % (what, key[0], key[1], name)):
                continue
            diffs = []
            compare(t, expected[key], values, t["kind"], diffs)
            check(not diffs, "%s: chart %s and the plain YAML agree on %s %s%s"
                  % (what, name, key[0], key[1], "".join("\n     " + d for d in diffs)))
    # The chart installs into the release's namespace (helm --create-namespace).
    missing = sorted(k for k in set(expected) - rendered if k[0] != "Namespace")
    check(not missing, "%s: the chart renders every object of the plain YAML (%s)"
          % (what, missing))


def check_chart(docs):
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    check_values_used(values)
    manifests = objects(docs)
    dra = {}
    for name in DRA_FILES:
        with open(os.path.join(DEPLOY, "dra", name)) as f:
            dra.update(objects({name: [d for d in yaml.safe_load_all(f) if d]}))
    for what, over in VARIANTS.items():
        v = overlay(values, over)
        expected = dict(manifests)
        if not v["devicePlugin"]["enabled"]:
            expected.pop(DEVICE_PLUGIN_DS)
        if v["dra"]["enabled"]:
            expected.update(dra)
        check_variant(what, v, expected)
    # "nvshare.image" in _helpers.tpl
    image = "%s:%s" % (values["image"]["repository"], values["image"]["tag"])
    images = {c["image"] for d in list(manifests.values()) + list(dra.values())
              if d["kind"] == "DaemonSet"
              for c in d["spec"]["template"]["spec"].get("initContainers", []) +
              d["spec"]["template"]["spec"]["containers"]}
    check(images == {image}, "the plain YAML's image is the chart's, %s (%s)" % (image, images))
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        version = re.search(r"project\(nvshare VERSION ([\d.]+)", f.read()).group(1)
    check(chart["appVersion"] == values["image"]["tag"] == version,
          "Chart.yaml's appVersion and the image tag are the project's version %s" % version)


def main():
    check_yaml_syntax()
    docs = load_manifests()
    check_kubectl(docs)
    pods = check_objects(docs)
    if pods:
        for pod in pods:
            check_env_documented(pod)
        check_scheduler_accepts(pods[0])
    check_chart(docs)
    print("k8s_manifests: %s" % ("%d failed" % failures if failures else "all passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
