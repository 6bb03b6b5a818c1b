#!/usr/bin/python3
"""`uplink run claude` on the local cluster (tests/e2e/localcluster.py, root, docker and
debootstrap needed) with a warm image: from the client's start to the agent's first screen,
split by phase as the client shows its session.progress lines (their times are the
client's own clock): prepare, image check, objects submitted, pods ready, attached, first
screen. The first run is the cold one (--no-cold: a warm-up, not timed by phase): the
in-cluster registry starts empty and the dockerd has neither the agent image nor any build
cache, so the daemon builds the agent image from its Dockerfile and pushes it; the base
stand-ins (node:22-bookworm-slim, registry:2, the mitm image) stay, as they would on a
machine that pulled them once. Prints figures; asserts nothing.

    /usr/bin/python3 tests/bench/bench_local_cluster.py [--build build] [--runs 3] [--no-cold]
"""

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

PROGRESS = re.compile(r"(\d+\.\d)s (\w+)\s*(?:\[(\d+)/(\d+)\])? ([^\r\n]*)")
# milestone: (phase, the progress line's message starts with, or None: its last step done)
MILESTONES = (("prepare", "prepare", "rules and credentials ready"),
              ("image check", "build", "up to date"),
              ("objects submitted", "deploy", "all objects submitted"),
              ("pods ready", "start", None))


def milestones(screen):
    """{milestone: seconds} from the client's progress lines."""
    seen = {}
    for m in PROGRESS.finditer(screen):
        t, phase, done, total, msg = float(m[1]), m[2], m[3], m[4], m[5]
        for name, ph, start in MILESTONES:
            if ph != phase or name in seen:
                continue
            if (start and msg.startswith(start)) or (
                    start is None and total and done == total):
                seen[name] = t
    return seen


COLD = ("cold: an empty in-cluster registry, no agent image and no build cache in the dockerd "
        "(the daemon builds and pushes it); the base stand-in images cached")


def make_cold(cluster):
    """The dockerd without the agent image or anything a build left (COLD)."""
    imgs = [i for i in cluster.docker("images", "--format",
                                      "{{.Repository}}:{{.Tag}}").stdout.split()
            if i.startswith("localhost:5000/uplink/")]
    if imgs:
        cluster.docker("rmi", "-f", *imgs, check=False)
    cluster.docker("builder", "prune", "-af", check=False)
    cluster.docker("image", "prune", "-f", check=False)


def one_run(cluster, daemon, Pty, words, text_of, timeout=900):
    t = Pty(daemon, ["run", "claude", "--mitmproxy-image", "uplink-test/mitmproxy:8",
                     "--mitm-ca-cert", str(cluster.ca_cert)])
    try:
        t.until(lambda s: "\x1b[?1049h" in s, timeout=timeout, what="tmux to attach")
        at = t.out.index(b"\x1b[?1049h")
        attached = max(s for s, n in t.stamps if n <= at)
        t.until(lambda _: words(text_of(t.out[at:].decode("utf-8", "replace"))), timeout=120,
                what="the agent's first screen")
        first = t.stamps[-1][0]
        screen = t.screen()
    finally:
        t.close()
    got = milestones(screen)
    if "pods ready" not in got and b"is running; attaching" in t.out:
        # the client says so once both pods are Ready, with no [2/2] line before
        k = t.out.index(b"is running; attaching")
        got["pods ready"] = max(s for s, n in t.stamps if n <= k)
    got.update({"attached": attached, "first screen": first})
    got["build lines"] = [m[0] for m in PROGRESS.finditer(screen) if m[2] == "build"]
    sid = re.search(r"agent-uplink-([0-9a-f]{12})", screen)
    return got, sid[1] if sid else None


def report(rows, cold):
    names = [m[0] for m in MILESTONES] + ["attached", "first screen"]
    print("\n%-18s %10s %10s %10s   (seconds from `uplink run`; warm: median of %d; step: "
          "since the previous milestone)" % ("milestone", "warm at", "warm step", "cold at",
                                            len(rows)))
    prev = 0.0
    for n in names:
        vals = [r[n] for r in rows if n in r]
        c = "%10.2f" % cold[n] if cold and n in cold else "%10s" % ("-" if cold is None else
                                                                   "not seen")
        if not vals:
            print("%-18s %10s %10s %s" % (n, "not seen", "", c))
            continue
        med = statistics.median(vals)
        print("%-18s %10.2f %10.2f %s   warm runs: %s" % (
            n, med, med - prev, c, " ".join("%.2f" % v for v in vals)))
        prev = med
    if cold:
        print("the cold run's image lines:\n  " + "\n  ".join(cold["build lines"][-8:]))
    print("warm: the agent image in the registry (no build); " +
          (COLD if cold is not None else "no cold run (--no-cold)"))
    if cold and any("up to date" in ln for ln in cold["build lines"]):
        # the registry is on the host's 127.0.0.1:5000 (hostNetwork): another local
        # cluster's registry that holds the image answers for ours
        print("NOT a cold build: the registry at localhost:5000 already had the image (another "
              "local cluster on this machine serves that port?); the cold figure is an empty "
              "node pulling the image")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("UPLINK_BUILD", "build"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-cold", action="store_true", help="no cold-image run: a warm-up")
    args = ap.parse_args()
    os.environ["UPLINK_BUILD"] = args.build
    from localcluster import LocalCluster, unavailable
    from test_local_cluster import end_daemon, run_detached, uplink, user_daemon
    from test_local_cluster_sessions import Pty, text_of, wait_gone, words
    why = unavailable()
    if why:
        sys.exit("no local cluster: " + why)
    tmp = Path(tempfile.mkdtemp(prefix="uplbench-", dir="/tmp"))
    tmp.chmod(0o755)
    t0 = time.monotonic()
    # cold: a registry of this run's own, empty
    cluster = LocalCluster(tmp, registry_dir=None if args.no_cold else tmp / "registry").start()
    print("local cluster up in %.1f s" % (time.monotonic() - t0))
    daemon = user_daemon(cluster)

    def stop_all():
        ids = [ln.split()[0] for ln in uplink(daemon, "list").stdout.splitlines()[1:]
               if ln.split() and re.fullmatch(r"[0-9a-f]{12}", ln.split()[0])]
        for s in ids:
            uplink(daemon, "stop", s, "--wait")
            wait_gone(cluster, daemon, s)
    try:
        cold = None
        if args.no_cold:
            t0 = time.monotonic()
            sid, _ = run_detached(cluster, daemon)
            print("warm-up run (image built and pushed if the registry lacked it): %.1f s"
                  % (time.monotonic() - t0))
        else:
            make_cold(cluster)
            cold, _ = one_run(cluster, daemon, Pty, words, text_of, timeout=3600)
        stop_all()
        rows = []
        for _ in range(args.runs):
            got, sid = one_run(cluster, daemon, Pty, words, text_of)
            rows.append(got)
            stop_all()
        report(rows, cold)
    finally:
        end_daemon(daemon)
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
