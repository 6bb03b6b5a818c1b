"""Tests of fakekube itself: with the real kubectl, and over raw HTTPS.

Run: /usr/bin/python3 -m pytest tests/fakekube
"""

import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakekube import FakeKube  # noqa: E402
from fakekube_kinds import BY_KIND  # noqa: E402

KUBECTL = shutil.which("kubectl")
DELAY = 0.2


@pytest.fixture(scope="module")
def fk(tmp_path_factory):
    d = tmp_path_factory.mktemp("fakekube")
    f = FakeKube(str(d), ready_delay=DELAY, terminate_delay=DELAY, bookmark_interval=0.2)
    f.start()
    yield f
    f.stop()


@pytest.fixture
def ns(fk, request):
    """A fresh namespace per test."""
    name = "t-" + request.node.name.replace("_", "-").lower()[:40].strip("-")
    fk.create("Namespace", None, {"metadata": {"name": name}})
    return name


class Client:
    def __init__(self, fk, cert=True, token=None):
        self.fk = fk
        ctx = ssl.create_default_context(cafile=fk.paths["ca.crt"])
        if cert:
            ctx.load_cert_chain(fk.paths["client.crt"], fk.paths["client.key"])
        self.ctx = ctx
        self.token = token
        self.conn = None

    def _conn(self):
        if self.conn is None:
            self.conn = http.client.HTTPSConnection("127.0.0.1", self.fk.port, context=self.ctx,
                                                    timeout=10)
        return self.conn

    def request(self, method, path, body=None, ctype="application/json", headers=None):
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            h["Content-Type"] = ctype
        c = self._conn()
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = raw.decode()
        return r.status, doc, r

    def stream(self, path):
        """Open a watch; returns (response, conn)."""
        c = http.client.HTTPSConnection("127.0.0.1", self.fk.port, context=self.ctx, timeout=10)
        h = {"Authorization": "Bearer " + self.token} if self.token else {}
        c.request("GET", path, headers=h)
        return c.getresponse(), c

    def close(self):
        if self.conn:
            self.conn.close()


@pytest.fixture
def api(fk):
    c = Client(fk)
    yield c
    c.close()


def pod(name, labels=None, annotations=None, **spec):
    md = {"name": name}
    if labels:
        md["labels"] = labels
    if annotations:
        md["annotations"] = annotations
    s = {"containers": [{"name": "main", "image": "busybox:1.36",
                         "command": ["sleep", "3600"]}], "restartPolicy": "Never"}
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": s}


def events(resp, n, timeout=5.0):
    """Read n watch events from a chunked response."""
    out = []
    resp.fp.raw._sock.settimeout(timeout)  # noqa: SLF001 - test helper
    while len(out) < n:
        line = resp.readline()
        if not line:
            break
        out.append(json.loads(line))
    return out


def kubectl(fk, *args, check=True, timeout=20, ctx=None, input=None):
    cmd = [KUBECTL, "--kubeconfig", fk.kubeconfig]
    if ctx:
        cmd += ["--context", ctx]
    p = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout,
                       input=input)
    if check and p.returncode != 0:
        raise AssertionError("kubectl %s failed: %s%s" % (" ".join(args), p.stdout, p.stderr))
    return p


needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")

POD_YAML = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: demo, tier: {tier}}}
spec:
  containers:
  - name: c
    image: busybox:1.36
    {cmdfield}: ["sleep", "1000"]
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ---------------------------------------------------------------- kubectl

@needs_kubectl
def test_kubectl_get_namespaces_and_version(fk):
    out = kubectl(fk, "get", "namespaces").stdout
    assert "default" in out and "kube-system" in out and "Active" in out
    out = kubectl(fk, "version", "-o", "json").stdout
    assert json.loads(out)["serverVersion"]["minor"] == "32"
    out = kubectl(fk, "get", "runtimeclass", "kata-clh", "-o", "json").stdout
    assert json.loads(out)["handler"] == "kata-clh"


@needs_kubectl
def test_kubectl_contexts_token_and_anon(fk):
    assert "default" in kubectl(fk, "get", "ns", ctx="fake-token").stdout
    fk.clear_requests()
    # kubectl gets a 401 and then asks for a username (stdin is empty here)
    p = kubectl(fk, "get", "ns", ctx="fake-anon", check=False, input="")
    assert p.returncode != 0
    assert [r["status"] for r in fk.requests()][:1] == [401]
    assert fk.requests()[0]["auth"] == "anonymous"


