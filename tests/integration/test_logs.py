"""The audit log: while a session runs, uplinkd follows the mitm container's log, keeps
the addon's audit lines (manifests/mitm/README.md "Audit log") in
sessions/<id>/audit.jsonl, and `uplink logs` shows them, live with --follow and from the
host file once the session has ended."""

import json
import subprocess

import pytest

from uplinktest import Lines, Rpc, run_detached, uplink_bin, wait_for


def audit(decision, method, host, path, rule, status, ts="2026-11-29T09:02:13.031Z"):
    rec = {"uplink": "audit", "ts": ts, "decision": decision, "rule": rule,
           "layer": "user" if rule else None, "method": method, "scheme": "https", "host": host,
           "port": 443, "path": path, "status": status, "injected": [], "bytes_in": 0, "bytes_out": 0}
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=True)


ALLOW = audit("allow", "GET", "api.anthropic.com", "/v1/models", "claude-api", 200)
DENY = audit("deny", "POST", "evil.example.com", "/upload?x=1", None, 403, ts="2026-11-29T09:02:14.500Z")
REFUSED = audit("connect-refused", "CONNECT", "pastebin.com", None, None, 403, ts="2026-11-29T09:02:15.000Z")
NOISE = [
    "127.0.0.1:40312: client connect",
    '{"uplink":"other","ts":"x"}',
    '{"not":"audit"}',
    "{broken json",
    'uplink: INFO: loaded 12 rules',
]


def audit_file(env, sid):
    return env.tmp / "state" / "uplink" / "sessions" / sid / "audit.jsonl"


def file_lines(env, sid):
    p = audit_file(env, sid)
    return p.read_text().splitlines() if p.exists() else []


def logs(env, *args, timeout=30):
    return env.daemon.client("logs", *args, timeout=timeout)


@pytest.fixture
def running(env):  # noqa: F811
    sid, _ = run_detached(env)
    ns = f"agent-uplink-{sid}"
    fk = env.fk
    fk.pod_log(ns, "mitm", NOISE[0] + "\n", container="mitm")
    fk.pod_log(ns, "mitm", ALLOW + "\n" + NOISE[1] + "\n" + NOISE[2] + "\n", container="mitm")
    fk.pod_log(ns, "mitm", NOISE[3] + "\n" + DENY + "\n" + NOISE[4] + "\n", container="mitm")
    wait_for(lambda: len(file_lines(env, sid)) >= 2, timeout=10, what="the audit lines on the host")
    return env, sid, ns


def test_audit_lines_reach_the_host_file_and_logs(running):
    env, sid, ns = running
    # a last line as a barrier (the stream is read in order): once it is in, the noise before
    # it has been read, and kept out
    env.fk.pod_log(ns, "mitm", "noise\n" + REFUSED + "\n", container="mitm")
    wait_for(lambda: len(file_lines(env, sid)) >= 3, timeout=10, what="the barrier line")
    assert file_lines(env, sid) == [ALLOW, DENY, REFUSED]
    r = logs(env, sid)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == 3, out
    assert out[0].split() == ["2026-11-29", "09:02:13", "allow", "GET", "api.anthropic.com",
                              "/v1/models", "claude-api"]
    assert out[1].split() == ["2026-11-29", "09:02:14", "deny", "POST", "evil.example.com",
                              "/upload?x=1", "-"]
    assert "\033[" not in r.stdout  # not a terminal: no colour
    # the namespace name works as well as the id
    assert logs(env, ns).stdout == r.stdout


def test_denied_and_json(running):
    env, sid, ns = running
    r = logs(env, sid, "--denied")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1 and " deny " in r.stdout
    r = logs(env, sid, "--json")
    assert r.stdout.splitlines() == [ALLOW, DENY]
    r = logs(env, sid, "--json", "--denied")
    assert r.stdout.splitlines() == [DENY]


