"""`uplink run` flags for mounts, SSH, git, kube contexts, AWS and the mitm, seen through
`--dry-run`: for each flag the objects it produces, and every validation message in
full. The real daemon and client, the fake API server; nothing reaches the cluster."""

import base64
import glob
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess

import pytest
import yaml

from test_dry_run import SSH_AGENT_IP, assert_dry_run_is_what_a_run_applies
from uplinktest import Env, ROOT, run_detached, wait_for

PEM_A = "-----BEGIN CERTIFICATE-----\nMIIBAAAA\n-----END CERTIFICATE-----"  # no final newline
PEM_B = "-----BEGIN CERTIFICATE-----\nMIIBBBBB\n-----END CERTIFICATE-----\n"


@pytest.fixture(scope="module")
def ssh_dirs(tmp_path_factory):
    """The SSH key folders, made once (ssh-keygen takes a while) and copied into each home."""
    d = tmp_path_factory.mktemp("ssh-dirs")
    make_ssh_dirs(d)
    return d


@pytest.fixture
def env(tmpdir_short, fakekube, registry, ssh_dirs):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    h = e.home
    for d in ("other", "nest/inner", "docs"):
        (h / d).mkdir(parents=True)
    (h / "notes.txt").write_text("n\n")
    (h / "ca-a.pem").write_text(PEM_A)
    (h / "ca-b.pem").write_text(PEM_B)
    (h / "not-a-cert.pem").write_text("hello\n")
    (h / "link").symlink_to(h / "other")
    (e.tmp / "outside").mkdir()
    for sub in ssh_dirs.iterdir():
        shutil.copytree(sub, h / sub.name)
    # Tests run as root; the holder pod must not (the refusal is tested without this).
    e.daemon.env["UPLINK_DEBUG_UID"] = "1000:1000"
    # the aws CLI stand-in first on the daemon's PATH; a keyring file for --bedrock
    e.aws_calls = e.tmp / "aws-calls"
    (e.tmp / "keyring.json").write_text(json.dumps({"entries": [
        {"service": "bedrock", "username": "key", "value": "BEDROCK-KEYRING-SENTINEL"}]}))
    e.daemon.env.update({"PATH": f"{ROOT}/tests/data/aws:" + e.daemon.env["PATH"],
                         "FAKE_AWS_CALLS": str(e.aws_calls), "FAKE_AWS_FAIL": "broken",
                         "FAKE_AWS_HANG": "hangs", "UPLINK_AWS_TIMEOUT_MS": "1000",
                         "UPLINK_SECRET_STORE": "file",
                         "UPLINK_SECRET_FILE": str(e.tmp / "keyring.json")})
    yield from e.running()


def run_env(env):
    e = dict(env.daemon.env)
    e.pop("UPLINK_DEBUG", None)
    return e


def uplink_run_cmd(env):
    from uplinktest import uplink_bin
    return [uplink_bin(), "run"]


def keygen(path, *args, comment="ada@example.com"):
    subprocess.run(["ssh-keygen", "-q", "-N", "", "-C", comment, "-f", str(path), *args], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)


def make_ssh_dirs(h):
    """keys: the folder of every kind; the others for one validation message each."""
    k = h / "keys"
    k.mkdir()
    keygen(k / "id_ed25519", "-t", "ed25519")
    keygen(k / "deploy", "-t", "rsa", "-b", "2048", "-m", "PEM", comment="deploy@ci")
    keygen(k / "ca", "-t", "ed25519")
    subprocess.run(["ssh-keygen", "-q", "-s", str(k / "ca"), "-I", "ada", "-n", "git",
                    str(k / "id_ed25519.pub")], check=True, capture_output=True)
    (k / "ca").unlink()
    (k / "ca.pub").unlink()
    (k / "id_ed25519.pub").write_text("ssh-ed25519 AAAA-stale-not-used old\n")  # re-derived
    (k / "config").write_text("Host git.example.com\n\tUser git\n\tIdentityFile ~/.ssh/id_ed25519.pub\n")
    (k / "known_hosts").write_text("git.example.com ssh-ed25519 AAAAknown\n")
    (k / "notes").write_text("not a key\n")
    (k / "sub").mkdir()
    keygen(k / "sub" / "nested", "-t", "ed25519")  # folders are not looked into
    d = h / "keys-dot"
    d.mkdir()
    keygen(d / ".hidden", "-t", "ed25519")
    p = h / "keys-pass"
    p.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-N", "secret-pass", "-t", "ed25519", "-f", str(p / "id_pass")],
                   check=True, capture_output=True)
    b = h / "keys-bad"
    b.mkdir()
    (b / "broken").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nbm90IGEga2V5\n-----END OPENSSH PRIVATE KEY-----\n")
    b.joinpath("broken").chmod(0o600)
    m = h / "keys-misnamed"  # private keys under the names of a certificate and of the config
    m.mkdir()
    keygen(m / "id-cert.pub", "-t", "ed25519")
    keygen(m / "config", "-t", "ed25519")
    (m / "id-cert.pub.pub").unlink()
    (m / "config.pub").unlink()
    n = h / "keys-none"
    n.mkdir()
    (n / "config").write_text("Host *\n")
    (n / "id_old.pub").write_text("ssh-ed25519 AAAA old\n")


def dry(env, *args, env_vars=None):
    r = env.run("claude", "--dry-run", "--show-secrets", "--image", "example/agent:1", *args, check=0,
                env=env_vars)
    items = json.loads(r.stdout)["items"]
    return {(i["kind"], i["metadata"]["name"]): i for i in items}, [i["kind"] + "/" + i["metadata"]["name"] for i in items], r


def secret(by, name, key):
    return base64.b64decode(by[("Secret", name)]["data"][key]).decode()


def agent_mounts(by):
    """The host mounts uplink adds: volume name -> (hostPath, type, mountPath, readOnly)."""
    pod = by[("Pod", "agent")]["spec"]
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    return {v["name"]: (v["hostPath"]["path"], v["hostPath"]["type"], mounts[v["name"]]["mountPath"],
                        mounts[v["name"]]["readOnly"])
            for v in pod["volumes"] if v["name"].startswith("mount-")}


def mitm_args(by):
    return by[("Pod", "mitm")]["spec"]["containers"][0]["args"]


def ssh_rules(by):
    return [e for e in by[("NetworkPolicy", "agent-egress")]["spec"]["egress"]
            if any("ipBlock" in t for t in e.get("to", []))]


# ---------------------------------------------------------------- mounts

MOUNT_CASES = [
    # args (H = home, P = the project, the working folder), expected mounts
    (["--add-dir", "H/other"], {"mount-0": ("H/other", "Directory", "H/other", False)}),
    (["--add-dir", "../other"], {"mount-0": ("H/other", "Directory", "H/other", False)}),
    (["--add-dir", "H/link"], {"mount-0": ("H/other", "Directory", "H/other", False)}),
    (["--add-dir", "H/other", "--add-dir", "H/other", "--add-dir", "H/docs"],
     {"mount-0": ("H/other", "Directory", "H/other", False),
      "mount-1": ("H/docs", "Directory", "H/docs", False)}),
    (["--mount-rw", "H/notes.txt"], {"mount-0": ("H/notes.txt", "File", "H/notes.txt", False)}),
    (["--mount-ro", "H/other", "--mount-rw", "H/docs"],
     {"mount-0": ("H/docs", "Directory", "H/docs", False),
      "mount-1": ("H/other", "Directory", "H/other", True)}),
    # read-only mounts and files may sit anywhere under home: above the cwd, inside a rw folder
    (["--mount-ro", "H", "--mount-rw", "H/nest", "--mount-ro", "H/nest/inner", "--mount-rw", "H/nest/inner/../../notes.txt"],
     {"mount-0": ("H/nest", "Directory", "H/nest", False),
      "mount-1": ("H/notes.txt", "File", "H/notes.txt", False),
      "mount-2": ("H", "Directory", "H", True),
      "mount-3": ("H/nest/inner", "Directory", "H/nest/inner", True)}),
    (["--mount-ro", "~/docs"], {"mount-0": ("H/docs", "Directory", "H/docs", True)}),
    ([], {}),
]


@pytest.mark.parametrize("args,expected", MOUNT_CASES, ids=[" ".join(a) or "none" for a, _ in MOUNT_CASES])
def test_mounts_become_host_paths_at_the_same_place(env, args, expected):
    h = str(env.home)
    args = [a.replace("H", h, 1) if a.startswith("H") else a for a in args]
    by, _, _ = dry(env, *args)
    want = {k: tuple(x.replace("H", h, 1) if isinstance(x, str) and x.startswith("H") else x for x in v)
            for k, v in expected.items()}
    assert agent_mounts(by) == want
    # nothing of them anywhere else
    assert "mount-" not in json.dumps(by[("Pod", "mitm")])


# ---------------------------------------------------------------- SSH