@needs_kubectl
def test_kubectl_apply_server_side_wait_delete(fk, ns, tmp_path):
    f = write(tmp_path, "p.yaml", POD_YAML.format(name="web", tier="a", cmdfield="command"))
    out = kubectl(fk, "-n", ns, "apply", "--server-side", "-f", f).stdout
    assert "pod/web serverside-applied" in out
    out = kubectl(fk, "-n", ns, "wait", "--for=condition=Ready", "pod/web", "--timeout=10s").stdout
    assert "condition met" in out
    assert fk.get("Pod", ns, "web")["status"]["phase"] == "Running"
    # a second apply is idempotent: same resourceVersion, no event
    rv1 = fk.get("Pod", ns, "web")["metadata"]["resourceVersion"]
    kubectl(fk, "-n", ns, "apply", "--server-side", "-f", f)
    assert fk.get("Pod", ns, "web")["metadata"]["resourceVersion"] == rv1
    out = kubectl(fk, "-n", ns, "delete", "pod", "web", "--wait=true").stdout
    assert 'pod "web" deleted' in out
    assert fk.get("Pod", ns, "web") is None
    req = [r for r in fk.requests() if r["method"] == "PATCH" and r["path"].endswith("/pods/web")]
    assert req and req[0]["content_type"] == "application/apply-patch+yaml"
    assert "fieldValidation=Strict" in req[0]["query"]


@needs_kubectl
def test_kubectl_apply_dry_run_server_stores_nothing(fk, ns, tmp_path):
    f = write(tmp_path, "p.yaml", POD_YAML.format(name="dry", tier="a", cmdfield="command"))
    out = kubectl(fk, "-n", ns, "apply", "--dry-run=server", "-f", f).stdout
    assert "(server dry run)" in out
    assert fk.get("Pod", ns, "dry") is None
    out = kubectl(fk, "-n", ns, "apply", "--server-side", "--dry-run=server", "-f", f).stdout
    assert "(server dry run)" in out
    assert fk.get("Pod", ns, "dry") is None


@needs_kubectl
def test_kubectl_strict_validation_names_unknown_field(fk, ns, tmp_path):
    f = write(tmp_path, "bad.yaml", POD_YAML.format(name="bad", tier="a", cmdfield="comand"))
    p = kubectl(fk, "-n", ns, "create", "-f", f, check=False)
    assert p.returncode != 0
    assert 'strict decoding error: unknown field "spec.containers[0].comand"' in p.stderr
    # server-side apply reports it the way structured-merge-diff does
    p = kubectl(fk, "-n", ns, "apply", "--server-side", "-f", f, check=False)
    assert p.returncode != 0
    assert '.spec.containers[name="c"].comand: field not declared in schema' in p.stderr
    assert fk.get("Pod", ns, "bad") is None
    # --validate=warn: the server only warns and drops the field
    p = kubectl(fk, "-n", ns, "create", "--validate=warn", "-f", f)
    assert 'Warning: unknown field "spec.containers[0].comand"' in p.stderr
    assert "comand" not in json.dumps(fk.get("Pod", ns, "bad"))


@needs_kubectl
def test_kubectl_label_selectors(fk, ns):
    for name, tier in (("a1", "front"), ("a2", "back"), ("a3", None)):
        labels = {"app": "demo"}
        if tier:
            labels["tier"] = tier
        fk.create("Pod", ns, pod(name, labels))

    def names(sel):
        out = kubectl(fk, "-n", ns, "get", "pods", "-l", sel, "-o", "name").stdout
        return sorted(x.split("/")[1] for x in out.split())
    assert names("tier=front") == ["a1"]
    assert names("tier==back") == ["a2"]
    assert names("tier!=front") == ["a2", "a3"]
    assert names("tier in (front,back)") == ["a1", "a2"]
    assert names("tier notin (front)") == ["a2", "a3"]
    assert names("tier") == ["a1", "a2"]
    assert names("!tier") == ["a3"]
    assert names("app=demo,tier=back") == ["a2"]
    out = kubectl(fk, "-n", ns, "get", "pods", "--field-selector", "metadata.name=a3",
                  "-o", "name").stdout
    assert out.split() == ["pod/a3"]


