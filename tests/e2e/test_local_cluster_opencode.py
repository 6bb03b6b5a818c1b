"""`uplink run opencode` for real on the local cluster (localcluster.py): the real uplinkd,
the opencode-ai image built and pushed by the daemon, OpenCode's own binary (bun) behind the
real mitmproxy with the real addon, answered by the fake api.anthropic.com. Its Anthropic
API key is injected as x-api-key; a request of its own HTTP stack that no rule allows gets
uplink's 403 JSON; its OAuth login, renewed on the host against a token endpoint on
loopback, reaches the running agent."""

import json
import subprocess

import pytest

from localcluster import ANSWER
from test_local_cluster import (AS_USER, UID, agent_containers, dump,  # noqa: F401
                                end_daemon, run_in_pty, uplink, user_daemon)
from uplinktest import TokenServer, uplink_bin, wait_for

MITM = ["--mitmproxy-image", "uplink-test/mitmproxy:8"]
KEY = "sk-ant-api03-UPLINK-E2E-OPENCODE-" + "3" * 24
ACCESS = "sk-ant-oat01-UPLINK-E2E-OPENCODE-" + "4" * 24
REFRESH = "sk-ant-ort01-UPLINK-E2E-OPENCODE-" + "5" * 24
RENEWED = "sk-ant-oat01-UPLINK-E2E-OC-RENEWED-" + "8" * 24
PROMPT = "What does the fake upstream say?"


def with_login(d, entry):
    """Gives the daemon's user an opencode login (auth.json as opencode writes it)."""
    auth = d.home / ".local" / "share" / "opencode" / "auth.json"
    auth.parent.mkdir(parents=True, exist_ok=True)
    auth.write_text(json.dumps({"anthropic": entry}, indent=2))
    auth.chmod(0o600)
    subprocess.run(["chown", "-R", "%d:%d" % (UID, UID), str(d.home / ".local")], check=True)
    return auth


@pytest.fixture(scope="module")
def daemon(cluster):  # noqa: F811
    d = user_daemon(cluster, machine_id="0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c")
    with_login(d, {"type": "api", "key": KEY})
    yield d
    end_daemon(d, (KEY,))


def run_detached(cluster, d):  # noqa: F811
    r = uplink(d, "run", "opencode", "--detach", *MITM, "--mitm-ca-cert", str(cluster.ca_cert),
               timeout=1500)
    assert r.returncode == 0, (r.stderr, d.logs()[-3000:])
    sid = r.stdout.strip()
    ids = agent_containers(cluster, sid)
    assert len(ids) == 1, ids

    # The entrypoint's own signal that it is done with the user (usermod refuses, and the
    # container ends, while a process of the user's runs): the agent's tmux session. Asked
    # as root, which the entrypoint leaves alone.
    def ready():
        return cluster.docker("exec", ids[0], "tmux", "-S", "/run/uplink/tmux.sock",
                              "has-session", "-t", "uplink", check=False).returncode == 0
    wait_for(ready, timeout=120, what="the agent's tmux session")
    return sid, ids[0]


def opencode(cluster, d, cid, *args, env=()):  # noqa: F811
    """`opencode ARGS` in the agent container as the user, with the pod's environment."""
    extra = [x for kv in env for x in ("-e", kv)]
    return cluster.docker("exec", "-u", "%d:%d" % (UID, UID), "-e", "HOME=%s" % d.home,
                          *extra, "-w", str(d.home / "proj"), cid, "opencode", *args,
                          check=False, timeout=300)


def messages(cluster):  # noqa: F811
    return [r for r in cluster.requests() if r["path"].startswith("/v1/messages")]


def test_run_opencode_for_real(cluster, daemon):  # noqa: F811
    before = len(messages(cluster))
    rc, screen = run_in_pty(daemon, ["run", "opencode", *MITM, "--mitm-ca-cert",
                                     str(cluster.ca_cert), "--", "run", PROMPT])
    dump(cluster, daemon, screen)
    assert ANSWER in screen, (rc, screen[-4000:], daemon.logs()[-4000:])
    assert rc == 0, (screen[-3000:], daemon.logs()[-3000:])
    msgs = messages(cluster)[before:]
    assert msgs, cluster.requests()
    # the real key, injected by the mitm over the pod's placeholder
    assert all(r["x-api-key"] == KEY for r in msgs), msgs
    assert all(r["authorization"] is None for r in msgs), msgs