def test_ssh_cidr_opens_tcp_22_to_exactly_those_networks(env):
    by, _, r = dry(env, "--ssh-cidr", "10.1.2.3/24", "--ssh-cidr", "192.168.1.5",
                   "--ssh-cidr", "2001:db8::1", "--ssh-cidr", "2001:db8:1::7/48")
    rules = ssh_rules(by)
    assert rules == [{"to": [{"ipBlock": {"cidr": "10.1.2.0/24"}}, {"ipBlock": {"cidr": "192.168.1.5/32"}},
                             {"ipBlock": {"cidr": "2001:db8::1/128"}}, {"ipBlock": {"cidr": "2001:db8:1::/48"}}],
                      "ports": [{"protocol": "TCP", "port": 22}]}]
    assert ("TCP 22 egress to 10.1.2.0/24, 192.168.1.5/32, 2001:db8::1/128, 2001:db8:1::/48 is open "
            "but no SSH keys are mounted") in r.stderr
    # the rest of the policy is as without the flag
    plain, _, r2 = dry(env)
    assert ssh_rules(plain) == [] and "TCP 22" not in r2.stderr
    egress = by[("NetworkPolicy", "agent-egress")]["spec"]["egress"]
    assert [e for e in egress if e not in rules] == plain[("NetworkPolicy", "agent-egress")]["spec"]["egress"]


# ---------------------------------------------------------------- --ssh-key-dir

def derived_pub(path):
    return subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True,
                          check=True).stdout


def key_body(path):
    """A line from the middle of a private key: what must never leave ssh-agent-keys."""
    lines = path.read_text().splitlines()
    return lines[len(lines) // 2]


def pod_spec(by, name):
    return by[("Pod", name)]["spec"]


def test_ssh_key_dir_objects(env):
    h, k = env.home, env.home / "keys"
    by, names, r = dry(env, "--ssh-key-dir", str(k), "--ssh-cidr", "10.0.0.0/8",
                       "--mitm-runtime-class", "kata-clh")
    assert r.returncode == 0, r.stderr
    # Secrets: the private keys alone in ssh-agent-keys; public halves, the cert and config in ssh-pub
    keys = by[("Secret", "ssh-agent-keys")]["data"]
    assert {n: base64.b64decode(v).decode() for n, v in keys.items()} == {
        "deploy": (k / "deploy").read_text(), "id_ed25519": (k / "id_ed25519").read_text()}
    pub = {n: base64.b64decode(v).decode() for n, v in by[("Secret", "ssh-pub")]["data"].items()}
    assert pub == {"config": (k / "config").read_text(),
                   "deploy.pub": derived_pub(k / "deploy"),
                   "id_ed25519.pub": derived_pub(k / "id_ed25519"),
                   "id_ed25519-cert.pub": (k / "id_ed25519-cert.pub").read_text()}
    assert pub["id_ed25519.pub"].endswith(" ada@example.com\n")
    # order: Secrets before the policies, the holder before the agent, the agent last
    for n in ("Secret/ssh-agent-keys", "Secret/ssh-pub"):
        assert names.index(n) < names.index("NetworkPolicy/default-deny")
    assert names.index("Pod/ssh-agent") < names.index("Pod/agent") == len(names) - 1
    assert "Service/ssh-agent" in names and "NetworkPolicy/ssh-agent-policy" in names

    # the holder: hardened, the host uid, the agent image, the mitm's runtime class
    holder = pod_spec(by, "ssh-agent")
    assert by[("Pod", "ssh-agent")]["metadata"]["labels"]["app"] == "ssh-agent"
    assert holder["runtimeClassName"] == "kata-clh"
    assert holder["automountServiceAccountToken"] is False and holder["enableServiceLinks"] is False
    assert holder["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"},
                                         "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
    [c] = holder["containers"]
    assert c["image"] == "example/agent:1" and c["imagePullPolicy"] == "Always"
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "privileged": False,
        "readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"}}
    assert c["resources"] == {"limits": {"memory": "128Mi", "cpu": "250m"},
                              "requests": {"memory": "32Mi", "cpu": "20m"}}
    assert c["readinessProbe"]["exec"]["command"] == ["ssh-add", "-l"]
    assert {"name": "SSH_AUTH_SOCK", "value": "/run/ssh-agent/agent.sock"} in c["env"]
    assert c["command"][:2] == ["/bin/sh", "-c"]
    # no PKCS#11 or FIDO provider may ever be loaded: an allow-list nothing matches
    assert "ssh-agent -D -P '' -a \"$sock\"" in c["command"][2]
    assert c["command"][3:] == ["ssh-agent-holder", "/keys", "/run/ssh-agent/agent.sock", "8765"]
    assert c["ports"] == [{"name": "ssh-agent", "containerPort": 8765, "protocol": "TCP"}]
    assert c["volumeMounts"] == [{"name": "keys", "mountPath": "/keys", "readOnly": True},
                                 {"name": "socket", "mountPath": "/run/ssh-agent"}]
    assert holder["volumes"] == [
        {"name": "keys", "secret": {"secretName": "ssh-agent-keys", "defaultMode": 0o440}},
        {"name": "socket", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}]
    svc = by[("Service", "ssh-agent")]["spec"]
    assert svc["selector"] == {"app": "ssh-agent"}
    assert svc["ports"] == [{"name": "ssh-agent", "protocol": "TCP", "port": 8765, "targetPort": 8765}]

    # policies: the agent may reach the holder on 8765; only the agent may reach it; it reaches nothing
    egress = by[("NetworkPolicy", "agent-egress")]["spec"]["egress"]
    assert {"to": [{"podSelector": {"matchLabels": {"app": "ssh-agent"}}}],
            "ports": [{"protocol": "TCP", "port": 8765}]} in egress
    pol = by[("NetworkPolicy", "ssh-agent-policy")]["spec"]
    assert pol == {"podSelector": {"matchLabels": {"app": "ssh-agent"}}, "policyTypes": ["Ingress", "Egress"],
                   "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "agent"}}}],
                                "ports": [{"protocol": "TCP", "port": 8765}]}],
                   "egress": []}

    # the agent: ~/.ssh file by file, the socket, SSH_AUTH_SOCK, the relay sidecar
    agent = pod_spec(by, "agent")
    main, relay = agent["containers"]
    assert {"name": "SSH_AUTH_SOCK", "value": "/ssh-agent/agent.sock"} in main["env"]
    ssh_mounts = [m for m in main["volumeMounts"] if m["name"] in ("ssh-pub", "ssh-sock")]
    assert ssh_mounts == [{"name": "ssh-pub", "mountPath": f"{h}/.ssh/{n}", "subPath": n, "readOnly": True}
                          for n in sorted(pub)] + [{"name": "ssh-sock", "mountPath": "/ssh-agent"}]
    assert {"name": "ssh-pub", "secret": {"secretName": "ssh-pub"}} in agent["volumes"]
    assert {"name": "ssh-sock", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}} in agent["volumes"]
    assert relay["name"] == "ssh-agent-relay" and relay["image"] == "example/agent:1"
    assert relay["command"] == ["socat", "UNIX-LISTEN:/ssh-agent/agent.sock,fork,unlink-early,mode=0666",
                                "TCP:ssh-agent:8765"]
    assert relay["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert relay["securityContext"]["runAsUser"] == 1000 and relay["securityContext"]["runAsNonRoot"] is True
    assert relay["securityContext"]["readOnlyRootFilesystem"] is True
    assert relay["volumeMounts"] == [{"name": "ssh-sock", "mountPath": "/ssh-agent"}]
    assert relay["resources"] == {"limits": {"memory": "64Mi", "cpu": "200m"},
                                  "requests": {"memory": "16Mi", "cpu": "10m"}}
    # no warning: keys and egress together
    assert "SSH egress stays denied" not in r.stderr and "TCP 22 egress" not in r.stderr


def test_ssh_key_dir_from_the_config_file(env):
    (env.project / ".uplink.yaml").write_text("ssh_key_dir: ~/keys\n")
    assert env.daemon.client("trust", str(env.project / ".uplink.yaml")).returncode == 0  # a project's keys
    by, names, r = dry(env)
    assert "Pod/ssh-agent" in names and "SSH egress stays denied" in r.stderr
    # a flag beats the file
    by, names, r = dry(env, "--ssh-key-dir", str(env.home / "keys-none"))
    assert "Pod/ssh-agent" not in names and "holds no private keys" in r.stderr

def test_ssh_private_key_named_as_cert_or_config_goes_to_the_holder(env):
    m = env.home / "keys-misnamed"
    by, _, r = dry(env, "--ssh-key-dir", str(m))
    assert r.returncode == 0, r.stderr
    keys = {n: base64.b64decode(v).decode() for n, v in by[("Secret", "ssh-agent-keys")]["data"].items()}
    assert keys == {"config": (m / "config").read_text(), "id-cert.pub": (m / "id-cert.pub").read_text()}
    pub = {n: base64.b64decode(v).decode() for n, v in by[("Secret", "ssh-pub")]["data"].items()}
    assert pub == {"config.pub": derived_pub(m / "config"), "id-cert.pub.pub": derived_pub(m / "id-cert.pub")}
    assert "PRIVATE KEY" not in "".join(pub.values())


def test_ssh_private_keys_appear_only_in_their_secret(env):
    k = env.home / "keys"
    sentinels = [key_body(k / "id_ed25519"), key_body(k / "deploy")]
    by, _, r = dry(env, "--ssh-key-dir", str(k))  # --show-secrets
    assert r.returncode == 0
    seen = []
    for (kind, name), o in by.items():
        if (kind, name) == ("Secret", "ssh-agent-keys"):
            continue
        text = json.dumps(o)
        if kind == "Secret":
            text += "".join(base64.b64decode(v).decode(errors="replace") for v in o["data"].values())
        seen += [(kind, name) for s in sentinels if s in text]
        # (the session CA's key is a PRIVATE KEY too, in mitm-certs: not one of these)
        assert "OPENSSH PRIVATE KEY" not in text and "RSA PRIVATE KEY" not in text, (kind, name)
    assert seen == []
    # the holder mounts the keys; nothing the agent pod refers to holds them
    agent = json.dumps(by[("Pod", "agent")])
    assert "ssh-agent-keys" not in agent and "ssh-agent-keys" not in json.dumps(by[("Pod", "mitm")])
    assert "ssh-agent-keys" in json.dumps(by[("Pod", "ssh-agent")])
    keys = by[("Secret", "ssh-agent-keys")]["data"]
    assert all(s in "".join(base64.b64decode(v).decode() for v in keys.values()) for s in sentinels)
    # neither the client's output nor the daemon's log, and not when the secrets are redacted
    r2 = env.run("claude", "--dry-run", "--image", "example/agent:1", "--ssh-key-dir", str(k), check=0)
    for text in (r.stderr, r2.stdout, r2.stderr, env.daemon.logs()):
        assert not [s for s in sentinels if s in text]
        assert "OPENSSH PRIVATE KEY" not in text and "RSA PRIVATE KEY" not in text
    assert json.loads(r2.stdout)["items"]


@pytest.mark.parametrize("args,warnings,absent", [
    (["--ssh-key-dir", "H/keys"],
     ["--ssh-key-dir without --ssh-cidr: SSH egress stays denied, so the agent has keys but can reach "
      "nothing on TCP 22"], ["TCP 22 egress to", "holds no private keys"]),
    (["--ssh-key-dir", "H/keys", "--ssh-cidr", "10.0.0.0/8"], [],
     ["SSH egress stays denied", "TCP 22 egress to", "holds no private keys"]),
    (["--ssh-cidr", "10.0.0.0/8"], ["TCP 22 egress to 10.0.0.0/8 is open but no SSH keys are mounted"],
     ["SSH egress stays denied"]),
    (["--ssh-key-dir", "H/keys-none", "--ssh-cidr", "10.0.0.0/8"],
     ["--ssh-key-dir H/keys-none holds no private keys: no ssh-agent relay started"],
     ["SSH egress stays denied", "TCP 22 egress to"]),
])
def test_ssh_warnings(env, args, warnings, absent):
    h = str(env.home)
    args = [a.replace("H", h, 1) if a.startswith("H") else a for a in args]
    by, names, r = dry(env, *args)
    assert r.returncode == 0, r.stderr
    for w in warnings:
        assert w.replace("H/", h + "/") in r.stderr, r.stderr
        assert w.replace("H/", h + "/") in env.daemon.logs()
    for a in absent:
        assert a not in r.stderr
    with_keys = "H/keys" in " ".join(a.replace(h, "H") for a in args).split()
    ssh_names = {"Secret/ssh-agent-keys", "Secret/ssh-pub", "Pod/ssh-agent", "Service/ssh-agent",
                 "NetworkPolicy/ssh-agent-policy"}
    assert (ssh_names <= set(names)) == with_keys and (ssh_names & set(names) == set()) == (not with_keys)
    agent = json.dumps(by[("Pod", "agent")])
    assert ("SSH_AUTH_SOCK" in agent) == with_keys and ("ssh-agent-relay" in agent) == with_keys


def test_ssh_keygen_reason_is_in_the_message(env):
    for d, why in (("keys-pass", "incorrect passphrase supplied to decrypt private key"),
                   ("keys-bad", None)):
        [key] = [p for p in (env.home / d).iterdir() if p.suffix != ".pub"]
        if why is None:  # the wording varies with OpenSSH's version: ask it
            own = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True,
                                 stdin=subprocess.DEVNULL, env=dict(os.environ, SSH_ASKPASS_REQUIRE="never"),
                                 start_new_session=True)
            why = own.stderr.strip().splitlines()[0].replace("Enter passphrase: ", "").strip()
            why = why.removeprefix(f'Load key "{key}": ')
        r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--ssh-key-dir", str(env.home / d))
        assert r.returncode != 0 and r.stdout == ""
        # the daemon's whole sentence: the key by its name and its path on this machine, ssh-keygen's
        # reason, the advice; no prompt, no path of uplink's own making
        [line] = [l for l in r.stderr.splitlines() if "could not load SSH key" in l]
        assert line.endswith(f'could not load SSH key {key.name}: Load key "{key}": {why}. The key must be a '
                             "valid, passphraseless private key (the ssh-agent holder cannot ask for a "
                             "passphrase)"), line
        assert "Enter passphrase" not in line and "/dev/" not in line, line
    assert "secret-pass" not in env.daemon.logs()