@needs_kubectl
def test_kubectl_get_watch_receives_event(fk, ns):
    cmd = [KUBECTL, "--kubeconfig", fk.kubeconfig, "-n", ns, "get", "pods", "-w",
           "--output-watch-events", "-o", "name"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        fk.wait_for(lambda: any(r["path"] == "/api/v1/namespaces/%s/pods" % ns
                                and "watch=" in r["query"] for r in fk.requests()))
        fk.create("Pod", ns, pod("watched"))
        line = p.stdout.readline()
        assert line.split()[-1] == "pod/watched"
    finally:
        p.kill()
        p.wait()


@needs_kubectl
def test_kubectl_create_namespace_and_configmap_protobuf(fk):
    kubectl(fk, "create", "namespace", "pb-ns")
    kubectl(fk, "-n", "pb-ns", "create", "configmap", "cm", "--from-literal=k=v")
    kubectl(fk, "-n", "pb-ns", "create", "secret", "generic", "s", "--from-literal=x=y")
    assert fk.get("ConfigMap", "pb-ns", "cm")["data"] == {"k": "v"}
    assert fk.get("Secret", "pb-ns", "s")["data"] == {"x": "eQ=="}
    assert fk.get("Secret", "pb-ns", "s")["type"] == "Opaque"
    kubectl(fk, "delete", "namespace", "pb-ns", "--wait=true")
    assert fk.get("Namespace", None, "pb-ns") is None


# ---------------------------------------------------------------- HTTPS: auth and errors

def test_unauthenticated_gets_401(fk):
    c = Client(fk, cert=False)
    code, body, _ = c.request("GET", "/api/v1/namespaces")
    assert code == 401
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
    c2 = Client(fk, cert=False, token="wrong")
    assert c2.request("GET", "/api/v1/namespaces")[0] == 401
    c3 = Client(fk, cert=False, token=fk.token)
    assert c3.request("GET", "/api/v1/namespaces")[0] == 200
    auths = [r["auth"] for r in fk.requests()[-3:]]
    assert auths == ["anonymous", "anonymous", "token:" + fk.token]
    fk.revoke_token(fk.token)
    assert c3.request("GET", "/api/v1/namespaces")[0] == 401
    fk.add_token(fk.token)
    for c in (c, c2, c3):
        c.close()


def test_status_bodies_404_409_422(api, ns):
    code, body, _ = api.request("GET", "/api/v1/namespaces/%s/pods/nope" % ns)
    assert code == 404
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'pods "nope" not found', "reason": "NotFound",
                    "details": {"name": "nope", "kind": "pods"}, "code": 404}
    code, body, _ = api.request("DELETE", "/apis/apps/v1/namespaces/%s/deployments/nope" % ns)
    assert code == 404 and body["details"] == {"name": "nope", "group": "apps",
                                               "kind": "deployments"}
    assert body["message"] == 'deployments.apps "nope" not found'
    code, body, _ = api.request("POST", "/api/v1/namespaces/%s/configmaps" % ns,
                                {"metadata": {"name": "c1"}, "data": {"a": "b"}})
    assert code == 201 and body["metadata"]["resourceVersion"]
    code, body, _ = api.request("POST", "/api/v1/namespaces/%s/configmaps" % ns,
                                {"metadata": {"name": "c1"}})
    assert code == 409 and body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "c1" already exists'
    code, body, _ = api.request("POST", "/api/v1/namespaces", {"metadata": {"name": "Bad_NS"}})
    assert code == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith('Namespace "Bad_NS" is invalid: metadata.name: Invalid '
                                      'value: "Bad_NS": a lowercase RFC 1123 label must')
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    code, body, _ = api.request("POST", "/api/v1/namespaces/%s/pods" % ns,
                                pod("ok.name"))
    assert code == 201
    code, body, _ = api.request("POST", "/api/v1/namespaces/%s/pods" % ns, pod("Bad"))
    assert code == 422 and "RFC 1123 subdomain" in body["message"]
    code, body, _ = api.request("POST", "/api/v1/namespaces/missing-ns/pods", pod("p"))
    assert code == 404 and body["message"] == 'namespaces "missing-ns" not found'
    code, body, _ = api.request("GET", "/api/v1/foos")
    assert code == 404 and body["message"] == "the server could not find the requested resource"


def test_create_in_terminating_namespace_is_forbidden(fk, api):
    fk.settings(terminate_delay=30)
    try:
        api.request("POST", "/api/v1/namespaces", {"metadata": {"name": "going"}})
        code, body, _ = api.request("DELETE", "/api/v1/namespaces/going")
        assert code == 200 and body["status"]["phase"] == "Terminating"
        assert body["metadata"]["deletionTimestamp"]
        code, body, _ = api.request("POST", "/api/v1/namespaces/going/pods", pod("p"))
        assert code == 403 and body["reason"] == "Forbidden"
        assert body["message"] == ('pods "p" is forbidden: unable to create new content in '
                                   'namespace going because it is being terminated')
        code, body, _ = api.request("PATCH", "/api/v1/namespaces/going/configmaps/c?"
                                    "fieldManager=t&force=true",
                                    {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "c"}},
                                    ctype="application/apply-patch+yaml")
        assert code == 403
        code, body, _ = api.request("DELETE", "/api/v1/namespaces/going")
        assert code == 409 and body["reason"] == "Conflict"
    finally:
        fk.settings(terminate_delay=DELAY)
        fk.store.remove(BY_KIND["Namespace"], None, "going")