def test_denied_request_of_opencode_gets_the_403_json(cluster, daemon):  # noqa: F811
    sid, cid = run_detached(cluster, daemon)
    try:
        # opencode's own HTTP stack (bun's fetch through HTTPS_PROXY, the session CA from
        # NODE_EXTRA_CA_CERTS) to a host no rule allows: the OpenAI API
        r = opencode(cluster, daemon, cid, "run", "-m", "openai/gpt-5", PROMPT,
                     env=["OPENAI_API_KEY=sk-not-a-real-key"])
        out = r.stdout + r.stderr
        assert "denied by uplink" in out, out[-3000:]
        env = dict(daemon.env)
        env.pop("UPLINK_DEBUG", None)

        def denied():
            return subprocess.run([*AS_USER, uplink_bin(), "logs", sid, "--denied"], env=env,
                                  capture_output=True, text=True, timeout=60).stdout
        wait_for(lambda: "api.openai.com" in denied(), timeout=60,
                 what="the denied request in uplink logs")
        # and the allowed one, from the same binary in the same pod
        r = opencode(cluster, daemon, cid, "run", PROMPT)
        assert ANSWER in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])
        # nothing in the agent container holds the real key
        r = cluster.docker("exec", cid, "sh", "-c", "cat /proc/[0-9]*/environ 2>/dev/null; "
                           "grep -rs -l -e %s / --exclude-dir=proc --exclude-dir=sys; echo done"
                           % KEY, check=False)
        assert r.stdout.rstrip().endswith("done"), r
        assert KEY not in r.stdout.replace("-e %s" % KEY, ""), r.stdout[-2000:]
    finally:
        uplink(daemon, "stop", sid)


@pytest.fixture
def renewing(cluster):  # noqa: F811
    """uplinkd whose opencode OAuth login ends within 5 minutes, so that the session's start
    renews it, against a token endpoint on loopback granting 200 s tokens (renewed 2
    minutes before they end, minutes made seconds)."""
    token = TokenServer()

    def grant():
        n = len(token.requests)
        return {"access_token": "%s-%d" % (RENEWED, n), "refresh_token": "%s-r%d" % (RENEWED, n),
                "expires_in": 200, "token_type": "Bearer"}
    token.body = grant
    d = user_daemon(cluster, {"UPLINK_DEBUG_TIME_DIVISOR": "60",
                              "UPLINK_ANTHROPIC_TOKEN_URL": token.url},
                    machine_id="0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d")
    import time
    d.auth = with_login(d, {"type": "oauth", "refresh": REFRESH, "access": ACCESS,
                            "expires": int((time.time() + 200) * 1000)})
    d.token = token
    yield d
    end_daemon(d, (ACCESS, REFRESH, RENEWED))
    token.close()


def test_oauth_login_renewed_reaches_the_running_agent(cluster, renewing):  # noqa: F811
    sid, cid = run_detached(cluster, renewing)
    try:
        r = opencode(cluster, renewing, cid, "run", PROMPT)
        assert ANSWER in r.stdout, (r, renewing.logs()[-4000:])
        first = messages(cluster)[-1]
        # renewed at the start; Bearer with the OAuth beta, no API key
        assert first["authorization"].startswith("Bearer " + RENEWED + "-"), first
        assert first["x-api-key"] is None, first
        grants = len(renewing.token.requests)
        # the refresh grant as opencode's Anthropic OAuth sends it, with the host's token
        path, headers, body = renewing.token.requests[0]
        assert json.loads(body) == {"grant_type": "refresh_token", "refresh_token": REFRESH,
                                    "client_id": "9d1c250a-e61b-44d9-88ed-5944d1962f5e"}

        def renewed():
            return len(renewing.token.requests) > grants + 1
        wait_for(renewed, timeout=60, what="the login to be renewed again")
        r = opencode(cluster, renewing, cid, "run", PROMPT)
        assert ANSWER in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])
        last = messages(cluster)[-1]["authorization"]
        assert last.startswith("Bearer " + RENEWED + "-") and last != first["authorization"]
        # the host's auth.json holds the newest login, as opencode writes it
        saved = json.loads(renewing.auth.read_text())["anthropic"]
        assert saved["type"] == "oauth" and saved["access"].startswith(RENEWED)
        assert saved["refresh"].startswith(RENEWED) and saved["expires"] > 0
        assert renewing.auth.stat().st_mode & 0o777 == 0o600
    finally:
        uplink(renewing, "stop", sid)
