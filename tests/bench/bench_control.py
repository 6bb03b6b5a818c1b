#!/usr/bin/python3
"""How long a rules change takes to reach the agent's next request: through the control
channel vs through the Secret volume. Prints figures; asserts nothing.

1. The channel: PUT /v1/rules to a real mitmdump's control listener, directly and through
   fakekube's pods/proxy (the API server's hop, TLS and client certificate included), until
   the agent's next request on its kept-alive connection is allowed.
2. The Secret volume, in two parts: (a) the addon noticing a changed file (the pod's default
   uplink_reload_ms=1000, the file swapped in as the kubelet does, by renaming); (b) the
   kubelet rewriting the volume after the Secret changed: fakekube's docker kubelet here
   (its sync loop), measured when the local cluster can run (tests/e2e/localcluster.py; set
   UPLINK_E2E_DOCKER_DIR), else said why not. A real kubelet adds its sync period and cache
   delay instead: the Kubernetes docs give "kubelet sync period + cache propagation delay"
   for a mounted Secret to be updated, the sync period (--sync-frequency) being 1 minute by
   default, so up to about a minute plus the addon's second.

    /usr/bin/python3 tests/bench/bench_control.py [--rounds 20] [--no-docker]
"""

import argparse
import base64
import http.client
import json
import secrets
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration" / "addon"))
sys.path.insert(0, str(ROOT / "tests" / "fakekube"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from addon_support import (PKI, Echo, Proxy, _read_body, _read_head, free_port,  # noqa: E402
                           rules_doc, tls_client, tunnel, write_atomic)
from fakekube import FakeKube  # noqa: E402
from fakekube_kinds import BY_KIND  # noqa: E402

HOST = "bench.uplink.test"


def rules(path):
    return [{"name": "bench", "layer": "user", "hosts": [HOST.replace(".", "\\.")],
             "paths": [path]}]


class Agent:
    def __init__(self, p):
        _, _, _, sock = tunnel(p.port, HOST, 443)
        self.sock = tls_client(p.pki.mitm_ca, sock, HOST)

    def status(self, path):
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        status, headers, rest = _read_head(self.sock)
        _read_body(self.sock, headers, rest, "GET")
        return status


def until_allowed(agent, path, deadline_s=120):
    """Requests back to back until one to `path` is allowed; the time it took (s)."""
    t0 = time.monotonic()
    while agent.status(path) != 200:
        if time.monotonic() - t0 > deadline_s:
            raise RuntimeError(f"{path} never became allowed")
    return time.monotonic() - t0


def show(what, samples):
    ms = sorted(s * 1000 for s in samples)
    print(f"  {what:<62} median {statistics.median(ms):8.1f} ms   "
          f"min {ms[0]:7.1f}   max {ms[-1]:8.1f}   (n={len(ms)})")


class Direct:
    def __init__(self, port, token):
        self.port, self.token = port, token

    def put(self, doc):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("PUT", "/v1/rules", json.dumps(doc), {
            "Content-Type": "application/json", "X-Uplink-Control-Token": self.token})
        assert c.getresponse().status == 200
        c.close()


class ViaApiServer(Direct):
    """PUT through fakekube's pods/proxy, with its client certificate (a kept connection)."""

    def __init__(self, fk, ns, token):
        ctx = ssl.create_default_context(cafile=fk.paths["ca.crt"])
        ctx.load_cert_chain(fk.paths["client.crt"], fk.paths["client.key"])
        self.conn = http.client.HTTPSConnection("127.0.0.1", fk.port, context=ctx, timeout=30)
        self.path, self.token = f"/api/v1/namespaces/{ns}/pods/mitm:8081/proxy/v1/rules", token

    def put(self, doc):
        self.conn.request("PUT", self.path, json.dumps(doc), {
            "Content-Type": "application/json", "X-Uplink-Control-Token": self.token})
        r = self.conn.getresponse()
        r.read()
        assert r.status == 200, r.status


def bench_channel(p, agent, client, rounds, what):
    samples = []
    for i in range(rounds):
        path = f"/c{what[0]}{i}"
        t0 = time.monotonic()
        client.put(json.loads(rules_doc(rules(path))))
        samples.append(time.monotonic() - t0 + until_allowed(agent, path))
    show(f"channel ({what}): PUT to the agent's next request", samples)


def bench_file(p, agent, rounds):
    samples = []
    for i in range(rounds):
        path = f"/f{i}"
        time.sleep(0.37)  # land anywhere in the addon's poll interval
        t0 = time.monotonic()
        write_atomic(p.rules_path, rules_doc(rules(path)))
        until_allowed(agent, path)
        samples.append(time.monotonic() - t0)
    show("Secret (a): the addon reading a changed file (reload 1000 ms)", samples)


def bench_kubelet(tmp, rounds):
    from localcluster import STATE, Dockerd, unavailable
    why = unavailable()
    if why:
        print(f"  Secret (b): not measured here: {why}")
        return
    d = Dockerd(STATE).start()
    fk = FakeKube(str(tmp / "fk-docker"), ready_delay=0,
                  kubelet=dict(docker_host=d.host)).start()
    try:
        fk.create("Namespace", None, {"metadata": {"name": "b"}})
        fk.create("Secret", "b", {"metadata": {"name": "s"}, "data": {
            "v": base64.b64encode(b"0").decode()}})
        watch = ("last=; while :; do v=$(cat /s/v); if [ \"$v\" != \"$last\" ]; then "
                 "echo \"seen $v\"; last=$v; fi; sleep 0.005; done")
        fk.create("Pod", "b", {"metadata": {"name": "w"}, "spec": {"containers": [{
            "name": "c", "image": "uplink-test/bookworm:minbase", "command": ["bash", "-c", watch],
            "volumeMounts": [{"name": "s", "mountPath": "/s"}]}],
            "volumes": [{"name": "s", "secret": {"secretName": "s"}}]}})
        fk.wait_for(lambda: "seen 0\n" in fk.logs.get(("b", "w", "c"), []), timeout=300)
        samples = []
        for i in range(1, rounds + 1):
            time.sleep(0.29)
            s = fk.get("Secret", "b", "s")
            s["data"]["v"] = base64.b64encode(str(i).encode()).decode()
            t0 = time.monotonic()
            fk.store.update(BY_KIND["Secret"], "b", "s", s)
            fk.wait_for(lambda: f"seen {i}\n" in fk.logs.get(("b", "w", "c"), []), timeout=60)
            samples.append(time.monotonic() - t0)
        show("Secret (b): fakekube's docker kubelet rewriting the volume", samples)
    finally:
        fk.stop()
        d.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--no-docker", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-control-"))
    pki = PKI(tmp)
    echo = Echo(pki)
    token, port = secrets.token_hex(32), free_port()
    (tmp / "token").write_text(token)
    p = Proxy(tmp, pki, echo, "mitm", reload_ms=1000, sets=[
        f"ssl_verify_upstream_trusted_ca={pki.upstream_ca}",
        f"uplink_control_token={tmp / 'token'}", f"uplink_control_port={port}"])
    fk = FakeKube(str(tmp / "fk"), ready_delay=0.05).start()
    try:
        p.set_rules(rules("/start"))
        agent = Agent(p)
        until_allowed(agent, "/start")
        direct = Direct(port, token)
        deadline = time.monotonic() + 30
        while True:  # the listener's first answer: it starts just after the proxy port
            try:
                direct.put(json.loads(rules_doc(rules("/start"))))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        fk.create("Namespace", None, {"metadata": {"name": "bench"}})
        fk.create("Pod", "bench", {"metadata": {"name": "mitm"}, "spec": {
            "containers": [{"name": "mitm", "image": "mitm"}]}})
        fk.wait_for(lambda: (fk.get("Pod", "bench", "mitm").get("status") or {}).get(
            "phase") == "Running", timeout=30)
        fk.set_proxy_address("bench", "mitm", 8081, f"127.0.0.1:{port}")
        print(f"A rules change reaching the agent's next request ({args.rounds} rounds each):")
        bench_channel(p, agent, direct, args.rounds, "direct")
        bench_channel(p, agent, ViaApiServer(fk, "bench", token), args.rounds,
                      "via the API server's pods/proxy")
        bench_file(p, agent, args.rounds)
        if args.no_docker:
            print("  Secret (b): not measured (--no-docker)")
        else:
            bench_kubelet(tmp, args.rounds)
        print("  Secret (b) on a real kubelet: up to its sync period (--sync-frequency, 1 min "
              "by default) plus its cache's propagation delay (Kubernetes docs, \"Mounted "
              "Secrets are updated automatically\"; the TTL cache strategy's ttl is 1 min by "
              "default), then (a): up to a minute or two, against the channel's milliseconds")
    finally:
        fk.stop()
        p.stop()
        echo.close()


if __name__ == "__main__":
    main()
