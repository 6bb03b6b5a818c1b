"""uplinkd killed (-9) and restarted: nothing it created may leak, and what runs keeps
running (docs/architecture.md, "The reaper's invariants")."""

import json
import signal
import subprocess
import time

import pytest

from uplinktest import Env, Registry, Rpc, obj, only_session, slow_builds, start_in_background, uplink_bin, wait_for


@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    e.daemon.start()
    wait_for(lambda: '"state": "ready"' in e.daemon.client("status", "--json").stdout, what="sync")
    yield e
    e.daemon.stop()
    e.daemon.close()


def restart(env, sig=signal.SIGKILL):
    env.daemon.stop(sig)
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")


def ours(env):
    return [n["metadata"]["name"] for n in env.fk.list("Namespace")
            if n["metadata"]["name"].startswith("agent-uplink-")]


@pytest.mark.parametrize("state", ["BUILDING", "STARTING"])
def test_daemon_killed_mid_start_fails_and_cleans_up(env, state):
    if state == "STARTING":
        env.fk.settings(ready_delay=60)
    else:
        slow_builds(env, 30)
    p = start_in_background(env)
    wait_for(lambda: (only_session(env) or {}).get("state") == state, timeout=30, what=state)
    sid = only_session(env)["id"]
    restart(env)
    p.communicate(timeout=10)  # the client saw its daemon die
    assert p.returncode != 0
    wait_for(lambda: env.session(sid)["state"] == "GONE", timeout=30, what="the caught start to end")
    assert env.session(sid)["reason"] == "uplinkd restarted while the session was starting"
    wait_for(lambda: not ours(env), timeout=30, what="its namespace to go")


def test_running_session_survives_a_daemon_restart(env):
    sid = env.run("claude", "--detach", "--registry", env.registry, check=0).stdout.strip()
    restart(env)
    assert env.session(sid)["state"] == "RUNNING"
    assert f"agent-uplink-{sid}" in ours(env)
    # its exit is still seen, by the new daemon
    env.fk.terminate_pod(f"agent-uplink-{sid}", "agent", container="main", exit_code=3, reason="Error")
    wait_for(lambda: env.session(sid)["state"] == "GONE", timeout=30, what="the exit")
    assert env.session(sid)["exit_code"] == 3
    wait_for(lambda: not ours(env), timeout=30, what="the namespace to go")


def test_exit_while_the_daemon_was_down_is_seen_at_restart(env):
    sid = env.run("claude", "--detach", "--registry", env.registry, check=0).stdout.strip()
    env.daemon.stop(signal.SIGKILL)
    env.fk.terminate_pod(f"agent-uplink-{sid}", "agent", container="main", exit_code=7, reason="Error")
    env.daemon.start()
    wait_for(lambda: env.session(sid)["state"] == "GONE", timeout=30, what="the exit")
    assert env.session(sid)["exit_code"] == 7


def test_orphan_without_record_is_reaped(env):
    sid = env.run("claude", "--detach", "--registry", env.registry, check=0).stdout.strip()
    env.daemon.stop(signal.SIGKILL)
    (env.tmp / "state" / "uplink" / "sessions" / f"{sid}.json").unlink()
    env.daemon.start()
    wait_for(lambda: not ours(env), timeout=30, what="the orphan to be reaped")
    assert "has no session record: deleting the orphan" in env.daemon.logs()


def test_foreign_namespaces_are_left_alone(env):
    # The Python tool's namespaces carry managed-by but not our owner label.
    env.fk.create("Namespace", None, {"metadata": {"name": "agent-uplink-f0f0f0f0f0f0",
                                                   "labels": {"managed-by": "agent-uplink"}}})
    other = {"managed-by": "agent-uplink", "uplink.dev/owner": "someoneelse00000"}
    env.fk.create("Namespace", None, {"metadata": {"name": "agent-uplink-e0e0e0e0e0e0", "labels": other}})
    restart(env)
    time.sleep(1)
    assert set(ours(env)) == {"agent-uplink-f0f0f0f0f0f0", "agent-uplink-e0e0e0e0e0e0"}


