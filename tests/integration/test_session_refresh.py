"""Credentials renewed while a session runs, besides AWS (test_session_aws.py): the agent's
OAuth token (its prepare() again, against a token endpoint stand-in) and {{exec:...}}
values of rules that say `refresh:`. The real daemon against the fake API server, with
UPLINK_DEBUG_TIME_DIVISOR=60 (minutes become seconds); what changes is read from the
rules Secret in the fake cluster."""

import base64
import json
import time

import pytest

from uplinktest import Env, Rpc, TokenServer, run_detached, wait_for


@pytest.fixture
def token():
    """Each refresh grant gets a new token, valid 200 s (a few seconds here)."""
    t = TokenServer()
    t.grants = 0

    def grant():
        t.grants += 1
        return {"access_token": f"sk-ant-oat01-REFRESHSENTINEL-{t.grants}",
                "refresh_token": f"sk-ant-ort01-REFRESHSENTINEL-r{t.grants}",
                "expires_in": 200, "token_type": "Bearer"}
    t.body = grant
    yield t
    t.close()


def start(tmpdir_short, fakekube, registry, extra_env):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    e.daemon.env.update({"UPLINK_DEBUG_TIME_DIVISOR": "60", "UPLINK_NOTIFIER": "log", **extra_env})
    e.daemon.start()
    wait_for(lambda: e.daemon.client("status", "--json").stdout.find('"state": "ready"') >= 0,
             what="the deploy cluster to sync")
    return e


def stop(e):
    rc = e.daemon.stop()
    e.daemon.close()
    assert rc == 0, e.daemon.logs()[-3000:]
    assert "Handles were left open at exit" not in e.daemon.logs()  # the refresh timers closed


def rules_of(fk, ns):
    s = fk.get("Secret", ns, "rules-json")
    return json.loads(base64.b64decode(s["data"]["rules.json"]))["rules"]


def header(rules, rule, name):
    [r] = [r for r in rules if r["name"] == rule]
    return r["inject"]["headers"][name]


def test_oauth_token_is_renewed_before_it_expires(tmpdir_short, fakekube, registry, token):  # noqa: F811
    e = start(tmpdir_short, fakekube, registry, {"UPLINK_ANTHROPIC_TOKEN_URL": token.url})
    try:
        creds = e.home / ".claude" / ".credentials.json"
        doc = json.loads(creds.read_text())
        doc["claudeAiOauth"]["expiresAt"] = int((time.time() + 200) * 1000)  # < 5 min: refreshed
        creds.write_text(json.dumps(doc))
        sid, r = run_detached(e)
        ns = f"agent-uplink-{sid}"
        first = header(rules_of(e.fk, ns), "anthropic-auth", "Authorization")
        assert first.startswith("Bearer sk-ant-oat01-REFRESHSENTINEL-")
        # 200 s tokens, renewed 2 minutes before they end: (200 - 120) / 60 s later
        wait_for(lambda: header(rules_of(e.fk, ns), "anthropic-auth", "Authorization") != first,
                 timeout=30, what="the token to be renewed")
        wait_for(lambda: f"Session {sid}: the agent's login token renewed" in e.daemon.logs(),
                 what="the log line")  # the apply's answer may trail the object
        # the host file has the newest token, the pod's fake credentials never a real one
        assert "REFRESHSENTINEL" in creds.read_text()
        for s in e.fk.list("Secret", ns):
            if s["metadata"]["name"] != "rules-json":
                text = "".join(base64.b64decode(v).decode(errors="replace")
                               for v in (s.get("data") or {}).values())
                assert "REFRESHSENTINEL" not in text, s["metadata"]["name"]
        assert "REFRESHSENTINEL" not in e.daemon.logs() and "REFRESHSENTINEL" not in r.stdout + r.stderr
        with Rpc(e.daemon.socket) as c:
            assert c.call("session.get", {"id": sid})["state"] == "RUNNING"
    finally:
        stop(e)


def exec_rules(e, more=""):
    """A rule whose X-Token comes from a command printing EXECSENTINEL-<n>, renewed every 2
    minutes (2 s here), then `more` rules: the script and the rules file."""
    counter, script, rules = e.tmp / "n", e.tmp / "tok.sh", e.tmp / "rules.yaml"
    script.write_text(f"#!/bin/sh\necho x >> {counter}\necho \"EXECSENTINEL-$(wc -l < {counter})\"\n")
    script.chmod(0o755)
    rules.write_text("rules:\n  - name: tok\n    hosts: ['api\\.example\\.com']\n"
                     "    refresh: 2m\n    inject:\n      headers:\n"
                     f"        X-Token: 'T {{{{exec:{script}}}}}'\n" + more)
    return script, rules


def test_exec_values_with_refresh_are_renewed(tmpdir_short, fakekube, registry):  # noqa: F811
    e = start(tmpdir_short, fakekube, registry, {})
    try:
        script, rules = exec_rules(e, "  - name: static\n    hosts: ['other\\.example\\.com']\n    inject:\n"
                                   "      headers:\n        X-Static: plain\n")
        sid, r = run_detached(e, "--allow-exec", "--rules", str(rules))
        ns = f"agent-uplink-{sid}"
        assert header(rules_of(e.fk, ns), "tok", "X-Token") == "T EXECSENTINEL-1"
        # every 2 minutes, 2 s here
        wait_for(lambda: header(rules_of(e.fk, ns), "tok", "X-Token") == "T EXECSENTINEL-2",
                 timeout=30, what="the exec value to be renewed")
        wait_for(lambda: header(rules_of(e.fk, ns), "tok", "X-Token") == "T EXECSENTINEL-3",
                 timeout=30, what="a second renewal")
        assert header(rules_of(e.fk, ns), "static", "X-Static") == "plain"
        wait_for(lambda: f"Session {sid}: exec placeholder values renewed" in e.daemon.logs(),
                 what="the log line")
        assert "EXECSENTINEL" not in e.daemon.logs() and "EXECSENTINEL" not in r.stdout + r.stderr
        # a failing command: retried, the last good value stays, one notification
        script.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
        note = "Notification: claude credentials could not be refreshed"
        wait_for(lambda: note in e.daemon.logs(), timeout=30, what="the notification")
        value = header(rules_of(e.fk, ns), "tok", "X-Token")
        assert value.startswith("T EXECSENTINEL-")
        time.sleep(2)
        assert e.daemon.logs().count(note) == 1
        assert header(rules_of(e.fk, ns), "tok", "X-Token") == value
    finally:
        stop(e)