def test_ssh_public_half_is_derived_from_the_bytes_read(env):
    """ssh-keygen gets the key as uplinkd read it (a 0600 memory file), not the path: a key
    that others may read on disk is not refused for its mode, and its half is the right one."""
    k = env.home / "keys-open"
    k.mkdir()
    shutil.copy(env.home / "keys" / "id_ed25519", k / "id_ed25519")
    (k / "id_ed25519").chmod(0o644)
    by, _, r = dry(env, "--ssh-key-dir", str(k))
    assert r.returncode == 0, r.stderr
    (k / "id_ed25519").chmod(0o600)
    assert secret(by, "ssh-pub", "id_ed25519.pub") == derived_pub(k / "id_ed25519")


@pytest.mark.parametrize("args,cwd,held", [
    (["--mount-ro", "H"], None, True),
    (["--mount-ro", "H/.ssh"], None, True),
    (["--mount-rw", "H/.ssh"], None, True),
    (["--add-dir", "H/.ssh"], None, True),
    ([], "H/.ssh", True),
    (["--mount-ro", "H/.ssh/config"], None, False),
])
def test_ssh_key_dir_refuses_a_host_path_holding_dot_ssh(env, args, cwd, held):
    """The public files are mounted at ~/.ssh/<name>: never inside a hostPath (the runtime would
    create them in the host's ~/.ssh), never onto a file the user mounts there."""
    h = str(env.home)
    dot_ssh = env.home / ".ssh"
    dot_ssh.mkdir()
    (dot_ssh / "config").write_text("Host *\n")
    (dot_ssh / "known_hosts").write_text("h ssh-ed25519 AAAA\n")
    args = [a.replace("H", h, 1) if a.startswith("H") else a for a in args]
    where = cwd.replace("H", h, 1) if cwd else None
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--ssh-key-dir", f"{h}/keys", *args,
                cwd=where)
    assert r.returncode != 0 and r.stdout == "", r.stdout
    what = "the working folder" if cwd else "a mount of"
    path = where or args[-1]
    if held:
        want = (f"--ssh-key-dir cannot be used with {what} {path}: it holds {h}/.ssh, where the public keys "
                "are mounted file by file, and the container runtime would create them in your own ~/.ssh "
                "(and show the agent any private key in it); mount a folder that does not hold ~/.ssh")
    else:
        want = f"--ssh-key-dir cannot be used with {what} {path}: uplink mounts config from the key folder there"
    assert want in r.stderr, r.stderr
    # without keys nothing is mounted in ~/.ssh, and the same session is fine
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--ssh-key-dir", f"{h}/keys-none", *args,
                cwd=where)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("where", ["in-project", "mount-dir", "mount-key", "mount-parent"])
def test_ssh_key_dir_seen_through_a_mount_or_the_working_folder_is_refused(env, where):
    """The keys stay with the holder: not when the agent sees the key folder anyway."""
    h = env.home
    if where == "in-project":
        keys = env.project / "keys"
        shutil.copytree(h / "keys", keys)
        args, path, what = [], str(env.project), "the working folder"
    else:
        keys = h / "vault" / "keys"
        shutil.copytree(h / "keys", keys)
        path = {"mount-dir": keys, "mount-key": keys / "id_ed25519", "mount-parent": h / "vault"}[where]
        args, what = ["--mount-ro", str(path)], "a mount of"
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--ssh-key-dir", str(keys), *args)
    assert r.returncode != 0 and r.stdout == ""
    assert (f"--ssh-key-dir {keys} is seen through {what} {path}: its private keys would reach the agent "
            "pod there") in r.stderr, r.stderr


def test_ssh_key_dir_allows_a_mount_beside_its_files(env):
    dot_ssh = env.home / ".ssh"
    dot_ssh.mkdir()
    (dot_ssh / "known_hosts").write_text("h ssh-ed25519 AAAA\n")
    by, _, r = dry(env, "--ssh-key-dir", str(env.home / "keys"), "--mount-ro", str(dot_ssh / "known_hosts"))
    assert r.returncode == 0, r.stderr
    assert agent_mounts(by) == {"mount-0": (str(dot_ssh / "known_hosts"), "File", str(dot_ssh / "known_hosts"), True)}


