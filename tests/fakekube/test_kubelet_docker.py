"""fakekube's docker kubelet against a real dockerd (tests/e2e/localcluster.py starts one, and
tests/images its images): pods run, report, mount, update and go as on a kubelet. Skipped
where docker or debootstrap are missing."""

import base64
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))

from fakekube import FakeKube  # noqa: E402
from fakekube_kinds import BY_KIND  # noqa: E402
from localcluster import ROOT, STATE, Dockerd, _docker_env, unavailable  # noqa: E402

IMAGE = "uplink-test/bookworm:minbase"


@pytest.fixture(scope="module")
def dockerd():
    why = unavailable()
    if why:
        pytest.skip("no dockerd: " + why)
    d = Dockerd(STATE).start()
    subprocess.run([str(ROOT / "tests" / "images" / "build.sh")], check=True,
                   env=_docker_env(d.host), timeout=1800)
    yield d
    d.stop()


@pytest.fixture
def fk(dockerd, tmp_path):
    k = FakeKube(str(tmp_path / "fk"), ready_delay=0, terminate_delay=0.2,
                 kubelet=dict(docker_host=dockerd.host)).start()
    k.create("Namespace", None, {"metadata": {"name": "t"}})
    yield k
    k.stop()
    assert not docker(dockerd, "ps", "-aq", "--filter", "label=" + k.store.life.label)


def docker(d, *args):
    return subprocess.run(["docker", *args], env=_docker_env(d.host), capture_output=True,
                          text=True).stdout.split()


def pod(name, script, **spec):
    c = {"name": "c", "image": IMAGE, "command": ["sh", "-c", script]}
    c.update(spec.pop("container", {}))
    return {"metadata": {"name": name, "labels": {"app": name}},
            "spec": dict({"restartPolicy": "Never", "containers": [c]}, **spec)}


def phase(fk, name, *want):
    return fk.wait_for(lambda: (fk.get("Pod", "t", name) or {}).get("status", {}).get("phase")
                       in want and fk.get("Pod", "t", name), timeout=120)


def test_exit_code_env_and_log(fk):
    fk.create("Secret", "t", {"metadata": {"name": "s"},
                              "data": {"k": base64.b64encode(b"sekrit").decode()}})
    fk.create("Pod", "t", pod("p", "echo $A $B $POD; exit 3", container={"env": [
        {"name": "A", "value": "plain"},
        {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}))
    p = phase(fk, "p", "Failed")
    term = p["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 3 and term["reason"] == "Error"
    assert term["containerID"].startswith("docker://")
    fk.wait_for(lambda: "plain sekrit p\n" in fk.logs.get(("t", "p", "c"), []), timeout=30)


def test_missing_image_backs_off(fk):
    fk.create("Pod", "t", pod("bad", "true", container={"image": "localhost:5999/none:1"}))
    fk.wait_for(lambda: "ImagePullBackOff" in str(fk.get("Pod", "t", "bad")["status"]),
                timeout=120)
    reasons = {e["reason"] for e in fk.list("Event", "t")}
    assert {"Failed", "BackOff"} <= reasons


def test_configmap_volume_is_updated_in_place(fk):
    fk.create("ConfigMap", "t", {"metadata": {"name": "cm"}, "data": {"f": "one"}})
    fk.create("Pod", "t", pod("v", "ls -a /cm; while [ \"$(cat /cm/g)\" != two ]; do sleep 0.2; "
                                   "done; echo updated", container={
                                       "volumeMounts": [{"name": "cm", "mountPath": "/cm"}]},
                              volumes=[{"name": "cm", "configMap": {
                                  "name": "cm", "items": [{"key": "f", "path": "g"}]}}]))
    fk.wait_for(lambda: any("..data" in ln for ln in fk.logs.get(("t", "v", "c"), [])),
                timeout=120)
    cm = fk.get("ConfigMap", "t", "cm")
    cm["data"]["f"] = "two"
    fk.store.update(BY_KIND["ConfigMap"], "t", "cm", cm)
    p = phase(fk, "v", "Succeeded")
    assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_graceful_delete_and_namespace_removal(fk, dockerd):
    fk.create("Pod", "t", pod("long", "trap 'exit 0' TERM; while :; do sleep 0.2; done",
                              terminationGracePeriodSeconds=5))
    phase(fk, "long", "Running")
    fk.store.delete(BY_KIND["Pod"], "t", "long")
    fk.wait_for(lambda: fk.get("Pod", "t", "long") is None, timeout=60)
    fk.create("Pod", "t", pod("other", "sleep 600"))
    phase(fk, "other", "Running")
    assert docker(dockerd, "network", "ls", "-q", "--filter", "label=" + fk.store.life.label)
    fk.store.delete(BY_KIND["Namespace"], None, "t")
    fk.wait_for(lambda: not docker(dockerd, "ps", "-aq", "--filter",
                                   "label=" + fk.store.life.label), timeout=60)
    fk.wait_for(lambda: not docker(dockerd, "network", "ls", "-q", "--filter",
                                   "label=" + fk.store.life.label), timeout=60)


def test_namespaces_after_a_deleted_one_get_their_own_network(fk):
    """A namespace made after another was deleted must not get a live one's subnet."""
    for ns in ("a", "b"):
        fk.create("Namespace", None, {"metadata": {"name": ns}})
        fk.create("Pod", ns, dict(pod("p", "sleep 600"), metadata={"name": "p"}))
        fk.wait_for(lambda: fk.get("Pod", ns, "p")["status"].get("phase") == "Running",
                    timeout=120)
    fk.store.delete(BY_KIND["Namespace"], None, "a")
    fk.wait_for(lambda: fk.get("Namespace", None, "a") is None, timeout=60)
    fk.wait_for(lambda: "a" not in fk.store.life.nets, timeout=60)
    fk.create("Namespace", None, {"metadata": {"name": "c"}})
    fk.create("Pod", "c", dict(pod("p", "sleep 600"), metadata={"name": "p"}))
    for ns in ("b", "c"):
        fk.wait_for(lambda: (fk.get("Pod", ns, "p")["status"].get("phase") == "Running"),
                    timeout=120)


def test_ingress_policies_are_enforced(fk):
    """A pod selected for Ingress admits its policy's peers on its ports, and the node
    always; the same pod's other port, and other pods, get nothing."""
    fk.create("NetworkPolicy", "t", {"metadata": {"name": "srv"}, "spec": {
        "podSelector": {"matchLabels": {"app": "srv"}}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}],
                     "ports": [{"protocol": "TCP", "port": 8080}]}]}})
    fk.create("Pod", "t", pod("srv", "python3 -m http.server 8080 & exec python3 -m http.server "
                                     "8081", container={"image": "uplink-test/mitmproxy:8",
                                                        "readinessProbe": {"tcpSocket": {
                                                            "port": 8081}}}))
    ip = fk.wait_for(lambda: (fk.get("Pod", "t", "srv").get("status") or {}).get("podIP")
                     if (fk.get("Pod", "t", "srv").get("status") or {}).get("conditions") and
                     all(c.get("ready") for c in fk.get("Pod", "t", "srv")["status"].get(
                         "containerStatuses") or [{}]) else None, timeout=120)
    probe = ("while :; do for p in 8080 8081; do if timeout 2 bash -c \"echo > /dev/tcp/%s/$p\" "
             "2>/dev/null; then echo \"$p open\"; else echo \"$p shut\"; fi; done; sleep 0.5; "
             "done" % ip)
    for name in ("cli", "other"):
        fk.create("Pod", "t", pod(name, probe, container={"command": ["bash", "-c", probe]}))

    def seen(name, line):
        return any(ln.strip() == line for ln in fk.logs.get(("t", name, "c"), []))
    fk.wait_for(lambda: seen("cli", "8080 open") and seen("cli", "8081 shut")
                and seen("other", "8080 shut") and seen("other", "8081 shut"), timeout=120)
    assert not seen("cli", "8081 open") and not seen("other", "8080 open")
    # the node (fakekube itself: the kubelet's probes, the API server's pods/proxy) gets in
    import socket
    for port in (8080, 8081):
        socket.create_connection((ip, port), timeout=5).close()


