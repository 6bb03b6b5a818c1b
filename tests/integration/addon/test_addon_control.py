"""The control listener (uplink_control.py) in a real mitmdump: rules pushed over it take
effect on the agent's next request, on the connection it already holds; it answers only the
session's token; its limits hold; a bad document is refused and the last good stays; every
call is logged without its body or the token."""

import http.client
import json
import os
import secrets
import socket
import time

import pytest

from addon_support import (SENTINEL, Proxy, _read_body, _read_head, free_port, rules_doc,
                           tls_client, tunnel)

SLOW = float(os.environ.get("UPLINK_TEST_SLOW", "3"))
HOST = "ka.uplink.test"
MAX_BODY = 8 * 1024 * 1024        # uplink_control.MAX_BODY_BYTES
MAX_CONNECTIONS = 16              # uplink_control.MAX_CONNECTIONS


def rule(name, host, paths=None, inject=None):
    r = {"name": name, "layer": "user", "hosts": [host.replace(".", "\\.")]}
    if paths:
        r["paths"] = paths
    if inject:
        r["inject"] = {"headers": inject}
    return r


class Control:
    def __init__(self, port, token):
        self.port, self.token = port, token

    def call(self, method, path, body=None, headers=None, token=True):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15 * SLOW)
        hdrs = {"Content-Type": "application/json"}
        if token is True:
            hdrs["X-Uplink-Control-Token"] = self.token
        elif token:
            hdrs["X-Uplink-Control-Token"] = token
        hdrs.update(headers or {})
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()

    def wait_ready(self):
        """Until the listener's first successful answer (it starts after the proxy port)."""
        deadline = time.monotonic() + 20 * SLOW
        while True:
            try:
                return self.call("GET", "/v1/status")
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


@pytest.fixture(scope="module")
def ctl(workdir, pki, echo):
    token = secrets.token_hex(32)
    path = workdir / "control-token"
    path.write_text(token + "\n")
    port = free_port()
    p = Proxy(workdir, pki, echo, "control", sets=[
        f"ssl_verify_upstream_trusted_ca={pki.upstream_ca}",
        f"uplink_control_token={path}", f"uplink_control_port={port}"])
    c = Control(port, token)
    assert c.wait_ready()[0] == 200
    yield p, c
    p.stop()
    out = p.mitm.output()
    assert SENTINEL not in out and token not in out, "a secret reached the proxy's output"


class Agent:
    """The agent's client: one CONNECT tunnel to HOST, requests kept alive in it."""

    def __init__(self, p):
        status, _, _, sock = tunnel(p.port, HOST, 443)
        assert status == 200
        self.sock = tls_client(p.pki.mitm_ca, sock, HOST)

    def get(self, path):
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        status, headers, rest = _read_head(self.sock)
        return status, _read_body(self.sock, headers, rest, "GET")

    def close(self):
        self.sock.close()


def test_pushed_rules_apply_to_the_next_request_on_a_kept_alive_connection(ctl):
    p, c = ctl
    p.set_rules([rule("one", HOST, ["/one"])])
    agent = Agent(p)
    try:
        assert agent.get("/one")[0] == 200
        assert agent.get("/two")[0] == 403
        status, reply = c.call("PUT", "/v1/rules", json.loads(rules_doc(
            [rule("both", HOST, ["/one", "/two"])])))
        assert status == 200 and reply["generation"] >= 2
        assert agent.get("/two")[0] == 200  # same connection, new rules
        status, _ = c.call("PUT", "/v1/rules", json.loads(rules_doc([])))
        assert status == 200
        assert agent.get("/one")[0] == 403  # and taken away again
    finally:
        agent.close()
    assert json.loads(p.rules_path.read_text())["rules"][0]["name"] == "one"  # not the file


def test_a_wrong_or_missing_token_is_401_and_changes_nothing(ctl):
    p, c = ctl
    assert c.call("PUT", "/v1/rules", json.loads(rules_doc([rule("one", HOST, ["/one"])])))[0] \
        == 200
    open_all = json.loads(rules_doc([rule("all", ".*")]))
    attempts = [
        dict(token=False),
        dict(token="0" * len(c.token)),
        dict(token=c.token[:-1]),
        dict(token=c.token + "0"),
        dict(token=c.token.upper()),
        # the API server would consume this header: the token is not taken from it
        dict(token=False, headers={"Authorization": f"Bearer {c.token}"}),
    ]
    for a in attempts:
        for method, path, body in (("PUT", "/v1/rules", open_all), ("GET", "/v1/status", None),
                                   ("GET", "/nothing-here", None)):
            assert c.call(method, path, body, **a) == (401, {"error": "unauthorized"}), a
    agent = Agent(p)  # the catch-all pushed with a wrong token is not in force
    try:
        assert agent.get("/two")[0] == 403
    finally:
        agent.close()


