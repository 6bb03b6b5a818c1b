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


@pytest.fixture
def asking(tmpdir_short, fakekube, registry):  # noqa: F811
    """The daemon, a test PKI and an echo upstream; .proxy(sid) starts the session's mitm.
    All of it stopped afterwards."""
    class Asking:
        pass
    a = Asking()
    a.e = start(tmpdir_short, fakekube, registry, {})
    a.pki = PKI(a.e.tmp)
    a.echo = Echo(a.pki)
    a.proxies = []

    def proxy(sid):
        pr, token = ask_proxy(a.e, a.pki, a.echo, sid)
        a.proxies.append(pr)
        return pr, token
    a.proxy = proxy
    yield a
    for pr in a.proxies:
        pr.stop()
    a.echo.close()
    stop(a.e)


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
    assert text.startswith("rules:\n  # Saved ") and f"from session {sid} (claude in " in text
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