def test_host_path_types_are_checked_as_on_a_node(fk, tmp_path):
    """File and Directory must exist (FailedMount until they do), *OrCreate make them, and
    host_map puts a node path elsewhere; a File is mounted as that file, not a folder."""
    kl = fk.store.life
    node = Path(kl.host_dir)
    (node / "etc").mkdir(parents=True)
    (node / "etc" / "f.json").write_text("{}")
    kl.host_map["/var/data"] = str(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()

    def hp(name, path, typ, mount):
        return ({"name": name, "hostPath": {"path": path, "type": typ}},
                {"name": name, "mountPath": mount})
    vols = [hp("f", "/etc/f.json", "File", "/f.json"), hp("d", "/var/data/x", "DirectoryOrCreate",
                                                          "/d"),
            hp("n", "/etc/new", "FileOrCreate", "/new")]
    fk.create("Pod", "t", pod("ok", "cat /f.json; test -d /d && test -f /new && echo fine",
                              container={"volumeMounts": [m for _, m in vols]},
                              volumes=[v for v, _ in vols]))
    p = phase(fk, "ok", "Succeeded", "Failed")
    assert p["status"]["phase"] == "Succeeded", fk.logs.get(("t", "ok", "c"))
    assert "".join(fk.logs[("t", "ok", "c")]) == "{}fine\n"
    assert (tmp_path / "elsewhere" / "x").is_dir() and not (node / "var").exists()
    v, m = hp("gone", "/etc/missing.json", "File", "/m.json")
    fk.create("Pod", "t", pod("bad", "true", container={"volumeMounts": [m]}, volumes=[v]))
    fk.wait_for(lambda: any("hostPath type check failed: /etc/missing.json is not a file"
                            in e["message"] for e in fk.list("Event", "t")), timeout=60)
    assert fk.get("Pod", "t", "bad")["status"].get("phase") == "Pending"
    assert not (node / "etc" / "missing.json").exists()


def test_memory_empty_dir_is_one_tmpfs_for_the_pod(fk, dockerd):
    """A Memory emptyDir is shared by the pod's containers (the ssh-agent relay's socket):
    what one writes, the other reads; it goes with the pod."""
    shared = {"volumeMounts": [{"name": "m", "mountPath": "/m"}]}
    p = pod("mem", "echo hi > /m/f; sleep 600", container=shared,
            volumes=[{"name": "m", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}])
    p["spec"]["containers"].append(dict(
        {"name": "r", "image": IMAGE, "command": ["sh", "-c", "while [ ! -f /m/f ]; do "
                                                  "sleep 0.2; done; grep tmpfs /proc/mounts | "
                                                  "grep -c ' /m '; cat /m/f"]}, **shared))
    fk.create("Pod", "t", p)
    fk.wait_for(lambda: "".join(fk.logs.get(("t", "mem", "r"), [])) == "1\nhi\n", timeout=120)
    fk.store.delete(BY_KIND["Pod"], "t", "mem")
    fk.wait_for(lambda: not docker(dockerd, "volume", "ls", "-q", "--filter",
                                   "label=" + fk.store.life.label), timeout=60)
