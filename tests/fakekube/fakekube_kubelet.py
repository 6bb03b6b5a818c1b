"""fakekube's docker kubelet (--kubelet docker): every stored pod runs as real containers
on a dockerd, and the pod's status, events and log say what they do, as a kubelet's would.

It replaces the store's Lifecycle (the only hook) and keeps all of its API behaviour; the
pod-level work runs in one thread per pod, and a sync loop removes the containers of pods
that are gone, moves pods onto the networks their NetworkPolicies allow, and updates
Secret and ConfigMap volumes in place. README.md (Docker kubelet) says what is emulated."""

import copy
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time

import fakekube_errors as E
import fakekube_netpol
from fakekube_docker import (LABEL, Docker, DockerError, bounding_caps, container_env,
                             projected_files, write_projected)
from fakekube_kinds import BY_KIND
from fakekube_lifecycle import Lifecycle, _ready_conditions, _ts

PULL_BACKOFF = 5.0        # seconds between pull attempts of a missing image
PROBE_INTERVAL = 0.5      # seconds between readiness checks (tcpSocket probes)


def _labels_match(sel, labels):
    return all(labels.get(k) == v for k, v in (sel or {}).items())


def _netpol_allows_egress(pol):
    for rule in (pol.get("spec") or {}).get("egress") or []:
        for to in rule.get("to") or []:
            if (to.get("ipBlock") or {}).get("cidr") == "0.0.0.0/0":
                return True
    return False


