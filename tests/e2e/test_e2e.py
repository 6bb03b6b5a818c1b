"""`uplink run claude --detach` on either cluster of conftest.py's `cluster` fixture, checked
through kubectl alone: on the local cluster with a uplinkd of the test's own (uid 1000, a test
login); on the live k3s with Kata of UPLINK_E2E_CONTEXT with the user's installed, running
uplinkd (the build under UPLINK_BUILD for the client). The pod asks for the microVM, a denied
host gets uplink's 403, there is no DNS, the credentials are placeholders, the SSH key reaches
the agent only through the relay, and stop removes the namespace."""

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from test_local_cluster import REFRESH, TOKEN, end_daemon, uplink, user_daemon
from uplinktest import uplink_bin, wait_for


@pytest.fixture(scope="module")
def user(cluster):
    """Whose uplinkd runs the sessions: None for the user's own (a live cluster)."""
    if cluster.live:
        yield None
        return
    d = user_daemon(cluster, machine_id="5e55e55e5e55e55e5e55e55e5e55e55e")
    yield d
    end_daemon(d)


def uplink_as(user, *args, timeout=1800):
    if user is None:
        return subprocess.run([uplink_bin(), *args], capture_output=True, text=True,
                              timeout=timeout)
    return uplink(user, *args, timeout=timeout)


def start(cluster, user, *extra):
    r = uplink_as(user, "run", "claude", "--detach", *cluster.run_flags(), *extra)
    assert r.returncode == 0, (r.stdout, r.stderr, user.logs()[-3000:] if user else "")
    return r.stdout.strip()


@pytest.fixture
def session(cluster, user):
    sid = start(cluster, user)
    yield sid
    uplink_as(user, "stop", sid)


def in_agent(cluster, sid, *cmd):
    return cluster.kubectl("exec", "-n", "agent-uplink-" + sid, "agent", "-c", "main", "--", *cmd)


def test_agent_runs_in_a_microvm(cluster, session):
    """The pod asks for Kata; the local cluster runs RuntimeClass kata-clh with runc (README)."""
    pod = json.loads(cluster.kubectl("get", "pod", "-n", "agent-uplink-" + session, "agent",
                                     "-o", "json").stdout)
    assert pod["spec"]["runtimeClassName"] == "kata-clh"
    assert pod["status"]["phase"] == "Running"


def test_denied_host_gets_the_uplink_403(cluster, session):
    # a POST (the default rules let read-only GETs through) to a host no rule allows;
    # denied.example resolves for the local cluster's mitm, as a real host would
    host = "example.com" if cluster.live else "denied.example"
    r = in_agent(cluster, session, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                 "-X", "POST", "-d", "x", "https://%s/" % host)
    assert r.stdout.strip() in ("403", "000"), r  # refused at CONNECT (000) or at request (403)


def test_no_dns_for_the_agent(cluster, session):
    for name in ("example.com", "api.anthropic.com", "kubernetes.default"):
        r = in_agent(cluster, session, "getent", "hosts", name)
        assert r.returncode != 0, (name, r.stdout)


def test_no_real_token_in_the_agent_pod(cluster, session):
    r = in_agent(cluster, session, "sh", "-c", 'cat "$UPLINK_HOME/.claude/.credentials.json"')
    assert r.returncode == 0, r
    oauth = json.loads(r.stdout)["claudeAiOauth"]
    assert "agent-uplink" in oauth["accessToken"], oauth      # the placeholders
    if not cluster.live:
        assert TOKEN not in r.stdout and REFRESH not in r.stdout


def test_stop_removes_the_namespace(cluster, user):
    sid = start(cluster, user)
    r = uplink_as(user, "stop", sid)
    assert r.returncode == 0, (r.stdout, r.stderr)
    wait_for(lambda: cluster.kubectl("get", "namespace", "agent-uplink-" + sid).returncode != 0,
             timeout=120, what="the namespace to go with its session")


def test_ssh_keys_reach_the_agent_only_through_the_relay(cluster, user):
    """--ssh-key-dir: the agent lists and uses the key through SSH_AUTH_SOCK (its relay, then
    the holder pod), while the private key is nowhere in its pod."""
    tmp = Path(tempfile.mkdtemp(prefix="uple2e-keys-", dir="/tmp"))
    keys = tmp / "keys"
    keys.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-C", "e2e", "-f",
                    str(keys / "id_e2e")], check=True, capture_output=True)
    fp = subprocess.run(["ssh-keygen", "-l", "-f", str(keys / "id_e2e")], capture_output=True,
                        text=True, check=True).stdout.split()[1]
    if user is not None:      # the test's uplinkd runs as uid 1000: the folder is theirs
        tmp.chmod(0o755)
        subprocess.run(["chown", "-R", "1000:1000", str(keys)], check=True)
    sid = start(cluster, user, "--ssh-key-dir", str(keys))
    try:
        listed = in_agent(cluster, sid, "sh", "-c", "ssh-add -l")
        assert listed.returncode == 0 and fp in listed.stdout, listed
        home = in_agent(cluster, sid, "sh", "-c", 'cd "$UPLINK_HOME" && ls -A .ssh; echo --; '
                        "ls -A /ssh-agent; echo --; cat .ssh/* | grep -c 'PRIVATE KEY'")
        ssh_dir, sock_dir, count = home.stdout.split("--\n")
        assert ssh_dir.split() == ["id_e2e.pub"] and sock_dir.split() == ["agent.sock"], home
        assert count.strip() == "0", home
        pod = cluster.kubectl("get", "pod", "-n", "agent-uplink-" + sid, "agent", "-o",
                              "json").stdout
        assert "ssh-agent-keys" not in pod
    finally:
        uplink_as(user, "stop", sid)
        shutil.rmtree(tmp, ignore_errors=True)
