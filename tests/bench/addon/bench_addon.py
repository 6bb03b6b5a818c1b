#!/usr/bin/python3
"""The mitm addon's cost. Prints figures; asserts nothing.

1. Decision time in-process with 1,000 rules (the matcher called directly): per request
   for hosts already seen (warm) and with the per-host cache cleared before each
   decision (cold: every host regex tried), and per CONNECT.
2. Requests per second through a real mitmdump on loopback, with and without the addon
   (both load the test-only redirect addon that sends upstream connections to a local
   echo server): many requests on one kept-alive tunnel, and one new tunnel per request.

Target: the addon's decision for one request with 1,000 rules well under a millisecond.

    /usr/bin/python3 tests/bench/addon/bench_addon.py [--rules 1000] [--requests 1000]
"""

import argparse
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration" / "addon"))
from addon_support import (Echo, Mitm, PKI, load_filter, rules_doc, send,  # noqa: E402
                           tls_client, tunnel, write_atomic)


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def report(name, ns):
    us = [x / 1000 for x in ns]
    print(f"  {name:<44} median {statistics.median(us):8.2f} us   p99 {pct(us, 99):8.2f} us"
          f"   (n={len(us)})")


def make_rules(n, seed=1):
    """A realistic mix: literal hosts with and without methods/paths/injection, regex
    hosts, l4 rules by host and CIDR, and the generic read-only catch-all last."""
    rnd = random.Random(seed)
    rules = []
    for i in range(n - 1):
        kind = i % 10
        name = f"r{i}"
        if kind < 6:
            r = {"name": name, "layer": "user", "hosts": [f"svc{i}\\.corp\\.example\\.com"]}
            if kind % 2:
                r["methods"] = ["GET", "POST"]
                r["paths"] = [f"/api/v{rnd.randint(1, 4)}/.*", "/health"]
            if kind == 0:
                r["inject"] = {"headers": {"Authorization": f"Bearer token-{i}"}}
        elif kind < 9:
            r = {"name": name, "layer": "user", "hosts": [f".*\\.zone{i}\\.example\\.org",
                                                           f"api[0-9]+\\.zone{i}\\.net"],
                 "methods": ["GET"]}
        else:
            r = {"name": name, "layer": "user", "l4_forward": True,
                 "hosts": [f"tcp{i}\\.example\\.net"], "cidrs": [f"10.{i % 250}.0.0/16"]}
        rules.append(r)
    rules.append({"name": "default-readonly", "layer": "generic", "hosts": [".*"],
                  "methods": ["GET", "HEAD", "OPTIONS"]})
    return rules


def requests_for(n_rules, count, seed=2):
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        i = rnd.randrange(n_rules - 1)
        pick = rnd.random()
        if pick < 0.4:
            host = f"svc{i - i % 10}.corp.example.com"           # literal hit, early or late
        elif pick < 0.7:
            host = f"x.zone{i - i % 10 + 7}.example.org"         # regex hit
        else:
            host = f"unknown{i}.example.com"                     # falls to the catch-all
        out.append((rnd.choice(["GET", "POST"]), host, f"/api/v2/items/{i}?q=1"))
    return out


def bench_in_process(n_rules, count):
    f = load_filter()
    rules = make_rules(n_rules)
    t = time.perf_counter()
    rs = f.parse_rules(rules_doc(rules))
    ms = 1000 * (time.perf_counter() - t)
    print(f"in-process, {n_rules} rules (parse + compile {ms:.1f} ms)")
    reqs = requests_for(n_rules, count)
    clock = time.perf_counter_ns
    for method, host, path in reqs:                  # fill the per-host cache
        rs.match_request(method, host, path)
    warm, cold, conn, whole = [], [], [], []
    for method, host, path in reqs:
        t0 = clock()
        rs.match_request(method, host, path)
        warm.append(clock() - t0)
    for method, host, path in reqs:
        rs._host_cache.clear()
        t0 = clock()
        rs.match_request(method, host, path)
        cold.append(clock() - t0)
    for _, host, _ in reqs:
        rs._connect_cache.clear()
        rs._host_cache.clear()
        t0 = clock()
        rs.match_connect(host)
        conn.append(clock() - t0)
    for method, host, path in reqs:
        t0 = clock()
        rs.evaluate(method, "https", host, path)
        whole.append(clock() - t0)
    report("request decision, host seen before", warm)
    report("request decision, cold (cache cleared)", cold)
    report("CONNECT decision, cold (cache cleared)", conn)
    report("whole evaluate() (CONNECT + request), warm", whole)


