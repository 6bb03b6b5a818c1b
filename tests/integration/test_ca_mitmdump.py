"""The per-session CA minted by daemon/ca.c, as the mitm pod gets it: a real mitmdump
(Debian's mitmproxy 8.1) runs the rendered mitm container's own command line with the
rendered Secrets and ConfigMaps as its files (confdir = Secret mitm-certs, the addon from
ConfigMap mitm-addon, the rules from Secret rules-json), and a client that trusts only
the certificate the agent pod gets (ConfigMap uplink-ca) reaches an HTTPS upstream
through it, with the rule's header injected."""

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from uplinktest import ROOT, SLOW, build_dir

sys.path.insert(0, str(Path(__file__).resolve().parent / "addon"))
from addon_support import PKI, REDIRECT, Echo, free_port, send, tls_client, tunnel  # noqa: E402

NS = "agent-uplink-0123456789ab"
SENTINEL = "uplink-sentinel"
ADDON_DIR = ROOT / "manifests" / "mitm"
# Test-only, loaded after filter.py: prints the file of every module the uplink addon's
# code runs from (its hooks' globals), so the test sees where mitmdump took them from.
MODULES_PROBE = """
import json, sys, types
from mitmproxy import ctx

class ModulesProbe:
    def running(self):
        f = ctx.master.addons.get("uplinkfilter")
        g = type(f).__init__.__globals__
        files = {"filter": g["__file__"]}
        files.update((k, v.__file__) for k, v in g.items()
                     if isinstance(v, types.ModuleType) and k.startswith("uplink_"))
        sys.stderr.write("uplinktest-modules " + json.dumps(files) + "\\n")
        sys.stderr.flush()

addons = [ModulesProbe()]
"""


