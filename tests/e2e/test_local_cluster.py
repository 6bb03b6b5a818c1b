"""`uplink run claude` for real on the local cluster (localcluster.py): the real uplinkd
and client, the agent image built and pushed by the daemon through docker, Claude Code
running in a container behind the real mitmproxy with the real addon, answered by a fake
api.anthropic.com. Skipped, with the reason, where docker or debootstrap are missing."""

import json
import os
import pty
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from localcluster import ANSWER
from uplinktest import ROOT, Daemon, uplink_bin, wait_for

TOKEN = "sk-ant-oat01-UPLINK-E2E-REAL-" + "5" * 24
REFRESH = "sk-ant-ort01-UPLINK-E2E-REAL-" + "6" * 24
# uid 1000 as the user, as on most desktops: the entrypoint renames the image's "node" (uid
# 1000) to them, and Claude Code refuses to skip permission prompts as root.
UID = 1000
AS_USER = ["setpriv", "--reuid=%d" % UID, "--regid=%d" % UID, "--clear-groups"]


def user_daemon(cluster, extra_env=None, expires_in_s=30 * 86400,
                machine_id="0123456789abcdef0123456789abcdef"):
    """uplinkd as uid 1000 on the local cluster, with a Claude login whose token ends in
    `expires_in_s`: started, and synced with the cluster. Two at once need two machine ids
    (each takes the other's sessions for its own leftovers)."""
    tmp = Path(tempfile.mkdtemp(prefix="upld-", dir="/tmp"))
    tmp.chmod(0o755)
    home = tmp / "home"
    (home / ".claude").mkdir(parents=True)
    (home / "proj").mkdir()
    (home / ".claude" / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {
        "accessToken": TOKEN, "refreshToken": REFRESH,
        "expiresAt": int((time.time() + expires_in_s) * 1000), "scopes": ["user:inference"],
        "subscriptionType": "pro"}}))
    (home / ".claude" / "settings.json").write_text(json.dumps({}))
    # as after a first `claude` on the host: onboarding done, the project trusted
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark",
        "projects": {str(home / "proj"): {"hasTrustDialogAccepted": True}}}))
    (tmp / "machine-id").write_text(machine_id + "\n")
    kubeconfig = tmp / "kubeconfig"
    shutil.copy(cluster.kubeconfig, kubeconfig)
    subprocess.run(["chown", "-R", "%d:%d" % (UID, UID), str(tmp)], check=True)
    d = Daemon(tmp, wrapper=AS_USER, env={
        "HOME": str(home), "KUBECONFIG": str(kubeconfig), "UPLINK_DATA_DIR": str(ROOT),
        "XDG_STATE_HOME": str(tmp / "state"), "UPLINK_MACHINE_ID_FILE": str(tmp / "machine-id"),
        # attach runs the real kubectl exec, against fakekube's pods/exec (WebSocket)
        "DOCKER_HOST": cluster.docker_host,
        **(extra_env or {}),
    })
    d.home = home
    d.start(wait=False)
    wait_until_synced(d)
    return d


def wait_until_synced(d):
    wait_for(lambda: '"state": "ready"' in d.client("status", "--json", user=UID).stdout,
             timeout=60, what="the deploy cluster to sync")


def end_daemon(d, secrets_=(TOKEN, REFRESH)):
    rc = d.stop()
    logs = d.logs()
    d.close()
    shutil.rmtree(d.tmp, ignore_errors=True)
    assert rc == 0, logs[-3000:]
    for s in secrets_:
        assert s not in logs


@pytest.fixture(scope="module")
def daemon(local):
    d = user_daemon(local)
    yield d
    end_daemon(d)


def dump(cluster, daemon, screen):
    """For a failure: the last lines of the newest mitm logs (their audit lines say why a
    request got what it got) on stdout, which pytest shows only when the test fails; and with
    UPLINK_E2E_SCREEN=FILE the screen, the daemon's log and every pod log in full."""
    pods = {k: "".join(v) for k, v in list(cluster.fk.logs.items())}   # others append
    mitms = [(k, text) for k, text in pods.items() if k[1] == "mitm"]
    for (ns, name, container), text in mitms[-3:]:     # the newest sessions'
        print("---- %s/%s/%s, last lines\n%s" % (ns, name, container,
                                                "\n".join(text.splitlines()[-30:])))
    if os.environ.get("UPLINK_E2E_SCREEN"):
        Path(os.environ["UPLINK_E2E_SCREEN"]).write_text(
            screen + "\n----\n" + daemon.logs() + "\n----\n" + "\n".join(
                "%s: %s" % (k, v) for k, v in pods.items()))


