"""Ask mode end to end: the real daemon against fakekube, whose pods/proxy leads to a real
mitmdump running the addon with the session's token and uplink_ask as the pod runs it. A
request no rule allows waits, unsent, until `uplink approve` lets it through; `uplink deny`
answers the 403 saying the user refused; `approve --session` lets the next identical
request through without asking; the listing holds no header, body or query."""

import base64
import json
import signal
import sys
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from test_session_refresh import start, stop
from uplinktest import run_detached, uplink_bin, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parent / "addon"))
from addon_support import PKI, Echo, Proxy, free_port, send, write_atomic  # noqa: E402

MARK = "ASKSENTINEL"


def secret_data(fk, ns, key):
    return base64.b64decode(fk.get("Secret", ns, "rules-json")["data"][key]).decode()


def client_json(e, *args):
    r = e.daemon.client(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class Agent:
    """A request from the agent, in a thread: it waits while held."""

    def __init__(self, proxy, pki, host, path, method="GET"):
        self.tid, self.out = uuid.uuid4().hex, {}
        hdrs = [("X-Test-Id", self.tid), ("Authorization", f"Bearer {MARK}-header")]

        def go():
            self.out["r"] = send(proxy.port, "https", host, 443, method, path, headers=hdrs,
                                 trust=pki.mitm_ca, timeout=120)
        self.t = threading.Thread(target=go, daemon=True)
        self.t.start()

    def result(self):
        self.t.join(120)
        assert not self.t.is_alive()
        return self.out["r"]


def held(e, host):
    doc = client_json(e, "approvals")
    hits = [h for h in doc["held"] if h["host"] == host]
    return hits[0] if hits else None


def ask_proxy(e, pki, echo, sid):
    """The session's mitm as its pod runs it (real mitmdump, the addon, uplink_ask, the
    session's rules and control token), reached by the daemon through fakekube's pods/proxy."""
    ns = f"agent-uplink-{sid}"
    args = e.fk.get("Pod", ns, "mitm")["spec"]["containers"][0]["args"]
    assert "uplink_ask=true" in args
    token = secret_data(e.fk, ns, "control-token")
    (e.tmp / "control-token").write_text(token)
    port = free_port()
    proxy = Proxy(e.tmp, pki, echo, "mitm", reload_ms=3600 * 1000, sets=[
        f"ssl_verify_upstream_trusted_ca={pki.upstream_ca}", "uplink_ask=true",
        f"uplink_control_token={e.tmp / 'control-token'}", f"uplink_control_port={port}"])
    write_atomic(proxy.rules_path, secret_data(e.fk, ns, "rules.json"))
    proxy.stop()
    proxy.mitm.start()
    e.fk.set_proxy_address(ns, "mitm", 8081, f"127.0.0.1:{port}")
    return proxy, token


class Asking:
    """The daemon (its environment plus `env`), a test PKI and an echo upstream; .proxy(sid)
    starts the session's mitm. .close() stops all of it."""

    def __init__(self, tmp, fakekube, registry, env):
        self.e = start(tmp, fakekube, registry, env)
        self.pki = PKI(self.e.tmp)
        self.echo = Echo(self.pki)
        self.proxies = []

    def proxy(self, sid):
        pr, token = ask_proxy(self.e, self.pki, self.echo, sid)
        self.proxies.append(pr)
        return pr, token

    def close(self):
        for pr in self.proxies:
            pr.stop()
        self.echo.close()
        stop(self.e)


@pytest.fixture
def asking(tmpdir_short, fakekube, registry):  # noqa: F811
    """Ask mode with questions in the log (UPLINK_NOTIFIER=log)."""
    a = Asking(tmpdir_short, fakekube, registry, {})
    yield a
    a.close()


@pytest.fixture
def asking_desktop(tmpdir_short, fakekube, registry, bus):  # noqa: F811
    """Ask mode with questions on the desktop: the daemon's notifier on a private session
    bus whose notification server is python3-dbusmock's (.bus), and an XDG_CONFIG_HOME of
    its own (.own: the user's own rules file there)."""
    pytest.importorskip("dbus")
    bus.start_server()
    xdg = tmpdir_short / "xdg-config"
    a = Asking(tmpdir_short, fakekube, registry,
               {**bus.env(), "UPLINK_NOTIFIER": "dbus", "XDG_CONFIG_HOME": str(xdg)})
    a.bus, a.own = bus, xdg / "uplink" / "rules.yaml"
    yield a
    a.close()


def test_approve_deny_and_session_through_the_daemon(asking):
    e, pki, echo = asking.e, asking.pki, asking.echo
    sid, _ = run_detached(e, "--ask")
    proxy, token = asking.proxy(sid)
    env = dict(e.daemon.env)
    env.pop("UPLINK_DEBUG", None)
    follow = subprocess.Popen([uplink_bin(), "logs", sid, "-f"], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = []
    threading.Thread(target=lambda: lines.extend(follow.stdout), daemon=True).start()

    # once: held, unsent, then released by `uplink approve`
    a = Agent(proxy, pki, "ask.example.org", f"/repos/x/pulls?k={MARK}-query", "POST")
    entry = wait_for(lambda: held(e, "ask.example.org"), timeout=60,
                     what="the held request in uplink approvals")
    assert entry["id"].startswith(f"{sid}-") and entry["session"] == sid
    assert entry["method"] == "POST" and entry["path"] == "/repos/x/pulls"
    assert entry["rule"] == {"name": "approved-ask.example.org",
                             "hosts": ["ask\\.example\\.org"], "methods": ["POST"],
                             "paths": ["/repos/x(/[^?]*)?(\\?.*)?"]}
    assert MARK not in e.daemon.client("approvals", "--json").stdout
    assert MARK not in e.daemon.client("approvals").stdout
    assert echo.find(a.tid) == [] and a.t.is_alive()
    # uplink logs -f shows it inline, with how to decide
    wait_for(lambda: any(" waiting " in ln and "ask.example.org /repos/x/pulls" in ln
                         and f"uplink approve {entry['id']}" in ln for ln in lines),
             timeout=30, what="the waiting request in uplink logs -f")
    r = e.daemon.client("approve", entry["id"])
    assert r.returncode == 0 and "1 request released" in r.stdout, r.stdout + r.stderr
    assert a.result().status == 200
    assert len(echo.find(a.tid)) == 1
    # the same id again: answered already
    r = e.daemon.client("approve", entry["id"])
    assert r.returncode != 0 and "uplink approvals" in r.stderr

    # deny (POSTs: the default rules' generic layer lets any GET through)
    d = Agent(proxy, pki, "deny.example.org", "/x", "POST")
    entry = wait_for(lambda: held(e, "deny.example.org"), timeout=60, what="held")
    assert e.daemon.client("deny", entry["id"]).returncode == 0
    res = d.result()
    assert res.status == 403 and res.json()["answer"] == "denied"
    assert echo.find(d.tid) == []

    # for the session: the rule is shown first, then the next like it is not asked about
    s = Agent(proxy, pki, "sess.example.org", "/api/v1/items", "POST")
    entry = wait_for(lambda: held(e, "sess.example.org"), timeout=60, what="held")
    r = e.daemon.client("approve", entry["id"], "--session")
    assert r.returncode == 0, r.stderr
    assert "Adding to session" in r.stdout and "sess\\\\.example\\\\.org" in r.stdout
    assert s.result().status == 200
    res = send(proxy.port, "https", "sess.example.org", 443, "POST", "/api/v1/other",
               trust=pki.mitm_ca)
    assert res.status == 200
    # the rule is in the rules Secret too, last, as the proxy orders it: a restarted mitm
    # pod (which reads the Secret) keeps it and does not ask again
    ns = f"agent-uplink-{sid}"

    def last_rule():
        return json.loads(secret_data(e.fk, ns, "rules.json"))["rules"][-1]
    wait_for(lambda: last_rule()["name"] == "approved-sess.example.org", timeout=30,
             what="the approved rule in the rules Secret")
    assert last_rule()["layer"] == "session" and last_rule()["methods"] == ["POST"]
    proxy.stop()
    write_atomic(proxy.rules_path, secret_data(e.fk, ns, "rules.json"))
    proxy.mitm.start()
    res = send(proxy.port, "https", "sess.example.org", 443, "POST", "/api/v1/after-restart",
               trust=pki.mitm_ca, timeout=30)
    assert res.status == 200
    assert held(e, "sess.example.org") is None
    logs = e.daemon.logs()
    assert f"waiting for the user: POST ask.example.org/repos/x/pulls" in logs
    # the desktop question (log backend here), no secret in it; the three came within
    # the flood limit (10 s): one question, the others left to the list
    asked = [ln for ln in logs.splitlines() if "Notification: question" in ln and "claude in" in ln]
    assert len(asked) == 1 and "wants POST ask.example.org/repos/x/pulls" in asked[0], asked
    assert token not in logs and MARK not in logs
    assert token not in proxy.mitm.output()
    follow.terminate()
    follow.wait(10)
    assert not [ln for ln in lines if MARK in ln]


SAVED_RULE = {"name": "approved-save.example.org", "hosts": ["save\\.example\\.org"],
              "methods": ["POST"], "paths": ["/api/v2(/[^?]*)?(\\?.*)?"]}


def test_approve_save_writes_the_rule_every_next_session_takes(asking):
    e, pki, echo = asking.e, asking.pki, asking.echo
    own = e.home / ".config" / "uplink" / "rules.yaml"
    repo = e.home / "code" / "app"
    (repo / ".git").mkdir(parents=True)
    plain = e.tmp / "notes"
    plain.mkdir()
    (plain / "flow.yaml").write_text("rules: []\n")
    sid, _ = run_detached(e, "--ask")
    proxy, token = asking.proxy(sid)

    # --save: the rule is shown, saved to your own file, and the request goes
    a = Agent(proxy, pki, "save.example.org", f"/api/v2/items/42?k={MARK}-query", "POST")
    entry = wait_for(lambda: held(e, "save.example.org"), timeout=60, what="held")
    assert not own.exists()
    r = e.daemon.client("approve", entry["id"], "--save")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "and saving it to your own rules file" in r.stdout
    assert f"Saved the rule to {own}:4;" in r.stdout and "1 request released" in r.stdout
    assert a.result().status == 200 and len(echo.find(a.tid)) == 1
    text = own.read_text()
    assert text.startswith("rules:\n  # Saved ") and " by uplink approve from session " in text
    assert f"from session {sid} (claude in " in text
    assert "POST save.example.org/api/v2/items/42\n  - name: 'approved-save.example.org'" in text
    assert MARK not in text and token not in text
    assert (own.stat().st_mode & 0o777) == 0o600
    # for this session at once: the next like it is not asked about
    res = send(proxy.port, "https", "save.example.org", 443, "POST", "/api/v2/other",
               trust=pki.mitm_ca)
    assert res.status == 200

    # a project's file (a repository), not trusted: refused, the request waits on
    b = Agent(proxy, pki, "proj.example.org", "/x", "POST")
    entry = wait_for(lambda: held(e, "proj.example.org"), timeout=60, what="held")
    r = e.daemon.client("approve", entry["id"], "--save-to", str(repo / "rules.yaml"))
    assert r.returncode != 0 and "uplink trust" in r.stderr and "still waits" in r.stderr, \
        r.stderr
    assert not (repo / "rules.yaml").exists()
    # a file whose rules: is a flow list: refused with the reason, nothing changed
    r = e.daemon.client("approve", entry["id"], "--save-to", str(plain / "flow.yaml"))
    assert r.returncode != 0 and "not a block list" in r.stderr, r.stderr
    assert (plain / "flow.yaml").read_text() == "rules: []\n"
    assert held(e, "proj.example.org") is not None and b.t.is_alive()
    # a relative name is taken from the client's folder; --save and --session: one only
    r = e.daemon.client("approve", entry["id"], "--save", "--session")
    assert r.returncode == 2 and "not both" in r.stderr
    r = subprocess.run([uplink_bin(), "approve", entry["id"], "--save-to", "new.yaml"],
                       cwd=plain, env=e.daemon.env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"Saved the rule to {plain / 'new.yaml'}:4" in r.stdout
    assert b.result().status == 200
    assert "approved-proj.example.org" in (plain / "new.yaml").read_text()

    # the next session takes your own file: its rules carry the saved rule, and
    # uplink config show says where it comes from
    cfg = client_json(e, "config", "show")
    assert any(v == str(own) for v in json.dumps(cfg).split('"')), cfg
    assert "saved approvals" in json.dumps(cfg)
    sid2, _ = run_detached(e)
    rules = json.loads(secret_data(e.fk, f"agent-uplink-{sid2}", "rules.json"))["rules"]
    [saved] = [x for x in rules if x["name"] == "approved-save.example.org"]
    assert saved["methods"] == ["POST"] and saved["layer"] == "user", saved
    assert e.daemon.client("stop", sid2).returncode == 0
    logs = e.daemon.logs()
    assert f"Saved an approval's rule to {own}:4" in logs
    assert token not in logs and MARK not in logs


def test_ask_mode_goes_on_after_the_daemon_is_killed(asking):
    """The record says the session asks; the control token comes back from its rules
    Secret: a request held while the daemon was down is listed and approved by the new one,
    and a session approval still reaches the rules Secret."""
    e, pki, echo = asking.e, asking.pki, asking.echo
    sid, _ = run_detached(e, "--ask")
    ns = f"agent-uplink-{sid}"
    proxy, token = asking.proxy(sid)
    record = json.loads((e.tmp / "state" / "uplink" / "sessions" / f"{sid}.json").read_text())
    assert record["ask"] is True
    e.daemon.stop(signal.SIGKILL)
    a = Agent(proxy, pki, "later.example.org", "/v1/things", "POST")
    e.daemon.start()
    wait_for(lambda: '"state": "ready"' in e.daemon.client("status", "--json").stdout,
             what="sync")
    entry = wait_for(lambda: held(e, "later.example.org"), timeout=60,
                     what="the held request listed by the restarted daemon")
    assert "its ask mode goes on" in e.daemon.logs()
    r = e.daemon.client("approve", entry["id"], "--session")
    assert r.returncode == 0, r.stdout + r.stderr
    assert a.result().status == 200 and len(echo.find(a.tid)) == 1
    wait_for(lambda: json.loads(secret_data(e.fk, ns, "rules.json"))["rules"][-1]["name"]
             == "approved-later.example.org", timeout=30, what="the rule in the Secret")
    assert token not in e.daemon.logs()


# ---- the desktop question's answers that write: "Always (save)", and what if it cannot

def question_about(bus, what):
    """The question about held request `what` ("POST host/path") on the mock, with its id."""
    nid, n = bus.shown(lambda n: n["summary"].endswith(f" wants {what}"),
                       what=f"the question about {what}")
    # the keys daemon/notify-ask.c registers, each with its label
    assert n["actions"][0::2] == ["allow-once", "allow-session", "always", "deny"], n
    return nid, n


def rules_secret(e, sid):
    return json.loads(secret_data(e.fk, f"agent-uplink-{sid}", "rules.json"))["rules"]


def click(bus, nid, key):
    import dbus
    bus.emit("ActionInvoked", "us", [dbus.UInt32(nid), key])


def test_always_from_the_notification_saves_the_rule(asking_desktop):
    a = asking_desktop
    e, pki, echo, bus, own = a.e, a.pki, a.echo, a.bus, a.own
    sid, _ = run_detached(e, "--ask")
    proxy, token = a.proxy(sid)

    ag = Agent(proxy, pki, "always.example.org", f"/api/v3/items/7?k={MARK}-query", "POST")
    nid, n = question_about(bus, "POST always.example.org/api/v3/items/7")
    entry = held(e, "always.example.org")
    assert entry and f"uplink approve {entry['id']}" in n["body"], (entry, n)
    assert echo.find(ag.tid) == [] and ag.t.is_alive()
    assert not own.exists()
    click(bus, nid, "always")

    # the held request goes on to the upstream, and its answer comes back
    res = ag.result()
    assert res.status == 200 and len(echo.find(ag.tid)) == 1
    assert res.json()["method"] == "POST"
    assert res.json()["path"] == f"/api/v3/items/7?k={MARK}-query"
    # saved (before the request went) to the user's own file under XDG_CONFIG_HOME
    text = own.read_text()
    assert text.startswith("rules:\n  # Saved ") and " by the notification's Always " in text
    assert f"from session {sid} (claude in " in text
    assert ("POST always.example.org/api/v3/items/7\n"
            "  - name: 'approved-always.example.org'") in text, text
    assert MARK not in text and token not in text
    assert (own.stat().st_mode & 0o777) == 0o600
    # and kept in the session's rules Secret, last, for a restarted mitm pod
    wait_for(lambda: rules_secret(e, sid)[-1]["name"] == "approved-always.example.org",
             timeout=30, what="the saved rule in the rules Secret")
    last = rules_secret(e, sid)[-1]
    assert last["layer"] == "session" and last["methods"] == ["POST"]
    assert last["paths"] == ["/api/v3(/[^?]*)?(\\?.*)?"]
    # the next one like it is not held: it goes at once, and nothing waits
    res = send(proxy.port, "https", "always.example.org", 443, "POST", "/api/v3/items/8",
               trust=pki.mitm_ca, timeout=30)
    assert res.status == 200 and res.json()["path"] == "/api/v3/items/8"
    assert held(e, "always.example.org") is None
    logs = e.daemon.logs()
    assert f"Saved an approval's rule to {own}:4" in logs
    assert "did not save" not in logs and "did not take" not in logs
    assert token not in logs and MARK not in logs


def test_always_that_cannot_save_asks_again(asking_desktop):
    """The user's own file cannot take the rule (its rules: is a flow list, which the saver
    refuses to rewrite): nothing is let through as if saved. The request waits on, as with
    uplink approve --save, and a new question says why; answered "for this session" it goes.
    And when the rules Secret then refuses the rule, a notification says so."""
    a = asking_desktop
    e, pki, echo, bus, own = a.e, a.pki, a.echo, a.bus, a.own
    sid, _ = run_detached(e, "--ask")
    proxy, token = a.proxy(sid)
    own.parent.mkdir(parents=True)
    own.write_text("rules: []\n")

    ag = Agent(proxy, pki, "nosave.example.org", "/v1/jobs", "POST")
    nid, _ = question_about(bus, "POST nosave.example.org/v1/jobs")
    entry = held(e, "nosave.example.org")
    click(bus, nid, "always")
    nid2, n = bus.shown(lambda n: "is not saved" in n["summary"], what="the second question")
    assert nid2 > nid
    assert n["summary"].startswith("claude in ") and n["summary"].endswith(
        ": the rule for POST nosave.example.org/v1/jobs is not saved"), n
    assert "not a block list" in n["body"] and "still waits" in n["body"], n
    assert f"uplink approve {entry['id']} --session or --save" in n["body"], n
    assert n["actions"][0::2] == ["allow-once", "allow-session", "always", "deny"]
    assert (n["urgency"], n["timeout"]) == (2, 0)
    # nothing decided: the file is as it was, the request still waits, unsent
    assert own.read_text() == "rules: []\n"
    assert held(e, "nosave.example.org") is not None
    assert ag.t.is_alive() and echo.find(ag.tid) == []
    logs = e.daemon.logs()
    assert f'Session {sid}: "Always" did not save the rule: ' in logs
    assert f"request {entry['id'].rsplit('-', 1)[1]} still waits" in logs

    # for the session from the second question; the rules Secret refuses it this time
    ns = f"agent-uplink-{sid}"
    e.fk.add_fault(status=403, method="PATCH", path_regex=f"/namespaces/{ns}/secrets/rules-json",
                   message='secrets "rules-json" is forbidden: exceeded quota')
    click(bus, nid2, "allow-session")
    assert ag.result().status == 200 and len(echo.find(ag.tid)) == 1
    _, kept = bus.shown(lambda n: "approved rule is not kept" in n["summary"],
                        what="the notification that the rule is not kept")
    assert kept["summary"] == "claude: an approved rule is not kept"
    assert kept["body"].startswith(f"Session {sid}: its rules Secret did not take the "
                                   "approved rule (PATCH ")
    assert "exceeded quota" in kept["body"] and "ask about it again" in kept["body"]
    assert kept["urgency"] == 2
    assert e.fk.faults() == []
    assert "approved-nosave.example.org" not in json.dumps(rules_secret(e, sid))
    assert own.read_text() == "rules: []\n"
    logs = e.daemon.logs()
    assert f"Session {sid}: its rules Secret did not take the approved rule" in logs
    assert token not in logs and token not in json.dumps(bus.notify_calls())


def test_approve_warns_when_the_rules_secret_does_not_take_the_rule(asking):
    """The proxy has the rule at once, but the rules Secret (what a restarted mitm pod
    reads) refused it: uplink approve says so (an optional "warning" in the answer), and so
    does the log, naming the session and the Kubernetes error, never a secret."""
    e, pki, echo = asking.e, asking.pki, asking.echo
    sid, _ = run_detached(e, "--ask")
    ns = f"agent-uplink-{sid}"
    proxy, token = asking.proxy(sid)
    fault = dict(status=403, method="PATCH", path_regex=f"/namespaces/{ns}/secrets/rules-json",
                 message='secrets "rules-json" is forbidden: exceeded quota')

    ag = Agent(proxy, pki, "keep.example.org", "/v1/items", "POST")
    entry = wait_for(lambda: held(e, "keep.example.org"), timeout=60, what="held")
    e.fk.add_fault(**fault)
    r = e.daemon.client("approve", entry["id"], "--session")
    assert r.returncode == 0 and "1 request released" in r.stdout, r.stdout + r.stderr
    warning = [ln for ln in r.stderr.splitlines() if ln.startswith("uplink: warning: ")]
    assert len(warning) == 1, r.stderr
    assert "its rules Secret did not take the approved rule (PATCH " in warning[0]
    assert "exceeded quota" in warning[0] and "a restarted mitm pod would ask" in warning[0]
    assert ag.result().status == 200 and len(echo.find(ag.tid)) == 1
    assert e.fk.faults() == []
    assert "approved-keep.example.org" not in json.dumps(rules_secret(e, sid))
    # the proxy has it all the same: the next like it goes
    res = send(proxy.port, "https", "keep.example.org", 443, "POST", "/v1/items/2",
               trust=pki.mitm_ca, timeout=30)
    assert res.status == 200

    # --json carries the field; without a failure there is none, and the Secret then holds
    # both rules (the one it refused comes along)
    b = Agent(proxy, pki, "keep2.example.org", "/v1/items", "POST")
    entry = wait_for(lambda: held(e, "keep2.example.org"), timeout=60, what="held")
    e.fk.add_fault(**fault)
    doc = client_json(e, "approve", entry["id"], "--session")
    assert "did not take the approved rule" in doc["warning"] and doc["released"] == 1, doc
    assert b.result().status == 200
    c = Agent(proxy, pki, "keep3.example.org", "/v1/items", "POST")
    entry = wait_for(lambda: held(e, "keep3.example.org"), timeout=60, what="held")
    doc = client_json(e, "approve", entry["id"], "--session")
    assert "warning" not in doc and doc["released"] == 1, doc
    assert c.result().status == 200
    names = [x["name"] for x in rules_secret(e, sid)]
    assert names[-3:] == ["approved-keep.example.org", "approved-keep2.example.org",
                          "approved-keep3.example.org"], names
    logs = e.daemon.logs()
    assert logs.count(f"Session {sid}: its rules Secret did not take the approved rule") == 2
    assert "exceeded quota (Forbidden, HTTP 403)" in logs
    assert token not in logs and token not in r.stdout + r.stderr
