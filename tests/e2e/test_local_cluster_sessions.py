"""Sessions that outlive their parts, on the local cluster (localcluster.py), with the real
uplinkd and images: the daemon killed and restarted under a running session, the client
killed while the pods start, the login token renewed while the agent runs."""

import os
import pty
import re
import select
import signal
import subprocess
import time

import pytest

from localcluster import ANSWER, RENEWED
from test_local_cluster import (AS_USER, REFRESH, TOKEN, UID, agent_containers, end_daemon,
                                run_detached, uplink, user_daemon, wait_until_synced)
from uplinktest import uplink_bin, wait_for

MITM = ["--mitmproxy-image", "uplink-test/mitmproxy:8"]
ESCAPES = re.compile(r"\x1b(\[[0-9;?>=!]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|.)")


@pytest.fixture(scope="module")
def daemon(local):
    d = user_daemon(local)
    yield d
    end_daemon(d)


def text_of(screen):
    """What a terminal shows of SCREEN's bytes, roughly: escape sequences dropped."""
    return ESCAPES.sub(" ", screen)


def words(text):
    return set(re.findall(r"[A-Za-z]{6,}", text))


def agent_pane(cluster, cid):
    """The agent's tmux pane, as its user sees it."""
    return cluster.docker("exec", "-u", str(UID), cid, "tmux", "-S", "/run/uplink/tmux.sock",
                          "capture-pane", "-p", "-t", "uplink", check=False).stdout


def session_ns_left(cluster, sid):
    """(containers, networks) of the session's namespace still on the dockerd."""
    ns = "agent-uplink-" + sid
    pods = cluster.docker("ps", "-a", "--format", '{{.Label "uplink-fakekube.pod"}}').stdout
    nets = cluster.docker("network", "ls", "-q", "--filter",
                          "label=uplink-fakekube.ns=" + ns).stdout.split()
    return [p for p in pods.split() if p.startswith(ns + "/")], nets


def wait_gone(cluster, daemon, sid, timeout=120):
    try:
        wait_for(lambda: session_ns_left(cluster, sid) == ([], []), timeout=timeout,
                 what="the session's containers and network to go")
    except AssertionError:
        raise AssertionError((session_ns_left(cluster, sid), daemon.logs()[-3000:]))


