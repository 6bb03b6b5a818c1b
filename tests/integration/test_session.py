"""`uplink run` end to end against the fake API server: the real daemon and client,
the real rules engine and manifests, a docker stand-in and a registry stand-in."""

import base64
import json
import re
import signal
import subprocess
import time

import pytest

from uplinktest import (REFRESH, TOKEN, Env, Registry, kube_probe, obj, only_session, run_detached, slow_builds,
                        start_in_background, uplink_bin, wait_for)


def test_run_detach_reaches_running(env):
    sid, r = run_detached(env)
    ns = f"agent-uplink-{sid}"
    assert env.session(sid)["state"] == "RUNNING", env.daemon.logs()[-4000:]
    n = obj(env.fk, "Namespace", None, ns)
    labels, ann = n["metadata"]["labels"], n["metadata"]["annotations"]
    assert labels["managed-by"] == "agent-uplink" and labels["uplink.dev/session"] == sid
    assert re.fullmatch(r"[0-9a-f]{16}", labels["uplink.dev/owner"])
    assert ann["uplink.dev/cwd"] == str(env.project) and ann["uplink.dev/agent"] == "claude"
    svc = obj(env.fk, "Service", ns, "mitm")
    agent = obj(env.fk, "Pod", ns, "agent")
    assert agent["spec"]["hostAliases"] == [{"ip": svc["spec"]["clusterIP"], "hostnames": ["mitm"]}]
    # progress reached the client as it went
    for phase in ("prepare", "build", "deploy", "start"):
        assert phase in r.stderr, r.stderr
    calls = env.docker_calls_list()
    assert any(c.startswith("build") for c in calls) and any(c.startswith("push") for c in calls)
    # the record is on disk (written asynchronously, so it may trail the answer a little)
    path = env.tmp / "state" / "uplink" / "sessions" / f"{sid}.json"
    wait_for(lambda: path.exists() and json.loads(path.read_text())["state"] == "RUNNING",
             what="the RUNNING record")
    assert json.loads(path.read_text())["namespace"] == ns


def secrets_of(fk, ns):
    return {s["metadata"]["name"]: {k: base64.b64decode(v).decode(errors="replace")
                                    for k, v in (s.get("data") or {}).items()}
            for s in fk.list("Secret", ns)}


def test_security_posture_of_the_objects(env):
    sid, _ = run_detached(env)
    ns = f"agent-uplink-{sid}"
    fk = env.fk
    pols = {p["metadata"]["name"]: p["spec"] for p in fk.list("NetworkPolicy", ns)}
    deny = pols["default-deny"]
    assert deny["podSelector"] == {} and sorted(deny["policyTypes"]) == ["Egress", "Ingress"]
    assert not deny.get("egress") and not deny.get("ingress")
    eg = pols["agent-egress"]["egress"]
    ports = [p for rule in eg for p in rule.get("ports", [])]
    assert ports == [{"protocol": "TCP", "port": 8080}], eg
    assert all(53 != p.get("port") for p in ports)
    agent = obj(fk, "Pod", ns, "agent")
    mitm = obj(fk, "Pod", ns, "mitm")
    assert agent["spec"]["runtimeClassName"] == "kata-clh"
    for pod in (agent, mitm):
        assert pod["spec"]["automountServiceAccountToken"] is False
    sc = mitm["spec"]["containers"][0]["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"] and sc["readOnlyRootFilesystem"] is True
    assert sc["runAsNonRoot"] is True and sc["seccompProfile"]["type"] == "RuntimeDefault"
    # The real token is only in the mitm's rules Secret; the CA key only in the mitm's Secret.
    secrets = secrets_of(fk, ns)
    holders = [name for name, data in secrets.items() if any(TOKEN in v for v in data.values())]
    assert holders == ["rules-json"], holders
    keys = [name for name, data in secrets.items() if any("PRIVATE KEY" in v for v in data.values())]
    assert keys == ["mitm-certs"], keys
    agent_secrets = {v["secret"]["secretName"] for v in agent["spec"]["volumes"] if "secret" in v}
    assert not agent_secrets & {"rules-json", "mitm-certs"}
    for name in agent_secrets:
        assert not any(TOKEN in v or REFRESH in v for v in secrets[name].values())
    for cm in fk.list("ConfigMap", ns):
        assert TOKEN not in json.dumps(cm)
    assert TOKEN not in json.dumps(agent)
    # The control listener's token: in the rules Secret alone, which only the mitm mounts; no
    # pod may reach the listener's port (the mitm admits the agent on 8080 only).
    ctl = secrets["rules-json"]["control-token"]
    assert re.fullmatch(r"[0-9a-f]{64}", ctl)
    assert [name for name, data in secrets.items() if any(ctl in v for v in data.values())] \
        == ["rules-json"]
    assert all(ctl not in json.dumps(o) for kind in ("Pod", "ConfigMap")
               for o in fk.list(kind, ns))
    assert "uplink_control_token=/rules/control-token" in mitm["spec"]["containers"][0]["args"]
    assert [r["ports"] for r in pols["mitm-policy"]["ingress"]] == [[{"protocol": "TCP",
                                                                     "port": 8080}]]