def restart(e):
    """uplinkd stopped (SIGTERM: a clean exit, the sessions go on) and started again on the
    same state folder; returns where the new daemon's log begins."""
    assert e.daemon.stop() == 0, e.daemon.logs()[-3000:]
    assert "Handles were left open at exit" not in e.daemon.logs()
    mark = len(e.daemon.logs())
    e.daemon.start()
    wait_for(lambda: '"state": "ready"' in e.daemon.client("status", "--json").stdout, what="sync")
    return mark


def test_oauth_token_is_renewed_after_a_daemon_restart(tmpdir_short, fakekube, registry, token):  # noqa: F811
    e = start(tmpdir_short, fakekube, registry, {"UPLINK_ANTHROPIC_TOKEN_URL": token.url})
    try:
        creds = e.home / ".claude" / ".credentials.json"
        doc = json.loads(creds.read_text())
        doc["claudeAiOauth"]["expiresAt"] = int((time.time() + 200) * 1000)
        creds.write_text(json.dumps(doc))
        sid, r = run_detached(e)
        ns = f"agent-uplink-{sid}"
        record = e.tmp / "state" / "uplink" / "sessions" / f"{sid}.json"
        wait_for(lambda: "renews" in json.loads(record.read_text()), what="the record")
        assert json.loads(record.read_text())["renews"] == ["the agent's login token"]
        labels = e.fk.get("Secret", ns, "rules-json")["metadata"].get("labels")
        mark = restart(e)
        at_restart = header(rules_of(e.fk, ns), "anthropic-auth", "Authorization")
        grants = token.grants
        wait_for(lambda: header(rules_of(e.fk, ns), "anthropic-auth", "Authorization") != at_restart,
                 timeout=30, what="the token to be renewed by the new daemon")
        new = header(rules_of(e.fk, ns), "anthropic-auth", "Authorization")
        assert new == f"Bearer sk-ant-oat01-REFRESHSENTINEL-{token.grants}" and token.grants > grants
        wait_for(lambda: f"Session {sid}: the agent's login token renewed" in e.daemon.logs()[mark:],
                 what="the log line")
        logs = e.daemon.logs()[mark:]
        assert (f"Session {sid} was picked up after a restart: it goes on renewing the agent's "
                "login token\n") in logs
        assert "no longer renewed" not in logs
        # the rules read back and applied again: every rule there, the Secret's labels kept
        sec = e.fk.get("Secret", ns, "rules-json")
        assert sec["metadata"].get("labels") == labels
        assert [x["name"] for x in rules_of(e.fk, ns)] == [x["name"] for x in json.loads(
            base64.b64decode(sec["data"]["rules.json"]))["rules"]]
        assert "REFRESHSENTINEL" not in record.read_text()
        assert "REFRESHSENTINEL" not in e.daemon.logs() and "REFRESHSENTINEL" not in r.stdout + r.stderr
        with Rpc(e.daemon.socket) as c:
            assert c.call("session.get", {"id": sid})["state"] == "RUNNING"
    finally:
        stop(e)


def test_exec_values_after_a_daemon_restart_are_said_to_stop_once(tmpdir_short, fakekube, registry):  # noqa: F811
    e = start(tmpdir_short, fakekube, registry, {})
    try:
        script, rules = exec_rules(e)
        sid, r = run_detached(e, "--allow-exec", "--rules", str(rules))
        ns = f"agent-uplink-{sid}"
        record = e.tmp / "state" / "uplink" / "sessions" / f"{sid}.json"
        wait_for(lambda: "renews" in json.loads(record.read_text()), what="the record")
        assert json.loads(record.read_text())["exec_refresh_s"] == 120
        mark = restart(e)
        line = (f"Session {sid} was picked up after a restart, and these of its credentials are no "
                "longer renewed (")
        wait_for(lambda: line in e.daemon.logs()[mark:], timeout=30, what="the log line")
        assert "): exec placeholder values; they stop working when they expire" in e.daemon.logs()[mark:]
        note = "Notification: claude credentials are no longer renewed: Session " + sid
        wait_for(lambda: note in e.daemon.logs()[mark:], what="the notification")
        value = header(rules_of(e.fk, ns), "tok", "X-Token")
        time.sleep(5)  # two periods and more: no renewal, no second notification
        logs = e.daemon.logs()[mark:]
        assert logs.count(note) == 1 and logs.count(line) == 1
        assert header(rules_of(e.fk, ns), "tok", "X-Token") == value
        assert "exec placeholder values renewed" not in logs
        assert "EXECSENTINEL" not in e.daemon.logs() and "EXECSENTINEL" not in record.read_text()
        with Rpc(e.daemon.socket) as c:
            assert c.call("session.get", {"id": sid})["state"] == "RUNNING"
    finally:
        stop(e)
