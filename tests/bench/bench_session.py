#!/usr/bin/python3
"""A session's start in the daemon against the fake API server: from session.start to
the last object submitted (no image build: --image; no pod start-up: that is the
cluster's), and the API requests one start costs. Prints figures; asserts nothing.

Target: under 50 ms from request to every object submitted, with the objects applied
concurrently.

    /usr/bin/python3 tests/bench/bench_session.py [--build build] [--runs 20]
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
from uplinktest import Daemon, Rpc, uplink_bin, wait_for  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("UPLINK_BUILD", "build"))
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    os.environ["UPLINK_BUILD"] = args.build
    tmp = Path(tempfile.mkdtemp(prefix="upl-sb-", dir="/tmp"))
    fk = FakeKube(str(tmp / "fk"), ready_delay=0.05, terminate_delay=0.05).start()
    home = tmp / "home"
    (home / "proj").mkdir(parents=True)
    (home / ".claude").mkdir()
    (home / ".claude" / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {
        "accessToken": "sk-ant-oat01-bench", "refreshToken": "sk-ant-ort01-bench",
        "expiresAt": int((time.time() + 86400) * 1000)}}))
    (home / ".claude" / "settings.json").write_text("{}")
    (tmp / "d").mkdir()
    d = Daemon(tmp / "d", debug=False, env={
        "HOME": str(home), "KUBECONFIG": fk.kubeconfig, "UPLINK_DATA_DIR": str(ROOT),
        "XDG_STATE_HOME": str(tmp / "state")}).start()
    try:
        wait_for(lambda: '"state": "ready"' in d.client("status", "--json").stdout, what="sync")
        env = {**d.env}
        env.pop("UPLINK_DEBUG", None)
        to_last, deploy, reqs = [], [], []
        for _ in range(args.runs):
            fk.clear_requests()
            r = subprocess.run([uplink_bin(), "run", "claude", "--detach", "--image", "example/agent:1"],
                               cwd=home / "proj", env=env, capture_output=True, text=True, check=True)
            sid = r.stdout.strip()
            with Rpc(d.socket) as c:
                t = c.call("session.get", {"id": sid})["timings_ms"]
                to_last.append(t["to_last_object"])
                deploy.append(t["deploy"])
                reqs.append(len([x for x in fk.requests() if x["method"] in ("PATCH", "POST", "GET")]))
                c.call("session.stop", {"id": sid})
        print(f"session.start to last object submitted: median {statistics.median(to_last):7.2f} ms, "
              f"max {max(to_last):7.2f} ms (n={args.runs}; target under 50 ms)")
        print(f"  of which applying the objects:        median {statistics.median(deploy):7.2f} ms")
        print(f"API requests per session start:         median {statistics.median(reqs):.0f}")
    finally:
        d.stop()
        d.close()
        fk.stop()


if __name__ == "__main__":
    main()
