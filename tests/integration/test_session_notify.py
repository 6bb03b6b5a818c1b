"""A real session's end reaches the desktop: exactly one notification, critical when it
failed, none for a dry run (private dbus-daemon + dbusmock's notification server)."""

import json

import pytest

from test_notify import barrier  # noqa: F401
from uplinktest import Bus, Env, wait_for


@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    bus = Bus(tmpdir_short)
    bus.start_server()
    e = Env(tmpdir_short, fakekube, registry)
    e.daemon.env.update({**bus.env(), "UPLINK_DEBUG_RPC": "1"})  # debug.notify: the barrier
    e.daemon.start()
    wait_for(lambda: '"state": "ready"' in e.daemon.client("status", "--json").stdout, what="sync")
    bus.clear()
    yield e, bus
    assert e.daemon.stop() == 0, e.daemon.logs()[-2000:]
    e.daemon.close()
    bus.close()


def settle(e, bus, n):
    """The Notify calls once `n` have come, and all uplinkd had sent by then (an in-order
    marker notification, not a sleep, says that the rest are in). The mock's log is cleared."""
    wait_for(lambda: len(bus.notify_calls()) >= n, timeout=15, what=f"{n} Notify call(s)")
    return barrier(e.daemon, bus)


def test_agent_exit_sends_one_notification(env):
    e, bus = env
    sid = e.run("claude", "--detach", "--image", "example/agent:1", check=0).stdout.strip()
    e.fk.terminate_pod(f"agent-uplink-{sid}", "agent", container="main", exit_code=3, reason="Error")
    calls = settle(e, bus, 1)
    assert len(calls) == 1, calls
    n = calls[0]
    assert n["app"] == "uplink" and n["summary"] == "claude finished"
    assert f"Session {sid} in {e.project}" in n["body"]
    assert "Exited with code 3" in n["body"]
    assert n["urgency"] == 1


def test_failed_start_is_critical(env):
    e, bus = env
    r = e.run("claude", "--detach", "--image", "localhost:5000/fakekube-never-ready:1", check=1)
    assert "did not become ready" in r.stderr
    calls = settle(e, bus, 1)
    assert len(calls) == 1, calls
    assert calls[0]["urgency"] == 2
    assert "did not become ready" in calls[0]["body"]


def test_dry_run_notifies_nothing(env):
    e, bus = env
    e.run("claude", "--dry-run", "--image", "example/agent:1", check=0)
    assert barrier(e.daemon, bus) == []


def audit(decision, host, path="/x", method="GET"):
    import json
    return json.dumps({"uplink": "audit", "ts": "2026-11-29T10:00:00Z", "decision": decision,
                       "rule": None, "layer": None, "method": method, "scheme": "https", "host": host,
                       "port": 443, "path": path, "status": 403, "injected": [],
                       "bytes_in": 0, "bytes_out": 0})


def test_denied_burst_is_told_once_and_counted_at_the_end(env):
    e, bus = env
    sid = e.run("claude", "--detach", "--image", "example/agent:1", check=0).stdout.strip()
    ns = f"agent-uplink-{sid}"
    wait_for(lambda: any("/log" in r["path"] and ns in r["path"] for r in e.fk.requests()),
             timeout=15, what="the audit stream")
    lines = "\n".join(audit("deny", f"evil{i}.example") for i in range(5)) + "\n"
    e.fk.pod_log(ns, "mitm", lines, container="mitm")
    calls = settle(e, bus, 1)
    assert len(calls) == 1, calls  # five denials, one notification this minute
    assert "evil0.example" in calls[0]["body"]
    bus.clear()
    e.fk.terminate_pod(ns, "agent", container="main", exit_code=0)
    calls = settle(e, bus, 1)
    assert len(calls) == 1
    assert "5 requests were denied" in calls[0]["body"]


def test_notifications_false_in_a_config_file_keeps_the_session_quiet(env):
    e, bus = env
    (e.project / ".uplink.yaml").write_text("notifications: false\n")
    sid = e.run("claude", "--detach", "--image", "example/agent:1", check=0).stdout.strip()
    rec = e.tmp / "state" / "uplink" / "sessions" / f"{sid}.json"
    wait_for(rec.exists, what="the record")
    assert json.loads(rec.read_text())["quiet"] is True
    e.fk.terminate_pod(f"agent-uplink-{sid}", "agent", container="main", exit_code=3, reason="Error")
    wait_for(lambda: json.loads(rec.read_text())["state"] in ("EXITED", "TEARDOWN", "GONE"), what="the exit")
    assert barrier(e.daemon, bus) == []
    # the next session, without the file, is heard again
    (e.project / ".uplink.yaml").unlink()
    sid = e.run("claude", "--detach", "--image", "example/agent:1", check=0).stdout.strip()
    e.fk.terminate_pod(f"agent-uplink-{sid}", "agent", container="main", exit_code=0, reason="Completed")
    assert len(settle(e, bus, 1)) == 1


def test_a_proxy_that_stops_being_ready_is_told_once(env):
    e, bus = env
    sid = e.run("claude", "--detach", "--image", "example/agent:1", check=0).stdout.strip()
    bus.clear()
    ns = f"agent-uplink-{sid}"
    e.fk.set_container_ready(ns, "mitm", "mitm", False, reason="CrashLoopBackOff")
    calls = settle(e, bus, 1)
    assert len(calls) == 1, calls
    n = calls[0]
    assert n["summary"] == "claude: pod mitm is down" and n["urgency"] == 2
    assert f"Session {sid}: " in n["body"] and "the agent reaches no host until it is back" in n["body"]
    assert f"kubectl -n agent-uplink-{sid} describe pod mitm" in n["body"]
    logs = e.daemon.logs()
    assert f"Session {sid}: pod mitm is no longer Ready (pod mitm is Running, container mitm waiting: " \
        "CrashLoopBackOff)" in logs
    # the session itself goes on: Kubernetes restarts the proxy; its return is logged, and a
    # second outage is told again
    assert e.session(sid)["state"] == "RUNNING"
    e.fk.set_container_ready(ns, "mitm", "mitm", True)
    wait_for(lambda: f"Session {sid}: pod mitm is Ready again" in e.daemon.logs(), what="the return")
    e.fk.set_container_ready(ns, "mitm", "mitm", False, reason="Error")
    assert len(settle(e, bus, 1)) == 1  # the first was cleared by the first settle