def render():
    env = dict(os.environ, UPLINK_DATA_DIR=str(ROOT))
    probe = build_dir() / "tests" / "integration" / "render-probe"
    r = subprocess.run([str(probe), "--show-secrets"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return {(o["kind"], o["metadata"]["name"]): o for o in json.loads(r.stdout)["items"]}


def materialize(obj, folder):
    """A Secret or ConfigMap as its volume shows it: one file per key."""
    folder.mkdir(parents=True)
    for key, value in obj["data"].items():
        data = base64.b64decode(value) if obj["kind"] == "Secret" else value.encode()
        (folder / key).write_bytes(data)
    folder.chmod(0o555)
    return folder


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """mitmdump started from the rendered mitm pod; yields (objects, port, files, proc)."""
    tmp = tmp_path_factory.mktemp("ca")
    objs = render()
    pod = objs[("Pod", "mitm")]
    mounts = {m["mountPath"]: m["name"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    local = {}
    for path, name in mounts.items():
        v = volumes[name]
        if "secret" in v:
            local[path] = materialize(objs[("Secret", v["secret"]["secretName"])], tmp / name)
        elif "configMap" in v:
            local[path] = materialize(objs[("ConfigMap", v["configMap"]["name"])], tmp / name)
        else:
            local[path] = tmp / name
            local[path].mkdir()
    pki = PKI(tmp)
    echo = Echo(pki)
    port = free_port()
    c = pod["spec"]["containers"][0]
    args = []
    for a in c["command"] + c["args"]:
        key, eq, path = a.rpartition("=")  # "confdir=/mitm-confdir", "/addon/filter.py"
        for mount, here in local.items():
            if path == mount or path.startswith(mount + "/"):
                a = key + eq + str(here) + path[len(mount):]
                break
        args.append(a)
    args[args.index("--listen-host") + 1] = "127.0.0.1"
    args[args.index("--listen-port") + 1] = str(port)
    args[0] = "/usr/bin/mitmdump"
    (tmp / "modules_probe.py").write_text(MODULES_PROBE)
    args += ["-s", str(REDIRECT), "-s", str(tmp / "modules_probe.py"),
             "--set", f"uplinktest_redirect=127.0.0.1:{echo.port}",
             "--set", f"uplink_extra_ca={pki.upstream_ca}"]
    env = dict(os.environ, TMPDIR=str(local["/tmp"]), HOME=str(local["/tmp"]),
               PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    out = open(tmp / "mitm.log", "wb")
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=tmp)
    deadline = time.monotonic() + 20 * SLOW  # until a first connection succeeds
    while True:
        assert proc.poll() is None, (tmp / "mitm.log").read_text()
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            assert time.monotonic() < deadline, (tmp / "mitm.log").read_text()
            time.sleep(0.05)
    ca_crt = materialize(objs[("ConfigMap", "uplink-ca")], tmp / "agent-ca") / "ca.crt"
    yield {"objs": objs, "port": port, "ca": ca_crt, "confdir": local["/mitm-confdir"],
           "pki": pki, "log": tmp / "mitm.log", "args": args, "local": local, "pod": pod}
    proc.terminate()
    proc.wait(10)
    echo.close()


def test_client_trusting_only_the_session_ca_gets_through(session):
    r = send(session["port"], "https", "api.anthropic.com", 443, "POST", "/v1/messages",
             body=b"{}", trust=session["ca"])
    assert r.connect_status == 200 and r.status == 200, (r, session["log"].read_text())
    seen = dict((n.lower(), v) for n, v in r.json()["headers"])
    assert seen["authorization"] == "Bearer uplink-sentinel-oauth-token"


def test_leaf_is_issued_by_the_session_ca(session):
    status, _, _, sock = tunnel(session["port"], "api.anthropic.com", 443)
    assert status == 200
    tls = tls_client(session["ca"], sock, "api.anthropic.com")
    issuer = dict(x[0] for x in tls.getpeercert()["issuer"])
    tls.close()
    assert issuer["commonName"] == "uplink session 0123456789ab"
    assert issuer["organizationName"] == "uplink"


def test_a_client_trusting_another_ca_is_refused(session):
    status, _, _, sock = tunnel(session["port"], "api.anthropic.com", 443)
    assert status == 200
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_client(session["pki"].mitm_ca, sock, "api.anthropic.com")
    sock.close()


def test_mitmdump_wrote_nothing_into_its_confdir(session):
    # The Secret is mounted read-only: mitmproxy must find everything it needs there.
    assert sorted(p.name for p in session["confdir"].iterdir()) == [
        "mitmproxy-ca-cert.pem", "mitmproxy-ca.pem", "mitmproxy-dhparam.pem"]
    assert "confdir=" + str(session["confdir"]) in session["args"]


def test_no_secret_in_the_mitm_output(session):
    send(session["port"], "https", "api.anthropic.com", 443, "GET", "/", trust=session["ca"])
    log = session["log"].read_text()
    assert '"decision": "allow"' in log or '"decision":"allow"' in log, log
    assert SENTINEL not in log


def test_the_pod_carries_every_addon_module_and_mitmdump_loads_them(session):
    # Every Python file of the addon is one key of its ConfigMap, mounted next to filter.py.
    shipped = sorted(p.name for p in ADDON_DIR.glob("*.py"))
    assert "filter.py" in shipped and len(shipped) > 1
    pod = session["pod"]
    c = pod["spec"]["containers"][0]
    script = c["args"][c["args"].index("-s") + 1] if "-s" in c["args"] else None
    assert script == "/addon/filter.py", c["args"]
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/addon")
    assert mount.get("readOnly") is True and "subPath" not in mount
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    cm = session["objs"][("ConfigMap", volume["configMap"]["name"])]
    assert "items" not in volume["configMap"]
    assert sorted(cm["data"]) == shipped
    for name in shipped:
        assert cm["data"][name] == (ADDON_DIR / name).read_text(), name
    # mitmdump, started as the pod starts it, runs the addon from those files alone.
    addon = session["local"]["/addon"]
    deadline = time.monotonic() + 20 * SLOW  # until the probe's line (its running hook)
    while (line := next((ln for ln in session["log"].read_text().splitlines()
                         if ln.startswith("uplinktest-modules ")), None)) is None:
        assert time.monotonic() < deadline, session["log"].read_text()
        time.sleep(0.05)
    files = json.loads(line.split(" ", 1)[1])
    assert sorted(Path(p).name for p in files.values()) == shipped, files
    assert {Path(p).parent for p in files.values()} == {addon}, files
