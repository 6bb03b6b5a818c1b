"""The kinds fakekube serves: registry, discovery documents, name
validation, defaulting and Table rendering (``kubectl get`` asks for
``as=Table``)."""

import datetime
import re


class Kind:
    def __init__(self, group, version, kind, resource, singular, namespaced,
                 short=(), name_rule="subdomain", categories=()):
        self.group = group
        self.version = version
        self.kind = kind
        self.resource = resource
        self.singular = singular
        self.namespaced = namespaced
        self.short = list(short)
        self.name_rule = name_rule
        self.categories = list(categories)

    @property
    def api_version(self):
        return self.version if not self.group else "%s/%s" % (self.group, self.version)

    @property
    def gv(self):
        return (self.group, self.version)

    @property
    def qualified(self):
        """``pods`` / ``deployments.apps`` (as in Status messages)."""
        return self.resource if not self.group else "%s.%s" % (self.resource, self.group)


KINDS = [
    Kind("", "v1", "Namespace", "namespaces", "namespace", False, ["ns"], "label"),
    Kind("", "v1", "Pod", "pods", "pod", True, ["po"], categories=["all"]),
    Kind("", "v1", "Secret", "secrets", "secret", True),
    Kind("", "v1", "ConfigMap", "configmaps", "configmap", True, ["cm"]),
    Kind("", "v1", "Service", "services", "service", True, ["svc"], "dns1035", categories=["all"]),
    Kind("", "v1", "Event", "events", "event", True, ["ev"]),
    Kind("apps", "v1", "Deployment", "deployments", "deployment", True, ["deploy"],
         categories=["all"]),
    Kind("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", "networkpolicy", True,
         ["netpol"]),
    # GA in Kubernetes 1.33 (v1beta1 in 1.31-1.32); FakeKube(service_cidr_api=False) hides it
    Kind("networking.k8s.io", "v1", "ServiceCIDR", "servicecidrs", "servicecidr", False),
    Kind("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", "runtimeclass", False),
]

BY_RESOURCE = {(k.group, k.version, k.resource): k for k in KINDS}
BY_KIND = {k.kind: k for k in KINDS}
GROUPS = {}
for _k in KINDS:
    if _k.group:
        GROUPS.setdefault(_k.group, _k.version)

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
SERVER_VERSION = {
    "major": "1", "minor": "32", "gitVersion": "v1.32.4-fakekube",
    "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.8", "compiler": "gc",
    "platform": "linux/amd64",
}


def _resource_entry(k):
    e = {"name": k.resource, "singularName": k.singular, "namespaced": k.namespaced,
         "kind": k.kind, "verbs": list(VERBS) if k.kind != "Namespace" else
         ["create", "delete", "get", "list", "patch", "update", "watch"],
         "storageVersionHash": "fakekube" + k.singular[:4]}
    if k.short:
        e["shortNames"] = k.short
    if k.categories:
        e["categories"] = k.categories
    return e


def resource_list(group, version, hidden=()):
    ks = [k for k in KINDS if k.gv == (group, version) and k.kind not in hidden]
    if not ks:
        return None
    res = []
    for k in ks:
        res.append(_resource_entry(k))
        if k.kind in ("Pod", "Deployment", "Namespace", "Service"):
            res.append({"name": k.resource + "/status", "singularName": "", "namespaced":
                        k.namespaced, "kind": k.kind, "verbs": ["get", "patch", "update"]})
        if k.kind == "Pod":
            res.append({"name": "pods/log", "singularName": "", "namespaced": True,
                        "kind": "Pod", "verbs": ["get"]})
    gv = version if not group else "%s/%s" % (group, version)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}


def api_versions():
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": "127.0.0.1:6443"}]}


def api_group(group):
    v = GROUPS[group]
    gv = {"groupVersion": "%s/%s" % (group, v), "version": v}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv],
            "preferredVersion": gv}


def api_group_list():
    groups = []
    for g in GROUPS:
        d = api_group(g)
        del d["kind"], d["apiVersion"]
        groups.append(d)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


# ---------------------------------------------------------------- names

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QNAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LVALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

MSG_LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
             "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
             "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
MSG_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
MSG_DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
               "start with an alphabetic character, and end with an alphanumeric character "
               "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
               "'[a-z]([-a-z0-9]*[a-z0-9])?')")
MSG_QNAME = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
             "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
             "'123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