def test_ssh_key_dir_refused_as_root(env):
    """The holder runs as the host uid and must not be root; a key dir without keys is fine."""
    env.daemon.stop()
    env.daemon.env.pop("UPLINK_DEBUG_UID")
    env.daemon.start()
    wait_for(lambda: env.daemon.client("status", "--json").stdout.find('"state": "ready"') >= 0,
             what="the deploy cluster to sync")
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--ssh-key-dir", str(env.home / "keys"))
    assert r.returncode != 0 and r.stdout == ""
    assert "--ssh-key-dir is unsupported when running uplinkd as root" in r.stderr, r.stderr
    by, _, r = dry(env, "--ssh-key-dir", str(env.home / "keys-none"))
    assert r.returncode == 0 and ("Pod", "ssh-agent") not in by


def test_ssh_session_waits_for_the_holder_and_maps_its_service(env):
    sid, r = run_detached(env, "--ssh-key-dir", str(env.home / "keys"), "--ssh-cidr", "10.0.0.0/8")
    ns = f"agent-uplink-{sid}"
    assert env.session(sid)["state"] == "RUNNING"
    assert "waiting for the mitm, ssh-agent and agent pods" in r.stderr
    holder = env.fk.get("Pod", ns, "ssh-agent")
    assert holder["status"]["phase"] == "Running"
    agent = env.fk.get("Pod", ns, "agent")
    ips = {s: env.fk.get("Service", ns, s)["spec"]["clusterIP"] for s in ("mitm", "ssh-agent")}
    assert ips["mitm"] != ips["ssh-agent"]
    assert agent["spec"]["hostAliases"] == [{"ip": ips["mitm"], "hostnames": ["mitm"]},
                                            {"ip": ips["ssh-agent"], "hostnames": ["ssh-agent"]}]
    # what the cluster holds: the keys in their Secret only, mounted by the holder only
    for sec in env.fk.list("Secret", ns):
        text = "".join(base64.b64decode(v).decode(errors="replace") for v in (sec.get("data") or {}).values())
        assert ("OPENSSH PRIVATE KEY" in text) == (sec["metadata"]["name"] == "ssh-agent-keys")
    assert "ssh-agent-keys" not in json.dumps(agent)
    assert env.daemon.client("stop", sid).returncode == 0


def test_ssh_session_fails_when_the_holder_never_gets_ready(env):
    env.fk.settings(ready_delay=3)  # time to mark the holder before it would start
    proc = subprocess.Popen([*uplink_run_cmd(env), "claude", "--detach", "--registry", env.registry,
                             "--ssh-key-dir", str(env.home / "keys"), "--ssh-cidr", "10.0.0.0/8"],
                            cwd=env.project, env=run_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        def holder_ns():
            for n in env.fk.list("Namespace"):
                name = n["metadata"]["name"]
                if name.startswith("agent-uplink-") and env.fk.get("Pod", name, "ssh-agent"):
                    return name
            return None
        wait_for(holder_ns, timeout=30, what="the holder pod")
        k = subprocess.run(["kubectl", "--kubeconfig", env.fk.kubeconfig, "annotate", "pod", "ssh-agent",
                            "-n", holder_ns(), "fakekube/never-ready=true"], capture_output=True, text=True)
        assert k.returncode == 0, k.stderr
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, (out, err)
    assert "did not become ready within 8 s: pod ssh-agent is Pending, container ssh-agent waiting: " \
           "ImagePullBackOff" in err, err


# ---------------------------------------------------------------- the holder script, for real

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_serving(proc, what, connect):
    """Until `connect()` (a first connection or request) succeeds: a listening socket file
    exists from bind(), before listen() and before socat's chmod."""
    def ok():
        assert proc.poll() is None, f"{what} exited {proc.returncode}"
        return connect()
    wait_for(ok, what=what)


def start(cmd, env=None, log=None):
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc):
    if proc and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def secret_as_volume(secret, folder):
    """What kubelet makes of a Secret: files 0644 (here: readable by others, as defaultMode
    is not honoured by a plain folder) and hidden ..data entries the script must skip."""
    folder.mkdir()
    (folder / "..data").mkdir()
    (folder / "..data" / "junk").write_text("not a key")
    for name, v in secret["data"].items():
        (folder / name).write_bytes(base64.b64decode(v))
        (folder / name).chmod(0o644)


def need(*programs):
    """Skip, saying what to install, when the holder's tools are not on this machine."""
    missing = [p for p in programs if not shutil.which(p)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not found: apt-get install socat openssh-client "
                    "(.ci/run installs them)")


def test_holder_script_and_relay_serve_the_keys(env, tmp_path):
    need("socat", "ssh-agent", "ssh-add", "ssh-keygen")
    k = env.home / "keys"
    by, _, r = dry(env, "--ssh-key-dir", str(k))
    holder_cmd = pod_spec(by, "ssh-agent")["containers"][0]["command"]
    relay_cmd = pod_spec(by, "agent")["containers"][1]["command"]
    # As in the pods: a uid that is not root and has no passwd entry (when the test can).
    as_pod = ["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups"] \
        if os.getuid() == 0 and shutil.which("setpriv") else []
    work = env.tmp / "holder"  # the test's tmp_path is not reachable by another uid
    work.mkdir(mode=0o755)
    (work / "run").mkdir(mode=0o777)
    (work / "run").chmod(0o777)  # an emptyDir is world-writable
    keys = work / "keys"
    secret_as_volume(by[("Secret", "ssh-agent-keys")], keys)
    sock, relay_sock, port = work / "run" / "agent.sock", work / "run" / "relay.sock", free_port()
    # the exact script, with the pod's paths and port swapped for local ones
    assert holder_cmd[3:] == ["ssh-agent-holder", "/keys", "/run/ssh-agent/agent.sock", "8765"]
    cmd = as_pod + holder_cmd[:4] + [str(keys), str(sock), str(port)]
    relay = as_pod + [a.replace("/ssh-agent/agent.sock", str(relay_sock)).replace("ssh-agent:8765", f"127.0.0.1:{port}")
                      for a in relay_cmd]
    env_local = {k_: v for k_, v in os.environ.items() if k_ != "SSH_AUTH_SOCK"}
    # ssh-agent runs ssh-pkcs11-helper (here a stand-in that leaves a mark) only when it is
    # about to load a provider: the code the agent pod must never get run in the holder.
    helper_ran = work / "run" / "pkcs11-helper-ran"
    helper = work / "pkcs11-helper"
    helper.write_text(f'#!/bin/sh\ntouch "{helper_ran}"\nexec /usr/lib/openssh/ssh-pkcs11-helper "$@"\n')
    helper.chmod(0o755)
    log = open(tmp_path / "holder.log", "w+")
    holder = relay_proc = None
    try:
        holder = start(cmd, env=dict(env_local, SSH_PKCS11_HELPER=str(helper)), log=log)

        def holder_listens():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        wait_serving(holder, "the holder's socat", holder_listens)  # serving once socat listens
        # the readiness probe, against the holder's socket
        probe = subprocess.run(["ssh-add", "-l"], env=dict(env_local, SSH_AUTH_SOCK=str(sock)),
                               capture_output=True, text=True, timeout=10)
        assert probe.returncode == 0, probe
        relay_proc = start(relay, env=env_local)

        def relay_answers():
            return subprocess.run(["ssh-add", "-l"], env=dict(env_local, SSH_AUTH_SOCK=str(relay_sock)),
                                  capture_output=True, timeout=10).returncode == 0
        wait_serving(relay_proc, "the relay", relay_answers)
        assert oct(relay_sock.stat().st_mode & 0o777) == "0o666"
        listed = subprocess.run(["ssh-add", "-l"], env=dict(env_local, SSH_AUTH_SOCK=str(relay_sock)),
                                capture_output=True, text=True, timeout=10)
        assert listed.returncode == 0, listed
        for name in ("id_ed25519", "deploy"):
            fp = subprocess.run(["ssh-keygen", "-l", "-f", str(k / name)], capture_output=True, text=True,
                                check=True).stdout.split()[1]
            assert fp in listed.stdout, (fp, listed.stdout)
        # and the agent signs through the relay (what ssh does with it)
        pub = base64.b64decode(by[("Secret", "ssh-pub")]["data"]["id_ed25519.pub"])
        (tmp_path / "id.pub").write_bytes(pub)
        (tmp_path / "msg").write_text("hello")
        sign = subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "file", "-f", str(tmp_path / "id.pub"),
                               str(tmp_path / "msg")], env=dict(env_local, SSH_AUTH_SOCK=str(relay_sock)),
                              capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
        assert sign.returncode == 0, sign.stderr
        # through the relay, the agent pod cannot have a PKCS#11 provider loaded (CVE-2023-38408):
        # any library in the default allow-list (/usr/lib/*) is refused before the helper starts
        lib = sorted(glob.glob("/usr/lib/*-linux-gnu*/lib*.so*") + glob.glob("/usr/lib/lib*.so*"))[0]
        add = subprocess.run(["ssh-add", "-s", lib], capture_output=True, text=True, timeout=10,
                             env=dict(env_local, SSH_AUTH_SOCK=str(relay_sock), SSH_ASKPASS_REQUIRE="never"),
                             stdin=subprocess.DEVNULL, start_new_session=True)
        assert add.returncode != 0 and "agent refused operation" in add.stderr, add
        assert not helper_ran.exists(), f"the holder's ssh-agent started its PKCS#11 helper for {lib}"
        log.seek(0)
        out = log.read()
        assert "ssh-agent holds 2 key(s)" in out and "junk" not in out, out
    finally:
        stop(relay_proc)
        stop(holder)
        log.close()


