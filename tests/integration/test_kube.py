"""uplinkd's Kubernetes client (kubeconfig, auth, HTTP on the loop, retries, watches)
against the fake API server, driven through kube-probe."""

import json
import os
import stat
import subprocess
import threading

import pytest

from uplinktest import kube_probe, kube_probe_bin, wait_for

NS = {"apiVersion": "v1", "kind": "Namespace",
      "metadata": {"name": "agent-uplink-0123456789ab", "labels": {"managed-by": "agent-uplink"}}}


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


def ok(lines):
    assert lines and all(l.get("ok") for l in lines if "op" in l), lines
    return lines


def test_cert_and_token_auth(fakekube):
    for ctx in ("local-k8s-admin", "fake-token"):
        rc, lines, err = kube_probe(fakekube.kubeconfig, "get", "/version", context=ctx)
        assert rc == 0, err
        assert ok(lines)[0]["object"]["gitVersion"].startswith("v1.32")
    auths = [r["auth"] for r in fakekube.requests()]
    assert auths[0].startswith("cert:") and auths[1].startswith("token")


def test_anonymous_is_refused_with_a_sentence(fakekube):
    rc, lines, _ = kube_probe(fakekube.kubeconfig, "get", "/api/v1/namespaces", context="fake-anon")
    assert rc == 1
    err = lines[0]["error"]
    assert err["code"] == 401
    assert "refused the credentials of context fake-anon" in err["message"]
    assert "renew them or pick another context" in err["message"]


def test_apply_twice_is_idempotent(fakekube, tmp_path):
    ns = write(tmp_path, "ns.json", NS)
    cm = write(tmp_path, "cm.json", {"apiVersion": "v1", "kind": "ConfigMap",
                                      "metadata": {"name": "rules", "namespace": NS["metadata"]["name"]},
                                      "data": {"a": "1"}})
    for _ in range(2):
        rc, lines, err = kube_probe(fakekube.kubeconfig, "apply", "--sequential", ns, cm)
        assert rc == 0, (lines, err)
    assert fakekube.get("ConfigMap", NS["metadata"]["name"], "rules")["data"] == {"a": "1"}
    patches = [r for r in fakekube.requests() if r["method"] == "PATCH"]
    assert len(patches) == 4
    for r in patches:
        assert r["content_type"] == "application/apply-patch+yaml"
        assert "fieldManager=uplinkd" in r["query"] and "force=true" in r["query"]
        assert "fieldValidation=Strict" in r["query"]


def test_undeclared_field_is_reported_not_retried(fakekube, tmp_path):
    # The real API server answers server-side apply of an undeclared field with a 500
    # (kubernetes/kubernetes#122480); retrying cannot help, so the client must not.
    bad = write(tmp_path, "bad.json", {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "x"}, "spec": {"finalizer": []}})
    rc, lines, _ = kube_probe(fakekube.kubeconfig, "apply", bad)
    assert rc == 1
    assert lines[0]["error"]["code"] == 500
    assert "field not declared in schema" in lines[0]["error"]["message"]
    assert len(fakekube.requests()) == 1


def test_dry_run_stores_nothing(fakekube, tmp_path):
    rc, lines, err = kube_probe(fakekube.kubeconfig, "apply", "--dry-run", write(tmp_path, "ns.json", NS))
    assert rc == 0, err
    assert fakekube.get("Namespace", None, NS["metadata"]["name"]) is None
    assert "dryRun=All" in fakekube.requests()[-1]["query"]


def test_list_with_selectors(fakekube, tmp_path):
    for i, labels in enumerate([{"managed-by": "agent-uplink", "tier": "a"},
                                {"managed-by": "agent-uplink", "tier": "b"}, {"other": "x"}]):
        fakekube.create("Namespace", None, {"metadata": {"name": f"sel-{i}", "labels": labels}})
    rc, lines, _ = kube_probe(fakekube.kubeconfig, "list", "/api/v1/namespaces",
                              "managed-by=agent-uplink,tier in (a)")
    assert rc == 0
    assert [i["metadata"]["name"] for i in lines[0]["object"]["items"]] == ["sel-0"]
    q = fakekube.requests()[-1]["query"]
    assert "labelSelector=managed-by%3Dagent-uplink%2Ctier%20in%20%28a%29" in q


def test_delete_missing_is_success(fakekube):
    rc, lines, _ = kube_probe(fakekube.kubeconfig, "delete", "/api/v1/namespaces/not-there")
    assert rc == 0 and lines == [{"op": "delete", "ok": True}]
    assert fakekube.requests()[-1]["status"] == 404


