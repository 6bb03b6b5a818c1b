"""The docker side of fakekube's docker kubelet: the docker CLI, the networks a namespace
gets, a pod's volumes on the node (with the kubelet's ..data layout), its environment, and
the capabilities that stand in for `privileged`."""

import base64
import json
import os
import shutil
import subprocess
import time

import fakekube_errors as E
from fakekube_kinds import BY_KIND

LABEL = "uplink-fakekube"          # every container and network we make: value = instance
DOCKER_TIMEOUT = 600               # a pull of a large image from the local registry

# Linux capability numbers (linux/capability.h): `privileged` is emulated by adding every
# capability of docker's own bounding set (this machine's lacks CAP_SYS_RESOURCE, so
# --privileged itself fails) with seccomp and AppArmor unconfined.
CAPS = ["CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID",
        "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST",
        "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO",
        "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
        "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE",
        "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
        "BLOCK_SUSPEND", "AUDIT_READ"]


def bounding_caps():
    """The capabilities this process may hand on (its bounding set), by name."""
    with open("/proc/self/status") as f:
        line = next(ln for ln in f if ln.startswith("CapBnd:"))
    bits = int(line.split()[1], 16)
    return [c for i, c in enumerate(CAPS) if bits >> i & 1]


class Docker:
    """The docker CLI against one dockerd (DOCKER_HOST)."""

    def __init__(self, host):
        self.env = dict(os.environ, DOCKER_HOST=host)

    def run(self, *args, check=True, timeout=DOCKER_TIMEOUT):
        r = subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise DockerError(args[0], r.stderr.strip() or r.stdout.strip())
        return r

    def out(self, *args):
        return self.run(*args).stdout.strip()

    def popen(self, *args):
        return subprocess.Popen(["docker", *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)

    def inspect(self, cid):
        r = self.run("inspect", cid, check=False)
        return json.loads(r.stdout)[0] if r.returncode == 0 else None

    def ids(self, kind, label):
        """IDs of our containers ("ps"), networks ("network") or volumes ("volume") with this
        label."""
        args = {"ps": ["ps", "-aq"], "network": ["network", "ls", "-q"],
                "volume": ["volume", "ls", "-q"]}[kind]
        return self.out(*args, "--filter", "label=" + label).split()


class DockerError(Exception):
    def __init__(self, what, message):
        super().__init__("docker %s: %s" % (what, message))
        self.message = message


# ---------------------------------------------------------------- volumes

def _write_atomic_dir(vdir, files, mode):
    """The kubelet's layout: files in a timestamped folder, `..data` a symlink to it, and
    each top-level name a symlink through `..data`; an update swaps `..data` in place."""
    os.makedirs(vdir, exist_ok=True)
    stamp = "..%s" % time.strftime("%Y_%m_%d_%H_%M_%S.") + "%06d" % (time.time_ns() // 1000
                                                                    % 1000000)
    new = os.path.join(vdir, stamp)
    os.makedirs(new)
    for rel, (data, fmode) in files.items():
        p = os.path.join(new, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, fmode if fmode is not None else mode)
    os.chmod(new, 0o755)
    tmp = os.path.join(vdir, "..data_tmp")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(stamp, tmp)
    old = os.readlink(os.path.join(vdir, "..data")) if os.path.lexists(
        os.path.join(vdir, "..data")) else None
    os.rename(tmp, os.path.join(vdir, "..data"))
    tops = {rel.split("/", 1)[0] for rel in files}
    for name in os.listdir(vdir):
        if not name.startswith("..") and name not in tops:
            os.unlink(os.path.join(vdir, name))
    for top in tops:
        link = os.path.join(vdir, top)
        if not os.path.lexists(link):
            os.symlink(os.path.join("..data", top), link)
    if old and old != stamp:
        shutil.rmtree(os.path.join(vdir, old), ignore_errors=True)


def projected_files(store, ns, src, kind):
    """{relative path: (bytes, mode or None)} of a Secret or ConfigMap volume source, or
    None when the object is missing (the pod then waits, as the kubelet's does)."""
    name = src.get("secretName") if kind == "Secret" else src.get("name")
    obj = store.peek(BY_KIND[kind], ns, name)
    if obj is None:
        return None, None
    data = {}
    for key, v in (obj.get("data") or {}).items():
        data[key] = base64.b64decode(v) if kind == "Secret" else v.encode()
    for key, v in (obj.get("binaryData") or {}).items():
        data[key] = base64.b64decode(v)
    items = src.get("items")
    if items:
        files = {it["path"]: (data[it["key"]], it.get("mode")) for it in items
                 if it["key"] in data}
    else:
        files = {key: (v, None) for key, v in data.items()}
    return files, obj["metadata"]["resourceVersion"]


def write_projected(vdir, files, src, fs_group):
    mode = src.get("defaultMode", 0o644)
    _write_atomic_dir(vdir, files, mode)
    if fs_group is not None:
        for root, dirs, names in os.walk(vdir):
            for n in dirs + names:
                os.lchown(os.path.join(root, n), -1, fs_group)


# ---------------------------------------------------------------- environment

def _key_ref(store, ns, kind, ref):
    obj = store.peek(BY_KIND[kind], ns, ref["name"])
    data = (obj or {}).get("data") or {}
    if ref["key"] not in data:
        if ref.get("optional"):
            return None
        raise E.bad_request('couldn\'t find key %s in %s %s/%s' % (ref["key"], kind, ns,
                                                                   ref["name"]))
    v = data[ref["key"]]
    return base64.b64decode(v).decode() if kind == "Secret" else v


def _field_ref(pod, path, ip):
    md = pod["metadata"]
    table = {"metadata.name": md["name"], "metadata.namespace": md["namespace"],
             "metadata.uid": md["uid"], "spec.nodeName": pod["spec"].get("nodeName", ""),
             "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
             "status.podIP": ip, "status.hostIP": "127.0.0.1"}
    if path.startswith("metadata.labels['"):
        return (md.get("labels") or {}).get(path[17:-2], "")
    if path.startswith("metadata.annotations['"):
        return (md.get("annotations") or {}).get(path[22:-2], "")
    return table[path]


def container_env(store, pod, c, ip):
    """NAME=value strings of a container (value, secretKeyRef, configMapKeyRef, fieldRef).
    Raises ApiError with the kubelet's CreateContainerConfigError message when a key is
    missing."""
    ns = pod["metadata"]["namespace"]
    out = []
    for e in c.get("env") or []:
        vf = e.get("valueFrom")
        if vf is None:
            v = e.get("value", "")
        elif "secretKeyRef" in vf:
            v = _key_ref(store, ns, "Secret", vf["secretKeyRef"])
        elif "configMapKeyRef" in vf:
            v = _key_ref(store, ns, "ConfigMap", vf["configMapKeyRef"])
        elif "fieldRef" in vf:
            v = _field_ref(pod, vf["fieldRef"]["fieldPath"], ip)
        else:
            raise E.bad_request("env %s: unsupported valueFrom %s" % (e["name"], list(vf)))
        if v is not None:
            out.append("%s=%s" % (e["name"], v))
    return out
