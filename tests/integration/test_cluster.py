"""The daemon's view of the deploy cluster (watch caches in daemon.status) and
`uplink doctor`, against the fake API server."""

import json
import signal
import subprocess
import threading

import pytest

from uplinktest import Daemon, Rpc, uplink_bin, wait_for


@pytest.fixture
def kdaemon(tmpdir_short, fakekube):
    d = Daemon(tmpdir_short, env={"KUBECONFIG": fakekube.kubeconfig}).start()
    yield d
    rc = d.stop()
    d.close()
    assert rc == 0, d.logs()


def cluster(d):
    with d.rpc() as c:
        return c.call("daemon.status").get("cluster")


def managed_ns(fakekube, name):
    fakekube.create("Namespace", None, {"metadata": {"name": name, "labels": {"managed-by": "agent-uplink"}}})


def test_status_answers_from_the_watch_caches(kdaemon, fakekube):
    wait_for(lambda: cluster(kdaemon)["state"] == "ready", what="the cluster to sync")
    managed_ns(fakekube, "agent-uplink-aaaaaaaaaaaa")
    managed_ns(fakekube, "agent-uplink-bbbbbbbbbbbb")
    fakekube.create("Namespace", None, {"metadata": {"name": "unrelated"}})
    fakekube.create("Pod", "agent-uplink-aaaaaaaaaaaa", {
        "metadata": {"name": "agent", "labels": {"managed-by": "agent-uplink"}},
        "spec": {"containers": [{"name": "agent", "image": "busybox"}]}})
    wait_for(lambda: cluster(kdaemon).get("pods") == 1 and cluster(kdaemon).get("namespaces") == 2,
             what="the caches to catch up")
    before = len(fakekube.requests())
    for _ in range(5):
        s = cluster(kdaemon)
    assert len(fakekube.requests()) == before, "status must not cost a round trip"
    assert s["context"] == "local-k8s-admin" and s["server"] == fakekube.url
    r = kdaemon.client("status")
    assert f"cluster:   ready, context local-k8s-admin at {fakekube.url}, 2 namespaces and 1 pods watched" in r.stdout


def test_cluster_failing_then_recovering(kdaemon, fakekube):
    wait_for(lambda: cluster(kdaemon)["state"] == "ready", what="the cluster to sync")
    fakekube.add_fault(status=503, count=None, path_regex="^/api/v1/(namespaces|pods)", message="apiserver is down")
    fakekube.cut_watches()
    wait_for(lambda: cluster(kdaemon)["state"] == "failing", timeout=30, what="the failure to show")
    assert "apiserver is down" in cluster(kdaemon)["error"]
    r = kdaemon.client("status")
    assert "see: uplink doctor" in r.stdout
    fakekube.clear_faults()
    wait_for(lambda: cluster(kdaemon)["state"] == "ready", timeout=60, what="the recovery")
    assert "The deploy cluster answers again" in kdaemon.logs()


def test_no_kubeconfig_leaves_the_daemon_serving(tmpdir_short):
    d = Daemon(tmpdir_short, env={"KUBECONFIG": "/nonexistent/kubeconfig"}).start()
    try:
        wait_for(lambda: cluster(d)["state"] == "unavailable", what="the cluster to be unavailable")
        assert "no kubeconfig found at /nonexistent/kubeconfig" in cluster(d)["error"]
        assert d.client("status").returncode == 0
    finally:
        assert d.stop() == 0
        d.close()


def test_deploy_context_from_the_environment(tmpdir_short, fakekube):
    d = Daemon(tmpdir_short, env={"KUBECONFIG": fakekube.kubeconfig,
                                  "UPLINK_DEPLOY_CONTEXT": "fake-token"}).start()
    try:
        wait_for(lambda: cluster(d)["state"] == "ready", what="the cluster to sync")
        assert cluster(d)["context"] == "fake-token"
        assert any(r["auth"].startswith("token") for r in fakekube.requests())
    finally:
        assert d.stop() == 0
        d.close()


def doctor(d, *args):
    r = d.client("doctor", "--json", *args)
    return r.returncode, json.loads(r.stdout) if r.stdout else None, r.stderr


def statuses(result):
    return {c["name"]: c["status"] for c in result["checks"]}


def check(result, name):
    return next(c for c in result["checks"] if c["name"] == name)


# The Kubernetes checks; the machine's own checks follow them (test_doctor_full.py).
KUBE_CHECKS = ("kubeconfig", "deploy context", "API server", "credentials", "runtime class")


def kube_statuses(result):
    return {k: v for k, v in statuses(result).items() if k in KUBE_CHECKS}


def test_doctor_all_ok(kdaemon):
    rc, res, err = doctor(kdaemon)
    # The machine's checks may fail here (no docker daemon on this machine, say).
    local_fail = any(c["status"] == "fail" for c in res["checks"][len(KUBE_CHECKS):])
    assert rc == (1 if local_fail else 0), err
    assert res["ok"] is not local_fail
    assert kube_statuses(res) == {"kubeconfig": "ok", "deploy context": "ok", "API server": "ok",
                                  "credentials": "ok", "runtime class": "ok"}
    assert "Kubernetes v1.32" in check(res, "API server")["detail"]
    human = kdaemon.client("doctor")
    assert human.returncode == rc
    assert "[ ok ] runtime class   RuntimeClass kata-clh exists" in human.stdout


