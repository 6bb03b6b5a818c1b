"""The local cluster of tests/e2e: a private dockerd, the stand-in images (tests/images),
an egress network holding the fake upstreams (fake_upstream.py, under a test CA), and
fakekube with its docker kubelet. README.md, "Local cluster", says what it emulates.

    lc = LocalCluster(tmp).start()   # lc.kubeconfig, lc.docker_host, lc.ca_cert, ...
    lc.requests()                    # what the fake upstreams received
    lc.stop()

`unavailable()` says why it cannot run here (None when it can)."""

import datetime
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakekube"))

from fakekube import FakeKube  # noqa: E402

# Kept between runs so that the images are built once: UPLINK_E2E_DOCKER_DIR.
STATE = Path(os.environ.get("UPLINK_E2E_DOCKER_DIR", "/var/tmp/uplink-e2e-docker"))
# denied.example: a host no rule allows, which resolves for the mitm (as a real one would)
UPSTREAM_HOSTS = ("api.anthropic.com", "console.anthropic.com", "platform.claude.com",
                  "denied.example")
ANSWER = "The fake upstream says: blue-harbor-42"
# what the fake token endpoint grants (-N for the Nth grant), each for 200 s
RENEWED = "sk-ant-oat01-UPLINK-E2E-RENEWED-" + "7" * 24
# The other agents' vendor APIs, each a fake of its own beside fake_upstream.py (LocalCluster's
# `fakes`): the one local cluster of a test run serves every agent's tests.
OPENAI_ANSWER = "The fake OpenAI says: amber-lighthouse-7"
OPENAI_ACCOUNT = "acct-uplink-e2e-1"
OPENAI_HOSTS = ("chatgpt.com", "api.openai.com", "auth.openai.com")
GEMINI_ANSWER = "The fake Gemini says: green-lantern-7"
GOOGLE_HOSTS = ("cloudcode-pa.googleapis.com", "generativelanguage.googleapis.com",
                "oauth2.googleapis.com", "www.googleapis.com", "play.googleapis.com")
FAKES = {
    "openai": ("fake_openai.py", OPENAI_HOSTS,
               ["--answer", OPENAI_ANSWER, "--account-id", OPENAI_ACCOUNT]),
    "gemini": ("fake_gemini.py", GOOGLE_HOSTS, ["--answer", GEMINI_ANSWER]),
}
LABEL = "uplink-e2e"
MITM_IMAGE = "uplink-test/mitmproxy:8"
REGISTRY_DATA = "/var/lib/agent-uplink-registry"     # manifests/registry-deployment.yaml


def unavailable():
    for tool in ("dockerd", "docker", "debootstrap"):
        if shutil.which(tool) is None:
            return "%s is not installed (apt-get install docker.io debootstrap)" % tool
    if os.geteuid() != 0:
        return "the local cluster's dockerd needs root"
    return None


def _docker_env(host):
    return dict(os.environ, DOCKER_HOST=host)


