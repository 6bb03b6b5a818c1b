"""Test-only stand-in for the channel's control listener (manifests/mitm/uplink_control.py):
the same ``register(method, path, handler)`` registry, served over plain HTTP/1.1 on
127.0.0.1:$UPLINK_TEST_CONTROL_PORT, one request per connection, with no token. The ask
tests run filter.py from a copy of manifests/mitm/ with this file added, until the real
module is on this branch."""

import asyncio
import json
import os
import types
import urllib.parse

ROUTES = []


def register(method, path, handler):
    ROUTES.append((method, path, handler))


def _route(method, path):
    for m, p, handler in ROUTES:
        if m == method and (path == p or (p.endswith("/") and path.startswith(p))):
            return handler
    return None


async def _serve_one(reader, writer):
    try:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        method, target, _ = head[0].split(" ", 2)
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        raw = await reader.readexactly(length) if length else b""
        url = urllib.parse.urlsplit(target)
        req = types.SimpleNamespace(method=method, path=url.path,
                                    query=dict(urllib.parse.parse_qsl(url.query)),
                                    json=json.loads(raw) if raw else None)
        handler = _route(method, url.path)
        status, body = (await handler(req)) if handler else (404, {"error": "no such endpoint"})
        data = json.dumps(body).encode()
        writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (status, len(data), data))
        await writer.drain()
    finally:
        writer.close()


async def _start():
    port = int(os.environ["UPLINK_TEST_CONTROL_PORT"])
    await asyncio.start_server(_serve_one, "127.0.0.1", port)
    print(f"uplinktest control stand-in listening on {port}", flush=True)


asyncio.get_event_loop().call_soon(lambda: asyncio.ensure_future(_start()))
