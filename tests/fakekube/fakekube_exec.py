"""pods/exec for the docker kubelet: the WebSocket remote-command protocol kubectl 1.30+
speaks (v5.channel.k8s.io, or v4.channel.k8s.io), relayed to `docker exec`.

The WebSocket side (RFC 6455) is written here on the standard library: the handshake, masked
client frames, fragmented messages, ping/pong and close. Each binary message carries one
channel byte then data: 0 stdin, 1 stdout, 2 stderr, 3 error (one Status JSON, then the
connection closes), 4 resize ({"Width", "Height"}), and in v5 255 (close the stream named by
the next byte: kubectl sends it when its stdin ends).

With tty=true `docker exec -it` runs on a pty this module owns; a resize sets that pty's size
(TIOCSWINSZ), whose SIGWINCH makes the docker CLI resize the exec's own terminal."""

import base64
import fcntl
import hashlib
import json
import os
import struct
import subprocess
import termios
import threading

import fakekube_errors as E
from fakekube_kinds import BY_KIND

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")

MAX_FRAME_BYTES = 1 << 20        # one frame's payload from the client
MAX_MESSAGE_BYTES = 1 << 20      # one message, all its fragments together
MAX_CONTROL_BYTES = 125          # RFC 6455 5.5
READ_CHUNK = 32 << 10            # bytes read from the process per stdout/stderr frame
MAX_COMMAND_ARGS = 256           # command= parameters of one request
MAX_WINDOW = 10000               # rows or columns a resize may ask for

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
OP_CONT, OP_TEXT, OP_BIN, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10


class WsClosed(Exception):
    pass


def _q1(q, name, default=""):
    v = q.get(name)
    return v[-1] if v else default


def pod_container(pod, name, asked):
    """The container a pods/log or pods/exec request means (``asked``: its ``container``
    parameter, empty for none), or the API server's 400 when that is not clear."""
    names = [c["name"] for c in pod["spec"].get("containers") or []]
    if not asked:
        if len(names) != 1:
            raise E.bad_request("a container name must be specified for pod %s, choose one "
                                "of: [%s]" % (name, " ".join(names)))
        return names[0]
    if asked not in names:
        raise E.bad_request("container %s is not valid for pod %s" % (asked, name))
    return asked


def _flag(q, name):
    return _q1(q, name).lower() in ("1", "true", "t", "yes", "y")


def _target(h, ns, name):
    """The request's container and its docker id, or the API error a kubelet would give."""
    fk = h.server.fk
    life = fk.store.life
    pod = fk.store.get(BY_KIND["Pod"], ns, name)
    q = h._q
    c = pod_container(pod, name, _q1(q, "container"))
    cmd = q.get("command") or []
    if not cmd:
        raise E.bad_request("you must specify at least 1 command")
    if len(cmd) > MAX_COMMAND_ARGS:
        raise E.bad_request("at most %d command arguments, got %d" % (MAX_COMMAND_ARGS,
                                                                       len(cmd)))
    if not any(_flag(q, s) for s in ("stdin", "stdout", "stderr")):
        raise E.bad_request("you must specify at least one of stdin, stdout, stderr")
    worker = getattr(life, "pods", {}).get(pod["metadata"]["uid"])
    cid = worker.cids.get(c) if worker is not None else None
    st = next((s.get("state") or {} for s in (pod.get("status") or {})
               .get("containerStatuses") or [] if s["name"] == c), {})
    if cid is None or "running" not in st:
        raise E.bad_request("unable to upgrade connection: container %s not found in pod "
                            "%s_%s (is it running? state: %s)" % (c, name, ns,
                                                                  ", ".join(st) or "none"))
    return life.docker.env, cid, cmd