def test_500_twice_then_success(fakekube):
    fakekube.add_fault(status=500, count=2, path_regex="^/api/v1/namespaces$")
    rc, lines, err = kube_probe(fakekube.kubeconfig, "list", "/api/v1/namespaces")
    assert rc == 0, err
    statuses = [r["status"] for r in fakekube.requests() if r["path"] == "/api/v1/namespaces"]
    assert statuses == [500, 500, 200]
    assert "3 requests sent" in err


def test_429_honours_retry_after_then_succeeds(fakekube):
    fakekube.add_fault(status=429, count=1, retry_after=1, path_regex="^/version")
    rc, lines, err = kube_probe(fakekube.kubeconfig, "get", "/version")
    assert rc == 0, err
    assert [r["status"] for r in fakekube.requests()] == [429, 200]


def test_persistent_500_gives_up_with_the_status(fakekube):
    fakekube.add_fault(status=503, count=None, path_regex="^/version", message="etcd is sad")
    rc, lines, err = kube_probe(fakekube.kubeconfig, "get", "/version", timeout=120)
    assert rc == 1
    assert lines[0]["error"]["code"] == 503
    assert "etcd is sad" in lines[0]["error"]["message"]
    assert len(fakekube.requests()) == 6  # UP_KUBE_MAX_ATTEMPTS


def test_404_and_conflict_statuses_reach_the_caller(fakekube):
    rc, lines, _ = kube_probe(fakekube.kubeconfig, "get", "/api/v1/namespaces/nope")
    assert rc == 1
    e = lines[0]["error"]
    assert (e["code"], e["reason"]) == (404, "NotFound")
    assert e["message"] == 'GET /api/v1/namespaces/nope: namespaces "nope" not found (NotFound, HTTP 404)'


def test_connection_refused_is_named(tmp_path, fakekube):
    cfg = open(fakekube.kubeconfig).read().replace(fakekube.url, "https://127.0.0.1:1")
    p = tmp_path / "dead.yaml"
    p.write_text(cfg)
    rc, lines, _ = kube_probe(p, "get", "/version", timeout=120)
    assert rc == 1
    assert "cannot reach the Kubernetes API at https://127.0.0.1:1 (context local-k8s-admin" in \
        lines[0]["error"]["message"]


def test_50mb_answer_refused_by_the_limit(fakekube):
    fakekube.add_fault(body_bytes=50 * 1024 * 1024, count=1, path_regex="^/api/v1/secrets")
    rc, lines, err = kube_probe(fakekube.kubeconfig, "list", "/api/v1/secrets")
    assert rc == 1, err
    assert lines[0]["error"]["reason"] == "TooLarge"
    assert "over the limit of 16777216 bytes" in lines[0]["error"]["message"]


PLUGIN = """#!/bin/sh
n=$(cat "{dir}/runs" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "{dir}/runs"
tok=$(sed -n "${{n}}p" "{dir}/tokens"); [ -n "$tok" ] || tok=$(tail -n 1 "{dir}/tokens")
[ -n "$FAIL" ] && {{ echo "plugin: could not log in" >&2; exit 7; }}
echo "$KUBERNETES_EXEC_INFO" > "{dir}/info"
cat <<JSON
{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
 "status":{{"token":"$tok","expirationTimestamp":"$(date -u -d @$(( $(date +%s) + {ttl} )) +%Y-%m-%dT%H:%M:%SZ)"}}}}
JSON
"""


def exec_kubeconfig(fakekube, tmp_path, tokens, ttl=3600, env=None, hint=None):
    d = tmp_path / "plugin"
    d.mkdir(exist_ok=True)
    (d / "tokens").write_text("\n".join(tokens) + "\n")
    plugin = d / "plugin.sh"
    plugin.write_text(PLUGIN.format(dir=d, ttl=ttl))
    plugin.chmod(0o755)
    cfg = tmp_path / "exec.yaml"
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "plugin/plugin.sh",
                     "args": ["--cluster", "fake"], "provideClusterInfo": True,
                     "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}}
    if hint:
        user["exec"]["installHint"] = hint
    cfg.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": fakekube.url,
                                               "certificate-authority": fakekube.paths["ca.crt"]}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    return cfg, d


def runs(d):
    return int((d / "runs").read_text())


