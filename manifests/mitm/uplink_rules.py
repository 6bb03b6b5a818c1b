"""uplink filter addon: the rules document (version 1) and matching.

Plain standard-library Python, without mitmproxy; loaded by filter.py (see README.md).
"""

from __future__ import annotations

import collections
import ipaddress
import json
import re
import string

FORMAT_VERSION = 1
HOST_CACHE_MAX = 4096                   # per rule set, cleared when full
METHODS = frozenset("GET POST PUT DELETE PATCH HEAD OPTIONS CONNECT TRACE".split())

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")
_REGEX_META = set(".^$*+?{}[]|()")
# Methods an origin may answer by reflecting the request's headers: never with a credential.
NO_INJECT_METHODS = frozenset(("TRACE", "TRACK"))
# Headers some frameworks take as the real method; a rule limiting methods checks them too.
METHOD_OVERRIDE_HEADERS = ("x-http-method-override", "x-http-method", "x-method-override")
# Path spellings a normalising origin reads as another path: dot segments (also before a
# ';' parameter) and encoded '.', '/' or '\'; a literal '\' too.
_ENCODED_SEP_RE = re.compile(r"%(2[eEfF]|5[cC])")
_ASCII_UPPER = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)
_RULE_KEYS = {"name", "layer", "source", "hosts", "methods", "paths", "inject", "l4_forward",
              "cidrs", "port", "aws_sign", "aws_allow_credential_actions"}
_AWS_ACTION_RE = re.compile(r"[A-Za-z0-9]{1,128}")


class RulesError(ValueError):
    """A rules or credentials document that must not be used; the message names the place."""


# --------------------------------------------------------------------------- rules

def normalize_host(host):
    """Host as matched: ASCII-lowercased, no brackets around IPv6 literals, no port, and
    internationalized names in their ASCII (punycode) form, as sent on the wire
    (mitmproxy hands out decoded names)."""
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            pass  # cannot be written as ASCII: no ASCII rule matches it
    host = host.translate(_ASCII_LOWER)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


def _literal(pattern):
    """The plain string a host regex stands for, or None when it uses regex syntax."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1].isalnum():
                return None
            out.append(pattern[i + 1])
            i += 2
            continue
        if c in _REGEX_META:
            return None
        out.append(c)
        i += 1
    return "".join(out).translate(_ASCII_LOWER)


class Rule:
    __slots__ = ("index", "name", "layer", "source", "l4", "host_patterns", "host_res",
                 "methods", "path_res", "headers", "remove", "cidrs", "port", "aws_sign",
                 "aws_actions")

    def __repr__(self):
        return f"Rule({self.index}, {self.name!r}, l4={self.l4})"

    def matches_request(self, method, path, port=None, overrides=()):
        """``overrides``: the values of the request's method-override headers."""
        if self.port is not None and port is not None and port != self.port:
            return False
        wanted = [v.strip(" \t").translate(_ASCII_UPPER) for v in overrides]
        if self.headers and any(m in NO_INJECT_METHODS
                                for m in [method.translate(_ASCII_UPPER), *wanted]):
            return False
        if self.methods is not None and (method not in self.methods
                                         or any(m not in self.methods for m in wanted)):
            return False
        if self.path_res is None:
            return True
        return not unsafe_path(path) and any(p.fullmatch(path) for p in self.path_res)


def unsafe_path(path):
    """True when the path part of ``path`` holds a dot segment (``.``, ``..``, also as
    ``..;x``), an encoded ``.``, ``/`` or ``\\``, or a ``\\``: spellings an origin may
    normalise into a path the rule's regexes never saw. Rules with ``paths`` refuse them."""
    base = path.split("?", 1)[0]
    if "\\" in base or _ENCODED_SEP_RE.search(base):
        return True
    return any(seg.split(";", 1)[0] in (".", "..") for seg in base.split("/"))


