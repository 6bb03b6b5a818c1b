"""uplink filter addon for mitmproxy (8.1 and 12): allow-list, injection, SigV4, audit.

Loaded with ``mitmdump -s filter.py``; the format of its inputs, its options and
the mitmproxy hooks it relies on are described in README.md next to this file.
This file holds the addon and its hooks; the policy and its helpers are the
``uplink_*.py`` modules beside it (rules and matching, AWS, output and files,
framing and addresses), which it loads by path and whose names it re-exports.

The policy part (``parse_rules``, ``RuleSet``, ``aws_service_region``,
``sigv4_sign``) is plain standard-library Python and can be used without
mitmproxy, as the tests and the benchmark do.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.util
import ipaddress
import json
import os
import socket
import tempfile
import time
import traceback
import types

try:  # the policy part works without mitmproxy
    from mitmproxy import ctx, exceptions, http
    from mitmproxy.proxy import layers as mlayers
except ImportError:  # pragma: no cover - exercised by the in-process tests
    ctx = exceptions = http = mlayers = None


def _sibling(name, **deps):
    """Runs ``name``.py from this file's folder as a new module, ``deps`` set in it first.
    By path and under a name of its own (this module's name + the file's), not with
    ``import``: mitmproxy re-runs filter.py on a reload, and an imported module would be
    taken from ``sys.modules`` as it was, and found through ``sys.path`` (which mitmproxy
    extends with the script's folder, 8.1 and 12 alike), where another one may come first."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    if not os.path.isfile(path):
        raise ImportError(f"uplink: {path} is missing: install every uplink_*.py file with "
                          f"filter.py (uplinkd ships them together in ConfigMap mitm-addon)")
    spec = importlib.util.spec_from_file_location(f"{__name__}.{name}", path)
    mod = importlib.util.module_from_spec(spec)
    vars(mod).update(deps)
    spec.loader.exec_module(mod)
    return mod


uplink_rules = _sibling("uplink_rules")
uplink_aws = _sibling("uplink_aws", rules=uplink_rules)
uplink_io = _sibling("uplink_io", rules=uplink_rules)
uplink_net = _sibling("uplink_net", rules=uplink_rules)
uplink_control = _sibling("uplink_control", io=uplink_io)
uplink_ask = _sibling("uplink_ask")
# Every name of the modules is a name of filter.py too, as when they were one file: the
# hooks below use them so, and so do the tests and the benchmark (load_filter()).
for _mod in (uplink_rules, uplink_aws, uplink_io, uplink_net):
    globals().update((k, v) for k, v in vars(_mod).items()
                     if not k.startswith("__") and not isinstance(v, types.ModuleType))
del _mod

SIGV4_BUFFER_WARN = 8 * 1024 * 1024     # a body this big buffered for signing is logged
DEFAULT_RELOAD_MS = 1000
TICK_MIN_S = 0.25                       # the periodic rules check runs at most this often
META = "uplink"


def _fail_closed(hook):
    """Wraps a hook: mitmproxy logs an addon's exception and lets the flow go on, so any
    exception here denies what the hook was deciding (UplinkFilter._failed) instead."""
    @functools.wraps(hook)
    def guarded(self, arg):
        try:
            return hook(self, arg)
        except Exception as e:  # noqa: BLE001 - every failure must deny
            self._failed(hook.__name__, arg, e)
        return None
    return guarded

# --------------------------------------------------------------------------- connections
# mitmproxy (8 and 12) offers addons no way to close a connection or to answer a request
# before its body is read; these reach into its connection handlers, the same attributes
# in both versions, and do nothing when they are not found.

def _handler_of(client_id):
    """mitmproxy's handler of the client connection with this id, or None."""
    server = ctx.master.addons.get("proxyserver") if ctx is not None else None
    conns = getattr(server, "connections", None) or getattr(server, "_connections", None) or {}
    for handler in list(conns.values()):
        if getattr(getattr(handler, "client", None), "id", None) == client_id:
            return handler
    return None


def close_client(client_id):
    """Closes a client connection (and so its upstream); False if it is not found."""
    handler = _handler_of(client_id)
    if handler is None:
        return False
    handler.close_connection(handler.client)
    return True


def _stream_of(flow):
    """The HTTP stream (layer) handling this flow, found from the connection's root layer."""
    handler = _handler_of(flow.client_conn.id)
    todo, seen = [getattr(handler, "layer", None)], set()
    while todo:
        obj = todo.pop()
        if obj is None or id(obj) in seen:
            continue
        seen.add(id(obj))
        if getattr(obj, "flow", None) is flow and hasattr(obj, "start_request_stream"):
            return obj
        todo.extend(getattr(obj, name, None) for name in ("layer", "child_layer"))
        # a layer that hands its events on (mitmproxy 8's HttpProxy) keeps only the method
        todo.append(getattr(getattr(obj, "_handle_event", None), "__self__", None))
        streams = getattr(obj, "streams", None)
        if isinstance(streams, dict):
            todo.extend(streams.values())
    return None


def answer_before_body(flow):
    """Makes mitmproxy send the response set at requestheaders at once, instead of reading
    (and buffering) the whole body first; the body is then dropped as it arrives and, on
    HTTP/1, the connection closed once it ended (closing earlier would make the kernel
    reset the connection, and a client still sending its body would lose the answer).
    False if that cannot be arranged (the answer then follows the body)."""
    stream = _stream_of(flow)
    if stream is None:
        return False

    def start_request_stream():  # called by mitmproxy right after requestheaders
        stream.client_state = stream.state_done  # send_response then ends the stream
        yield from stream.send_response()
        stream.client_state = stream.state_errored  # the rest of the body is dropped

    stream.start_request_stream = start_request_stream
    if flow.request.http_version.startswith("HTTP/1"):
        flow.response.headers["Connection"] = "close"  # mitmproxy closes after the body
    flow.request.stream = True
    return True


# What the audit line and the 403's hint say of a request the user was asked about.
_ASKED_REASON = {"deny": "asked: the user denied it",
                 "timeout": "asked: no answer in {} s",
                 "gone": "asked: the agent went away while it waited"}
_ASKED_HINT = {
    "deny": "the user was asked about this request and denied it: do not retry it; tell "
            "the user what you needed it for",
    "timeout": "the user was asked about this request and did not answer within {} s: tell "
               "the user what you need and retry only once they say they approved it "
               "(uplink approvals; uplink approve ID)",
    "gone": "the connection closed while the request waited for the user"}
# The rule a request released "once" goes out under: it injects nothing.
_APPROVED_ONCE = uplink_rules._parse_rule(-1, {"name": "approved-once", "layer": "session",
                                               "hosts": [".*"]})


def _has_body(req):
    return "transfer-encoding" in req.headers or _declared_length(req.headers) not in (None, 0)


# --------------------------------------------------------------------------- addon

class UplinkFilter:
    def __init__(self, audit=None):
        self.audit = audit or AuditLog()
        self.rules_file = Watched("rules", parse_rules, RuleSet())
        self.creds_file = Watched("aws credentials", parse_aws_creds, {})
        self.reload_s = DEFAULT_RELOAD_MS / 1000.0
        self.pending_l4 = {}   # client connection id -> {(host, port): rule}
        self.open_l4 = {}      # client connection id -> (host, port) of its open relay
        self.ca_bundle = None  # the combined upstream bundle we wrote
        self.refuse_cidrs = ()  # uplink_refuse_cidrs
        self.control_token = None  # uplink_control_token: the listener runs only with one
        self.control = None        # uplink_control.Server, once running
        uplink_control.register("PUT", "/v1/rules", self._put_rules)
        uplink_control.register("GET", "/v1/status", self._get_status)
        self.ask = uplink_ask.Asker(self._release, self._held_allowed, uplink_rules._parse_rule)
        self.ask.register(uplink_control)
        uplink_control.register_status("held", lambda: len(self.ask.held))
        self._combined = (None, -1, RuleSet())  # (file rules, session version, both)

    @property
    def rules(self):
        """The rules file's rules, then those the user approved for this session."""
        base = self.rules_file.value
        if not self.ask.session_raw:
            return base
        known, version, both = self._combined
        if known is not base or version != self.ask.session_version:
            both = RuleSet(list(base.rules) + self.ask.session_rules(len(base)))
            self._combined = (base, self.ask.session_version, both)
        return both

    # -- options

    def load(self, loader):
        guard_output()
        loader.add_option("uplink_rules", str, "", "Path of the uplink rules JSON (version 1).")
        loader.add_option("uplink_aws_creds", str, "",
                          "Path of the AWS credentials map (dummy key id -> real keys).")
        loader.add_option("uplink_reload_ms", int, DEFAULT_RELOAD_MS,
                          "Check the rules and credentials files for changes at most this "
                          "often (milliseconds; 0 = on every connection and request).")
        loader.add_option("uplink_extra_ca", str, "",
                          "PEM bundle of extra upstream CAs, trusted in addition to the "
                          "public roots (sets ssl_verify_upstream_trusted_ca).")
        loader.add_option("uplink_refuse_cidrs", str, "",
                          "Comma-separated CIDRs (e.g. the cluster's service range) the proxy "
                          "never connects to unless a rule names the IP.")
        loader.add_option("uplink_control_token", str, "",
                          "Path of the control listener's token (uplinkd's per-session "
                          "secret); empty: no control listener.")
        loader.add_option("uplink_control_port", int, uplink_control.CONTROL_PORT,
                          "Port of the control listener (uplinkd reaches it through the "
                          "API server's pod proxy).")
        loader.add_option("uplink_ask", bool, False,
                          "Hold a request no rule allows while uplinkd asks the user "
                          "(ask mode), instead of denying it at once.")
        loader.add_option("uplink_ask_timeout", int, uplink_ask.DEFAULT_TIMEOUT_S,
                          "How long a held request waits for the user's answer (seconds).")

    def configure(self, updated):
        opts = ctx.options
        if "uplink_reload_ms" in updated:
            if opts.uplink_reload_ms < 0:
                raise exceptions.OptionsError("uplink_reload_ms must be >= 0")
            self.reload_s = opts.uplink_reload_ms / 1000.0
        if "uplink_rules" in updated:
            self._set_source(self.rules_file, opts.uplink_rules)
        if "uplink_ask_timeout" in updated:
            if not 1 <= opts.uplink_ask_timeout <= uplink_ask.TIMEOUT_MAX_S:
                raise exceptions.OptionsError(
                    f"uplink_ask_timeout must be 1 to {uplink_ask.TIMEOUT_MAX_S} seconds")
            self.ask.timeout_s = opts.uplink_ask_timeout
        if "uplink_aws_creds" in updated:
            self._set_source(self.creds_file, opts.uplink_aws_creds)
        if "rawtcp" in updated and getattr(opts, "rawtcp", False):
            # Non-HTTP bytes in a tunnel must not be relayed unless an l4_forward rule
            # matched; with rawtcp off mitmproxy parses them as HTTP and rejects them.
            opts.update(rawtcp=False)
            oplog("info", "rawtcp turned off: only l4_forward rules relay raw TCP")
        self._configure_connections(opts, updated)
        if "uplink_control_token" in updated:
            self._read_control_token(opts.uplink_control_token)
        if {"uplink_ask", "uplink_control_token"} & set(updated):
            self.ask.enabled = opts.uplink_ask and self.control_token is not None
            if opts.uplink_ask and self.control_token is None:
                oplog("warn", "uplink_ask is on but there is no control token: no one could "
                              "answer, so requests no rule allows are denied at once")
        if "uplink_extra_ca" in updated and opts.uplink_extra_ca:
            self._combine_upstream_ca(opts.uplink_extra_ca)
        elif ("ssl_verify_upstream_trusted_ca" in updated and opts.ssl_verify_upstream_trusted_ca
              and opts.ssl_verify_upstream_trusted_ca != self.ca_bundle):
            oplog("warn", "ssl_verify_upstream_trusted_ca replaces the public roots; "
                          "use uplink_extra_ca to add CAs to them")

    # Options the decisions depend on, held whatever the command line says: connections
    # upstream open only once the addon has decided (lazy; mitmproxy 8 also connects first
    # to copy the upstream's certificate unless upstream_cert is off: the agent's TLS is
    # answered with a certificate for the name it asked for), and mitmproxy's onboarding
    # app (http://mitm.it/) never answers.
    _FORCED = (("connection_strategy", "lazy"), ("upstream_cert", False), ("onboarding", False))

    def _configure_connections(self, opts, updated):
        for name, value in self._FORCED:
            if name in updated and getattr(opts, name, value) != value:
                opts.update(**{name: value})
                oplog("info", f"{name} set to {value}: uplink decides before connecting")
        if "uplink_refuse_cidrs" in updated:
            try:
                self.refuse_cidrs = tuple(ipaddress.ip_network(c.strip(), strict=False)
                                          for c in opts.uplink_refuse_cidrs.split(",")
                                          if c.strip())
            except ValueError as e:
                raise exceptions.OptionsError(f"uplink_refuse_cidrs: {e}") from None

    def _set_source(self, watched, path):
        res = watched.set_path(path)
        if not path:
            oplog("warn", f"no {watched.what} file set; "
                          + ("every request is denied" if watched is self.rules_file
                             else "AWS requests are not re-signed"))
            return
        if res is not True and not watched.good:
            raise exceptions.OptionsError(f"{watched.what}: {path}: {res}")
        if res is True:
            self._log_loaded(watched)

    def _log_loaded(self, watched):
        if watched is self.rules_file:
            oplog("info", f"rules: loaded {len(self.rules)} rules "
                          f"({self.rules.n_l4} l4_forward) from {watched.path}")
        else:
            oplog("info", f"aws credentials: loaded {len(watched.value)} signing identities")

    def _poll(self):
        for watched in (self.rules_file, self.creds_file):
            if watched.poll(self.reload_s) is True:
                self._log_loaded(watched)
                if watched is self.rules_file:
                    self._close_revoked_relays()

    def running(self):
        """Rules are also re-read on a timer, not only when traffic comes, so that a reload
        closes an idle relay whose rule it removed. The control listener starts here, on
        mitmproxy's own loop (a hook and a control call never run at once); mitmproxy 8.1
        calls this hook synchronously after a reload, so the start is a task."""
        self._tick_loop = asyncio.get_running_loop()
        self._tick_loop.call_later(max(self.reload_s, TICK_MIN_S), self._tick)
        if self.control_token and self.control is None:
            self.control = uplink_control.Server(self.control_token,
                                                 ctx.options.uplink_control_port)
            self._tick_loop.create_task(self._start_control(self.control))

    async def _start_control(self, server):
        try:
            await server.start()
        except OSError as e:
            oplog("error", f"control: cannot listen on port {server.port} ({e.strerror}); "
                           "rules reach the proxy through the Secret alone")

    def _read_control_token(self, path):
        """The token, read once: it lives as long as the session."""
        self.control_token = None
        if not path:
            return
        try:
            self.control_token = uplink_control.read_token(path)
        except (OSError, ValueError) as e:
            raise exceptions.OptionsError(f"uplink_control_token: {path}: {e}") from None

    async def _put_rules(self, request):
        """PUT /v1/rules: a whole rules document, parsed as the Secret's file is and swapped
        in at once; a bad one is refused and the rules in force stay."""
        if request.json is None:
            return 400, {"error": "send the rules document as the body"}
        res = self.rules_file.offer(request.body, "pushed rules")
        if res is not True:
            return 400, {"error": res, "generation": self.rules_file.generation}
        oplog("info", f"rules: loaded {len(self.rules)} rules ({self.rules.n_l4} l4_forward) "
                      "from the control channel")
        self._close_revoked_relays()
        return 200, {"generation": self.rules_file.generation}

    async def _get_status(self, request):
        return 200, {"generation": self.rules_file.generation, "held": 0,
                     **uplink_control.status_fields()}

    def _tick(self):
        try:
            self._poll()
        except Exception as e:  # noqa: BLE001 - the timer must go on
            oplog("error", f"periodic rules check failed ({type(e).__name__})")
        self._tick_loop.call_later(max(self.reload_s, TICK_MIN_S), self._tick)

    def _close_revoked_relays(self):
        """A reload that takes away a relay's l4_forward rule closes the relay."""
        for client_id, (host, port) in list(self.open_l4.items()):
            rule = self.rules.match_connect(host)
            if rule is not None and rule.l4:
                continue
            del self.open_l4[client_id]
            closed = close_client(client_id)
            oplog("info" if closed else "warn",
                  f"l4 relay to {host}:{port}: its rule is gone, "
                  + ("relay closed" if closed else "cannot close it (connection not found)"))

    def _combine_upstream_ca(self, extra):
        try:
            import certifi  # a mitmproxy dependency: the roots mitmproxy trusts by default
            roots = certifi.where()
        except ImportError:  # pragma: no cover
            import ssl
            roots = ssl.get_default_verify_paths().openssl_cafile
        try:
            with open(roots, "rb") as f:
                public = f.read()
            with open(extra, "rb") as f:
                added = f.read()
        except OSError as e:
            raise exceptions.OptionsError(f"uplink_extra_ca: {e}") from None
        if b"-----BEGIN CERTIFICATE-----" not in added:
            raise exceptions.OptionsError(f"uplink_extra_ca: {extra} holds no PEM certificate")
        fd, path = tempfile.mkstemp(prefix="uplink-upstream-ca-", suffix=".pem")
        with os.fdopen(fd, "wb") as f:
            f.write(public.rstrip(b"\n") + b"\n" + added)
        old, self.ca_bundle = self.ca_bundle, path
        ctx.options.update(ssl_verify_upstream_trusted_ca=path)
        if old:
            os.unlink(old)
        oplog("info", f"upstream trust: {path} = public roots ({roots}) + {extra}")

    def done(self):
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.ca_bundle:
            try:
                os.unlink(self.ca_bundle)
            except OSError:
                pass

    # -- CONNECT and L4

    @_fail_closed
    def http_connect(self, flow):
        self._poll()
        host, port = normalize_host(flow.request.host), flow.request.port
        rule = self.rules.match_connect(host)
        if rule is None and not self._may_tunnel_to_ask(host):
            flow.metadata[META] = {"logged": True}
            flow.response = self._refusal(flow, "CONNECT", host, None)
            self._emit("connect-refused", None, "CONNECT", None, host, port, None, 403)
        elif rule is not None and rule.l4:
            self.pending_l4.setdefault(flow.client_conn.id, {})[(host, port)] = rule
            flow.metadata[META] = {"l4": {"name": rule.name, "layer": rule.layer}}

    def _may_tunnel_to_ask(self, host):
        """In ask mode a tunnel no rule names is opened (the requests in it are held and
        asked about), unless it is to an address refused by design."""
        if not self.ask.enabled:
            return False
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return True
        return refusal_of_address(self.rules, ip, self.refuse_cidrs) is None

    @_fail_closed
    def next_layer(self, nextlayer):
        context = nextlayer.context
        pending, addr = self.pending_l4.get(context.client.id), context.server.address
        if not pending or addr is None:
            return
        host, port = normalize_host(addr[0]), addr[1]
        rule = pending.pop((host, port), None)
        if not pending:
            del self.pending_l4[context.client.id]
        if rule is None:
            return
        if nextlayer.layer is not None:
            oplog("warn", f"l4 relay for {host}:{port} not installed: another addon chose the "
                          "layer")
            return
        nextlayer.layer = mlayers.TCPLayer(context, ignore=True)  # records nothing
        # server_connect logs a refusal, server_connect_error a failure (no flow does)
        context.server.uplink_l4 = {"name": rule.name, "layer": rule.layer}
        self.open_l4[context.client.id] = (host, port)
        self._emit("l4", rule, "CONNECT", None, host, port, None, 200)

    @_fail_closed
    def client_disconnected(self, client):
        self.ask.drop_client(client.id)
        self.pending_l4.pop(client.id, None)
        self.open_l4.pop(client.id, None)

    @_fail_closed
    def tcp_start(self, flow):
        # Our L4 relay records nothing, so a TCP flow means mitmproxy fell back to raw TCP
        # for a tunnel no l4_forward rule allowed: relay nothing.
        flow.metadata[META] = {"blocked": True}
        addr = flow.server_conn.address or ("", 0)
        self._emit("deny", None, None, "tcp", normalize_host(addr[0]), addr[1], None, None)
        try:
            flow.kill()
        except Exception:  # noqa: BLE001 - best effort; tcp_message drops the bytes anyway
            pass

    @_fail_closed
    def tcp_message(self, flow):
        if flow.metadata.get(META, {}).get("blocked") and flow.messages:
            flow.messages[-1].content = b""

    # -- upstream connections

    async def server_connect(self, data):
        """Resolve the name here and connect to a checked address (no DNS rebinding to
        loopback, link-local, metadata...): the connection is pinned to that address until
        it is open, then given its name back (connection reuse matches by name)."""
        server = data.server
        if not server.address or getattr(server, "via", None) is not None:
            return
        try:
            await self._pin_address(server)
        except Exception as e:  # noqa: BLE001 - whatever went wrong, do not connect
            server.error = f"uplink could not check the address: {type(e).__name__}"
            oplog("error", f"server_connect: {type(e).__name__}: {e}")

    async def _pin_address(self, server):
        host, port = server.address[0], server.address[1]
        if not _is_name(host):
            self._pin_to(server, host, port, [ipaddress.ip_address(normalize_host(host))])
            return
        try:
            # Only families the pod has an address of (the connection goes to one address,
            # with no fallback to the next): in the resolver's order (RFC 6724).
            infos = await asyncio.get_running_loop().getaddrinfo(
                normalize_host(host), port, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG)
        except (OSError, UnicodeError) as e:
            server.error = f"uplink cannot resolve {normalize_host(host)}: {e}"
            self._refused_connection(server, host, port)
            return
        self._pin_to(server, host, port,
                     [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos])

    def _pin_to(self, server, host, port, ips):
        reasons = []
        for ip in ips:
            why = refusal_of_address(self.rules, ip, self.refuse_cidrs)
            if why is None:
                server.uplink_asked = (host, port)
                server.address = (str(ip), port)
                if server.tls and not server.sni and _is_name(host):
                    server.sni = normalize_host(host)
                return
            reasons.append(why)
        server.error = reasons[0] if reasons else f"uplink: {host} has no address"
        self._refused_connection(server, host, port)

    def _refused_connection(self, server, host, port):
        if getattr(server, "uplink_l4", False):  # a relay has no flow to log the failure on
            server.uplink_logged = True
            self._emit("deny", None, "CONNECT", None, normalize_host(host), port, None, 502,
                       server.error)

    @_fail_closed
    def server_connect_error(self, data):
        """An l4_forward relay's upstream did not answer (mitmproxy 10 and later call this;
        8.1 does not, see README.md "Known limits")."""
        server = data.server
        if getattr(server, "uplink_l4", False) and not getattr(server, "uplink_logged", False):
            server.uplink_logged = True
            host, port = getattr(server, "uplink_asked", None) or server.address
            self._emit("l4", server.uplink_l4, "CONNECT", None, normalize_host(host), port,
                       None, 502, str(server.error))

    @_fail_closed
    def server_connected(self, data):
        addr = getattr(data.server, "uplink_asked", None)
        if addr is not None:
            # Only the name comes back (the socket is connected to the checked address);
            # Server.__setattr__ refuses any change of address on an open connection.
            object.__setattr__(data.server, "address", addr)

    # -- HTTP

    def _refusal(self, flow, method, host, path, reason=None, status=403, asked=None):
        """The 403 JSON (README.md "When a request is denied"): ``asked`` and ``answer``
        say whether the user was asked and what came of it, ``ask_mode`` whether this
        session asks at all."""
        hint = reason or deny_hint(method, host, path)
        body = {"error": "denied by uplink", "method": method, "host": host, "path": path,
                "asked": asked is not None, "ask_mode": self.ask.enabled}
        if asked is not None:
            body["answer"] = {"deny": "denied", "timeout": "no answer"}.get(asked, "gone")
            hint = _ASKED_HINT[asked].format(self.ask.timeout_s) + "; " + hint
        elif reason is None and not self.ask.enabled:
            hint += ("; or the user can start the session with --ask to be asked about "
                     "requests like this one while it waits")
        body["hint"] = hint
        flow.request.stream = False  # a response and streaming cannot be combined
        return http.Response.make(
            status, json.dumps(body, ensure_ascii=True).encode() + b"\n",
            {"Content-Type": "application/json", "X-Uplink-Denied": "1",
             "Cache-Control": "no-store"})

    def _mismatch(self, flow, host):
        """A request must name the host it is sent to (no fronting through an allowed host):
        exactly one Host header on HTTP/1, and it, an absolute-form target inside a tunnel
        and HTTP/2's :authority must each be a plain host[:port] naming this host and port."""
        req = flow.request
        hosts = req.headers.get_all("host")
        if len(hosts) > 1 or (not hosts and req.http_version.startswith("HTTP/1")):
            return (f"the request has {len(hosts)} Host headers; send exactly one, naming "
                    f"{host}")
        named = [("Host header", v) for v in hosts]
        if req.authority:  # kept by mitmproxy inside a tunnel: the origin may route by it
            named.append(("request's authority", req.authority))
        for what, value in named:
            hp = split_authority(value)
            if hp is None:
                return (f"the {what} ({value[:100]!r}) is not a plain host[:port]; "
                        f"name {host} as it is")
            if hp[0] != host or hp[1] not in (None, req.port):
                return (f"the {what} ({value[:100]}) names another host or port than the "
                        f"connection ({host}:{req.port}); send the request to the host "
                        "it is meant for")
        sni = flow.client_conn.sni
        if sni and normalize_host(sni) != host:
            return (f"the TLS server name ({normalize_host(sni)}) differs from the host of the "
                    f"request ({host}); send the request to the host it is meant for")
        return None

    @_fail_closed
    def requestheaders(self, flow):
        self._poll()
        req = flow.request
        host, method = normalize_host(req.host), raw_method(req)
        overrides = method_overrides(req.headers.items(multi=True))
        rule, status, reason = self._decide(flow, method, host, overrides)
        if rule is None:
            if reason is None and self._askable(flow, host) and self.ask.hold(
                    flow, method, host, req.path):
                return  # held: _release goes on once the user answered or time ran out
            self._deny(flow, method, host, reason, status)
            self._answer_now(flow)
            return
        self._allow(flow, method, overrides, rule)

    def _allow(self, flow, method, overrides, rule):
        """A request a rule allows: its credentials injected or its AWS signature planned."""
        req = flow.request
        host = normalize_host(req.host)
        meta = {"rule": rule.name, "layer": rule.layer, "decision": "allow", "injected": []}
        flow.metadata[META] = meta
        reflect = any(m.strip(" \t").translate(_ASCII_UPPER) in NO_INJECT_METHODS
                      for m in [method, *overrides])
        plan = None if reflect else self._aws_plan(flow, host, rule)  # TRACE would echo it
        if flow.response is not None:  # a dummy-signed request this rule does not re-sign
            self._answer_now(flow)
            return
        if plan is not None:
            meta["decision"], meta["sign"] = "resign", plan
            for name in _STRIP[1:]:
                if name in req.headers:
                    del req.headers[name]
            if plan["s3"]:
                self._sign(flow, plan)
                if flow.response is not None:
                    self._answer_now(flow)
                    return
            else:  # the signature covers the body hash: buffer until the body is complete
                req.stream = False
                n = _declared_length(req.headers)
                if n is None and "transfer-encoding" in req.headers or (n or 0) > SIGV4_BUFFER_WARN:
                    oplog("warn", f"sigv4 buffering {n if n is not None else 'unknown'} bytes "
                                  f"to sign {method} {host}")
                return
        else:
            for name in rule.remove:
                if name in req.headers:
                    del req.headers[name]
            for name, value in rule.headers:
                req.headers[name] = value
            meta["injected"] = [name for name, _ in rule.headers]
        if should_stream_request(req.headers):
            req.stream = _Counter()

    def _decide(self, flow, method, host, overrides):
        """(rule, status, reason): the allowing rule, or None with the status and the
        reason (None: the generic hint) of the denial."""
        req = flow.request
        problem = framing_problem(req.headers.fields) or target_problem(method, req.path)
        status, reason = problem if problem else (403, self._mismatch(flow, host))
        rule = None if reason else self.rules.match_request(method, host, req.path, req.port,
                                                            overrides)
        if rule is not None and rule.headers and req.scheme != "https":
            # Credentials never travel in clear, whatever the rule's hosts allow.
            reason = (f"rule '{rule.name}' injects credentials, which uplink sends only over "
                      f"HTTPS; use https://{host}{req.path}")
            rule = None
        if rule is None and reason is None and unsafe_path(req.path):
            reason = ("the path holds a dot segment or an encoded '/', '\\' or '.', which "
                      "rules with paths refuse (an origin may read it as another path); "
                      "send the path in its plain form")
        return rule, status, reason

    @staticmethod
    def _answer_now(flow):
        """The response set at requestheaders goes out before the body, with no 100 Continue
        first (mitmproxy would send it for an Expect header)."""
        flow.request.headers.pop("expect", None)
        if _has_body(flow.request) and not answer_before_body(flow):
            oplog("warn", "could not answer a denied request before its body; "
                          "mitmproxy reads the body first")

    def _deny(self, flow, method, host, reason, status=403, asked=None):
        """Answers the request with the JSON refusal and writes its audit line (``asked``:
        the user's answer, "deny" or "timeout", when the request was held)."""
        req = flow.request
        flow.metadata[META] = {"logged": True}
        req.headers.pop("expect", None)
        flow.response = self._refusal(flow, method, host, req.path, reason, status, asked)
        why = _ASKED_REASON[asked].format(self.ask.timeout_s) if asked else None
        self._emit("deny", None, method, req.scheme, host, req.port, req.path, status, why)

    # -- ask mode (uplink_ask.py holds; these decide what a held request may become)

    def _askable(self, flow, host):
        """A request no rule allows may be asked about unless it is refused by design: a
        dummy-signed AWS request (approval could only send it unsigned, and credential
        calls are never asked about). An approval never injects a credential."""
        auth = flow.request.headers.get("authorization", "")
        return not (is_aws_host(host) and _SIGV4_AUTH_RE.match(auth))

    def _held_allowed(self, entry):
        flow = entry.flows[0]
        req = flow.request
        return self._decide(flow, raw_method(req), normalize_host(req.host),
                            method_overrides(req.headers.items(multi=True)))[0] is not None

    def _release(self, flow, decision):
        """A held request goes on ("once": as sent, under no rule; "session": under the
        rule now allowing it) or gets the 403 saying the user was asked."""
        req = flow.request
        host, method = normalize_host(req.host), raw_method(req)
        try:
            rule = None
            if decision in ("once", "session"):
                overrides = method_overrides(req.headers.items(multi=True))
                rule = (_APPROVED_ONCE if decision == "once"
                        else self._decide(flow, method, host, overrides)[0])
            if rule is not None:
                self._allow(flow, method, overrides, rule)
            else:
                self._deny(flow, method, host, None, 403,
                           decision if decision in ("timeout", "gone") else "deny")
            if flow.response is not None:
                self._answer_now(flow)
        except Exception as e:  # noqa: BLE001 - every failure must deny
            self._failed("requestheaders", flow, e)

    def _failed(self, hook, arg, exc):
        """A hook raised: log where (never the message, it may quote a header or a
        secret) and deny what the hook was deciding."""
        where = traceback.extract_tb(exc.__traceback__)[-1]
        oplog("error", f"{hook} hook failed ({type(exc).__name__} in {where.name}, line "
                       f"{where.lineno}); denying what it was deciding")
        try:
            if http is not None and isinstance(arg, http.HTTPFlow):
                if hook in ("http_connect", "requestheaders", "request"):
                    req = arg.request
                    self._deny(arg, raw_method(req), normalize_host(req.host),
                               f"uplink failed while checking this request ({hook}); it is "
                               "denied. The proxy's log says why; report it", 500)
                elif hook != "error":
                    arg.kill()
            elif hasattr(arg, "server") and hasattr(arg, "client"):  # server_connect data
                arg.server.error = f"uplink: the {hook} check failed; connection refused"
            elif hasattr(arg, "layer") and hasattr(arg, "context"):  # next_layer
                arg.layer = None  # mitmproxy's own choice: intercepted, checked per request
            elif hasattr(arg, "kill"):  # a TCP flow
                if getattr(arg, "messages", None):
                    arg.messages[-1].content = b""
                arg.kill()
        except Exception as e2:  # noqa: BLE001
            oplog("error", f"{hook}: denying after the failure failed too "
                           f"({type(e2).__name__}); closing nothing more")

    def _aws_plan(self, flow, host, rule):
        """How to re-sign a request made with a dummy key, or None (not one). A rule that
        may not re-sign (the generic layer, hosts that do not name AWS: no ``aws_sign``) gets
        the request refused: with the dummy key it could only fail."""
        req = flow.request
        if not is_aws_host(host):
            return None
        m = _SIGV4_AUTH_RE.match(req.headers.get("authorization", ""))
        if not m:
            return None
        akid = m.group(1)
        if akid not in self.creds_file.value:
            oplog("warn", f"sigv4 no credentials for key {akid} on {host}: request allowed "
                          "but not re-signed")
            return None
        if not rule.aws_sign or rule.layer == "generic":
            self._refuse_resign(flow, rule, (
                f"rule '{rule.name}' ({rule.layer} layer) does not re-sign AWS requests: only a "
                f"rule outside the read-only catch-all whose every host regex ends in "
                f"'\\.amazonaws\\.com' does; " + deny_hint(raw_method(req), host, req.path)))
            return None
        if req.scheme != "https":  # the signature and session token never travel in clear
            self._refuse_resign(flow, rule, (
                f"uplink re-signs AWS requests only over HTTPS; use https://{host}{req.path}"))
            return None
        service, region = aws_service_region(host)
        payload = req.headers.get("x-amz-content-sha256", "")
        return {"akid": akid, "service": service, "region": region, "s3": service == "s3",
                "payload": payload if payload in _S3_KEEP_PAYLOAD else UNSIGNED_PAYLOAD,
                "chunk_signed": payload.startswith("STREAMING-AWS4-HMAC-SHA256"),
                "allowed": sorted(rule.aws_actions)}

    def _refuse_resign(self, flow, rule, reason):
        """The 403 for a dummy-signed request not re-signed, and its audit line with why."""
        req = flow.request
        host, method = normalize_host(req.host), raw_method(req)
        flow.metadata[META] = {"logged": True}
        flow.response = self._refusal(flow, method, host, req.path, reason)
        oplog("info", f"sigv4 {method} {host}: not re-signed: {reason}")
        self._emit("deny", rule, method, req.scheme, host, req.port, req.path, 403, reason)

    @_fail_closed
    def request(self, flow):
        plan = flow.metadata.get(META, {}).get("sign")
        if plan is not None and not plan["s3"]:
            self._sign(flow, plan)

    def _sign(self, flow, plan):
        req = flow.request
        body = None if plan["s3"] else _bodies(req)
        action = aws_credential_action(raw_method(req), normalize_host(req.host), req.path,
                                       req.headers, body, frozenset(plan.get("allowed", ())))
        if action is not None:
            meta = flow.metadata.get(META, {})
            self._refuse_resign(flow, {"name": meta.get("rule"), "layer": meta.get("layer")}, (
                f"{action} hands out AWS credentials; uplink re-signs it only under a rule "
                f"that lists it, e.g. aws_allow_credential_actions: [{action}] (rule "
                f"'{meta.get('rule')}' does not)"))
            return
        creds = self.creds_file.value.get(plan["akid"])
        if creds is None:  # the map changed between headers and body
            req.stream = False
            flow.response = http.Response.make(
                502, b'{"error":"uplink: AWS credentials for this key are gone"}\n',
                {"Content-Type": "application/json"})
            return
        if plan["s3"]:
            payload = plan["payload"]
            if plan["chunk_signed"]:
                oplog("warn", f"sigv4 {req.host}: chunk-signed uploads "
                              "(STREAMING-AWS4-HMAC-SHA256-PAYLOAD) cannot be re-signed; "
                              "AWS will reject this request")
        else:
            payload = hashlib.sha256(req.raw_content or b"").hexdigest()
        for name in _STRIP:
            if name in req.headers:
                del req.headers[name]
        host = req.host_header or req.host
        if "host" not in req.headers:
            req.headers["Host"] = host
        signed = sigv4_sign(raw_method(req), req.path, req.headers.items(multi=True), host=host,
                            service=plan["service"], region=plan["region"],
                            access_key=creds[0], secret_key=creds[1], session_token=creds[2],
                            payload_hash=payload,
                            amz_date=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), s3=plan["s3"])
        for name, value in signed:
            req.headers[name] = value

    @_fail_closed
    def responseheaders(self, flow):
        meta = flow.metadata.get(META)
        if meta and "rule" in meta and should_stream_response(flow.response.headers):
            flow.response.stream = _Counter()

    @_fail_closed
    def response(self, flow):
        self._finish(flow)

    @_fail_closed
    def error(self, flow):
        self._finish(flow)

    def _finish(self, flow):
        meta = flow.metadata.get(META)
        if not meta or meta.get("logged"):
            return
        meta["logged"] = True
        req, resp = flow.request, flow.response
        # No response: the upstream could not be reached (or was refused, or the agent went
        # away); the agent got mitmproxy's 502, and the line says why.
        reason = str(flow.error.msg) if resp is None and flow.error else None
        status = resp.status_code if resp else (502 if reason else None)
        if meta.get("l4"):  # a CONNECT for an L4 rule: logged here only if it failed
            if status is None or not 200 <= status < 300:
                self._emit("l4", meta["l4"], "CONNECT", None, normalize_host(req.host),
                           req.port, None, status, reason)
            return
        out = req.stream.n if isinstance(req.stream, _Counter) else len(req.raw_content or b"")
        if resp is None:
            n_in = 0
        elif isinstance(resp.stream, _Counter):
            n_in = resp.stream.n
        else:
            n_in = len(resp.raw_content or b"")
        decision, injected, rule, layer = (meta["decision"], meta["injected"], meta.get("rule"),
                                           meta.get("layer"))
        if reason and "uplink refuses to connect" in reason:
            # a special-purpose address no rule names: nothing was sent
            decision, injected, rule, layer = "deny", [], None, None
        self.audit.emit(decision=decision, rule=rule, layer=layer,
                        method=raw_method(req), scheme=req.scheme, host=normalize_host(req.host),
                        port=req.port, path=req.path, status=status,
                        injected=injected, bytes_in=n_in, bytes_out=out, reason=reason)

    def _emit(self, decision, rule, method, scheme, host, port, path, status, reason=None):
        """An audit line for a decision that moves no body (rule: Rule, dict or None)."""
        l4 = decision == "l4"
        if isinstance(rule, Rule):
            rule = {"name": rule.name, "layer": rule.layer}
        self.audit.emit(decision=decision, rule=rule["name"] if rule else None,
                        layer=rule["layer"] if rule else None, method=method, scheme=scheme,
                        host=host, port=port, path=path, status=status, injected=[],
                        bytes_in=None if l4 else 0, bytes_out=None if l4 else 0, reason=reason)


addons = [UplinkFilter()]
