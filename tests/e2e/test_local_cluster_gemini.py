"""`uplink run gemini` for real on the local cluster (localcluster.py): the real uplinkd, the
Gemini CLI from npm built by the daemon into its image, running behind the real mitmproxy with
the real addon and answered by fake_gemini.py for Google's hosts. With the Google login and
with an API key: the fake sees the real credentials, the pod only placeholders; a token the
host refreshes (against fake_gemini.py's token endpoint on loopback) reaches the running
agent; a request of the CLI's own HTTP stack that no rule allows is refused by the proxy.
Skipped, with the reason, where docker or debootstrap are missing."""

import json
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from localcluster import GEMINI_ANSWER, HERE
from test_local_cluster import (UID, agent_containers, dump, end_daemon, run_in_pty, uplink,
                                user_daemon)
from uplinktest import read_line, wait_for

ANSWER = GEMINI_ANSWER
TOKEN = "ya29.UPLINK-E2E-REAL-" + "5" * 24
REFRESH = "1//UPLINK-E2E-REAL-" + "6" * 24
KEY = "AIzaUPLINK-E2E-REAL-KEY-" + "4" * 16
RENEWED = "ya29.UPLINK-E2E-RENEWED-" + "7" * 16
MITM = ["--mitmproxy-image", "uplink-test/mitmproxy:8"]


def gemini_daemon(cluster, extra_env=None, expires_in_s=30 * 86400,
                  machine_id="0123456789abcdef0123456789abcdef"):
    """uplinkd as uid 1000 with a Gemini CLI Google login ending in `expires_in_s` and the
    keyring entry gemini/key (a file store)."""
    keyring = Path(tempfile.mkdtemp(prefix="uplk-", dir="/tmp"))
    (keyring / "keyring.json").write_text(json.dumps({"entries": [
        {"service": "gemini", "username": "key", "value": KEY}]}))
    subprocess.run(["chown", "-R", "%d:%d" % (UID, UID), str(keyring)], check=True)
    d = user_daemon(cluster, {"UPLINK_SECRET_STORE": "file",
                              "UPLINK_SECRET_FILE": str(keyring / "keyring.json"),
                              **(extra_env or {})}, machine_id=machine_id)
    g = d.home / ".gemini"
    g.mkdir()
    (g / "oauth_creds.json").write_text(json.dumps({
        "access_token": TOKEN, "refresh_token": REFRESH, "token_type": "Bearer",
        "scope": "https://www.googleapis.com/auth/cloud-platform",
        "expiry_date": int((time.time() + expires_in_s) * 1000)}))
    (g / "settings.json").write_text(json.dumps({"privacy": {"usageStatisticsEnabled": False}}))
    subprocess.run(["chown", "-R", "%d:%d" % (UID, UID), str(g)], check=True)
    d.keyring = keyring
    return d


