#!/usr/bin/python3
"""fakekube: a fake Kubernetes API server for uplink's tests.

Run:    /usr/bin/python3 tests/fakekube/fakekube.py --dir DIR [--port 0]
                 [--ready-delay S] [--terminate-delay S] [--bookmark-interval S]
Import: from fakekube import FakeKube
        fk = FakeKube(dir, ready_delay=0.2, terminate_delay=0.2); fk.start()
        ... fk.url, fk.kubeconfig ...; fk.stop()

See README.md in this directory for what it emulates.
"""

import argparse
import copy
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fakekube_errors as E  # noqa: E402
from fakekube_certs import TestPKI, write_kubeconfig  # noqa: E402
from fakekube_http import Handler, Server, make_ssl_context  # noqa: E402
from fakekube_kinds import BY_KIND  # noqa: E402
from fakekube_store import Store  # noqa: E402


class FakeKube:
    """A fake API server on 127.0.0.1 with its own PKI and kubeconfig."""

    def __init__(self, dir, port=0, ready_delay=1.0, terminate_delay=1.0,
                 bookmark_interval=1.0, history=1000, runtime_classes=("kata-clh",),
                 pod_delete_delay=None, verbose=False, kubelet=None,
                 service_cidrs=("10.43.0.0/16",), service_cidr_api=True):
        self.dir = os.path.abspath(dir)
        # None: pods become Running on their own; a dict (docker_host, egress_network,
        # egress_hosts): fakekube_kubelet runs them as docker containers.
        self.kubelet = kubelet
        self.port = port
        self.verbose = verbose
        self.bookmark_interval = float(bookmark_interval)
        self._store_args = dict(ready_delay=float(ready_delay),
                                terminate_delay=float(terminate_delay), history=history,
                                runtime_classes=tuple(runtime_classes),
                                pod_delete_delay=pod_delete_delay,
                                service_cidrs=tuple(service_cidrs))
        # service_cidr_api=False: a cluster older than 1.33 (or 1.31-1.32 without the beta
        # API): servicecidrs is 404 and missing from discovery; the kubernetes Service stays
        self.hidden_kinds = () if service_cidr_api else ("ServiceCIDR",)
        self.store = None
        self.server = None
        self.thread = None
        self.logs = {}
        self._lock = threading.Lock()
        self._requests = []
        self._faults = []
        self._tokens = set()
        self._revoked = set()
        self._proxy_addresses = {}    # (ns, pod, port) -> (host, port): pods/proxy targets
        self.pki = None
        self.paths = {}
        self.url = None
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")

    # ------------------------------------------------------------ lifecycle

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        self.pki = TestPKI()
        self.paths = self.pki.write(self.dir)
        self._tokens.add(self.pki.token)
        self.store = Store(**self._store_args)
        if self.kubelet is not None:
            from fakekube_kubelet import DockerKubelet
            self.store.life = DockerKubelet(self.store, self.logs,
                                            node_dir=os.path.join(self.dir, "node"),
                                            **self.kubelet)
        ctx = make_ssl_context(self.paths)
        self.server = Server(("127.0.0.1", self.port), Handler, self, ctx)
        self.port = self.server.server_address[1]
        self.url = "https://127.0.0.1:%d" % self.port
        write_kubeconfig(self.kubeconfig, self.pki, self.url)
        # renamed into place: a reader never sees it half written (it is bound and listening
        # by now; the printed "fakekube listening on" line is the signal to wait for)
        port_file = os.path.join(self.dir, "port")
        with open(port_file + ".tmp", "w") as f:
            f.write("%d\n" % self.port)
        os.rename(port_file + ".tmp", port_file)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1},
                                       name="fakekube-server", daemon=True)
        self.thread.start()
        return self

    def stop(self):
        if self.server is None:
            return
        if self.kubelet is not None:
            self.store.life.stop()
        self.store.stop()
        self.server.shutdown()
        self.server.close_all()
        self.server.server_close()
        self.thread.join(5)
        self.server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------ auth

    @property
    def token(self):
        return self.pki.token

    def add_token(self, token):
        with self._lock:
            self._tokens.add(token)
            self._revoked.discard(token)

    def revoke_token(self, token):
        with self._lock:
            self._tokens.discard(token)
            self._revoked.add(token)

    def _token_ok(self, token):
        with self._lock:
            return token in self._tokens

    def issue_client_cert(self, cn, org=None):
        """(cert_pem, key_pem) of another client certificate of the test CA."""
        return self.pki.issue_client(cn, org)

    # ------------------------------------------------------------ request log

    def _log_request(self, entry):
        with self._lock:
            self._requests.append(entry)

    def requests(self):
        with self._lock:
            return copy.deepcopy(self._requests)

    def clear_requests(self):
        with self._lock:
            self._requests.clear()

    # ------------------------------------------------------------ faults

    def add_fault(self, status=None, count=1, path_regex=".*", delay=None, method=None,
                  retry_after=None, message=None, drop=False, body_bytes=None):
        """Make the next `count` API requests matching path_regex (re.search on
        the path plus '?query') and method fail with `status`, wait `delay`
        seconds first, drop the connection, or answer with a `body_bytes`
        long 200 body.  count=None: until cleared."""
        re.compile(path_regex)
        f = {"status": status, "count": count, "path_regex": path_regex, "delay": delay,
             "method": method, "retry_after": retry_after, "message": message,
             "drop": bool(drop), "body_bytes": body_bytes}
        with self._lock:
            self._faults.append(f)
        return dict(f)

    def faults(self):
        with self._lock:
            return copy.deepcopy(self._faults)

    def clear_faults(self):
        with self._lock:
            self._faults.clear()

    def _take_fault(self, method, path, query):
        target = path + ("?" + query if query else "")
        with self._lock:
            for f in self._faults:
                if f["method"] and f["method"].upper() != method:
                    continue
                if not re.search(f["path_regex"], target):
                    continue
                if f["count"] is not None:
                    if f["count"] <= 0:
                        continue
                    f["count"] -= 1
                out = dict(f)
                self._faults = [x for x in self._faults if x["count"] is None or x["count"] > 0]
                return out
        return None

    # ------------------------------------------------------------ watches etc.

    def cut_watches(self, graceful=False):
        """Drop every open watch (and log follow) stream."""
        self.store.cut_watches(graceful)

    def compact(self):
        """Forget the event history: watches from an older resourceVersion get 410."""
        return self.store.compact()

    def settings(self, ready_delay=None, terminate_delay=None, bookmark_interval=None,
                 pod_delete_delay=None):
        if ready_delay is not None:
            self.store.ready_delay = float(ready_delay)
        if terminate_delay is not None:
            self.store.terminate_delay = float(terminate_delay)
        if pod_delete_delay is not None:
            self.store.pod_delete_delay = float(pod_delete_delay)
        if bookmark_interval is not None:
            self.bookmark_interval = float(bookmark_interval)

    # ------------------------------------------------------------ pods

    def terminate_pod(self, ns, name, container=None, exit_code=0, reason=None, message=None):
        return self.store.life.terminate_container(ns, name, container, exit_code, reason,
                                                   message)

    def set_container_ready(self, ns, name, container, ready, reason=None, message=None):
        """A readiness probe failing (ready False; the container waits with `reason`) or
        passing again: the pod's Ready condition follows."""
        return self.store.life.set_container_ready(ns, name, container, ready, reason, message)

    def pod_log(self, ns, name, text, container=None):
        """Append text to a container's log (followers receive it)."""
        with self.store.cond:
            pod = self.store.get(BY_KIND["Pod"], ns, name)
            if container is None:
                container = pod["spec"]["containers"][0]["name"]
            self.logs.setdefault((ns, name, container), []).append(text)
            self.store.cond.notify_all()

    def set_proxy_address(self, ns, name, port, address):
        """pods/proxy to this pod and port goes to `address` ("host:port"; None: forget it).
        Without the docker kubelet, a pod's address is made up: a test says where to go."""
        with self._lock:
            if address is None:
                self._proxy_addresses.pop((ns, name, port), None)
            else:
                host, _, p = address.rpartition(":")
                self._proxy_addresses[(ns, name, port)] = (host.strip("[]"), int(p))

    def proxy_address(self, ns, name, port, pod_ip):
        """Where pods/proxy connects: the address a test gave, or the pod's own (the docker
        kubelet's containers have real ones); ApiError 503 when there is none."""
        with self._lock:
            given = self._proxy_addresses.get((ns, name, port))
        if given is not None:
            return given
        if self.kubelet is None:
            raise E.ApiError(503, "ServiceUnavailable",
                             "error trying to reach service: dial tcp %s:%d: no route to host "
                             "(fakekube: no proxy address given for this pod and port)"
                             % (pod_ip, port))
        return pod_ip, port

    # ------------------------------------------------------------ direct access

    def get(self, kind, ns, name):
        """The stored object (a copy) or None; kind like 'Pod'."""
        try:
            return self.store.get(BY_KIND[kind], ns, name)
        except E.ApiError:
            return None

    def create(self, kind, ns, obj):
        return self.store.create(BY_KIND[kind], ns, obj, manager="fakekube")

    def list(self, kind, ns=None):
        return self.store.list(BY_KIND[kind], ns)[0]

    def wait_for(self, pred, timeout=5.0, interval=0.02):
        # Stretched like uplinktest's waits: only a wait that fails lasts that long.
        timeout *= float(os.environ.get("UPLINK_TEST_SLOW", "3"))
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            v = pred()
            if v:
                return v
            time.sleep(interval)
        raise TimeoutError("condition not met within %.1fs" % timeout)


