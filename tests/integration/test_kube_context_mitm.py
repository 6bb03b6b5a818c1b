"""--kube-context end to end: the real daemon renders a session exposing a fakekube context;
a real mitmdump runs the rendered mitm container's command line with the rendered Secrets
and ConfigMaps as its files (the real addon, the rules, the client certificates, the
upstream CA bundle, the session CA as its own); a client that knows only what the agent pod
gets (its kubeconfig: the server, the session CA, the placeholder token) reaches fakekube
through it, authenticated with the real token or the real client certificate. Then a real
(non-dry) session: no credential of the context in any object the agent pod references, in
the daemon's log or in the client's output."""

import base64
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from uplinktest import Env, SLOW

sys.path.insert(0, str(Path(__file__).resolve().parent / "addon"))
from addon_support import free_port, send  # noqa: E402

PLACEHOLDER = "uplink-placeholder"


@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    yield from e.running()


def secrets_of(fk):
    return {"token": open(fk.paths["token"]).read().strip(),
            "key": open(fk.paths["client.key"]).read().strip(),
            "cert": open(fk.paths["client.crt"]).read().strip()}


def materialize(obj, folder):
    """A Secret or ConfigMap as its volume shows it: one file per key."""
    folder.mkdir(parents=True)
    for key, value in obj["data"].items():
        data = base64.b64decode(value) if obj["kind"] == "Secret" else value.encode()
        (folder / key).write_bytes(data)
    return folder


