#!/usr/bin/python3
"""The Kubernetes client against the fake API server. Prints figures; asserts nothing.

1. 200 ConfigMaps applied concurrently vs one by one (server-side apply, kube-probe).
2. uplinkd holding the shared watches over 1,000 namespaces and 2,000 pods: time to
   sync, resident memory, CPU spent syncing and CPU while idle.

    /usr/bin/python3 tests/bench/bench_kube.py [--build build] [--objects 200]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests" / "fakekube"))
from fakekube import FakeKube  # noqa: E402
from uplinktest import Daemon, Rpc, kube_probe, wait_for  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return -1.0


def bench_apply(fk, tmp, n):
    fk.create("Namespace", None, {"metadata": {"name": "bench"}})
    files = []
    for i in range(n):
        p = tmp / f"cm-{i}.json"
        p.write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": f"cm-{i}", "namespace": "bench"},
                                 "data": {"i": str(i)}}))
        files.append(p)
    # The fake answers from one Python process, so it serialises requests; a real API
    # server spends most of a write waiting on etcd, which the second run models.
    for latency in (0.0, 0.010):
        fk.clear_faults()
        if latency:
            fk.add_fault(delay=latency, count=None)
        results = {}
        for mode in ("--sequential", "concurrent"):
            args = ["apply"] + ([mode] if mode.startswith("--") else []) + files
            t = time.perf_counter()
            rc, lines, err = kube_probe(fk.kubeconfig, *args, timeout=600)
            results[mode] = time.perf_counter() - t
            assert rc == 0, err
        seq, con = results["--sequential"], results["concurrent"]
        label = f"server latency {latency * 1000:.0f} ms"
        print(f"apply {n} objects one by one   ({label}): {seq * 1000:8.1f} ms "
              f"({seq / n * 1000:.2f} ms each)")
        print(f"apply {n} objects concurrently ({label}): {con * 1000:8.1f} ms "
              f"({seq / con:.1f}x faster)")
    fk.clear_faults()


def bench_watch(fk, tmp, namespaces, pods):
    for i in range(namespaces):
        fk.create("Namespace", None, {"metadata": {"name": f"agent-uplink-{i:012x}",
                                                   "labels": {"managed-by": "agent-uplink"}}})
    for i in range(pods):
        fk.create("Pod", f"agent-uplink-{i % namespaces:012x}", {
            "metadata": {"name": f"pod-{i}", "labels": {"managed-by": "agent-uplink"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    d = Daemon(tmp / "d", env={"KUBECONFIG": fk.kubeconfig}, debug=False)
    d.tmp.mkdir()
    t = time.perf_counter()
    d.start()
    try:
        def synced():
            with Rpc(d.socket) as c:
                cl = c.call("daemon.status").get("cluster", {})
            return cl.get("state") == "ready" and cl.get("namespaces") == namespaces and cl.get("pods") == pods
        wait_for(synced, timeout=300, what="the caches to fill")
        sync_s = time.perf_counter() - t
        cpu_sync = cpu_seconds(d.proc.pid)
        print(f"sync {namespaces} namespaces + {pods} pods: {sync_s * 1000:8.1f} ms wall, "
              f"{cpu_sync * 1000:.0f} ms CPU")
        print(f"uplinkd resident memory with those caches: {rss_mib(d.proc.pid):.1f} MiB")
        time.sleep(10)
        idle = cpu_seconds(d.proc.pid) - cpu_sync
        print(f"uplinkd CPU over 10 s idle (bookmarks every {fk.bookmark_interval:g} s): {idle * 1000:.0f} ms")
    finally:
        d.stop()
        d.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("UPLINK_BUILD", "build"))
    ap.add_argument("--objects", type=int, default=200)
    ap.add_argument("--namespaces", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=2000)
    args = ap.parse_args()
    os.environ["UPLINK_BUILD"] = args.build
    tmp = Path(tempfile.mkdtemp(prefix="upl-kb-", dir="/tmp"))
    fk = FakeKube(str(tmp / "fk"), ready_delay=3600, bookmark_interval=60).start()
    try:
        bench_apply(fk, tmp, args.objects)
        bench_watch(fk, tmp, args.namespaces, args.pods)
    finally:
        fk.stop()


if __name__ == "__main__":
    main()
