"""uplink list: the first list after a socket-activated start waits for the cluster's caches,
says so when the cluster does not answer, shows live foreign sessions, and prints '-' for
what a session lacks."""

import json
import subprocess

import pytest

from fakekube import BY_KIND
from uplinktest import Daemon, Env, RpcError, uplink_bin, wait_for

# The watch's first list of namespaces (not its watch stream).
NS_LIST = r"^/api/v1/namespaces\?(?!.*watch=)"
FOREIGN = {"managed-by": "agent-uplink"}


def foreign(fk, i, labels=None, annotations=None):
    name = f"agent-uplink-{i:012x}"
    meta = {"name": name, "labels": {**FOREIGN, **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    fk.create("Namespace", None, {"metadata": meta})
    return name


def activated(env):
    """The daemon as systemd starts it: on the first connection to its socket."""
    keep = {k: env.daemon.env[k] for k in ("HOME", "KUBECONFIG", "UPLINK_DATA_DIR", "XDG_STATE_HOME",
                                           "UPLINK_MACHINE_ID_FILE", "PATH")}
    # systemd-socket-activate hands uplinkd only the variables it names: env(1) adds ours.
    d = Daemon(env.tmp / "act", activated=True, env=keep,
               wrapper=["env"] + [f"{k}={v}" for k, v in keep.items()]).start(wait=False)
    # The activator says so once it listens (its socket file exists a moment before).
    wait_for(lambda: "Listening on" in d.logs(), what="systemd-socket-activate to listen")
    return d


@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    yield e
    e.daemon.close()


def test_first_list_after_socket_activation_waits_for_the_namespaces(env):
    names = {foreign(env.fk, i) for i in range(200)}
    env.fk.add_fault(delay=2.0, count=1, path_regex=NS_LIST)
    d = activated(env)
    try:
        r = d.client("list", "--all", "--json")
        assert r.returncode == 0, r.stderr
        rows = json.loads(r.stdout)
        assert {x["namespace"] for x in rows} >= names, (len(rows), d.logs()[-2000:])
        assert r.stderr == ""
    finally:
        rc = d.stop()
        d.close()
    assert rc == 0, d.logs()[-3000:]


def test_list_and_clean_say_when_the_cluster_does_not_answer(env):
    foreign(env.fk, 1)
    env.fk.add_fault(delay=15.0, count=None, path_regex=NS_LIST)
    d = activated(env)
    try:
        r = d.client("list")
        assert r.returncode == 0, r.stderr
        assert "uplink list: warning: the deploy cluster" in r.stderr
        assert "has not answered uplinkd's first list of its namespaces and pods within 5 s" in r.stderr
        assert "may lack other tools' (FOREIGN) ones" in r.stderr and "uplink status" in r.stderr
        assert r.stdout.startswith("SESSION")
        c = d.client("clean", "--all", "-y")
        assert c.returncode != 0
        assert "has not answered" in c.stderr and "nothing was deleted" in c.stderr, c.stderr
        assert env.fk.get("Namespace", None, "agent-uplink-000000000001")
        # A list still waiting when uplinkd stops is answered (or its connection closed).
        e = dict(d.env)
        p = subprocess.Popen([uplink_bin(), "list"], env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        wait_for(lambda: in_flight(d) > 1, what="the list to wait")
    finally:
        env.fk.clear_faults()
        rc = d.stop()
        d.close()
    assert rc == 0, d.logs()[-3000:]
    out, err = p.communicate(timeout=30)
    assert p.returncode != 0 and "uplinkd is shutting down" in err, (out, err)


def in_flight(d):
    """Requests uplinkd is answering, this daemon.status included."""
    with d.rpc() as c:
        c.call("daemon.hello", {"protocol": 1})
        return c.call("daemon.status")["connections"]["requests_in_flight"]


def test_plain_list_shows_live_foreign_sessions_with_dashes(env):
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")
    bare = foreign(env.fk, 0xa1)  # 0.4.1's: no owner label, no annotations
    other = foreign(env.fk, 0xa2, labels={"uplink.dev/owner": "someoneelse00000"},
                    annotations={"uplink.dev/agent": "claude", "uplink.dev/cwd": "/home/o/p"})
    env.fk.settings(terminate_delay=3600)
    ending = foreign(env.fk, 0xa3)
    env.fk.store.delete(BY_KIND["Namespace"], None, ending)
    wait_for(lambda: "0000000000a3" in env.daemon.client("list", "--all").stdout
             and "TERMINATING" in env.daemon.client("list", "--all").stdout, what="the cache")
    try:
        r = env.daemon.client("list")
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert "(null)" not in r.stdout
        rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[1:]}
        assert set(rows) == {"0000000000a1", "0000000000a2"}, r.stdout
        assert rows["0000000000a1"][1] == "FOREIGN" and rows["0000000000a2"][1] == "FOREIGN"
        # SESSION STATUS AGE NAMESPACE AGENT ATTACHED EXPIRES CWD
        assert rows["0000000000a1"][3:] == [bare, "-", "0", "-", "-"], r.stdout
        assert rows["0000000000a2"][3:] == [other, "claude", "0", "-", "/home/o/p"], r.stdout
        js = json.loads(env.daemon.client("list", "--json").stdout)
        assert sorted(x["id"] for x in js) == ["0000000000a1", "0000000000a2"]
        assert all(x["foreign"] is True and x["state"] == "FOREIGN" for x in js)
        full = env.daemon.client("list", "--all")
        assert "0000000000a3" in full.stdout and "(null)" not in full.stdout
        js = json.loads(env.daemon.client("list", "--all", "--json").stdout)
        assert {x["id"]: x["state"] for x in js}["0000000000a3"] == "TERMINATING"
    finally:
        rc = env.daemon.stop()
    assert rc == 0, env.daemon.logs()[-3000:]


def test_list_rows_are_the_objects_fields(env):
    """The table asks for its columns only (rows); they are the objects' fields, in order."""
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")
    foreign(env.fk, 0xb1, annotations={"uplink.dev/agent": "claude"})
    sid = env.run("claude", "--detach", "--image", "example/agent:1", check=0).stdout.strip()
    wait_for(lambda: "0000000000b1" in env.daemon.client("list").stdout, what="the cache")
    cols = ["id", "state", "created_at", "namespace", "agent", "attached", "expires_at", "cwd",
            "foreign"]
    try:
        with env.daemon.rpc() as c:
            c.call("daemon.hello", {"protocol": 1})
            objs = c.call("session.list", {"all": True})["sessions"]
            table = c.call("session.list", {"all": True, "columns": cols})
            assert table["columns"] == cols
            assert table["rows"] == [[o.get(k) for k in cols] for o in objs]
            assert {r[0] for r in table["rows"]} == {sid, "0000000000b1"}
            with pytest.raises(RpcError, match="no session has a field 'secret'"):
                c.call("session.list", {"columns": ["id", "secret"]})
    finally:
        env.daemon.client("stop", sid)
        rc = env.daemon.stop()
    assert rc == 0, env.daemon.logs()[-3000:]
