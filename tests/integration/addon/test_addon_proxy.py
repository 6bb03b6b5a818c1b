"""The addon in a real mitmdump: CONNECT refusal before DNS, L4 relays, non-HTTP bytes in
intercepted tunnels, body streaming, Host/SNI checks, client certificates and upstream
trust."""

import hashlib
import os
import re
import threading
import uuid

import pytest

from addon_support import CLIENT_CN, MTLS_HOST, Proxy, send, tls_client, tunnel


def R(name, hosts, **kw):
    return {"name": name, "layer": "user", "hosts": hosts, **kw}


def L4(name, **kw):
    return {"name": name, "layer": "user", "l4_forward": True, **kw}


@pytest.fixture(scope="module")
def direct(workdir, pki, echo):
    """A proxy without any redirect: host names really go to DNS. The test-only addon is
    loaded only to log upstream connection attempts."""
    p = Proxy(workdir, pki, echo, "direct", redirect=False,
              sets=[f"ssl_verify_upstream_trusted_ca={pki.upstream_ca}"])
    yield p
    p.stop()


def test_connect_refused_before_dns(direct):
    direct.set_rules([R("only", ["allowed\\.uplink-test\\.invalid"])])
    res = send(direct.port, "https", "blocked.uplink-test.invalid", 443, "GET", "/",
               trust=direct.pki.mitm_ca)
    assert res.connect_status == 403 and res.header("X-Uplink-Denied") == "1"
    assert res.json()["method"] == "CONNECT"
    assert direct.mitm.connects() == [], "an upstream connection (and name look-up) was tried"
    assert "server connect blocked" not in direct.mitm.output()
    # control: a host a rule allows is looked up at its first request (and does not
    # resolve), so the check above really shows that the refusal came first
    res = send(direct.port, "https", "allowed.uplink-test.invalid", 443, "GET", "/",
               trust=direct.pki.mitm_ca)
    assert (res.connect_status, res.status) == (200, 502), res
    assert direct.mitm.connects() == []  # the addon's own look-up failed: no connection
    audit = direct.mitm.audit()
    assert [a["decision"] for a in audit] == ["connect-refused", "allow"]
    assert audit[0]["host"] == "blocked.uplink-test.invalid" and audit[0]["status"] == 403
    assert audit[1]["status"] == 502 and "cannot resolve" in audit[1]["reason"]


def test_plain_http_denied_without_connecting(direct):
    direct.set_rules([R("only", ["allowed\\.uplink-test\\.invalid"])])
    before = len(direct.mitm.connects())
    res = send(direct.port, "http", "blocked.uplink-test.invalid", 80, "POST", "/x", body=b"123")
    assert res.status == 403 and res.header("X-Uplink-Denied") == "1"
    assert len(direct.mitm.connects()) == before


def _l4_tunnel(proxy, host="tcp.uplink.test", port=7000):
    proxy.set_rules([L4("tcp", hosts=[re.escape(host)]),
                     R("web", [".*"], methods=["GET"])])
    status, _, _, sock = tunnel(proxy.port, host, port)
    assert status == 200
    return sock


def _pump(sock, payload):
    """Send payload from a thread while reading the same number of bytes back (echo)."""
    sender = threading.Thread(target=sock.sendall, args=(payload,))
    sender.start()
    got = bytearray()
    while len(got) < len(payload):
        data = sock.recv(1 << 20)
        if not data:
            break
        got += data
    sender.join()
    return bytes(got)


def test_l4_relays_raw_bytes_both_ways(proxy):
    with proxy.lock:
        before = len(proxy.mitm.audit())
        sock = _l4_tunnel(proxy)
        payload = b"\x00RAW" + os.urandom(300_000)
        assert _pump(sock, payload) == payload
        sock.close()
        audit = proxy.mitm.audit()[before:]
    assert [(a["decision"], a["rule"], a["port"]) for a in audit] == [("l4", "tcp", 7000)]
    assert {"tcp_flow": True} not in proxy.mitm.connects(), "the relay recorded a TCP flow"


def test_l4_long_tunnel_does_not_grow_memory(proxy):
    with proxy.lock:
        sock = _l4_tunnel(proxy)
        _pump(sock, b"\x00RAW" + b"w" * (4 << 20))  # warm up buffers
        rss0 = proxy.mitm.rss_kib()
        block = os.urandom(1 << 20)
        for _ in range(48):
            assert _pump(sock, block) == block
        rss1 = proxy.mitm.rss_kib()
        sock.close()
    # 48 MiB went through; a recording relay would keep all of it
    assert rss1 - rss0 < 16 * 1024, f"RSS grew by {rss1 - rss0} KiB"


