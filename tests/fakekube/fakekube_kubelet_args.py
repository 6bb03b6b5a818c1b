"""`docker create` arguments for one container of a pod, from the pod's spec: the image,
command/args, env, workingDir, securityContext, volumes, hostAliases, DNS and network."""

import os
import stat

import fakekube_errors as E
from fakekube_docker import LABEL, container_env


def _security(kl, pod, c):
    psc = pod["spec"].get("securityContext") or {}
    sc = c.get("securityContext") or {}
    uid = sc.get("runAsUser", psc.get("runAsUser"))
    gid = sc.get("runAsGroup", psc.get("runAsGroup"))
    a = []
    if uid is not None:
        a += ["--user", "%d:%d" % (uid, gid if gid is not None else 0)]
    if psc.get("fsGroup") is not None:
        a += ["--group-add", str(psc["fsGroup"])]
    for g in psc.get("supplementalGroups") or []:
        a += ["--group-add", str(g)]
    if sc.get("readOnlyRootFilesystem"):
        a.append("--read-only")
    if sc.get("privileged"):
        # --privileged fails here (no CAP_SYS_RESOURCE): every capability docker may give,
        # no seccomp, no AppArmor. No host /dev; /sys and the cgroups stay read-only.
        for cap in kl.caps:
            a += ["--cap-add", cap]
        return a + ["--security-opt", "seccomp=unconfined", "--security-opt",
                    "apparmor=unconfined"]
    caps = sc.get("capabilities") or {}
    for cap in caps.get("drop") or []:
        a += ["--cap-drop", cap]
    for cap in caps.get("add") or []:
        a += ["--cap-add", cap]
    if sc.get("allowPrivilegeEscalation") is False:
        a += ["--security-opt", "no-new-privileges"]
    prof = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    if prof == "Unconfined":
        a += ["--security-opt", "seccomp=unconfined"]
    return a


def host_path(kl, path):
    """Where the node's PATH is on this machine: under kl.host_dir ("/" for this machine's
    own files), or in kl.host_map's folder for a path at or under one of its keys."""
    path = os.path.normpath("/" + path.lstrip("/"))
    for node, folder in kl.host_map.items():
        if path == node or path.startswith(node + "/"):
            return os.path.join(folder, os.path.relpath(path, node))
    return os.path.join(kl.host_dir, path.lstrip("/"))


# hostPath type: (test, what it is not) for the types that must already exist
_HOST_TYPES = {"Directory": (os.path.isdir, "is not a directory"),
               "File": (os.path.isfile, "is not a file"),
               "Socket": (lambda p: stat.S_ISSOCK(os.stat(p).st_mode), "is not a socket"),
               "CharDevice": (lambda p: stat.S_ISCHR(os.stat(p).st_mode),
                              "is not a character device"),
               "BlockDevice": (lambda p: stat.S_ISBLK(os.stat(p).st_mode),
                               "is not a block device")}


def host_path_check(kl, hp):
    """None when the hostPath volume HP may be mounted (made first for the *OrCreate types,
    as the kubelet does: a folder 0755, an empty file 0644), else why not."""
    src, typ = host_path(kl, hp["path"]), hp.get("type") or ""
    if typ == "DirectoryOrCreate":
        os.makedirs(src, mode=0o755, exist_ok=True)
        return None if os.path.isdir(src) else "%s is not a directory" % hp["path"]
    if typ == "FileOrCreate":
        if not os.path.exists(src) and os.path.isdir(os.path.dirname(src)):
            os.close(os.open(src, os.O_CREAT | os.O_WRONLY, 0o644))
        return None if os.path.isfile(src) else "%s is not a file" % hp["path"]
    if typ in _HOST_TYPES:
        test, not_it = _HOST_TYPES[typ]
        return None if os.path.exists(src) and test(src) else "%s %s" % (hp["path"], not_it)
    if typ:
        return 'unknown hostPath type "%s"' % typ
    if not os.path.exists(src):          # "": no check; docker makes a missing source a folder
        os.makedirs(src, exist_ok=True)
    return None


