"""Ask mode through real mitmdump, as the agent meets it: a request no rule allows is held
(never sent upstream) until uplinkd decides through the control listener's /v1/held
endpoints (uplink_control.py, with the session's token), or until ask_timeout; what is
listed never holds a header, a body or a query."""

import http.client
import json
import secrets
import threading
import time
import uuid

import pytest

from addon_support import SENTINEL, Proxy, free_port, send, tls_client, tunnel

SECRET = f"Bearer {SENTINEL}-ask-token"
RULES = [{"name": "api", "layer": "auth", "hosts": ["api\\.uplink\\.test"],
          "inject": {"headers": {"Authorization": SECRET}}}]


class AskProxy:
    def __init__(self, workdir, pki, echo, name, timeout_s, ask=True):
        self.control_port, self.token = free_port(), secrets.token_hex(24)
        token_file = workdir / f"{name}-control-token"
        token_file.write_text(self.token)
        self.proxy = Proxy(workdir, pki, echo, name,
                           sets=[f"uplink_extra_ca={pki.upstream_ca}",
                                 f"uplink_control_token={token_file}",
                                 f"uplink_control_port={self.control_port}",
                                 f"uplink_ask={'true' if ask else 'false'}",
                                 f"uplink_ask_timeout={timeout_s}"])
        self.proxy.set_rules(RULES)
        self.port, self.echo, self.ca = self.proxy.port, echo, pki.mitm_ca
        for _ in range(600):  # until the listener answers a first request
            try:
                self.control("GET", "/v1/held", timeout=5)
                break
            except OSError:
                time.sleep(0.05)

    def control(self, method, path, body=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.control_port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, data, {"Content-Type": "application/json",
                                              "X-Uplink-Control-Token": self.token})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()

    def wait_held(self, host, count=1, out=None):
        """Long-polls /v1/held until an entry for ``host`` with ``count`` flows waits
        (``out``: the request's result, which must not come first)."""
        seq = -1
        for _ in range(50):
            assert not (out or {}), f"answered instead of held: {out}"
            status, doc = self.control("GET", f"/v1/held?wait=5&after={seq}")
            assert status == 200, doc
            seq = doc["seq"]
            hits = [h for h in doc["held"] if h["host"] == host and h["count"] >= count]
            if hits:
                return hits[0], doc
        raise AssertionError(f"no held request for {host}")

    def request_async(self, host, path, method="GET", headers=()):
        out, test_id = {}, uuid.uuid4().hex
        hdrs = [("X-Test-Id", test_id), *headers]

        def run():
            out["r"] = send(self.port, "https", host, 443, method, path, headers=hdrs,
                            trust=self.ca, timeout=90)
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, out, test_id

    def stop(self):
        self.proxy.stop()
        assert SENTINEL not in self.proxy.mitm.output(), "a secret reached the proxy's output"


@pytest.fixture(scope="module")
def asking(workdir, pki, echo):
    p = AskProxy(workdir, pki, echo, "ask", timeout_s=120)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def hasty(workdir, pki, echo):
    p = AskProxy(workdir, pki, echo, "ask-hasty", timeout_s=1)
    yield p
    p.stop()


def _finish(t, out):
    t.join(120)
    assert not t.is_alive()
    return out["r"]


def test_held_request_waits_unsent_and_once_releases_it(asking):
    t, out, tid = asking.request_async(
        "once.uplink.test", "/repos/x/pulls?access_token=ask-query-marker", method="POST",
        headers=[("Authorization", f"token {SENTINEL}-agent-header")])
    entry, doc = asking.wait_held("once.uplink.test", out=out)
    assert asking.echo.find(tid) == [], "a held request reached the upstream"
    assert t.is_alive()
    assert (entry["method"], entry["scheme"], entry["port"], entry["path"]) == (
        "POST", "https", 443, "/repos/x/pulls")
    assert entry["query_present"] is True and entry["count"] == 1
    listed = json.dumps(doc)
    assert SENTINEL not in listed and "ask-query-marker" not in listed, (
        "a header value or the query was listed")
    status, reply = asking.control("POST", f"/v1/held/{entry['id']}", {"decision": "once"})
    assert status == 200 and reply["released"] == 1
    r = _finish(t, out)
    assert r.status == 200, r
    got = asking.echo.find(tid)
    assert len(got) == 1 and got[0]["path"].startswith("/repos/x/pulls?")
    # an approval injects nothing: the agent's own header went, no rule's credential
    assert SECRET not in json.dumps(got)
    # once is once: the same request is held again
    t2, out2, _ = asking.request_async("once.uplink.test", "/repos/x/pulls", method="POST")
    entry2, _ = asking.wait_held("once.uplink.test", out=out2)
    asking.control("POST", f"/v1/held/{entry2['id']}", {"decision": "deny"})
    assert _finish(t2, out2).status == 403


