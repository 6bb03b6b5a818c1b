"""The control channel end to end: the real daemon against fakekube, whose pods/proxy leads
to a real mitmdump running the addon with the session's token (read from the session's
rules Secret, as the pod mounts it). An {{exec:...}} value renewed every 2 s
(UPLINK_DEBUG_TIME_DIVISOR=60): while the proxy cannot be reached the push fails and says
so, the Secret still written; once it can, the renewal reaches the addon over the channel
while its rules file (the Secret's volume, never refreshed here) still holds the first value."""

import base64
import json
import time
import sys
from pathlib import Path

from test_session_refresh import exec_rules, header, restart, start, stop, token  # noqa: F401
from uplinktest import run_detached, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parent / "addon"))
from addon_support import PKI, Echo, Proxy, free_port, send, write_atomic  # noqa: E402



def secret_data(fk, ns, key):
    return base64.b64decode(fk.get("Secret", ns, "rules-json")["data"][key]).decode()


def start_proxy(e, pki, echo, ns, rules_text):
    """mitmdump as the pod runs it: the Secret's rules file (never refreshed after) and
    token, reached through fakekube's pods/proxy from now on."""
    token_file = e.tmp / "control-token"
    token_file.write_text(secret_data(e.fk, ns, "control-token"))
    port = free_port()
    proxy = Proxy(e.tmp, pki, echo, "mitm", reload_ms=3600 * 1000, sets=[
        f"ssl_verify_upstream_trusted_ca={pki.upstream_ca}",
        f"uplink_control_token={token_file}", f"uplink_control_port={port}"])
    write_atomic(proxy.rules_path, rules_text)
    proxy.stop()
    proxy.mitm.start()  # loads the Secret's file
    e.fk.set_proxy_address(ns, "mitm", 8081, f"127.0.0.1:{port}")
    return proxy


def x_token(rules_text):
    [r] = [r for r in json.loads(rules_text)["rules"] if r["name"] == "tok"]
    return r["inject"]["headers"]["X-Token"]


def test_a_renewal_push_reaches_the_addon(tmpdir_short, fakekube, registry):  # noqa: F811
    e = start(tmpdir_short, fakekube, registry, {})
    pki = PKI(e.tmp)
    echo = Echo(pki)
    proxy = None
    try:
        _, rules = exec_rules(e)
        sid, _ = run_detached(e, "--allow-exec", "--rules", str(rules))
        ns = f"agent-uplink-{sid}"
        ctl = secret_data(e.fk, ns, "control-token")
        assert len(ctl) == 64
        # the mitm pod is Running but nothing answers for it yet: the push fails, is logged
        wait_for(lambda: f"Session {sid}: cannot push the rules to the proxy" in e.daemon.logs(),
                 timeout=30, what="a failed push to be logged")
        assert x_token(secret_data(e.fk, ns, "rules.json")) != "T EXECSENTINEL-1"  # Secret written

        # now the proxy, as the pod runs it
        first = secret_data(e.fk, ns, "rules.json")
        proxy = start_proxy(e, pki, echo, ns, first)
        wait_for(lambda: "control: PUT /v1/rules -> 200" in proxy.mitm.stderr.read_text(),
                 timeout=30, what="a push to reach the addon")
        wait_for(lambda: f"Session {sid}: rules pushed to the proxy over the control channel"
                 in e.daemon.logs(), what="the daemon to log the push")
        n = [0]

        def seen_token():
            n[0] += 1
            tid = f"control-push-{n[0]}"
            res = send(proxy.port, "https", "api.example.com", 443, "GET", "/",
                       trust=pki.mitm_ca, headers=[("X-Test-Id", tid)])
            assert res.status == 200, res
            [seen] = echo.find(tid)
            return [v for name, v in seen["headers"] if name.lower() == "x-token"]
        # a push in flight when the address appeared may carry the first value still
        wait_for(lambda: seen_token() not in ([x_token(first)], []), timeout=30,
                 what="a renewed value to reach the upstream")
        assert seen_token()[0].startswith("T EXECSENTINEL-")
        assert proxy.rules_path.read_text() == first  # not the file: the channel
        logs = e.daemon.logs()
        assert ctl not in logs and "EXECSENTINEL" not in logs
        out = proxy.mitm.output()
        assert ctl not in out and "EXECSENTINEL" not in out
    finally:
        if proxy is not None:
            proxy.stop()
        echo.close()
        stop(e)


def test_after_a_daemon_restart_the_token_is_read_back_and_pushes_go_on(
        tmpdir_short, fakekube, registry, token):  # noqa: F811
    e = start(tmpdir_short, fakekube, registry, {"UPLINK_ANTHROPIC_TOKEN_URL": token.url})
    pki = PKI(e.tmp)
    echo = Echo(pki)
    proxy = None
    try:
        creds = e.home / ".claude" / ".credentials.json"
        doc = json.loads(creds.read_text())
        doc["claudeAiOauth"]["expiresAt"] = int((time.time() + 200) * 1000)  # renewed soon
        creds.write_text(json.dumps(doc))
        sid, _ = run_detached(e)
        ns = f"agent-uplink-{sid}"
        first = secret_data(e.fk, ns, "rules.json")
        proxy = start_proxy(e, pki, echo, ns, first)
        mark = restart(e)  # the new daemon knows no token: it reads the Secret's
        wait_for(lambda: f"Session {sid}: rules pushed to the proxy over the control channel"
                 in e.daemon.logs()[mark:], timeout=30, what="a push by the new daemon")
        renewed = json.loads(secret_data(e.fk, ns, "rules.json"))["rules"]
        assert header(renewed, "anthropic-auth", "Authorization") != header(
            json.loads(first)["rules"], "anthropic-auth", "Authorization")
        assert "control: PUT /v1/rules -> 200" in proxy.mitm.stderr.read_text()
        assert secret_data(e.fk, ns, "control-token") not in e.daemon.logs()
    finally:
        if proxy is not None:
            proxy.stop()
        echo.close()
        stop(e)