def test_doctor_unknown_context(kdaemon, fakekube):
    rc, res, _ = doctor(kdaemon, "--deploy-context", "nope")
    assert rc == 1 and res["ok"] is False
    c = check(res, "deploy context")
    assert c["status"] == "fail"
    assert c["detail"] == (f"kubeconfig {fakekube.kubeconfig} has no context 'nope'; known contexts: "
                           "local-k8s-admin, fake-token, fake-anon")
    assert c["fix"].startswith("pass --deploy-context NAME")
    assert statuses(res)["API server"] == "skip"


def test_doctor_no_kubeconfig(kdaemon):
    rc, res, _ = doctor(kdaemon, "--kubeconfig", "/nonexistent")
    assert rc == 1
    c = check(res, "kubeconfig")
    assert c["status"] == "fail" and "k3s.yaml" in c["fix"]
    assert [x["status"] for x in res["checks"][1:5]] == ["skip"] * 4


def test_doctor_credentials_refused(kdaemon):
    rc, res, _ = doctor(kdaemon, "--deploy-context", "fake-anon")
    assert rc == 1
    c = check(res, "credentials")
    assert c["status"] == "fail"
    assert "401 Unauthorized" in c["detail"]
    assert c["fix"].startswith("renew the credentials")


def test_doctor_missing_runtime_class(kdaemon):
    rc, res, _ = doctor(kdaemon, "--agent-runtime-class", "gvisor")
    assert rc == 1
    c = check(res, "runtime class")
    assert c["status"] == "fail"
    assert c["detail"] == "RuntimeClass gvisor does not exist: agents would run without a microVM"
    assert "kata-deploy" in c["fix"]


def test_doctor_unreachable_server(kdaemon, fakekube, tmp_path):
    cfg = tmp_path / "dead.yaml"
    cfg.write_text(open(fakekube.kubeconfig).read().replace(fakekube.url, "https://127.0.0.1:1"))
    rc, res, _ = doctor(kdaemon, "--kubeconfig", str(cfg))
    assert rc == 1
    c = check(res, "API server")
    assert c["status"] == "fail"
    assert "cannot reach the Kubernetes API at https://127.0.0.1:1" in c["detail"]
    assert "sudo systemctl status k3s" in c["fix"]


def test_daemon_answers_while_the_api_stalls(kdaemon, fakekube):
    wait_for(lambda: cluster(kdaemon)["state"] == "ready", what="the cluster to sync")
    stall_doctor(fakekube, 5.0)
    done = threading.Event()
    out = {}

    def slow():
        out["doctor"] = doctor(kdaemon)
        done.set()
    t = threading.Thread(target=slow)
    t.start()
    doctor_stalled(fakekube)
    # While doctor waits on the stalled API, other clients are answered at once.
    for _ in range(20):
        with Rpc(kdaemon.socket) as c:
            assert c.call("daemon.status")["pid"] == kdaemon.proc.pid
    assert not done.is_set(), "status answers came before the stalled doctor finished"
    t.join(60)
    fakekube.clear_faults()
    assert set(kube_statuses(out["doctor"][1]).values()) == {"ok"}


def stall_doctor(fakekube, delay):
    """Every API request waits `delay` s; doctor's first one (GET /version) is told apart, so a
    test sees when it has reached the API server (the fake logs a request once answered)."""
    fakekube.add_fault(delay=delay, count=1, path_regex="^/version$")
    fakekube.add_fault(delay=delay, count=None)


def doctor_stalled(fakekube):
    wait_for(lambda: not [f for f in fakekube.faults() if f["path_regex"] == "^/version$"],
             what="doctor's GET /version to reach the API server")


def test_client_leaving_mid_doctor(kdaemon, fakekube):
    stall_doctor(fakekube, 3.0)
    p = subprocess.Popen([uplink_bin(), "doctor"], env={**kdaemon.env, "UPLINK_DEBUG": ""},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    doctor_stalled(fakekube)
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdout.close()
    p.stderr.close()
    fakekube.clear_faults()
    with Rpc(kdaemon.socket) as c:
        assert c.call("daemon.status")["pid"] == kdaemon.proc.pid


def test_doctor_registry_check(kdaemon, fakekube):
    rc, res, _ = doctor(kdaemon)
    c = check(res, "registry")
    assert c["status"] == "ok" and c["detail"].startswith("not deployed yet")
    fakekube.create("Namespace", None, {"metadata": {"name": "agent-uplink-system"}})
    fakekube.create("Deployment", "agent-uplink-system", {
        "metadata": {"name": "registry"},
        "spec": {"selector": {"matchLabels": {"app": "registry"}},
                 "template": {"metadata": {"labels": {"app": "registry"}},
                              "spec": {"containers": [{"name": "registry", "image": "registry:2"}]}}}})
    fakekube.wait_for(lambda: (fakekube.get("Deployment", "agent-uplink-system", "registry")
                               .get("status", {}).get("availableReplicas") or 0) >= 1)
    rc, res, _ = doctor(kdaemon)
    assert check(res, "registry") == {"name": "registry", "status": "ok", "fix": None,
                                      "detail": "agent-uplink-system's registry is available"}
