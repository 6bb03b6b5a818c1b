"""Helpers shared by uplink's integration tests: find the binaries, start uplinkd
(bound by itself or under systemd-socket-activate), speak JSON-RPC to it, and
capture sd_notify datagrams."""

import array
import http.server
import json
import os
import re
import selectors
import signal
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_dir():
    d = Path(os.environ.get("UPLINK_BUILD", ROOT / "build"))
    return d if d.is_absolute() else ROOT / d


def uplinkd_bin():
    return str(build_dir() / "daemon" / "uplinkd")


def uplink_bin():
    return str(build_dir() / "client" / "uplink")


def kube_probe_bin():
    return str(build_dir() / "tests" / "integration" / "kube-probe")


def kube_probe(kubeconfig, *args, context=None, env=None, timeout=60):
    """Runs the daemon's Kubernetes client through kube-probe; returns (rc, [json lines], stderr)."""
    cmd = [kube_probe_bin(), "--kubeconfig", str(kubeconfig)]
    if context:
        cmd += ["--context", context]
    e = dict(os.environ)
    if env:
        e.update(env)
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=e)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    return r.returncode, lines, r.stderr


def sanitized():
    """True when the build under test has ASan/UBSan (valgrind cannot run it)."""
    out = subprocess.run(["meson", "introspect", "--buildoptions", str(build_dir())],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return False
    for opt in json.loads(out.stdout):
        if opt["name"] == "b_sanitize":
            return opt["value"] not in ("none", "")
    return False


# A wait's timeout only matters when what it waits for never comes; on a loaded machine (the
# suite beside other builds) everything takes longer, so each is stretched by this factor.
SLOW = float(os.environ.get("UPLINK_TEST_SLOW", "3"))


# Every test's whole run (setup and teardown included) is bounded when pytest-timeout is
# there (CI installs it): a hang is one failed test with its stacks printed, not a CI run
# cut off with nothing said. The e2e tests' first one builds the local cluster's images.
TEST_TIMEOUT = {"integration": 600, "e2e": 1200}


def bound_tests(config, items):
    if not config.pluginmanager.hasplugin("timeout"):
        return
    import pytest
    for item in items:
        if item.get_closest_marker("timeout") is None:
            kind = "e2e" if "/tests/e2e/" in str(item.fspath) else "integration"
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT[kind]))


def wait_for(pred, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout * SLOW:g}s waiting for {what}")


def read_line(proc, stream, what, timeout=30.0):
    """The first line a child prints on `stream` (a pipe): how a server says it is ready
    (dbus-daemon's --print-address, a printed port). Fails if the child exits first."""
    buf = b""
    deadline = time.monotonic() + timeout * SLOW
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise AssertionError(f"timed out waiting for {what}")
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                raise AssertionError(f"{what}: the process exited ({proc.wait()}) first")
            buf += chunk
    return buf.split(b"\n", 1)[0].decode()


class Lines:
    """Successive lines a child prints on a pipe, each waited for with a deadline: a test
    that reads a stream fails with what it waited for instead of hanging the whole run."""

    def __init__(self, proc, stream):
        self.proc, self.stream, self.buf = proc, stream, b""

    def next(self, what="a line", timeout=30.0):
        deadline = time.monotonic() + timeout * SLOW
        with selectors.DefaultSelector() as sel:
            sel.register(self.stream, selectors.EVENT_READ)
            while b"\n" not in self.buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise AssertionError(f"timed out after {timeout * SLOW:g}s waiting for {what}")
                chunk = os.read(self.stream.fileno(), 4096)
                if not chunk:
                    raise AssertionError(f"{what}: the process exited ({self.proc.wait()}) first")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode() + "\n"