def test_exec_plugin_cached_until_expiry(fakekube, tmp_path):
    cfg, d = exec_kubeconfig(fakekube, tmp_path, [fakekube.token])
    rc, lines, err = kube_probe(cfg, "delete", "/api/v1/namespaces/a", "/api/v1/namespaces/b",
                                "/api/v1/namespaces/c", context="x")
    assert rc == 0, err
    assert runs(d) == 1
    assert all(r["auth"].startswith("token") for r in fakekube.requests())
    info = json.loads((d / "info").read_text())
    assert info["kind"] == "ExecCredential" and info["spec"]["cluster"]["server"] == fakekube.url


def test_exec_plugin_rerun_near_expiry(fakekube, tmp_path):
    # Expiring within the renewal margin: every sequential call asks again.
    cfg, d = exec_kubeconfig(fakekube, tmp_path, [fakekube.token], ttl=5)
    ns = write(tmp_path, "ns.json", NS)
    rc, _, err = kube_probe(cfg, "apply", "--sequential", ns, ns, ns, context="x")
    assert rc == 0, err
    assert runs(d) == 3


def test_exec_plugin_rerun_after_401(fakekube, tmp_path):
    fakekube.revoke_token("revoked-token")
    cfg, d = exec_kubeconfig(fakekube, tmp_path, ["revoked-token", fakekube.token])
    rc, lines, err = kube_probe(cfg, "get", "/version", context="x")
    assert rc == 0, (lines, err)
    assert runs(d) == 2
    assert [r["status"] for r in fakekube.requests()] == [401, 200]


def test_exec_plugin_failure_is_explained(fakekube, tmp_path):
    cfg, d = exec_kubeconfig(fakekube, tmp_path, [fakekube.token], env={"FAIL": "1"},
                             hint="install it with: apt install fake-plugin")
    rc, lines, _ = kube_probe(cfg, "get", "/version", context="x")
    assert rc == 1
    msg = lines[0]["error"]["message"]
    assert "exited with 7: plugin: could not log in; install it with: apt install fake-plugin" in msg
    assert fakekube.requests() == []


def test_exec_plugin_missing(fakekube, tmp_path):
    cfg, d = exec_kubeconfig(fakekube, tmp_path, [fakekube.token])
    (d / "plugin.sh").unlink()
    rc, lines, _ = kube_probe(cfg, "get", "/version", context="x")
    assert rc == 1
    assert "cannot run the exec credential plugin" in lines[0]["error"]["message"]
    assert "no such file or directory" in lines[0]["error"]["message"]


