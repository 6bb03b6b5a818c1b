"""--ttl, --idle-timeout, attached clients and `uplink extend`, with minutes made
seconds (UPLINK_DEBUG_TIME_DIVISOR=60) instead of sleeps of minutes."""

import json
import subprocess
import time

import pytest

from uplinktest import Env, Rpc, wait_for


@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    e.daemon.env.update({"UPLINK_DEBUG_TIME_DIVISOR": "60", "UPLINK_WARN_BEFORE_S": "1"})
    e.daemon.start()
    wait_for(lambda: '"state": "ready"' in e.daemon.client("status", "--json").stdout, what="sync")
    yield e
    assert e.daemon.stop() == 0, e.daemon.logs()[-2000:]
    e.daemon.close()


def start(env, *flags):
    return env.run("claude", "--detach", "--image", "example/agent:1", *flags, check=0).stdout.strip()


def test_ttl_warns_then_stops(env):
    sid = start(env, "--ttl", "3m", "--idle-timeout", "0s")  # 3 s here; idle off
    wait_for(lambda: env.session(sid)["state"] == "GONE", timeout=30, what="the TTL to stop it")
    s = env.session(sid)
    assert s["reason"] == "its time to live (--ttl) ran out"
    log = env.daemon.logs()
    assert f"Session {sid}: its time to live ends in" in log
    assert log.index("its time to live ends in") < log.index(f"Session {sid}: RUNNING -> STOPPED")
    wait_for(lambda: env.fk.get("Namespace", None, f"agent-uplink-{sid}") is None, timeout=30,
             what="the namespace to go")


def test_idle_limit_counts_only_detached_time(env):
    sid = start(env, "--idle-timeout", "2m", "--ttl", "24h")  # 2 s here
    with Rpc(env.daemon.socket) as holder:
        holder.send_raw(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.hold",
                                    "params": {"id": sid}}) + "\n")
        wait_for(lambda: env.session(sid)["attached"] == 1, what="the hold")
        time.sleep(3)  # longer than the idle limit: attached, so it lives
        assert env.session(sid)["state"] == "RUNNING"
    # the holder left: the idle clock runs from now
    wait_for(lambda: env.session(sid)["attached"] == 0, what="the release")
    wait_for(lambda: env.session(sid)["state"] == "GONE", timeout=30, what="the idle stop")
    assert env.session(sid)["reason"] == "no client was attached for its --idle-timeout"
    assert f"Session {sid}: its idle limit ends in" in env.daemon.logs()


def test_extend_pushes_the_deadline(env):
    sid = start(env, "--ttl", "3m", "--idle-timeout", "0s")
    before = env.session(sid)["expires_at"]
    r = env.daemon.client("extend", sid, "1h")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{sid}: now expires in ")
    assert env.session(sid)["expires_at"] >= before + 3600
    time.sleep(4)
    assert env.session(sid)["state"] == "RUNNING"


@pytest.mark.parametrize("args,message", [
    (["nope", "1h"], "no session 'nope'"),
    (["SID", "1.5h"], "invalid duration '1.5h'"),
    (["SID", "0s"], "the duration must be longer than 0s"),
])
def test_extend_refusals(env, args, message):
    sid = start(env, "--idle-timeout", "0s")
    r = env.daemon.client("extend", *[a.replace("SID", sid) for a in args])
    assert r.returncode == 1
    assert message in r.stderr


def test_list_shows_attached_and_expires(env):
    sid = start(env, "--ttl", "24h", "--idle-timeout", "0s")
    r = env.daemon.client("list")
    assert r.returncode == 0
    header, row = r.stdout.splitlines()[0], next(l for l in r.stdout.splitlines() if l.startswith(sid))
    assert header.split() == ["SESSION", "STATUS", "AGE", "NAMESPACE", "AGENT", "ATTACHED", "EXPIRES", "CWD"]
    cols = row.split()
    assert cols[1] == "RUNNING" and cols[3] == f"agent-uplink-{sid}" and cols[4] == "claude"
    assert cols[5] == "0" and cols[6][:3] in ("23m", "24m")  # 24h divided by 60


def test_stop_wait_returns_once_gone(env):
    sid = start(env, "--idle-timeout", "0s")
    r = env.daemon.client("stop", "--wait", sid)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{sid}: stopping\n{sid}: gone\n"
    assert env.session(sid)["state"] == "GONE"
    assert env.fk.get("Namespace", None, f"agent-uplink-{sid}") is None
    r = env.daemon.client("stop", sid)
    assert r.returncode == 1 and "has already ended" in r.stderr
