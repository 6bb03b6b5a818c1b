"""Test-only mitmproxy addon: send every upstream connection to the local echo server.

Vector hosts (api.example.com, ...) do not resolve. This addon wraps
``asyncio.open_connection`` -- the call in which mitmproxy resolves and connects
upstream -- so the TCP connection goes to the address given in
``uplinktest_redirect`` (``HOST:PORT``, then optional ``,NAME=HOST:PORT`` overrides for
single names), while mitmproxy keeps the original host for
SNI, certificate checks, the Host header and the uplink addon. Every attempt is logged
as a JSON line ``{"host", "port"}`` to ``uplinktest_connect_log``, so a test can tell
that a refused CONNECT never got as far as a name look-up. Never used in production.
"""

import asyncio
import json

from mitmproxy import ctx

_original = asyncio.open_connection
_state = {"target": None, "names": {}, "log": ""}


async def _redirected(host=None, port=None, *args, **kwargs):
    if _state["log"]:
        with open(_state["log"], "a") as f:
            f.write(json.dumps({"host": host, "port": port}) + "\n")
    target = _state["names"].get(host) or _state["target"]
    if target:
        host, port = target
    return await _original(host, port, *args, **kwargs)


class Redirect:
    def load(self, loader):
        loader.add_option("uplinktest_redirect", str, "", "HOST:PORT for every upstream")
        loader.add_option("uplinktest_connect_log", str, "", "file logging connect attempts")

    def configure(self, updated):
        def addr(text):
            host, _, port = text.rpartition(":")
            return host, int(port)

        default, *names = ctx.options.uplinktest_redirect.split(",")
        _state["target"] = addr(default) if default else None
        _state["names"] = dict((n, addr(a)) for n, _, a in (x.partition("=") for x in names))
        _state["log"] = ctx.options.uplinktest_connect_log
        asyncio.open_connection = _redirected

    def tcp_start(self, flow):
        if _state["log"]:
            with open(_state["log"], "a") as f:
                f.write(json.dumps({"tcp_flow": True}) + "\n")


addons = [Redirect()]