def keepalive_rps(port, ca, host, count):
    status, _, _, sock = tunnel(port, host, 443)
    assert status == 200, status
    sock = tls_client(ca, sock, host)
    req = f"GET /bench HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    buf = b""
    t0 = time.perf_counter()
    for _ in range(count):
        sock.sendall(req)
        while b"\r\n\r\n" not in buf:
            buf += sock.recv(65536)
        head, buf = buf.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200"), head[:80]
        n = int([x for x in head.split(b"\r\n") if x.lower().startswith(b"content-length:")][0]
                .split(b":")[1])
        while len(buf) < n:
            buf += sock.recv(65536)
        buf = buf[n:]
    dt = time.perf_counter() - t0
    sock.close()
    return count / dt


def newconn_rps(port, ca, host, count):
    t0 = time.perf_counter()
    for _ in range(count):
        res = send(port, "https", host, 443, "GET", "/bench", trust=ca)
        assert res.status == 200, res
    return count / (time.perf_counter() - t0)


def bench_proxy(n_rules, count):
    tmp = Path(tempfile.mkdtemp(prefix="uplink-bench-"))
    pki = PKI(tmp)
    echo = Echo(pki)
    rules = tmp / "rules.json"
    write_atomic(rules, rules_doc(make_rules(n_rules)))
    host = f"svc{(n_rules - 1) // 10 * 10 - 10}.corp.example.com"   # a late literal rule
    common = [f"ssl_verify_upstream_trusted_ca={pki.upstream_ca}", "termlog_verbosity=warn",
              "flow_detail=0"]
    version = subprocess.run(["/usr/bin/mitmdump", "--version"], capture_output=True,
                             text=True).stdout.split("\n")[0]
    print(f"\nthrough mitmdump on loopback ({version}), GET to {host}:")
    results = {}
    for label, with_addon in (("without addon", False), ("with addon", True)):
        sets = common + ([f"uplink_rules={rules}"] if with_addon else [])
        m = Mitm(tmp, pki, sets=sets, redirect=f"127.0.0.1:{echo.port}",
                 name=label.replace(" ", "-"), addon=with_addon)
        m.start()
        try:
            keepalive_rps(m.port, pki.mitm_ca, host, 50)          # warm up
            ka = keepalive_rps(m.port, pki.mitm_ca, host, count)
            nc = newconn_rps(m.port, pki.mitm_ca, host, max(50, count // 5))
        finally:
            m.stop()
        results[label] = (ka, nc)
        print(f"  {label:<14} keep-alive {ka:8.0f} req/s ({1e6 / ka:7.0f} us/req)   "
              f"new tunnel per request {nc:7.0f} req/s ({1e6 / nc:7.0f} us/req)")
    (ka0, nc0), (ka1, nc1) = results["without addon"], results["with addon"]
    print(f"  addon cost per request: keep-alive {1e6 / ka1 - 1e6 / ka0:+.0f} us, "
          f"new tunnel {1e6 / nc1 - 1e6 / nc0:+.0f} us")
    echo.close()
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rules", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--decisions", type=int, default=20000)
    ap.add_argument("--no-proxy", action="store_true", help="in-process figures only")
    args = ap.parse_args()
    bench_in_process(args.rules, args.decisions)
    if not args.no_proxy:
        socket.setdefaulttimeout(30)
        bench_proxy(args.rules, args.requests)


if __name__ == "__main__":
    main()
