"""uplink filter addon: the control listener, which only uplinkd reaches.

An HTTP/1.1 server on the mitm's own asyncio loop (started from the addon's ``running``),
on CONTROL_PORT in the pod. uplinkd reaches it through the API server's pod proxy
subresource with its own Kubernetes credentials; the mitm's NetworkPolicy admits the agent
on the proxy port only. Every request carries ``X-Uplink-Control-Token`` (the session's
token, from the mitm-only Secret), compared in constant time; the API server consumes
``Authorization`` when it proxies, which is why the token has a header of its own.

Other modules add their endpoints with ``register(method, path, handler)``; a path is exact,
or a prefix when it ends in ``/``. ``async def handler(request) -> (status, body_dict)``,
where ``request`` has ``.method``, ``.path``, ``.query`` (dict of str), ``.json`` (the parsed
body or None) and ``.body`` (bytes). Bodies are JSON only and bounded; every call is logged
on stderr (method, path, status, size: never a header or a body). README.md, "Control
listener", says more. Loaded by filter.py, which sets ``io`` (uplink_io.py) in it first.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import urllib.parse

# filter.py loads this file by path and sets ``io`` (uplink_io.py) in it first.
oplog = io.oplog  # noqa: F821

CONTROL_PORT = 8081                  # common/protocol.h UP_CONTROL_PORT
TOKEN_HEADER = "x-uplink-control-token"
MAX_HEAD_BYTES = 16 * 1024           # request line and headers together
MAX_HEADERS = 64
MAX_BODY_BYTES = 8 * 1024 * 1024     # a rules document (common/bounds.h UP_MAX_CONTROL_BODY)
MAX_CONNECTIONS = 16                 # open at once; more are closed at once
IDLE_TIMEOUT_S = 60.0                # a connection quiet this long (or a slow head) is closed
LOG_PATH_MAX = 200                   # a path is cut to this in the log

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 411: "Length Required", 413: "Payload Too Large",
            415: "Unsupported Media Type", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}

_routes = {}     # (method, path) -> handler; a path ending in "/" is a prefix
_status = {}     # name -> callable giving a value for GET /v1/status


def register(method, path, handler):
    """Adds an endpoint (a later registration of the same method and path replaces it)."""
    if not path.startswith("/"):
        raise ValueError(f"control path {path!r} must start with '/'")
    _routes[(method.upper(), path)] = handler


def register_status(name, value):
    """Adds a field to GET /v1/status: ``value()`` gives it (e.g. "held")."""
    _status[name] = value


def status_fields():
    return {name: value() for name, value in _status.items()}


class Request:
    __slots__ = ("method", "path", "query", "json", "body")

    def __init__(self, method, path, query, body):
        self.method, self.path, self.query, self.body = method, path, query, body
        self.json = None


class _Refused(Exception):
    """A request answered with ``status`` and ``error`` (and the connection closed)."""

    def __init__(self, status, error):
        super().__init__(error)
        self.status, self.error = status, error


def _route(method, path):
    """(handler, None), or (None, 404/405)."""
    handler = _routes.get((method, path))
    if handler is not None:
        return handler, None
    best = None
    for (m, p), h in _routes.items():
        if p.endswith("/") and path.startswith(p) and (best is None or len(p) > len(best[0])):
            if m == method:
                best = (p, h)
    if best is not None:
        return best[1], None
    known = any(p == path or (p.endswith("/") and path.startswith(p)) for _, p in _routes)
    return None, 405 if known else 404


class Server:
    """The listener: ``start()`` on the running loop, ``close()`` when the addon goes."""

    def __init__(self, token, port=CONTROL_PORT, host="0.0.0.0"):
        self.token, self.port, self.host = token.encode(), port, host
        self.server, self.open, self.closed = None, set(), False

    async def start(self):
        server = await asyncio.start_server(self._serve, self.host, self.port,
                                            reuse_address=True, limit=MAX_HEAD_BYTES)
        if self.closed:  # the addon went (a reload) while it started
            server.close()
            return
        self.server = server
        oplog("info", f"control: listening on {self.host}:{self.port} "
                      f"(at most {MAX_CONNECTIONS} connections)")

    def close(self):
        self.closed = True
        if self.server is not None:
            self.server.close()
            self.server = None
        for writer in list(self.open):
            writer.close()

    async def _serve(self, reader, writer):
        if len(self.open) >= MAX_CONNECTIONS:
            oplog("warn", f"control: {MAX_CONNECTIONS} connections already open; "
                          "closing a new one")
            writer.close()
            return
        self.open.add(writer)
        try:
            while await self._one(reader, writer):
                pass
        except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open.discard(writer)
            writer.close()

    async def _one(self, reader, writer):
        """Serves one request; False when the connection is to be closed."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
        except asyncio.IncompleteReadError as e:
            if e.partial:
                await self._answer(writer, "?", "?", 400, {"error": "incomplete request"})
            return False
        except asyncio.LimitOverrunError:
            await self._answer(writer, "?", "?", 431,
                               {"error": f"request head over {MAX_HEAD_BYTES} bytes"})
            return False
        method, target = "?", "?"
        try:
            method, target, headers = _parse_head(head)
            path, _, query = target.partition("?")
            if not hmac.compare_digest(headers.get(TOKEN_HEADER, "").encode(), self.token):
                raise _Refused(401, "unauthorized")
            body = await _read_body(reader, headers)
            status, reply = await self._dispatch(method, path, query, body, headers)
        except _Refused as e:
            await self._answer(writer, method, target, e.status, {"error": e.error})
            return False
        keep = headers.get("connection", "").lower() != "close"
        await self._answer(writer, method, target, status, reply, keep, len(body))
        return keep

    async def _dispatch(self, method, path, query, body, headers):
        handler, missing = _route(method, path)
        if handler is None:
            return missing, {"error": f"no {method} {path} here" if missing == 404 else
                             f"{path} does not take {method}"}
        req = Request(method, path, dict(urllib.parse.parse_qsl(query)), body)
        if body:
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return 415, {"error": "the body must be application/json"}
            try:
                req.json = json.loads(body)
            except (ValueError, RecursionError):
                return 400, {"error": "the body is not JSON"}
        try:
            status, reply = await handler(req)
        except Exception as e:  # noqa: BLE001 - never the message: it may quote the body
            oplog("error", f"control: {method} {path[:LOG_PATH_MAX]} failed "
                           f"({type(e).__name__})")
            return 500, {"error": "the handler failed; the proxy's log says where"}
        return status, reply

    @staticmethod
    async def _answer(writer, method, target, status, reply, keep=False, n_in=0):
        body = json.dumps(reply, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n")
        oplog("info", f"control: {method} {target[:LOG_PATH_MAX]} -> {status} "
                      f"({n_in} bytes in)")
        writer.write(head.encode() + body)
        await writer.drain()


def _parse_head(head):
    """(method, target, headers with lower-case names), or _Refused."""
    if len(head) > MAX_HEAD_BYTES:
        raise _Refused(431, f"request head over {MAX_HEAD_BYTES} bytes")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[1].startswith("/") or parts[2] not in ("HTTP/1.1",
                                                                           "HTTP/1.0"):
        raise _Refused(400, "bad request line")
    headers = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise _Refused(400, "bad header line")
        if len(headers) >= MAX_HEADERS:
            raise _Refused(431, f"more than {MAX_HEADERS} headers")
        name = name.lower()
        if name in headers and name in (TOKEN_HEADER, "content-length"):
            raise _Refused(400, f"{name} given twice")
        headers[name] = value.strip()
    return parts[0], parts[1], headers


async def _read_body(reader, headers):
    if "transfer-encoding" in headers:
        raise _Refused(411, "chunked bodies are not taken; send Content-Length")
    value = headers.get("content-length", "0")
    if not value.isdigit():
        raise _Refused(400, "bad Content-Length")
    n = int(value)
    if n > MAX_BODY_BYTES:
        raise _Refused(413, f"body over {MAX_BODY_BYTES} bytes")
    if n == 0:
        return b""
    return await asyncio.wait_for(reader.readexactly(n), IDLE_TIMEOUT_S)


def read_token(path):
    """The token in the file (whitespace around it dropped), or raises OSError/ValueError."""
    with open(path, "rb") as f:
        token = f.read(1024).strip()
    if len(token) < 32 or not token.isalnum():
        raise ValueError("the token must be at least 32 letters or digits")
    return token.decode("ascii")