def test_second_run_does_not_rebuild(env):
    sid1, _ = run_detached(env)
    builds = [c for c in env.docker_calls_list() if c.startswith("build ")]
    assert len(builds) == 1
    tag = re.search(r"ctx-[0-9a-f]{16}", env.session(sid1)["image"]).group(0)
    Registry.present.add(tag)  # as a real push would have made it
    sid2, _ = run_detached(env)
    assert [c for c in env.docker_calls_list() if c.startswith("build ")] == builds
    assert env.session(sid2)["image"] == env.session(sid1)["image"]


def test_pod_that_never_gets_ready_fails_with_its_events(env):
    r = env.run("claude", "--detach", "--image", "localhost:5000/fakekube-never-ready:1", check=1)
    assert "did not become ready within 8 s" in r.stderr
    assert "ImagePullBackOff" in r.stderr
    assert "recent events:" in r.stderr
    # and nothing is left behind
    wait_for(lambda: not [n for n in env.fk.list("Namespace") if n["metadata"]["name"].startswith("agent-uplink-")],
             timeout=30, what="the namespace to go")


def test_dry_run_leaks_nothing_and_is_accepted_strictly(env, tmp_path):
    r = env.run("claude", "--dry-run", "--show-secrets", "--image", "example/agent:1", check=0)
    doc = json.loads(r.stdout)
    assert doc["kind"] == "List"
    items = doc["items"]
    assert items[0]["kind"] == "Namespace"
    assert TOKEN not in r.stderr and TOKEN not in env.daemon.logs()
    by = {(i["kind"], i["metadata"]["name"]): i for i in items}
    for (kind, name), i in by.items():
        text = json.dumps(i)
        if kind == "Secret":
            text += "".join(base64.b64decode(v).decode(errors="replace") for v in (i.get("data") or {}).values())
        if TOKEN in text:
            assert (kind, name) == ("Secret", "rules-json"), (kind, name)
    # nothing reached the cluster or docker
    assert not [n for n in env.fk.list("Namespace") if n["metadata"]["name"].startswith("agent-uplink-")]
    assert env.docker_calls_list() == []
    # the fake API server, strict as the real one, accepts every object as dry-run
    files = []
    for n, i in enumerate(items):
        p = tmp_path / f"{n:02d}.json"
        p.write_text(json.dumps(i))
        files.append(p)
    rc, lines, err = kube_probe(env.fk.kubeconfig, "apply", "--dry-run", "--sequential", *files[:1])
    assert rc == 0, (lines, err)
    env.fk.create("Namespace", None, {"metadata": {"name": items[0]["metadata"]["name"]}})
    rc, lines, err = kube_probe(env.fk.kubeconfig, "apply", "--dry-run", *files[1:])
    assert rc == 0, [l for l in lines if not l.get("ok")]
    # and so does kubectl, server-side
    stream = "\n".join(json.dumps(i) for i in items[1:])  # a JSON stream
    k = subprocess.run(["kubectl", "--kubeconfig", env.fk.kubeconfig, "apply", "--dry-run=server",
                        "-f", "-"], input=stream, capture_output=True, text=True, timeout=60)
    assert k.returncode == 0, k.stderr


def test_dry_run_redacts_secrets_and_speaks_yaml(env):
    r = env.run("claude", "--dry-run", "-o", "yaml", "--image", "example/agent:1", check=0)
    assert r.stdout.startswith("apiVersion: v1\nkind: List\n") or "kind: List" in r.stdout
    assert "<redacted:" in r.stdout and TOKEN not in r.stdout