class DockerKubelet(Lifecycle):
    def __init__(self, store, logs, docker_host, node_dir, egress_network=None,
                 egress_hosts=(), host_dir=None, host_map=None):
        super().__init__(store)
        self.docker = Docker(docker_host)
        self.logs = logs
        self.node_dir = os.path.abspath(node_dir)
        # hostPath volumes live here (the node's "/"): kept between runs if the caller wants
        self.host_dir = os.path.abspath(host_dir or os.path.join(node_dir, "host"))
        # {node path: folder}: hostPaths at or under a node path live in that folder instead
        self.host_map = {k.rstrip("/"): os.path.abspath(v) for k, v in (host_map or {}).items()}
        self.egress_network = egress_network
        self.egress_hosts = list(egress_hosts)       # "name:ip" for pods on egress
        self.instance = secrets.token_hex(4)
        self.label = "%s=%s" % (LABEL, self.instance)
        self.caps = bounding_caps()
        self.subnet_base = 64 + secrets.randbelow(64)  # 10.B.N.0/24 per namespace
        self.nets = {}                                 # namespace -> (network, N)
        self.net_count = 0
        self.service_ips = {}                          # namespace -> next host number
        self.pods = {}                                 # uid -> PodWorker
        self.lock = threading.RLock()
        self.stopping = False
        self.sync = threading.Thread(target=self._sync_loop, name="kubelet-sync", daemon=True)
        self.sync.start()

    # ------------------------------------------------------------ Lifecycle hooks

    def default(self, k, obj, old):
        if k.kind == "Service" and old is None:
            spec = obj.setdefault("spec", {})
            if spec.get("clusterIP") is None and spec.get("type", "ClusterIP") == "ClusterIP":
                spec["clusterIP"] = self._service_ip(obj["metadata"]["namespace"])
        super().default(k, obj, old)

    def created(self, k, obj):
        md = obj["metadata"]
        if k.kind == "Pod":
            w = PodWorker(self, md["namespace"], md["name"], md["uid"])
            with self.lock:
                self.pods[md["uid"]] = w
            w.start()
        elif k.kind == "Deployment":
            self.store.timers.call_later(0, lambda: self._deploy(md["namespace"], md["name"]))

    def updated(self, k, new, old):
        pass

    def graceful_delete_pod(self, pod, grace):
        pod = copy.deepcopy(pod)
        md = pod["metadata"]
        g = int(grace if grace is not None else pod["spec"].get("terminationGracePeriodSeconds",
                                                                30))
        md["deletionTimestamp"] = _ts(g)
        md["deletionGracePeriodSeconds"] = g
        out = self.store.put_internal(BY_KIND["Pod"], pod)
        with self.lock:
            w = self.pods.get(md["uid"])
        if w is None:
            self.store.remove(BY_KIND["Pod"], md["namespace"], md["name"])
        else:
            threading.Thread(target=w.kill, args=(g, True), daemon=True).start()
        return out

    # ------------------------------------------------------------ networks

    def network(self, ns):
        """The namespace's internal network (made on first use): (name, 10.B.N)."""
        with self.lock:
            if ns in self.nets:
                return self.nets[ns]
            self.net_count += 1       # never reused: a gone network's bridge may linger
            n = self.net_count
            prefix = "10.%d.%d" % (self.subnet_base, n)
            name = "fk-%s-%s" % (self.instance, ns)[:60]
            self.docker.run("network", "create", "--internal", "--label", self.label,
                            "--label", "%s.ns=%s" % (LABEL, ns), "--subnet", prefix + ".0/24",
                            "--ip-range", prefix + ".0/25", "--gateway", prefix + ".1", name)
            self.nets[ns] = (name, prefix)
            return self.nets[ns]

    def _service_ip(self, ns):
        _, prefix = self.network(ns)
        with self.lock:
            i = self.service_ips.get(ns, 200)
            self.service_ips[ns] = i + 1
        return "%s.%d" % (prefix, i)

    def service_ip_for(self, pod):
        """The clusterIP of the first Service selecting this pod: docker gives it to the
        pod's container on the namespace network, so the Service reaches its pod."""
        ns = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        for svc in self.store.list(BY_KIND["Service"], ns)[0]:
            sel = (svc.get("spec") or {}).get("selector")
            if sel and _labels_match(sel, labels):
                return svc["spec"].get("clusterIP")
        return None

    def wants_egress(self, pod):
        ns = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        for pol in self.store.list(BY_KIND["NetworkPolicy"], ns)[0]:
            sel = ((pol.get("spec") or {}).get("podSelector") or {}).get("matchLabels")
            if _labels_match(sel, labels) and _netpol_allows_egress(pol):
                return True
        return False

    # ------------------------------------------------------------ deployments

    def _deploy(self, ns, name):
        with self.store.cond:
            d = self.store.peek(BY_KIND["Deployment"], ns, name)
            if d is None:
                return
            tmpl = copy.deepcopy(d["spec"]["template"])
            md = tmpl.setdefault("metadata", {})
            md["name"] = "%s-%s-%s" % (name, secrets.token_hex(5), secrets.token_hex(3)[:5])
            md["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment",
                                      "name": name, "uid": d["metadata"]["uid"],
                                      "controller": True}]
            try:
                self.store.create(BY_KIND["Pod"], ns, tmpl, manager="kube-controller-manager")
            except E.ApiError:
                return

    def pod_ready(self, pod):
        """A Deployment's pod became Ready: the Deployment is available."""
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Deployment":
                Lifecycle._schedule_deploy(self, self.store.peek(
                    BY_KIND["Deployment"], pod["metadata"]["namespace"], ref["name"]))

    # ------------------------------------------------------------ sync loop

    def _sync_loop(self):
        while not self.stopping:
            try:
                self._sync_once()
            except Exception as e:  # the loop must survive a docker hiccup
                print("fakekube kubelet: sync: %s" % e, flush=True)
            with self.store.cond:
                self.store.cond.wait(1.0)

    def _sync_once(self):
        with self.lock:
            workers = list(self.pods.items())
        for uid, w in workers:
            pod = w.current()
            if pod is None:
                w.kill(0, False)
                with self.lock:
                    self.pods.pop(uid, None)
            else:
                w.sync(pod)
        with self.store.cond:
            live = {o["metadata"]["name"] for o in self.store.list(BY_KIND["Namespace"], None)[0]}
        with self.lock:
            gone = [ns for ns in self.nets if ns not in live]
        for ns in gone:
            if not any(w.ns == ns for _, w in workers):
                self.docker.run("network", "rm", self.nets[ns][0], check=False)
                with self.lock:
                    self.nets.pop(ns, None)

    def stop(self):
        """Removes every container and network this kubelet made."""
        self.stopping = True
        with self.store.cond:
            self.store.cond.notify_all()
        ids = self.docker.ids("ps", self.label)
        if ids:
            self.docker.run("rm", "-f", *ids, check=False)
        ids = self.docker.ids("network", self.label)
        if ids:
            self.docker.run("network", "rm", *ids, check=False)
        ids = self.docker.ids("volume", self.label)
        if ids:
            self.docker.run("volume", "rm", "-f", *ids, check=False)


def memory_volume(w, vname):
    """The docker volume holding pod W's Memory emptyDir VNAME."""
    return "fakekube-%s-%s" % (w.uid, vname)


