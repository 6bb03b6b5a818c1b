"""Attacks on the merged request checks (issue 13's fixes written apart, then combined),
sent as an agent would through the real mitmdump + addon to the echo upstream: HTTP/2
pseudo-headers the HTTP/1 parser never admits, AWS re-signing over plain HTTP, a re-signing
refusal answered only after the body it refuses."""

import socket
import ssl
import uuid

import h2.config
import h2.connection
import h2.events
import pytest

from addon_support import (AWS_DUMMY, AWS_DUMMY_TOKEN, Proxy, _read_body, _read_head, send,
                           tls_client, tunnel)

HOST = "api.example.com"
SECRET = "Bearer uplink-sentinel-review"
AUTH = {"name": "auth", "layer": "user", "hosts": ["api\\.example\\.com"],
        "methods": ["GET", "POST"], "inject": {"headers": {"Authorization": SECRET}}}


@pytest.fixture(scope="module")
def h2proxy(workdir, pki, echo):
    """The pod's options but HTTP/2 on (a later pod, or an operator's --set, may turn it
    on): the addon must not rely on http2=false for its checks."""
    p = Proxy(workdir, pki, echo, "review-h2", sets=[f"uplink_extra_ca={pki.upstream_ca}",
                                                     "http2=true"])
    yield p
    p.stop()
    assert "uplink-sentinel" not in p.mitm.output()


def h2_request(proxy, headers):
    """One HTTP/2 request (headers as given, unvalidated) in a CONNECT + TLS tunnel to HOST;
    returns the :status (bytes) or None when the stream or connection was reset."""
    _, _, _, sock = tunnel(proxy.port, HOST, 443)
    ctx = ssl.create_default_context(cafile=str(proxy.pki.mitm_ca))
    ctx.set_alpn_protocols(["h2"])
    tls = ctx.wrap_socket(sock, server_hostname=HOST)
    assert tls.selected_alpn_protocol() == "h2"
    conn = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, validate_outbound_headers=False, normalize_outbound_headers=False,
        validate_inbound_headers=False))
    conn.initiate_connection()
    conn.send_headers(1, headers, end_stream=True)
    tls.sendall(conn.data_to_send())
    status = None
    try:
        while True:
            data = tls.recv(65536)
            if not data:
                return status
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    status = dict(ev.headers)[b":status"]
                if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset,
                                   h2.events.ConnectionTerminated)):
                    return status
            tls.sendall(conn.data_to_send())
    finally:
        tls.close()


@pytest.mark.parametrize("method,path", [
    ("GET", "https://evil.example/steal"),
    ("GET", "evil.example/steal"),
    ("GET", f"/x HTTP/1.1\r\nHost: {HOST}\r\n\r\nGET /smuggled"),
    ("GET", "/x y"),
    (f"GET /y HTTP/1.1\r\nHost: {HOST}\r\n\r\nGET", "/x"),
], ids=["absolute-path", "no-slash", "crlf-path", "space-path", "crlf-method"])
def test_http2_pseudo_headers_cannot_write_the_request_line(h2proxy, method, path):
    h2proxy.set_rules([AUTH])
    tid = uuid.uuid4().hex
    before = len(h2proxy.mitm.audit())
    status = h2_request(h2proxy, [(":method", method), (":scheme", "https"),
                                  (":authority", HOST), (":path", path), ("x-test-id", tid)])
    assert status == b"400"
    assert h2proxy.echo.find(tid) == [], "the request reached the upstream"
    assert not [r for r in h2proxy.echo.requests if r["path"] == "/smuggled"]
    audit = h2proxy.mitm.audit()[before:]
    assert [(a["decision"], a["status"]) for a in audit] == [("deny", 400)]


def test_http2_plain_request_still_gets_the_credential(h2proxy):
    h2proxy.set_rules([AUTH])
    tid = uuid.uuid4().hex
    status = h2_request(h2proxy, [(":method", "GET"), (":scheme", "https"),
                                  (":authority", HOST), (":path", "/v1/x?q=1"),
                                  ("x-test-id", tid)])
    assert status == b"200"
    (rec,) = h2proxy.echo.find(tid)
    assert rec["path"] == "/v1/x?q=1"
    assert [v for n, v in rec["headers"] if n.lower() == "authorization"] == [SECRET]


def dummy_sigv4(akid, service):
    return [("Authorization", f"AWS4-HMAC-SHA256 Credential={akid}/20200101/us-east-1/"
                              f"{service}/aws4_request, SignedHeaders=host;x-amz-date, "
                              "Signature=" + "0" * 64), ("X-Amz-Date", "20200101T000000Z")]


def test_aws_request_over_plain_http_is_not_resigned(proxy):
    """An absolute-form http:// request to an AWS host an aws_sign rule names: re-signed,
    the real signature and session token would travel in clear."""
    rules = [{"name": "sts", "layer": "user", "hosts": ["sts\\.amazonaws\\.com"],
              "aws_sign": True}]
    dummy = dummy_sigv4(AWS_DUMMY_TOKEN, "sts")
    tid = uuid.uuid4().hex
    with proxy.lock:
        proxy.set_rules(rules)
        before = len(proxy.mitm.audit())
        res = send(proxy.port, "http", "sts.amazonaws.com", 80, "GET",
                   "/?Action=GetCallerIdentity&Version=2011-06-15",
                   headers=dummy + [("X-Test-Id", tid)])
        audit = proxy.mitm.audit()[before:]
    assert proxy.echo.find(tid) == [], "re-signed and sent in clear"
    assert res.status == 403 and "only over HTTPS" in res.json()["hint"]
    assert [(a["decision"], a["rule"]) for a in audit] == [("deny", "sts")]
    # the same over HTTPS is re-signed
    with proxy.lock:
        proxy.set_rules(rules)
        res = send(proxy.port, "https", "sts.amazonaws.com", 443, "GET",
                   "/?Action=GetCallerIdentity&Version=2011-06-15",
                   headers=dummy + [("X-Test-Id", tid)], trust=proxy.pki.mitm_ca)
    assert res.status == 200 and len(proxy.echo.find(tid)) == 1


def test_resign_refusal_is_answered_before_the_body(proxy):
    """A dummy-signed upload under a rule that does not re-sign is refused: with Expect:
    100-continue the client gets the 403 at once, not 100 Continue and a wait for 10 MB."""
    host = "my-bucket.s3.amazonaws.com"
    tid = uuid.uuid4().hex
    lines = [f"PUT /big.bin HTTP/1.1", f"Host: {host}", "Expect: 100-continue",
             "Content-Length: 10000000", f"X-Test-Id: {tid}"]
    lines += [f"{n}: {v}" for n, v in dummy_sigv4(AWS_DUMMY, "s3")]
    with proxy.lock:
        proxy.set_rules([{"name": "s3-plain", "layer": "user",
                          "hosts": ["my-bucket\\.s3\\.amazonaws\\.com", "other\\.example"]}])
        _, _, _, sock = tunnel(proxy.port, host, 443)
        conn = tls_client(proxy.pki.mitm_ca, sock, host)
        try:
            conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            status, headers, rest = _read_head(conn)  # the body is never sent
            body = _read_body(conn, headers, rest, "PUT")
        finally:
            conn.close()
    assert status == 403, (status, body)
    assert "does not re-sign AWS requests" in body.decode()
    assert proxy.echo.find(tid) == []
