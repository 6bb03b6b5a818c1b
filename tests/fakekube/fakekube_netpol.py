"""The docker kubelet's ingress NetworkPolicies: a pod that a policy with Ingress selects
takes new connections only as its policies allow, as a network plugin would enforce it.
In the pod's network namespace (nsenter, root), chain FK-INGRESS of INPUT accepts replies,
loopback, the node (the namespace network's gateway: "traffic to and from the node where a
Pod is running is always allowed"), and each ingress rule's peers (pods of the namespace by
podSelector, ipBlock CIDRs; none listed: any) on its TCP ports (none listed: all); the rest
is dropped. A pod no policy selects for Ingress is left open. namespaceSelector peers admit
nothing (another namespace's pods share no network with this one here)."""

import subprocess

from fakekube_kinds import BY_KIND

CHAIN = "FK-INGRESS"


def _matches(sel, labels):
    """matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist); {} = all."""
    sel = sel or {}
    if any(labels.get(k) != v for k, v in (sel.get("matchLabels") or {}).items()):
        return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if ((op == "In" and labels.get(k) not in vals) or (op == "NotIn" and labels.get(k) in vals)
                or (op == "Exists" and k not in labels)
                or (op == "DoesNotExist" and k in labels)):
            return False
    return True


def _peer_sources(store, ns, peers):
    """Source CIDRs the peers stand for; None = any source."""
    if not peers:
        return None
    out = []
    for p in peers:
        if "ipBlock" in p:
            out.append(p["ipBlock"]["cidr"])
        elif "podSelector" in p and "namespaceSelector" not in p:
            for pod in store.list(BY_KIND["Pod"], ns)[0]:
                ip = (pod.get("status") or {}).get("podIP")
                if ip and _matches(p["podSelector"], pod["metadata"].get("labels") or {}):
                    out.append(ip + "/32")
    return out


def allowed(store, pod):
    """(source or None, port or None) pairs a pod admits, or None when it is not isolated."""
    ns, labels = pod["metadata"]["namespace"], pod["metadata"].get("labels") or {}
    isolated, rules = False, set()
    for pol in store.list(BY_KIND["NetworkPolicy"], ns)[0]:
        spec = pol.get("spec") or {}
        if "Ingress" not in (spec.get("policyTypes") or ["Ingress"]):
            continue
        if not _matches(spec.get("podSelector"), labels):
            continue
        isolated = True
        for rule in spec.get("ingress") or []:
            srcs = _peer_sources(store, ns, rule.get("from"))
            ports = [p.get("port") for p in rule.get("ports") or []
                     if p.get("protocol", "TCP") == "TCP"] or [None]
            for src in (srcs if srcs is not None else [None]):
                rules.update((src, port) for port in ports)
    return sorted(rules, key=str) if isolated else None


def _script(node_ip, rules):
    lines = ["*filter", ":%s - [0:0]" % CHAIN,
             "-A %s -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT" % CHAIN,
             "-A %s -i lo -j ACCEPT" % CHAIN, "-A %s -s %s/32 -j ACCEPT" % (CHAIN, node_ip)]
    for src, port in rules:
        lines.append("-A %s -p tcp%s%s -j ACCEPT" % (
            CHAIN, " -s %s" % src if src else "", " --dport %s" % port if port else ""))
    lines += ["-A %s -j DROP" % CHAIN, "COMMIT", ""]
    return "\n".join(lines)


def enforce(pid, node_ip, rules):
    """Puts the rules (None: open) in the network namespace of process `pid`."""
    ns = ["nsenter", "-t", str(pid), "-n"]
    if rules is None:
        subprocess.run(ns + ["iptables", "-w", "-D", "INPUT", "-j", CHAIN],
                       capture_output=True, timeout=30)
        return True
    r = subprocess.run(ns + ["iptables-restore", "-w", "--noflush"],
                       input=_script(node_ip, rules), text=True, capture_output=True, timeout=30)
    if r.returncode != 0:
        print("fakekube kubelet: ingress rules: %s" % r.stderr.strip(), flush=True)
        return False
    if subprocess.run(ns + ["iptables", "-w", "-C", "INPUT", "-j", CHAIN],
                      capture_output=True, timeout=30).returncode != 0:
        subprocess.run(ns + ["iptables", "-w", "-I", "INPUT", "1", "-j", CHAIN],
                       capture_output=True, timeout=30, check=True)
    return True
