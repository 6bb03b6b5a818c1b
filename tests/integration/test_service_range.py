"""The deploy cluster's Service range reaches the mitm (issue 13 item 4): uplinkd reads the
ServiceCIDR objects, or without that API the kubernetes Service's cluster IP, once per
cluster, and renders `--set uplink_refuse_cidrs=...` into the mitm container's args. The real
daemon and client against the fake API server, seen through `uplink run --dry-run` (which
only reads the cluster), as a user types it."""

import pytest

from test_dry_run import dry
from uplinktest import Env

SERVICECIDRS = "/apis/networking.k8s.io/v1/servicecidrs"
KUBERNETES_SVC = "/api/v1/namespaces/default/services/kubernetes"


def mitm_args(items):
    pod = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "mitm")
    return next(c for c in pod["spec"]["containers"] if c["name"] == "mitm")["args"]


def refuse_option(items):
    """The value of --set uplink_refuse_cidrs=..., or None; it is never given twice."""
    args = mitm_args(items)
    found = [args[i + 1] for i in range(len(args) - 1)
             if args[i] == "--set" and args[i + 1].startswith("uplink_refuse_cidrs=")]
    assert len(found) <= 1, args
    return found[0].split("=", 1)[1] if found else None


def gets(env, path):
    return [q for q in env.fk.requests() if q["method"] == "GET" and q["path"] == path]


def env_of(tmpdir_short, tmp_path, registry, **fk_args):  # noqa: F811
    from fakekube import FakeKube
    fk = FakeKube(str(tmp_path / "fakekube"), ready_delay=0.2, terminate_delay=0.2,
                  bookmark_interval=0.5, **fk_args)
    fk.start()
    try:
        yield from Env(tmpdir_short, fk, registry).running()
    finally:
        fk.stop()


@pytest.fixture
def env(tmpdir_short, tmp_path, registry):  # noqa: F811
    yield from env_of(tmpdir_short, tmp_path, registry)


@pytest.fixture
def old_env(tmpdir_short, tmp_path, registry):  # noqa: F811
    """A cluster without the ServiceCIDR API (before 1.33), dual-stack like kind's."""
    yield from env_of(tmpdir_short, tmp_path, registry, service_cidr_api=False,
                      service_cidrs=("10.96.0.0/12", "fd00:10:96::/112"))


def test_the_servicecidrs_become_the_mitms_refused_range(env):
    items, lines, r = dry(env)
    assert refuse_option(items) == "10.43.0.0/16", mitm_args(items)
    assert any(line == "service range 10.43.0.0/16 from its ServiceCIDR objects (v1): the mitm "
               "refuses it unless a rule names the IP"
               for line in lines), r.stderr
    assert len(gets(env, SERVICECIDRS)) == 1
    assert "service range 10.43.0.0/16" in env.daemon.logs()
    # read once per cluster: the next session takes it from the cache
    items, _, _ = dry(env)
    assert refuse_option(items) == "10.43.0.0/16"
    assert gets(env, SERVICECIDRS) == []


def test_without_the_api_the_kubernetes_service_tells_the_range(old_env):
    items, lines, r = dry(old_env)
    # 10.96.0.1 lies in 10/8: its /16 (inside the real /12); fd00:10:96::1 in fc00::/7: /112
    assert refuse_option(items) == "10.96.0.0/16,fd00:10:96::/112", mitm_args(items)
    assert len(gets(old_env, SERVICECIDRS)) == 1  # 404
    assert len(gets(old_env, KUBERNETES_SVC)) == 1
    assert "the range's size guessed" in old_env.daemon.logs()
    assert any("range's size guessed" in line for line in lines), r.stderr


def test_a_failed_read_logs_once_and_the_next_session_reads_again(env):
    # 403 from every source: not retried, so the dry run is not held up
    env.fk.add_fault(status=403, count=None, path_regex="servicecidrs|services/kubernetes")
    for _ in range(2):
        items, lines, r = dry(env)
        assert refuse_option(items) is None, mitm_args(items)
        assert "service range: not known (see uplinkd's log); the mitm would not refuse it" \
            in lines, r.stderr
    assert env.daemon.logs().count("Cannot tell the service range") == 1
    env.fk.clear_faults()
    items, _, _ = dry(env)
    assert refuse_option(items) == "10.43.0.0/16"


def test_a_slow_answer_holds_the_start_back_a_bounded_time(env):
    """The read runs next to the preparation; rendering waits for it 5 s at most
    (UP_CLUSTER_RANGES_WAIT_MS), then goes on without the option and says so once."""
    env.fk.add_fault(delay=20.0, count=1, path_regex="servicecidrs")
    items, lines, r = dry(env)
    assert refuse_option(items) is None, mitm_args(items)
    assert "service range: not known (see uplinkd's log); the mitm would not refuse it" \
        in lines, r.stderr
    assert "has not told its service range in time" in env.daemon.logs()