def test_deny_answers_the_403_saying_the_user_denied(asking):
    t, out, tid = asking.request_async("deny.uplink.test", "/x")
    entry, _ = asking.wait_held("deny.uplink.test", out=out)
    asking.control("POST", f"/v1/held/{entry['id']}", {"decision": "deny"})
    r = _finish(t, out)
    assert r.status == 403
    body = r.json()
    assert body["asked"] is True and body["answer"] == "denied" and body["ask_mode"] is True
    assert "do not retry" in body["hint"]
    assert asking.echo.find(tid) == []
    status, _ = asking.control("POST", f"/v1/held/{entry['id']}", {"decision": "once"})
    assert status == 404


def test_timeout_answers_the_403_and_sends_nothing(hasty):
    t, out, tid = hasty.request_async("late.uplink.test", "/slow")
    r = _finish(t, out)
    assert r.status == 403
    body = r.json()
    assert body["asked"] is True and body["answer"] == "no answer"
    assert "uplink approve" in body["hint"]
    assert hasty.echo.find(tid) == []
    audit = [a for a in hasty.proxy.mitm.audit() if a["host"] == "late.uplink.test"]
    assert [(a["decision"], a["reason"]) for a in audit] == [("deny", "asked: no answer in 1 s")]


def test_session_approval_lets_the_next_identical_request_through(asking):
    t, out, tid = asking.request_async("sess.uplink.test", "/api/v1/items")
    t2, out2, tid2 = asking.request_async("sess.uplink.test", "/api/v1/items")
    entry, _ = asking.wait_held("sess.uplink.test", count=2, out=out)  # identical: one entry
    rule = {"name": "approved-sess", "hosts": ["sess\\.uplink\\.test"], "methods": ["GET"],
            "paths": ["/api/v1(/.*)?"]}
    status, reply = asking.control("POST", f"/v1/held/{entry['id']}",
                                   {"decision": "session", "rule": rule})
    assert status == 200 and reply["released"] == 2, reply
    assert _finish(t, out).status == 200 and _finish(t2, out2).status == 200
    # the next one is not held: it is answered with no control call at all
    r = send(asking.port, "https", "sess.uplink.test", 443, "GET", "/api/v1/other",
             trust=asking.ca, headers=[("X-Test-Id", "after-session")])
    assert r.status == 200
    audit = [a for a in asking.proxy.mitm.audit() if a["host"] == "sess.uplink.test"]
    assert {(a["rule"], a["layer"]) for a in audit} == {("approved-sess", "session")}


def test_session_rule_may_not_carry_credentials(asking):
    t, out, _ = asking.request_async("cred.uplink.test", "/")
    entry, _ = asking.wait_held("cred.uplink.test", out=out)
    bad = {"hosts": ["cred\\.uplink\\.test"], "inject": {"headers": {"X": "y"}}}
    status, reply = asking.control("POST", f"/v1/held/{entry['id']}",
                                   {"decision": "session", "rule": bad})
    assert status == 400 and "inject" in reply["error"]
    asking.control("POST", f"/v1/held/{entry['id']}", {"decision": "deny"})
    assert _finish(t, out).status == 403


def test_refused_by_design_is_never_held(asking):
    # a special-purpose address: refused at CONNECT, as without ask
    r = send(asking.port, "https", "169.254.169.254", 443, "GET", "/latest/meta-data/",
             trust=asking.ca)
    assert r.connect_status == 403
    # a dummy-signed AWS request: refused at once, never asked about
    r = send(asking.port, "https", "sts.amazonaws.com", 443, "POST", "/", trust=asking.ca,
             headers=[("Authorization", "AWS4-HMAC-SHA256 Credential=AKIA0123456789ABCDEF/"
                                        "20200101/us-east-1/sts/aws4_request, "
                                        "SignedHeaders=host, Signature=00")],
             body=b"Action=AssumeRole")
    assert r.status == 403 and r.json()["asked"] is False
    _, doc = asking.control("GET", "/v1/held")
    assert doc["held"] == []


def test_without_ask_the_403_says_the_user_could_be_asked(proxy):
    r = send(proxy.port, "https", "nope.uplink.test", 443, "GET", "/", trust=proxy.pki.mitm_ca)
    assert r.connect_status == 403
    body = json.loads(r.body)
    assert body["asked"] is False and body["ask_mode"] is False
    assert "--ask" in body["hint"]


def test_an_agent_that_goes_away_leaves_nothing_held_and_nothing_sent(asking):
    sock = tunnel(asking.port, "gone.uplink.test", 443)[3]
    tls = tls_client(asking.ca, sock, "gone.uplink.test")
    tls.sendall(b"POST /x HTTP/1.1\r\nHost: gone.uplink.test\r\nX-Test-Id: gone-1\r\n"
                b"Content-Length: 0\r\n\r\n")
    asking.wait_held("gone.uplink.test")
    tls.close()
    seq = -1
    for _ in range(50):  # until the entry is withdrawn
        _, doc = asking.control("GET", f"/v1/held?wait=5&after={seq}")
        seq = doc["seq"]
        if not [h for h in doc["held"] if h["host"] == "gone.uplink.test"]:
            break
    else:
        raise AssertionError("the entry stayed after the agent went away")
    assert asking.echo.find("gone-1") == []
    audit = [a for a in asking.proxy.mitm.audit() if a["host"] == "gone.uplink.test"]
    assert [(a["decision"], a["reason"]) for a in audit] == [
        ("deny", "asked: the agent went away while it waited")]
