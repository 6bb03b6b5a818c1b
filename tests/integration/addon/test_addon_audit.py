"""Audit lines: exactly one per request (allow, deny, re-sign, l4, connect-refused),
each one parseable JSON with the documented fields, other mitmproxy output never looking
like one, and no secret value anywhere in the proxy's output (stdout and stderr)."""

import json

import pytest

from addon_support import AWS_CREDS, AWS_DUMMY_TOKEN, SENTINEL, Proxy, send, write_atomic

FIELDS = ["uplink", "ts", "decision", "rule", "layer", "method", "scheme", "host", "port",
          "path", "status", "injected", "bytes_in", "bytes_out", "reason"]
TOKEN = f"Bearer {SENTINEL}-audit-token"
RULES = [
    {"name": "api", "layer": "auth", "source": "agent:claude", "hosts": ["api\\.uplink\\.test"],
     "inject": {"headers": {"Authorization": TOKEN, "X-Second": f"{SENTINEL}-second"}}},
    {"name": "aws", "layer": "user", "hosts": [".*\\.amazonaws\\.com"],
     "aws_sign": True},
    {"name": "tcp", "layer": "user", "l4_forward": True, "hosts": ["tcp\\.uplink\\.test"]},
    {"name": "ro", "layer": "generic", "hosts": [".*\\.uplink\\.test"], "methods": ["GET"]},
]


@pytest.fixture(scope="module")
def audited(workdir, pki, echo):
    p = Proxy(workdir, pki, echo, "audit", sets=[f"uplink_extra_ca={pki.upstream_ca}"],
              dead=["dead.uplink.test"])
    p.set_rules(RULES)
    yield p
    p.stop()


def test_one_parseable_line_per_request_and_no_secrets(audited):
    p, ca = audited, audited.pki.mitm_ca
    sigv4 = [("Authorization", f"AWS4-HMAC-SHA256 Credential={AWS_DUMMY_TOKEN}/20200101/"
                               "us-east-1/sts/aws4_request, SignedHeaders=host, Signature=00"),
             ("X-Amz-Security-Token", "dummy")]
    expected = []

    def req(*args, want, **kw):
        res = send(p.port, *args, trust=kw.pop("trust", ca), **kw)
        expected.append(want)
        return res

    assert req("https", "api.uplink.test", 443, "POST", "/v1/messages?x=1", body=b"{}",
               headers=[("Authorization", "Bearer placeholder")],
               want=("allow", "api", ["Authorization", "X-Second"], 200)).status == 200
    assert req("https", "www.uplink.test", 443, "GET", "/", want=("allow", "ro", [], 200)
               ).status == 200
    assert req("https", "www.uplink.test", 443, "DELETE", "/x",
               want=("deny", None, [], 403)).status == 403
    assert req("https", "nowhere.example", 443, "GET", "/",
               want=("connect-refused", None, [], 403)).connect_status == 403
    assert req("http", "www.uplink.test", 80, "PUT", "/", body=b"x",
               want=("deny", None, [], 403)).status == 403
    assert req("https", "sts.amazonaws.com", 443, "POST", "/", body=b"Action=GetCallerIdentity",
               headers=sigv4, want=("resign", "aws", [], 200)).status == 200
    assert req("https", "tcp.uplink.test", 443, "GET", "/", trust=p.pki.upstream_ca,
               want=("l4", "tcp", [], 200)).status == 200
    # an upstream that refuses the connection: still one line, the agent's 502 and why
    assert req("http", "dead.uplink.test", 80, "GET", "/", want=("allow", "ro", [], 502)
               ).status == 502

    # a reload failure must not print the secret of the broken file either
    write_atomic(p.rules_path, json.dumps({"version": 1, "rules": [
        {"name": "bad", "layer": "user", "hosts": ["x"],
         "inject": {"headers": {"Authorization": f"{SENTINEL}-bad\n"}}}]}))
    assert req("https", "api.uplink.test", 443, "GET", "/",  # still the old rules
               want=("allow", "api", ["Authorization", "X-Second"], 200)).status == 200
    p.stop()

    lines = p.mitm.audit()
    assert [(a["decision"], a["rule"], a["injected"], a["status"]) for a in lines] == \
        [tuple(w) for w in expected]
    for a in lines:
        assert list(a) == FIELDS
        assert a["ts"].endswith("Z") and len(a["ts"]) == 24
        assert isinstance(a["port"], int) and isinstance(a["injected"], list)
        assert a["layer"] in (None, "auth", "user", "generic")
    by = {a["decision"]: a for a in lines}
    assert by["l4"]["bytes_in"] is None and by["l4"]["path"] is None
    assert by["resign"]["bytes_out"] == len(b"Action=GetCallerIdentity")
    assert lines[0]["path"] == "/v1/messages?x=1" and lines[0]["bytes_out"] == 2
    assert lines[0]["layer"] == "auth"
    assert lines[7]["reason"] and all(a["reason"] is None for a in lines[:7])

    stdout, stderr = p.mitm.stdout.read_text(), p.mitm.stderr.read_text()
    everything = stdout + stderr
    assert SENTINEL not in everything
    for creds in AWS_CREDS.values():
        for value in creds.values():
            if value.startswith(SENTINEL):
                assert value not in everything
    # nothing else in the output looks like an audit line
    for line in everything.splitlines():
        if '"uplink"' in line and '"audit"' in line:
            assert line.startswith('{"uplink":"audit",') and json.loads(line)


def test_audit_log_unit_format():
    import io

    from addon_support import load_filter
    f = load_filter()
    buf = io.StringIO()
    f.AuditLog(buf).emit(decision="deny", method="GET", host="h", port=1, path="/\n{x}",
                         status=403, injected=[], bytes_in=0, bytes_out=0)
    text = buf.getvalue()
    assert text.count("\n") == 1 and text.startswith('{"uplink":"audit","ts":"')
    rec = json.loads(text)
    assert list(rec) == FIELDS and rec["path"] == "/\n{x}" and rec["rule"] is None
