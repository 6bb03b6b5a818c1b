"""`uplink clean` against the fake API server: agent-uplink 0.4.1's selectors, prompt and
exit codes (exactly one selector, else exit 2; a [y/N] question unless -y, EOF is no),
foreign namespaces (no uplink.dev/owner label: the Python tool's or another user's) listed
and removed only on request, our own sessions stopped through the daemon, and --wait."""

import time

import pytest

from fakekube_kinds import BY_KIND
from uplinktest import Env, run_detached, wait_for

OLD = "agent-uplink-aaaaaaaaaaaa"   # foreign, two hours old
NEW = "agent-uplink-bbbbbbbbbbbb"   # foreign, just made
SYSTEM = "agent-uplink-system"
FOREIGN = {"managed-by": "agent-uplink"}


def make_foreign(fk, name, age_s=0):
    fk.create("Namespace", None, {"metadata": {"name": name, "labels": dict(FOREIGN)}})
    if age_s:
        st = fk.store
        with st.cond:
            obj = st.objects[st._key(BY_KIND["Namespace"], None, name)]
            obj["metadata"]["creationTimestamp"] = time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - age_s))


def namespaces(fk):
    return {n["metadata"]["name"] for n in fk.list("Namespace")
            if n["metadata"]["name"].startswith("agent-uplink-")}


@pytest.fixture
def cenv(tmpdir_short, fakekube, registry):  # noqa: F811
    """Foreign namespaces exist before the daemon starts, so its first list sees their ages."""
    make_foreign(fakekube, OLD, age_s=2 * 3600)
    make_foreign(fakekube, NEW)
    make_foreign(fakekube, SYSTEM)
    e = Env(tmpdir_short, fakekube, registry)
    yield from e.running()


def clean(env, *args, input=None):
    return env.daemon.client("clean", *args, input=input if input is not None else "")


NEEDS = "clean needs SESSION id(s), --all, or --older-than"
ONE = "clean takes exactly one of SESSION id(s), --all, or --older-than"

# args, stdin, exit code, messages on stderr, namespaces left (None: all of them)
CASES = [
    ([], None, 2, [NEEDS], None),
    (["-y"], None, 2, [NEEDS], None),
    (["--all", "aaaaaaaaaaaa"], None, 2, [ONE], None),
    (["--all", "--older-than", "1d"], None, 2, [ONE], None),
    (["--older-than", "2h", "aaaaaaaaaaaa", "-y"], None, 2, [ONE], None),
    (["--older-than", "1.5h"], None, 2, ["invalid duration '1.5h'; use forms like 30m, 2h, 1d"], None),
    (["--older-than", "-5m"], None, 2, ["invalid duration '-5m'; use forms like 30m, 2h, 1d"], None),
    (["--older-than", "10x"], None, 2, ["invalid duration '10x'"], None),
    (["--older-than", "1d", "-y"], None, 0, ["nothing to delete"], None),
    (["--older-than", "90s", "-y"], None, 0, ["will delete:", f"  {OLD} (age 2h", "foreign)",
                                             f"deleting {OLD}"], {NEW, SYSTEM}),
    (["--older-than", "1h", "--yes"], None, 0, [f"deleting {OLD}"], {NEW, SYSTEM}),
    (["aaaaaaaaaaaa", "-y"], None, 0, [f"deleting {OLD}"], {NEW, SYSTEM}),
    ([NEW, "-y"], None, 0, [f"deleting {NEW}"], {OLD, SYSTEM}),
    (["aaaaaaaaaaaa", NEW, "-y"], None, 0, [f"deleting {OLD}", f"deleting {NEW}"], {SYSTEM}),
    (["nosuchsession", "-y"], None, 0, ["no session matches 'nosuchsession'", "nothing to delete"], None),
    ([SYSTEM, "-y"], None, 0, [f"no session matches '{SYSTEM}'", "nothing to delete"], None),
    (["--all"], "n\n", 1, ["will delete:", "aborted"], None),
    (["--all"], "", 1, ["aborted"], None),                 # EOF is no
    (["--all"], "  maybe\n", 1, ["aborted"], None),
    (["--all"], " YES \n", 0, [f"deleting {OLD}", f"deleting {NEW}"], {SYSTEM}),
    (["--all"], "y\n", 0, [f"deleting {OLD}"], {SYSTEM}),
    (["--all", "-y"], None, 0, [f"deleting {NEW}"], {SYSTEM}),
]