def serve(h, ns, name):
    """Answer GET/POST .../pods/NAME/exec on handler h (the fakekube_http.Handler)."""
    if not hasattr(h.server.fk.store.life, "docker"):
        raise E.bad_request("pods/exec needs fakekube's docker kubelet (--kubelet docker)")
    env, cid, cmd = _target(h, ns, name)
    if h.headers.get("Upgrade", "").lower() != "websocket":
        raise E.bad_request("fakekube speaks pods/exec over WebSocket only (%s), not %s: use "
                            "kubectl 1.30 or newer, without KUBECTL_REMOTE_COMMAND_WEBSOCKETS="
                            "false" % (", ".join(PROTOCOLS),
                                       h.headers.get("Upgrade") or "plain HTTP"))
    offered = [p.strip() for p in h.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    proto = next((p for p in PROTOCOLS if p in offered), None)
    key = h.headers.get("Sec-WebSocket-Key", "")
    if proto is None or not key:
        raise E.bad_request("a WebSocket exec must offer one of the subprotocols %s (offered: "
                            "%s) and a Sec-WebSocket-Key" % (", ".join(PROTOCOLS),
                                                             ", ".join(offered) or "none"))
    q = h._q
    want = {s: _flag(q, s) for s in ("stdin", "stdout", "stderr", "tty")}
    accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
    h.close_connection = True
    h.send_response(101, "Switching Protocols")
    h.send_header("Upgrade", "websocket")
    h.send_header("Connection", "Upgrade")
    h.send_header("Sec-WebSocket-Accept", accept)
    h.send_header("Sec-WebSocket-Protocol", proto)
    h.end_headers()
    h.wfile.flush()
    ws = Ws(h.rfile, h.wfile)
    Session(ws, proto, env, cid, cmd, want).run()


class Ws:
    """RFC 6455 server side on a connected stream: messages in, binary frames out."""

    def __init__(self, rfile, wfile):
        self.rfile, self.wfile = rfile, wfile
        self.wlock = threading.Lock()
        self.closed = False

    def _read(self, n):
        b = self.rfile.read(n)
        if len(b) != n:
            raise WsClosed("connection ended inside a frame")
        return b

    def _frame(self):
        b0, b1 = self._read(2)
        if b0 & 0x70:
            raise WsClosed("reserved bits set: no extension was negotiated")
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._read(8))[0]
        if not b1 & 0x80:
            raise WsClosed("client frame not masked (RFC 6455 5.1)")
        if n > MAX_FRAME_BYTES:
            raise WsClosed("frame of %d bytes over MAX_FRAME_BYTES (%d)" % (n, MAX_FRAME_BYTES))
        mask = self._read(4)
        data = self._read(n)
        if n:   # XOR with the key repeated, as one big integer: no Python loop per byte
            key = (mask * (n // 4 + 1))[:n]
            data = (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
        return bool(b0 & 0x80), b0 & 0x0F, data

    def recv(self):
        """The next data message as bytes; None once the peer closed."""
        parts, size = [], 0
        while True:
            fin, op, data = self._frame()
            if op >= 8:
                if not fin or len(data) > MAX_CONTROL_BYTES:
                    raise WsClosed("fragmented or oversized control frame")
                if op == OP_PING:
                    self.send(OP_PONG, data)
                elif op == OP_CLOSE:
                    self.close(data[:2] if len(data) >= 2 else b"")
                    return None
                continue
            if (op == OP_CONT) != bool(parts):
                raise WsClosed("continuation frame out of place")
            size += len(data)
            if size > MAX_MESSAGE_BYTES:
                raise WsClosed("message over MAX_MESSAGE_BYTES (%d)" % MAX_MESSAGE_BYTES)
            parts.append(data)
            if fin:
                return b"".join(parts)

    def send(self, op, data):
        n = len(data)
        if n < 126:
            head = struct.pack(">BB", 0x80 | op, n)
        elif n < 65536:
            head = struct.pack(">BBH", 0x80 | op, 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | op, 127, n)
        with self.wlock:
            if self.closed:
                raise WsClosed("already closed")
            self.wfile.write(head + data)
            self.wfile.flush()
            if op == OP_CLOSE:
                self.closed = True

    def channel(self, ch, data):
        self.send(OP_BIN, bytes([ch]) + data)

    def close(self, code=b"\x03\xe8"):
        try:
            self.send(OP_CLOSE, code)
        except (WsClosed, OSError, ValueError):
            pass


def _status(rc):
    if rc == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": "command terminated with non-zero exit code: %d" % rc,
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(rc)}]}}