def run_in_pty(daemon, args, timeout=1500):
    """Runs `uplink ARGS` on a real pseudo-terminal: (exit code, everything it showed)."""
    env = dict(daemon.env)
    env.pop("UPLINK_DEBUG", None)
    env["TERM"] = "xterm-256color"
    master, slave = pty.openpty()
    p = subprocess.Popen([*AS_USER, uplink_bin(), *args], stdin=slave, stdout=slave, stderr=slave,
                         env=env, cwd=daemon.home / "proj", start_new_session=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 1.0)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    rc = p.wait(timeout=60)
    os.close(master)
    return rc, out.decode("utf-8", "replace")


def test_run_claude_print_for_real(cluster, daemon):
    rc, screen = run_in_pty(daemon, ["run", "claude", "--mitmproxy-image",
                                     "uplink-test/mitmproxy:8", "--mitm-ca-cert",
                                     str(cluster.ca_cert), "--", "-p",
                                     "What does the fake upstream say?"])
    dump(cluster, daemon, screen)
    assert ANSWER in screen, (rc, screen[-4000:], daemon.logs()[-4000:])
    assert rc == 0, (screen[-3000:], daemon.logs()[-3000:])
    assert "detached" not in screen, screen[-3000:]     # the agent ended: not a detach
    # tmux drew the answer on the alternate screen, which a real terminal drops when tmux
    # gives it back: the answer must come again after that, where the terminal keeps it
    left = screen.rfind("\x1b[?1049l")
    assert left >= 0 and ANSWER in screen[left:], screen[-3000:]
    reqs = cluster.requests()
    msgs = [r for r in reqs if r["path"].startswith("/v1/messages")]
    assert msgs, reqs
    assert all(r["authorization"] == "Bearer " + TOKEN for r in msgs), msgs
    assert all(TOKEN in (r["authorization"] or "") or r["authorization"] is None for r in reqs)
    # The session's containers and its network are gone once it ended.
    def session_left():
        names = [cluster.docker("inspect", "-f", "{{.Name}}", c, check=False).stdout.strip()
                 for c in cluster.containers()]
        return [n for n in names if n and "agent-uplink-system" not in n]
    try:
        wait_for(lambda: not session_left(), timeout=120, what="the session's containers to go")
    except AssertionError:
        raise AssertionError((session_left(), daemon.logs()[-3000:]))
    wait_for(lambda: len(cluster.networks()) <= 1, timeout=120,
             what="the session's network to go")


def uplink(daemon, *args, timeout=120):
    """The client as the user, output captured."""
    env = dict(daemon.env)
    env.pop("UPLINK_DEBUG", None)
    return subprocess.run([*AS_USER, uplink_bin(), *args], env=env, cwd=daemon.home / "proj",
                          capture_output=True, text=True, timeout=timeout)


def agent_containers(cluster, sid):
    return cluster.docker("ps", "-q", "--filter", "label=uplink-fakekube.pod=agent-uplink-%s/agent"
                          % sid).stdout.split()


def wait_agent_user(cluster, cid):
    """--detach returns once the pod runs, while its entrypoint may still be renaming the
    image's uid 1000 to the user (usermod refuses while a process of that uid runs, and an
    exec as uid 1000 before it sees the image's user and home): wait for the user, then for
    the agent's tmux session (asked as root), before running anything as the user."""
    import pwd
    user = pwd.getpwuid(UID).pw_name

    def ready():
        r = cluster.docker("exec", cid, "getent", "passwd", str(UID), check=False)
        return r.stdout.startswith(user + ":") and cluster.docker(
            "exec", cid, "tmux", "-S", "/run/uplink/tmux.sock", "has-session", "-t", "uplink",
            check=False).returncode == 0
    wait_for(ready, timeout=120, what="the agent's user and tmux session")


def run_detached(cluster, daemon, *args):
    """`uplink run claude --detach ARGS`: (session id, agent container), once the agent runs
    as the user."""
    r = uplink(daemon, "run", "claude", "--detach", "--mitmproxy-image", "uplink-test/mitmproxy:8",
               "--mitm-ca-cert", str(cluster.ca_cert), *args, timeout=900)
    assert r.returncode == 0, (r.stderr, daemon.logs()[-3000:])
    sid = r.stdout.strip()
    ids = agent_containers(cluster, sid)
    assert len(ids) == 1, ids
    wait_agent_user(cluster, ids[0])
    return sid, ids[0]


@pytest.fixture
def detached(cluster, daemon):
    """A session left running (Claude Code waiting in its tmux): (session id, agent container)."""
    sid, cid = run_detached(cluster, daemon)
    yield sid, cid
    uplink(daemon, "stop", sid)


def mitm_log(cluster, sid):
    return "".join(cluster.fk.logs.get(("agent-uplink-" + sid, "mitm", "mitm"), []))


def in_agent(cluster, cid, script):
    return cluster.docker("exec", cid, "sh", "-c", script, check=False, timeout=120)