def test_strict_and_warn_field_validation(api, ns):
    bad = pod("s1")
    bad["spec"]["containers"][0]["comand"] = ["x"]
    bad["metadata"]["labelz"] = {"a": "b"}
    code, body, _ = api.request("POST", "/api/v1/namespaces/%s/pods?fieldValidation=Strict" % ns,
                                bad)
    assert code == 400 and body["reason"] == "BadRequest"
    assert body["message"] == ('Pod in version "v1" cannot be handled as a Pod: strict decoding '
                               'error: unknown field "metadata.labelz", unknown field '
                               '"spec.containers[0].comand"')
    code, body, r = api.request("POST", "/api/v1/namespaces/%s/pods" % ns, bad)
    assert code == 201
    assert r.headers.get_all("Warning") == ['299 - "unknown field \\"metadata.labelz\\""',
                                            '299 - "unknown field \\"spec.containers[0].comand\\""']
    assert "comand" not in json.dumps(body)
    # type errors are 400 whatever the validation level
    bad2 = pod("s2")
    bad2["spec"]["containers"][0]["image"] = 123
    code, body, _ = api.request("POST", "/api/v1/namespaces/%s/pods" % ns, bad2)
    assert code == 400 and "cannot unmarshal number into Go struct field Container" in body["message"]
    # strict validation covers every kind served
    code, body, _ = api.request(
        "POST", "/apis/apps/v1/namespaces/%s/deployments?fieldValidation=Strict" % ns,
        {"metadata": {"name": "d"}, "spec": {"replica": 1}})
    assert code == 400 and 'unknown field "spec.replica"' in body["message"]


def test_server_side_apply_create_merge_force_and_errors(api, ns):
    path = "/api/v1/namespaces/%s/configmaps/cfg" % ns
    y = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  labels: {a: '1'}\ndata:\n  k: v\n"
    code, body, _ = api.request("PATCH", path, y, ctype="application/apply-patch+yaml")
    assert code == 422 and "fieldManager: Required value" in body["message"]
    code, body, _ = api.request("PATCH", path + "?fieldManager=uplinkd&force=true", y,
                                ctype="application/apply-patch+yaml")
    assert code == 201 and body["data"] == {"k": "v"}
    rv = body["metadata"]["resourceVersion"]
    assert body["metadata"]["managedFields"][0]["manager"] == "uplinkd"
    # identical apply: no new resourceVersion
    code, body, _ = api.request("PATCH", path + "?fieldManager=uplinkd&force=true", y,
                                ctype="application/apply-patch+yaml")
    assert code == 200 and body["metadata"]["resourceVersion"] == rv
    # JSON body, merged
    code, body, _ = api.request("PATCH", path + "?fieldManager=uplinkd&force=true",
                                {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "cfg"}, "data": {"k2": "v2"}},
                                ctype="application/apply-patch+yaml")
    assert code == 200 and body["data"] == {"k": "v", "k2": "v2"}
    assert int(body["metadata"]["resourceVersion"]) > int(rv)
    # merge patch and dry run
    code, body, _ = api.request("PATCH", path + "?dryRun=All", {"data": {"k": None}},
                                ctype="application/merge-patch+json")
    assert code == 200 and body["data"] == {"k2": "v2"}
    code, body, _ = api.request("GET", path)
    assert body["data"] == {"k": "v", "k2": "v2"}
    code, body, _ = api.request("PATCH", path, {"data": {"k": None}},
                                ctype="application/merge-patch+json")
    assert code == 200 and body["data"] == {"k2": "v2"}
    code, body, _ = api.request("PATCH", path + "?force=true", {"data": {}},
                                ctype="application/merge-patch+json")
    assert code == 422 and "force: Forbidden" in body["message"]
    # SSA unknown field: 500 with smd's message, as the real apiserver
    code, body, _ = api.request("PATCH", path + "?fieldManager=uplinkd&force=true",
                                {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "cfg"}, "dta": {}},
                                ctype="application/apply-patch+yaml")
    assert code == 500
    assert body["message"] == ("failed to create typed patch object (%s/cfg; /v1, Kind="
                               "ConfigMap): .dta: field not declared in schema" % ns)
    # PUT with stale resourceVersion
    code, cur, _ = api.request("GET", path)
    cur["metadata"]["resourceVersion"] = "1"
    code, body, _ = api.request("PUT", path, cur)
    assert code == 409 and body["reason"] == "Conflict"
    # dryRun=All create stores nothing
    code, body, _ = api.request("POST", "/api/v1/namespaces/%s/configmaps?dryRun=All" % ns,
                                {"metadata": {"name": "ghost"}})
    assert code == 201 and body["metadata"]["uid"]
    assert api.request("GET", "/api/v1/namespaces/%s/configmaps/ghost" % ns)[0] == 404


