"""pods/proxy: relayed to the address a test gives (no docker here), strict about the pod,
the caller's Authorization not passed on, the answer passed back as it came; and what the
real kubectl makes of it (`kubectl get --raw`).

Run: /usr/bin/python3 -m pytest tests/fakekube"""

import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fakekube import DELAY, Client, fk, ns  # noqa: E402,F401

KUBECTL = shutil.which("kubectl")


class Backend:
    """An HTTP server in the 'pod': answers 201 with what it received, or 418 on /teapot."""

    def __init__(self):
        seen = self.seen = []

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                rec = {"method": self.command, "path": self.path,
                       "headers": {k.lower(): v for k, v in self.headers.items()},
                       "body": body.decode()}
                seen.append(rec)
                data = json.dumps(rec).encode()
                self.send_response(418 if self.path.startswith("/teapot") else 201)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Backend", "yes")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def backend():
    b = Backend()
    yield b
    b.close()


def running_pod(fk, ns, name="web"):
    fk.create("Pod", ns, {"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "busybox", "ports": [{"name": "ctl", "containerPort": 8081}]}]}})
    fk.wait_for(lambda: (fk.get("Pod", ns, name).get("status") or {}).get("phase") == "Running",
                timeout=DELAY * 50)


def test_proxy_relays_every_verb_to_the_given_address(fk, ns, backend):
    running_pod(fk, ns)
    fk.set_proxy_address(ns, "web", 8081, "127.0.0.1:%d" % backend.port)
    c = Client(fk, cert=False, token=fk.token)
    for method, body in (("GET", None), ("PUT", {"a": 1}), ("POST", {"b": 2}), ("DELETE", None),
                         ("PATCH", {"c": 3})):
        for target in ("web:8081", "http:web:8081", "web:ctl"):
            status, doc, resp = c.request(method, "/api/v1/namespaces/%s/pods/%s/proxy/v1/x?y=1"
                                          % (ns, target), body,
                                          headers={"X-Uplink-Control-Token": "tok"})
            assert status == 201 and resp.getheader("X-Backend") == "yes", (method, target)
            assert doc["method"] == method and doc["path"] == "/v1/x?y=1"
            assert doc["body"] == (json.dumps(body) if body else "")
            # the caller's own credential stays with the API server; other headers go on
            assert "authorization" not in doc["headers"]
            assert doc["headers"]["x-uplink-control-token"] == "tok"
    # the pod's own error answers come back as they are, not as a Status
    status, doc, _ = c.request("GET", "/api/v1/namespaces/%s/pods/web:8081/proxy/teapot" % ns)
    assert status == 418 and doc["path"] == "/teapot"


def test_proxy_is_strict_about_the_pod_and_its_port(fk, ns, backend):
    c = Client(fk)
    status, doc, _ = c.request("GET", "/api/v1/namespaces/%s/pods/nope:8081/proxy/v1" % ns)
    assert status == 404 and doc["message"] == 'pods "nope" not found'
    fk.create("Pod", ns, {"metadata": {"name": "late", "annotations": {
        "fakekube/never-ready": "true"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    fk.set_proxy_address(ns, "late", 8081, "127.0.0.1:%d" % backend.port)
    status, doc, _ = c.request("GET", "/api/v1/namespaces/%s/pods/late:8081/proxy/v1" % ns)
    assert status == 503 and "is not running" in doc["message"]
    running_pod(fk, ns)
    # no address given for this port: nothing to reach, as a closed port would be
    status, doc, _ = c.request("GET", "/api/v1/namespaces/%s/pods/web:9999/proxy/v1" % ns)
    assert status == 503 and doc["reason"] == "ServiceUnavailable"
    assert "error trying to reach service" in doc["message"]
    fk.set_proxy_address(ns, "web", 8081, "127.0.0.1:1")  # refused
    status, doc, _ = c.request("GET", "/api/v1/namespaces/%s/pods/web:8081/proxy/v1" % ns)
    assert status == 503 and "error trying to reach service" in doc["message"]
    status, doc, _ = c.request("GET", "/api/v1/namespaces/%s/pods/web:nosuch/proxy/v1" % ns)
    assert status == 503 and 'no port named "nosuch"' in doc["message"]
    status, doc, _ = c.request("GET", "/api/v1/namespaces/%s/pods/ftp:web:8081/proxy/v1" % ns)
    assert status == 400
    # unauthenticated callers never reach the pod
    status, doc, _ = Client(fk, cert=False).request(
        "GET", "/api/v1/namespaces/%s/pods/web:8081/proxy/v1" % ns)
    assert status == 401


def test_proxy_address_through_the_control_endpoint(fk, ns, backend):
    running_pod(fk, ns)
    c = Client(fk)
    status, _, _ = c.request("POST", "/fakekube/pods/%s/web/proxy-address" % ns,
                             {"port": 8081, "address": "127.0.0.1:%d" % backend.port})
    assert status == 200
    status, doc, _ = c.request("PUT", "/api/v1/namespaces/%s/pods/web:8081/proxy/v1/rules" % ns,
                               {"version": 1})
    assert status == 201 and doc["path"] == "/v1/rules"


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_get_raw_through_the_pod_proxy(fk, ns, backend):
    running_pod(fk, ns)
    fk.set_proxy_address(ns, "web", 8081, "127.0.0.1:%d" % backend.port)
    r = subprocess.run([KUBECTL, "--kubeconfig", fk.kubeconfig, "get", "--raw",
                        "/api/v1/namespaces/%s/pods/web:8081/proxy/v1/status" % ns],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == "/v1/status"
