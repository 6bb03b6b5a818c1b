"""uplink filter addon for mitmproxy (8.1 and 12): allow-list, injection, SigV4, audit.

Loaded with ``mitmdump -s filter.py``; the format of its inputs, its options and
the mitmproxy hooks it relies on are described in README.md next to this file.

The policy part (``parse_rules``, ``RuleSet``, ``aws_service_region``,
``sigv4_sign``) is plain standard-library Python and can be imported without
mitmproxy, as the tests and the benchmark do.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import hashlib
import hmac
import ipaddress
import json
import os
import re
import socket
import string
import sys
import tempfile
import time
import traceback
from urllib.parse import quote, unquote, unquote_plus, unquote_to_bytes

try:  # the policy part works without mitmproxy
    from mitmproxy import ctx, exceptions, http
    from mitmproxy.proxy import layers as mlayers
except ImportError:  # pragma: no cover - exercised by the in-process tests
    ctx = exceptions = http = mlayers = None

FORMAT_VERSION = 1
STREAM_THRESHOLD = 1024 * 1024          # bodies above this (or of unknown size) stream
SIGV4_BUFFER_WARN = 8 * 1024 * 1024     # a body this big buffered for signing is logged
HOST_CACHE_MAX = 4096                   # per rule set, cleared when full
DEFAULT_RELOAD_MS = 1000
TICK_MIN_S = 0.25                       # the periodic rules check runs at most this often
METHODS = frozenset("GET POST PUT DELETE PATCH HEAD OPTIONS CONNECT TRACE".split())
META = "uplink"

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


# --------------------------------------------------------------------------- AWS

_REGION_RE = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
_SIGNING_NAME = {"bedrock-runtime": "bedrock", "bedrock-agent-runtime": "bedrock",
                 "s3-control": "s3", "s3-accesspoint": "s3", "s3-fips": "s3", "email": "ses"}
_SIGV4_AUTH_RE = re.compile(r"\s*AWS4-HMAC-SHA256\s+Credential=([A-Za-z0-9]+)/", re.IGNORECASE)
_STRIP = ("authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256")
_UNSIGNED_HEADERS = frozenset(("authorization", "user-agent", "x-amzn-trace-id", "connection",
                               "proxy-connection", "proxy-authenticate", "proxy-authorization",
                               "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
                               "expect"))
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_S3_KEEP_PAYLOAD = frozenset((UNSIGNED_PAYLOAD, "STREAMING-UNSIGNED-PAYLOAD-TRAILER"))
_CRED_KEYS = {"access_key_id", "secret_access_key", "session_token", "expiration"}
# Actions that hand out credentials (keys, session tokens, sign-in, auth or registry tokens,
# passwords). A request for one, signed with a dummy key, is re-signed only under a rule that
# lists it in aws_allow_credential_actions (compared case-insensitively).
AWS_CREDENTIAL_ACTIONS = frozenset(a.lower() for a in (
    "AssumeRole", "AssumeRoleWithSAML", "AssumeRoleWithWebIdentity", "AssumeRoot",   # STS
    "GetSessionToken", "GetFederationToken", "GetServiceBearerToken", "GetWebIdentityToken",
    "CreateAccessKey", "UpdateAccessKey", "CreateLoginProfile", "UpdateLoginProfile",  # IAM
    "CreateServiceSpecificCredential", "ResetServiceSpecificCredential",
    "UploadSSHPublicKey", "UploadSigningCertificate",
    "GetSigninToken", "GetRoleCredentials", "CreateToken", "CreateTokenWithIAM",  # sign-in, SSO
    "GetCredentialsForIdentity", "GetOpenIdToken", "GetOpenIdTokenForDeveloperIdentity",
    "InitiateAuth", "AdminInitiateAuth", "RespondToAuthChallenge",  # Cognito
    "AdminRespondToAuthChallenge",
    "GetAuthorizationToken", "GetClusterCredentials", "GetClusterCredentialsWithIAM",
    "GetCredentials", "CreateSession", "AssumeRoleForPodIdentity", "GetDataAccess",
    "GetTemporaryGlueTableCredentials", "GetTemporaryGluePartitionCredentials",
    "CreatePresignedDomainUrl", "CreatePresignedNotebookInstanceUrl",
))
# REST APIs whose credential action is in the path: (signing service, method or None, path
# regex, action); the smithy RPC v2 path names any operation.
_AWS_REST_ACTIONS = (
    ("codeartifact", "POST", re.compile(r"/v1/authorization-token"), "GetAuthorizationToken"),
    ("sso", None, re.compile(r"/federation/credentials"), "GetRoleCredentials"),
    ("oidc", "POST", re.compile(r"/token"), "CreateToken"),
    ("s3", None, re.compile(r"/accessgrantsinstance/dataaccess"), "GetDataAccess"),
    ("connect", None, re.compile(r"/user/federate/.*"), "GetFederationToken"),
)
_RPCV2_PATH_RE = re.compile(r"/service/[^/]+/operation/([^/]+)")


def is_aws_host(host):
    return host.endswith(".amazonaws.com")


def aws_service_region(host):
    """(signing service, region) for an ``*.amazonaws.com`` host."""
    labels = host[: -len(".amazonaws.com")].split(".")
    for i, label in enumerate(labels):
        if _REGION_RE.fullmatch(label):
            if i + 1 < len(labels):        # <name>.<region>.<service>.amazonaws.com
                service = labels[-1]
            elif i > 0 and labels[i - 1] == "dualstack" and i > 1:
                service = labels[i - 2]
            else:
                service = labels[i - 1] if i > 0 else labels[-1]
            return _SIGNING_NAME.get(service, service), label
        if label.startswith("s3-") and _REGION_RE.fullmatch(label[3:]):  # legacy s3-<region>
            return "s3", label[3:]
    return _SIGNING_NAME.get(labels[-1], labels[-1]), "us-east-1"


def _form_values(data, key):
    """The values of ``key`` in a query string or form body (bytes or str), decoded."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    out = []
    for part in data.split(b"&"):
        k, _, v = part.partition(b"=")
        if unquote_plus(k.decode("latin-1")).strip().lower() == key:
            out.append(unquote_plus(v.decode("latin-1")).strip())
    return out


