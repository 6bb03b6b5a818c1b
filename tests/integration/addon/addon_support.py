"""Support for the addon tests and benchmark: a test PKI, an HTTPS/HTTP/raw echo
upstream, a mitmdump runner with the real addon, and a client that talks through
the proxy the way an agent does (CONNECT + TLS trusting the mitm CA, or
absolute-form plain HTTP).

Host names in the vectors do not resolve. The proxies started here also load
``redirect_addon.py`` (test-only), which replaces ``asyncio.open_connection`` inside
mitmdump so that every upstream connection goes to the echo server, and logs each
attempt (the host mitmproxy would have resolved) to a file. Host names, SNI and
Host headers stay untouched, so the addon and TLS verification see the real names.
"""

import datetime
import hashlib
import importlib.util
import ipaddress
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
FILTER = ROOT / "manifests" / "mitm" / "filter.py"
VECTORS = ROOT / "tests" / "data" / "rules-vectors.json"
REDIRECT = HERE / "redirect_addon.py"
MTLS_HOST = "mtls.uplink.test"
SENTINEL = "uplink-sentinel"
# The AWS identities the main proxy re-signs with (fake, sentinel-marked).
AWS_DUMMY = "AKIA0123456789ABCDEF"
AWS_DUMMY_TOKEN = "AKIA0123456789TOKEN1"
AWS_CREDS = {
    AWS_DUMMY: {"access_key_id": "AKIAREALREALREAL0001",
                "secret_access_key": "uplink-sentinel-aws-secret-0001"},
    AWS_DUMMY_TOKEN: {"access_key_id": "ASIAREALREALREAL0002",
                      "secret_access_key": "uplink-sentinel-aws-secret-0002",
                      "session_token": "uplink-sentinel-aws-token-0002"},
}

CLIENT_CN = "uplink-kube-client"

sys.dont_write_bytecode = True


def load_filter():
    """filter.py imported as a module (no mitmproxy needed for the policy part)."""
    mod = sys.modules.get("uplink_filter")
    if mod is None:
        spec = importlib.util.spec_from_file_location("uplink_filter", FILTER)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["uplink_filter"] = mod
        spec.loader.exec_module(mod)
    return mod


def load_vectors():
    with open(VECTORS, encoding="utf-8") as f:
        return json.load(f)


def write_atomic(path, data):
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data if isinstance(data, bytes) else data.encode())
    os.replace(tmp, path)


def rules_doc(rules):
    return json.dumps({"version": 1, "rules": rules}, indent=2)


# --------------------------------------------------------------------------- PKI

def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class CA:
    def __init__(self, cn):
        now = datetime.datetime.utcnow()
        self.key = ec.generate_private_key(ec.SECP256R1())
        ski = x509.SubjectKeyIdentifier.from_public_key(self.key.public_key())
        self.cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                                  False, False), True)
                     .add_extension(ski, False)
                     .sign(self.key, hashes.SHA256()))
        self.leaf_key = ec.generate_private_key(ec.SECP256R1())

    @property
    def pem(self):
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, cn, dns=(), ips=(), client=False):
        """A leaf certificate; returns PEM of cert + key."""
        now = datetime.datetime.utcnow()
        sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i))
                                                 for i in ips]
        b = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.cert.subject)
             .public_key(self.leaf_key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=7))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
             .add_extension(x509.ExtendedKeyUsage(
                 [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
                 False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                 self.key.public_key()), False))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), False)
        cert = b.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM) + _pem_key(self.leaf_key)


class PKI:
    """Test CAs and files: ``upstream`` signs the echo server's certificates, ``mitm``
    is pre-seeded as mitmproxy's CA, ``client`` signs the kube client certificate."""

    def __init__(self, root):
        self.root = Path(root)
        self.upstream, self.mitm, self.client = CA("uplink test upstream CA"), \
            CA("uplink test mitm CA"), CA("uplink test client CA")
        self.upstream_ca = self.root / "upstream-ca.pem"
        self.upstream_ca.write_bytes(self.upstream.pem)
        self.client_ca = self.root / "client-ca.pem"
        self.client_ca.write_bytes(self.client.pem)
        self.confdir = self.root / "mitm-conf"
        self.confdir.mkdir()
        (self.confdir / "mitmproxy-ca.pem").write_bytes(_pem_key(self.mitm.key) + self.mitm.pem)
        (self.confdir / "mitmproxy-ca-cert.pem").write_bytes(self.mitm.pem)
        self.mitm_ca = self.confdir / "mitmproxy-ca-cert.pem"
        self.client_certs = self.root / "client-certs"
        self.client_certs.mkdir()
        (self.client_certs / f"{MTLS_HOST}.pem").write_bytes(
            self.client.issue(CLIENT_CN, client=True))