def stop_daemon(d, secrets_):
    end_daemon(d, secrets_)
    shutil.rmtree(d.keyring, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(cluster):
    d = gemini_daemon(cluster)
    yield d
    stop_daemon(d, (TOKEN, REFRESH, KEY))


def fake_requests(cluster, host=None):
    return [r for r in cluster.requests("gemini") if host is None or r["host"] == host]


def run_gemini(cluster, daemon, *args):
    rc, screen = run_in_pty(daemon, ["run", "gemini", *args, *MITM, "--mitm-ca-cert",
                                     str(cluster.ca_cert), "--", "-p",
                                     "What does the fake Gemini say?"])
    dump(cluster, daemon, screen)
    assert ANSWER in screen, (rc, screen[-4000:], daemon.logs()[-4000:])
    assert rc == 0, (screen[-3000:], daemon.logs()[-3000:])
    return screen


def test_google_login_answers_through_the_mitm(cluster, daemon):
    before = len(fake_requests(cluster))
    run_gemini(cluster, daemon)
    reqs = fake_requests(cluster)[before:]
    ca = [r for r in reqs if r["host"] == "cloudcode-pa.googleapis.com"]
    methods = [r["path"].split(":", 1)[-1].split("?")[0] for r in ca]
    assert "loadCodeAssist" in methods and "streamGenerateContent" in methods, reqs
    # the real token on every request; the pod's placeholder on none
    assert all(r["authorization"] == "Bearer " + TOKEN for r in ca), ca
    check = [r for r in reqs if r["path"] == "/tokeninfo"]
    assert check and all(r["authorization"] == "Bearer " + TOKEN for r in check), reqs
    assert not any("placeholder" in (r["authorization"] or "") for r in reqs), reqs
    # the CLI never refreshed by itself: its fake login does not expire
    assert not [r for r in reqs if r["path"] == "/token"], reqs


def test_api_key_answers_through_the_mitm(cluster, daemon):
    before = len(fake_requests(cluster))
    run_gemini(cluster, daemon, "--api-key")
    reqs = fake_requests(cluster)[before:]
    gl = [r for r in reqs if r["host"] == "generativelanguage.googleapis.com"]
    assert any(":streamGenerateContent" in r["path"] for r in gl), reqs
    assert all(r["x-goog-api-key"] == KEY for r in gl), gl
    assert not [r for r in reqs if r["host"] == "cloudcode-pa.googleapis.com"], reqs


def run_detached(cluster, daemon, *args):
    r = uplink(daemon, "run", "gemini", "--detach", *MITM, "--mitm-ca-cert",
               str(cluster.ca_cert), *args, timeout=1500)
    assert r.returncode == 0, (r.stderr, daemon.logs()[-3000:])
    sid = r.stdout.strip()
    ids = agent_containers(cluster, sid)
    assert len(ids) == 1, ids
    # --detach returns once the pod runs, while its entrypoint may still be renaming the
    # image's uid 1000 to the user (usermod refuses while a process of that uid runs): wait
    # for the user, then for the agent's tmux session, before running anything as the user
    user = pwd.getpwuid(UID).pw_name

    def ready():
        r = cluster.docker("exec", ids[0], "getent", "passwd", str(UID), check=False)
        if not r.stdout.startswith(user + ":"):
            return False
        return cluster.docker("exec", "-u", str(UID), ids[0], "tmux", "-S",
                              "/run/uplink/tmux.sock", "has-session", "-t", "uplink",
                              check=False).returncode == 0
    wait_for(ready, timeout=120, what="the agent's user and tmux session")
    return sid, ids[0]


def gemini_in(cluster, daemon, cid, *env):
    """`gemini -p` run again in the agent's container, as the user, as its tmux would."""
    return cluster.docker("exec", "-u", "%d:%d" % (UID, UID), "-w", str(daemon.home / "proj"),
                          "-e", "HOME=%s" % daemon.home, *[a for e in env for a in ("-e", e)],
                          cid, "gemini", "--yolo", "-p", "What does the fake Gemini say?",
                          check=False, timeout=300)


def agent_story(cluster, cid):
    """What the agent's container says about itself, for a failure."""
    return (cluster.docker("inspect", "-f", "{{json .State}}", cid, check=False).stdout,
            cluster.docker("logs", "--tail", "80", cid, check=False).stdout[-4000:])


def test_denied_request_of_the_cli_gets_the_403(cluster, daemon):
    sid, cid = run_detached(cluster, daemon)
    try:
        # Code Assist moved to a host no rule allows: the CLI's own client (gaxios through
        # HTTPS_PROXY, trusting NODE_EXTRA_CA_CERTS) gets the proxy's answer
        r = gemini_in(cluster, daemon, cid, "CODE_ASSIST_ENDPOINT=https://denied.example")
        out = r.stdout + r.stderr
        assert r.returncode != 0 and ANSWER not in out, out[-3000:]
        # the CLI prints the 403 JSON's "error" ("An unexpected critical error occurred:
        # Error: denied by uplink", after gaxios's dump of the answer)
        assert "403" in out and "denied by uplink" in out, (r.returncode, out[-3000:],
                                                            agent_story(cluster, cid))

        def denied():
            logs = uplink(daemon, "logs", sid, "--denied").stdout
            return "denied.example" in logs and "loadCodeAssist" in logs
        wait_for(denied, timeout=60, what="the refused request in uplink logs --denied")
        # and the same CLI, told nothing, answers
        r = gemini_in(cluster, daemon, cid)
        assert ANSWER in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])
    finally:
        uplink(daemon, "stop", sid)


