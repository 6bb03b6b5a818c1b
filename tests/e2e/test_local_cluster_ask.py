"""Ask mode on the local cluster (localcluster.py): curl in the agent container makes a
request no rule allows, it waits in the real mitm (its control listener reached through
the API server's pods/proxy), `uplink approve` releases it, and it completes at the
upstream, which had not seen it before."""

import json
import threading

from test_local_cluster import daemon, in_agent, run_detached, uplink  # noqa: F401
from uplinktest import wait_for


def test_uplink_approve_releases_the_agents_request(cluster, daemon):  # noqa: F811
    sid, cid = run_detached(cluster, daemon, "--ask")
    out = {}
    try:
        def curl():
            out["r"] = in_agent(cluster, cid, "curl -s -m 110 -X POST -d x "
                                "-w '\\n%{http_code}' https://denied.example/ask-e2e")
        t = threading.Thread(target=curl, daemon=True)
        t.start()

        def waiting():
            r = uplink(daemon, "approvals", "--json")
            assert r.returncode == 0, r.stderr
            hits = [h for h in json.loads(r.stdout)["held"] if h["host"] == "denied.example"]
            return hits[0] if hits else None
        entry = wait_for(waiting, timeout=60, what="the agent's request in uplink approvals")
        assert entry["session"] == sid and entry["path"] == "/ask-e2e"
        assert not [q for q in cluster.requests() if q["path"] == "/ask-e2e"]
        assert t.is_alive()
        r = uplink(daemon, "approve", entry["id"])
        assert r.returncode == 0, (r.stdout, r.stderr)
        t.join(120)
        body, code = out["r"].stdout.rsplit("\n", 1)
        # the fake upstream's own answer (it knows no /ask-e2e), not uplink's 403
        assert code == "404" and "not_found_error" in body, out["r"]
        assert [q["method"] for q in cluster.requests() if q["path"] == "/ask-e2e"] == ["POST"]
    finally:
        uplink(daemon, "stop", sid)
