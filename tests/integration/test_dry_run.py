"""`uplink run --dry-run` as a user first types it: no --image, the in-cluster registry, the
defaults. The real daemon and client against the fake API server, a docker stand-in that
records every call, and a registry stand-in. A dry run only reads (GET) the cluster, runs no
docker, leaves no record, folder or namespace behind, says what a run would do, and prints
the objects a run applies, with documented placeholders for what only the cluster knows."""

import json
import os
import re
import socket

import pytest

from uplinktest import Env, Registry, run_detached, wait_for

MITM_IP = "<mitm-cluster-ip>"
SSH_AGENT_IP = "<ssh-agent-cluster-ip>"
IMAGE_LINE = r"image (\S+/uplink/claude:ctx-[0-9a-f]{16}): "


@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    yield from e.running()


def state_entries(env):
    d = env.tmp / "state" / "uplink" / "sessions"
    return sorted(os.listdir(d)) if d.exists() else []


def plan(r):
    """The dry run's plan lines on stderr, without the 'uplink: dry run: ' prefix."""
    p = "uplink: dry run: "
    return [line[len(p):] for line in r.stderr.splitlines() if line.startswith(p)]


def writes(env):
    return [(q["method"], q["path"]) for q in env.fk.requests() if q["method"] != "GET"]


def dry(env, *args):
    env.fk.clear_requests()
    r = env.run("claude", "--dry-run", *args, check=0)
    assert r.returncode == 0, (r.stderr, env.daemon.logs()[-3000:])
    doc = json.loads(r.stdout)
    assert doc["kind"] == "List" and doc["items"][0]["kind"] == "Namespace", r.stdout[:500]
    assert writes(env) == [], "a dry run wrote to the cluster"
    assert env.docker_calls_list() == [], "a dry run ran docker"
    return doc["items"], plan(r), r


def agent_pod(items):
    return next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "agent")


def test_plain_dry_run_only_reads_runs_no_docker_and_leaves_nothing(env):
    before = state_entries(env)
    items, lines, r = dry(env)
    assert "registry: would set up agent-uplink-system (namespace, Deployment, Service)" in lines, r.stderr
    img = [re.match(IMAGE_LINE + "(.*)", line) for line in lines]
    img = [m for m in img if m]
    assert len(img) == 1, r.stderr
    ref, what = img[0].groups()
    assert ref.startswith("localhost:5000/uplink/claude:ctx-")
    assert what.startswith("would build and push it"), what
    # the List runs the image a run would build
    main = next(c for c in agent_pod(items)["spec"]["containers"] if c["name"] == "main")
    assert main["image"] == ref
    # nothing is left behind: no record, no session folder, no namespace, no session in list
    assert state_entries(env) == before
    assert env.fk.get("Namespace", None, "agent-uplink-system") is None
    ns = items[0]["metadata"]["name"]
    assert env.fk.get("Namespace", None, ns) is None
    sid = ns.removeprefix("agent-uplink-")
    listed = env.daemon.client("list", "--all", "--json")
    assert sid not in listed.stdout, listed.stdout
    # the cluster-derived value shows as its documented placeholder
    assert {"ip": MITM_IP, "hostnames": ["mitm"]} in agent_pod(items)["spec"]["hostAliases"]


def set_up_system(env):
    """agent-uplink-system as a run leaves it: the namespace, the registry Deployment and Service."""
    env.fk.create("Namespace", None, {"metadata": {"name": "agent-uplink-system"}})
    env.fk.create("Deployment", "agent-uplink-system", {
        "metadata": {"name": "registry"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "registry"}},
                 "template": {"metadata": {"labels": {"app": "registry"}},
                              "spec": {"containers": [{"name": "registry", "image": "registry:2"}]}}}})
    env.fk.create("Service", "agent-uplink-system", {
        "metadata": {"name": "registry"},
        "spec": {"selector": {"app": "registry"}, "ports": [{"port": 5000}]}})
    wait_for(lambda: (env.fk.get("Deployment", "agent-uplink-system", "registry").get("status") or {})
             .get("availableReplicas"), what="the registry Deployment to be available")


def test_dry_run_names_what_is_missing_in_agent_uplink_system(env):
    env.fk.create("Namespace", None, {"metadata": {"name": "agent-uplink-system"}})
    _, lines, r = dry(env)
    assert "registry: would set up agent-uplink-system (Deployment, Service)" in lines, r.stderr


def test_dry_run_says_when_agent_uplink_system_cannot_be_read(env):
    env.fk.add_fault(status=403, count=None, method="GET",
                     path_regex="/namespaces/agent-uplink-system/deployments/registry")
    _, lines, r = dry(env)
    env.fk.clear_faults()
    assert any(x.startswith("registry: cannot read Deployment registry: ") for x in lines), r.stderr
    assert ("registry: a run would apply agent-uplink-system (namespace, Deployment, Service), "
            "and stop if the cluster refuses") in lines, r.stderr
    assert any(re.match(IMAGE_LINE + "would build and push it: the registry could not be looked up$", x)
               for x in lines), r.stderr