def test_list_and_delete(api, ns):
    for i in range(3):
        api.request("POST", "/api/v1/namespaces/%s/secrets" % ns,
                    {"metadata": {"name": "s%d" % i, "labels": {"i": str(i)}},
                     "stringData": {"x": "y"}})
    code, body, _ = api.request("GET", "/api/v1/namespaces/%s/secrets?labelSelector=i+in+(0,2)"
                                % ns)
    assert code == 200 and body["kind"] == "SecretList"
    assert [o["metadata"]["name"] for o in body["items"]] == ["s0", "s2"]
    assert int(body["metadata"]["resourceVersion"]) >= int(body["items"][1]["metadata"]
                                                           ["resourceVersion"])
    assert body["items"][0]["data"] == {"x": "eQ=="}
    code, body, _ = api.request("GET", "/api/v1/namespaces/%s/secrets?limit=2" % ns)
    assert len(body["items"]) == 2 and body["metadata"]["continue"]
    code, body2, _ = api.request("GET", "/api/v1/namespaces/%s/secrets?limit=2&continue=%s"
                                 % (ns, body["metadata"]["continue"]))
    assert [o["metadata"]["name"] for o in body2["items"]] == ["s2"]
    code, body, _ = api.request("DELETE", "/api/v1/namespaces/%s/secrets/s1" % ns,
                                {"propagationPolicy": "Background"})
    assert code == 200 and body["status"] == "Success" and body["details"]["name"] == "s1"
    code, body, _ = api.request("DELETE", "/api/v1/namespaces/%s/secrets/s1" % ns)
    assert code == 404 and body["reason"] == "NotFound"
    code, body, _ = api.request("GET", "/api/v1/secrets?fieldSelector=metadata.namespace%%3D%s"
                                % ns)
    assert sorted(o["metadata"]["name"] for o in body["items"]) == ["s0", "s2"]
    code, body, _ = api.request("GET", "/api/v1/pods?labelSelector=a+in+(b")
    assert code == 400


# ---------------------------------------------------------------- watches

def test_watch_resume_and_selectors(fk, api, ns):
    code, lst, _ = api.request("GET", "/api/v1/namespaces/%s/configmaps" % ns)
    rv = lst["metadata"]["resourceVersion"]
    api.request("POST", "/api/v1/namespaces/%s/configmaps" % ns,
                {"metadata": {"name": "w1", "labels": {"sel": "yes"}}})
    api.request("POST", "/api/v1/namespaces/%s/configmaps" % ns,
                {"metadata": {"name": "w2"}})
    api.request("PATCH", "/api/v1/namespaces/%s/configmaps/w1" % ns, {"data": {"a": "b"}},
                ctype="application/merge-patch+json")
    r, c = Client(fk).stream("/api/v1/namespaces/%s/configmaps?watch=true&resourceVersion=%s"
                             % (ns, rv))
    assert r.status == 200 and r.getheader("Transfer-Encoding") == "chunked"
    evs = events(r, 3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("ADDED", "w1"), ("ADDED", "w2"), ("MODIFIED", "w1")]
    c.close()
    # resume after the first event only gets the later ones
    r, c = Client(fk).stream("/api/v1/namespaces/%s/configmaps?watch=1&resourceVersion=%s"
                             "&labelSelector=sel%%3Dyes"
                             % (ns, evs[0]["object"]["metadata"]["resourceVersion"]))
    evs2 = events(r, 1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs2] == [("MODIFIED", "w1")]
    # a label change out of the selector is a DELETED for this watcher
    api.request("PATCH", "/api/v1/namespaces/%s/configmaps/w1" % ns,
                {"metadata": {"labels": {"sel": "no"}}}, ctype="application/merge-patch+json")
    evs3 = events(r, 1)
    assert evs3[0]["type"] == "DELETED" and evs3[0]["object"]["metadata"]["name"] == "w1"
    c.close()
    # without resourceVersion: synthetic ADDED for the current state, timeoutSeconds ends it
    r, c = Client(fk).stream("/api/v1/namespaces/%s/configmaps?watch=1&timeoutSeconds=1" % ns)
    t0 = time.monotonic()
    body = r.read().decode().splitlines()
    assert sorted(json.loads(x)["object"]["metadata"]["name"] for x in body) == ["w1", "w2"]
    assert 0.8 < time.monotonic() - t0 < 3
    c.close()


def test_watch_410_after_compaction(fk, api, ns):
    code, lst, _ = api.request("GET", "/api/v1/namespaces/%s/pods" % ns)
    old = lst["metadata"]["resourceVersion"]
    api.request("POST", "/api/v1/namespaces/%s/configmaps" % ns, {"metadata": {"name": "x"}})
    fk.compact()
    r, c = Client(fk).stream("/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s" % (ns, old))
    assert r.status == 200
    evs = events(r, 1)
    assert evs[0]["type"] == "ERROR"
    st = evs[0]["object"]
    assert st["kind"] == "Status" and st["code"] == 410 and st["reason"] == "Expired"
    assert st["message"].startswith("too old resource version: %s (" % old)
    assert r.read() == b""          # the stream ends
    c.close()
    # a list gives a fresh resourceVersion that can be watched from
    code, lst, _ = api.request("GET", "/api/v1/namespaces/%s/pods" % ns)
    r, c = Client(fk).stream("/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s"
                             % (ns, lst["metadata"]["resourceVersion"]))
    api.request("POST", "/api/v1/namespaces/%s/pods" % ns, pod("after"))
    assert events(r, 1)[0]["type"] == "ADDED"
    c.close()