@pytest.mark.parametrize("args,message", [
    (["claude", "--ttl", "1.5h"], "--ttl: invalid duration '1.5h'; use forms like 30m, 2h, 1d"),
    (["nosuchagent"], "unknown agent 'nosuchagent'; known: claude"),
    (["claude", "--agent-runtime-class", "Bad_Name"], "--agent-runtime-class: 'Bad_Name' is not a valid RuntimeClass name"),
    (["claude", "--mode", "nope"], "agent claude has no mode 'nope'"),
])
def test_bad_requests_are_refused_before_anything_happens(env, args, message):
    r = env.run(*args, check=1)
    assert message in r.stderr
    assert env.docker_calls_list() == []
    assert not [n for n in env.fk.list("Namespace") if n["metadata"]["name"].startswith("agent-uplink-")]


def test_cwd_outside_home_is_refused(env, tmp_path):
    r = env.run("claude", cwd=tmp_path, check=1)
    assert "is not inside your home" in r.stderr


def test_missing_credentials_say_what_to_do(env):
    (env.home / ".claude" / ".credentials.json").unlink()
    r = env.run("claude", "--detach", "--registry", env.registry, check=1)
    assert ".credentials.json" in r.stderr
    assert not [n for n in env.fk.list("Namespace") if n["metadata"]["name"].startswith("agent-uplink-")]


@pytest.mark.parametrize("state", ["BUILDING", "STARTING"])
def test_client_killed_before_running_tears_down(env, state):
    if state == "STARTING":
        env.fk.settings(ready_delay=30)
    else:
        slow_builds(env, 5)
    p = start_in_background(env)
    try:
        wait_for(lambda: (only_session(env) or {}).get("state") == state, timeout=30, what=state)
    except AssertionError as e:
        raise AssertionError(f"{e}; session: {only_session(env)}; log: {env.daemon.logs()[-3000:]}") from e
    p.send_signal(signal.SIGKILL)
    p.communicate()
    wait_for(lambda: only_session(env)["state"] == "GONE", timeout=30, what="the teardown")
    assert "went away before it was running" in only_session(env)["reason"] or \
        only_session(env)["state"] == "GONE"
    assert not [n for n in env.fk.list("Namespace") if n["metadata"]["name"].startswith("agent-uplink-")]


def test_ctrl_c_cancels_with_130(env):
    env.fk.settings(ready_delay=30)
    p = start_in_background(env)
    wait_for(lambda: (only_session(env) or {}).get("state") == "STARTING", timeout=30, what="STARTING")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 130
    assert "cancelled" in err
    wait_for(lambda: only_session(env)["state"] == "GONE", timeout=30, what="the teardown")


def test_agent_exit_code_is_recorded_and_namespace_removed(env):
    sid, _ = run_detached(env)
    env.fk.terminate_pod(f"agent-uplink-{sid}", "agent", container="main", exit_code=3, reason="Error")
    wait_for(lambda: env.session(sid)["state"] == "GONE", timeout=30, what="the session to end")
    s = env.session(sid)
    assert s["exit_code"] == 3
    assert "exited with code 3" in s["reason"] or s["state"] == "GONE"
    wait_for(lambda: env.fk.get("Namespace", None, f"agent-uplink-{sid}") is None, timeout=30,
             what="the namespace to go")


def test_attach_hands_over_to_kubectl(env, tmp_path):
    stub = tmp_path / "kubectl"
    log = tmp_path / "kubectl.log"
    stub.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {log}\nexit 0\n")
    stub.chmod(0o755)
    r = env.run("claude", "--registry", env.registry, env={"UPLINK_KUBECTL": str(stub)}, check=0)
    argv = log.read_text().splitlines()
    assert argv[argv.index("--context") + 1] == "local-k8s-admin"
    assert "exec" in argv and "-it" in argv and "agent" in argv
    assert argv[argv.index("-c") + 1] == "main"
    assert "detached; session" in r.stderr


