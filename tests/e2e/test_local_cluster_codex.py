"""`uplink run codex` for real on the local cluster (localcluster.py, the one cluster of the
run: conftest.py): the real uplinkd and client, the codex image built from npm by the daemon,
the real codex CLI behind the real mitmproxy with the real addon, answered by fake_openai.py
(the cluster's fake "openai") standing in for chatgpt.com, api.openai.com and
auth.openai.com. Skipped, with the reason, where docker or debootstrap
are missing."""

import base64
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from localcluster import HERE, OPENAI_ACCOUNT, OPENAI_ANSWER
from test_local_cluster import (UID, agent_containers, end_daemon, run_in_pty, uplink,
                                user_daemon, wait_agent_user)
from uplinktest import read_line, wait_for

ANSWER = OPENAI_ANSWER
ACCOUNT = OPENAI_ACCOUNT
REFRESH = "uplink-e2e-codex-refresh-" + "8" * 24
RENEWED = "uplink-e2e-codex-renewed-" + "9" * 16
MITM = ["--mitmproxy-image", "uplink-test/mitmproxy:8"]


def b64(d):
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


def jwt(claims, sig):
    return "%s.%s.%s" % (b64({"alg": "RS256", "typ": "JWT"}), b64(claims), sig)


ACCESS = jwt({"exp": int(time.time()) + 30 * 86400, "e2e": "real"},
             "uplink-e2e-codex-access-" + "7" * 24)
SECRETS = (ACCESS.rsplit(".", 1)[1], REFRESH)


def codex_daemon(cluster, access=ACCESS, extra_env=None, **kw):
    """uplinkd as uid 1000 whose home has a ChatGPT login of codex's in ~/.codex/auth.json."""
    d = user_daemon(cluster, extra_env, **kw)
    codex = d.home / ".codex"
    codex.mkdir()
    (codex / "auth.json").write_text(json.dumps({
        "auth_mode": "chatgpt", "OPENAI_API_KEY": None, "tokens": {
            "id_token": jwt({"email": "e2e@example.com", "https://api.openai.com/auth": {
                "chatgpt_plan_type": "pro", "chatgpt_account_id": ACCOUNT}}, "id-sig"),
            "access_token": access, "refresh_token": REFRESH, "account_id": ACCOUNT},
        "last_refresh": "2026-01-01T00:00:00Z"}, indent=2))
    subprocess.run(["chown", "-R", "%d:%d" % (UID, UID), str(codex)], check=True)
    return d


@pytest.fixture(scope="module")
def daemon(cluster):
    d = codex_daemon(cluster)
    yield d
    end_daemon(d, SECRETS)


def responses(cluster):
    return [r for r in cluster.requests("openai") if r["path"] == "/backend-api/codex/responses"
            and r["method"] == "POST"]


def test_codex_exec_answers_through_the_mitm(cluster, daemon):
    rc, screen = run_in_pty(daemon, ["run", "codex", *MITM, "--mitm-ca-cert",
                                     str(cluster.ca_cert), "--", "exec",
                                     "--skip-git-repo-check", "What does the fake say?"])
    assert ANSWER in screen, (rc, screen[-4000:], daemon.logs()[-3000:])
    assert rc == 0, screen[-3000:]
    turns = responses(cluster)
    assert turns, cluster.requests("openai")[-10:]
    # the real token and account, injected by the mitm, never the pod's placeholders
    assert all(r["authorization"] == "Bearer " + ACCESS and r["chatgpt-account-id"] == ACCOUNT
               for r in turns), turns
    assert all(r["authorization"] in (None, "Bearer " + ACCESS) for r in cluster.requests("openai")
               if r["host"] == "chatgpt.com")


def test_a_denied_request_of_codex_gets_the_403_json(cluster, daemon):
    """codex's own HTTP stack (reqwest, through HTTPS_PROXY, trusting CODEX_CA_CERTIFICATE)
    sent to a host no rule allows: codex shows the proxy's 403 JSON."""
    provider = ('model_providers.elsewhere={name="elsewhere",base_url="https://denied.example/v1",'
                'wire_api="responses",supports_websockets=false,request_max_retries=0,'
                'stream_max_retries=0}')
    rc, screen = run_in_pty(daemon, ["run", "codex", *MITM, "--mitm-ca-cert",
                                     str(cluster.ca_cert), "--", "exec", "--skip-git-repo-check",
                                     "-c", 'model_provider="elsewhere"', "-c", provider, "hi"])
    flat = " ".join(screen.split())
    assert "403 Forbidden" in flat and '"error": "denied by uplink"' in flat, screen[-3000:]
    assert '"host": "denied.example"' in flat and '"path": "/v1/responses"' in flat