class PodWorker:
    """One pod: volumes on the node, its containers created, started, watched, and its
    status kept."""

    def __init__(self, kl, ns, name, uid):
        self.kl, self.ns, self.name, self.uid = kl, ns, name, uid
        self.dir = os.path.join(kl.node_dir, "pods", uid)
        self.cids = {}                # container name -> docker id
        self.volume_rv = {}           # volume name -> resourceVersion written
        self.tmpfs = []               # docker volumes of the Memory emptyDirs
        self.dead = False
        self.egress = False
        self.ingress = {}             # container id -> the ingress rules put in its netns
        self.lock = threading.Lock()

    def current(self):
        with self.kl.store.cond:
            o = self.kl.store.peek(BY_KIND["Pod"], self.ns, self.name)
            return copy.deepcopy(o) if o and o["metadata"]["uid"] == self.uid else None

    def start(self):
        threading.Thread(target=self._run, name="pod-%s" % self.name, daemon=True).start()

    # ------------------------------------------------------------ status

    def _update(self, fn):
        """Applies fn(pod) to the stored pod (under the store lock) and stores it."""
        with self.kl.store.cond:
            pod = self.current()
            if pod is None:
                return None
            fn(pod)
            return self.kl.store.put_internal(BY_KIND["Pod"], pod)

    def _statuses(self, pod):
        st = pod.setdefault("status", {})
        cs = st.get("containerStatuses")
        if not cs:
            cs = [{"name": c["name"], "image": c.get("image", ""), "imageID": "",
                   "restartCount": 0, "started": False, "ready": False,
                   "state": {"waiting": {"reason": "ContainerCreating"}}}
                  for c in pod["spec"].get("containers") or []]
            st["containerStatuses"] = cs
            now = _ts()
            conds = [{"type": t, "status": s, "lastProbeTime": None, "lastTransitionTime": now}
                     for t, s in (("PodReadyToStartContainers", "True"), ("Initialized", "True"),
                                  ("Ready", "False"), ("ContainersReady", "False"))]
            st["conditions"] = conds + [c for c in st.get("conditions") or []
                                        if c["type"] == "PodScheduled"]
            st["hostIP"] = "127.0.0.1"
            st["hostIPs"] = [{"ip": "127.0.0.1"}]
            st["startTime"] = now
        return st, {c["name"]: c for c in cs}

    def _set(self, cname, **kw):
        def fn(pod):
            st, by = self._statuses(pod)
            by[cname].update(kw)
            done = all("terminated" in c["state"] for c in st["containerStatuses"])
            if done:
                failed = any(c["state"]["terminated"]["exitCode"] for c in
                             st["containerStatuses"])
                st["phase"] = "Failed" if failed else "Succeeded"
            elif any("running" in c["state"] for c in st["containerStatuses"]):
                st["phase"] = "Running"
            _ready_conditions(st, st["containerStatuses"], _ts(), done)
        return self._update(fn)

    def _event(self, typ, reason, message):
        pod = self.current()
        if pod is not None:
            self.kl._event(pod, typ, reason, message)

    # ------------------------------------------------------------ running

    def _run(self):
        try:
            pod = self.current()
            if pod is None:
                return
            self._update(lambda p: self._statuses(p))
            if not self._volumes(pod):
                return
            for c in pod["spec"].get("containers") or []:
                if not self._pull(c) or not self._create(pod, c):
                    return
            self.sync(pod)
            for c in pod["spec"].get("containers") or []:
                self._start(pod, c)
        except Exception as e:
            print("fakekube kubelet: pod %s/%s: %s" % (self.ns, self.name, e), flush=True)

    def _volumes(self, pod):
        group = ((pod["spec"].get("securityContext") or {}).get("fsGroup"))
        os.makedirs(self.dir, exist_ok=True)
        for v in pod["spec"].get("volumes") or []:
            if not self._volume(pod, v, group, initial=True):
                return False
        return True

    def _volume(self, pod, v, group, initial):
        vdir = os.path.join(self.dir, "volumes", v["name"])
        for kind, key in (("Secret", "secret"), ("ConfigMap", "configMap")):
            if key in v:
                while True:
                    files, rv = projected_files(self.kl.store, self.ns, v[key], kind)
                    if files is not None or not initial or self.dead:
                        break
                    self._event("Warning", "FailedMount", 'MountVolume.SetUp failed for volume '
                                '"%s" : %s "%s" not found' % (v["name"], kind.lower(),
                                                               v[key].get("secretName") or
                                                               v[key].get("name")))
                    time.sleep(PULL_BACKOFF)
                    if self.current() is None:
                        return False
                if files is not None and self.volume_rv.get(v["name"]) != rv:
                    write_projected(vdir, files, v[key], group)
                    self.volume_rv[v["name"]] = rv
                return True
        if initial and "hostPath" in v:
            return self._host_path(v)
        if initial and "emptyDir" in v and v["emptyDir"].get("medium") == "Memory":
            # one tmpfs for the whole pod, as the kubelet's: a docker volume its containers
            # share (a --tmpfs each would give every container its own)
            name = memory_volume(self, v["name"])
            self.kl.docker.run("volume", "create", "--label", self.kl.label, "--opt",
                               "type=tmpfs", "--opt", "device=tmpfs", "--opt", "o=mode=1777",
                               name)
            self.tmpfs.append(name)
            return True
        if initial and "emptyDir" in v and v["emptyDir"].get("medium") != "Memory":
            os.makedirs(vdir, exist_ok=True)
            os.chmod(vdir, 0o1777 if group is None else 0o2775)
            if group is not None:
                os.chown(vdir, -1, group)
        return True

    def _host_path(self, v):
        """The kubelet's hostPath type check (DirectoryOrCreate and FileOrCreate create):
        until it passes, FailedMount events and the pod waits, as on a real node."""
        from fakekube_kubelet_args import host_path_check
        while True:
            why = host_path_check(self.kl, v["hostPath"])
            if why is None or self.dead:
                return why is None
            self._event("Warning", "FailedMount", 'MountVolume.SetUp failed for volume "%s" : '
                        "hostPath type check failed: %s" % (v["name"], why))
            time.sleep(PULL_BACKOFF)
            if self.current() is None:
                return False

    def _pull(self, c):
        image = c["image"]
        have = self.kl.docker.run("image", "inspect", image, check=False).returncode == 0
        if have and c.get("imagePullPolicy") != "Always":
            return True
        while not self.dead:
            self._event("Normal", "Pulling", 'Pulling image "%s"' % image)
            r = self.kl.docker.run("pull", image, check=False)
            if r.returncode == 0:
                self._event("Normal", "Pulled", 'Successfully pulled image "%s"' % image)
                return True
            why = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["unknown error"]
            msg = 'Failed to pull image "%s": %s' % (image, why[0])
            self._set(c["name"], state={"waiting": {"reason": "ErrImagePull", "message": msg}})
            self._event("Warning", "Failed", msg)
            self._event("Warning", "Failed", "Error: ErrImagePull")
            self._set(c["name"], state={"waiting": {
                "reason": "ImagePullBackOff", "message": 'Back-off pulling image "%s"' % image}})
            self._event("Normal", "BackOff", 'Back-off pulling image "%s"' % image)
            time.sleep(PULL_BACKOFF)
            if self.current() is None:
                return False
        return False

    def _create(self, pod, c):
        from fakekube_kubelet_args import create_args
        ip = None if pod["spec"].get("hostNetwork") else self.kl.service_ip_for(pod)
        try:
            args = create_args(self.kl, self, pod, c, ip)
        except E.ApiError as e:
            msg = e.status.get("message", str(e))
            self._set(c["name"], state={"waiting": {"reason": "CreateContainerConfigError",
                                                    "message": msg}})
            self._event("Warning", "Failed", "Error: " + msg)
            return False
        try:
            self.cids[c["name"]] = self.kl.docker.out("create", *args)
        except DockerError as e:
            self._set(c["name"], state={"waiting": {"reason": "CreateContainerError",
                                                    "message": e.message}})
            self._event("Warning", "Failed", "Error: " + e.message)
            return False
        return True

    def _start(self, pod, c):
        cid = self.cids[c["name"]]
        if self.dead:
            return
        try:
            self.kl.docker.run("start", cid)
        except DockerError as e:
            self._event("Warning", "Failed", "Error: failed to start container \"%s\": %s"
                        % (c["name"], e.message))
        info = self.kl.docker.inspect(cid) or {}
        if (info.get("State") or {}).get("StartedAt", "0001").startswith("0001"):
            return
        if not pod["spec"].get("hostNetwork"):
            self._no_default_route(info)
            self._ingress(self.current() or pod)  # before anything can connect
        self._event("Normal", "Started", "Started container %s" % c["name"])
        self._running(pod, c, cid, info)
        threading.Thread(target=self._wait, args=(pod, c, cid), daemon=True).start()

    def _no_default_route(self, info):
        """Docker gives even an internal network's containers a default route through the
        host; a host that forwards (net.ipv4.ip_forward, which other software turns on)
        would then route the agent to every other network. A pod's networks are on-link."""
        pid = (info.get("State") or {}).get("Pid")
        if pid:
            subprocess.run(["nsenter", "-t", str(pid), "-n", "ip", "route", "del", "default"],
                           capture_output=True, timeout=30)

    def _running(self, pod, c, cid, info):
        nets = (info.get("NetworkSettings") or {}).get("Networks") or {}
        own = (self.kl.nets.get(self.ns) or ("",))[0]
        ip = "127.0.0.1" if pod["spec"].get("hostNetwork") else (
            (nets.get(own) or {}).get("IPAddress") or "")

        def fn(p):
            st, by = self._statuses(p)
            if ip:
                st["podIP"] = ip
                st["podIPs"] = [{"ip": ip}]
        self._update(fn)
        self._set(c["name"], containerID="docker://" + cid, started=True,
                  imageID="docker-pullable://" + (info.get("Image") or ""),
                  state={"running": {"startedAt": _ts()}})
        self._logs(c["name"], cid)
        threading.Thread(target=self._probe, args=(c, ip), daemon=True).start()

    def _probe(self, c, ip):
        port = ((c.get("readinessProbe") or {}).get("tcpSocket") or {}).get("port")
        while port and not self.dead:
            try:
                socket.create_connection((ip, int(port)), timeout=1).close()
                break
            except OSError:
                time.sleep(PROBE_INTERVAL)
        if self.dead:
            return
        pod = self._set(c["name"], ready=True)
        if pod and all(s.get("ready") for s in pod["status"]["containerStatuses"]):
            self.kl.pod_ready(pod)

    def _logs(self, cname, cid):
        key = (self.ns, self.name, cname)
        p = self.kl.docker.popen("logs", "-f", cid)

        def pump():
            for line in iter(p.stdout.readline, b""):
                with self.kl.store.cond:
                    self.kl.logs.setdefault(key, []).append(line.decode("utf-8", "replace"))
                    self.kl.store.cond.notify_all()
        threading.Thread(target=pump, daemon=True).start()

    def _wait(self, pod, c, cid):
        while True:
            r = self.kl.docker.run("wait", cid, check=False, timeout=None)
            if self.dead or r.returncode != 0:
                return
            info = self.kl.docker.inspect(cid) or {}
            s = info.get("State") or {}
            code = int(s.get("ExitCode", r.stdout.strip() or 1))
            reason = "OOMKilled" if s.get("OOMKilled") else ("Completed" if code == 0
                                                             else "Error")
            with self.kl.store.cond:
                if self.current() is None:
                    return
                self.kl.terminate_container(self.ns, self.name, c["name"], code, reason)
            if pod["spec"].get("restartPolicy", "Always") != "Always":
                return
            self.kl.docker.run("start", cid, check=False)
            self.ingress.pop(cid, None)  # a new network namespace: the next sync fills it

    # ------------------------------------------------------------ sync and kill

    def sync(self, pod):
        """Networks the policies allow (the egress network), volumes updated in place."""
        if self.dead or not self.cids:
            return
        if (not self.egress and self.kl.egress_network and not pod["spec"].get("hostNetwork")
                and self.kl.wants_egress(pod)):
            for cid in self.cids.values():
                self.kl.docker.run("network", "connect", self.kl.egress_network, cid,
                                   check=False)
                self._no_default_route(self.kl.docker.inspect(cid) or {})
            self.egress = True
        if not pod["spec"].get("hostNetwork"):
            self._ingress(pod)
        group = (pod["spec"].get("securityContext") or {}).get("fsGroup")
        for v in pod["spec"].get("volumes") or []:
            self._volume(pod, v, group, initial=False)

    def _ingress(self, pod):
        """The ingress NetworkPolicies, enforced in each running container's network
        namespace (fakekube_netpol.py), again whenever what they admit changes."""
        rules = fakekube_netpol.allowed(self.kl.store, pod)
        net = self.kl.nets.get(self.ns)
        if net is None:
            return
        for cid in list(self.cids.values()):
            if self.ingress.get(cid, "unset") == rules:
                continue
            pid = ((self.kl.docker.inspect(cid) or {}).get("State") or {}).get("Pid")
            if pid and fakekube_netpol.enforce(pid, net[1] + ".1", rules):
                self.ingress[cid] = rules

    def kill(self, grace, remove_pod):
        """Stops the containers (SIGTERM, SIGKILL after `grace` s) and removes them."""
        with self.lock:
            if self.dead and not remove_pod:
                return
            self.dead = True
        for cid in self.cids.values():
            self.kl.docker.run("stop", "-t", str(grace), cid, check=False)
        if self.cids:
            self.kl.docker.run("rm", "-f", *self.cids.values(), check=False)
        if self.tmpfs:
            self.kl.docker.run("volume", "rm", "-f", *self.tmpfs, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        if remove_pod:
            with self.kl.store.cond:
                if self.current() is not None:
                    self.kl.store.remove(BY_KIND["Pod"], self.ns, self.name)