def test_attach_killed_with_the_container_reports_the_agents_exit(env, tmp_path):
    """The agent's container ended under kubectl exec, which dies with 137 before the
    entrypoint can say the agent ended: the client still reports the agent's exit code, not
    a detach."""
    stub = tmp_path / "kubectl"
    attached, release = tmp_path / "attached", tmp_path / "release"
    stub.write_text(f"#!/bin/sh\n: > {attached}\nwhile [ ! -e {release} ]; do sleep 0.1; done\n"
                    "exit 137\n")
    stub.chmod(0o755)
    e = dict(env.daemon.env, UPLINK_KUBECTL=str(stub))
    e.pop("UPLINK_DEBUG", None)
    p = subprocess.Popen([uplink_bin(), "run", "claude", "--registry", env.registry],
                         cwd=env.project, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        wait_for(attached.exists, timeout=60, what="kubectl exec to start")
        sid = only_session(env)["id"]
        release.write_text("")   # kubectl dies first; the pod is seen to end a moment later
        time.sleep(0.5)
        env.fk.terminate_pod(f"agent-uplink-{sid}", "agent", container="main", exit_code=5,
                             reason="Error")
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 5, (out, err)
    assert "detached" not in err, err


def test_in_cluster_registry_is_set_up_and_waited_for(env, registry_5000, tmp_path):
    good = tmp_path / "registries.yaml"
    good.write_text('mirrors:\n  "localhost:5000":\n    endpoint:\n      - "http://localhost:5000"\n')
    env.daemon.stop()
    env.daemon.env["UPLINK_K3S_REGISTRIES"] = str(good)
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")
    r = env.run("claude", "--detach", check=0)
    sid = r.stdout.strip()
    assert env.session(sid)["state"] == "RUNNING"
    assert env.session(sid)["image"].startswith("localhost:5000/uplink/claude:ctx-")
    dep = obj(env.fk, "Deployment", "agent-uplink-system", "registry")
    spec = dep["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True and spec["automountServiceAccountToken"] is False
    c = spec["containers"][0]
    assert c["image"] == "registry:2"
    assert {"name": "REGISTRY_HTTP_ADDR", "value": "127.0.0.1:5000"} in c["env"]
    assert c["ports"][0]["hostPort"] == 5000
    obj(env.fk, "Service", "agent-uplink-system", "registry")
    assert any("/v2/uplink/claude/manifests/ctx-" in h for h in Registry.heads)
    # the in-cluster registry is waited for before the push
    reqs = [x for x in env.fk.requests() if "agent-uplink-system" in x["path"]]
    assert any(x["method"] == "GET" and x["path"].endswith("/deployments/registry") for x in reqs)


def test_k3s_without_the_registry_mirror_is_refused_with_the_fix(env, tmp_path):
    bad = tmp_path / "registries.yaml"
    bad.write_text("mirrors: {}\n")
    env.daemon.stop()
    env.daemon.env["UPLINK_K3S_REGISTRIES"] = str(bad)
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")
    r = env.run("claude", "--detach", check=1)
    assert f"{bad} lacks a mirror for localhost:5000" in r.stderr
    assert '  "localhost:5000":\n    endpoint:\n      - "http://localhost:5000"' in r.stderr
    assert "sudo systemctl restart k3s" in r.stderr
    assert env.docker_calls_list() == []
    assert env.fk.get("Namespace", None, "agent-uplink-system") is None


KEYRING_SENTINEL = "UPLINK-KEYRING-SENTINEL-" + "5" * 16
EXEC_SENTINEL = "UPLINK-EXEC-SENTINEL-" + "6" * 16


def planted_rules(env):
    """A rules file whose headers come from the keyring and from a command."""
    secrets = env.tmp / "secrets.json"
    secrets.write_text(json.dumps({"entries": [
        {"service": "gitlab", "username": "token", "value": KEYRING_SENTINEL}]}))
    rules = env.project / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - name: gitlab-api\n"
        "    hosts: ['gitlab\\\\.example\\\\.com']\n"
        "    inject:\n"
        "      headers:\n"
        "        PRIVATE-TOKEN: '{{keyring:gitlab:token}}'\n"
        "  - name: registry\n"
        "    hosts: ['registry\\\\.example\\\\.com']\n"
        "    inject:\n"
        "      headers:\n"
        f"        Authorization: 'Basic {{{{exec:echo {EXEC_SENTINEL}}}}}'\n")
    return {"UPLINK_SECRET_STORE": "file", "UPLINK_SECRET_FILE": str(secrets)}, rules


def test_no_secret_reaches_the_agent_or_any_output(env):
    extra_env, rules = planted_rules(env)
    env.daemon.stop()
    env.daemon.env.update(extra_env)
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")
    r = env.run("claude", "--dry-run", "--show-secrets", "--allow-exec", "--rules", "rules.yaml",
                "--image", "example/agent:1", check=0)
    items = json.loads(r.stdout)["items"]
    sentinels = (TOKEN, REFRESH, KEYRING_SENTINEL, EXEC_SENTINEL)
    agent = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "agent")
    referenced = {v.get("secret", {}).get("secretName") or v.get("configMap", {}).get("name")
                  for v in agent["spec"]["volumes"]}
    for i in items:
        text = json.dumps(i)
        if i["kind"] == "Secret":
            text += "".join(base64.b64decode(v).decode(errors="replace") for v in (i.get("data") or {}).values())
        found = [s for s in sentinels if s in text]
        if i["kind"] == "Secret" and i["metadata"]["name"] == "rules-json":
            assert set(found) == {TOKEN, KEYRING_SENTINEL, EXEC_SENTINEL}, found  # where they belong
        else:
            assert not found, (i["kind"], i["metadata"]["name"], found)
        if i["metadata"]["name"] in referenced:
            assert not found
    assert not any(s in json.dumps(agent) for s in sentinels)
    for out in (r.stderr, env.daemon.logs()):
        assert not any(s in out for s in sentinels)
    # and a real run, through the fake API server
    sid = env.run("claude", "--detach", "--allow-exec", "--rules", "rules.yaml", "--image",
                  "example/agent:1", check=0).stdout.strip()
    for sec in env.fk.list("Secret", f"agent-uplink-{sid}"):
        data = "".join(base64.b64decode(v).decode(errors="replace") for v in (sec.get("data") or {}).values())
        if sec["metadata"]["name"] != "rules-json":
            assert not any(s in data for s in sentinels), sec["metadata"]["name"]
    assert not any(s in env.daemon.logs() for s in sentinels)