def test_token_file_reread_after_401(fakekube, tmp_path):
    tf = tmp_path / "token"
    tf.write_text("old-token\n")
    fakekube.revoke_token("old-token")
    cfg = tmp_path / "tf.yaml"
    cfg.write_text(json.dumps({
        "clusters": [{"name": "c", "cluster": {"server": fakekube.url,
                                               "certificate-authority": fakekube.paths["ca.crt"]}}],
        "users": [{"name": "u", "user": {"tokenFile": str(tf)}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    # Rotate the token while the first request is on its way.
    fakekube.add_fault(delay=0.5, count=1)
    t = threading.Timer(0.2, lambda: tf.write_text(fakekube.token + "\n"))
    t.start()
    rc, lines, err = kube_probe(cfg, "get", "/version", context="x")
    t.join()
    assert rc == 0, (lines, err)
    assert [r["status"] for r in fakekube.requests()] == [401, 200]


def probe_watch(fakekube, events, seconds=20):
    """Starts a watch in the background; returns (thread, result holder). out["lines"] fills
    as kube-probe prints them, so a test can wait for an event to have arrived."""
    out = {"lines": []}
    p = subprocess.Popen([kube_probe_bin(), "--kubeconfig", str(fakekube.kubeconfig), "watch", "Namespace",
                          "managed-by=agent-uplink", str(events), str(seconds)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run():
        for line in p.stdout:
            if line.strip():
                out["lines"].append(json.loads(line))
        out["err"] = p.stderr.read()
        out["rc"] = p.wait(timeout=seconds + 10)
    t = threading.Thread(target=run)
    t.start()
    return t, out


def probe_saw(out, name):
    return any(l.get("event") == "ADDED" and l.get("name") == name for l in out["lines"])


def make_ns(fakekube, name):
    fakekube.create("Namespace", None, {"metadata": {"name": name, "labels": {"managed-by": "agent-uplink"}}})


def watch_streams(fakekube):
    return sum(1 for r in fakekube.requests() if "watch=1" in r["query"])


def test_watch_cut_resumes_without_loss_or_duplicates(fakekube):
    make_ns(fakekube, "w-0")
    t, out = probe_watch(fakekube, events=6)
    fakekube.wait_for(lambda: watch_streams(fakekube) >= 1)
    make_ns(fakekube, "w-1")
    make_ns(fakekube, "w-2")
    wait_for(lambda: probe_saw(out, "w-2"), what="w-2 on the first stream")
    fakekube.cut_watches()
    make_ns(fakekube, "w-3")  # while no stream is open
    fakekube.wait_for(lambda: watch_streams(fakekube) >= 2)
    make_ns(fakekube, "w-4")
    make_ns(fakekube, "w-5")
    t.join()
    assert out["rc"] == 0, out["err"]
    added = [l["name"] for l in out["lines"] if l.get("event") == "ADDED"]
    assert added == ["w-0", "w-1", "w-2", "w-3", "w-4", "w-5"]
    assert sum(1 for l in out["lines"] if l.get("state") == "synced") == 1  # resumed, not re-listed
    resumed = [r for r in fakekube.requests() if "watch=1" in r["query"]][1]
    assert "resourceVersion=" in resumed["query"] and "allowWatchBookmarks=true" in resumed["query"]


def test_stale_resource_version_relists(fakekube):
    make_ns(fakekube, "s-0")
    t, out = probe_watch(fakekube, events=3)
    fakekube.wait_for(lambda: watch_streams(fakekube) >= 1)
    wait_for(lambda: probe_saw(out, "s-0"), what="s-0 listed")
    fakekube.cut_watches()
    make_ns(fakekube, "s-1")
    fakekube.compact()  # our resourceVersion is now too old: 410, then a fresh list
    make_ns(fakekube, "s-2")
    t.join()
    assert out["rc"] == 0, out["err"]
    added = [l["name"] for l in out["lines"] if l.get("event") == "ADDED"]
    assert added == ["s-0", "s-1", "s-2"]
    assert sum(1 for l in out["lines"] if l.get("state") == "synced") == 2
    lists = [r for r in fakekube.requests() if r["path"] == "/api/v1/namespaces" and "watch=1" not in r["query"]]
    assert len(lists) == 2


def test_watch_reports_deletions_and_modifications(fakekube):
    make_ns(fakekube, "d-0")
    t, out = probe_watch(fakekube, events=3)
    fakekube.wait_for(lambda: watch_streams(fakekube) >= 1)
    kube_probe(fakekube.kubeconfig, "delete", "/api/v1/namespaces/d-0")
    t.join()
    assert out["rc"] == 0, out["err"]
    events = [(l["event"], l.get("phase")) for l in out["lines"] if "event" in l]
    assert events[0] == ("ADDED", "Active")
    assert ("MODIFIED", "Terminating") in events
    assert events[-1][0] == "DELETED"


def test_pod_log_follow_line_by_line(fakekube):
    fakekube.create("Namespace", None, {"metadata": {"name": "logs"}})
    fakekube.create("Pod", "logs", {"metadata": {"name": "mitm"},
                                    "spec": {"containers": [{"name": "mitm", "image": "m"}]}})
    # A container that has not started has no log to follow (400, as the real server says).
    fakekube.wait_for(lambda: fakekube.get("Pod", "logs", "mitm")["status"].get("phase") == "Running")
    fakekube.pod_log("logs", "mitm", "first line\n", container="mitm")
    out = {}

    def run():
        out["r"] = kube_probe(fakekube.kubeconfig, "logs", "logs", "mitm", "mitm", 3, 20, timeout=30)
    t = threading.Thread(target=run)
    t.start()
    # the follow request has been answered (the fake logs it with its headers): what comes
    # next reaches the stream, or the log it reads first
    fakekube.wait_for(lambda: any("/log" in r["path"] for r in fakekube.requests()))
    fakekube.pod_log("logs", "mitm", '{"uplink":"audit","decision":"deny"}\nthird', container="mitm")
    fakekube.pod_log("logs", "mitm", " line\n", container="mitm")
    t.join()
    rc, lines, err = out["r"]
    assert rc == 0, err
    assert [l["line"] for l in lines if "line" in l] == [
        "first line", '{"uplink":"audit","decision":"deny"}', "third line"]
    q = next(r["query"] for r in fakekube.requests() if "/log" in r["path"])
    assert "follow=true" in q and "container=mitm" in q
