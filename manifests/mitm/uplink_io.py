"""uplink filter addon: output guard, audit log, watched files, body streaming.

Loaded by filter.py, which sets ``rules`` (uplink_rules.py) first (see README.md).
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
import time

# filter.py loads this file by path and sets ``rules`` (uplink_rules.py) in it first.
RulesError, normalize_host = rules.RulesError, rules.normalize_host  # noqa: F821

STREAM_THRESHOLD = 1024 * 1024          # bodies above this (or of unknown size) stream

# --------------------------------------------------------------------------- plumbing

def oplog(level, msg):
    """Operational message (never a secret) on stderr; audit lines go to stdout."""
    msg = msg.replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever a name holds
    sys.stderr.write(f"uplink: {level}: {msg}\n")
    sys.stderr.flush()


class _LineGuard:
    """Wraps a text stream's ``write`` so that nothing written through it starts a line
    with ``{`` (a space is put before it): in the container log, which the daemon reads,
    a line starting with ``{`` can then only be an audit line, written with ``raw``.
    mitmproxy prints agent-controlled text (a WebSocket close reason, bodies with
    --mitm-debug) as sent, line breaks and all; it writes through ``sys.stdout`` and
    ``sys.stderr`` (8.1 and 12 alike), so that text can no longer pass for an audit line.
    Installed once per process (a reloaded script finds it in place)."""

    def __init__(self, stream):
        self.raw, self.bol = stream.write, True  # at the beginning of a line

    def write(self, text):
        if text:
            guarded = text.replace("\n{", "\n {")
            if self.bol and guarded.startswith("{"):
                guarded = " " + guarded
            self.bol = text.endswith("\n")
            self.raw(guarded)
        return len(text)

    def write_line(self, line):
        """A whole line of the addon's own, at the beginning of a line."""
        self.raw(line if self.bol else "\n" + line)
        self.bol = True

    @staticmethod
    def install(stream):
        guard = getattr(stream, "uplink_guard", None)
        if guard is None:
            guard = _LineGuard(stream)
            stream.write = guard.write
            stream.uplink_guard = guard
        return guard


def guard_output():
    """Puts the line guard on stdout and stderr (in mitmdump, from the addon's load)."""
    return _LineGuard.install(sys.stdout), _LineGuard.install(sys.stderr)


class AuditLog:
    FIELDS = ("decision", "rule", "layer", "method", "scheme", "host", "port", "path",
              "status", "injected", "bytes_in", "bytes_out", "reason")

    def __init__(self, stream=None):
        self.stream = stream

    def emit(self, **fields):
        now = time.time()
        rec = {"uplink": "audit",
               "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
               + ".%03dZ" % (int(now * 1000) % 1000)}
        for key in self.FIELDS:
            rec[key] = fields.get(key)
        out = self.stream or sys.stdout
        line = json.dumps(rec, separators=(",", ":"), ensure_ascii=True) + "\n"
        guard = getattr(out, "uplink_guard", None)
        if guard is not None:
            guard.write_line(line)
        else:
            out.write(line)
        out.flush()


class Watched:
    """A file re-read when its identity (device, inode, mtime, size) changes. A new
    version that cannot be read or parsed leaves the last good value in place."""

    def __init__(self, what, parse, empty):
        self.what, self.parse, self.empty, self.value = what, parse, empty, empty
        self.path, self.key, self.good, self.next_check, self.last_err = "", None, False, 0.0, None
        self.generation = 0  # versions loaded so far (from the file or pushed)

    def set_path(self, path):
        """Watch another file. Until it loads, the last good value stays in force; an empty
        path drops it."""
        self.path, self.key, self.next_check, self.last_err = path, None, 0.0, None
        if not path:
            self.value, self.good = self.empty, False
            return None
        return self.poll(force=True)

    def poll(self, interval=0.0, force=False):
        """Re-read if changed: None when nothing new, True when loaded, else the error."""
        now = time.monotonic()
        if not self.path or (not force and now < self.next_check):
            return None
        self.next_check = now + interval
        try:
            st = os.stat(self.path)
            key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
            if key == self.key:
                return None
            with open(self.path, "rb") as f:
                text = f.read()
        except OSError as e:
            return self._refuse(f"cannot read: {e}", self.path)
        self.key = key  # parse again only when the file changes again
        return self.offer(text, self.path)

    def offer(self, text, source):
        """A new version from ``source`` (the file, or the control channel): parsed by the
        same parser and swapped in whole, or refused with the last good value kept. True
        when loaded, else the error (never a parser's message: it may quote the text)."""
        try:
            value = self.parse(text)
        except Exception as e:  # noqa: BLE001 - RecursionError from deep JSON too: keep the last
            if isinstance(e, RulesError):
                err = str(e)
            elif isinstance(e, UnicodeDecodeError):
                err = f"cannot read: {e}"
            else:
                err = f"cannot parse: {type(e).__name__}"
            return self._refuse(err, source)
        self.value, self.good, self.last_err = value, True, None
        self.generation += 1
        return True

    def _refuse(self, err, source):
        if err != self.last_err:
            keep = "keeping the previous version" if self.good else "nothing loaded"
            oplog("error", f"{self.what}: {source}: {err} ({keep})")
            self.last_err = err
        return err


class _Counter:
    """A stream callable that passes chunks through and counts their bytes."""

    def __init__(self):
        self.n = 0

    def __call__(self, chunk):
        self.n += len(chunk)
        return chunk


def _declared_length(headers):
    """Content-Length as int, or None when absent, unparseable or chunked."""
    if "transfer-encoding" in headers:
        return None
    value = headers.get("content-length")
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        return None
    return n if n >= 0 else None


def should_stream_request(headers):
    if "transfer-encoding" in headers:
        return True
    if "content-length" not in headers:
        return False  # HTTP/1 request without length or chunking has no body
    n = _declared_length(headers)
    return n is None or n > STREAM_THRESHOLD


def should_stream_response(headers):
    n = _declared_length(headers)
    return n is None or n > STREAM_THRESHOLD


def raw_method(req):
    """The method exactly as sent: mitmproxy's ``Request.method`` upper-cases it, while the
    upstream receives the raw bytes, and rules compare methods exactly."""
    m = req.data.method
    return m.decode("utf-8", "surrogateescape") if isinstance(m, bytes) else m


def _is_name(host):
    try:
        ipaddress.ip_address(normalize_host(host))
    except ValueError:
        return True
    return False