def test_client_killed_while_preparing_tears_down(env):
    rules = env.project / "slow.yaml"
    rules.write_text("rules:\n  - name: slow\n    hosts: ['x\\\\.example']\n    inject:\n"
                     "      headers:\n        X-Slow: '{{exec:sleep 3; echo v}}'\n")
    p = start_in_background(env, "--allow-exec", "--rules", str(rules))
    # the placeholder's `sleep 3` holds it in PREPARING: kill it there, no sleep of our own
    wait_for(lambda: (only_session(env) or {}).get("state") == "PREPARING", timeout=30, what="PREPARING")
    p.send_signal(signal.SIGKILL)
    p.communicate()
    wait_for(lambda: only_session(env)["state"] == "GONE", timeout=30, what="the teardown")
    assert "went away before it was running" in only_session(env)["reason"]
    assert env.docker_calls_list() == []


def test_client_killed_while_deploying_tears_down(env):
    env.fk.add_fault(delay=3.0, count=1, path_regex="/api/v1/namespaces/agent-uplink-[0-9a-f]+$",
                     method="PATCH")
    p = start_in_background(env, "--image", "example/agent:1")
    wait_for(lambda: (only_session(env) or {}).get("state") == "DEPLOYING", timeout=30, what="DEPLOYING")
    p.send_signal(signal.SIGKILL)
    p.communicate()
    wait_for(lambda: only_session(env)["state"] == "GONE", timeout=30, what="the teardown")
    wait_for(lambda: not [n for n in env.fk.list("Namespace") if n["metadata"]["name"].startswith("agent-uplink-")],
             timeout=30, what="the namespace to go")


def test_deploy_context_flag_uses_that_context(env):
    env.fk.clear_requests()
    r = env.run("claude", "--detach", "--deploy-context", "fake-token", "--image", "example/agent:1", check=0)
    sid = r.stdout.strip()
    assert env.session(sid)["state"] == "RUNNING"
    applies = [x for x in env.fk.requests() if x["method"] == "PATCH" and sid in x["path"]]
    assert applies and all(x["auth"].startswith("token") for x in applies)


def test_status_line_counts_sessions(tmpdir_short, fakekube, registry):  # noqa: F811
    from uplinktest import NotifyListener  # noqa: F401
    e = Env(tmpdir_short, fakekube, registry)
    e.daemon = type(e.daemon)(tmpdir_short, notify=True, env=e.daemon.env)
    e.daemon.start()
    try:
        wait_for(lambda: '"state": "ready"' in e.daemon.client("status", "--json").stdout, what="sync")
        e.run("claude", "--detach", "--image", "example/agent:1", check=0)
        wait_for(lambda: any("STATUS=1 session running" in m.split("\n") for m in e.daemon.notify.drain()),
                 what="STATUS=1 session running")
    finally:
        e.daemon.stop()
        e.daemon.close()
