"""uplink rules suggest: a real mitmdump running the real addon denies an agent's requests; its
audit lines go through a session's mitm container log (fakekube) into the session's audit log
on the host, as in a real session; once the session has ended, `uplink rules suggest` turns
the denials into a rules file. `uplink rules lint` takes it, and `uplink rules check` says it
allows each denied request and nothing beyond README's generalisation: not another host,
method, or a path outside the kept prefix."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from uplinktest import run_detached, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parent / "addon"))
from addon_support import PKI, Echo, Proxy, send  # noqa: E402

SECRET = "uplink-sentinel-suggest"

# What the proxy knows: GitHub read-only, any other host read-only but pastebin.com, which
# no rule names (its CONNECT is refused).
RULES = [
    {"name": "gh-read", "layer": "user", "hosts": ["api\\.github\\.com"], "methods": ["GET"]},
    {"name": "read-only", "layer": "generic", "hosts": ["(?!pastebin\\.com$).*"],
     "methods": ["GET", "HEAD", "OPTIONS"]},
]
RANDOM_HOST = "a8f3k2j9x7q1w5e4.exfil.example"
# The agent's denied requests: (scheme, host, port, method, path).
DENIED = [
    ("https", "api.github.com", 443, "POST", "/repos/o/r/issues/12/comments"),
    ("https", "api.github.com", 443, "POST", f"/repos/o/r/issues/99/comments?access_token={SECRET}"),
    ("https", "api.github.com", 443, "DELETE", "/repos/o/r/git/refs/heads/feature"),
    ("http", "10.9.8.7", 80, "PUT", "/upload"),
    ("https", RANDOM_HOST, 443, "POST", "/c"),
    ("https", "pastebin.com", 443, "GET", "/raw/x"),
]
# What the suggestion must not allow.
BEYOND = [
    ("POST", "https://api.github.com.evil.example/repos/o/r/issues/12/comments"),  # another host
    ("POST", "https://xapi.github.com/repos/o/r/issues/12/comments"),
    ("GET", "https://api.github.com/repos/o/r/issues/12/comments"),  # another method
    ("POST", "https://api.github.com/repos/o/r/pulls"),  # outside the kept prefix
    ("POST", "https://api.github.com/repos/o/r/issues"),  # the prefix alone: no id after it
    ("DELETE", "https://api.github.com/repos/o/r/git/refs/heads/other"),  # an exact path's sibling
    ("POST", "https://pastebin.com/raw/x"),  # a refused CONNECT gets read-only
    ("PUT", "http://10.9.8.6/upload"),
    ("POST", "https://b8f3k2j9x7q1w5e4.exfil.example/c"),
]


@pytest.fixture
def proxy(tmp_path):
    pki = PKI(tmp_path)
    echo = Echo(pki)
    p = Proxy(tmp_path, pki, echo, "suggest")
    p.set_rules(RULES)
    yield p, pki
    p.stop()
    echo.close()


def audit_file(env, sid):
    return env.tmp / "state" / "uplink" / "sessions" / sid / "audit.jsonl"


def file_lines(env, sid):
    p = audit_file(env, sid)
    return p.read_text().splitlines() if p.exists() else []


def raw_audit_lines(mitm):
    return [x for x in mitm.stdout.read_text().splitlines() if x.startswith('{"uplink":"audit"')]


def ended_session_with(env, lines):
    """A session whose mitm container logged `lines`, stopped once they are on the host."""
    sid, _ = run_detached(env)
    ns = f"agent-uplink-{sid}"
    env.fk.pod_log(ns, "mitm", "".join(x + "\n" for x in lines), container="mitm")
    wait_for(lambda: len(file_lines(env, sid)) >= len(lines), timeout=15, what="the audit lines")
    assert env.daemon.client("stop", sid).returncode == 0
    wait_for(lambda: env.session(sid)["state"] == "GONE", timeout=30, what="the session to end")
    return sid


def check(env, rules, method, url):
    return env.daemon.client("rules", "check", "--no-default-rules", "--rules", str(rules), method,
                             url)


def test_suggestion_allows_the_denied_requests_and_nothing_broader(env, proxy):
    p, pki = proxy
    for scheme, host, port, method, path in DENIED:
        r = send(p.port, scheme, host, port, method, path, trust=pki.mitm_ca,
                 headers=[("X-Api-Key", SECRET)])
        assert (r.connect_status if host == "pastebin.com" else r.status) == 403, (host, r)
    wait_for(lambda: len(raw_audit_lines(p.mitm)) >= len(DENIED), what="the proxy's audit lines")
    lines = raw_audit_lines(p.mitm)
    assert [json.loads(x)["decision"] for x in lines] == ["deny"] * 5 + ["connect-refused"]
    sid = ended_session_with(env, lines)

    r = env.daemon.client("rules", "suggest", sid)
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr
    doc = yaml.safe_load(r.stdout)
    assert [x["hosts"] for x in doc["rules"]] == [
        ["api\\.github\\.com"], ["api\\.github\\.com"], ["10\\.9\\.8\\.7"],
        ["a8f3k2j9x7q1w5e4\\.exfil\\.example"], ["pastebin\\.com"]]
    assert doc["rules"][0]["methods"] == ["POST"]
    assert doc["rules"][0]["paths"] == ["/repos/o/r/issues(/[^/]+)+/?(\\?.*)?"]
    assert doc["rules"][1] == {"name": "suggested-api-github-com-2", "hosts": ["api\\.github\\.com"],
                               "methods": ["DELETE"], "paths": ["/repos/o/r/git/refs/heads/feature"]}
    assert doc["rules"][4]["methods"] == ["GET", "HEAD", "OPTIONS"] and "paths" not in doc["rules"][4]
    # ids in examples show as <id>: a token in a path stays out of a file that may be shared
    assert "# api.github.com: 2 denied requests, e.g.\n#   POST /repos/o/r/issues/<id>/comments\n" \
        "#   POST /repos/o/r/issues/<id>/comments?...\n" in r.stdout
    assert "uplink: warning: 10.9.8.7 is an IP address" in r.stderr
    assert f"uplink: warning: {RANDOM_HOST}: the label 'a8f3k2j9x7q1w5e4' looks random" in r.stderr

    rules = env.tmp / "suggested.yaml"
    rules.write_text(r.stdout)
    lint = env.daemon.client("rules", "lint", str(rules))
    assert lint.returncode == 0 and lint.stdout.strip() == f"{rules}: ok, 5 rules", lint.stdout
    for scheme, host, port, method, path in DENIED:
        c = check(env, rules, method, f"{scheme}://{host}{path}")
        assert c.returncode == 0 and c.stdout.startswith("allow"), (method, host, path, c.stdout)
    for method, url in BEYOND:
        c = check(env, rules, method, url)
        assert c.returncode == 1 and c.stdout.startswith("deny"), (method, url, c.stdout)

    j = env.daemon.client("rules", "suggest", sid, "--json")
    assert j.returncode == 0, j.stderr
    res = json.loads(j.stdout)
    assert SECRET not in j.stdout
    assert (res["id"], res["denied"], res["covered"], res["skipped"]) == (sid, 6, 6, [])
    assert res["yaml"] == r.stdout
    assert [(w["kind"], w["host"]) for w in res["warnings"]] == [("ip-literal", "10.9.8.7"),
                                                                   ("random-subdomain", RANDOM_HOST)]
    assert res["rules"][0]["requests"] == 2 and res["rules"][4]["connects"] == 1
    assert res["rules"][0]["examples"] == [
        {"method": "POST", "path": "/repos/o/r/issues/<id>/comments"},
        {"method": "POST", "path": "/repos/o/r/issues/<id>/comments?..."}]


def test_a_session_without_denials_suggests_nothing(env):
    allow = json.dumps({"uplink": "audit", "ts": "2026-11-29T09:02:13.031Z", "decision": "allow",
                        "rule": "r", "layer": "user", "method": "GET", "scheme": "https",
                        "host": "api.github.com", "port": 443, "path": "/user", "status": 200,
                        "injected": [], "bytes_in": 0, "bytes_out": 0})
    sid = ended_session_with(env, [allow])
    r = env.daemon.client("rules", "suggest", sid)
    assert r.returncode == 0
    assert f"session {sid} has no denied requests" in r.stderr
    assert yaml.safe_load(r.stdout) == {"rules": []}


def test_unknown_session_and_usage(env):
    r = env.daemon.client("rules", "suggest", "000000000000")
    assert r.returncode == 1
    assert "no session '000000000000'" in r.stderr and "uplink list --all" in r.stderr
    assert env.daemon.client("rules", "suggest").returncode == 2