def test_holder_script_fails_without_a_loadable_key(env, tmp_path):
    need("socat", "ssh-agent", "ssh-add")
    by, _, _ = dry(env, "--ssh-key-dir", str(env.home / "keys"))
    script = pod_spec(by, "ssh-agent")["containers"][0]["command"]
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "broken").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nbm9\n-----END OPENSSH PRIVATE KEY-----\n")
    p = subprocess.run(script[:4] + [str(keys), str(tmp_path / "s.sock"), str(free_port())],
                       capture_output=True, text=True, timeout=30, start_new_session=True)
    assert p.returncode == 1 and "could not load SSH key broken; skipping it" in p.stderr
    assert "no SSH keys could be loaded" in p.stderr


# ---------------------------------------------------------------- git

GIT_REWRITE = '[url "https://{h}/"]\n\tinsteadOf = git@{h}:\n\tinsteadOf = ssh://git@{h}/\n'


def git_mount(by):
    pod = by[("Pod", "agent")]["spec"]
    vols = [v for v in pod["volumes"] if v["name"] == "git-config"]
    mounts = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "git-config"]
    return vols, mounts


def test_git_identity_and_rewrites_reach_the_agent_as_the_include(env):
    (env.home / ".gitconfig").write_text('[user]\n\tname = "Ada \\"Q\\" L#v"\n\temail = ada@example.com\n')
    by, names, _ = dry(env, "--git-https-rewrite", "git.example.com", "--git-https-rewrite", "code.corp:8443")
    assert secret(by, "git-config", "agent-uplink.inc") == (
        '[user]\n\tname = "Ada \\"Q\\" L#v"\n\temail = "ada@example.com"\n\n'
        + GIT_REWRITE.format(h="git.example.com") + "\n" + GIT_REWRITE.format(h="code.corp:8443"))
    vols, mounts = git_mount(by)
    assert vols == [{"name": "git-config", "secret": {"secretName": "git-config"}}]
    assert mounts == [{"name": "git-config", "mountPath": "/etc/gitconfig.d/agent-uplink.inc",
                       "subPath": "agent-uplink.inc", "readOnly": True}]
    # created before the policies and the pods; never mounted by the mitm
    assert names.index("Secret/git-config") < names.index("NetworkPolicy/default-deny")
    assert "git-config" not in json.dumps(by[("Pod", "mitm")])


def test_no_git_identity_leaves_only_the_rewrites(env):
    (env.home / ".gitconfig").write_text("[user]\n\tname = Ada\n")
    by, _, _ = dry(env, "--no-git-identity", "--git-https-rewrite", "git.example.com")
    assert secret(by, "git-config", "agent-uplink.inc") == GIT_REWRITE.format(h="git.example.com")
    # identity only: the name alone
    by, _, _ = dry(env)
    assert secret(by, "git-config", "agent-uplink.inc") == '[user]\n\tname = "Ada"\n'


def test_empty_overlay_makes_no_secret_and_no_mount(env):
    by, names, r = dry(env)  # no ~/.gitconfig
    assert ("Secret", "git-config") not in by and git_mount(by) == ([], [])
    assert "warning" in r.stderr and ("no git user.name or user.email on this machine (git config --global): "
                                      "the agent's commits will be unattributed") in r.stderr
    (env.home / ".gitconfig").write_text("[user]\n\tname = Ada\n")
    by, _, r = dry(env, "--no-git-identity")
    assert ("Secret", "git-config") not in by and git_mount(by) == ([], [])
    assert "git" not in r.stderr.lower()


def test_git_missing_from_the_daemons_path_is_a_warning_not_a_failure(env):
    (env.home / ".gitconfig").write_text("[user]\n\tname = Ada\n")
    assert env.daemon.stop() == 0
    env.daemon.env["PATH"] = str(env.tmp / "no-tools")  # an empty folder: no git
    (env.tmp / "no-tools").mkdir()
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")
    by, _, r = dry(env, "--git-https-rewrite", "git.example.com")
    assert secret(by, "git-config", "agent-uplink.inc") == GIT_REWRITE.format(h="git.example.com")
    assert "git is not installed (or not on uplinkd's PATH): the agent gets no git identity" in r.stderr


# ---------------------------------------------------------------- mitm options

def test_mitm_ca_cert_is_added_to_the_public_roots(env):
    h = env.home
    by, names, _ = dry(env, "--mitm-ca-cert", str(h / "ca-a.pem"), "--mitm-ca-cert", "../ca-b.pem")
    assert secret(by, "upstream-ca", "bundle.pem") == PEM_A + "\n" + PEM_B
    args = mitm_args(by)
    assert args[args.index("uplink_extra_ca=/upstream-ca/bundle.pem") - 1] == "--set"
    assert not [a for a in args if a.startswith("ssl_verify_upstream_trusted_ca")]
    main = by[("Pod", "mitm")]["spec"]["containers"][0]
    assert {"name": "upstream-ca", "mountPath": "/upstream-ca", "readOnly": True} in main["volumeMounts"]
    assert {"name": "upstream-ca", "secret": {"secretName": "upstream-ca"}} in by[("Pod", "mitm")]["spec"]["volumes"]
    assert "upstream-ca" not in json.dumps(by[("Pod", "agent")])
    assert names.index("Secret/upstream-ca") < names.index("NetworkPolicy/default-deny")


QUIET = ["flow_detail=0", "termlog_verbosity=error"]  # the pod's own: no flow in the log


@pytest.mark.parametrize("flag,options,warning", [
    ([], QUIET, None),
    (["--mitm-insecure"], QUIET + ["ssl_insecure=true"],
     "--mitm-insecure: the mitm does not verify upstream TLS certificates"),
    (["--mitm-debug"], ["flow_detail=3", "termlog_verbosity=debug"],  # in place, once
     "--mitm-debug: the mitm logs request and response headers and bodies, including the "
     "credentials it injects; its log may hold secrets"),
])
def test_mitm_switches(env, flag, options, warning):
    by, _, r = dry(env, *flag)
    args = mitm_args(by)
    extra = [a for a in args if a.startswith(("ssl_insecure", "termlog_verbosity", "flow_detail", "uplink_extra_ca"))]
    assert extra == options
    for o in options:
        assert args[args.index(o) - 1] == "--set"
    if warning:
        assert warning in r.stderr
    else:
        assert "--mitm-" not in r.stderr
    assert ("Secret", "upstream-ca") not in by


# ---------------------------------------------------------------- every validation message

ERRORS = [
    # mounts (H = home, P = the project, the working folder, T = outside home)
    (["--add-dir", "H/missing"], "--add-dir H/missing does not exist or is not a directory"),
    (["--add-dir", "H/notes.txt"], "--add-dir H/notes.txt does not exist or is not a directory"),
    (["--add-dir", "T/outside"], "--add-dir T/outside must be under H"),
    (["--add-dir", "P"], "--add-dir P is the working directory, already mounted"),
    (["--add-dir", "H"], "--add-dir paths overlap: P and H are nested; mount non-overlapping folders only"),
    (["--add-dir", "H/nest", "--add-dir", "H/nest/inner"],
     "--add-dir paths overlap: H/nest and H/nest/inner are nested; mount non-overlapping folders only"),
    (["--mount-rw", "H/missing"], "--mount-rw H/missing does not exist"),
    (["--mount-ro", "H/missing"], "--mount-ro H/missing does not exist"),
    (["--mount-rw", "T/outside"], "--mount-rw T/outside must be under H"),
    (["--mount-ro", "T/outside"], "--mount-ro T/outside must be under H"),
    (["--mount-rw", "P"], "--mount-rw P is the working directory, already mounted"),
    (["--mount-ro", "P"], "--mount-ro P is the working directory, already mounted"),
    (["--mount-rw", "H/docs", "--mount-ro", "H/link/../docs"],
     "H/docs is requested both read-write and read-only; pick one"),
    (["--add-dir", "H/docs", "--mount-ro", "H/docs"],
     "H/docs is requested both read-write and read-only; pick one"),
    (["--mount-rw", "H/nest", "--mount-rw", "H/nest/inner"],
     "writable mounts overlap: H/nest and H/nest/inner are nested; mount non-overlapping folders only"),
    (["--mount-rw", "H"], "writable mounts overlap: P and H are nested; mount non-overlapping folders only"),
    (["--add-dir", "H/nest", "--mount-rw", "H/nest/inner"],
     "writable mounts overlap: H/nest and H/nest/inner are nested; mount non-overlapping folders only"),
    # SSH
    (["--ssh-cidr", "nope"], "--ssh-cidr 'nope' is not a valid CIDR: not an IPv4 or IPv6 address"),
    (["--ssh-cidr", "10.0.0.256"], "--ssh-cidr '10.0.0.256' is not a valid CIDR: not an IPv4 or IPv6 address"),
    (["--ssh-cidr", "10.0.0.0/33"], "--ssh-cidr '10.0.0.0/33' is not a valid CIDR: the prefix length must be 0 to 32"),
    (["--ssh-cidr", "10.0.0.0/"], "--ssh-cidr '10.0.0.0/' is not a valid CIDR: the prefix length must be 0 to 32"),
    (["--ssh-cidr", "fd00::/129"], "--ssh-cidr 'fd00::/129' is not a valid CIDR: the prefix length must be 0 to 128"),
    (["--ssh-key-dir", "H/missing"], "--ssh-key-dir H/missing does not exist or is not a directory"),
    (["--ssh-key-dir", "H/notes.txt"], "--ssh-key-dir H/notes.txt does not exist or is not a directory"),
    (["--ssh-key-dir", "H/keys-dot"],
     "--ssh-key-dir: the private key .hidden starts with '.', and the ssh-agent holder skips hidden "
     "files; rename it"),
    (["--ssh-key-dir", "H/keys-pass"],
     "could not load SSH key id_pass: Load key"),
    (["--ssh-key-dir", "H/keys-bad"],
     "could not load SSH key broken: Load key"),
    # git
    (["--git-https-rewrite", "bad host"], "invalid --git-https-rewrite host: 'bad host'"),
    (["--git-https-rewrite", "git.example.com:port"], "invalid --git-https-rewrite host: 'git.example.com:port'"),
    (["--git-https-rewrite", "https://git.example.com"], "invalid --git-https-rewrite host: 'https://git.example.com'"),
    # mitm
    (["--mitm-ca-cert", "H/missing.pem"], "--mitm-ca-cert H/missing.pem: file not found"),
    (["--mitm-ca-cert", "H/ca-a.pem", "--mitm-ca-cert", "H/not-a-cert.pem"],
     "--mitm-ca-cert H/not-a-cert.pem: no PEM certificate found"),
]


