#!/usr/bin/python3
"""Ask mode, the whole way: from `uplink approve ID` to the held request reaching the
upstream. Prints figures; asserts nothing.

The real uplinkd against fakekube, whose pods/proxy leads (TLS, client certificate) to a
real mitmdump running the addon in ask mode with the session's rules and control token, as
tests/integration/test_approvals.py sets it up. Per run the agent's request (a new host each
time, no rule allowing it) is held until `uplink approve` lists nothing more than it; the
clock runs from starting the client process to the echo upstream recording the request, and
again from the JSON-RPC call approvals.decide alone (no client process) for the daemon's
share. tests/bench/addon/bench_approve.py times the proxy's part alone.

    /usr/bin/python3 tests/bench/bench_approve_full.py [--runs 20]
"""

import argparse
import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests" / "integration" / "addon"))
sys.path.insert(0, str(ROOT / "tests" / "fakekube"))
from addon_support import PKI, Echo, send  # noqa: E402
from fakekube import FakeKube  # noqa: E402
from test_approvals import ask_proxy, held  # noqa: E402
from uplinktest import Env, Registry, Rpc, run_detached, uplink_bin, wait_for  # noqa: E402


def hold(proxy, pki, host):
    """The agent's request, in a thread: it waits while held."""
    tid, out = uuid.uuid4().hex, {}

    def go():
        out["r"] = send(proxy.port, "https", host, 443, "POST", "/v1/x",
                        headers=[("X-Test-Id", tid)], trust=pki.mitm_ca, timeout=120)
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return tid, t


def arrived(echo, tid):
    while not echo.find(tid):
        time.sleep(0.0005)
    return time.perf_counter()


def decide(socket_path, id_):
    with Rpc(socket_path) as c:
        c.call("approvals.decide", {"id": id_, "decision": "once"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("UPLINK_BUILD", "build"))
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    os.environ["UPLINK_BUILD"] = args.build
    tmp = Path(tempfile.mkdtemp(prefix="upl-ba-", dir="/tmp"))
    fk = FakeKube(str(tmp / "fk"), ready_delay=0.05, terminate_delay=0.05).start()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    e = Env(tmp, fk, srv)
    e.daemon.env.update({"UPLINK_NOTIFIER": "log"})
    e.daemon.start()
    pki = PKI(tmp)
    echo = Echo(pki)
    proxy = None
    try:
        wait_for(lambda: '"state": "ready"' in e.daemon.client("status", "--json").stdout,
                 what="sync")
        sid, _ = run_detached(e, "--ask")
        proxy, _ = ask_proxy(e, pki, echo, sid)
        env = dict(e.daemon.env)
        env.pop("UPLINK_DEBUG", None)
        cli, rpc = [], []
        for i in range(args.runs):
            for kind in ("cli", "rpc"):
                host = f"{kind}{i}.example.org"
                tid, t = hold(proxy, pki, host)
                entry = wait_for(lambda: held(e, host), timeout=60, what="held")
                t0 = time.perf_counter()
                if kind == "cli":
                    subprocess.Popen([uplink_bin(), "approve", entry["id"]], env=env,
                                     stdout=subprocess.DEVNULL)
                else:
                    threading.Thread(target=decide, args=(e.daemon.socket, entry["id"]),
                                     daemon=True).start()
                (cli if kind == "cli" else rpc).append((arrived(echo, tid) - t0) * 1000)
                t.join(60)
        for name, xs in (("uplink approve (client process included)", cli),
                         ("approvals.decide over JSON-RPC", rpc)):
            xs.sort()
            print(f"{name:42s} to upstream: median {statistics.median(xs):6.1f} ms, "
                  f"p90 {xs[int(len(xs) * 0.9) - 1]:6.1f} ms (n={len(xs)})")
    finally:
        if proxy is not None:
            proxy.stop()
        echo.close()
        e.daemon.stop()
        e.daemon.close()
        fk.stop()
        srv.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
