"""uplinkd's image module (daemon/image.c) against a REAL dockerd and a REAL
docker-registry, driven through tests/integration/image-probe.

Needs root and the Debian packages docker.io, docker-registry and busybox-static. The
engine runs with a private data root under /tmp, no bridge and no iptables changes; the
registry is bound to 127.0.0.1 on a free port with its own config. Both are started once
per session and stopped at the end (and the nsfs mount dockerd leaves under its exec-root
is unmounted). Without them the module is skipped with the reason.

`docker` on the probe's PATH is a wrapper that logs each call and execs the real one,
so a test can prove that docker was not run at all."""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from uplinktest import ROOT, SLOW, build_dir

DATA = ROOT / "tests" / "data" / "image"
REAL_DOCKER = "/usr/bin/docker"  # docker.io's CLI, matching its dockerd


def probe_bin():
    return str(build_dir() / "tests" / "integration" / "image-probe")


def wait_until(pred, timeout, what):
    """Polls a server's own answer (`docker version`, GET /v2/), stretched like uplinktest's waits."""
    timeout *= SLOW
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} not ready after {timeout}s")


def unmount_under(path):
    """Unmounts everything mounted below path, deepest first."""
    with open("/proc/self/mounts") as f:
        points = [l.split()[1] for l in f]
    for p in sorted((p for p in points if p.startswith(str(path) + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)


class Engine:
    def __init__(self, top):
        self.top = top
        self.sock = top / "d.sock"
        self.host = f"unix://{self.sock}"
        self.proc = None

    def docker(self, *args, check=True, **kw):
        env = dict(os.environ, DOCKER_HOST=self.host)
        return subprocess.run([REAL_DOCKER, *args], env=env, check=check, capture_output=True, text=True,
                              timeout=120, **kw)

    def start(self):
        self.log = open(self.top / "dockerd.log", "w")
        self.proc = subprocess.Popen(
            ["dockerd", "-H", self.host, "--data-root", str(self.top / "root"), "--exec-root",
             str(self.top / "exec"), "--pidfile", str(self.top / "dockerd.pid"), "--bridge=none",
             "--iptables=false", "--ip6tables=false", "--ip-masq=false"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(lambda: self.proc.poll() is None and
                       self.docker("version", check=False).returncode == 0, 30, "dockerd")
        except TimeoutError:
            self.stop()
            raise

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        unmount_under(self.top)


@pytest.fixture(scope="session")
def engine():
    if os.geteuid() != 0:
        pytest.skip("dockerd needs root")
    for tool, pkg in (("dockerd", "docker.io"), (REAL_DOCKER, "docker.io"),
                      ("docker-registry", "docker-registry"), ("busybox", "busybox-static")):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is missing: apt-get install {pkg}")
    top = Path(tempfile.mkdtemp(prefix="upimg-", dir="/tmp"))
    e = Engine(top)
    try:
        e.start()
    except TimeoutError:
        log = (top / "dockerd.log").read_text()[-2000:]
        shutil.rmtree(top, ignore_errors=True)
        pytest.skip(f"dockerd does not start here:\n{log}")
    try:
        # A tiny base image: busybox and a few of its links.
        rootfs = top / "rootfs"
        (rootfs / "bin").mkdir(parents=True)
        shutil.copy(shutil.which("busybox"), rootfs / "bin" / "busybox")
        for a in ("sh", "cat", "ls", "echo"):
            (rootfs / "bin" / a).symlink_to("busybox")
        tar = subprocess.run(["tar", "-C", str(rootfs), "-c", "."], capture_output=True, check=True)
        subprocess.run([REAL_DOCKER, "import", "-", "local/bb:1"], input=tar.stdout, check=True,
                       capture_output=True, timeout=60, env=dict(os.environ, DOCKER_HOST=e.host))
        yield e
    finally:
        e.stop()
        shutil.rmtree(top, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    def __init__(self, top):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.host = f"localhost:{self.port}"
        self.cfg = top / "registry.yml"
        self.cfg.write_text(
            "version: 0.1\n"
            f"storage: {{filesystem: {{rootdirectory: {top / 'data'}}}, delete: {{enabled: true}}}}\n"
            f"http: {{addr: 127.0.0.1:{self.port}}}\n")
        self.log = open(top / "registry.log", "w")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(self.cfg)], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_until(lambda: self.get("/v2/") is not None, 15, "docker-registry")

    def get(self, path):
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as r:
                return json.loads(r.read() or b"{}")
        except (urllib.error.URLError, ConnectionError):
            return None

    def tags(self, repo):
        return (self.get(f"/v2/{repo}/tags/list") or {}).get("tags") or []

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="session")
def registry(engine):
    top = Path(tempfile.mkdtemp(prefix="upreg-", dir="/tmp"))
    r = Registry(top)
    yield r
    r.stop()
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def run(engine, registry, tmp_path):
    """Returns probe(ctx, repo, *flags) -> (rc, progress events, done event, docker calls, stderr)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "docker-calls"
    wrapper = bin_dir / "docker"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {REAL_DOCKER} "$@"\n')
    wrapper.chmod(0o755)

    def probe(ctx, repo, *flags, registry_url=None):
        before = calls.read_text().splitlines() if calls.exists() else []
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
        env.pop("DOCKER_HOST", None)  # the module must pass it on (--env) itself
        cmd = [probe_bin(), "--context", str(ctx), "--repo", f"{registry.host}/uplink/{repo}",
               "--registry", registry_url or registry.url, "--log", str(tmp_path / "build.log"),
               "--env", f"DOCKER_HOST={engine.host}", *flags]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        events = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
        done = [e for e in events if e["event"] == "done"]
        after = calls.read_text().splitlines() if calls.exists() else []
        assert r.returncode != 4, f"the probe left loop handles open:\n{r.stderr}"
        return (r.returncode, [e for e in events if e["event"] == "progress"], done[0] if done else None,
                after[len(before):], r.stderr)

    probe.log = tmp_path / "build.log"
    return probe


@pytest.fixture
def ctx(tmp_path):
    d = tmp_path / "ctx"
    shutil.copytree(DATA / "basic", d, symlinks=True)
    return d


def steps(events, phase):
    return [(e["step"], e["total"], e["message"]) for e in events if e["phase"] == phase]


def test_build_push_then_reuse_then_rebuild(engine, registry, run, ctx):
    # First run: absent from the registry, so built and pushed.
    rc, events, done, calls, err = run(ctx, "reuse")
    assert rc == 0 and done["ok"], (done, err)
    assert done["built"] is True
    tag = done["tag"]
    assert tag.startswith("ctx-") and len(tag) == 20
    assert done["ref"] == f"{registry.host}/uplink/reuse:{tag}"
    assert [c.split()[0] for c in calls] == ["buildx", "build", "push"]  # auto: no buildx here, legacy
    build = steps(events, "build")
    assert build[0] == (0, 0, "docker build")
    assert build[1:] == [(1, 3, "FROM local/bb:1"), (2, 3, "COPY hello.txt /hello.txt"),
                         (3, 3, "COPY run.sh /run.sh")]
    push = steps(events, "push")
    assert push[0] == (0, 0, "docker push") and push[-1][2].startswith(f"{tag}: digest: sha256:")
    assert push[-1][0] == push[-1][1] >= 1
    assert "uplink/reuse" in registry.get("/v2/_catalog")["repositories"]
    assert registry.tags("uplink/reuse") == [tag]
    log = run.log.read_text()
    assert "Step 1/3 : FROM local/bb:1" in log and f"{tag}: digest: sha256:" in log
    # What was pushed is what was built.
    out = engine.docker("run", "--rm", "--network", "none", done["ref"], "cat", "/hello.txt")
    assert out.stdout == (ctx / "hello.txt").read_text()

    # Second run, context unchanged: the registry has it, docker is not run at all.
    rc, events, done2, calls, err = run(ctx, "reuse")
    assert rc == 0 and done2["ok"] and done2["built"] is False, (done2, err)
    assert done2["ref"] == done["ref"]
    assert calls == [] and events == []

    # A changed byte: a new tag, built and pushed.
    (ctx / "hello.txt").write_text("hello from the fixturE\n")
    rc, events, done3, calls, err = run(ctx, "reuse")
    assert rc == 0 and done3["built"] is True, (done3, err)
    assert done3["tag"] != tag
    assert sorted(registry.tags("uplink/reuse")) == sorted([tag, done3["tag"]])

    # chmod +x changes it too.
    (ctx / "hello.txt").chmod(0o755)
    rc, _, done4, calls, err = run(ctx, "reuse")
    assert rc == 0 and done4["built"] is True and done4["tag"] not in (tag, done3["tag"]), err


def test_force_rebuild(run, registry, ctx):
    rc, _, done, _, err = run(ctx, "force")
    assert rc == 0 and done["built"], err
    rc, _, again, calls, err = run(ctx, "force")
    assert again["built"] is False and calls == []
    # Forced: no registry check, a build without the cache, a push; same tag.
    rc, events, forced, calls, err = run(ctx, "force", "--force")
    assert rc == 0 and forced["built"] is True, (forced, err)
    assert forced["tag"] == done["tag"]
    build_call = [c for c in calls if c.startswith("build ")]
    assert len(build_call) == 1 and "--no-cache" in build_call[0]
    assert any(c.startswith("push ") for c in calls)
    assert registry.tags("uplink/force") == [done["tag"]]


def test_failing_build_names_step_code_and_log(run, registry, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(DATA / "bad", bad)
    rc, events, done, calls, err = run(bad, "bad", "--builder", "legacy")
    assert rc == 1 and not done["ok"], done
    assert done["name"] == "IMAGE_BUILD_FAILED"
    msg = done["error"]
    assert "docker build failed at step 3/3 (COPY missing.txt /missing.txt) with exit code 1" in msg, msg
    assert "missing.txt" in msg.split("its last lines:")[1]
    assert msg.endswith(f"full log: {run.log}")
    assert "Step 3/3 : COPY missing.txt /missing.txt" in run.log.read_text()
    assert [c.split()[0] for c in calls] == ["build"]  # no push after a failed build
    assert "uplink/bad" not in (registry.get("/v2/_catalog") or {}).get("repositories", [])


def test_buildkit(run, registry, ctx):
    (ctx / "hello.txt").write_text("buildkit\n")
    rc, events, done, calls, err = run(ctx, "bk", "--builder", "buildkit")
    assert rc == 0 and done["built"], (done, err)
    assert steps(events, "build")[1:] == [(1, 3, "FROM docker.io/local/bb:1"), (2, 3, "COPY hello.txt /hello.txt"),
                                          (3, 3, "COPY run.sh /run.sh")], events
    assert [c.split()[:4] for c in calls] == [["build", "--network", "host", "--progress=plain"],
                                              ["push", done["ref"]]]
    assert registry.tags("uplink/bk") == [done["tag"]]


def test_registry_unreachable(run, ctx):
    url = f"http://127.0.0.1:{free_port()}"
    rc, events, done, calls, err = run(ctx, "unreachable", registry_url=url)
    assert rc == 1 and not done["ok"] and done["name"] == "REGISTRY_UNREACHABLE"
    assert f"cannot reach the registry at {url}" in done["error"]
    assert "--force-rebuild" in done["error"]
    assert calls == []


def test_cancel_during_build(run, ctx):
    (ctx / "hello.txt").write_text("cancelled\n")
    rc, events, done, calls, err = run(ctx, "cancel", "--cancel-on", "build:1")
    assert rc == 3 and done is None, err
    assert steps(events, "build")[-1][0] == 1


@pytest.mark.parametrize("status,name,text", [
    (401, "REGISTRY_UNREACHABLE", "refused to say whether"),
    (500, "REGISTRY_UNREACHABLE", "answered HTTP 500"),
])
def test_registry_answers(run, ctx, status, name, text):
    """A registry that answers neither 200 nor 404: named, with what to do; docker not run."""
    import http.server
    import threading
    seen = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            seen.append((self.command, self.path, self.headers.get_all("Accept")))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        rc, _, done, calls, err = run(ctx, "answers", registry_url=url + "/")
    finally:
        srv.shutdown()
        srv.server_close()
    assert rc == 1 and done["name"] == name and text in done["error"], done
    assert url in done["error"] and "--force-rebuild" in done["error"]
    assert calls == []
    (method, path, accept), = seen
    assert method == "HEAD" and path == f"/v2/uplink/answers/manifests/{done['tag']}"
    assert "application/vnd.docker.distribution.manifest.v2+json" in accept[0]
    assert "application/vnd.oci.image.manifest.v1+json" in accept[0]