def test_watch_bookmarks(fk, api, ns):
    code, lst, _ = api.request("GET", "/api/v1/namespaces/%s/pods" % ns)
    r, c = Client(fk).stream("/api/v1/namespaces/%s/pods?watch=1&allowWatchBookmarks=true"
                             "&resourceVersion=%s" % (ns, lst["metadata"]["resourceVersion"]))
    api.request("POST", "/api/v1/namespaces/%s/configmaps" % ns, {"metadata": {"name": "bm"}})
    ev = events(r, 1, timeout=3)[0]
    assert ev["type"] == "BOOKMARK"
    assert ev["object"]["kind"] == "Pod" and ev["object"]["apiVersion"] == "v1"
    assert int(ev["object"]["metadata"]["resourceVersion"]) > int(lst["metadata"]["resourceVersion"])
    c.close()


def test_cut_watches_and_resume_without_loss(fk, api, ns):
    code, lst, _ = api.request("GET", "/api/v1/namespaces/%s/configmaps" % ns)
    r, c = Client(fk).stream("/api/v1/namespaces/%s/configmaps?watch=1&resourceVersion=%s"
                             % (ns, lst["metadata"]["resourceVersion"]))
    api.request("POST", "/api/v1/namespaces/%s/configmaps" % ns, {"metadata": {"name": "c1"}})
    e1 = events(r, 1)[0]
    fk.cut_watches()
    with pytest.raises((http.client.IncompleteRead, ConnectionError, ssl.SSLError, OSError,
                        ValueError)):
        data = r.read()
        if not data:
            raise ConnectionError("closed")
    c.close()
    api.request("POST", "/api/v1/namespaces/%s/configmaps" % ns, {"metadata": {"name": "c2"}})
    r, c = Client(fk).stream("/api/v1/namespaces/%s/configmaps?watch=1&resourceVersion=%s"
                             % (ns, e1["object"]["metadata"]["resourceVersion"]))
    evs = events(r, 1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "c2")]
    c.close()


# ---------------------------------------------------------------- faults and request log

def test_fault_injection_status_delay_and_request_log(fk, api):
    fk.clear_requests()
    fk.add_fault(status=500, count=2, path_regex="/api/v1/namespaces$")
    assert api.request("GET", "/api/v1/namespaces")[0] == 500
    code, body, _ = api.request("GET", "/api/v1/namespaces")
    assert code == 500 and body["kind"] == "Status" and body["code"] == 500
    assert api.request("GET", "/api/v1/namespaces")[0] == 200
    assert api.request("GET", "/version")[0] == 200
    fk.add_fault(status=429, count=1, retry_after=2)
    code, body, r = api.request("GET", "/api/v1/namespaces")
    assert code == 429 and r.getheader("Retry-After") == "2"
    fk.add_fault(delay=0.5, count=1, path_regex="/version")
    t0 = time.monotonic()
    assert api.request("GET", "/version")[0] == 200
    assert time.monotonic() - t0 >= 0.5
    reqs = fk.requests()
    assert [r["status"] for r in reqs] == [500, 500, 200, 200, 429, 200]
    assert reqs[0] == dict(reqs[0], method="GET", path="/api/v1/namespaces", query="",
                           auth="cert:uplink-test")
    # the same over the control endpoints (no auth needed)
    c = Client(fk, cert=False)
    code, body, _ = c.request("POST", "/fakekube/faults", {"status": 503, "count": 1,
                                                           "path_regex": "configmaps"})
    assert code == 200
    assert api.request("GET", "/api/v1/configmaps")[0] == 503
    code, body, _ = c.request("GET", "/fakekube/requests")
    assert body[-1]["status"] == 503 and body[-1]["path"] == "/api/v1/configmaps"
    assert c.request("DELETE", "/fakekube/requests")[0] == 200
    assert c.request("GET", "/fakekube/requests")[1] == []
    # big bodies for body-limit tests
    fk.add_fault(body_bytes=3_000_000, count=1)
    code, body, _ = api.request("GET", "/api/v1/pods")
    assert code == 200 and len(body["padding"]) > 2_900_000
    c.close()


