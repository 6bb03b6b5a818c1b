"""`uplink doctor --json`, the checks after the Kubernetes ones: each one's ok and
fail (or warn) paths with its fix text, against fakekube, a private dbus-daemon,
gnome-keyring, the dbusmock notification server, and fake tools on PATH."""

import json
import os
import subprocess

import pytest

from uplinktest import Bus, Daemon, Rpc, wait_for

FAKE_DOCKER_OK = "#!/bin/sh\necho 24.0.7-fake\n"
FAKE_DOCKER_DOWN = ("#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                    "Is the docker daemon running?' >&2\nexit 1\n")
FAKE_DOCKER_HANGS = "#!/bin/sh\nexec /bin/sleep 30\n"
MIRROR = 'mirrors:\n  "localhost:5000":\n    endpoint:\n      - "http://localhost:5000"\n'


def fakebin(tmp, docker=FAKE_DOCKER_OK, kubectl=True):
    d = tmp / "bin"
    d.mkdir(exist_ok=True)
    if docker is not None:
        (d / "docker").write_text(docker)
        (d / "docker").chmod(0o755)
    if kubectl:
        (d / "kubectl").write_text("#!/bin/sh\nexit 0\n")
        (d / "kubectl").chmod(0o755)
    return str(d)


@pytest.fixture
def run_doctor(tmpdir_short, fakekube):
    """Starts uplinkd with the given environment and runs `uplink doctor --json`."""
    started = []

    def run(env=None, drop=(), args=(), activated=False):
        e = {"KUBECONFIG": fakekube.kubeconfig, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"}
        e.update(env or {})
        if "PATH" not in e:
            e["PATH"] = fakebin(tmpdir_short)
        d = Daemon(tmpdir_short, env=e, activated=activated)
        for name in drop:
            if name not in (env or {}):
                d.env.pop(name, None)
        d.start()
        started.append(d)
        r = d.client("doctor", "--json", "--kubeconfig", fakekube.kubeconfig, *args,
                     env={"PATH": os.environ["PATH"]})
        res = json.loads(r.stdout)
        d.stop()
        d.close()
        return r.returncode, res, d

    yield run
    for d in started:
        d.close()


def check(res, name):
    return next(c for c in res["checks"] if c["name"] == name)


def test_order_after_the_kubernetes_checks(run_doctor):
    rc, res, _ = run_doctor()
    names = [c["name"] for c in res["checks"]]
    assert names[:6] == ["kubeconfig", "deploy context", "API server", "credentials", "runtime class",
                         "registry"]
    assert names[6:] == ["kubectl", "docker", "docker daemon", "optional tools", "network policy",
                         "registries.yaml", "Secret Service", "notifications", "claude login",
                         "codex login", "gemini login", "opencode login", "uplinkd"]
    for c in res["checks"]:
        assert c["status"] in ("ok", "warn", "fail", "skip")
        if c["status"] in ("warn", "fail"):
            assert c.get("fix"), c
    assert rc == 0 and res["ok"] is True  # warns do not fail


def test_tools_ok(run_doctor, tmpdir_short):
    _, res, _ = run_doctor()
    assert check(res, "kubectl") == {"name": "kubectl", "status": "ok", "fix": None,
                                     "detail": str(tmpdir_short / "bin" / "kubectl")}
    assert check(res, "docker")["status"] == "ok"
    c = check(res, "docker daemon")
    assert c["status"] == "ok" and c["detail"] == "Docker 24.0.7-fake answers"


def test_tools_missing(run_doctor, tmpdir_short):
    empty = tmpdir_short / "empty"
    empty.mkdir()
    rc, res, _ = run_doctor(env={"PATH": str(empty)})
    assert rc == 1 and res["ok"] is False
    k = check(res, "kubectl")
    assert k["status"] == "fail" and "not on PATH" in k["detail"]
    assert "kubernetes-client" in k["fix"]
    dk = check(res, "docker")
    assert dk["status"] == "fail" and "apt install docker.io" in dk["fix"]
    assert check(res, "docker daemon")["status"] == "skip"


def test_optional_tools(run_doctor, tmpdir_short):
    d = tmpdir_short / "opt"
    d.mkdir()
    for tool in ("docker", "kubectl", "git", "ssh-keygen", "aws"):
        (d / tool).write_text(FAKE_DOCKER_OK if tool == "docker" else "#!/bin/sh\nexit 0\n")
        (d / tool).chmod(0o755)
    rc, res, _ = run_doctor(env={"PATH": str(d)})
    assert check(res, "optional tools") == {"name": "optional tools", "status": "ok", "fix": None,
                                            "detail": "git, ssh-keygen, aws"}
    (d / "aws").unlink()
    (d / "ssh-keygen").unlink()
    rc, res, _ = run_doctor(env={"PATH": str(d)})
    c = check(res, "optional tools")
    assert c["status"] == "warn" and rc == 0  # a warning: only some flags need them
    assert c["detail"] == ("not on uplinkd's PATH: ssh-keygen (for --ssh-key-dir), aws (for --aws-profiles); "
                           "the rest works without them")
    assert c["fix"] == "sudo apt install openssh-client awscli (needed only for what is named above)"


def test_docker_daemon_unreachable(run_doctor, tmpdir_short):
    rc, res, _ = run_doctor(env={"PATH": fakebin(tmpdir_short, FAKE_DOCKER_DOWN)})
    assert rc == 1
    c = check(res, "docker daemon")
    assert c["status"] == "fail"
    assert "Cannot connect to the Docker daemon" in c["detail"]
    assert "sudo systemctl enable --now docker" in c["fix"]
    rc, res, _ = run_doctor(env={"PATH": fakebin(tmpdir_short, FAKE_DOCKER_DOWN),
                                 "DOCKER_HOST": "unix:///tmp/nope.sock"})
    assert "DOCKER_HOST names (unix:///tmp/nope.sock)" in check(res, "docker daemon")["fix"]


def test_docker_daemon_hangs(run_doctor, tmpdir_short):
    rc, res, _ = run_doctor(env={"PATH": fakebin(tmpdir_short, FAKE_DOCKER_HANGS)})
    c = check(res, "docker daemon")
    assert c["status"] == "fail" and "did not answer within 5 s" in c["detail"]


def test_network_policy(run_doctor, tmp_path):
    import fakekube_kinds
    _, res, _ = run_doctor()
    c = check(res, "network policy")
    assert c["status"] == "warn" and "v1.32.4-fakekube" in c["detail"]
    assert "Calico" in c["fix"]
    old = fakekube_kinds.SERVER_VERSION["gitVersion"]
    fakekube_kinds.SERVER_VERSION["gitVersion"] = "v1.32.4+k3s1"
    try:
        _, res, _ = run_doctor()
    finally:
        fakekube_kinds.SERVER_VERSION["gitVersion"] = old
    c = check(res, "network policy")
    assert c["status"] == "ok" and "k3s (v1.32.4+k3s1)" in c["detail"]


def test_network_policy_skipped_without_a_cluster(run_doctor, tmp_path, fakekube):
    cfg = tmp_path / "dead.yaml"
    cfg.write_text(open(fakekube.kubeconfig).read().replace(fakekube.url, "https://127.0.0.1:1"))
    _, res, _ = run_doctor(args=("--kubeconfig", str(cfg)))
    assert check(res, "network policy")["status"] == "skip"


def test_registries(run_doctor, tmpdir_short):
    _, res, _ = run_doctor()
    c = check(res, "registries.yaml")
    assert c["status"] == "skip" and "not a local k3s" in c["detail"]

    reg = tmpdir_short / "registries.yaml"
    rc, res, _ = run_doctor(env={"UPLINK_K3S_REGISTRIES": str(reg)})
    c = check(res, "registries.yaml")
    assert rc == 1 and c["status"] == "fail" and "does not exist" in c["detail"]
    assert c["fix"] == (f"write this to {reg}, then restart k3s (sudo systemctl restart k3s):\n" + MIRROR)

    reg.write_text('mirrors:\n  "docker.io":\n    endpoint: ["https://mirror.example"]\n')
    _, res, _ = run_doctor(env={"UPLINK_K3S_REGISTRIES": str(reg)})
    c = check(res, "registries.yaml")
    assert c["status"] == "fail" and "no mirror for localhost:5000" in c["detail"] and MIRROR in c["fix"]

    reg.write_text("mirrors: [unclosed\n")
    _, res, _ = run_doctor(env={"UPLINK_K3S_REGISTRIES": str(reg)})
    assert "not valid YAML" in check(res, "registries.yaml")["detail"]

    reg.write_text(MIRROR)
    rc, res, _ = run_doctor(env={"UPLINK_K3S_REGISTRIES": str(reg)})
    c = check(res, "registries.yaml")
    assert c["status"] == "ok" and "has a mirror for localhost:5000" in c["detail"]


@pytest.fixture
def bus(tmpdir_short):
    b = Bus(tmpdir_short)
    yield b
    b.close()


def start_keyring(tmpdir_short, bus):
    home = tmpdir_short / "khome"
    (home / ".local" / "share").mkdir(parents=True)
    env = {**os.environ, **bus.env(), "HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"),
           "XDG_RUNTIME_DIR": str(bus.dir)}
    r = subprocess.run(["gnome-keyring-daemon", "--unlock", "--components=secrets"], input=b"pass",
                       env=env, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    conn = bus.connect()
    wait_for(lambda: conn.name_has_owner("org.freedesktop.secrets"), what="gnome-keyring on the bus")


def test_no_user_bus(run_doctor):
    _, res, _ = run_doctor()
    for name in ("Secret Service", "notifications"):
        c = check(res, name)
        assert c["status"] == "warn" and "no user D-Bus" in c["detail"]
        assert "DBUS_SESSION_BUS_ADDRESS" in c["fix"]


def test_bus_without_servers(run_doctor, bus):
    _, res, _ = run_doctor(env=bus.env())
    c = check(res, "Secret Service")
    assert c["status"] == "warn" and "no Secret Service" in c["detail"]
    assert "gnome-keyring-daemon --replace --unlock" in c["fix"]
    c = check(res, "notifications")
    assert c["status"] == "warn" and "no notification server" in c["detail"]
    assert "dunst" in c["fix"]


@pytest.mark.skipif(not os.access("/usr/bin/gnome-keyring-daemon", os.X_OK), reason="needs gnome-keyring")
def test_secret_service_unlocked_then_locked(run_doctor, bus, tmpdir_short):
    start_keyring(tmpdir_short, bus)
    _, res, _ = run_doctor(env=bus.env())
    c = check(res, "Secret Service")
    assert c["status"] == "ok" and "unlocked" in c["detail"], c
    svc = bus.connect().get_object("org.freedesktop.secrets", "/org/freedesktop/secrets")
    coll = svc.ReadAlias("default", dbus_interface="org.freedesktop.Secret.Service")
    svc.Lock([coll], dbus_interface="org.freedesktop.Secret.Service")
    _, res, _ = run_doctor(env=bus.env())
    c = check(res, "Secret Service")
    assert c["status"] == "warn" and "is locked" in c["detail"]
    assert "gnome-keyring-daemon --replace --unlock" in c["fix"]
    _, res, _ = run_doctor(env={**bus.env(), "UPLINK_SECRET_STORE": "file"})
    assert check(res, "Secret Service")["status"] == "skip"


def test_notification_server_present(run_doctor, bus):
    bus.start_server()
    _, res, _ = run_doctor(env=bus.env())
    c = check(res, "notifications")
    assert c == {"name": "notifications", "status": "ok", "fix": None,
                 "detail": "mock-notify 1.0 (test vendor)"}
    _, res, _ = run_doctor(env={**bus.env(), "UPLINK_NOTIFICATIONS": "0"})
    assert check(res, "notifications")["status"] == "skip"


def test_uplinkd_version_and_activation(run_doctor, tmpdir_short, fakekube):
    _, res, _ = run_doctor()
    c = check(res, "uplinkd")
    assert c["status"] == "warn" and "not by socket activation" in c["detail"]
    assert c["fix"] == "systemctl --user enable --now uplinkd.socket"
    # systemd-socket-activate itself is found on the daemon's PATH.
    _, res, _ = run_doctor(activated=True, env={"PATH": fakebin(tmpdir_short) + ":/usr/bin:/bin"})
    c = check(res, "uplinkd")
    assert c["status"] == "ok" and "socket-activated" in c["detail"]


def test_uplinkd_version_mismatch(tmpdir_short, fakekube):
    d = Daemon(tmpdir_short, env={"KUBECONFIG": fakekube.kubeconfig,
                                  "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"}).start()
    try:
        with Rpc(d.socket, timeout=30) as c:
            res = c.call("doctor.run", {"client_version": "0.0.1-old"})
            u = check(res, "uplinkd")
            assert u["status"] == "fail" and "the client is 0.0.1-old" in u["detail"]
            assert "systemctl --user restart uplinkd" in u["fix"]
            assert res["ok"] is False
            res = c.call("doctor.run", {})
            assert check(res, "uplinkd")["status"] == "skip"
    finally:
        assert d.stop() == 0
        d.close()


def test_human_output_prints_fixes(tmpdir_short, fakekube):
    empty = tmpdir_short / "empty"
    empty.mkdir()
    d = Daemon(tmpdir_short, env={"KUBECONFIG": fakekube.kubeconfig, "PATH": str(empty),
                                  "UPLINK_K3S_REGISTRIES": str(tmpdir_short / "none.yaml")}).start()
    try:
        r = d.client("doctor", env={"PATH": os.environ["PATH"]})
        assert r.returncode == 1
        assert "[FAIL] kubectl " in r.stdout
        assert "fix: install kubectl" in r.stdout
        assert "[FAIL] registries.yaml" in r.stdout
        assert MIRROR in r.stdout  # the file content, ready to paste
    finally:
        assert d.stop() == 0
        d.close()


# ---------------------------------------------------------------- the agents' logins

def login_doc(expires_in_s, refresh=True):
    import time
    o = {"accessToken": "sk-ant-oat01-DOCTOR-SENTINEL",
         "expiresAt": int((time.time() + expires_in_s) * 1000)}
    if refresh:
        o["refreshToken"] = "sk-ant-ort01-DOCTOR-SENTINEL"
    return json.dumps({"claudeAiOauth": o})


@pytest.mark.parametrize("text, status, words", [
    (None, "warn", "is missing"),
    ("{not json", "warn", "line 1"),
    (login_doc(3 * 3600), "ok", "more minutes; uplink refreshes it before it expires"),
    (login_doc(-630), "ok", "minutes ago; uplink refreshes it when a session starts"),
    (login_doc(-600, refresh=False), "warn", "has expired and has no refresh token"),
])
def test_claude_login(run_doctor, tmpdir_short, text, status, words):
    home = tmpdir_short / "home-doctor"
    home.mkdir(exist_ok=True)
    if text is not None:
        (home / ".claude").mkdir(exist_ok=True)
        (home / ".claude" / ".credentials.json").write_text(text)
    rc, res, _ = run_doctor(env={"HOME": str(home)})
    c = check(res, "claude login")
    assert c["status"] == status, c
    assert words in c["detail"], c
    assert (c["fix"] is None) == (status == "ok"), c
    if status != "ok":
        assert "claude" in c["fix"]
    # a missing or stale login of one agent is no failure of the machine
    assert all(x["status"] != "fail" for x in res["checks"] if x["name"].endswith(" login"))
    assert "SENTINEL" not in json.dumps(res)


def test_opencode_login(run_doctor, tmpdir_short):
    home = tmpdir_short / "home-doctor-opencode"
    auth = home / ".local" / "share" / "opencode" / "auth.json"
    auth.parent.mkdir(parents=True)
    auth.write_text(json.dumps({"openai": {"type": "api", "key": "sk-DOCTOR-SENTINEL"}}))
    rc, res, _ = run_doctor(env={"HOME": str(home)})
    c = check(res, "opencode login")
    assert c["status"] == "ok", c
    assert c["detail"].endswith("auth.json: anthropic: none; openai: an API key"), c
    auth.unlink()
    rc, res, _ = run_doctor(env={"HOME": str(home)})
    c = check(res, "opencode login")
    assert c["status"] == "warn" and "opencode auth login" in c["fix"], c


def gemini_login(expires_in_s, refresh=True):
    import time
    o = {"access_token": "ya29.DOCTOR-SENTINEL", "token_type": "Bearer",
         "expiry_date": int((time.time() + expires_in_s) * 1000)}
    if refresh:
        o["refresh_token"] = "1//DOCTOR-SENTINEL"
    return json.dumps(o)


@pytest.mark.parametrize("text, status, words", [
    (None, "warn", "oauth_creds.json is missing"),
    ("{not json", "warn", "line 1"),
    (gemini_login(3 * 3600), "ok", "more minutes; uplink refreshes it before it expires"),
    (gemini_login(-630), "ok", "minutes ago; uplink refreshes it when a session starts"),
    (gemini_login(-600, refresh=False), "warn", "has expired and has no refresh token"),
])
def test_gemini_login(run_doctor, tmpdir_short, text, status, words):
    home = tmpdir_short / "home-doctor"
    home.mkdir(exist_ok=True)
    if text is not None:
        (home / ".gemini").mkdir(exist_ok=True)
        (home / ".gemini" / "oauth_creds.json").write_text(text)
    rc, res, _ = run_doctor(env={"HOME": str(home)})
    c = check(res, "gemini login")
    assert c["status"] == status, c
    assert words in c["detail"], c
    assert (c["fix"] is None) == (status == "ok"), c
    if status != "ok":
        assert "gemini" in c["fix"] and "--api-key" in c["fix"]
    assert "SENTINEL" not in json.dumps(res)
