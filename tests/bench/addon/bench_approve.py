#!/usr/bin/python3
"""Ask mode: the time from an approval to the held request reaching the upstream. Prints
figures; asserts nothing.

A real mitmdump with the addon in ask mode and its control listener; per run the agent's
request (a new host each time, no rule allowing it) is held, listed by GET /v1/held, then
approved with POST /v1/held/<id> {"decision": "once"}: the clock runs from sending the
approval to the echo upstream recording the request. `uplink approve` adds one call to
uplinkd and one API-server pods/proxy hop on top (tests/integration/test_approvals.py
goes that way).

    /usr/bin/python3 tests/bench/addon/bench_approve.py [--runs 30]
"""

import argparse
import http.client
import json
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration" / "addon"))
from addon_support import PKI, Echo, Proxy, free_port, send  # noqa: E402


def control(port, token, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, json.dumps(body).encode() if body else None,
                     {"Content-Type": "application/json", "X-Uplink-Control-Token": token})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def one(p, echo, pki, port, token, i):
    host, tid = f"bench{i}.uplink.test", uuid.uuid4().hex
    t = threading.Thread(target=send, daemon=True, args=(
        p.port, "https", host, 443, "POST", "/x"), kwargs={
        "headers": [("X-Test-Id", tid)], "trust": pki.mitm_ca, "timeout": 60})
    t.start()
    seq = -1
    while True:
        _, doc = control(port, token, "GET", f"/v1/held?wait=10&after={seq}")
        seq = doc["seq"]
        hit = [h for h in doc["held"] if h["host"] == host]
        if hit:
            break
    t0 = time.perf_counter()
    control(port, token, "POST", f"/v1/held/{hit[0]['id']}", {"decision": "once"})
    while not echo.find(tid):
        time.sleep(0.0005)
    dt = time.perf_counter() - t0
    t.join(30)
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="upl-bench-ask-"))
    pki = PKI(tmp)
    echo = Echo(pki)
    port, token = free_port(), secrets.token_hex(24)
    (tmp / "token").write_text(token)
    p = Proxy(tmp, pki, echo, "ask", sets=[
        f"uplink_extra_ca={pki.upstream_ca}", "uplink_ask=true", f"uplink_control_port={port}",
        f"uplink_control_token={tmp / 'token'}"], quiet=True)
    try:
        for _ in range(200):  # until the control listener answers
            try:
                control(port, token, "GET", "/v1/held")
                break
            except OSError:
                time.sleep(0.05)
        times = [one(p, echo, pki, port, token, i) for i in range(args.runs)]
        ms = sorted(t * 1000 for t in times)
        print(f"approve -> upstream (addon, {args.runs} runs): median {statistics.median(ms):.2f} ms, "
              f"p90 {ms[int(len(ms) * 0.9) - 1]:.2f} ms, max {ms[-1]:.2f} ms")
    finally:
        p.stop()
        echo.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