def test_control_endpoints_cut_and_compact(fk, api, ns):
    c = Client(fk, cert=False)
    code, lst, _ = api.request("GET", "/api/v1/namespaces/%s/pods" % ns)
    r, sc = Client(fk).stream("/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s"
                              % (ns, lst["metadata"]["resourceVersion"]))
    assert c.request("POST", "/fakekube/cut-watches", {})[0] == 200
    with pytest.raises(Exception):
        if not r.read():
            raise ConnectionError("closed")
    sc.close()
    api.request("POST", "/api/v1/namespaces/%s/configmaps" % ns, {"metadata": {"name": "z"}})
    code, body, _ = c.request("POST", "/fakekube/compact", {})
    assert code == 200 and int(body["compacted"]) >= int(lst["metadata"]["resourceVersion"])
    r, sc = Client(fk).stream("/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s"
                              % (ns, lst["metadata"]["resourceVersion"]))
    assert events(r, 1)[0]["object"]["code"] == 410
    sc.close()
    c.close()


# ---------------------------------------------------------------- lifecycle

def test_namespace_termination_deletes_contents(fk, api):
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": "doomed"}})
    api.request("POST", "/api/v1/namespaces/doomed/pods", pod("p1"))
    api.request("POST", "/api/v1/namespaces/doomed/secrets", {"metadata": {"name": "s1"}})
    code, lst, _ = api.request("GET", "/api/v1/namespaces")
    rv = lst["metadata"]["resourceVersion"]
    r1, c1 = Client(fk).stream("/api/v1/namespaces?watch=1&resourceVersion=%s"
                               "&fieldSelector=metadata.name%%3Ddoomed" % rv)
    r2, c2 = Client(fk).stream("/api/v1/namespaces/doomed/secrets?watch=1&resourceVersion=%s" % rv)
    code, body, _ = api.request("DELETE", "/api/v1/namespaces/doomed")
    assert code == 200 and body["status"]["phase"] == "Terminating"
    evs = events(r1, 2)
    assert [e["type"] for e in evs] == ["MODIFIED", "DELETED"]
    assert evs[0]["object"]["status"]["phase"] == "Terminating"
    assert evs[0]["object"]["metadata"]["deletionTimestamp"]
    sev = events(r2, 1)
    assert sev[0]["type"] == "DELETED" and sev[0]["object"]["metadata"]["name"] == "s1"
    assert fk.get("Pod", "doomed", "p1") is None
    assert api.request("GET", "/api/v1/namespaces/doomed")[0] == 404
    code, body, _ = api.request("DELETE", "/api/v1/namespaces/default")
    assert code == 403
    c1.close()
    c2.close()


