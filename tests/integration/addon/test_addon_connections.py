"""Upstream connections through a real mitmdump, as an agent would attack them: names that
resolve to loopback, link-local or metadata addresses (DNS rebinding) under the catch-all,
decisions taken before any byte goes upstream (lazy connections), an audit line for every
decision including upstream failures, and mitmproxy's onboarding app switched off."""

import json
import re
import uuid

import pytest

from addon_support import Proxy, send, tunnel

CATCH_ALL = {"name": "generic", "layer": "generic", "hosts": [".*"]}
# name -> what the fake DNS answers (redirect_addon.py); none of these may be reached
SPECIAL = {
    "loopback.uplink.test": "127.0.0.1",
    "metadata.uplink.test": "169.254.169.254",
    "aws6.uplink.test": "fd00:ec2::254",
    "alibaba.uplink.test": "100.100.100.200",
    "mapped.uplink.test": "::ffff:127.0.0.1",
    "nat64.uplink.test": "64:ff9b::a9fe:a9fe",
    "zero.uplink.test": "0.0.0.0",
    "multicast.uplink.test": "224.0.0.1",
    "service.uplink.test": "10.43.0.1",  # the API server's ClusterIP (uplink_refuse_cidrs)
    "kubedns.uplink.test": "10.43.0.10",  # another Service of the cluster's range
}
RESOLVE = [f"{n}={ip}" for n, ip in SPECIAL.items()] + [
    "mixed.uplink.test=127.0.0.1+10.9.9.9", "named.uplink.test=169.254.169.253",
    "rebind.uplink.test=10.9.9.8/127.0.0.1"]


@pytest.fixture(scope="module")
def conn(workdir, pki, echo):
    p = Proxy(workdir, pki, echo, "connections", sets=[
        f"uplink_extra_ca={pki.upstream_ca}", "uplink_refuse_cidrs=10.43.0.0/16"],
        resolve=RESOLVE, dead=["dead.uplink.test"])
    yield p
    p.stop()


@pytest.fixture(scope="module")
def direct(workdir, pki, echo):
    """No redirect and no fake DNS: the names below really do not resolve."""
    p = Proxy(workdir, pki, echo, "connections-direct", redirect=False,
              sets=[f"ssl_verify_upstream_trusted_ca={pki.upstream_ca}"])
    yield p
    p.stop()


def _connected_to(proxy, host):
    return [c for c in proxy.mitm.connects() if c.get("host") == host]


def _new_audit(proxy, before):
    return proxy.mitm.audit()[before:]


@pytest.mark.parametrize("host", sorted(SPECIAL))
def test_name_resolving_to_a_special_address_is_not_reached(conn, host):
    conn.set_rules([CATCH_ALL])
    before = len(conn.mitm.audit())
    res = send(conn.port, "https", host, 443, "GET", "/latest/meta-data/",
               trust=conn.pki.mitm_ca)
    assert res.connect_status == 200 and res.status == 502, res
    assert _connected_to(conn, host) == [], "the proxy connected to a special-purpose address"
    (line,) = _new_audit(conn, before)
    assert (line["decision"], line["host"], line["status"]) == ("deny", host, 502)
    assert "uplink refuses to connect" in line["reason"] and "rule must name" in line["reason"]


def test_plain_http_to_a_metadata_name_is_not_reached(conn):
    conn.set_rules([CATCH_ALL])
    res = send(conn.port, "http", "metadata.uplink.test", 80, "GET", "/latest/meta-data/")
    assert res.status == 502 and _connected_to(conn, "metadata.uplink.test") == []


@pytest.mark.parametrize("ip", ["127.0.0.1", "169.254.169.254", "fd00:ec2::254",
                                "100.100.100.200"])
def test_special_ip_literal_under_the_catch_all_is_not_reached(conn, ip):
    conn.set_rules([CATCH_ALL])
    before = len(conn.mitm.audit())
    res = send(conn.port, "https", ip, 443, "GET", "/", trust=conn.pki.mitm_ca)
    assert res.status == 502 and _connected_to(conn, ip) == [], res
    (line,) = _new_audit(conn, before)
    assert line["decision"] == "deny" and f"refuses to connect to {ip}," in line["reason"]


def test_a_rule_naming_the_ip_reaches_it(conn):
    conn.set_rules([CATCH_ALL, {"name": "meta", "layer": "user",
                                "hosts": [re.escape("169.254.169.253")]}])
    res = send(conn.port, "https", "named.uplink.test", 443, "GET", "/x",
               trust=conn.pki.mitm_ca)
    assert res.status == 200 and res.json()["path"] == "/x"
    assert _connected_to(conn, "named.uplink.test")
    res = send(conn.port, "http", "127.0.0.1", 80, "GET", "/", headers=[])
    assert res.status == 502  # 127.0.0.1 is still not named


