#!/usr/bin/python3
"""Round trips to uplinkd: whole `uplink status` processes, raw RPC calls over one
connection, and the resident memory of an idle daemon. Prints figures; asserts nothing.

Targets: a whole `uplink status` (client start, RPC, answer) in a few milliseconds; idle
RSS under 10 MB.

    /usr/bin/python3 tests/bench/bench_status.py [--build build] [--runs 300]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from uplinktest import Daemon, Rpc, uplink_bin  # noqa: E402


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def report(name, samples_s, unit_scale=1000.0, unit="ms"):
    med = statistics.median(samples_s) * unit_scale
    p99 = pct(samples_s, 99) * unit_scale
    print(f"{name:<38} median {med:8.3f} {unit}   p99 {p99:8.3f} {unit}   (n={len(samples_s)})")


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("UPLINK_BUILD", "build"))
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args()
    os.environ["UPLINK_BUILD"] = args.build

    tmp = Path(tempfile.mkdtemp(prefix="upl-bench-", dir="/tmp"))
    d = Daemon(tmp, debug=False).start()
    try:
        env = dict(d.env)
        # Whole client processes, as a user or a script would run them.
        cmd = [uplink_bin(), "status"]
        for _ in range(10):
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
        samples = []
        for _ in range(args.runs):
            t = time.perf_counter()
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
            samples.append(time.perf_counter() - t)
        report("uplink status (whole process)", samples)

        # Raw calls over one connection (the daemon's share).
        with Rpc(d.socket) as c:
            for _ in range(100):
                c.call("daemon.status")
            samples = []
            for _ in range(args.runs * 10):
                t = time.perf_counter()
                c.call("daemon.status")
                samples.append(time.perf_counter() - t)
        report("daemon.status over one connection", samples, 1e6, "us")

        # Idle: no clients, a moment to settle.
        time.sleep(1.0)
        print(f"{'uplinkd idle resident memory':<38} {rss_kib(d.proc.pid) / 1024:8.2f} MiB"
              "   (target: under 10 MiB)")
    finally:
        d.stop()
        d.close()


if __name__ == "__main__":
    main()