def test_follow_gets_new_lines_until_the_session_ends(running):
    env, sid, ns = running
    e = dict(env.daemon.env)
    e.pop("UPLINK_DEBUG", None)
    p = subprocess.Popen([uplink_bin(), "logs", sid, "--follow", "--json"], env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = Lines(p, p.stdout)
    try:
        assert out.next("the first line").strip() == ALLOW
        assert out.next("the second line").strip() == DENY
        env.fk.pod_log(ns, "mitm", "noise\n" + REFUSED + "\n", container="mitm")
        assert out.next("the line written while following").strip() == REFUSED
        # a dropped stream is reopened; what the log replays is not written twice
        env.fk.cut_watches()
        # what follows goes to the reopened stream (or the log it replays), whenever it opens
        wait_for(lambda: "the mitm log stream ended" in env.daemon.logs(), what="the cut to be seen")
        later = audit("allow", "GET", "api.anthropic.com", "/v1/later", "claude-api", 200,
                      ts="2026-11-29T09:03:00.000Z")
        env.fk.pod_log(ns, "mitm", later + "\n", container="mitm")
        assert out.next("the line after the stream was reopened").strip() == later
        wait_for(lambda: len(file_lines(env, sid)) == 4, timeout=10, what="four lines")
        assert file_lines(env, sid) == [ALLOW, DENY, REFUSED, later]
        assert "the mitm log stream ended" in env.daemon.logs()  # it was reopened
        # the session ends: the follower ends with it
        assert env.daemon.client("stop", sid).returncode == 0
        p.wait(timeout=15)
        assert p.returncode == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    wait_for(lambda: env.session(sid)["state"] == "GONE", timeout=30, what="the session to end")
    # afterwards, from the host file
    r = logs(env, sid, "--json")
    assert r.returncode == 0 and r.stdout.splitlines() == [ALLOW, DENY, REFUSED, later]
    r = logs(env, sid, "--denied")
    assert [l.split()[2] for l in r.stdout.splitlines()] == ["deny", "connect-refused"]
    # --follow on an ended session prints the log and returns
    r = logs(env, sid, "--follow", "--json", timeout=10)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 4


def test_rpc_notifications_and_errors(running):
    env, sid, ns = running
    with Rpc(env.daemon.socket) as c:
        res = c.call("session.logs", {"id": sid, "denied_only": True})
        assert res["id"] == sid and res["count"] == 1 and res["total"] == 2
        evs = [n["params"] for n in c.notifications if n["method"] == "audit.event"]
        assert [(e["index"], e["event"]["decision"]) for e in evs] == [(1, "deny")]
        msg = c.call_raw("session.logs", {"id": "000000000000"})
        assert msg["error"]["data"]["name"] == "SESSION_NOT_FOUND"
        msg = c.call_raw("session.logs", {"id": sid, "bogus": 1})
        assert msg["error"]["data"]["name"] == "INVALID_PARAMS" and "bogus" in msg["error"]["message"]
    r = logs(env, "000000000000")
    assert r.returncode == 1 and "no session" in r.stderr
    r = logs(env)
    assert r.returncode == 2


def test_follow_client_leaving_is_forgotten(running):
    env, sid, ns = running
    e = dict(env.daemon.env)
    e.pop("UPLINK_DEBUG", None)
    p = subprocess.Popen([uplink_bin(), "logs", sid, "-f"], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert "allow" in Lines(p, p.stdout).next("the first line")
    p.kill()
    p.wait()
    env.fk.pod_log(ns, "mitm", REFUSED + "\n", container="mitm")
    wait_for(lambda: len(file_lines(env, sid)) == 3, timeout=10, what="the third line")
    with Rpc(env.daemon.socket) as c:
        assert c.call("session.get", {"id": sid})["state"] == "RUNNING"


def test_daemon_restart_picks_the_log_up_without_duplicates(running):
    env, sid, ns = running  # both lines are in the file: the fixture waited for them
    env.daemon.stop(sig=9)
    env.fk.pod_log(ns, "mitm", REFUSED + "\n", container="mitm")  # while nobody listens
    env.daemon.start()
    try:
        wait_for(lambda: len(file_lines(env, sid)) >= 3, timeout=15,
                 what="the line logged meanwhile")
    except AssertionError as e:  # say what the new daemon did meanwhile
        raise AssertionError(f"{e}; file: {file_lines(env, sid)}; uplinkd's log:\n"
                             f"{env.daemon.logs()[-4000:]}") from None
    # a line after the replay, as a barrier: once it is in, any duplicate would be before it
    later = audit("allow", "GET", "api.anthropic.com", "/v1/later", "claude-api", 200,
                  ts="2026-11-29T09:03:00.000Z")
    env.fk.pod_log(ns, "mitm", later + "\n", container="mitm")
    wait_for(lambda: later in file_lines(env, sid), timeout=15, what="the barrier line")
    assert file_lines(env, sid) == [ALLOW, DENY, REFUSED, later]
    r = logs(env, sid, "--json")
    assert r.stdout.splitlines() == [ALLOW, DENY, REFUSED, later]
