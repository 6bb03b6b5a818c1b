"""The local cluster's fake upstreams themselves, on loopback (no cluster needed)."""

import socket
import ssl
import subprocess
from pathlib import Path

from localcluster import _test_ca
from uplinktest import SLOW, read_line

HERE = Path(__file__).resolve().parent


def test_a_peer_that_never_says_hello_stalls_no_other(tmp_path):
    # With the handshake in the accepting thread, every later connection waited for such a
    # peer, and the mitm answered each with a 502.
    ca, crt, key = _test_ca(tmp_path, "127.0.0.1")
    p = subprocess.Popen(["/usr/bin/python3", str(HERE / "fake_upstream.py"), "--cert", str(crt),
                          "--key", str(key), "--state", str(tmp_path), "--answer", "hi",
                          "--port", "0"], stdout=subprocess.PIPE)
    try:
        port = int(read_line(p, p.stdout, "fake_upstream.py's port").rsplit(" ", 1)[1])
        with socket.create_connection(("127.0.0.1", port)):       # connects, sends nothing
            ctx = ssl.create_default_context(cafile=str(ca))
            with socket.create_connection(("127.0.0.1", port), timeout=60 * SLOW) as raw, \
                    ctx.wrap_socket(raw, server_hostname="api.anthropic.com") as tls:
                tls.sendall(b"GET /api/hello HTTP/1.1\r\nHost: api.anthropic.com\r\n"
                            b"Connection: close\r\n\r\n")
                answer = b""
                while chunk := tls.recv(4096):
                    answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and b'"hello"' in answer, answer
    finally:
        p.kill()
        p.wait()
