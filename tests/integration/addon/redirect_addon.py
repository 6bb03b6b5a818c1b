"""Test-only mitmproxy addon: send every upstream connection to the local echo server.

Vector hosts (api.example.com, ...) do not resolve. This addon wraps
``asyncio.open_connection`` -- the call in which mitmproxy resolves and connects
upstream -- so the TCP connection goes to the address given in
``uplinktest_redirect`` (``HOST:PORT``, then optional ``,NAME=HOST:PORT`` overrides for
single names), while mitmproxy keeps the original host for
SNI, certificate checks, the Host header and the uplink addon. Every attempt is logged
as a JSON line ``{"host", "port"}`` to ``uplinktest_connect_log``, so a test can tell
that a refused CONNECT never got as far as a name look-up.

It also stands in for DNS: ``socket.getaddrinfo`` (which the uplink addon's look-up
uses, through the event loop) answers a name with the addresses given in
``uplinktest_resolve`` (``NAME=IP[+IP...],...``; ``NAME=A/B`` answers A to the first
look-up and B to every later one, a rebinding name) or, for any other name, with an address
of its own from 10.77.0.0/16 (one per name, private, so the uplink addon lets it
through) -- only with a default target in ``uplinktest_redirect``, so that no
connection ever goes to a made-up address. The connect log and the per-name overrides
name the host whatever address the uplink addon connected to, so ``NAME=127.0.0.1``
tests what a name resolving to loopback gets. Never used in production.
"""

import asyncio
import ipaddress
import json
import socket

from mitmproxy import ctx

_original = asyncio.open_connection
_getaddrinfo = socket.getaddrinfo
_state = {"target": None, "names": {}, "log": "", "resolve": {}, "fake": {}, "by_ip": {}}


def _literal(host):
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _fake_getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
    if not isinstance(host, str) or _literal(host) or host == "localhost":
        return _getaddrinfo(host, port, family, type, proto, flags)
    name = host.lower()
    answers = _state["resolve"].get(name)
    ips = None
    if answers is not None:
        ips = answers[0].split("+")
        if len(answers) > 1:
            del answers[0]  # a rebinding name: the next answer from now on
    if ips is None:
        ips = _state["fake"].get(name)
        if ips is None:
            n = len(_state["fake"]) + 1
            ips = _state["fake"][name] = [f"10.77.{n >> 8 & 255}.{n & 255}"]
    out = []
    for ip in ips:
        _state["by_ip"].setdefault(ip, name)
        fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
        addr = (ip, int(port or 0), 0, 0) if fam == socket.AF_INET6 else (ip, int(port or 0))
        out.append((fam, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", addr))
    return out


async def _redirected(host=None, port=None, *args, **kwargs):
    host = _state["by_ip"].get(host, host)  # the name the uplink addon resolved
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
        loader.add_option("uplinktest_resolve", str, "", "NAME=IP[+IP...],... (fake DNS)")

    def configure(self, updated):
        def addr(text):
            host, _, port = text.rpartition(":")
            return host, int(port)

        default, *names = ctx.options.uplinktest_redirect.split(",")
        _state["target"] = addr(default) if default else None
        _state["names"] = dict((n, addr(a)) for n, _, a in (x.partition("=") for x in names))
        _state["log"] = ctx.options.uplinktest_connect_log
        _state["resolve"] = {n.lower(): ips.split("/") for n, _, ips in
                             (x.partition("=") for x in ctx.options.uplinktest_resolve.split(",")
                              if x)}
        asyncio.open_connection = _redirected
        # Fake answers only where every connection goes to the echo server anyway.
        socket.getaddrinfo = _fake_getaddrinfo if _state["target"] else _getaddrinfo

    def tcp_start(self, flow):
        if _state["log"]:
            with open(_state["log"], "a") as f:
                f.write(json.dumps({"tcp_flow": True}) + "\n")


addons = [Redirect()]
