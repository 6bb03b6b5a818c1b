"""A real session's end reaches the desktop: exactly one notification, critical when it
failed, none for a dry run (private dbus-daemon + dbusmock's notification server)."""

import time

import pytest

from test_notify import Bus  # noqa: F401
from test_session import Env, registry  # noqa: F401
from uplinktest import wait_for


@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    bus = Bus(tmpdir_short)
    bus.start_server()
    e = Env(tmpdir_short, fakekube, registry)
    e.daemon.env.update(bus.env())
    e.daemon.start()
    wait_for(lambda: '"state": "ready"' in e.daemon.client("status", "--json").stdout, what="sync")
    bus.clear()
    yield e, bus
    assert e.daemon.stop() == 0, e.daemon.logs()[-2000:]
    e.daemon.close()
    bus.close()


def settle(bus, n, seconds=0.5):
    wait_for(lambda: len(bus.notify_calls()) >= n, timeout=15, what=f"{n} Notify call(s)")
    time.sleep(seconds)
    return bus.notify_calls()


def test_agent_exit_sends_one_notification(env):
    e, bus = env
    sid = e.run("claude", "--detach", "--image", "example/agent:1", check=0).stdout.strip()
    e.fk.terminate_pod(f"agent-uplink-{sid}", "agent", container="main", exit_code=3, reason="Error")
    calls = settle(bus, 1)
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
    calls = settle(bus, 1)
    assert len(calls) == 1, calls
    assert calls[0]["urgency"] == 2
    assert "did not become ready" in calls[0]["body"]


def test_dry_run_notifies_nothing(env):
    e, bus = env
    e.run("claude", "--dry-run", "--image", "example/agent:1", check=0)
    time.sleep(1)
    assert bus.notify_calls() == []
