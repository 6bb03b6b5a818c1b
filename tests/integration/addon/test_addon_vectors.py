"""Every case of tests/data/rules-vectors.json: in-process through the matcher, and
through the real mitmdump + addon against the echo upstream (decision, rule, injected
values arriving upstream exactly once, audit line, nothing upstream when denied)."""

import json
import uuid

import pytest

from addon_support import load_filter, load_vectors, send

VECTORS = load_vectors()
CASES = VECTORS["cases"]


def _ids(cases):
    return [c["id"] for c in cases]


def test_vectors_file_shape():
    assert VECTORS["version"] == 1
    assert len(CASES) >= 80
    assert len(set(_ids(CASES))) == len(CASES)
    for c in CASES:
        assert set(c) == {"id", "description", "rules", "request", "expect"}
        assert set(c["request"]) == {"method", "scheme", "host", "port", "path", "headers"}
        exp = c["expect"]
        assert exp["decision"] in ("allow", "deny", "l4")
        assert set(exp) == {"decision", "rule", "layer", "inject"} | (
            {"stage"} if exp["decision"] == "deny" else set())
    kinds = {c["expect"]["decision"] for c in CASES}
    stages = {c["expect"].get("stage") for c in CASES}
    assert kinds == {"allow", "deny", "l4"} and {"connect", "request"} <= stages


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_vector_in_process(case):
    f = load_filter()
    rules = f.parse_rules({"version": 1, "rules": case["rules"]})
    q, exp = case["request"], case["expect"]
    v = rules.evaluate(q["method"], q["scheme"], q["host"], q["path"], q["port"],
                       headers=q["headers"])
    assert v.decision == exp["decision"]
    assert (v.rule.name if v.rule else None) == exp["rule"]
    assert (v.rule.layer if v.rule else None) == exp["layer"]
    injected = [n for n, _ in v.rule.headers] if v.decision == "allow" else []
    assert injected == exp["inject"]
    if v.decision == "deny":
        assert v.stage == exp["stage"]


def _rule(case, name):
    return next(r for r in case["rules"] if r["name"] == name)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_vector_through_proxy(proxy, case):
    q, exp = case["request"], case["expect"]
    with proxy.lock:
        proxy.set_rules(case["rules"])
        tid = uuid.uuid4().hex
        headers = [tuple(h) for h in q["headers"]] + [("X-Test-Id", tid)]
        before = len(proxy.mitm.audit())
        trust = proxy.pki.upstream_ca if exp["decision"] == "l4" else proxy.pki.mitm_ca
        res = send(proxy.port, q["scheme"], q["host"], q["port"], q["method"], q["path"],
                   headers=headers, trust=trust)
        audit = proxy.mitm.audit()
    assert len(audit) == before + 1, f"expected one audit line, got {audit[before:]}"
    line = audit[-1]
    got = proxy.echo.find(tid)
    host = q["host"].lower()

    if exp["decision"] == "deny":
        assert got == [], "a denied request reached the upstream"
        if exp["stage"] == "connect":
            assert res.connect_status == 403, res
            assert line["decision"] == "connect-refused"
            assert line["method"] == "CONNECT"
        else:
            assert res.connect_status in (None, 200) and res.status == 403, res
            assert line["decision"] == "deny"
            assert line["path"] == q["path"] and line["method"] == q["method"]
        assert res.header("X-Uplink-Denied") == "1"
        body = res.json()
        assert body["error"] == "denied by uplink" and body["host"] == host
        assert line["status"] == 403 and line["rule"] is None and line["injected"] == []
        assert line["host"] == host and line["port"] == q["port"]
        return

    assert res.connect_status in (None, 200) and res.status == 200, res
    assert len(got) == 1, "the upstream did not get the request exactly once"
    rec = got[0]
    assert rec["method"] == q["method"] and rec["path"] == q["path"]
    assert line["rule"] == exp["rule"] and line["layer"] == exp["layer"]
    assert line["host"] == host and line["port"] == q["port"]
    sent = {n.lower() for n, _ in headers}
    if exp["decision"] == "l4":
        assert line["decision"] == "l4" and line["method"] == "CONNECT"
        assert rec["tls"] and line["injected"] == []
        # end-to-end TLS: the client trusted only the upstream CA, and nothing was added
        assert {n.lower() for n, _ in rec["headers"]} == sent | {"host", "connection"}
        return

    assert line["decision"] == "allow" and line["status"] == 200
    assert line["injected"] == exp["inject"] and line["method"] == q["method"]
    assert line["scheme"] == q["scheme"] and line["path"] == q["path"]
    inject = _rule(case, exp["rule"]).get("inject", {}).get("headers", {})
    assert list(inject) == exp["inject"]
    for name, value in inject.items():
        vals = [v for n, v in rec["headers"] if n.lower() == name.lower()]
        assert vals == [value], f"{name}: upstream got {len(vals)} values"
    injected_lower = {n.lower() for n in inject}
    removed = {n.lower() for n in _rule(case, exp["rule"]).get("inject", {}).get("remove", [])}
    for name in removed - injected_lower:  # kube client-certificate rules drop the placeholder
        assert not [n for n, _ in rec["headers"] if n.lower() == name]
    for name, value in headers:  # everything else arrives untouched
        if name.lower() not in injected_lower | removed:
            assert [name, value] in rec["headers"]
    assert rec["tls"] == (q["scheme"] == "https")


def test_deny_body_names_request_and_rule_to_add(proxy):
    with proxy.lock:
        proxy.set_rules([{"name": "ro", "layer": "generic", "hosts": [".*"],
                          "methods": ["GET"]}])
        res = send(proxy.port, "https", "api.example.com", 443, "POST", "/v1/x?y=1",
                   body=b"{}", trust=proxy.pki.mitm_ca)
    assert res.status == 403 and res.header("Content-Type") == "application/json"
    body = res.json()
    assert set(body) == {"error", "method", "host", "path", "hint", "asked", "ask_mode"}
    assert body["method"] == "POST" and body["path"] == "/v1/x?y=1"
    assert "hosts: ['api\\.example\\.com']" in body["hint"]
    assert "methods: [POST]" in body["hint"] and "paths: ['/v1/x(\\?.*)?']" in body["hint"]
    # the suggested rule really allows the request
    f = load_filter()
    rule = {"name": "x", "layer": "user", "hosts": ["api\\.example\\.com"],
            "methods": ["POST"], "paths": ["/v1/x(\\?.*)?"]}
    rs = f.parse_rules(json.dumps({"version": 1, "rules": [rule]}))
    assert rs.evaluate("POST", "https", "api.example.com", "/v1/x?y=1").decision == "allow"