def test_agent_is_confined_to_the_proxy(cluster, detached):
    sid, cid = detached
    # A request no rule allows (the defaults let GETs through, read-only): uplink's 403 JSON.
    r = in_agent(cluster, cid, "curl -s -X POST -d x -w '\n%{http_code}' http://denied.example/x")
    body, code = r.stdout.rsplit("\n", 1)
    assert code == "403" and json.loads(body), r
    r = in_agent(cluster, cid, "curl -s -X POST -d x -w '\n%{http_connect} %{http_code}' "
                 "https://denied.example/x")
    body, codes = r.stdout.rsplit("\n", 1)
    assert "403" in codes.split(), r
    # No DNS: nothing resolves, not even the upstream's name or a container's.
    for name in ("api.anthropic.com", "denied.example", "mitm"):
        if name == "mitm":
            continue      # from hostAliases, as on a real cluster
        r = in_agent(cluster, cid, "getent hosts %s" % name)
        assert r.returncode != 0, (name, r.stdout)
    # Bypassing the proxy: the upstream's address is not reachable from the agent.
    r = in_agent(cluster, cid, "curl -s -m 5 --noproxy '*' -k https://%s/ ; echo rc=$?"
                 % cluster.upstream_ip)
    assert "rc=0" not in r.stdout, r
    # Allowed through the proxy, with the real token injected there.
    r = in_agent(cluster, cid, "curl -s -w '\\n%{http_code}' -X POST "
                 "-H 'content-type: application/json' -d '{\"model\":\"m\"}' "
                 "https://api.anthropic.com/v1/messages")
    assert r.stdout.endswith("\n200") and ANSWER in r.stdout, r


def test_logs_show_allowed_and_denied_after_the_end(cluster, daemon, detached):
    sid, cid = detached
    in_agent(cluster, cid, "curl -s -X POST -d x http://denied.example/logged; "
             "curl -s -X POST -H 'content-type: application/json' -d '{}' "
             "https://api.anthropic.com/v1/messages")
    env = dict(daemon.env)
    env.pop("UPLINK_DEBUG", None)

    def logs(*extra):
        return subprocess.run([*AS_USER, uplink_bin(), "logs", sid, *extra], env=env,
                              capture_output=True, text=True, timeout=60)
    # the audit lines reach the host as the proxy writes them (its pod log)
    wait_for(lambda: "/logged" in logs().stdout and "/v1/messages" in logs().stdout,
             timeout=60, what="the requests in uplink logs")
    assert subprocess.run([*AS_USER, uplink_bin(), "stop", sid], env=env, capture_output=True,
                          timeout=120).returncode == 0
    after = logs()
    assert after.returncode == 0, after.stderr
    assert "/logged" in after.stdout and "/v1/messages" in after.stdout, after.stdout
    denied = logs("--denied").stdout
    assert "/logged" in denied and "/v1/messages" not in denied, denied
    for s in (TOKEN, REFRESH):
        assert s not in after.stdout and s not in logs("--json").stdout


def test_second_run_builds_nothing(cluster, daemon):
    rc, screen = run_in_pty(daemon, ["run", "claude", "--mitmproxy-image",
                                     "uplink-test/mitmproxy:8", "--mitm-ca-cert",
                                     str(cluster.ca_cert), "--", "-p", "again?"])
    dump(cluster, daemon, screen)
    # What this test is about: the image is not built again. With a warm image the agent's
    # -p answer can end the session before kubectl exec attaches (the namespace is gone:
    # a known race, see the note of 2026-12-01), so the answer on screen is checked by
    # test_run_claude_print_for_real only; the exit code is the agent's either way.
    assert rc == 0, screen[-3000:]
    assert "up to date: localhost:5000/uplink/claude:" in screen, screen[-3000:]
    assert "docker build" not in screen


def test_no_real_token_in_the_agent_container(cluster, detached):
    sid, cid = detached
    secrets_ = (TOKEN, REFRESH)
    r = in_agent(cluster, cid, "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; "
                 "grep -rs -l -e '%s' -e '%s' / --exclude-dir=proc --exclude-dir=sys "
                 "2>/dev/null; echo done" % secrets_)
    assert r.stdout.rstrip().endswith("done"), r
    for s in secrets_:
        assert s not in r.stdout, r.stdout[-2000:]


def test_agent_works_in_the_users_own_folder(cluster, daemon, detached):
    """uplink mounts the user's working folder and ~/.claude.json by hostPath: the agent
    reads and writes the user's own files (the node is this machine, as with a local k3s)."""
    sid, cid = detached
    proj = daemon.home / "proj"
    (proj / "from-the-host.txt").write_text("written on the host\n")
    r = cluster.docker("exec", "-u", str(UID), "-w", str(proj), cid, "sh", "-c",
                       "cat from-the-host.txt && echo from the agent > from-the-agent.txt && "
                       "test -f %s/.claude.json && echo claude.json is a file" % daemon.home,
                       check=False)
    assert r.stdout == "written on the host\nclaude.json is a file\n", r
    made = proj / "from-the-agent.txt"
    assert made.read_text() == "from the agent\n" and made.stat().st_uid == UID