def aws_actions(method, host, path, headers, body):
    """The actions a request to an AWS host asks for, as far as they can be told: the Query
    API's Action (query string or form body), X-Amz-Target, and the REST paths of
    _AWS_REST_ACTIONS. ``body`` is None when it is not known yet (streamed S3)."""
    raw_path, _, query = path.partition("?")
    found = _form_values(query, "action")
    if body:
        found += _form_values(body, "action")
    if hasattr(headers, "get_all"):
        targets = headers.get_all("x-amz-target")
    else:
        targets = [v for k, v in headers if k.lower() == "x-amz-target"]
    found += [t.rsplit(".", 1)[-1].strip() for t in targets]
    service, _ = aws_service_region(host)
    # as a lenient router reads it: dot segments gone, repeated slashes one
    norm = re.sub("//+", "/", _remove_dot_segments(unquote(raw_path))).rstrip("/") or "/"
    for svc, verb, rx, action in _AWS_REST_ACTIONS:
        if svc == service and verb in (None, method.upper()) and rx.fullmatch(norm):
            found.append(action)
    m = _RPCV2_PATH_RE.fullmatch(norm)
    if m:
        found.append(m.group(1))
    if "s3express" in host and "session" in [k.lower() for k in _query_keys(query)]:
        found.append("CreateSession")
    return found


def _bodies(req):
    """The body as sent and, when it has a Content-Encoding mitmproxy can undo, decoded too
    (an origin that decompresses must not read an action the check did not see)."""
    raw = req.raw_content or b""
    try:
        decoded = req.get_content(strict=False) or b""
    except Exception:  # noqa: BLE001 - undecodable: the raw bytes are all there is
        decoded = raw
    return raw if decoded == raw else raw + b"&" + decoded


def _query_keys(query):
    return [unquote_plus(p.partition("=")[0]) for p in query.split("&") if p]


def aws_credential_action(method, host, path, headers, body, allowed):
    """The first credential-issuing action the request asks for that ``allowed`` (lower-case
    names) does not list, or None."""
    for action in aws_actions(method, host, path, headers, body):
        if action.lower() in AWS_CREDENTIAL_ACTIONS and action.lower() not in allowed:
            return action
    return None