def test_pod_ready_then_terminated_with_exit_code(fk, api, ns):
    code, body, _ = api.request("POST", "/api/v1/namespaces/%s/pods" % ns, pod("job"))
    assert code == 201 and body["status"]["phase"] == "Pending"
    rv = body["metadata"]["resourceVersion"]
    r, c = Client(fk).stream("/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s" % (ns, rv))
    ev = events(r, 1)[0]
    assert ev["type"] == "MODIFIED"
    st = ev["object"]["status"]
    assert st["phase"] == "Running"
    assert {x["type"]: x["status"] for x in st["conditions"]}["Ready"] == "True"
    assert st["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert st["containerStatuses"][0]["ready"] is True
    cc = Client(fk, cert=False)
    code, body, _ = cc.request("POST", "/fakekube/pods/%s/job/terminate" % ns,
                               {"container": "main", "exitCode": 3, "reason": "Error"})
    assert code == 200
    ev = events(r, 1)[0]
    st = ev["object"]["status"]
    assert st["phase"] == "Failed"
    t = st["containerStatuses"][0]["state"]["terminated"]
    assert t["exitCode"] == 3 and t["reason"] == "Error"
    assert {x["type"]: x["status"] for x in st["conditions"]}["Ready"] == "False"
    # a clean exit through the Python API
    api.request("POST", "/api/v1/namespaces/%s/pods" % ns, pod("ok"))
    fk.wait_for(lambda: fk.get("Pod", ns, "ok")["status"]["phase"] == "Running")
    fk.terminate_pod(ns, "ok", exit_code=0)
    assert fk.get("Pod", ns, "ok")["status"]["phase"] == "Succeeded"
    c.close()
    cc.close()


def test_readiness_lost_and_regained(fk, api, ns):
    api.request("POST", "/api/v1/namespaces/%s/pods" % ns, pod("svc"))
    fk.wait_for(lambda: fk.get("Pod", ns, "svc")["status"]["phase"] == "Running")
    rv = fk.get("Pod", ns, "svc")["metadata"]["resourceVersion"]
    r, c = Client(fk).stream("/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s" % (ns, rv))
    fk.set_container_ready(ns, "svc", "main", False, reason="CrashLoopBackOff", message="back-off 10s")
    st = events(r, 1)[0]["object"]["status"]
    assert st["phase"] == "Running"  # the pod lives; its container does not answer its probe
    conds = {x["type"]: x for x in st["conditions"]}
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["reason"] == "ContainersNotReady"
    w = st["containerStatuses"][0]["state"]["waiting"]
    assert w == {"reason": "CrashLoopBackOff", "message": "back-off 10s"}
    fk.set_container_ready(ns, "svc", "main", True)
    st = events(r, 1)[0]["object"]["status"]
    assert {x["type"]: x["status"] for x in st["conditions"]}["Ready"] == "True"
    assert "running" in st["containerStatuses"][0]["state"]
    c.close()


def test_never_ready_pod_and_events(fk, api, ns):
    api.request("POST", "/api/v1/namespaces/%s/pods" % ns,
                pod("stuck", annotations={"fakekube/never-ready": "true"}))
    fk.wait_for(lambda: fk.list("Event", ns))
    p = fk.get("Pod", ns, "stuck")
    assert p["status"]["phase"] == "Pending"
    assert p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    code, body, _ = api.request("GET", "/api/v1/namespaces/%s/events?fieldSelector="
                                "involvedObject.name%%3Dstuck" % ns)
    assert {e["reason"] for e in body["items"]} >= {"BackOff"}


def test_deployment_becomes_available(fk, api, ns):
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    code, body, _ = api.request("PATCH", "/apis/apps/v1/namespaces/%s/deployments/web"
                                "?fieldManager=uplinkd&force=true" % ns, d,
                                ctype="application/apply-patch+yaml")
    assert code == 201
    fk.wait_for(lambda: fk.get("Deployment", ns, "web")["status"].get("availableReplicas") == 2)
    st = fk.get("Deployment", ns, "web")["status"]
    assert {c["type"]: c["status"] for c in st["conditions"]}["Available"] == "True"
    bad = json.loads(json.dumps(d))
    bad["metadata"]["name"] = "bad"
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    code, body, _ = api.request("POST", "/apis/apps/v1/namespaces/%s/deployments" % ns, bad)
    assert code == 422 and "`selector` does not match template `labels`" in body["message"]


def test_pod_log_follow(fk, api, ns):
    api.request("POST", "/api/v1/namespaces/%s/pods" % ns, pod("talk"))
    fk.wait_for(lambda: fk.get("Pod", ns, "talk")["status"]["phase"] == "Running")
    fk.pod_log(ns, "talk", "one\n")
    r, c = Client(fk).stream("/api/v1/namespaces/%s/pods/talk/log?follow=true" % ns)
    assert r.status == 200
    assert r.readline() == b"one\n"
    fk.pod_log(ns, "talk", "two\n")
    assert r.readline() == b"two\n"
    fk.terminate_pod(ns, "talk", exit_code=0)
    assert r.read() == b""
    c.close()


# ---------------------------------------------------------------- the service range

@needs_kubectl
def test_kubectl_get_servicecidrs(fk):
    out = json.loads(kubectl(fk, "get", "servicecidrs", "-o", "json").stdout)
    assert [(i["metadata"]["name"], i["spec"]["cidrs"]) for i in out["items"]] == \
        [("kubernetes", ["10.43.0.0/16"])]


def test_service_range_seeded_like_k3s(fk, api, ns):
    st, doc, _ = api.request("GET", "/apis/networking.k8s.io/v1/servicecidrs/kubernetes")
    assert st == 200 and doc["kind"] == "ServiceCIDR" and doc["spec"]["cidrs"] == ["10.43.0.0/16"]
    st, doc, _ = api.request("GET", "/api/v1/namespaces/default/services/kubernetes")
    assert st == 200 and doc["spec"]["clusterIP"] == "10.43.0.1"
    assert doc["spec"]["clusterIPs"] == ["10.43.0.1"]
    st, svc, _ = api.request("POST", "/api/v1/namespaces/%s/services" % ns, {
        "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
    assert st == 201 and svc["spec"]["clusterIP"].startswith("10.43.")
    st, _, _ = api.request("GET", "/apis/networking.k8s.io/v1beta1/servicecidrs")
    assert st == 404


def test_without_the_servicecidr_api(tmp_path):
    with FakeKube(str(tmp_path), service_cidrs=("10.96.0.0/12", "fd00:10:96::/112"),
                  service_cidr_api=False) as f:
        c = Client(f)
        st, doc, _ = c.request("GET", "/apis/networking.k8s.io/v1/servicecidrs")
        assert st == 404 and doc["reason"] == "NotFound"
        st, doc, _ = c.request("GET", "/apis/networking.k8s.io/v1")
        assert "servicecidrs" not in [r["name"] for r in doc["resources"]]
        st, doc, _ = c.request("GET", "/api/v1/namespaces/default/services/kubernetes")
        assert doc["spec"]["clusterIPs"] == ["10.96.0.1", "fd00:10:96::1"]
        c.close()