class Dockerd:
    """dockerd with its own socket, data root and exec root, no bridge and no iptables."""

    def __init__(self, state):
        self.state = state
        self.sock = state / "docker.sock"
        self.host = "unix://%s" % self.sock
        # short (containerd's socket is under it), one per state folder
        self.exec_root = Path("/tmp/uplink-e2e-exec-%s" % hashlib.sha256(
            str(state).encode()).hexdigest()[:8])
        self.proc = None

    def answers(self):
        r = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                           env=_docker_env(self.host), capture_output=True, timeout=30)
        return r.returncode == 0

    def start(self):
        self.state.mkdir(parents=True, exist_ok=True)
        if self.sock.exists() and self.answers():
            return self      # a dockerd of an earlier run still serves: use it, leave it
        log = open(self.state / "dockerd.log", "ab")
        self.proc = subprocess.Popen(
            ["dockerd", "-H", self.host, "--data-root", str(self.state / "root"),
             "--exec-root", str(self.exec_root), "--pidfile", str(self.state / "dockerd.pid"),
             "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
             # no routing between the networks through the host: docker would turn
             # net.ipv4.ip_forward on, and with no iptables "internal" would mean nothing
             "--ip-forward=false"],
            stdout=log, stderr=log)
        deadline = time.monotonic() + 120
        while not (self.sock.exists() and self.answers()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("dockerd did not start; see %s" % (self.state / "dockerd.log"))
            time.sleep(0.2)
        return self

    def stop(self):
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        netns = self.exec_root / "netns" / "default"
        if os.path.ismount(netns):
            subprocess.run(["umount", str(netns)], check=False)


def _test_ca(d, ip, more=()):
    """A test CA and a server certificate for the upstream names and IP (the host reaches
    the token endpoint by address: its resolver knows none of the names): (ca.crt, up.crt,
    up.key); one more certificate (<name>.crt, <name>.key) for each (name, hosts) in
    `more`."""
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.utcnow() - datetime.timedelta(minutes=5)
    later = now + datetime.timedelta(days=2)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("uplink e2e upstream CA"))
          .issuer_name(name("uplink e2e upstream CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(later)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def issue(stem, hosts, ips=()):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(hosts[0]))
                .issuer_name(ca.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now)
                .not_valid_after(later)
                .add_extension(x509.SubjectAlternativeName(
                    [x509.DNSName(h) for h in hosts] +
                    [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                               critical=True)
                .sign(ca_key, hashes.SHA256()))
        crt, pem = d / (stem + ".crt"), d / (stem + ".key")
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pem.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
        os.chmod(pem, 0o644)      # read by the upstream container's user
        return crt, pem
    (d / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for stem, hosts in more:
        issue(stem, hosts)
    return (d / "ca.crt", *issue("up", UPSTREAM_HOSTS, [ip]))


class LocalCluster:
    live = False

    def __init__(self, tmp, registry_dir=None, fakes=None):
        """REGISTRY_DIR: the in-cluster registry's storage (default: the state folder's,
        kept between runs; an empty folder gives a registry without the agent image).
        FAKES: more fake upstreams, {name: (script in tests/e2e, hosts, extra args)}, each in
        its own container at its own address with a certificate of the test CA for its
        hosts, started like fake_upstream.py (--cert --key --state, then "... listening" on
        stdout); lc.requests(name) is what one received."""
        self.fakes = dict(fakes or {})
        self.fake_ips = {}
        self.fake_containers = []
        self.tmp = Path(tmp)
        self.registry_dir = str(registry_dir or STATE / "node-host" / REGISTRY_DATA.lstrip("/"))
        self.dockerd = Dockerd(STATE)
        self.docker_host = self.dockerd.host
        self.instance = secrets.token_hex(3)
        self.egress = "uplink-e2e-egress-%s" % self.instance
        prefix = "10.%d.250" % (128 + secrets.randbelow(64))
        self.egress_subnet = prefix + ".0/24"
        self.upstream_ip = prefix + ".10"
        self.fk = None
        self.upstream = None

    def docker(self, *args, check=True, timeout=600):
        return subprocess.run(["docker", *args], env=_docker_env(self.docker_host),
                              capture_output=True, text=True, check=check, timeout=timeout)

    def start(self):
        self.dockerd.start()
        # the test's own dockerd: the unprivileged user of the test (uplinkd) may use it
        os.chmod(self.dockerd.sock, 0o666)
        self._remove_stale()
        subprocess.run([str(ROOT / "tests" / "images" / "build.sh")], check=True,
                       env=_docker_env(self.docker_host), timeout=1800)
        self.docker("network", "create", "--internal", "--label", LABEL, "--subnet",
                    self.egress_subnet, self.egress)
        self._start_upstream()
        self.fk = FakeKube(self.tmp / "fakekube", ready_delay=0, terminate_delay=1.0,
                           kubelet=dict(docker_host=self.docker_host,
                                        egress_network=self.egress,
                                        # the node is this machine (uplink mounts the
                                        # user's files by hostPath), but the registry's
                                        # storage is the state folder's: the image cache
                                        host_dir="/",
                                        host_map={REGISTRY_DATA: self.registry_dir},
                                        egress_hosts=self._egress_hosts())).start()
        self.kubeconfig = self.fk.kubeconfig
        return self

    def _egress_hosts(self):
        pairs = [(h, self.upstream_ip) for h in UPSTREAM_HOSTS]
        for name, (_, hosts, _) in self.fakes.items():
            pairs += [(h, self.fake_ips[name]) for h in hosts]
        return ["%s:%s" % p for p in pairs]

    def _start_upstream(self):
        d = self.tmp / "upstream"
        d.mkdir(parents=True)
        os.chmod(d, 0o777)
        self.ca_cert, _, _ = _test_ca(d, self.upstream_ip,
                                      [(n, f[1]) for n, f in self.fakes.items()])
        # the OAuth token endpoint, for the daemon on the host (UPLINK_CA_BUNDLE=ca_cert)
        self.token_url = "https://%s/v1/oauth/token" % self.upstream_ip
        self.requests_path = d / "requests.jsonl"
        self.upstream = "uplink-e2e-upstream-%s" % self.instance
        self._run_fake(self.upstream, self.upstream_ip, d, "fake_upstream.py", "up",
                       ["--answer", ANSWER, "--renewed-token", RENEWED, "--expires-in", "200"])
        for i, (name, (script, _, args)) in enumerate(self.fakes.items()):
            fd = self.tmp / name
            fd.mkdir()
            os.chmod(fd, 0o777)
            for ext in (".crt", ".key"):
                shutil.copy(d / (name + ext), fd / (name + ext))
            self.fake_ips[name] = self.upstream_ip.rsplit(".", 1)[0] + ".%d" % (11 + i)
            c = "uplink-e2e-%s-%s" % (name, self.instance)
            self.fake_containers.append(c)
            self._run_fake(c, self.fake_ips[name], fd, script, name, list(args))

    def _run_fake(self, container, ip, d, script, stem, args):
        self.docker("run", "-d", "--name", container, "--label", LABEL, "--network",
                    self.egress, "--ip", ip, "--user", "1000:1000",
                    "--cap-add", "NET_BIND_SERVICE", "-v", "%s:/e2e:ro" % HERE,
                    "-v", "%s:/state" % d, MITM_IMAGE, "python3", "/e2e/" + script,
                    "--cert", "/state/%s.crt" % stem, "--key", "/state/%s.key" % stem,
                    "--state", "/state", *args)
        logs = subprocess.Popen(["docker", "logs", "-f", container],
                                env=_docker_env(self.docker_host), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            for line in logs.stdout:
                if " listening" in line:
                    return
            raise RuntimeError("%s did not start: %s" %
                               (script, self.docker("logs", container, check=False).stdout))
        finally:
            logs.kill()
            logs.wait()

    def _remove_stale(self):
        """Containers and networks an earlier, interrupted run left on this dockerd."""
        for label in ("uplink-fakekube", LABEL):
            ids = self.containers(label)
            if ids:
                self.docker("rm", "-f", *ids, check=False)
            ids = self.networks(label)
            if ids:
                self.docker("network", "rm", *ids, check=False)

    def kubectl(self, *args, timeout=120):
        return subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
                              capture_output=True, text=True, timeout=timeout)

    def run_flags(self):
        """What `uplink run` needs here: the stand-in mitm image, the upstreams' test CA."""
        return ["--mitmproxy-image", MITM_IMAGE, "--mitm-ca-cert", str(self.ca_cert)]

    def requests(self, fake=None):
        """What fake_upstream.py (or the fake called `fake`) received."""
        path = self.requests_path if fake is None else self.tmp / fake / "requests.jsonl"
        if not path.exists():
            return []
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln]

    def containers(self, label=None):
        """IDs of the containers with this label (default: this run's kubelet's)."""
        label = label or self.fk.store.life.label
        return self.docker("ps", "-aq", "--filter", "label=" + label).stdout.split()

    def networks(self, label=None):
        label = label or self.fk.store.life.label
        return self.docker("network", "ls", "-q", "--filter", "label=" + label).stdout.split()

    def stop(self):
        if self.fk is not None:
            self.fk.stop()
        if self.upstream:
            self.docker("rm", "-f", self.upstream, *self.fake_containers, check=False)
        self.docker("network", "rm", self.egress, check=False)
        self.dockerd.stop()
