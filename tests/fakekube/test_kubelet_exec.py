"""pods/exec on fakekube's docker kubelet, driven by the real kubectl: its WebSocket
remote-command protocol (v5.channel.k8s.io) relayed to `docker exec`. Skipped where docker,
debootstrap or kubectl are missing."""

import base64
import fcntl
import json
import os
import re
import select
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))

import fakekube_exec  # noqa: E402
from fakekube import FakeKube  # noqa: E402
from localcluster import ROOT, STATE, Dockerd, _docker_env, unavailable  # noqa: E402

IMAGE = "uplink-test/bookworm:minbase"
KUBECTL = shutil.which("kubectl", path="/usr/bin:/usr/local/bin")


@pytest.fixture(scope="module")
def dockerd():
    why = unavailable() or (None if KUBECTL else "kubectl is not installed")
    if why:
        pytest.skip("no local cluster: " + why)
    d = Dockerd(STATE).start()
    subprocess.run([str(ROOT / "tests" / "images" / "build.sh")], check=True,
                   env=_docker_env(d.host), timeout=1800)
    yield d
    d.stop()


@pytest.fixture(scope="module")
def fk(dockerd, tmp_path_factory):
    k = FakeKube(str(tmp_path_factory.mktemp("fk")), ready_delay=0, terminate_delay=0.2,
                 kubelet=dict(docker_host=dockerd.host)).start()
    k.create("Namespace", None, {"metadata": {"name": "t"}})
    k.create("Pod", "t", {"metadata": {"name": "p"}, "spec": {"restartPolicy": "Never",
                          "containers": [{"name": "main", "image": IMAGE,
                                          "command": ["sleep", "3600"]}]}})
    k.wait_for(lambda: (k.get("Pod", "t", "p") or {}).get("status", {}).get("phase")
               == "Running", timeout=120)
    yield k
    k.stop()


# client-go (kubectl 1.30+) starts reading the connection before it has registered its
# streams, so the kubelet's empty "streams are open" frame (a real kubelet sends it too) can
# arrive first and be logged as discarded. Only that line is dropped: were data discarded,
# the stdout a test expects would be missing.
OPEN_FRAME_RACE = re.compile(rb"^E\d{4} [\d:.]+ +\d+ websocket\.go:\d+\] "
                             rb"Unknown stream id \d+, discarding message\n", re.M)


def kubectl(fk, *args, **kw):
    r = subprocess.run([KUBECTL, "--kubeconfig", fk.kubeconfig, "-n", "t", *args],
                       capture_output=True, timeout=120, **kw)
    r.stderr = OPEN_FRAME_RACE.sub(b"", r.stderr)
    return r


def test_exec_prints_and_exits_zero_over_websocket(fk):
    r = kubectl(fk, "exec", "p", "-c", "main", "--", "echo", "hi")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"hi\n", b"")
    ex = [q for q in fk.requests() if q["path"].endswith("/pods/p/exec")]
    assert ex and ex[-1]["method"] == "GET" and ex[-1]["status"] == 101


def test_exit_code_and_stderr_reach_kubectl(fk):
    r = kubectl(fk, "exec", "p", "--", "sh", "-c", "echo oops >&2; exit 7")
    assert r.returncode == 7
    assert r.stderr.startswith(b"oops\n")
    assert b"command terminated with exit code 7" in r.stderr


def test_stdin_is_relayed_and_its_end_closes_it(fk):
    data = b"".join(b"line %d\n" % i for i in range(20000))   # a few frames' worth
    r = kubectl(fk, "exec", "-i", "p", "--", "cat", input=data)
    assert r.returncode == 0 and r.stdout == data


def test_missing_container_fails_clearly(fk):
    r = kubectl(fk, "exec", "p", "-c", "nope", "--", "true")
    assert r.returncode != 0 and b"container nope is not valid for pod p" in r.stderr


def test_spdy_is_refused_with_what_to_do(fk):
    env = dict(os.environ, KUBECTL_REMOTE_COMMAND_WEBSOCKETS="false")
    r = kubectl(fk, "exec", "p", "--", "true", env=env)
    assert r.returncode == 1
    assert b"over WebSocket only" in r.stderr and b"SPDY/3.1" in r.stderr


class Ws:
    """A bare RFC 6455 client, to send what kubectl never does: v4, fragments, pings."""

    def __init__(self, fk, query, proto="v4.channel.k8s.io"):
        ctx = ssl.create_default_context(cafile=fk.paths["ca.crt"])
        self.s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", fk.port)),
                                 server_hostname="127.0.0.1")
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET /api/v1/namespaces/t/pods/p/exec?%s HTTP/1.1\r\nHost: x\r\n"
                        "Authorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket"
                        "\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n"
                        "Sec-WebSocket-Protocol: %s\r\n\r\n"
                        % (query, fk.pki.token, key, proto)).encode())
        self.f = self.s.makefile("rb")
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += self.f.read(1)
        self.head = head.decode()

    def frame(self, op, data, fin=True, mask=True, length=None):
        n = len(data) if length is None else length
        b1 = (0x80 if mask else 0) | (n if n < 126 else 127)
        out = bytes([(0x80 if fin else 0) | op, b1])
        if n >= 126:
            out += struct.pack(">Q", n)
        m = os.urandom(4) if mask else b""
        body = bytes(c ^ m[i & 3] for i, c in enumerate(data)) if mask else data
        self.s.sendall(out + m + body)

    def recv(self):
        """(opcode, payload) of the next frame; None when the server closed."""
        h = self.f.read(2)
        if len(h) < 2:
            return None
        n = h[1] & 0x7F
        if n == 126:
            n = struct.unpack(">H", self.f.read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self.f.read(8))[0]
        return h[0] & 0x0F, self.f.read(n)

    def until_close(self):
        got = []
        while True:
            fr = self.recv()
            if fr is None or fr[0] == 8:
                return got, fr
            got.append(fr)