MSG_LVALUE = ("a valid label must be an empty string or consist of alphanumeric characters, "
              "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
              "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
              "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def name_errors(rule, name):
    """Messages for an invalid object name (empty list when valid)."""
    errs = []
    if rule == "label":
        if len(name) > 63:
            errs.append("must be no more than 63 characters")
        if not _LABEL.match(name):
            errs.append(MSG_LABEL)
    elif rule == "dns1035":
        if len(name) > 63:
            errs.append("must be no more than 63 characters")
        if not _DNS1035.match(name):
            errs.append(MSG_DNS1035)
    else:
        if len(name) > 253:
            errs.append("must be no more than 253 characters")
        if not _SUBDOMAIN.match(name):
            errs.append(MSG_SUBDOMAIN)
    return errs


def label_errors(labels):
    """[(field, value, message)] for invalid label keys or values."""
    out = []
    for k, v in (labels or {}).items():
        prefix, _, name = k.rpartition("/")
        if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
            out.append(("metadata.labels", k, "prefix part " + MSG_SUBDOMAIN))
        if not name or len(name) > 63 or not _QNAME.match(name):
            out.append(("metadata.labels", k, MSG_QNAME))
        if not isinstance(v, str) or len(v) > 63 or not _LVALUE.match(v):
            out.append(("metadata.labels", v, MSG_LVALUE))
    return out


# ---------------------------------------------------------------- Table

def human_age(ts, now=None):
    if not ts:
        return "<unknown>"
    t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    s = int((now - t).total_seconds())
    if s < -1:
        return "<invalid>"
    if s < 0:
        s = 0
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    return "%dd" % (h // 24)


def _col(name, typ="string", fmt="", desc="", priority=0):
    return {"name": name, "type": typ, "format": fmt, "description": desc, "priority": priority}


def pod_status_string(pod):
    st = pod.get("status") or {}
    reason = st.get("reason") or st.get("phase") or "Unknown"
    for cs in st.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            t = state["terminated"]
            reason = t.get("reason") or ("Signal:%d" % t["signal"] if t.get("signal")
                                         else "ExitCode:%d" % t.get("exitCode", 0))
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _columns(k):
    name = _col("Name", fmt="name", desc="Name must be unique within a namespace.")
    age = _col("Age", desc="CreationTimestamp is a timestamp representing the server time "
                           "when this object was created.")
    if k.kind == "Namespace":
        return [name, _col("Status", desc="The status of the namespace"), age]
    if k.kind == "Pod":
        return [name, _col("Ready", desc="The aggregate readiness state of this pod for "
                                         "accepting traffic."),
                _col("Status", desc="The aggregate status of the containers in this pod."),
                _col("Restarts", desc="The number of times the containers in this pod have "
                                      "been restarted and when the last container in this "
                                      "pod has restarted."),
                age,
                _col("IP", desc="IP address allocated to the pod.", priority=1),
                _col("Node", desc="Name of the Node this pod is assigned to.", priority=1)]
    if k.kind == "Deployment":
        return [name, _col("Ready"), _col("Up-to-date", "integer"),
                _col("Available", "integer"), age]
    if k.kind == "Secret":
        return [name, _col("Type"), _col("Data", "integer"), age]
    if k.kind == "ConfigMap":
        return [name, _col("Data", "integer"), age]
    if k.kind == "Service":
        return [name, _col("Type"), _col("Cluster-IP"), _col("External-IP"),
                _col("Port(s)"), age]
    if k.kind == "RuntimeClass":
        return [name, _col("Handler"), age]
    return [name, age]


def _cells(k, o):
    md = o.get("metadata") or {}
    age = human_age(md.get("creationTimestamp"))
    name = md.get("name", "")
    if k.kind == "Namespace":
        return [name, (o.get("status") or {}).get("phase", "Active"), age]
    if k.kind == "Pod":
        st = o.get("status") or {}
        cs = st.get("containerStatuses") or []
        n = len((o.get("spec") or {}).get("containers") or [])
        ready = sum(1 for c in cs if c.get("ready"))
        restarts = sum(int(c.get("restartCount", 0)) for c in cs)
        return [name, "%d/%d" % (ready, n), pod_status_string(o), restarts, age,
                st.get("podIP", "<none>"), (o.get("spec") or {}).get("nodeName", "<none>")]
    if k.kind == "Deployment":
        st = o.get("status") or {}
        spec = o.get("spec") or {}
        return [name, "%d/%d" % (st.get("readyReplicas", 0), spec.get("replicas", 1)),
                st.get("updatedReplicas", 0), st.get("availableReplicas", 0), age]
    if k.kind == "Secret":
        return [name, o.get("type", "Opaque"), len(o.get("data") or {}), age]
    if k.kind == "ConfigMap":
        return [name, len(o.get("data") or {}) + len(o.get("binaryData") or {}), age]
    if k.kind == "Service":
        spec = o.get("spec") or {}
        ports = ",".join("%s/%s" % (p.get("port"), p.get("protocol", "TCP"))
                         for p in spec.get("ports") or []) or "<none>"
        return [name, spec.get("type", "ClusterIP"), spec.get("clusterIP", "<none>"),
                "<none>", ports, age]
    if k.kind == "RuntimeClass":
        return [name, o.get("handler", ""), age]
    return [name, age]


def to_table(k, objs, rv, include="Metadata"):
    rows = []
    for o in objs:
        row = {"cells": _cells(k, o)}
        if include == "Object":
            row["object"] = o
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o.get("metadata", {})}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": rv}, "columnDefinitions": _columns(k), "rows": rows}