def test_teardown_outlasts_an_api_outage(env):
    sid = env.run("claude", "--detach", "--registry", env.registry, check=0).stdout.strip()
    env.fk.add_fault(status=500, count=None, method="DELETE", message="etcd unavailable")
    with Rpc(env.daemon.socket) as c:
        c.call("session.stop", {"id": sid})
    # retried (by the kube client, then by the session with a growing delay): a few suffice to
    # show it, without racing the backoff on a loaded machine
    wait_for(lambda: sum(1 for r in env.fk.requests() if r["method"] == "DELETE") >= 4, timeout=90,
             what="the deletes to be retried")
    assert f"agent-uplink-{sid}" in ours(env)
    env.fk.clear_faults()
    wait_for(lambda: not ours(env), timeout=90, what="the namespace to go once the API recovers")
    wait_for(lambda: env.session(sid)["state"] == "GONE", timeout=30, what="the watch to report it")


def test_resync_retries_what_failed(env):
    sid = env.run("claude", "--detach", "--registry", env.registry, check=0).stdout.strip()
    env.daemon.stop(signal.SIGKILL)
    (env.tmp / "state" / "uplink" / "sessions" / f"{sid}.json").unlink()
    # Every delete fails for now: the orphan survives the start-up reconciliation...
    env.fk.add_fault(status=500, count=None, method="DELETE", message="etcd unavailable")
    env.daemon.env["UPLINK_RESYNC_S"] = "2"
    env.daemon.start()
    wait_for(lambda: any(r["method"] == "DELETE" for r in env.fk.requests()), timeout=30,
             what="a delete attempt")
    time.sleep(1)
    assert f"agent-uplink-{sid}" in ours(env)
    # ...and the periodic resync removes it once the API server recovers.
    env.fk.clear_faults()
    wait_for(lambda: not ours(env), timeout=60, what="the resync to reap the orphan")


def test_list_all_shows_foreign_namespaces(env):
    env.fk.create("Namespace", None, {"metadata": {
        "name": "agent-uplink-abcabcabcabc", "labels": {"managed-by": "agent-uplink"},
        "annotations": {"uplink.dev/agent": "claude", "uplink.dev/cwd": "/home/other/x"}}})
    wait_for(lambda: "abcabcabcabc" in env.daemon.client("list", "--all").stdout, what="the cache")
    rows = json.loads(env.daemon.client("list", "--all", "--json").stdout)
    f = next(r for r in rows if r["id"] == "abcabcabcabc")
    assert f["foreign"] is True and f["state"] == "FOREIGN" and f["cwd"] == "/home/other/x"
    # live, so a plain list shows it too (0.4.1's list shows every session namespace)
    assert "abcabcabcabc" in env.daemon.client("list").stdout


N_SESSIONS = int(__import__("os").environ.get("UPLINK_TEST_SESSIONS", "100"))


def test_hundred_sessions_started_and_stopped_concurrently(env):
    # Pods honour a 30 s grace period in the fake, as in a real cluster: shorten it here.
    env.fk.settings(pod_delete_delay=0.2)
    e = dict(env.daemon.env)
    e.pop("UPLINK_DEBUG", None)
    procs = [subprocess.Popen([uplink_bin(), "run", "claude", "--detach", "--image", "example/agent:1"],
                              cwd=env.project, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(N_SESSIONS)]
    ids = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        ids.append(out.strip())
    assert len(set(ids)) == N_SESSIONS
    with Rpc(env.daemon.socket, timeout=60) as c:
        for sid in ids:
            c.call("session.stop", {"id": sid})
    wait_for(lambda: not ours(env), timeout=300, what="every namespace to go")
    with Rpc(env.daemon.socket, timeout=60) as c:
        wait_for(lambda: all(c.call("session.get", {"id": s})["state"] == "GONE" for s in ids),
                 timeout=120, what="every session to end")
    recs = [json.loads(p.read_text()) for p in (env.tmp / "state" / "uplink" / "sessions").glob("*.json")]
    wait_for(lambda: all(json.loads(p.read_text())["state"] == "GONE"
                         for p in (env.tmp / "state" / "uplink" / "sessions").glob("*.json")),
             timeout=60, what="every record to say GONE")
    assert len(recs) == N_SESSIONS


def test_sessions_are_known_as_soon_as_the_daemon_answers(env):
    ids = [env.run("claude", "--detach", "--registry", env.registry, check=0).stdout.strip() for _ in range(3)]
    env.daemon.stop(signal.SIGKILL)
    env.daemon.start()  # returns as soon as daemon.status answers
    with Rpc(env.daemon.socket) as c:
        # Not "no session": session.* calls wait for the records, which load off the loop.
        # (A record may still say STARTING if the daemon died before its RUNNING save landed.)
        for s in ids:
            assert c.call("session.get", {"id": s})["id"] == s
        assert len(c.call("session.list", {"all": True})["sessions"]) == 3
