"""up_kube_raw (kube.c), which the control channel (daemon/control.c) speaks through, driven
by kube-probe against fakekube's pods/proxy: the pod's own answers come back as they are
(a 401 of the pod's is not the API server refusing our credentials, and is not retried),
the extra header reaches the pod and our Authorization does not, the API server's own
refusals and the deadline are errors."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from uplinktest import kube_probe


class Pod(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        if self.path == "/slow":
            time.sleep(3)
        status, doc = ((401, {"error": "unauthorized"}) if self.path == "/unauth" else
                       (200, {"path": self.path, "body": body,
                              "headers": {k.lower(): v for k, v in self.headers.items()}}))
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    do_GET = do_PUT = _answer


@pytest.fixture
def pod(fakekube):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Pod)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    fakekube.create("Namespace", None, {"metadata": {"name": "t"}})
    fakekube.create("Pod", "t", {"metadata": {"name": "mitm"}, "spec": {
        "containers": [{"name": "mitm", "image": "x"}]}})
    fakekube.wait_for(lambda: (fakekube.get("Pod", "t", "mitm").get("status") or {}).get(
        "phase") == "Running", timeout=30)
    fakekube.set_proxy_address("t", "mitm", 8081, "127.0.0.1:%d" % srv.server_address[1])
    yield fakekube
    srv.shutdown()
    srv.server_close()


PATH = "/api/v1/namespaces/t/pods/mitm:8081/proxy"


def raw(fk, *args, context=None):
    rc, lines, err = kube_probe(fk.kubeconfig, "raw", *args, context=context)
    assert len(lines) == 1, (rc, lines, err)
    return rc, lines[0]


def test_the_pods_answers_come_back_as_they_are(pod):
    rc, r = raw(pod, "PUT", PATH + "/v1/rules", 5000, '{"version": 1}',
                "X-Uplink-Control-Token", "tok-123", context="fake-token")
    assert rc == 0 and r["ok"] and r["status"] == 200, r
    seen = json.loads(r["body"])
    assert seen["path"] == "/v1/rules" and seen["body"] == '{"version": 1}'
    assert seen["headers"]["x-uplink-control-token"] == "tok-123"
    assert seen["headers"]["content-type"] == "application/json"
    assert "authorization" not in seen["headers"]  # the API server keeps our credential
    pod.clear_requests()
    rc, r = raw(pod, "GET", PATH + "/unauth", 5000, context="fake-token")
    assert rc == 0 and r["ok"] and r["status"] == 401 and json.loads(r["body"]) == {
        "error": "unauthorized"}, r
    assert len([q for q in pod.requests() if q["path"].endswith("/unauth")]) == 1  # no retry
    # the API server's own answer (no such pod) is passed on too: the caller reads its kind
    rc, r = raw(pod, "GET", "/api/v1/namespaces/t/pods/nope:8081/proxy/x", 5000)
    assert r["ok"] and r["status"] == 404 and json.loads(r["body"])["kind"] == "Status", r


def test_refused_credentials_and_the_deadline_are_errors(pod):
    rc, r = raw(pod, "GET", PATH + "/v1/status", 5000, context="fake-anon")
    assert rc == 1 and not r["ok"] and r["error"]["code"] == 401, r
    assert r["error"]["reason"] == "Unauthorized"
    # the pod answers after 3 s: a 500 ms deadline ends the call first
    rc, r = raw(pod, "GET", PATH + "/slow", 500)
    assert rc == 1 and not r["ok"] and r["error"]["r"] == -110, r  # -ETIMEDOUT