def subst(env, s):
    for k, v in (("P", env.project), ("H", env.home), ("T", env.tmp)):
        if s.startswith(k) and (len(s) == 1 or s[1] == "/"):
            return str(v) + s[1:]
    return s


@pytest.mark.parametrize("args,message", ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_validation_messages(env, args, message):
    args = [subst(env, a) for a in args]
    msg = " ".join(subst(env, w) if w[:1] in "PHT" else w for w in message.split(" "))
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", *args)
    assert r.returncode != 0 and r.stdout == "", (r.returncode, r.stdout)
    assert msg in r.stderr, (msg, r.stderr)
    assert env.docker_calls_list() == []
    assert not [n for n in env.fk.list("Namespace") if n["metadata"]["name"].startswith("agent-uplink-")]


def test_all_extras_together_are_accepted_by_the_api_server(env, tmp_path):
    h = env.home
    (h / ".gitconfig").write_text("[user]\n\tname = Ada\n\temail = ada@example.com\n")
    by, names, _ = dry(env, "--add-dir", str(h / "other"), "--mount-rw", str(h / "notes.txt"),
                       "--mount-ro", str(h / "docs"), "--ssh-cidr", "10.0.0.0/8",
                       "--ssh-key-dir", str(h / "keys"),
                       "--git-https-rewrite", "git.example.com", "--mitm-ca-cert", str(h / "ca-b.pem"),
                       "--mitm-insecure", "--mitm-debug")
    items = list(by.values())
    assert {"Secret/git-config", "Secret/upstream-ca", "Secret/ssh-agent-keys", "Pod/ssh-agent"} <= set(names)
    env.fk.create("Namespace", None, {"metadata": {"name": items[0]["metadata"]["name"]}})
    stream = "\n".join(json.dumps(i) for i in items[1:])
    k = subprocess.run(["kubectl", "--kubeconfig", env.fk.kubeconfig, "apply", "--dry-run=server",
                        "-f", "-"], input=stream, capture_output=True, text=True, timeout=60)
    assert k.returncode == 0, k.stderr


# ---------------------------------------------------------------- --kube-context

def kube_files(env):
    fk = env.fk
    return {"token": open(fk.paths["token"]).read().strip(),
            "cert": open(fk.paths["client.crt"]).read(), "key": open(fk.paths["client.key"]).read(),
            "ca": open(fk.paths["ca.crt"]).read()}


def rules_json(by):
    return json.loads(secret(by, "rules-json", "rules.json"))


def agent_referenced(by):
    """The agent pod and every ConfigMap and Secret it mounts, as JSON text."""
    pod = by[("Pod", "agent")]
    out = [json.dumps(pod)]
    for v in pod["spec"]["volumes"]:
        for kind, key, name in (("ConfigMap", "configMap", "name"), ("Secret", "secret", "secretName")):
            if key in v:
                o = by.get((kind, v[key][name]))
                if o is not None:
                    out.append(json.dumps(o))
                    out += [base64.b64decode(x).decode("latin-1")
                            for x in (o.get("data") or {}).values() if kind == "Secret"]
    return "\n".join(out)


def check_agent_kubeconfig(env, by, ctx, user, session_ca):
    import yaml
    cfg = yaml.safe_load(by[("ConfigMap", "kube-config")]["data"]["config"])
    assert cfg == {
        "apiVersion": "v1", "kind": "Config", "current-context": ctx, "preferences": {},
        "clusters": [{"name": "fakekube", "cluster": {
            "server": env.fk.url, "certificate-authority-data": base64.b64encode(session_ca.encode()).decode()}}],
        "users": [{"name": user, "user": {"token": "uplink-placeholder"}}],
        "contexts": [{"name": ctx, "context": {"cluster": "fakekube", "user": user}}]}
    pod = by[("Pod", "agent")]["spec"]
    main = pod["containers"][0]
    assert {"name": "KUBECONFIG", "value": "/etc/uplink/kube/config"} in main["env"]
    assert {"name": "kube-config", "mountPath": "/etc/uplink/kube", "readOnly": True} in main["volumeMounts"]
    assert {"name": "kube-config", "configMap": {"name": "kube-config"}} in pod["volumes"]


KUBE_CASES = [
    # context, the rule's inject, client certificate Secret?
    ("fake-token", lambda f: {"headers": {"Authorization": "Bearer " + f["token"]}}, False),
    ("local-k8s-admin", lambda f: {"remove": ["Authorization"]}, True),
]


@pytest.mark.parametrize("ctx,inject,certs", KUBE_CASES, ids=[c for c, _, _ in KUBE_CASES])
def test_kube_context_objects(env, ctx, inject, certs):
    f = kube_files(env)
    by, names, r = dry(env, "--expose-deploy-cluster", "--kube-context", ctx, "--mitm-ca-cert", str(env.home / "ca-b.pem"))
    session_ca = by[("ConfigMap", "uplink-ca")]["data"]["ca.crt"]
    check_agent_kubeconfig(env, by, ctx, ctx, session_ca)
    rules = rules_json(by)["rules"]
    kube = [x for x in rules if x["layer"] == "kube"]
    assert kube == [{"name": "kube-" + ctx, "layer": "kube", "source": "kubeconfig:" + ctx,
                     "hosts": ["127\\.0\\.0\\.1"],
                     # kubectl's methods, never TRACE (its answer would echo the token)
                     "methods": ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"],
                     "port": env.fk.port, "inject": inject(f)}]
    assert rules.index(kube[0]) == 1  # after the agent's auth rule, before everything else
    # the cluster CA joins the --mitm-ca-cert files in the upstream bundle
    assert secret(by, "upstream-ca", "bundle.pem") == PEM_B + f["ca"]
    args = mitm_args(by)
    assert "uplink_extra_ca=/upstream-ca/bundle.pem" in args
    mitm = by[("Pod", "mitm")]["spec"]
    if certs:
        assert secret(by, "kube-client-certs", "127.0.0.1.pem") == f["cert"] + f["key"]
        assert by[("Secret", "kube-client-certs")]["data"].keys() == {"127.0.0.1.pem"}
        assert args[args.index("client_certs=/kube-client-certs") - 1] == "--set"
        assert {"name": "kube-client-certs", "mountPath": "/kube-client-certs", "readOnly": True} in \
            mitm["containers"][0]["volumeMounts"]
        assert {"name": "kube-client-certs", "secret": {"secretName": "kube-client-certs"}} in mitm["volumes"]
    else:
        assert ("Secret", "kube-client-certs") not in by
        assert not [a for a in args if a.startswith("client_certs")]
    assert names.index("ConfigMap/kube-config") < names.index("Pod/agent")
    # nothing the agent pod sees holds the token, the key or the client certificate
    seen = agent_referenced(by)
    for s in (f["token"], f["key"].strip(), f["cert"].strip()):
        assert s not in seen
    assert "kube-client-certs" not in json.dumps(by[("Pod", "agent")])
    # fakekube listens on 127.0.0.1, which the agent's NO_PROXY covers: said, not refused
    assert (f"--kube-context {ctx}: the API server 127.0.0.1 is in the agent's NO_PROXY") in r.stderr


def test_kube_context_from_kubeconfig_flag_and_config_file(env, tmp_path):
    f = kube_files(env)
    other = env.home / "kube.yaml"
    other.write_text(open(env.fk.kubeconfig).read())
    # --kubeconfig beats the client's $KUBECONFIG, which names nothing here
    by, _, _ = dry(env, "--expose-deploy-cluster", "--kube-context", "fake-token", "--kubeconfig", "../kube.yaml")
    assert rules_json(by)["rules"][1]["inject"]["headers"]["Authorization"] == "Bearer " + f["token"]
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--expose-deploy-cluster", "--kube-context", "fake-token",
                env={"KUBECONFIG": str(env.home / "nothing.yaml")})
    assert r.returncode != 0 and "no kubeconfig found at " + str(env.home / "nothing.yaml") in r.stderr
    # without --kubeconfig, the client's $KUBECONFIG (relative elements made absolute), not
    # the daemon's: here only the client's names the context "mine"
    mine = env.project / "mine.yaml"
    mine.write_text(open(env.fk.kubeconfig).read().replace("fake-token", "mine"))
    by, _, _ = dry(env, "--expose-deploy-cluster", "--kube-context", "mine", env_vars={"KUBECONFIG": "missing.yaml:mine.yaml"})
    assert rules_json(by)["rules"][1]["name"] == "kube-mine"
    assert "mine" not in open(env.fk.kubeconfig).read()
    # a config file names contexts and their kubeconfig (relative to the file)
    (env.project / ".uplink.yaml").write_text("kube_context: [fake-token]\nkubeconfig: ../kube.yaml\n")
    assert env.daemon.client("trust", str(env.project / ".uplink.yaml")).returncode == 0
    r = env.run("claude", "--dry-run", "--show-secrets", "--image", "example/agent:1", "--expose-deploy-cluster",
                env={"KUBECONFIG": str(env.home / "nothing.yaml")}, check=0)
    by = {(i["kind"], i["metadata"]["name"]): i for i in json.loads(r.stdout)["items"]}
    assert rules_json(by)["rules"][1]["name"] == "kube-fake-token"
    assert ("ConfigMap", "kube-config") in by