@pytest.mark.parametrize("args,stdin,rc,messages,left", CASES,
                         ids=[" ".join(c[0]) + (f" <{c[1]!r}" if c[1] is not None else "") for c in CASES])
def test_clean_matrix(cenv, args, stdin, rc, messages, left):
    before = namespaces(cenv.fk)
    assert before == {OLD, NEW, SYSTEM}
    r = clean(cenv, *args, input=stdin)
    assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    for m in messages:
        assert m in r.stderr, (m, r.stderr)
    if stdin is not None and rc != 2 and "will delete:" in r.stderr:
        assert "delete 2 namespace(s)? [y/N] " in r.stdout
    if "-y" in args or "--yes" in args:
        assert "[y/N]" not in r.stdout
    if left is None:
        time.sleep(0.3)  # past the fake's terminate delay: nothing may have started to go
        assert namespaces(cenv.fk) == before
        assert not [n for n in cenv.fk.list("Namespace") if n["metadata"]["name"] in before
                    and n.get("status", {}).get("phase") == "Terminating"]
    else:
        wait_for(lambda: namespaces(cenv.fk) == left, timeout=10, what=f"namespaces {left}")
    assert SYSTEM in namespaces(cenv.fk)


def test_foreign_namespaces_survive_the_reaper(cenv):
    # A few resyncs and watch events later, the daemon has not touched them on its own.
    cenv.fk.create("Namespace", None, {"metadata": {"name": "agent-uplink-cccccccccccc",
                                                    "labels": dict(FOREIGN)}})
    time.sleep(1.5)
    assert namespaces(cenv.fk) == {OLD, NEW, SYSTEM, "agent-uplink-cccccccccccc"}
    # and `clean ID` is what removes one
    r = clean(cenv, "cccccccccccc", "-y", "--wait")
    assert r.returncode == 0, r.stderr
    assert "agent-uplink-cccccccccccc" not in namespaces(cenv.fk)
    assert {OLD, NEW} <= namespaces(cenv.fk)


def test_wait_returns_once_the_namespaces_are_gone(cenv):
    cenv.fk.settings(terminate_delay=1.0)
    t = time.monotonic()
    r = clean(cenv, "--all", "-y", "--wait")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t >= 0.8
    assert namespaces(cenv.fk) == {SYSTEM}  # at once: no wait_for


def test_dry_run_and_params_over_rpc(cenv):
    with cenv.daemon.rpc() as c:
        res = c.call("session.clean", {"all": True, "dry_run": True})
        assert sorted(t["namespace"] for t in res["targets"]) == [OLD, NEW]
        assert [t["namespace"] for t in res["targets"]][0] == OLD  # oldest first
        assert all(t["foreign"] for t in res["targets"])
        msg = c.call_raw("session.clean", {"all": True, "older_than": "1d"})
        assert msg["error"]["data"]["name"] == "INVALID_PARAMS" and ONE in msg["error"]["message"]
        msg = c.call_raw("session.clean", {"older_than": "1.5h"})
        assert "invalid duration '1.5h'" in msg["error"]["message"]
        msg = c.call_raw("session.clean", {})
        assert NEEDS in msg["error"]["message"]
    assert namespaces(cenv.fk) == {OLD, NEW, SYSTEM}


def test_own_session_is_stopped_through_the_daemon(cenv):
    sid, _ = run_detached(cenv)
    ns = f"agent-uplink-{sid}"
    with cenv.daemon.rpc() as c:
        res = c.call("session.clean", {"all": True, "dry_run": True})
    ours = [t for t in res["targets"] if t["namespace"] == ns]
    assert ours and ours[0]["foreign"] is False and ours[0]["state"] == "RUNNING"
    r = clean(cenv, sid, "-y", "--wait")
    assert r.returncode == 0, r.stderr
    assert f"deleting {ns}" in r.stderr and "foreign" not in r.stderr
    assert ns not in namespaces(cenv.fk)
    s = cenv.session(sid)
    assert s["state"] == "GONE" and "removed by uplink clean" in s.get("reason", ""), s
    # foreign ones were not part of it
    assert {OLD, NEW} <= namespaces(cenv.fk)
    # and a session that has ended is nothing to delete
    r = clean(cenv, sid, "-y")
    assert r.returncode == 0 and "nothing to delete" in r.stderr