def test_non_http_bytes_in_intercepted_tunnel_are_not_relayed(proxy):
    with proxy.lock:
        proxy.set_rules([R("web", ["web\\.uplink\\.test"])])
        # An earlier test's relay may still be closing: count from a quiet echo server.
        proxy.echo.wait_raw_quiet()
        raw_before = len(proxy.echo.raw)
        status, _, _, sock = tunnel(proxy.port, "web.uplink.test", 443)
        assert status == 200
        sock.sendall(b"\x00RAW\x01\x02 not http at all\r\n\r\n")
        sock.settimeout(5)
        reply = b""
        try:
            while True:
                data = sock.recv(4096)
                if not data:
                    break
                reply += data
        except OSError:
            pass
        sock.close()
        proxy.echo.wait_raw_quiet()
    assert b"\x00RAW" not in reply, "raw bytes were echoed through the tunnel"
    assert len(proxy.echo.raw) == raw_before
    assert {"tcp_flow": True} not in proxy.mitm.connects()


def _count(proxy, text):
    return proxy.mitm.output().count(text)


def _post(proxy, host, body, chunked=False, path="/upload"):
    tid = uuid.uuid4().hex
    res = send(proxy.port, "https", host, 443, "POST", path, headers=[("X-Test-Id", tid)],
               body=body, trust=proxy.pki.mitm_ca, chunked=chunked)
    return res, proxy.echo.find(tid)