class Pty:
    """A client on a real pseudo-terminal, read as it draws."""

    def __init__(self, daemon, args, rows=50, cols=200):
        env = dict(daemon.env)
        env.pop("UPLINK_DEBUG", None)
        env["TERM"] = "xterm-256color"
        self.master, slave = pty.openpty()
        os.set_blocking(self.master, False)
        import fcntl
        import struct
        import termios
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.started = time.monotonic()
        self.p = subprocess.Popen([*AS_USER, uplink_bin(), *args], stdin=slave, stdout=slave,
                                  stderr=slave, env=env, cwd=daemon.home / "proj",
                                  start_new_session=True)
        os.close(slave)
        self.out = b""
        self.stamps = []      # (seconds since start, length of out before the chunk)

    def pump(self, wait=1.0):
        r, _, _ = select.select([self.master], [], [], wait)
        if r:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return False
            if not chunk:
                return False
            self.stamps.append((time.monotonic() - self.started, len(self.out)))
            self.out += chunk
        return True

    def screen(self):
        return self.out.decode("utf-8", "replace")

    def until(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while not pred(self.screen()):
            if time.monotonic() > deadline:
                raise AssertionError("%s: not seen in %r" % (what, self.screen()[-3000:]))
            if not self.pump() and self.p.poll() is not None:
                raise AssertionError("%s: the client exited %s: %r" % (
                    what, self.p.returncode, self.screen()[-3000:]))

    def close(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        rc = self.p.wait(timeout=60)
        os.close(self.master)
        return rc


def attached_screen(cluster, daemon, sid, cid):
    """`uplink attach SID` on a pty until it shows the agent's tmux pane; the client is
    killed after (the session goes on)."""
    want = words(agent_pane(cluster, cid))
    assert want, agent_pane(cluster, cid)
    t = Pty(daemon, ["attach", sid])
    try:
        t.until(lambda s: len(want & words(text_of(s))) * 2 >= len(want), timeout=120,
                what="the agent's screen (%s)" % sorted(want))
    finally:
        t.close()
    return t.screen()


def test_daemon_killed_under_a_session_adopts_it(cluster, daemon):
    sid, cid = run_detached(cluster, daemon)
    wait_for(lambda: words(agent_pane(cluster, cid)), timeout=120, what="Claude Code to draw")
    daemon.stop(signal.SIGKILL)
    assert agent_containers(cluster, sid) == [cid]      # the session runs on without it
    daemon.start(wait=False)
    wait_until_synced(daemon)
    wait_for(lambda: any(sid in ln and "RUNNING" in ln for ln in
                         uplink(daemon, "list").stdout.splitlines()),
             timeout=60, what="the restarted daemon to adopt the session")
    attached_screen(cluster, daemon, sid, cid)
    r = uplink(daemon, "stop", sid, "--wait")
    assert r.returncode == 0, (r.stdout, r.stderr, daemon.logs()[-3000:])
    wait_gone(cluster, daemon, sid)


def new_session_ns(cluster, known):
    pods = cluster.docker("ps", "-a", "--format", '{{.Label "uplink-fakekube.pod"}}').stdout
    for p in pods.split():
        ns = p.split("/")[0]
        if ns.startswith("agent-uplink-") and ns != "agent-uplink-system" and ns not in known:
            return ns
    return None


def test_client_killed_while_the_pods_start_leaves_nothing(cluster, daemon):
    pods = cluster.docker("ps", "-a", "--format", '{{.Label "uplink-fakekube.pod"}}').stdout
    known = {p.split("/")[0] for p in pods.split()}
    t = Pty(daemon, ["run", "claude", *MITM, "--mitm-ca-cert", str(cluster.ca_cert)])
    ns = None
    try:
        deadline = time.monotonic() + 600
        while ns is None:
            assert time.monotonic() < deadline, t.screen()[-3000:]
            assert t.pump(0.2) or t.p.poll() is None, t.screen()[-3000:]
            ns = new_session_ns(cluster, known)
    finally:
        t.close(signal.SIGKILL)
    sid = ns[len("agent-uplink-"):]
    wait_gone(cluster, daemon, sid, timeout=90)
    assert sid not in uplink(daemon, "list").stdout


@pytest.fixture
def renewing(local):
    """uplinkd whose login token ends within 5 minutes, so that the session's start renews
    it, against the fake upstream's token endpoint over TLS (its test CA given to the daemon
    with UPLINK_CA_BUNDLE, as a user behind a corporate CA would), granting 200 s tokens
    (renewed 2 minutes before they end, minutes made seconds: every 1.3 s)."""
    d = user_daemon(local, {"UPLINK_DEBUG_TIME_DIVISOR": "60",
                            "UPLINK_ANTHROPIC_TOKEN_URL": local.token_url,
                            "UPLINK_CA_BUNDLE": str(local.ca_cert)},
                    expires_in_s=200, machine_id="fedcba9876543210fedcba9876543210")
    yield d
    end_daemon(d, (TOKEN, REFRESH, RENEWED))


def grants(cluster):
    return [r for r in cluster.requests() if r["path"] == "/v1/oauth/token"]


def messages_auth(cluster):
    return [r["authorization"] for r in cluster.requests() if r["path"].startswith("/v1/messages")]


def test_login_token_renewed_reaches_the_running_agent(cluster, renewing):
    sid, cid = run_detached(cluster, renewing)
    curl = ("curl -s -X POST -H 'content-type: application/json' -d '{}' "
            "https://api.anthropic.com/v1/messages")
    try:
        r = cluster.docker("exec", cid, "sh", "-c", curl, check=False)
        assert ANSWER in r.stdout, r
        first = messages_auth(cluster)[-1]
        assert first.startswith("Bearer " + RENEWED + "-"), first      # renewed at the start
        n = len(grants(cluster))

        def renewed():
            cluster.docker("exec", cid, "sh", "-c", curl, check=False)
            return len(grants(cluster)) > n and messages_auth(cluster)[-1] != first
        try:
            wait_for(renewed, timeout=40, what="the agent's requests to carry a renewed token")
        except AssertionError:
            raise AssertionError((len(grants(cluster)), messages_auth(cluster)[-3:],
                                  agent_pane(cluster, cid), renewing.logs()[-4000:]))
        assert messages_auth(cluster)[-1].startswith("Bearer " + RENEWED + "-")
        assert REFRESH in grants(cluster)[0]["body"]      # the host's, at first
        # the kubelet changed the mitm's mounted file in place, the agent never saw it
        r = cluster.docker("exec", cid, "sh", "-c", "cat /proc/[0-9]*/environ 2>/dev/null; "
                           "grep -rs -l -e %s / --exclude-dir=proc --exclude-dir=sys; echo done"
                           % RENEWED, check=False)
        assert r.stdout.rstrip().endswith("done") and RENEWED not in r.stdout.replace(
            "-e %s" % RENEWED, ""), r.stdout[-2000:]
    finally:
        uplink(renewing, "stop", sid)
