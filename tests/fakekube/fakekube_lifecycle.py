"""What the controllers and the kubelet would do: defaulting, per-kind
validation and admission, pods that start and stop, deployments that become
available, namespaces that terminate with their contents."""

import copy
import datetime
import ipaddress
import re
import secrets

import fakekube_errors as E
from fakekube_kinds import BY_KIND, name_errors

NODE = "fakekube-node"
NEVER_READY = "fakekube/never-ready"
# A pod with a container image containing this never becomes ready either (for clients
# that cannot add annotations to the pods they create).
NEVER_READY_IMAGE = "fakekube-never-ready"
_CONTAINER_ORDER = ["name", "image", "command", "args", "workingDir", "ports", "envFrom", "env",
                    "resources", "volumeMounts", "terminationMessagePath",
                    "terminationMessagePolicy", "imagePullPolicy", "securityContext"]


def _ts(offset=0.0):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pull_policy(image):
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if "@" in image:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _default_container(c):
    if not isinstance(c, dict):
        return
    c.setdefault("resources", {})
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if isinstance(c.get("image"), str):
        c.setdefault("imagePullPolicy", _pull_policy(c["image"]))
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")


def _default_podspec(spec):
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        _default_container(c)


def _container_causes(path, containers, required=True):
    causes = []
    if not containers:
        if required:
            causes.append((path, "FieldValueRequired", "Required value"))
        return causes
    seen = set()
    for i, c in enumerate(containers):
        p = "%s[%d]" % (path, i)
        if not isinstance(c, dict):
            continue
        n = c.get("name")
        if not n:
            causes.append((p + ".name", "FieldValueRequired", "Required value"))
        else:
            for m in name_errors("label", n):
                causes.append((p + ".name", "FieldValueInvalid",
                               'Invalid value: "%s": %s' % (n, m)))
            if n in seen:
                causes.append((p + ".name", "FieldValueDuplicate", 'Duplicate value: "%s"' % n))
            seen.add(n)
        if not c.get("image"):
            causes.append((p + ".image", "FieldValueRequired", "Required value"))
        for j, port in enumerate(c.get("ports") or []):
            cp = port.get("containerPort") if isinstance(port, dict) else None
            if cp is None:
                causes.append(("%s.ports[%d].containerPort" % (p, j), "FieldValueRequired",
                               "Required value"))
            elif not 1 <= int(cp) <= 65535:
                causes.append(("%s.ports[%d].containerPort" % (p, j), "FieldValueInvalid",
                               "Invalid value: %d: must be between 1 and 65535, inclusive"
                               % int(cp)))
    return causes


def _podspec_causes(path, spec):
    causes = _container_causes(path + ".containers", spec.get("containers"))
    causes += _container_causes(path + ".initContainers", spec.get("initContainers"), False)
    rp = spec.get("restartPolicy")
    if rp not in (None, "Always", "OnFailure", "Never"):
        causes.append((path + ".restartPolicy", "FieldValueNotSupported",
                       'Unsupported value: "%s": supported values: "Always", "OnFailure", '
                       '"Never"' % rp))
    names = set()
    for i, v in enumerate(spec.get("volumes") or []):
        n = v.get("name") if isinstance(v, dict) else None
        if not n:
            causes.append(("%s.volumes[%d].name" % (path, i), "FieldValueRequired",
                           "Required value"))
        names.add(n)
    for i, c in enumerate(spec.get("containers") or []):
        for j, vm in enumerate((c or {}).get("volumeMounts") or []):
            if vm.get("name") not in names:
                causes.append(("%s.containers[%d].volumeMounts[%d].name" % (path, i, j),
                               "FieldValueNotFound", 'Not found: "%s"' % vm.get("name")))
    return causes


def _selector_matches(sel, labels):
    labels = labels or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for r in sel.get("matchExpressions") or []:
        k, op, vals = r.get("key"), r.get("operator"), r.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True