def test_dry_run_asks_the_in_cluster_registry_once_it_is_set_up(env, registry_5000):  # noqa: F811
    set_up_system(env)
    _, lines, r = dry(env)
    assert "registry: agent-uplink-system is set up and the registry is available" in lines, r.stderr
    ref, what = next(m.groups() for m in (re.match(IMAGE_LINE + "(.*)", x) for x in lines) if m)
    assert what == "would build and push it: the registry lacks it", r.stderr
    assert any(h.endswith("/v2/uplink/claude/manifests/" + ref.rsplit(":", 1)[1]) for h in Registry.heads)
    Registry.present.add(ref.rsplit(":", 1)[1])
    _, lines, r = dry(env)
    assert f"image {ref}: present in the registry; nothing to build" in lines, r.stderr


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_dry_run_with_a_registry_says_present_missing_forced_or_unreachable(env):
    _, lines, r = dry(env, "--registry", env.registry)
    ref, what = next(m.groups() for m in (re.match(IMAGE_LINE + "(.*)", x) for x in lines) if m)
    assert ref.startswith(env.registry + "/uplink/claude:ctx-")
    assert what == "would build and push it: the registry lacks it", r.stderr
    assert not [x for x in lines if x.startswith("registry:")], "--registry needs no agent-uplink-system"
    tag = ref.rsplit(":", 1)[1]
    Registry.present.add(tag)
    _, lines, r = dry(env, "--registry", env.registry)
    assert f"image {ref}: present in the registry; nothing to build" in lines, r.stderr
    _, lines, r = dry(env, "--registry", env.registry, "--force-rebuild")
    assert f"image {ref}: would rebuild and push it (--force-rebuild)" in lines, r.stderr
    port = closed_port()
    _, lines, r = dry(env, "--registry", f"127.0.0.1:{port}")
    line = next(x for x in lines if x.startswith("image "))
    assert f": a real run would stop here: cannot reach the registry at http://127.0.0.1:{port}" in line, line
    _, lines, r = dry(env, "--image", "example/agent:1")
    assert "image example/agent:1: given with --image; nothing to build" in lines, r.stderr


def test_dry_run_tells_the_k3s_registry_mirror_problem(env, tmp_path):
    bad = tmp_path / "registries.yaml"
    bad.write_text("mirrors: {}\n")
    env.daemon.stop()
    env.daemon.env["UPLINK_K3S_REGISTRIES"] = str(bad)
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")
    _, lines, r = dry(env)
    line = next((x for x in lines if "lacks a mirror for localhost:5000" in x), None)
    assert line and line.startswith("registry: a real run would stop here: "), r.stderr


def applied(env, ns):
    """What the real run applied in its namespace, from the fake API server's request log:
    (kind, name) -> the object as sent (None when the body was too long to be logged)."""
    out = {}
    for q in env.fk.requests():
        if q["method"] != "PATCH" or q["content_type"] != "application/apply-patch+yaml":
            continue
        parts = q["path"].split("/")
        if parts[-1] == ns and parts[-2] == "namespaces":
            out[("Namespace", ns)] = json.loads(q["body"])
            continue
        if f"/namespaces/{ns}/" not in q["path"]:
            continue
        try:
            body = json.loads(q["body"])
        except (TypeError, ValueError):
            body = None
        kind = body["kind"] if body else {"configmaps": "ConfigMap", "secrets": "Secret"}[parts[-2]]
        out[(kind, parts[-1])] = body
    return out


def assert_dry_run_is_what_a_run_applies(env, *extra, image_given=False):
    """The dry run's List against what a real run with the same flags applied to the fake API
    server: the same objects, and the same agent pod once the dry run's id and placeholders
    read as the run's id and its Services' cluster IPs. image_given: the run first, then a
    dry run with --image naming the image the run built."""
    if not image_given:
        items, _, _ = dry(env, "--registry", env.registry, *extra)
    env.fk.clear_requests()
    sid, r = run_detached(env, *extra)
    ns = f"agent-uplink-{sid}"
    real = applied(env, ns)
    if image_given:
        env.docker_calls.unlink()
        items, _, _ = dry(env, "--image", env.session(sid)["image"], *extra)
    dry_id = items[0]["metadata"]["name"].removeprefix("agent-uplink-")
    ips = {p: env.fk.get("Service", ns, svc)["spec"]["clusterIP"]
           for p, svc in ((MITM_IP, "mitm"), (SSH_AGENT_IP, "ssh-agent")) if env.fk.get("Service", ns, svc)}
    text = json.dumps(items).replace(dry_id, sid)
    for placeholder, ip in ips.items():
        text = text.replace(placeholder, ip)
    want = {(i["kind"], i["metadata"]["name"]): i for i in json.loads(text)}
    assert sorted(want) == sorted(real)
    got, exp = real[("Pod", "agent")]["spec"], want[("Pod", "agent")]["spec"]
    assert got["volumes"] == exp["volumes"]
    for c, e in zip(got["containers"], exp["containers"]):
        assert c["volumeMounts"] == e["volumeMounts"]
    assert got["hostAliases"] == exp["hostAliases"]
    assert {"ip": ips[MITM_IP], "hostnames": ["mitm"]} in got["hostAliases"]
    # the mounts a real run makes the host side of
    vols = {v["name"]: v for v in got["volumes"]}
    assert vols["claude-json"]["hostPath"]["path"].endswith(f"/sessions/{sid}/claude.json")
    assert "claude-project" in vols
    # and the whole pod is the same, but for what differs from one session to the next
    assert got == exp
    assert env.daemon.client("stop", sid).returncode == 0
    return got


@pytest.mark.parametrize("extra", [[], ["--debug"]])
@pytest.mark.parametrize("image_given", [False, True], ids=["built", "image-given"])
def test_dry_run_list_is_what_a_run_applies(env, extra, image_given):
    assert_dry_run_is_what_a_run_applies(env, *extra, image_given=image_given)