def test_a_kube_rule_naming_a_cluster_ip_reaches_it_in_the_refused_range(conn):
    """uplinkd refuses the cluster's service range (uplink_refuse_cidrs=10.43.0.0/16 here);
    a --kube-context whose server is a ClusterIP gets a kube rule whose host is that IP,
    escaped as uplinkd escapes it (a backslash before every character that is not a letter,
    digit or '_'): the addon takes it as naming the IP. The rest of the range stays shut."""
    kube = {"name": "kube-incluster", "layer": "kube", "hosts": ["10\\.43\\.0\\.1"],
            "port": 6443}
    conn.set_rules([kube, CATCH_ALL])
    # plain http: the test upstream's certificate holds no IP address
    res = send(conn.port, "http", "10.43.0.1", 6443, "GET", "/api")
    assert res.status == 200 and res.json()["path"] == "/api", res  # the echo answered
    before = len(conn.mitm.audit())
    res = send(conn.port, "https", "10.43.0.10", 443, "GET", "/", trust=conn.pki.mitm_ca)
    assert res.status == 502 and _connected_to(conn, "10.43.0.10") == [], res
    (line,) = _new_audit(conn, before)
    assert "uplink_refuse_cidrs" in line["reason"], line


def test_the_allowed_address_of_several_is_taken(conn):
    conn.set_rules([CATCH_ALL])
    res = send(conn.port, "https", "mixed.uplink.test", 443, "GET", "/m",
               trust=conn.pki.mitm_ca)
    assert res.status == 200 and res.json()["sni"] == "mixed.uplink.test"


def test_l4_relay_to_a_special_address_is_refused_and_logged(conn):
    conn.set_rules([{"name": "tcp", "layer": "user", "l4_forward": True,
                     "hosts": ["metadata\\.uplink\\.test"]}])
    before = len(conn.mitm.audit())
    status, _, _, sock = tunnel(conn.port, "metadata.uplink.test", 80)
    assert status == 200
    sock.sendall(b"\x00RAW hello")
    assert sock.recv(100) == b""  # closed, nothing echoed
    sock.close()
    assert _connected_to(conn, "metadata.uplink.test") == []
    lines = _new_audit(conn, before)
    assert [(a["decision"], a["status"]) for a in lines] == [("l4", 200), ("deny", 502)]
    assert "uplink refuses to connect" in lines[1]["reason"]


def test_a_name_rebound_to_loopback_between_connections_is_not_reached(conn):
    """DNS rebinding across connections: the name answers a private address first (reached),
    then loopback; each new connection checks its own answer."""
    conn.set_rules([CATCH_ALL])
    first = send(conn.port, "https", "rebind.uplink.test", 443, "GET", "/1",
                 trust=conn.pki.mitm_ca)
    assert first.status == 200 and len(_connected_to(conn, "rebind.uplink.test")) == 1
    before = len(conn.mitm.audit())
    second = send(conn.port, "https", "rebind.uplink.test", 443, "GET", "/2",
                  trust=conn.pki.mitm_ca)
    assert second.status == 502, second
    assert len(_connected_to(conn, "rebind.uplink.test")) == 1, "connected after rebinding"
    (line,) = _new_audit(conn, before)
    assert line["decision"] == "deny" and "refuses to connect to 127.0.0.1," in line["reason"]


def test_connection_reuse_survives_the_pinned_address(conn):
    """The connection is pinned to the checked address, then named again: a second request
    in the tunnel reuses it."""
    conn.set_rules([CATCH_ALL])
    before = len(_connected_to(conn, "reuse.uplink.test"))
    status, _, _, sock = tunnel(conn.port, "reuse.uplink.test", 443)
    import ssl
    tls = ssl.create_default_context(cafile=str(conn.pki.mitm_ca)).wrap_socket(
        sock, server_hostname="reuse.uplink.test")
    try:
        for i in range(2):
            tls.sendall(f"GET /{i} HTTP/1.1\r\nHost: reuse.uplink.test\r\n\r\n".encode())
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += tls.recv(4096)
            head, body = buf.split(b"\r\n\r\n", 1)
            n = int(re.search(rb"Content-Length: (\d+)", head).group(1))
            while len(body) < n:
                body += tls.recv(4096)
            assert head.startswith(b"HTTP/1.1 200")
    finally:
        tls.close()
    assert len(_connected_to(conn, "reuse.uplink.test")) == before + 1


# ---- decisions before connecting (item 12)

def test_port_a_kube_rule_does_not_allow_is_decided_before_connecting(conn):
    conn.set_rules([{"name": "kube", "layer": "user", "hosts": ["kube\\.uplink\\.test"],
                     "port": 6443, "inject": {"headers": {"Authorization": "Bearer k"}}}])
    before = len(conn.mitm.audit())
    res = send(conn.port, "https", "kube.uplink.test", 443, "GET", "/api",
               trust=conn.pki.mitm_ca)
    assert res.connect_status == 200 and res.status == 403
    assert res.header("X-Uplink-Denied") == "1" and res.json()["error"] == "denied by uplink"
    assert _connected_to(conn, "kube.uplink.test") == [], "bytes went upstream before deciding"
    (line,) = _new_audit(conn, before)
    assert (line["decision"], line["port"], line["status"]) == ("deny", 443, 403)
    # control: the port the rule names is connected to
    res = send(conn.port, "https", "kube.uplink.test", 6443, "GET", "/api",
               trust=conn.pki.mitm_ca)
    assert res.status == 200 and _connected_to(conn, "kube.uplink.test")