def test_kube_rules_survive_no_default_rules(env):
    by, _, _ = dry(env, "--expose-deploy-cluster", "--kube-context", "fake-token", "--no-default-rules")
    assert [x["name"] for x in rules_json(by)["rules"]] == ["kube-fake-token"]


def test_no_kube_context_no_kube_objects(env):
    by, names, _ = dry(env)
    assert not [n for n in names if "kube" in n]
    assert "KUBECONFIG" not in json.dumps(by[("Pod", "agent")])



def write_kubeconfig(env, name, cluster, user, context=None):
    ca = base64.b64encode(open(env.fk.paths["ca.crt"], "rb").read()).decode()
    import yaml
    doc = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "cl", "cluster": {k: (v.replace("CA", ca) if isinstance(v, str) else v)
                                                   for k, v in cluster.items()}}],
           "users": [{"name": "u", "user": user}],
           "contexts": [{"name": "c", "context": context or {"cluster": "cl", "user": "u"}},
                        {"name": "twin", "context": {"cluster": "cl", "user": "u"}}]}
    p = env.home / name
    p.write_text(yaml.safe_dump(doc))
    return p


OK_CLUSTER = {"server": "https://api.example.test:6443", "certificate-authority-data": "CA"}
KUBE_ERRORS = [
    # cluster, user, context, message after "--kube-context c: ", in the order of the checks
    (OK_CLUSTER, {"token": "uplink-sentinel-k"}, {"cluster": "gone", "user": "u"}, "no cluster found in kubeconfig"),
    (OK_CLUSTER, {"token": "uplink-sentinel-k"}, {"cluster": "cl"}, "no user found in kubeconfig"),
    ({"certificate-authority-data": "CA"}, {"token": "uplink-sentinel-k"}, None, "cluster has no server URL"),
    ({"server": "https://a.test", "insecure-skip-tls-verify": True}, {"token": "uplink-sentinel-k"}, None,
     "insecure-skip-tls-verify is not supported; a cluster CA (certificate-authority or "
     "certificate-authority-data) is required"),
    ({"server": "https://a.test"}, {"token": "uplink-sentinel-k"}, None,
     "cluster has no certificate-authority-data (or certificate-authority file); a cluster CA is required"),
    (OK_CLUSTER, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}}, None,
     "exec and auth-provider credentials are not supported: uplink cannot run the plugin inside "
     "the proxy; use a static bearer token or a client certificate instead"),
    (OK_CLUSTER, {"auth-provider": {"name": "oidc"}}, None,
     "exec and auth-provider credentials are not supported: uplink cannot run the plugin inside "
     "the proxy; use a static bearer token or a client certificate instead"),
    (OK_CLUSTER, {"username": "admin", "password": "uplink-sentinel-pw"}, None,
     "username/password credentials are not supported; use a static bearer token or a client "
     "certificate instead"),
    (OK_CLUSTER, {}, None, "no supported credentials found; expected token, tokenFile, or "
     "client-certificate-data + client-key-data"),
    (OK_CLUSTER, {"tokenFile": "/nonexistent/token"}, None, "tokenFile '/nonexistent/token' not found"),
]


@pytest.mark.parametrize("cluster,user,context,message", KUBE_ERRORS, ids=[m[:40] for *_, m in KUBE_ERRORS])
def test_kube_context_refusals(env, cluster, user, context, message):
    p = write_kubeconfig(env, "bad.yaml", cluster, user, context)
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--expose-deploy-cluster", "--kube-context", "c",
                "--kubeconfig", str(p))
    assert r.returncode != 0 and r.stdout == ""
    assert "--kube-context c: " + message in r.stderr, r.stderr
    assert "uplink-sentinel" not in r.stderr + env.daemon.logs()
    assert env.docker_calls_list() == []


def test_kube_context_unknown_and_same_host(env):
    p = write_kubeconfig(env, "two.yaml", OK_CLUSTER, {"token": "uplink-sentinel-k"})
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--expose-deploy-cluster", "--kube-context", "nope",
                "--kubeconfig", str(p))
    assert r.returncode != 0
    assert f"--kube-context nope: kubeconfig {p} has no context 'nope'; known contexts: c, twin" in r.stderr
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--expose-deploy-cluster", "--kube-context", "c",
                "--expose-deploy-cluster", "--kube-context", "twin", "--kubeconfig", str(p))
    assert r.returncode != 0
    assert ("--kube-context twin: contexts 'twin' and 'c' both resolve to API server host "
            "'api.example.test'; they cannot both be selected") in r.stderr
    assert "uplink-sentinel" not in r.stderr + env.daemon.logs()


def test_the_deploy_cluster_is_not_exposed_unless_asked(env):
    """Its contexts could read the session's own Secrets: refused, by URL or by another name
    of the same server (the same cluster CA); --expose-deploy-cluster allows it, with a warning."""
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--kube-context", "fake-token", check=1)
    assert "--kube-context fake-token: this is the cluster uplink runs the session in" in r.stderr
    assert "pass --expose-deploy-cluster" in r.stderr
    # another name for the same server: caught by its CA
    kc = yaml.safe_load(open(env.fk.kubeconfig))
    for c in kc["clusters"]:
        c["cluster"]["server"] = c["cluster"]["server"].replace("127.0.0.1", "localhost")
    (env.home / "alias.yaml").write_text(yaml.safe_dump(kc))
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--kube-context", "fake-token",
                "--kubeconfig", str(env.home / "alias.yaml"), check=1)
    assert "this is the cluster uplink runs the session in" in r.stderr
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--kube-context", "fake-token",
                "--expose-deploy-cluster", check=0)
    assert "--expose-deploy-cluster: --kube-context fake-token reaches the cluster this session runs in" \
        in r.stderr
    # a config file cannot say it
    (env.project / ".uplink.yaml").write_text("expose_deploy_cluster: true\n")
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", check=1)
    assert "unknown key 'expose_deploy_cluster'" in r.stderr
# ---------------------------------------------------------------- AWS profiles

def dummy_akid(profile):
    return "AKIA" + hashlib.sha256(profile.encode()).hexdigest()[:16].upper()


DUMMY_SECRET = "DUMMYsecret" + "0" * 28 + "A"


def dummy_ini(*profiles):
    return "".join(f"[{p}]\naws_access_key_id = {dummy_akid(p)}\naws_secret_access_key = {DUMMY_SECRET}\n\n"
                   for p in profiles)


def aws_objects(by):
    cm = by.get(("ConfigMap", "agent-aws-creds"))
    sec = by.get(("Secret", "aws-sigv4-creds"))
    return (cm["data"]["credentials"] if cm else None,
            json.loads(base64.b64decode(sec["data"]["creds.json"])) if sec else None)


def agent_side(by):
    """Everything the agent pod references: itself and the ConfigMaps and Secrets it mounts."""
    pod = by[("Pod", "agent")]
    text = json.dumps(pod)
    for v in pod["spec"]["volumes"]:
        if "secret" in v:
            o = by[("Secret", v["secret"]["secretName"])]
            text += json.dumps(o) + "".join(base64.b64decode(x).decode(errors="replace")
                                            for x in o.get("data", {}).values())
        if "configMap" in v:
            text += json.dumps(by[("ConfigMap", v["configMap"]["name"])])
    return text