def test_v4_fragments_and_pings(fk):
    ws = Ws(fk, "command=head&command=-c&command=6&stdin=true&stdout=true&stderr=true")
    assert ws.head.startswith("HTTP/1.1 101") and "v4.channel.k8s.io" in ws.head
    ws.frame(9, b"are you there")
    ws.frame(2, b"\x00ab", fin=False)
    ws.frame(9, b"again")                  # a control frame between fragments
    ws.frame(0, b"cd", fin=False)
    ws.frame(0, b"ef")
    got, close = ws.until_close()
    assert (10, b"are you there") in got and (10, b"again") in got
    data = [p for op, p in got if op == 2]
    assert b"".join(p[1:] for p in data if p[:1] == b"\x01") == b"abcdef"
    assert json.loads(data[-1][1:]) == {"metadata": {}, "status": "Success"}
    assert close is not None


def test_unmasked_and_oversized_frames_end_the_session(fk):
    ws = Ws(fk, "command=cat&stdin=true&stdout=true", proto="v5.channel.k8s.io")
    ws.frame(2, b"\x00hi\n", mask=False)
    got, close = ws.until_close()
    assert not [p for op, p in got if p[:1] == b"\x01" and p[1:]]    # cat never saw it
    ws = Ws(fk, "command=cat&stdin=true&stdout=true", proto="v5.channel.k8s.io")
    ws.frame(2, b"", length=fakekube_exec.MAX_FRAME_BYTES + 1)
    got, close = ws.until_close()
    assert not [p for op, p in got if p[:1] == b"\x01" and p[1:]]


def test_no_known_subprotocol_is_a_bad_request(fk):
    ws = Ws(fk, "command=true&stdout=true", proto="channel.k8s.io")
    assert ws.head.startswith("HTTP/1.1 400")
    assert b"v5.channel.k8s.io" in ws.f.read(int(ws.head.split("Content-Length: ")[1]
                                                      .split("\r\n")[0]))


class Pty:
    """kubectl on a pseudo-terminal of ours, as a user's terminal would run it."""

    def __init__(self, args, rows, cols):
        self.master, slave = os.openpty()
        self.winsize(rows, cols, slave)
        self.p = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave,
                                  start_new_session=True,
                                  preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.buf = b""

    def winsize(self, rows, cols, fd=None):
        fcntl.ioctl(self.master if fd is None else fd, termios.TIOCSWINSZ,
                    struct.pack("HHHH", rows, cols, 0, 0))

    def _more(self, deadline):
        left = deadline - time.monotonic()
        assert left > 0, "not on the screen in time; it shows %r" % self.buf[-500:]
        if select.select([self.master], [], [], left)[0]:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                chunk = b""
            assert chunk, "kubectl ended; the screen shows %r" % self.buf[-500:]
            self.buf += chunk

    def expect(self, what, timeout=60):
        deadline = time.monotonic() + timeout
        while what not in self.buf:
            self._more(deadline)
        self.buf = self.buf[self.buf.index(what) + len(what):]

    def expect_size(self, timeout=60):
        """The next "<ROWS COLS>" the shell prints (not the echo of the command typed)."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(rb"<(\d+ \d+)>", self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m.group(1)
            self._more(deadline)

    def size_becomes(self, want, asks=50):
        for _ in range(asks):
            self.send(b"echo \"<$(stty size)>\"\r")
            if self.expect_size() == want:
                return True
        return False

    def send(self, data):
        os.write(self.master, data)


def test_interactive_tty_resizes_and_exit_ends_it(fk):
    t = Pty([KUBECTL, "--kubeconfig", fk.kubeconfig, "-n", "t", "exec", "-it", "p", "-c",
             "main", "--", "sh"], 31, 97)
    try:
        # docker sets the exec's terminal size just after the command starts, and a resize's
        # SIGWINCH is asynchronous: ask until the answer is right (each ask waits for its own)
        assert t.size_becomes(b"31 97")
        t.winsize(42, 123)
        assert t.size_becomes(b"42 123")
        t.send(b"exit 0\r")
        assert t.p.wait(timeout=60) == 0
    finally:
        if t.p.poll() is None:
            t.p.kill()
        os.close(t.master)


def docker_execs():
    """The `docker exec` CLIs this process (fakekube's) runs."""
    me, found = str(os.getpid()), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open("/proc/%s/stat" % pid).read()
            cmd = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and cmd[:2] == [b"docker", b"exec"]:
            found.append(pid)
    return found


def test_a_killed_kubectl_ends_its_docker_exec(fk):
    t = Pty([KUBECTL, "--kubeconfig", fk.kubeconfig, "-n", "t", "exec", "-it", "p", "--",
             "sh"], 24, 80)
    try:
        assert t.size_becomes(b"24 80")
        assert docker_execs()
        t.p.kill()
        t.p.wait()
        # without fakekube ending it, the CLI lingers for minutes (seen: 144 s)
        fk.wait_for(lambda: not docker_execs(), timeout=15)
    finally:
        if t.p.poll() is None:
            t.p.kill()
        os.close(t.master)
