"""pods/exec on fakekube's docker kubelet, driven by the real kubectl: its WebSocket
remote-command protocol (v5.channel.k8s.io) relayed to `docker exec`. Skipped where docker,
debootstrap or kubectl are missing."""

import fcntl
import os
import re
import select
import shutil
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


def kubectl(fk, *args, **kw):
    return subprocess.run([KUBECTL, "--kubeconfig", fk.kubeconfig, "-n", "t", *args],
                          capture_output=True, timeout=120, **kw)


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

    def send(self, data):
        os.write(self.master, data)


def test_interactive_tty_resizes_and_exit_ends_it(fk):
    t = Pty([KUBECTL, "--kubeconfig", fk.kubeconfig, "-n", "t", "exec", "-it", "p", "-c",
             "main", "--", "sh"], 31, 97)
    try:
        t.send(b"echo \"<$(stty size)>\"\r")
        assert t.expect_size() == b"31 97"
        t.winsize(42, 123)
        # the resize reaches the container's terminal; SIGWINCH is asynchronous, so ask
        # again until the answer changes (each ask waits for its own answer)
        for _ in range(50):
            t.send(b"echo \"<$(stty size)>\"\r")
            size = t.expect_size()
            if size == b"42 123":
                break
        assert size == b"42 123"
        t.send(b"exit 0\r")
        assert t.p.wait(timeout=60) == 0
    finally:
        if t.p.poll() is None:
            t.p.kill()
        os.close(t.master)