AWS_CASES = [
    # flags, the profiles in order
    (["--aws-profiles", "dev"], ["dev"]),
    (["-a", "dev", "--aws-profiles", "prod.eu_1 ops-2", "-a", "dev,prod.eu_1"], ["dev", "prod.eu_1", "ops-2"]),
    (["--aws-profiles", "A.b_C-9"], ["A.b_C-9"]),
]


@pytest.mark.parametrize("args,profiles", AWS_CASES, ids=[" ".join(a) for a, _ in AWS_CASES])
def test_aws_profiles_dummy_keys_for_the_agent_real_ones_for_the_mitm(env, args, profiles):
    by, names, r = dry(env, *args)
    ini, creds = aws_objects(by)
    assert ini == dummy_ini(*profiles)
    # one exported identity per profile, under its dummy key; the stand-in's values
    assert sorted(creds) == sorted(dummy_akid(p) for p in profiles)
    for p in profiles:
        c = creds[dummy_akid(p)]
        assert c["access_key_id"].startswith("ASIAREAL" + p.upper()[:8])
        assert c["secret_access_key"].startswith(f"SENTINELsecret/{p}/")
        assert c["session_token"].startswith(f"SENTINELtoken/{p}/")
    calls = env.aws_calls.read_text().splitlines()
    assert [c.split(" --profile ")[1].split()[0] for c in calls] == profiles
    assert all(c.startswith("configure export-credentials") and "--format process" in c for c in calls)
    # the agent mounts only the dummies, read-only, at ~/.aws/credentials
    pod = by[("Pod", "agent")]["spec"]
    assert {"name": "agent-aws-creds", "configMap": {"name": "agent-aws-creds"}} in pod["volumes"]
    assert {"name": "agent-aws-creds", "mountPath": f"{env.home}/.aws/credentials",
            "subPath": "credentials", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    assert "aws-sigv4-creds" not in json.dumps(by[("Pod", "agent")])
    assert "SENTINEL" not in agent_side(by)
    # the mitm mounts the real ones (the whole Secret, so that updates reach the file)
    args_ = mitm_args(by)
    assert args_[args_.index("uplink_aws_creds=/aws-creds/creds.json") - 1] == "--set"
    mitm = by[("Pod", "mitm")]["spec"]
    assert {"name": "aws-sigv4-creds", "mountPath": "/aws-creds", "readOnly": True} in mitm["containers"][0]["volumeMounts"]
    assert {"name": "aws-sigv4-creds", "secret": {"secretName": "aws-sigv4-creds"}} in mitm["volumes"]
    assert "agent-aws-creds" not in json.dumps(by[("Pod", "mitm")])
    # created before the policies and pods, the real keys first (render_extras_data())
    assert names.index("Secret/aws-sigv4-creds") < names.index("ConfigMap/agent-aws-creds") < \
        names.index("NetworkPolicy/default-deny")
    # nothing secret in what the client printed on stderr, or in the daemon's log
    assert "SENTINEL" not in r.stderr and "SENTINEL" not in env.daemon.logs()


def test_no_aws_profiles_no_aws_objects(env):
    by, names, _ = dry(env)
    assert aws_objects(by) == (None, None)
    assert not [a for a in mitm_args(by) if a.startswith("uplink_aws_creds")]
    assert not env.aws_calls.exists()


def test_aws_secret_is_redacted_without_show_secrets(env):
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "-a", "dev", check=0)
    by = {(i["kind"], i["metadata"]["name"]): i for i in json.loads(r.stdout)["items"]}
    assert by[("Secret", "aws-sigv4-creds")]["data"]["creds.json"].startswith("<redacted: ")
    assert "SENTINEL" not in r.stdout + r.stderr and "SENTINEL" not in env.daemon.logs()
    # the dummies are no secret: shown
    assert by[("ConfigMap", "agent-aws-creds")]["data"]["credentials"] == dummy_ini("dev")


def test_aws_profiles_without_a_rule_for_aws_warn(env):
    _, _, r = dry(env, "-a", "dev")
    warning = ("AWS profiles are set up, but no rule re-signs POST to AWS (sts.amazonaws.com): the "
               "proxy refuses requests made with the dummy keys under the read-only catch-all, so "
               "add a rules file naming the AWS hosts the agent needs (examples/rules/aws.yaml)")
    assert warning in r.stderr
    # the example the warning names is a valid rules file that silences it
    _, _, r = dry(env, "-a", "dev", "--rules", str(ROOT / "examples" / "rules" / "aws.yaml"))
    assert r.returncode == 0, r.stderr
    assert "no rule re-signs POST to AWS" not in r.stderr
    # a rule that takes POST but cannot re-sign (hosts '.*') does not silence it
    catch_all = env.tmp / "any-post.yaml"
    catch_all.write_text("rules:\n  - name: any-post\n    hosts: ['.*']\n    methods: [POST]\n")
    _, _, r = dry(env, "-a", "dev", "--rules", str(catch_all))
    assert "no rule re-signs POST to AWS" in r.stderr
    _, _, r = dry(env)
    assert "AWS profiles" not in r.stderr


def test_aws_profiles_from_config_files_and_the_agent(env):
    (env.project / ".uplink.yaml").write_text("aws_profiles: [cfg, dev]\n")
    assert env.daemon.client("trust", str(env.project / ".uplink.yaml")).returncode == 0
    (env.home / ".claude" / "settings.json").write_text(json.dumps({"env": {"AWS_PROFILE": "fromsettings"}}))
    by, _, _ = dry(env, "-a", "dev", "-a", "flag")
    # the flags first, then the config's, each once (as every list option); the settings'
    # profile only in bedrock mode
    assert aws_objects(by)[0] == dummy_ini("dev", "flag", "cfg")
    by, _, r = dry(env, "--bedrock", "-a", "flag")
    assert aws_objects(by)[0] == dummy_ini("flag", "cfg", "dev", "fromsettings"), r.stderr


AWS_ERRORS = [
    (["--aws-profiles", "bad/name"],
     "invalid AWS profile name 'bad/name': only letters, digits, '.', '_' and '-' are allowed"),
    (["-a", "x]y"], "invalid AWS profile name 'x]y': only letters, digits, '.', '_' and '-' are allowed"),
    (["-a", "ok", "-a", "[evil]"],
     "invalid AWS profile name '[evil]': only letters, digits, '.', '_' and '-' are allowed"),
    (["-a", " ".join(f"p{i}" for i in range(33))], "--aws-profiles: at most 32 profiles"),
    (["-a", "dev", "-a", "broken"],
     "AWS profile 'broken': cannot export its credentials (aws: Error loading SSO Token: Token for "
     "broken does not exist); if it uses SSO, run: aws sso login --profile broken"),
    (["-a", "hangs"], "AWS profile 'hangs': aws configure export-credentials did not finish within "
     "1 s; if the profile uses SSO, run: aws sso login --profile hangs"),
]


@pytest.mark.parametrize("args,message", AWS_ERRORS, ids=[a[-1][:20] for a, _ in AWS_ERRORS])
def test_aws_validation_messages(env, args, message):
    test_validation_messages(env, args, message)
    assert "SENTINEL" not in env.daemon.logs()


def test_aws_profile_from_settings_is_checked_too(env):
    (env.home / ".claude" / "settings.json").write_text(json.dumps({"env": {"AWS_PROFILE": "no pe"}}))
    by, _, r = dry(env, "--bedrock")
    # the agent leaves it out, says so, and nothing else changes
    assert "env.AWS_PROFILE is not a valid AWS profile name; ignoring it" in r.stderr
    assert aws_objects(by) == (None, None)


def test_aws_cli_missing(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    bare = e.tmp / "bin"
    bare.mkdir()
    e.daemon.env["PATH"] = str(bare)  # no aws on it
    e.daemon.start()
    try:
        wait_for(lambda: e.daemon.client("status", "--json").stdout.find('"state": "ready"') >= 0,
                 what="the deploy cluster to sync")
        r = e.run("claude", "--dry-run", "--image", "example/agent:1", "-a", "dev")
        assert r.returncode != 0
        assert ("AWS profile 'dev': the aws CLI is not on uplinkd's PATH; install AWS CLI v2 (or put "
                "it on the daemon's PATH) to use --aws-profiles") in r.stderr
    finally:
        rc = e.daemon.stop()
        e.daemon.close()
    assert rc == 0


def test_dry_run_with_ssh_keys_is_what_a_run_applies(env):
    args = ("--ssh-key-dir", str(env.home / "keys"), "--ssh-cidr", "10.0.0.0/8")
    by, _, r = dry(env, *args)
    assert {"ip": SSH_AGENT_IP, "hostnames": ["ssh-agent"]} in by[("Pod", "agent")]["spec"]["hostAliases"]
    assert f"{SSH_AGENT_IP} stand for the mitm and ssh-agent Services' cluster IPs" in r.stderr
    pod = assert_dry_run_is_what_a_run_applies(env, *args)
    assert [a["hostnames"] for a in pod["hostAliases"]] == [["mitm"], ["ssh-agent"]]
