"""`uplink run claude` against a live k3s with Kata Containers: the installed uplink (or
the build under UPLINK_BUILD) and a running uplinkd. Skipped, with the reason, when no
such cluster is reachable; see README, "Live-cluster tests"."""

import json
import os
import subprocess
import time

import pytest

from uplinktest import uplink_bin


def uplink(*args, timeout=1800):
    return subprocess.run([uplink_bin(), *args], capture_output=True, text=True, timeout=timeout)


def kubectl(ctx, *args, timeout=120):
    return subprocess.run(["kubectl", "--context", ctx, *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def session(live, tmp_path):
    r = uplink("run", "claude", "--detach", "--deploy-context", live)
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    yield live, sid
    uplink("stop", sid)


def in_agent(ctx, sid, *cmd):
    return kubectl(ctx, "exec", "-n", f"agent-uplink-{sid}", "agent", "-c", "main", "--", *cmd)


def test_agent_runs_in_a_microvm(session):
    ctx, sid = session
    pod = json.loads(kubectl(ctx, "get", "pod", "-n", f"agent-uplink-{sid}", "agent", "-o", "json").stdout)
    assert pod["spec"]["runtimeClassName"] == "kata-clh"
    assert pod["status"]["phase"] == "Running"


def test_denied_host_gets_the_uplink_403(session):
    ctx, sid = session
    r = in_agent(ctx, sid, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "https://example.com/")
    assert r.stdout.strip() in ("403", "000"), r  # refused at CONNECT (000) or at request (403)


def test_no_dns_for_the_agent(session):
    ctx, sid = session
    r = in_agent(ctx, sid, "getent", "hosts", "example.com")
    assert r.returncode != 0


def test_no_real_token_in_the_agent_pod(session):
    ctx, sid = session
    r = in_agent(ctx, sid, "sh", "-c", "cat ~/.claude/.credentials.json")
    assert "agent-uplink" in r.stdout  # the fake tokens


def test_stop_removes_the_namespace(session):
    ctx, sid = session
    assert uplink("stop", sid).returncode == 0
    for _ in range(120):
        if kubectl(ctx, "get", "namespace", f"agent-uplink-{sid}").returncode != 0:
            return
        time.sleep(1)
    pytest.fail("the namespace outlived its session by two minutes")


def test_ssh_keys_reach_the_agent_only_through_the_relay(live, tmp_path):
    """--ssh-key-dir on a real cluster: the agent lists and uses the key through SSH_AUTH_SOCK
    (its relay, then the holder pod), while the private key is nowhere in its pod."""
    keys = tmp_path / "keys"
    keys.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-C", "e2e", "-f", str(keys / "id_e2e")],
                   check=True, capture_output=True)
    fp = subprocess.run(["ssh-keygen", "-l", "-f", str(keys / "id_e2e")], capture_output=True, text=True,
                        check=True).stdout.split()[1]
    r = uplink("run", "claude", "--detach", "--deploy-context", live, "--ssh-key-dir", str(keys))
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    try:
        listed = in_agent(live, sid, "ssh-add", "-l")
        assert listed.returncode == 0 and fp in listed.stdout, listed
        home = in_agent(live, sid, "sh", "-c", "ls -A ~/.ssh; echo --; ls -A /ssh-agent; echo --; "
                        "cat ~/.ssh/* | grep -c 'PRIVATE KEY'")
        ssh_dir, sock_dir, count = home.stdout.split("--\n")
        assert ssh_dir.split() == ["id_e2e.pub"] and sock_dir.split() == ["agent.sock"], home
        assert count.strip() == "0", home
        secret = kubectl(live, "get", "pod", "-n", f"agent-uplink-{sid}", "agent", "-o", "json").stdout
        assert "ssh-agent-keys" not in secret
    finally:
        uplink("stop", sid)
