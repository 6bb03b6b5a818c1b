"""`uplink run claude` interactive, on the local cluster (localcluster.py), in a real tmux on
the host as a user's terminal: a prompt typed into Claude Code, its answer from the fake
api.anthropic.com read off the screen; the client killed; `uplink attach` in a second and a
third terminal at once, both showing the same screen; `uplink stop` ending it all."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from localcluster import ANSWER
from test_local_cluster import AS_USER, agent_containers, end_daemon, uplink, user_daemon
from test_local_cluster_sessions import wait_gone
from uplinktest import SLOW, uplink_bin

MITM = ["--mitmproxy-image", "uplink-test/mitmproxy:8"]
PROMPT = "What does the fake upstream say?"
# Dialogs Claude Code may put up before its prompt, and what a user answers: (text on the
# screen, keys). The settings user_daemon writes (onboarding done, the folder trusted) should
# keep them away; if one shows anyway, it is answered as a user would.
DIALOGS = (("Do you trust the files in this folder?", ["Enter"]),
           ("Yes, I trust this folder", ["Enter"]),
           ("Choose the text style", ["Enter"]),
           ("Press Enter to continue", ["Enter"]),
           ("Yes, I accept", ["Down", "Enter"]))
# Claude Code's prompt is up: its input box's footer.
READY = ("? for shortcuts", "shift+tab to cycle")


@pytest.fixture(scope="module")
def daemon(local):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux): it is the user's terminal")
    d = user_daemon(local, machine_id="a1b2c3d4e5f60718293a4b5c6d7e8f90")
    yield d
    end_daemon(d)


class Tmux:
    """A tmux server on the host with its own socket: one window per terminal of the user."""

    def __init__(self, tmp, daemon):
        self.sock = str(Path(tmp) / "tmux.sock")
        self.daemon = daemon
        env = dict(daemon.env)
        env.pop("UPLINK_DEBUG", None)
        self.env = ["%s=%s" % kv for kv in sorted(env.items())]
        self.started = False

    def tmux(self, *args, check=True):
        # -u: a UTF-8 terminal, as a user's is (Claude Code draws its boxes in UTF-8)
        return subprocess.run(["tmux", "-u", "-S", self.sock, "-f", "/dev/null", *args],
                              capture_output=True, text=True, check=check, timeout=60,
                              env=dict(os.environ, LANG="C.UTF-8"))

    def open(self, name, *args):
        """A new terminal (window NAME) running `uplink ARGS` as the user."""
        cmd = ["env", "-i", *self.env, *AS_USER, uplink_bin(), *args]
        where = ["-c", str(self.daemon.home / "proj"), "-n", name]
        if not self.started:
            self.tmux("new-session", "-d", "-s", "u", "-x", "200", "-y", "50", *where, *cmd)
            # a client's death leaves its screen and exit status to read
            self.tmux("set-option", "-g", "remain-on-exit", "on")
            self.started = True
        else:
            self.tmux("new-window", "-d", "-t", "u:", *where, *cmd)
        return "u:" + name

    def screen(self, w):
        return self.tmux("capture-pane", "-p", "-t", w).stdout

    def keys(self, w, *keys, literal=False):
        self.tmux("send-keys", "-t", w, *(["-l"] if literal else []), *keys)

    def pane(self, w, fmt):
        return self.tmux("display-message", "-p", "-t", w, fmt).stdout.strip()

    def until(self, w, pred, timeout, what, dialogs=False):
        """Polls W's screen until PRED holds of it; answers DIALOGS on the way if asked."""
        deadline = time.monotonic() + timeout * SLOW
        while True:
            s = self.screen(w)
            if pred(s):
                return s
            if dialogs:
                for text, keys in DIALOGS:
                    if text in s:
                        self.keys(w, *keys)
                        break
            if self.pane(w, "#{pane_dead}") == "1":
                s = self.screen(w)
                if pred(s):  # it ended between the two looks: what was waited for
                    return s
                raise AssertionError("%s: the client in %s exited %s:\n%s" % (
                    what, w, self.pane(w, "#{pane_dead_status}"), s))
            if time.monotonic() > deadline:
                raise AssertionError("%s: not seen in %s:\n%s" % (what, w, s))
            time.sleep(0.2)

    def kill_client(self, w):
        """kill -9 every process of W's terminal: the client and the kubectl it runs."""
        sid = int(self.pane(w, "#{pane_pid}"))
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[3]) == sid:      # field 6: session
                try:
                    os.kill(int(p.name), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def dead(self, w):
        return self.pane(w, "#{pane_dead}") == "1"

    def close(self):
        if self.started:
            self.tmux("kill-server", check=False)


def session_ids(daemon):
    return {ln.split()[0] for ln in uplink(daemon, "list").stdout.splitlines()[1:]
            if ln.split() and len(ln.split()[0]) == 12}


def test_interactive_answer_survives_the_client_and_shows_in_two_terminals(
        cluster, daemon, tmp_path):
    tmp_path.chmod(0o755)
    t = Tmux(tmp_path, daemon)
    before = session_ids(daemon)
    sid = None
    try:
        w1 = t.open("run", "run", "claude", *MITM, "--mitm-ca-cert", str(cluster.ca_cert))
        t.until(w1, lambda s: any(r in s for r in READY), timeout=600,
                what="Claude Code's prompt", dialogs=True)
        (sid,) = session_ids(daemon) - before
        t.keys(w1, PROMPT, literal=True)
        t.until(w1, lambda s: PROMPT in s, timeout=60, what="the typed prompt")
        t.keys(w1, "Enter")
        shown = t.until(w1, lambda s: ANSWER in s, timeout=300, what="the fake API's answer")

        t.kill_client(w1)
        t.until(w1, lambda s: t.dead(w1), timeout=60, what="the killed client to end")
        running = [ln for ln in uplink(daemon, "list").stdout.splitlines() if sid in ln]
        assert running and "RUNNING" in running[0], running
        assert len(agent_containers(cluster, sid)) == 1

        w2 = t.open("attach1", "attach", sid)
        again = t.until(w2, lambda s: ANSWER in s and PROMPT in s, timeout=120,
                        what="the same screen redrawn by uplink attach")
        assert [ln for ln in shown.splitlines() if ANSWER in ln] == \
            [ln for ln in again.splitlines() if ANSWER in ln], (shown, again)
        w3 = t.open("attach2", "attach", sid)
        t.until(w3, lambda s: ANSWER in s and PROMPT in s, timeout=120,
                what="the screen in a second terminal attached at once")
        # Both terminals show the one live screen: what one types, the other sees.
        t.keys(w3, "typed-in-the-third-terminal", literal=True)
        t.until(w2, lambda s: "typed-in-the-third-terminal" in s, timeout=60,
                what="the third terminal's typing in the second")
        assert not t.dead(w2) and not t.dead(w3)

        r = uplink(daemon, "stop", sid, "--wait")
        assert r.returncode == 0, (r.stdout, r.stderr, daemon.logs()[-3000:])
        for w in (w2, w3):
            t.until(w, lambda s: t.dead(w), timeout=120, what="attach to end with the session")
        wait_gone(cluster, daemon, sid)
        sid = None
    finally:
        if sid:
            uplink(daemon, "stop", sid)
        t.close()
