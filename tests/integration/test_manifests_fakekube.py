"""The session's rendered objects (daemon/manifests.c through render-probe) are what a
strict API server takes: every object applied with server-side apply, fieldValidation=Strict
and dryRun=All by uplinkd's own client, then for real, and the whole List through the
real `kubectl apply --dry-run=server -f -`."""

import copy
import json
import os
import subprocess

import pytest

from uplinktest import ROOT, build_dir, kube_probe

NS = "agent-uplink-0123456789ab"


def render(*args):
    env = dict(os.environ, UPLINK_DATA_DIR=str(ROOT))
    probe = build_dir() / "tests" / "integration" / "render-probe"
    r = subprocess.run([str(probe), *args], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "List" and doc["apiVersion"] == "v1"
    return doc


def write_all(tmp_path, items, prefix="obj"):
    files = []
    for i, obj in enumerate(items):
        p = tmp_path / f"{prefix}-{i:02d}-{obj['kind']}-{obj['metadata']['name']}.json"
        p.write_text(json.dumps(obj))
        files.append(p)
    return files


def ok(rc, lines, err):
    assert rc == 0, (lines, err)
    assert lines and all(l.get("ok") for l in lines if "op" in l), lines
    return lines


def make_namespace(fakekube, tmp_path, ns_obj):
    """Dry runs of namespaced objects need their namespace to exist, as on a real server."""
    ok(*kube_probe(fakekube.kubeconfig, "apply", *write_all(tmp_path, [ns_obj], "ns")))


def kubectl(fakekube, *args, stdin=None):
    return subprocess.run(["kubectl", "--kubeconfig", fakekube.kubeconfig, *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("variant", [[], ["--allow-dns"], ["--no-ip"], ["--ssh"], ["--ssh", "--no-ip"]])
def test_every_object_strict_dry_run_then_real(fakekube, tmp_path, variant):
    items = render("--show-secrets", *variant)["items"]
    assert items[0]["kind"] == "Namespace" and items[-1]["metadata"]["name"] == "agent"
    make_namespace(fakekube, tmp_path, items[0])
    fakekube.clear_requests()

    files = write_all(tmp_path, items)
    lines = ok(*kube_probe(fakekube.kubeconfig, "apply", "--dry-run", "--sequential", *files))
    assert len(lines) == len(items)
    patches = [r for r in fakekube.requests() if r["method"] == "PATCH"]
    assert len(patches) == len(items)
    for r in patches:
        assert "dryRun=All" in r["query"] and "fieldValidation=Strict" in r["query"]
        assert r["content_type"] == "application/apply-patch+yaml"
    assert fakekube.get("Pod", NS, "agent") is None and fakekube.get("Secret", NS, "rules-json") is None

    ok(*kube_probe(fakekube.kubeconfig, "apply", "--sequential", *files))
    agent = fakekube.get("Pod", NS, "agent")
    assert agent["spec"]["runtimeClassName"] == "kata-clh"
    assert agent["spec"]["automountServiceAccountToken"] is False
    if "--no-ip" in variant:
        assert "hostAliases" not in agent["spec"]
    elif "--ssh" in variant:
        assert agent["spec"]["hostAliases"] == [{"ip": "10.43.0.99", "hostnames": ["mitm"]},
                                                {"ip": "10.43.0.98", "hostnames": ["ssh-agent"]}]
    else:
        assert agent["spec"]["hostAliases"] == [{"ip": "10.43.0.99", "hostnames": ["mitm"]}]
    if "--ssh" in variant:
        holder = fakekube.get("Pod", NS, "ssh-agent")
        assert holder["spec"]["runtimeClassName"] == "kata-clh"
        assert holder["spec"]["automountServiceAccountToken"] is False
        sc = holder["spec"]["containers"][0]["securityContext"]
        assert sc["capabilities"]["drop"] == ["ALL"] and sc["readOnlyRootFilesystem"] is True
        assert sc["runAsUser"] == 1000 and sc["runAsNonRoot"] is True
        assert [c["name"] for c in agent["spec"]["containers"]] == ["main", "ssh-agent-relay"]
        assert fakekube.get("Service", NS, "ssh-agent")["spec"]["ports"][0]["port"] == 8765
    else:
        assert fakekube.get("Pod", NS, "ssh-agent") is None
    if "--allow-dns" in variant:
        assert agent["spec"]["dnsPolicy"] == "ClusterFirst"  # the server's default
    else:
        assert agent["spec"]["dnsPolicy"] == "None"
    mitm = fakekube.get("Pod", NS, "mitm")
    sc = mitm["spec"]["containers"][0]["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"] and sc["readOnlyRootFilesystem"] is True
    for kind, name in [(o["kind"], o["metadata"]["name"]) for o in items[1:]]:
        got = fakekube.get(kind, NS, name)
        assert got is not None, (kind, name)
        assert got["metadata"]["labels"]["uplink.dev/session"] == "0123456789ab"


def stream(items):
    """The List's items as one multi-document stream (what `-o yaml` prints, in JSON)."""
    return "".join("---\n" + json.dumps(o) + "\n" for o in items)


@pytest.mark.parametrize("variant", [[], ["--ssh"]])
def test_kubectl_server_dry_run_accepts_the_objects(fakekube, tmp_path, variant):
    doc = render("--show-secrets", *variant)
    make_namespace(fakekube, tmp_path, doc["items"][0])
    # kubectl validates a v1 List on the client against the OpenAPI schemas, which
    # fakekube does not serve; the items themselves are validated by the server, strictly.
    r = kubectl(fakekube, "apply", "--dry-run=server", "-f", "-", stdin=stream(doc["items"]))
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == len(doc["items"]), r.stdout
    assert all("(server dry run)" in line for line in out), r.stdout
    assert 'pod/agent created (server dry run)' in r.stdout
    assert 'networkpolicy.networking.k8s.io/agent-egress created (server dry run)' in r.stdout
    if variant:
        assert 'pod/ssh-agent created (server dry run)' in r.stdout
        assert 'networkpolicy.networking.k8s.io/ssh-agent-policy created (server dry run)' in r.stdout
    # kubectl validated strictly on the server side
    queries = [q["query"] for q in fakekube.requests()
               if q["method"] in ("POST", "PATCH") and "uplinkd" not in q["query"]]
    assert len(queries) == len(doc["items"]) and all("fieldValidation=Strict" in q and "dryRun=All" in q for q in queries)
    assert fakekube.get("Pod", NS, "agent") is None


def test_system_objects(fakekube, tmp_path):
    items = render("--system")["items"]
    assert [o["kind"] for o in items] == ["Namespace", "Deployment", "Service"]
    make_namespace(fakekube, tmp_path, items[0])
    ok(*kube_probe(fakekube.kubeconfig, "apply", "--dry-run", "--sequential",
                   *write_all(tmp_path, items)))
    r = kubectl(fakekube, "apply", "--dry-run=server", "-f", "-", stdin=stream(items))
    assert r.returncode == 0, r.stderr
    assert "deployment.apps/registry created (server dry run)" in r.stdout


def test_the_fake_is_strict_enough_to_mean_something(fakekube, tmp_path):
    """Control: a typo in a rendered pod, or a pod the server refuses, fails both ways."""
    items = render("--show-secrets")["items"]
    make_namespace(fakekube, tmp_path, items[0])
    bad = copy.deepcopy(items[-1])
    bad["spec"]["containers"][0]["securityContex"] = bad["spec"]["containers"][0]["securityContext"]
    rc, lines, _ = kube_probe(fakekube.kubeconfig, "apply", "--dry-run",
                              *write_all(tmp_path, [bad], "bad"))
    assert rc == 1 and "field not declared in schema" in lines[0]["error"]["message"]
    r = kubectl(fakekube, "apply", "--dry-run=server", "-f", "-", stdin=json.dumps(bad))
    assert r.returncode != 0 and 'unknown field "spec.containers[0].securityContex"' in r.stderr
    orphan = copy.deepcopy(items[-1])
    orphan["spec"]["volumes"] = [v for v in orphan["spec"]["volumes"] if v["name"] != "uplink-ca"]
    rc, lines, _ = kube_probe(fakekube.kubeconfig, "apply", "--dry-run",
                              *write_all(tmp_path, [orphan], "orphan"))
    assert rc == 1 and lines[0]["error"]["code"] == 422, lines


def test_dry_run_list_redacts_secrets():
    doc = render("--ssh")
    text = json.dumps(doc)
    assert "uplink-sentinel" not in text and "PRIVATE KEY" not in text
    secrets = [o for o in doc["items"] if o["kind"] == "Secret"]
    assert {s["metadata"]["name"] for s in secrets} >= {"rules-json", "mitm-certs", "ssh-agent-keys"}
    for s in secrets:
        for v in s["data"].values():
            assert v.startswith("<redacted: ") and v.endswith(" bytes>")
    shown = render("--show-secrets")
    assert "uplink-sentinel" not in json.dumps(shown)  # still base64 there