@pytest.fixture
def token_endpoint():
    """fake_gemini.py on loopback without TLS: the host's refresh grants go there."""
    d = Path(tempfile.mkdtemp(prefix="uplt-", dir="/tmp"))
    p = subprocess.Popen(["/usr/bin/python3", str(HERE / "fake_gemini.py"), "--state", str(d),
                          "--host", "127.0.0.1", "--port", "0", "--renewed-token", RENEWED],
                         stdout=subprocess.PIPE, text=True)
    port = int(read_line(p, p.stdout, "fake_gemini.py's port").rsplit(" ", 1)[1])
    yield "http://127.0.0.1:%d/token" % port, d / "requests.jsonl"
    p.terminate()
    p.wait(30)
    shutil.rmtree(d, ignore_errors=True)


def test_refreshed_token_reaches_the_running_agent(cluster, token_endpoint):
    url, grants_log = token_endpoint
    d = gemini_daemon(cluster, {"UPLINK_DEBUG_TIME_DIVISOR": "60",
                                "UPLINK_GOOGLE_TOKEN_URL": url},
                      expires_in_s=200, machine_id="fedcba9876543210fedcba9876543210")

    def grants():
        if not grants_log.exists():
            return []
        return [json.loads(ln) for ln in grants_log.read_text().splitlines() if ln]

    def last_auth():
        ca = fake_requests(cluster, "cloudcode-pa.googleapis.com")
        return ca[-1]["authorization"] if ca else None
    try:
        sid, cid = run_detached(cluster, d)
        try:
            # renewed at the start (the login ended within 5 minutes), with the host's token
            assert grants() and grants()[0]["refresh_token"] == REFRESH, grants()
            assert grants()[0]["client_id"].startswith("681255809395-")
            r = gemini_in(cluster, d, cid)
            assert ANSWER in r.stdout, (r.returncode, r.stdout[-2000:], r.stderr[-2000:],
                                        cluster.docker("logs", "--tail", "60", cid,
                                                       check=False).stderr[-3000:],
                                        [(q["method"], q["host"], q["path"], q["authorization"])
                                         for q in fake_requests(cluster)][-12:],
                                        d.logs()[-1500:])
            first = last_auth()
            assert first.startswith("Bearer " + RENEWED + "-"), first
            n = len(grants())
            # 200 s tokens renewed 2 minutes before they end, minutes made seconds
            wait_for(lambda: len(grants()) > n, timeout=60, what="the host to renew again")
            r = gemini_in(cluster, d, cid)
            assert ANSWER in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])
            assert last_auth() != first and last_auth().startswith("Bearer " + RENEWED + "-")
            # the host's file was updated as the CLI would: the user's own gemini keeps working
            saved = json.loads((d.home / ".gemini" / "oauth_creds.json").read_text())
            assert saved["access_token"].startswith(RENEWED + "-")
            assert saved["refresh_token"] == REFRESH and saved["expiry_date"] > time.time() * 1000
            # the agent never saw a real token
            r = cluster.docker("exec", cid, "sh", "-c", "cat /proc/[0-9]*/environ 2>/dev/null; "
                               "grep -rs -l -e %s -e %s / --exclude-dir=proc --exclude-dir=sys; "
                               "echo done" % (RENEWED, TOKEN), check=False)
            out = r.stdout.replace("-e %s -e %s" % (RENEWED, TOKEN), "")
            assert out.rstrip().endswith("done") and RENEWED not in out and TOKEN not in out, \
                out[-2000:]
        finally:
            uplink(d, "stop", sid)
    finally:
        stop_daemon(d, (TOKEN, REFRESH, KEY, RENEWED))