class Mitm:
    """mitmdump as the rendered mitm pod runs it, its volumes as local folders."""

    def __init__(self, objs, tmp):
        pod = objs[("Pod", "mitm")]
        c = pod["spec"]["containers"][0]
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        local = {}
        for m in c["volumeMounts"]:
            v, here = volumes[m["name"]], tmp / m["name"]
            if "secret" in v:
                local[m["mountPath"]] = materialize(objs[("Secret", v["secret"]["secretName"])], here)
            elif "configMap" in v:
                local[m["mountPath"]] = materialize(objs[("ConfigMap", v["configMap"]["name"])], here)
            else:
                here.mkdir()
                local[m["mountPath"]] = here
        self.local, self.port, args = local, free_port(), []
        for a in c["command"] + c["args"]:
            key, eq, path = a.rpartition("=")  # "client_certs=/kube-client-certs", "/addon/filter.py"
            for mount, here in local.items():
                if path == mount or path.startswith(mount + "/"):
                    a = key + eq + str(here) + path[len(mount):]
                    break
            args.append(a)
        args[args.index("--listen-host") + 1] = "127.0.0.1"
        args[args.index("--listen-port") + 1] = str(self.port)
        args[0] = "/usr/bin/mitmdump"
        self.args, self.log = args, tmp / "mitm.log"
        env = dict(os.environ, TMPDIR=str(local["/tmp"]), HOME=str(local["/tmp"]),
                   PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(args, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, cwd=tmp)
        deadline = time.monotonic() + 20 * SLOW  # until a first connection succeeds
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def rendered(env, ctx):
    r = env.run("claude", "--dry-run", "--show-secrets", "--image", "example/agent:1",
                "--expose-deploy-cluster", "--kube-context", ctx, check=0)
    return {(i["kind"], i["metadata"]["name"]): i for i in json.loads(r.stdout)["items"]}


@pytest.mark.parametrize("ctx,auth", [("fake-token", "token:"), ("local-k8s-admin", "cert:uplink-test")])
def test_agent_kubeconfig_reaches_fakekube_through_the_mitm(env, tmp_path, ctx, auth):
    fk, sec = env.fk, secrets_of(env.fk)
    objs = rendered(env, ctx)
    cfg = yaml.safe_load(objs[("ConfigMap", "kube-config")]["data"]["config"])
    assert cfg["current-context"] == ctx
    cluster = cfg["clusters"][0]["cluster"]
    token = cfg["users"][0]["user"]["token"]
    assert token == PLACEHOLDER
    ca = tmp_path / "agent-kube-ca.pem"  # what kubectl in the agent trusts: the session CA
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    host, port = cluster["server"].removeprefix("https://").rsplit(":", 1)
    # kubectl reads the rendered file as it is (the agent's kubectl gets it through KUBECONFIG)
    pod_cfg = tmp_path / "agent-kubeconfig"
    pod_cfg.write_text(objs[("ConfigMap", "kube-config")]["data"]["config"])
    k = subprocess.run(["kubectl", "--kubeconfig", str(pod_cfg), "config", "view", "--raw", "-o", "json"],
                       capture_output=True, text=True, timeout=60)
    assert k.returncode == 0, k.stderr
    view = json.loads(k.stdout)
    assert view["current-context"] == ctx and view["users"][0]["user"] == {"token": PLACEHOLDER}
    assert view["clusters"][0]["cluster"]["server"] == fk.url
    mitm = Mitm(objs, tmp_path / "mitm")
    try:
        fk.clear_requests()
        r = send(mitm.port, "https", host, int(port), "GET", "/api/v1/namespaces",
                 headers=[("Authorization", "Bearer " + token), ("Accept", "application/json")],
                 trust=ca)
        assert r.connect_status == 200 and r.status == 200, (r.status, r.body, mitm.log.read_text())
        assert {n["metadata"]["name"] for n in r.json()["items"]} >= {"default", "kube-system"}
        (req,) = [q for q in fk.requests() if q["path"] == "/api/v1/namespaces"]
        assert req["auth"].startswith(auth)
        if auth == "token:":
            assert req["auth"] == "token:" + sec["token"] and req["auth_scheme"] == "Bearer"
        else:  # the placeholder token was taken off: the certificate alone authenticates
            assert req["auth_scheme"] is None
        # without the mitm's credential fakekube refuses the placeholder
        assert fk._token_ok(PLACEHOLDER) is False
        # the mitm verified fakekube against the cluster CA next to the public roots
        bundle = (mitm.local["/upstream-ca"] / "bundle.pem").read_text()
        assert bundle == open(fk.paths["ca.crt"]).read()
        log = mitm.log.read_text()
        assert '"rule": "kube-' + ctx + '"' in log or '"rule":"kube-' + ctx + '"' in log, log
    finally:
        mitm.stop()
    out = mitm.log.read_text()
    for s in sec.values():
        assert s not in out


def test_no_credential_reaches_the_agent_or_the_logs(env):
    """A real session (fakekube, the docker stand-in): the objects the agent pod references
    hold no credential of the context; neither does the daemon's log or the client's output."""
    fk, sec = env.fk, secrets_of(env.fk)
    r = env.run("claude", "-d", "--image", "example/agent:1", "--expose-deploy-cluster", "--kube-context", "fake-token", check=0)
    sid = r.stdout.strip()
    ns = "agent-uplink-" + sid
    pod = fk.get("Pod", ns, "agent")
    texts = [json.dumps(pod)]
    for v in pod["spec"]["volumes"]:
        if "configMap" in v:
            texts.append(json.dumps(fk.get("ConfigMap", ns, v["configMap"]["name"])))
        if "secret" in v:
            o = fk.get("Secret", ns, v["secret"]["secretName"])
            texts += [json.dumps(o)] + [base64.b64decode(x).decode("latin-1") for x in o.get("data", {}).values()]
    assert any(PLACEHOLDER in t for t in texts)
    # the mitm does get the token (its rules) and the client certificate is not exposed at all
    rules = base64.b64decode(fk.get("Secret", ns, "rules-json")["data"]["rules.json"]).decode()
    assert sec["token"] in rules
    env.daemon.client("stop", sid, "--wait")
    logs = env.daemon.logs()
    for s in sec.values():
        for t in texts:
            assert s not in t
        assert s not in logs and s not in r.stdout and s not in r.stderr
    # the client-certificate variant, through --dry-run without --show-secrets: nothing either
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--expose-deploy-cluster", "--kube-context", "local-k8s-admin",
                check=0)
    for s in sec.values():
        assert s not in r.stdout + r.stderr + env.daemon.logs()
