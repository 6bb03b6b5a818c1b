#!/usr/bin/python3
"""`uplink list` with 500 sessions (the whole client process, answered from the daemon's
cache) against what agent-uplink 0.4.1 does for every list (one `kubectl get namespaces
-l managed-by=agent-uplink -o json`), both against the fake API server; and the time from
an orphan namespace's appearance to its deletion. Prints figures; asserts nothing.

    /usr/bin/python3 tests/bench/bench_list.py [--build build] [--sessions 500] [--runs 30]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests" / "fakekube"))
from fakekube import FakeKube  # noqa: E402
from uplinktest import Daemon, uplink_bin, wait_for  # noqa: E402


def timed(cmd, env, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("UPLINK_BUILD", "build"))
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    os.environ["UPLINK_BUILD"] = args.build
    tmp = Path(tempfile.mkdtemp(prefix="upl-lb-", dir="/tmp"))
    fk = FakeKube(str(tmp / "fk"), ready_delay=3600).start()
    home = tmp / "home"
    (home / "proj").mkdir(parents=True)
    (home / ".claude").mkdir()
    (home / ".claude" / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {
        "accessToken": "a", "refreshToken": "b", "expiresAt": int((time.time() + 86400) * 1000)}}))
    (home / ".claude" / "settings.json").write_text("{}")
    # Foreign-looking session namespaces (as the Python tool makes them): listed by --all.
    for i in range(args.sessions):
        fk.create("Namespace", None, {"metadata": {"name": f"agent-uplink-{i:012x}",
                                                   "labels": {"managed-by": "agent-uplink"}}})
    (tmp / "d").mkdir()
    d = Daemon(tmp / "d", debug=False, env={"HOME": str(home), "KUBECONFIG": fk.kubeconfig,
                                            "UPLINK_DATA_DIR": str(ROOT),
                                            "XDG_STATE_HOME": str(tmp / "state")}).start()
    try:
        wait_for(lambda: f'"namespaces": {args.sessions}' in d.client("status", "--json").stdout,
                 timeout=120, what="the cache")
        env = {**d.env}
        env.pop("UPLINK_DEBUG", None)
        ours = timed([uplink_bin(), "list", "--all"], env, args.runs)
        theirs = timed(["kubectl", "--kubeconfig", fk.kubeconfig, "get", "namespaces", "-l",
                        "managed-by=agent-uplink", "-o", "json"], env, max(5, args.runs // 3))
        print(f"uplink list --all, {args.sessions} sessions (whole process): median {ours:8.2f} ms")
        print(f"kubectl get namespaces (0.4.1's list):     median {theirs:8.2f} ms "
              f"({theirs / ours:.0f}x slower, before Python's own start-up)")
        # An orphan: ours by its owner label, with no record.
        lat = []
        for i in range(5):
            name = f"agent-uplink-ffffffff{i:04x}"
            t = time.perf_counter()
            fk.create("Namespace", None, {"metadata": {"name": name, "labels": {
                "managed-by": "agent-uplink", "uplink.dev/owner": owner_label(d)}}})
            wait_for(lambda: (fk.get("Namespace", None, name) or {}).get("status", {}).get("phase")
                     in ("Terminating", None), timeout=30, what="the orphan's deletion")
            lat.append((time.perf_counter() - t) * 1000)
        print(f"orphan appears -> deletion requested:      median {statistics.median(lat):8.2f} ms")
    finally:
        d.stop()
        d.close()
        fk.stop()


def owner_label(d):
    """The daemon's owner label, computed as it does (machine-id and uid)."""
    import hashlib
    mid = Path("/etc/machine-id")
    machine = mid.read_text().strip() if mid.exists() else ""
    if len(machine) == 32:
        return hashlib.sha256(f"{machine}:{os.getuid()}".encode()).hexdigest()[:16]
    return f"uid{os.getuid()}"


if __name__ == "__main__":
    main()