def main(argv=None):
    ap = argparse.ArgumentParser(description="fake Kubernetes API server for tests")
    ap.add_argument("--dir", required=True, help="directory for certs, kubeconfig, port")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ready-delay", type=float, default=1.0)
    ap.add_argument("--terminate-delay", type=float, default=1.0)
    ap.add_argument("--pod-delete-delay", type=float, default=None)
    ap.add_argument("--bookmark-interval", type=float, default=1.0)
    ap.add_argument("--history", type=int, default=1000)
    ap.add_argument("--runtime-class", action="append", default=None,
                    help="RuntimeClass to seed (repeatable; default kata-clh)")
    ap.add_argument("--service-cidr", action="append", default=None,
                    help="service range to seed (repeatable, one per family; default "
                         "10.43.0.0/16): the ServiceCIDR and Service 'kubernetes'")
    ap.add_argument("--no-service-cidr-api", action="store_true",
                    help="serve no servicecidrs (a cluster without the ServiceCIDR API)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--kubelet", choices=("none", "docker"), default="none",
                    help="docker: run every pod as docker containers (README.md)")
    ap.add_argument("--docker-host", default=os.environ.get("DOCKER_HOST"),
                    help="the dockerd of --kubelet docker (default $DOCKER_HOST)")
    ap.add_argument("--egress-network", default=None,
                    help="docker network that pods allowed egress to 0.0.0.0/0 also join")
    ap.add_argument("--egress-host", action="append", default=[],
                    help="NAME:IP in /etc/hosts of those pods (repeatable)")
    a = ap.parse_args(argv)
    if a.kubelet == "docker" and not a.docker_host:
        ap.error("--kubelet docker needs --docker-host or DOCKER_HOST")
    kubelet = None if a.kubelet == "none" else dict(
        docker_host=a.docker_host, egress_network=a.egress_network, egress_hosts=a.egress_host)
    fk = FakeKube(a.dir, port=a.port, ready_delay=a.ready_delay,
                  terminate_delay=a.terminate_delay, bookmark_interval=a.bookmark_interval,
                  history=a.history, pod_delete_delay=a.pod_delete_delay,
                  runtime_classes=a.runtime_class if a.runtime_class is not None
                  else ("kata-clh",), verbose=a.verbose, kubelet=kubelet,
                  service_cidrs=a.service_cidr if a.service_cidr is not None
                  else ("10.43.0.0/16",), service_cidr_api=not a.no_service_cidr_api)
    fk.start()
    print("fakekube listening on %s" % fk.url, flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    fk.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