def _mounts(w, pod, c):
    vols = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    a = []
    for m in c.get("volumeMounts") or []:
        v = vols.get(m["name"])
        if v is None:
            raise E.bad_request('volume "%s" not found' % m["name"])
        ro = ",readonly" if m.get("readOnly") else ""
        if "emptyDir" in v and v["emptyDir"].get("medium") == "Memory":
            from fakekube_kubelet import memory_volume
            a += ["--mount", "type=volume,source=%s,target=%s%s" % (
                memory_volume(w, m["name"]), m["mountPath"], ro)]
            continue
        if "hostPath" in v:
            src = host_path(w.kl, v["hostPath"]["path"])
        else:
            src = os.path.join(w.dir, "volumes", m["name"])
        if m.get("subPath"):
            src = os.path.realpath(os.path.join(src, m["subPath"]))
        a += ["--mount", "type=bind,source=%s,target=%s%s" % (src, m["mountPath"], ro)]
    return a


def _resolv(w, pod):
    """The pod's resolv.conf, bind-mounted so docker's embedded DNS (127.0.0.11, which
    answers container names) is not the resolver; with no cluster DNS here, ClusterFirst
    pods get a nameserver that does not answer either."""
    spec = pod["spec"]
    dc = spec.get("dnsConfig") or {}
    servers = dc.get("nameservers") or ["127.0.0.1"]
    lines = ["nameserver %s" % s for s in servers]
    if dc.get("searches"):
        lines.append("search %s" % " ".join(dc["searches"]))
    opts = ["%s:%s" % (o["name"], o["value"]) if o.get("value") else o["name"]
            for o in dc.get("options") or []]
    if opts:
        lines.append("options %s" % " ".join(opts))
    p = os.path.join(w.dir, "resolv.conf")
    with open(p, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(p, 0o644)
    dns = []
    for s in servers:
        dns += ["--dns", s]
    return dns + ["--mount", "type=bind,source=%s,target=/etc/resolv.conf,readonly" % p]


def _network(w, pod, ip):
    if pod["spec"].get("hostNetwork"):
        return ["--network", "host"]
    net, _ = w.kl.network(w.ns)
    a = ["--network", net, "--hostname", pod["metadata"]["name"]]
    if ip:
        a += ["--ip", ip]
    for ha in pod["spec"].get("hostAliases") or []:
        for h in ha.get("hostnames") or []:
            a += ["--add-host", "%s:%s" % (h, ha["ip"])]
    if w.kl.egress_network and w.kl.wants_egress(pod):
        for h in w.kl.egress_hosts:
            a += ["--add-host", h]
    return a


def create_args(kl, w, pod, c, ip):
    md = pod["metadata"]
    name = ("fk-%s-%s-%s-%s" % (md["namespace"], md["name"], c["name"], md["uid"][:8]))[:120]
    a = ["--name", name, "--label", "%s=%s" % (LABEL, kl.instance),
         "--label", "%s.uid=%s" % (LABEL, md["uid"]),
         "--label", "%s.pod=%s/%s" % (LABEL, md["namespace"], md["name"]),
         "--label", "%s.container=%s" % (LABEL, c["name"])]
    if c.get("stdin"):
        a.append("-i")
    if c.get("tty"):
        a.append("-t")
    if c.get("workingDir"):
        a += ["-w", c["workingDir"]]
    for e in container_env(kl.store, pod, c, ip or ""):
        a += ["-e", e]
    a += _security(kl, pod, c)
    a += _mounts(w, pod, c)
    a += _network(w, pod, ip)
    if not pod["spec"].get("hostNetwork"):
        a += _resolv(w, pod)
    cmd = c.get("command")
    if cmd:
        a += ["--entrypoint", cmd[0]]
    a.append(c["image"])
    if cmd:
        a += cmd[1:]
    return a + list(c.get("args") or [])