@pytest.mark.parametrize("size,chunked,streams", [
    (1024, False, False),
    (1 << 20, False, False),          # exactly the threshold: buffered
    ((1 << 20) + 1, False, True),
    (3 << 20, False, True),
    (200_000, True, True),            # unknown length
])
def test_request_streaming(proxy, size, chunked, streams):
    body = os.urandom(size)
    with proxy.lock:
        proxy.set_rules([R("up", ["upload\\.uplink\\.test"])])
        before = _count(proxy, "Streaming request to")
        n_audit = len(proxy.mitm.audit())
        res, got = _post(proxy, "upload.uplink.test", body, chunked=chunked)
        after = _count(proxy, "Streaming request to")
        line = proxy.mitm.audit()[n_audit]
    assert res.status == 200 and len(got) == 1
    assert got[0]["body_len"] == size
    assert got[0]["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert (after - before == 1) == streams
    assert line["bytes_out"] == size and line["decision"] == "allow"


def test_response_streaming(proxy):
    with proxy.lock:
        proxy.set_rules([R("down", ["download\\.uplink\\.test"])])
        before = _count(proxy, "Streaming response from")
        n_audit = len(proxy.mitm.audit())
        res = send(proxy.port, "https", "download.uplink.test", 443, "GET",
                   "/__echo/stream?n=3000000", trust=proxy.pki.mitm_ca)
        after = _count(proxy, "Streaming response from")
        line = proxy.mitm.audit()[n_audit]
    assert res.status == 200 and len(res.body) == 3_000_000
    assert after - before == 1
    assert line["bytes_in"] == 3_000_000


def test_denied_upload_gets_403_and_nothing_upstream(proxy):
    body = os.urandom(3 << 20)
    with proxy.lock:
        proxy.set_rules([R("ro", [".*"], methods=["GET"])])
        for chunked in (False, True):
            res, got = _post(proxy, "upload.uplink.test", body, chunked=chunked)
            assert res.status == 403 and res.header("X-Uplink-Denied") == "1"
            assert got == []


def test_host_header_must_name_the_connection_host(proxy):
    with proxy.lock:
        proxy.set_rules([R("any", [".*"])])
        tid = uuid.uuid4().hex
        res = send(proxy.port, "https", "allowed.uplink.test", 443, "GET", "/",
                   headers=[("Host", "other.uplink.test"), ("X-Test-Id", tid)],
                   trust=proxy.pki.mitm_ca)
    assert res.status == 403 and "Host header" in res.json()["hint"]
    assert proxy.echo.find(tid) == []


def test_tls_server_name_must_name_the_connection_host(proxy):
    with proxy.lock:
        proxy.set_rules([R("any", [".*"])])
        status, _, _, sock = tunnel(proxy.port, "allowed.uplink.test", 443)
        assert status == 200
        sock = tls_client(proxy.pki.mitm_ca, sock, "fronted.uplink.test")
        tid = uuid.uuid4().hex
        sock.sendall(f"GET / HTTP/1.1\r\nHost: allowed.uplink.test\r\nX-Test-Id: {tid}\r\n"
                     "Connection: close\r\n\r\n".encode())
        reply = b""
        while True:
            data = sock.recv(65536)
            if not data:
                break
            reply += data
        sock.close()
    assert reply.startswith(b"HTTP/1.1 403") and b"TLS server name" in reply
    assert proxy.echo.find(tid) == []


def test_client_certificate_per_host(proxy):
    with proxy.lock:
        proxy.set_rules([R("kube", [re.escape(MTLS_HOST), "other\\.uplink\\.test"])])
        t1, t2 = uuid.uuid4().hex, uuid.uuid4().hex
        r1 = send(proxy.port, "https", MTLS_HOST, 6443, "GET", "/api",
                  headers=[("X-Test-Id", t1)], trust=proxy.pki.mitm_ca)
        r2 = send(proxy.port, "https", "other.uplink.test", 443, "GET", "/",
                  headers=[("X-Test-Id", t2)], trust=proxy.pki.mitm_ca)
    assert r1.status == 200 and r2.status == 200
    assert proxy.echo.find(t1)[0]["client_cn"] == CLIENT_CN
    assert proxy.echo.find(t2)[0]["client_cn"] is None


def test_remove_takes_the_header_off(proxy):
    """A kube client-certificate rule: the agent's placeholder token never goes upstream,
    the certificate does; a header the rule also sets is set once, after the removal."""
    with proxy.lock:
        proxy.set_rules([R("kube", [re.escape(MTLS_HOST)],
                           inject={"remove": ["Authorization", "X-Also"],
                                   "headers": {"X-Also": "uplink-sentinel-remove-set"}})])
        tid = uuid.uuid4().hex
        res = send(proxy.port, "https", MTLS_HOST, 6443, "GET", "/api",
                   headers=[("X-Test-Id", tid), ("Authorization", "Bearer uplink-placeholder"),
                            ("authorization", "Basic again"), ("X-Also", "agent's")],
                   trust=proxy.pki.mitm_ca)
    assert res.status == 200
    (got,) = proxy.echo.find(tid)
    names = [n.lower() for n, _ in got["headers"]]
    assert "authorization" not in names
    assert [v for n, v in got["headers"] if n.lower() == "x-also"] == ["uplink-sentinel-remove-set"]
    assert got["client_cn"] == CLIENT_CN


def test_upstream_trust_is_public_roots_plus_extra(proxy):
    err = proxy.mitm.stderr.read_text()
    m = re.search(r"upstream trust: (\S+) = public roots \((\S+)\) \+ (\S+)", err)
    assert m, err
    bundle, roots, extra = m.groups()
    data, public = open(bundle, "rb").read(), open(roots, "rb").read()
    assert public.strip() in data, "the public roots are missing from the upstream bundle"
    assert proxy.pki.upstream_ca.read_bytes().strip() in data
    assert data.count(b"BEGIN CERTIFICATE") > 50
    assert extra == str(proxy.pki.upstream_ca)


def test_direct_trust_option_warns(direct):
    assert "replaces the public roots" in direct.mitm.stderr.read_text()


def test_rawtcp_turned_off(proxy):
    assert "rawtcp turned off" in proxy.mitm.stderr.read_text()


def test_a_rule_that_injects_never_sends_its_credential_over_plain_http(proxy):
    """Absolute-form http:// to an injecting rule's host is refused before anything goes
    upstream; the same rule over https injects (the control)."""
    with proxy.lock:
        proxy.set_rules([R("tok", ["plain\\.uplink\\.test"],
                           inject={"headers": {"Authorization": "Bearer uplink-sentinel-clear"}})])
        t1, t2 = uuid.uuid4().hex, uuid.uuid4().hex
        r1 = send(proxy.port, "http", "plain.uplink.test", 80, "GET", "/x", headers=[("X-Test-Id", t1)])
        r2 = send(proxy.port, "https", "plain.uplink.test", 443, "GET", "/x", headers=[("X-Test-Id", t2)],
                  trust=proxy.pki.mitm_ca)
    assert r1.status == 403 and r1.header("X-Uplink-Denied") == "1"
    assert "injects credentials, which uplink sends only over HTTPS" in r1.json()["hint"]
    assert proxy.echo.find(t1) == []
    assert r2.status == 200
    (got,) = proxy.echo.find(t2)
    assert ("Authorization", "Bearer uplink-sentinel-clear") in [tuple(h) for h in got["headers"]]


def test_a_rule_with_a_port_takes_only_that_port(proxy):
    """Kube rules carry the API server's port: the token reaches no other port of the host."""
    with proxy.lock:
        proxy.set_rules([R("kube-x", [re.escape(MTLS_HOST)], port=6443,
                           inject={"headers": {"Authorization": "Bearer uplink-sentinel-port"}})])
        t1, t2 = uuid.uuid4().hex, uuid.uuid4().hex
        r1 = send(proxy.port, "https", MTLS_HOST, 6443, "GET", "/api", headers=[("X-Test-Id", t1)],
                  trust=proxy.pki.mitm_ca)
        r2 = send(proxy.port, "https", MTLS_HOST, 10250, "GET", "/pods", headers=[("X-Test-Id", t2)],
                  trust=proxy.pki.mitm_ca)
    assert r1.status == 200 and proxy.echo.find(t1)
    assert r2.status == 403 and proxy.echo.find(t2) == []