def raw(c, head, body=b""):
    """One request sent as bytes; (status, body) of the answer."""
    with socket.create_connection(("127.0.0.1", c.port), 15 * SLOW) as s:
        s.sendall(head + body)
        status, headers, rest = _read_head(s)
        return status, json.loads(_read_body(s, headers, rest, "PUT"))


def test_limits_on_the_body_the_head_and_the_framing(ctl):
    _, c = ctl
    tok = c.token.encode()
    # refused from the header alone, before a byte of the body is read
    status, reply = raw(c, b"PUT /v1/rules HTTP/1.1\r\nX-Uplink-Control-Token: " + tok
                        + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                        % (MAX_BODY + 1))
    assert status == 413 and "body over" in reply["error"]
    status, _ = raw(c, b"PUT /v1/rules HTTP/1.1\r\nX-Uplink-Control-Token: " + tok
                    + b"\r\nX-Pad: " + b"a" * 20000 + b"\r\n\r\n")
    assert status == 431
    status, _ = raw(c, b"PUT /v1/rules HTTP/1.1\r\nX-Uplink-Control-Token: " + tok
                    + b"\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert status == 411
    status, reply = c.call("PUT", "/v1/rules", b"version=1", {"Content-Type": "text/plain"})
    assert status == 415
    status, _ = c.call("PUT", "/v1/rules", b"{\"version\": 1, \"rules\": [")
    assert status == 400
    assert c.call("POST", "/v1/status")[0] == 405
    assert c.call("GET", "/v1/nothing")[0] == 404


def test_connections_are_bounded(ctl):
    _, c = ctl
    held = [socket.create_connection(("127.0.0.1", c.port), 15 * SLOW)
            for _ in range(MAX_CONNECTIONS)]
    try:
        # each held connection is served: its first request is answered
        for s in held:
            s.sendall(b"GET /v1/status HTTP/1.1\r\nX-Uplink-Control-Token: "
                      + c.token.encode() + b"\r\n\r\n")
            status, headers, rest = _read_head(s)
            _read_body(s, headers, rest, "GET")
            assert status == 200
        with socket.create_connection(("127.0.0.1", c.port), 15 * SLOW) as extra:
            try:  # closed without an answer (reset: the request was left unread)
                extra.sendall(b"GET /v1/status HTTP/1.1\r\n\r\n")
                assert extra.recv(100) == b""
            except ConnectionResetError:
                pass
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 10 * SLOW
    while True:  # the held ones once closed, a new connection is served again
        try:
            if c.call("GET", "/v1/status")[0] == 200:
                break
        except (ConnectionError, http.client.HTTPException):
            pass
        assert time.monotonic() < deadline, "the listener never took connections again"
        time.sleep(0.05)


BAD = [
    ({"version": 2, "rules": []}, "unsupported format version 2"),
    ({"version": 1, "rules": [{"name": "x", "layer": "user", "hosts": ["("]}]},
     "invalid host regex '('"),
    ({"version": 1, "rules": [{"name": "x", "layer": "user", "hosts": [".*"], "method": []}]},
     "unknown key 'method'"),
    ({"version": 1, "rules": [{"name": "x", "layer": "user", "hosts": [".*"], "inject": {
        "headers": {"Authorization": f"a\r\nX-Evil: {SENTINEL}"}}}]},
     "must be a string without control characters"),
    ([], "the document must be a JSON object"),
]


def test_a_bad_document_is_400_and_the_last_good_stays(ctl):
    p, c = ctl
    good = json.loads(rules_doc([rule("good", HOST, ["/one"],
                                      {"X-Api-Key": f"{SENTINEL}-control"})]))
    assert c.call("PUT", "/v1/rules", good)[0] == 200
    _, st = c.call("GET", "/v1/status")
    for doc, why in BAD:
        status, reply = c.call("PUT", "/v1/rules", doc)
        assert status == 400 and why in reply["error"], (doc, reply)
        assert reply["generation"] == st["generation"]
    agent = Agent(p)
    try:
        status, body = agent.get("/one")
        assert status == 200
        assert ["X-Api-Key", f"{SENTINEL}-control"] in json.loads(body)["headers"]
        assert agent.get("/two")[0] == 403
    finally:
        agent.close()
    err = p.mitm.stderr.read_text()
    assert "control: PUT /v1/rules -> 400" in err and "control: PUT /v1/rules -> 200" in err
    assert "control: GET /v1/status -> 200" in err