# --------------------------------------------------------------------------- echo upstream

class _Conn:
    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


class Echo:
    """One TCP port; per connection: TLS if the first byte is a handshake (certificate
    minted for the SNI name, or the default one naming localhost and the given IPs; the
    name on a client certificate is reported), then either ``\\x00RAW`` (bytes echoed
    back) or HTTP/1.1 (any method; the answer is JSON describing the request)."""

    def __init__(self, pki, ips=()):
        self.pki = pki
        self.requests, self.raw, self.lock = [], [], threading.Lock()
        self.raw_active = 0  # raw connections still open (each lands in .raw when it ends)
        self._ctx = {}
        ips = sorted({"127.0.0.1", "::1", *ips})
        self._default = self._context(pki.upstream.issue("default", ["localhost"], ips))
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _context(self, pem):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        # ssl loads a key and certificate from a file only: one in the test's own folder,
        # gone once loaded (the SNI callback runs this; a failure here is a handshake alert)
        fd, name = tempfile.mkstemp(suffix=".pem", dir=self.pki.root)
        try:
            os.write(fd, pem)
            os.close(fd)
            ctx.load_cert_chain(name)
        finally:
            os.unlink(name)
        # OpenSSL keeps the first context's verify mode after an SNI switch, so every
        # context asks for an optional client certificate and the test checks its name.
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(cadata=self.pki.client.pem.decode())
        ctx.sni_callback = self._sni
        return ctx

    def _sni(self, sslsock, name, _ctx):
        sslsock.uplink_sni = name
        if not name:
            return None
        name = name.lower()
        with self.lock:
            ctx = self._ctx.get(name)
            if ctx is None:
                ctx = self._context(self.pki.upstream.issue(name, [name]))
                self._ctx[name] = ctx
        sslsock.context = ctx
        return None

    def close(self):
        self._stop = True
        # close() alone leaves a thread blocked in accept() holding the socket, listening
        # on: a later test's connection to that port would reach this server and its
        # removed folder. shutdown() wakes the accept() first.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def _accept(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, sock):
        sock.settimeout(30)
        info = {"tls": False, "sni": None, "client_cn": None}
        try:
            first = sock.recv(1, socket.MSG_PEEK)
            if first == b"\x16":
                sock = self._default.wrap_socket(sock, server_side=True)
                info.update(tls=True, sni=getattr(sock, "uplink_sni", None))
                peer = sock.getpeercert()
                if peer:
                    info["client_cn"] = dict(x[0] for x in peer["subject"]).get("commonName")
            conn = _Conn(sock)
            conn.fill()
            if conn.buf.startswith(b"\x00RAW"):
                self._raw(conn)
            else:
                while self._http(conn, info):
                    pass
        except (EOFError, OSError, ssl.SSLError, ValueError):
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def _raw(self, conn):
        total = 0
        with self.lock:
            self.raw_active += 1
        while True:
            data, conn.buf = conn.buf, b""
            total += len(data)
            conn.sock.sendall(data)
            try:
                conn.fill()
            except EOFError:
                break
        with self.lock:
            self.raw.append(total)
            self.raw_active -= 1

    def wait_raw_quiet(self, timeout=10.0):
        """Waits until no raw connection is open, so that .raw holds all of them."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if self.raw_active == 0:
                    return
            time.sleep(0.01)
        raise AssertionError("raw connections still open after %.0fs" % timeout)

    def _http(self, conn, info):
        try:
            start = conn.line()
        except EOFError:
            return False
        method, target, _ = start.decode("latin-1").split(" ", 2)
        headers = []
        while True:
            line = conn.line()
            if not line:
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers.append([name, value.strip()])
        lower = {n.lower(): v for n, v in headers}
        sha, n = hashlib.sha256(), 0
        if lower.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int(conn.line().split(b";")[0], 16)
                if size == 0:
                    while conn.line():
                        pass
                    break
                chunk = conn.read(size)
                conn.read(2)
                sha.update(chunk)
                n += len(chunk)
        else:
            left = int(lower.get("content-length", "0"))
            while left:
                chunk = conn.read(min(left, 1 << 20))
                sha.update(chunk)
                n += len(chunk)
                left -= len(chunk)
        rec = {"method": method, "path": target, "headers": headers, "body_len": n,
               "body_sha256": sha.hexdigest(), **info}
        with self.lock:
            self.requests.append(rec)
        if target.startswith("/__echo/stream"):
            size = int(target.rsplit("=", 1)[1])
            conn.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n")
            block = b"x" * 65536
            while size:
                part = block[:min(size, len(block))]
                conn.sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
                size -= len(part)
            conn.sock.sendall(b"0\r\n\r\n")
        else:
            body = json.dumps(rec).encode()
            conn.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n" % len(body)
                              + (b"" if method == "HEAD" else body))
        return lower.get("connection", "").lower() != "close"

    def find(self, test_id):
        with self.lock:
            return [r for r in self.requests
                    if any(n.lower() == "x-test-id" and v == test_id for n, v in r["headers"])]


# --------------------------------------------------------------------------- mitmdump

MITM_POD = ROOT / "manifests" / "mitm-pod.yaml"
# Options of the mitm pod that name its files: the tests set their own.
_POD_PATHS = ("confdir", "uplink_rules")


def pod_sets(quiet=False):
    """The ``--set`` options of the mitm pod (manifests/mitm-pod.yaml), so the tests run
    mitmdump as the pod does; its log verbosity only with ``quiet`` (some tests read
    mitmproxy's own info lines)."""
    import yaml
    with open(MITM_POD, encoding="utf-8") as f:
        args = yaml.safe_load(f)["spec"]["containers"][0]["args"]
    out = []
    for flag, value in zip(args, args[1:]):
        name = value.split("=", 1)[0]
        if flag != "--set" or name in _POD_PATHS or (name == "termlog_verbosity" and not quiet):
            continue
        out.append(value)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mitm:
    """mitmdump with the real addon (unless ``addon`` is false) and, unless ``redirect``
    is None, the test-only redirect addon; stdout and stderr are kept in files."""

    def __init__(self, workdir, pki, sets=(), redirect=None, name="mitm", addon=True,
                 quiet=False):
        self.addon, self.quiet = addon, quiet
        self.dir = Path(workdir) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pki, self.sets, self.redirect = pki, list(sets), redirect
        self.stdout, self.stderr = self.dir / "stdout.log", self.dir / "stderr.log"
        self.connect_log = self.dir / "connects.log"
        self.connect_log.write_text("")
        self.proc, self.port = None, None

    def start(self, timeout=20):
        self.port = free_port()
        cmd = ["/usr/bin/mitmdump", "--listen-host", "127.0.0.1", "--listen-port", str(self.port),
               "--set", f"confdir={self.pki.confdir}"] + (["-s", str(FILTER)] if self.addon else [])
        own = {s.split("=", 1)[0] for s in self.sets}  # mitmdump takes each option once
        for s in pod_sets(self.quiet):
            if s.split("=", 1)[0] not in own:
                cmd += ["--set", s]
        if self.redirect is not None:
            cmd += ["-s", str(REDIRECT), "--set", f"uplinktest_redirect={self.redirect}",
                    "--set", f"uplinktest_connect_log={self.connect_log}"]
        for s in self.sets:
            cmd += ["--set", s]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, stdout=open(self.stdout, "wb"),
                                     stderr=open(self.stderr, "wb"), stdin=subprocess.DEVNULL,
                                     env=env, cwd=self.dir)
        # until a first connection succeeds; stretched on a loaded machine like uplinktest's waits
        deadline = time.monotonic() + timeout * float(os.environ.get("UPLINK_TEST_SLOW", "3"))
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mitmdump exited {self.proc.returncode}:\n{self.output()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"mitmdump did not listen:\n{self.output()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def output(self):
        out = self.stdout.read_text(errors="replace") if self.stdout.exists() else ""
        err = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        return out + err

    def audit(self):
        lines = []
        for line in self.stdout.read_text(errors="replace").splitlines():
            if line.startswith('{"uplink":"audit"'):
                lines.append(json.loads(line))
        return lines

    def connects(self):
        return [json.loads(x) for x in self.connect_log.read_text().splitlines() if x]

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


# --------------------------------------------------------------------------- client

class Result:
    def __init__(self, connect_status, status=None, headers=(), body=b""):
        self.connect_status, self.status = connect_status, status
        self.headers, self.body = list(headers), body

    def header(self, name):
        vals = [v for n, v in self.headers if n.lower() == name.lower()]
        return vals[0] if vals else None

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return (f"Result(connect={self.connect_status}, status={self.status}, "
                f"body={self.body[:300]!r})")


def _authority(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _read_head(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(4096)
        if not data:
            raise EOFError(f"connection closed after {buf!r}")
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = [(n, v.strip()) for n, _, v in (line.partition(":") for line in lines[1:])]
    return status, headers, rest


def _read_body(sock, headers, rest, method):
    lower = {n.lower(): v for n, v in headers}
    if method == "HEAD":
        return b""
    if lower.get("transfer-encoding", "").lower() == "chunked":
        data, out = rest, b""
        while True:
            while b"\r\n" not in data:
                data += sock.recv(65536)
            size_line, data = data.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(data) < size + 2:
                more = sock.recv(65536)
                if not more:
                    raise EOFError("short chunk")
                data += more
            if size == 0:
                return out
            out += data[:size]
            data = data[size + 2:]
    if "content-length" in lower:
        n = int(lower["content-length"])
        data = rest
        while len(data) < n:
            more = sock.recv(65536)
            if not more:
                break
            data += more
        return data[:n]
    data = rest
    while True:
        more = sock.recv(65536)
        if not more:
            return data
        data += more


def tunnel(proxy_port, host, port, timeout=15):
    """CONNECT through the proxy; returns (status, headers, body, socket or None)."""
    sock = socket.create_connection(("127.0.0.1", proxy_port), timeout)
    auth = _authority(host, port)
    sock.sendall(f"CONNECT {auth} HTTP/1.1\r\nHost: {auth}\r\n\r\n".encode())
    status, headers, rest = _read_head(sock)
    if status != 200:
        body = _read_body(sock, headers, rest, "CONNECT")
        sock.close()
        return status, headers, body, None
    return status, headers, b"", sock


def tls_client(cafile, sock, host):
    ctx = ssl.create_default_context(cafile=str(cafile))
    return ctx.wrap_socket(sock, server_hostname=host)


def send(proxy_port, scheme, host, port, method, path, headers=(), body=b"", trust=None,
         timeout=15, chunked=False):
    """One request through the proxy, as an agent sends it."""
    default = 443 if scheme == "https" else 80
    hosthdr = (f"[{host}]" if ":" in host else host) if port == default else _authority(host, port)
    if scheme == "https":
        cstatus, cheaders, cbody, sock = tunnel(proxy_port, host, port, timeout)
        if sock is None:
            return Result(cstatus, None, cheaders, cbody)
        sock = tls_client(trust, sock, host)
        target = path
    else:
        cstatus = None
        sock = socket.create_connection(("127.0.0.1", proxy_port), timeout)
        target = f"http://{hosthdr}{path}"
    try:
        lines = [f"{method} {target} HTTP/1.1"]
        if not any(n.lower() == "host" for n, _ in headers):
            lines.append(f"Host: {hosthdr}")
        lines += [f"{n}: {v}" for n, v in headers]
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        elif body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        lines.append("Connection: close")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if chunked:
            for i in range(0, len(body), 1 << 16):
                part = body[i:i + (1 << 16)]
                sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
            sock.sendall(b"0\r\n\r\n")
        elif body:
            sock.sendall(body)
        status, rheaders, rest = _read_head(sock)
        return Result(cstatus, status, rheaders, _read_body(sock, rheaders, rest, method))
    finally:
        sock.close()


class Proxy:
    """A running mitmdump plus the files it reads. ``dead``: names whose upstream refuses
    connections; ``upstreams``: (name, port) pairs sent to another local port than the
    echo server's; ``resolve``: ``NAME=IP[+IP]`` fake DNS answers (redirect_addon.py);
    ``quiet``: mitmproxy's log verbosity as in the pod too."""

    def __init__(self, workdir, pki, echo, name, sets=(), redirect=True, reload_ms=0,
                 dead=(), resolve=(), quiet=False, upstreams=()):
        self.pki, self.echo = pki, echo
        d = Path(workdir) / name
        d.mkdir(parents=True, exist_ok=True)
        self.rules_path, self.creds_path = d / "rules.json", d / "aws-creds.json"
        self.set_rules([])
        write_atomic(self.creds_path, json.dumps(AWS_CREDS))
        self.lock = threading.Lock()
        target = ",".join([f"127.0.0.1:{echo.port}"] + [f"{d}=127.0.0.1:1" for d in dead]
                          + [f"{n}=127.0.0.1:{port}" for n, port in upstreams])
        fake_dns = [f"uplinktest_resolve={','.join(resolve)}"] if resolve else []
        self.mitm = Mitm(workdir, pki, name=name, redirect=target if redirect else "", sets=[
            f"uplink_rules={self.rules_path}", f"uplink_aws_creds={self.creds_path}",
            f"uplink_reload_ms={reload_ms}", *fake_dns, *sets], quiet=quiet).start()

    @property
    def port(self):
        return self.mitm.port

    def set_rules(self, rules):
        write_atomic(self.rules_path, rules_doc(rules))

    def stop(self):
        return self.mitm.stop()