def test_denied_request_to_a_host_that_does_not_resolve_gets_the_403(direct):
    direct.set_rules([{"name": "ro", "layer": "generic", "hosts": [".*"], "methods": ["GET"]}])
    res = send(direct.port, "https", "nowhere.uplink-test.invalid", 443, "POST", "/x",
               body=b"{}", trust=direct.pki.mitm_ca)
    assert res.connect_status == 200 and res.status == 403, res
    body = res.json()
    assert body["error"] == "denied by uplink" and "hint" in body
    assert direct.mitm.audit()[-1]["decision"] == "deny"


def test_allowed_request_whose_upstream_is_down_is_logged_with_502(conn):
    conn.set_rules([CATCH_ALL])
    before = len(conn.mitm.audit())
    res = send(conn.port, "https", "dead.uplink.test", 443, "GET", "/d",
               trust=conn.pki.mitm_ca)
    assert res.connect_status == 200 and res.status == 502
    (line,) = _new_audit(conn, before)
    assert (line["decision"], line["rule"], line["status"]) == ("allow", "generic", 502)
    assert line["reason"] and line["path"] == "/d"


def test_eager_connections_and_onboarding_cannot_be_turned_back_on(workdir, pki, echo):
    p = Proxy(workdir, pki, echo, "connections-forced", sets=[
        f"uplink_extra_ca={pki.upstream_ca}", "connection_strategy=eager",
        "onboarding=true"])
    try:
        p.set_rules([{"name": "kube", "layer": "user", "hosts": ["kube\\.uplink\\.test"],
                      "port": 6443}, CATCH_ALL])
        res = send(p.port, "https", "kube.uplink.test", 443, "DELETE", "/", trust=pki.mitm_ca)
        assert res.status == 200  # the catch-all takes it, but only once decided
        p.set_rules([{"name": "kube", "layer": "user", "hosts": ["kube\\.uplink\\.test"],
                      "port": 6443}])
        before = len(p.mitm.connects())
        res = send(p.port, "https", "kube.uplink.test", 443, "GET", "/", trust=pki.mitm_ca)
        assert res.status == 403 and len(p.mitm.connects()) == before
        p.set_rules([CATCH_ALL])
        res = send(p.port, "http", "mitm.it", 80, "GET", "/")
        assert res.status == 200 and res.json()["path"] == "/"  # the echo, not mitmproxy
        err = p.mitm.stderr.read_text()
        assert "connection_strategy set to lazy" in err and "onboarding set to False" in err
    finally:
        p.stop()


# ---- the onboarding app

@pytest.mark.parametrize("scheme", ["http", "https"])
def test_mitm_it_is_not_answered_by_mitmproxy(conn, scheme):
    conn.set_rules([CATCH_ALL])
    tid = uuid.uuid4().hex
    port = 443 if scheme == "https" else 80
    res = send(conn.port, scheme, "mitm.it", port, "GET", "/cert/pem",
               headers=[("X-Test-Id", tid)], trust=conn.pki.mitm_ca)
    assert b"BEGIN CERTIFICATE" not in res.body and b"mitmproxy" not in res.body.lower()
    assert res.status == 200 and json.loads(res.body)["path"] == "/cert/pem"
    assert len(conn.echo.find(tid)) == 1  # it went upstream like any host


def test_l4_upstream_failure_is_logged_where_mitmproxy_says_so():
    """mitmproxy 10 and later call server_connect_error (8.1 does not: this runs the hook as
    12 would) for a relay whose upstream did not answer: one line, status 502 and why."""
    import io
    from types import SimpleNamespace

    from addon_support import load_filter
    f = load_filter()
    buf = io.StringIO()
    addon = f.UplinkFilter(audit=f.AuditLog(buf))
    server = SimpleNamespace(address=("10.9.9.9", 5432), error="Connect call failed",
                             uplink_l4={"name": "db", "layer": "user"},
                             uplink_asked=("db.uplink.test", 5432))
    addon.server_connect_error(SimpleNamespace(server=server))
    addon.server_connect_error(SimpleNamespace(server=server))  # once only
    addon.server_connect_error(SimpleNamespace(server=SimpleNamespace(
        address=("h", 443), error="x")))  # not a relay: its flow has the line
    (line,) = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert (line["decision"], line["rule"], line["host"], line["port"], line["status"]) == \
        ("l4", "db", "db.uplink.test", 5432, 502)
    assert line["reason"] == "Connect call failed"
