"""uplinkd under load and abuse: many clients, killed clients, garbage, huge lines."""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

from uplinktest import Lines, Rpc, wait_for

CLIENTS = 200
REQUESTS = 50


def test_200_clients_50_requests_each(daemon):
    errors = []
    barrier = threading.Barrier(CLIENTS)

    def worker(n):
        try:
            with Rpc(daemon.socket, timeout=60) as c:
                barrier.wait(timeout=60)  # every connection open at once
                for i in range(REQUESTS):
                    msg = c.call_raw("daemon.status", id_=f"{n}-{i}")
                    assert msg["id"] == f"{n}-{i}", msg
                    assert msg["result"]["pid"] == daemon.proc.pid
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"client {n}: {e!r}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    with daemon.rpc() as c:
        s = c.call("daemon.status")
    assert s["connections"]["requests_total"] >= CLIENTS * REQUESTS


KILLED_CLIENT = r"""
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
mode = sys.argv[2]
if mode == "partial":
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.sta')
elif mode == "flood":
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"}\n' * 5000)
else:
    s.sendall(b'[' + b','.join([b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"}'] * 100) + b']\n')
print("ready", flush=True)
time.sleep(60)
"""


def test_clients_killed_mid_request(daemon):
    procs = []
    for i in range(30):
        mode = ("partial", "flood", "batch")[i % 3]
        p = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, str(daemon.socket), mode],
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
    for p in procs:
        assert Lines(p, p.stdout).next("the client to connect").strip() == "ready"
    for p in procs:
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()

    def only_us():
        with daemon.rpc() as c:
            return c.call("daemon.status")["connections"]["clients"] == 1
    wait_for(only_us, what="the killed clients to be forgotten")
    with daemon.rpc() as c:
        assert c.call("daemon.status")["connections"]["requests_in_flight"] == 1  # ours


def test_garbage_then_still_answers(daemon):
    rnd = random.Random(1234)
    for _ in range(20):
        with daemon.rpc(timeout=5) as c:
            blob = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 20000)))
            try:
                c.send_raw(blob + b"\n")
                # Each complete garbage line gets a parse error (or an invalid-request error).
                msg = c.recv_msg()
                assert msg["error"]["data"]["name"] in ("PARSE_ERROR", "INVALID_REQUEST")
                assert msg["id"] is None
            except (ConnectionResetError, BrokenPipeError):
                pass  # a chunk without a newline over the limit: closed, which is also right
    with daemon.rpc() as c:
        assert c.call("daemon.status")["pid"] == daemon.proc.pid


def test_json_shaped_garbage(daemon):
    bad = [b"{}", b"[]", b"[[]]", b"null", b"123", b'{"jsonrpc":"2.0","method":{}}',
           b'{"jsonrpc":"2.0","id":[1],"method":"daemon.status"}', b'{"a":1,"a":2}',
           b'{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":7}',
           b'{"jsonrpc":"2.0","id":1,"method":"daemon.hello","params":{"protocol":"1"}}',
           b'{"jsonrpc":"2.0","id":1,"method":"daemon.hello","params":{}}',
           b'{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"verbose":true}}',
           b"[" * 5000 + b"]" * 5000]
    with daemon.rpc() as c:
        for line in bad:
            c.send_raw(line + b"\n")
            msg = c.recv_msg()
            if isinstance(msg, list):
                assert all("error" in m for m in msg), msg
            else:
                assert "error" in msg, (line[:80], msg)
        assert c.call("daemon.status")["pid"] == daemon.proc.pid
    with daemon.rpc() as c:
        r = c.call_raw("daemon.hello", {"protocol": "1"})
        assert r["error"]["message"] == "parameter 'protocol' must be an integer, not a string"
        r = c.call_raw("daemon.hello", {})
        assert r["error"]["message"] == "missing parameter 'protocol'"
        r = c.call_raw("daemon.status", {"verbose": True})
        assert r["error"]["message"] == "unknown parameter 'verbose'"


def test_16mib_line_closes_only_that_connection(daemon):
    with daemon.rpc() as watcher:
        watcher.call("daemon.hello", {"protocol": 1})
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(daemon.socket))
        s.settimeout(30)
        chunk = b"x" * (1 << 20)
        closed = False
        try:
            for _ in range(16):
                s.sendall(chunk)
            s.sendall(b"\n")
            closed = s.recv(1) == b""
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        s.close()
        assert closed
        assert watcher.call("daemon.status")["pid"] == daemon.proc.pid
    wait_for(lambda: "sent a line over 1048576 bytes, disconnecting" in daemon.logs(),
             what="the oversized line to be logged")
