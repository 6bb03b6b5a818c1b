"""uplink filter addon: request framing and authority checks, special-purpose addresses.

Loaded by filter.py, which sets ``rules`` (uplink_rules.py) first (see README.md).
"""

from __future__ import annotations

import ipaddress
import re

# filter.py loads this file by path and sets ``rules`` (uplink_rules.py) in it first.
_TOKEN_RE, _literal, normalize_host = rules._TOKEN_RE, rules._literal, rules.normalize_host  # noqa: F821

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