def method_overrides(headers):
    """The values of the method-override headers among (name, value) pairs, '_' for '-'
    too (CGI-style servers read X_HTTP_Method_Override as HTTP_X_HTTP_METHOD_OVERRIDE)."""
    names = set(METHOD_OVERRIDE_HEADERS)
    return [v for n, v in headers if n.translate(_ASCII_LOWER).replace("_", "-") in names]


# decision: allow | deny | l4; rule: the Rule or None; stage: connect | request
Verdict = collections.namedtuple("Verdict", "decision rule stage")


def _no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise RulesError(f"duplicate key '{key}'")
        out[key] = value
    return out


def _load_json(text):
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise RulesError(f"not valid JSON: {e}") from None


def _str_list(rule, where, key, allow_empty=False):
    value = rule[key]
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise RulesError(f"{where}: '{key}' must be a list of strings")
    if not value and not allow_empty:
        raise RulesError(f"{where}: '{key}' is an empty list")
    return value


def _compile(where, kind, pattern, flags):
    try:
        return re.compile(pattern, flags)
    except re.error as e:
        raise RulesError(f"{where}: invalid {kind} regex '{pattern}': {e}") from None


def _parse_remove(where, inject):
    """inject.remove: header names taken off the request (a kube client-certificate rule
    drops the agent's placeholder token this way)."""
    names = inject.get("remove", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RulesError(f"{where}: 'inject.remove' must be a list of header names")
    for name in names:
        if not _TOKEN_RE.fullmatch(name):
            raise RulesError(f"{where}: header name '{name}' is not a valid HTTP token")
    return tuple(names)


def _parse_headers(where, inject):
    if not isinstance(inject, dict) or set(inject) - {"headers", "remove"}:
        raise RulesError(f"{where}: 'inject' must be an object with only 'headers' and 'remove'")
    headers = inject.get("headers", {})
    if not isinstance(headers, dict):
        raise RulesError(f"{where}: 'inject.headers' must be an object")
    seen, out = set(), []
    for name, value in headers.items():
        if not _TOKEN_RE.fullmatch(name):
            raise RulesError(f"{where}: header name '{name}' is not a valid HTTP token")
        if name.lower() in seen:
            raise RulesError(f"{where}: header '{name}' is given twice")
        # never echo the value: it is a secret
        if not isinstance(value, str) or _BAD_VALUE_RE.search(value):
            raise RulesError(f"{where}: value of header '{name}' must be a string without "
                             "control characters")
        seen.add(name.lower())
        out.append((name, value))
    return tuple(out)


def _parse_aws(where, raw, r):
    """aws_sign: the daemon says the proxy re-signs dummy-key AWS requests under this rule
    (never a generic-layer one); aws_allow_credential_actions: the credential-issuing actions
    it re-signs too."""
    r.aws_sign = raw.get("aws_sign", False)
    if not isinstance(r.aws_sign, bool):
        raise RulesError(f"{where}: 'aws_sign' must be true or false")
    if r.aws_sign and r.layer == "generic":
        raise RulesError(f"{where}: a generic-layer rule cannot set 'aws_sign'")
    r.aws_actions = frozenset()
    if "aws_allow_credential_actions" in raw:
        names = _str_list(raw, where, "aws_allow_credential_actions")
        bad = [n for n in names if not _AWS_ACTION_RE.fullmatch(n)]
        if bad:
            raise RulesError(f"{where}: '{bad[0]}' is not an AWS action name")
        if not r.aws_sign:
            raise RulesError(f"{where}: 'aws_allow_credential_actions' needs 'aws_sign': true")
        r.aws_actions = frozenset(n.lower() for n in names)


def _parse_rule(index, raw):
    where = f"rules[{index}]"
    if not isinstance(raw, dict):
        raise RulesError(f"{where}: a rule must be an object")
    unknown = sorted(set(raw) - _RULE_KEYS)
    if unknown:
        raise RulesError(f"{where}: unknown key '{unknown[0]}'")
    for key in ("name", "layer"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise RulesError(f"{where}: '{key}' must be a non-empty string")
    r = Rule()
    r.index, r.name, r.layer = index, raw["name"], raw["layer"]
    where = f"{where} '{r.name}'"
    r.source = raw.get("source", "")
    if not isinstance(r.source, str):
        raise RulesError(f"{where}: 'source' must be a string")
    r.l4 = raw.get("l4_forward", False)
    if not isinstance(r.l4, bool):
        raise RulesError(f"{where}: 'l4_forward' must be true or false")
    r.host_patterns = _str_list(raw, where, "hosts") if "hosts" in raw else []
    flags = re.ASCII | re.IGNORECASE
    r.host_res = [_compile(where, "host", p, flags) for p in r.host_patterns]
    r.methods, r.path_res, r.headers, r.remove, r.cidrs = None, None, (), (), ()
    r.port = raw.get("port")
    if r.port is not None and (type(r.port) is not int or not 1 <= r.port <= 65535):
        raise RulesError(f"{where}: 'port' must be a port number (1 to 65535)")
    _parse_aws(where, raw, r)
    if r.l4:
        for key in ("methods", "paths", "inject", "port", "aws_sign",
                    "aws_allow_credential_actions"):
            if key in raw:
                raise RulesError(f"{where}: an l4_forward rule cannot set '{key}'")
        if "cidrs" in raw:
            try:
                r.cidrs = tuple(ipaddress.ip_network(c, strict=False)
                                for c in _str_list(raw, where, "cidrs"))
            except ValueError as e:
                raise RulesError(f"{where}: invalid CIDR: {e}") from None
        if not r.host_patterns and not r.cidrs:
            raise RulesError(f"{where}: an l4_forward rule needs 'hosts' and/or 'cidrs'")
        return r
    if "cidrs" in raw:
        raise RulesError(f"{where}: 'cidrs' is only valid with l4_forward")
    if "hosts" not in raw:
        raise RulesError(f"{where}: missing 'hosts'")
    if "methods" in raw:
        methods = _str_list(raw, where, "methods", allow_empty=True)
        bad = [m for m in methods if m not in METHODS]
        if bad:
            raise RulesError(f"{where}: invalid method '{bad[0]}'; use uppercase HTTP verbs")
        r.methods = frozenset(methods) or None
    if "paths" in raw:
        r.path_res = [_compile(where, "path", p, re.ASCII)
                      for p in _str_list(raw, where, "paths")]
    if "inject" in raw:
        r.headers = _parse_headers(where, raw["inject"])
        r.remove = _parse_remove(where, raw["inject"])
    return r


def parse_rules(text):
    """Parse and validate a rules document (str, bytes or an already decoded dict)."""
    doc = _load_json(text) if isinstance(text, (str, bytes)) else text
    if not isinstance(doc, dict):
        raise RulesError("the document must be a JSON object")
    unknown = sorted(set(doc) - {"version", "rules"})
    if unknown:
        raise RulesError(f"unknown top-level key '{unknown[0]}'")
    version = doc.get("version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise RulesError(f"unsupported format version {version!r} "
                         f"(this addon reads version {FORMAT_VERSION})")
    rules = doc.get("rules")
    if not isinstance(rules, list):
        raise RulesError("'rules' must be a list")
    return RuleSet([_parse_rule(i, raw) for i, raw in enumerate(rules)])


class RuleSet:
    """An ordered, immutable list of rules with first-match look-ups."""

    def __init__(self, rules=()):
        self.rules = tuple(rules)
        self.n_l4 = sum(1 for r in self.rules if r.l4)
        self._literal = {}      # literal host -> [rule index]
        self._regex = []        # (rule index, compiled) for host patterns with regex syntax
        self._cidr = []         # (rule index, network)
        for r in self.rules:
            for pattern, compiled in zip(r.host_patterns, r.host_res):
                lit = _literal(pattern)
                if lit is None:
                    self._regex.append((r.index, compiled))
                else:
                    self._literal.setdefault(lit, []).append(r.index)
            self._cidr.extend((r.index, net) for net in r.cidrs)
        self._host_cache = {}
        self._connect_cache = {}

    def __len__(self):
        return len(self.rules)

    def host_candidates(self, host):
        """Rules (HTTP and L4) with a host regex matching ``host`` in full, in order."""
        hit = self._host_cache.get(host)
        if hit is None:
            idx = set(self._literal.get(host, ()))
            idx.update(i for i, rx in self._regex if i not in idx and rx.fullmatch(host))
            hit = tuple(self.rules[i] for i in sorted(idx))
            if len(self._host_cache) >= HOST_CACHE_MAX:
                self._host_cache.clear()
            self._host_cache[host] = hit
        return hit

    def match_request(self, method, host, path, port=None, overrides=()):
        """First HTTP rule allowing this request, or None (deny). A rule with a ``port``
        (kube contexts) takes only requests to that port; ``port=None`` ignores it.
        ``overrides``: the request's method-override header values (see matches_request)."""
        for r in self.host_candidates(host):
            if not r.l4 and r.matches_request(method, path, port, overrides):
                return r
        return None

    def match_connect(self, host):
        """First rule that could take a CONNECT to ``host``: an L4 rule (raw relay), an
        HTTP rule (intercept, decide per request), or None (refuse)."""
        if host in self._connect_cache:
            return self._connect_cache[host]
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            ip = None
        best = None
        for r in self.host_candidates(host):
            if ip is None or not r.l4:  # L4 host regexes never match IP literals
                best = r
                break
        if ip is not None:
            for i, net in self._cidr:
                if best is not None and i >= best.index:
                    break
                if ip.version == net.version and ip in net:
                    best = self.rules[i]
                    break
        if len(self._connect_cache) >= HOST_CACHE_MAX:
            self._connect_cache.clear()
        self._connect_cache[host] = best
        return best

    def evaluate(self, method, scheme, host, path, port=None, headers=()):
        """The whole decision for one request as the proxy makes it.

        ``https`` means the client tunnels with CONNECT first; ``http`` means an
        absolute-form request to the proxy (no tunnel, so L4 rules do not apply).
        ``port`` is the request's port (None: the scheme's default), which a rule with a
        ``port`` must match, as in ``requestheaders``.
        ``headers``: the request's (name, value) pairs (method overrides count).
        """
        host = normalize_host(host)
        if port is None:
            port = 443 if scheme == "https" else 80
        if scheme == "https":
            first = self.match_connect(host)
            if first is None:
                return Verdict("deny", None, "connect")
            if first.l4:
                return Verdict("l4", first, "connect")
        rule = self.match_request(method, host, path, port,
                                  overrides=method_overrides(headers))
        if rule is None or (scheme != "https" and rule.headers):
            return Verdict("deny", None, "request")  # no credential goes out in clear
        return Verdict("allow", rule, "request")


def _yaml_quote(s):
    return "'" + s.replace("'", "''") + "'"


def _re_escape(s):
    return "".join("\\" + c if c in _REGEX_META or c == "\\" else c for c in s)


def deny_hint(method, host, path):
    """The rule a user would add to allow a denied request (one line of YAML)."""
    slug = re.sub(r"[^a-z0-9]+", "-", host.lower()).strip("-") or "host"
    if path is None:
        return (f"add a rule for this host to a --rules file, e.g. "
                f"{{name: allow-{slug}, hosts: [{_yaml_quote(_re_escape(host))}]}} "
                f"(or {{name: {slug}-tcp, l4_forward: true, hosts: "
                f"[{_yaml_quote(_re_escape(host))}]}} for non-HTTP traffic)")
    base, _, query = path.partition("?")
    path_re = _re_escape(base) + ("(\\?.*)?" if query or "?" in path else "")
    return (f"add a rule to a --rules file, e.g. {{name: allow-{slug}, "
            f"hosts: [{_yaml_quote(_re_escape(host))}], methods: [{method}], "
            f"paths: [{_yaml_quote(path_re)}]}}")