class Session:
    """One exec: the docker CLI process, its pipes or pty, and the WebSocket between."""

    def __init__(self, ws, proto, env, cid, cmd, want):
        self.ws, self.v5, self.env, self.cid, self.cmd = ws, proto.startswith("v5"), env, cid, cmd
        self.want = want
        self.master = None

    def _spawn(self, early):
        tty = self.want["tty"]
        args = ["docker", "exec"] + (["-i"] if self.want["stdin"] or tty else []) + (
            ["-t"] if tty else []) + [self.cid] + list(self.cmd)
        if not tty:
            pipe = subprocess.PIPE
            return subprocess.Popen(args, env=self.env, stdin=pipe if self.want["stdin"] else
                                    subprocess.DEVNULL, stdout=pipe, stderr=pipe)
        self.master, slave = os.openpty()
        if early and early[0] == RESIZE:
            self._resize(early[1:])
        try:
            return subprocess.Popen(args, env=self.env, stdin=slave, stdout=slave, stderr=slave,
                                    start_new_session=True, preexec_fn=_controlling_tty)
        finally:
            os.close(slave)

    def run(self):
        # the lowest writable channel gets an empty frame: "the streams are open"
        first = STDOUT if self.want["stdout"] else STDERR if self.want["stderr"] else ERROR
        early = None
        try:
            self.ws.channel(first, b"")
            if self.want["tty"]:
                # kubectl sends the terminal's size first: give it to the pty before the
                # docker CLI reads it, or the command starts on a 0x0 terminal
                early = self.ws.recv()
                if early is None:
                    return
        except (WsClosed, OSError, ValueError):
            return
        try:
            p = self._spawn(early)
        except OSError as e:
            self._finish_error("fakekube could not run docker exec: %s" % e)
            return
        outs = self._pumps(p)
        if early:
            self._message(p, early[0], early[1:])
        reader = threading.Thread(target=self._read_client, args=(p,), daemon=True)
        reader.start()
        rc = p.wait()
        for t in outs:
            t.join()
        try:
            self.ws.channel(ERROR, json.dumps(_status(rc)).encode())
        except (WsClosed, OSError, ValueError):
            pass
        self.ws.close()
        reader.join(timeout=10)   # a bound, not a wait: the peer answers the close at once
        if self.master is not None:
            os.close(self.master)

    def _finish_error(self, msg):
        body = {"metadata": {}, "status": "Failure", "message": msg, "reason": "InternalError"}
        try:
            self.ws.channel(ERROR, json.dumps(body).encode())
        except (WsClosed, OSError):
            pass
        self.ws.close()

    def _pumps(self, p):
        if self.master is not None:
            srcs = [(lambda: _read_pty(self.master), STDOUT, True)]
        else:
            srcs = [(lambda: p.stdout.read1(READ_CHUNK), STDOUT, self.want["stdout"]),
                    (lambda: p.stderr.read1(READ_CHUNK), STDERR, self.want["stderr"])]
        ts = [threading.Thread(target=self._pump, args=s, daemon=True) for s in srcs]
        for t in ts:
            t.start()
        return ts

    def _pump(self, read, ch, forward):
        while True:
            try:
                data = read()
            except (OSError, ValueError):
                return
            if not data:
                return
            if forward:
                try:
                    self.ws.channel(ch, data)
                except (WsClosed, OSError, ValueError):
                    forward = False   # keep draining so the process never blocks on us

    def _read_client(self, p):
        try:
            while True:
                m = self.ws.recv()
                if m is None:
                    break
                if m:
                    self._message(p, m[0], m[1:])
        except (WsClosed, OSError, ValueError):
            pass
        if p.poll() is None:
            # the client went away: the docker CLI ends; the command inside may outlive it
            p.terminate()

    def _message(self, p, ch, data):
        if ch == STDIN and self.want["stdin"]:
            if self.master is not None:
                _write_all(self.master, data)
            elif p.stdin is not None:
                try:
                    p.stdin.write(data)
                    p.stdin.flush()
                except (BrokenPipeError, ValueError):
                    pass
        elif ch == RESIZE and self.master is not None:
            self._resize(data)
        elif ch == CLOSE and self.v5 and data[:1] == bytes([STDIN]):
            if self.master is None and p.stdin is not None:
                try:
                    p.stdin.close()
                except OSError:
                    pass

    def _resize(self, data):
        try:
            size = json.loads(data)
            w, h = int(size.get("Width", 0)), int(size.get("Height", 0))
        except (ValueError, TypeError, AttributeError):
            return
        if 0 < w <= MAX_WINDOW and 0 < h <= MAX_WINDOW:
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", h, w, 0, 0))


def _controlling_tty():
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _read_pty(fd):
    try:
        return os.read(fd, READ_CHUNK)
    except OSError:   # EIO: every slave end closed, the docker CLI has exited
        return b""


def _write_all(fd, data):
    while data:
        try:
            n = os.write(fd, data)
        except OSError:
            return
        data = data[n:]
