"""The control channel on the local cluster (localcluster.py), with the real uplinkd and
images: the login token renewed every second or so (test_local_cluster_sessions.renewing)
is pushed to the mitm's control listener through fakekube's pods/proxy, which reaches the
mitm container from the node as an API server does; from the agent container the control
port cannot be reached at all (the mitm's NetworkPolicy, enforced by the docker kubelet),
while the proxy port can."""

from test_local_cluster import mitm_log, run_detached, uplink
from test_local_cluster_sessions import renewing  # noqa: F401
from uplinktest import wait_for


def in_agent(cluster, cid, script):  # noqa: F811
    return cluster.docker("exec", cid, "sh", "-c", script, check=False, timeout=120)


def test_pushes_reach_the_proxy_and_the_agent_cannot_reach_its_control_port(
        local, renewing):  # noqa: F811
    cluster = local
    sid, cid = run_detached(cluster, renewing)
    try:
        wait_for(lambda: f"Session {sid}: rules pushed to the proxy over the control channel"
                 in renewing.logs(), timeout=60, what="a push over the control channel")
        wait_for(lambda: "control: PUT /v1/rules -> 200" in mitm_log(cluster, sid),
                 timeout=30, what="the mitm to log the push")
        # the control port, by the name the agent has for the mitm, and without the proxy
        r = in_agent(cluster, cid, "curl -s -m 5 --noproxy '*' -o /dev/null -w '%{http_code}' "
                     "http://mitm:8081/v1/status; echo \" rc=$?\"")
        assert " rc=0" not in r.stdout and r.stdout.startswith("000"), r
        r = in_agent(cluster, cid, "curl -s -m 5 --noproxy '*' -o /dev/null -w '%{http_code}' "
                     "-H 'X-Uplink-Control-Token: x' -X PUT -d '{}' "
                     "http://mitm:8081/v1/rules; echo \" rc=$?\"")
        assert " rc=0" not in r.stdout, r
        # while the proxy port is open to it: a request no rule allows gets uplink's 403
        r = in_agent(cluster, cid, "curl -s -m 30 -o /dev/null -w '%{http_code}' -X POST -d x "
                     "http://denied.example/x")
        assert r.stdout == "403", r
        # nothing of the agent's reached the listener: every call it logged is the daemon's
        calls = [ln for ln in mitm_log(cluster, sid).splitlines() if "control: " in ln
                 and " -> " in ln]
        assert calls and all("PUT /v1/rules -> 200" in ln for ln in calls), calls
    finally:
        uplink(renewing, "stop", sid)
