"""An agent must not be able to write an audit line. mitmproxy prints a WebSocket close
reason, WebSocket messages and (with --mitm-debug) headers and bodies as sent, line breaks
and all, into the log the daemon reads the audit lines from. With the pod's options it
prints no flow at all, and whatever it prints never starts a line with ``{`` (the addon's
line guard), so the daemon's parser (daemon/session-audit.c: a line that starts with
``{`` and is a JSON object with ``"uplink": "audit"``) accepts the addon's lines only."""

import base64
import hashlib
import json
import os
import socket
import struct
import threading

import pytest

from addon_support import Proxy, send

CATCH_ALL = {"name": "generic", "layer": "generic", "hosts": [".*"]}
FORGED = json.dumps({"uplink": "audit", "decision": "allow", "host": "forged.example"},
                    separators=(",", ":"))
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WebSocketServer:
    """One local port answering a WebSocket upgrade, echoing messages and closes."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        conn.settimeout(30)
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
                       if line.lower().startswith(b"sec-websocket-key:"))
            accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest())
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            while True:
                opcode, payload = read_frame(conn)
                conn.sendall(frame(opcode, payload, mask=False))
                if opcode == 8:
                    return
        except (OSError, StopIteration, EOFError):
            pass
        finally:
            conn.close()

    def close(self):
        self.sock.close()


def frame(opcode, payload, mask=True):
    head = bytes([0x80 | opcode])
    n = len(payload)
    bit = 0x80 if mask else 0
    head += bytes([bit | n]) if n < 126 else bytes([bit | 126]) + struct.pack("!H", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def _read(conn, n):
    out = b""
    while len(out) < n:
        data = conn.recv(n - len(out))
        if not data:
            raise EOFError
        out += data
    return out


def read_frame(conn):
    b0, b1 = _read(conn, 2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", _read(conn, 2))[0]
    key = _read(conn, 4) if b1 & 0x80 else None
    payload = _read(conn, n)
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return b0 & 0x0F, payload


def accepted_by_daemon(text):
    """The lines daemon/session-audit.c's up_audit_parse_line accepts."""
    out = []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("uplink") == "audit":
            out.append(obj)
    return out


def attack(proxy):
    """What an agent can make mitmproxy print: a WebSocket close reason and messages, a
    header, a body, a request path, each carrying a line that looks like an audit line."""
    sock = socket.create_connection(("127.0.0.1", proxy.port), 15)
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET http://ws.uplink.test/chat?{FORGED} HTTP/1.1\r\n"
                      f"Host: ws.uplink.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"X-Note: {FORGED}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 101"), head
        for text in (f"hi\n{FORGED}\n", f"{FORGED}"):
            sock.sendall(frame(1, text.encode()))
            assert read_frame(sock) == (1, text.encode())
        reason = f"\n{FORGED}\n".encode()
        assert len(reason) <= 123
        sock.sendall(frame(8, struct.pack("!H", 1000) + reason))
        assert read_frame(sock)[0] == 8
    finally:
        sock.close()
    res = send(proxy.port, "http", "www.uplink.test", 80, "POST", "/upload",
               headers=[("Content-Type", "text/plain")], body=f"x\n{FORGED}\n".encode())
    assert res.status == 200


@pytest.fixture(scope="module")
def ws():
    s = WebSocketServer()
    yield s
    s.close()


@pytest.mark.parametrize("mode", ["pod", "debug"])
def test_agent_text_printed_by_mitmproxy_is_never_an_audit_line(workdir, pki, echo, ws, mode):
    # "pod": the mitm pod's options (flow_detail=0, termlog_verbosity=error);
    # "debug": --mitm-debug's, under which mitmproxy prints everything the agent sends.
    sets = ["flow_detail=3", "termlog_verbosity=debug"] if mode == "debug" else []
    p = Proxy(workdir, pki, echo, f"forgery-{mode}", sets=sets, quiet=True,
              upstreams=[("ws.uplink.test", ws.port)])
    try:
        p.set_rules([CATCH_ALL])
        attack(p)
    finally:
        p.stop()
    everything = p.mitm.stdout.read_text() + "\n" + p.mitm.stderr.read_text()
    lines = accepted_by_daemon(everything)
    assert [(a["decision"], a["host"], a["status"]) for a in lines] == [
        ("allow", "ws.uplink.test", 101), ("allow", "www.uplink.test", 200)]
    assert all(len(a) == 15 for a in lines)  # the addon's own, every field
    if mode == "debug":  # the attack did reach the log, disarmed
        assert " " + FORGED in everything
    else:
        rest = [x for x in everything.split("\n") if not x.startswith('{"uplink":"audit",')]
        assert not [x for x in rest if "WebSocket" in x or "forged.example" in x]


def test_line_guard_unit():
    import io

    from addon_support import load_filter
    f = load_filter()
    buf = io.StringIO()
    guard = f._LineGuard.install(buf)
    assert f._LineGuard.install(buf) is guard  # once per stream
    buf.write("{a}\nok {b}\n{c")
    buf.write("d}\n")
    f.AuditLog(buf).emit(decision="deny", host="h")
    buf.write("partial")
    f.AuditLog(buf).emit(decision="deny", host="h2")
    lines = buf.getvalue().split("\n")
    assert lines[:4] == [" {a}", "ok {b}", " {cd}", lines[3]]
    assert lines[3].startswith('{"uplink":"audit"') and lines[4] == "partial"
    assert lines[5].startswith('{"uplink":"audit"') and '"h2"' in lines[5]
    assert [a["host"] for a in accepted_by_daemon(buf.getvalue())] == ["h", "h2"]