def start_dbus_daemon(*args, env=None):
    """A private dbus-daemon, ready once it has printed its address (it prints it after it
    listens; its socket file exists before that). Returns (process, address)."""
    proc = subprocess.Popen(["dbus-daemon", "--nofork", "--nopidfile", "--print-address=1", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        address = read_line(proc, proc.stdout, "dbus-daemon's address")
    except AssertionError:
        proc.kill()
        proc.wait()
        raise
    return proc, address


# ---- desktop notifications: a private session bus with a mock notification server

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
MOCK = "org.freedesktop.DBus.Mock"

# A session bus with no service files: nothing gets D-Bus-activated behind the test's back.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={path}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class Bus:
    """A private session dbus-daemon, and optionally python3-dbusmock's notification_daemon
    template as the notification server (its method-call log is the capture)."""

    def __init__(self, tmp):
        self.dir = tmp / "bus"
        self.dir.mkdir(mode=0o700)
        self.path = self.dir / "bus"
        cfg = self.dir / "bus.conf"
        cfg.write_text(BUS_CONFIG.format(path=self.path))
        self.mock = None
        self.conn = None
        # Ready once it prints the address: the socket file exists before it listens.
        self.proc, self.address = start_dbus_daemon(f"--config-file={cfg}")

    def env(self):
        return {"DBUS_SESSION_BUS_ADDRESS": self.address}

    def connect(self):
        import pytest
        pytest.importorskip("dbus")  # python3-dbus: the tests that need it skip without it
        import dbus.bus
        if self.conn is None:
            self.conn = dbus.bus.BusConnection(self.address)
        return self.conn

    def start_server(self, caps="body body-markup actions"):
        env = {**os.environ, **self.env()}
        self.mock = subprocess.Popen(["/usr/bin/python3", "-m", "dbusmock", "--session", "-t",
                                      "notification_daemon", "-p", json.dumps({"capabilities": caps})],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        conn = self.connect()
        wait_for(lambda: conn.name_has_owner(NAME), what="the mock notification server")
        return self

    def server(self):
        return self.connect().get_object(NAME, PATH)

    def notify_calls(self):
        """Notify calls as (app, replaces, icon, summary, body, actions, hints, timeout)."""
        calls = self.server().GetMethodCalls("Notify", dbus_interface=MOCK)
        out = []
        for _ts, args in calls:
            app, rid, icon, summary, body, actions, hints, timeout = args
            out.append({"app": str(app), "icon": str(icon), "summary": str(summary), "body": str(body),
                        "actions": [str(a) for a in actions],
                        "urgency": int(hints["urgency"]) if "urgency" in hints else None,
                        "timeout": int(timeout)})
        return out

    def shown(self, pred, what="the Notify"):
        """The first Notify `pred` takes, waited for in the mock's call log, with the id the
        mock gave it: (id, notify_calls() entry). The mock numbers every Notify from 1 and
        logs each call once it has answered it."""
        def find():
            calls = self.notify_calls()
            return next(((i + 1, n) for i, n in enumerate(calls) if pred(n)), None)
        return wait_for(find, what=what)

    def emit(self, member, sig, args):
        """The mock server emits a signal (ActionInvoked, NotificationClosed) as its own."""
        self.server().EmitSignal(NAME, member, sig, args, dbus_interface=MOCK)

    def clear(self):
        self.server().ClearCalls(dbus_interface=MOCK)

    def close(self):
        if self.proc.stdout:
            self.proc.stdout.close()
        for p in (self.mock, self.proc):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


class Rpc:
    """A blocking JSON-RPC client on one connection."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = b""
        self.next_id = 1
        self.notifications = []

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data):
        self.sock.sendall(data if isinstance(data, bytes) else data.encode())

    def recv_msg(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("uplinkd closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call_raw(self, method, params=None, id_=None):
        if id_ is None:
            id_ = self.next_id
            self.next_id += 1
        req = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            req["params"] = params
        self.send_raw(json.dumps(req) + "\n")
        while True:
            msg = self.recv_msg()
            if "id" not in msg:
                self.notifications.append(msg)
                continue
            return msg

    def call(self, method, params=None):
        msg = self.call_raw(method, params)
        if "error" in msg:
            raise RpcError(msg["error"])
        return msg["result"]


class RpcError(Exception):
    def __init__(self, error):
        super().__init__(f"{error.get('data', {}).get('name')}: {error['message']}")
        self.error = error
        self.name = error.get("data", {}).get("name")


class NotifyListener:
    """Receives sd_notify datagrams the way systemd does (SO_PASSCRED, fds closed)."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
        self.messages = []

    def drain(self):
        while True:
            try:
                msg, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12) + socket.CMSG_SPACE(64))
            except BlockingIOError:
                return self.messages
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds = array.array("i")
                    fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
                    for fd in fds:
                        os.close(fd)
            self.messages.append(msg.decode())

    def seen(self, line):
        return any(line in m.split("\n") for m in self.drain())

    def close(self):
        self.sock.close()


class Daemon:
    """uplinkd on a private socket under `tmp`, bound by itself or socket-activated."""

    def __init__(self, tmp, activated=False, notify=False, env=None, wrapper=None, debug=True):
        self.tmp = Path(tmp)
        self.rundir = self.tmp / "run"
        self.socket = self.rundir / "uplinkd.sock"
        self.log_path = self.tmp / "uplinkd.log"
        self.activated = activated
        self.notify = NotifyListener(self.tmp / "notify.sock") if notify else None
        self.env = dict(os.environ)
        self.env.update({"UPLINK_SOCKET": str(self.socket), "HOME": str(self.tmp),
                         "XDG_RUNTIME_DIR": str(self.rundir)})
        if debug:
            self.env["UPLINK_DEBUG"] = "1"
        if self.notify:
            self.env["NOTIFY_SOCKET"] = self.notify.path
        if env:
            self.env.update(env)
        self.wrapper = wrapper or []
        self.proc = None

    def start(self, wait=True):
        cmd = self.wrapper + [uplinkd_bin()]
        if self.activated:
            self.rundir.mkdir(mode=0o700, parents=True, exist_ok=True)
            act = ["systemd-socket-activate", "-l", str(self.socket), "--fdname=api"]
            for name in ("UPLINK_SOCKET", "UPLINK_DEBUG", "XDG_RUNTIME_DIR", "NOTIFY_SOCKET",
                         "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
                if name in self.env:
                    act += ["-E", f"{name}={self.env[name]}"]
            cmd = act + cmd
        self.log = open(self.log_path, "ab")
        mark = self.log.tell()
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=self.log, stderr=self.log)
        if wait:
            self.wait_ready(mark)
        return self

    def wait_ready(self, mark=0):
        """Readiness as each start announces it: systemd-socket-activate prints "Listening on"
        once it listens (the path exists as soon as it is bound); uplinkd bound by itself is
        ready when a first request is answered (the socket file appears before listen())."""
        def alive():
            if self.proc.poll() is not None:
                raise AssertionError(f"uplinkd exited {self.proc.returncode}:\n{self.logs()}")
        if self.activated:
            line = f"Listening on {self.socket} as ".encode()

            def listening():
                alive()
                return line in self.log_path.read_bytes()[mark:]
            wait_for(listening, what="systemd-socket-activate to listen")
        else:
            def answered():
                alive()
                return self.answers()
            wait_for(answered, what="uplinkd to answer")

    def answers(self):
        try:
            with Rpc(self.socket, timeout=2) as c:
                c.call("daemon.status")
            return True
        except OSError:
            return False

    def rpc(self, timeout=10.0):
        return Rpc(self.socket, timeout=timeout)

    def client(self, *args, env=None, input=None, timeout=30, user=None):
        e = dict(self.env)
        e.pop("UPLINK_DEBUG", None)
        if env:
            e.update(env)
        cmd = [uplink_bin(), *args]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + cmd
        return subprocess.run(cmd, env=e, input=input, capture_output=True, text=True,
                              timeout=timeout)

    def logs(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        if self.notify:
            self.notify.drain()
        return rc

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.stop(signal.SIGKILL)
        if self.notify:
            self.notify.close()


class TokenServer:
    """A stand-in for the OAuth token endpoint: records each request, answers as told (`body`:
    bytes, a JSON value, or a function returning one per request)."""

    def __init__(self, tls=None):
        """TLS: a PEM file of the server's certificate and key: https, on 127.0.0.1."""
        self.requests = []
        self.status, self.body = 200, {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                outer.requests.append((self.path, dict(self.headers), self.rfile.read(n)))
                body = outer.body() if callable(outer.body) else outer.body
                body = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/v1/oauth/token"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# The `uplink run` environment most session tests share: a home with Claude credentials, the
# fake API server, a registry stand-in and a docker stand-in (the fixtures are in conftest.py).
TOKEN = "sk-ant-oat01-UPLINK-SENTINEL-" + "7" * 24
REFRESH = "sk-ant-ort01-UPLINK-SENTINEL-" + "8" * 24


class Registry(http.server.BaseHTTPRequestHandler):
    """A registry stand-in: HEAD of a manifest answers 404 until told the tag exists."""
    present = set()
    heads = []

    def do_HEAD(self):  # noqa: N802
        Registry.heads.append(self.path)
        tag = self.path.rsplit("/", 1)[-1]
        self.send_response(200 if tag in Registry.present else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


class Env:
    def __init__(self, tmp, fakekube, registry):
        self.tmp = tmp
        self.fk = fakekube
        self.home = tmp / "home"
        self.project = self.home / "proj"
        self.project.mkdir(parents=True)
        claude = self.home / ".claude"
        claude.mkdir()
        (claude / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {
            "accessToken": TOKEN, "refreshToken": REFRESH,
            "expiresAt": int((time.time() + 30 * 86400) * 1000), "scopes": ["user:inference"],
            "subscriptionType": "pro"}}))
        (claude / "settings.json").write_text(json.dumps({"model": "opus"}))
        (tmp / "machine-id").write_text("0123456789abcdef0123456789abcdef\n")
        self.docker_calls = tmp / "docker-calls"
        self.registry = f"127.0.0.1:{registry.server_address[1]}"
        self.daemon = Daemon(tmp, env={
            "HOME": str(self.home), "KUBECONFIG": fakekube.kubeconfig, "UPLINK_DATA_DIR": str(ROOT),
            "XDG_STATE_HOME": str(tmp / "state"), "UPLINK_MACHINE_ID_FILE": str(tmp / "machine-id"),
            "UPLINK_DOCKER": str(ROOT / "tests" / "data" / "image" / "fake-docker"),
            "FAKE_DOCKER_CALLS": str(self.docker_calls), "UPLINK_START_TIMEOUT_S": "8",
            })

    def run(self, *args, cwd=None, timeout=120, env=None, check=None):
        e = dict(self.daemon.env)
        e.pop("UPLINK_DEBUG", None)
        if env:
            e.update(env)
        r = subprocess.run([uplink_bin(), "run", *args], cwd=cwd or self.project, env=e,
                           capture_output=True, text=True, timeout=timeout)
        if check is not None:
            assert r.returncode == check, (r.returncode, r.stdout, r.stderr, self.daemon.logs()[-3000:])
        return r

    def running(self):
        """Starts the daemon, waits for the deploy cluster, yields; then stops it cleanly (a
        fixture's body: `yield from env.running()`)."""
        self.daemon.start()
        wait_for(lambda: self.daemon.client("status", "--json").stdout.find('"state": "ready"') >= 0,
                 what="the deploy cluster to sync")
        yield self
        rc = self.daemon.stop()
        self.daemon.close()
        assert rc == 0, self.daemon.logs()[-3000:]

    def docker_calls_list(self):
        return self.docker_calls.read_text().splitlines() if self.docker_calls.exists() else []

    def session(self, sid):
        with Rpc(self.daemon.socket) as c:
            return c.call("session.get", {"id": sid})


def run_detached(env, *extra):
    r = env.run("claude", "--detach", "--registry", env.registry, *extra, check=0)
    sid = r.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{12}", sid), r.stdout
    return sid, r


def obj(fk, kind, ns, name):
    o = fk.get(kind, ns, name)
    assert o is not None, f"{kind} {ns}/{name} missing"
    return o


def start_in_background(env, *extra, env_add=None):
    e = dict(env.daemon.env)
    e.pop("UPLINK_DEBUG", None)
    e.update(env_add or {})
    return subprocess.Popen([uplink_bin(), "run", "claude", "--detach", "--registry", env.registry, *extra],
                            cwd=env.project, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def slow_builds(env, seconds):
    """docker runs as the daemon's child: the stand-in's delay goes into the daemon's environment."""
    env.daemon.stop()
    env.daemon.env["FAKE_DOCKER_SLEEP"] = str(seconds)
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")


def only_session(env):
    with Rpc(env.daemon.socket) as c:
        ss = c.call("session.list", {"all": True})["sessions"]
    return ss[0] if ss else None