@pytest.fixture
def renewing(cluster):
    """uplinkd whose codex token ends within 5 minutes, so that the session's start refreshes
    it, against fake_openai.py's token endpoint on loopback granting 200 s tokens (renewed 2
    minutes before they end, minutes made seconds)."""
    state = Path(tempfile.mkdtemp(prefix="upt-", dir="/tmp"))
    token = subprocess.Popen(
        ["/usr/bin/python3", str(HERE / "fake_openai.py"), "--plain", "--host", "127.0.0.1",
         "--port", "0", "--state", str(state), "--answer", "-", "--account-id", ACCOUNT,
         "--renewed-token", RENEWED, "--expires-in", "200"],
        stdout=subprocess.PIPE, text=True)
    port = int(read_line(token, token.stdout, "fake_openai.py's port").split()[-1])
    d = codex_daemon(cluster, access=jwt({"exp": int(time.time()) + 200}, "near-" + "7" * 24),
                     extra_env={"UPLINK_DEBUG_TIME_DIVISOR": "60",
                                "UPLINK_OPENAI_TOKEN_URL": "http://127.0.0.1:%d/oauth/token"
                                % port},
                     machine_id="fedcba9876543210fedcba9876543210")
    d.token_log = state / "requests.jsonl"
    yield d
    end_daemon(d, SECRETS + (RENEWED,))
    token.terminate()
    token.wait()
    shutil.rmtree(state, ignore_errors=True)


def renewed_claim(auth):
    try:
        payload = auth.split()[1].split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}


def test_token_refresh_reaches_the_running_agent(cluster, renewing):
    r = uplink(renewing, "run", "codex", "--detach", *MITM, "--mitm-ca-cert",
               str(cluster.ca_cert), timeout=900)
    assert r.returncode == 0, (r.stderr, renewing.logs()[-3000:])
    sid = r.stdout.strip()
    cid = agent_containers(cluster, sid)[0]
    wait_agent_user(cluster, cid)
    curl = ("curl -s -X POST -H 'content-type: application/json' -d '{\"stream\":true}' "
            "https://chatgpt.com/backend-api/codex/responses")
    try:
        cluster.docker("exec", cid, "sh", "-c", curl, check=False)
        first = responses(cluster)[-1]["authorization"]
        assert renewed_claim(first).get("renewed") == RENEWED, first   # refreshed at start
        grants = [json.loads(x) for x in renewing.token_log.read_text().splitlines()]
        assert grants[0]["refresh_token"] == REFRESH                   # the host's, at first
        assert grants[0]["client_id"] == "app_EMoamEEZ73f0CkXaXp7hrann"

        def renewed():
            cluster.docker("exec", cid, "sh", "-c", curl, check=False)
            n = len(renewing.token_log.read_text().splitlines())
            return n > len(grants) and responses(cluster)[-1]["authorization"] != first
        wait_for(renewed, timeout=60, what="the agent's requests to carry a renewed token")
        # the host's auth.json was written back as codex writes it
        doc = json.loads((renewing.home / ".codex" / "auth.json").read_text())
        assert doc["tokens"]["refresh_token"].startswith(RENEWED)
        assert doc["last_refresh"] != "2026-01-01T00:00:00Z"
        # nothing of it in the agent's container
        r = cluster.docker("exec", cid, "sh", "-c", "cat /proc/[0-9]*/environ 2>/dev/null; "
                           "grep -rs -l -e %s / --exclude-dir=proc --exclude-dir=sys; echo done"
                           % RENEWED, check=False)
        assert r.stdout.rstrip().endswith("done") and RENEWED not in r.stdout.replace(
            "-e %s" % RENEWED, ""), r.stdout[-2000:]
    finally:
        uplink(renewing, "stop", sid)


def test_no_real_token_in_the_agent_container(cluster, daemon):
    r = uplink(daemon, "run", "codex", "--detach", *MITM, "--mitm-ca-cert",
               str(cluster.ca_cert), timeout=900)
    assert r.returncode == 0, (r.stderr, daemon.logs()[-3000:])
    sid = r.stdout.strip()
    cid = agent_containers(cluster, sid)[0]
    wait_agent_user(cluster, cid)
    try:
        r = cluster.docker("exec", "-u", str(UID), cid, "sh", "-c",
                           "jq -c . ~/.codex/auth.json; cat /proc/[0-9]*/environ 2>/dev/null | "
                           "tr '\\0' '\\n'; grep -rs -l -e '%s' -e '%s' / --exclude-dir=proc "
                           "--exclude-dir=sys 2>/dev/null; echo done" % SECRETS, check=False)
        assert r.stdout.rstrip().endswith("done"), r
        for s in SECRETS:
            assert s not in r.stdout.replace("-e '%s'" % s, ""), r.stdout[-2000:]
        auth = json.loads(r.stdout.splitlines()[0])      # the pod's, as codex reads it
        assert auth.get("tokens", {}).get("account_id") == ACCOUNT, r.stdout[:2000]
    finally:
        uplink(daemon, "stop", sid)