def _ready_conditions(st, cstats, now, all_done):
    """The pod's Ready and ContainersReady conditions (and PodReadyToStartContainers at the
    end) as its containers' readiness says, the way the kubelet keeps them."""
    unready = [c["name"] for c in cstats if not c.get("ready")]
    for cond in st.get("conditions") or []:
        if cond["type"] in ("Ready", "ContainersReady"):
            newstat = "False" if unready else "True"
            if cond["status"] != newstat:
                cond["lastTransitionTime"] = now
            cond["status"] = newstat
            if all_done:
                cond["reason"] = "PodCompleted"
                cond.pop("message", None)
            elif unready:
                cond["reason"] = "ContainersNotReady"
                cond["message"] = "containers with unready status: [%s]" % " ".join(unready)
            else:
                cond.pop("reason", None)
                cond.pop("message", None)
        if cond["type"] == "PodReadyToStartContainers" and all_done:
            cond["status"] = "False"

class Lifecycle:
    def __init__(self, store):
        self.store = store

    # ------------------------------------------------------------ defaults

    def default(self, k, obj, old):
        kind = k.kind
        if kind == "Namespace":
            obj.setdefault("metadata", {}).setdefault("labels", {})[
                "kubernetes.io/metadata.name"] = obj["metadata"]["name"]
            obj["spec"] = {"finalizers": ["kubernetes"]}
            if old is None:
                obj["status"] = {"phase": "Active"}
        elif kind == "Pod":
            _default_podspec(obj.setdefault("spec", {}))
            if old is None:
                obj["spec"].setdefault("nodeName", NODE)
                obj["spec"].setdefault("serviceAccountName", "default")
                obj["spec"].setdefault("enableServiceLinks", True)
                obj["spec"].setdefault("priority", 0)
                obj["spec"].setdefault("preemptionPolicy", "PreemptLowerPriority")
                obj["status"] = {"phase": "Pending", "qosClass": _qos(obj["spec"]),
                                 "conditions": [{"type": "PodScheduled", "status": "True",
                                                 "lastProbeTime": None,
                                                 "lastTransitionTime": _ts()}]}
        elif kind == "Secret":
            sd = obj.pop("stringData", None)
            if sd:
                import base64
                data = obj.setdefault("data", {})
                for key, v in sd.items():
                    data[key] = base64.b64encode(str(v).encode()).decode()
            if not obj.get("type"):
                obj["type"] = "Opaque"
        elif kind == "Service":
            spec = obj.setdefault("spec", {})
            spec.setdefault("type", "ClusterIP")
            spec.setdefault("sessionAffinity", "None")
            spec.setdefault("internalTrafficPolicy", "Cluster")
            if spec.get("clusterIP") != "None" and spec["type"] != "ExternalName":
                if old is not None and (old.get("spec") or {}).get("clusterIP"):
                    spec["clusterIP"] = old["spec"]["clusterIP"]
                else:
                    spec.setdefault("clusterIP", self._cluster_ip())
                if (spec.get("clusterIPs") or [None])[0] != spec["clusterIP"]:
                    spec["clusterIPs"] = [spec["clusterIP"]]
                spec.setdefault("ipFamilies", ["IPv4"])
                spec.setdefault("ipFamilyPolicy", "SingleStack")
            for p in spec.get("ports") or []:
                if isinstance(p, dict):
                    p.setdefault("protocol", "TCP")
                    if "port" in p:
                        p.setdefault("targetPort", p["port"])
            if old is None:
                obj["status"] = {"loadBalancer": {}}
        elif kind == "Deployment":
            spec = obj.setdefault("spec", {})
            spec.setdefault("replicas", 1)
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("progressDeadlineSeconds", 600)
            st = spec.setdefault("strategy", {"type": "RollingUpdate"})
            if st.get("type", "RollingUpdate") == "RollingUpdate":
                st.setdefault("type", "RollingUpdate")
                st.setdefault("rollingUpdate", {"maxUnavailable": "25%", "maxSurge": "25%"})
            tmpl = spec.setdefault("template", {})
            _default_podspec(tmpl.setdefault("spec", {}))
            if old is None:
                obj["status"] = {}
        elif kind == "NetworkPolicy":
            spec = obj.setdefault("spec", {})
            spec.setdefault("podSelector", {})
            if not spec.get("policyTypes"):
                spec["policyTypes"] = ["Ingress"] + (["Egress"] if spec.get("egress") else [])
        elif kind == "Event":
            obj.setdefault("reportingComponent", "")
            obj.setdefault("reportingInstance", "")

    # ------------------------------------------------------------ validation

    def _cluster_ip(self):
        """A random address of the first service range (Store's service_cidrs), past the
        kubernetes Service's first one."""
        cidrs = getattr(self.store, "service_cidrs", None) or ["10.96.0.0/16"]
        net = ipaddress.ip_network(cidrs[0])
        span = min(net.num_addresses - 3, 1 << 16)
        return str(net.network_address + 2 + secrets.randbelow(max(span, 1)))

    def validate(self, k, obj, old):
        kind = k.kind
        causes = []
        if kind == "Pod":
            causes += _podspec_causes("spec", obj.get("spec") or {})
            rc = (obj.get("spec") or {}).get("runtimeClassName")
            if old is None and rc and self.store.peek(BY_KIND["RuntimeClass"], None, rc) is None:
                raise E.forbidden(k, obj["metadata"]["name"],
                                  'pod rejected: RuntimeClass "%s" not found' % rc)
        elif kind == "Deployment":
            spec = obj.get("spec") or {}
            sel = spec.get("selector")
            tl = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            if not sel:
                causes.append(("spec.selector", "FieldValueRequired", "Required value"))
            elif not (sel.get("matchLabels") or sel.get("matchExpressions")):
                causes.append(("spec.selector", "FieldValueInvalid",
                               "Invalid value: v1.LabelSelector{MatchLabels:map[string]string"
                               "(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: "
                               "empty selector is invalid for deployment"))
            elif not _selector_matches(sel, tl):
                causes.append(("spec.template.metadata.labels", "FieldValueInvalid",
                               "Invalid value: %s: `selector` does not match template `labels`"
                               % _gomap(tl)))
            causes += _podspec_causes("spec.template.spec", (spec.get("template") or {})
                                      .get("spec") or {})
            if int(spec.get("replicas", 1)) < 0:
                causes.append(("spec.replicas", "FieldValueInvalid",
                               "Invalid value: %d: must be greater than or equal to 0"
                               % int(spec["replicas"])))
            if old is not None and (old.get("spec") or {}).get("selector") != sel:
                causes.append(("spec.selector", "FieldValueInvalid",
                               "Invalid value: %s: field is immutable" % _gosel(sel or {})))
        elif kind == "Service":
            spec = obj.get("spec") or {}
            if spec.get("type") != "ExternalName" and spec.get("clusterIP") != "None" \
                    and not spec.get("ports"):
                causes.append(("spec.ports", "FieldValueRequired", "Required value"))
            for i, p in enumerate(spec.get("ports") or []):
                port = p.get("port")
                if port is None:
                    causes.append(("spec.ports[%d].port" % i, "FieldValueRequired",
                                   "Required value"))
                elif not 1 <= int(port) <= 65535:
                    causes.append(("spec.ports[%d].port" % i, "FieldValueInvalid",
                                   "Invalid value: %d: must be between 1 and 65535, inclusive"
                                   % int(port)))
                if len(spec.get("ports")) > 1 and not p.get("name"):
                    causes.append(("spec.ports[%d].name" % i, "FieldValueRequired",
                                   "Required value"))
        elif kind in ("Secret", "ConfigMap"):
            for field in ("data", "binaryData"):
                for key in (obj.get(field) or {}):
                    if not re.match(r"^[-._a-zA-Z0-9]+$", key) or len(key) > 253:
                        causes.append(("%s[%s]" % (field, key), "FieldValueInvalid",
                                       'Invalid value: "%s": a valid config key must consist '
                                       "of alphanumeric characters, '-', '_' or '.' (e.g. "
                                       "'key.name',  or 'KEY_NAME',  or 'key-name', regex used"
                                       " for validation is '[-._a-zA-Z0-9]+')" % key))
            if old is not None and old.get("immutable"):
                for field in ("data", "binaryData"):
                    if obj.get(field) != old.get(field):
                        causes.append((field, "FieldValueForbidden",
                                       "Forbidden: field is immutable when `immutable` is set"))
                if not obj.get("immutable"):
                    causes.append(("immutable", "FieldValueForbidden",
                                   "Forbidden: field is immutable when `immutable` is set"))
        elif kind == "RuntimeClass":
            h = obj.get("handler")
            if not h:
                causes.append(("handler", "FieldValueRequired", "Required value"))
            else:
                for m in name_errors("label", h):
                    causes.append(("handler", "FieldValueInvalid",
                                   'Invalid value: "%s": %s' % (h, m)))
        return causes

    def validate_update(self, k, new, old):
        if k.kind == "Pod":
            def mutable_stripped(spec):
                s = copy.deepcopy(spec or {})
                for c in (s.get("containers") or []) + (s.get("initContainers") or []):
                    c.pop("image", None)
                s.pop("activeDeadlineSeconds", None)
                s.pop("tolerations", None)
                return s
            if mutable_stripped(new.get("spec")) != mutable_stripped(old.get("spec")):
                raise E.invalid(k, new["metadata"]["name"], [(
                    "spec", "FieldValueForbidden",
                    "Forbidden: pod updates may not change fields other than "
                    "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
                    "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to "
                    "be set to 1 if it was previously negative)")])
        if k.kind == "RuntimeClass" and new.get("handler") != old.get("handler"):
            raise E.invalid(k, new["metadata"]["name"], [(
                "handler", "FieldValueInvalid",
                'Invalid value: "%s": field is immutable' % new.get("handler"))])

    # ------------------------------------------------------------ hooks

    def created(self, k, obj):
        md = obj["metadata"]
        if k.kind == "Pod":
            self.store.timers.call_later(self.store.ready_delay, lambda: self._pod_start(
                md["namespace"], md["name"], md["uid"]))
        elif k.kind == "Deployment":
            self._schedule_deploy(obj)

    def updated(self, k, new, old):
        if k.kind == "Deployment" and new["metadata"]["generation"] != old["metadata"]["generation"]:
            self._schedule_deploy(new)

    # ------------------------------------------------------------ pods

    def _current(self, kind, ns, name, uid):
        o = self.store.peek(BY_KIND[kind], ns, name)
        if o is None or o["metadata"]["uid"] != uid:
            return None
        return copy.deepcopy(o)

    def _pod_start(self, ns, name, uid):
        with self.store.cond:
            pod = self._current("Pod", ns, name, uid)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                return
            st = pod.setdefault("status", {})
            if st.get("phase") != "Pending":
                return
            now = _ts()
            never = ((pod["metadata"].get("annotations") or {}).get(NEVER_READY) == "true" or
                     any(NEVER_READY_IMAGE in c.get("image", "")
                         for c in pod["spec"].get("containers") or []))
            st["hostIP"] = "10.0.0.10"
            st["hostIPs"] = [{"ip": "10.0.0.10"}]
            st["startTime"] = now
            conds = {c["type"]: c for c in st.get("conditions") or []}
            cstats = []
            for c in pod["spec"].get("containers") or []:
                cs = {"name": c["name"], "image": c.get("image", ""), "imageID": "",
                      "restartCount": 0, "started": False, "ready": False, "state": {}}
                if never:
                    cs["state"] = {"waiting": {
                        "reason": "ImagePullBackOff",
                        "message": 'Back-off pulling image "%s"' % c.get("image", "")}}
                else:
                    cs["imageID"] = "docker.io/library/%s@sha256:%s" % (
                        c.get("image", "").rsplit("/", 1)[-1].split(":")[0], "0" * 64)
                    cs["containerID"] = "containerd://" + secrets.token_hex(32)
                    cs["started"] = True
                    cs["ready"] = True
                    cs["state"] = {"running": {"startedAt": now}}
                cstats.append(cs)
            st["containerStatuses"] = cstats
            ready = "False" if never else "True"
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
                s = "True" if t in ("Initialized", "PodReadyToStartContainers") else ready
                cond = {"type": t, "status": s, "lastProbeTime": None, "lastTransitionTime": now}
                if s == "False":
                    cond["reason"] = "ContainersNotReady"
                    cond["message"] = "containers with unready status: [%s]" % " ".join(
                        c["name"] for c in cstats)
                conds[t] = cond
            order = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                     "PodScheduled"]
            st["conditions"] = [conds[t] for t in order if t in conds]
            if not never:
                st["phase"] = "Running"
                st["podIP"] = "10.244.0.%d" % (2 + secrets.randbelow(250))
                st["podIPs"] = [{"ip": st["podIP"]}]
            self.store.put_internal(BY_KIND["Pod"], pod)
            if never:
                c0 = (pod["spec"].get("containers") or [{}])[0]
                self._event(pod, "Warning", "Failed",
                            'Failed to pull image "%s": rpc error: code = NotFound desc = '
                            'failed to pull and unpack image' % c0.get("image", ""))
                self._event(pod, "Normal", "BackOff",
                            'Back-off pulling image "%s"' % c0.get("image", ""))

    def _event(self, obj, typ, reason, message):
        md = obj["metadata"]
        ev = {
            "metadata": {"name": "%s.%s" % (md["name"], secrets.token_hex(8)),
                         "namespace": md["namespace"]},
            "involvedObject": {"kind": obj["kind"], "namespace": md["namespace"],
                               "name": md["name"], "uid": md["uid"],
                               "apiVersion": obj["apiVersion"],
                               "resourceVersion": md.get("resourceVersion", "")},
            "reason": reason, "message": message,
            "source": {"component": "kubelet", "host": NODE},
            "firstTimestamp": _ts(), "lastTimestamp": _ts(), "count": 1, "type": typ,
            "eventTime": None, "reportingComponent": "kubelet", "reportingInstance": NODE,
        }
        if obj["kind"] == "Pod":
            ev["involvedObject"]["fieldPath"] = "spec.containers{%s}" % (
                (obj["spec"].get("containers") or [{}])[0].get("name", ""))
        try:
            self.store.create(BY_KIND["Event"], md["namespace"], ev, manager="kubelet")
        except E.ApiError:
            pass

    def terminate_container(self, ns, name, container=None, exit_code=0, reason=None,
                            message=None):
        """The kubelet saw a container exit.  Returns the updated pod."""
        k = BY_KIND["Pod"]
        with self.store.cond:
            pod = self.store.get(k, ns, name)
            st = pod.setdefault("status", {})
            cstats = st.get("containerStatuses")
            if not cstats:
                cstats = [{"name": c["name"], "image": c.get("image", ""), "imageID": "",
                           "restartCount": 0, "started": False, "ready": False, "state": {}}
                          for c in pod["spec"].get("containers") or []]
                st["containerStatuses"] = cstats
            names = [c["name"] for c in cstats]
            if container is None:
                targets = cstats
            else:
                targets = [c for c in cstats if c["name"] == container]
                if not targets:
                    raise E.bad_request('container "%s" is not valid for pod "%s": known '
                                        'containers: %s' % (container, name, names))
            now = _ts()
            rp = pod["spec"].get("restartPolicy", "Always")
            for cs in targets:
                started = ((cs.get("state") or {}).get("running") or {}).get("startedAt", now)
                term = {"exitCode": int(exit_code),
                        "reason": reason or ("Completed" if int(exit_code) == 0 else "Error"),
                        "startedAt": started, "finishedAt": now,
                        "containerID": cs.get("containerID", "containerd://" +
                                              secrets.token_hex(32))}
                if message:
                    term["message"] = message
                restart = rp == "Always" or (rp == "OnFailure" and int(exit_code) != 0)
                if restart:
                    cs["lastState"] = {"terminated": term}
                    cs["restartCount"] = int(cs.get("restartCount", 0)) + 1
                    cs["state"] = {"running": {"startedAt": now}}
                    cs["ready"] = True
                    cs["started"] = True
                else:
                    cs["state"] = {"terminated": term}
                    cs["ready"] = False
                    cs["started"] = False
            all_done = all("terminated" in (c.get("state") or {}) for c in cstats)
            if all_done:
                failed = any(c["state"]["terminated"]["exitCode"] != 0 for c in cstats)
                st["phase"] = "Failed" if failed else "Succeeded"
            _ready_conditions(st, cstats, now, all_done)
            return self.store.put_internal(k, pod)

    def set_container_ready(self, ns, name, container, ready, reason=None, message=None):
        """The kubelet's readiness probe failed (ready False: the container waits with
        `reason`, e.g. CrashLoopBackOff) or passes again.  Returns the updated pod."""
        k = BY_KIND["Pod"]
        with self.store.cond:
            pod = self.store.get(k, ns, name)
            st = pod.setdefault("status", {})
            cstats = [c for c in st.get("containerStatuses") or [] if c["name"] == container]
            if not cstats:
                raise E.bad_request('container "%s" is not valid for pod "%s"' % (container, name))
            now = _ts()
            cs = cstats[0]
            cs["ready"] = bool(ready)
            if ready:
                cs["state"] = {"running": {"startedAt": now}}
            else:
                cs["state"] = {"waiting": {"reason": reason or "CrashLoopBackOff",
                                           **({"message": message} if message else {})}}
            _ready_conditions(st, st["containerStatuses"], now, False)
            return self.store.put_internal(k, pod)

    def graceful_delete_pod(self, pod, grace):
        k = BY_KIND["Pod"]
        pod = copy.deepcopy(pod)
        g = int(grace if grace is not None else pod["spec"].get("terminationGracePeriodSeconds", 30))
        md = pod["metadata"]
        md["deletionTimestamp"] = _ts(g)
        md["deletionGracePeriodSeconds"] = g
        out = self.store.put_internal(k, pod)
        ns, name, uid = md["namespace"], md["name"], md["uid"]

        def finish():
            with self.store.cond:
                if self._current("Pod", ns, name, uid) is not None:
                    self.store.remove(k, ns, name)
        self.store.timers.call_later(self.store.pod_delete_delay, finish)
        return out

    # ------------------------------------------------------------ deployments

    def _schedule_deploy(self, obj):
        md = obj["metadata"]
        ns, name, uid, gen = md["namespace"], md["name"], md["uid"], md["generation"]

        def ready():
            with self.store.cond:
                d = self._current("Deployment", ns, name, uid)
                if d is None or d["metadata"]["generation"] != gen:
                    return
                n = int(d["spec"].get("replicas", 1))
                now = _ts()
                d["status"] = {
                    "observedGeneration": gen, "replicas": n, "updatedReplicas": n,
                    "readyReplicas": n, "availableReplicas": n,
                    "conditions": [
                        {"type": "Available", "status": "True", "lastUpdateTime": now,
                         "lastTransitionTime": now, "reason": "MinimumReplicasAvailable",
                         "message": "Deployment has minimum availability."},
                        {"type": "Progressing", "status": "True", "lastUpdateTime": now,
                         "lastTransitionTime": now, "reason": "NewReplicaSetAvailable",
                         "message": 'ReplicaSet "%s-%s" has successfully progressed.'
                                    % (name, secrets.token_hex(5)[:10])},
                    ]}
                if n == 0:
                    for f in ("readyReplicas", "availableReplicas", "replicas",
                              "updatedReplicas"):
                        d["status"].pop(f)
                self.store.put_internal(BY_KIND["Deployment"], d)
        self.store.timers.call_later(self.store.ready_delay, ready)

    # ------------------------------------------------------------ namespaces

    def terminate_namespace(self, ns_obj):
        k = BY_KIND["Namespace"]
        o = copy.deepcopy(ns_obj)
        o["metadata"]["deletionTimestamp"] = _ts()
        o["status"] = {"phase": "Terminating"}
        out = self.store.put_internal(k, o)
        name, uid = o["metadata"]["name"], o["metadata"]["uid"]

        def finalize():
            with self.store.cond:
                if self._current("Namespace", None, name, uid) is None:
                    return
                for (kind, ns, oname) in list(self.store.objects):
                    if ns == name and kind != "Namespace":
                        self.store.remove(BY_KIND[kind], ns, oname)
                self.store.remove(k, None, name)
        self.store.timers.call_later(self.store.terminate_delay, finalize)
        return out


def _qos(spec):
    has = False
    for c in spec.get("containers") or []:
        r = c.get("resources") or {}
        if r.get("limits") or r.get("requests"):
            has = True
    return "Burstable" if has else "BestEffort"


def _gomap(m):
    return "map[string]string{%s}" % ", ".join('"%s":"%s"' % (k, v) for k, v in sorted(m.items()))


def _gosel(sel):
    return "v1.LabelSelector{MatchLabels:%s, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}" % (
        _gomap(sel.get("matchLabels") or {}))