def parse_aws_creds(text):
    """Parse the credentials map: dummy access key id -> real credentials."""
    doc = _load_json(text) if isinstance(text, (str, bytes)) else text
    if not isinstance(doc, dict):
        raise RulesError("the AWS credentials map must be a JSON object")
    out = {}
    for akid, entry in doc.items():
        if not re.fullmatch(r"[A-Z0-9]{16,128}", akid):
            raise RulesError(f"'{akid}' is not an access key id")
        if not isinstance(entry, dict):
            raise RulesError(f"'{akid}': the entry must be an object")
        unknown = sorted(set(entry) - _CRED_KEYS)
        if unknown:
            raise RulesError(f"'{akid}': unknown key '{unknown[0]}'")
        for key in ("access_key_id", "secret_access_key"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise RulesError(f"'{akid}': '{key}' must be a non-empty string")
        token = entry.get("session_token") or None
        if token is not None and not isinstance(token, str):
            raise RulesError(f"'{akid}': 'session_token' must be a string")
        out[akid] = (entry["access_key_id"], entry["secret_access_key"], token)
    return out


def _remove_dot_segments(path):
    out = []
    for seg in path.split("/"):
        if seg == "..":
            if len(out) > 1:
                out.pop()
        elif seg != ".":
            out.append(seg)
    res = "/".join(out)
    if path.endswith(("/.", "/..")):
        res += "/"
    return res if res.startswith("/") else "/" + res


def _raw(s):
    """The bytes a str from mitmproxy stands for (it decodes invalid UTF-8 with
    surrogateescape; a strict encode would raise)."""
    return s.encode("utf-8", "surrogateescape")


def _uri_encode(b):
    return quote(b, safe="-_.~")


def _canonical_query(query):
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        pairs.append((_uri_encode(unquote_to_bytes(_raw(key))),
                      _uri_encode(unquote_to_bytes(_raw(value)))))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _hmac(key, msg):
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def sigv4_sign(method, path, headers, *, host, service, region, access_key, secret_key,
               session_token, payload_hash, amz_date, s3):
    """Sign a request; return the headers to set, in order: Authorization, X-Amz-Date,
    X-Amz-Content-SHA256 and, with a session token, X-Amz-Security-Token.

    ``path`` is the request target as sent (path plus query), ``headers`` the
    request's (name, value) pairs, ``amz_date`` ``YYYYMMDDTHHMMSSZ``.
    """
    raw_path, _, query = path.partition("?")
    uri = raw_path or "/"
    if not s3:
        uri = quote(_raw(_remove_dot_segments(uri)), safe="/~")
    added = [("x-amz-date", amz_date), ("x-amz-content-sha256", payload_hash)]
    if session_token:
        added.append(("x-amz-security-token", session_token))
    groups = {"host": [host]}
    for name, value in headers:
        lname = name.lower()
        if lname in _UNSIGNED_HEADERS or lname == "host" or lname in _STRIP:
            continue
        groups.setdefault(lname, []).append(value)
    for lname, value in added:
        groups[lname] = [value]
    names = sorted(groups)
    canon_headers = "".join(
        f"{n}:{','.join(' '.join(v.split()) for v in groups[n])}\n" for n in names)
    signed = ";".join(names)
    creq = "\n".join((method.upper(), uri, _canonical_query(query), canon_headers, signed,
                      payload_hash))
    date = amz_date[:8]
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(("AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(_raw(creq)).hexdigest()))
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    sig = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    out = [("Authorization", f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                             f"SignedHeaders={signed}, Signature={sig}"),
           ("X-Amz-Date", amz_date), ("X-Amz-Content-SHA256", payload_hash)]
    if session_token:
        out.append(("X-Amz-Security-Token", session_token))
    return out


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
                value = self.parse(f.read())
        except Exception as e:  # noqa: BLE001 - RecursionError from deep JSON too: keep the last
            if isinstance(e, RulesError):
                err = str(e)
            elif isinstance(e, (OSError, UnicodeDecodeError)):
                err = f"cannot read: {e}"
            else:  # never the message: a parser's message may quote the file
                err = f"cannot parse: {type(e).__name__}"
            if not isinstance(e, OSError):
                self.key = key  # parse again only when the file changes again
            if err != self.last_err:
                keep = "keeping the previous version" if self.good else "nothing loaded"
                oplog("error", f"{self.what}: {self.path}: {err} ({keep})")
                self.last_err = err
            return err
        self.key, self.value, self.good, self.last_err = key, value, True, None
        return True


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


# A request's header block: more headers or bytes than this get 431 (names + values + ": \r\n").
MAX_HEADERS = 256
MAX_HEADER_BYTES = 64 * 1024
_TOKEN_RE_B = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_FIELD_RE = re.compile(rb"[\x00\r\n]")  # mitmproxy joins an obs-fold line with CR LF
_DIGITS_RE = re.compile(rb"[0-9]{1,18}")  # more digits would overflow any origin's size type
_AUTHORITY_RE = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+))(?::([0-9]{1,5}))?")
_TARGET_RE = re.compile(r"/[^\x00-\x20\x7f]*|\*")  # origin-form (or *), as HTTP/1 admits


def framing_problem(headers):
    """(status, why) when a request's header block must not be forwarded, else None: too
    big (431), a name that is not a token, a value with CR, LF, NUL or a folded line, or a
    Content-Length that is not plain ASCII digits or differs between copies (400). A lenient
    origin could read any of these as a second request no rule saw. ``headers``: raw
    (name, value) byte pairs."""
    size = sum(len(n) + len(v) + 4 for n, v in headers)
    if len(headers) > MAX_HEADERS or size > MAX_HEADER_BYTES:
        return 431, (f"the request has {len(headers)} headers of {size} bytes; uplink "
                     f"forwards at most {MAX_HEADERS} headers of {MAX_HEADER_BYTES} bytes")
    lengths = set()
    for name, value in headers:
        if not _TOKEN_RE_B.fullmatch(name):
            return 400, "a header name is not a valid HTTP token; fix the client's headers"
        shown = name.decode("ascii")
        if _BAD_FIELD_RE.search(value):
            return 400, (f"the value of header '{shown}' holds CR, LF, NUL or a folded line; "
                         "send each header on one line without control characters")
        if name.lower() == b"content-length":
            if not _DIGITS_RE.fullmatch(value):
                return 400, "Content-Length must be plain ASCII digits (at most 18)"
            lengths.add(int(value))
    if len(lengths) > 1:
        return 400, "the request has Content-Length headers that disagree; send one"
    return None


def target_problem(method, path):
    """(400, why) when the method or target cannot be the upstream's request line, else
    None. HTTP/1's parser admits only these; HTTP/2's :method and :path may hold anything
    (an absolute URL naming another host, CR LF and a second request), and mitmproxy writes
    them into the upstream HTTP/1 request line as they are."""
    if not _TOKEN_RE.fullmatch(method):
        return 400, "the request's method is not an HTTP token; send a plain method"
    if not _TARGET_RE.fullmatch(path):
        return 400, ("the request's target is not a path starting with '/' (without spaces "
                     "or control characters); send the request to the host it is meant for")
    return None


def split_authority(value):
    """(host as matched, port or None) of a strict ``host[:port]`` (ASCII name or IPv4, or
    a bracketed IPv6 literal), or None for anything else (``[a]b``, empty, a Unicode full
    stop, a zone id...)."""
    m = _AUTHORITY_RE.fullmatch(value) if value.isascii() else None
    if m is None:
        return None
    port = int(m.group(3)) if m.group(3) else None
    if m.group(1) is not None:
        try:
            ipaddress.IPv6Address(m.group(1))
        except ValueError:
            return None
    if port is not None and not 1 <= port <= 65535:
        return None
    return normalize_host(m.group(1) or m.group(2)), port


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


def _host_of_authority(value):
    value = value.strip()
    if value.startswith("["):
        return normalize_host(value[: value.find("]") + 1])
    return normalize_host(value.rsplit(":", 1)[0] if value.count(":") == 1 else value)


# --------------------------------------------------------------------------- addresses

# Special-purpose addresses (IANA's IPv4 and IPv6 special-purpose registries, plus the
# clouds' metadata services) the proxy never connects to unless a rule names the IP:
# the address checked is the one the connection goes to, after the name was resolved.
# Private ranges (RFC 1918, unique-local fc00::/7, shared 100.64.0.0/10) stay open: users
# allow private API servers and corporate hosts. manifests/netpol-mitm.yaml excludes the
# same ranges (but NAT64's 64:ff9b::/96, checked here by its embedded IPv4 address).
SPECIAL_NETS = tuple((ipaddress.ip_network(net), what) for net, what in (
    ("0.0.0.0/8", "this-network"), ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("100.100.100.200/32", "cloud metadata (Alibaba)"),
    ("192.0.0.0/24", "IETF protocol assignments"), ("192.0.2.0/24", "documentation"),
    ("198.51.100.0/24", "documentation"), ("203.0.113.0/24", "documentation"),
    ("192.88.99.0/24", "6to4 relay anycast"), ("198.18.0.0/15", "benchmarking"),
    ("224.0.0.0/4", "multicast"), ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"), ("::1/128", "loopback"), ("100::/64", "discard-only"),
    ("2001:db8::/32", "documentation"), ("3fff::/20", "documentation"),
    ("fe80::/10", "link-local"), ("fec0::/10", "site-local"), ("ff00::/8", "multicast"),
    ("fd00:ec2::254/128", "cloud metadata (AWS)")))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def special_purpose(ip, extra=()):
    """What kind of special-purpose address ``ip`` is (a string), or None. IPv4 addresses
    carried in IPv6 (mapped, NAT64, 6to4) are judged by the IPv4 address."""
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
    for net, what in SPECIAL_NETS:
        if ip.version == net.version and ip in net:
            return what
    for net in extra:
        if ip.version == net.version and ip in net:
            return "in uplink_refuse_cidrs (the cluster's own range)"
    return None


def named_ips(rules):
    """IP addresses a rule names: hosts written as a literal IP, l4_forward CIDRs."""
    named = getattr(rules, "_uplink_named_ips", None)
    if named is None:
        ips, nets = set(), []
        for r in rules.rules:
            for pattern in r.host_patterns:
                try:
                    ips.add(ipaddress.ip_address(normalize_host(_literal(pattern) or "")))
                except ValueError:
                    pass
            nets.extend(r.cidrs)
        named = rules._uplink_named_ips = (frozenset(ips), tuple(nets))
    return named


def refusal_of_address(rules, ip, extra=()):
    """Why the proxy must not connect to ``ip`` (a string), or None."""
    what = special_purpose(ip, extra)
    if what is None:
        return None
    ips, nets = named_ips(rules)
    if ip in ips or any(ip.version == n.version and ip in n for n in nets):
        return None
    return (f"uplink refuses to connect to {ip}, a {what} address; a rule must name "
            f"that IP to reach it")


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

    @property
    def rules(self):
        return self.rules_file.value

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

    def configure(self, updated):
        opts = ctx.options
        if "uplink_reload_ms" in updated:
            if opts.uplink_reload_ms < 0:
                raise exceptions.OptionsError("uplink_reload_ms must be >= 0")
            self.reload_s = opts.uplink_reload_ms / 1000.0
        if "uplink_rules" in updated:
            self._set_source(self.rules_file, opts.uplink_rules)
        if "uplink_aws_creds" in updated:
            self._set_source(self.creds_file, opts.uplink_aws_creds)
        if "rawtcp" in updated and getattr(opts, "rawtcp", False):
            # Non-HTTP bytes in a tunnel must not be relayed unless an l4_forward rule
            # matched; with rawtcp off mitmproxy parses them as HTTP and rejects them.
            opts.update(rawtcp=False)
            oplog("info", "rawtcp turned off: only l4_forward rules relay raw TCP")
        self._configure_connections(opts, updated)
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
        closes an idle relay whose rule it removed."""
        self._tick_loop = asyncio.get_running_loop()
        self._tick_loop.call_later(max(self.reload_s, TICK_MIN_S), self._tick)

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
        if rule is None:
            flow.metadata[META] = {"logged": True}
            flow.response = self._refusal(flow, "CONNECT", host, None)
            self._emit("connect-refused", None, "CONNECT", None, host, port, None, 403)
        elif rule.l4:
            self.pending_l4.setdefault(flow.client_conn.id, {})[(host, port)] = rule
            flow.metadata[META] = {"l4": {"name": rule.name, "layer": rule.layer}}

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

    def _refusal(self, flow, method, host, path, reason=None, status=403):
        body = {"error": "denied by uplink", "method": method, "host": host, "path": path,
                "hint": reason or deny_hint(method, host, path)}
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
            self._deny(flow, method, host, reason, status)
            self._answer_now(flow)
            return
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

    def _deny(self, flow, method, host, reason, status=403):
        """Answers the request with the JSON refusal and writes its audit line."""
        req = flow.request
        flow.metadata[META] = {"logged": True}
        req.headers.pop("expect", None)
        flow.response = self._refusal(flow, method, host, req.path, reason, status)
        self._emit("deny", None, method, req.scheme, host, req.port, req.path, status)

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
